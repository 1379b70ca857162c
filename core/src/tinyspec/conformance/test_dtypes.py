"""Every dtype the device claims: storing and reading back, arithmetic in the dtype itself (integers wrap around), the
casts between every pair, and bitcasts. A dtype the device does not claim is skipped by name."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance import TENSOR_DTYPES
from tinyspec.conformance.support import TOL, check, data, np_dtype, read, tensor
from tinyspec.dtype import bf16_round, float_to_int

IDS = [d.name for d in TENSOR_DTYPES]

@pytest.mark.parametrize("dt", TENSOR_DTYPES, ids=IDS)
def test_store_and_read_back(dev, caps, dt):
  caps.require_dtype(dt)
  x = data(dt, (3, 17), lo=-100, hi=100)
  t = tensor(x, dt, dev)
  assert t.dtype == dt and t.device == dev
  check(t.contiguous(), x, dtype=dt, rtol=0, atol=0)
  check(t.contiguous().reshape(17, 3).permute(1, 0), x.reshape(17, 3).T, dtype=dt, rtol=0, atol=0)

@pytest.mark.parametrize("dt", TENSOR_DTYPES, ids=IDS)
def test_extremes_round_trip(dev, caps, dt):
  caps.require_dtype(dt)
  if dt == dtypes.bool: x = np.array([False, True])
  elif dtypes.is_int(dt): x = np.array([dt.min, dt.min + 1, -1 if dt.min else 1, 0, dt.max - 1, dt.max], dt.np)
  else:
    fi = np.finfo(np.float32 if dt == dtypes.bfloat16 else dt.np)
    x = np.array([-np.inf, -fi.max, -1.0, -fi.tiny, 0.0, fi.tiny, fi.eps, 1.0, fi.max, np.inf, np.nan], np_dtype(dt))
    if dt == dtypes.bfloat16: x = bf16_round(x)
  check(tensor(x, dt, dev).contiguous(), x, dtype=dt, rtol=0, atol=0)

@pytest.mark.parametrize("dt", TENSOR_DTYPES, ids=IDS)
def test_arithmetic_in_dtype(dev, caps, dt):
  caps.require_dtype(dt)
  x, y = data(dt, (50,), seed=1, lo=-10, hi=10), data(dt, (50,), seed=2, lo=-10, hi=10)
  X, Y = tensor(x, dt, dev), tensor(y, dt, dev)
  rtol, atol = TOL.get(dt, (0, 0))
  def fit(v): return bf16_round(v.astype(np.float32)) if dt == dtypes.bfloat16 else v.astype(dt.np)
  # one bfloat16 op is exact: float32's result (of more than twice the bits) rounded once more is the correctly rounded one
  one = (0, 0) if dt == dtypes.bfloat16 else (rtol, atol)
  if dt == dtypes.bool:
    check(X + Y, x | y)
    check(X * Y, x & y)
  else:
    check(X + Y, fit(x + y), dtype=dt, rtol=one[0], atol=one[1])
    check(X * Y, fit(x * y), dtype=dt, rtol=one[0], atol=one[1])
    check(X - Y, fit(x - y), dtype=dt, rtol=one[0], atol=one[1])
  check(X.maximum(Y), np.maximum(x, y), dtype=dt)
  check(X.minimum(Y), np.minimum(x, y), dtype=dt)
  check(X < Y, x < y)
  check(X == Y, x == y)
  check(X.where(X, Y), np.where(x != 0, x, y), dtype=dt)
  check(X.max(), np.array(x.max()), dtype=dt)
  check(X.min(), np.array(x.min()), dtype=dt)
  if dtypes.is_float(dt): check((X * Y + X) / (Y.abs() + 1), fit((x * y + x) / (np.abs(y) + 1)), dtype=dt, rtol=3 * rtol, atol=3 * atol)

@pytest.mark.parametrize("dt", [d for d in TENSOR_DTYPES if dtypes.is_int(d)], ids=[d.name for d in TENSOR_DTYPES if dtypes.is_int(d)])
def test_integers_wrap_around(dev, caps, dt):
  caps.require_dtype(dt)
  x = np.array([dt.max, dt.min, dt.max - 3, 7], dt.np)
  X = Tensor(x, device=dev)
  with np.errstate(over="ignore"):
    check(X + 1, x + dt.np.type(1))
    check(X * 3, x * dt.np.type(3))
    check(X - 5, x - dt.np.type(5))
    check(-X, -x)
  check(X // 2, x // dt.np.type(2))
  check(X % 3, x % dt.np.type(3))

@pytest.mark.parametrize("dt", TENSOR_DTYPES, ids=IDS)
def test_sum_dtype(dev, caps, dt):
  caps.require_dtype(dt)
  x = data(dt, (6, 20), lo=-3, hi=3)
  want = dtypes.int64 if dt == dtypes.bool or (dtypes.is_int(dt) and dt != dtypes.uint64) else dt
  caps.require_dtype(want)
  got = tensor(x, dt, dev).sum(axis=1)
  assert got.dtype == want
  ref = x.astype(np.float64 if dtypes.is_float(dt) else np_dtype(want)).sum(axis=1)
  check(read(got), ref.astype(np_dtype(want)), rtol=TOL.get(want, (0, 0))[0] * 10, atol=TOL.get(want, (0, 0))[1] * 20)

def cast_values(src, dst) -> np.ndarray:
  """Values of `src` that `dst` holds without overflow, so the cast's result is defined (floats to ints truncate, anything
  to bool is != 0)."""
  if src == dtypes.bool: return np.array([True, False, True, True, False])
  x = data(src, (64,), seed=7, lo=0 if dtypes.is_unsigned(src) or dtypes.is_unsigned(dst) else -100, hi=100.99 if dtypes.is_float(src) else 100)
  x[:3] = [0, 1, 100]
  if dtypes.is_float(src): x[3:5] = [0.25, 99.75]
  return bf16_round(x) if src == dtypes.bfloat16 else x

@pytest.mark.parametrize("dst", TENSOR_DTYPES, ids=IDS)
@pytest.mark.parametrize("src", TENSOR_DTYPES, ids=IDS)
def test_cast(dev, caps, src, dst):
  caps.require_dtype(src, dst)
  x = cast_values(src, dst)
  want = bf16_round(x.astype(np.float32)) if dst == dtypes.bfloat16 else x.astype(dst.np)
  if dtypes.is_float(src) and dtypes.is_int(dst): want = np.trunc(x).astype(dst.np)
  check(tensor(x, src, dev).cast(dst), want, dtype=dst, rtol=0, atol=0)

BITCASTS = [(dtypes.float32, dtypes.int32), (dtypes.int32, dtypes.float32), (dtypes.float32, dtypes.uint32), (dtypes.float16, dtypes.int16),
            (dtypes.uint16, dtypes.float16), (dtypes.float64, dtypes.int64), (dtypes.int64, dtypes.float64), (dtypes.int8, dtypes.uint8),
            (dtypes.uint64, dtypes.int64)]

@pytest.mark.parametrize("src,dst", BITCASTS, ids=[f"{s.name}-{d.name}" for s, d in BITCASTS])
def test_bitcast(dev, caps, src, dst):
  caps.require_dtype(src, dst)
  x = data(src, (33,), lo=-1000, hi=1000)
  check(Tensor(x, device=dev).bitcast(dst), x.view(dst.np), dtype=dst, rtol=0, atol=0)
  check((Tensor(x, device=dev) + 0).bitcast(dst), x.view(dst.np), dtype=dst, rtol=0, atol=0)  # of a computed value too

# bfloat16 by value: float32 -> bfloat16 rounds to nearest, ties to even, past the largest bfloat16 to infinity (a tie and
# its neighbours, as a cast and as an op's result); ints convert through float32, a float64 is rounded once
BF16_TIES = [(1 + 2**-8, 1.0), (1 + 3 * 2**-8, 1 + 2**-6), (1 + 2**-8 + 2**-23, 1 + 2**-7), (-1 - 2**-8, -1.0), (257.0, 256.0),
             (259.0, 260.0), ((2 - 2**-7) * 2.0**127, (2 - 2**-7) * 2.0**127), ((2 - 2**-8) * 2.0**127, np.inf), (-np.inf, -np.inf), (np.nan, np.nan)]

def test_bfloat16_rounds_to_nearest_even(dev, caps):
  caps.require_dtype(dtypes.bfloat16)
  x, want = (np.array(v, np.float32) for v in zip(*BF16_TIES))
  check(tensor(x, dtypes.bfloat16, dev), want, dtype=dtypes.bfloat16, rtol=0, atol=0)
  # sums of two bfloat16s that land on the same ties
  a, b = np.array([1, 1, -1, 256, 258], np.float32), np.array([2**-8, 3 * 2**-8, -2**-8, 1, 1], np.float32)
  check(tensor(a, dtypes.bfloat16, dev) + tensor(b, dtypes.bfloat16, dev), [1, 1 + 2**-6, -1, 256, 260], dtype=dtypes.bfloat16, rtol=0, atol=0)

# through float32: 2**25 + 2**17 + 1 is first 2**25 + 2**17, a tie between bfloat16s (rounding once would go up); a float64
# once: 1 + 2**-8 + 2**-30 is above the tie (through float32 it would be on it, and go down)
BF16_FROM = {dtypes.int32: ([2**25 + 2**17 + 1, -(2**25 + 2**17 + 1), 2**24 + 1, 2**31 - 1, -2**31], [2**25, -2**25, 2**24, 2**31, -2**31]),
             dtypes.int64: ([2**40 + 2**32 + 1, -(2**40 + 2**32 + 1)], [2**40, -2**40]),
             dtypes.float64: ([1 + 2**-8 + 2**-30, -1 - 2**-8 - 2**-30, 1 + 2**-8], [1 + 2**-7, -1 - 2**-7, 1])}

@pytest.mark.parametrize("src", BF16_FROM, ids=lambda d: d.name)
def test_bfloat16_from(dev, caps, src):
  caps.require_dtype(src, dtypes.bfloat16)
  x, want = BF16_FROM[src]
  check(Tensor(np.array(x, src.np), device=dev).cast(dtypes.bfloat16), np.array(want, np.float32), dtype=dtypes.bfloat16, rtol=0, atol=0)

def test_bfloat16_bitcasts(dev, caps):
  caps.require_dtype(dtypes.bfloat16, dtypes.int16, dtypes.uint16)
  bits = np.array([0x3F80, 0xBF80, 0x8000, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x4049, 0x0080], np.uint16)  # 1, -1, -0, max, +-inf, nan, 3.140625, tiny
  check(Tensor(bits, device=dev).bitcast(dtypes.bfloat16), (bits.astype(np.uint32) << 16).view(np.float32), dtype=dtypes.bfloat16, rtol=0, atol=0)
  x = np.array([1.0, -0.0, 3.14159, -2.5e-3, 1e38, np.inf, 65504.0], np.float32)
  check(tensor(x, dtypes.bfloat16, dev).bitcast(dtypes.int16), (bf16_round(x).view(np.uint32) >> 16).astype(np.uint16).view(np.int16),
        dtype=dtypes.int16, rtol=0, atol=0)

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.float16, dtypes.int64, dtypes.uint64, dtypes.float64],
                         ids=["int8", "uint8", "int16", "float16", "int64", "uint64", "float64"])
def test_promotion_with_float32(dev, caps, dt):
  caps.require_dtype(dt)
  x = data(dt, (9,), lo=0, hi=50)
  out = Tensor(x, device=dev) + Tensor(np.full(9, 0.5, np.float32), device=dev)
  want = dtypes.float64 if dt == dtypes.float64 else dtypes.float32
  check(out, (x.astype(np.float64) + 0.5).astype(want.np), dtype=want, rtol=1e-6)

OUT_OF_RANGE = [np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 2.0 ** 63, -(2.0 ** 63), 1.5 * 2.0 ** 63, 2.0 ** 64, -2.7, 2.7, 300.5, -129.5]

@pytest.mark.parametrize("src", [dtypes.float16, dtypes.float32, dtypes.float64], ids=lambda d: d.name)
def test_float_to_int_has_one_result_everywhere(dev, caps, src):
  """nan, infinities and values past the int64/uint64 range cast to 0; the rest truncate and wrap (dtype.float_to_int),
  on every device: C and LLVM leave these cases undefined or saturate, so each renderer spells the rule out."""
  with np.errstate(over="ignore"): x = np.array(OUT_OF_RANGE, np.float64).astype(src.np)  # past half's range: inf
  for dst in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64):
    caps.require_dtype(src, dst)
    np.testing.assert_array_equal(Tensor(x, device=dev).cast(dst).numpy(), float_to_int(x, dst.np), err_msg=f"{src.name} -> {dst.name}")
