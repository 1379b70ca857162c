"""Differential fuzzing: seeded random Tensor programs run on the device and compared with numpy.

A case is a short random program (elementwise arithmetic, comparisons, where, casts and bitcasts, a few transcendentals,
the reductions sum max min prod mean argmax argmin any all over random axes with and without keepdim, the movement ops
reshape permute expand pad shrink flip, slicing and list indexing, cat, contiguous and realize midway, matmul) over
tensors of random shapes (0-d, size 0 and size 1 axes included), in a dtype the device declares, with operands of other
declared dtypes mixed in. It is generated together with its numpy reference, which follows tinyspec's dtype semantics
(PyTorch's promotion with weak Python scalars, integers wrapping around, bool and integer sums in int64, float16 and
bfloat16 computed in float32 and rounded after every op, floor division, float to int conversion as
`tinyspec.dtype.float_to_int`). Every computed value that nothing later reads is an output; the outputs are realized
together.

Every value of the reference is either exact, meaning every correct device computes the same bits (correctly rounded
elementwise ops on exact operands, and sums and products whose partial results are representable whatever the order, which
the generator checks from the values), or carries a bound on its error (divisions, transcendentals, mean over a count that
is not a power of two, sums that round): exact values compare bit for bit, the others within their bound. Ops that are
not continuous (comparisons, casts to int or bool, floor, sign, argmax...) are applied to exact values only, so a
comparison never flips on a rounding difference. Where partial sums or products may overflow, the order of the reduction
decides (inf * 0 is nan, 0 * inf after an underflow 0), and those results are not checked.

The default run has 20 cases per dtype (`test_fuzz[float16-7]` is dtype float16, seed 7); `-m slow` runs 2000 more
(`TINYSPEC_FUZZ_CASES` sets how many) with seeds from 1000, spread over the device's dtypes (154 each where it has all
13). A failure prints the seed and the program as runnable Python; `replay(device, dtype, seed)` runs one case again.
"""
from __future__ import annotations

import math
import os
import random
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance import TENSOR_DTYPES, Capabilities
from tinyspec.conformance.support import read, tensor
from tinyspec.dtype import DType, bf16_round, bf16_to_bits, float_to_int, least_upper_dtype, position_dtype, promoted_dtype, scalar_dtype

DEFAULT_CASES = 20  # per dtype: 260 cases where the device has all 13
SLOW_SEED = 1000    # the slow run's seeds start here, past the default run's
LIMIT = 2048        # the most elements a value of a program may have
F16, BF16, F32, F64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
EPS = {F16: 2.0 ** -11, BF16: 2.0 ** -8, F32: 2.0 ** -24, F64: 2.0 ** -53}  # unit roundoff
BITS = {F16: 11, BF16: 8, F32: 24, F64: 53}                                   # significand bits
TINY = {F16: 2.0 ** -24, BF16: 2.0 ** -133, F32: 2.0 ** -149, F64: 5e-324}    # the smallest subnormal
NORMAL = {F16: 2.0 ** -14, BF16: 2.0 ** -126, F32: 2.0 ** -126, F64: 2.0 ** -1022}
FMAX = {F16: 65504.0, BF16: 3.3895313892515355e38, F32: 3.4028234663852886e38, F64: 1.7976931348623157e308}

def isf(dt: DType) -> bool: return dtypes.is_float(dt)
def npdt(dt: DType) -> np.dtype: return np.dtype(np.float32) if dt == BF16 else dt.np

# ---- the test data ----

def leaf_values(dt: DType, shape: tuple[int, ...], seed: int, kind: str = "any") -> np.ndarray:
  """The values of a program's input: small ints (sometimes the dtype's extremes), floats on a grid of 1/4 (times 1/8 or
  32 sometimes, with infinities, nan and -0.0 sometimes). kind "divisor": no zeros (and no -1, which overflows INT_MIN // -1)."""
  g = np.random.default_rng(seed)
  if dt == dtypes.bool: return np.ones(shape, bool) if kind == "divisor" else g.random(shape) < 0.5
  if dtypes.is_int(dt):
    if kind == "divisor":
      v = g.integers(2, 9, shape, endpoint=True)
      return (v * np.where(g.random(shape) < 0.5, -1, 1) if dt.min else v).astype(dt.np)
    v = (g.integers(0, 12, shape, endpoint=True) if dtypes.is_unsigned(dt) else g.integers(-8, 8, shape, endpoint=True)).astype(dt.np)
    if g.random() < 0.2:  # extremes: the arithmetic on them wraps around
      extremes = np.array([dt.min, dt.max, dt.max - 1, 0, 1] + ([-1, dt.min + 1] if dt.min else []), dt.np)
      v = np.where(g.random(shape) < 0.3, extremes[g.integers(0, len(extremes), shape)], v)
    return np.asarray(v, dt.np)
  if kind == "divisor": v = g.integers(1, 32, shape, endpoint=True) * np.where(g.random(shape) < 0.5, -0.25, 0.25)
  else: v = g.integers(-32, 32, shape, endpoint=True) * 0.25 * [1.0, 1.0, 1.0, 1.0, 0.125, 32.0][g.integers(0, 6)]
  if kind != "divisor" and g.random() < 0.15:
    special = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0])
    v = np.where(g.random(shape) < 0.2, special[g.integers(0, len(special), shape)], v)
  v = np.asarray(v, np.float64)
  return bf16_round(v) if dt == BF16 else v.astype(dt.np)

def leaf(device: str, dtype: str, shape: tuple[int, ...], seed: int, kind: str = "any") -> Tensor:
  """A program's input: `leaf_values` on `device` (what the printed programs call)."""
  dt = dtypes.from_name(dtype)
  return tensor(leaf_values(dt, shape, seed, kind), dt, device)

# ---- the reference: values in the dtype, and which are exact ----

@dataclass
class Ref:
  """A value of the numpy reference: `v` in the dtype's numpy dtype (float32 holding bfloat16), and `err` None where every
  correct device computes exactly v, else a bound on |device - v| for each element (float64)."""
  v: np.ndarray
  dt: DType
  err: np.ndarray | None = None
  def __post_init__(self):
    self.v = np.asarray(self.v)  # numpy gives 0-d results as scalars
    if self.err is not None: self.err = np.asarray(self.err, np.float64)
  @property
  def shape(self) -> tuple[int, ...]: return self.v.shape
  @property
  def exact(self) -> bool: return self.err is None
  def e(self) -> np.ndarray: return np.zeros(self.shape) if self.err is None else self.err
  def f64(self) -> np.ndarray: return self.v.astype(np.float64)
  def map(self, f) -> Ref:
    """A movement: the same function of the values and of their errors."""
    return Ref(np.array(f(self.v)), self.dt, None if self.err is None else np.array(f(self.err)))  # copies (0-d stays 0-d)

def rnd(x: np.ndarray, dt: DType) -> np.ndarray:
  """float64 (or float32) values rounded once to float dtype dt."""
  with np.errstate(all="ignore"): return bf16_round(x) if dt == BF16 else np.asarray(x).astype(dt.np)

def fcompute(f, dt: DType, *xs: np.ndarray) -> np.ndarray:
  """f of float values in dt as the devices compute it: float32 for the half types (then rounded), else the dtype itself."""
  work = np.float64 if dt == F64 else np.float32
  with np.errstate(all="ignore"): out = f(*(np.asarray(x, work) for x in xs))
  return rnd(out, dt) if dt in (F16, BF16) else np.asarray(out, work)

def with_rounding(out: np.ndarray, prop: np.ndarray, dt: DType, ulps: float = 2) -> np.ndarray:
  """An error bound: the propagated error `prop`, plus `ulps` roundings of the result (the device's and the reference's)."""
  with np.errstate(all="ignore"): return prop + ulps * EPS[dt] * (np.abs(out.astype(np.float64)) + prop) + 2 * TINY[dt]

def cast(r: Ref, to: DType) -> Ref:
  """r converted as tinyspec's CAST does: ints wrap, floats to ints as float_to_int, anything to bool is != 0. To an int or
  bool it needs an exact float (the generator checks)."""
  if to == r.dt: return r
  src, v = r.dt, r.v
  with np.errstate(all="ignore"):
    if to == dtypes.bool: return Ref(v != 0, to)
    if dtypes.is_int(to): return Ref(float_to_int(v, to.np) if isf(src) else v.astype(to.np), to)
    if not isf(src):
      big = np.abs(v.astype(np.float64)).max(initial=0) if v.size else 0
      out = rnd(v.astype(np.float64), to) if to != F64 else v.astype(np.float64)
      # up to 2**24 int to float is one rounding on every path; past it the devices may round twice (int to float32 to half)
      return Ref(out, to) if big <= 2 ** 24 or (to == F64 and big <= 2 ** 53) else Ref(out, to, with_rounding(out, np.zeros(v.shape), to, 3))
    out = rnd(v.astype(np.float64), to)
    if BITS[to] >= BITS[src] and FMAX[to] >= FMAX[src]: return Ref(out, to, r.err)  # widening: exact
    single = src != F64 or to == F32 or bool(np.all((v.astype(np.float32).astype(np.float64) == v) | np.isnan(v)))
    if r.exact and single: return Ref(out, to)  # one rounding, as every device does it
    return Ref(out, to, with_rounding(out, r.e(), to, 3))

def const(v: Any, dt: DType) -> Ref:
  """A Python scalar as a 0-d value of dt (UOp.const converts as a cast would)."""
  src = Ref(np.array(v), dtypes.bool if isinstance(v, bool) else dtypes.int64 if isinstance(v, int) else F64)
  return cast(src, dt)

def promote(a: Ref | Any, b: Ref | Any) -> tuple[Ref, Ref]:
  """a and b (Refs or Python scalars, not both scalars) in their common dtype, broadcast to one shape."""
  if not isinstance(a, Ref): b2, a2 = promote(b, a); return a2, b2
  dt = promoted_dtype(a.dt, b.dt, a.v.ndim == 0, b.v.ndim == 0) if isinstance(b, Ref) else scalar_dtype(a.dt, b)
  a, b = cast(a, dt), cast(b, dt) if isinstance(b, Ref) else const(b, dt)
  shape = np.broadcast_shapes(a.shape, b.shape)
  return a.map(lambda x: np.broadcast_to(x, shape)), b.map(lambda x: np.broadcast_to(x, shape))

CMP = {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal}
INT_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.remainder, "maximum": np.maximum,
           "minimum": np.minimum, "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor, "<<": np.left_shift, ">>": np.right_shift}
BOOL_OPS = {"+": np.logical_or, "*": np.logical_and, "maximum": np.logical_or, "minimum": np.logical_and, "&": np.logical_and,
            "|": np.logical_or, "^": np.logical_xor}

def binop(op: str, a: Ref, b: Ref) -> Ref:
  """a op b for a and b of one dtype and shape, as tinyspec computes it."""
  dt, ea, eb = a.dt, a.e(), b.e()
  if op in CMP: return Ref(CMP[op](a.v, b.v), dtypes.bool)
  with np.errstate(all="ignore"):
    if dt == dtypes.bool: return Ref(BOOL_OPS[op](a.v, b.v), dt)
    if not isf(dt): return Ref(INT_OPS[op](a.v, b.v).astype(dt.np), dt)
    av, bv = np.abs(a.f64()), np.abs(b.f64())
    if op == "/":  # x * RECIP(y): two roundings, and RECIP may be an approximation within a few ulps (OpenCL's)
      r = fcompute(lambda y: 1 / y, dt, b.v)
      out = fcompute(np.multiply, dt, a.v, r)
      er = np.where(bv > eb, eb / (bv * np.maximum(bv - eb, 0)), np.inf) + 4 * EPS[dt] * np.abs(r.astype(np.float64))
      return Ref(out, dt, with_rounding(out, av * er + np.abs(r.astype(np.float64)) * ea + ea * er, dt))
    f = {"+": np.add, "-": np.subtract, "*": np.multiply, "maximum": np.maximum, "minimum": np.minimum}[op]
    out = fcompute(f, dt, a.v, b.v)
    if a.exact and b.exact: return Ref(out, dt)
    prop = av * eb + bv * ea + ea * eb if op == "*" else np.maximum(ea, eb) if op in ("maximum", "minimum") else ea + eb
    return Ref(out, dt, with_rounding(out, prop, dt))

def where(c: Ref, x: Ref, y: Ref) -> Ref:
  """c ? x : y, all three broadcast (c cast to bool: exact)."""
  shape = np.broadcast_shapes(c.shape, x.shape, y.shape)
  c, x, y = (r.map(lambda v: np.broadcast_to(v, shape)) for r in (cast(c, dtypes.bool), x, y))
  return Ref(np.where(c.v, x.v, y.v), x.dt, None if x.exact and y.exact else np.where(c.v, x.e(), y.e()))

def exact_sum(x: np.ndarray, axes: tuple[int, ...], p: int, fmax: float) -> bool:
  """Whether every partial sum of the groups (in any order) is representable with p significand bits: all are multiples
  of the smallest lowest set bit q among the values and below the groups' sums of magnitudes."""
  fin = np.isfinite(x)
  nz = fin & (x != 0)
  if not nz.any(): return True
  low = lowbit(x[nz]).min()
  s = np.sum(np.where(fin, np.abs(x), 0), axis=axes).max()
  return bool(s * (1 + 2 ** -40) < min(math.ldexp(1.0, p + int(low)), fmax))

def lowbit(x: np.ndarray) -> np.ndarray:
  """The exponent of the lowest set bit of each finite nonzero float."""
  m, e = np.frexp(x)
  n = np.abs(np.ldexp(m, 53)).astype(np.int64)
  return e - 53 + (np.frexp((n & -n).astype(np.float64))[1] - 1)

def sigbits(x: np.ndarray) -> np.ndarray:
  """The significant bits of each float (highest to lowest set bit); 0 for zeros, infinities and nan."""
  nz = np.isfinite(x) & (x != 0)
  y = np.where(nz, x, 1.0)
  return np.where(nz, np.frexp(y)[1] - lowbit(y), 0)

def exact_prod(x: np.ndarray, axes: tuple[int, ...], dt: DType) -> bool:
  """Whether every partial product of the groups is exact: their significant bits fit, and nothing overflows or goes subnormal."""
  nz = np.isfinite(x) & (x != 0)
  ax = np.log2(np.where(nz, np.abs(x), 1.0))
  if not nz.any(): return True
  fits = np.sum(np.where(nz, sigbits(x), 0), axis=axes).max() <= BITS[dt]
  return bool(fits and np.sum(np.maximum(ax, 0), axis=axes).max() < math.log2(FMAX[dt]) - 1
              and np.sum(np.minimum(ax, 0), axis=axes).min() > math.log2(NORMAL[dt]) + 1)

def axes_of(ndim: int, axis: Any) -> tuple[int, ...]:
  if ndim == 0: return ()
  if axis is None: return tuple(range(ndim))
  return tuple(sorted(a % ndim for a in (axis if isinstance(axis, tuple) else (axis,))))

def fold(op: str, r: Ref, axes: tuple[int, ...], keepdim: bool, acc: DType | None = None) -> Ref:
  """sum ("+") or prod ("*") over axes as tinyspec's sum/prod: bool and ints in int64 (uint64 stays), float16 and bfloat16
  accumulating in float32, or in `acc` (what matmul passes)."""
  dt = r.dt
  if acc is None: acc = dtypes.int64 if dt == dtypes.bool or (dtypes.is_int(dt) and dt != dtypes.uint64) else dt
  r = cast(r, acc)
  if not axes: return r
  work = F32 if acc in (F16, BF16) else acc
  if not isf(acc):
    f = np.sum if op == "+" else np.prod
    with np.errstate(all="ignore"): return Ref(f(r.v, axis=axes, keepdims=keepdim, dtype=acc.np), acc)
  x, e = r.f64(), r.e()
  n = math.prod(x.shape[a] for a in axes)
  with np.errstate(all="ignore"):
    mag = np.where(np.isfinite(x), np.abs(x) + e, 0)
    if op == "+":
      out = rnd(np.sum(x, axis=axes, keepdims=keepdim), work)
      ok = exact_sum(x, axes, BITS[work], FMAX[work])
      prop = np.sum(e, axis=axes, keepdims=keepdim) + n * EPS[work] * np.sum(np.abs(x) + e, axis=axes, keepdims=keepdim)
      wild = np.sum(mag, axis=axes, keepdims=keepdim) >= FMAX[work] / 2
    else:
      out = rnd(np.prod(x, axis=axes, keepdims=keepdim), work)
      ok = exact_prod(x, axes, work)
      hi = np.prod(np.abs(x) + e, axis=axes, keepdims=keepdim)
      prop = hi - np.prod(np.abs(x), axis=axes, keepdims=keepdim) + 2 * n * EPS[work] * hi
      lg = np.log2(np.where(mag > 0, mag, 1.0))
      wild = (np.sum(np.maximum(lg, 0), axis=axes, keepdims=keepdim) >= math.log2(FMAX[work]) - 1) | \
             (np.sum(np.minimum(lg, 0), axis=axes, keepdims=keepdim) <= math.log2(NORMAL[work]) + 1)
    # where a partial result may overflow (or a product go subnormal), the order decides: inf * 0 is nan one way, 0 the
    # other. Such groups are not checked (an infinite bound)
    prop = np.where(wild, np.inf, prop)
  res = Ref(out, work) if ok and r.exact else Ref(out, work, with_rounding(out, prop, work))
  return cast(res, acc)

def extreme(op: str, r: Ref, axes: tuple[int, ...], keepdim: bool) -> Ref:
  """max or min over axes (never empty ones)."""
  if not axes: return r
  f = np.max if op == "max" else np.min
  return Ref(f(r.v, axis=axes, keepdims=keepdim), r.dt, None if r.exact else np.max(r.err, axis=axes, keepdims=keepdim))

def mean(r: Ref, axes: tuple[int, ...], keepdim: bool) -> Ref:
  """sum / n in the float dtype (ints: float32; halves accumulate in float32), as x * RECIP(n)."""
  x = r if isf(r.dt) else cast(r, F32)
  acc = F32 if x.dt in (F16, BF16) else x.dt
  s = fold("+", cast(x, acc), axes, keepdim)
  n = math.prod(r.shape[a] for a in axes)
  with np.errstate(all="ignore"):
    inv = fcompute(lambda c: 1 / c, acc, np.array(float(n)))
    out = fcompute(np.multiply, acc, s.v, inv)
  exact = s.exact and (n == 0 or n & (n - 1) == 0)
  res = Ref(out, acc) if exact else Ref(out, acc, with_rounding(out, s.e() * float(inv) + 4 * EPS[acc] * np.abs(out.astype(np.float64)), acc))
  return cast(res, x.dt)

def transcendental(name: str, r: Ref) -> Ref:
  """sqrt, exp, log, sin of a float value: computed in float64 and rounded to the dtype, which the devices match within a
  few ulps (float16 and bfloat16 compute in float32 and round once)."""
  dt, v, e = r.dt, r.f64(), r.e()
  with np.errstate(all="ignore"):
    if name == "sqrt": ref, prop = np.sqrt(v), np.sqrt(e)  # |sqrt(a) - sqrt(b)| <= sqrt(|a - b|)
    elif name == "exp": ref = np.exp(v); prop = ref * np.expm1(e)
    elif name == "log": ref, prop = np.log(v), np.where(v > e, e / (v - e), np.inf)
    else: ref, prop = np.sin(v), e
    out = rnd(ref, dt)
    # relative ulps, and for log near 1 and sin near its zeros a few ulps of 1
    return Ref(out, dt, with_rounding(out, prop + 8 * EPS[dt] * (np.abs(ref) + (name in ("log", "sin"))), dt))

# ---- the generator ----

@dataclass
class Program:
  """A random program and its reference, from (dtype, seed) and the dtypes the device declares."""
  dt: DType
  seed: int
  supported: frozenset[DType]
  lines: list[str] = field(default_factory=list)
  refs: dict[str, Ref] = field(default_factory=dict)
  outputs: list[str] = field(default_factory=list)
  used: set[str] = field(default_factory=set)        # the values later lines read
  computed: list[str] = field(default_factory=list)  # the values that are not inputs

  def __post_init__(self):
    self.rng = random.Random(f"{self.dt.name}-{self.seed}")
    self.build()

  # -- building blocks --
  def new(self, expr: str, ref: Ref) -> str:
    name = f"t{len(self.refs)}"
    self.lines.append(f"{name} = {expr}")
    self.used.update(re.findall(r"\bt\d+\b", expr))
    if not expr.startswith("leaf("): self.computed.append(name)
    self.refs[name] = ref
    return name
  def chance(self, p: float) -> bool: return self.rng.random() < p
  def other_dtype(self) -> DType:
    """Another dtype, drawn from all of them (so programs agree across devices) and replaced by the case's where the device lacks it."""
    d = self.rng.choice(TENSOR_DTYPES)
    return d if d in self.supported else self.dt
  def shape(self) -> tuple[int, ...]:
    nd = self.rng.choices(range(5), weights=[1, 3, 4, 3, 1])[0]
    s = [self.rng.choices([0, 1, 2, 3, 4, 5, 7, 8], weights=[0.4, 2, 2, 2, 1.5, 1, 1, 0.6])[0] for _ in range(nd)]
    if nd and self.chance(0.1): s[self.rng.randrange(nd)] = self.rng.choice([16, 17, 33, 64, 100])
    if nd and self.chance(0.03): s[self.rng.randrange(nd)] = self.rng.choice([1025, 1500, 2048])  # float sums past 1024 split into blocks
    while math.prod(s) > LIMIT: s[s.index(max(s))] //= 2
    return tuple(s)
  def related(self, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with `shape`: leading axes dropped or added, some axes 1, size-1 axes grown."""
    drop = self.rng.randint(0, len(shape)) if self.chance(0.3) else 0
    s = [1 if self.chance(0.3) else (self.rng.choice([2, 3]) if d == 1 and self.chance(0.3) else d) for d in shape[drop:]]
    if not drop and self.chance(0.15): s.insert(0, self.rng.choice([1, 2, 3]))
    return tuple(s)
  def leaf(self, shape: tuple[int, ...], dt: DType | None = None, kind: str = "any") -> str:
    dt, seed = dt or self.dt, self.rng.getrandbits(31)
    return self.new(f"leaf(dev, {dt.name!r}, {shape!r}, {seed}{'' if kind == 'any' else f', {kind!r}'})", Ref(leaf_values(dt, shape, seed, kind), dt))
  def pick(self, ok=lambda r: True) -> str | None:
    names = [n for n, r in self.refs.items() if ok(r)]
    return None if not names else names[-1] if self.chance(0.5) else self.rng.choice(names)
  def operand(self, x: str, exact: bool = False, kind: str = "any") -> str:
    """Another tensor that broadcasts with x: an earlier value or a new input."""
    shape = self.refs[x].shape
    def fits(r: Ref) -> bool:
      try: return math.prod(np.broadcast_shapes(r.shape, shape)) <= LIMIT and (r.exact or not exact)
      except ValueError: return False
    if kind == "any" and self.chance(0.4) and (y := self.pick(fits)) is not None: return y
    return self.leaf(self.related(shape), self.dt if self.chance(0.6) else self.other_dtype(), kind)
  def scalar(self, dt: DType) -> bool | int | float:
    kind = self.rng.choice(["bool", "int", "int", "float", "float"])
    if kind == "bool": return self.chance(0.5)
    if kind == "int": return self.rng.choice([0, 1, 2, 3, -1, -3, 5, 7, 100, 300])
    return self.rng.choice([0.5, -1.25, 2.0, 3.0, -0.75, 0.0, -0.0, 1.5])

  # -- the program --
  def build(self) -> None:
    self.leaf(self.shape())
    for _ in range(self.rng.randint(3, 8)):
      for _ in range(20):
        x = self.pick()
        family = self.rng.choices([self.binary, self.compare, self.where_, self.cast_, self.unary, self.reduce, self.movement, self.matmul],
                                  weights=[6, 2, 1.5, 2, 3, 3.5, 5, 1.2])[0]
        if family(x): break
    # every computed value that nothing reads is an output (the last four), so no op goes unchecked; realized together
    self.outputs = [n for n in self.computed if n not in self.used][-4:] or [list(self.refs)[-1]]

  def binary(self, x: str) -> bool:
    r = self.refs[x]
    op = self.rng.choices(["+", "-", "*", "/", "maximum", "minimum", "//", "%", "&", "|", "^", "<<", ">>", "**"],
                          weights=[4, 3, 4, 2, 1.5, 1.5, 1.5, 1.5, 1, 1, 1, 1, 1, 1])[0]
    if op in ("<<", ">>"):
      if not dtypes.is_int(r.dt): return False
      k = self.rng.randrange(8 * r.dt.itemsize)
      a, b = promote(r, k)
      self.new(f"{x} {op} {k}", binop(op, a, b))
      return True
    if op == "**":
      k = self.rng.choice([2, 3, 2.0])
      base = cast(r, scalar_dtype(r.dt, k))  # a bool base takes the default int or float
      sq = binop("*", base, base)
      self.new(f"{x} ** {k!r}", sq if k != 3 else binop("*", base, sq))
      return True
    if op in ("//", "%"):
      y = self.rng.choice([2, 3, 5, 7, -2, -3, -7]) if self.chance(0.5) else self.operand(x, kind="divisor")
      a, b = promote(r, self.refs[y] if isinstance(y, str) else y)
      if not dtypes.is_int(a.dt) or a.dt == dtypes.bool or np.any(b.v == 0) or (a.dt.min and np.any(b.v == -1)): return False
      self.new(f"{x} {op} {y}", binop(op, a, b))
      return True
    if op == "/":
      if self.chance(0.3):  # s / x: x must not be near 0
        s = self.rng.choice([1, 3, -2.5])
        xf = r if isf(r.dt) else cast(r, F32)
        if np.any(np.abs(xf.f64()) <= 2 * xf.e()) or np.any(xf.v == 0): return False
        b, a = promote(xf, s)
        self.new(f"{s!r} / {x}", binop("/", a, b))
        return True
      y = self.rng.choice([2, 3, -4, 0.5, -1.5]) if self.chance(0.4) else self.operand(x, kind="divisor" if self.chance(0.7) else "any")
      if isinstance(y, str):
        a, b = promote(r, self.refs[y])
        if not isf(a.dt): a, b = cast(a, F32), cast(b, F32)
      else: a, b = promote(r if isf(r.dt) else cast(r, F32), y)
      if np.any(np.abs(b.f64()) <= 2 * b.e()) or np.any(b.v == 0): return False
      self.new(f"{x} / {y}", binop("/", a, b))
      return True
    y = self.scalar(r.dt) if self.chance(0.3) else self.operand(x)
    ry = self.refs[y] if isinstance(y, str) else y
    a, b = promote(r, ry)
    if op in "&|^" and isf(a.dt): return False
    if op == "-" and dtypes.bool in (r.dt, ry.dt if isinstance(ry, Ref) else dtypes.bool if isinstance(ry, bool) else None): return False
    if math.prod(a.shape) > LIMIT: return False
    if op in ("maximum", "minimum"):
      self.new(f"{x}.{op}({y!r})" if not isinstance(y, str) else f"{x}.{op}({y})", binop(op, a, b))
    elif self.chance(0.3):  # the reflected form: y op x
      self.new(f"{y if isinstance(y, str) else repr(y)} {op} {x}", binop(op, b, a))
    else: self.new(f"{x} {op} {y if isinstance(y, str) else repr(y)}", binop(op, a, b))
    return True

  def compare(self, x: str) -> bool:
    r = self.refs[x]
    op = self.rng.choice(list(CMP))
    y = self.scalar(r.dt) if self.chance(0.4) else self.operand(x, exact=True)
    a, b = promote(r, self.refs[y] if isinstance(y, str) else y)
    if not (a.exact and b.exact) or math.prod(a.shape) > LIMIT: return False
    self.new(f"{x} {op} {y if isinstance(y, str) else repr(y)}", binop(op, a, b))
    return True

  def where_(self, x: str) -> bool:
    r = self.refs[x]
    c = x if r.exact and self.chance(0.5) else self.operand(x, exact=True)
    if not self.refs[c].exact: return False
    vals = [self.scalar(r.dt) if self.chance(0.35) else None for _ in range(2)]
    names = [repr(v) if v is not None else (x if i == 0 else self.operand(x)) for i, v in enumerate(vals)]
    if vals[0] is None and vals[1] is None: a, b = promote(self.refs[names[0]], self.refs[names[1]])
    elif vals[0] is None: a, b = promote(self.refs[names[0]], vals[1])
    elif vals[1] is None: a, b = promote(vals[0], self.refs[names[1]])
    else:
      dt = least_upper_dtype(*(dtypes.from_py(v) for v in vals))
      a, b = const(vals[0], dt), const(vals[1], dt)
    try: shape = np.broadcast_shapes(self.refs[c].shape, a.shape)
    except ValueError: return False
    if math.prod(shape) > LIMIT: return False
    self.new(f"{c}.where({names[0]}, {names[1]})", where(self.refs[c], a, b))
    return True

  def cast_(self, x: str) -> bool:
    r, to = self.refs[x], self.other_dtype()
    if self.chance(0.2):  # bitcast to an int of the same size: from an exact float only without zeros (their sign may differ) or nan
      ints = [d for d in TENSOR_DTYPES if dtypes.is_int(d) and d.itemsize == r.dt.itemsize and d in self.supported and d != r.dt]
      if r.dt == dtypes.bool or not ints or (isf(r.dt) and (not r.exact or np.any(r.v == 0) or np.any(np.isnan(r.v)))): return False
      to = self.rng.choice(ints)
      bits = bf16_to_bits(r.v) if r.dt == BF16 else r.v
      self.new(f"{x}.bitcast(dtypes.{to.name})", Ref(np.array(bits).view(to.np), to))
      return True
    if isf(r.dt) and not isf(to) and not r.exact: return False
    self.new(f"{x}.cast(dtypes.{to.name})", cast(r, to))
    return True

  def unary(self, x: str) -> bool:
    r = self.refs[x]
    op = self.rng.choice(["neg", "abs", "sign", "floor", "ceil", "round", "trunc", "relu", "logical_not", "~", "clamp", "sqrt", "exp", "log",
                          "sin", "reciprocal"])
    fl, b = isf(r.dt), r.dt == dtypes.bool
    if op in ("sign", "floor", "ceil", "round", "trunc", "logical_not") and not r.exact: return False
    if (op in ("neg", "relu", "clamp") and b) or (op == "~" and fl): return False
    if op == "neg": self.new(f"-{x}", Ref(np.negative(r.v), r.dt, r.err)); return True  # unsigned ints wrap around
    if op == "abs": self.new(f"{x}.abs()", Ref(np.abs(r.v), r.dt, r.err) if not b else r); return True
    if op == "sign":  # nan's sign is 0, PyTorch's (numpy's is nan)
      self.new(f"{x}.sign()", Ref(np.nan_to_num(np.sign(r.v), nan=0.0).astype(r.v.dtype), r.dt) if not b else r); return True
    if op in ("floor", "ceil", "round", "trunc"):
      f = {"floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc}[op]
      self.new(f"{x}.{op}()", Ref(f(r.v).astype(r.v.dtype), r.dt) if fl else r)
      return True
    if op == "relu":
      self.new(f"{x}.relu()", Ref(np.where(r.v <= 0, np.zeros((), r.v.dtype), r.v), r.dt, r.err))
      return True
    if op == "logical_not": self.new(f"{x}.logical_not()", Ref(~cast(r, dtypes.bool).v, dtypes.bool)); return True
    if op == "~": self.new(f"~{x}", Ref(~r.v, r.dt)); return True
    if op == "clamp":
      lo, hi = self.rng.choice([-2, -1.5, 0, None]), self.rng.choice([3, 2.5, 0.5, None])
      if lo is None and hi is None: return False
      out = r
      for bound, keep in ((lo, np.greater_equal), (hi, np.less_equal)):
        if bound is None: continue
        a, c = promote(out, bound)
        # a nan stays: the comparison with it is false
        out = Ref(np.where(keep(a.v, c.v) | np.isnan(a.v.astype(np.float64)), a.v, c.v), a.dt, a.err)
      self.new(f"{x}.clamp({lo!r}, {hi!r})", out)
      return True
    def to_float(r: Ref) -> Ref: return r if isf(r.dt) else cast(r, F32)  # _math: ints and bool compute in the default float
    if op == "reciprocal":
      xf = to_float(r)
      if np.any(np.abs(xf.f64()) <= 2 * xf.e()) or np.any(xf.v == 0): return False
      self.new(f"{x}.reciprocal()", binop("/", const(1, xf.dt).map(lambda v: np.broadcast_to(v, xf.shape)), xf))
      return True
    if op in ("sqrt", "log"):  # on |x| (and |x| + 1), built in x's dtype: abs of the most negative int is itself, and + 1 may wrap
      a = Ref(np.abs(r.v), r.dt, r.err) if not b else r
      if op == "log": a = binop("+", *promote(a, 1))
      self.new(f"{x}.abs().sqrt()" if op == "sqrt" else f"({x}.abs() + 1).log()", transcendental(op, to_float(a)))
      return True
    xf = to_float(r)
    finite = np.isfinite(xf.f64()) & np.isfinite(xf.e())
    if op == "exp" and not np.all(~finite | (np.abs(xf.f64()) + xf.e() <= 10)): return False
    if op == "sin" and not np.all(~finite | (np.abs(xf.f64()) <= 64)): return False
    self.new(f"{x}.{op}()", transcendental(op, xf))
    return True

  def reduce(self, x: str) -> bool:
    r = self.refs[x]
    op = self.rng.choices(["sum", "max", "min", "prod", "mean", "argmax", "argmin", "any", "all"], weights=[4, 2, 2, 1.5, 2, 1, 1, 0.7, 0.7])[0]
    nd, keepdim = len(r.shape), self.chance(0.5)
    if op in ("argmax", "argmin"):
      axis = None if nd == 0 or self.chance(0.3) else self.rng.randrange(-nd, nd)
    elif nd == 0: axis = self.rng.choice([None, 0, -1])
    else:
      k = self.rng.random()
      axis = None if k < 0.25 else self.rng.randrange(-nd, nd) if k < 0.65 else \
        tuple(self.rng.sample(range(nd), self.rng.randint(1, nd)))
    axes = axes_of(nd, axis)
    if op in ("max", "min", "argmax", "argmin") and any(r.shape[a] == 0 for a in (range(nd) if axis is None else axes)): return False
    if op in ("argmax", "argmin", "any", "all") and not r.exact: return False
    call = f"{x}.{op}({axis!r}, keepdim={keepdim})"
    if op in ("sum", "prod"): self.new(call, fold("+" if op == "sum" else "*", r, axes, keepdim))
    elif op in ("max", "min"):
      self.new(call, cast(extreme(op, cast(r, dtypes.uint8), axes, keepdim), dtypes.bool) if r.dt == dtypes.bool else extreme(op, r, axes, keepdim))
    elif op == "mean": self.new(call, mean(r, axes, keepdim))
    elif op in ("any", "all"):
      b = cast(r, dtypes.bool).v
      self.new(call, Ref((np.any if op == "any" else np.all)(b, axis=axes, keepdims=keepdim), dtypes.bool))
    else:
      f = np.argmax if op == "argmax" else np.argmin
      if nd == 0: out = np.array(0)
      elif axis is None: out = np.array(f(r.v)).reshape((1,) * nd if keepdim else ())
      else: out = f(r.v, axis=axis, keepdims=keepdim)
      dt = position_dtype(math.prod(r.shape) if axis is None else r.shape[axis])  # the default int
      self.new(call, Ref(np.asarray(out).astype(dt.np), dt))
    return True

  def movement(self, x: str) -> bool:
    r = self.refs[x]
    shape, nd, n = r.shape, len(r.shape), math.prod(r.shape)
    op = self.rng.choice(["reshape", "permute", "expand", "pad", "shrink", "flip", "getitem", "getitem", "transpose", "contiguous", "realize",
                          "unsqueeze", "squeeze", "cat"])
    if op == "reshape":
      new = self.factor(n)
      text = list(new)
      if n and new and self.chance(0.3): text[self.rng.randrange(len(new))] = -1
      self.new(f"{x}.reshape({tuple(text)!r})", r.map(lambda v: v.reshape(new)))
    elif op == "permute" and nd >= 2:
      order = list(range(nd))
      self.rng.shuffle(order)
      text = tuple(o - nd if self.chance(0.2) else o for o in order)
      self.new(f"{x}.permute({text!r})", r.map(lambda v: np.transpose(v, order)))
    elif op == "transpose" and nd >= 2:
      if self.chance(0.3): self.new(f"{x}.T", r.map(lambda v: np.transpose(v)))
      else:
        d0, d1 = self.rng.sample(range(nd), 2)
        self.new(f"{x}.transpose({d0}, {d1})", r.map(lambda v: np.swapaxes(v, d0, d1)))
    elif op == "expand":
      lead = [self.rng.choice([1, 2, 3]) for _ in range(self.rng.choice([0, 0, 1]))]
      new = lead + [(self.rng.choices([0, 2, 3, 4], weights=[0.2, 1, 1, 1])[0] if self.chance(0.6) else 1) if s == 1 else s for s in shape]
      if math.prod(new) > LIMIT or tuple(new) == shape: return False
      text = [-1 if i >= len(lead) and s == shape[i - len(lead)] and self.chance(0.3) else s for i, s in enumerate(new)]
      self.new(f"{x}.expand({tuple(text)!r})", r.map(lambda v: np.broadcast_to(v, tuple(new))))
    elif op == "pad" and nd:
      pairs = [(self.rng.choice([0, 0, 1, 2, -1]), self.rng.choice([0, 0, 1, 3, -1])) for _ in shape]
      pairs = [(b, a) if s + min(b, 0) + min(a, 0) >= 0 else (0, 0) for (b, a), s in zip(pairs, shape)]
      if all(p == (0, 0) for p in pairs): return False
      new = [s + b + a for s, (b, a) in zip(shape, pairs)]
      if math.prod(new) > LIMIT: return False
      value = self.rng.choice([0.0, 0.0, 0.0, 1.0, -1.0, 2.5, -0.0])
      fill = const(value, r.dt).v
      def pad(v, f):
        v = v[tuple(slice(-min(b, 0), s + min(a, 0)) for s, (b, a) in zip(shape, pairs))]
        return np.pad(v, [(max(b, 0), max(a, 0)) for b, a in pairs], constant_values=f)
      if self.chance(0.4):  # PyTorch's flat form: (before, after) pairs from the last axis backwards
        first = min(i for i, p in enumerate(pairs) if p != (0, 0))
        text = f"{x}.pad({tuple(v for p in reversed(pairs[first:]) for v in p)!r}, value={value!r})"
      else: text = f"{x}.pad({tuple(None if p == (0, 0) and self.chance(0.5) else p for p in pairs)!r}, value={value!r})"
      self.new(text, Ref(pad(r.v, fill), r.dt, None if r.exact else pad(r.err, 0.0)))
    elif op == "shrink" and nd:
      arg = []
      for s in shape:
        b = self.rng.randint(0, s)
        arg.append(None if self.chance(0.3) else (b, self.rng.randint(b, s)))
      sl = tuple(slice(0, s) if a is None else slice(*a) for a, s in zip(arg, shape))
      self.new(f"{x}.shrink({tuple(arg)!r})", r.map(lambda v: v[sl]))
    elif op == "flip" and nd:
      axes = tuple(self.rng.sample(range(nd), self.rng.randint(1, nd)))
      text = axes[0] if len(axes) == 1 and self.chance(0.5) else tuple(a - nd if self.chance(0.3) else a for a in axes)
      self.new(f"{x}.flip({text!r})", r.map(lambda v: np.flip(v, axes)))
    elif op == "getitem" and nd: return self.getitem(x)
    elif op == "contiguous": self.new(f"{x}.contiguous()", r)
    elif op == "realize": self.new(f"{x}.realize()", r)  # computed now: what follows reads its buffer
    elif op == "unsqueeze":
      d = self.rng.randint(-nd - 1, nd)
      self.new(f"{x}.unsqueeze({d})", r.map(lambda v: np.expand_dims(v, d)))
    elif op == "squeeze" and 1 in shape:
      self.new(f"{x}.squeeze()", r.map(lambda v: v.reshape(tuple(s for s in shape if s != 1))))
    elif op == "cat" and nd:
      d = self.rng.randrange(nd)
      other = list(shape)
      other[d] = self.rng.choice([0, 1, 2, 3])
      if math.prod(shape) + math.prod(other) > LIMIT: return False
      y = self.leaf(tuple(other), self.dt if self.chance(0.6) else self.other_dtype())
      a, b = cast(r, least_upper_dtype(r.dt, self.refs[y].dt)), cast(self.refs[y], least_upper_dtype(r.dt, self.refs[y].dt))
      err = None if a.exact and b.exact else np.concatenate([a.e(), b.e()], d)
      # cat adds zero-padded pieces: -0.0 + 0.0 is 0.0, which compares equal
      self.new(f"{x}.cat({y}, dim={d - nd if self.chance(0.3) else d})", Ref(np.concatenate([a.v, b.v], d), a.dt, err))
    else: return False
    return True

  def factor(self, n: int) -> tuple[int, ...]:
    """A random shape of n elements."""
    if n == 0:
      s = [self.rng.choice([1, 2, 3]) for _ in range(self.rng.randint(0, 2))]
      s.insert(self.rng.randint(0, len(s)), 0)
      return tuple(s)
    primes, m, p = [], n, 2
    while m > 1:
      while m % p == 0: primes.append(p); m //= p
      p += 1
    dims = [1] * self.rng.randint(1, 4)
    for q in primes: dims[self.rng.randrange(len(dims))] *= q
    if self.chance(0.2): dims.insert(self.rng.randint(0, len(dims)), 1)
    return tuple(dims)

  def getitem(self, x: str) -> bool:
    r = self.refs[x]
    shape, idx, text = r.shape, [], []
    use = self.rng.randint(1, len(shape))
    listed = self.chance(0.15)  # one list index, with slices only (PyTorch and numpy agree on where its axis goes then)
    back = use < len(shape) and not listed and self.chance(0.2)  # x[..., i, j]: the last axes
    if back: idx.append(Ellipsis); text.append("...")
    list_axis = self.rng.randrange(use) if listed else -1
    for i, s in enumerate(shape[len(shape) - use:] if back else shape[:use]):
      if i == list_axis:
        if s == 0: return False
        lst = [self.rng.randrange(-s, s) for _ in range(self.rng.randint(1, 3))]
        idx.append(lst); text.append(repr(lst))
      elif not listed and s and self.chance(0.25):
        k = self.rng.randrange(-s, s)
        idx.append(k); text.append(str(k))
      else:
        step = self.rng.choice([None, None, 1, 2, 3, -1, -2])
        start, stop = (self.rng.choice([None, self.rng.randint(-s - 1, s + 1)]) for _ in range(2))
        idx.append(slice(start, stop, step))
        text.append(("" if start is None else str(start)) + ":" + ("" if stop is None else str(stop)) + ("" if step is None else f":{step}"))
      if self.chance(0.1) and not listed: idx.append(None); text.append("None")
    self.new(f"{x}[{', '.join(text)}]", r.map(lambda v: v[tuple(idx)]))
    return True

  def matmul(self, x: str) -> bool:
    r = self.refs[x]
    if not 1 <= len(r.shape) <= 3: return False
    k, m = r.shape[-1], self.rng.choice([0, 1, 2, 3, 5, 7])
    wshape = self.rng.choices([(k,), (k, m), ((r.shape[0] if len(r.shape) == 3 else self.rng.choice([1, 2])), k, m)], weights=[1, 3, 1])[0]
    rows = r.shape[-2] if len(r.shape) > 1 else 1
    batch = r.shape[0] if len(r.shape) == 3 else wshape[0] if len(wshape) == 3 else 1
    if batch * rows * k * max(m, 1) > 8 * LIMIT or batch * rows * m > LIMIT: return False
    w = self.leaf(wshape, self.dt if self.chance(0.7) else self.other_dtype())
    self.new(f"{x} @ {w}", self.matmul_ref(r, self.refs[w]))
    return True

  @staticmethod
  def matmul_ref(x: Ref, w: Ref) -> Ref:
    """As NNMixin.matmul: x[..., n, k, 1] * w[..., 1, k, m] summed over k in the product's own dtype (bool as int32, then any)."""
    dt = least_upper_dtype(x.dt, w.dt)
    x, w = cast(x, dt), cast(w, dt)
    k = x.shape[-1]
    def keep(p: Ref, ax: int) -> Ref:
      s = fold("+", p, (ax,), True, dtypes.int32 if dt == dtypes.bool else dt if not isf(dt) else None)
      return cast(s, dt)
    if len(w.shape) == 1:
      a, b = promote(x, w)
      return keep(binop("*", a, b), len(x.shape) - 1).map(lambda v: v.reshape(x.shape[:-1]))
    xr = x.map(lambda v: v.reshape(*x.shape[:-1], k, 1))
    wr = w.map(lambda v: v.reshape(*w.shape[:-2], 1, k, w.shape[-1]))
    a, b = promote(xr, wr)
    s = keep(binop("*", a, b), len(a.shape) - 2)
    batch = np.broadcast_shapes(x.shape[:-2] if len(x.shape) > 1 else (), w.shape[:-2])
    return s.map(lambda v: v.reshape(*batch, *(x.shape[-2:-1] if len(x.shape) > 1 else ()), w.shape[-1]))

  # -- reporting --
  def text(self, device: str) -> str:
    """The program as Python that runs on its own."""
    head = ["from tinyspec import Tensor, dtypes", "from tinyspec.conformance.test_fuzz import leaf", f"dev = {device!r}"]
    return "\n".join([*head, *self.lines, f"# outputs: {', '.join(self.outputs)}, realized together"])

def compare(got: np.ndarray, ref: Ref) -> str | None:
  """None where got matches the reference (exactly, or within its error bound), else what differs."""
  want = ref.v
  if got.shape != want.shape: return f"shape {got.shape}, expected {want.shape}"
  if ref.exact or not isf(ref.dt):
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)) if isf(ref.dt) else got == want)
    tol = None
  else:
    g, w = got.astype(np.float64), want.astype(np.float64)
    tol = 2 * ref.err + TINY[ref.dt]
    with np.errstate(invalid="ignore"): bad = np.isfinite(tol) & np.isfinite(w) & ~(np.abs(g - w) <= tol)
  if not bad.any(): return None
  i = tuple(int(j) for j in np.argwhere(bad)[0])
  how = "exactly" if tol is None else f"within {tol[i]:.3g}"
  return f"{int(bad.sum())} of {bad.size} values differ; first at index {i}: got {got[i]!r}, want {want[i]!r} ({how})"

def run_case(device: str, dt: DType, seed: int, supported: frozenset[DType], perturb: bool = False) -> Program:
  """Generate case (dt, seed), run it on `device` and compare; AssertionError naming the seed and the program if it differs.
  `perturb` moves one expected value by an ulp (or one) first: the case must then fail (the fuzzer's own test)."""
  p = Program(dt, seed, frozenset(supported))
  def fail(why: str) -> AssertionError:
    how = (f'pytest --pyargs tinyspec.conformance --tinyspec-device={device} -k "test_fuzz[{dt.name}-{seed}]"' if seed < DEFAULT_CASES
           else f"python -c \"from tinyspec.conformance.test_fuzz import replay; replay('{device}', '{dt.name}', {seed})\"")
    return AssertionError(f"fuzz case {dt.name}-{seed} on {device}: {why}\nreplay: {how}\nthe program:\n{p.text(device)}")
  ns: dict[str, Any] = {"Tensor": Tensor, "dtypes": dtypes, "leaf": leaf, "dev": device}
  try:
    exec("\n".join(p.lines), ns)
    outs = [ns[name] for name in p.outputs]
    outs[0].realize(*outs[1:])
    got = [read(t) for t in outs]
  except Exception as e: raise fail(f"raised {type(e).__name__}: {e}") from e
  for name, t, g in zip(p.outputs, outs, got):
    ref = p.refs[name]
    if perturb: ref = nudged(ref)
    if t.dtype != ref.dt: raise fail(f"{name} has dtype {t.dtype}, expected {ref.dt}")
    if (why := compare(g, ref)) is not None: raise fail(f"{name}: {why}")
  return p

def nudged(r: Ref) -> Ref:
  """r with its first value moved to the next one up in its dtype (the next bfloat16; True and False swapped)."""
  v = r.v.copy().reshape(-1)
  if r.dt == BF16: v[0] = bf16_round(np.float64(v[0]) + max(abs(float(v[0])) * 2 ** -7, 2 ** -133))
  elif isf(r.dt): v[0] = np.nextafter(v[0], np.array(np.inf, v.dtype))
  else: v[0] = ~v[0] if r.dt == dtypes.bool else v[0] + np.array(1, v.dtype)
  return Ref(v.reshape(r.shape), r.dt, r.err)

def replay(device: str, dtype: str, seed: int) -> None:
  """Run one case again (prints its program): replay("CPU", "float16", 1017)."""
  dt = dtypes.from_name(dtype)
  p = run_case(device, dt, seed, Capabilities.of(device).dtypes)
  print(p.text(device), "\npassed")

# ---- the tests ----

IDS = [d.name for d in TENSOR_DTYPES]

@pytest.mark.parametrize("seed", range(DEFAULT_CASES))
@pytest.mark.parametrize("dt", TENSOR_DTYPES, ids=IDS)
def test_fuzz(dev, caps, dt, seed):
  caps.require_dtype(dt)
  run_case(dev, dt, seed, caps.dtypes)

@pytest.mark.slow
@pytest.mark.parametrize("dt", TENSOR_DTYPES, ids=IDS)
def test_fuzz_slow(request, dev, caps, dt):
  """TINYSPEC_FUZZ_CASES cases (2000 by default) spread over the device's dtypes; only with -m slow."""
  if "slow" not in (request.config.getoption("markexpr") or "") or "not slow" in request.config.getoption("markexpr"):
    pytest.skip("slow: the fuzzer's long run; select it with -m slow")
  caps.require_dtype(dt)
  n = math.ceil(int(os.environ.get("TINYSPEC_FUZZ_CASES", "2000")) / len(caps.dtypes))
  failures = []
  for seed in range(SLOW_SEED, SLOW_SEED + n):
    try: run_case(dev, dt, seed, caps.dtypes)
    except AssertionError as e: failures.append(str(e))
  assert not failures, f"{len(failures)} of {n} {dt.name} cases failed:\n\n" + "\n\n".join(failures[:5])

def test_a_wrong_reference_fails(dev, caps):
  """The fuzzer can fail: with one expected value moved by an ulp, exact cases report it (naming the seed and program)."""
  caps.require_dtype(dtypes.float32)
  def suits(p: Program) -> bool:
    r = p.refs[p.outputs[0]]
    return r.exact and r.v.size > 0 and bool(np.isfinite(r.v.reshape(-1)[0].astype(np.float64)))
  seeds = [s for s in range(40) if suits(Program(F32, s, caps.dtypes))]
  for seed in seeds[:2]:
    with pytest.raises(AssertionError, match=rf"fuzz case float32-{seed} on .*values differ.*\nreplay: .*\nthe program:\nfrom tinyspec"):
      run_case(dev, F32, seed, caps.dtypes, perturb=True)

# ---- what the fuzzer found, kept as plain tests ----

def test_reading_through_a_size_0_axis(dev, caps):
  """Found as int16-1131 (slow run): through a size-0 axis a buffer's index folds to a constant (flat // 0 is 0), the load
  then depends on no loop and ran once before the zero-trip loops, reading index 0 of a 0-element buffer (IndexError on
  PYTHON, out of bounds elsewhere). rangeify now reads nothing from an empty buffer."""
  caps.require_dtype(F32)
  x = 3 / tensor(np.zeros((7, 0), np.float32), F32, dev)
  y = x.T.expand((3, 0, 7)).reshape((3, 0))
  np.testing.assert_array_equal(y.sum(-1).numpy(), np.zeros(3, np.float32))
  assert (y + 1).numpy().shape == (3, 0)

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int16, dtypes.int64], ids=lambda d: d.name)
def test_bitcast_of_a_constant(dev, caps, dt):
  """Found as int8-12 on OPENCL: a bitcast of a constant rendered as as_uchar(0), whose int literal has the wrong size (OpenCL
  and Metal refused to compile it)."""
  to = {dtypes.int8: dtypes.uint8, dtypes.int16: dtypes.uint16, dtypes.int64: dtypes.uint64}[dt]
  caps.require_dtype(dt, to)
  got = Tensor.full((4,), -5, dtype=dt, device=dev).bitcast(to).numpy()
  np.testing.assert_array_equal(got, np.full(4, -5, dt.np).view(to.np))
  assert tensor(np.zeros((3, 0, 2), dt.np), dt, dev).bitcast(to).numpy().shape == (3, 0, 2)

def test_negative_ints_widened_to_unsigned_then_to_float(dev, caps):
  """Found as int32-30864 on CPU: the mean of int32 values cast to uint64 was half numpy's: the sum lost 2**64. LLVM
  22's SLP vectorizer narrowed uitofp(sext i32 x to i64) to x's 32 bits; the LLVM renderer now avoids that uitofp."""
  caps.require_dtype(dtypes.int32, dtypes.uint64, F32)
  x = np.array([[0, 1, 6, 8, -1, -6, 2]], np.int32)
  want = x.astype(np.uint64).astype(np.float64).mean(1, keepdims=True)
  np.testing.assert_allclose(tensor(x, dtypes.int32, dev).cast(dtypes.uint64).mean((1,), keepdim=True).numpy(), want, rtol=1e-6)

def test_multiples_of_a_wrapped_product(dev, caps):
  """Found as uint64-50322 on OPENCL, wrong on every device: -x in uint64 is x * (2**64 - 1), whose coefficient is a
  multiple of 3 and 5, so the simplifier folded (-x) % 3 to 0 though the product wraps."""
  caps.require_dtype(dtypes.uint64)
  x = np.array([7, 6, 6, 252], np.uint64)
  for d in (3, 5):
    np.testing.assert_array_equal((-tensor(x, dtypes.uint64, dev) % d).numpy(), (np.uint64(0) - x) % np.uint64(d))

def test_a_product_of_means(dev, caps):
  """Found as uint16-100633 on CPU: the product of 64 means of min(x, 1), each a sum times 1/7, was nan: LLVM, allowed to
  reassociate the product, moved the 1/7 out of it, so the sums' product overflowed and (1/7)**64 underflowed."""
  caps.require_dtype(dtypes.uint16, F32)
  x = np.random.default_rng(100633).integers(0, 3, (7, 64)).astype(np.uint16)
  want = np.prod(np.minimum(x, 1).astype(np.float64).mean(0))
  np.testing.assert_allclose(tensor(x, dtypes.uint16, dev).minimum(True).mean(0).prod().numpy(), want, rtol=1e-5)

@pytest.mark.parametrize("dt", [dtypes.float16, F32], ids=lambda d: d.name)
def test_infinities_and_nan_survive_a_compiler_that_assumes_none(dev, caps, dt):
  """Found as float16-722795, -723125 and -723862 on WEBGPU: WGSL lets a compiler assume no infinity or nan, and lavapipe
  did: x - x (x + x * -1.0) gave 0 for an infinite x, min(nan, x) gave x in f16, and for a bool it proved false (x < x),
  cast to 0.0, it folded 0 * inf to 0. The WGSL renderer now writes -1.0 and a bool's 0.0 through an opaque zero, as it
  did 0.0, and does f16 arithmetic in f32."""
  caps.require_dtype(dt)
  x = np.array([np.inf, -np.inf, 2.0, np.nan], dt.np)
  t = tensor(x, dt, dev)
  with np.errstate(invalid="ignore"):
    np.testing.assert_array_equal((t - t).numpy(), x - x)
    np.testing.assert_array_equal(t.minimum(tensor(np.full(4, 0.5, dt.np), dt, dev)).numpy(), np.minimum(x, np.array(0.5, dt.np)))
    np.testing.assert_array_equal(((t < t).cast(dt) * t).numpy(), (x < x).astype(dt.np) * x)
