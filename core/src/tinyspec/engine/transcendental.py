"""EXP2, LOG2 and SIN as graphs of primitive UOps, for float32 and float64 (isel widens float16 and bfloat16 to float32 first).

Each function reduces its argument to a small interval and evaluates a power series there. The coefficients are the
Taylor (or atanh) series' own, computed here from their formulas, and each series is cut where the next term is below a
quarter ulp of the format on the reduced interval, so the error is the few ulps of the float arithmetic itself."""
from __future__ import annotations

import math
from collections.abc import Callable

from tinyspec.dtype import DType, dtypes
from tinyspec.uop.ops import Ops
from tinyspec.uop.uop import UOp

# per float format: the integer type of its width, its mantissa bits and its exponent bias
FORMATS: dict[DType, tuple[DType, int, int]] = {dtypes.float32: (dtypes.int32, 23, 127), dtypes.float64: (dtypes.int64, 52, 1023)}

def series(term: Callable[[int], float], bound: float, bits: int) -> list[float]:
  """Coefficients term(0), term(1), ... of a power series in v, |v| <= bound, while a term can reach 2**-bits."""
  coeffs: list[float] = []
  while abs(c := term(len(coeffs))) * bound ** len(coeffs) >= 2.0 ** -bits: coeffs.append(c)
  return coeffs

def poly(v: UOp, coeffs: list[float]) -> UOp:
  """coeffs[0] + coeffs[1]*v + coeffs[2]*v**2 + ... by Horner's rule."""
  acc = UOp.const(coeffs[-1], v.dtype)
  for c in reversed(coeffs[:-1]): acc = acc * v + c
  return acc

def _c(v, dt: DType) -> UOp: return UOp.const(v, dt)
def _trunc(x: UOp) -> UOp: return UOp(Ops.TRUNC, (x,))
def _round(x: UOp) -> UOp: return _trunc(x + (x < 0).where(_c(-0.5, x.dtype), _c(0.5, x.dtype)))  # ties away from zero: fine for every caller

# ---- exp2 ----

def _pow2(n: UOp, dt: DType) -> UOp:
  """2**n for an integer n in the normal exponent range: n + bias written into the exponent field."""
  _, mant, bias = FORMATS[dt]
  return ((n + bias) << mant).bitcast(dt)

def exp2(x: UOp) -> UOp:
  """2**x as 2**n * 2**r with n = round(x) and |r| <= 1/2, 2**r by the series of exp(r ln 2)."""
  dt, (it, mant, bias) = x.dtype, FORMATS[x.dtype]
  lim = bias + mant + 2  # past +-lim 2**x is inf or rounds to 0; and lim/2 stays in the normal exponent range
  xc = (x < -lim).where(-lim, (x > lim).where(lim, x))  # nan compares false and stays
  n = _round(xc)
  p = poly(xc - n, series(lambda k: math.log(2) ** k / math.factorial(k), 0.5, mant + 2))
  ni = n.cast(it)
  half = ni >> 1  # 2**n in two factors, so that a result in the subnormal range (or past the largest float) is rounded only once
  return x.ne(x).where(x, p * _pow2(half, dt) * _pow2(ni - half, dt))

# ---- log2 ----

_SQRT2 = math.sqrt(2)

def log2(x: UOp) -> UOp:
  """log2(x) = e + log2(m) with x = m * 2**e and m in [sqrt(1/2), sqrt(2)); log2(m) from the atanh series of s = (m-1)/(m+1)."""
  dt, (it, mant, bias) = x.dtype, FORMATS[x.dtype]
  tiny = x < 2.0 ** (1 - bias)  # a subnormal has no implicit leading bit: scale it into the normal range first
  bits = tiny.where(x * 2.0 ** 64, x).bitcast(it)
  e = (bits >> mant) - tiny.where(_c(bias + 64, it), _c(bias, it))
  m = ((bits & (2 ** mant - 1)) | (bias << mant)).bitcast(dt)  # the mantissa with a zero exponent: m in [1, 2)
  big = m > _SQRT2
  m, e = big.where(m * 0.5, m), big.where(e + 1, e)
  s = (m + -1.0) * (m + 1.0).recip()
  smax = (_SQRT2 - 1) / (_SQRT2 + 1)
  # ln(m) = 2 atanh(s) = 2 (s + s**3/3 + s**5/5 + ...), scaled by 1/ln 2 into log2
  out = e.cast(dt) + s * poly(s * s, series(lambda k: 2 / ((2 * k + 1) * math.log(2)), smax * smax, mant + 2))
  bad = x.ne(x) | (x < 0)
  return bad.where(math.nan, x.eq(0.0).where(-math.inf, x.eq(math.inf).where(math.inf, out)))

# ---- sin ----

def _pi_fixed(bits: int) -> int:
  """floor(pi * 2**bits), give or take one, from Machin's formula pi = 16 atan(1/5) - 4 atan(1/239) in integers."""
  one = 1 << (bits + 20)  # 20 guard bits absorb the truncation of every series term
  def atan_inv(n: int) -> int:
    total, power, k = 0, one // n, 0
    while power: total, power, k = total + (-1) ** k * (power // (2 * k + 1)), power // (n * n), k + 1
    return total
  return (16 * atan_inv(5) - 4 * atan_inv(239)) >> 20

INV_PI_BITS = 1152  # past the last bit the largest float64 exponent reads (word 34)
_PI_BITS = INV_PI_BITS + 64
_PI = _pi_fixed(_PI_BITS)
INV_PI = (1 << (INV_PI_BITS + _PI_BITS)) // _PI  # floor(2**1152 / pi): pi's error is far below this one's last bit

def _sin_poly(r: UOp) -> UOp:
  """sin(r) for |r| <= pi/2 by its Taylor series."""
  mant = FORMATS[r.dtype][1]
  return r * poly(r * r, series(lambda k: (-1) ** k / math.factorial(2 * k + 1), (math.pi / 2) ** 2, mant + 2))

def _inv_pi_bits(j: int, nbits: int) -> int:
  """The nbits bits of 1/pi that end at bit 32j + 32 after the binary point (zeros before the point: 1/pi < 1)."""
  return (INV_PI >> (INV_PI_BITS - 32 * (j + 1))) & ((1 << nbits) - 1)

def _select(q: UOp, table: dict[int, int], dt: DType) -> UOp:
  """table[q] for q among the table's keys, as a chain of WHEREs (the last key is the default)."""
  *rest, last = sorted(table)
  out = _c(table[last], dt)
  for k in reversed(rest): out = q.ne(k).where(out, _c(table[k], dt))
  return out

def _mulhi(m: UOp, g: UOp) -> UOp:
  """floor(m * g / 2**64) for uint64 m and g, from four 32x32-bit products that uint64 holds exactly."""
  m1, m0, g1, g0 = m >> 32, m & 0xFFFFFFFF, g >> 32, g & 0xFFFFFFFF
  mid1, mid0 = m1 * g0, m0 * g1
  carry = ((mid1 & 0xFFFFFFFF) + (mid0 & 0xFFFFFFFF) + ((m0 * g0) >> 32)) >> 32
  return m1 * g1 + (mid1 >> 32) + (mid0 >> 32) + carry

def _reduce_pi(abits: UOp, dt: DType) -> tuple[UOp, UOp]:
  """(r, n odd) with |x| = n pi + r and |r| <= pi/2, for |x| >= 1.5 given by its bits (Payne-Hanek): exact for every finite x.

  |x| = M * 2**E with M the integer mantissa. In M * 2**E / pi mod 2 the bits of 1/pi worth 2**-E * 2 or more add even
  integers only, so it needs just the bits from there to 127 past the point: G = floor(2**s / pi) mod 2**128, s = E + 127.
  Then M * G mod 2**128 is |x| / pi mod 2 in fixed point: its bit 127 is the parity of n, the bits below it r / pi."""
  _, mant, bias = FORMATS[dt]
  u64, shift = dtypes.uint64, 127 - bias - mant
  m = ((abits & (2 ** mant - 1)) | (1 << mant)).cast(u64)
  s = (abits >> mant) + shift
  q, o = s >> 5, (s & 31).cast(u64)  # s = 32q + o (shift and mask: floor division also for the negative s of small x, masked later)
  qs = range((bias + shift) >> 5, ((2 * bias + 1 + shift) >> 5) + 1)  # q from 1.5's biased exponent (bias) to inf's (2 bias + 1)
  pair = {k: _select(q, {j: _inv_pi_bits(j + k, 64) for j in qs}, u64) for k in (-3, -1)}  # 64 bits ending at word q + k
  word = _select(q, {j: _inv_pi_bits(j, 32) for j in qs}, u64)
  g_hi = (pair[-3] << o) | ((pair[-1] >> 32) >> (32 - o))  # G's two 64-bit halves: 128 bits ending o bits into word q
  g_lo = (pair[-1] << o) | (word >> (32 - o))
  t = m * g_hi + _mulhi(m, g_lo) + (1 << 62)  # the top half of M * G mod 2**128, plus a half so bit 63 is round(t)'s parity
  frac = ((t & ((1 << 63) - 1)).cast(dtypes.int64) - (1 << 62)).cast(dt)  # t - round(t) in [-1/2, 1/2), times 2**63
  frac = frac + (m * g_lo).cast(dt) * 2.0 ** -64  # the bottom half: the bits that matter where |x| is close to a multiple of pi
  return frac * (math.pi * 2.0 ** -63), (t >> 63).ne(0)

def _pi_parts(nparts: int, bits: int) -> list[float]:
  """pi as a sum of floats: the first nparts - 1 have `bits` significant bits (so small integers times them are exact), the last holds the rest."""
  pi, total = _PI, _PI_BITS
  parts, shift = [], pi.bit_length() - bits
  for _ in range(nparts - 1):
    parts.append(math.ldexp(pi >> shift, shift - total))
    pi, shift = pi & ((1 << shift) - 1), shift - bits
  return parts + [math.ldexp(pi >> (shift + bits - 53), shift + bits - 53 - total)]

# n < 2**42 in two 21-bit halves times 32-bit parts of pi: every product is exact, and so are the subtractions until r is small
CW_HALF_BITS, CW_PI_PARTS = 21, _pi_parts(4, 32)
CW_LIMIT = 2.0 ** (2 * CW_HALF_BITS) * 3  # a bound on |x| that keeps round(|x| / pi) below 2**42

def _reduce_cody_waite(a: UOp) -> tuple[UOp, UOp]:
  """(r, n odd) with a = n pi + r, |r| <= pi/2, for float64 0 <= a < CW_LIMIT (Cody-Waite): r to a few ulp of itself,
  also where a is close to a multiple of pi, which the 127 fixed-point bits of _reduce_pi cannot resolve in float64."""
  n = _round(a * (1 / math.pi))
  nh = _trunc(n * 2.0 ** -CW_HALF_BITS) * 2.0 ** CW_HALF_BITS
  nl, r = n - nh, a
  for c in CW_PI_PARTS[:-1]: r = (r + nh * -c) + nl * -c
  return r + n * -CW_PI_PARTS[-1], (n - _trunc(n * 0.5) * 2.0).ne(0.0)

def sin(x: UOp) -> UOp:
  """sin(x) = (-1)**n sin(x - n pi), n = round(x / pi), with an exact reduction and sin's Taylor series on [-pi/2, pi/2]."""
  dt, it = x.dtype, FORMATS[x.dtype][0]
  bits = x.bitcast(it)
  abits = bits & (2 ** (8 * dt.itemsize - 1) - 1)
  a = abits.bitcast(dt)
  r, odd = _reduce_pi(abits, dt)
  small = a < 1.5  # below pi/2 the reduction is the identity, which also keeps full relative precision for tiny x
  r, odd = small.where(a, r), small.where(False, odd)
  if dt == dtypes.float64:
    rc, oddc = _reduce_cody_waite(a)
    r, odd = (a < CW_LIMIT).where(rc, r), (a < CW_LIMIT).where(oddc, odd)
  y = _sin_poly(r)
  flip = (bits < 0) ^ odd  # sin(-x) = -sin(x) (by the sign bit, so -0.0 stays -0.0); sin(r + n pi) = (-1)**n sin(r)
  return (a < math.inf).where(flip.where(-y, y), math.nan)
