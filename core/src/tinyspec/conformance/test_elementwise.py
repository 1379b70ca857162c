"""Elementwise ops: arithmetic, math functions, activations, comparisons and logic, bitwise ops and shifts, where/clamp,
each against numpy on real values, and a long fused chain."""
import math

import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data

A, B = data(dtypes.float32, (4, 33), seed=1), data(dtypes.float32, (4, 33), seed=2)
POS = data(dtypes.float32, (4, 33), seed=3, lo=0.1, hi=5)
IA, IB = data(dtypes.int32, (4, 33), seed=4, lo=-50, hi=50), data(dtypes.int32, (4, 33), seed=5, lo=1, hi=9)
IB = IB * np.where(data(dtypes.bool, (4, 33), seed=6), 1, -1).astype(np.int32)  # nonzero divisors of both signs

def sigmoid(x): return 1 / (1 + np.exp(-x))

BINARY = {
  "add": (lambda a, b: a + b, lambda a, b: a + b), "sub": (lambda a, b: a - b, lambda a, b: a - b),
  "mul": (lambda a, b: a * b, lambda a, b: a * b), "div": (lambda a, b: a / b, lambda a, b: a / b),
  "maximum": (Tensor.maximum, np.maximum), "minimum": (Tensor.minimum, np.minimum),
  "radd": (lambda a, b: 2.5 + a, lambda a, b: 2.5 + a), "rsub": (lambda a, b: 1 - a, lambda a, b: 1 - a),
  "rdiv": (lambda a, b: 3 / b, lambda a, b: 3 / b), "scalar_mul": (lambda a, b: a * -1.5, lambda a, b: a * np.float32(-1.5)),
}

@pytest.mark.parametrize("op", BINARY)
def test_binary_float32(dev, op):
  f, ref = BINARY[op]
  check(f(Tensor(A, device=dev), Tensor(B, device=dev)), ref(A, B).astype(np.float32), rtol=1e-6)

INT_BINARY = {
  "add": (lambda a, b: a + b, lambda a, b: a + b), "sub": (lambda a, b: a - b, lambda a, b: a - b),
  "mul": (lambda a, b: a * b, lambda a, b: a * b), "floordiv": (lambda a, b: a // b, lambda a, b: a // b),
  "mod": (lambda a, b: a % b, lambda a, b: a % b), "maximum": (Tensor.maximum, np.maximum), "minimum": (Tensor.minimum, np.minimum),
  "trunc_div": (lambda a, b: a.div(b, rounding_mode="trunc"), lambda a, b: (np.abs(a) // np.abs(b)) * np.sign(a) * np.sign(b)),
}

@pytest.mark.parametrize("op", INT_BINARY)
def test_binary_int32(dev, op):
  f, ref = INT_BINARY[op]
  check(f(Tensor(IA, device=dev), Tensor(IB, device=dev)), ref(IA, IB).astype(np.int32))

def test_true_division_of_ints_is_float(dev):
  check(Tensor(IA, device=dev) / Tensor(IB, device=dev), (IA / IB).astype(np.float32), rtol=1e-6)
  check(Tensor(IA, device=dev) / 4, (IA / 4).astype(np.float32), rtol=1e-6)

def test_float_floordiv_and_mod(dev):
  check(Tensor(A, device=dev) // Tensor(POS, device=dev), np.floor_divide(A, POS), rtol=1e-6)
  check(Tensor(A, device=dev) % Tensor(POS, device=dev), np.mod(A, POS), rtol=1e-5, atol=1e-5)

def test_float_mod_is_exact_for_large_quotients(dev):
  """fmod and % are C's exact ones for quotients up to 2**60 (Tensor._float_fmod); the steps that get there lean on the
  device's x / y being within 1.5 ulp and on exact float32 products and sums, so a fast-math device fails here."""
  gen = np.random.default_rng(7)
  y = (gen.uniform(1, 2, 2000) * 2.0 ** gen.uniform(-20, 20, 2000) * gen.choice([-1, 1], 2000)).astype(np.float32)
  x = (y * 2.0 ** gen.uniform(-5, 59, 2000) * gen.choice([-1, 1], 2000)).astype(np.float32)
  check(Tensor(x, device=dev).fmod(Tensor(y, device=dev)), np.fmod(x, y), rtol=0, atol=0)
  check(Tensor(x, device=dev) % Tensor(y, device=dev), np.mod(x, y), rtol=0, atol=0)

def test_pow(dev):
  check(Tensor(POS, device=dev) ** Tensor(B, device=dev), POS ** B, rtol=2e-5)
  check(Tensor(A, device=dev) ** 2, A ** 2, rtol=1e-6)
  check(Tensor(A, device=dev) ** 3, A ** 3, rtol=1e-6)
  check(Tensor(POS, device=dev) ** -1, POS ** -1.0, rtol=1e-6)
  check(Tensor(POS, device=dev) ** 0.5, np.sqrt(POS), rtol=1e-6)
  check(2 ** Tensor(B, device=dev), (2 ** B).astype(np.float32), rtol=1e-5)
  check(Tensor(np.array([-2.0, -2.0, -8.0, 0.0], np.float32), device=dev) ** Tensor(np.array([3.0, 2.0, 1 / 3, 0.0], np.float32), device=dev),
        np.array([-8.0, 4.0, np.nan, 1.0], np.float32), rtol=1e-6)
  check(Tensor(IB, device=dev) ** 3, IB ** 3)

UNARY = {
  "neg": (lambda x: -x, lambda x: -x, A), "abs": (Tensor.abs, np.abs, A), "sign": (Tensor.sign, np.sign, A),
  "square": (Tensor.square, np.square, A), "sqrt": (Tensor.sqrt, np.sqrt, POS), "rsqrt": (Tensor.rsqrt, lambda x: 1 / np.sqrt(x), POS),
  "reciprocal": (Tensor.reciprocal, lambda x: 1 / x, A), "exp": (Tensor.exp, np.exp, A), "exp2": (Tensor.exp2, np.exp2, A),
  "log": (Tensor.log, np.log, POS), "log2": (Tensor.log2, np.log2, POS), "sin": (Tensor.sin, np.sin, A), "cos": (Tensor.cos, np.cos, A),
  "tan": (Tensor.tan, np.tan, A * 0.35), "trunc": (Tensor.trunc, np.trunc, A), "floor": (Tensor.floor, np.floor, A),
  "ceil": (Tensor.ceil, np.ceil, A), "round": (Tensor.round, np.round, np.round(A * 4) / 4),
  "relu": (Tensor.relu, lambda x: np.maximum(x, 0), A), "leaky_relu": (lambda x: x.leaky_relu(0.1), lambda x: np.where(x < 0, 0.1 * x, x), A),
  "sigmoid": (Tensor.sigmoid, sigmoid, A), "tanh": (Tensor.tanh, np.tanh, A), "silu": (Tensor.silu, lambda x: x * sigmoid(x), A),
  "gelu": (lambda x: x.gelu(approximate="none"), lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), A),
  "gelu_tanh": (lambda x: x.gelu(approximate="tanh"), lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), A),
  "softplus": (Tensor.softplus, lambda x: np.log1p(np.exp(x)), A), "elu": (Tensor.elu, lambda x: np.where(x > 0, x, np.expm1(x)), A),
  "hardtanh": (Tensor.hardtanh, lambda x: np.clip(x, -1, 1), A),
}

@pytest.mark.parametrize("op", UNARY)
def test_unary_float32(dev, op):
  f, ref, x = UNARY[op]
  check(f(Tensor(x, device=dev)), ref(x.astype(np.float64)).astype(np.float32), rtol=3e-5, atol=3e-6)

def test_unary_of_ints_gives_float(dev):
  check(Tensor(IB, device=dev).exp(), np.exp(IB.astype(np.float64)).astype(np.float32), rtol=1e-5)
  check(Tensor(IB, device=dev).abs(), np.abs(IB))
  check(-Tensor(IA, device=dev), -IA)
  check(Tensor(IA, device=dev).sign(), np.sign(IA))

def test_round_half_to_even(dev):
  x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -0.49999997, 1e8 + 1], np.float32)
  check(Tensor(x, device=dev).round(), np.round(x))

def test_special_values(dev):
  x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
  with np.errstate(all="ignore"):
    for f, ref in ((Tensor.exp, np.exp), (Tensor.sqrt, np.sqrt), (Tensor.relu, lambda v: np.maximum(v, 0)), (Tensor.abs, np.abs),
                   (Tensor.floor, np.floor), (Tensor.sigmoid, sigmoid), (Tensor.tanh, np.tanh), (Tensor.reciprocal, lambda v: 1 / v)):
      check(f(Tensor(x, device=dev)), ref(x))
  check(Tensor(x, device=dev).isnan(), np.isnan(x))
  check(Tensor(x, device=dev).isinf(), np.isinf(x))
  check(Tensor(x, device=dev).isfinite(), np.isfinite(x))
  check(Tensor(np.array([1.0, -1.0, 0.0], np.float32), device=dev) / 0, np.array([np.inf, -np.inf, np.nan], np.float32))

CMP = {"lt": (lambda a, b: a < b), "gt": (lambda a, b: a > b), "le": (lambda a, b: a <= b), "ge": (lambda a, b: a >= b),
       "eq": (lambda a, b: a == b), "ne": (lambda a, b: a != b)}

@pytest.mark.parametrize("op", CMP)
def test_comparisons(dev, op):
  f = CMP[op]
  x, y = np.round(A), np.round(B)  # rounded so that some pairs are equal
  x[0, :3] = np.nan
  with np.errstate(invalid="ignore"): check(f(Tensor(x, device=dev), Tensor(y, device=dev)), f(x, y))
  check(f(Tensor(IA, device=dev), Tensor(IB, device=dev)), f(IA, IB))
  check(f(Tensor(IA, device=dev), 3), f(IA, 3))
  u = np.array([0, 1, 200, 255], np.uint8)
  check(f(Tensor(u, device=dev), Tensor(u[::-1].copy(), device=dev)), f(u, u[::-1]))

def test_logical(dev):
  p, q = data(dtypes.bool, (50,), seed=1), data(dtypes.bool, (50,), seed=2)
  P, Q = Tensor(p, device=dev), Tensor(q, device=dev)
  check(P.logical_and(Q), p & q)
  check(P.logical_or(Q), p | q)
  check(P.logical_xor(Q), p ^ q)
  check(P.logical_not(), ~p)
  check(Tensor(IA, device=dev).logical_not(), IA == 0)
  check(P & Q, p & q)
  check(P | Q, p | q)
  check(P ^ Q, p ^ q)
  check(~P, ~p)

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64])
def test_bitwise_and_shifts(dev, caps, dt):
  caps.require_dtype(dt)
  x, y = data(dt, (40,), seed=1, lo=-2 ** 20, hi=2 ** 20), data(dt, (40,), seed=2, lo=-2 ** 20, hi=2 ** 20)
  s = data(dt, (40,), seed=3, lo=0, hi=dt.itemsize * 8 - 1)
  X, Y, S = Tensor(x, device=dev), Tensor(y, device=dev), Tensor(s, device=dev)
  check(X & Y, x & y)
  check(X | Y, x | y)
  check(X ^ Y, x ^ y)
  check(~X, ~x)
  check(X << S, x << s)
  check(X >> S, x >> s)  # arithmetic for signed ints, logical for unsigned
  check(X & 6, x & 6)
  check(X >> 1, x >> 1)

def test_where_and_clamp(dev):
  c = A > 0
  check(Tensor(c, device=dev).where(Tensor(A, device=dev), Tensor(B, device=dev)), np.where(c, A, B))
  check(Tensor(c, device=dev).where(Tensor(A, device=dev), 0.5), np.where(c, A, np.float32(0.5)))
  check(Tensor(c, device=dev).where(1, 0), np.where(c, 1, 0).astype(np.int32))
  check(Tensor(IA, device=dev).where(Tensor(IB, device=dev), -1), np.where(IA != 0, IB, -1))
  check(Tensor(A, device=dev).clamp(-1, 0.5), np.clip(A, -1, 0.5))
  check(Tensor(A, device=dev).clamp(min=0), np.maximum(A, 0))
  check(Tensor(IA, device=dev).clamp(-10, 10), np.clip(IA, -10, 10))
  check(Tensor(A, device=dev).lerp(Tensor(B, device=dev), 0.25), A + (B - A) * np.float32(0.25), rtol=1e-6)

def test_long_fused_chain(dev):
  x, y = Tensor(A, device=dev), Tensor(POS, device=dev)
  out = ((x * y + 1).relu().sqrt() - y.log() * 0.5).exp2().maximum(x.sin()) / (y + 1)
  want = np.maximum(np.exp2(np.sqrt(np.maximum(A * POS + 1, 0)) - np.log(POS) * 0.5), np.sin(A)) / (POS + 1)
  check(out, want.astype(np.float32), rtol=3e-5, atol=1e-6)
