"""Every ALU op on every dtype the CPU device claims, on edge values (signed zeros, nan, inf, the ints' extremes, zero
divisors, out-of-range shifts), against the PYTHON device (which defines tinyspec's semantics) and numpy; every cast
and bitcast between dtypes; bfloat16, which the PYTHON device lacks, against numpy rounding float32 results."""
import numpy as np
import pytest
from tinyspec import Device, Tensor, dtypes
from tinyspec.dtype import INTS, DType

NUMERIC = (*INTS, dtypes.float16, dtypes.float32, dtypes.float64)
ALL = (dtypes.bool, *NUMERIC)

def values(dt: DType) -> np.ndarray:
  if dt is dtypes.bool: return np.array([True, False, True, True, False, False, True, False])
  if dtypes.is_float(dt):
    with np.errstate(over="ignore"):
      return np.array([0.0, -0.0, 1.5, -2.5, 3.25, 1e3, -7.75, np.nan, np.inf, -np.inf, 0.5, 2.0, 1e-3, 6e4], dt.np)
  info = np.iinfo(dt.np)
  return np.array([v for v in (0, 1, -1, 2, -2, 3, -7, 7, 100, -100, info.min, info.max, 5, -5, 6, 63, 64, 200) if info.min <= v <= info.max], dt.np)

BINARY = {
  "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "maximum": lambda a, b: a.maximum(b), "minimum": lambda a, b: a.minimum(b),
  "lt": lambda a, b: a < b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b, "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b,
  "ne": lambda a, b: a != b, "where": lambda a, b: (a < b).where(a, b),
}
NOT_BOOL = {"sub": lambda a, b: a - b}
INT = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
       "xor": lambda a, b: a ^ b, "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b, "neg": lambda a, b: -a}
FLOAT = {"div": lambda a, b: a / b, "reciprocal": lambda a, b: a.reciprocal(), "trunc": lambda a, b: a.trunc(), "floor": lambda a, b: a.floor(),
         "exp2": lambda a, b: a.exp2(), "log2": lambda a, b: a.log2(), "sin": lambda a, b: a.sin(), "neg": lambda a, b: -a,
         "pow": lambda a, b: a ** b}
BOOL = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "not": lambda a, b: a.logical_not()}

def on(device: str, fn, *arrays: np.ndarray, dtype: DType) -> np.ndarray:
  return fn(*(Tensor(a, dtype=dtype, device=device) for a in arrays)).numpy()

def same(cpu: np.ndarray, ref: np.ndarray, what: str) -> None:
  assert cpu.dtype == ref.dtype, what
  if cpu.dtype.kind == "f":
    np.testing.assert_array_equal(np.isnan(cpu), np.isnan(ref), err_msg=what)
    np.testing.assert_allclose(cpu.astype(np.float64), ref.astype(np.float64), rtol=1e-6, atol=0, equal_nan=True, err_msg=what)
  else: np.testing.assert_array_equal(cpu, ref, err_msg=what)

@pytest.mark.parametrize("dt", ALL, ids=lambda d: d.name)
def test_ops_match_reference(dt):
  ops = {**BINARY, **BOOL} if dt is dtypes.bool else {**BINARY, **NOT_BOOL, **(FLOAT if dtypes.is_float(dt) else INT)}
  a = values(dt)
  b = np.roll(a, 3)
  if dt in INTS: b = np.where(np.arange(len(a)) % 4 == 0, 0, b)  # zero divisors and zero shifts
  for name, fn in ops.items():
    same(on("CPU", fn, a, b, dtype=dt), on("PYTHON", fn, a, b, dtype=dt), f"{name} on {dt.name}")

@pytest.mark.parametrize("dt", (dtypes.float16, dtypes.float32, dtypes.float64), ids=lambda d: d.name)
def test_float_ops_match_numpy(dt):
  a = values(dt)
  with np.errstate(all="ignore"):
    for name, fn, ref in [("sqrt", Tensor.sqrt, np.sqrt), ("add", lambda t: t + t, lambda x: x + x), ("maximum nan", lambda t: t.maximum(t.flip(0)),
                          lambda x: np.maximum(x, x[::-1])), ("trunc", Tensor.trunc, np.trunc), ("lt", lambda t: t < 1.5, lambda x: x < 1.5)]:
      np.testing.assert_array_equal(fn(Tensor(a, device="CPU")).numpy(), ref(a), err_msg=name)  # bit exact, nan where numpy has nan

@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_int_division_floors_and_by_zero_is_zero(dt):
  a, b = values(dt), np.roll(values(dt), 5)
  b = np.where(b == 0, 3, b).astype(dt.np)
  if not dtypes.is_unsigned(dt): keep = ~((a == np.iinfo(dt.np).min) & (b == -1)); a, b = a[keep], b[keep]  # numpy's MIN // -1 overflows
  np.testing.assert_array_equal((Tensor(a, device="CPU") // Tensor(b, device="CPU")).numpy(), a // b)
  np.testing.assert_array_equal((Tensor(a, device="CPU") % Tensor(b, device="CPU")).numpy(), a % b)
  z = Tensor(np.zeros_like(a), device="CPU")
  assert not (Tensor(a, device="CPU") // z).numpy().any() and not (Tensor(a, device="CPU") % z).numpy().any()

@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_casts(src):
  x = values(src)
  for dst in ALL:
    cpu, ref = Tensor(x, device="CPU").cast(dst).numpy(), Tensor(x, device="PYTHON").cast(dst).numpy()
    if dtypes.is_float(src) and dst in INTS:  # floats out of an int's range convert to undefined values on hardware
      ok = np.isfinite(x) & (np.abs(x.astype(np.float64)) < 2 ** 31)
      cpu, ref = cpu[ok], ref[ok]
    np.testing.assert_array_equal(cpu, ref, err_msg=f"{src.name} -> {dst.name}")

@pytest.mark.parametrize("src", [d for d in INTS if not dtypes.is_unsigned(d)], ids=lambda d: d.name)
def test_sign_extended_unsigned_to_float(src):
  """Negative ints cast to a wider unsigned int, then to float: LLVM's SLP vectorizer narrowed such a uitofp to the bits
  below the copies of the sign (fuzz case int32-30864: a 7-element mean was half numpy's), so the renderer avoids uitofp."""
  x = values(src)
  for mid in (d for d in INTS if dtypes.is_unsigned(d) and d.itemsize >= src.itemsize):
    for dst in (dtypes.float16, dtypes.float32, dtypes.float64):
      with np.errstate(over="ignore"): want = x.astype(mid.np).astype(dst.np)
      got = Tensor(x, device="CPU").cast(mid).cast(dst).numpy()
      np.testing.assert_array_equal(got, want, err_msg=f"{src.name} -> {mid.name} -> {dst.name}")
      if dst is dtypes.float64:
        np.testing.assert_allclose(Tensor(x[:7], device="CPU").cast(mid).mean().numpy(), x[:7].astype(mid.np).astype(np.float64).mean(), rtol=1e-6)

def test_double_to_half_rounds_once():
  # just off the midpoint between two halves: rounding to float32 first would land on the midpoint, then round wrongly
  x = np.array([1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -11 - 2 ** -40, 1 + 3 * 2 ** -11, -1 - 2 ** -11 - 2 ** -40, 65519.99, 65520.0, 1e-8, np.nan])
  with np.errstate(over="ignore"): want = x.astype(np.float16)
  np.testing.assert_array_equal(Tensor(x, device="CPU").cast(dtypes.float16).numpy().view(np.uint16), want.view(np.uint16))

@pytest.mark.parametrize("src", NUMERIC, ids=lambda d: d.name)
def test_bitcasts(src):
  x = values(src)
  for dst in NUMERIC:
    if dst.itemsize == src.itemsize:
      np.testing.assert_array_equal(Tensor(x, device="CPU").bitcast(dst).numpy().view(np.uint8), x.view(np.uint8), err_msg=dst.name)

def bf16(x: np.ndarray) -> np.ndarray:
  """float32 values rounded to bfloat16 (to nearest even), as their 16 bits."""
  bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
  return np.where(np.isnan(x), 0x7FC0, (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)

def from_bf16(bits: np.ndarray) -> np.ndarray: return (bits.astype(np.uint32) << 16).view(np.float32)

def test_bfloat16():
  assert dtypes.bfloat16 in Device["CPU"].renderer.supported_dtypes
  x = np.array([1.0, 2.5, -3.1415926, 1e-3, 65504.0, 3e38, -np.inf, 0.1, 7.0], np.float32)
  y = np.array([0.3, -1.7, 2.0, 7.0, 1.0, 3e38, 1.0, 0.2, -7.0], np.float32)
  a, b = Tensor(x, device="CPU").cast(dtypes.bfloat16), Tensor(y, device="CPU").cast(dtypes.bfloat16)
  xr, yr = from_bf16(bf16(x)), from_bf16(bf16(y))
  np.testing.assert_array_equal(a.numpy(), bf16(x))
  with np.errstate(over="ignore"):
    for name, t, ref in [("add", a + b, xr + yr), ("mul", a * b, xr * yr), ("max", a.maximum(b), np.maximum(xr, yr)),
                         ("sqrt", a.abs().sqrt(), np.sqrt(np.abs(xr)))]:
      np.testing.assert_array_equal(t.numpy(), bf16(ref), err_msg=name)
  np.testing.assert_array_equal((a < b).numpy(), xr < yr)
  np.testing.assert_array_equal(a.cast(dtypes.float32).numpy(), xr)
  np.testing.assert_array_equal(a.bitcast(dtypes.int16).numpy(), bf16(x).view(np.int16))
  np.testing.assert_allclose(a[:5].sum().cast(dtypes.float32).numpy(), xr[:5].sum(), rtol=1e-2)
