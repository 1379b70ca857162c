"""Stage 4, expand: ranges the optimizer made UPCAST or UNROLL are expanded into the kernel, so no loop is left for them.

Where such a range walks memory contiguously, it becomes the shape of a vector (seed 001: "expand the parallel ranges
into shape"): a LOAD whose index is `base + r` reads all r.size elements at once, INDEX(buf, lanes(base, n)), and each
copy of the work takes its lane, INDEX(vector, CONST j); a STORE whose index is `base + r` writes a STACK of the copies'
values in one vector store. Everything else is copied once per value of the range: an UNROLL range of a REDUCE becomes
a chain of its op over the copies, an UPCAST range closed by an END a GROUP of the copied stores. Arithmetic stays
scalar, lane by lane; instruction selection (`isel.devectorize`) later splits vectors wider than the device has."""
from __future__ import annotations

import functools
import itertools

from tinyspec.uop.ops import AxisType, Ops
from tinyspec.uop.rewrite import PatternMatcher, UPat, graph_rewrite
from tinyspec.uop.spec import lanes
from tinyspec.uop.symbolic import pm_fold_consts, sum_terms
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

def contiguous_in(idx: UOp) -> tuple[UOp, UOp] | None:
  """(r, base) for an expanded range r of constant size > 1 with idx == base + r, r a whole summand of idx that appears
  nowhere else in it: the elements idx reaches over r's values are consecutive. The longest such range when there are
  several (a conv's input row is contiguous in the UPCAST output x and in the UNROLL window kx); None when none is."""
  if idx.shape: return None  # already a vector's lanes
  terms = sum_terms(idx)
  for r in sorted((t for t in terms if t.op is Ops.RANGE and t.axis_type in EXPANDED and (t.size or 0) > 1), key=lambda t: -t.size):
    rest = [t for t in terms if t is not r]
    if len(rest) == len(terms) - 1 and not any(r in t.toposort() for t in rest):
      return r, functools.reduce(lambda a, b: a + b, rest) if rest else UOp.const(0)
  return None

def _vector_load(buf: UOp, idx: UOp) -> UOp | None:
  if (found := contiguous_in(idx)) is None: return None
  r, base = found
  return UOp(Ops.LOAD, (buf.index(lanes(base, r.size)),)).index(r)

def _vector_store(st: UOp, ups: list[UOp]) -> tuple[UOp, list[UOp]]:
  """An ungated STORE to buf[base + r], buf a PARAM (device memory, as for loads) and r one of `ups`: one vector STORE of
  the copies' values over r (and the ups left)."""
  if st.op is not Ops.STORE or len(st.src) != 2 or st.src[0].op is not Ops.INDEX or len(st.src[0].src) != 2: return st, ups
  if st.src[0].src[0].op is not Ops.PARAM: return st, ups
  if (found := contiguous_in(st.src[0].src[1])) is None or found[0] not in ups: return st, ups
  r, base = found
  vals = UOp(Ops.STACK, tuple(st.src[1].substitute({r: UOp.const(j)}) for j in range(r.size)))
  return UOp(Ops.STORE, (st.src[0].src[0].index(lanes(base, r.size)), vals)), [u for u in ups if u is not r]

def _expand_reduce(red: UOp) -> UOp | None:
  ups, rest = _split(red.src[1:])
  if not ups: return None
  val = functools.reduce(lambda a, b: UOp(red.arg[0], (a, b)), _copies(red.src[0], ups))
  return UOp(Ops.REDUCE, (val, *rest), red.arg) if rest else val

def _expand_end(end: UOp) -> UOp | None:
  ups, rest = _split(end.src[1:])
  if not ups: return None
  st, ups = _vector_store(end.src[0], ups)
  body = UOp(Ops.GROUP, tuple(_copies(st, ups)))
  return UOp(Ops.END, (body, *rest)) if rest else body

def _same_vector(v: UOp) -> UOp | None:
  first = v.src[0] if v.src and v.src[0].op is Ops.INDEX else None
  if first is None or first.src[0].shape != (len(v.src),): return None
  ok = all(s.op is Ops.INDEX and s.src[0] is first.src[0] and s.src[1].op is Ops.CONST and s.src[1].arg[0] == j for j, s in enumerate(v.src))
  return first.src[0] if ok else None

pm_expand = PatternMatcher([
  # LOAD(buf[base + r]) -> LOAD(buf[lanes(base, n)])[r]: one vector load; r's copies read its lanes
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat(Ops.PARAM, name="buf"), UPat.var("idx"))),)), _vector_load),
  (UPat(Ops.REDUCE, name="red"), _expand_reduce),  # REDUCE(x, r:unroll) -> x[r=0] op x[r=1] op ...
  (UPat(Ops.END, name="end"), _expand_end),        # END(st, r:upcast) -> GROUP(st[r=0], st[r=1], ...), or one vector store
])

# what the copies leave behind
pm_lanes = PatternMatcher([
  (UPat(Ops.INDEX, src=(UPat(Ops.STACK, name="v"), UPat.cvar("j"))), lambda v, j: v.src[j.arg[0]]),  # STACK(x0, x1, ...)[j] -> xj
  (UPat(Ops.STACK, name="v"), _same_vector),       # STACK(v[0], v[1], ..., v[n-1]) -> v: a vector copied as it is
])

pm_lanes_folded = pm_lanes + pm_fold_consts  # the copies' arithmetic on constants folds (composed once: composing compiles the rules)

def expand(kernel: UOp) -> UOp:
  """The kernel with its UPCAST and UNROLL ranges expanded."""
  return graph_rewrite(graph_rewrite(kernel, pm_expand), pm_lanes_folded)
