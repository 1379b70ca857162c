"""A training step of the demo's MLP (2 -> 64 -> 64 -> 2, ReLU, log-softmax cross-entropy, full-batch Adam on 1000
points), side by side: tinyspec as the demo runs it, tinyspec under TinyJit, and PyTorch eager where installed. Each in a
process of its own; the figure is the median step time after 5 warm-up steps, and every system's loss after the steps is
printed (the same data and initial weights, so they should agree). Run: python bench/train_step.py [--steps 100] [--device CPU]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time

import numpy as np

HIDDEN, POINTS, LR, WARMUP = 64, 1000, 0.02, 5

def problem() -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
  """Inputs, one-hot targets, and the three layers' initial (weight, bias) arrays, from one seed."""
  rng = np.random.default_rng(0)
  x = rng.standard_normal((POINTS, 2)).astype(np.float32)
  onehot = np.eye(2, dtype=np.float32)[(x[:, 0] * x[:, 1] > 0).astype(np.int64)]
  sizes = [(2, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, 2)]
  weights = [a for i, o in sizes for a in ((rng.uniform(-1, 1, (o, i)) / np.sqrt(i)).astype(np.float32), np.zeros(o, np.float32))]
  return x, onehot, weights

def tinyspec_step(device: str, jit: bool):
  from tinyspec import Tensor, TinyJit
  from tinyspec.nn.optim import Adam
  x, onehot, weights = problem()
  params = [Tensor(w, device=device, requires_grad=True) for w in weights]
  opt = Adam(params, lr=LR)
  xs, ys = Tensor(x, device=device), Tensor(onehot, device=device)
  def step(xs, ys):
    opt.zero_grad()
    h = xs
    for i in range(0, 6, 2):
      h = h.linear(params[i], params[i + 1])
      if i < 4: h = h.relu()
    loss = -(h.log_softmax(-1) * ys).sum(-1).mean()
    loss.backward()
    Tensor.realize(loss, *opt.schedule_step())
    return loss
  run = TinyJit(step) if jit else step
  return lambda: run(xs, ys).item()

def torch_step(device: str, jit: bool):
  import torch
  torch.set_num_threads(2)
  x, onehot, weights = problem()
  params = [torch.tensor(w, requires_grad=True) for w in weights]
  opt = torch.optim.Adam(params, lr=LR)
  xs, ys = torch.tensor(x), torch.tensor(onehot)
  def step():
    opt.zero_grad()
    h = xs
    for i in range(0, 6, 2):
      h = torch.nn.functional.linear(h, params[i], params[i + 1])
      if i < 4: h = h.relu()
    loss = -(h.log_softmax(-1) * ys).sum(-1).mean()
    loss.backward()
    opt.step()
    return loss.item()
  return step

SYSTEMS = {"tinyspec": lambda d: tinyspec_step(d, False), "tinyspec+TinyJit": lambda d: tinyspec_step(d, True),
           "torch": lambda d: torch_step(d, False)}

def measure(system: str, device: str, steps: int) -> dict:
  step = SYSTEMS[system](device)
  for _ in range(WARMUP): step()
  times, loss = [], 0.0
  for _ in range(steps):
    t0 = time.perf_counter()
    loss = step()
    times.append(time.perf_counter() - t0)
  return {"step": statistics.median(times), "loss": loss}

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--steps", type=int, default=100)
  ap.add_argument("--device", default="CPU")
  ap.add_argument("--system", choices=list(SYSTEMS), help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.system:
    print(json.dumps(measure(args.system, args.device, args.steps)))
    return 0
  rows = []
  for system in SYSTEMS:
    if system == "torch" and importlib.util.find_spec("torch") is None: print("torch not installed: left out"); continue
    out = subprocess.run([sys.executable, __file__, "--system", system, "--device", args.device, "--steps", str(args.steps)],
                         capture_output=True, text=True)
    if out.returncode != 0: print(f"{system} failed:\n{out.stderr[-2000:]}"); continue
    rows.append((system, json.loads(out.stdout.strip().splitlines()[-1])))
  torch_time = next((r["step"] for s, r in rows if s == "torch"), None)
  print(f"demo MLP training step, {POINTS} points, hidden {HIDDEN}, Adam; median of {args.steps} steps after {WARMUP} warm-up ({args.device})")
  print(f"{'system':<18s} {'ms/step':>8s} {'x torch':>8s} {'loss after':>11s}")
  for system, r in rows:
    ratio = f"{torch_time / r['step']:.2f}x" if torch_time else "-"
    print(f"{system:<18s} {r['step'] * 1e3:>8.2f} {ratio:>8s} {r['loss']:>11.5f}")
  return 0

if __name__ == "__main__":
  raise SystemExit(main())
