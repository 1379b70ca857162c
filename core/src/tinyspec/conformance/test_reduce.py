"""Reductions over every kind of axis argument, with and without keepdim, and the ones built from them: mean var std,
argmax argmin, any all, logsumexp softmax log_softmax, cumsum cumprod cummax."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data
from tinyspec.dtype import position_dtype

X = data(dtypes.float32, (3, 4, 5), seed=1)
AXES = [None, 0, 1, 2, -1, (0, 2), (1, 2), (0, 1, 2)]

@pytest.mark.parametrize("axis", AXES, ids=[str(a) for a in AXES])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_prod_max_min_mean(dev, axis, keepdim):
  t = Tensor(X, device=dev)
  check(t.sum(axis, keepdim=keepdim), X.sum(axis, keepdims=keepdim), rtol=1e-5, atol=1e-5)
  check(t.prod(axis, keepdim=keepdim), X.prod(axis, keepdims=keepdim), rtol=1e-4, atol=1e-6)
  check(t.max(axis, keepdim=keepdim), X.max(axis, keepdims=keepdim))
  check(t.min(axis, keepdim=keepdim), X.min(axis, keepdims=keepdim))
  check(t.mean(axis, keepdim=keepdim), X.mean(axis, keepdims=keepdim), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("correction", [0, 1])
def test_var_std(dev, correction):
  t = Tensor(X, device=dev)
  for axis in (None, 1, (0, 2)):
    check(t.var(axis, correction=correction), X.var(axis, ddof=correction), rtol=1e-5, atol=1e-6)
    check(t.std(axis, correction=correction), X.std(axis, ddof=correction), rtol=1e-5, atol=1e-6)
  v, m = t.var_mean(1)
  check(v, X.var(1, ddof=1), rtol=1e-5, atol=1e-6)
  check(m, X.mean(1), rtol=1e-5, atol=1e-6)

def test_integer_and_bool_reductions(dev):
  x = data(dtypes.int32, (4, 6), lo=-20, hi=20)
  t = Tensor(x, device=dev)
  check(t.sum(1), x.sum(1).astype(np.int64))
  check(t.sum(), np.array(x.sum(), np.int64))
  check(t.max(0), x.max(0))
  check(t.min(), np.array(x.min(), np.int32))
  check(Tensor(x % 3 + 1, device=dev).prod(1), (x % 3 + 1).prod(1).astype(np.int64))
  b = x > 0
  check(Tensor(b, device=dev).sum(0), b.sum(0).astype(np.int64))
  check(Tensor(b, device=dev).max(1), b.max(1))
  u = np.array([[250, 3], [7, 9]], np.uint8)
  check(Tensor(u, device=dev).max(0), u.max(0))
  check(Tensor(u, device=dev).min(0), u.min(0))

def test_max_min_with_nan_and_inf(dev):
  x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, np.inf]], np.float32)
  check(Tensor(x, device=dev).max(1), np.array([np.nan, np.inf], np.float32))
  check(Tensor(x, device=dev).min(1), np.array([np.nan, -np.inf], np.float32))

def test_argmax_argmin(dev):
  x = np.round(data(dtypes.float32, (5, 7), seed=3))  # rounded: ties, where the first index wins
  t = Tensor(x, device=dev)
  pos = position_dtype(x.size).np  # the default int (int32)
  for f, ref in ((t.argmax, np.argmax), (t.argmin, np.argmin)):
    check(f(), np.array(ref(x), pos))
    check(f(0), ref(x, 0).astype(pos))
    check(f(1), ref(x, 1).astype(pos))
    check(f(-1, keepdim=True), ref(x, -1, keepdims=True).astype(pos))
  i = data(dtypes.int16, (40,), lo=-3, hi=3)
  check(Tensor(i, device=dev).argmax(), np.array(np.argmax(i), pos))

def test_any_all(dev):
  x = data(dtypes.int32, (4, 5), lo=0, hi=3) * (np.arange(4) != 2).reshape(4, 1)
  t = Tensor(x, device=dev)
  check(t.any(), np.array(x.any()))
  check(t.all(), np.array(x.all()))
  check(t.any(1), x.any(1))
  check(t.all(0), x.all(0))
  check(Tensor(x > 0, device=dev).all(1, keepdim=True), (x > 0).all(1, keepdims=True))

def softmax(x, axis):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_logsumexp(dev, axis):
  x = data(dtypes.float32, (6, 9), seed=2) * 10
  t = Tensor(x, device=dev)
  x64 = x.astype(np.float64)
  check(t.softmax(axis), softmax(x64, axis).astype(np.float32), rtol=1e-5, atol=1e-7)
  check(t.log_softmax(axis), np.log(softmax(x64, axis)).astype(np.float32), rtol=1e-5, atol=1e-5)
  lse = np.log(np.exp(x64 - x64.max(axis, keepdims=True)).sum(axis)) + x64.max(axis)
  check(t.logsumexp(axis), lse.astype(np.float32), rtol=1e-5, atol=1e-5)

def test_softmax_of_large_values_is_stable(dev):
  x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1000.0]], np.float32)
  check(Tensor(x, device=dev).softmax(1), softmax(x.astype(np.float64), 1).astype(np.float32), rtol=1e-5, atol=1e-7)

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scans(dev, axis):
  x = data(dtypes.float32, (5, 70), seed=4)
  t = Tensor(x, device=dev)
  check(t.cumsum(axis), np.cumsum(x.astype(np.float64), axis).astype(np.float32), rtol=1e-5, atol=1e-5)
  y = 1 + x * 0.05
  check(Tensor(y, device=dev).cumprod(axis), np.cumprod(y.astype(np.float64), axis).astype(np.float32), rtol=1e-5)
  check(t.cummax(axis).values, np.maximum.accumulate(x, axis))
  i = data(dtypes.int32, (5, 70), lo=-9, hi=9)
  check(Tensor(i, device=dev).cumsum(axis), np.cumsum(i, axis).astype(np.int64))  # int sums are int64, as PyTorch
