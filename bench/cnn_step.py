"""One training step of examples/cnn.py's model (two blocks of 3x3 Conv2d, BatchNorm in training mode, ReLU and 2x2 max
pooling, then a linear classifier; batches of 32 16x16 images, Adam), in tinyspec as the example runs it (under TinyJit)
and in PyTorch eager with the same architecture, parameter names, initial weights and batches.

bench/run.py measures it as its "cnn" row (images per second); run on its own it prints both systems' step times:
python bench/cnn_step.py [--steps 50] [--device CPU]. Each system's first loss (before any update) is checked against a
numpy forward pass of the same weights, so both provably train the same model."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import training  # bench/training.py: the timing and the command line both training benches share

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import cnn  # examples/cnn.py: the model and its generated images

BATCH, LR, EPS = 32, 1e-3, 1e-5
CHANNELS = ((1, 8), (8, 16))


def initial_weights() -> dict[str, np.ndarray]:
  """The trainable parameters by name (the names tinyspec.nn.state.get_state_dict gives the example's CNN), from one seed."""
  rng = np.random.default_rng(0)
  w = {}
  for i, (cin, cout) in enumerate(CHANNELS, start=1):
    w[f"conv{i}.weight"] = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(9 * cin)).astype(np.float32)
    w[f"conv{i}.bias"] = np.zeros(cout, np.float32)
    w[f"bn{i}.weight"], w[f"bn{i}.bias"] = np.ones(cout, np.float32), np.zeros(cout, np.float32)
  w["fc.weight"] = (rng.standard_normal((len(cnn.CLASSES), 16 * (cnn.SIZE // 4) ** 2)) / 16).astype(np.float32)
  w["fc.bias"] = np.zeros(len(cnn.CLASSES), np.float32)
  return w

def batches(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
  """n (images, labels) batches of the example's generated data, the same for every system."""
  rng = np.random.default_rng(1)
  return [cnn.images(BATCH, rng) for _ in range(n)]

def numpy_loss(w: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
  """The model's mean cross-entropy on one batch in training mode (BatchNorm over the batch), in float64 numpy."""
  h = x.astype(np.float64)
  for i in (1, 2):
    k, b = w[f"conv{i}.weight"].astype(np.float64), w[f"conv{i}.bias"]
    p = np.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(2, 3))  # (n, cin, H, W, 3, 3)
    h = np.einsum("nchwij,ocij->nohw", windows, k) + b[None, :, None, None]
    mean, var = h.mean((0, 2, 3), keepdims=True), h.var((0, 2, 3), keepdims=True)
    h = (h - mean) / np.sqrt(var + EPS) * w[f"bn{i}.weight"][None, :, None, None] + w[f"bn{i}.bias"][None, :, None, None]
    h = np.maximum(h, 0)
    n, c, hh, ww = h.shape
    h = h.reshape(n, c, hh // 2, 2, ww // 2, 2).max((3, 5))
  logits = h.reshape(len(h), -1) @ w["fc.weight"].T + w["fc.bias"]
  logits = logits - logits.max(-1, keepdims=True)
  logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  return float(-logp[np.arange(len(y)), y].mean())

def tinyspec_step(device: str):
  """examples/cnn.py's CNN and training step (TinyJit, Adam), from the initial weights: returns step(x, y) -> loss."""
  from tinyspec import Tensor
  from tinyspec.nn import optim, state
  model = cnn.CNN(device)
  state.load_state_dict(model, {k: Tensor(v, device=device) for k, v in initial_weights().items()}, strict=False)
  train_step = cnn.training_step(model, optim.Adam([t for k, t in state.get_state_dict(model).items() if k in initial_weights()], lr=LR))
  return lambda x, y: train_step(Tensor(x, device=device), Tensor(y, device=device)).item()

def torch_step(device: str):
  """The same model in PyTorch (same module names, so the same state dict), eager, Adam: returns step(x, y) -> loss."""
  import torch
  from torch import nn
  torch.set_num_threads(2)

  class CNN(nn.Module):
    def __init__(self):
      super().__init__()
      self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8)
      self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
      self.fc = nn.Linear(16 * (cnn.SIZE // 4) ** 2, len(cnn.CLASSES))
    def forward(self, x):
      x = nn.functional.max_pool2d(self.bn1(self.conv1(x)).relu(), 2)
      x = nn.functional.max_pool2d(self.bn2(self.conv2(x)).relu(), 2)
      return self.fc(x.flatten(1))

  model = CNN().train()
  model.load_state_dict({k: torch.from_numpy(v) for k, v in initial_weights().items()}, strict=False)
  opt = torch.optim.Adam(model.parameters(), lr=LR)
  def step(x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y).long())
    loss.backward()
    opt.step()
    return loss.item()
  return step

STEPS = {"tinyspec": tinyspec_step, "torch": torch_step}

def measure(lib: str, device: str, steps: int) -> float:
  """Median seconds per training step of `lib` after training.WARMUP untimed ones; raises if the first loss is not numpy's."""
  data = batches(training.WARMUP + steps)
  return training.median_step(STEPS[lib](device), data, numpy_loss(initial_weights(), *data[0]))

def main() -> int: return training.main(__doc__, list(STEPS), measure, BATCH, "images/s", 50)

if __name__ == "__main__":
  raise SystemExit(main())
