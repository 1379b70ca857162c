"""Shapes: broadcasting, 0-d tensors, zero-size tensors, and sizes around the device's thread count and vector widths
(where a split or vectorized loop has a remainder)."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data

PAIRS = [((3, 1), (1, 4)), ((2, 1, 3), (4, 1)), ((), (3,)), ((5,), ()), ((1,), (6,)), ((2, 3, 4), (3, 1)), ((4, 1, 1), (1, 5, 1)),
         ((1, 1), (1, 1)), ((3, 1, 2), (3, 4, 2))]

@pytest.mark.parametrize("sa,sb", PAIRS, ids=[f"{a}x{b}" for a, b in PAIRS])
def test_broadcast_binary(dev, sa, sb):
  x, y = data(dtypes.float32, sa, seed=1), data(dtypes.float32, sb, seed=2)
  X, Y = Tensor(x, device=dev), Tensor(y, device=dev)
  check(X + Y, x + y)
  check(X * Y - Y, x * y - y, rtol=1e-6)
  check(X.maximum(Y), np.maximum(x, y))
  check(X < Y, x < y)
  check((X + Y).sum(), np.array((x + y).sum(), np.float32), rtol=1e-5, atol=1e-5)

def test_broadcast_where_three_ways(dev):
  c, x, y = data(dtypes.bool, (4, 1, 1)), data(dtypes.float32, (1, 3, 1)), data(dtypes.float32, (5,))
  check(Tensor(c, device=dev).where(Tensor(x, device=dev), Tensor(y, device=dev)), np.where(c, x, y))

def test_expand_then_reduce(dev):
  x = data(dtypes.float32, (3, 1))
  check(Tensor(x, device=dev).expand(3, 5).sum(1), np.broadcast_to(x, (3, 5)).sum(1), rtol=1e-6)
  check(Tensor(x, device=dev).expand(4, 3, 5).contiguous(), np.broadcast_to(x, (4, 3, 5)))

def test_shapes_that_do_not_broadcast_raise(dev):
  with pytest.raises((RuntimeError, ValueError), match=r"\(3, ?2\)|\(2, ?3\)"):
    Tensor.ones(3, 2, device=dev) + Tensor.ones(2, 3, device=dev)

# ---- 0-d ----

def test_zero_dim(dev):
  x = Tensor(np.float32(2.5), device=dev)
  assert x.shape == () and x.ndim == 0
  check(x * 2 + 1, np.array(6.0, np.float32))
  check(x.exp(), np.exp(np.array(2.5, np.float32)), rtol=1e-6)
  check(x.sum(), np.array(2.5, np.float32))
  check(x.reshape(1, 1), np.full((1, 1), 2.5, np.float32))
  check(x.expand(2, 3), np.full((2, 3), 2.5, np.float32))
  check(x + Tensor(np.ones(4, np.float32), device=dev), np.full(4, 3.5, np.float32))
  assert x.item() == 2.5 and float(x) == 2.5
  assert Tensor(np.int64(7), device=dev).item() == 7 and Tensor(True, device=dev).item() is True

def test_zero_dim_from_reductions(dev):
  x = data(dtypes.float32, (4, 5))
  s = Tensor(x, device=dev).max()
  assert s.shape == ()
  check(s, np.array(x.max()))
  check(Tensor(x, device=dev).mean() * Tensor(x, device=dev).min(), np.array(x.mean() * x.min(), np.float32), rtol=1e-5)
  check(Tensor(x, device=dev)[2, 3], np.array(x[2, 3]))

# ---- zero-size ----

@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4), (2, 0, 3)])
def test_zero_size_elementwise(dev, shape):
  x = np.zeros(shape, np.float32)
  X = Tensor(x, device=dev)
  check(X + 1, x + 1)
  check((X * X).exp(), x)
  check(X < 1, x < 1)
  check(X.cast(dtypes.int32), x.astype(np.int32))
  check(X.reshape(-1), x.reshape(-1))
  assert X.numpy().shape == shape and X.tolist() == x.tolist()

def test_zero_size_reductions(dev):
  x = np.zeros((0, 4), np.float32)
  X = Tensor(x, device=dev)
  check(X.sum(0), np.zeros(4, np.float32))
  check(X.sum(), np.array(0.0, np.float32))
  check(X.prod(0), np.ones(4, np.float32))
  check(X.sum(1), np.zeros(0, np.float32))
  check(X.max(1), np.zeros(0, np.float32))
  check(Tensor(np.zeros((0,), np.int32), device=dev).sum(), np.array(0, np.int64))
  check(X.any(0), np.zeros(4, bool))
  check(X.all(0), np.ones(4, bool))
  with pytest.raises(RuntimeError): X.max(0)
  y = data(dtypes.float32, (3, 4))  # an empty slice of a real buffer: the kernel loops zero times over the reduced axis
  Y = Tensor(y, device=dev)
  check(Y[:0].sum(0), np.zeros(4, np.float32))
  check(Y[:, :0].sum(1) - 1, np.full(3, -1.0, np.float32))

def test_zero_size_movement_and_matmul(dev):
  e, y = np.zeros((0, 3), np.float32), data(dtypes.float32, (2, 3))
  E, Y = Tensor(e, device=dev), Tensor(y, device=dev)
  check(E.cat(Y), y)
  check(Y.cat(E, E), y)
  check(E.pad(((1, 1), (0, 0)), value=2.0), np.full((2, 3), 2.0, np.float32))
  check(E.permute(1, 0), e.T)
  check(Y[:, 1:1], y[:, 1:1])
  check(Tensor(np.zeros((3, 0), np.float32), device=dev) @ Tensor(np.zeros((0, 4), np.float32), device=dev), np.zeros((3, 4), np.float32))
  check(E @ Tensor(np.ones((3, 5), np.float32), device=dev), np.zeros((0, 5), np.float32))

# ---- sizes around threads and vector widths ----

def edge_sizes(caps) -> list[int]:
  """Sizes just below, at and past each multiple a device splits work by (its threads and vector widths)."""
  steps = (caps.threads, *caps.vector_widths, caps.threads * max(caps.vector_widths))
  return sorted({n for w in steps for n in (w - 1, w, w + 1, 3 * w + 1) if n > 0})

def test_sizes_around_threads_and_vector_widths(dev, caps):
  for n in edge_sizes(caps):
    x = data(dtypes.float32, (n, 7), seed=n)
    X = Tensor(x, device=dev)
    check(X * 2 + 1, x * 2 + 1, rtol=1e-6)
    check(X.sum(1), x.sum(1), rtol=1e-5, atol=1e-5)
    check(X.sum(0), x.sum(0), rtol=1e-5, atol=1e-5)
    check(X.T.contiguous().reshape(-1), x.T.reshape(-1))
    check(X.max(), np.array(x.max()))
    v = data(dtypes.int32, (n,), seed=n)
    check(Tensor(v, device=dev) * 3 - 1, v * 3 - 1)
    check(Tensor(v, device=dev).sum(), np.array(v.sum(), np.int64))
