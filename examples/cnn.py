"""A small CNN that learns to tell four kinds of generated 16x16 images apart: a horizontal bar, a vertical bar, a diagonal
and a ring, each at a random place, with noise. Nothing is downloaded. It should reach at least 95% on held-out images.

Two conv layers (Conv2d, BatchNorm, ReLU, max pooling), a linear classifier, Adam with a OneCycle schedule, the training
step captured by TinyJit.

    python examples/cnn.py [--steps 200] [--device CPU]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from tinyspec import Tensor, TinyJit, nn
from tinyspec.nn import optim, state
from tinyspec.nn.optim import lr_scheduler
from tqdm import tqdm

SIZE, CLASSES = 16, ("horizontal", "vertical", "diagonal", "ring")
TARGET_ACCURACY = 0.95


def images(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
  """n noisy (1, SIZE, SIZE) images and their class indices."""
  labels = rng.integers(0, len(CLASSES), n)
  yy, xx = np.mgrid[:SIZE, :SIZE]
  out = rng.normal(0, 0.3, (n, 1, SIZE, SIZE)).astype(np.float32)
  for img, label in zip(out, labels):
    r, c = rng.integers(3, SIZE - 3, 2)
    if label == 0: img[0, r, max(0, c - 5):c + 5] += 1
    elif label == 1: img[0, max(0, r - 5):r + 5, c] += 1
    elif label == 2: img[0][np.abs((yy - r) - (xx - c)) < 1] += 1
    else: img[0][np.abs(np.hypot(yy - r, xx - c) - 2.5) < 0.7] += 1
  return out, labels.astype(np.int32)


class CNN:
  def __init__(self, device: str | None = None):
    self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1, device=device), nn.BatchNorm2d(8, device=device)
    self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1, device=device), nn.BatchNorm2d(16, device=device)
    self.fc = nn.Linear(16 * (SIZE // 4) ** 2, len(CLASSES), device=device)

  def __call__(self, x: Tensor) -> Tensor:
    x = self.bn1(self.conv1(x)).relu().max_pool2d(2)
    x = self.bn2(self.conv2(x)).relu().max_pool2d(2)
    return self.fc(x.flatten(1))


def training_step(model: CNN, opt: optim.Optimizer) -> TinyJit:
  """One step of training in train mode (BatchNorm on the batch's statistics): loss, backward, update; captured by TinyJit.
  Called with (images, labels), it returns the loss before the update."""
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = model(x).cross_entropy(y)
      loss.backward()
      opt.step()
    return loss
  return step


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--steps", type=int, default=200)
  ap.add_argument("--batch", type=int, default=32)
  ap.add_argument("--device", default=None, help="device to run on (default: tinyspec's default device)")
  ap.add_argument("--seed", type=int, default=0)
  args = ap.parse_args(argv)
  if args.steps < 2: ap.error("--steps must be at least 2")
  rng = np.random.default_rng(args.seed)
  Tensor.manual_seed(args.seed)
  model = CNN(args.device)
  opt = optim.Adam(state.get_parameters(model), lr=1e-3)
  schedule = lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=args.steps)

  train_step = training_step(model, opt)
  print(f"cnn: {len(CLASSES)} classes of generated {SIZE}x{SIZE} images, {args.steps} steps of {args.batch}", flush=True)
  start, losses = time.perf_counter(), []
  bar = tqdm(range(args.steps), desc="training", unit="step", file=sys.stderr, mininterval=0.2 if sys.stderr.isatty() else 2.0)
  for _ in bar:
    x, y = images(args.batch, rng)
    losses.append(train_step(Tensor(x, device=args.device), Tensor(y, device=args.device)).item())
    schedule.step()
    bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
  x, y = images(1000, np.random.default_rng(args.seed + 1))
  accuracy = float((model(Tensor(x, device=args.device)).argmax(-1).numpy() == y).mean())
  print(f"loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.3f}; {time.perf_counter() - start:.1f} s; "
        f"held-out accuracy {100 * accuracy:.1f}% on 1000 images (target {100 * TARGET_ACCURACY:.0f}%)")
  return 0 if np.isfinite(losses).all() else 1


if __name__ == "__main__":
  sys.exit(main())
