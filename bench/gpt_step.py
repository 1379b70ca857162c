"""One training step of examples/gpt.py's model (token and position embeddings, 2 pre-norm blocks of RMSNorm, causal
attention and a GELU MLP, dim 64, a 64-token context, batches of 16, AdamW), in tinyspec as the example runs it (under
TinyJit) and in PyTorch eager with the same architecture, parameter names, initial weights and batches.

bench/run.py measures it as its "gpt" row (tokens per second); run on its own it prints both systems' step times and
losses: python bench/gpt_step.py [--steps 30] [--device CPU]. Each system's first loss (before any update) is checked
against a numpy forward pass of the same weights, so both provably train the same model."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import training  # bench/training.py: the timing and the command line both training benches share

VOCAB, CONTEXT, DIM, HEADS, LAYERS, BATCH, LR = 80, 64, 64, 4, 2, 16, 3e-3
TOKENS = BATCH * CONTEXT  # per step


def initial_weights() -> dict[str, np.ndarray]:
  """The model's parameters by name (the names tinyspec.nn.state.get_state_dict gives the example's GPT), from one seed."""
  rng = np.random.default_rng(0)
  def normal(*shape: int, scale: float) -> np.ndarray: return (rng.standard_normal(shape) * scale).astype(np.float32)
  w = {"tokens.weight": normal(VOCAB, DIM, scale=1.0), "positions.weight": normal(CONTEXT, DIM, scale=1.0)}
  for i in range(LAYERS):
    p = f"blocks.{i}."
    w[p + "norm1.weight"], w[p + "norm2.weight"] = np.ones(DIM, np.float32), np.ones(DIM, np.float32)
    for name in ("q", "k", "v", "proj"): w[p + name + ".weight"] = normal(DIM, DIM, scale=DIM ** -0.5)
    w[p + "up.weight"], w[p + "up.bias"] = normal(4 * DIM, DIM, scale=DIM ** -0.5), np.zeros(4 * DIM, np.float32)
    w[p + "down.weight"], w[p + "down.bias"] = normal(DIM, 4 * DIM, scale=(4 * DIM) ** -0.5), np.zeros(DIM, np.float32)
  w["norm.weight"], w["head.weight"] = np.ones(DIM, np.float32), normal(VOCAB, DIM, scale=DIM ** -0.5)
  return w

def batches(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
  """n (inputs, next-token targets) pairs of random token sequences, the same for every system."""
  rng = np.random.default_rng(1)
  seqs = [rng.integers(0, VOCAB, (BATCH, CONTEXT + 1)).astype(np.int32) for _ in range(n)]
  return [(s[:, :-1].copy(), s[:, 1:].copy()) for s in seqs]

def numpy_loss(w: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
  """The model's mean cross-entropy on one batch, in float64 numpy: the reference both systems' first loss must match."""
  w = {k: v.astype(np.float64) for k, v in w.items()}
  eps = float(np.finfo(np.float32).eps)  # RMSNorm's default eps for float32 inputs, in both libraries
  def rms(h, g): return h / np.sqrt((h * h).mean(-1, keepdims=True) + eps) * g
  erf = np.vectorize(math.erf)
  h = w["tokens.weight"][x] + w["positions.weight"][np.arange(CONTEXT)]
  causal = np.tril(np.ones((CONTEXT, CONTEXT), bool))
  for i in range(LAYERS):
    p, a = f"blocks.{i}.", rms(h, w[f"blocks.{i}.norm1.weight"])
    q, k, v = ((a @ w[p + n + ".weight"].T).reshape(BATCH, CONTEXT, HEADS, -1).transpose(0, 2, 1, 3) for n in "qkv")
    att = np.where(causal, q @ k.transpose(0, 1, 3, 2) / math.sqrt(DIM // HEADS), -np.inf)
    att = np.exp(att - att.max(-1, keepdims=True))
    out = (att / att.sum(-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(BATCH, CONTEXT, DIM)
    h = h + out @ w[p + "proj.weight"].T
    u = rms(h, w[p + "norm2.weight"]) @ w[p + "up.weight"].T + w[p + "up.bias"]
    h = h + (0.5 * u * (1 + erf(u / math.sqrt(2)))) @ w[p + "down.weight"].T + w[p + "down.bias"]
  logits = rms(h, w["norm.weight"]) @ w["head.weight"].T
  logits = logits - logits.max(-1, keepdims=True)
  logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  return float(-np.take_along_axis(logp, y[..., None].astype(np.int64), -1).mean())

def tinyspec_step(device: str):
  """examples/gpt.py's GPT and training step (TinyJit, AdamW), from the initial weights: returns step(x, y) -> loss."""
  sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
  import gpt
  from tinyspec import Tensor
  from tinyspec.nn import optim, state
  model = gpt.GPT(VOCAB, CONTEXT, DIM, HEADS, LAYERS, device)
  state.load_state_dict(model, {k: Tensor(v, device=device) for k, v in initial_weights().items()})
  train_step = gpt.training_step(model, optim.AdamW(state.get_parameters(model), lr=LR, weight_decay=0.01))
  return lambda x, y: train_step(Tensor(x, device=device), Tensor(y, device=device)).item()

def torch_step(device: str):
  """The same model in PyTorch (same module names, so the same state dict), eager, AdamW: returns step(x, y) -> loss."""
  import torch
  from torch import nn
  torch.set_num_threads(2)

  class Block(nn.Module):
    def __init__(self):
      super().__init__()
      self.norm1, self.norm2 = nn.RMSNorm(DIM), nn.RMSNorm(DIM)
      self.q, self.k, self.v, self.proj = (nn.Linear(DIM, DIM, bias=False) for _ in range(4))
      self.up, self.down = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)
    def forward(self, x):
      b, t, c = x.shape
      h = self.norm1(x)
      q, k, v = (f(h).reshape(b, t, HEADS, c // HEADS).transpose(1, 2) for f in (self.q, self.k, self.v))
      x = x + self.proj(nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c))
      return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))

  class GPT(nn.Module):
    def __init__(self):
      super().__init__()
      self.tokens, self.positions = nn.Embedding(VOCAB, DIM), nn.Embedding(CONTEXT, DIM)
      self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
      self.norm, self.head = nn.RMSNorm(DIM), nn.Linear(DIM, VOCAB, bias=False)
    def forward(self, idx):
      x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1]))
      for block in self.blocks: x = block(x)
      return self.head(self.norm(x))

  model = GPT()
  model.load_state_dict({k: torch.from_numpy(v) for k, v in initial_weights().items()})
  opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
  def step(x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(torch.from_numpy(x).long()).reshape(-1, VOCAB), torch.from_numpy(y).long().reshape(-1))
    loss.backward()
    opt.step()
    return loss.item()
  return step

STEPS = {"tinyspec": tinyspec_step, "torch": torch_step}

def measure(lib: str, device: str, steps: int) -> float:
  """Median seconds per training step of `lib` after training.WARMUP untimed ones; raises if the first loss is not numpy's."""
  data = batches(training.WARMUP + steps)
  return training.median_step(STEPS[lib](device), data, numpy_loss(initial_weights(), *data[0]))

def main() -> int: return training.main(__doc__, list(STEPS), measure, TOKENS / 1e3, "k tokens/s", 30)

if __name__ == "__main__":
  raise SystemExit(main())
