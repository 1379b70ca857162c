"""Compile one kernel for a device, cached: optimize (with BEAM=n, the opts search found), then expand, isel, linearize
(the stage table in lower.py), render, compile and load. `stats` counts what the pipeline did."""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tinyspec.device import Device, UnsupportedDType
from tinyspec.device.compiler import debug_level
from tinyspec.dtype import PtrDType, dtypes
from tinyspec.engine import search
from tinyspec.engine.lower import kernel_name, render_kernel, show
from tinyspec.engine.optimize import describe_axes, no_opts, optimize
from tinyspec.uop.uop import UOp


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
    raise UnsupportedDType(f"{device} does not support {' and '.join(missing)} (its dtypes: {have})", device, tuple(missing))

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
  if debug_level() >= 2: print(f"    {kernel_name(ast)} on {device}: {describe_axes(ast)}")
  k = render_kernel(ast, rt.renderer)
  program = rt.program(k.name, rt.compiler.compile_cached(k.source, k.name))
  variables = tuple(sorted(u.arg[0] for u in k.linear.src if u.is_variable))
  out = _kernels.put(key, CompiledKernel(k.name, program, k.linear, k.source, k.global_size, k.local_size, variables))
  stats["kernels_compiled"] += 1
  return out
