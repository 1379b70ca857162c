"""Stage 4, expand: ranges the optimizer made UPCAST or UNROLL are expanded into the kernel, one copy of the work per value
of the range, so no loop is left for them. An UNROLL range of a REDUCE becomes a chain of its op over the copies; an
UPCAST range closed by an END becomes a GROUP of the copied stores. Other ranges stay loops."""
from __future__ import annotations

import functools
import itertools

from tinyspec.uop.ops import AxisType, Ops
from tinyspec.uop.rewrite import PatternMatcher, UPat, graph_rewrite
from tinyspec.uop.spec import verify_between_stages
from tinyspec.uop.uop import UOp

EXPANDED = (AxisType.UPCAST, AxisType.UNROLL)

def _split(ranges: tuple[UOp, ...]) -> tuple[list[UOp], list[UOp]]:
  ups = [r for r in ranges if r.op is Ops.RANGE and r.axis_type in EXPANDED]
  return ups, [r for r in ranges if r not in ups]

def _copies(x: UOp, ups: list[UOp]) -> list[UOp]:
  """x once per combination of values of the ranges `ups` (their bounds must be constants)."""
  for r in ups:
    if r.size is None: raise ValueError(f"expand: an {r.axis_type.name} range needs a constant bound, got {r.src[0].op.name}")
  return [x.substitute({r: UOp.const(v) for r, v in zip(ups, combo)}) for combo in itertools.product(*(range(r.size) for r in ups))]

def _expand_reduce(red: UOp) -> UOp | None:
  ups, rest = _split(red.src[1:])
  if not ups: return None
  val = functools.reduce(lambda a, b: UOp(red.arg[0], (a, b)), _copies(red.src[0], ups))
  return UOp(Ops.REDUCE, (val, *rest), red.arg) if rest else val

def _expand_end(end: UOp) -> UOp | None:
  ups, rest = _split(end.src[1:])
  if not ups: return None
  body = UOp(Ops.GROUP, tuple(_copies(end.src[0], ups)))
  return UOp(Ops.END, (body, *rest)) if rest else body

pm_expand = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), _expand_reduce),  # REDUCE(x, r:unroll) -> x[r=0] op x[r=1] op ...
  (UPat(Ops.END, name="end"), _expand_end),        # END(st, r:upcast) -> GROUP(st[r=0], st[r=1], ...)
])

def expand(kernel: UOp) -> UOp:
  """The kernel with its UPCAST and UNROLL ranges expanded."""
  out = graph_rewrite(kernel, pm_expand)
  verify_between_stages(out, "kernel")
  return out
