"""graph_rewrite throughput with the symbolic simplifier, side by side with tinygrad's `sym` where tinygrad is installed.

Graphs: (a) a sum of N terms ((x*4+y)//4 + (x*4+y)%4 + x*0 + y*1 - y) * k, each term over its own bounded variables;
(b) a chain a + 0 + 1 + ... + (N-1). Figures are input nodes per second of rewrite time (graph building not timed), medians of
several runs; every run builds fresh variables so no cached result is reused. Run: python bench/rewrite.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time


def tinyspec_api():
  from tinyspec.uop import UOp, graph_rewrite
  from tinyspec.uop.symbolic import sym
  return UOp.variable, lambda u: graph_rewrite(u, sym), lambda u: len(u.toposort())

def tinygrad_api():
  from tinygrad.uop.ops import UOp, graph_rewrite
  from tinygrad.uop.symbolic import sym
  return UOp.variable, lambda u: graph_rewrite(u, sym), lambda u: len(u.toposort())

def term_sum(variable, n: int, run: int):
  total = None
  for i in range(n):
    x, y, k = variable(f"x{run}_{i}", 0, 100), variable(f"y{run}_{i}", 0, 3), variable(f"k{run}_{i}", 1, 8)
    t = ((x * 4 + y) // 4 + (x * 4 + y) % 4 + x * 0 + y * 1 - y) * k
    total = t if total is None else total + t
  return total

def chain(variable, n: int, run: int):
  out = variable(f"a{run}", 0, 1000)
  for i in range(n): out = out + i
  return out

def measure(api, build, n: int, repeat: int) -> tuple[float, int]:
  """Median seconds to rewrite the graph, and its node count in this system's own IR."""
  variable, rewrite, count = api
  times, nodes = [], 0
  for run in range(repeat):
    g = build(variable, n, run)
    nodes = count(g)
    t0 = time.perf_counter()
    rewrite(g)
    times.append(time.perf_counter() - t0)
  return statistics.median(times), nodes

APIS = {"tinyspec": tinyspec_api, "tinygrad": tinygrad_api}
CASES = [("sum of 200 terms", term_sum, 200), ("sum of 1000 terms", term_sum, 1000),
         ("chain of 10k", chain, 10_000), ("chain of 100k", chain, 100_000)]

def run_one(system: str, repeat: int) -> dict[str, tuple[float, int]]:
  """Every case for one system, in this process."""
  sys.setrecursionlimit(max(sys.getrecursionlimit(), 1_000_000))  # tinygrad's own rewrite recurses on deep chains
  api = APIS[system]()
  # the 100k chain takes tinygrad over 10 s a run, so both systems get at most 3 runs of it
  return {label: measure(api, build, n, repeat if n <= 10_000 else min(repeat, 3)) for label, build, n in CASES}

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=5)
  ap.add_argument("--system", choices=list(APIS), help=argparse.SUPPRESS)  # internal: measure one system and print JSON
  args = ap.parse_args()
  if args.system:
    print(json.dumps(run_one(args.system, args.repeat)))
    return 0
  # each system runs in a fresh interpreter of its own, so neither pays for the other's heap
  results: dict[str, dict[str, tuple[float, int]]] = {}
  for system in APIS:
    if system != "tinyspec" and importlib.util.find_spec(system) is None:
      print(f"{system} not installed: left out")
      continue
    print(f"measuring {system} ...", file=sys.stderr, flush=True)
    out = subprocess.run([sys.executable, __file__, "--system", system, "--repeat", str(args.repeat)], capture_output=True, text=True, check=True)
    results[system] = json.loads(out.stdout.strip().splitlines()[-1])
  print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; median of {args.repeat} runs"
        " (at most 3 on the 100k chain), each system in its own process. nodes: each system's own IR nodes in the input graph")
  print(f"{'graph':<18s}" + "".join(f" {name + ' nodes':>15s} {name + ' ms':>12s} {'nodes/s':>9s} {'us/node':>7s}" for name in results)
        + ("  speedup" if len(results) > 1 else ""))
  for label, _, _ in CASES:
    res = {name: results[name][label] for name in results}
    row = f"{label:<18s}" + "".join(f" {nodes:>15d} {t * 1e3:>12.1f} {nodes / t:>9,.0f} {t / nodes * 1e6:>7.2f}" for t, nodes in res.values())
    if "tinygrad" in res: row += f"  {res['tinygrad'][0] / res['tinyspec'][0]:6.1f}x"  # same logical graph: a ratio of times
    print(row, flush=True)
  for small, big in (("sum of 200 terms", "sum of 1000 terms"), ("chain of 10k", "chain of 100k")):
    growth = {name: (r[big][0] / r[big][1]) / (r[small][0] / r[small][1]) for name, r in results.items()}
    print(f"time per node, {big} vs {small}: " + ", ".join(f"{name} {g:.2f}x" for name, g in growth.items()) + "  (1.00x: linear)")
  return 0

if __name__ == "__main__":
  raise SystemExit(main())
