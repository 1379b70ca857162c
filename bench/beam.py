"""BEAM search's targets, side by side in one run: matmul 1024 on each device with the heuristic's opts and with BEAM=2
(the first run, which searches, and a second run on the same cache, which should search nothing), next to numpy and,
with --tinygrad, tinygrad's BEAM=2 (which takes minutes: 105 s on CPU and 522 s on PoCL when last measured).

Every figure comes from a fresh process with a compile cache of its own (a temporary directory); GFLOP/s are medians of
timed calls after the first (as bench/run.py times them), and every result is checked against numpy's.

Run: python bench/beam.py [--devices CPU,OPENCL] [--tinygrad] [--width 2] [--output bench/BEAM.md]  (last run: bench/BEAM.md)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import run  # bench/run.py, next to this file: its Backend, timing and environment for tinygrad's CL device

N = 1024
FLOP = 2 * N**3

def measure(system: str, repeats: int) -> dict:
  """In this process: the first call's seconds, the median GFLOP/s after it, and (tinyspec) how many kernels were searched."""
  be = run.Backend(system)
  rng = np.random.default_rng(0)
  xs = [rng.standard_normal((N, N), dtype=np.float32) for _ in range(2)]
  args = [be.tensor(x) for x in xs]
  t0 = time.perf_counter()
  got = be.numpy(be.run("matmul", *args))
  first = time.perf_counter() - t0
  if not np.allclose(got, xs[0] @ xs[1], rtol=1e-3, atol=1e-3 * N**0.5): raise AssertionError(f"{system}: matmul differs from numpy's")
  out = {"first": first, "gflops": FLOP / run.timed(lambda: be.run("matmul", *args), repeats, settle=True) / 1e9}
  if be.lib == "tinyspec":
    from tinyspec.engine import search
    out["searched"] = search.stats["searched"]
  return out

def child(system: str, beam: int, cache: str, repeats: int) -> dict:
  """measure() in a fresh process with BEAM=beam (or unset) and `cache` as its compile cache."""
  env = run.cache_env(cache)
  env.pop("BEAM", None)
  if beam: env["BEAM"] = str(beam)
  if system == "tinygrad:CL": env["DEV"] = "CL"
  cmd = [sys.executable, __file__, "--child", system, "--repeats", str(repeats)]
  p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, timeout=1800)
  if p.returncode != 0: return {"error": f"exit {p.returncode}"}
  return json.loads(p.stdout.strip().splitlines()[-1])

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--devices", default="CPU,OPENCL")
  ap.add_argument("--width", type=int, default=2)
  ap.add_argument("--repeats", type=int, default=15)
  ap.add_argument("--tinygrad", action="store_true", help="also tinygrad's BEAM search (minutes)")
  ap.add_argument("--output", default="")
  ap.add_argument("--child", default="")
  a = ap.parse_args()
  if a.child:
    if a.child == "tinygrad:CL" and run.PYOPENCL_FIRST: __import__("pyopencl")
    print(json.dumps(measure(a.child, a.repeats)))
    return
  rows = [("numpy", "-", child("numpy", 0, tempfile.mkdtemp(), a.repeats))]
  for dev in a.devices.split(","):
    if (why := run.available(f"tinyspec:{dev}")) is not None: print(f"tinyspec:{dev}: {why}", file=sys.stderr); continue
    cache = tempfile.mkdtemp(prefix="tinyspec-beam-")
    print(f"measuring tinyspec:{dev} ...", file=sys.stderr, flush=True)
    rows.append((f"tinyspec:{dev}", "heuristic", child(f"tinyspec:{dev}", 0, tempfile.mkdtemp(), a.repeats)))
    rows.append((f"tinyspec:{dev}", f"BEAM={a.width}, first run", child(f"tinyspec:{dev}", a.width, cache, a.repeats)))
    rows.append((f"tinyspec:{dev}", f"BEAM={a.width}, second run", child(f"tinyspec:{dev}", a.width, cache, a.repeats)))
  if a.tinygrad:
    for dev in ("CPU", "CL"):
      if (why := run.available(f"tinygrad:{dev}")) is not None: print(f"tinygrad:{dev}: {why}", file=sys.stderr); continue
      print(f"measuring tinygrad:{dev} BEAM={a.width} (minutes) ...", file=sys.stderr, flush=True)
      rows.append((f"tinygrad:{dev}", f"BEAM={a.width}, first run", child(f"tinygrad:{dev}", a.width, tempfile.mkdtemp(), a.repeats)))
  base = rows[0][2].get("gflops")
  lines = [f"# BEAM search, matmul {N}x{N} float32 ({datetime.date.today()}, {run.cpu_model()}, {os.cpu_count()} cores)", "",
           "| system | opts | GFLOP/s | x numpy | first call (s, incl. search) | kernels searched |", "|---|---|---|---|---|---|"]
  for system, how, r in rows:
    if "error" in r: lines.append(f"| {system} | {how} | error: {r['error']} | | | |"); continue
    lines.append(f"| {system} | {how} | {r['gflops']:.0f} | {r['gflops'] / base:.2f}x | {r['first']:.1f} | {r.get('searched', '-')} |")
  text = "\n".join(lines) + "\n"
  print(text)
  if a.output:
    with open(a.output, "w") as f: f.write(text)

if __name__ == "__main__":
  main()
