"""Instruction selection: every decomposed op (seed 001's table) that the backend lacks becomes primitives, and every
vector load or store wider than the backend has is split (`devectorize`).

The tables are selected per op: `isel(root, native)` drops every rule whose op the backend has natively, so SQRT on a
backend with EXP2 and LOG2 becomes EXP2(LOG2(x) * 0.5) (and a Newton step) and stops there, and on one without them
goes on to polynomials."""
from __future__ import annotations

import functools
import math

from tinyspec.dtype import DType, dtypes
from tinyspec.engine import transcendental as T
from tinyspec.engine.expand import pm_lanes
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import Ops
from tinyspec.uop.rewrite import PatternMatcher, UPat, graph_rewrite
from tinyspec.uop.spec import lanes, vector_index
from tinyspec.uop.uop import UOp

a, b, c = UPat.var("a"), UPat.var("b"), UPat.var("c")
HALF, FLOAT = (dtypes.float16, dtypes.bfloat16), tuple(T.FORMATS)

def _u(op: Ops, *src: UOp) -> UOp: return UOp(op, src)
def _widen(u: UOp) -> UOp: return UOp(u.op, tuple(s.cast(dtypes.float32) for s in u.src)).cast(u.dtype)
def _sqrt(a: UOp, y: UOp) -> UOp:
  """One Newton step y + (a/y - y)/2 on y = exp2(log2(a) / 2), whose error grows with |log2 a| (the rounding of
  log2(a) / 2: tens of ulps at float32's extremes): the step squares that relative error away. +-0 is itself (IEEE's
  sqrt(-0.0) = -0.0), inf, nan and negative a keep y."""
  return ((a < math.inf) & (UOp.const(0.0, a.dtype) < a)).where(y + (a * y.recip() + -y) * 0.5, a.eq(0.0).where(a, y))

def _div(a: UOp, b: UOp) -> UOp:
  """a / b as a * recip(b), both scaled by 2**k first where |b| < 2**-k (recip(b) would overflow: 0 / 1e-40 would be
  0 * inf) or |b| > 2**k (recip(b) would be subnormal and lose bits), k half the exponent's range. Scaling by a power of
  two is exact, so this is the product's two roundings, as before, with no spurious inf, nan or lost digits; a native
  DIV is correctly rounded."""
  k = 2.0 ** ((T.FORMATS[a.dtype.scalar()][2] + 1) // 2)  # 2**64 for float32, 2**512 for float64
  tiny, huge = (b < 1 / k) & (-1 / k < b), (k < b) | (b < -k)  # false for nan: it passes through unscaled
  s = tiny.where(UOp.const(k, a.dtype), huge.where(UOp.const(1 / k, a.dtype), UOp.const(1.0, a.dtype)))
  return (a * s) * (b * s).recip()

# 16-bit floats compute in float32: their results round to 11 or 8 bits, which float32 arithmetic covers with room to spare
# (a half's reciprocal overflows for |b| < 2**-16, well inside its subnormals, so DIV widens too)
pm_widen_half = PatternMatcher([
  (UPat(op, HALF, name="u"), _widen) for op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.POW, Ops.DIV)  # f(x) -> half(f(float32(x)))
])

# the rows of seed 001's table; each result may hold other decomposed ops, which are rewritten in turn unless native
pm_decompose = PatternMatcher([
  (UPat(Ops.NEG, src=(a,)), lambda a: UOp(Ops.MUL, (a, UOp.const(-1, a.dtype)))),                    # -a -> a * -1
  (UPat(Ops.SUB, src=(a, b)), lambda a, b: a + _u(Ops.NEG, b)),                                      # a - b -> a + (-b)
  (UPat(Ops.DIV, src=(a, b)), _div),                                                                 # a / b -> a * recip(b), scaled
  (UPat(Ops.CMPGT, src=(a, b)), lambda a, b: b < a),                                                 # a > b -> b < a
  (UPat(Ops.CMPGE, src=(a, b)), lambda a, b: (a < b).ne(True)),                                      # a >= b -> (a < b) != 1
  (UPat(Ops.CMPLE, src=(a, b)), lambda a, b: (b < a).ne(True)),                                      # a <= b -> (b < a) != 1
  (UPat(Ops.CMPEQ, src=(a, b)), lambda a, b: a.ne(b).ne(True)),                                      # a == b -> (a != b) != 1
  (UPat(Ops.NOT, src=(a,)), lambda a: a.ne(1)),                                                      # not a -> a != 1
  (UPat(Ops.SQRT, src=(a,)), lambda a: _sqrt(a, _u(Ops.EXP2, _u(Ops.LOG2, a) * 0.5))),               # sqrt(a) -> exp2(log2(a) * 0.5), refined
  (UPat(Ops.MULACC, src=(a, b, c)), lambda a, b, c: a * b + c),                                      # mulacc(a, b, c) -> a * b + c
])

# exp's reduced argument, ((x + n * -hi) + n * -lo) * (1 / ln 2) (transcendental.exp), in [0, 1) but for rounding
_n = UPat.var("n")
EXP_REDUCED = (((UPat.var("x") + _n * UPat.cvar("hi")) + _n * UPat.cvar("lo")) * UPat.cvar("k")).named("f")

# x - x, which is +0 for a finite x and nan otherwise: Tensor.pow's exponent of its nan-slope factor, b - detach(b)
_x = UPat.var("x")
ZERO_OR_NAN = (_x + _x * -1).named("d")
def _pow_of_zero_or_nan(a: UOp, d: UOp) -> UOp:
  """a ** d for d = +0 or nan, as C99 has it: a ** 0 = 1 for every a (nan too), a ** nan = 1 for a = 1, else nan."""
  return (d.eq(0.0) | a.eq(1.0)).where(UOp.const(1.0, a.dtype), math.nan)

# range reduction and a power series (see transcendental.py); float32 and float64, after pm_widen_half took the 16-bit floats
pm_transcendental = PatternMatcher([
  (UPat(Ops.POW, FLOAT, (a, ZERO_OR_NAN)), lambda a, d, x: _pow_of_zero_or_nan(a, d)),  # a ** (x - x) -> 1 or nan
  (UPat(Ops.EXP2, FLOAT, (EXP_REDUCED,)), lambda f, hi, lo, k, x, n: T.exp2_of_reduced(f, hi, lo, k)),  # exp's 2**f -> poly(f) alone
  (UPat(Ops.EXP2, FLOAT, (a,)), lambda a: T.exp2(a)),                                                # 2**a -> 2**n * poly(r)
  (UPat(Ops.LOG2, FLOAT, (a,)), lambda a: T.log2(a)),                                                # log2(a) -> e + s * poly(s*s)
  (UPat(Ops.SIN, FLOAT, (a,)), lambda a: T.sin(a)),                                                  # sin(a) -> ±sin/cos poly(r)
  (UPat(Ops.POW, FLOAT, (a, b)), lambda a, b: T.pow(a, b)),                                          # a ** b -> 2**(b log2 a), split
])

_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)

def threefry(a: UOp, b: UOp) -> UOp:
  """Threefry-2x32, 20 rounds, in uint32 arithmetic: the counter a and the key b are uint64 pairs of words, low word first."""
  u32, u64 = dtypes.uint32, dtypes.uint64
  def words(v: UOp) -> tuple[UOp, UOp]: return v.cast(u32), (v >> 32).cast(u32)  # CAST to uint32 keeps the low word
  ks = words(b)
  ks = (*ks, ks[0] ^ ks[1] ^ 0x1BD11BDA)
  x0, x1 = words(a)
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for block in range(5):
    for r in _ROTATIONS[4 * (block % 2):4 * (block % 2) + 4]:
      x0 = x0 + x1
      x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
    x0, x1 = x0 + ks[(block + 1) % 3], x1 + ks[(block + 2) % 3] + (block + 1)  # key injection after every 4 rounds
  return (x1.cast(u64) << 32) | x0.cast(u64)

pm_threefry = PatternMatcher([
  (UPat(Ops.THREEFRY, src=(a, b)), threefry),                                                        # threefry(x, key) -> ARX rounds
])

pm_isel = pm_widen_half + pm_decompose + pm_transcendental + pm_threefry

@functools.cache
def decompositions(native: frozenset[Ops]) -> PatternMatcher:
  """The rules of `pm_isel` for the ops a backend lacks (compiled once per set of native ops)."""
  return PatternMatcher([(p, fn) for p, fn in pm_isel.rules if not (p.op & native)])

# ---- devectorize: vectors a device cannot load or store at once become narrower ones, or scalars ----

def divisible(idx: UOp, w: int) -> bool:
  """Whether the index expression `idx` is provably a multiple of w (from its constants; a range or a lane id may be anything)."""
  if idx.op is Ops.CONST: return idx.arg[0] % w == 0
  if idx.op is Ops.ADD: return all(divisible(s, w) for s in idx.src)
  if idx.op is Ops.MUL: return any(divisible(s, w) for s in idx.src)
  return False

def vector_width(renderer: Renderer, dt: DType, n: int, base: UOp) -> int:
  """The widest vector of `dt` the renderer reads or writes at once among n consecutive elements from index `base`."""
  if dt not in renderer.vector_dtypes: return 1
  fits = [w for w in renderer.vector_widths if n % w == 0 and (not renderer.vector_aligned or divisible(base, w))]
  return max(fits, default=1)

def _pieces(buf: UOp, base: UOp, n: int, w: int) -> list[UOp]:
  """The addresses of n consecutive elements from `base` in vectors of w (w == 1: single elements)."""
  def at(k: int) -> UOp: return base if k == 0 else UOp.const(base.arg[0] + k) if base.op is Ops.CONST else base + k
  return [buf.index(lanes(at(c * w), w) if w > 1 else at(c)) for c in range(n // w)]

def _narrow_load(ctx: Renderer, ld: UOp) -> UOp | None:
  if (vec := vector_index(ld.src[0].src[1])) is None: return None
  base, n = vec
  if (w := vector_width(ctx, ld.dtype, n, base)) == n: return None
  parts = [UOp(Ops.LOAD, (p,)) for p in _pieces(ld.src[0].src[0], base, n, w)]
  return UOp(Ops.STACK, tuple(parts[j // w].index(UOp.const(j % w)) if w > 1 else parts[j] for j in range(n)))

def _narrow_store(ctx: Renderer, st: UOp) -> UOp | None:
  if (vec := vector_index(st.src[0].src[1])) is None: return None
  base, n = vec
  if (w := vector_width(ctx, st.src[1].dtype, n, base)) == n: return None
  val = st.src[1]
  def lane(j: int) -> UOp: return val.src[j] if val.op is Ops.STACK else val.index(UOp.const(j))
  values = [UOp(Ops.STACK, tuple(lane(c * w + j) for j in range(w))) if w > 1 else lane(c) for c in range(n // w)]
  return UOp(Ops.GROUP, tuple(UOp(Ops.STORE, (p, v)) for p, v in zip(_pieces(st.src[0].src[0], base, n, w), values)))

pm_devectorize = PatternMatcher([
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX),), name="ld"), _narrow_load),                     # LOAD of n -> STACK of narrower LOADs' lanes
  (UPat(Ops.STORE, src=(UPat(Ops.INDEX), UPat()), name="st"), _narrow_store),            # STORE of n -> GROUP of narrower STOREs
]) + pm_lanes

def devectorize(kernel: UOp, renderer: Renderer) -> UOp:
  """Every vector load and store expand made, in the widths `renderer` has (`vector_width`): one it lacks is split into
  the widest it has that divides it, or into single elements."""
  return graph_rewrite(kernel, pm_devectorize, ctx=renderer)

def isel(root: UOp, native: frozenset[Ops] = frozenset()) -> UOp:
  """Rewrite every decomposed op (GroupOp.Decomposed) not in `native` into primitives (GroupOp.ALU ops, CAST, BITCAST,
  CONST ...). Other nodes pass through unchanged. ALU ops are always native; listing them changes nothing."""
  return graph_rewrite(root, decompositions(frozenset(native)))
