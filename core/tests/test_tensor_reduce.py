"""Tensor reductions beyond sum/max/min/prod: statistics, arg reductions, any/all, logsumexp, softmax and scans, against numpy."""
import math

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.dtype import position_dtype

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4, 5)).astype(np.float32)
AXES = [None, 0, 1, -1, (0, 2), (-1, 0), [1]]

def np_axis(axis): return tuple(axis) if isinstance(axis, list) else axis

# ---- mean, var, std ----
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean_var_std(axis, keepdim):
  t, ax = Tensor(A), np_axis(axis)
  np.testing.assert_allclose(t.mean(axis, keepdim).numpy(), A.mean(ax, keepdims=keepdim), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(t.var(axis, keepdim).numpy(), A.var(ax, keepdims=keepdim, ddof=1), rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(t.std(axis, keepdim).numpy(), A.std(ax, keepdims=keepdim, ddof=1), rtol=1e-4, atol=1e-6)
  assert t.mean(axis, keepdim).shape == A.mean(ax, keepdims=keepdim).shape

@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_correction(correction):
  np.testing.assert_allclose(Tensor(A).var(1, correction=correction).numpy(), A.var(1, ddof=correction), rtol=1e-4)
  np.testing.assert_allclose(Tensor(A).std(correction=correction).numpy(), A.std(ddof=correction), rtol=1e-4)

def test_var_mean_std_mean():
  v, m = Tensor(A).var_mean(0)
  np.testing.assert_allclose(v.numpy(), A.var(0, ddof=1), rtol=1e-4)
  np.testing.assert_allclose(m.numpy(), A.mean(0), rtol=1e-5, atol=1e-6)
  s, m = Tensor(A).std_mean((1, 2), keepdim=True, correction=0)
  np.testing.assert_allclose(s.numpy(), A.std((1, 2), keepdims=True), rtol=1e-4)
  assert m.shape == (3, 1, 1)

@pytest.mark.parametrize("npdt", [np.int32, np.uint8, np.bool_])
def test_mean_var_of_ints_and_bool_are_float32(npdt):
  a = (rng.integers(0, 5, (4, 6)) if npdt is not np.bool_ else rng.integers(0, 2, (4, 6))).astype(npdt)
  m, v = Tensor(a).mean(1), Tensor(a).var(0)
  assert m.dtype == dtypes.float32 and v.dtype == dtypes.float32
  np.testing.assert_allclose(m.numpy(), a.astype(np.float64).mean(1), rtol=1e-6)
  np.testing.assert_allclose(v.numpy(), a.astype(np.float64).var(0, ddof=1), rtol=1e-5)

def test_float16_statistics_accumulate_wide():
  a = np.full(4096, 30.0, np.float16) + rng.standard_normal(4096).astype(np.float16)  # a float16 sum would overflow (max 65504)
  m, s = Tensor(a).mean(), Tensor(a).std()
  assert m.dtype == dtypes.float16 and s.dtype == dtypes.float16
  np.testing.assert_allclose(float(m.numpy()), a.astype(np.float64).mean(), rtol=1e-3)
  np.testing.assert_allclose(float(s.numpy()), a.astype(np.float64).std(ddof=1), rtol=1e-2)

def test_statistics_edge_cases():
  assert Tensor(3.0).mean().item() == 3.0 and Tensor(3.0).mean().shape == ()
  assert math.isnan(Tensor(3.0).var().item())                      # one element, correction 1: 0/0
  assert math.isinf(Tensor([1.0, 2.0]).var(correction=2).item())   # a positive sum over 0: inf, as torch
  assert math.isnan(Tensor.zeros(0).mean().item())
  e = Tensor.zeros(2, 0).mean(1)
  assert e.shape == (2,) and np.isnan(e.numpy()).all()
  assert Tensor.zeros(0, 3).mean(1).shape == (0,)

# ---- argmax, argmin ----
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(axis, keepdim):
  a = rng.standard_normal((4, 6)).astype(np.float32)
  for f in ("argmax", "argmin"):
    out = getattr(Tensor(a), f)(axis, keepdim)
    assert out.dtype == dtypes.int32  # the default int, as arange's
    np.testing.assert_array_equal(out.numpy(), getattr(np, f)(a, axis, keepdims=keepdim))

def test_positions_have_the_default_int_dtype(monkeypatch):
  """Every op that returns positions gives arange's dtype: the default int (int32, tinygrad's), int64 once
  dtypes.default_int is (PyTorch's); a count past int32's range needs int64 whatever the default."""
  x = Tensor([[3.0, 1.0, 2.0, 0.5]])
  ops = {"argmax": lambda: x.argmax(1), "argmin": lambda: x.argmin(), "sort": lambda: x.sort()[1], "argsort": lambda: x.argsort(),
         "topk": lambda: x.topk(2)[1], "cummax": lambda: x.cummax(1)[1], "cummin": lambda: x.cummin(1)[1],
         "max_pool2d": lambda: x.reshape(1, 1, 2, 2).max_pool2d(return_indices=True)[1], "nonzero": lambda: x.nonzero(),
         "multinomial": lambda: x.multinomial(2), "randperm": lambda: Tensor.randperm(4)}
  for default in (dtypes.int32, dtypes.int64):
    monkeypatch.setattr(dtypes, "default_int", default)
    for name, op in ops.items(): assert op().dtype == default, name
    assert x.argmax(1).numpy().tolist() == [0] and x.sort()[1].numpy().tolist() == [[3, 1, 2, 0]]
  assert position_dtype(2 ** 31) == dtypes.int64 and position_dtype(2 ** 31 + 1) == dtypes.int64
  monkeypatch.setattr(dtypes, "default_int", dtypes.int32)
  assert position_dtype(2 ** 31) == dtypes.int32 and position_dtype(2 ** 31 + 1) == dtypes.int64

@pytest.mark.parametrize("npdt", [np.int32, np.int8, np.uint8, np.bool_, np.float16])
def test_arg_reductions_pick_the_first_tie(npdt):
  a = np.array([[1, 3, 3, 0, 0], [2, 2, 2, 2, 2], [0, 0, 1, 1, 0]]).astype(npdt)
  if npdt is np.int8: a = a * -30  # negative ints too
  for axis in (None, 0, 1):
    np.testing.assert_array_equal(Tensor(a).argmax(axis).numpy(), np.argmax(a, axis))
    np.testing.assert_array_equal(Tensor(a).argmin(axis).numpy(), np.argmin(a, axis))

def test_argmax_extremes_and_nan():
  assert Tensor(np.array([0, 255, 255], np.uint8)).argmax().item() == 1
  assert Tensor(np.array([255, 0, 0], np.uint8)).argmin().item() == 1
  assert Tensor(np.array([-2 ** 31, 2 ** 31 - 1, -2 ** 31], np.int32)).argmin().item() == 0
  assert Tensor([-math.inf, -math.inf]).argmax().item() == 0
  assert Tensor([1.0, math.nan, 5.0, math.nan]).argmax().item() == 1  # nan is the largest, as torch
  assert Tensor([1.0, math.nan, -5.0]).argmin().item() == 1

def test_argmax_0d_and_errors():
  assert Tensor(7.0).argmax().item() == 0 and Tensor(7.0).argmax().shape == ()
  assert Tensor(7.0).argmax(0, keepdim=True).shape == ()
  assert Tensor.ones(2, 3).argmax(keepdim=True).shape == (1, 1)
  with pytest.raises(IndexError, match="non-zero size"): Tensor.zeros(2, 0).argmax(1)
  with pytest.raises(IndexError, match="out of range"): Tensor.zeros(2, 3).argmax(2)
  assert Tensor.zeros(0, 3).argmax(1).shape == (0,)

# ---- any, all ----
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1), -1])
def test_any_all(axis):
  a = np.array([[0, 1, 0], [0, 0, 0], [2, 3, -1]], np.int32)
  for keepdim in (False, True):
    out = Tensor(a).any(axis, keepdim)
    assert out.dtype == dtypes.bool
    np.testing.assert_array_equal(out.numpy(), np.any(a, axis, keepdims=keepdim))
    np.testing.assert_array_equal(Tensor(a).all(axis, keepdim).numpy(), np.all(a, axis, keepdims=keepdim))

def test_any_all_floats_bool_and_empty():
  f = np.array([0.0, -0.0, 0.5, math.nan], np.float32)
  assert Tensor(f).any().item() is True and Tensor(f[:2]).any().item() is False and Tensor(f[2:]).all().item() is True
  assert Tensor([True, False]).all().item() is False and Tensor([True, True]).all().item() is True
  np.testing.assert_array_equal(Tensor.zeros(0, 3).any(0).numpy(), np.zeros(3, bool))
  np.testing.assert_array_equal(Tensor.zeros(0, 3).all(0).numpy(), np.ones(3, bool))
  assert Tensor.zeros(2, 0).all(1, keepdim=True).shape == (2, 1)
  assert Tensor(0).any().item() is False and Tensor(5).all().item() is True

# ---- logsumexp, softmax ----
def np_logsumexp(a, axis, keepdims=False):
  m = np.max(a, axis, keepdims=True)
  m = np.where(np.isinf(m), 0, m)
  out = np.log(np.exp(a - m).sum(axis, keepdims=True)) + m
  return out if keepdims else np.squeeze(out, axis)

@pytest.mark.parametrize("axis", [0, -1, (0, 2), None])
def test_logsumexp(axis):
  ax = tuple(range(3)) if axis is None else axis
  for keepdim in (False, True):
    np.testing.assert_allclose(Tensor(A).logsumexp(axis, keepdim).numpy(), np_logsumexp(A.astype(np.float64), ax, keepdim), rtol=1e-5)

def test_logsumexp_is_stable():
  a = np.array([[1000.0, 1000.0], [-1000.0, -1001.0], [-math.inf, -math.inf], [math.inf, 1.0]], np.float32)
  out = Tensor(a).logsumexp(1).numpy()
  np.testing.assert_allclose(out[:2], [1000 + math.log(2), -1000 + math.log(1 + math.exp(-1))], rtol=1e-6)
  assert out[2] == -math.inf and out[3] == math.inf
  assert Tensor.zeros(3, 0).logsumexp(1).numpy().tolist() == [-math.inf] * 3
  assert Tensor([1, 2, 3]).logsumexp().dtype == dtypes.float32

def np_softmax(a, axis):
  e = np.exp(a - a.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_log_softmax(axis):
  np.testing.assert_allclose(Tensor(A).softmax(axis).numpy(), np_softmax(A, axis), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(Tensor(A).log_softmax(axis).numpy(), np.log(np_softmax(A.astype(np.float64), axis)), rtol=1e-5, atol=1e-6)

def test_softmax_is_stable_and_typed():
  big = np.array([[1000.0, 0.0, -1000.0], [88.0, 89.0, 90.0]], np.float32)
  np.testing.assert_allclose(Tensor(big).softmax().numpy(), np_softmax(big.astype(np.float64), 1), atol=1e-7)
  np.testing.assert_allclose(Tensor(big).log_softmax().numpy()[0], [0.0, -1000.0, -2000.0], rtol=1e-6)  # where softmax underflows
  i = Tensor([[1, 2, 3]])
  assert i.softmax().dtype == dtypes.float32 and i.softmax(dtype=dtypes.float64).dtype == dtypes.float64
  h = Tensor(A.astype(np.float16)).softmax(0)
  assert h.dtype == dtypes.float16
  np.testing.assert_allclose(h.numpy().astype(np.float32), np_softmax(A, 0), atol=2e-3)
  assert Tensor.zeros(2, 0).softmax().shape == (2, 0) and Tensor.zeros(0, 3).log_softmax(0).shape == (0, 3)
  np.testing.assert_allclose(Tensor(2.0).softmax().numpy(), 1.0)

# ---- scans ----
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_cumsum_cumprod_cummax(axis):
  a = rng.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
  np.testing.assert_allclose(Tensor(a).cumsum(axis).numpy(), np.cumsum(a, axis), rtol=1e-5)
  np.testing.assert_allclose(Tensor(a).cumprod(axis).numpy(), np.cumprod(a, axis), rtol=1e-5)
  np.testing.assert_array_equal(Tensor(A).cummax(axis).values.numpy(), np.maximum.accumulate(A, axis))

@pytest.mark.parametrize("n", [513, 1000])
def test_long_scans_go_in_two_stages(n):
  a = rng.standard_normal((2, n)).astype(np.float32)
  np.testing.assert_allclose(Tensor(a).cumsum(1).numpy(), np.cumsum(a.astype(np.float64), 1), rtol=1e-4, atol=1e-3)
  np.testing.assert_array_equal(Tensor(a).cummax(1).values.numpy(), np.maximum.accumulate(a, 1))
  i = rng.integers(-100, 100, n).astype(np.int32)
  np.testing.assert_array_equal(Tensor(i).cumsum().numpy(), np.cumsum(i))

def test_scan_dtypes():
  i = np.array([[3, -1, 4], [1, -5, 9]], np.int32)
  assert Tensor(i).cumsum(1).dtype == dtypes.int64  # as torch (and as sum)
  np.testing.assert_array_equal(Tensor(i).cumsum(1).numpy(), np.cumsum(i, 1))
  np.testing.assert_array_equal(Tensor(i).cumprod(1).numpy(), np.cumprod(i, 1))
  cm = Tensor(i).cummax(1).values
  assert cm.dtype == dtypes.int32
  np.testing.assert_array_equal(cm.numpy(), np.maximum.accumulate(i, 1))
  m = np.array([-2 ** 31, -2 ** 31 + 5, -2 ** 31], np.int32)  # padding with the dtype's min must not win
  np.testing.assert_array_equal(Tensor(m).cummax().values.numpy(), np.maximum.accumulate(m))
  b = np.array([False, True, True, False])
  assert Tensor(b).cumsum().dtype == dtypes.int64 and Tensor(b).cumsum().tolist() == [0, 1, 2, 2]
  assert Tensor(b).cummax().values.tolist() == [False, True, True, True]
  h = np.array([1.5, 2.0, -0.25], np.float16)
  assert Tensor(h).cumsum().dtype == dtypes.float16 and Tensor(h).cumsum().tolist() == [1.5, 3.5, 3.25]

def test_scan_edge_cases_and_errors():
  assert Tensor(5.0).cumsum().item() == 5.0 and Tensor(5.0).cumsum(-1).shape == ()
  assert Tensor(5).cumsum().dtype == dtypes.int64
  assert Tensor.zeros(0, 3).cumsum(0).shape == (0, 3) and Tensor.zeros(2, 0).cummax(1).values.shape == (2, 0)
  np.testing.assert_array_equal(Tensor([[-math.inf, 1.0], [2.0, -math.inf]]).cummax(1).values.numpy(), [[-math.inf, 1.0], [2.0, 2.0]])
  with pytest.raises(IndexError, match="out of range"): Tensor.zeros(2, 3).cumsum(2)
  with pytest.raises(IndexError, match="out of range"): Tensor.zeros(2, 3).softmax(-3)
  with pytest.raises(RuntimeError, match="more than once"): Tensor.zeros(2, 3).mean((0, 0))

def test_reductions_stay_lazy():
  # nothing in a composition realizes: the result is a graph whose leaves are the input buffer and constants
  x = Tensor(A).realize()
  for out in (x.softmax(1), x.var(0), x.cumsum(2), x.argmax(1), x.logsumexp(0)):
    assert out.uop.op.name != "BUFFER"
    assert not any(u.op.name == "CONTIGUOUS" for u in out.uop.toposort())
