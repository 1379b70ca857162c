"""Reverse-mode differentiation over UOps.

`pm_gradient` has one rule per op: called with ctx = the gradient of a node's value (a UOp of the node's shape), it
returns one gradient per source, None where none flows (a shape vector, a gate, a piecewise-constant op). A rule may give
a source a gradient of the node's broadcast shape: `compute_gradient` sums it down to the source's shape.
`compute_gradient` walks the graph from the root, users before sources, summing what reaches each node.

The graphs are tensor graphs, so the gradients are too: lazy values that realize like any other."""
from __future__ import annotations

import math

from tinyspec.dtype import dtypes
from tinyspec.engine import transcendental as T
from tinyspec.uop.ops import GroupOp, Ops
from tinyspec.uop.properties import vec_values
from tinyspec.uop.rewrite import PatternMatcher, UPat
from tinyspec.uop.uop import UOp

_LN2 = math.log(2)

def _c(v: float, like: UOp) -> UOp: return UOp.const(v, like.dtype)
def _expand_to(u: UOp, shape: tuple) -> UOp: return u if u.shape == shape else u.expand(shape)

def _unbroadcast(g: UOp, shape: tuple) -> UOp:
  """g summed down to `shape`, which it broadcasts from (right-aligned): the gradient of an implicit broadcast."""
  if g.shape == shape: return g
  lead = g.ndim - len(shape)
  axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
  return (g.reduce(Ops.ADD, axes) if axes else g).reshape(shape)

def _max(ctx: UOp, ret: UOp) -> tuple[UOp, UOp]:
  """d max(a, b), as PyTorch's maximum: each source takes the gradient unless it is the smaller one, halved on a tie; a nan
  (neither smaller nor equal) leaves both the whole gradient."""
  a, b = ret.src
  share = a.eq(b).where(ctx * 0.5, ctx)
  return (a < b).where(0.0, share), (b < a).where(0.0, share)

def _pow(ctx: UOp, ret: UOp) -> tuple[UOp, UOp]:
  """d a^b = (b a^(b-1), a^b ln a) with PyTorch's masks: no slope in a where b = 0, none in b where a = 0 and b >= 0. POW
  gives x^0 = 1^x = 1 everywhere (C99's values), so d/db inf^b at b = 0 is ln inf = inf and d/da 1^b at b = inf is inf."""
  a, b = ret.src
  da = b.eq(0).where(0.0, ctx * b * UOp(Ops.POW, (a, b + -1)))
  db = ctx * (a.eq(0) & (b < 0).ne(True)).where(0.0, ret * UOp(Ops.LOG2, (a,)) * _LN2)
  return da, db

def _reduce(ctx: UOp, ret: UOp) -> tuple[UOp]:
  """REDUCE keeps the reduced axes as size 1, so the gradient expands straight back to the source's shape."""
  x, (op, axes) = ret.src[0], ret.arg
  ge = _expand_to(ctx, x.shape)
  if op is Ops.ADD: return (ge,)
  zero, one = _c(0, x), _c(1, x)
  if op is Ops.MAX:  # the maxima share the gradient equally (PyTorch's amax and full max); a nan maximum is each nan
    hit = x.eq(_expand_to(ret, x.shape)) | x.ne(x)
    count = hit.where(one, zero).reduce(Ops.ADD, axes)
    return (hit.where(ge * _expand_to(count.recip(), x.shape), zero),)
  # MUL: the product of the others is prod/x without zeros; with one zero only that element has one (the product of the
  # non-zeros); with two or more nothing does. Dividing by x alone would give nan at every zero.
  nonzero = x.ne(0)
  rest = _expand_to(nonzero.where(x, one).reduce(Ops.MUL, axes), x.shape)
  zeros = _expand_to(nonzero.where(zero, one).reduce(Ops.ADD, axes), x.shape)
  others = zeros.eq(0).where(rest * nonzero.where(x, one).recip(), (zeros.eq(1) & nonzero.ne(True)).where(rest, zero))
  return (ge * others,)

def _expand(ctx: UOp, ret: UOp) -> tuple[UOp, None]:
  x = ret.src[0]
  axes = tuple(i for i, (s, n) in enumerate(zip(x.shape, ret.shape)) if s != n)
  if not axes: return ctx, None
  if ctx.dtype.itemsize < 4: return ctx.cast(dtypes.float32).reduce(Ops.ADD, axes).cast(ctx.dtype), None  # halves sum in float32, as Tensor.sum
  return ctx.reduce(Ops.ADD, axes), None

def _copy(ctx: UOp, ret: UOp) -> tuple[UOp]:
  dev = ret.src[0].device
  return (ctx if ctx.device is None or dev is None or ctx.device == dev else UOp(Ops.COPY, (ctx,), dev),)  # a constant lives everywhere

def _replicated(ctx: UOp, ret: UOp) -> tuple[UOp]:
  """REPLICATED collapses axes whose rows are equal copies (seed 001's broadcast) to one: each copy takes an equal share,
  so the gradient summed back over the copies is the gradient."""
  x = ret.src[0]
  return (_expand_to(ctx, x.shape) * (1 / math.prod(x.shape[a] for a in ret.arg)),)

def _function(ctx: UOp, ret: UOp, fn: UOp) -> tuple[UOp | None, ...]:
  """Through GETTUPLE(FUNCTION(TUPLE(body), args...), i): element i of the body with each PARAM k replaced by args[k] is
  the value, so its gradient w.r.t. each argument is what flows there. Returned per source of the FUNCTION (the body
  takes none); an argument given twice gets the sum once."""
  body, args = fn.src[0], fn.src[1:]
  value, bind = body.src[ret.arg], {}
  for u in value.toposort():
    if u.op is Ops.PARAM and isinstance(u.arg[0], int): bind[u] = args[u.arg[0]]
    if u.op in (Ops.FUNCTION, Ops.CALL): bind[u.src[0]] = u.src[0]  # a nested call's body keeps its own PARAMs (the same nodes)
  value = value.substitute(bind)
  grads, out, seen = compute_gradient(value, ctx, set(args)), [None], set()
  for a in args:
    out.append(None if a in seen else grads.get(a))
    seen.add(a)
  return tuple(out)

def _none(ret: UOp) -> tuple[None, ...]: return (None,) * len(ret.src)
def _div(a: UOp, b: UOp) -> UOp: return UOp(Ops.DIV, (a, b))

def _cos(x: UOp) -> UOp:
  """cos x for SIN's gradient: by the exact reduction (sin(x + pi/2) rounds x + pi/2 first, 0.1 off at 1e6 in float32)."""
  return T.sin_cos(x, 1) if x.dtype in (dtypes.float32, dtypes.float64) else UOp(Ops.SIN, (x + math.pi / 2,))

# comparisons, integer and bit ops, random bits: piecewise constant or not real-valued, so no gradient flows
_NO_GRADIENT = GroupOp.Comparison | {Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.NOT, Ops.THREEFRY, Ops.BITCAST}

pm_gradient = PatternMatcher([
  # elementwise
  (UPat(Ops.ADD), lambda ctx: (ctx, ctx)),                                                           # d(a+b) = (g, g)
  (UPat(Ops.MUL, name="ret"), lambda ctx, ret: (ctx * ret.src[1], ctx * ret.src[0])),                # d(ab) = (gb, ga)
  (UPat(Ops.MAX, name="ret"), _max),                                                                 # to the larger; ties halve
  (UPat(Ops.RECIP, name="ret"), lambda ctx, ret: (-ctx * ret * ret,)),                               # d(1/x) = -g/x^2
  (UPat(Ops.TRUNC), lambda ctx: (None,)),                                                            # zero almost everywhere
  (UPat(Ops.CAST, name="ret"), lambda ctx, ret: (ctx.cast(s.dtype) if dtypes.is_float((s := ret.src[0]).dtype) else None,)),  # cast back
  (UPat(_NO_GRADIENT, name="ret"), _none),                                                           # see _NO_GRADIENT
  (UPat(Ops.WHERE, name="ret"), lambda ctx, ret: (None, ret.src[0].where(ctx, 0.0), ret.src[0].where(0.0, ctx))),  # gate: none
  (UPat(Ops.NEG), lambda ctx: (-ctx,)),                                                              # d(-x) = -g
  (UPat(Ops.SUB), lambda ctx: (ctx, -ctx)),                                                          # d(a-b) = (g, -g)
  (UPat(Ops.DIV, name="ret"), lambda ctx, ret: (_div(ctx, ret.src[1]), -ctx * _div(ret, ret.src[1]))),  # (g/b, -g (a/b)/b), as PyTorch
  (UPat(Ops.MULACC, name="ret"), lambda ctx, ret: (ctx * ret.src[1], ctx * ret.src[0], ctx)),        # d(ab+c) = (gb, ga, g)
  (UPat(Ops.EXP2, name="ret"), lambda ctx, ret: (ctx * ret * _LN2,)),                                # d 2^x = g 2^x ln 2
  (UPat(Ops.LOG2, name="ret"), lambda ctx, ret: (ctx * ret.src[0].recip() * (1 / _LN2),)),           # d log2 x = g / (x ln 2)
  (UPat(Ops.SIN, name="ret"), lambda ctx, ret: (ctx * _cos(ret.src[0]),)),                         # d sin x = g cos x
  (UPat(Ops.SQRT, name="ret"), lambda ctx, ret: (ctx * ret.recip() * 0.5,)),                         # d sqrt x = g / (2 sqrt x)
  (UPat(Ops.POW, name="ret"), _pow),                                                                 # (g b a^(b-1), g a^b ln a)
  # movement: each undoes its op on g (the shape vectors get none)
  (UPat(Ops.RESHAPE, name="ret"), lambda ctx, ret: (ctx.reshape(ret.src[0].shape), None)),           # reshape back
  (UPat(Ops.EXPAND, name="ret"), _expand),                                                           # sum over the expanded axes
  (UPat(Ops.PERMUTE, name="ret"), lambda ctx, ret: (ctx.permute(sorted(range(ret.ndim), key=ret.arg.__getitem__)),)),  # inverse order
  (UPat(Ops.FLIP, name="ret"), lambda ctx, ret: (UOp(Ops.FLIP, (ctx,), ret.arg),)),                  # flip the same axes
  (UPat(Ops.PAD, name="ret"), lambda ctx, ret: (ctx.shrink(vec_values(ret.src[1]), ret.src[0].shape), None, None)),  # shrink
  (UPat(Ops.SHRINK, name="ret"), lambda ctx, ret: (ctx.pad(vec_values(ret.src[1]), ret.src[0].shape), None, None)),  # pad
  # reduce
  (UPat(Ops.REDUCE, name="ret"), _reduce),                                                           # ADD, MAX, MUL: see _reduce
  # markers, copies, calls
  (UPat(Ops.CONTIGUOUS), lambda ctx: (ctx,)),                                                        # passes through
  (UPat(Ops.CONTIGUOUSBACKWARD), lambda ctx: (UOp(Ops.CONTIGUOUS, (ctx,)),)),                        # the gradient made contiguous
  (UPat(Ops.DETACH), lambda ctx: (None,)),                                                           # stops here
  (UPat(Ops.COPY, name="ret"), _copy),                                                               # copied back to the source's device
  (UPat(Ops.REPLICATED, name="ret"), _replicated),                                                   # shared among the copies
  (UPat(Ops.GETTUPLE, src=(UPat(Ops.FUNCTION, name="fn"),), name="ret"), _function),                 # through the body, to the args
])


def _carries(u: UOp) -> bool:
  """Whether a gradient can flow through u: float values (an int or bool value has none) and calls, not DETACH."""
  return u.op is Ops.FUNCTION or (u.op is not Ops.DETACH and dtypes.is_float(u.dtype))

def grad_path(root: UOp, targets: set[UOp], topo: list[UOp] | None = None) -> set[UOp]:
  """The nodes under `root` (`topo`: its toposort, if at hand) through which a gradient reaches one of `targets` (the
  targets included)."""
  path: set[UOp] = set()
  for u in root.toposort() if topo is None else topo:
    if u in targets or (_carries(u) and any(s in path for s in u.src)): path.add(u)
  return path

def compute_gradient(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
  """The gradient of `root` (seeded with `root_grad`, of root's shape) w.r.t. each target it reaches, as a UOp of the
  target's shape. Only paths that reach a target are walked; a node used several times gets the sum of its users'
  gradients. Iterative (no recursion), so thousands-deep graphs are fine. A target that no gradient reaches is left out."""
  if root_grad.shape != root.shape: raise ValueError(f"compute_gradient: root_grad has shape {root_grad.shape}, the root {root.shape}")
  path = grad_path(root, targets, topo := root.toposort())
  grads: dict[UOp, UOp] = {root: root_grad} if root in path else {}
  for u in reversed(topo):
    if (g := grads.get(u)) is None: continue
    srcs = u.src[0].src if u.op is Ops.GETTUPLE else u.src  # a GETTUPLE's gradients go to its FUNCTION's sources
    if not any(s in path for s in srcs): continue  # a leaf (a target's BUFFER has a shape vector for a source)
    if (out := pm_gradient.rewrite(u, g)) is None: raise NotImplementedError(f"no gradient rule for {u.op.name} (shape {u.shape}, dtype {u.dtype})")
    for s, sg in zip(srcs, out, strict=True):
      if sg is None or s not in path: continue
      sg = _unbroadcast(sg, s.shape)
      grads[s] = grads[s] + sg if s in grads else sg
  return {t: grads[t] for t in targets if t in grads}
