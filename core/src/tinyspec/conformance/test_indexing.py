"""Indexing, basic (ints, slices with steps, None, Ellipsis) and advanced (integer tensors and lists, bool masks), and
gather, scatter (plain, add, multiply) and one_hot."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data

X = data(dtypes.float32, (4, 5, 6), seed=1)

BASIC = {
  "int": (1,), "neg_int": (-1,), "two_ints": (2, -3), "slice": (slice(1, 3),), "step": (slice(None, None, 2),),
  "neg_step": (slice(None, None, -1),), "odd_step": (slice(3, 0, -2), slice(1, 6, 3)), "none": (None, 1), "ellipsis": (Ellipsis, 2),
  "mixed": (slice(1, None), None, Ellipsis, slice(None, 4, 3)), "int_slice_int": (0, slice(1, 4), 5), "empty_slice": (slice(3, 1),),
}

@pytest.mark.parametrize("case", BASIC)
def test_basic_indexing(dev, case):
  idx = BASIC[case]
  check(Tensor(X, device=dev)[idx], X[idx])
  check((Tensor(X, device=dev) + 1)[idx] * 2, (X[idx] + 1) * 2)  # of a computed value, and fused onward

ADVANCED = {
  "list": lambda: ([0, 3, 1, 3],),
  "tensor": lambda: (np.array([2, 0, -1]),),
  "tensor_2d": lambda: (np.array([[0, 1], [3, 2]]),),
  "two_tensors": lambda: (np.array([0, 2, 3]), np.array([4, 0, 1])),
  "broadcast_tensors": lambda: (np.array([[0], [3]]), np.array([1, 2, 4])),
  "slice_then_tensor": lambda: (slice(1, 3), np.array([0, 4, 4])),
  "tensor_slice_tensor": lambda: (np.array([1, 2]), slice(None), np.array([5, 0])),
  "bool_mask": lambda: (np.array([True, False, True, True]),),
  "bool_mask_2d": lambda: ((X[..., 0] > 0),),
}

@pytest.mark.parametrize("case", ADVANCED)
def test_advanced_indexing(dev, case):
  idx = ADVANCED[case]()
  tidx = tuple(Tensor(i.astype(np.int32), device=dev) if isinstance(i, np.ndarray) and i.dtype != bool else i for i in idx)
  check(Tensor(X, device=dev)[tidx], X[idx])
  check((Tensor(X, device=dev) * 3)[idx], X[idx] * 3)  # numpy arrays and lists work as indices too

@pytest.mark.parametrize("case", ["slice", "step", "odd_step", "int_slice_int", "list", "two_tensors", "bool_mask_2d"])
@pytest.mark.parametrize("realized", [False, True], ids=["lazy", "realized"])
def test_setitem(dev, case, realized):
  """x[idx] = v: into a realized buffer (a plain region written at once, other indices as a lazy assign) and into a graph."""
  idx = BASIC[case] if case in BASIC else ADVANCED[case]()
  want = X.copy()
  value = np.arange(want[idx].size, dtype=np.float32).reshape(want[idx].shape) - 7
  want[idx] = value
  t = Tensor(X, device=dev).realize() if realized else Tensor(X, device=dev) + 0
  t[idx] = Tensor(value, device=dev)
  check(t, want)

def test_index_errors(dev):
  t = Tensor(X, device=dev)
  with pytest.raises(IndexError): t[4]
  with pytest.raises(IndexError): t[0, 0, 0, 0]

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dev, dim):
  x = data(dtypes.float32, (4, 5), seed=2)
  shape = (3, 5) if dim == 0 else (4, 3)
  idx = data(dtypes.int64, shape, seed=3, lo=0, hi=x.shape[dim] - 1)
  check(Tensor(x, device=dev).gather(dim, Tensor(idx, device=dev)), np.take_along_axis(x, idx, dim))

def np_scatter(x, dim, idx, src, reduce=None):
  out = x.copy()
  for pos in np.ndindex(*idx.shape):
    tgt = list(pos)
    tgt[dim] = idx[pos]
    tgt = tuple(tgt)
    if reduce == "add": out[tgt] += src[pos]
    elif reduce == "multiply": out[tgt] *= src[pos]
    else: out[tgt] = src[pos]
  return out

@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter(dev, dim, reduce):
  x, src = data(dtypes.float32, (4, 5), seed=4), data(dtypes.float32, (4, 5), seed=5)
  shape = (2, 5) if dim == 0 else (4, 3)
  g = np.random.default_rng(6)
  # plain scatter: indices distinct along dim (where they repeat, which write wins is unspecified); the reductions: repeats
  idx = np.take(np.argsort(g.random(x.shape), axis=dim), range(shape[dim]), axis=dim) if reduce is None else g.integers(0, x.shape[dim], shape)
  got = Tensor(x, device=dev).scatter(dim, Tensor(idx, device=dev), Tensor(src, device=dev), reduce=reduce)
  check(got, np_scatter(x, dim, idx, src, reduce), rtol=1e-6)

def test_scatter_scalar_and_ints(dev):
  x = np.zeros((3, 4), np.int32)
  idx = np.array([[0, 1, 2, 0]])
  check(Tensor(x, device=dev).scatter(0, Tensor(idx, device=dev), 7), np_scatter(x, 0, idx, np.full(idx.shape, 7)))

def test_one_hot(dev):
  v = np.array([0, 3, 1, 3, 2], np.int32)
  check(Tensor(v, device=dev).one_hot(5), np.eye(5, dtype=np.int32)[v])
  check(Tensor(v, device=dev).one_hot(), np.eye(4, dtype=np.int32)[v])
  check(Tensor(v.reshape(5, 1), device=dev).one_hot(4), np.eye(4, dtype=np.int32)[v.reshape(5, 1)])
