"""Every collective and send/recv against numpy on 2 and 4 ranks (ranks/collectives.py), and init's errors."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import run_ranks


@pytest.mark.parametrize("ranks", [2, 4])
def test_every_collective_matches_numpy(ranks):
  ran = run_ranks(ranks, "ranks/collectives.py")
  assert ran.returncode == 0, ran.output
  counts = {int(r): int(c) for r, c in re.findall(r"rank (\d+): ok (\d+) checks", ran.output)}  # the ranks' lines may interleave
  assert sorted(counts) == list(range(ranks)), ran.output
  assert min(counts.values()) > 500, counts  # every dtype x shape case ran on every rank

def _alone(code: str, **env: str) -> subprocess.CompletedProcess:
  """`code` in a Python started without mpiexec, with `env` added to the environment."""
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**os.environ, **env})

def test_init_outside_mpiexec_with_ranks_expected_says_how_to_launch():
  done = _alone("from tinyspec import distributed as dist; dist.init(world_size=2)")
  assert done.returncode != 0
  assert "2 ranks expected but this process runs alone: it was not started by mpiexec" in done.stderr, done.stderr
  assert "mpiexec -n 2" in done.stderr, done.stderr

def test_alone_is_a_world_of_one_rank():
  code = ("import numpy as np; from tinyspec import Tensor, distributed as dist; dist.init(); x = np.arange(6, dtype=np.float32).reshape(2, 3)\n"
          "assert (dist.rank(), dist.world_size()) == (0, 1)\n"
          "assert (dist.all_reduce(Tensor(x), 'max').numpy() == x).all() and (dist.all_gather(Tensor(x)).numpy() == x).all()\n"
          "assert (dist.broadcast(Tensor(x)).numpy() == x).all() and (dist.reduce_scatter(Tensor(x)).numpy() == x).all(); print('ok')")
  done = _alone(code)
  assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr

def test_the_core_names_the_backends_it_can_forward_to():
  done = _alone("import tinyspec.distributed", TINYSPEC_DISTRIBUTED="nccl")
  assert "TINYSPEC_DISTRIBUTED='nccl', but the installed backends are: mpi" in done.stderr, done.stderr

def test_a_collective_inside_tinyjit_is_refused_at_capture():
  code = ("from tinyspec import Tensor, TinyJit, distributed as dist; dist.init()\n"
          "step = TinyJit(lambda x: dist.all_reduce(x * 2))\n"
          "print(step(Tensor.ones(4)).numpy().tolist(), flush=True)\n"
          "step(Tensor.ones(4))")
  done = _alone(code)
  assert done.stdout.strip() == "[2.0, 2.0, 2.0, 2.0]", done.stdout + done.stderr  # the first call runs as plain Python
  assert "all_reduce: called inside a TinyJit function, whose replays run only the captured kernels" in done.stderr, done.stderr

def test_operations_before_init_raise():
  done = _alone("from tinyspec import Tensor, distributed as dist; dist.all_reduce(Tensor([1.0]))")
  assert "all_reduce: tinyspec.distributed.init() has not been called in this process" in done.stderr, done.stderr

def test_a_launcher_and_an_mpi_that_disagree_are_named():
  # what a rank sees when mpiexec comes from another MPI than the one mpi4py loaded: the launcher's size, and a world of one
  done = _alone("from tinyspec import distributed as dist; dist.init()", PMI_SIZE="4")
  assert "started 4 processes (PMI_SIZE=4) but MPI sees 1: mpiexec and the MPI library mpi4py loaded" in done.stderr, done.stderr

def test_wrong_world_size_under_mpiexec():
  ran = run_ranks(2, "ranks/expect_three.py")
  assert ran.returncode != 0
  assert "3 ranks expected, but 2 were started (mpiexec -n 2); start 3" in ran.output, ran.output

def test_devices_whose_memory_the_host_cannot_address_go_through_a_copy():
  ran = run_ranks(2, "ranks/device_memory.py")
  assert ran.returncode == 0, ran.output
  assert ran.output.count(": ok") == 2, ran.output
