"""End-to-end training on the PYTHON device: forward, backward and an optimizer step per iteration, realized together; fixed
seeds, so the accuracies are the same on every run. Each test takes a couple of seconds."""
import numpy as np
from tinyspec import Tensor
from tinyspec.engine import realize as engine
from tinyspec.nn import Conv2d, Linear
from tinyspec.nn.optim import Adam, AdamW
from tinyspec.nn.state import get_parameters


def _cross_entropy(logits: Tensor, labels: np.ndarray) -> Tensor:
  return -(logits.log_softmax(-1) * Tensor(np.eye(logits.shape[-1], dtype=np.float32)[labels])).sum(-1).mean()

def _train(model, opt, x: Tensor, y: np.ndarray, steps: int) -> list[float]:
  """Full-batch training; returns the losses. Every step after the first runs from the schedule cache."""
  losses = []
  for step in range(steps):
    if step == 1: built = engine.stats["schedules_built"]
    opt.zero_grad()
    loss = _cross_entropy(model(x), y)
    loss.backward()
    Tensor.realize(loss, *opt.schedule_step())
    losses.append(loss.item())
  assert engine.stats["schedules_built"] == built, "a training step missed the schedule cache"
  return losses

def _spirals(n: int, rng: np.random.Generator, turns: float = 1.25) -> tuple[np.ndarray, np.ndarray]:
  """Two interleaved spiral arms (class = arm), radius growing with the angle, with a little noise."""
  y = np.arange(n) % 2
  r = np.sqrt(rng.uniform(0.02, 1, n))
  ang = r * turns * 2 * np.pi + np.pi * y
  return (np.stack([r * np.cos(ang), r * np.sin(ang)], 1) + rng.normal(0, 0.03, (n, 2))).astype(np.float32), y

def _linear_accuracy(x: np.ndarray, y: np.ndarray, xt: np.ndarray, yt: np.ndarray) -> float:
  """The test accuracy of the least-squares linear classifier: how far a model without a hidden layer gets."""
  a = np.c_[x, np.ones(len(x))]
  w = np.linalg.lstsq(a, np.eye(y.max() + 1)[y], rcond=None)[0]
  return float(((np.c_[xt, np.ones(len(xt))] @ w).argmax(1) == yt).mean())

class MLP:
  def __init__(self, hidden: int): self.l1, self.l2 = Linear(2, hidden), Linear(hidden, 2)
  def __call__(self, x: Tensor) -> Tensor: return self.l2(self.l1(x).relu())

def test_mlp_spirals():
  rng = np.random.default_rng(0)
  (x, y), (xt, yt) = _spirals(300, rng), _spirals(300, rng)
  assert _linear_accuracy(x, y, xt, yt) < 0.7  # not linearly separable: the hidden layer has to do the work
  Tensor.manual_seed(0)
  model = MLP(64)
  losses = _train(model, Adam(get_parameters(model), lr=0.05), Tensor(x), y, steps=60)
  assert losses[-1] < 0.2 * losses[0]
  acc = (model(Tensor(xt)).argmax(-1).numpy() == yt).mean()
  assert acc >= 0.95, f"test accuracy {acc}"

def _bars(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
  """8x8 noisy images of three classes: a horizontal bar, a vertical bar, or both (a cross), each at a random place."""
  y = np.arange(n) % 3
  x = rng.normal(0, 0.3, (n, 1, 8, 8)).astype(np.float32)
  for i, (row, col) in enumerate(rng.integers(1, 7, (n, 2))):
    if y[i] != 1: x[i, 0, row, :] += 1
    if y[i] != 0: x[i, 0, :, col] += 1
  return x, y

class CNN:
  def __init__(self): self.conv, self.fc = Conv2d(1, 4, 3, padding=1), Linear(4 * 4 * 4, 3)
  def __call__(self, x: Tensor) -> Tensor: return self.fc(self.conv(x).relu().max_pool2d(2).flatten(1))

def test_cnn_bars_and_crosses():
  rng = np.random.default_rng(0)
  (x, y), (xt, yt) = _bars(300, rng), _bars(300, rng)
  Tensor.manual_seed(0)
  model = CNN()
  losses = _train(model, AdamW(get_parameters(model), lr=0.05), Tensor(x), y, steps=20)
  assert losses[-1] < 0.2 * losses[0]
  acc = (model(Tensor(xt)).argmax(-1).numpy() == yt).mean()
  assert acc >= 0.9, f"test accuracy {acc}"
