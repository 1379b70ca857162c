"""Every elementwise op of seed 001 on numpy arrays, with tinyspec's semantics: the PYTHON device's arithmetic.

Integers wrap around, IDIV and MOD floor, x//0 and x%0 are 0 and a shift by a negative amount is 0 (as `exec_alu` folds
them). The decomposed ops run natively here too, so the PYTHON device can also play a renderer that has them.

bfloat16, which numpy lacks, is computed as the hardware without bfloat16 units does it: in float32, every result rounded
to bfloat16 (to nearest even; float32's 24 bits are more than twice bfloat16's 8, so rounding twice is as exact as once).
Its values are held in float32 arrays; bitcasts go through its raw 16 bits."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tinyspec.dtype import DType, bf16_from_bits, bf16_round, bf16_to_bits, dtypes, float_to_int
from tinyspec.uop.ops import Ops


def np_dtype(dt: DType) -> np.dtype:
  """The numpy dtype values of `dt` are held in: index is int64, bfloat16 float32."""
  dt = dt.scalar()
  if dt is dtypes.bfloat16: return np.dtype(np.float32)
  if (npdt := dt.np) is None: raise TypeError(f"{dt} holds no values")
  return npdt

def held(x, dtype: DType) -> np.ndarray:
  """A result as `dtype`'s values are held: in its numpy dtype, and a bfloat16 rounded to bfloat16, as each of its ops rounds."""
  if dtype.scalar() is dtypes.bfloat16: return np.asarray(bf16_round(x))
  return np.asarray(x).astype(np_dtype(dtype), copy=False)

def _shift(f: Callable, bits: int):
  def run(a, b):
    b = np.asarray(b)
    out = f(a, np.where((b >= 0) & (b < bits), b, 0).astype(a.dtype))
    return np.where((b >= 0) & (b < bits), out, np.zeros_like(out))  # a negative shift, or one past the width, gives 0
  return run

def _div(f: Callable):
  def run(a, b): return np.where(b == 0, np.zeros_like(a), f(a, np.where(b == 0, np.ones_like(b), b)))  # x//0 = x%0 = 0
  return run

_ROT = (13, 15, 26, 6, 17, 29, 16, 24)

def threefry2x32(x: np.ndarray, key: np.ndarray) -> np.ndarray:
  """Threefry-2x32 with 20 rounds (5 blocks of 4 add-rotate-xor rounds, a key injection after each block), on uint64 words:
  the low 32 bits are the first lane, the high 32 bits the second. The Random123 definition; its test vectors are in the tests."""
  x, key = np.asarray(x, np.uint64), np.asarray(key, np.uint64)
  m = np.uint64(0xFFFFFFFF)
  ks = [key & m, key >> np.uint64(32)]
  ks.append(ks[0] ^ ks[1] ^ np.uint64(0x1BD11BDA))
  x0, x1 = ((x & m) + ks[0]) & m, ((x >> np.uint64(32)) + ks[1]) & m
  for block in range(5):
    for r in _ROT[4 * (block % 2):4 * (block % 2) + 4]:
      x0 = (x0 + x1) & m
      x1 = ((x1 << np.uint64(r)) | (x1 >> np.uint64(32 - r))) & m
      x1 ^= x0
    s = block + 1
    x0, x1 = (x0 + ks[s % 3]) & m, (x1 + ks[(s + 1) % 3] + np.uint64(s)) & m
  return (x1 << np.uint64(32)) | x0

def _round(f: Callable):
  def run(*a):
    with np.errstate(all="ignore"): return f(*a)
  return run

ALU: dict[Ops, Callable] = {
  Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum, Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal,
  Ops.XOR: np.bitwise_xor, Ops.OR: np.bitwise_or, Ops.AND: np.bitwise_and, Ops.WHERE: np.where,
  Ops.IDIV: _div(np.floor_divide), Ops.MOD: _div(np.mod), Ops.RECIP: np.reciprocal, Ops.TRUNC: np.trunc,
  # decomposed ops, natively
  Ops.NEG: np.negative, Ops.SUB: np.subtract, Ops.DIV: np.divide, Ops.CMPGT: np.greater, Ops.CMPGE: np.greater_equal,
  Ops.CMPLE: np.less_equal, Ops.CMPEQ: np.equal, Ops.NOT: np.logical_not, Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin,
  Ops.SQRT: np.sqrt, Ops.POW: np.power, Ops.MULACC: lambda a, b, c: a * b + c, Ops.THREEFRY: threefry2x32,
}

def run_alu(op: Ops, dtype: DType, *srcs: np.ndarray) -> np.ndarray:
  """One elementwise op on arrays already in their sources' numpy dtypes; the result is in `dtype`'s."""
  if op is Ops.CAST: return cast(srcs[0], dtype)
  if op in (Ops.SHL, Ops.SHR):
    a = srcs[0]
    f = _shift(np.left_shift if op is Ops.SHL else np.right_shift, a.dtype.itemsize * 8)
    return f(a, srcs[1]).astype(np_dtype(dtype), copy=False)
  if op is Ops.NOT and srcs[0].dtype != np.bool_: return np.asarray(srcs[0] != 1)
  with np.errstate(all="ignore"): return held(ALU[op](*srcs), dtype)

def cast(x: np.ndarray, dtype: DType) -> np.ndarray:
  """CAST: to bool is x != 0; float to int as `float_to_int` (one rule on every device).
  To bfloat16 rounds once from a float64, as hardware converts a double, and from anything else through float32 (exact
  from float16, rounding ints as LLVM's and PyTorch's conversions do); from bfloat16 is from the float32 holding it."""
  to = np_dtype(dtype)
  if to == np.bool_: return np.asarray(x != 0)
  with np.errstate(all="ignore"):
    if dtype.scalar() is dtypes.bfloat16: return held(x if x.dtype == np.float64 else x.astype(np.float32), dtype)
    if np.issubdtype(x.dtype, np.floating) and np.issubdtype(to, np.integer): return float_to_int(x, to)
    return np.asarray(x).astype(to)

def bitcast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
  """BITCAST: x's bits (those of `src`) read as `dst`; a bfloat16's are its raw 16 bits."""
  bits = bf16_to_bits(x) if src.scalar() is dtypes.bfloat16 else np.ascontiguousarray(x)
  return bf16_from_bits(bits) if dst.scalar() is dtypes.bfloat16 else bits.view(np_dtype(dst))
