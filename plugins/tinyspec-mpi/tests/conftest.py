"""Runs programs under mpiexec on this machine (loopback): `run_ranks(n, "ranks/collectives.py")`. Each rank runs with one
CPU thread and the spec verifier on; the programs print `rank R: ok ...` lines that the tests check."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent

def mpiexec() -> str:
  """The mpiexec beside this Python (the mpich wheel installs it there), else the first on PATH."""
  beside = Path(sys.executable).parent / "mpiexec"
  if beside.exists(): return str(beside)
  if found := shutil.which("mpiexec"): return found
  pytest.fail("no mpiexec: install the MPI library from PyPI, `pip install mpich` (the test extra does)")

@dataclass
class Ran:
  returncode: int
  output: str
  seconds: float

def run_ranks(n: int, script: str, *args: str, timeout: float = 240, mpiexec_flags: tuple[str, ...] = (), env: dict | None = None) -> Ran:
  """`mpiexec -n n python script args`, stdout and stderr together; fails the test if it runs past `timeout` seconds."""
  environ = {**os.environ, "TINYSPEC_CPU_THREADS": "1", "TINYSPEC_VERIFY": os.environ.get("TINYSPEC_VERIFY", "1"), "TINYSPEC_MPI_TIMEOUT": "60",
             **(env or {})}
  cmd = [mpiexec(), *mpiexec_flags, "-n", str(n), sys.executable, str(HERE / script), *args]
  t0 = time.monotonic()
  try: done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=environ)
  except subprocess.TimeoutExpired as e:
    pytest.fail(f"{' '.join(cmd)} ran past {timeout} s (a hang):\n{(e.stdout or b'')!s}\n{(e.stderr or b'')!s}")
  return Ran(done.returncode, done.stdout + done.stderr, time.monotonic() - t0)
