"""Dispatch cost of a small fused expression, `((a+b)*c).sum()` on 1000 floats, side by side with tinygrad where installed.

first call: building the graph, scheduling, lowering, compiling and running, in a fresh process (nothing cached in memory);
steady: the same expression on new data of the same shapes, so the schedule cache answers (median of --repeat calls);
jit: the same steady call through TinyJit (its replays, after the run and the capture).
Each system and device runs in its own process. Run: python bench/dispatch.py [--repeat 200] [--devices PYTHON]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

N = 1000

def measure_tinyspec(device: str, repeat: int) -> dict[str, float]:
  from tinyspec import Tensor
  from tinyspec.engine.realize import stats
  data = [np.random.default_rng(i).standard_normal((3, N), dtype=np.float32) for i in range(repeat + 1)]
  ins = [[Tensor(x, device=device).realize() for x in d] for d in data]
  t0 = time.perf_counter()
  out = ((ins[0][0] + ins[0][1]) * ins[0][2]).sum().realize()
  first = time.perf_counter() - t0
  expect = float(((data[0][0] + data[0][1]) * data[0][2]).sum())
  assert abs(out.item() - expect) < 1e-3 * max(1.0, abs(expect)), (out.item(), expect)
  compiled = stats["kernels_compiled"]
  times = []
  for a, b, c in ins[1:]:
    t0 = time.perf_counter()
    ((a + b) * c).sum().realize()
    times.append(time.perf_counter() - t0)
  assert stats["kernels_compiled"] == compiled, "the steady state recompiled"
  from tinyspec import TinyJit
  return {"first": first, "steady": statistics.median(times), "jit": jit_steady(TinyJit, ins, data), "kernels": compiled}

def jit_steady(jit, ins: list, data: list) -> float:
  """The median time of a TinyJit-wrapped call of the expression on new data (its first two calls, run and capture, untimed),
  the replays' results checked against numpy."""
  f = jit(lambda a, b, c: ((a + b) * c).sum())
  times = []
  for i, (a, b, c) in enumerate(ins):
    t0 = time.perf_counter()
    out = f(a, b, c)
    times.append(time.perf_counter() - t0)
    if i in (2, len(ins) - 1):
      expect = float(((data[i][0] + data[i][1]) * data[i][2]).sum())
      assert abs(out.item() - expect) < 1e-3 * max(1.0, abs(expect)), (out.item(), expect)
  return statistics.median(times[2:])

def measure_tinygrad(device: str, repeat: int) -> dict[str, float]:
  os.environ["DEV"] = device
  from tinygrad import Tensor
  data = [np.random.default_rng(i).standard_normal((3, N), dtype=np.float32) for i in range(repeat + 1)]
  ins = [[Tensor(x).realize() for x in d] for d in data]
  t0 = time.perf_counter()
  out = ((ins[0][0] + ins[0][1]) * ins[0][2]).sum().realize()
  first = time.perf_counter() - t0
  expect = float(((data[0][0] + data[0][1]) * data[0][2]).sum())
  assert abs(out.item() - expect) < 1e-3 * max(1.0, abs(expect)), (out.item(), expect)
  times = []
  for a, b, c in ins[1:]:
    t0 = time.perf_counter()
    ((a + b) * c).sum().realize()
    times.append(time.perf_counter() - t0)
  from tinygrad import TinyJit
  return {"first": first, "steady": statistics.median(times), "jit": jit_steady(TinyJit, ins, data), "kernels": -1}

MEASURE = {"tinyspec": measure_tinyspec, "tinygrad": measure_tinygrad}

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=200)
  ap.add_argument("--devices", default="PYTHON", help="comma-separated tinyspec devices to measure (tinygrad: the same names)")
  ap.add_argument("--system", choices=list(MEASURE), help=argparse.SUPPRESS)
  ap.add_argument("--device", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.system:
    print(json.dumps(MEASURE[args.system](args.device, args.repeat)))
    return 0
  rows = []
  for device in args.devices.split(","):
    for system in MEASURE:
      if system == "tinygrad" and importlib.util.find_spec("tinygrad") is None: print("tinygrad not installed: left out"); continue
      if system == "tinygrad" and device == "CPU" and shutil.which("clang") is None: print("tinygrad CPU needs clang: left out"); continue
      print(f"measuring {system} on {device} ...", file=sys.stderr, flush=True)
      out = subprocess.run([sys.executable, __file__, "--system", system, "--device", device, "--repeat", str(args.repeat)],
                           capture_output=True, text=True)
      if out.returncode != 0: print(f"{system} on {device} failed:\n{out.stderr[-2000:]}"); continue
      rows.append((system, device, json.loads(out.stdout.strip().splitlines()[-1])))
  print(f"((a+b)*c).sum() on {N} float32; python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores;"
        f" steady = median of {args.repeat} calls on new data")
  print(f"{'system':<10s} {'device':<8s} {'first call ms':>14s} {'steady us/call':>15s} {'TinyJit us/call':>16s} {'kernels compiled':>17s}")
  for system, device, r in rows:
    print(f"{system:<10s} {device:<8s} {r['first'] * 1e3:>14.2f} {r['steady'] * 1e6:>15.1f} {r['jit'] * 1e6:>16.1f} "
          f"{r['kernels'] if r['kernels'] >= 0 else '-':>17}")
  return 0

if __name__ == "__main__":
  raise SystemExit(main())
