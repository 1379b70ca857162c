"""Realize: run the pipeline on Tensor graphs and execute the result.

    callify -> rangeify -> (per kernel) optimize -> expand -> isel -> linearize -> render -> compile;  memory plan -> run

A realized value is a BUFFER UOp backed by a device `Buffer`. The schedule cache maps callify's TUPLE body (the same UOp
whenever the same computation runs on other data of the same shapes) to the compiled steps, so a repeated computation
skips every stage and only runs; kernels are also cached on their own by (device, kernel graph).
DEBUG=1 prints each kernel's name and time, 2 adds its buffers and the memory in use, 3 its UOp listing, 4 its source,
5 the graph after every stage."""
from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyspec.device import Device, DeviceError
from tinyspec.device.compiler import debug_level
from tinyspec.device.memory import Buffer, buffer_np_dtype
from tinyspec.dtype import DType, PtrDType, dtypes
from tinyspec.engine import multi, search
from tinyspec.engine.callify import callify, inline, inline_calls, outside_bodies, resolve_calls
from tinyspec.engine.lower import kernel_name, render_kernel, show
from tinyspec.engine.memplan import memory_plan
from tinyspec.engine.optimize import describe_axes, is_gpu, no_opts, optimize
from tinyspec.engine.pack import pack_operands
from tinyspec.engine.rangeify import Schedule, buffer_size, rangeify
from tinyspec.uop.ops import Ops
from tinyspec.uop.properties import bound_values, sint_value
from tinyspec.uop.spec import verify_between_stages
from tinyspec.uop.uop import UOp

_slots = itertools.count()
_buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()

DEBUG = debug_level

# ---- buffers ----

def buffer_uop(shape: tuple[int, ...], buf: Buffer) -> UOp:
  """A new BUFFER UOp of `shape` backed by `buf`."""
  u = UOp.buffer(tuple(shape), buf.dtype, buf.device, next(_slots))
  _buffers[u] = buf
  return u

def buffer_of(u: UOp) -> Buffer:
  """The device Buffer behind a BUFFER UOp."""
  return _buffers[u]

def new_buffer(shape: tuple, dtype: DType, device: str) -> UOp:
  """A fresh BUFFER UOp with storage (contents undefined until written); a symbolic shape gets room for its largest value."""
  return buffer_uop(shape, Buffer(device, buffer_size(shape), dtype).allocate())

def from_numpy(arr: np.ndarray, dtype: DType, device: str) -> UOp:
  """A new BUFFER UOp holding a copy of `arr` converted to `dtype`."""
  arr = np.asarray(arr)
  return buffer_uop(arr.shape, Buffer(device, arr.size, dtype).copyin(np.ascontiguousarray(arr, buffer_np_dtype(dtype))))

def to_numpy(buf: UOp) -> np.ndarray:
  """A copy of a realized value's contents (a BUFFER, or a value on several devices, gathered), shaped as the value."""
  if multi.is_multi(buf): buf = realize(UOp(Ops.COPY, (buf,), buf.device[0]))[0]
  if all(type(s) is int for s in buf.shape): return _buffers[buf].numpy().reshape(buf.shape)
  shape = tuple(sint_value(s) for s in buf.shape)  # a symbolic shape: its value now, the first elements of the buffer
  return _buffers[buf].numpy()[:math.prod(shape)].reshape(shape)

_realized_views: weakref.WeakSet[UOp] = weakref.WeakSet()

def is_realized(u: UOp) -> bool:
  """A BUFFER, or the form realize gives a value on several devices (a view of a BUFFER over them)."""
  return u.op is Ops.BUFFER or u in _realized_views

# ---- kernels ----

@dataclass(frozen=True)
class CompiledKernel:
  """One kernel lowered, rendered and loaded on a device."""
  name: str
  program: Any
  linear: UOp
  source: str
  global_size: tuple[int, ...] | None = None
  local_size: tuple[int, ...] | None = None
  variables: tuple[str, ...] = ()  # the names of the variables it takes, in the order its `vals` come (by name)

class LRU(OrderedDict):
  """A dict that keeps at most `$env` (else `default`) entries, forgetting the least recently used; `get` and `put` are safe
  from several threads. Bounds the in-process caches, which would otherwise keep every kernel and schedule ever compiled
  (and their device code)."""
  def __init__(self, env: str, default: int):
    super().__init__()
    self.env, self.default, self.lock = env, default, threading.Lock()
  @property
  def maxsize(self) -> int: return max(1, int(os.environ.get(self.env, "") or self.default))
  def get(self, key, default=None):
    with self.lock:
      if (value := super().get(key)) is None: return default
      self.move_to_end(key)
      return value
  def put(self, key, value):
    with self.lock:
      self[key] = value
      self.move_to_end(key)
      while len(self) > self.maxsize: self.popitem(last=False)
    return value

_kernels = LRU("TINYSPEC_KERNEL_CACHE", 1024)
stats = {"kernels_compiled": 0, "schedules_built": 0, "kernels_run": 0}

def _check_dtypes(ast: UOp, device: str, renderer) -> None:
  """Refuse, before any lowering, a kernel whose values have a dtype the device's renderer does not declare."""
  used = {u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype.scalar() for u in ast.toposort()}
  if missing := sorted(d.name for d in used - renderer.supported_dtypes if d not in (dtypes.index, dtypes.void)):
    have = ", ".join(sorted(d.name for d in renderer.supported_dtypes))
    raise DeviceError(f"{device} does not support {' and '.join(missing)} (its dtypes: {have})")

def compile_kernel(ast: UOp, device: str) -> CompiledKernel:
  """Lower one kernel for `device`: optimize (with BEAM=n, the opts search found), expand, isel, linearize, render, compile,
  load (cached per device, kernel and beam width)."""
  width = 0 if no_opts() else search.beam_width()
  if (done := _kernels.get(key := (device, ast, width))) is not None: return done
  rt = Device[device]
  show("rangeify", ast)
  _check_dtypes(ast, device, rt.renderer)
  ast = optimize(ast, rt.renderer) if not width else optimize(ast, rt.renderer, search.beam_opts(ast, device, width))
  show("optimize", ast)
  if DEBUG() >= 2: print(f"    {kernel_name(ast)} on {device}: {describe_axes(ast)}")
  k = render_kernel(ast, rt.renderer)
  program = rt.program(k.name, rt.compiler.compile_cached(k.source, k.name))
  variables = tuple(sorted(u.arg[0] for u in k.linear.src if u.is_variable))
  out = _kernels.put(key, CompiledKernel(k.name, program, k.linear, k.source, k.global_size, k.local_size, variables))
  stats["kernels_compiled"] += 1
  return out

# ---- schedules ----

@dataclass(frozen=True)
class KernelStep:
  """Run `kernel` on `device` over schedule buffers `buffers` (in the kernel's parameter order, output first)."""
  kernel: CompiledKernel
  device: str
  buffers: tuple[int, ...]
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

_schedules = LRU("TINYSPEC_SCHEDULE_CACHE", 512)

def _compile_schedule(fn: UOp, device: str) -> CompiledSchedule:
  sched = rangeify(fn, gpu=is_gpu(r := Device[device].renderer), threads=r.threads)
  arg_devices = [Device.canonicalize(a.device) for a in fn.src[1:]]
  dev_of = arg_devices + [Device.canonicalize(d or device) for _, _, d in sched.buffers]
  sched = pack_operands(sched, lambda item: (Device[dev_of[item.bufs[0]]].renderer.pack_width, dev_of[item.bufs[0]]))
  devices = tuple(Device.canonicalize(d or device) for _, _, d in sched.buffers)
  dev_of = arg_devices + list(devices)
  steps = []
  for item in sched.items:
    dev = dev_of[item.bufs[0]]
    if item.ast.op is Ops.COPY: steps.append(CopyStep(dev, item.bufs))
    else: steps.append(KernelStep(compile_kernel(item.ast, dev), dev, item.bufs))
  stats["schedules_built"] += 1
  return CompiledSchedule(sched, tuple(steps), tuple(memory_plan(sched)), devices)

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

def _run(cs: CompiledSchedule, args: list[Buffer], var_vals: dict[str, int] | None = None) -> list[Buffer]:
  """Allocate the schedule's buffers and run its steps (with `var_vals`, the values by name of the variables in symbolic
  shapes). Steps on one device run in order; with several devices each has a worker thread, and a step waits only for the
  steps that write what it reads (or read what it overwrites), so work on different devices runs at the same time."""
  sched, n = cs.sched, cs.sched.n_args
  bufs: list[Buffer | None] = list(args) + [None] * len(sched.buffers)
  for i, (size, dtype, _) in enumerate(sched.buffers):
    b = n + i
    bufs[b] = bufs[cs.home[b]] if cs.home[b] != b else Buffer(cs.devices[i], size, dtype).allocate()
  debug, var_vals = DEBUG(), var_vals or {}
  if (records := getattr(_recording, "steps", None)) is not None: records.append((cs.steps, bufs, var_vals))
  if len({step.device for step in cs.steps}) <= 1:
    for step in cs.steps: _step(step, bufs, debug, var_vals)
    return bufs  # type: ignore[return-value]
  writer: dict[int, Future] = {}
  readers: dict[int, list[Future]] = {}
  running = []
  for step in cs.steps:
    ids, dev = step.buffers, step.device
    out, ins = id(bufs[ids[0]]), {id(bufs[i]) for i in ids[1:]}
    deps = [writer[b] for b in ins if b in writer] + readers.get(out, []) + ([writer[out]] if out in writer else [])
    if dev not in _workers: _workers[dev] = ThreadPoolExecutor(1, thread_name_prefix=f"tinyspec-{dev}")
    running.append(fut := _workers[dev].submit(_after, deps, step, bufs, debug, var_vals))
    writer[out], readers[out] = fut, []
    for b in ins: readers.setdefault(b, []).append(fut)
  for fut in running: fut.result()
  return bufs  # type: ignore[return-value]

# ---- calls: the FUNCTIONs @function makes ----

call_names: weakref.WeakKeyDictionary[UOp, str] = weakref.WeakKeyDictionary()  # FUNCTION -> the traced Python function's name
_call_results: weakref.WeakKeyDictionary[UOp, tuple[UOp, ...]] = weakref.WeakKeyDictionary()
INLINE = "inline"  # the tag of a FUNCTION that is always inlined: @function(inline=True)

def _call(orig: UOp, fn: UOp, i: int, device: str) -> UOp:
  """Element i of what FUNCTION `orig` returns (`fn`: the same with the calls in its arguments resolved). Its arguments are
  realized and its body runs as a CALL: a schedule of its own, through the schedule cache, so the same function traced
  again on other data of the same shapes (the same hash-consed body) runs without lowering anything. Calls inside the
  body are inlined into it. The results are kept while `orig` lives (realized buffers never change), so realizing the
  outputs one at a time runs it once. Inlined instead, fusing with the graph around it: a FUNCTION tagged INLINE, and
  one over values on several devices (a CALL runs on single-device buffers)."""
  if (done := _call_results.get(orig)) is not None: return done[i]
  if fn.tag == INLINE: return inline(fn, i)
  body = inline_calls(fn.src[0])
  nodes = body.toposort()
  params = {p.arg[0]: p for p in nodes if p.op is Ops.PARAM and isinstance(p.arg[0], int)}
  if any(multi.is_multi(u) for u in (*fn.src[1:], *params.values())) or any(u.op is Ops.COPY and multi.is_multi(u) for u in nodes):
    return inline(fn, i)
  used = sorted(params)  # arguments the body never reads are left out (and not computed); the PARAMs are renumbered to match
  if len(used) < len(fn.src) - 1: body = body.substitute({params[k]: params[k].replace(arg=(j, *params[k].arg[1:])) for j, k in enumerate(used)})
  args = [fn.src[1 + k] for k in used]
  lazy = [j for j, a in enumerate(args) if a.op is not Ops.BUFFER]
  for dev in dict.fromkeys(params[used[j]].device for j in lazy):  # a constant-only argument goes to its PARAM's device
    group = [j for j in lazy if params[used[j]].device == dev]
    for j, b in zip(group, realize(*(args[j] for j in group), device=dev)): args[j] = b
  call = UOp(Ops.CALL, (body, *args))
  verify_between_stages(call, "tensor")
  if (cs := _schedules.get(key := (body, device))) is None: cs = _schedules.put(key, _compile_schedule(call, device))
  if DEBUG() >= 1: print(f"*** {device:10s}  call {call_names.get(orig, 'function')}  ({len(args)} args, {len(cs.steps)} steps)")
  bufs = _run(cs, [_buffers[a] for a in args])
  done = _call_results[orig] = tuple(buffer_uop(v.shape, bufs[o]) if o >= len(args) else args[o] for v, o in zip(body.src, cs.sched.outputs))
  return done[i]

def _resolve_calls(uops: tuple[UOp, ...], device: str) -> tuple[UOp, ...]:
  """`uops` with the value of each call in place of its GETTUPLE (`uops` itself when there is none)."""
  nodes = outside_bodies(*uops)
  if any(n.op is Ops.PARAM and isinstance(n.arg[0], int) for n in nodes):
    raise RuntimeError("realize: the value depends on the inputs of a @function being traced (PARAMs): nothing runs while a function is "
                       "traced, so .realize(), .numpy(), .item() and bool() are not available inside it; return the Tensor instead")
  if not any(n.op is Ops.FUNCTION for n in nodes): return uops
  return resolve_calls(uops, lambda orig, fn, i: _call(orig, fn, i, device))

def realize(*uops: UOp, device: str | tuple[str, ...] | None = None) -> tuple[UOp, ...]:
  """Compute each tensor-graph UOp into a BUFFER UOp (a BUFFER is returned as it is). `device` is where values whose graph
  names no device (constants only) go; default Device.DEFAULT."""
  todo = [u for u in uops if not is_realized(u)]
  if not todo: return uops
  if isinstance(device, tuple):  # constant-only values bound for several devices: a replica on each
    uops = tuple(multi.replicate(u, device) if u.device is None else u for u in uops)
    return realize(*uops, device=device[0])
  device = Device.canonicalize(device or Device.DEFAULT)
  nodes = UOp.sink(*todo).toposort()
  ops = {n.op for n in nodes}  # one pass: the usual graph has no calls and no multi-device values, and pays for nothing more
  if (Ops.FUNCTION in ops or Ops.PARAM in ops) and (resolved := _resolve_calls(uops, device)) is not uops:
    return realize(*resolved, device=device)
  # values over several devices start at a BUFFER or a COPY whose device (arg) is a tuple
  if any(type(n.arg[2]) is tuple if n.op is Ops.BUFFER else n.op is Ops.COPY and type(n.arg) is tuple for n in nodes):
    return _realize_multi(uops, device)
  fn, var_vals = callify(*todo, nodes=nodes), None
  if Ops.PARAM in ops and (bound := [n for n in nodes if n.bound_value is not None]):
    # symbolic shapes: the function body speaks of the unbound variables (one schedule, one compile for every value), and
    # the values go to the kernels at run time
    var_vals = {v.arg[0]: x for v, x in bound_values(bound).items()}
    fn = fn.replace(src=(fn.src[0].substitute({b: b.unbind() for b in bound}), *fn.src[1:]))
  if (cs := _schedules.get(key := (fn.src[0], device))) is None: cs = _schedules.put(key, _compile_schedule(fn, device))
  bufs = _run(cs, [_buffers[a] for a in fn.src[1:]], var_vals)
  results = iter(buffer_uop(u.shape, bufs[o]) if o >= cs.sched.n_args else fn.src[1 + o] for u, o in zip(todo, cs.sched.outputs))
  return tuple(u if u.op is Ops.BUFFER else next(results) for u in uops)

def _realize_multi(uops: tuple[UOp, ...], device: str) -> tuple[UOp, ...]:
  """Values over n-tuple devices: split into single-device pieces (engine/multi.py), realize those, and reassemble each
  value as a BUFFER over its devices (axis 0), a PERMUTE of one (another shard axis) or a RESHAPE of a REPLICATED one."""
  todo = [u for u in uops if not is_realized(u)]
  split = multi.split_devices(*todo)
  wanted: list[UOp] = []
  for u, parts in zip(todo, split):
    if not multi.is_multi(u): wanted.append(parts); continue
    a = u.axis
    if a is None: wanted.extend(p.reshape((1, *p.shape)) for p in parts)
    else: wanted.extend(p.permute((a, *(d for d in range(u.ndim) if d != a))) for p in parts)
  done = iter(realize(*wanted, device=device))
  out: dict[UOp, UOp] = {}
  for u in todo:
    if not multi.is_multi(u): out[u] = next(done); continue
    pieces, n, a = tuple(next(done) for _ in u.device), len(u.device), u.axis
    whole = (n * pieces[0].shape[0], *pieces[0].shape[1:])
    buf = UOp.buffer(whole, u.dtype, u.device, next(_slots))
    multi.set_shards(buf, pieces)
    if a is None: view = UOp(Ops.REPLICATED, (buf,), (0,)).reshape(u.shape)
    else:
      order = (a, *(d for d in range(u.ndim) if d != a))  # the pieces were stored with the shard axis first
      view = buf if a == 0 else buf.permute(tuple(order.index(d) for d in range(u.ndim)))
    _realized_views.add(view)
    out[u] = view
  return tuple(u if is_realized(u) else out[u] for u in uops)
