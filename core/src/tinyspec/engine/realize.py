"""Realize: run the pipeline on Tensor graphs and execute the result.

    callify -> rangeify -> (per kernel) expand -> isel -> linearize -> render -> compile;  memory plan -> run

A realized value is a BUFFER UOp backed by a device `Buffer`. The schedule cache maps callify's TUPLE body (the same UOp
whenever the same computation runs on other data of the same shapes) to the compiled steps, so a repeated computation
skips every stage and only runs; kernels are also cached on their own by (device, kernel graph).
DEBUG=1 prints each kernel's name and time, 2 adds its buffers and the memory in use, 3 its UOp listing, 4 its source,
5 the graph after every stage."""
from __future__ import annotations

import itertools
import math
import os
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyspec.device import Device
from tinyspec.device.memory import Buffer, buffer_np_dtype
from tinyspec.dtype import DType
from tinyspec.engine.callify import callify
from tinyspec.engine.expand import expand
from tinyspec.engine.isel import isel
from tinyspec.engine.linearize import linearize
from tinyspec.engine.memplan import memory_plan
from tinyspec.engine.rangeify import Schedule, rangeify
from tinyspec.uop.ops import AxisType, Ops
from tinyspec.uop.uop import UOp
from tinyspec.viz import render_listing

_slots = itertools.count()
_buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()

def DEBUG() -> int: return int(os.environ.get("DEBUG", "0") or 0)

# ---- buffers ----

def buffer_uop(shape: tuple[int, ...], buf: Buffer) -> UOp:
  """A new BUFFER UOp of `shape` backed by `buf`."""
  u = UOp.buffer(tuple(shape), buf.dtype, buf.device, next(_slots))
  _buffers[u] = buf
  return u

def buffer_of(u: UOp) -> Buffer:
  """The device Buffer behind a BUFFER UOp."""
  return _buffers[u]

def new_buffer(shape: tuple[int, ...], dtype: DType, device: str) -> UOp:
  """A fresh BUFFER UOp with storage (contents undefined until written)."""
  return buffer_uop(shape, Buffer(device, math.prod(shape), dtype).allocate())

def from_numpy(arr: np.ndarray, dtype: DType, device: str) -> UOp:
  """A new BUFFER UOp holding a copy of `arr` converted to `dtype`."""
  arr = np.asarray(arr)
  return buffer_uop(arr.shape, Buffer(device, arr.size, dtype).copyin(np.ascontiguousarray(arr, buffer_np_dtype(dtype))))

def to_numpy(buf: UOp) -> np.ndarray:
  """A copy of a BUFFER UOp's contents, shaped as the buffer."""
  return _buffers[buf].numpy().reshape(buf.shape)

# ---- kernels ----

@dataclass(frozen=True)
class CompiledKernel:
  """One kernel lowered, rendered and loaded on a device."""
  name: str
  program: Any
  linear: UOp
  source: str

def kernel_name(ast: UOp) -> str:
  """'r' for a kernel with a reduction, 'E' for elementwise, then its range sizes: r_16_4, E_45_65."""
  ranges = sorted((u for u in ast.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg)
  kind = "r" if any(r.arg[1] in (AxisType.REDUCE, AxisType.GROUP_REDUCE, AxisType.UNROLL) for r in ranges) else "E"
  return "_".join([kind] + [str(r.src[0].arg[0]) if r.src[0].op is Ops.CONST else "n" for r in ranges])

_kernels: dict[tuple[str, UOp], CompiledKernel] = {}
stats = {"kernels_compiled": 0, "schedules_built": 0, "kernels_run": 0}

def _show(stage: str, u: UOp):
  if DEBUG() >= 5: print(f"--- after {stage} ---\n{render_listing(u)}")

def compile_kernel(ast: UOp, device: str) -> CompiledKernel:
  """Lower one kernel for `device`: expand, isel, linearize, render, compile, load (cached per device and kernel)."""
  if (done := _kernels.get((device, ast))) is not None: return done
  rt, name = Device[device], kernel_name(ast)
  _show("rangeify", ast)
  ast = expand(ast); _show("expand", ast)
  ast = isel(ast, rt.renderer.native); _show("isel", ast)
  linear = linearize(ast); _show("linearize", linear)
  src = rt.renderer.render(name, linear)
  if DEBUG() >= 3: print(render_listing(linear))
  if DEBUG() >= 4: print(src)
  out = _kernels[(device, ast)] = CompiledKernel(name, rt.program(name, rt.compiler.compile_cached(src)), linear, src)
  stats["kernels_compiled"] += 1
  return out

# ---- schedules ----

@dataclass(frozen=True)
class CompiledSchedule:
  """A function's steps, ready to run: ('kernel', CompiledKernel, device, buffer ids) or ('copy', None, device, ids)."""
  sched: Schedule
  steps: tuple[tuple[str, Any, str, tuple[int, ...]], ...]
  home: tuple[int, ...]
  devices: tuple[str, ...]   # per non-argument buffer

_schedules: dict[tuple[UOp, str], CompiledSchedule] = {}

def _compile_schedule(fn: UOp, device: str) -> CompiledSchedule:
  sched = rangeify(fn)
  devices = tuple(Device.canonicalize(d or device) for _, _, d in sched.buffers)
  dev_of = [Device.canonicalize(a.device) for a in fn.src[1:]] + list(devices)
  steps = []
  for item in sched.items:
    dev = dev_of[item.bufs[0]]
    if item.ast.op is Ops.COPY: steps.append(("copy", None, dev, item.bufs))
    else: steps.append(("kernel", compile_kernel(item.ast, dev), dev, item.bufs))
  stats["schedules_built"] += 1
  return CompiledSchedule(sched, tuple(steps), tuple(memory_plan(sched)), devices)

def _run(cs: CompiledSchedule, args: list[Buffer]) -> list[Buffer]:
  sched, n = cs.sched, cs.sched.n_args
  bufs: list[Buffer | None] = list(args) + [None] * len(sched.buffers)
  for i, (size, dtype, _) in enumerate(sched.buffers):
    b = n + i
    bufs[b] = bufs[cs.home[b]] if cs.home[b] != b else Buffer(cs.devices[i], size, dtype).allocate()
  debug = DEBUG()
  for kind, k, dev, ids in cs.steps:
    if kind == "copy": bufs[ids[0]].copyin(bufs[ids[1]].numpy()); continue
    t = k.program(*(bufs[i].handle for i in ids), wait=debug >= 1)
    stats["kernels_run"] += 1
    if debug >= 1:
      print(f"*** {dev:10s} {stats['kernels_run']:5d} {k.name:24s} {t * 1e3:9.3f} ms" +
            (f"  bufs {[bufs[i].size for i in ids]}  {sum(bufs[i].nbytes for i in set(ids)) / 1e6:.3f} MB" if debug >= 2 else ""))
  return bufs  # type: ignore[return-value]

def realize(*uops: UOp, device: str | None = None) -> tuple[UOp, ...]:
  """Compute each tensor-graph UOp into a BUFFER UOp (a BUFFER is returned as it is). `device` is where values whose graph
  names no device (constants only) go; default Device.DEFAULT."""
  todo = [u for u in uops if u.op is not Ops.BUFFER]
  if not todo: return uops
  device = Device.canonicalize(device or Device.DEFAULT)
  fn = callify(*todo)
  if (cs := _schedules.get(key := (fn.src[0], device))) is None: cs = _schedules[key] = _compile_schedule(fn, device)
  bufs = _run(cs, [_buffers[a] for a in fn.src[1:]])
  results = iter(buffer_uop(u.shape, bufs[o]) if o >= cs.sched.n_args else fn.src[1 + o] for u, o in zip(todo, cs.sched.outputs))
  return tuple(u if u.op is Ops.BUFFER else next(results) for u in uops)
