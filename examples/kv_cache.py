"""A KV-cache decoding loop over a growing length, with symbolic shapes: one compile for every length.

Each step appends one key and value to fixed-size caches (`keys[pos:pos + 1] = x @ Wk`, written in place into the cache's
buffer) and attends over the first `pos + 1` rows. The length is a bound variable, `UOp.variable("pos", 0, MAX_LEN - 1).bind(k)`,
so the kernels are compiled once for the whole range and TinyJit replays them with the new value on each step. The result
of every step is checked against numpy.

    python examples/kv_cache.py [--steps 48] [--device CPU]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from tinyspec import Tensor, TinyJit
from tinyspec.engine import realize
from tinyspec.uop.uop import UOp

MAX_LEN, DIM = 64, 32


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--steps", type=int, default=48, help=f"decoding steps (at most {MAX_LEN})")
  ap.add_argument("--device", default=None, help="device to run on (default: tinyspec's default device)")
  args = ap.parse_args(argv)
  if not 1 <= args.steps <= MAX_LEN: ap.error(f"--steps must be in [1, {MAX_LEN}]")
  rng = np.random.default_rng(0)
  wq, wk, wv = (rng.standard_normal((DIM, DIM)).astype(np.float32) / DIM ** 0.5 for _ in range(3))
  Wq, Wk, Wv = (Tensor(w, device=args.device).realize() for w in (wq, wk, wv))
  keys, values = (Tensor.zeros(MAX_LEN, DIM, device=args.device).contiguous().realize() for _ in range(2))
  pos_var = UOp.variable("pos", 0, MAX_LEN - 1)

  @TinyJit
  def step(x: Tensor, pos: UOp) -> Tensor:
    """Append x's key and value at row `pos`, then attend from x's query over rows 0..pos."""
    keys[pos:pos + 1] = x @ Wk
    values[pos:pos + 1] = x @ Wv
    k, v = keys[:pos + 1], values[:pos + 1]
    return ((x @ Wq) @ k.T / DIM ** 0.5).softmax(-1) @ v

  ref_k, ref_v = np.zeros((MAX_LEN, DIM), np.float32), np.zeros((MAX_LEN, DIM), np.float32)
  x, worst, compiled = rng.standard_normal((1, DIM)).astype(np.float32), 0.0, []
  for i in range(args.steps):
    before = realize.stats["kernels_compiled"]
    out = step(Tensor(x, device=args.device), pos_var.bind(i)).numpy()
    compiled.append(realize.stats["kernels_compiled"] - before)
    ref_k[i], ref_v[i] = x @ wk, x @ wv
    s = (x @ wq) @ ref_k[:i + 1].T / DIM ** 0.5
    w = np.exp(s - s.max()); w /= w.sum()
    worst = max(worst, float(np.abs(out - w @ ref_v[:i + 1]).max()))
    x = np.tanh(out + x).astype(np.float32)  # the next step's input depends on this one's output
    print(f"\rstep {i + 1}/{args.steps}  length {i + 1}  kernels compiled this step {compiled[-1]}", end="", file=sys.stderr, flush=True)
  print(file=sys.stderr)
  print(f"{args.steps} steps: largest difference from numpy {worst:.2e}; kernels compiled on step 1: {compiled[0]}, "
        f"step 2: {compiled[1] if len(compiled) > 1 else 0}, after: {sum(compiled[2:])}")
  return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
  sys.exit(main())
