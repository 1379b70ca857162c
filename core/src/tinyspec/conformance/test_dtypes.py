"""Every dtype the device claims: storing and reading back, arithmetic in the dtype itself (integers wrap around), the
casts between every pair, and bitcasts. A dtype the device does not claim is skipped by name."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance import TENSOR_DTYPES
from tinyspec.conformance.support import TOL, bf16, check, data, np_dtype, read, tensor

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
    if dt == dtypes.bfloat16: x = bf16(x)
  check(tensor(x, dt, dev).contiguous(), x, dtype=dt, rtol=0, atol=0)

@pytest.mark.parametrize("dt", TENSOR_DTYPES, ids=IDS)
def test_arithmetic_in_dtype(dev, caps, dt):
  caps.require_dtype(dt)
  x, y = data(dt, (50,), seed=1, lo=-10, hi=10), data(dt, (50,), seed=2, lo=-10, hi=10)
  X, Y = tensor(x, dt, dev), tensor(y, dt, dev)
  rtol, atol = TOL.get(dt, (0, 0))
  def fit(v): return bf16(v.astype(np.float32)) if dt == dtypes.bfloat16 else v.astype(dt.np)
  if dt == dtypes.bool:
    check(X + Y, x | y)
    check(X * Y, x & y)
  else:
    check(X + Y, fit(x + y), dtype=dt, rtol=rtol, atol=atol)
    check(X * Y, fit(x * y), dtype=dt, rtol=rtol, atol=atol)
    check(X - Y, fit(x - y), dtype=dt, rtol=rtol, atol=atol)
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
  return bf16(x) if src == dtypes.bfloat16 else x

@pytest.mark.parametrize("dst", TENSOR_DTYPES, ids=IDS)
@pytest.mark.parametrize("src", TENSOR_DTYPES, ids=IDS)
def test_cast(dev, caps, src, dst):
  caps.require_dtype(src, dst)
  x = cast_values(src, dst)
  want = bf16(x.astype(np.float32)) if dst == dtypes.bfloat16 else x.astype(dst.np)
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

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.float16, dtypes.int64, dtypes.uint64, dtypes.float64],
                         ids=["int8", "uint8", "int16", "float16", "int64", "uint64", "float64"])
def test_promotion_with_float32(dev, caps, dt):
  caps.require_dtype(dt)
  x = data(dt, (9,), lo=0, hi=50)
  out = Tensor(x, device=dev) + Tensor(np.full(9, 0.5, np.float32), device=dev)
  want = dtypes.float64 if dt == dtypes.float64 else dtypes.float32
  check(out, (x.astype(np.float64) + 0.5).astype(want.np), dtype=want, rtol=1e-6)
