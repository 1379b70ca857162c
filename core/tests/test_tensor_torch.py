"""Tensor against PyTorch on the same data, op by op: result dtypes (promotion), values, and the exception types of bad calls.

Where tinyspec differs on purpose the test checks tinyspec's documented behaviour and says so:
  - default dtypes are int32 and float32 (PyTorch: int64 for bool tensor op int scalar, one_hot, where of two int scalars);
  - 0-d tensors promote like any tensor (PyTorch treats them like scalars);
  - division is MUL(x, RECIP(y)), so quotients may differ by an ulp (compared with a tolerance); float floor division
    does not floor that rounded quotient but comes from fmod, as PyTorch's: 1.0 // 0.1 is 9;
  - integer division and remainder by zero give 0 (PyTorch raises);
  - mean of an integer tensor is the float mean, argmax of bool orders False < True (PyTorch raises for both);
  - any/all always give bool (PyTorch: uint8 for uint8 input), sign(nan) is nan (PyTorch: 0), axis=() reduces nothing.
Sizes stay small: the default device is the PYTHON interpreter."""
import itertools
import math
import operator
from functools import partial

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.tensor.inplace import IN_PLACE_TWINS

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = ["bool", "int8", "uint8", "int32", "int64", "float16", "float32"]
INTS = ["int8", "uint8", "int32", "int64"]
rng = np.random.default_rng(0)


def data(dt: str, shape=(3, 4), lo: int = -9, hi: int = 10, nonzero: bool = False, scale: float = 4.0) -> np.ndarray:
  """Random values of numpy dtype `dt`: ints in [lo, hi) (unsigned from 0), floats normal * scale, bools either; no zeros if asked."""
  if dt == "bool": a = rng.integers(0, 2, shape).astype(bool) | nonzero
  elif dt.startswith("float"): a = (rng.standard_normal(shape) * scale).astype(dt)
  else: a = rng.integers(max(lo, 0) if dt.startswith("u") else lo, hi, shape).astype(dt)
  if nonzero and dt != "bool": a[a == 0] = 1
  return a

def randn(*shape) -> np.ndarray: return rng.standard_normal(shape).astype(np.float32)
def tt(a) -> torch.Tensor: return torch.from_numpy(np.array(a))
def tdt(r: torch.Tensor) -> str: return str(r.dtype).removeprefix("torch.")

def tol(*dts: str) -> dict:
  """rtol/atol for a result: a few float16 ulps, or room in float32 for composed math (exp as EXP2, division as a reciprocal)."""
  return dict(rtol=3e-3, atol=1e-3) if "float16" in dts else dict(rtol=2e-5, atol=1e-6)

def check(t: Tensor, r: torch.Tensor, dtype: str | None = None, **kw):
  """tinyspec's `t` matches torch's `r`: the shape, the dtype (torch's, or `dtype` where tinyspec's documented default differs)
  and the values (floats close, nan where torch has nan)."""
  got, want = t.numpy(), r.detach().numpy()
  assert t.dtype.name == (dtype or tdt(r)), f"dtype {t.dtype.name}, torch {tdt(r)}"
  assert got.shape == want.shape, f"shape {got.shape}, torch {want.shape}"
  if want.dtype.kind == "f":
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), equal_nan=True, **(kw or tol(t.dtype.name)))
  else: np.testing.assert_array_equal(got, want.astype(got.dtype))

def raises_like(ts_call, torch_call, match: str | None = None) -> Exception:
  """Both calls raise, and tinyspec's exception is of torch's type or a base of it below Exception (torch's
  NotImplementedError for an unsupported dtype is a RuntimeError)."""
  with pytest.raises(Exception) as want: torch_call()
  with pytest.raises(Exception, match=match) as got: ts_call()
  assert isinstance(want.value, type(got.value)) and type(got.value) is not Exception, f"torch raised {want.value!r}, tinyspec {got.value!r}"
  return got.value

def both_or_raise(ts_call, torch_call, dtype: str | None = None, **kw):
  """Where torch raises tinyspec raises the same type; otherwise the results match."""
  try: r = torch_call()
  except Exception: raises_like(ts_call, torch_call); return
  check(ts_call(), r, dtype, **kw)


# ---- elementwise: every binary op over every dtype pair ----

BINARY = {
  "add": (operator.add, operator.add), "sub": (operator.sub, operator.sub), "mul": (operator.mul, operator.mul),
  "div": (operator.truediv, operator.truediv), "floor_divide": (Tensor.floordiv, torch.floor_divide),
  "remainder": (Tensor.mod, torch.remainder), "pow": (operator.pow, torch.pow),
  "maximum": (Tensor.maximum, torch.maximum), "minimum": (Tensor.minimum, torch.minimum),
  "lt": (operator.lt,) * 2, "le": (operator.le,) * 2, "gt": (operator.gt,) * 2, "ge": (operator.ge,) * 2, "eq": (operator.eq,) * 2,
  "ne": (operator.ne,) * 2, "and": (operator.and_,) * 2, "or": (operator.or_,) * 2, "xor": (operator.xor,) * 2,
  "lshift": (operator.lshift,) * 2, "rshift": (operator.rshift,) * 2,
}

def operands(op: str, da: str, db: str) -> tuple[np.ndarray, np.ndarray]:
  """Data for `a op b` that stays inside what both libraries define: nonzero integer divisors (PyTorch raises on x // 0),
  shift amounts below the narrowest width, small integer bases and exponents (no overflow)."""
  if op in ("lshift", "rshift"): return data(da), data(db, lo=0, hi=7)
  if op == "pow": return data(da, lo=-3, hi=4, scale=2.0), data(db, lo=0, hi=4)
  return data(da), data(db, nonzero=op in ("div", "floor_divide", "remainder"))

@pytest.mark.parametrize("op", BINARY)
def test_binary_dtype_matrix(op):
  """Tensor op Tensor for all 49 dtype pairs: torch's result dtype and values, or torch's exception type (sub with a bool,
  bitwise ops and shifts of floats, floor division and remainder of bools)."""
  f, g = BINARY[op]
  for da, db in itertools.product(DTYPES, DTYPES):
    a, b = operands(op, da, db)
    try: both_or_raise(partial(f, Tensor(a), Tensor(b)), partial(g, tt(a), tt(b)), **(tol(da, db) if "float16" in (da, db) else {}))
    except AssertionError as e: raise AssertionError(f"{da} {op} {db}: {e}") from None

SCALARS = [True, 3, -2, 2.5, -1.5]

# the operators, reflected ones included (torch.maximum takes no scalar: clamp covers that)
SCALAR_OPS = {k: (f, f) for k, (f, _) in BINARY.items() if f.__module__ == "_operator"} | {
  "floor_divide": (operator.floordiv,) * 2, "remainder": (operator.mod,) * 2}

@pytest.mark.parametrize("op", SCALAR_OPS)
def test_binary_with_python_scalars(op):
  """Tensor op scalar and scalar op Tensor: scalars are weak (they lift bool < int < float, never the width), as PyTorch's,
  except that an int scalar with a bool tensor gives tinyspec's default int32 (PyTorch: int64)."""
  f, g = SCALAR_OPS[op]
  for dt, s, rev in itertools.product(DTYPES, SCALARS, (False, True)):
    if op in ("lshift", "rshift") and (s < 0 or rev): continue  # a negative shift amount is undefined; scalar << tensor is below
    if op == "pow" and rev and dt.startswith("u") and s < 0: continue  # -2 becomes 254 and 254 ** x overflows float32's exact ints
    a = data(dt, lo=-3, hi=4, scale=2.0, nonzero=rev and op in ("floor_divide", "remainder")) if op == "pow" or rev else data(dt)
    ff, gg = ((lambda x, y, f=f: f(y, x)), (lambda x, y, g=g: g(y, x))) if rev else (f, g)
    try: r = gg(tt(a), s)
    except Exception: raises_like(partial(ff, Tensor(a), s), partial(gg, tt(a), s)); continue
    want = "int32" if tdt(r) == "int64" and dt == "bool" else None  # the default int
    try: check(ff(Tensor(a), s), r, want, **tol(dt))
    except AssertionError as e: raise AssertionError(f"{'scalar op tensor' if rev else 'tensor op scalar'}: {dt} {op} {s!r}: {e}") from None

def test_scalar_shifted_by_tensor():
  a = data("int32", lo=0, hi=8)
  check(1 << Tensor(a), 1 << tt(a))
  check(-64 >> Tensor(a), -64 >> tt(a))

def test_zero_dim_tensors_promote_by_category_as_pytorch():
  """A 0-d tensor beside one with axes lifts only the category, as a Python scalar: int8 + a 0-d int32 is int8, float16
  times a 0-d float32 float16; a higher category takes the 0-d tensor's own dtype (int8 + a 0-d float64 is float64)."""
  a, h = data("int8"), data("float16")
  for x, y in ((a, np.int32(5)), (a, np.float32(0.5)), (a, np.float64(0.5)), (h, np.float32(0.5)), (h, np.int64(3)),
               (data("uint8"), np.int8(1)), (a > 0, np.int16(3)), (np.int8(2), np.float16(0.5))):
    check(Tensor(x) + Tensor(y), tt(x) + tt(y))
    check(Tensor(y) * Tensor(x), tt(y) * tt(x))

def test_integer_division_by_zero_gives_zero():
  """Documented difference: IDIV and MOD by zero give 0 where PyTorch raises ZeroDivisionError."""
  a, b = np.array([7, -7, 0, 5], np.int32), np.array([0, 0, 0, 2], np.int32)
  with pytest.raises(RuntimeError, match="ZeroDivision"): torch.floor_divide(tt(a), tt(b))
  assert (Tensor(a) // Tensor(b)).tolist() == [0, 0, 0, 2] and (Tensor(a) % Tensor(b)).tolist() == [0, 0, 0, 1]

@pytest.mark.parametrize("dt", ["int8", "int32", "int64", "float16", "float32"])
def test_floor_divide_and_remainder_signs(dt):
  """floor_divide rounds toward -inf and remainder takes the divisor's sign, for every sign combination."""
  a = np.array([7, -7, 7, -7, 6, -6, 0, 1, -1, 9], dt)
  b = np.array([2, 2, -2, -2, 3, -3, 5, -4, 4, 4], dt)
  if dt.startswith("float"): a, b = a + np.array(0.25, dt), b * np.array(1.5, dt)
  check(Tensor(a) // Tensor(b), torch.floor_divide(tt(a), tt(b)))
  check(Tensor(a) % Tensor(b), torch.remainder(tt(a), tt(b)))
  check(Tensor(a).div(Tensor(b), rounding_mode="trunc"), torch.div(tt(a), tt(b), rounding_mode="trunc"))
  check(Tensor(a).div(Tensor(b), rounding_mode="floor"), torch.div(tt(a), tt(b), rounding_mode="floor"))
  check(Tensor(a) // -3, torch.floor_divide(tt(a), -3))
  check(Tensor(a) % -3, torch.remainder(tt(a), -3))

def test_float_floor_divide_works_from_the_exact_remainder():
  """Where the quotient x / y rounds up to an integer, floor division is still the integer below, as PyTorch and Python
  have it (1.0 // 0.1 is 9, with remainder 0.0999...), and x == (x // y) * y + x % y."""
  a, b = np.array([1.0, 0.7, 7.5, -1.0, 1e30, 5.0, 3.0], np.float32), np.array([0.1, 0.1, 2.5, 0.1, 3.0, 0.0, np.inf], np.float32)
  np.testing.assert_array_equal((Tensor(a) // Tensor(b)).numpy(), torch.floor_divide(tt(a), tt(b)).numpy())
  np.testing.assert_array_equal((Tensor(a) % Tensor(b)).numpy()[:3], torch.remainder(tt(a), tt(b)).numpy()[:3])
  assert (Tensor(a) // Tensor(b)).tolist()[:3] == [9, 6, 3]

@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_tensor_and_python_scalar_round_as_pytorch(dt):
  """PyTorch multiplies and divides a 16-bit float tensor by a Python scalar in float32, rounding once (x * 1e5 is not
  inf * x, x / 1e5 not 0); + and - round the scalar first. Bit for bit, values and gradients."""
  a = (rng.standard_normal(200) * 100).astype(np.float32)
  a[:3] = [0.0, 1e-4, 1.0]
  for s in (0.1, 7.77, 3, 1e5, 1e-5, 2 ** 40):
    for op, swap in itertools.product((operator.mul, operator.truediv, operator.floordiv, operator.add, operator.sub), (False, True)):
      if swap and op is not operator.mul and op is not operator.truediv: continue
      x, r = Tensor(a).cast(dt), tt(a).to(getattr(torch, dt))
      got, want = (op(s, x), op(s, r)) if swap else (op(x, s), op(r, s))
      assert got.dtype.name == dt
      np.testing.assert_array_equal(got.float().numpy(), want.detach().float().numpy())
  x, r = Tensor(a).cast(dt).requires_grad_(), tt(a).to(getattr(torch, dt)).requires_grad_()
  (x * 1e-3).sum().backward(), (r * 1e-3).sum().backward()
  np.testing.assert_array_equal(x.grad.float().numpy(), r.grad.float().numpy())

def test_true_division_of_unsigned_by_negative_scalar():
  a = np.array([2, 7, 255, 0], np.uint8)
  check(Tensor(a) / -2, tt(a) / -2)
  check(-2 / Tensor(a + 1), -2 / tt(a + 1))

def test_pow_negative_bases():
  """A negative base to an integral exponent keeps its sign for odd exponents; non-integral exponents give nan."""
  base = np.array([-3.0, -2.0, -1.5, -0.5, 0.0, 0.5, 2.0, -2.0, -2.0, -4.0], np.float32)
  exps = np.array([3.0, 2.0, -1.0, -3.0, 2.0, -2.0, 0.5, 0.5, 0.0, 1.0], np.float32)
  check(Tensor(base) ** Tensor(exps), tt(base) ** tt(exps))
  for e in (2, 3, -1, -2, 0, 2.0, 3.0, -0.5):
    check(Tensor(base) ** e, tt(base) ** e)
  ib, ie = np.array([-3, -2, -1, 0, 1, 2, -5], np.int32), np.array([3, 2, 5, 4, 0, 7, 2], np.int32)
  check(Tensor(ib) ** Tensor(ie), tt(ib) ** tt(ie))
  check(Tensor(ib) ** 3, tt(ib) ** 3)
  check(2 ** Tensor(ie), 2 ** tt(ie))
  check((-2.0) ** Tensor(exps), (-2.0) ** tt(exps))
  raises_like(lambda: Tensor(ib) ** -1, lambda: tt(ib) ** -1, match="negative")

def test_pow_of_a_bool_base():
  """A bool base takes the Python exponent's default dtype (tinyspec's default int is int32), int64 past its range."""
  b = np.array([True, False, True])
  check(Tensor(b) ** 3, tt(b) ** 3, "int32")
  check(Tensor(b) ** 2.0, tt(b) ** 2.0)
  check(Tensor(b) ** 2 ** 31, tt(b) ** 2 ** 31)

@pytest.mark.parametrize("bdt, edt", [("int64", "int64"), ("int32", "int32"), ("uint8", "int8"), ("int8", "uint8"), ("int16", "int16"),
                                      ("uint8", "uint8")])
def test_integer_pow_is_exact_and_wraps_as_pytorch(bdt, edt):
  """Integer ** integer multiplies in the ints (square-and-multiply per element), so it wraps on overflow exactly as
  PyTorch; negative exponents give 1, +-1 or 0."""
  rng = np.random.default_rng(7)
  lo_e = -3 if np.dtype(edt).kind == "i" else 0
  base = rng.integers(np.iinfo(bdt).min if bdt != "int64" else -50, (np.iinfo(bdt).max if bdt != "int64" else 50) + 1, 64).astype(bdt)
  exps = rng.integers(lo_e, min(np.iinfo(edt).max, 70) + 1, 64).astype(edt)
  base[:4], exps[:4] = [1, 0, 3, 2], [0, 3, 39 if bdt == "int64" else 5, 62 if edt == "int64" else 7]
  check(Tensor(base) ** Tensor(exps), tt(base) ** tt(exps))
  check(3 ** Tensor(exps.clip(0)), 3 ** tt(exps.clip(0)))
  check(Tensor(base) ** True, tt(base) ** True)


# ---- unary math and activations ----

UNARY = {  # name: (tinyspec, torch, input domain)
  "exp": (Tensor.exp, torch.exp, "any"), "exp2": (Tensor.exp2, torch.exp2, "any"), "log": (Tensor.log, torch.log, "pos"),
  "log2": (Tensor.log2, torch.log2, "pos"), "sqrt": (Tensor.sqrt, torch.sqrt, "pos"), "rsqrt": (Tensor.rsqrt, torch.rsqrt, "pos"),
  "sin": (Tensor.sin, torch.sin, "any"), "cos": (Tensor.cos, torch.cos, "any"), "tan": (Tensor.tan, torch.tan, "small"),
  "abs": (Tensor.abs, torch.abs, "any"), "neg": (Tensor.neg, torch.neg, "any"), "sign": (Tensor.sign, torch.sign, "finite"),
  "reciprocal": (Tensor.reciprocal, torch.reciprocal, "pos"), "square": (Tensor.square, torch.square, "any"),
  "isnan": (Tensor.isnan, torch.isnan, "any"), "isinf": (Tensor.isinf, torch.isinf, "any"), "isfinite": (Tensor.isfinite, torch.isfinite, "any"),
  "logical_not": (Tensor.logical_not, torch.logical_not, "any"),
}

@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dt", ["float32", "float16", "int32", "int8"])
def test_unary(name, dt):
  """Math of ints happens in float32 (PyTorch's int-to-float rule); float16 is computed in float32 and rounded once."""
  f, g, dom = UNARY[name]
  if dt.startswith("int"): a = data(dt, (3, 5), lo=1 if dom == "pos" else -5, hi=6)
  else: a = (np.abs(randn(3, 5)) * 3 + 0.05 if dom == "pos" else randn(3, 5) * (1 if dom == "small" else 3)).astype(dt)
  if dt == "float32" and dom == "any": a[0, :3] = [np.nan, np.inf, -np.inf]
  if dt == "float32" and dom == "finite": a[0, :2] = [np.inf, -np.inf]  # sign(nan): see test_sign_of_nan
  both_or_raise(lambda: f(Tensor(a)), lambda: g(tt(a)), **(tol(dt) if dt == "float16" else dict(rtol=1e-5, atol=1e-6)))

ACTIVATIONS = [  # (tinyspec, torch)
  (Tensor.relu, F.relu), (Tensor.leaky_relu, F.leaky_relu), (lambda x: x.leaky_relu(0.2), lambda x: F.leaky_relu(x, 0.2)),
  (lambda x: x.gelu(approximate="none"), F.gelu), (lambda x: x.gelu(approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
  (Tensor.sigmoid, torch.sigmoid), (Tensor.tanh, torch.tanh),
  (Tensor.silu, F.silu), (Tensor.softplus, F.softplus), (lambda x: x.softplus(2.0, 3.0), lambda x: F.softplus(x, 2.0, 3.0)),
  (Tensor.elu, F.elu), (lambda x: x.elu(0.5), lambda x: F.elu(x, 0.5)), (Tensor.hardtanh, F.hardtanh),
  (lambda x: x.hardtanh(-0.5, 2.0), lambda x: F.hardtanh(x, -0.5, 2.0)),
]

@pytest.mark.parametrize("i", range(len(ACTIVATIONS)))
@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_activations(i, dt):
  f, g = ACTIVATIONS[i]
  a = (randn(4, 6) * 4).astype(dt)
  a[0, :3] = [30.0, -30.0, 0.0]  # saturated tails and the kink
  check(f(Tensor(a)), g(tt(a)), **tol(dt))

def test_sign_of_nan():
  """sign(nan) is 0, PyTorch's (numpy's is nan)."""
  assert torch.sign(torch.tensor(math.nan)).item() == 0 == Tensor([math.nan]).sign().item()

@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_floor_ceil_trunc_round(dt):
  """round is half to even; the halves are where it differs from floor(x + 0.5)."""
  big = 1e6 + 0.5 if dt == "float32" else 1000.5  # a large half, still representable
  a = np.concatenate([np.arange(-3.5, 4, 0.5), randn(12) * 5, [big, -big - 1, -0.0]]).astype(dt)
  for f, g in ((Tensor.floor, torch.floor), (Tensor.ceil, torch.ceil), (Tensor.trunc, torch.trunc), (Tensor.round, torch.round)):
    check(f(Tensor(a)), g(tt(a)), rtol=0, atol=0)

def test_rounding_ints_is_identity():
  """PyTorch keeps an int tensor's values and dtype for floor/ceil/trunc/round, as tinyspec."""
  a = data("int32")
  for f, g in ((Tensor.floor, torch.floor), (Tensor.ceil, torch.ceil), (Tensor.trunc, torch.trunc), (Tensor.round, torch.round)):
    check(f(Tensor(a)), g(tt(a)))

def test_clip():
  a = randn(3, 5) * 3
  a[0, 0] = np.nan
  lo, hi = randn(3, 1) - 1, randn(5) + 1
  check(Tensor(a).clip(-1.0, 2.0), tt(a).clip(-1.0, 2.0))
  check(Tensor(a).clamp(min=0.5), tt(a).clamp(min=0.5))
  check(Tensor(a).clamp(max=-0.5), tt(a).clamp(max=-0.5))
  check(Tensor(a).clamp(Tensor(lo), Tensor(hi)), tt(a).clamp(tt(lo), tt(hi)))
  check(Tensor(a).clamp(2.0, -1.0), tt(a).clamp(2.0, -1.0))  # min > max: everything is max
  i = data("int8")
  check(Tensor(i).clamp(-2, 3), tt(i).clamp(-2, 3))
  check(Tensor(i).clamp(0.5, 3), tt(i).clamp(0.5, 3))  # a float bound makes it float32

def test_where():
  c, a, b = data("bool"), data("int8"), data("float16")
  check(Tensor(c).where(Tensor(a), Tensor(b)), torch.where(tt(c), tt(a), tt(b)))
  check(Tensor(c).where(Tensor(a), 2.5), torch.where(tt(c), tt(a), 2.5))
  check(Tensor(c).where(Tensor(a), 2), torch.where(tt(c), tt(a), 2))
  check(Tensor(c).where(-1.5, Tensor(b)), torch.where(tt(c), -1.5, tt(b)))
  check(Tensor(c).where(1.0, 2), torch.where(tt(c), 1.0, 2))
  check(Tensor(c).where(1, 2), torch.where(tt(c), 1, 2), "int32")  # two int scalars: the default int
  check(Tensor(c[:, :1]).where(Tensor(a[:1]), Tensor(b[:, 2:3])), torch.where(tt(c[:, :1]), tt(a[:1]), tt(b[:, 2:3])))  # broadcast
  check(Tensor(a).where(Tensor(b), 0.0), torch.where(tt(a) != 0, tt(b), 0.0))  # a nonzero int is true

def test_comparisons_and_minmax_with_nan():
  a, b = randn(3, 4), randn(3, 4)
  a[0, :3], b[0, 1:4] = [np.nan, np.inf, 1.0], [np.nan, np.nan, 1.0]
  for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
    check(op(Tensor(a), Tensor(b)), op(tt(a), tt(b)))
  check(Tensor(a).maximum(Tensor(b)), torch.maximum(tt(a), tt(b)))
  check(Tensor(a).minimum(Tensor(b)), torch.minimum(tt(a), tt(b)))

def test_bitwise_and_shifts_on_ints():
  for dt in INTS:
    a, b, s = data(dt, lo=-100, hi=100), data(dt, lo=-100, hi=100), data(dt, lo=0, hi=7)
    check(~Tensor(a), ~tt(a))
    for op in (operator.and_, operator.or_, operator.xor): check(op(Tensor(a), Tensor(b)), op(tt(a), tt(b)))
    check(Tensor(a) << Tensor(s), tt(a) << tt(s))
    check(Tensor(a) >> Tensor(s), tt(a) >> tt(s))  # arithmetic for signed ints: the sign fills in
    check(Tensor(a) >> 2, tt(a) >> 2)
  m, i = data("bool"), data("int32")
  check(~Tensor(m), ~tt(m))
  check(Tensor(m).logical_xor(Tensor(i)), torch.logical_xor(tt(m), tt(i)))


# ---- bfloat16: computed in float32 and rounded after each op, as PyTorch computes it ----

BF16 = {  # name: (tinyspec, torch) on two bfloat16 tensors; a correctly rounded op in float32, rounded again, is bit for bit torch's
  "add": (operator.add,) * 2, "sub": (operator.sub,) * 2, "mul": (operator.mul,) * 2, "mul_add": (lambda a, b: a * b + a,) * 2,
  "maximum": (Tensor.maximum, torch.maximum), "neg": (lambda a, b: -a,) * 2, "abs": (lambda a, b: a.abs(),) * 2,
  "sqrt": (lambda a, b: a.abs().sqrt(),) * 2, "reciprocal": (lambda a, b: a.reciprocal(),) * 2, "relu": (lambda a, b: a.relu(),) * 2,
  "floor": (lambda a, b: (a * 3).floor(),) * 2, "where": (lambda a, b: (a < b).where(a, b), lambda a, b: torch.where(a < b, a, b)),
  "sum": (lambda a, b: a.sum(1),) * 2, "mean": (lambda a, b: a.mean(0),) * 2, "max": (lambda a, b: a.max(1), lambda a, b: a.amax(1)),
  "cumsum": (lambda a, b: a.cumsum(1),) * 2,
}
# decomposed ops round their parts: division is a * recip(b), exp/log/sin/tanh are float32 approximations; within one bfloat16 ulp
BF16_APPROX = {"div": (operator.truediv,) * 2, "exp": (lambda a, b: a.exp(),) * 2, "log": (lambda a, b: a.abs().log(),) * 2,
               "sin": (lambda a, b: a.sin(),) * 2, "tanh": (lambda a, b: a.tanh(),) * 2, "sigmoid": (lambda a, b: a.sigmoid(),) * 2}

@pytest.mark.parametrize("name", [*BF16, *BF16_APPROX])
def test_bfloat16_ops(name):
  f, g = BF16.get(name) or BF16_APPROX[name]
  a, b = randn(4, 16) * 4, randn(4, 16) * 4
  a[0, :3], b[0, :3] = [np.inf, -np.inf, np.nan], [1.0, np.inf, 2.0]
  got, want = f(Tensor(a).cast(dtypes.bfloat16), Tensor(b).cast(dtypes.bfloat16)), g(tt(a).bfloat16(), tt(b).bfloat16())
  assert got.dtype is dtypes.bfloat16 and want.dtype is torch.bfloat16
  np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=0 if name in BF16 else 2**-7, atol=0)

def test_bfloat16_casts():
  # float32 -> bfloat16 over every exponent (subnormals, nan payloads, infinities): a Buffer of bfloat16 holds torch's bits
  x = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
  nan = np.isnan(x)
  want = tt(x).bfloat16()
  np.testing.assert_array_equal(Tensor(x).cast(dtypes.bfloat16).numpy()[~nan], want.view(torch.int16).numpy().view(np.uint16)[~nan])
  h = (randn(64) * 30).astype(np.float32)
  for dt in ("float16", "int32", "int8", "bool", "float64"):
    check(Tensor(h).cast(dtypes.bfloat16).cast(getattr(dtypes, dt)), tt(h).bfloat16().to(getattr(torch, dt)), rtol=0, atol=0)
  # ints go through float32, as PyTorch's conversion does: 2**25 + 2**17 + 1 lands on a tie, which goes to the even 2**25
  big = np.array([2**25 + 2**17 + 1, 2**24 + 1, -(2**31), 2**31 - 1, 123456789], np.int32)
  np.testing.assert_array_equal(Tensor(big).cast(dtypes.bfloat16).float().numpy(), tt(big).bfloat16().float().numpy())

# ---- reductions ----

AXES = [None, 0, -1, 1, (0, 2), (-1, -3), (2, 0, 1)]

@pytest.mark.filterwarnings("ignore:std\\(\\)|var\\(\\):UserWarning")  # correction >= n: inf/nan, as tinyspec's
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(axis, keepdim):
  a = randn(2, 3, 4) * 2
  p = (rng.uniform(0.5, 1.5, (2, 3, 4))).astype(np.float32)
  dims = dict(dim=(0, 1, 2) if axis is None else axis)
  x, r = Tensor(a), tt(a)
  check(x.sum(axis, keepdim), r.sum(**dims, keepdim=keepdim))
  check(Tensor(p).prod(axis, keepdim), _prod(tt(p), axis, keepdim))
  check(x.mean(axis, keepdim), r.mean(**dims, keepdim=keepdim))
  check(x.logsumexp(axis, keepdim), r.logsumexp(**dims, keepdim=keepdim))
  check(x.max(axis, keepdim), r.amax(**dims, keepdim=keepdim))
  check(x.min(axis, keepdim), r.amin(**dims, keepdim=keepdim))
  for corr in (0, 1, 2):
    check(x.var(axis, keepdim, correction=corr), torch.var(r, **dims, keepdim=keepdim, correction=corr), rtol=1e-5, atol=1e-6)
    check(x.std(axis, keepdim, correction=corr), torch.std(r, **dims, keepdim=keepdim, correction=corr), rtol=1e-5, atol=1e-6)
  b = a > 0.5
  check(Tensor(b).any(axis, keepdim), torch.any(tt(b), **dims, keepdim=keepdim))
  check(Tensor(b).all(axis, keepdim), torch.all(tt(b), **dims, keepdim=keepdim))

def _prod(r, axis, keepdim):
  """torch.prod takes one dim: a product over several is one dim at a time, from the last."""
  axes = range(r.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
  for d in sorted((d % r.ndim for d in axes), reverse=True): r = r.prod(d, keepdim=keepdim)
  return r

def test_empty_axis_tuple_reduces_nothing():
  """Documented difference: axis=() reduces no axis (numpy's rule); PyTorch's sum, mean and amax reduce every axis, its any none."""
  a = randn(2, 3)
  assert torch.sum(tt(a), dim=()).shape == () and torch.any(tt(a), dim=()).shape == (2, 3)
  for f in (Tensor.sum, Tensor.mean, Tensor.max, Tensor.any): assert f(Tensor(a), ()).shape == (2, 3)

@pytest.mark.parametrize("dt", DTYPES)
def test_reduction_dtypes(dt, pytorch_ints):
  """sum/prod/cumsum of bool and ints give int64 (PyTorch's rule); max/min keep the dtype; float16 sums accumulate in float32."""
  a = data(dt, (3, 5), lo=-3, hi=4, scale=1.0)
  x, r = Tensor(a), tt(a)
  check(x.sum(), r.sum(), **tol(dt))
  check(x.sum(1, keepdim=True), r.sum(1, keepdim=True), **tol(dt))
  check(x.prod(0), r.prod(0), **tol(dt))
  check(x.cumsum(1), r.cumsum(1), **tol(dt))
  check(x.max(0), r.amax(0))
  check(x.min(-1), r.amin(-1))
  check(x.argmax(1), (r.int() if dt == "bool" else r).argmax(1))  # PyTorch has no argmax of bool; tinyspec orders False < True
  check(x.argmin(0), (r.int() if dt == "bool" else r).argmin(0))
  check(x.any(1), r.any(1).bool())  # documented: any/all give bool (PyTorch: uint8 for uint8 input)
  check(x.all(0), r.all(0).bool())
  if dt.startswith("float"): check(x.mean(0), r.mean(0), **tol(dt))
  else:  # documented difference: the float mean where PyTorch asks for a float dtype
    with pytest.raises(RuntimeError): r.mean(0)
    check(x.mean(0), r.float().mean(0), "float32")
  check(x.sum(dtype=dtypes.float32), r.sum(dtype=torch.float32))

@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(axis, keepdim, pytorch_ints):
  """Ties pick the first index; axis None indexes the flattened tensor."""
  a = data("int32", (4, 5), lo=-2, hi=3)
  f = data("float32", (4, 5))
  f[1, 2] = np.nan
  for v in (a, f):
    check(Tensor(v).argmax(axis, keepdim), tt(v).argmax(axis, keepdim))
    check(Tensor(v).argmin(axis, keepdim), tt(v).argmin(axis, keepdim))

@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_softmax_and_log_softmax(axis):
  a = randn(2, 3, 5) * 5
  a[0, 0, 0] = 80.0  # would overflow exp without the max shift
  check(Tensor(a).softmax(axis), torch.softmax(tt(a), axis))
  check(Tensor(a).log_softmax(axis), torch.log_softmax(tt(a), axis), rtol=1e-5, atol=1e-5)
  i = data("int32", (2, 3, 5))
  check(Tensor(i).softmax(axis), torch.softmax(tt(i).float(), axis))  # ints: softmax in the default float (torch needs a float input)
  h = a.astype(np.float16)
  check(Tensor(h).softmax(axis, dtype=dtypes.float32), torch.softmax(tt(h), axis, dtype=torch.float32))

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scans(axis):
  """cumsum and cummax (values; test_ops_torch.py checks the indices) along each axis, with a long axis that scans in two stages."""
  a, i = randn(3, 4, 5), data("int8", (3, 4, 5), lo=-50, hi=50)
  for v in (a, i):
    check(Tensor(v).cumsum(axis), tt(v).cumsum(axis))
    check(Tensor(v).cummax(axis).values, torch.cummax(tt(v), axis).values)
  long = randn(2, 600)
  check(Tensor(long).cumsum(-1), tt(long).cumsum(-1), rtol=1e-4, atol=1e-4)
  check(Tensor(long).cummax(-1).values, torch.cummax(tt(long), -1).values)


# ---- movement ----

def test_movement():
  a = randn(2, 3, 4)
  x, r = Tensor(a), tt(a)
  check(x.reshape(-1), r.reshape(-1))
  check(x.reshape(4, -1), r.reshape(4, -1))
  check(x.permute(2, 0, 1), r.permute(2, 0, 1))
  check(x.permute(-1, 0, -2), r.permute(-1, 0, -2))
  check(x[:, :1].expand(5, 2, 3, 4), r[:, :1].expand(5, 2, 3, 4))
  check(x[:, :1].expand(-1, 3, -1), r[:, :1].expand(-1, 3, -1))
  check(x.flip(0), r.flip(0))
  check(x.flip((0, -1)), r.flip((0, -1)))
  check(x.transpose(0, 2), r.transpose(0, 2))
  check(x.transpose(-1, -2), r.transpose(-1, -2))
  check(x.flatten(), r.flatten())
  check(x.flatten(1), r.flatten(1))
  check(x.flatten(0, 1), r.flatten(0, 1))
  check(x.unflatten(2, (2, 2)), r.unflatten(2, (2, 2)))
  check(x.unflatten(-1, (-1, 2)), r.unflatten(-1, (-1, 2)))
  y, ry = Tensor(a.reshape(2, 1, 3, 1, 4)), tt(a.reshape(2, 1, 3, 1, 4))
  check(y.squeeze(), ry.squeeze())
  check(y.squeeze(1), ry.squeeze(1))
  check(y.squeeze(0), ry.squeeze(0))  # not size 1: kept
  check(y.squeeze((1, -2)), ry.squeeze((1, -2)))
  for d in (0, 2, 3, -1, -4): check(x.unsqueeze(d), r.unsqueeze(d))
  check(x.repeat(2, 1, 3), r.repeat(2, 1, 3))
  check(x.repeat(2, 1, 1, 2), r.repeat(2, 1, 1, 2))
  check(x.T, r.permute(2, 1, 0))

@pytest.mark.parametrize("pads, value", [
  ((1, 2), 0.0), ((1, 0, 0, 2), 0.0), ((0, 1, 2, 0, 1, 1), 0.0), ((1, 1), 3.5), ((-1, 2), 0.0), ((-1, -2, 1, 0), -7.0),
  ((2, -3, -1, 1, 0, 0), 1.0), ((0, 0), 0.0), ((1, 1), -0.0), ((-1, -1, -1, -1), 0.0),
])
def test_pad(pads, value):
  """F.pad: (left, right) pairs from the last axis backwards; negative amounts cut."""
  a = randn(2, 3, 4)
  check(Tensor(a).pad(pads, value=value), F.pad(tt(a), pads, value=value))
  i = data("int32", (3, 4))
  if len(pads) <= 4: check(Tensor(i).pad(pads, value=int(value)), F.pad(tt(i), pads, value=int(value)))

def test_split_chunk_cat_stack():
  a = randn(5, 6)
  x, r = Tensor(a), tt(a)
  for args in ((2,), (2, 1), (4, -1), ([1, 4], 0), ([3, 0, 3], 1), (6, 0)):
    got, want = x.split(*args), r.split(*args)
    assert len(got) == len(want)
    for g, w in zip(got, want): check(g, w)
  for n, d in ((2, 0), (3, 1), (4, 1), (5, 0), (7, 0)):
    got, want = x.chunk(n, d), r.chunk(n, d)
    assert len(got) == len(want), (n, d)
    for g, w in zip(got, want): check(g, w)
  b, c = data("int8", (2, 6)), data("float16", (5, 2))
  check(Tensor.cat(x, Tensor(b)), torch.cat([r, tt(b)]))  # dtypes promote
  check(Tensor.cat([x, Tensor(c), x], dim=-1), torch.cat([r, tt(c), r], dim=-1))
  check(Tensor.stack([x, x * 2]), torch.stack([r, r * 2]))
  check(Tensor.stack([x, x * 2, x], dim=-1), torch.stack([r, r * 2, r], dim=-1))
  check(Tensor.stack([x, x], dim=1), torch.stack([r, r], dim=1))
  check(x.cat(x, dim=1), torch.cat([r, r], 1))


# ---- indexing ----

SHAPE = (5, 6, 4, 3)

def random_index(rs: np.random.Generator) -> tuple:
  """A random index expression over SHAPE: ints (negative too), slices with steps, None, one Ellipsis, and integer index
  lists or tensors. Returns (tinyspec's index, torch's index)."""
  ts, th, axis, ell = [], [], 0, False
  for _ in range(rs.integers(1, 6)):
    kind = rs.choice(["int", "slice", "none", "ell", "list", "tensor"], p=[.2, .35, .1, .1, .15, .1])
    if kind == "none": ts.append(None); th.append(None); continue
    if kind == "ell":
      if ell: continue
      ell = True; ts.append(...); th.append(...); continue
    if axis >= len(SHAPE) - (1 if ell else 0): break
    n = SHAPE[axis]
    if kind == "int": v = int(rs.integers(-n, n)); ts.append(v); th.append(v)
    elif kind == "slice":
      start, stop = (int(rs.integers(-n, n + 1)) if rs.random() < 0.7 else None for _ in range(2))
      s = slice(start, stop, int(rs.integers(1, 4)) if rs.random() < 0.5 else None)
      ts.append(s); th.append(s)
    else:
      idx = rs.integers(-n, n, size=tuple(rs.integers(1, 4, size=rs.integers(1, 3))))
      ts.append(idx.tolist() if kind == "list" else Tensor(idx.astype(np.int32))); th.append(torch.from_numpy(idx))
    axis += 1
  return tuple(ts), tuple(th)

def test_indexing_fixed():
  a = randn(*SHAPE)
  x, r = Tensor(a), tt(a)
  idx = np.array([[0, 2], [-1, 1]])
  check(x[1:5:2, None, ..., Tensor(idx.astype(np.int32))], r[1:5:2, None, ..., torch.from_numpy(idx)])
  check(x[1:5:2, None, ..., idx.tolist()], r[1:5:2, None, ..., idx.tolist()])
  check(x[[0, 2], :, [1, 3]], r[[0, 2], :, [1, 3]])  # split advanced indices: their dims go first
  check(x[:, [0, 2], [1, 3]], r[:, [0, 2], [1, 3]])  # adjacent: they stay in place
  check(x[-1, [0, 2], 1:, [1, -1]], r[-1, [0, 2], 1:, [1, -1]])  # an int and advanced indices around a slice
  m = a[:, 0, 0, 0] > 0
  check(x[Tensor(m)], r[torch.from_numpy(m)])
  check(x[..., 1], r[..., 1])
  check(x[None, ..., None], r[None, ..., None])

def test_indexing_random():
  a = data("int32", SHAPE, lo=-100, hi=100)
  x, r = Tensor(a), tt(a)
  rs = np.random.default_rng(1)
  for _ in range(60):
    ts, th = random_index(rs)
    try: want = r[th]
    except Exception: raises_like(lambda ts=ts: x[ts], lambda th=th: r[th]); continue
    try: check(x[ts], want)
    except AssertionError as e: raise AssertionError(f"x[{ts}]: {e}") from None

@pytest.mark.parametrize("realized", [False, True], ids=["lazy", "realized"])
def test_setitem_random(realized):
  """x[idx] = v for random index expressions, v one value per indexed element (repeated places: the last write wins, as
  torch's CPU index_put_), against torch's setitem; realized, the write lands in the buffer."""
  a = data("int32", SHAPE, lo=-100, hi=100)
  rs = np.random.default_rng(2)
  for _ in range(40):
    ts, th = random_index(rs)
    r = tt(a)
    try: shape = r[th].shape
    except Exception: continue
    v = rs.integers(100, 200, size=shape).astype(np.int32)
    r[th] = tt(v)
    x = Tensor(a).realize() if realized else Tensor(a)
    x[ts] = Tensor(v)
    try: check(x, r)
    except AssertionError as e: raise AssertionError(f"x[{ts}] = v: {e}") from None

def test_setitem_gradients():
  """Writes into an unrealized tensor keep both gradients: to the old values left in place and to the written value."""
  a, b = randn(4, 5), randn(5)
  x, v, rx, rv = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True), tt(a).requires_grad_(), tt(b).requires_grad_()
  y, ry = x * 2, rx * 2
  y[1], ry[1] = v * 3, rv * 3
  y[:, ::2], ry[:, ::2] = y[:, ::2] * 5, ry[:, ::2] * 5
  y[[0, 3], [4, 1]], ry[[0, 3], [4, 1]] = v[:2], rv[:2]
  y[y > 1], ry[ry > 1] = 0.5, 0.5
  (y * y).sum().backward(); (ry * ry).sum().backward()
  check(y, ry); check(x.grad, rx.grad); check(v.grad, rv.grad)

def _twin_args(name: str, lib, a: np.ndarray) -> tuple:
  """The arguments test_in_place_twins calls `name` with, as tinyspec's (lib=Tensor) or torch's (lib=tt) tensors."""
  o, m = lib(np.flip(a).copy()), lib(a > 0.5)
  rows, cells = lib(np.array([2, 0])), lib(np.array([[1, 0, 3, 2, 1], [3, 2, 1, 0, 0]]))
  table = {
    "lerp": (o, 0.3), "addcmul": (o, o), "addcdiv": (o, o), "clamp": (0.3, 0.6), "clip": (0.3, 0.6), "clamp_min": (0.4,), "clamp_max": (0.5,),
    "masked_fill": (m, 0.25), "masked_scatter": (m, o), "index_fill": (0, rows, 0.5), "index_add": (0, rows, o[:2]), "index_copy": (0, rows, o[:2]),
    "index_put": ((rows,), o[:2]), "put": (rows, o[0, :2]), "scatter": (0, cells, o[:2]), "scatter_add": (0, cells, o[:2]),
    "scatter_reduce": (0, cells, o[:2], "amax"), "cumsum": (0,), "cumprod": (1,),
  }
  binary = ("add", "sub", "mul", "div", "true_divide", "floor_divide", "fmod", "remainder", "pow", "atan2", "hypot", "xlogy",
            "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor")
  return (o,) if name in binary else table.get(name, ())

@pytest.mark.parametrize("realized", [False, True], ids=["lazy", "realized"])
@pytest.mark.parametrize("name", IN_PLACE_TWINS)
def test_in_place_twins(name, realized):
  """x.name_(...) returns x holding what torch's x.name_(...) leaves; on a realized tensor the write is in its buffer,
  seen through another view of it."""
  a = data("int32", (4, 5), lo=0, hi=9) if name.startswith("bitwise") else (rng.uniform(0.2, 0.8, (4, 5)) + (name == "acosh")).astype(np.float32)
  x = Tensor(a).realize() if realized else Tensor(a) + 0
  view, r = x.reshape(20), tt(a)
  assert getattr(x, f"{name}_")(*_twin_args(name, Tensor, a)) is x
  getattr(r, f"{name}_")(*_twin_args(name, tt, a))
  check(x, r)
  if realized: check(view, r.reshape(20))

def test_in_place_checks():
  """An in-place op may not change the shape or raise the dtype's kind (PyTorch's rule), and a failed one changes nothing."""
  a = randn(3, 4)
  x = Tensor(a).realize()
  raises_like(lambda: x.add_(Tensor(randn(2, 3, 4))), lambda: tt(a).add_(tt(randn(2, 3, 4))), match="cannot change it")
  raises_like(lambda: Tensor([1, 2]).add_(0.5), lambda: tt([1, 2]).add_(0.5), match="float32 cannot be written into this tensor's int32")
  check(x, tt(a))
  check(x.fill_(2.5), torch.full((3, 4), 2.5))
  check(x.fill_(Tensor(-1.0)).zero_(), torch.zeros(3, 4))
  check(x.copy_(Tensor([1.0, 2.0, 3.0, 4.0])), torch.tensor([1.0, 2.0, 3.0, 4.0]).expand(3, 4))
  row = [1.5, 2.0, 3.0, 4.0]  # into an unrealized constant, cast to its dtype
  check(Tensor.zeros(3, 4, dtype="int32").copy_(Tensor(row)), torch.zeros(3, 4, dtype=torch.int32).copy_(torch.tensor(row)))
  u = x.uniform_(2, 3).numpy()
  assert u.min() >= 2 and u.max() < 3 and len(np.unique(u)) > 1
  assert abs(float(Tensor.zeros(4000).normal_(1.0, 2.0).std().item()) - 2.0) < 0.2

def test_in_place_gradients():
  """An in-place op on an intermediate keeps the gradient path, as PyTorch's."""
  a = randn(3, 4)
  w, rw = Tensor(a, requires_grad=True), tt(a).requires_grad_()
  h, rh = w * 2, rw * 2
  h.mul_(3).sub_(1).relu_(); rh.mul_(3).sub_(1).relu_()
  (h * h).sum().backward(); (rh * rh).sum().backward()
  check(w.grad, rw.grad)

def test_index_put_put_masked_scatter():
  a = randn(3, 4)
  rows, cols, vals = [0, 2, 0], [1, 1, 1], np.array([10.0, 20.0, 30.0], np.float32)
  for acc in (False, True):
    check(Tensor(a).index_put((Tensor(rows), Tensor(cols)), Tensor(vals), accumulate=acc),
          tt(a).index_put((tt(rows), tt(cols)), tt(vals), accumulate=acc))
    src = randn(2, 2)
    check(Tensor(a).put(Tensor([[0, -1], [5, 5]]), Tensor(src), accumulate=acc), tt(a).put(tt([[0, -1], [5, 5]]), tt(src), accumulate=acc))
  m = np.array([True, False, True, True])
  src = randn(12)
  x, s, rx, rs = Tensor(a, requires_grad=True), Tensor(src, requires_grad=True), tt(a).requires_grad_(), tt(src).requires_grad_()
  y, ry = x.masked_scatter(Tensor(m), s), rx.masked_scatter(tt(m), rs)
  (y * y).sum().backward(); (ry * ry).sum().backward()
  check(y, ry); check(x.grad, rx.grad); check(s.grad, rs.grad)
  raises_like(lambda: Tensor(a).index_put((Tensor(rows),), Tensor([1, 2, 3])), lambda: tt(a).index_put((tt(rows),), tt([1, 2, 3])), match="dtype")

@pytest.mark.parametrize("case", ["index", "reduce"])
def test_empty_advanced_index_result(case):
  """An advanced index whose result is empty, and the core of its graph: a reduce over an expand to a size-0 axis, permuted."""
  a = data("int32", (2, 3, 2))
  if case == "index": check(Tensor(a)[2:, [1, 2]], tt(a)[2:, [1, 2]])
  else: check(Tensor(a[:, :, :1, None]).expand(2, 3, 0, 2).sum(1).permute(1, 0, 2), tt(a[:, :, :1, None]).expand(2, 3, 0, 2).sum(1).permute(1, 0, 2))

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
  a = randn(4, 5, 3)
  ishape = tuple(3 if i == dim % 3 else s - 1 for i, s in enumerate(a.shape))
  idx = rng.integers(0, a.shape[dim], ishape)
  check(Tensor(a).gather(dim, Tensor(idx.astype(np.int32))), torch.gather(tt(a), dim, tt(idx)))
  check(Tensor(a).gather(dim, Tensor(idx)), torch.gather(tt(a), dim, tt(idx)))

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter(dim):
  """Without reduce the indices along `dim` are distinct (PyTorch leaves repeated writes unspecified); 'add' and
  'multiply' repeat them, against scatter_reduce's 'sum' and 'prod' with the tensor's own values included."""
  a, src = randn(4, 5), randn(4, 5) + 2
  n = a.shape[dim]
  other = a.shape[1 - dim % 2]
  uniq = np.stack([rng.permutation(n)[:3] for _ in range(other - 1)], axis=1 - dim % 2)
  rep = rng.integers(0, n, uniq.shape)
  check(Tensor(a).scatter(dim, Tensor(uniq), Tensor(src)), torch.scatter(tt(a), dim, tt(uniq), tt(src)))
  check(Tensor(a).scatter(dim, Tensor(uniq), 9.5), torch.scatter(tt(a), dim, tt(uniq), 9.5))
  check(Tensor(a).scatter(dim, Tensor(rep), Tensor(src), reduce="add"), torch.scatter_reduce(tt(a), dim, tt(rep), tt(src), "sum"))
  check(Tensor(a).scatter(dim, Tensor(rep), Tensor(src), reduce="multiply"), torch.scatter_reduce(tt(a), dim, tt(rep), tt(src), "prod"))
  check(Tensor(a).scatter(dim, Tensor(rep), 1.5, reduce="multiply"), tt(a).scatter(dim, tt(rep), 1.5, reduce="multiply"))
  check(Tensor(a).scatter(dim, Tensor(rep), 1.5, reduce="add"), tt(a).scatter(dim, tt(rep), 1.5, reduce="add"))
  i = data("int32", (4, 5))
  check(Tensor(i).scatter(dim, Tensor(rep), Tensor(i), reduce="add"), torch.scatter_reduce(tt(i), dim, tt(rep), tt(i), "sum"))

def test_one_hot():
  """Documented difference: int32 (the default int) where PyTorch gives int64."""
  a = rng.integers(0, 5, (3, 4))
  check(Tensor(a).one_hot(6), F.one_hot(tt(a), 6), "int32")
  check(Tensor(a.astype(np.int32)).one_hot(), F.one_hot(tt(a)), "int32")


# ---- nn ----

@pytest.mark.parametrize("sa, sb", [
  ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)),
  ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 1, 4, 2)), ((2, 3, 4), (4,)),
])
def test_matmul(sa, sb):
  a, b = randn(*sa), randn(*sb)
  check(Tensor(a) @ Tensor(b), tt(a) @ tt(b), rtol=1e-5, atol=1e-5)
  ia, ib = data("int32", sa, lo=-5, hi=5), data("int32", sb, lo=-5, hi=5)
  check(Tensor(ia) @ Tensor(ib), tt(ia) @ tt(ib))  # int matmul keeps int32, as PyTorch's

def test_linear():
  x, w, b = randn(2, 3, 4), randn(5, 4), randn(5)
  check(Tensor(x).linear(Tensor(w), Tensor(b)), F.linear(tt(x), tt(w), tt(b)), rtol=1e-5, atol=1e-5)
  check(Tensor(x).linear(Tensor(w)), F.linear(tt(x), tt(w)), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("cin, cout, k, stride, padding, dilation, groups, bias", [
  (3, 4, (3, 3), 1, 0, 1, 1, True), (2, 4, (3, 2), 2, 1, 1, 1, False), (4, 6, (3, 3), (2, 1), (1, 2), 1, 2, True),
  (3, 3, (2, 2), 1, 2, 2, 3, True), (4, 2, (3, 3), 1, "same", 2, 1, False), (2, 4, (1, 3), (1, 3), "valid", 1, 2, True),
])
def test_conv2d(cin, cout, k, stride, padding, dilation, groups, bias):
  x, w, b = randn(2, cin, 7, 8), randn(cout, cin // groups, *k), randn(cout) if bias else None
  kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
  check(Tensor(x).conv2d(Tensor(w), None if b is None else Tensor(b), **kw), F.conv2d(tt(x), tt(w), None if b is None else tt(b), **kw),
        rtol=1e-4, atol=1e-5)
  check(Tensor(x[0]).conv2d(Tensor(w), None, **kw), F.conv2d(tt(x[0]), tt(w), None, **kw), rtol=1e-4, atol=1e-5)  # unbatched

@pytest.mark.parametrize("cin, cout, k, stride, padding, output_padding, dilation, groups", [
  (3, 2, (3, 3), 1, 0, 0, 1, 1), (2, 4, (3, 2), 2, 1, 1, 1, 1), (4, 6, (3, 3), (2, 3), (1, 0), (1, 2), 1, 2),
  (2, 2, (2, 3), 2, 1, 1, 2, 2), (3, 3, (3, 3), 3, 2, 0, (2, 1), 3),
])
def test_conv_transpose2d(cin, cout, k, stride, padding, output_padding, dilation, groups):
  x, w, b = randn(2, cin, 4, 5), randn(cin, cout // groups, *k), randn(cout)
  kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups, dilation=dilation)
  check(Tensor(x).conv_transpose2d(Tensor(w), Tensor(b), **kw), F.conv_transpose2d(tt(x), tt(w), tt(b), **kw), rtol=1e-4, atol=1e-5)

@pytest.mark.parametrize("k, stride, padding, dilation, ceil_mode", [
  (2, None, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 1, True), ((2, 3), (1, 2), (1, 1), 1, True), (2, 3, 0, 2, True), (3, 2, 0, 1, True),
])
def test_max_pool2d(k, stride, padding, dilation, ceil_mode):
  a = randn(2, 3, 7, 8)
  kw = dict(stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)
  check(Tensor(a).max_pool2d(k, **kw), F.max_pool2d(tt(a), k, **kw))
  i = data("int32", (1, 2, 7, 8), lo=-50, hi=50)
  check(Tensor(i).max_pool2d(k, **kw), F.max_pool2d(tt(i).float(), k, **kw).int())  # torch pools floats only: ints keep their dtype here

@pytest.mark.parametrize("k, stride, padding, ceil_mode, count_include_pad, divisor", [
  (2, None, 0, False, True, None), (3, 2, 1, False, True, None), (3, 2, 1, False, False, None), (3, 2, 1, True, True, None),
  (3, 2, 1, True, False, None), ((2, 3), (1, 2), (1, 1), True, False, None), (3, 2, 0, True, True, None), (2, 1, 1, False, True, 3),
])
def test_avg_pool2d(k, stride, padding, ceil_mode, count_include_pad, divisor):
  a = randn(2, 3, 7, 8)
  kw = dict(stride=stride, padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad, divisor_override=divisor)
  check(Tensor(a).avg_pool2d(k, **kw), F.avg_pool2d(tt(a), k, **kw), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("ns", [(5,), (4, 5), 5])
def test_layer_norm(ns):
  a = randn(2, 3, 4, 5) * 3 + 1
  shape = (ns,) if isinstance(ns, int) else ns
  w, b = randn(*shape), randn(*shape)
  check(Tensor(a).layer_norm(ns, Tensor(w), Tensor(b)), F.layer_norm(tt(a), shape, tt(w), tt(b)), rtol=1e-4, atol=1e-5)
  check(Tensor(a).layer_norm(ns, eps=0.1), F.layer_norm(tt(a), shape, eps=0.1), rtol=1e-4, atol=1e-5)

@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5)])
def test_batch_norm(shape):
  a = randn(*shape) * 2 + 1
  mean, var, w, b = randn(3), np.abs(randn(3)) + 0.5, randn(3), randn(3)
  check(Tensor(a).batch_norm(Tensor(mean), Tensor(var), Tensor(w), Tensor(b), eps=1e-3),
        F.batch_norm(tt(a), tt(mean), tt(var), tt(w), tt(b), training=False, eps=1e-3), rtol=1e-5, atol=1e-5)
  check(Tensor(a).batch_norm(Tensor(mean), Tensor(var)), F.batch_norm(tt(a), tt(mean), tt(var)), rtol=1e-5, atol=1e-5)
  check(Tensor(a).batch_norm(None, None, Tensor(w), Tensor(b), training=True),  # batch statistics; tinyspec leaves the running ones
        F.batch_norm(tt(a), None, None, tt(w), tt(b), training=True), rtol=1e-4, atol=1e-5)


# ---- errors ----

BAD_AXIS = [  # (tinyspec, torch) on a (2, 3) tensor
  (lambda x: x.sum(2), lambda r: r.sum(2)), (lambda x: x.sum((0, -3)), lambda r: r.sum((0, -3))), (lambda x: x.max(5), lambda r: r.amax(5)),
  (lambda x: x.mean(-3), lambda r: r.mean(-3)), (lambda x: x.argmax(2), lambda r: r.argmax(2)), (lambda x: x.softmax(2), lambda r: r.softmax(2)),
  (lambda x: x.cumsum(-3), lambda r: r.cumsum(-3)), (lambda x: x.transpose(0, 2), lambda r: r.transpose(0, 2)),
  (lambda x: x.unsqueeze(3), lambda r: r.unsqueeze(3)), (lambda x: x.flip(2), lambda r: r.flip(2)), (lambda x: x.squeeze(2), lambda r: r.squeeze(2)),
  (lambda x: x.permute(0, 2), lambda r: r.permute(0, 2)), (lambda x: x.flatten(0, 2), lambda r: r.flatten(0, 2)),
  (lambda x: x.var(3), lambda r: r.var(3)), (lambda x: x.any(-4), lambda r: r.any(-4)), (lambda x: x.logsumexp(2), lambda r: r.logsumexp(2)),
  (lambda x: x.gather(2, Tensor([[0]])), lambda r: r.gather(2, torch.tensor([[0]]))), (lambda x: x[0, 0, 0], lambda r: r[0, 0, 0]),
  (lambda x: x[2], lambda r: r[2]), (lambda x: x[:, -4], lambda r: r[:, -4]), (lambda x: x.split(1, 2), lambda r: r.split(1, 2)),
]

@pytest.mark.parametrize("i", range(len(BAD_AXIS)))
def test_bad_axis_is_an_index_error(i):
  f, g = BAD_AXIS[i]
  a = randn(2, 3)
  raises_like(lambda: f(Tensor(a)), lambda: g(tt(a)))
  with pytest.raises(IndexError): f(Tensor(a))

@pytest.mark.parametrize("sa, sb", [((2, 3), (4, 3)), ((2, 3), (3, 2)), ((5, 1, 3), (4, 2))])
def test_not_broadcastable(sa, sb):
  a, b = randn(*sa), randn(*sb)
  for op in (operator.add, operator.mul, operator.lt, Tensor.maximum):
    e = raises_like(lambda op=op: op(Tensor(a), Tensor(b)), lambda op=op: (torch.maximum if op is Tensor.maximum else op)(tt(a), tt(b)))
    assert isinstance(e, RuntimeError) and str(sa) in str(e) and str(sb) in str(e), e
  e = raises_like(lambda: Tensor(a > 0).where(Tensor(b), 0.0), lambda: torch.where(tt(a > 0), tt(b), 0.0))
  assert str(sa) in str(e) and str(sb) in str(e), e

@pytest.mark.parametrize("sa, sb", [((2, 3), (4, 3)), ((3,), (4,)), ((2, 3), (4,)), ((5,), (5, 2, 3)), ((2, 3, 4), (3, 4, 2)), ((), (3,))])
def test_bad_matmul(sa, sb):
  a, b = randn(*sa), randn(*sb)
  e = raises_like(lambda: Tensor(a) @ Tensor(b), lambda: tt(a) @ tt(b))
  assert isinstance(e, RuntimeError)
  if sa and sb: assert str(sa) in str(e) and str(sb) in str(e), e

@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_bitwise_of_floats(dt):
  """Shifts and &|^ of floats: PyTorch raises NotImplementedError (a RuntimeError), tinyspec a RuntimeError naming the dtype;
  ~ of a float is a TypeError in both."""
  a, i = data(dt), data("int32")
  for op in (operator.lshift, operator.rshift, operator.and_, operator.or_, operator.xor):
    e = raises_like(lambda op=op: op(Tensor(a), Tensor(i)), lambda op=op: op(tt(a), tt(i)))
    assert dt in str(e), e
    raises_like(lambda op=op: op(Tensor(i), 1.5), lambda op=op: op(tt(i), 1.5), match="float32")
  e = raises_like(lambda: ~Tensor(a), lambda: ~tt(a))
  assert isinstance(e, TypeError) and dt in str(e), e
