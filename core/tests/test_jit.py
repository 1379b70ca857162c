"""TinyJit: run, capture, replay; the capture's kernels are replayed on new inputs with the values numpy gives."""
import numpy as np
import pytest
from tinyspec import Tensor, TinyJit
from tinyspec.conformance.support import mlp_training_losses
from tinyspec.engine.realize import stats
from tinyspec.nn import optim


def _t(a: np.ndarray) -> Tensor: return Tensor(a, device="PYTHON")

def test_replays_with_new_data_over_ten_calls():
  calls = []
  @TinyJit
  def f(a, b):
    calls.append(1)
    return (a + b).relu().sum(axis=0), a * 2
  rng = np.random.default_rng(0)
  for i in range(10):
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    before = stats["kernels_compiled"]
    s, d = f(_t(a), _t(b))
    np.testing.assert_allclose(s.numpy(), np.maximum(a + b, 0).sum(0), rtol=1e-6)
    np.testing.assert_array_equal(d.numpy(), a * 2)
    if i >= 2: assert stats["kernels_compiled"] == before  # replays compile nothing
  assert len(calls) == 2  # run, capture; then only replays
  assert f.captured is not None and f.captured.kernels >= 2

def test_replay_reads_weights_updated_in_place():
  w = _t(np.ones(3, np.float32)).realize()
  f = TinyJit(lambda x: x * w)
  for i in range(5):
    w.assign(w + 1).realize()
    np.testing.assert_array_equal(f(_t(np.full(3, 2, np.float32))).numpy(), np.full(3, 2 * (i + 2)))

def test_an_input_returned_as_it_is():
  f = TinyJit(lambda x, y: (x, x + y))
  for i in range(4):
    x = _t(np.full(2, i, np.float32))
    same, total = f(x, _t(np.ones(2, np.float32)))
    assert same is x
    np.testing.assert_array_equal(total.numpy(), [i + 1, i + 1])

def test_a_training_step_matches_the_same_steps_without_it():
  def losses(jit: bool) -> list[float]:
    return mlp_training_losses("PYTHON", lambda ps: optim.Adam(ps, lr=1e-2), jit, (2, 8, 1), batch=8, seed=1)
  np.testing.assert_allclose(losses(True), losses(False), rtol=1e-6)

def test_a_call_unlike_the_capture_says_what_differs():
  f = TinyJit(lambda x, scale: x * scale)
  for _ in range(3): f(_t(np.ones(4, np.float32)), 2)
  with pytest.raises(ValueError, match=r"input Tensor 0 has shape \(5,\), dtype float32, device PYTHON; the capture had \(4,\)"):
    f(_t(np.ones(5, np.float32)), 2)
  with pytest.raises(ValueError, match="dtype int32"): f(_t(np.ones(4, np.int32)), 2)
  with pytest.raises(ValueError, match="other arguments differ"): f(_t(np.ones(4, np.float32)), 3)
  np.testing.assert_array_equal(f(_t(np.ones(4, np.float32)), 2).numpy(), [2] * 4)  # still replays
  f.reset()
  for _ in range(3): np.testing.assert_array_equal(f(_t(np.ones(5, np.float32)), 3).numpy(), [3] * 5)

def test_the_same_tensor_twice_is_refused():
  f = TinyJit(lambda x, y: x + y)
  x = _t(np.ones(2, np.float32))
  with pytest.raises(ValueError, match="same Tensor is passed twice"): f(x, x)

def test_batchnorm_running_statistics_update_on_every_replay():
  from tinyspec import nn
  xs = [np.random.default_rng(i).standard_normal((4, 3)).astype(np.float32) for i in range(5)]
  def run(jit: bool) -> np.ndarray:
    bn = nn.BatchNorm(3)
    def f(x):
      with Tensor.train(): out = bn(x)
      Tensor.realize(out, bn.running_mean, bn.running_var, bn.num_batches_tracked)
      return out
    g = TinyJit(f) if jit else f
    for x in xs: g(Tensor(x))  # on the default device, where nn.BatchNorm keeps its statistics
    return np.concatenate([bn.running_mean.numpy(), bn.running_var.numpy(), bn.num_batches_tracked.numpy().reshape(1)])
  np.testing.assert_allclose(run(True), run(False), rtol=1e-6)  # a replay writes the statistics' buffers as a plain call does
