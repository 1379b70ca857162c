"""Creation: from Python and numpy data, the constant fills, eye/arange/linspace, and the random generators (THREEFRY
run on the device)."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check


def test_from_python_data(dev):
  check(Tensor([[1.5, -2.0], [3.0, 4.25]], device=dev), np.array([[1.5, -2.0], [3.0, 4.25]], np.float32))
  check(Tensor([[1, -2], [3, 4]], device=dev), np.array([[1, -2], [3, 4]], np.int32))
  check(Tensor([True, False, True], device=dev), np.array([True, False, True]))
  check(Tensor(2.5, device=dev), np.array(2.5, np.float32))
  assert Tensor(7, device=dev).item() == 7 and Tensor([[1.0, 2.0]], device=dev).tolist() == [[1.0, 2.0]]

def test_from_numpy_keeps_dtype_and_device(dev):
  x = np.arange(12, dtype=np.int16).reshape(3, 4)
  t = Tensor(x, device=dev)
  assert t.device == dev and t.dtype == dtypes.int16
  check(t, x)
  check(Tensor(x, device=dev, dtype=dtypes.float32), x.astype(np.float32))

@pytest.mark.parametrize("shape", [(3, 4), (5,), ()])
def test_fills(dev, shape):
  check(Tensor.zeros(*shape, device=dev), np.zeros(shape, np.float32))
  check(Tensor.ones(*shape, device=dev, dtype=dtypes.int32), np.ones(shape, np.int32))
  check(Tensor.full(shape, 2.5, device=dev), np.full(shape, 2.5, np.float32))
  check(Tensor.full(shape, True, device=dev), np.full(shape, True))
  x = Tensor(np.ones(shape, np.int8), device=dev)
  check(x.zeros_like(), np.zeros(shape, np.int8))
  check(x.full_like(3), np.full(shape, 3, np.int8))
  check(x.ones_like(dtype=dtypes.float32), np.ones(shape, np.float32))
  assert Tensor.empty(*shape, device=dev).shape == shape

@pytest.mark.parametrize("n,m", [(1, None), (4, None), (3, 5), (5, 2), (0, 3)])
def test_eye(dev, n, m):
  check(Tensor.eye(n, m, device=dev), np.eye(n, m, dtype=np.float32))

@pytest.mark.parametrize("args,kw", [((10,), {}), ((2, 11), {}), ((-3, 14, 3), {}), ((10, 0, -2), {}), ((0.5, 3.0, 0.25), {}),
                                     ((5,), {"dtype": dtypes.float32}), ((100,), {"dtype": dtypes.int64}), ((4, 4), {})])
def test_arange(dev, args, kw):
  dt = kw.get("dtype", dtypes.float32 if any(isinstance(a, float) for a in args) else dtypes.int32)
  check(Tensor.arange(*args, device=dev, **kw), np.arange(*args).astype(dt.np), rtol=1e-6)

def test_arange_large_is_exact(dev):
  check(Tensor.arange(70000, device=dev), np.arange(70000, dtype=np.int32))
  check(Tensor.arange(70000, device=dev, dtype=dtypes.float32), np.arange(70000, dtype=np.float32))

@pytest.mark.parametrize("start,end,steps", [(0, 1, 5), (-3, 7, 11), (2, 2, 3), (0, 10, 1), (1, 0, 0)])
def test_linspace(dev, start, end, steps):
  check(Tensor.linspace(start, end, steps, device=dev), np.linspace(start, end, steps, dtype=np.float32), rtol=1e-6, atol=1e-6)

def test_rand_uniform_on_device(dev):
  x = Tensor.rand(100, 100, device=dev)
  assert x.device == dev and x.dtype == dtypes.float32 and x.shape == (100, 100)
  v = x.numpy()
  assert v.min() >= 0 and v.max() < 1 and abs(v.mean() - 0.5) < 0.02 and abs(v.std() - 12 ** -0.5) < 0.02
  assert len(np.unique(v)) > 9000  # not a few values repeated
  u = Tensor.uniform(1000, low=-3, high=5, device=dev).numpy()
  assert u.min() >= -3 and u.max() < 5 and abs(u.mean() - 1) < 0.3

def test_randn_normal(dev):
  v = Tensor.randn(20000, device=dev).numpy()
  assert abs(v.mean()) < 0.05 and abs(v.std() - 1) < 0.05 and np.isfinite(v).all()
  w = Tensor.normal(20000, mean=3, std=0.5, device=dev).numpy()
  assert abs(w.mean() - 3) < 0.05 and abs(w.std() - 0.5) < 0.05

def test_randint(dev):
  v = Tensor.randint(-4, 7, (5000,), device=dev)
  assert v.dtype == dtypes.int32
  v = v.numpy()
  assert v.min() == -4 and v.max() == 6 and set(np.unique(v)) == set(range(-4, 7))

def test_random_is_reproducible_and_advances(dev):
  Tensor.manual_seed(42)
  a, b = Tensor.rand(64, device=dev).numpy(), Tensor.rand(64, device=dev).numpy()
  Tensor.manual_seed(42)
  np.testing.assert_array_equal(Tensor.rand(64, device=dev).numpy(), a)
  assert not np.array_equal(a, b)

def test_rand_like(dev):
  x = Tensor.zeros(3, 7, device=dev, dtype=dtypes.float16)
  r = x.rand_like()
  assert r.shape == (3, 7) and r.dtype == dtypes.float16 and r.device == dev
  assert ((r.numpy() >= 0) & (r.numpy() < 1)).all()
