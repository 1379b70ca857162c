"""`tinyspec.distributed`: the same program on several processes and hosts. The implementation is a separate distribution,
announced in the `tinyspec.distributed` entry-point group (tinyspec-mpi: `pip install './plugins/tinyspec-mpi[mpich]'`);
this module forwards to it, so `from tinyspec import distributed as dist; dist.init()` works whichever is installed.
With several installed, TINYSPEC_DISTRIBUTED names the entry point to use."""
from __future__ import annotations

import os
from importlib.metadata import entry_points

ENTRY_POINT_GROUP = "tinyspec.distributed"

def _backend():
  found = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
  if (wanted := os.environ.get("TINYSPEC_DISTRIBUTED", "").strip()):
    if wanted not in found: raise ImportError(f"TINYSPEC_DISTRIBUTED={wanted!r}, but the installed backends are: {', '.join(found) or 'none'}")
    return found[wanted].load()
  if not found:
    raise ImportError("tinyspec.distributed needs a backend, and none is installed: `pip install './plugins/tinyspec-mpi[mpich]'` "
                      "(MPI through mpi4py, with PyPI's MPICH)")
  if len(found) > 1: raise ImportError(f"several tinyspec.distributed backends are installed ({', '.join(found)}): set TINYSPEC_DISTRIBUTED to one")
  return next(iter(found.values())).load()

_impl = _backend()
__all__ = list(_impl.__all__)
globals().update({name: getattr(_impl, name) for name in __all__})
