"""Stages 4-7 for one optimized kernel: expand -> isel -> linearize -> render, shared by the pipeline (realize.py) and
BEAM search (search.py), which lowers many optimized versions of one kernel to time them."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinyspec.device.compiler import debug_level
from tinyspec.engine.expand import expand
from tinyspec.engine.isel import devectorize, isel
from tinyspec.engine.linearize import linearize
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import AxisType, Ops
from tinyspec.uop.spec import verify_between_stages
from tinyspec.uop.uop import UOp
from tinyspec.viz import render_listing


@dataclass(frozen=True)
class Lowered:
  """One optimized kernel rendered for a device: its name, linear program, source and launch shape."""
  name: str
  linear: UOp
  source: str
  global_size: tuple[int, ...] | None
  local_size: tuple[int, ...] | None

def show(stage: str, u: UOp) -> None:
  """DEBUG=5: the graph after `stage`."""
  if debug_level() >= 5: print(f"--- after {stage} ---\n{render_listing(u)}")

def show_text(stage: str, text: Callable[[], str]) -> None:
  """DEBUG=5: what `stage` made, as text (`text` is called only then)."""
  if debug_level() >= 5: print(f"--- after {stage} ---\n{text()}")

@dataclass(frozen=True)
class Stage:
  """One of seed 001's stages on one optimized kernel: its name, its pass, and the spec stage (docs/spec.md) its output meets."""
  name: str
  run: Callable[[UOp, Renderer], UOp]
  spec: str

KERNEL_STAGES: tuple[Stage, ...] = (
  Stage("expand", lambda k, r: expand(k), "kernel"),                               # UPCAST/UNROLL ranges copied out
  Stage("isel", lambda k, r: isel(devectorize(k, r), r.native), "kernel"),         # vectors to the device's widths, decomposed ops
  Stage("linearize", lambda k, r: linearize(k), "linear"),                         # one instruction order, loops and accumulators
)

def kernel_name(ast: UOp) -> str:
  """'r' for a kernel with a reduction, 'E' for elementwise, then its range sizes: r_16_4, E_45_65."""
  ranges = sorted((u for u in ast.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg)
  kind = "r" if any(r.axis_type in (AxisType.REDUCE, AxisType.GROUP_REDUCE, AxisType.UNROLL) for r in ranges) else "E"
  return "_".join([kind] + [str(r.size) if r.size is not None else "n" for r in ranges])

def launch_dims(linear: UOp) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
  """The grid (workgroups per dimension, from SPECIAL gidx0..2) and workgroup shape (lidx0..2) a program is launched with;
  (None, None) for a program without SPECIALs."""
  dims = {u.arg: u.size for u in linear.src if u.op is Ops.SPECIAL}
  if not dims: return None, None
  def size(prefix: str) -> tuple[int, ...]: return tuple(dims.get(f"{prefix}{d}", 1) for d in range(3))
  return size("gidx"), size("lidx")

def render_kernel(ast: UOp, renderer: Renderer, quiet: bool = False) -> Lowered:
  """An optimized kernel (stage 3's output) through KERNEL_STAGES, each verified (TINYSPEC_VERIFY=1) and shown (DEBUG=5),
  then rendered. DEBUG=3 prints its listing, 4 its source, unless `quiet` (search lowers dozens of versions of one kernel)."""
  name = kernel_name(ast)
  debug = 0 if quiet else debug_level()
  for stage in KERNEL_STAGES:
    ast = stage.run(ast, renderer)
    verify_between_stages(ast, stage.spec)
    if debug: show(stage.name, ast)
  src = renderer.render(name, ast)
  if debug >= 3: print(render_listing(ast))
  if debug >= 5: print("--- after render ---")
  if debug >= 4: print(src)
  return Lowered(name, ast, src, *launch_dims(ast))
