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

def _alone(optimizer: str) -> list[float]:
  env = {**os.environ, "TINYSPEC_CPU_THREADS": "1"}
  cmd = [sys.executable, str(HERE / "ranks/train.py"), "--optimizer", optimizer]
  done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
  assert done.returncode == 0, done.stderr
  return _losses(done.stdout)["losses"]

@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_two_ranks_match_one_process_on_the_combined_batch(optimizer):
  ran = run_ranks(2, "ranks/train.py", "--optimizer", optimizer)
  assert ran.returncode == 0, ran.output
  parallel, alone = _losses(ran.output), _alone(optimizer)
  assert parallel["ranks"] == 2 and len(parallel["losses"]) == len(alone) == 20
  assert alone[-1] < alone[0]  # it trains
  for step, (a, b) in enumerate(zip(parallel["losses"], alone)): assert abs(a - b) <= 1e-5, (step, a, b)

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
