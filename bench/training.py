"""What bench/gpt_step.py and bench/cnn_step.py share: timing one system's training step after checking its first loss
against numpy's, and the command line that prints each system's figure."""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

WARMUP = 3  # untimed steps first: the first compiles (and TinyJit captures on the second)


def median_step(step: Callable, data: list[tuple], reference_loss: float) -> float:
  """Median seconds of step(*batch) over data[WARMUP:], after the untimed ones; raises if the first loss (before any update)
  is not `reference_loss`, so every system provably trains the same model."""
  first = step(*data[0])
  if not abs(first - reference_loss) <= 1e-4 * abs(reference_loss):
    raise AssertionError(f"first loss {first} differs from numpy's {reference_loss}")
  for batch in data[1:WARMUP]: step(*batch)
  times = []
  for batch in data[WARMUP:]:
    t0 = time.perf_counter()
    step(*batch)
    times.append(time.perf_counter() - t0)
  return statistics.median(times)

def main(doc: str, systems: list[str], measure: Callable[[str, str, int], float], work: float, unit: str, steps: int) -> int:
  """Parse --steps and --device, then print each system's step time and throughput (`work` per step, in `unit`)."""
  ap = argparse.ArgumentParser(description=doc.splitlines()[0])
  ap.add_argument("--steps", type=int, default=steps)
  ap.add_argument("--device", default="CPU", help="tinyspec's device")
  args = ap.parse_args()
  for lib in systems:
    t = measure(lib, args.device, args.steps)
    print(f"{lib:<9s} {t * 1e3:7.2f} ms/step  {work / t:8.1f} {unit}")
  return 0
