"""TinyJit and Tensor.assign on the device: a captured function replays on new inputs (through the device's `graph`
where it has one) with numpy's values, and a captured training step updates its weights in place as the same steps
without the JIT do."""
import numpy as np

from tinyspec import Tensor, TinyJit, dtypes
from tinyspec.conformance.support import check, data, mlp_training_losses
from tinyspec.engine import realize as R
from tinyspec.nn import optim


def test_replays_on_new_data(dev):
  f = TinyJit(lambda x, w, b: ((x @ w + b).relu().softmax(1) * 2).sum(0))
  w, b = Tensor(data(dtypes.float32, (8, 4), seed=1), device=dev), Tensor(data(dtypes.float32, (4,), seed=2), device=dev)
  for i in range(6):
    x = data(dtypes.float32, (5, 8), seed=10 + i)
    h = np.maximum(x @ w.numpy() + b.numpy(), 0)
    e = np.exp(h - h.max(1, keepdims=True))
    before = R.stats["kernels_compiled"]
    check(f(Tensor(x, device=dev), w, b), (e / e.sum(1, keepdims=True) * 2).sum(0), rtol=1e-5, atol=1e-6)
    if i >= 2: assert R.stats["kernels_compiled"] == before

def test_assign_whole_and_slice(dev):
  a = data(dtypes.float32, (4, 6), seed=3)
  t = Tensor(a, device=dev).realize()
  buf = t.uop
  t.assign(t * 2 - 1).realize()
  t[1:3, 2:5].assign(Tensor(np.zeros((2, 3), np.float32), device=dev))
  expect = a * 2 - 1
  expect[1:3, 2:5] = 0
  assert t.uop is buf
  check(t, expect)

def test_captured_training_step_matches_uncaptured(dev):
  def losses(jit: bool) -> list[float]:
    return mlp_training_losses(dev, lambda ps: optim.AdamW(ps, lr=1e-2), jit, (3, 16, 1), batch=32, seed=5, scale=0.5)
  np.testing.assert_allclose(losses(True), losses(False), rtol=1e-5)
