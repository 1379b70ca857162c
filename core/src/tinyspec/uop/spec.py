"""The spec verifier: what a well-formed graph looks like at each stage of the pipeline, as tables of rules.

Construction already enforces arity and the shape rules (see properties.py); these tables add the dtype, arg and
structure rules, some of which only hold at one stage. A rule is (ops it applies to, predicate, what it demands):
the predicate takes the node and a `_Graph` of whole-graph facts and says whether the node obeys the rule.
`verify` reports every broken node at once. Stages:

  "tensor"  the Tensor graph before the pipeline: no loops, no codegen ops
  "kernel"  one kernel after rangeify: a SINK of STOREs into INDEXes over buffers, indexed by RANGEs
  "linear"  a LINEAR program after linearize: its entries in dependency order, every loop and IF closed

The pipeline calls `verify_between_stages` after each stage; it checks only when VERIFY is on (env TINYSPEC_VERIFY=1
at import, or `tinyspec.uop.spec.VERIFY = True` at run time, as the tests do), since a full check costs a graph walk.
Why each rule reads as it does (where seeds 001 and 002 differ, or say nothing): docs/spec.md.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from tinyspec.dtype import AddrSpace, DType, PtrDType, dtype_range, dtypes
from tinyspec.uop.ops import AxisType, GroupOp, Ops
from tinyspec.uop.properties import SpecViolation
from tinyspec.uop.uop import UOp

VERIFY: bool = os.environ.get("TINYSPEC_VERIFY", "0") not in ("", "0")
STAGES = ("tensor", "kernel", "linear")


class _Graph:
  """Facts about the whole graph that a few rules need; each is computed once per check, and only if a rule asks."""
  def __init__(self, root: UOp): self.root, self.nodes = root, root.toposort()
  @cached_property
  def users(self) -> dict[UOp, list[UOp]]:
    out: dict[UOp, list[UOp]] = {}
    for u in self.nodes:
      for s in u.src: out.setdefault(s, []).append(u)
    return out
  @cached_property
  def linear(self) -> dict[UOp, int]:
    """Each entry's position in the root LINEAR (empty when the root is not one)."""
    return {u: i for i, u in enumerate(self.root.src)} if self.root.op is Ops.LINEAR else {}
  @cached_property
  def closers(self) -> dict[UOp, list[int]]:
    """For each RANGE and IF, the LINEAR positions of the ENDs and ENDIFs that close it."""
    out: dict[UOp, list[int]] = {}
    for u, i in self.linear.items():
      for opened in u.src[1:] if u.op is Ops.END else u.src[:1] if u.op is Ops.ENDIF else (): out.setdefault(opened, []).append(i)
    return out
  @cached_property
  def loops(self) -> dict[UOp, frozenset[UOp]]:
    """For each entry of the root LINEAR, the RANGEs open where it runs."""
    out: dict[UOp, frozenset[UOp]] = {}
    now: frozenset[UOp] = frozenset()
    for u in self.linear:
      if u.op is Ops.END: now = now - set(u.src[1:])
      out[u] = now
      if u.op is Ops.RANGE: now = now | {u}
    return out


class Accumulation(NamedTuple):
  """An accumulator's ordering node: its identity STOREs (`inits`) and the RANGEs it sums over."""
  inits: tuple[UOp, ...]
  ranges: tuple[UOp, ...]

def accumulation(u: UOp) -> Accumulation | None:
  """AFTER(REG buffer, init STOREs..., RANGEs...) is how linearize makes an accumulator's reads and writes inside its reduce
  loops wait for its init; for that node, its inits and ranges, else None."""
  if u.op is not Ops.AFTER or u.src[0].op is not Ops.BUFFER or u.src[0].addrspace is not AddrSpace.REG: return None
  inits = tuple(s for s in u.src[1:] if s.op is Ops.STORE)
  return Accumulation(inits, tuple(s for s in u.src[1:] if s.op is Ops.RANGE)) if inits else None


def buffer_of(address: UOp) -> UOp:
  """The buffer (PARAM or BUFFER) an address reads or writes, through its INDEX and AFTER nodes."""
  while address.op in (Ops.AFTER, Ops.INDEX): address = address.src[0]
  return address

def reads_lane(u: UOp) -> bool:
  """Whether INDEX u picks one lane of a vector value (what expand makes of an UPCAST or UNROLL range) rather than
  addressing memory: INDEX(vector, CONST j) is the vector's element j."""
  return u.op is Ops.INDEX and buffer_of(u).op not in (Ops.PARAM, Ops.BUFFER)

def lanes(base: UOp, n: int) -> UOp:
  """The index of n consecutive elements from `base`: base + STACK(0, 1, ..., n-1), shaped (n,). A LOAD through
  INDEX(buf, lanes(i, 4)) reads a vector of four elements at once; a STORE through it writes one."""
  return base + UOp(Ops.STACK, tuple(UOp.const(j) for j in range(n)))

def vector_index(idx: UOp) -> tuple[UOp, int] | None:
  """(base, n) when the index `idx` is lanes(base, n), else None."""
  if idx.op is not Ops.ADD or (offsets := idx.src[1]).op is not Ops.STACK or idx.src[0].shape: return None
  if not all(s.op is Ops.CONST and s.arg[0] == j for j, s in enumerate(offsets.src)): return None
  return idx.src[0], len(offsets.src)

def is_register(address: UOp) -> bool:
  """Whether an address (or a buffer) is in REG memory: an accumulator or another private register."""
  return (b := buffer_of(address)).op is Ops.BUFFER and b.addrspace is AddrSpace.REG

class RegisterUpdate(NamedTuple):
  """An accumulator's update `STORE(reg, LOAD(reg) <op> x)`: the op, its ALU node and x."""
  op: Ops
  alu: UOp
  x: UOp

def register_update(st: UOp) -> RegisterUpdate | None:
  """For a STORE to a register of `LOAD(the same address) <op> x`, op ADD, MUL or MAX, its RegisterUpdate; else None."""
  if not is_register(st.src[0]) or (val := st.src[1]).op not in (Ops.ADD, Ops.MUL, Ops.MAX): return None
  for a, b in (val.src, val.src[::-1]):
    if a.op is Ops.LOAD and a.src[0] is st.src[0]: return RegisterUpdate(val.op, val, b)
  return None


# ---- predicates the tables use ----

def _is_int(dt: DType) -> bool: return not isinstance(dt, PtrDType) and dtypes.is_int(dt)
def _is_float(dt: DType) -> bool: return not isinstance(dt, PtrDType) and dtypes.is_float(dt)
def _is_bool(dt: DType) -> bool: return not isinstance(dt, PtrDType) and dtypes.is_bool(dt)
def _elem(dt: DType) -> DType: return (dt.base if isinstance(dt, PtrDType) else dt).scalar()
def _int_scalar(u: UOp) -> bool: return _is_int(u.dtype) and u.shape == ()
def _is_pyint(x) -> bool: return isinstance(x, int) and not isinstance(x, bool)
def _ints(xs) -> bool: return isinstance(xs, tuple) and all(_is_pyint(x) for x in xs)
def _device(d) -> bool: return isinstance(d, str) or (isinstance(d, tuple) and len(d) > 0 and all(isinstance(x, str) for x in d))
def _one_dtype(srcs) -> bool: return len({s.dtype for s in srcs}) <= 1
def _never(u: UOp, g: _Graph) -> bool: return False
def _lane_number(idx: UOp, g: _Graph) -> bool:
  return idx.op is Ops.CONST or (idx.op is Ops.RANGE and idx.axis_type in (AxisType.UPCAST, AxisType.UNROLL))
def _tensor_core(arg) -> bool:
  """Whether a WMMA's arg describes a matrix instruction (a renderer's TensorCore, which this layer below renderers does
  not import): its dims, lanes, elements and dtypes."""
  return all(hasattr(arg, f) for f in ("dims", "threads", "elements", "dtype_in", "dtype_out", "layout"))

def _const_ok(arg) -> bool:
  """A CONST's value has its dtype's Python type: bool for bool, int for ints and index, float for floats."""
  v, dt = arg
  if dt.scalar() is dtypes.bool: return isinstance(v, bool)
  return _is_pyint(v) if _is_int(dt) else isinstance(v, float)

def _const_in_range(arg) -> bool:
  v, dt = arg
  return not _is_int(dt) or dtype_range(dt)[0] <= v <= dtype_range(dt)[1]

def _fields(arg, *checks: Callable[[Any], bool], optional: int = 0) -> bool:
  """arg is a tuple whose items pass `checks` in order; the last `optional` items may be left out."""
  return isinstance(arg, tuple) and len(checks) - optional <= len(arg) <= len(checks) and all(c(x) for c, x in zip(checks, arg))
def _opt(check: Callable[[Any], bool]) -> Callable[[Any], bool]: return lambda x: x is None or check(x)
def _anything(x) -> bool: return True
def _slot(x) -> bool: return isinstance(x, (int, str))  # buffers are numbered, variables named
def _is_dtype(x) -> bool: return isinstance(x, DType)
def _is_space(x) -> bool: return isinstance(x, AddrSpace)
def _nat(x) -> bool: return _is_pyint(x) and x >= 0
def _scalar_dtype(x) -> bool: return isinstance(x, DType) and not isinstance(x, PtrDType) and x.count == 1 and x is not dtypes.void

def _bounded(u: UOp, g: _Graph) -> bool:
  if len(u.src) == 1: return True
  lo, hi = u.src[1:]
  return u.shape == () and all(s.op is Ops.CONST and s.dtype is u.dtype for s in (lo, hi)) and lo.arg[0] <= hi.arg[0]

_BUFFERS = (Ops.BUFFER, Ops.PARAM, Ops.AFTER, Ops.BUFFER_VIEW)
def _buffer_like(u: UOp) -> bool:
  """A buffer, or a view of one through movement ops: what STORE may write into."""
  while u.op in GroupOp.Movement and u.op is not Ops.STACK: u = u.src[0]
  return u.op in _BUFFERS

def _shape_vectors(u: UOp) -> tuple[UOp, ...]:
  """The sources of u that spell a shape or offsets: (k,) STACKs of index scalars."""
  return u.src[:1] if u.op in (Ops.BUFFER, Ops.PARAM) else u.src[1:3]

def _tuple_use_ok(t: UOp, user: UOp) -> bool:
  return user.op is Ops.GETTUPLE or (user.op in (Ops.FUNCTION, Ops.CALL) and user.src[0] is t and t not in user.src[1:])

def _closed_once(u: UOp, g: _Graph) -> bool:
  return len(ends := g.closers.get(u, [])) == 1 and ends[0] > g.linear.get(u, math.inf)

def _accumulates_afresh(u: UOp, g: _Graph) -> bool:
  """A STORE updating an accumulator runs, apart from its reduce ranges, only inside loops its init runs in too, and the
  reduce ranges open after the init: a loop around the update but not the init would carry the sum over from one of its
  iterations into the next, and an init inside a reduce range would restart the sum on each step."""
  acc = accumulation(u.src[0].src[0] if u.src[0].op is Ops.INDEX else u.src[0])
  if acc is None or u not in g.loops: return True
  reduced = set(acc.ranges)
  return all(g.loops[u] - reduced <= g.loops[i] and not g.loops[i] & reduced for i in acc.inits)

def _in_order(u: UOp, g: _Graph) -> bool:
  return (i := g.linear.get(u)) is None or all(s is g.root or g.linear.get(s, math.inf) < i for s in u.src)


# ---- the rules ----

Rule = tuple[frozenset[Ops], Callable[[UOp, _Graph], bool], str]
def _ops(*ops: Ops | frozenset[Ops]) -> frozenset[Ops]: return frozenset().union(*(o if isinstance(o, frozenset) else (o,) for o in ops))

ALL = frozenset(Ops)
# ops whose operands must agree (STACK too: its dtype is its first element's); SHL/SHR may shift by an int of another width
SAME_DTYPE = _ops(GroupOp.Binary - {Ops.SHL, Ops.SHR}, Ops.SUB, Ops.DIV, Ops.CMPGT, Ops.CMPGE, Ops.CMPLE, Ops.CMPEQ, Ops.POW, Ops.MULACC,
                  Ops.THREEFRY, Ops.STACK)
FLOAT_MATH = _ops(Ops.RECIP, Ops.DIV, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.POW)
GATED = _ops(Ops.STORE, Ops.LOAD)
TENSOR_BANNED = _ops(Ops.BARRIER, Ops.INS, Ops.SPECIAL, Ops.IF, Ops.ENDIF, Ops.WMMA, Ops.CUSTOM, Ops.ATOMICADD, Ops.PROGRAM, Ops.SOURCE,
                     Ops.RANGE, Ops.END, Ops.LINEAR)
# after rangeify a kernel addresses memory with INDEX only; STACK survives to spell shapes, BITCAST to reinterpret one scalar
KERNEL_MOVEMENT_BANNED = GroupOp.Movement - {Ops.INDEX, Ops.STACK, Ops.BITCAST}

# Every stage. Decomposed ops (SUB, EXP2, ...) are allowed everywhere: a renderer may have them natively.
COMMON: list[Rule] = [
  # elementwise
  (SAME_DTYPE, lambda u, g: _one_dtype(u.src), "sources must share one dtype, got {dts}"),
  (_ops(Ops.WHERE), lambda u, g: _is_bool(u.src[0].dtype), "the gate (src[0]) must be bool, got {dts}"),
  (_ops(Ops.WHERE), lambda u, g: _one_dtype(u.src[1:]), "the branches (src[1], src[2]) must share one dtype, got {dts}"),
  (GroupOp.Comparison, lambda u, g: _is_bool(u.dtype), "a comparison gives bool, got {dtype}"),
  (_ops(Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR), lambda u, g: all(_is_int(s.dtype) for s in u.src), "takes integer sources, got {dts}"),
  (_ops(Ops.AND, Ops.OR, Ops.XOR), lambda u, g: all(_is_int(s.dtype) or _is_bool(s.dtype) for s in u.src), "takes int or bool sources, got {dts}"),
  (FLOAT_MATH, lambda u, g: all(_is_float(s.dtype) for s in u.src), "computes on floats, got {dts}"),
  (_ops(Ops.CAST, Ops.BITCAST), lambda u, g: isinstance(u.arg, DType), "arg must be the target DType, got {arg}"),
  # source ops
  (_ops(Ops.CONST), lambda u, g: _fields(u.arg, _anything, _scalar_dtype), "arg must be (value, scalar dtype), got {arg}"),
  (_ops(Ops.CONST), lambda u, g: _const_ok(u.arg), "the value must have its dtype's Python type (bool, int or float), got {arg}"),
  (_ops(Ops.CONST), lambda u, g: _const_in_range(u.arg), "the value must lie in its dtype's range, got {arg}"),
  (_ops(Ops.PARAM), lambda u, g: _fields(u.arg, _slot, _is_dtype, _opt(_device), _opt(_is_space), optional=2),
   "arg must be (slot, dtype, device?, addrspace?), got {arg}"),
  # a PARAM with (s, min, max) is a bounded scalar variable: min_max reads its bounds from these CONSTs
  (_ops(Ops.PARAM), _bounded, "a PARAM with (s, min, max) must be a scalar with CONST bounds of its dtype, min <= max"),
  # a REG or LOCAL buffer lives on whatever device runs its kernel, so it may leave the device out
  (_ops(Ops.BUFFER), lambda u, g: _fields(u.arg, _is_pyint, _is_dtype, _opt(_device), _is_space)
   and (u.arg[2] is not None or u.arg[3] is not AddrSpace.GLOBAL),
   "arg must be (slot, dtype, device, addrspace) with a device (None only for REG and LOCAL), got {arg}"),
  (_ops(Ops.BUFFER_VIEW), lambda u, g: _fields(u.arg, _nat, _is_dtype, _nat), "arg must be (size, dtype, offset) with size, offset >= 0, got {arg}"),
  (_ops(Ops.BUFFER_VIEW), lambda u, g: _buffer_like(u.src[0]), "views a buffer: src[0] must be a BUFFER, PARAM, AFTER or BUFFER_VIEW"),
  # shapes in src are (k,) STACKs of non-negative index scalars (symbolic sizes are index UOps)
  (_ops(Ops.BUFFER, Ops.PARAM, GroupOp.ShapeInSrc), lambda u, g: all(s.dtype is dtypes.index and s.shape == () and s.vmin >= 0
   for v in _shape_vectors(u) for s in v.src), "shapes and offsets must be STACKs of non-negative index scalars"),
  # movement and reduce
  (_ops(Ops.FLIP), lambda u, g: all(isinstance(f, bool) for f in u.arg), "arg must be one bool per axis, got {arg}"),
  (_ops(Ops.REPLICATED), lambda u, g: _ints(u.arg), "arg must be a tuple of axes, got {arg}"),
  (_ops(Ops.INDEX), lambda u, g: all(_is_int(s.dtype) for s in u.src[1:]), "indices must be integers, got {dts}"),
  (_ops(Ops.REDUCE), lambda u, g: _fields(u.arg, lambda x: x in (Ops.ADD, Ops.MAX, Ops.MUL), _ints),
   "arg must be (ADD, MAX or MUL, tuple of axes), got {arg}"),
  (_ops(Ops.REDUCE), lambda u, g: all(s.op is Ops.RANGE for s in u.src[1:]), "sources after the first must be RANGEs, got {srcs}"),
  # load and store
  (_ops(Ops.STORE), lambda u, g: _buffer_like(u.src[0]), "src[0] must be a buffer: BUFFER, PARAM, AFTER, BUFFER_VIEW or a movement op over one"),
  (_ops(Ops.STORE), lambda u, g: _elem(u.src[0].dtype) is u.src[1].dtype.scalar(), "the value's dtype must be the buffer's, got {dts}"),
  (GATED, lambda u, g: len(u.src) < 3 or _is_bool(u.src[2].dtype), "the gate (src[2]) must be bool, got {dts}"),
  # an alt without a gate is never read, and a gate without an alt leaves the value undefined
  (_ops(Ops.LOAD), lambda u, g: len(u.src) != 2, "takes (buf,) or (buf, alt, gate)"),
  (_ops(Ops.LOAD), lambda u, g: len(u.src) < 3 or u.src[1].dtype is u.dtype, "alt (src[1]) must have the loaded dtype {dtype}, got {dts}"),
  (_ops(Ops.LOAD), lambda u, g: u.arg is None or _fields(u.arg, _opt(_device), _is_space), "arg must be (device, addrspace), got {arg}"),
  (_ops(Ops.COPY), lambda u, g: _device(u.arg), "arg must be the target device (a name or a tuple of names), got {arg}"),
  # call
  (_ops(Ops.FUNCTION), lambda u, g: u.src[0].op is Ops.TUPLE, "the body (src[0]) must be a TUPLE, got {srcs}"),
  (_ops(Ops.TUPLE), lambda u, g: all(_tuple_use_ok(u, v) for v in g.users.get(u, ())), "may only be a FUNCTION/CALL body or a GETTUPLE source"),
  # ordering and codegen
  (_ops(Ops.RANGE, Ops.SPECIAL), lambda u, g: _int_scalar(u.src[0]), "the bound must be an integer scalar, got {dts}"),
  (_ops(Ops.RANGE), lambda u, g: _fields(u.arg, _is_pyint, lambda x: isinstance(x, AxisType)), "arg must be (id, AxisType), got {arg}"),
  (_ops(Ops.SPECIAL), lambda u, g: isinstance(u.arg, str), "arg must be the index name (e.g. gidx0), got {arg}"),
  (_ops(Ops.END), lambda u, g: all(s.op is Ops.RANGE for s in u.src[1:]), "closes RANGEs: sources after the body must be RANGEs, got {srcs}"),
  (_ops(Ops.IF), lambda u, g: _is_bool(u.src[0].dtype), "the gate must be bool, got {dts}"),
  (_ops(Ops.ENDIF), lambda u, g: u.src[0].op is Ops.IF, "closes an IF: src[0] must be an IF, got {srcs}"),
]

_KERNEL_ONLY: list[Rule] = [
  (ALL - {Ops.SINK}, lambda u, g: u is not g.root, "the root of a kernel must be a SINK"),
  (_ops(Ops.FUNCTION, Ops.CALL, Ops.COPY), _never, "has no place in a kernel: calls and copies are resolved before rangeify"),
]
_KERNEL_AND_LINEAR: list[Rule] = [
  (KERNEL_MOVEMENT_BANNED, _never, "is a movement op: after rangeify only INDEX addresses memory"),
  # expand makes vectors: STACKs of scalar lanes, INDEX(buf, lanes(i, n)) addresses n elements, INDEX(vector, CONST) a lane
  (_ops(Ops.STACK), lambda u, g: all(s.shape == () for s in u.src), "a STACK here joins scalars (a shape, or a vector's lanes)"),
  (_ops(Ops.INDEX), lambda u, g: not reads_lane(u) or (len(u.src) == 2 and _lane_number(u.src[1], g)),
   "reads a vector's lane: the index must be one CONST (or, before expand, an UPCAST range), got {srcs}"),
  (_ops(Ops.WMMA), lambda u, g: _tensor_core(u.arg) and [s.shape for s in u.src] == [(e,) for e in u.arg.elements],
   "multiplies a lane's fragments: arg a TensorCore and sources vectors of its elements, got {arg} and {srcs}"),
  (_ops(Ops.WMMA), lambda u, g: not _tensor_core(u.arg) or [s.dtype for s in u.src] == [u.arg.dtype_in, u.arg.dtype_in, u.arg.dtype_out],
   "takes A and B in the TensorCore's dtype_in and C in its dtype_out, got {dts}"),
  (_ops(Ops.BITCAST), lambda u, g: u.arg.itemsize == u.src[0].dtype.itemsize, "reinterprets a scalar here: itemsizes must match, got {dts} -> {arg}"),
]

STAGE_RULES: dict[str, list[Rule]] = {
  "tensor": [
    (TENSOR_BANNED, _never, "is a loop or codegen op: the tensor graph has none"),
  ],
  "kernel": _KERNEL_ONLY + _KERNEL_AND_LINEAR + [
    (_ops(Ops.STORE), lambda u, g: u.src[0].op is Ops.INDEX, "in a kernel, STORE writes through an INDEX, got {srcs}"),
  ],
  "linear": _KERNEL_AND_LINEAR + [
    (ALL - {Ops.LINEAR}, lambda u, g: u is not g.root, "the root of a linear program must be a LINEAR"),
    (ALL, _in_order, "must come after all its sources in the LINEAR"),
    (_ops(Ops.RANGE), _closed_once, "must be closed by exactly one END after it in the LINEAR"),
    (_ops(Ops.IF), _closed_once, "must be closed by exactly one ENDIF after it in the LINEAR"),
    (_ops(Ops.STORE), _accumulates_afresh, "updates an accumulator: every RANGE open here but its reduce ranges must be open at its init, "
     "and no reduce range may be"),
    (_ops(Ops.REDUCE, Ops.FUNCTION, Ops.CALL, Ops.COPY), _never, "has no place in a linear program: it was lowered before"),
  ],
}

def _index(rules: list[Rule]) -> dict[Ops, list[tuple[Callable, str]]]:
  by_op: dict[Ops, list[tuple[Callable, str]]] = {op: [] for op in Ops}
  for ops, pred, text in rules:
    for op in ops: by_op[op].append((pred, text))
  return by_op
_BY_STAGE = {stage: _index(COMMON + STAGE_RULES[stage]) for stage in STAGES}


# ---- reporting ----

def _and(xs: list[str]) -> str: return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]

_FACTS: dict[str, Callable[[UOp], Any]] = {  # what a rule's text may mention, computed only for broken nodes
  "dts": lambda u: _and([str(s.dtype).removeprefix("dtypes.") for s in u.src]) if u.src else "no sources",
  "dtype": lambda u: str(u.dtype).removeprefix("dtypes."),
  "srcs": lambda u: _and([s.op.name for s in u.src]) if u.src else "no sources",
  "arg": lambda u: repr(u.arg),
}

class _Facts(dict):
  def __init__(self, u: UOp): super().__init__(); self.u = u
  def __missing__(self, key: str):
    try: return _FACTS[key](self.u)
    except Exception: return "?"  # a node broken badly enough that the fact itself cannot be derived

@dataclass(frozen=True)
class Violation:
  """One rule one node breaks: `pos` is the node's position in root.toposort()."""
  uop: UOp
  rule: str
  pos: int

  def __str__(self) -> str:
    srcs = f"(src: {', '.join(s.op.name for s in self.uop.src)})" if self.uop.src else ""
    return f"#{self.pos} {self.uop.op.name}{srcs}: {self.rule}"


def check(root: UOp, stage: str) -> list[Violation]:
  """Every (node, rule) pair under root that breaks the spec for `stage` ("tensor", "kernel" or "linear"), in toposort order."""
  if stage not in _BY_STAGE: raise ValueError(f"unknown stage {stage!r}; the stages are {', '.join(STAGES)}")
  by_op, g, out = _BY_STAGE[stage], _Graph(root), []
  for pos, u in enumerate(g.nodes):
    for pred, text in by_op[u.op]:
      try: ok = pred(u, g)
      except Exception: ok = False  # a predicate that cannot even read the node: the node is malformed for this rule
      if not ok: out.append(Violation(u, text.format_map(_Facts(u)), pos))
  return out

def verify(root: UOp, stage: str) -> None:
  """Raise SpecViolation listing every broken node under root, one per line, if the graph breaks the spec for `stage`."""
  if bad := check(root, stage):
    raise SpecViolation(f"{len(bad)} spec violation{'s' if len(bad) > 1 else ''} in the {stage} graph (root {root.op.name}):\n"
                        + "\n".join(map(str, bad)))

def verify_between_stages(root: UOp, stage: str) -> None:
  """What the pipeline calls after each stage: `verify` when VERIFY is on (TINYSPEC_VERIFY=1), else nothing."""
  if VERIFY: verify(root, stage)
