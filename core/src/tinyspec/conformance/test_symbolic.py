"""Symbolic shapes on the device: a bound variable (`UOp.variable("n", 1, 32).bind(k)`) stands in a shape, the kernels
compile once for the variable's whole range, and every value gives numpy's result; TinyJit replays with a new value."""
import numpy as np
import pytest

from tinyspec import Tensor, TinyJit, dtypes
from tinyspec.conformance.support import check, data
from tinyspec.engine import realize as R
from tinyspec.uop.uop import UOp

N = UOp.variable("n", 1, 32)
VALUES = (3, 17, 32, 1)  # the first compiles; the others must not


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

def _each_value(dev, compute, expect):
  """compute(n) for each of VALUES (a bound n) checked against expect(k); no kernel compiled after the first value."""
  for i, k in enumerate(VALUES):
    before = R.stats["kernels_compiled"]
    got = compute(N.bind(k))
    check(got, expect(k), rtol=1e-5, atol=1e-6)
    if i: assert R.stats["kernels_compiled"] == before, f"n={k} compiled {R.stats['kernels_compiled'] - before} kernels"

def test_window_of_a_buffer(dev):
  a = data(dtypes.float32, (32, 6), seed=1)
  t = Tensor(a, device=dev).realize()
  _each_value(dev, lambda n: (t[:n] * 2 + 1).sum(0), lambda k: (a[:k] * 2 + 1).sum(0))
  _each_value(dev, lambda n: t[:n].mean(0), lambda k: a[:k].mean(0))
  _each_value(dev, lambda n: t[:n].softmax(0), lambda k: _softmax(a[:k], 0))

def test_creation(dev):
  _each_value(dev, lambda n: Tensor.ones(n, 3, device=dev) * 2, lambda k: np.full((k, 3), 2, np.float32))
  _each_value(dev, lambda n: Tensor.full((2, n), 7, dtype=dtypes.int32, device=dev) + 1, lambda k: np.full((2, k), 8, np.int32))
  _each_value(dev, lambda n: Tensor.zeros(n, device=dev).contiguous(), lambda k: np.zeros(k, np.float32))
  for k in VALUES:
    r = Tensor.rand(N.bind(k), 4, device=dev).numpy()
    assert r.shape == (k, 4) and (0 <= r).all() and (r < 1).all()
    e = Tensor.empty(N.bind(k), 2, device=dev)
    assert e.numpy().shape == (k, 2)

def test_movement(dev):
  a = data(dtypes.float32, (32, 4), seed=2)
  t = Tensor(a, device=dev).realize()
  _each_value(dev, lambda n: t[:n].reshape(n * 4), lambda k: a[:k].reshape(-1))
  _each_value(dev, lambda n: t[:n].reshape(-1, 2).sum(1), lambda k: a[:k].reshape(-1, 2).sum(1))
  _each_value(dev, lambda n: t[:n].pad(((1, 32 - n), (0, 0))), lambda k: np.pad(a[:k], ((1, 32 - k), (0, 0))))
  _each_value(dev, lambda n: t.shrink(((0, n), (1, 3))).T, lambda k: a[:k, 1:3].T)
  _each_value(dev, lambda n: Tensor.ones(1, 4, device=dev).expand(n, 4) * t[:n], lambda k: a[:k])

def test_attention_over_a_growing_length(dev):
  keys, q = data(dtypes.float32, (32, 8), seed=3), data(dtypes.float32, (2, 8), seed=4)
  K, Q = Tensor(keys, device=dev).realize(), Tensor(q, device=dev).realize()
  _each_value(dev, lambda n: (Q @ K[:n].T).softmax(-1) @ K[:n], lambda k: _softmax(q @ keys[:k].T, -1) @ keys[:k])

def test_jit_replays_with_a_new_value(dev):
  a = data(dtypes.float32, (32, 5), seed=5)
  cache = Tensor(a, device=dev).realize()
  f = TinyJit(lambda x, n: (x @ cache[:n].T).softmax(-1))
  for i, k in enumerate((4, 9, 30, 2, 17)):
    x = data(dtypes.float32, (1, 5), seed=10 + i)
    before = R.stats["kernels_compiled"]
    check(f(Tensor(x, device=dev), N.bind(k)), _softmax(x @ a[:k].T, -1), rtol=1e-5, atol=1e-6)
    if i: assert R.stats["kernels_compiled"] == before
  assert f.captured is not None

@pytest.mark.parametrize("k", [5, 12])
def test_jit_input_with_a_symbolic_shape(dev, k):
  a = data(dtypes.float32, (32, 3), seed=6)
  f = TinyJit(lambda x: (x * 2).sum(1))
  src = Tensor(a, device=dev).realize()
  for j in (k, k + 3, k - 2, k + 10):
    x = src[:N.bind(j)].contiguous().realize()
    out = f(x)
    assert out.shape[0].bound_value == j
    check(out, (a[:j] * 2).sum(1), rtol=1e-5, atol=1e-6)
