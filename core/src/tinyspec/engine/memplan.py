"""Stage 7, memory plan: the schedule's intermediate buffers share memory where their lifetimes do not overlap.

A buffer lives from the step that writes it to the last step that reads it. Walking the steps in order, a buffer whose
last reader has run goes back to a free list, and a new intermediate takes a free buffer of the same size, dtype and
device if one is there. Arguments and results are never shared: callers hold them."""
from __future__ import annotations

from tinyspec.engine.rangeify import Schedule


def memory_plan(sched: Schedule) -> list[int]:
  """For each schedule buffer id, the id of the buffer whose memory it uses (itself where nothing is shared)."""
  n = sched.n_args + len(sched.buffers)
  keep = set(range(sched.n_args)) | set(sched.outputs)
  last_use: dict[int, int] = {}
  for step, item in enumerate(sched.items):
    for b in item.bufs: last_use[b] = step
  home, free = list(range(n)), {}
  for step, item in enumerate(sched.items):
    out = item.bufs[0]
    if out not in keep and (pool := free.get(sched.buffers[out - sched.n_args])): home[out] = pool.pop()
    for b in set(item.bufs):
      if b not in keep and last_use[b] == step and b != out:
        free.setdefault(sched.buffers[b - sched.n_args], []).append(home[b])
  return home
