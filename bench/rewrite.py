"""graph_rewrite throughput with the symbolic simplifier, side by side with tinygrad's `sym` where tinygrad is installed.

Graphs: (a) a sum of N terms ((x*4+y)//4 + (x*4+y)%4 + x*0 + y*1 - y) * k, each term over its own bounded variables;
(b) a chain a + 0 + 1 + ... + (N-1). Figures are input nodes per second of rewrite time (graph building not timed), medians of
several runs; every run builds fresh variables so no cached result is reused. Run: python bench/rewrite.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import platform
import statistics
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
  variable, rewrite, count = api
  rates, nodes = [], 0
  for run in range(repeat):
    g = build(variable, n, run)
    nodes = count(g)
    t0 = time.perf_counter()
    rewrite(g)
    rates.append(nodes / (time.perf_counter() - t0))
  return statistics.median(rates), nodes

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=5)
  args = ap.parse_args()
  sys.setrecursionlimit(max(sys.getrecursionlimit(), 1_000_000))  # tinygrad's own rewrite recurses on deep chains
  apis = {"tinyspec": tinyspec_api()}
  try: apis["tinygrad"] = tinygrad_api()
  except ImportError: print("tinygrad not installed: tinyspec only")
  cases = [("sum of 200 terms", term_sum, 200), ("sum of 1000 terms", term_sum, 1000),
           ("chain of 10k", chain, 10_000), ("chain of 100k", chain, 100_000)]
  print(f"python {platform.python_version()} on {platform.machine()}, median of {args.repeat} runs;"
        " nodes/s of graph_rewrite with the symbolic simplifier")
  print(f"{'graph':<20s} {'nodes':>8s} " + " ".join(f"{name + ' nodes/s':>18s}" for name in apis) + ("   ratio" if len(apis) > 1 else ""))
  for label, build, n in cases:
    results = {}
    for name, api in apis.items():
      try: results[name] = measure(api, build, n, args.repeat if name == "tinyspec" or n <= 10_000 else 1)
      except RecursionError: results[name] = (float("nan"), 0)
    nodes = results["tinyspec"][1]
    row = f"{label:<20s} {nodes:>8d} " + " ".join(f"{results[name][0]:>18,.0f}" for name in apis)
    if "tinygrad" in results: row += f"   {results['tinyspec'][0] / results['tinygrad'][0]:6.1f}x"
    print(row, flush=True)
  return 0

if __name__ == "__main__":
  raise SystemExit(main())
