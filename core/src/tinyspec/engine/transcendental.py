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

def _trunc(x: UOp) -> UOp: return UOp(Ops.TRUNC, (x,))
def _round(x: UOp) -> UOp: return _trunc(x + (x < 0).where(_c(-0.5, x.dtype), _c(0.5, x.dtype)))  # ties away from zero: fine for every caller
def _c(v, dt: DType) -> UOp: return UOp.const(v, dt)

# ---- exp2 ----

def _pow2(n: UOp, dt: DType) -> UOp:
  """2**n for an integer n in the normal exponent range: n + bias written into the exponent field."""
  _, mant, bias = FORMATS[dt]
  return ((n + bias) << mant).bitcast(dt)

def exp2(x: UOp) -> UOp:
  """2**x as 2**n * 2**r with n = round(x) and |r| <= 1/2, 2**r by the series of exp(r ln 2)."""
  dt, (it, mant, bias) = x.dtype, FORMATS[x.dtype]
  lim = bias + mant + 2  # 2**x is inf above lim and rounds to 0 below -lim; lim/2 stays in the normal exponent range
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

_PI_BITS = 320
_PI = _pi_fixed(_PI_BITS)
INV_PI_BITS = 224
INV_PI = (1 << (INV_PI_BITS + _PI_BITS)) // _PI  # floor(2**224 / pi): pi's error is far below this one's last bit

def _sin_poly(r: UOp) -> UOp:
  """sin(r) for |r| <= pi/2 by its Taylor series."""
  mant = FORMATS[r.dtype][1]
  return r * poly(r * r, series(lambda k: (-1) ** k / math.factorial(2 * k + 1), (math.pi / 2) ** 2, mant + 2))

def _inv_pi_word(i: int) -> int:
  """Bits 32i+1 .. 32i+32 after the binary point of 1/pi (0 for i < 0: 1/pi has no bits before the point)."""
  return (INV_PI >> (INV_PI_BITS - 32 * (i + 1))) & 0xFFFFFFFF if i >= 0 else 0

def _select(q: UOp, table: dict[int, int], dt: DType) -> UOp:
  """table[q] for q among the table's keys, as a chain of WHEREs (the last key is the default)."""
  *rest, last = sorted(table)
  out = _c(table[last], dt)
  for k in reversed(rest): out = q.ne(k).where(out, _c(table[k], dt))
  return out

def _sin_f32(x: UOp) -> UOp:
  """float32 sin with an exact argument reduction (Payne-Hanek): x/pi mod 2 computed from x's integer mantissa and the
  bits of 1/pi that matter at x's exponent, in uint64 fixed point with 63 fraction bits. Exact for every finite float32."""
  bits = x.bitcast(dtypes.uint32)
  abits = bits & 0x7FFFFFFF
  a = abits.bitcast(dtypes.float32)
  # |x| = M * 2**E with M the 24-bit integer mantissa; t = M * 2**E / pi mod 2 needs the bits of 1/pi from just above
  # the point where 2**E / pi's bits start to count mod 2, to 63 bits below it: G = floor(2**s / pi) mod 2**64, s = E + 63
  mant = ((bits & 0x7FFFFF) | 0x800000).cast(dtypes.uint64)
  s = (abits >> 23).cast(dtypes.int32) + (63 - 127 - 23)
  q, o = s >> 5, (s & 31).cast(dtypes.uint64)  # s = 32q + o; q is 1..5 for 1.5 <= |x| and every larger float32
  word = {k: _select(q, {qq: _inv_pi_word(qq + k) for qq in range(1, 6)}, dtypes.uint64) for k in (-2, -1, 0)}
  g = (word[-2] << (o + 32)) | (word[-1] << o) | (word[0] >> (32 - o))
  t = mant * g + (1 << 62)  # t * 2**63 mod 2**64 (uint64 wraps), plus a half so the top bit is round(t)'s parity
  odd = (t >> 63).ne(0)
  frac = ((t & ((1 << 63) - 1)).cast(dtypes.int64) - (1 << 62)).cast(dtypes.float32)  # t - round(t) in [-1/2, 1/2), times 2**63
  small = a < 1.5  # below pi/2 the reduction is the identity, and keeps full relative precision for tiny x
  r = small.where(a, frac * (math.pi * 2.0 ** -63))
  flip = (bits >> 31).ne(0) ^ (small.where(False, odd))  # sin(-x) = -sin(x); sin(r + n pi) = (-1)**n sin(r)
  y = _sin_poly(r)
  return (a < math.inf).where(flip.where(-y, y), math.nan)

def _pi_parts(nparts: int, bits: int) -> list[float]:
  """pi as a sum of floats: the first nparts - 1 have `bits` significant bits (so small integers times them are exact), the last holds the rest."""
  parts, rest, shift = [], _PI, _PI.bit_length() - bits
  for _ in range(nparts - 1):
    parts.append(math.ldexp(rest >> shift, shift - _PI_BITS))
    rest, shift = rest & ((1 << shift) - 1), shift - bits
  return parts + [math.ldexp(rest >> (shift + bits - 53), shift + bits - 53 - _PI_BITS)]

# float64 reduction: n < 2**42 in two 21-bit halves, times 32-bit parts of pi, keeps every product exact and the first subtractions too
_N_HALF_BITS, _PI_PARTS64 = 21, _pi_parts(4, 32)

def _sin_f64(x: UOp) -> UOp:
  """float64 sin with a Cody-Waite reduction r = x - n pi: pi in parts, n in halves, so the big products are exact.
  Accurate to a few ulp for |x| < 2**42 pi (about 1.4e13); beyond it the error grows with |x| (about |x| * 2**-53)."""
  n = _round(x * (1 / math.pi))
  nh = _trunc(n * 2.0 ** -_N_HALF_BITS) * 2.0 ** _N_HALF_BITS
  nl, r = n - nh, x
  for c in _PI_PARTS64[:-1]: r = (r + nh * -c) + nl * -c
  r = r + n * -_PI_PARTS64[-1]
  odd = (n - _trunc(n * 0.5) * 2.0).ne(0.0)
  y = _sin_poly(r)
  return (x * 0.0).eq(0.0).where(odd.where(-y, y), math.nan)  # x*0 is nan exactly for inf and nan

def sin(x: UOp) -> UOp:
  """sin(x) = (-1)**n sin(x - n pi), n = round(x / pi); the reduction is exact for float32 and for float64 up to about 1e13."""
  return _sin_f32(x) if x.dtype == dtypes.float32 else _sin_f64(x)
