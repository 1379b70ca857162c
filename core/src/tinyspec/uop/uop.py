"""UOp = (op, src, arg, tag): the one node type of the IR. Immutable and hash-consed; its derived properties are cached."""
from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyspec.dtype import FLOATS, INTS, AddrSpace, DType, bf16_round, dtypes
from tinyspec.uop import properties as P
from tinyspec.uop.ops import OPS, AxisType, GroupOp, Ops

SpecViolation = P.SpecViolation
ConstType = bool | int | float


class derived:
  """A property computed once per UOp by `rule` and cached in its __dict__. Sources are computed first by an explicit
  stack, so asking the root of a 100k-node chain never recurses on Python's stack."""
  def __init__(self, rule: Callable[[UOp], Any]): self.rule, self.__doc__ = rule, rule.__doc__
  def __set_name__(self, owner, name: str): self.name = name
  def __get__(self, u: UOp | None, owner=None):
    if u is None: return self
    name, rule = self.name, self.rule
    for s in u.src:
      if name not in s.__dict__: break
    else:  # the usual case: the sources already know it
      v = u.__dict__[name] = rule(u)
      return v
    stack = [u]
    while stack:
      n = stack[-1]
      if name in n.__dict__: stack.pop(); continue
      if missing := [s for s in n.src if name not in s.__dict__]: stack.extend(missing)
      else: n.__dict__[name] = rule(n); stack.pop()
    return u.__dict__[name]


def _float_const_key(arg):
  # 0.0 == -0.0 and nan != nan in Python: key floats by their bits so both hash-cons correctly
  return (arg[0].hex(), arg[1])

_MANY = 1 << 62
_NSRC = {op: (info.nsrc[0], _MANY if info.nsrc[1] is None else info.nsrc[1]) for op, info in OPS.items()}
_CONST, _DTYPE_RULES, _SHAPE_RULES = Ops.CONST, P.DTYPE_RULES, P.SHAPE_RULES
_live: dict[tuple, weakref.ref] = {}  # hash-consing table: (op, src, arg, tag) -> the live node


class UOp:
  """One node of the IR: `op` from Ops, `src` a tuple of UOps, `arg` op-dependent, `tag` free for passes to mark nodes.

  Hash-consed: building the same (op, src, arg, tag) twice returns the same live node, so == is identity.
  Derived properties follow seed 001's table: `dtype` and `shape` are derived as the node is built (the shape rules are
  the well-formedness check, so a bad node raises SpecViolation at once); `device`, `addrspace`, `min_max` and `axis`
  on first use. All are cached."""
  __slots__ = ("op", "src", "arg", "tag", "dtype", "shape", "__dict__", "__weakref__")  # __dict__ holds the lazy properties, made on first use
  op: Ops
  src: tuple[UOp, ...]
  arg: Any
  tag: Any
  dtype: DType
  shape: tuple

  def __new__(cls, op: Ops, src: tuple[UOp, ...] = (), arg: Any = None, tag: Any = None) -> UOp:
    if op is _CONST:
      if type(arg) is not tuple or len(arg) != 2: raise SpecViolation(f"CONST: arg must be (value, dtype), got {arg!r}")
      key = (op, src, _float_const_key(arg) if type(arg[0]) is float else (arg, type(arg[0])), tag)  # True and 1 stay apart
    else: key = (op, src, arg, tag)
    if (ref := _live.get(key)) is not None and (u := ref()) is not None: return u
    lo, hi = _NSRC[op]
    if not lo <= len(src) <= hi:
      raise SpecViolation(f"{op.name}: takes {lo}{'+' if hi == _MANY else '' if lo == hi else f'..{hi}'} sources {OPS[op].src}, got {len(src)}")
    for s in src:
      if type(s) is not UOp: raise TypeError(f"{op.name}: every source must be a UOp, got {[type(s).__name__ for s in src]}")
    u = object.__new__(cls)
    _set_op(u, op); _set_src(u, src); _set_arg(u, arg); _set_tag(u, tag)
    _set_dtype(u, _DTYPE_RULES[op](u))
    _set_shape(u, _SHAPE_RULES[op](u))  # ill-formed nodes raise here, before they are registered
    # when u dies its entry goes, by a C-level call: hash-consing returns u while it lives, so no other node has this key then.
    # setdefault, one step under the GIL: a thread that built the same node meanwhile registered it first, and that one is
    # returned (two live nodes for one key would break == as identity); this weakref is dropped unused, with no callback
    ref = weakref.ref(u, functools.partial(_live.pop, key))
    if (kept := _live.setdefault(key, ref)) is not ref:
      if (first := kept()) is not None:
        del ref
        return first
      # a dead entry whose callback has not run yet (gc clears a batch's weakrefs before it calls their callbacks): when that
      # callback runs it removes this entry too, and u lives on unregistered, a rare gap in which a duplicate can be built
      _live[key] = ref
    return u
  def __setattr__(self, name, value): raise AttributeError(f"UOp is immutable; use .replace({name}=...)")
  def __reduce__(self): return UOp, (self.op, self.src, self.arg, self.tag)

  device = derived(P.derive_device)
  addrspace = derived(P.derive_addrspace)
  min_max = derived(P.derive_min_max)
  axis = derived(P.derive_axis)

  @property
  def vmin(self): return self.min_max[0]
  @property
  def vmax(self): return self.min_max[1]
  @property
  def ndim(self) -> int: return len(self.shape)

  # a RANGE's parts by name: its arg is (axis id, AxisType), its src[0] the bound
  @property
  def axis_id(self) -> int: return self.arg[0]
  @property
  def axis_type(self) -> AxisType: return self.arg[1]
  @property
  def size(self) -> int | None:
    """A RANGE's or SPECIAL's number of values when its bound is a constant; None for a symbolic bound (read `src[0]`)."""
    return self.src[0].arg[0] if self.src[0].op is Ops.CONST else None

  def replace(self, **kwargs) -> UOp:
    """This node with some of op, src, arg, tag changed."""
    new = (kwargs.pop("op", self.op), kwargs.pop("src", self.src), kwargs.pop("arg", self.arg), kwargs.pop("tag", self.tag))
    if kwargs: raise TypeError(f"replace() got unknown fields {sorted(kwargs)}")
    return self if new == (self.op, self.src, self.arg, self.tag) else UOp(*new)

  def toposort(self) -> list[UOp]:
    """Every node reachable from this one, sources before users, each once. Iterative: safe on deep graphs."""
    seen: dict[UOp, None] = {}
    stack: list[tuple[UOp, bool]] = [(self, False)]
    while stack:
      n, expanded = stack.pop()
      if n in seen: continue
      if expanded: seen[n] = None
      else: stack.append((n, True)); stack.extend((s, False) for s in reversed(n.src) if s not in seen)
    return list(seen)

  def __repr__(self) -> str:
    from tinyspec.viz import render_size, render_tree
    if self.op is not Ops.CONST and self.dtype is dtypes.index and self.shape == () and (size := render_size(self)) is not None:
      return size  # a symbolic size, short enough to read inside a shape
    return render_tree(self, max_lines=12)

  # ---- builders ----
  @staticmethod
  def const(value: ConstType, dtype: DType = dtypes.index) -> UOp:
    """A scalar constant brought into `dtype` the way a cast would: ints truncate and wrap around, floats round to the type."""
    sdt = dtype.scalar()
    return UOp(Ops.CONST, (), ((WRAP.get(sdt) or _no_const(sdt))(value), sdt))
  @staticmethod
  def vec(values, dtype: DType = dtypes.index) -> UOp:
    """A (k,)-shaped vector: a STACK of scalars. Ints become CONSTs; UOps (symbolic sizes) go in as they are."""
    return UOp(Ops.STACK, tuple(v if isinstance(v, UOp) else UOp.const(v, dtype) for v in values))
  @staticmethod
  def variable(name: str, lo: int, hi: int, dtype: DType = dtypes.index) -> UOp:
    """A bounded scalar variable: PARAM(shape (), min, max) with arg (name, dtype)."""
    if lo > hi: raise ValueError(f"variable {name}: empty range [{lo}, {hi}]")
    return UOp(Ops.PARAM, (UOp.vec(()), UOp.const(lo, dtype), UOp.const(hi, dtype)), (name, dtype))
  @property
  def is_variable(self) -> bool:
    """A bounded scalar variable (`UOp.variable`), bound to a value or not."""
    return self.op is Ops.PARAM and len(self.src) == 3 and isinstance(self.arg[0], str)
  def bind(self, value: int) -> UOp:
    """This variable standing for `value`: the same PARAM tagged ("bind", value). A bound variable may stand in a Tensor's
    shape (`Tensor.empty(n.bind(7), 4)`); realize runs the kernels compiled for the unbound variable with the value."""
    if not self.is_variable: raise TypeError(f"bind: only a variable (UOp.variable) takes a value, not {self.op.name} (arg {self.arg})")
    if self.tag is not None: raise ValueError(f"bind: variable {self.arg[0]} is already bound to {self.bound_value}")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not self.vmin <= value <= self.vmax:
      raise ValueError(f"bind: variable {self.arg[0]} takes an int in [{self.vmin}, {self.vmax}], got {value!r}")
    return self.replace(tag=("bind", int(value)))
  @property
  def bound_value(self) -> int | None:
    """The value a bound variable stands for; None for anything else."""
    return self.tag[1] if self.op is Ops.PARAM and type(self.tag) is tuple and self.tag[0] == "bind" else None
  def unbind(self) -> UOp:
    """A bound variable's variable (no value)."""
    return self.replace(tag=None) if self.bound_value is not None else self

  @staticmethod
  def range(bound: int | UOp, idx: int, axis_type: AxisType = AxisType.LOOP) -> UOp:
    """A loop index 0..bound-1; `idx` tells ranges of equal bound apart."""
    return UOp(Ops.RANGE, (bound if isinstance(bound, UOp) else UOp.const(bound),), (idx, axis_type))
  @staticmethod
  def buffer(shape: tuple, dtype: DType, device: str | tuple[str, ...], slot: int, addrspace: AddrSpace = AddrSpace.GLOBAL) -> UOp:
    """A buffer of `shape` on `device` (an n-tuple of devices: one buffer split across them on axis 0)."""
    return UOp(Ops.BUFFER, (UOp.vec(shape),), (slot, dtype, device, addrspace))
  @staticmethod
  def sink(*srcs: UOp, arg=None) -> UOp:
    """The root that collects side effects (or any nodes to keep together)."""
    return UOp(Ops.SINK, srcs, arg)

  def _operand(self, x: UOp | ConstType) -> UOp: return x if isinstance(x, UOp) else UOp.const(x, self.dtype)
  def alu(self, op: Ops, *srcs: UOp | ConstType) -> UOp:
    """An elementwise op with this node as the first source; Python numbers become constants of this dtype."""
    return UOp(op, (self, *(self._operand(s) for s in srcs)))
  def _bin(self, op: Ops, x: UOp | ConstType) -> UOp: return UOp(op, (self, x if type(x) is UOp else UOp.const(x, self.dtype)))
  def cast(self, dtype: DType) -> UOp: return self if self.dtype == dtype else UOp(Ops.CAST, (self,), dtype)
  def bitcast(self, dtype: DType) -> UOp: return UOp(Ops.BITCAST, (self,), dtype)

  # arithmetic builds primitives only (seed 001: SUB = ADD(a, NEG(b)), NEG = MUL(a, -1)), so rewrite rules see one canonical form
  def __add__(self, x): return self._bin(Ops.ADD, x)
  def __radd__(self, x): return self._operand(x).alu(Ops.ADD, self)
  def __mul__(self, x): return self._bin(Ops.MUL, x)
  def __rmul__(self, x): return self._operand(x).alu(Ops.MUL, self)
  def __neg__(self):
    if self.dtype == dtypes.bool: raise TypeError("negation of a bool UOp is not defined; use .ne(True) for logical not")
    return self._bin(Ops.MUL, -1)
  def __sub__(self, x): return self + (-self._operand(x))
  def __rsub__(self, x): return self._operand(x) + (-self)
  def __floordiv__(self, x): return self._bin(Ops.IDIV, x)
  def __rfloordiv__(self, x): return self._operand(x).alu(Ops.IDIV, self)
  def __mod__(self, x): return self._bin(Ops.MOD, x)
  def __rmod__(self, x): return self._operand(x).alu(Ops.MOD, self)
  def __and__(self, x): return self._bin(Ops.AND, x)
  def __or__(self, x): return self._bin(Ops.OR, x)
  def __xor__(self, x): return self._bin(Ops.XOR, x)
  def __lshift__(self, x): return self._bin(Ops.SHL, x)
  def __rshift__(self, x): return self._bin(Ops.SHR, x)
  def __lt__(self, x): return self._bin(Ops.CMPLT, x)
  def __gt__(self, x): return self._operand(x).alu(Ops.CMPLT, self)
  def __ge__(self, x): return (self < x).ne(True)
  def __le__(self, x): return (self > x).ne(True)
  __hash__ = object.__hash__  # identity: defining __eq__ would break hash-consing, so == stays `is`
  def ne(self, x) -> UOp: return self._bin(Ops.CMPNE, x)
  def eq(self, x) -> UOp: return self.ne(x).ne(True)
  def maximum(self, x) -> UOp: return self._bin(Ops.MAX, x)
  def minimum(self, x) -> UOp: return -((-self).maximum(-self._operand(x)))
  def where(self, a, b) -> UOp:
    """a where this gate is true, else b. A Python number takes the other branch's dtype (its own if both are numbers)."""
    if not isinstance(a, UOp): a = b._operand(a) if isinstance(b, UOp) else UOp.const(a, dtypes.from_py(a))
    return UOp(Ops.WHERE, (self, a, a._operand(b)))
  def recip(self) -> UOp: return UOp(Ops.RECIP, (self,))

  # ---- movement ----
  def reshape(self, shape) -> UOp: return UOp(Ops.RESHAPE, (self, UOp.vec(shape)))
  def expand(self, shape) -> UOp: return UOp(Ops.EXPAND, (self, UOp.vec(shape)))
  def permute(self, order) -> UOp: return UOp(Ops.PERMUTE, (self,), tuple(order))
  def flip(self, axes) -> UOp: return UOp(Ops.FLIP, (self,), tuple(i in axes for i in range(self.ndim)))
  def pad(self, offset, shape) -> UOp: return UOp(Ops.PAD, (self, UOp.vec(offset), UOp.vec(shape)))
  def shrink(self, offset, shape) -> UOp: return UOp(Ops.SHRINK, (self, UOp.vec(offset), UOp.vec(shape)))
  def index(self, *idx: UOp) -> UOp: return UOp(Ops.INDEX, (self, *idx))
  def reduce(self, op: Ops, axes) -> UOp: return UOp(Ops.REDUCE, (self,), (op, tuple(axes)))

  # ---- evaluation of scalar expressions (tests, constant folding) ----
  def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
    """This graph with the nodes in `mapping` replaced."""
    from tinyspec.uop.rewrite import graph_substitute
    return graph_substitute(self, mapping)
  def eval(self, env: dict[UOp, ConstType] | None = None) -> ConstType:
    """The value of a scalar expression given values for its variables (PARAMs) and ranges."""
    vals: dict[UOp, ConstType] = dict(env or {})
    for n in self.toposort():
      if n in vals: continue
      if n.op is Ops.CONST: vals[n] = n.arg[0]
      elif n.op in GroupOp.ALU and n.op is not Ops.CAST: vals[n] = exec_alu(n.op, n.dtype, tuple(vals[s] for s in n.src))
      elif n.op is Ops.CAST: vals[n] = UOp.const(vals[n.src[0]], n.dtype).arg[0]
      elif n.op is Ops.STACK and not n.src: vals[n] = ()
      else: raise ValueError(f"eval: no value for {n.op.name} (arg {n.arg}); pass it in env")
    return vals[self]


def _no_const(dt: DType): raise TypeError(f"no constant of dtype {dt}")

_set_op, _set_src, _set_arg, _set_tag, _set_dtype, _set_shape = (UOp.__dict__[f].__set__ for f in ("op", "src", "arg", "tag", "dtype", "shape"))

def _int_wrap(dt: DType) -> Callable[[ConstType], int]:
  mask, half = (1 << 8 * dt.itemsize) - 1, 1 << (8 * dt.itemsize - 1)
  if dtypes.is_unsigned(dt): return lambda v: int(v) & mask
  return lambda v: ((int(v) + half) & mask) - half

def _bf16(v: float) -> float:
  """Round to bfloat16 through float32, to nearest even."""
  with np.errstate(over="ignore"): return float(bf16_round(np.float32(v)))

def _float_round(dt: DType) -> Callable[[ConstType], float]:
  if dt == dtypes.bfloat16: return lambda v: _bf16(float(v))
  to = dt.np.type
  def rnd(v: ConstType) -> float:
    if not math.isfinite(v): return float(v)
    with np.errstate(over="ignore"): return float(to(v))  # overflow to inf is the right answer, not a warning
  return rnd

# how a Python result is brought into each (scalar) dtype: ints wrap around like the hardware's, floats round to the type
WRAP: dict[DType, Callable[[ConstType], ConstType]] = {dtypes.bool: bool, **{d: _int_wrap(d) for d in (*INTS, dtypes.index)},
                                                        **{d: _float_round(d) for d in FLOATS}}

def _safe(f):
  def g(*a):
    try: return f(*a)
    except (ZeroDivisionError, OverflowError, ValueError): return math.nan
  return g

_PY_ALU: dict[Ops, Callable] = {
  Ops.ADD: lambda a, b: a + b, Ops.MUL: lambda a, b: a * b, Ops.MAX: max, Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a != b,
  Ops.XOR: lambda a, b: a ^ b, Ops.OR: lambda a, b: a | b, Ops.AND: lambda a, b: a & b,
  Ops.SHL: lambda a, b: a << b if b >= 0 else 0, Ops.SHR: lambda a, b: a >> b if b >= 0 else 0, Ops.WHERE: lambda c, a, b: a if c else b,
  Ops.IDIV: lambda a, b: a // b if b != 0 else 0, Ops.MOD: lambda a, b: a % b if b != 0 else 0,
  Ops.TRUNC: lambda x: math.trunc(x) if math.isfinite(x) else x, Ops.RECIP: _safe(lambda x: 1 / x if x != 0 else math.copysign(math.inf, x)),
}

def exec_alu(op: Ops, dtype: DType, operands: tuple) -> ConstType:
  """Run one ALU op on Python scalars with the dtype's semantics: integers wrap around, IDIV and MOD floor. By convention
  x//0 and x%0 are 0 and a shift by a negative amount is 0 (undefined on hardware, so folding must not crash on them)."""
  if (f := _PY_ALU.get(op)) is None: raise ValueError(f"exec_alu: {op.name} is not an ALU op that runs on scalars")
  if dtype is dtypes.bool and op in (Ops.AND, Ops.OR, Ops.XOR): return bool(f(bool(operands[0]), bool(operands[1])))
  return (WRAP.get(dtype) or WRAP[dtype.scalar()])(f(*operands))
