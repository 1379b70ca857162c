"""A rank that dies mid-run (ranks/die.py) never leaves the others hanging."""
from __future__ import annotations

from conftest import run_ranks

TIMEOUT = {"TINYSPEC_MPI_TIMEOUT": "5"}

def test_a_killed_rank_ends_the_job_at_once():
  # mpiexec (hydra) notices the dead process and ends the others, naming the signal
  ran = run_ranks(2, "ranks/die.py", "--how", "kill", env=TIMEOUT, timeout=60)
  assert ran.returncode != 0 and "Killed (signal 9)" in ran.output, ran.output
  assert "finished all 100 steps" not in ran.output
  assert ran.seconds < 30

def test_survivors_raise_within_the_timeout_when_mpiexec_keeps_them():
  # without hydra's cleanup the others wait in all_reduce for the dead rank: after 5 s each raises DistributedError
  ran = run_ranks(3, "ranks/die.py", "--how", "exit", mpiexec_flags=("-disable-auto-cleanup",), env=TIMEOUT, timeout=60)
  assert ran.returncode != 0, ran.output
  for rank in (0, 1):
    assert f"DistributedError: all_reduce on rank {rank} of 3 waited 5 s for the other ranks: one of them died" in ran.output, ran.output
  assert ran.seconds < 30

def test_a_rank_that_returns_early_makes_the_others_raise():
  ran = run_ranks(2, "ranks/die.py", "--how", "return", env=TIMEOUT, timeout=60)
  assert ran.returncode != 0, ran.output
  assert "DistributedError: all_reduce on rank 0 of 2 waited 5 s" in ran.output, ran.output
  assert ran.seconds < 30
