"""A character-level GPT trained on tinyspec's own documentation, then sampled from.

Token and position embeddings, pre-norm transformer blocks (RMSNorm, causal multi-head attention through
`scaled_dot_product_attention`, a GELU MLP), AdamW with a linear warmup and a cosine decay, the training step captured
by TinyJit. At the end it saves the weights as safetensors, loads them into a fresh model, checks that both give the same
logits, and prints a sample. The text is the project's docs/*.md (and README.md): nothing is downloaded.

    python examples/gpt.py [--steps 300] [--device CPU] [--checkpoint gpt.safetensors]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

import numpy as np
from tinyspec import Tensor, TinyJit, nn
from tinyspec.nn import optim, state
from tinyspec.nn.optim import lr_scheduler
from tqdm import tqdm

ROOT = pathlib.Path(__file__).resolve().parents[1]


def corpus() -> str:
  """The text it learns: the docs this repository carries."""
  files = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
  return "\n\n".join(f.read_text(encoding="utf-8") for f in files if f.exists())


class Block:
  """x + attention(norm(x)), then + mlp(norm(x))."""
  def __init__(self, dim: int, heads: int, device: str | None):
    self.heads = heads
    self.norm1, self.norm2 = nn.RMSNorm(dim, device=device), nn.RMSNorm(dim, device=device)
    self.q, self.k, self.v = (nn.Linear(dim, dim, bias=False, device=device) for _ in range(3))
    self.proj = nn.Linear(dim, dim, bias=False, device=device)
    self.up, self.down = nn.Linear(dim, 4 * dim, device=device), nn.Linear(4 * dim, dim, device=device)

  def __call__(self, x: Tensor) -> Tensor:
    b, t, c = x.shape
    h = self.norm1(x)
    q, k, v = (f(h).reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for f in (self.q, self.k, self.v))  # (b, heads, t, c/heads)
    att = q.scaled_dot_product_attention(k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
    x = x + self.proj(att)
    return x + self.down(self.up(self.norm2(x)).gelu(approximate="none"))


class GPT:
  def __init__(self, vocab: int, context: int, dim: int, heads: int, layers: int, device: str | None = None):
    self.context = context
    self.tokens, self.positions = nn.Embedding(vocab, dim, device=device), nn.Embedding(context, dim, device=device)
    self.blocks = [Block(dim, heads, device) for _ in range(layers)]
    self.norm, self.head = nn.RMSNorm(dim, device=device), nn.Linear(dim, vocab, bias=False, device=device)

  def __call__(self, idx: Tensor) -> Tensor:
    x = self.tokens(idx) + self.positions(Tensor.arange(idx.shape[1], device=idx.device))
    for block in self.blocks: x = block(x)
    return self.head(self.norm(x))


def training_step(model: GPT, opt: optim.Optimizer) -> TinyJit:
  """One step of next-token training: cross-entropy over every position, backward, update; captured by TinyJit. Called
  with (tokens, next tokens), it returns the loss before the update."""
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    logits = model(x)
    loss = logits.reshape(-1, logits.shape[-1]).cross_entropy(y.reshape(-1))
    loss.backward()
    opt.step()
    return loss
  return step


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--steps", type=int, default=300, help="training steps")
  ap.add_argument("--batch", type=int, default=16)
  ap.add_argument("--context", type=int, default=64, help="characters per training sequence")
  ap.add_argument("--dim", type=int, default=64)
  ap.add_argument("--layers", type=int, default=2)
  ap.add_argument("--heads", type=int, default=4)
  ap.add_argument("--sample", type=int, default=200, help="characters to generate at the end")
  ap.add_argument("--device", default=None, help="device to run on (default: tinyspec's default device)")
  ap.add_argument("--checkpoint", default=None, help="where to save the weights (default: a temporary file)")
  ap.add_argument("--seed", type=int, default=0)
  args = ap.parse_args(argv)
  if args.steps < 1 or args.dim % args.heads: ap.error("--steps must be >= 1 and --dim a multiple of --heads")
  text = corpus()
  chars = sorted(set(text))
  data = np.array([chars.index(c) for c in text], np.int32)
  rng = np.random.default_rng(args.seed)
  Tensor.manual_seed(args.seed)
  model = GPT(len(chars), args.context, args.dim, args.heads, args.layers, args.device)
  params = state.get_parameters(model)
  opt = optim.AdamW(params, lr=3e-3, weight_decay=0.01)
  warmup = max(1, args.steps // 10)
  schedule = lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=warmup)

  train_step = training_step(model, opt)
  print(f"gpt: {len(text)} characters of docs, {len(chars)} distinct; {sum(p.numel() for p in params)} parameters; "
        f"{args.steps} steps of {args.batch} x {args.context} on {args.device or 'the default device'}", flush=True)
  start, losses = time.perf_counter(), []
  bar = tqdm(range(args.steps), desc="training", unit="step", file=sys.stderr, mininterval=0.2 if sys.stderr.isatty() else 2.0)
  for step in bar:
    if step == warmup: schedule = lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, args.steps - warmup), eta_min=3e-4)
    at = rng.integers(0, len(data) - args.context - 1, args.batch)
    x = np.stack([data[i:i + args.context] for i in at])
    y = np.stack([data[i + 1:i + args.context + 1] for i in at])
    losses.append(train_step(Tensor(x, device=args.device), Tensor(y, device=args.device)).item())
    schedule.step()
    bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
  seconds = time.perf_counter() - start
  tokens = args.steps * args.batch * args.context
  print(f"loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.3f} (mean of the last 10 steps); {seconds:.1f} s, {tokens / seconds:.0f} tokens/s")

  path = args.checkpoint or str(pathlib.Path(tempfile.mkdtemp(prefix="tinyspec-gpt-")) / "gpt.safetensors")
  state.safe_save(state.get_state_dict(model), path)
  restored = GPT(len(chars), args.context, args.dim, args.heads, args.layers, args.device)
  state.load_state_dict(restored, state.safe_load(path, device=args.device))
  probe = Tensor(data[None, :args.context], device=args.device)
  same = np.allclose(model(probe).numpy(), restored(probe).numpy(), rtol=1e-5, atol=1e-5)
  print(f"checkpoint: {path} saved and reloaded; the reloaded model gives {'the same' if same else 'DIFFERENT'} logits")

  out = list(data[:args.context])
  for _ in range(args.sample):  # sampling: the last `context` characters in, one character out
    logits = restored(Tensor(np.array([out[-args.context:]], np.int32), device=args.device))[0, -1].numpy().astype(np.float64)
    p = np.exp(logits - logits.max())
    out.append(int(rng.choice(len(chars), p=p / p.sum())))
  print("sample:\n" + "".join(chars[i] for i in out[args.context:]))
  return 0 if same and np.isfinite(losses).all() else 1


if __name__ == "__main__":
  sys.exit(main())
