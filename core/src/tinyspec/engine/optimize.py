"""Stage 3, optimize: reshape a kernel's iteration space for the device, as seed 001's OptOps.

A kernel's axes are its RANGEs, in the order of their ids (rangeify numbers the output axes first, then each reduction's).
An `Opt` names an axis by that position; opts apply left to right, each to the kernel the previous one left:
- SPLIT (k, target, top) cuts a range of n into an outer range of n/k and an inner one of k whose AxisType is the target
  (with `top`, the target range is the outer one, of k, and the rest is inner), and rewrites every use of the old range as
  `outer*inner_size + inner`. The new ranges take the old one's place, so later opts see them as neighbouring axes.
  UPCAST and UNROLL targets are then copied out by the expand stage; LOOP/REDUCE stay loops.
- PADTO m rounds a range up to a multiple of m, so a split by m can follow: loads in the padded part are masked (they
  read nothing and give 0), stores there are skipped, and a reduction over the range adds its identity there.
- SWAP j exchanges two axes of one type: their ids and their places in every loop nest, so the loop order changes.
- NOLOCALS promises no workgroup axes: the kernel must have no LOCAL, GROUP_REDUCE or WARP axis, and no later opt may add one.
- TC (choice, TensorCore) computes a matmul-shaped reduction with the device's matrix instruction: WMMA over a WARP axis
  of its lanes (engine/tensorcore.py). It comes first; the axes it leaves can be split further.
Each refusal is an OptError naming the opt, the axis and the rule it breaks. `NOOPT=1` gives every kernel no opts.

`hand_coded` picks opts without search, from what the kernel reads (see its docstring).
"""
from __future__ import annotations

import enum
import math
import os
from dataclasses import dataclass

from tinyspec.dtype import AddrSpace, dtypes
from tinyspec.engine import tensorcore as TC
from tinyspec.engine.rangeify import reduce_identity
from tinyspec.renderer import Renderer, TensorCore
from tinyspec.uop.ops import AxisType, GroupOp, Ops
from tinyspec.uop.rewrite import graph_rewrite
from tinyspec.uop.spec import buffer_of, verify_between_stages
from tinyspec.uop.symbolic import sym
from tinyspec.uop.uop import UOp


class OptOps(enum.Enum):
  SPLIT = enum.auto(); PADTO = enum.auto(); SWAP = enum.auto(); NOLOCALS = enum.auto(); TC = enum.auto()  # noqa: E702
  def __repr__(self): return f"OptOps.{self.name}"

@dataclass(frozen=True)
class Opt:
  """One kernel optimization (op, axis, arg): SPLIT's arg is (factor, target AxisType, top), PADTO's the multiple, SWAP's
  the other axis; NOLOCALS takes neither; TC's arg is the renderer's TensorCore and its axis which of the kernel's
  matmul shapes (`tensorcore.matches`) to use, 0 the preferred."""
  op: OptOps
  axis: int | None
  arg: object = None

class OptError(ValueError):
  """An opt that cannot apply to this kernel (bad axis, a factor that does not divide the range ...)."""

# which axis types each target may be split from (seed 001's table)
SPLIT_FROM: dict[AxisType, tuple[AxisType, ...]] = {
  AxisType.UPCAST: (AxisType.GLOBAL, AxisType.LOCAL, AxisType.LOOP), AxisType.THREAD: (AxisType.GLOBAL, AxisType.LOOP),
  AxisType.LOCAL: (AxisType.GLOBAL, AxisType.LOOP), AxisType.UNROLL: (AxisType.REDUCE, AxisType.GROUP_REDUCE),
  AxisType.GROUP_REDUCE: (AxisType.REDUCE,), AxisType.LOOP: (AxisType.LOOP, AxisType.GLOBAL), AxisType.REDUCE: (AxisType.REDUCE,),
}

# the side of the split axis each target takes (seed 001's table): inner (top=False), outer (top=True), or either
SPLIT_SIDES: dict[AxisType, tuple[bool, ...]] = {
  AxisType.UPCAST: (False,), AxisType.UNROLL: (False,), AxisType.LOCAL: (False,), AxisType.THREAD: (True,),
  AxisType.GROUP_REDUCE: (False, True), AxisType.LOOP: (False, True), AxisType.REDUCE: (False, True),
}

def axes(kernel: UOp) -> list[UOp]:
  """The kernel's RANGEs in axis order."""
  return sorted((u for u in kernel.toposort() if u.op is Ops.RANGE), key=lambda r: r.axis_id)

def _renumber(kernel: UOp, order: list[UOp]) -> UOp:
  return kernel.substitute({r: r.replace(arg=(i, r.axis_type)) for i, r in enumerate(order) if r.axis_id != i})

def _replace_ranges(kernel: UOp, values: dict[UOp, UOp], listed: dict[UOp, tuple[UOp, ...]]) -> UOp:
  """Each range r of `values` becomes values[r] where it is used as a value, and the ranges listed[r] where an END or REDUCE
  lists it among its ranges (an END left with none is just its body)."""
  memo: dict[UOp, UOp] = {}
  for u in kernel.toposort():
    if u in values: memo[u] = values[u]; continue
    src = tuple(memo[s] for s in u.src)
    if u.op in (Ops.END, Ops.REDUCE) and any(s in listed for s in u.src[1:]):
      rngs = tuple(n for s in u.src[1:] for n in listed.get(s, (memo[s],)))
      memo[u] = u.replace(src=(src[0], *rngs)) if rngs or u.op is Ops.REDUCE else src[0]
    else: memo[u] = u if src == u.src else u.replace(src=src)
  return memo[kernel]

def _axis(rngs: list[UOp], axis: int | None, what: str) -> UOp:
  """Axis number `axis` of a kernel whose axes are `rngs`, or an OptError naming `what` asked for it."""
  if axis is None or not 0 <= axis < len(rngs): raise OptError(f"{what}: axis {axis} out of range for a kernel with {len(rngs)} axes")
  if rngs[axis].size is None: raise OptError(f"{what}: axis {axis} has a symbolic bound")
  return rngs[axis]

def _rebuild(kernel: UOp, edit) -> UOp:
  """The kernel rebuilt bottom-up: each node with its sources rebuilt, then passed to edit(original, rebuilt)."""
  memo: dict[UOp, UOp] = {}
  for u in kernel.toposort():
    src = tuple(memo[s] for s in u.src)
    memo[u] = edit(u, u if src == u.src else u.replace(src=src))
  return memo[kernel]

def split(kernel: UOp, axis: int, factor: int, target: AxisType, top: bool = False) -> UOp:
  """The kernel with axis `axis` split by `factor` into a `target` range (inner, or outer with `top`) and the rest."""
  rngs = axes(kernel)
  r = _axis(rngs, axis, "SPLIT")
  n, kind = r.size, r.axis_type
  if n < 1: raise OptError(f"SPLIT: axis {axis} is empty")
  if factor < 1 or n % factor: raise OptError(f"SPLIT: factor {factor} does not divide axis {axis} of size {n}")
  if kind not in SPLIT_FROM.get(target, ()): raise OptError(f"SPLIT: a {target.name} axis cannot be split from {kind.name} axis {axis}")
  if target in (AxisType.GROUP_REDUCE, AxisType.THREAD) and any(x.axis_type is target for x in rngs):
    raise OptError(f"SPLIT: a kernel has one {target.name} axis at most (axis {axis} would be a second)")
  if top not in SPLIT_SIDES[target]:
    sides = ("outer", "inner") if top else ("inner", "outer")
    raise OptError(f"SPLIT: a {target.name} axis is the {sides[1]} part of a split, not the {sides[0]}")
  outer_n, inner_n = (factor, n // factor) if top else (n // factor, factor)
  outer_t, inner_t = (target, kind) if top else (kind, target)
  # temporary ids past every existing one; _renumber puts them at the split axis' place
  outer = UOp.range(outer_n, len(rngs), outer_t) if outer_n > 1 else UOp.const(0)
  inner = UOp.range(inner_n, len(rngs) + 1, inner_t) if inner_n > 1 else UOp.const(0)
  expr = outer * inner_n + inner
  new = tuple(x for x in (inner, outer) if x.op is Ops.RANGE)  # END/REDUCE list ranges innermost first
  out = graph_rewrite(_replace_ranges(kernel, {r: expr}, {r: new}), sym)
  order = rngs[:axis] + [x for x in (outer, inner) if x.op is Ops.RANGE] + rngs[axis + 1:]
  return _renumber(out, order)

PADDABLE = (AxisType.LOOP, AxisType.GLOBAL, AxisType.REDUCE)

def _gate(u: UOp, inside: UOp) -> UOp:
  """A LOAD or STORE that also needs `inside` to hold: a LOAD outside it gives 0 (or its own alternative), a STORE does nothing."""
  if u.op is Ops.LOAD: return u.replace(src=(u.src[0], UOp.const(0, u.dtype), inside) if len(u.src) == 1 else (*u.src[:2], u.src[2] & inside))
  return u.replace(src=(*u.src[:2], inside) if len(u.src) == 2 else (*u.src[:2], u.src[2] & inside))

def padto(kernel: UOp, axis: int, multiple: int) -> UOp:
  """The kernel with axis `axis` (of n) running to the next multiple of `multiple`, the iterations past n masked."""
  rngs = axes(kernel)
  r = _axis(rngs, axis, "PADTO")
  n = r.size
  if r.axis_type not in PADDABLE:
    raise OptError(f"PADTO: axis {axis} is {r.axis_type.name}: pad an axis before splitting it ({', '.join(t.name for t in PADDABLE)})")
  if multiple < 2 or n % multiple == 0: raise OptError(f"PADTO: axis {axis} of size {n} is already a multiple of {multiple}")
  if (padded := -(-n // multiple) * multiple) > 2 * n:
    raise OptError(f"PADTO: padding axis {axis} from {n} to {padded} would more than double its work")
  for u in kernel.toposort():  # a masked load gives 0: an integer division by a loaded value would divide by zero there
    if u.op in (Ops.IDIV, Ops.MOD) and dtypes.is_int(u.dtype) and any(x.op is Ops.LOAD for x in u.src[1].toposort()):
      raise OptError(f"PADTO: axis {axis}: the kernel divides by a loaded integer, which would be 0 in the padded part")
  wide = r.replace(src=(UOp.const(padded),))
  inside, varies = wide < n, {r}  # varies: the nodes that depend on r (mask sees them in dependency order)
  def mask(old: UOp, new: UOp) -> UOp:
    if old is r: return wide
    if any(s in varies for s in old.src): varies.add(old)
    if old.op in (Ops.LOAD, Ops.STORE) and old.src[0] in varies: return _gate(new, inside)
    if old.op is Ops.REDUCE and r in old.src[1:]:  # the padded part adds the reduction's identity
      return new.replace(src=(inside.where(new.src[0], reduce_identity(old.arg[0], old.dtype)), *new.src[1:]))
    return new
  return graph_rewrite(_rebuild(kernel, mask), sym)

def swap(kernel: UOp, axis: int, other: int) -> UOp:
  """The kernel with axes `axis` and `other` (of one AxisType) exchanged: in the axis order and in each loop nest."""
  rngs = axes(kernel)
  a, b = _axis(rngs, axis, "SWAP"), _axis(rngs, other, "SWAP")
  if a is b: raise OptError(f"SWAP: axis {axis} with itself")
  if a.axis_type is not b.axis_type:
    raise OptError(f"SWAP: axis {axis} is {a.axis_type.name} and axis {other} is {b.axis_type.name}: only axes of one type swap")
  def exchange(old: UOp, new: UOp) -> UOp:
    if old.op not in (Ops.END, Ops.REDUCE) or a not in old.src[1:] or b not in old.src[1:]: return new
    return new.replace(src=(new.src[0], *(b if x is a else a if x is b else x for x in new.src[1:])))
  order = list(rngs)
  order[axis], order[other] = b, a
  return _renumber(_rebuild(kernel, exchange), order)

def tensor_core(kernel: UOp, choice: int, tc: TensorCore) -> UOp:
  """The kernel with its matmul-shaped reduction number `choice` (of `tensorcore.matches`) computed by instruction `tc`:
  its axes padded to multiples of tc.dims, then split into WMMA's WARP and element axes (see engine/tensorcore.py)."""
  if not isinstance(tc, TensorCore): raise OptError(f"TC: the arg must be a TensorCore of the renderer, got {tc!r}")
  if split_already := [r for r in axes(kernel) if r.axis_type not in (*TC.OUTPUT, AxisType.REDUCE)]:
    raise OptError(f"TC: must come before other opts, but axis {split_already[0].axis_id} is already {split_already[0].axis_type.name}")
  found = TC.matches(kernel, tc)
  if not found: raise OptError(f"TC: no reduction of this kernel is a sum of products in {tc.dtype_in.name} -> {tc.dtype_out.name} ({tc.name})")
  if not isinstance(choice, int) or not 0 <= choice < len(found):
    raise OptError(f"TC: choice {choice} out of range: the kernel's reductions match {tc.name} in {len(found)} ways")
  ids = (found[choice].m.axis_id, found[choice].n.axis_id, found[choice].k.axis_id)
  for axis, multiple in zip(ids, tc.dims):
    if axes(kernel)[axis].size % multiple: kernel = padto(kernel, axis, multiple)
  t = next(x for x in TC.matches(kernel, tc) if (x.m.axis_id, x.n.axis_id, x.k.axis_id) == ids)
  rngs = axes(kernel)
  kernel, values, places = TC.lower(kernel, t, tc, len(rngs))
  kernel = graph_rewrite(_replace_ranges(kernel, values, {t.m: tuple(places[t.m]), t.n: (*places[t.n], *places[None])}), sym)
  return _renumber(kernel, [x for r in rngs for x in places.get(r, [r])] + places[None])

NO_LOCALS = (AxisType.LOCAL, AxisType.GROUP_REDUCE, AxisType.WARP)  # the axes of a workgroup's lanes, which NOLOCALS forbids

def apply_opts(kernel: UOp, opts: list[Opt] | tuple[Opt, ...]) -> UOp:
  """The kernel with `opts` applied left to right; raises OptError naming the first that cannot apply."""
  nolocals = False
  for opt in opts:
    if opt.op is OptOps.SPLIT:
      if nolocals and opt.arg[1] in NO_LOCALS: raise OptError(f"SPLIT: a {opt.arg[1].name} axis after NOLOCALS")
      kernel = split(kernel, opt.axis, *opt.arg)
    elif opt.op is OptOps.PADTO: kernel = padto(kernel, opt.axis, opt.arg)
    elif opt.op is OptOps.SWAP: kernel = swap(kernel, opt.axis, opt.arg)
    elif opt.op is OptOps.NOLOCALS:
      if nolocals: raise OptError("NOLOCALS: given twice")
      if has := [r.axis_type.name for r in axes(kernel) if r.axis_type in NO_LOCALS]:
        raise OptError(f"NOLOCALS: the kernel already has {has[0]} axes")
      nolocals = True
    elif opt.op is OptOps.TC:
      if nolocals: raise OptError("TC: its WARP axis is a workgroup's lanes, and NOLOCALS came before")
      kernel = tensor_core(kernel, opt.axis or 0, opt.arg)
    else: raise OptError(f"unknown opt {opt.op!r}")
  verify_between_stages(kernel, "kernel")
  return kernel

def _stride(idx: UOp, r: UOp, rngs: list[UOp]) -> int | None:
  """How far `idx` moves when range `r` steps by one from all-zero ranges (None when that does not fold to a constant)."""
  at = [graph_rewrite(idx.substitute({x: UOp.const(int(x is r and step)) for x in rngs}), sym) for step in (0, 1)]
  return at[1].arg[0] - at[0].arg[0] if all(v.op is Ops.CONST for v in at) else None

def _factor(n: int, prefer: int) -> int:
  """The largest power of two up to `prefer` dividing n (1 when none above 1 does)."""
  f = prefer
  while f > 1 and n % f: f //= 2
  return f

def _indexed(nodes: list[UOp], op: Ops) -> list[UOp]:
  """The INDEX each STORE writes or each LOAD reads among `nodes` (the kernel's toposort), in order."""
  return [u.src[0] for u in nodes if u.op is op and u.src[0].op is Ops.INDEX]

ODD_WINDOW = 7  # `register_tile`: the longest odd output axis (a convolution window) copied whole when none can take its place

def register_tile(kernel: UOp, first: int, budget: int) -> list[Opt]:
  """UPCAST opts for a kernel with a reduction: upcast the output axes over which some input is invariant (a matmul's rows
  and columns, a convolution's channels and pixels), so each loaded value is reused from registers by every copy instead
  of being loaded again. The axis contiguous in the output goes first, by up to `first`; a second axis, preferably one the
  first one's vector loads do not vary over, gets what the `budget` of copies leaves, at most 16 (a conv over rows of 56
  gets 8 x 16 on an AVX-512 CPU: 195 -> 205 GFLOP/s against 8 x 8). The kernel's reductions share the budget, each
  keeping an accumulator per copy."""
  rngs = axes(kernel)
  if budget < 2 or not any(r.axis_type is AxisType.REDUCE for r in rngs): return []
  nodes = kernel.toposort()
  stores, loads = _indexed(nodes, Ops.STORE), _indexed(nodes, Ops.LOAD)
  # outputs computed together (rangeify's output_groups) must store at one index; each reduction has its accumulators
  if not stores or len({st.src[1] for st in stores}) != 1 or not loads: return []
  budget //= max(1, sum(u.op is Ops.REDUCE for u in nodes))
  out_idx, deps = stores[0].src[1], [set(ld.src[1].toposort()) for ld in loads]
  outs = [r for r in rngs if r.axis_type in (AxisType.LOOP, AxisType.GLOBAL) and (r.size or 0) > 1 and r in out_idx.toposort()]
  # an axis is worth copying where a reduction that varies over it reads some input that does not: every copy then reuses
  # that load. A reduction that does not vary over the axis (a row's sum, read by each column) runs once per row anyway,
  # and the columns' elementwise work is left to the device compiler's loop vectorizer (attention's dS 1.2 -> 0.4 ms)
  bodies = [set(u.src[0].toposort()) for u in nodes if u.op is Ops.REDUCE]
  def reuses(r: UOp) -> bool: return any(r in body and any(ld in body and r not in d for ld, d in zip(loads, deps)) for body in bodies)
  reused = sorted((r for r in outs if reuses(r)), key=lambda r: _stride(out_idx, r, rngs) != 1)  # the output's contiguous axis first
  # copies along other axes only, the output's rows would be stored element by element: a row reduction (an RMSNorm's
  # backward, whose sum reads the weight once per row) is left to the device compiler (0.2 -> 0.07 ms for 1024x64)
  if not reused or _stride(out_idx, reused[0], rngs) != 1: return []
  # a contiguous axis no power of two divides (a convolution window's 3) cannot be split: copy first, in its place, the
  # innermost axis some input is read along, so each copy's load of that input is a lane of one vector load (a conv's
  # input gradient, rows 8 x channels 8: 0.57 -> 0.12 ms). With none, a window of at most ODD_WINDOW is copied whole (a
  # conv's weight gradient, 16 channels x 3: 0.35 -> 0.25 ms), a longer one keeps its place, copied once
  whole = None
  if reused[0].size % 2:
    along = [r for r in reused if r.size % 2 == 0 and any(_stride(ld.src[1], r, rngs) == 1 for ld in loads)]
    if along: reused = along[-1:] + [r for r in reused[1:] if r is not along[-1]]
    elif reused[0].size <= min(ODD_WINDOW, budget): whole = reused[0]
  # then an axis the first one's vector loads do not depend on, so each vector load is shared by the second axis' copies
  vector_loads = [d for ld, d in zip(loads, deps) if _stride(ld.src[1], reused[0], rngs) == 1]
  reused[1:] = sorted(reused[1:], key=lambda r: any(r in d for d in vector_loads))
  plan: list[tuple[UOp, int]] = []
  for r, prefer in zip(reused, (first, 16)):  # the second axis takes what the budget leaves, at most 16
    if (f := r.size if r is whole else _factor(r.size, min(prefer, budget))) > 1: plan.append((r, f)); budget //= f
  # split later axes first, so the positions of earlier ones still hold
  plan.sort(key=lambda p: -rngs.index(p[0]))
  return [Opt(OptOps.SPLIT, rngs.index(r), (f, AxisType.UPCAST, False)) for r, f in plan]

def column_vectors(kernel: UOp, width: int) -> list[Opt]:
  """An UPCAST, by `width`, of the output axis that the store and every load run along contiguously (or not at all), for
  a reduction that steps through memory: a column sum, a bias's gradient. Its copies' loads and adds are then vectors,
  where the loop over the strided reduction stays scalar ((1024, 256).sum(0): 0.16 -> 0.02 ms on a CPU). A reduction
  that reads along memory is left alone: the device compiler vectorizes its loop (a row sum)."""
  rngs, nodes = axes(kernel), kernel.toposort()
  stores, loads = _indexed(nodes, Ops.STORE), _indexed(nodes, Ops.LOAD)
  red = [r for r in rngs if r.axis_type is AxisType.REDUCE]
  if len(stores) != 1 or not loads or not red or any(_stride(ld.src[1], red[-1], rngs) == 1 for ld in loads): return []
  for r in reversed(rngs):
    if r.axis_type not in (AxisType.LOOP, AxisType.GLOBAL) or _stride(stores[0].src[1], r, rngs) != 1: continue
    if all(_stride(ld.src[1], r, rngs) in (0, 1) for ld in loads) and (f := _factor(r.size or 1, width)) > 1:
      return [Opt(OptOps.SPLIT, rngs.index(r), (f, AxisType.UPCAST, False))]
  return []

SHORT_REDUCE, UNROLL_MAX = 4, 16  # a reduce axis this short is unrolled, innermost first, up to this many copies in all

def unroll_short_reductions(kernel: UOp) -> list[Opt]:
  """UNROLL opts for the innermost reduce axes while each has at most SHORT_REDUCE values (a convolution's 3x3 window):
  a loop of 3 costs more in its own overhead than its body, and unrolled, its loads of neighbouring elements can share
  vector loads. They add no accumulators, so they do not count against max_upcast. CPU conv2d: 48 -> 124 GFLOP/s."""
  rngs, opts, copies = axes(kernel), [], 1
  for r in reversed([r for r in rngs if r.axis_type is AxisType.REDUCE]):
    if r.size is None or r.size > SHORT_REDUCE or copies * r.size > UNROLL_MAX: break
    opts.append(Opt(OptOps.SPLIT, rngs.index(r), (r.size, AxisType.UNROLL, False)))
    copies *= r.size
  return opts

INDEPENDENT_COPIES, SHORT_BODY = 16, 16  # `short_sum_copies`: copies of an outer output axis, at most; value ops, at most

def short_sum_copies(kernel: UOp) -> list[Opt]:
  """An UPCAST, by up to INDEPENDENT_COPIES, of the outermost output axis of a kernel whose reductions are all short (at
  most SHORT_REDUCE values an axis) and that reuses no load (no register tile): the fold of a convolution's input
  gradient, an average pool. Each output's few additions are a dependent chain inside a loop of a few steps; the copies
  are independent chains that share the index arithmetic and gates of every other axis (the fold: 0.16 ms unrolled ->
  0.07 ms with 16 images as copies). Only for a value of at most SHORT_BODY ops (index arithmetic aside; the fold's are
  its gates): copies of a longer one (a max pool's backward, comparing BatchNorm's output with its max, 27 ops) cost
  registers (0.03 -> 0.27 ms)."""
  rngs = axes(kernel)
  if sum(u.op in GroupOp.ALU and u.dtype != dtypes.index for u in kernel.toposort()) > SHORT_BODY: return []
  red = [r for r in rngs if r.axis_type is AxisType.REDUCE]
  if not red or any(r.size is None or r.size > SHORT_REDUCE for r in red): return []
  outer = next((r for r in rngs if r.axis_type in (AxisType.LOOP, AxisType.GLOBAL) and (r.size or 1) > 1), None)
  if outer is None or (f := _factor(outer.size, INDEPENDENT_COPIES)) < 2: return []
  return [Opt(OptOps.SPLIT, rngs.index(outer), (f, AxisType.UPCAST, False))]

def _divided(kernel: UOp, r: UOp) -> bool:
  """Whether some load's index divides (// or %) an expression of range r: r walks merged axes, or a pool's window."""
  return any(u.op in (Ops.IDIV, Ops.MOD) and r in u.src[0].toposort() for ld in _indexed(kernel.toposort(), Ops.LOAD) for u in ld.src[1].toposort())

def divided_axis_vectors(kernel: UOp, width: int) -> list[Opt]:
  """An UPCAST, by `width`, of the innermost axis of an elementwise kernel whose loads divide it (a max pool's backward
  reads its window's maximum at x // 2): each copy's division is then by a constant, folded away, where the device
  compiler vectorizes no loop over x // 2 (examples/cnn.py's pool backward: 0.107 -> 0.027 ms)."""
  rngs = axes(kernel)
  if not rngs or any(r.axis_type is AxisType.REDUCE for r in rngs) or (r := rngs[-1]).axis_type not in (AxisType.LOOP, AxisType.GLOBAL): return []
  if r.size is None or (f := _factor(r.size, width)) < 2 or not _divided(kernel, r): return []
  return [Opt(OptOps.SPLIT, len(rngs) - 1, (f, AxisType.UPCAST, False))]

MERGED_COPIES, MERGED_UNROLL = 8, 4  # `merged_sum_copies`: copies of the innermost output axis, at most; the reduction's unroll

def merged_sum_copies(kernel: UOp) -> list[Opt]:
  """For a long reduction over merged axes (rangeify's blocks of a sum over images and pixels: BatchNorm's per-channel
  statistics), whose index divides its range back into those axes (so the device compiler cannot vectorize its loop),
  with no register tile: an UPCAST of the innermost output axis by up to MERGED_COPIES, independent accumulators, and an
  UNROLL of the reduction by MERGED_UNROLL, whose consecutive elements then share one division and one vector load (8
  channels of 1024: 0.053 -> 0.024 ms)."""
  rngs = axes(kernel)
  red = [r for r in rngs if r.axis_type is AxisType.REDUCE]
  if not red or (r := red[-1]).size is None or r.size <= UNROLL_MAX or r.size % MERGED_UNROLL or not _divided(kernel, r): return []
  outs = [o for o in rngs if o.axis_type in (AxisType.LOOP, AxisType.GLOBAL) and (o.size or 1) > 1]
  if not outs or (f := _factor((inner := outs[-1]).size, MERGED_COPIES)) < 2: return []
  splits = sorted([(rngs.index(r), MERGED_UNROLL, AxisType.UNROLL), (rngs.index(inner), f, AxisType.UPCAST)], reverse=True)
  return [Opt(OptOps.SPLIT, a, (n, t, False)) for a, n, t in splits]  # the later axis first, so the earlier one's position holds

def thread_split(kernel: UOp, renderer: Renderer) -> list[Opt]:
  """A THREAD split (outer, by the renderer's `threads`) of the outermost output axis that many divides, for a kernel with
  `split_min_work` innermost iterations or more that reads no buffer it writes (its iterations could then depend on each
  other through memory). The THREAD axis is how a CPU kernel runs on several cores: one call per value of it."""
  t, rngs = renderer.threads, axes(kernel)
  if t < 2 or not rngs or math.prod(int(r.src[0].vmax) for r in rngs) < max(1, renderer.split_min_work): return []
  nodes = kernel.toposort()
  stored = {buffer_of(u.src[0]) for u in nodes if u.op is Ops.STORE}
  if any(u.op is Ops.LOAD and buffer_of(u.src[0]) in stored for u in nodes): return []
  outer = next((i for i, r in enumerate(rngs) if r.axis_type in (AxisType.LOOP, AxisType.GLOBAL) and (r.size or 1) % t == 0 and r.size), None)
  return [] if outer is None else [Opt(OptOps.SPLIT, outer, (t, AxisType.THREAD, True))]

def plain_products(kernel: UOp) -> bool:
  """Whether the kernel's values are only sums of products (a matmul, a convolution, a bias added): index arithmetic aside."""
  return all(u.op in (Ops.ADD, Ops.MUL) for u in kernel.toposort() if u.op in GroupOp.ALU and u.dtype != dtypes.index)

def hand_coded(kernel: UOp, renderer: Renderer) -> list[Opt]:
  """Opts chosen without search for a CPU-like device: a THREAD split over its cores (`thread_split`), a register tile
  (`register_tile`) or else vectors along a strided reduction's output (`column_vectors`), then the short innermost
  reductions unrolled; with neither, a short sum of a short value gets copies of an outer axis (`short_sum_copies`), a
  long sum over merged axes copies and an unroll (`merged_sum_copies`), an elementwise kernel whose loads divide its
  innermost axis vectors along it (`divided_axis_vectors`). Other elementwise kernels are left to the device compiler.
  A kernel of plain sums of products gets a tile two of the renderer's widest vectors wide (at least 4) with all of
  `max_upcast`: its copies are accumulators and loads only. Any other gets one vector and half the copies: each copy's
  epilogue (a gelu, a mask) needs registers too, and LLVM vectorizes wide copies of long expressions badly (a GPT step
  12 -> 25 ms with every kernel at the full budget; 1024^3 matmul 398 -> 455 GFLOP/s with plain ones at it)."""
  opts = thread_split(kernel, renderer)
  if renderer.max_upcast < 2: return opts
  plain = plain_products(kernel)
  width, budget = max(*renderer.vector_widths, 4) * (2 if plain else 1), renderer.max_upcast // (1 if plain else 2)
  threaded, vector = apply_opts(kernel, opts), max(renderer.vector_widths)
  tile = register_tile(threaded, width, budget) or column_vectors(threaded, vector)
  if tile: return opts + tile + unroll_short_reductions(apply_opts(kernel, opts + tile))
  if copies := short_sum_copies(threaded) or merged_sum_copies(threaded) or divided_axis_vectors(threaded, vector): return opts + copies
  return opts + unroll_short_reductions(threaded)

# ---- GPUs: GLOBAL/LOCAL axes become SPECIAL indices, GROUP_REDUCE a reduction through LOCAL memory ----

def is_gpu(renderer: Renderer) -> bool:
  """Whether kernels for `renderer` launch as a grid of workgroups (it has workgroups and a grid limit)."""
  return renderer.has_local and renderer.global_max is not None

def _retype(kernel: UOp, old: AxisType, new: AxisType) -> UOp:
  """Ranges of type `old` with a constant bound retyped `new` (a symbolic one stays: a grid's size is fixed at compile time)."""
  return kernel.substitute({r: r.replace(arg=(r.axis_id, new)) for r in axes(kernel) if r.axis_type is old and r.size is not None})

def _applies(kernel: UOp, opts: list[Opt]) -> bool:
  """Whether every opt of `opts` applies to the kernel (a heuristic proposes only what the optimizer takes)."""
  try: apply_opts(kernel, opts)
  except OptError: return False
  return True

def tensor_core_opts(kernel: UOp, renderer: Renderer) -> list[Opt]:
  """A TC opt with the first of the renderer's tensor cores whose matmul the kernel is, with each of its m, n and k at
  least the instruction's size (so padding at most doubles them). TC=0 turns tensor cores off; by default only 16-bit
  and narrower inputs use them, TC=2 float32 too (NVIDIA's tf32 then keeps 10 bits of their mantissa)."""
  if (mode := os.environ.get("TC", "1")) == "0": return []
  for tc in renderer.tensor_cores:
    if tc.dtype_in.itemsize >= 4 and mode != "2": continue
    found = TC.matches(kernel, tc)
    big_enough = found and all(r.size >= d for r, d in zip((found[0].m, found[0].n, found[0].k), tc.dims))
    if big_enough and _applies(kernel, opts := [Opt(OptOps.TC, 0, tc)]): return opts
  return []

PAD_LANES = 16  # the workgroup part a GPU output axis whose size has no power-of-two factor of 16 or more is padded to

def gpu_opts(kernel: UOp, renderer: Renderer) -> list[Opt]:
  """Opts for a GPU kernel, whose output axes start GLOBAL: a matmul in a tensor core's dtypes uses it (`tensor_core_opts`);
  otherwise a reduction whose inputs are reused across 4096 outputs or more
  gets a register tile per lane (`register_tile` within `max_upcast`: 4x8 for the default 32, 16x8 for 128); any other
  long reduction is split over a workgroup (GROUP_REDUCE, partial sums in LOCAL memory), so a workgroup's lanes read a
  row together instead of one row each; an
  elementwise kernel gets its contiguous output axis upcast to vectors (`vector_upcast`). The output's innermost axis
  left gets a LOCAL part, so neighbouring lanes of a workgroup touch neighbouring memory; where its size has no power-of-two
  factor of PAD_LANES or more (1001), it is padded to a multiple of PAD_LANES first, the padded lanes masked."""
  if tc := tensor_core_opts(kernel, renderer): return tc
  rngs = axes(kernel)
  sized = [r for r in rngs if (r.size or 0) > 1]
  glob, red = [r for r in sized if r.axis_type is AxisType.GLOBAL], [r for r in sized if r.axis_type is AxisType.REDUCE]
  lanes = min(256, renderer.local_max[0])
  outputs = math.prod(r.size for r in glob)
  nested = any(_loops_around(u) for u in kernel.toposort() if u.op is Ops.REDUCE and red and red[-1] in u.src[1:])
  opts = register_tile(kernel, min(16, max(4, renderer.max_upcast // 8)), renderer.max_upcast) if outputs >= 4096 else []
  # a long reduction whose inputs no output shares (a softmax's rows: 0.97 -> 2.0 GB/s on PoCL), or into a small output
  if renderer.has_shared and red and not opts and red[-1].size >= 256 and not nested:
    if (f := _factor(red[-1].size, min(lanes, renderer.group_lanes))) > 1:
      return [Opt(OptOps.SPLIT, rngs.index(red[-1]), (f, AxisType.GROUP_REDUCE, False))]
  if not opts and not red and outputs >= 4096: opts = vector_upcast(kernel, renderer)  # elementwise: float4 loads and stores
  rngs = axes(apply_opts(kernel, opts)) if opts else rngs
  glob = [r for r in rngs if r.axis_type is AxisType.GLOBAL and (r.size or 0) > 1]
  if not glob: return opts
  axis, f = rngs.index(glob[-1]), _factor(glob[-1].size, min(lanes, 64))
  if f < PAD_LANES <= glob[-1].size // 4 and _applies(kernel, pad := [*opts, Opt(OptOps.PADTO, axis, PAD_LANES)]):
    opts, f = pad, PAD_LANES  # a size with no power-of-two factor worth a workgroup: padded (25% more at most)
  return opts + [Opt(OptOps.SPLIT, axis, (f, AxisType.LOCAL, False))] if f > 1 else opts

GPU_VECTOR = 4  # the width a GPU lane's elementwise loads and stores get: float4, 16 bytes, the widest most GPUs load at once

def vector_upcast(kernel: UOp, renderer: Renderer) -> list[Opt]:
  """An UPCAST, by the renderer's float32 vector width up to GPU_VECTOR, of the output axis the kernel's store is contiguous
  along, so each lane reads and writes vectors (float4) instead of single elements."""
  width = max((w for w in renderer.vector_widths if w <= GPU_VECTOR), default=1) if dtypes.float32 in renderer.vector_dtypes else 1
  stores = _indexed(kernel.toposort(), Ops.STORE)
  if width < 2 or len(stores) != 1: return []
  rngs = axes(kernel)
  for r in reversed(rngs):
    if r.axis_type is AxisType.GLOBAL and (r.size or 0) % width == 0 and _stride(stores[0].src[1], r, rngs) == 1:
      return [Opt(OptOps.SPLIT, rngs.index(r), (width, AxisType.UPCAST, False))]
  return []

def _dims(ranges: list[UOp], limits: tuple[int, ...], what: str) -> list[list[UOp]]:
  """Ranges (outermost first) grouped into at most len(limits) launch dimensions within `limits`, innermost range in dimension 0:
  extra ranges, and any dimension over its limit, are merged into dimension 0."""
  dims = [[r] for r in reversed(ranges)]
  while len(dims) > len(limits): dims[0] = dims.pop() + dims[0]
  size = lambda d: math.prod(r.size for r in d)  # noqa: E731
  for i in range(len(dims) - 1, 0, -1):
    if size(dims[i]) > limits[i]: dims[0] = dims.pop(i) + dims[0]
  if dims and size(dims[0]) > limits[0]: raise OptError(f"{what} size {size(dims[0])} exceeds the device's limit {limits[0]}")
  return dims

def _specials(dims: list[list[UOp]], prefix: str) -> dict[UOp, UOp]:
  """Each range of each dimension as an expression of that dimension's SPECIAL (merged ranges by // and %)."""
  out: dict[UOp, UOp] = {}
  for d, group in enumerate(dims):
    n = math.prod(r.size for r in group)
    sp, inner = UOp(Ops.SPECIAL, (UOp.const(n),), f"{prefix}{d}"), 1
    for r in reversed(group):
      size = r.size
      out[r] = sp if len(group) == 1 else (sp // inner) % size if inner > 1 else sp % size
      inner *= size
  return out

_SERIAL = (AxisType.LOOP, AxisType.REDUCE, AxisType.UNROLL, AxisType.GROUP_REDUCE)  # axes a lane walks through one at a time

def _loops_around(red: UOp) -> list[UOp]:
  """The serial axes a REDUCE runs inside (those its value depends on besides its own). A GROUP_REDUCE's partials are
  written once per lane and read after one BARRIER: inside another loop, or its unrolled copies, lanes would overwrite
  partials that other lanes are still reading."""
  return [x for x in red.src[0].toposort() if x.op is Ops.RANGE and x not in red.src[1:] and x.axis_type in _SERIAL]

def _group_reduce(kernel: UOp, g: UOp, lane: UOp) -> UOp:
  """REDUCE(x, ..., g) with g a GROUP_REDUCE range: each lane reduces its share into LOCAL memory, a BARRIER, then every lane
  reduces the partials of its row (the lanes, and copies, that differ only in g); only g's lane 0 writes the results."""
  n, slot = g.size, sum(u.op is Ops.BUFFER for u in kernel.toposort())
  ids = len(axes(kernel))
  # the workgroup's other lanes (LOCAL and WARP axes) and a lane's upcast copies (UPCAST axes) each have n partials of their own
  rows, row = 1, UOp.const(0)
  for r in (r for r in axes(kernel) if r.axis_type in (AxisType.LOCAL, AxisType.WARP, AxisType.UPCAST)): rows, row = rows * r.size, row * r.size + r
  def rebuild(red: UOp) -> UOp:
    rest = tuple(r for r in red.src[1:] if r is not g)
    partial = UOp(Ops.REDUCE, (red.src[0], *rest), red.arg) if rest else red.src[0]
    buf = UOp(Ops.BUFFER, (UOp.vec((rows * n,)),), (slot, red.dtype, None, AddrSpace.LOCAL))
    filled = UOp(Ops.STORE, (buf.index(row * n + g), partial))
    def partials(i: UOp) -> UOp: return UOp(Ops.LOAD, (UOp(Ops.AFTER, (buf, UOp(Ops.BARRIER, (filled,)))).index(row * n + i),))
    if red.arg[0] is Ops.ADD and dtypes.is_float(red.dtype) and n >= 16:
      # a float sum of the lanes' partials in two levels of about sqrt(n) each, not one chain: 256 partials of 390625
      # (ones(10_000, 10_000).sum()) stop adding exactly after 42 in float32
      b = 1 << (n.bit_length() - 1) // 2
      outer, inner = UOp.range(n // b, ids, AxisType.REDUCE), UOp.range(b, ids + 1, AxisType.REDUCE)
      return UOp(Ops.REDUCE, (UOp(Ops.REDUCE, (partials(outer * b + inner), inner), red.arg), outer), red.arg)
    r2 = UOp.range(n, ids, AxisType.REDUCE)
    return UOp(Ops.REDUCE, (partials(r2), r2), red.arg)
  reds = [u for u in kernel.toposort() if u.op is Ops.REDUCE and g in u.src[1:]]
  if len(reds) != 1: raise OptError(f"GROUP_REDUCE: a kernel with {len(reds)} reductions over one range is not supported")
  if loops := _loops_around(reds[0]):
    raise OptError(f"GROUP_REDUCE: the reduction runs inside a {loops[0].axis_type.name} axis of {loops[0].size}; its partials would be overwritten")
  out = kernel.substitute({reds[0]: rebuild(reds[0])})
  first = lane.eq(0)
  return out.substitute({u: _gate(u, first) for u in out.toposort() if u.op is Ops.STORE and u.src[0].src[0].addrspace is not AddrSpace.LOCAL})

def gpu_dims(kernel: UOp, renderer: Renderer) -> UOp:
  """GLOBAL ranges become SPECIAL gidx (workgroup ids), LOCAL and GROUP_REDUCE ranges SPECIAL lidx (lanes of a workgroup),
  grouped into at most three dimensions each within the renderer's limits; they stop being loops."""
  rngs = axes(kernel)
  glob = _dims([r for r in rngs if r.axis_type is AxisType.GLOBAL], renderer.global_max, "grid")
  # a WARP axis (a TC opt's) is lidx0 alone, so each value of the other lane indices is exactly one warp
  warp = [[r] for r in rngs if r.axis_type is AxisType.WARP]
  loc = warp + _dims([r for r in rngs if r.axis_type in NO_LOCALS and r.axis_type is not AxisType.WARP], renderer.local_max[len(warp):], "workgroup")
  sub = {**_specials(glob, "gidx"), **_specials(loc, "lidx")}
  for g in (r for r in rngs if r.axis_type is AxisType.GROUP_REDUCE): kernel = _group_reduce(kernel, g, sub[g])
  return graph_rewrite(_replace_ranges(kernel, sub, {r: () for r in sub}), sym)

def describe_axes(kernel: UOp) -> str:
  """An optimized kernel's iteration space, for DEBUG>=2: its launch indices, then each axis' size and AxisType letter
  (seed 001's) in axis order, e.g. `gidx0=32 lidx0=16 | 8u 16u 256R`, then the TensorCore a TC opt gave it."""
  specials = sorted((u for u in kernel.toposort() if u.op is Ops.SPECIAL), key=lambda u: u.arg)
  loops = " ".join(f"{r.size if r.size is not None else 'n'}{r.axis_type.value}" for r in axes(kernel))
  tcs = sorted({repr(u.arg) for u in kernel.toposort() if u.op is Ops.WMMA})  # the tensor-core table entry it uses
  return " ".join(f"{u.arg}={u.size}" for u in specials) + (" | " if specials and loops else "") + loops + "".join(f" | {t}" for t in tcs)

def no_opts() -> bool:
  """NOOPT=1: kernels get no opts (for debugging: a wrong result that goes away is the optimizer's)."""
  return os.environ.get("NOOPT", "") not in ("", "0")

def search_start(kernel: UOp, renderer: Renderer) -> UOp:
  """The kernel opts apply to: on a GPU, its output axes retyped GLOBAL (LOOP elsewhere, and for a symbolic bound: each lane
  walks that axis)."""
  return _retype(kernel, AxisType.LOOP, AxisType.GLOBAL) if is_gpu(renderer) else kernel

def heuristic_opts(kernel: UOp, renderer: Renderer) -> list[Opt]:
  """The opts picked without search: `gpu_opts` on a GPU, else `hand_coded`; none for a kernel with an empty axis (a sum
  over zero elements), which has no work to spread and whose axes cannot be split."""
  start = search_start(kernel, renderer)
  if any(r.size == 0 for r in axes(start)): return []
  return gpu_opts(start, renderer) if is_gpu(renderer) else hand_coded(start, renderer)

def optimize(kernel: UOp, renderer: Renderer, opts: list[Opt] | None = None) -> UOp:
  """The kernel with `opts` applied, by default the `heuristic_opts` for `renderer`; on a GPU, output axes start GLOBAL
  (before any opt) and the GLOBAL/LOCAL/GROUP_REDUCE axes end as SPECIAL launch indices."""
  if no_opts(): opts = []
  if foreign := [o.arg for o in opts or () if o.op is OptOps.TC and o.arg not in renderer.tensor_cores]:
    raise OptError(f"TC: {renderer!r} has no tensor core {foreign[0]!r} (it has {len(renderer.tensor_cores)})")
  kernel = apply_opts(search_start(kernel, renderer), heuristic_opts(kernel, renderer) if opts is None else opts)
  if not is_gpu(renderer): return kernel
  out = gpu_dims(kernel, renderer)
  shared = sum(u.dtype.itemsize * math.prod(u.shape) for u in out.toposort() if u.op is Ops.BUFFER and u.addrspace is AddrSpace.LOCAL)
  if renderer.shared_max and shared > renderer.shared_max:
    raise OptError(f"the kernel's LOCAL memory ({shared} bytes, GROUP_REDUCE partials) exceeds the device's {renderer.shared_max}")
  verify_between_stages(out, "kernel")
  return out
