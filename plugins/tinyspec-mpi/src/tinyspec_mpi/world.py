"""The world of ranks: MPI's COMM_WORLD, started by `init`, and the bounded wait every operation ends in.

Every operation is started nonblocking and waited for with a deadline (`timeout` seconds, `TINYSPEC_MPI_TIMEOUT`, 300 by
default): a rank that died, or that runs a different operation, makes the others raise `DistributedError` naming the
operation instead of hanging. After that the world is broken: MPI cannot tell how far the other ranks got, so every
later operation raises at once, and the process exits without MPI_Finalize (which would wait for the dead rank)."""
from __future__ import annotations

import atexit
import os
import sys
import time
from typing import Any

from tinyspec.engine.run import _recording  # set while TinyJit captures (engine.run.capture)

TIMEOUT_ENV = "TINYSPEC_MPI_TIMEOUT"
CHECK_ENV = "TINYSPEC_MPI_CHECK"
# what launchers put in each rank's environment: the world size they started (srun with PMI sets PMI_SIZE too; SLURM_NTASKS
# is not one of them: it is the allocation's, also seen by a process started alone inside it)
_LAUNCHER_SIZE = {"PMI_SIZE": "the launcher (mpiexec, or srun through PMI)", "OMPI_COMM_WORLD_SIZE": "Open MPI's mpiexec"}


class DistributedError(RuntimeError):
  """An operation across ranks failed: another rank did not join in time (it died, or runs something else), the ranks
  passed tensors that do not match, or the world is not started or already broken."""


class World:
  """This process's place among the ranks. One per process: `tinyspec_mpi.world.WORLD`."""

  def __init__(self):
    self.comm: Any = None
    self.MPI: Any = None
    self.rank, self.size = 0, 1
    self.timeout = 300.0
    self.check = False
    self.broken: str | None = None

  def init(self, world_size: int | None = None, timeout: float | None = None, check: bool | None = None) -> World:
    """Join the ranks `mpiexec` (or srun) started. `world_size`: how many ranks the program expects; a process started
    alone, or among a different number, raises saying how to launch it. Calling it again checks world_size and updates
    timeout and check."""
    if timeout is None: timeout = _env_float(TIMEOUT_ENV, self.timeout)
    if not timeout > 0: raise ValueError(f"init: timeout must be a positive number of seconds, got {timeout!r}")
    self.timeout = float(timeout)
    self.check = check if check is not None else os.environ.get(CHECK_ENV, "") not in ("", "0")
    if self.comm is not None:
      if world_size is not None and world_size != self.size:
        raise DistributedError(f"init: {world_size} ranks expected, but this world has {self.size}")
      return self
    self.MPI = MPI = _import_mpi()
    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    launched = next(((var, int(os.environ[var])) for var in _LAUNCHER_SIZE if os.environ.get(var, "").isdigit()), None)
    if launched is not None and launched[1] != size:
      raise DistributedError(f"init: {_LAUNCHER_SIZE[launched[0]]} started {launched[1]} processes ({launched[0]}={launched[1]}) but MPI sees "
                             f"{size}: mpiexec and the MPI library mpi4py loaded ({MPI.Get_library_version().splitlines()[0].strip()}) are "
                             "from different MPI installations; use the mpiexec of the same one "
                             "(`python -m mpi4py --mpi-library` shows which library that is)")
    if world_size is not None and world_size != size:
      if size == 1 and launched is None:
        raise DistributedError(f"init: {world_size} ranks expected but this process runs alone: it was not started by mpiexec. "
                               f"Run `mpiexec -n {world_size} {' '.join([os.path.basename(sys.executable), *sys.argv]) or 'python script.py'}`")
      raise DistributedError(f"init: {world_size} ranks expected, but {size} were started (mpiexec -n {size}); start {world_size}")
    self.comm, self.rank, self.size = comm, comm.Get_rank(), size
    return self

  def require(self, op: str) -> Any:
    """The communicator, for operation `op`; raises when the world is not started or broken, or inside a TinyJit capture."""
    if self.comm is None: raise DistributedError(f"{op}: tinyspec.distributed.init() has not been called in this process")
    if getattr(_recording, "steps", None) is not None:  # TinyJit's capture records kernels and copies; an MPI call would be left out
      raise DistributedError(f"{op}: called inside a TinyJit function, whose replays run only the captured kernels and would "
                             "skip the exchange; call it outside the jitted function")
    if self.broken is not None: raise DistributedError(f"{op}: an earlier operation failed, so the ranks are out of step: {self.broken}")
    return self.comm

  def wait(self, request: Any, op: str, with_status: bool = False) -> Any:
    """Wait for a nonblocking MPI request, at most `timeout` seconds; returns its status if asked. The loop spins on
    MPI_Test, which is also what moves MPICH's transfers along: a rank waiting here has nothing else to do with its core."""
    status = self.MPI.Status() if with_status else None
    if request.Test(status): return status
    deadline = time.monotonic() + self.timeout
    while not request.Test(status):
      if time.monotonic() > deadline:
        self.broken = (f"{op} on rank {self.rank} of {self.size} waited {self.timeout:g} s for the other ranks: one of them died, "
                       f"or runs a different operation ({TIMEOUT_ENV} sets the limit)")
        atexit.register(_exit_without_finalize)
        raise DistributedError(self.broken)
    return status

  def fail(self, op: str, reason: str) -> DistributedError:
    """A mismatch found after data moved: the ranks agree it failed (each saw every rank's description), so the world stays usable."""
    return DistributedError(f"{op} on rank {self.rank} of {self.size}: {reason}")


def _env_float(name: str, default: float) -> float:
  if not (text := os.environ.get(name, "").strip()): return default
  try: return float(text)
  except ValueError: raise ValueError(f"{name} must be a number of seconds, got {text!r}") from None

def _import_mpi() -> Any:
  """mpi4py's MPI module, initializing MPI. Unless the program imported it already, MPI_Finalize is left to us, so a
  broken world can exit without it."""
  import mpi4py
  if "mpi4py.MPI" not in sys.modules:
    mpi4py.rc.finalize = False
    atexit.register(_finalize)
  try:
    from mpi4py import MPI
  except (ImportError, RuntimeError) as e:
    raise DistributedError(f"init: mpi4py cannot load an MPI library ({e}); install one from PyPI with `pip install mpich` "
                           "(or `pip install 'tinyspec-mpi[mpich]'`), or point mpi4py at the cluster's own MPI") from e
  return MPI

def _finalize() -> None:
  from mpi4py import MPI
  if WORLD.broken is None and MPI.Is_initialized() and not MPI.Is_finalized(): MPI.Finalize()

def _exit_without_finalize() -> None:
  sys.stdout.flush(); sys.stderr.flush()
  os._exit(1)  # MPI_Finalize would wait for the rank that did not come


WORLD = World()
