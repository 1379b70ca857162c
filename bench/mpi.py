"""tinyspec.distributed on MPI, measured on this machine: all_reduce of float32 tensors from 1 KB to 64 MB on 2 ranks, next to
raw mpi4py `Allreduce` on numpy arrays in the same processes, then the samples/s of data-parallel training of the demo's
MLP on 2 ranks of one thread each against one single-threaded process.

    python3 bench/mpi.py                 # starts the ranks itself with mpiexec; prints markdown tables
    python3 bench/mpi.py --quick         # fewer repeats, sizes up to 4 MB, a shorter training run

Needs tinyspec-mpi (`pip install './plugins/tinyspec-mpi[mpich]'`) and the CPU plugin. Times are medians over repeats, each
repeat started together on both ranks (a barrier) and timed on rank 0, the systems in turns; training speed is the
median step's. Every result is checked against numpy's."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SIZES = [2**10 * 4**k for k in range(9)]  # bytes: 1 KB .. 64 MB
ROOT = Path(__file__).resolve().parent.parent


def _repeats(nbytes: int, quick: bool) -> int:
  return max(5, min(2000, int(2e8 // max(nbytes, 1)))) // (4 if quick else 1) or 3

def _median_times(fns: list, repeats: int, comm) -> list[float]:
  """The median time of each of `fns`, taken in turns (fn 0, fn 1, ..., fn 0, ...) so that load from elsewhere on the
  machine falls on all of them alike; every call starts on both ranks together (a barrier)."""
  times: list[list[float]] = [[] for _ in fns]
  for _ in range(repeats):
    for fn, spent in zip(fns, times):
      comm.Barrier()
      t0 = time.perf_counter()
      fn()
      spent.append(time.perf_counter() - t0)
  return [float(np.median(spent)) for spent in times]

def rank_allreduce(quick: bool) -> None:
  """On every rank: time both for every size; rank 0 prints the rows as JSON."""
  from tinyspec import Tensor
  from tinyspec import distributed as dist
  dist.init(world_size=2)  # initializes MPI (before mpi4py.MPI is imported here, so a failed rank exits without MPI_Finalize)
  from mpi4py import MPI
  comm, rank = MPI.COMM_WORLD, dist.rank()
  rows = []
  for nbytes in SIZES if not quick else SIZES[:7]:
    n = nbytes // 4
    mine = np.full(n, rank + 1, np.float32)
    out = np.empty_like(mine)
    t, into = Tensor(mine).realize(), Tensor.empty(n).realize()
    check = dist.all_reduce(t).numpy()
    comm.Allreduce(mine, out)
    dist.all_reduce(t, out=into)
    assert (check == 3).all() and (out == 3).all() and (into.numpy() == 3).all(), "all_reduce result differs from numpy's 1 + 2"
    reps = _repeats(nbytes, quick)
    fns = [lambda: comm.Allreduce(mine, out), lambda: dist.all_reduce(t), lambda: dist.all_reduce(t, out=into)]  # noqa: B023
    raw, ours, ours_out = _median_times(fns, reps, comm)
    rows.append({"bytes": nbytes, "mpi4py_s": raw, "tinyspec_s": ours, "tinyspec_out_s": ours_out, "repeats": reps})
  if rank == 0: print("ROWS " + json.dumps(rows), flush=True)

def rank_training(steps: int, points: int, hidden: int, independent: bool) -> None:
  """Train the demo's MLP on a global batch of `points` split over the ranks (alone: all of it); rank 0 prints samples/s.
  `independent`: the ranks do not average their gradients, each trains alone on its share: what the machine allows two
  processes at once, with no communication (the ceiling for the data-parallel run)."""
  from tinyspec import Tensor
  from tinyspec import distributed as dist
  from tinyspec.demo import MLP, spirals
  from tinyspec.nn.optim import Adam
  from tinyspec.nn.state import get_parameters
  dist.init()
  rank, n = dist.rank(), dist.world_size()
  x, y = spirals(points, np.random.default_rng(0))
  part = slice(rank * points // n, (rank + 1) * points // n)
  xs, onehot = Tensor(x[part]), Tensor(np.eye(2, dtype=np.float32)[y[part]])
  Tensor.manual_seed(0)
  model = MLP(hidden)
  opt = Adam(get_parameters(model), lr=0.02)
  dp = dist.DataParallel(opt) if n > 1 and not independent else None
  def step() -> float:
    opt.zero_grad()
    loss = -(model(xs).log_softmax(-1) * onehot).sum(-1).mean()
    loss.backward()
    if dp is None:
      Tensor.realize(loss, *opt.schedule_step())
      return loss.item()
    mean = dp.average_gradients(loss)
    opt.step()
    return mean
  for _ in range(3): step()  # compiles every kernel
  spent = []
  for _ in range(steps):
    dist.barrier()
    t0 = time.perf_counter()
    loss = step()
    dist.barrier()  # a step is done when every rank is
    spent.append(time.perf_counter() - t0)
  # the median step: a step that other work on the machine preempted does not count
  if rank == 0: print("TRAIN " + json.dumps({"ranks": n, "samples_per_s": points / float(np.median(spent)), "loss": loss}), flush=True)

# ---- the launcher ----

def _mpiexec() -> str:
  beside = Path(sys.executable).parent / "mpiexec"
  return str(beside) if beside.exists() else "mpiexec"

def _run(cmd: list[str], tag: str, threads: int = 1) -> str:
  env = {**os.environ, "TINYSPEC_CPU_THREADS": str(threads)}
  done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
  if done.returncode != 0: sys.exit(f"bench/mpi.py: {' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
  return next(line[len(tag) + 1:] for line in done.stdout.splitlines() if line.startswith(tag + " "))

def _fmt_size(n: int) -> str: return f"{n >> 20} MB" if n >= 2**20 else f"{n >> 10} KB"
def _fmt_time(s: float) -> str: return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"

def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--quick", action="store_true", help="fewer repeats, sizes up to 4 MB, a shorter training run")
  parser.add_argument("--rank", choices=["allreduce", "train", "independent"], help=argparse.SUPPRESS)  # what a rank started by the launcher runs
  parser.add_argument("--steps", type=int, default=None)
  parser.add_argument("--points", type=int, default=16384)
  parser.add_argument("--hidden", type=int, default=256)
  args = parser.parse_args()
  steps = args.steps or (10 if args.quick else 30)
  if args.rank == "allreduce": return rank_allreduce(args.quick)
  if args.rank in ("train", "independent"): return rank_training(steps, args.points, args.hidden, args.rank == "independent")

  me = [sys.executable, str(Path(__file__).resolve())] + (["--quick"] if args.quick else [])
  rows = json.loads(_run([_mpiexec(), "-n", "2", *me, "--rank", "allreduce"], "ROWS"))
  print("all_reduce (sum) of float32 on 2 ranks, this machine: median time per call, bandwidth (bytes / time), and tinyspec's")
  print("bandwidth as a fraction of mpi4py's; `all_reduce(t)` returns a new tensor, `all_reduce(t, out=o)` writes into a given one\n")
  print("| size | mpi4py Allreduce | all_reduce(t) | all_reduce(t, out=o) | mpi4py GB/s | all_reduce(t) GB/s | ratio | out=o ratio |")
  print("|---|---|---|---|---|---|---|---|")
  for r in rows:
    raw, new, into = r["mpi4py_s"], r["tinyspec_s"], r["tinyspec_out_s"]
    print(f"| {_fmt_size(r['bytes'])} | {_fmt_time(raw)} | {_fmt_time(new)} | {_fmt_time(into)} | {r['bytes'] / raw / 1e9:.3f} | "
          f"{r['bytes'] / new / 1e9:.3f} | {raw / new:.2f}x | {raw / into:.2f}x |")
  train = ["--steps", str(steps), "--points", str(args.points), "--hidden", str(args.hidden)]
  alone = json.loads(_run([*me, "--rank", "train", *train], "TRAIN"))
  both = json.loads(_run([_mpiexec(), "-n", "2", *me, "--rank", "train", *train], "TRAIN"))
  apart = json.loads(_run([_mpiexec(), "-n", "2", *me, "--rank", "independent", *train], "TRAIN"))
  print(f"\ndata-parallel training of the demo's MLP (hidden {args.hidden}, Adam, global batch {args.points}, {steps} steps), "
        "one CPU thread per process\n")
  print("| run | samples/s | speedup |")
  print("|---|---|---|")
  print(f"| 1 process | {alone['samples_per_s']:.0f} | 1.00x |")
  print(f"| 2 ranks (DataParallel) | {both['samples_per_s']:.0f} | {both['samples_per_s'] / alone['samples_per_s']:.2f}x |")
  print(f"| 2 ranks each alone on its half, no communication (this machine's ceiling now) | {apart['samples_per_s']:.0f} | "
        f"{apart['samples_per_s'] / alone['samples_per_s']:.2f}x |")

if __name__ == "__main__":
  main()
