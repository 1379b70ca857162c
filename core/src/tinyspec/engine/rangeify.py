"""Stage 2, rangeify: the kernel split, and every value broken down to shape () over RANGEs.

Which nodes get a buffer of their own (and so end a kernel):
  - the function's results, CONTIGUOUS, and both sides of a COPY;
  - an assign's STORE (seed 001's STORE + AFTER: `Tensor.assign`), a kernel writing into the argument buffer it names (or a
    view of it); the AFTER over that buffer reads as the buffer once the STORE has run;
  - a REDUCE read through an EXPAND that really broadcasts, unless the broadcast axes are the reader's innermost (see
    `_keeps_rows`) on a device whose kernels loop (not a GPU): computed inside its reader it would be redone once per
    broadcast element; with the broadcast axes innermost, linearize computes it once per row, before the loops over
    them, so softmax (max, sum and the divide) and a layernorm are one kernel per row on a CPU;
  - a REDUCE read by two or more kernels;
  - a contraction (a REDUCE whose input broadcasts a buffer: a matmul) read inside another reduction's loop, with no
    broadcast between: nested there it would run as a scalar loop per outer step, and again wherever else it is read
    (attention's backward: dO @ v.T under its row sums, 2.2 -> 1.3 ms a layer); alone, it gets a register tile;
  - an elementwise value made with a TRANSCENDENTAL op, from memory, read by a reduction through a broadcasting EXPAND (a
    matmul's gelu'd or softmax'd input): fused, the matmul would redo the exp once per output column (a GPT block's MLP
    down-projection 17 -> 0.2 ms);
  - a PAD of PAD_REALIZE_MIN or more elements from memory, read by a reduction through a broadcasting EXPAND (a padded
    convolution's input, read once per window and output channel): fused, every one of those reads carries the
    padding's validity gate, which keeps the reduction's inner loop from vectorizing (CPU conv2d 20 -> 47 GFLOP/s with
    the padded input made once).
A one-hot select (seed 001's gather: a sum of WHERE(index == position, table, 0)) becomes one read per output at the
loaded index (`one_hot_reads`), not a loop over the table.
Everything else fuses into the kernel that reads it: elementwise chains into their consumer, and a reduce together with
the elementwise ops before and after it. An elementwise value read by several kernels is recomputed in each; the cost
is bounded by the ops between realized buffers, never by a reduction.

Each kernel is SINK(END(STORE(INDEX(PARAM 0, flat index), value), ranges...)): one RANGE per output axis, movement ops
turned into index arithmetic (RESHAPE by flatten/unflatten, PERMUTE, FLIP, SHRINK by an offset, PAD by a validity gate,
EXPAND by index 0), and each REDUCE over RANGEs of its own. Buffers are PARAMs numbered per kernel, so two kernels
doing the same work on other buffers are the same UOp and compile once.

Before the split, a factor with one value along a sum's axes is moved out of the sum (`sum_factors`), and a float sum
over more than SUM_BLOCK elements becomes a tree of sums of at most SUM_BLOCK each (see `split_long_sums`): one serial
chain of n additions loses about n rounding errors' worth, a tree of depth d about d blocks' worth, so
`ones(10_000, 10_000).sum()` is exact and a 64M-element float32 sum is within 1e-6. The sums of the tree nest in the
same kernel (each level a loop with its own accumulator), so it costs no extra memory traffic."""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tinyspec.dtype import DType, dtypes
from tinyspec.uop.ops import AxisType, GroupOp, Ops
from tinyspec.uop.properties import sint_is, sint_max, vec_values
from tinyspec.uop.rewrite import PatternMatcher, UPat, graph_rewrite
from tinyspec.uop.spec import verify_between_stages
from tinyspec.uop.symbolic import operands, pm_index_given_valid, sym
from tinyspec.uop.uop import UOp


@dataclass(frozen=True)
class ScheduleItem:
  """One step of a schedule: a kernel `ast` (a SINK over PARAMs 0..n-1) run on schedule buffers `bufs` (PARAM k is
  bufs[k], its `outputs` outputs first), or a COPY (`ast` the COPY node) from bufs[1] to bufs[0]."""
  ast: UOp
  bufs: tuple[int, ...]
  outputs: int = 1

@dataclass
class Schedule:
  """What rangeify makes of a function: buffers 0..n_args-1 are its arguments, the rest are `buffers` (size, dtype, device)
  for outputs and intermediates; `outputs` says which buffer holds each value of the TUPLE."""
  n_args: int
  items: list[ScheduleItem] = field(default_factory=list)
  buffers: list[tuple[int, DType, str]] = field(default_factory=list)
  outputs: tuple[int, ...] = ()


def buffer_size(shape: tuple) -> int:
  """The elements a buffer of `shape` holds: a symbolic shape's largest, so one buffer serves every value of its variables."""
  return math.prod(sint_max(s) for s in shape)

def _expands(u: UOp) -> bool: return any(a == 1 and b != 1 for a, b in zip(u.src[0].shape, u.shape))

TRANSCENDENTAL = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.POW})
"""The ops whose decompositions cost tens of instructions: a value made with one is computed once, not once per reuse."""

LONG_EPILOGUE = 16
"""On a CPU, a contraction whose result goes through at least this many elementwise ops (on one path) gets a kernel of its
own, and the ops another: a matmul's register tile would copy them once per lane, straight-line code that LLVM vectorizes
patchily, where alone they are a loop it vectorizes whole (1024x64 @ 64x256 + gelu: 0.9 -> 0.5 ms, the GPT step's kernels
11.9 -> 10.6 ms). Short epilogues (a bias, a relu, a residual add) stay fused."""

PAD_REALIZE_MIN = 1 << 16
"""The fewest elements a padded input must have to be made once in a kernel of its own (below, a second kernel's launch
costs more than the gates it saves)."""


def _trailing(axes, ndim: int) -> bool:
  """Whether `axes` are the last len(axes) axes of an ndim-d shape."""
  return set(axes) == set(range(ndim - len(axes), ndim))

def _keeps_rows(u: UOp) -> bool:
  """Whether u passes its reader's axes straight down, any it broadcasts or reduces being the innermost: a REDUCE below it,
  read at index 0 of the broadcast axes, then depends only on the reader's outer axes. Elementwise ops and markers do; an
  EXPAND of trailing axes; a REDUCE over trailing axes (its loop runs inside the outer ones). Other movement ops reorder
  or re-index axes: they do not."""
  if u.op in GroupOp.Elementwise or u.op in GroupOp.Marker or (u.op is Ops.BITCAST and u.shape == u.src[0].shape): return True
  if u.op is Ops.EXPAND: return _trailing([d for d, (a, b) in enumerate(zip(u.src[0].shape, u.shape)) if a is not b and a != b], u.ndim)
  if u.op is Ops.REDUCE: return _trailing(u.arg[1], u.ndim)
  return u.op is Ops.RESHAPE and _squeezes(u.shape, u.src[0].shape)  # adds or drops axes of size 1 only (no loop)

def _kernel_reduces(v: UOp, realized: set[UOp]) -> set[UOp]:
  """The REDUCEs computed in the kernel of output v: those under it, not past another realized node."""
  out: set[UOp] = set()
  todo, seen = [v], {v}
  while todo:
    u = todo.pop()
    if u.op is Ops.REDUCE: out.add(u)
    for s in u.src:
      if s not in seen and s not in realized: seen.add(s); todo.append(s)
  return out

def output_groups(body: UOp) -> dict[UOp, UOp]:
  """The function's outputs computed together, in one kernel of a CPU-like device: {output: its group's first output}.
  Outputs group when they have one shape and device, share a reduction that their own kernels would each compute (mean
  and var of one input: its sum is then computed once, for both), and nothing else in the function reads them (so no
  kernel has to run between them). Reductions realized apart (attention's row sums, under its dq, dk and dv) group
  nothing: each output's own contraction then gets a register tile of its own (dq, dk, dv in one kernel: 1.1 ms; apart:
  3 x 0.07)."""
  nodes = body.toposort()
  read = {s for u in nodes if u is not body for s in u.src}
  free = [v for v in dict.fromkeys(body.src) if v not in read and v.op not in (Ops.PARAM, Ops.AFTER, Ops.COPY, Ops.STORE)]
  if len(free) < 2: return {}
  together = find_realized(body, False, dict.fromkeys(free, free[0]))  # what gets a buffer even with every output in one kernel
  reduces = {v: _kernel_reduces(v, together) for v in free}
  groups: dict[UOp, UOp] = {}
  for i, v in enumerate(free):
    if v in groups or not reduces[v]: continue
    for w in free[i + 1:]:
      if w not in groups and w.shape == v.shape and w.device == v.device and reduces[v] & reduces[w]: groups[v] = groups[w] = v
  return groups

def find_realized(body: UOp, gpu: bool = True, groups: dict[UOp, UOp] | None = None) -> set[UOp]:
  """The nodes of the TUPLE `body` that get their own buffer (see the module docstring); `gpu`: for a device whose kernels
  run one lane per output element, where every broadcast REDUCE gets a kernel of its own. Outputs in one of `groups`
  (`output_groups`) count as one kernel reading what they read."""
  groups = groups or {}
  realized = {v for v in body.src if v.op not in (Ops.PARAM, Ops.AFTER)}
  from_memory: set[UOp] = set()  # the nodes whose value reads a buffer (arange's padded constants do not)
  costly: dict[UOp, bool] = {}  # the nodes whose value, down to the buffers it reads, takes a transcendental (exp, log ...)
  broadcasts: dict[UOp, bool] = {}  # the nodes whose value, down to the buffers it reads, broadcasts one (a matmul's product)
  for u in body.toposort():
    if u.op in (Ops.CONTIGUOUS, Ops.STORE): realized.add(u)
    if u.op is Ops.COPY: realized.update((u, u.src[0]))
    if u.op is Ops.PARAM or any(s in from_memory for s in u.src): from_memory.add(u)
    costly[u] = u.op in TRANSCENDENTAL or any(costly[s] for s in u.src if s not in realized)
    broadcasts[u] = (u.op is Ops.EXPAND and _expands(u)) or any(broadcasts[s] for s in u.src if s not in realized)
  # users before sources, carrying which kernels read each node, whether through a broadcast, whether by a reduction, and
  # whether some path from its kernel's root reorders axes (so a broadcast REDUCE under it would not be once per row)
  readers: dict[UOp, frozenset[UOp]] = {}
  broadcast: dict[UOp, bool] = {}
  reduced: dict[UOp, bool] = {}
  reordered: dict[UOp, bool] = {}
  into: dict[UOp, bool] = {}  # some path from its kernel's root passes a REDUCE, then a broadcasting EXPAND: a reduction's broadcast input
  looped: dict[UOp, bool] = {}  # some path from a REDUCE of its kernel reaches it with no broadcasting EXPAND between: it runs in that loop
  epilogue: dict[UOp, int] = {}  # the most elementwise ops on one path from its kernel's root down to it
  for u in body.toposort()[::-1]:
    if u.op is Ops.REDUCE and ((broadcast.get(u, False) and (gpu or reordered.get(u, False))) or len(readers.get(u, ())) > 1): realized.add(u)
    if u.op is Ops.REDUCE and looped.get(u, False) and broadcasts[u.src[0]]:
      realized.add(u)  # a contraction inside another reduction's loop (attention's dO @ v.T under its row sum): alone, it gets a register tile
    if u.op is Ops.REDUCE and not gpu and epilogue.get(u, 0) >= LONG_EPILOGUE and broadcasts[u.src[0]]:
      realized.add(u)  # a CPU matmul under a gelu: its register tile would copy the epilogue per lane, which LLVM vectorizes badly
    if u.op is Ops.PAD and broadcast.get(u, False) and reduced.get(u, False) and u in from_memory and buffer_size(u.shape) >= PAD_REALIZE_MIN:
      realized.add(u)
    if u.op in GroupOp.Elementwise and costly[u] and into.get(u, False) and u in from_memory:
      realized.add(u)  # a matmul's gelu'd input: fused, each element's exp would be redone once per output column
    if u in realized: mine, flag, red, moved, inp = frozenset((groups.get(u, u),)), False, False, False, False
    else:
      mine, flag, red = readers.get(u, frozenset()), broadcast.get(u, False), reduced.get(u, False)
      moved, inp = reordered.get(u, False), into.get(u, False)
    expanding = u.op is Ops.EXPAND and _expands(u)
    flag, inp, red, moved = flag or expanding, inp or (expanding and red), red or u.op is Ops.REDUCE, moved or not _keeps_rows(u)
    loop = u.op is Ops.REDUCE or (u not in realized and looped.get(u, False) and not expanding)
    depth = (0 if u in realized else epilogue.get(u, 0)) + (u.op in GroupOp.Elementwise)
    for s in u.src:
      looped[s], epilogue[s] = looped.get(s, False) or loop, max(epilogue.get(s, 0), depth)
      readers[s], broadcast[s], reduced[s] = readers.get(s, frozenset()) | mine, broadcast.get(s, False) or flag, reduced.get(s, False) or red
      reordered[s], into[s] = reordered.get(s, False) or moved, into.get(s, False) or inp
  return {u for u in realized if u.op is not Ops.PARAM}  # an argument already has its buffer


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
  out, acc = [], 1
  for s in reversed(shape): out.append(acc); acc *= s
  return tuple(reversed(out))

def flat_index(idxs: tuple[UOp, ...], shape: tuple[int, ...]) -> UOp:
  """The row-major offset of index tuple `idxs` in `shape`."""
  out = UOp.const(0)
  for i, st, s in zip(idxs, _strides(shape), shape):
    if s != 1: out = out + i * st
  return out

def _unflatten(flat: UOp, shape: tuple[int, ...]) -> tuple[UOp, ...]:
  return tuple(UOp.const(0) if s == 1 else (flat // st) % s for st, s in zip(_strides(shape), shape))

def _squeezes(shape: tuple, new: tuple) -> bool:
  """Whether reshaping `shape` to `new` only adds or drops axes of size 1."""
  return [s for s in shape if not sint_is(s, 1)] == [s for s in new if not sint_is(s, 1)]

def _reindex(idxs: tuple[UOp, ...], shape: tuple, new: tuple) -> tuple[UOp, ...]:
  """Index tuple `idxs` of `shape` as an index of the same element in `new` (a reshape). Where the two differ only by axes of
  size 1 the other indices pass straight through (a keepdim reduce read as its squeezed value is then read at the very
  index tuple its other readers use, so it is lowered, and computed, once); otherwise flatten and unflatten."""
  if not _squeezes(shape, new): return _unflatten(flat_index(idxs, shape), new)
  kept = iter(i for i, s in zip(idxs, shape) if not sint_is(s, 1))
  return tuple(_ZERO if sint_is(s, 1) else next(kept) for s in new)

_IDENTITY = {Ops.ADD: 0, Ops.MUL: 1}
def reduce_identity(op: Ops, dtype: DType) -> UOp:
  """The value a reduction starts from: 0 for ADD, 1 for MUL, the dtype's lowest for MAX."""
  return UOp.const(_IDENTITY[op] if op in _IDENTITY else dtype.min, dtype)

_ZERO = UOp.const(0)


# ---- one-hot selects: seed 001's gather (a sum of WHERE(index == position, table, 0)) read as one element ----
def _equality(c: UOp) -> tuple[UOp, UOp] | None:
  """(a, b) when c is [a == b], which UOp.eq and Tensor's == spell CMPNE(CMPNE(a, b), True)."""
  if c.op is Ops.CMPNE and c.src[0].op is Ops.CMPNE and c.src[1].op is Ops.CONST and c.src[1].arg[0] is True: return c.src[0].src
  return None

def _source_axes(u: UOp, s: UOp, axes: frozenset) -> frozenset:
  """`axes` of u as axes of its source s: the same for an elementwise source (right-aligned where its rank is lower), mapped
  through a RESHAPE that only adds or drops axes of size 1. Axes of size 1 in s are dropped: s has one value along them."""
  if u.op is Ops.RESHAPE:
    kept = dict(zip((d for d, n in enumerate(u.shape) if not sint_is(n, 1)), (d for d, n in enumerate(s.shape) if not sint_is(n, 1))))
    return frozenset(kept[a] for a in axes if a in kept)
  shift = u.ndim - s.ndim
  return frozenset(a - shift for a in axes if a >= shift and not sint_is(s.shape[a - shift], 1))

def _one_value_along(u: UOp, axes: frozenset) -> bool:
  """Whether tensor node u has one value along each of `axes`: constants, broadcasts from size 1 there (a gather's index,
  broadcast over the table's axis), and elementwise ops and squeezes of those."""
  todo = [(u, frozenset(a for a in axes if not sint_is(u.shape[a], 1)))]
  while todo:
    u, axes = todo.pop()
    if not axes or u.op is Ops.CONST: continue
    if u.op not in GroupOp.Elementwise and u.op is not Ops.EXPAND and not (u.op is Ops.RESHAPE and _squeezes(u.shape, u.src[0].shape)): return False
    todo.extend((s, _source_axes(u, s, axes)) for s in u.src[:1 if u.op in GroupOp.Movement else None])
  return True

def _is_position(u: UOp, axes: frozenset) -> bool:
  """Whether tensor node u varies along `axes` and is made of constants alone, reading no buffer: an arange, the position
  a gather compares its index with (a label tensor compared with an arange of classes is data, not a position)."""
  return not _one_value_along(u, axes) and not any(n.op in (Ops.PARAM, Ops.AFTER) for n in u.toposort())

def _one_hot_select(red: UOp) -> bool:
  """Whether tensor REDUCE red sums (or maxes) WHERE(gate, x, identity) where a conjunct of the gate, under broadcasts and
  squeezes, is [a == b] with a one value along the reduced axes and b a position along them (`_is_position`): a one-hot
  select (Tensor._select: gather, indexing), which `one_hot_reads` turns into one read per output. Such a reduction is
  left whole, not split into blocks: it has one term that is not the identity (at worst, where b repeats values, a few),
  so there is no rounding to spread, and a split would hide the position from the kernel."""
  (x,), (op, axes) = red.src, red.arg
  if op not in (Ops.ADD, Ops.MAX) or x.op is not Ops.WHERE: return False
  if base_buffer(x.src[2]) is not reduce_identity(op, red.dtype): return False  # under its broadcast
  todo = [(x.src[0], frozenset(axes))]
  while todo:
    g, axes = todo.pop()
    if (sides := _equality(g)) is not None:
      a, b = sides
      for index, position in ((a, b), (b, a)):
        index_axes, position_axes = _source_axes(g.src[0], index, axes), _source_axes(g.src[0], position, axes)
        if _one_value_along(index, index_axes) and _is_position(position, position_axes): return True
    elif g.op is Ops.AND or g.op is Ops.EXPAND or (g.op is Ops.RESHAPE and _squeezes(g.shape, g.src[0].shape)):
      todo.extend((s, _source_axes(g, s, axes)) for s in g.src[:1 if g.op in GroupOp.Movement else None])
  return False

def _read_one(red: UOp) -> UOp | None:
  """A kernel's REDUCE over ranges of WHERE(gate, v, identity) where a conjunct of the gate is [e == r], r one of the
  ranges (or an integer cast of it that holds every value of r) and e not reading r: only r = e passes the gate, so the
  reduction is v at r = e where 0 <= e < size(r), else the identity. A gather's loop over the whole table becomes one read."""
  val, ranges = red.src[0], red.src[1:]
  if val.op is not Ops.WHERE or val.src[2] is not reduce_identity(red.arg[0], red.dtype): return None
  conjuncts = operands(val.src[0], Ops.AND)
  for c in conjuncts:
    if (sides := _equality(c)) is None: continue
    for side, e in (sides, sides[::-1]):
      r = side.src[0] if side.op is Ops.CAST and dtypes.is_int(side.dtype) else side
      if r not in ranges or not dtypes.is_int(e.dtype) or (side is not r and r.vmax > side.dtype.max) or r in e.toposort(): continue
      at = e.cast(dtypes.index)
      inside = (at < 0).ne(True) & (at < r.src[0])
      there = {r: inside.where(at, _ZERO)}  # r = e; where e is out of bounds, an in-bounds read whose value is not used
      gate = functools.reduce(lambda p, q: p & q, (d.substitute(there) for d in conjuncts if d is not c), inside)
      one = gate.where(val.src[1].substitute(there), val.src[2])
      rest = tuple(x for x in ranges if x is not r)
      return UOp(Ops.REDUCE, (one, *rest), red.arg) if rest else one
  return None

one_hot_reads = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), _read_one),  # reduce over r of where(e == r & rest, v, identity) -> where(0 <= e < n & rest, v at r = e, identity)
])
kernel_simplify = sym + one_hot_reads


class _KernelBuilder:
  """Builds one kernel: lowers a tensor-graph value at an index tuple to a scalar expression over RANGEs."""
  def __init__(self, realized: set[UOp], buffer_of: dict[UOp, int]):
    self.realized, self.buffer_of = realized, buffer_of
    self.params: dict[int, UOp] = {}   # schedule buffer id -> this kernel's PARAM
    self.ranges: list[UOp] = []
    self.memo: dict[tuple, UOp] = {}   # (node, indices, valid, root) -> its lowered value
    self.plans: dict[tuple, tuple] = {}

  def param(self, buf_id: int, size: int, dtype: DType) -> UOp:
    if buf_id not in self.params: self.params[buf_id] = UOp(Ops.PARAM, (UOp.vec((size,)),), (len(self.params), dtype))
    return self.params[buf_id]

  def new_range(self, size: int, axis_type: AxisType) -> UOp:
    if size == 1: return _ZERO
    self.ranges.append(r := UOp.range(size, len(self.ranges), axis_type))
    return r

  def load(self, u: UOp, idxs: tuple[UOp, ...], valid: UOp | None) -> UOp:
    # a buffer of no elements is read only in loops that run zero times, so its value is never used: a constant, no read.
    # A LOAD could read out of bounds: through a size-0 axis the index can fold to a constant (flat // 0 is 0), and
    # linearize runs a load that depends on no RANGE once before the loops, even when they run zero times
    if math.prod(u.shape) == 0: return UOp.const(0, u.dtype)
    p = self.param(self.buffer_of[u], buffer_size(u.shape), u.dtype)
    idx = p.index(flat_index(idxs, u.shape))
    if valid is None: return UOp(Ops.LOAD, (idx,))
    return UOp(Ops.LOAD, (idx, UOp.const(0, u.dtype), valid))

  def lower(self, u: UOp, idxs: tuple[UOp, ...], valid: UOp | None = None, root: bool = False) -> UOp:
    """u's value at index tuple `idxs`, reading memory only where `valid` holds. An explicit stack, not recursion, so deep
    graphs (thousands of chained ops) lower fine."""
    stack: list[tuple] = [(u, idxs, valid, root)]
    while stack:
      key = stack[-1]
      if key in self.memo: stack.pop(); continue
      if key not in self.plans: self.plans[key] = self._plan(*key)
      needs, combine = self.plans[key]
      if missing := [k for k in needs if k not in self.memo]: stack.extend(missing); continue
      self.memo[stack.pop()] = combine([self.memo[k] for k in needs])
    return self.memo[(u, idxs, valid, root)]

  def _plan(self, u: UOp, idxs: tuple[UOp, ...], valid: UOp | None, root: bool) -> tuple[list[tuple], Callable[[list[UOp]], UOp]]:
    """What lowering u at idxs needs (sources at their indices) and how it builds u's value from theirs."""
    op, same = u.op, (lambda vs: vs[0])
    if u.is_variable: return [], lambda vs: u  # a symbolic size read as a value (a mean's count): a kernel variable
    if op in (Ops.PARAM, Ops.AFTER) or (not root and u in self.realized): return [], lambda vs: self.load(u, idxs, valid)
    if op is Ops.CONST: return [], lambda vs: u
    if op in GroupOp.Elementwise or op is Ops.BITCAST:  # right-aligned broadcasting: a lower-rank source reads the last axes
      return [(s, tuple(_ZERO if d == 1 else i for i, d in zip(idxs[len(idxs) - s.ndim:], s.shape)), valid, False) for s in u.src], \
             lambda vs: u.replace(src=tuple(vs))
    src = u.src[0]
    def at(new_idxs, new_valid=valid): return [(src, tuple(new_idxs), new_valid, False)]
    if op in GroupOp.Marker: return at(idxs), same
    if op is Ops.RESHAPE: return at(_reindex(idxs, u.shape, src.shape)), same
    if op is Ops.EXPAND: return at(_ZERO if s == 1 else i for i, s in zip(idxs, src.shape)), same
    if op is Ops.PERMUTE: return at(idxs[u.arg.index(d)] for d in range(src.ndim)), same
    if op is Ops.FLIP: return at(s - 1 - i if f else i for i, s, f in zip(idxs, u.shape, u.arg)), same
    if op is Ops.SHRINK: return at(i + o if o else i for i, o in zip(idxs, vec_values(u.src[1]))), same
    if op is Ops.PAD:  # inside the source's window read it, outside the value is 0
      inside, offs = None, vec_values(u.src[1])
      for i, o, s, n in zip(idxs, offs, src.shape, u.shape):
        for c in ([(i < o).ne(True)] if o else []) + ([i < o + s] if o + s < n else []): inside = c if inside is None else inside & c
      if inside is None: return at(idxs), same
      return at((i - o if o else i for i, o in zip(idxs, offs)), inside if valid is None else valid & inside), \
             lambda vs: inside.where(vs[0], UOp.const(0, u.dtype))
    if op is Ops.REDUCE:
      rop, axes = u.arg
      src_idxs = tuple(self.new_range(src.shape[d], AxisType.REDUCE) if d in axes else i for d, i in enumerate(idxs))
      ranges = tuple(src_idxs[d] for d in axes if src_idxs[d].op is Ops.RANGE)
      return at(src_idxs), (lambda vs: UOp(Ops.REDUCE, (vs[0], *ranges), (rop, ()))) if ranges else same
    raise NotImplementedError(f"rangeify: {op.name} in a tensor graph (shape {u.shape}, dtype {u.dtype})")

  def kernel(self, us: list[UOp], out_ids: list[int]) -> ScheduleItem:
    """The kernel computing realized nodes `us` (one, or outputs of one shape: `output_groups`) into schedule buffers
    `out_ids` (for an assign's STORE: into its target), over one set of output ranges, so what the values share (a
    reduction) is computed once."""
    first = us[0]
    outs = [self.param(b, buffer_size(t.shape), t.dtype) for b, t in zip(out_ids, (assign_target(u) if u.op is Ops.STORE else u for u in us))]
    idxs = tuple(self.new_range(s, AxisType.LOOP) for s in (first.src[1].shape if first.op is Ops.STORE else first.shape))
    out_ranges = [r for r in idxs if r.op is Ops.RANGE]
    stores = []
    for u, out in zip(us, outs):
      if u.op is Ops.STORE: address, val = self.store_address(u.src[0], idxs), self.lower(u.src[1], idxs)
      else: address, val = out.index(flat_index(idxs, u.shape)), self.lower(u.src[0] if u.op is Ops.CONTIGUOUS else u, idxs, root=True)
      stores.append(UOp(Ops.STORE, (address, val)))
    store = stores[0] if len(stores) == 1 else UOp(Ops.GROUP, tuple(stores))
    ast = UOp.sink(UOp(Ops.END, (store, *reversed(out_ranges))) if out_ranges else store)
    # index arithmetic and one-hot reads, then gated loads' indexes under their gates
    ast = graph_rewrite(graph_rewrite(ast, kernel_simplify), pm_index_given_valid)
    # simplifying may drop every read of a buffer (x | True): renumber the PARAMs that are left
    used = [(b, p) for b, p in self.params.items() if p in set(ast.toposort())]
    if len(used) < len(self.params):
      ast = ast.substitute({p: p.replace(arg=(k, *p.arg[1:])) for k, (_, p) in enumerate(used)})
    verify_between_stages(ast, "kernel")
    return ScheduleItem(ast, tuple(b for b, _ in used), len(us))

  def store_address(self, view: UOp, idxs: tuple[UOp, ...]) -> UOp:
    """Where an assign writes element `idxs` of `view` (movement ops over its target buffer): the INDEX a read of the buffer
    through those movement ops would use, even where the view is also a realized value of its own (an old reader)."""
    kept, (self.realized, self.memo, self.plans) = (self.realized, self.memo, self.plans), (set(), {}, {})
    try: read = self.lower(view, idxs)
    finally: self.realized, self.memo, self.plans = kept
    if read.op is not Ops.LOAD or len(read.src) != 1:
      raise NotImplementedError(f"rangeify: assign into a padded view (shape {view.shape}): it has no memory of its own to write")
    return read.src[0]


def base_buffer(view: UOp) -> UOp:
  """The node under `view`'s movement ops."""
  while view.op in GroupOp.Movement: view = view.src[0]
  return view

def assign_target(store: UOp) -> UOp:
  """The argument buffer (a PARAM) an assign's STORE writes into, under the movement ops of its view."""
  if (u := base_buffer(store.src[0])).op is not Ops.PARAM: raise NotImplementedError(f"rangeify: assign into {u.op.name}, not a realized buffer")
  return u

def _reads(root: UOp, realized: set[UOp], through: UOp | None = None) -> dict[UOp, bool]:
  """The buffers (PARAMs) the kernel computing `root` reads directly (not through an AFTER, nor past another realized node),
  each with whether some read goes through a movement op or a reduce (so may be at another index than the element being
  computed). `through`, an assign's own view of its target, reached with no movement on the way, is read at the element
  being written: left out."""
  out: dict[UOp, bool] = {}
  seen: set[tuple[UOp, bool]] = set()
  todo = [(root, False)]
  while todo:
    u, moved = todo.pop()
    if (u, moved) in seen or u.op is Ops.AFTER or (u is not root and u in realized): continue
    seen.add((u, moved))
    if u is through and not moved: continue  # the very element being written
    if u.op is Ops.PARAM: out[u] = out.get(u, False) or moved; continue
    moved = moved or u.op in GroupOp.Movement or u.op is Ops.REDUCE
    todo.extend((s, moved) for s in (u.src[1:] if u.op is Ops.STORE else u.src))
  return out

def _order(body: UOp, realized: set[UOp]) -> list[UOp]:
  """The realized nodes in an order to run their kernels in: sources first, and an assign's STORE after every kernel that
  reads its target's old contents (a read of the AFTER, the new contents, already comes after it)."""
  nodes = body.toposort()
  position = {u: i for i, u in enumerate(nodes)}
  kernels = [u for u in nodes if u in realized]
  deps: dict[UOp, set[UOp]] = {}
  for u in kernels:  # the realized nodes and STOREs each one's kernel needs done first
    found, seen, todo = set(), set(), list(u.src[1:] if u.op is Ops.STORE else u.src)
    while todo:
      if (s := todo.pop()) in seen: continue
      seen.add(s)
      if s in realized: found.add(s)
      elif s.op is Ops.AFTER: found.update(x for x in s.src[1:] if x.op is Ops.STORE)
      else: todo.extend(s.src)
    deps[u] = found
  old_readers: dict[UOp, list[UOp]] = {}
  for u in kernels:
    for p in _reads(u, realized): old_readers.setdefault(p, []).append(u)
  for u in kernels:
    if u.op is Ops.STORE: deps[u].update(r for r in old_readers.get(assign_target(u), ()) if r is not u)
  order, done = [], set()
  waiting = sorted(kernels, key=position.__getitem__)
  while waiting:
    if (ready := next((u for u in waiting if deps[u] <= done), None)) is None:
      raise ValueError("rangeify: an assign's STORE must wait for every kernel reading its buffer's old contents, and one of those reads its "
                       "new contents too (one computation reads a buffer both before and after assigning to it)")
    waiting.remove(ready); order.append(ready); done.add(ready)
  return order

def _copy_moved_self_reads(body: UOp, realized: set[UOp]) -> UOp:
  """An assign whose value reads its own target at another element (`t.assign(t.flip(0))`) would overwrite what it still has
  to read: its value is made CONTIGUOUS (computed into a buffer of its own first)."""
  fix = {}
  for st in (u for u in body.toposort() if u.op is Ops.STORE):
    if _reads(st, realized, through=st.src[0]).get(assign_target(st)): fix[st] = st.replace(src=(st.src[0], UOp(Ops.CONTIGUOUS, (st.src[1],))))
  return body.substitute(fix) if fix else body


SUM_BLOCK = 1024
"""The most elements one accumulator of a float sum adds up; longer sums are split into a tree of such blocks."""

def sum_blocks(n: int) -> list[int]:
  """Block sizes, outermost first, each at most SUM_BLOCK, whose product is n, or just past n where n has no divisor in
  [SUM_BLOCK/16, SUM_BLOCK] to split on (the sum is then padded with zeros)."""
  if n <= SUM_BLOCK: return [n]
  b = next((d for d in range(SUM_BLOCK, SUM_BLOCK // 16 - 1, -1) if n % d == 0), None)
  if b is None: n, b = -(-n // SUM_BLOCK) * SUM_BLOCK, SUM_BLOCK
  return sum_blocks(n // b) + [b]

LANE_MULTIPLE = 256
"""What a GPU-style device's long float sums are padded to a multiple of: its optimizer splits a reduction over as many
workgroup lanes (up to 256) as a power of two dividing its length, each lane summing its share before a tree combines
them; 2**24 + 2 elements would otherwise get 2 lanes, each one chain of 8M additions."""

def lane_blocks(n: int) -> list[int]:
  """One level, padded to a multiple of LANE_MULTIPLE: the GPU keeps a long sum whole and splits it over lanes itself."""
  return [-(-n // LANE_MULTIPLE) * LANE_MULTIPLE]

WORKGROUPS, SPREAD_MIN, SPREAD_MAX_OUTPUTS = 256, 1 << 18, 4096
"""A float sum of at least SPREAD_MIN elements into fewer than SPREAD_MAX_OUTPUTS values runs as two kernels on a device
that runs kernels in parallel (a GPU, or a CPU with threads): WORKGROUPS partial sums per output, then their sum. In one
kernel the whole sum would run on one compute unit or core (PoCL: 4 GB/s for 16M floats on two cores); as an output axis
of 256 the partial sums are split over workgroups (GPU) or THREAD axes (CPU)."""

def workgroup_blocks(n: int) -> list[int]:
  """Two levels: WORKGROUPS, and a multiple of LANE_MULTIPLE (padded) for each workgroup's lanes."""
  return [WORKGROUPS, -(-n // (WORKGROUPS * LANE_MULTIPLE)) * LANE_MULTIPLE]

def thread_blocks(n: int) -> list[int]:
  """WORKGROUPS partial sums, each a tree of blocks (`sum_blocks`) over its share: a CPU with threads splits the partials."""
  return [WORKGROUPS, *sum_blocks(-(-n // WORKGROUPS))]

def _spread(red: UOp) -> bool:
  """Whether a reduction is long and its output small: worth two kernels on a parallel device."""
  if not all(isinstance(s, int) for s in red.src[0].shape): return False  # symbolic: one kernel for every length
  return math.prod(red.src[0].shape[a] for a in red.arg[1]) >= SPREAD_MIN and math.prod(red.shape) < SPREAD_MAX_OUTPUTS

def _gpu_sum(red: UOp) -> UOp | None:
  """A long float sum for a GPU-style device: spread over workgroups in two kernels when it is long and its output small,
  else one reduction over lanes."""
  return _regroup_sum(red, workgroup_blocks, top_kernel=True) if _spread(red) else _regroup_sum(red, lane_blocks)

def _threaded_sum(red: UOp) -> UOp | None:
  """A reduction for a CPU with threads: when it is long and its output small, WORKGROUPS partial results in a kernel of
  their own (a float sum padded and each share a tree of blocks; another reduction when WORKGROUPS divides its length),
  then their reduction; otherwise a float sum is a tree of blocks."""
  if not _spread(red): return _regroup_sum(red, sum_blocks)
  if red.arg[0] is Ops.ADD and dtypes.is_float(red.dtype): return _regroup_sum(red, thread_blocks, top_kernel=True)
  n = math.prod(red.src[0].shape[a] for a in red.arg[1])
  return _regroup(red, [WORKGROUPS, n // WORKGROUPS], top_kernel=True) if n % WORKGROUPS == 0 else None

def _regroup_sum(red: UOp, blocks_of: Callable[[int], list[int]], top_kernel: bool = False) -> UOp | None:
  """REDUCE(x, ADD, axes) of a float over n > SUM_BLOCK elements -> the same sum over blocks_of(n) (`_regroup`)."""
  (x,), (op, axes) = red.src, red.arg
  if op is not Ops.ADD or not dtypes.is_float(red.dtype) or not isinstance(n := math.prod(x.shape[a] for a in axes), int) or n <= SUM_BLOCK:
    return None  # short, or of symbolic length (one kernel serves every length: a plain loop)
  return _regroup(red, blocks_of(n), top_kernel)

def _regroup(red: UOp, blocks: list[int], top_kernel: bool = False) -> UOp | None:
  """REDUCE(x, op, axes) over n elements -> the same reduction over `blocks`, outermost first, their product n (or, for a
  sum, more: padded with zeros past n). The reduced axes are moved next to the first of them and merged into one axis of
  n, split into the blocks; each inner block is reduced and dropped, and the last REDUCE, over the outermost block at the
  first reduced axis, has the original's shape (so a reduce with several readers is still one node, computed once). With
  `top_kernel`, the results of the outermost block (what the last REDUCE reduces) are made CONTIGUOUS: a kernel of their own."""
  (x,), (op, axes) = red.src, red.arg
  n = math.prod(x.shape[a] for a in axes)
  if (blocks == [n] and len(axes) == 1) or _one_hot_select(red): return None  # already in the wanted form, or one term
  if (padded := math.prod(blocks)) != n and op is not Ops.ADD: return None  # zeros pad a sum only
  axes, a0 = tuple(sorted(axes)), min(axes)
  before, after = [d for d in range(x.ndim) if d not in axes and d < a0], [d for d in range(x.ndim) if d not in axes and d > a0]
  kb, ka = [x.shape[d] for d in before], [x.shape[d] for d in after]
  order = (*before, *axes, *after)
  y = (x.permute(order) if order != tuple(range(x.ndim)) else x).reshape((*kb, n, *ka))
  if padded != n: y = y.pad((0,) * (len(kb) + 1 + len(ka)), (*kb, padded, *ka))  # zeros add nothing
  y = y.reshape((*kb, *blocks, *ka))
  for level in range(len(blocks) - 1, 0, -1):  # innermost first: each reduces one block of the level above
    y = y.reduce(op, (len(kb) + level,)).reshape((*kb, *blocks[:level], *ka))
    if top_kernel and level == 1: y = UOp(Ops.CONTIGUOUS, (y,))
  return y.reshape(tuple(blocks[0] if d == a0 else s for d, s in enumerate(red.shape))).reduce(op, (a0,))

split_long_sums = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), lambda red: _regroup_sum(red, sum_blocks)),  # a long float sum -> a tree of blocks of SUM_BLOCK at most
])
gpu_long_sums = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), _gpu_sum),  # a long float sum -> over workgroups in two kernels, or one axis, a multiple of the lanes
])
threaded_long_sums = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), _threaded_sum),  # a long reduction -> 256 partial results in a kernel of their own; a float sum: a tree
])

def _uniform_over(u: UOp, axes: tuple[int, ...]) -> bool:
  """Whether u has one value along every axis in `axes`: a constant, or a broadcast (EXPAND) from size 1 there."""
  return u.op is Ops.CONST or (u.op is Ops.EXPAND and all(sint_is(u.src[0].shape[a], 1) for a in axes))

def _factor_out(red: UOp) -> UOp | None:
  """sum(x * c) over axes along which the factor c has one value -> sum(x) * c: a factor the same for every term of the
  sum is applied once to the sum. Sums that differ only by such factors are then one REDUCE, computed once (a
  BatchNorm's backward: sum(dy * weight * invstd) is sum(dy) times the factors, sum(dy) its bias' gradient). sum(x) could
  overflow where the scaled terms' sum does not only in a 16-bit float, and Tensor.sum adds those in float32."""
  if red.arg[0] is not Ops.ADD or red.src[0].op is not Ops.MUL: return None
  factors, axes = operands(red.src[0], Ops.MUL), red.arg[1]
  uniform, rest = [f for f in factors if _uniform_over(f, axes)], [f for f in factors if not _uniform_over(f, axes)]
  if not uniform or not rest: return None
  out = functools.reduce(lambda a, b: a * b, rest).reduce(Ops.ADD, axes)
  for f in uniform: out = out * (f if f.op is Ops.CONST else f.src[0] if f.src[0].shape == red.shape else f.src[0].expand(red.shape))
  return out

sum_factors = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), _factor_out),  # sum(x * c), c one value along the sum -> sum(x) * c
])

@functools.cache
def _sum_rules(gpu: bool, threaded: bool) -> PatternMatcher:
  """sum_factors, then the long-sum rules for this kind of device: composed once per kind a process uses, since composing a
  PatternMatcher compiles its rules (about 3 ms; composed on every call, it doubled a first call's schedule time)."""
  return sum_factors + (gpu_long_sums if gpu else threaded_long_sums if threaded else split_long_sums)

def rangeify(fn: UOp, gpu: bool = False, threads: int = 1) -> Schedule:
  """Split the FUNCTION made by callify into kernels (and copies), in an order that respects their dependencies. Long
  float sums become trees of blocks first (`split_long_sums`); for a GPU-style device (`gpu`) they stay one reduction per
  kernel, padded to a multiple of LANE_MULTIPLE, since its optimizer splits a reduction over a workgroup's lanes and
  combines their partial sums in a tree (nested sums there would combine across the lanes once per outer step), and a
  long one into a small output is spread over WORKGROUPS workgroups first (`gpu_long_sums`). For a CPU with `threads` > 1,
  a long sum into a small output gets WORKGROUPS partial sums in a kernel of their own (`threaded_long_sums`), whose
  output axis the optimizer splits over THREAD axes."""
  body, args = graph_rewrite(fn.src[0], _sum_rules(gpu, threads > 1)), fn.src[1:]
  sched = Schedule(n_args=len(args))
  buffer_of: dict[UOp, int] = {}
  has_assign = False
  for u in body.toposort():
    if u.op is Ops.PARAM and isinstance(u.arg[0], int): buffer_of[u] = u.arg[0]
    if u.op is Ops.AFTER: has_assign = True
  groups = {} if gpu or has_assign else output_groups(body)  # with an assign, a STORE may have to run between two outputs
  realized = find_realized(body, gpu, groups)
  if has_assign:
    if (fixed := _copy_moved_self_reads(body, realized)) is not body: body, realized = fixed, find_realized(fixed, gpu)
    for u in body.toposort():
      if u.op is Ops.AFTER: buffer_of[u] = buffer_of[base_buffer(u.src[0])]  # reads the buffer as the assign left it
  order = _order(body, realized) if has_assign else [u for u in body.toposort() if u in realized]
  members: dict[UOp, list[UOp]] = {}
  for u in order:
    if u in groups: members.setdefault(groups[u], []).append(u)
  at_last = {group[-1]: group for group in members.values()}  # a group's kernel runs where its last output comes in the order
  for u in order:
    if u.op is Ops.STORE:
      buffer_of[u] = buffer_of[assign_target(u)]
      sched.items.append(_KernelBuilder(realized, buffer_of).kernel([u], [buffer_of[u]]))
      continue
    dev = u.device if isinstance(u.device, str) else None
    buffer_of[u] = len(args) + len(sched.buffers)
    sched.buffers.append((buffer_size(u.shape), u.dtype, dev))
    if u.op is Ops.COPY: sched.items.append(ScheduleItem(u, (buffer_of[u], buffer_of[u.src[0]])))
    elif u not in groups: sched.items.append(_KernelBuilder(realized, buffer_of).kernel([u], [buffer_of[u]]))
    elif u in at_last: sched.items.append(_KernelBuilder(realized, buffer_of).kernel(at_last[u], [buffer_of[m] for m in at_last[u]]))
  sched.outputs = tuple(buffer_of[v] for v in body.src)
  return sched
