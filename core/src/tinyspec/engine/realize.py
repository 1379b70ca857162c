"""Realize: run the pipeline on Tensor graphs and execute the result. This module drives; each concern has its own:

    callify -> rangeify -> pack -> (per kernel, kernels.py) optimize -> expand -> isel -> linearize -> render -> compile
    -> memory plan -> run (run.py);  buffers.py keeps the BUFFER UOp -> device Buffer map

A realized value is a BUFFER UOp backed by a device `Buffer`. The schedule cache maps callify's TUPLE body (the same UOp
whenever the same computation runs on other data of the same shapes) to the compiled steps, so a repeated computation
skips every stage and only runs; kernels are also cached on their own by (device, kernel graph).
DEBUG=1 prints each kernel's name and time, 2 adds its buffers and the memory in use, 3 its UOp listing, 4 its source,
5 the output of each of seed 001's eight stages (callify, rangeify, optimize, expand, isel, linearize, memory plan, render).
Device names are canonical from where they enter (Tensor, Buffer, the `device` given here): nothing below renames them."""
from __future__ import annotations

import math
import weakref

import numpy as np

from tinyspec.device import Device
from tinyspec.device.compiler import debug_level
from tinyspec.engine import multi
from tinyspec.engine.buffers import _buffers, _realized_views, _slots, buffer_of, buffer_uop, from_numpy, is_realized, new_buffer
from tinyspec.engine.callify import callify, inline, inline_calls, outside_bodies, resolve_calls
from tinyspec.engine.kernels import LRU, CompiledKernel, compile_kernel, stats
from tinyspec.engine.kernels import _kernels as _kernels  # the kernel cache, beside the schedule cache here (tests clear both)
from tinyspec.engine.lower import show, show_text
from tinyspec.engine.memplan import memory_plan
from tinyspec.engine.optimize import is_gpu
from tinyspec.engine.pack import pack_operands
from tinyspec.engine.rangeify import rangeify
from tinyspec.engine.run import CompiledSchedule, CopyStep, KernelStep, capture, run_schedule
from tinyspec.uop.ops import Ops
from tinyspec.uop.properties import bound_values, sint_value
from tinyspec.uop.spec import verify_between_stages
from tinyspec.uop.uop import UOp

__all__ = ["CompiledKernel", "CompiledSchedule", "CopyStep", "KernelStep", "buffer_of", "buffer_uop", "capture", "compile_kernel",
           "from_numpy", "is_realized", "new_buffer", "realize", "stats", "to_numpy"]

def to_numpy(buf: UOp) -> np.ndarray:
  """A copy of a realized value's contents (a BUFFER, or a value on several devices, gathered), shaped as the value."""
  if multi.is_multi(buf): buf = realize(UOp(Ops.COPY, (buf,), buf.device[0]))[0]
  if all(type(s) is int for s in buf.shape): return _buffers[buf].numpy().reshape(buf.shape)
  shape = tuple(sint_value(s) for s in buf.shape)  # a symbolic shape: its value now, the first elements of the buffer
  return _buffers[buf].numpy()[:math.prod(shape)].reshape(shape)

# ---- schedules ----

_schedules = LRU("TINYSPEC_SCHEDULE_CACHE", 512)

def _compile_schedule(fn: UOp, device: str) -> CompiledSchedule:
  """The steps of callify's FUNCTION `fn`: rangeify, pack, compile each kernel, plan memory. Values whose graph names no
  device go to `device`."""
  sched = rangeify(fn, gpu=is_gpu(r := Device[device].renderer), threads=r.threads)
  arg_devices = [a.device for a in fn.src[1:]]
  def devices_of(sched) -> list[str]: return arg_devices + [d or device for _, _, d in sched.buffers]
  dev_of = devices_of(sched)
  sched = pack_operands(sched, lambda item: (Device[dev_of[item.bufs[0]]].renderer.pack_width, dev_of[item.bufs[0]]))
  dev_of = devices_of(sched)  # with the buffers packing added
  steps = []
  for item in sched.items:
    dev = dev_of[item.bufs[0]]
    if item.ast.op is Ops.COPY: steps.append(CopyStep(dev, item.bufs))
    else: steps.append(KernelStep(compile_kernel(item.ast, dev), dev, item.bufs, item.outputs))
  home = memory_plan(sched)
  def plan() -> str:
    return "\n".join(f"  buffer {b}: {size} x {dtype.name} on {dev_of[b]}" + (f", in buffer {home[b]}'s memory" if home[b] != b else "")
                     for b, (size, dtype, _) in enumerate(sched.buffers, sched.n_args))
  show_text("memory plan", plan)
  stats["schedules_built"] += 1
  return CompiledSchedule(sched, tuple(steps), tuple(home), tuple(dev_of[sched.n_args:]))

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
  if debug_level() >= 1: print(f"*** {device:10s}  call {call_names.get(orig, 'function')}  ({len(args)} args, {len(cs.steps)} steps)")
  bufs = run_schedule(cs, [_buffers[a] for a in args])
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
  show("callify", fn)
  if Ops.PARAM in ops and (bound := [n for n in nodes if n.bound_value is not None]):
    # symbolic shapes: the function body speaks of the unbound variables (one schedule, one compile for every value), and
    # the values go to the kernels at run time
    var_vals = {v.arg[0]: x for v, x in bound_values(bound).items()}
    fn = fn.replace(src=(fn.src[0].substitute({b: b.unbind() for b in bound}), *fn.src[1:]))
  if (cs := _schedules.get(key := (fn.src[0], device))) is None: cs = _schedules.put(key, _compile_schedule(fn, device))
  bufs = run_schedule(cs, [_buffers[a] for a in fn.src[1:]], var_vals)
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
