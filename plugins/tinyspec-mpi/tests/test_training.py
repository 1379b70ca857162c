"""Data-parallel training of the demo's MLP on 2 ranks against one process on the whole batch (ranks/train.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import HERE, run_ranks


def _losses(output: str) -> dict:
  return json.loads(next(line for line in output.splitlines() if line.startswith("{")))

def _alone(optimizer: str, parts: int = 1) -> list[float]:
  env = {**os.environ, "TINYSPEC_CPU_THREADS": "1"}
  cmd = [sys.executable, str(HERE / "ranks/train.py"), "--optimizer", optimizer, "--parts", str(parts)]
  done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
  assert done.returncode == 0, done.stderr
  return _losses(done.stdout)["losses"]

@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_two_ranks_match_one_process_on_the_combined_batch(optimizer):
  """Against one process summing the combined batch in the ranks' order (its two halves' mean losses averaged): within
  1e-5 at every step of 20. Against the plain mean over all 512 points, within 1e-4: Adam divides each step by the
  gradient's own size, so a near-zero gradient component summed in another order can move its parameter by up to lr."""
  ran = run_ranks(2, "ranks/train.py", "--optimizer", optimizer)
  assert ran.returncode == 0, ran.output
  parallel, alone, plain = _losses(ran.output), _alone(optimizer, parts=2), _alone(optimizer)
  assert parallel["ranks"] == 2 and len(parallel["losses"]) == len(alone) == len(plain) == 20
  assert alone[-1] < alone[0]  # it trains
  for step, (a, b, c) in enumerate(zip(parallel["losses"], alone, plain)): assert abs(a - b) <= 1e-5 and abs(a - c) <= 1e-4, (step, a, b, c)

@pytest.mark.parametrize("ranks", [2, 4])
def test_gradient_buckets_average_every_dtype(ranks):
  ran = run_ranks(ranks, "ranks/buckets.py")
  assert ran.returncode == 0, ran.output
  assert ran.output.count(": ok buckets") == ranks, ran.output

def test_the_example_trains_on_two_ranks():
  ran = run_ranks(2, "../../../examples/data_parallel.py", "--steps", "30", "--batch", "1024", "--quiet")
  assert ran.returncode == 0, ran.output
  line = next(line for line in ran.output.splitlines() if line.startswith("loss "))
  assert "on 2 ranks" in line and float(line.split("test accuracy ")[1].split("%")[0]) > 60, line
