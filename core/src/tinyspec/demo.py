"""`tinyspec demo`: train a small MLP classifier end to end on a dataset generated on the spot, and report how it went.

The data are two interleaved spiral arms in the plane (the class is the arm): not linearly separable, so the two hidden
layers have to do the work. Training is full-batch Adam on the cross-entropy, each step (forward, backward, update)
realized in one call; every step after the first runs from the schedule cache, so the kernels are compiled once. Everything
is seeded (`--seed`): the same seed gives the same data, initialization and losses on a given device."""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tinyspec.device import Device, DeviceError
from tinyspec.engine.realize import stats
from tinyspec.nn import Linear
from tinyspec.nn.optim import Adam
from tinyspec.nn.state import get_parameters
from tinyspec.tensor import Tensor


def spirals(n: int, rng: np.random.Generator, turns: float = 2.0, noise: float = 0.03) -> tuple[np.ndarray, np.ndarray]:
  """`n` points of two interleaved spiral arms (float32 (n, 2)) and their classes (0 or 1, alternating). The radius grows
  with the angle; sqrt of a uniform radius spreads the points evenly over the disc."""
  y = np.arange(n) % 2
  r = np.sqrt(rng.uniform(0.02, 1, n))
  angle = r * turns * 2 * np.pi + np.pi * y  # the second arm is the first turned by half a circle
  return (np.stack([r * np.cos(angle), r * np.sin(angle)], 1) + rng.normal(0, noise, (n, 2))).astype(np.float32), y

class MLP:
  """2 -> hidden -> hidden -> classes, ReLU between the layers; returns logits."""
  def __init__(self, hidden: int, classes: int = 2, device: str | None = None):
    self.layers = [Linear(2, hidden, device=device), Linear(hidden, hidden, device=device), Linear(hidden, classes, device=device)]
  def __call__(self, x: Tensor) -> Tensor:
    for layer in self.layers[:-1]: x = layer(x).relu()
    return self.layers[-1](x)

@dataclass
class DemoResult:
  """What a demo run did: the loss after each step, the accuracy on held-out points, the kernels compiled and the times."""
  device: str
  losses: list[float]
  accuracy: float
  test_points: int
  kernels_compiled: int
  first_step_s: float  # the first step builds the schedule and compiles every kernel
  total_s: float

def train(steps: int = 150, seed: int = 0, device: str | None = None, points: int = 1000, hidden: int = 64, lr: float = 0.02,
          on_step: Callable[[int, float], None] | None = None) -> DemoResult:
  """Train the MLP on `points` spiral points for `steps` full-batch Adam steps on `device` (default: the default device),
  calling on_step(step, loss) after each, then measure its accuracy on as many fresh points. Raises DeviceError if the device
  is unknown or unavailable."""
  device = Device.canonicalize(device) if device else Device.DEFAULT
  Device[device]  # fail here, with the registry's explanation, if the device is unknown or unavailable
  compiled0, t0 = stats["kernels_compiled"], time.perf_counter()
  rng = np.random.default_rng(seed)
  (x, y), (xt, yt) = spirals(points, rng), spirals(points, rng)
  Tensor.manual_seed(seed)
  model = MLP(hidden, device=device)
  opt = Adam(get_parameters(model), lr=lr)
  xs, onehot = Tensor(x, device=device), Tensor(np.eye(2, dtype=np.float32)[y], device=device)
  losses, first = [], 0.0
  for step in range(steps):
    opt.zero_grad()
    loss = -(model(xs).log_softmax(-1) * onehot).sum(-1).mean()
    loss.backward()
    Tensor.realize(loss, *opt.schedule_step())
    losses.append(float(loss.item()))
    if step == 0: first = time.perf_counter() - t0
    if on_step is not None: on_step(step, losses[-1])
  accuracy = float((model(Tensor(xt, device=device)).argmax(-1).numpy() == yt).mean())
  return DemoResult(device, losses, accuracy, len(yt), stats["kernels_compiled"] - compiled0, first, time.perf_counter() - t0)

class Progress:
  """A tqdm progress bar on stderr with the current loss (redrawn at most every 0.1 s on a terminal, every second in a log)."""
  def __init__(self, total: int, device: str):
    from tqdm import tqdm
    self.total = total
    self.bar = tqdm(total=total, desc=f"training on {device}", unit="step", file=sys.stderr, mininterval=0.1 if sys.stderr.isatty() else 1.0)
  def __call__(self, step: int, loss: float) -> None:
    self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
    self.bar.update(1)
    if step + 1 == self.total: self.bar.close()

def summary(r: DemoResult) -> str:
  """The lines the demo ends with: loss, test accuracy, kernels compiled and time taken (`r` has at least one step)."""
  steady = (r.total_s - r.first_step_s) / max(len(r.losses) - 1, 1)
  return "\n".join([
    f"loss: {r.losses[0]:.4f} -> {r.losses[-1]:.4f} after {len(r.losses)} steps",
    f"test accuracy: {100 * r.accuracy:.1f}% on {r.test_points} held-out points",
    f"kernels compiled: {r.kernels_compiled}",
    f"time: {r.total_s:.2f} s on {r.device} (first step {r.first_step_s:.2f} s, building and compiling; then {steady * 1e3:.1f} ms/step)"])

def demo(steps: int = 150, seed: int = 0, device: str | None = None, quiet: bool = False) -> int:
  """Run the demo and print its summary (with a progress bar on stderr unless `quiet`); returns the exit code."""
  if steps < 1:
    print(f"tinyspec: error: --steps must be at least 1, got {steps}", file=sys.stderr)
    return 2
  try: Device[name := Device.canonicalize(device) if device else Device.DEFAULT]  # unknown or unavailable: say so before starting
  except DeviceError as e:
    print(f"tinyspec: error: {e}", file=sys.stderr)
    return 1
  if not quiet: print(f"tinyspec demo: an MLP classifying two interleaved spirals, {steps} Adam steps on {name} (seed {seed})", flush=True)
  print(summary(train(steps, seed, name, on_step=None if quiet else Progress(steps, name))))
  return 0
