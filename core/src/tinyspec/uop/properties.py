"""The derived properties of seed 001's table (and seed 002's `axis`): one rule per op or op group, read by UOp lazily.

Each rule takes a UOp whose sources already know the property (UOp's `derived` descriptor guarantees that without recursion).
Shape rules also check the op's well-formedness and raise SpecViolation naming the op, the shapes and the rule.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tinyspec.dtype import FLOATS, AddrSpace, DType, PtrDType, bf16_round, dtype_range, dtypes
from tinyspec.uop.ops import GroupOp, Ops

if TYPE_CHECKING:
  from tinyspec.uop.uop import UOp

sint = Any  # an int, or an index UOp for a symbolic size


class SpecViolation(ValueError):
  """A UOp that breaks a rule of the spec: raised on construction, and collected by the verifier."""


def _fail(u: UOp, rule: str) -> SpecViolation:
  shapes = ", ".join(str(s.shape) for s in u.src)
  return SpecViolation(f"{u.op.name}: {rule}" + (f" (source shapes: {shapes})" if shapes else ""))

# ---- shape ----

def vec_values(v: UOp, user: UOp | None = None) -> tuple[sint, ...]:
  """The entries of a shape vector (a STACK of index scalars): ints for CONSTs, the UOp itself where symbolic."""
  if v.op is not Ops.STACK:
    who = f"{user.op.name}: " if user is not None else ""
    raise SpecViolation(f"{who}a shape argument must be a STACK of index scalars, got {v.op.name}")
  return tuple(s.arg[0] if s.op is Ops.CONST else s for s in v.src)

def sint_prod(xs) -> sint:
  out = 1
  for x in xs: out = out * x if isinstance(out, int) or not isinstance(x, int) else x * out
  return out

def sint_is(x: sint, n: int) -> bool:
  """Whether size `x` is the int `n` (a symbolic size never is: it is a UOp)."""
  return isinstance(x, int) and x == n

def sint_max(x: sint) -> int:
  """The largest value a size takes: itself, or a symbolic size's upper bound (its variables at their extremes)."""
  return x if isinstance(x, int) else int(x.vmax)

def sint_value(x: sint) -> int:
  """A size's value now: itself, or a symbolic size evaluated with its bound variables' values (ValueError for an unbound one)."""
  if isinstance(x, int): return x
  return int(x.eval({v: v.bound_value for v in x.toposort() if v.bound_value is not None}))

def bound_values(nodes) -> dict[UOp, int]:
  """{variable: value} for every bound variable among `nodes` (keyed by the unbound variable); a ValueError names a variable
  bound to two values (one computation, one value per variable)."""
  out: dict[UOp, int] = {}
  for u in nodes:
    if (v := u.bound_value) is not None and out.setdefault(var := u.unbind(), v) != v:
      raise ValueError(f"variable {var.arg[0]} is bound to both {out[var]} and {v} in one computation")
  return out

def _same(a: sint, b: sint) -> bool: return a is b if not isinstance(a, int) or not isinstance(b, int) else a == b

def broadcast_shapes(*shapes: tuple[sint, ...]) -> tuple[sint, ...] | None:
  """Right-align shapes and take each axis' size; None if some axis is neither equal nor 1."""
  if all(s == shapes[0] for s in shapes[1:]): return shapes[0]
  nd = max(len(s) for s in shapes)
  out = []
  for dims in zip(*((1,) * (nd - len(s)) + tuple(s) for s in shapes)):
    big = [d for d in dims if not (isinstance(d, int) and d == 1)]
    if any(not _same(d, big[0]) for d in big[1:]): return None
    out.append(big[0] if big else 1)
  return tuple(out)

def _shape_broadcast(u: UOp):
  if len(u.src) == 2 and (a := u.src[0].shape) == u.src[1].shape: return a  # the common case, kept cheap
  if (out := broadcast_shapes(*(s.shape for s in u.src))) is None: raise _fail(u, "shapes must broadcast: right-aligned, each axis equal or 1")
  return out

def _shape_permute(u: UOp):
  sh, perm = u.src[0].shape, u.arg
  if not isinstance(perm, tuple) or sorted(perm) != list(range(len(sh))):
    raise _fail(u, f"arg {perm} must be a permutation of range({len(sh)}) for shape {sh}")
  return tuple(sh[i] for i in perm)

def _shape_flip(u: UOp):
  sh = u.src[0].shape
  if not isinstance(u.arg, tuple) or len(u.arg) != len(sh): raise _fail(u, f"arg {u.arg} must be one bool per axis of shape {sh}")
  return sh

def _shape_reshape(u: UOp):
  old, new = u.src[0].shape, vec_values(u.src[1], u)
  if all(isinstance(x, int) for x in old + new) and math.prod(old) != math.prod(new):
    raise _fail(u, f"shape {old} -> {new}: the element count must not change ({math.prod(old)} != {math.prod(new)})")
  return new

def _shape_expand(u: UOp):
  old, new = u.src[0].shape, vec_values(u.src[1], u)
  if len(old) != len(new) or any(not (isinstance(o, int) and o == 1) and not _same(o, n) for o, n in zip(old, new)):
    raise _fail(u, f"shape {old} -> {new}: only size-1 axes expand, and the number of axes must match")
  return new

def _shape_pad_shrink(u: UOp):
  sh, off, new = u.src[0].shape, vec_values(u.src[1], u), vec_values(u.src[2], u)
  if not len(sh) == len(off) == len(new): raise _fail(u, f"shape {sh}, offsets {off}, new shape {new}: one offset and size per axis")
  inner, outer = (sh, new) if u.op is Ops.PAD else (new, sh)
  for o, i, n in zip(off, inner, outer):
    if all(isinstance(x, int) for x in (o, i, n)) and not (o >= 0 and i >= 0 and o + i <= n):
      rule = "T must fit inside the padded shape at its offset" if u.op is Ops.PAD else "the kept window must lie inside T"
      raise _fail(u, f"shape {sh}, offsets {off}, new shape {new}: {rule}")
  return new

def _shape_index(u: UOp):
  sh, idxs = u.src[0].shape, u.src[1:]
  if len(idxs) > len(sh): raise _fail(u, f"{len(idxs)} indices for a tensor of shape {sh}")
  out = []
  for i in idxs:
    if len(i.shape) > 1: raise _fail(u, f"an index must be ()- or (k,)-shaped, got {i.shape}")
    out.extend(i.shape)
  return tuple(out) + sh[len(idxs):]

def _shape_stack(u: UOp):
  if not u.src: return (0,)
  if any(s.shape != u.src[0].shape for s in u.src[1:]): raise _fail(u, "all stacked shapes must match")
  return (len(u.src),) + u.src[0].shape

def _shape_bitcast(u: UOp):
  sh, old, new = u.src[0].shape, u.src[0].dtype.nbytes, u.arg.nbytes
  if old == new: return sh
  if not sh or not isinstance(sh[-1], int) or (sh[-1] * old) % new:
    raise _fail(u, f"{u.src[0].dtype} -> {u.arg} on shape {sh}: total bytes must be preserved")
  return sh[:-1] + (sh[-1] * old // new,)

def _collapse(u: UOp, axes) -> tuple[sint, ...]:
  sh = u.src[0].shape
  if any(not 0 <= a < len(sh) for a in axes): raise _fail(u, f"axes {axes} out of range for shape {sh}")
  return tuple(1 if i in axes else s for i, s in enumerate(sh))

def _shape_store(u: UOp):
  if u.src[0].shape != u.src[1].shape: raise _fail(u, f"buf.shape {u.src[0].shape} must equal val.shape {u.src[1].shape}")
  return ()

def _tuple_elem(u: UOp) -> UOp:
  """The element a GETTUPLE reads: of its TUPLE source, or of the TUPLE body of its FUNCTION/CALL source."""
  t = u.src[0] if u.src[0].op is Ops.TUPLE else u.src[0].src[0] if u.src[0].op in (Ops.FUNCTION, Ops.CALL) else None
  if t is None or t.op is not Ops.TUPLE or not isinstance(u.arg, int) or not 0 <= u.arg < len(t.src):
    raise _fail(u, f"index {u.arg} needs a TUPLE (or FUNCTION/CALL of one) with more elements")
  return t.src[u.arg]

def _shape_gettuple(u: UOp):
  """The element's shape; through a FUNCTION or CALL, each symbolic PARAM size is replaced by the argument's size there."""
  shape, call = _tuple_elem(u).shape, u.src[0]
  if call.op not in (Ops.FUNCTION, Ops.CALL) or all(isinstance(d, int) for d in shape): return shape
  from tinyspec.uop.symbolic import simplify  # the simplifier is built on UOps, so it is imported when first needed
  sizes: dict[UOp, UOp] = {}
  for param in call.src[0].toposort():
    if param.op is Ops.PARAM and isinstance(slot := param.arg[0], int) and 0 <= slot < len(call.src) - 1:
      for pd, ad in zip(param.shape, call.src[1 + slot].shape):
        if not isinstance(pd, int): sizes[pd] = ad if not isinstance(ad, int) else pd.const(ad, pd.dtype)
  out = tuple(d if isinstance(d, int) else simplify(d.substitute(sizes)) for d in shape)
  return tuple(d.arg[0] if not isinstance(d, int) and d.op is Ops.CONST else d for d in out)

SHAPE_RULES: dict[Ops, Callable[[UOp], tuple]] = {
  Ops.PARAM: lambda u: vec_values(u.src[0], u), Ops.BUFFER: lambda u: vec_values(u.src[0], u), Ops.BUFFER_VIEW: lambda u: (u.arg[0],),
  Ops.CONST: lambda u: (), Ops.BINARY: lambda u: (len(u.arg),),
  Ops.PERMUTE: _shape_permute, Ops.FLIP: _shape_flip, Ops.RESHAPE: _shape_reshape, Ops.EXPAND: _shape_expand,
  Ops.PAD: _shape_pad_shrink, Ops.SHRINK: _shape_pad_shrink, Ops.INDEX: _shape_index, Ops.STACK: _shape_stack, Ops.BITCAST: _shape_bitcast,
  Ops.REPLICATED: lambda u: _collapse(u, u.arg), Ops.REDUCE: lambda u: _collapse(u, u.arg[1]),
  Ops.GETTUPLE: _shape_gettuple, Ops.STORE: _shape_store, Ops.WMMA: lambda u: u.src[2].shape,  # a lane's part of C
}

def _shape_src0(u: UOp): return u.src[0].shape
_SHAPE_OF_SRC0 = GroupOp.Elementwise - GroupOp.Broadcasting | GroupOp.Marker | {Ops.LOAD, Ops.COPY, Ops.AFTER}
for _op in Ops:  # every op gets a rule: broadcasting ops broadcast, elementwise/marker/load ops keep src[0]'s shape, the rest are ()
  SHAPE_RULES.setdefault(_op, _shape_broadcast if _op in GroupOp.Broadcasting else _shape_src0 if _op in _SHAPE_OF_SRC0 else lambda u: ())

def derive_shape(u: UOp) -> tuple[sint, ...]: return SHAPE_RULES[u.op](u)

# ---- dtype ----

def _dtype_bool(u: UOp) -> DType: return dtypes.bool.vec(u.src[0].dtype.count)
def _dtype_load(u: UOp) -> DType: return d.base if isinstance(d := u.src[0].dtype, PtrDType) else d
def _dtype_gettuple(u: UOp) -> DType: return _tuple_elem(u).dtype
def _dtype_custom(u: UOp) -> DType: return u.arg[1] if isinstance(u.arg, tuple) else dtypes.void
def _dtype_src0(u: UOp) -> DType: return u.src[0].dtype

DTYPE_RULES: dict[Ops, Callable[[UOp], DType]] = {
  **{op: (lambda u: u.arg[1]) for op in (Ops.PARAM, Ops.BUFFER, Ops.BUFFER_VIEW, Ops.CONST)},
  Ops.CAST: lambda u: u.arg, Ops.BITCAST: lambda u: u.arg, Ops.BINARY: lambda u: dtypes.uint8,
  **{op: _dtype_bool for op in GroupOp.Comparison | {Ops.NOT}},
  Ops.WHERE: lambda u: u.src[1].dtype, Ops.WMMA: lambda u: u.src[2].dtype,
  Ops.RANGE: lambda u: dtypes.index, Ops.SPECIAL: lambda u: dtypes.index,
  Ops.STACK: lambda u: u.src[0].dtype if u.src else dtypes.index,
  Ops.GETTUPLE: _dtype_gettuple, Ops.LOAD: _dtype_load,
  Ops.CUSTOM: _dtype_custom, Ops.INS: _dtype_custom,
  **{op: (lambda u: dtypes.void) for op in (Ops.TUPLE, Ops.STORE, Ops.END, Ops.GROUP, Ops.SINK, Ops.LINEAR, Ops.BARRIER, Ops.IF, Ops.ENDIF,
                                            Ops.PROGRAM, Ops.SOURCE, Ops.CUSTOMFUNCTION)},
}
for _op in Ops: DTYPE_RULES.setdefault(_op, _dtype_src0)  # movement, reduce, call, copy, after, marker and the other elementwise ops

def derive_dtype(u: UOp) -> DType: return DTYPE_RULES[u.op](u)

# ---- device ----

def _first_device(srcs) -> str | tuple[str, ...] | None:
  for s in srcs:
    if (d := s.device) is not None: return d
  return None

def derive_device(u: UOp):
  op = u.op
  if op is Ops.BUFFER: return u.arg[2]
  if op is Ops.PARAM: return u.arg[2] if len(u.arg) > 2 else None
  if op is Ops.COPY: return u.arg
  if op is Ops.LOAD and u.arg is not None and u.arg[0] is not None: return u.arg[0]
  if op in (Ops.CONST, Ops.RANGE, Ops.BINARY, Ops.SOURCE, Ops.SPECIAL): return None
  if op in (Ops.FUNCTION, Ops.CALL): return _first_device(u.src[1:])
  return _first_device(u.src)  # the spec's src[0].device, taking the first source that has a device (constants have none)

# ---- addrspace ----

def derive_addrspace(u: UOp) -> AddrSpace:
  op = u.op
  if op in (Ops.PARAM, Ops.BUFFER): return u.arg[3] if len(u.arg) > 3 and u.arg[3] is not None else AddrSpace.GLOBAL
  if op is Ops.LOAD and u.arg is not None: return u.arg[1]
  if (op in GroupOp.Movement or op in GroupOp.Marker or op in (Ops.BUFFER_VIEW, Ops.AFTER, Ops.COPY)) and u.src: return u.src[0].addrspace
  return AddrSpace.REG  # a computed value lives in registers

# ---- min_max ----

def _rng(u: UOp) -> tuple | None:
  """The dtype range; None for values that have no range (void, pointers)."""
  dt = u.dtype
  return None if isinstance(dt, PtrDType) or dt == dtypes.void else dtype_range(dt.scalar())

def _fit(u: UOp, lo, hi) -> tuple:
  """An interval, or the dtype's whole range where the true result may overflow (ints wrap) or is undefined (nan)."""
  dlo, dhi = _rng(u)
  if lo != lo or hi != hi or lo < dlo or hi > dhi: return (dlo, dhi)
  return (lo, hi)

def _mm_mul(u: UOp):
  (a, A), (b, B) = u.src[0].min_max, u.src[1].min_max
  prods = [x * y for x in (a, A) for y in (b, B)]
  return _fit(u, min(prods), max(prods))

def _mm_cmplt(u: UOp):
  (a, A), (b, B) = u.src[0].min_max, u.src[1].min_max
  return (True, True) if A < b else (False, False) if a >= B else (False, True)

def _mm_cmpne(u: UOp):
  (a, A), (b, B) = u.src[0].min_max, u.src[1].min_max
  if A < b or B < a: return (True, True)
  return (False, False) if a == A == b == B else (False, True)

def _to_float(dt: DType, v) -> float:
  """v converted to float dtype dt (round to nearest even, inf on overflow), as a CAST does."""
  with np.errstate(over="ignore"):
    if dt.fmt is not None: return float(dt.np.type(v))
    return float(bf16_round(np.float32(v)))  # bfloat16: via float32

def _mm_cast(u: UOp):
  a, A = u.src[0].min_max
  if u.dtype.scalar() == dtypes.bool: return (True, True) if a > 0 or A < 0 else (False, False) if a == A == 0 else (False, True)
  if u.dtype.scalar() in FLOATS:
    lo, hi = _to_float(u.dtype.scalar(), a), _to_float(u.dtype.scalar(), A)
    return _rng(u) if any(math.isinf(c) and not math.isinf(x) for c, x in ((lo, a), (hi, A))) else _fit(u, lo, hi)
  if any(isinstance(x, float) and not math.isfinite(x) for x in (a, A)): return _rng(u)
  return _fit(u, math.trunc(a), math.trunc(A))

def _mm_idiv(u: UOp):
  (a, A), (b, B) = u.src[0].min_max, u.src[1].min_max
  if not dtypes.is_int(u.dtype) or b <= 0: return _rng(u)  # only a positive divisor keeps floor division monotonic
  return (min(a // b, a // B), max(A // b, A // B))

def _mm_mod(u: UOp):
  (a, A), (b, B) = u.src[0].min_max, u.src[1].min_max
  if not dtypes.is_int(u.dtype) or b <= 0: return _rng(u)
  if 0 <= a and A < b: return (a, A)  # every divisor is bigger than every dividend
  if b == B and a // b == A // b: return (a % b, A % b)  # the dividends lie inside one period of a constant divisor
  return (0, B - 1)

def _mm_param(u: UOp):
  return (u.src[1].arg[0], u.src[2].arg[0]) if len(u.src) == 3 else _rng(u)

def _mm_range(u: UOp):
  return (0, u.src[0].min_max[1] - 1)

MIN_MAX_RULES: dict[Ops, Callable[[UOp], tuple]] = {
  Ops.CONST: lambda u: (u.arg[0], u.arg[0]), Ops.PARAM: _mm_param, Ops.RANGE: _mm_range, Ops.SPECIAL: _mm_range,
  Ops.ADD: lambda u: _fit(u, u.src[0].min_max[0] + u.src[1].min_max[0], u.src[0].min_max[1] + u.src[1].min_max[1]),
  Ops.MUL: _mm_mul,
  Ops.MAX: lambda u: (max(u.src[0].min_max[0], u.src[1].min_max[0]), max(u.src[0].min_max[1], u.src[1].min_max[1])),
  Ops.CMPLT: _mm_cmplt, Ops.CMPNE: _mm_cmpne,
  Ops.WHERE: lambda u: (min(u.src[1].min_max[0], u.src[2].min_max[0]), max(u.src[1].min_max[1], u.src[2].min_max[1])),
  Ops.CAST: _mm_cast, Ops.IDIV: _mm_idiv, Ops.MOD: _mm_mod,
  Ops.INDEX: lambda u: u.src[0].min_max, Ops.AFTER: lambda u: u.src[0].min_max, Ops.COPY: lambda u: u.src[0].min_max,
  Ops.STACK: lambda u: (min(s.min_max[0] for s in u.src), max(s.min_max[1] for s in u.src)) if u.src else _rng(u),  # hull of the parts
  Ops.PAD: lambda u: (min(u.src[0].min_max[0], 0), max(u.src[0].min_max[1], 0)),  # the padded region reads as 0
}

def derive_min_max(u: UOp) -> tuple:
  if (rule := MIN_MAX_RULES.get(u.op)) is not None: return rule(u)
  if (u.op in GroupOp.Movement or u.op in GroupOp.Marker) and u.op is not Ops.BITCAST: return u.src[0].min_max if u.src else _rng(u)
  return _rng(u)

# ---- axis (seed 002: the multi-device shard axis) ----

def _axis_reshape(u: UOp):
  """The new axis that starts where the shard axis started and still splits evenly over the devices."""
  if (ax := u.src[0].axis) is None: return None
  ndev = len(u.device) if isinstance(u.device, tuple) else 1
  old, new = u.src[0].shape, u.shape
  before = sint_prod(old[:ax])
  for k, n in enumerate(new):
    if _same(sint_prod(new[:k]), before) and isinstance(n, int) and n % ndev == 0 and (n != 1 or ndev == 1): return k
  raise _fail(u, f"reshape {old} -> {new} moves the shard boundary of axis {ax} over {ndev} devices")

def derive_axis(u: UOp) -> int | None:
  op = u.op
  if op in (Ops.BUFFER, Ops.PARAM): return 0 if len(u.arg) > 2 and isinstance(u.arg[2], tuple) else None
  if op is Ops.COPY: return 0 if isinstance(u.arg, tuple) else None
  if op is Ops.RESHAPE: return _axis_reshape(u)
  if op is Ops.PERMUTE: return None if u.src[0].axis is None else u.arg.index(u.src[0].axis)
  if op is Ops.REDUCE: return None if u.src[0].axis in u.arg[1] else u.src[0].axis
  if op is Ops.REPLICATED: return None if u.src[0].axis in u.arg else u.src[0].axis
  if op is Ops.STACK: return None if not u.src or u.src[0].axis is None else u.src[0].axis + 1
  if op is Ops.INDEX:
    if (ax := u.src[0].axis) is None: return None
    idx = u.src[1:]
    if ax < len(idx): return None if idx[ax].shape == () else sum(len(i.shape) for i in idx[:ax])
    return ax - len(idx) + sum(len(i.shape) for i in idx)
  if op in GroupOp.Movement or op in GroupOp.Marker or op in (Ops.AFTER, Ops.LOAD, Ops.CAST): return u.src[0].axis if u.src else None
  if op in GroupOp.Elementwise:
    for s in u.src:
      if s.axis is not None: return s.axis + len(u.shape) - len(s.shape)  # broadcasting right-aligns a lower-rank source
  return None
