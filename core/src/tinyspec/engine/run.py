"""Run a compiled schedule: allocate its buffers (as the memory plan shares them) and run its steps, typed `KernelStep`
and `CopyStep`; steps on several devices run on a worker thread per device. `capture` records what runs, for TinyJit."""
from __future__ import annotations

import contextlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from tinyspec.device.compiler import debug_level
from tinyspec.device.memory import Buffer
from tinyspec.engine.kernels import CompiledKernel, stats
from tinyspec.engine.rangeify import Schedule


@dataclass(frozen=True)
class KernelStep:
  """Run `kernel` on `device` over schedule buffers `buffers` (in the kernel's parameter order, its `outputs` outputs first)."""
  kernel: CompiledKernel
  device: str
  buffers: tuple[int, ...]
  outputs: int = 1
  @property
  def empty(self) -> bool:
    """An empty grid: nothing to compute (and GPUs refuse to launch one)."""
    return self.kernel.global_size is not None and 0 in self.kernel.global_size

@dataclass(frozen=True)
class CopyStep:
  """Copy schedule buffer buffers[1] into buffers[0] (on `device`)."""
  device: str
  buffers: tuple[int, int]

@dataclass(frozen=True)
class CompiledSchedule:
  """A function's steps, ready to run."""
  sched: Schedule
  steps: tuple[KernelStep | CopyStep, ...]
  home: tuple[int, ...]
  devices: tuple[str, ...]   # per non-argument buffer

_lock = threading.Lock()
_workers: dict[str, ThreadPoolExecutor] = {}

def _step(step: KernelStep | CopyStep, bufs: list[Buffer], debug: int, var_vals: dict[str, int]) -> None:
  ids = step.buffers
  if isinstance(step, CopyStep): bufs[ids[0]].copyin(bufs[ids[1]].numpy()); return
  if step.empty: return
  k = step.kernel
  vals = tuple(var_vals[name] for name in k.variables) if k.variables else ()
  t = k.program(*(bufs[i].handle for i in ids), global_size=k.global_size, local_size=k.local_size, vals=vals, wait=debug >= 1)
  with _lock: stats["kernels_run"] += 1; count = stats["kernels_run"]
  if debug >= 1:
    print(f"*** {step.device:10s} {count:5d} {k.name:24s} {t * 1e3:9.3f} ms" +
          (f"  bufs {[bufs[i].size for i in ids]}  {sum(bufs[i].nbytes for i in set(ids)) / 1e6:.3f} MB" if debug >= 2 else ""))

def _after(deps: list[Future], *step) -> None:
  for d in deps: d.result()
  _step(*step)

_recording = threading.local()

@contextlib.contextmanager
def capture():
  """Record every schedule this thread runs while the block runs, as (its steps, the buffers they ran on, its variables'
  values by name): what TinyJit replays. Yields the list the records are appended to."""
  if getattr(_recording, "steps", None) is not None: raise RuntimeError("capture: already capturing in this thread (a TinyJit inside another)")
  _recording.steps = records = []
  try: yield records
  finally: _recording.steps = None

def run_schedule(cs: CompiledSchedule, args: list[Buffer], var_vals: dict[str, int] | None = None) -> list[Buffer]:
  """Allocate the schedule's buffers and run its steps (with `var_vals`, the values by name of the variables in symbolic
  shapes). Steps on one device run in order; with several devices each has a worker thread, and a step waits only for the
  steps that write what it reads (or read what it overwrites), so work on different devices runs at the same time."""
  sched, n = cs.sched, cs.sched.n_args
  bufs: list[Buffer | None] = list(args) + [None] * len(sched.buffers)
  for i, (size, dtype, _) in enumerate(sched.buffers):
    if cs.home[n + i] == n + i: bufs[n + i] = Buffer(cs.devices[i], size, dtype).allocate()
  for b in range(n, len(bufs)): bufs[b] = bufs[cs.home[b]]  # after: a buffer may share the memory of one numbered later (packing's)
  debug, var_vals = debug_level(), var_vals or {}
  if (records := getattr(_recording, "steps", None)) is not None: records.append((cs.steps, bufs, var_vals))
  if len({step.device for step in cs.steps}) <= 1:
    for step in cs.steps: _step(step, bufs, debug, var_vals)
    return bufs  # type: ignore[return-value]
  writer: dict[int, Future] = {}
  readers: dict[int, list[Future]] = {}
  running = []
  for step in cs.steps:
    ids, dev, n_out = step.buffers, step.device, getattr(step, "outputs", 1)
    outs, ins = {id(bufs[i]) for i in ids[:n_out]}, {id(bufs[i]) for i in ids[n_out:]}
    deps = [writer[b] for b in ins | outs if b in writer] + [r for b in outs for r in readers.get(b, [])]
    if dev not in _workers: _workers[dev] = ThreadPoolExecutor(1, thread_name_prefix=f"tinyspec-{dev}")
    running.append(fut := _workers[dev].submit(_after, deps, step, bufs, debug, var_vals))
    for b in outs: writer[b], readers[b] = fut, []
    for b in ins: readers.setdefault(b, []).append(fut)
  for fut in running: fut.result()
  return bufs  # type: ignore[return-value]
