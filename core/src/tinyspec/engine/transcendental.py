"""EXP2, LOG2, SIN and POW as graphs of primitive UOps, for float32 and float64 (isel widens float16 and bfloat16 to
float32 first), and the front end's exp, sin, cos and tan, which reduce their argument exactly before EXP2 or SIN.

Each function reduces its argument to a small interval and evaluates a power series there. The coefficients are the
Taylor (or atanh) series' own, computed here from their formulas, and each series is cut where the next term is below a
quarter ulp of the format on the reduced interval, so the error is the few ulps of the float arithmetic itself. The
reductions are exact: sin's by quadrants of pi/2 with 2/pi read to 128 bits past the argument's exponent (Payne-Hanek)
or, for float64 below 6.6e12, with pi/2 in four parts (Cody-Waite); pow carries log2 a and b log2 a in two floats each.
docs/spec.md has the accuracy in ulps."""
from __future__ import annotations

import decimal
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

def _int_of(n: UOp) -> UOp:
  """An integer-valued float n, |n| < 2**(mant - 1), as its format's int: n + 1.5 * 2**mant has exactly n (plus a constant)
  in its low bits. A CAST would be exact too, but renderers that saturate out-of-range values make it costly."""
  it, mant, bias = FORMATS[n.dtype]
  return (n + 1.5 * 2.0 ** mant).bitcast(it) + -(((bias + mant) << mant) | (1 << (mant - 1)))  # minus 1.5 * 2**mant's bits

# ---- exp2 ----

def _pow2(n: UOp, dt: DType) -> UOp:
  """2**n for an integer n in the normal exponent range: n + bias written into the exponent field."""
  _, mant, bias = FORMATS[dt]
  return ((n + bias) << mant).bitcast(dt)

def _exp2_lim(dt: DType) -> int:
  """Past +-lim 2**x is inf or rounds to 0, and lim/2 stays in the normal exponent range."""
  _, mant, bias = FORMATS[dt]
  return bias + mant + 2

def _exp2_coeffs(dt: DType, bound: float) -> list[float]:
  """2**f = exp(f ln 2) as a power series in f, |f| <= bound, cut at a quarter ulp."""
  return series(lambda k: math.log(2) ** k / math.factorial(k), bound, FORMATS[dt][1] + 2)

def _exp2_split(n: UOp, f: UOp) -> UOp:
  """2**(n + f) for an integer-valued float n with |n| <= lim and |f| <= 1/2 (a hair more is fine): 2**f by the series
  of exp(f ln 2), 2**n in two factors, so that a result in the subnormal range (or past the largest float) rounds once."""
  dt = f.dtype
  p = poly(f, _exp2_coeffs(dt, 0.5))
  ni = _int_of(n)
  half = ni >> 1
  return p * _pow2(half, dt) * _pow2(ni - half, dt)

def exp2(x: UOp) -> UOp:
  """2**x as 2**n * 2**r with n = round(x) and |r| <= 1/2."""
  lim = _exp2_lim(x.dtype)
  xc = (x < -lim).where(-lim, (x > lim).where(lim, x))  # nan compares false and stays
  n = _round(xc)
  return x.ne(x).where(x, _exp2_split(n, xc - n))

# ---- log2 ----

_SQRT2 = math.sqrt(2)
_SMAX = (_SQRT2 - 1) / (_SQRT2 + 1)  # the largest |s| = |m - 1| / (m + 1) for m in [sqrt(1/2), sqrt(2)]

def _mant_exp(x: UOp) -> tuple[UOp, UOp]:
  """(m, e) with x = m * 2**e, m in [sqrt(1/2), sqrt(2)] and e an int, for finite x > 0 (subnormals included)."""
  dt, (it, mant, bias) = x.dtype, FORMATS[x.dtype]
  tiny = x < 2.0 ** (1 - bias)  # a subnormal has no implicit leading bit: scale it into the normal range first
  bits = tiny.where(x * 2.0 ** 64, x).bitcast(it)
  e = (bits >> mant) - tiny.where(_c(bias + 64, it), _c(bias, it))
  m = ((bits & (2 ** mant - 1)) | (bias << mant)).bitcast(dt)  # the mantissa with a zero exponent: m in [1, 2)
  big = m > _SQRT2
  return big.where(m * 0.5, m), big.where(e + 1, e)

def _atanh_coeffs(dt: DType, start: int, extra: int = 0) -> list[float]:
  """log2(m) = 2/ln 2 atanh(s) = 2/ln 2 (s + s**3/3 + s**5/5 + ...): the coefficients of s**(2k+1) from k = start, cut
  where a term falls below a quarter ulp, or 2**-extra of that."""
  return series(lambda k: 2 / ((2 * k + 1) * math.log(2)), _SMAX ** 2, FORMATS[dt][1] + 2 + extra)[start:]

def log2(x: UOp) -> UOp:
  """log2(x) = e + log2(m) with x = m * 2**e; log2(m) from the atanh series of s = (m-1)/(m+1)."""
  m, e = _mant_exp(x)
  s = (m + -1.0) * (m + 1.0).recip()
  out = e.cast(x.dtype) + s * poly(s * s, _atanh_coeffs(x.dtype, 0))
  bad = x.ne(x) | (x < 0)
  return bad.where(math.nan, x.eq(0.0).where(-math.inf, x.eq(math.inf).where(math.inf, out)))

# ---- pow ----

def _keep(v: UOp, bits: int) -> UOp:
  """v with its significand cut to its leading `bits` bits (by masking, so exactly): products of such parts are exact."""
  it, mant, _ = FORMATS[v.dtype]
  return (v.bitcast(it) & -(1 << (mant + 1 - bits))).bitcast(v.dtype)

def _round_bits(v: float, bits: int) -> float:
  """v rounded to `bits` significant bits."""
  m, e = math.frexp(v)
  return math.ldexp(round(math.ldexp(m, bits)), e - bits)

_K = 2 / math.log(2)  # log2(m) = K atanh(s) = K (s + s**3/3 + ...)
_K_EXACT = 2 / decimal.Context(prec=60).ln(2)  # K to far more than float64's bits, for the remainders of its cut copies

def _log2_split(a: UOp) -> tuple[UOp, UOp]:
  """log2(a) = t_hi + t_lo for finite a > 0, t_hi cut to half a significand, the sum good to about twice the format's
  precision. Parts cut to a third or a half of the significand (_keep) multiply exactly; the small remainders carry
  what those leave out, so their own rounding lies far below the result's ulp."""
  dt, mant = a.dtype, FORMATS[a.dtype][1]
  third, half = (mant + 1) // 3, (mant + 1) // 2
  m, e = _mant_exp(a)
  # s = (m - 1) / (m + 1) = s_hi + s_lo: m + 1 = u_hi + u_lo exactly, and (m - 1) - s_hi (u_hi + u_lo) is exact but for
  # far below s_lo's last bit
  u_hi = _keep(m + 1.0, half + 1)
  u_lo = m - (u_hi + -1.0)
  inv_u = (m + 1.0).recip()
  s_hi = _keep((m + -1.0) * inv_u, half - 1)
  s_lo = (((m + -1.0) - s_hi * u_hi) - s_hi * u_lo) * inv_u
  s = s_hi + s_lo
  z = s * s
  # log2(m) = K s + K/3 s**3 + ... = lead + cube + rest: lead = K_hi s_hi and cube = c**3 (c: s cut to a third) are
  # exact, rest is small; s**3 - c**3 = (s - c) (s**2 + s c + c**2)
  k_hi, k3 = _round_bits(_K, mant + 2 - half), _K_EXACT / 3
  c = _keep(s_hi, third)
  c_lo = (s_hi - c) + s_lo
  lead, cube = s_hi * k_hi, c * c * c
  rest = ((s_hi * float(_K_EXACT - decimal.Decimal(k_hi)) + s_lo * _K) + (cube * float(k3 - 1) + c_lo * (z + s * c + c * c) * float(k3))) + \
    s * z * z * poly(z, _atanh_coeffs(dt, 2, 14))  # the last: K/5 s**5 + ..., to the precision b log2 a needs
  # log2(a) = e + lead + cube + rest = t_hi + t_lo
  ef = e.cast(dt)
  t_hi = _keep(ef + ((lead + cube) + rest), half)
  t_lo = (((ef - t_hi) + lead) + cube) + rest
  return t_hi, t_lo

def pow(a: UOp, b: UOp) -> UOp:
  """a ** b for a >= 0 (nan for a < 0) with C99's special values, as 2**(b log2 a) with log2 a and the product carried
  in two floats each: b log2 a reaches +-(bias + mant), and one rounding of it would be off by that many half-ulps."""
  t_hi, t_lo = _log2_split(a)
  half = (FORMATS[a.dtype][1] + 1) // 2
  dt = a.dtype
  # b log2(a) = y_hi + y_lo, with y_hi = b_hi t_hi exact
  b_hi = _keep(b, half)
  y_hi, y_lo = b_hi * t_hi, (b - b_hi) * t_hi + b * t_lo
  # a = 0 or inf, or b = +-inf: 2**(b log2 a) with log2 a = -inf, inf, or one of its sign (nan stays nan)
  finite = (a < math.inf) & (_c(0.0, dt) < a) & (b < math.inf) & (_c(-math.inf, dt) < b)
  y_hi = finite.where(y_hi, b * a.eq(0.0).where(-math.inf, (a < math.inf).where(t_hi, a)))
  lim = _exp2_lim(dt)
  yc = (y_hi < -lim).where(-lim, (y_hi > lim).where(lim, y_hi))
  n = _round(yc)
  f = (yc - n) + y_lo
  f = finite.where((f < -1.0).where(-1.0, (f > 1.0).where(1.0, f)), 0.0)  # past lim it only has to stay small
  out = yc.ne(yc).where(yc, _exp2_split(n, f))
  return (b.eq(0.0) | a.eq(1.0)).where(1.0, (a < 0).where(math.nan, out))

# ---- sin and cos: the argument reduced by quadrants ----

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
HALF_PI_FIXED = _PI >> (_PI_BITS - 62)  # floor(pi/2 * 2**63), 64 bits

def _pi_parts(nparts: int, bits: int) -> list[float]:
  """pi as a sum of floats: the first nparts - 1 have `bits` significant bits (so small integers times them are exact), the last holds the rest."""
  pi, total = _PI, _PI_BITS
  parts, shift = [], pi.bit_length() - bits
  for _ in range(nparts - 1):
    parts.append(math.ldexp(pi >> shift, shift - total))
    pi, shift = pi & ((1 << shift) - 1), shift - bits
  return parts + [math.ldexp(pi >> (shift + bits - 53), shift + bits - 53 - total)]

# n < 2**42 in two 21-bit halves times 32-bit parts of pi/2: every product is exact, and so are the subtractions until r is small
CW_HALF_BITS, CW_PI_PARTS = 21, _pi_parts(4, 32)
_HALF_PI_PARTS = [c / 2 for c in CW_PI_PARTS]
CW_LIMIT = 2.0 ** (2 * CW_HALF_BITS) * 1.5  # a bound on |x| that keeps round(|x| * 2/pi) below 2**42
_HALF_PI32 = [c / 2 for c in _pi_parts(2, 24)]  # pi/2 as a float32 and the rest
# where the fixed-point reduction takes over: below it float32 needs none (or a float one) and float64 uses Cody-Waite
PH_FROM = {dtypes.float32: 2.0 ** -20, dtypes.float64: CW_LIMIT}

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

def _fixed(abits: UOp, dt: DType) -> tuple[UOp, UOp]:
  """|x| * 2/pi mod 4 in fixed point for |x| >= PH_FROM given by its bits (Payne-Hanek): (t, low), uint64s holding its 2
  integer and first 62 fraction bits, and the next 64. Exact but for the bits of 2/pi past the 128 it reads.

  |x| = M * 2**k with M the integer mantissa. In M * 2**k * 2/pi mod 4 the bits of 2/pi worth 2**-k * 4 or more add
  multiples of 4 only, so it needs just the 128 bits from there: G = floor(2**(k + 127) / pi) mod 2**128, and
  M * G mod 2**128 is |x| * 2/pi mod 4 with 126 fraction bits."""
  _, mant, bias = FORMATS[dt]
  u64, shift = dtypes.uint64, 127 - bias - mant
  m = ((abits & (2 ** mant - 1)) | (1 << mant)).cast(u64)
  s = (abits >> mant) + shift  # k + 127
  q, o = s >> 5, (s & 31).cast(u64)  # s = 32q + o (shift and mask: floor division also for the negative s of small x, masked later)
  lowest = bias + math.frexp(PH_FROM[dt])[1] - 1  # the biased exponent of PH_FROM
  qs = range((lowest + shift) >> 5, ((2 * bias + 1 + shift) >> 5) + 1)  # q from PH_FROM's exponent to inf's (2 bias + 1)
  pair = {k: _select(q, {j: _inv_pi_bits(j + k, 64) for j in qs}, u64) for k in (-3, -1)}  # 64 bits ending at word q + k
  word = _select(q, {j: _inv_pi_bits(j, 32) for j in qs}, u64)
  g_hi = (pair[-3] << o) | ((pair[-1] >> 32) >> (32 - o))  # G's two 64-bit halves: 128 bits ending o bits into word q
  g_lo = (pair[-1] << o) | (word >> (32 - o))
  return m * g_hi + _mulhi(m, g_lo), m * g_lo

def _split(t: UOp, low: UOp, dt: DType, step: int, p: int) -> tuple[UOp, UOp]:
  """(r, q) from _fixed's (t, low): |x| = q pi/2 + r with q the integer nearest |x| * 2/pi among those = p (mod step)."""
  width = step << 62  # step quadrants in t's units
  t = t + ((width // 2 - (p << 62)) % 2 ** 64)  # moved by p quadrants back and half a step on, so that the bits above width are q's
  q = ((t >> (width.bit_length() - 1)) * step + p).cast(FORMATS[dt][0])
  frac = (t & (width - 1)).cast(dtypes.int64) + -(width // 2)  # (|x| * 2/pi - q) * 2**62, in [-width/2, width/2)
  if dt == dtypes.float64:  # float64 may need the bits below t where |x| is close to a multiple of pi/2 (float32 never does)
    return (frac.cast(dt) + low.cast(dt) * 2.0 ** -64) * (math.pi * 2.0 ** -63), q
  neg = frac < 0
  r = _mulhi(neg.where(-frac, frac).cast(dtypes.uint64), _c(HALF_PI_FIXED, dtypes.uint64)).cast(dt) * 2.0 ** -61  # |frac| * pi/2: one rounding
  return neg.where(-r, r), q

def _reduce_cody_waite(a: UOp, step: int, p: int) -> tuple[UOp, UOp]:
  """_reduce for float64 0 <= a < CW_LIMIT (Cody-Waite): r to a few ulp of itself, also where a is close to a multiple
  of pi/2, which the 126 fixed-point bits of _fixed cannot resolve in float64."""
  n = _round((a * (2 / math.pi) + -p) * (1 / step)) * step + p
  nh = _trunc(n * 2.0 ** -CW_HALF_BITS) * 2.0 ** CW_HALF_BITS
  nl, r = n - nh, a
  for c in _HALF_PI_PARTS[:-1]: r = (r + nh * -c) + nl * -c
  return r + n * -_HALF_PI_PARTS[-1], _int_of(n)

def _reduce(a: UOp, abits: UOp, step: int, p: int) -> tuple[UOp, UOp]:
  """(r, q) with a = q pi/2 + r exactly, q the integer = p (mod step) nearest a * 2/pi, so |r| <= step pi/4 (a hair over
  where a * 2/pi rounds next to a tie), for finite a >= 0 with bits abits; q is an int of a's width."""
  dt = a.dtype
  r, q = _split(*_fixed(abits, dt), dt, step, p)
  if dt == dtypes.float64:
    cw = a < CW_LIMIT
    rc, qc = _reduce_cody_waite(a, step, p)
    return cw.where(rc, r), cw.where(qc, q)
  # below pi/4 q is p itself: r = a, exact, for p = 0; for p = 1 r = a - pi/2 only below PH_FROM, where its rounding is
  # harmless (the slope of sin at a - pi/2 is sin(a) < 2**-20)
  small = a < (0.78 if p == 0 else PH_FROM[dt])
  rs = a if p == 0 else (a + -_HALF_PI32[0]) + -_HALF_PI32[1]
  return small.where(rs, r), small.where(_c(p, q.dtype), q)

_R2 = (math.pi / 4 * (1 + 2.0 ** -10)) ** 2  # the largest r * r of a quadrant reduction

def _sin_poly(r: UOp) -> UOp:
  """sin(r) for |r| <= pi/4 by its Taylor series, as r + r**3 * (...) so that r itself is not rounded again."""
  z = r * r
  return r + r * z * poly(z, series(lambda k: (-1) ** k / math.factorial(2 * k + 1), _R2, FORMATS[r.dtype][1] + 2)[1:])

def _cos_poly(r: UOp) -> UOp:
  """cos(r) for |r| <= pi/4 by its Taylor series, as w = 1 - r**2/2 plus what w's rounding lost plus the rest: 1 - w and
  the loss are exact, so only the last addition rounds at the result's scale."""
  z = r * r
  half, w = z * 0.5, 1.0 - z * 0.5
  rest = z * z * poly(z, series(lambda k: (-1) ** k / math.factorial(2 * k), _R2, FORMATS[r.dtype][1] + 2)[2:])
  return w + (((1.0 - w) - half) + rest)

def _magnitude(x: UOp) -> tuple[UOp, UOp, UOp]:
  """(bits, abits, |x|): x's bits as its format's int, those of |x|, and |x|."""
  bits = x.bitcast(FORMATS[x.dtype][0])
  abits = bits & (2 ** (8 * x.dtype.itemsize - 1) - 1)
  return bits, abits, abits.bitcast(x.dtype)

def sin(x: UOp) -> UOp:
  """sin(x) from the quadrant q of |x| = q pi/2 + r, |r| <= pi/4: sin(r), cos(r), -sin(r) or -cos(r), each by its series."""
  bits, abits, a = _magnitude(x)
  r, q = _reduce(a, abits, 1, 0)
  y = (q & 1).ne(0).where(_cos_poly(r), _sin_poly(r))
  flip = (bits < 0) ^ (q & 2).ne(0)  # sin(-x) = -sin(x) (by the sign bit, so -0.0 stays -0.0); sin(r + pi) = -sin(r)
  return (a < math.inf).where(flip.where(-y, y), math.nan)

# ---- the front end's sin, cos and tan: SIN of an exactly reduced argument ----

def sin_cos(x: UOp, p: int) -> UOp:
  """sin(x) (p = 0) or cos(x) (p = 1) of a float32 or float64 x as +-SIN(R), with x = J pi/2 + R exactly, J = p (mod 2),
  |R| <= pi/2: sin(x) = cos(J pi/2) sin(R) and cos(x) = -sin(J pi/2) sin(R). SIN, native or decomposed, then sees a
  small argument, so cos is as accurate as sin on every device (sin(x + pi/2) would round x + pi/2 first: an error of
  up to half an ulp of x, which is 0.5 at 1e7 in float32). cos below 1/2 is its series."""
  bits, abits, a = _magnitude(x)
  r, q = _reduce(a, abits, 2, p)
  neg = bits < 0
  big_j = neg.where(-q, q)  # J = q for x >= 0, -q for x < 0 (and R = -r)
  # R comes from x's bits, through which no gradient flows: (detach(x) - x) is 0 (and nan for x = +-inf), and gives R the
  # slope 1 that x - J pi/2 has. Subtracted, so that R = -0.0 stays -0.0.
  y = UOp(Ops.SIN, ((a < math.inf).where(neg.where(-r, r), math.nan) - (UOp(Ops.DETACH, (x,)) - x),))
  y = ((big_j + p) & 2).ne(0).where(-y, y)
  if p == 0: return y
  # cos below 1/2 by its own series in x: SIN's slope there would be read at R = x -+ pi/2 rounded, which has lost x's
  # low bits (cos's slope at 0 came out 4e-8, 490 ulp off at 1e-3); the series' slope is sin's series, within an ulp
  # up to 1/2 (and 6 ulp by pi/4, where SIN's is within 1). x is 0 where the series is unused, so its powers stay finite
  # (the slope passed there is 0 * theirs)
  near = a < 0.5
  return near.where(_cos_poly(near.where(x, 0.0)), y)

_LN2_EXACT = decimal.Context(prec=60).ln(2)

def ln2_parts(dt: DType) -> tuple[float, float]:
  """ln 2 = hi + lo for exp's reduction in dt: hi with as many bits fewer than the format as n = x / ln 2 needs, so n * hi
  is exact."""
  hi = _round_bits(math.log(2), FORMATS[dt][1] + 1 - _exp2_lim(dt).bit_length())
  return hi, float(_LN2_EXACT - decimal.Decimal(hi))

UNIT_MARGIN = 1 / 16  # how far past [0, 1] the series for exp's reduced argument reaches: more than its rounding moves it

def exp2_of_reduced(f: UOp, hi: UOp, lo: UOp, k: UOp) -> UOp | None:
  """2**f for `exp`'s reduced argument f = ((x + n * hi) + n * lo) * k (isel's rule matches the shape; the constants, -hi,
  -lo and 1 / ln 2, are checked here: None for any other f of that shape). Such an f is in [0, 1) but for rounding, so
  within UNIT_MARGIN of [0, 1] the series alone gives 2**f, with no second reduction, exact at 0 (float32 exp: 51
  operations instead of 64). It leaves that range only where e**x over- or underflows, and this EXP2 is read only as a
  factor of e**x (its value, and its slope's: isel runs after autodiff), so there it is inf or 0, e**x's own values."""
  if f.dtype not in FORMATS: return None
  ln2_hi, ln2_lo = ln2_parts(f.dtype)
  if (hi.arg[0], lo.arg[0], k.arg[0]) != tuple(_c(v, f.dtype).arg[0] for v in (-ln2_hi, -ln2_lo, 1 / math.log(2))): return None
  below, above = f < -UNIT_MARGIN, f > 1 + UNIT_MARGIN
  series = poly(above.where(1 + UNIT_MARGIN, below.where(-UNIT_MARGIN, f)), _exp2_coeffs(f.dtype, 1 + UNIT_MARGIN))
  return above.where(math.inf, below.where(0.0, series))

def exp(x: UOp) -> UOp:
  """The front end's e**x for float32 or float64 x: 2**n * EXP2(r / ln 2) with x = n ln 2 + r, 0 <= r < ln 2, reduced
  exactly (Cody-Waite: n ln2_hi is exact, ln2_hi having as many bits fewer than the format as n needs). EXP2(x / ln 2)
  would round x / ln 2 first, an error of up to |x| half-ulps of the result (88 near float32's overflow). 2**n is
  written into the exponent field (in two factors, as exp2), so it costs no EXP2 and carries no gradient."""
  dt, lim = x.dtype, _exp2_lim(x.dtype)
  hi, lo = ln2_parts(dt)
  t = x * (1 / math.log(2))
  t = (t < -lim).where(-lim, (t > lim).where(lim, t))  # past +-lim r grows instead: EXP2 (or the factors 2**n) over- or underflow
  n = (t < _trunc(t)).where(_trunc(t) + -1.0, _trunc(t))  # floor: 2**n <= e**x, so no factor of the gradient overflows first
  y = UOp(Ops.EXP2, (((x + n * -hi) + n * -lo) * (1 / math.log(2)),))
  ni = _int_of(n)
  half = ni >> 1
  return x.ne(x).where(x, y * _pow2(half, dt) * _pow2(ni - half, dt))

def tan(x: UOp) -> UOp:
  """tan(x) = sin(x) / cos(x), both from sin_cos (which share the fixed-point part of the reduction)."""
  return UOp(Ops.DIV, (sin_cos(x, 0), sin_cos(x, 1)))
