"""tinyspec across processes and hosts, on MPI (mpi4py): what `tinyspec.distributed` provides.

    mpiexec -n 2 python train.py          # on one machine; add `-f hostfile` (or use srun) for several

    from tinyspec import distributed as dist
    dist.init()                           # joins the ranks mpiexec started
    total = dist.all_reduce(x)            # x summed over every rank, a Tensor on x's device

Collectives (`all_reduce`, `broadcast`, `all_gather`, `reduce_scatter`) and point-to-point transfers (`send`, `recv`) take
and return Tensors; `DataParallel` averages an optimizer's gradients over the ranks. See docs/scaling.md."""
from __future__ import annotations

from tinyspec_mpi.collectives import REDUCE_OPS, all_gather, all_reduce, broadcast, recv, reduce_scatter, send
from tinyspec_mpi.data_parallel import DataParallel
from tinyspec_mpi.world import WORLD, DistributedError


def init(world_size: int | None = None, timeout: float | None = None, check: bool | None = None) -> None:
  """Join the ranks that `mpiexec` (or `srun`) started; a program run alone is a world of one rank. `world_size`: the
  number of ranks the program needs (a process started alone, or among another number, raises saying how to launch it).
  `timeout`: seconds any operation waits for the other ranks before raising DistributedError (TINYSPEC_MPI_TIMEOUT, else
  300). `check`: every collective first checks that all ranks passed the same shape and dtype (TINYSPEC_MPI_CHECK=1)."""
  WORLD.init(world_size, timeout, check)

def rank() -> int:
  """This process's rank, 0 .. world_size() - 1."""
  WORLD.require("rank")
  return WORLD.rank

def world_size() -> int:
  """How many ranks there are."""
  WORLD.require("world_size")
  return WORLD.size

def barrier() -> None:
  """Wait until every rank has called barrier()."""
  WORLD.wait(WORLD.require("barrier").Ibarrier(), "barrier")

__all__ = ["REDUCE_OPS", "DataParallel", "DistributedError", "all_gather", "all_reduce", "barrier", "broadcast", "init", "rank", "recv",
           "reduce_scatter", "send", "world_size"]
