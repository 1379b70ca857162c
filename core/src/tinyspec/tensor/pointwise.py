"""Pointwise math and activations composed from tensor.py's primitives (exp, log, sqrt, where ...), so each has its
gradient by composition. Where a formula would lose precision (log(1 + x) for small x) or a branch not taken would
pass nan into the gradient (0 * inf), the inputs of each branch are made safe first: a WHERE's untaken branch still
passes 0 * its slope backwards, and 0 * inf is nan."""
from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from tinyspec.dtype import dtypes
from tinyspec.engine import transcendental as T
from tinyspec.tensor.movement import resolve_dim

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Scalar, Tensor

# atan on [-tan(pi/8), tan(pi/8)] after reducing by pi/4 or pi/2: x + x z (c0 + z (c1 + ...)), z = x^2, by itemsize. float32:
# Cephes' atanf. float64: a least-squares fit on 44 Chebyshev nodes of z in [0, tan(pi/8)^2] (mpmath, 50 digits), 0.57 ulp
_ATAN_C = {4: (-3.33329491539e-1, 1.99777106478e-1, -1.38776856032e-1, 8.05374449538e-2),
           8: (-0.3333333333333333, 0.19999999999995652, -0.1428571428469138, 0.11111111017100327, -0.0909090464769568, 0.07692184699371778,
               -0.06664531369805009, 0.05858311810501153, -0.05086254885823143, 0.039253696320618564, -0.01920252926841228)}
_TAN_3PI_8, _TAN_PI_8 = 2.414213562373095, 0.4142135623730950


def _poly(x: Tensor, coeffs: tuple[float, ...]) -> Tensor:
  """c0 + x (c1 + x (c2 + ...)), by Horner's rule."""
  out = x * coeffs[-1]
  for c in reversed(coeffs[1:-1]): out = (out + c) * x
  return out + coeffs[0]


def _chebyshev(u: Tensor, coeffs: tuple[float, ...]) -> Tensor:
  """c0 T0(u) + c1 T1(u) + ... for u in [-1, 1], by Clenshaw's recurrence (stable where Horner's rule on the same
  polynomial's powers would cancel)."""
  b1, b2, u2 = coeffs[-1], 0.0, u * 2
  for c in reversed(coeffs[1:-1]): b1, b2 = u2 * b1 - b2 + c, b1
  return u * b1 - b2 + coeffs[0]

def _erfc_of_magnitude(a: Tensor) -> Tensor:
  """erfc(a) for 0 <= a <= 27 as t exp(-a^2) exp(Q(t)) (_ERFC_CHEBYSHEV), to a few ulp of float32 or float64 and
  relatively so, down to erfc(27) = 5e-319. exp(-a^2) is taken of a^2 rounded and corrected inside the second exp by
  the rounding's error (Dekker's exact square), so a^2 of up to 729 loses nothing."""
  t, square, split = (a * 0.5 + 1).reciprocal(), a * a, _split_factor(a.dtype)
  hi = a * split - (a * split - a)  # a = hi + lo, halves whose products are exact
  lo = a - hi
  square_error = ((hi * hi - square) + 2 * hi * lo) + lo * lo  # a^2 - square
  u = t * (2 / (1 - _ERFC_T_MIN)) - (1 + _ERFC_T_MIN) / (1 - _ERFC_T_MIN)
  return t * (-square).exp() * (_chebyshev(u, _ERFC_CHEBYSHEV[:_ERFC_TERMS[a.dtype.itemsize]]) - square_error).exp()

def _erf_near_zero(a: Tensor) -> tuple[Tensor, Tensor]:
  """(whether |a| < 1/2, erf(a) there by its Taylor series, 0 elsewhere): a large a's powers would overflow, and the
  untaken branch's slope would then be 0 * inf."""
  small = a.abs() < 0.5
  near = small.where(a, 0.0)
  return small, near * _poly(near * near, _ERF_TAYLOR[:_ERF_TAYLOR_TERMS[a.dtype.itemsize]])

def _erfinv_newton_step(x: Tensor, y: Tensor) -> Tensor:
  """Newton's step toward erfinv(x) from y (of x's sign, |x| < 1), without cancellation: on erf(|y|) - |x| below
  |x| = 1/2 (erf from its series, as |y| < 0.477 there), on log erfc(|y|) - log(1 - |x|) above (1 - |x| is exact there,
  and the log is nearly a parabola in y, so Newton converges from the far tail where the start is off by 0.6)."""
  m, ya = (x < 0).where(-x, x), (y < 0).where(-y, y)  # not abs: its slope at 0 is 0, and erfinv's there is sqrt(pi) / 2
  c = _erfc_of_magnitude(ya.minimum(27.0))
  tail_step = (c.log() - (1 - m).log()) * c
  center_step = m - _erf_near_zero(ya)[1]
  step = (m < 0.5).where(center_step, tail_step) * (ya * ya).exp() * (math.sqrt(math.pi) / 2)
  return (x < 0).where(-step, step)

def _odd(x: Tensor, f: Callable[[Tensor], Tensor]) -> Tensor:
  """An odd function from f on x >= 0: -f(-x) below 0. f sees |x| built as where(x < 0, -x, x), whose slope at 0 is 1
  (abs's is 0), so the gradient at 0 is f'(0)."""
  neg = x < 0
  y = f(neg.where(-x, x))
  return neg.where(-y, y)

def _edge_slopes(x: Tensor, infinite: Tensor, undefined: Tensor) -> Tensor:
  """A term to add to a function's constant values at its domain's edges and outside it, giving PyTorch's slopes there:
  value 0 and slope +inf where `infinite`, value and slope nan where `undefined` (its value elsewhere is not meant to be
  used). Both come from x - detach(x), which is 0 with slope 1: its sqrt has slope inf at 0, its product with nan slope
  nan. Where neither holds its slopes stay finite, so a WHERE's untaken branch passes no 0 * inf back."""
  d = x - x.detach()
  return infinite.where(infinite.where(d, 1.0).sqrt(), undefined.where(d, 0.0) * math.nan)

def _negative(x: Tensor) -> Tensor:
  """Whether a float's sign is negative: -0.0 included (1 / -0.0 is -inf), nan not."""
  return (x < 0) | (x.reciprocal() < 0)

def _split_factor(dtype) -> float:
  """Veltkamp's constant 2**ceil(bits / 2) + 1 for a float dtype's mantissa bits: hi = v c - (v c - v) holds v's top
  half, lo = v - hi the rest, and hi * hi, hi * lo and lo * lo are exact (the basis of Dekker's exact products)."""
  bits = np.finfo(dtype.np).nmant + 1
  return float(2 ** ((bits + 1) // 2) + 1)

def _float_operands(x: Tensor, y: Tensor | Scalar) -> tuple[Tensor, Tensor]:
  """x and y brought to one shape and one dtype by PyTorch's promotion, then to a float: int32 with float16 is float16, and
  float32 with float64 is float64 (making x float first would give float32 and float64)."""
  x, y = x._broadcasted(y)
  return x._float(), y._float()

def _off_sign(r: Tensor, negative: Tensor) -> Tensor:
  """Where r is not 0 and its sign is not the one `negative` says: a remainder that must move by one divisor."""
  return (r != 0) & ((r < 0) != negative)

# erf(x) / x near 0 as a series in x^2: 2/sqrt(pi) sum (-1)^n x^2n / (n! (2n + 1)). For |x| < 1/2 the terms from n = 6 on
# add less than 2e-8 (float32's 6 terms), from n = 13 on less than 1e-18 (float64's 13)
_ERF_TAYLOR = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(13))
_ERF_TAYLOR_TERMS = {4: 6, 8: 13}
# erfc(x) = t exp(-x^2) exp(Q(t)) for 0 <= x <= 27 (erfc is 0 past 27 in float64), t = 1 / (1 + x / 2) in [2/29, 1]:
# Q = log(erfc(x) e^(x^2) / t) as a Chebyshev series in u = (2t - 1 - 2/29) / (1 - 2/29), the interpolant at 48
# Chebyshev nodes (mpmath, 40 digits). Its first 12 terms are within 1e-8 of Q (float32's), all 26 within 2.3e-16
_ERFC_T_MIN = 2 / 29
_ERFC_CHEBYSHEV = (
  -0.6107401523665623, 0.6053584463434446, 0.013897604733136882, -0.008264970081573859, -0.0005419707831843666, 0.0002885732989564137,
  1.5644867979424932e-05, -1.3803272977493721e-05, -4.201553336550969e-09, 7.160979147372824e-07, -5.773887132809878e-08,
  -3.4360012150176435e-08, 6.7583734608912265e-09, 1.2157203904822408e-09, -5.347830733319805e-10, -2.1216282970843785e-12,
  3.115547558594001e-11, -4.3065328406799665e-12, -1.1301154020826776e-12, 4.178652061782886e-13, -5.704280895536427e-15,
  -2.1553652146136072e-14, 4.128737251272803e-15, 3.214908653442537e-16, -2.6516337783238076e-16, 4.1697720822469396e-17)
_ERFC_TERMS = {4: 12, 8: 26}
_ERFINV_NEWTON_STEPS = 4  # from Giles' start (1e-7 in the centre, 0.6 off at 1 - 2**-53) to float64's precision
# erfinv(x) = x P(w) for w = -log(1 - x^2) (Giles 2010, single precision): P in w - 2.5 below w = 5, in sqrt(w) - 3 above
_ERFINV_CENTRAL = (1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087, -4.39150654e-06, -3.5233877e-06,
                   3.43273939e-07, 2.81022636e-08)
_ERFINV_TAIL = (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773, -0.00367342844, 0.00134934322,
                0.000100950558, -0.000200214257)
def _bernoulli(n: int) -> list[Fraction]:
  """The Bernoulli numbers B_0 .. B_n (B_1 = -1/2), from sum_{j <= m} C(m + 1, j) B_j = 0."""
  b = [Fraction(1)]
  for m in range(1, n + 1): b.append(-sum(math.comb(m + 1, j) * b[j] for j in range(m)) / (m + 1))
  return b
# Stirling's series for lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2) in 1 / x (B_2k / (2k (2k - 1)) x^(1-2k)), and
# the asymptotic series for digamma(x) - log x + 1 / 2x (-B_2k / 2k x^-2k): 8 terms each, to float64's precision from x = 8 on
_B = _bernoulli(16)
_LGAMMA_STIRLING = tuple(float(_B[2 * k] / (2 * k * (2 * k - 1))) for k in range(1, 9))
_DIGAMMA_ASYMPTOTIC = tuple(float(-_B[2 * k] / (2 * k)) for k in range(1, 9))
_GAMMA_SHIFT = 8  # lgamma and digamma below 8 come from x + 8 by the recurrence Gamma(x + 1) = x Gamma(x)

def _tanh_taylor(terms: int) -> tuple[float, ...]:
  """tanh x = x (a0 + a1 x^2 + a2 x^4 + ...): from tanh' = 1 - tanh^2, a0 = 1 and (2k + 1) a_k = -sum_{i+j=k-1} a_i a_j."""
  a = [Fraction(1)]
  for k in range(1, terms): a.append(-sum(a[i] * a[k - 1 - i] for i in range(k)) / (2 * k + 1))
  return tuple(float(c) for c in a)
# tanh for |x| < 1/2 by its Taylor series, each term under 0.1 of the one before: to float32's precision in 9 terms, float64's in 18
_TANH_NEAR_0 = {4: _tanh_taylor(9), 8: _tanh_taylor(18)}

def _zeta(k: int) -> float:
  """Riemann's zeta at an integer k >= 2: the first 99 terms, then Euler-Maclaurin's tail from n = 100 to its n^(-k-5)
  term (the next is below 1e-18: double precision)."""
  n = 100
  tail = n ** (1 - k) / (k - 1) + n ** -k / 2 + k * n ** (-k - 1) / 12 - k * (k + 1) * (k + 2) * n ** (-k - 3) / 720
  return sum(i ** -k for i in reversed(range(1, n))) + tail + k * (k + 1) * (k + 2) * (k + 3) * (k + 4) * n ** (-k - 5) / 30240

# lgamma(1 + z) = -gamma z + sum_k (-1)^k zeta(k) / k z^k (Euler-Mascheroni gamma), for |z| <= 1/2 where the k-th term
# is about 2^-k / k: to float32's precision by k = 25, float64's by k = 51
_LGAMMA_NEAR_1 = {size: (0.0, -0.5772156649015329, *((-1) ** k * _zeta(k) / k for k in range(2, last + 1))) for size, last in ((4, 25), (8, 51))}


def _half_exp(x: Tensor) -> Tensor:
  """e^x / 2 for x >= 20 as e^(x - hi) e^-lo with ln 2 = hi + lo split as exp's reduction splits it (x - hi is exact
  here, and e^-lo rounds once): finite up to 89.4 in float32 (e^x alone overflows at 88.7), and within 2 ulp (e^(x - ln 2)
  rounds x - ln 2 first: up to 24 ulp). Its slope is itself, finite wherever it is."""
  hi, lo = T.ln2_parts(x.dtype)
  return (x - hi).exp() * math.exp(-lo)

class PointwiseMixin:
  """Elementwise functions for Tensor beyond the primitives (tensor.py): PyTorch's names and semantics."""

  # ---- clipping, magnitude ----
  def clamp(self: Tensor, min: Tensor | Scalar | None = None, max: Tensor | Scalar | None = None) -> Tensor:  # min, max: PyTorch's names
    """Values clipped to [min, max] (either may be None; where min > max the result is max, as PyTorch). nan stays nan, and
    a nan bound gives nan, as PyTorch's."""
    if min is None and max is None: raise RuntimeError("clamp: at least one of min and max must be given")
    out = self
    if min is not None: out, lo = out._broadcasted(min); out = ((out < lo) | lo.isnan()).where(lo, out)
    if max is not None: out, hi = out._broadcasted(max); out = ((out > hi) | hi.isnan()).where(hi, out)
    return out.isnan().where(out.detach(), out) if dtypes.is_float(out.dtype) else out  # nan: no slope, as PyTorch's x in [min, max]
  clip = clamp
  def abs(self: Tensor) -> Tensor:
    """max(x, -x), and +0.0 for a float zero (MAX of 0.0 and -0.0 may be either). PyTorch's slope sign(0) = 0 at 0."""
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype): return self
    m = self.maximum(-self)
    return (m == 0).where(m - m.detach(), m) if dtypes.is_float(self.dtype) else m  # v - v is +0.0, with m's slope kept
  def square(self: Tensor) -> Tensor: return (self.cast(dtypes.int64) if self.dtype == dtypes.bool else self) * self  # bool: int64, as PyTorch

  # ---- exp and log, accurate near 0 ----
  def log1p(self: Tensor) -> Tensor:
    """log(1 + x): for -1/2 < x < 1, where u = 1 + x rounds away x's low digits, log(u) * (x / (u - 1)) (the rounding of u
    cancels), x where u is 1; elsewhere log(u) itself, exact enough there, with PyTorch's slope 1 / (1 + x) (inf at -1,
    0 at inf). Below -1 the value is nan and the slope still 1 / (1 + x): log |u| carries the slope, a nan added the value."""
    def f(x: Tensor) -> Tensor:
      u, near = x + 1, (x > -0.5) & (x < 1)
      far = (u < 0).where(-u, u).log() + (u < 0).where(math.nan, 0.0)
      us, xs = near.where(u, 1.5), near.where(x, 0.5)  # constants where unused: 0 * the quotient's slope stays 0
      one = us == 1
      return near.where(one.where(xs, us.log() * (xs / one.where(1.0, us - 1))), far)
    return self._math(f)
  def expm1(self: Tensor) -> Tensor:
    """exp(x) - 1: for |x| < 1/2, where u - 1 would cancel, (u - 1) * x / log(u) with u = exp(x) rounded (the rounding of
    u cancels), x where u is 1; elsewhere u - 1 itself (-1 far below 0, 1.65e38 at 88, inf past 88.7; slope u)."""
    def f(x: Tensor) -> Tensor:
      u, near = x.exp(), x.abs() < 0.5
      us, xs = near.where(u, math.exp(0.25)), near.where(x, 0.25)  # constants where unused: 0 * the quotient's slope is 0
      one = us == 1
      core = one.where(xs, (us - 1) * xs / one.where(1.0, us.log()))
      return near.where(core, u - 1)
    return self._math(f)
  def log10(self: Tensor) -> Tensor: return self._math(lambda x: x.log2() * math.log10(2))
  def logaddexp(self: Tensor, y: Tensor | Scalar) -> Tensor:
    """log(exp(x) + exp(y)) as max(x, y) + log1p(exp(-|x - y|)); x / 2 + y / 2 + log(2) where x == y (so -inf and -inf
    give -inf, 3e38 and 3e38 do not overflow, and the gradient of a tie is half each, as PyTorch's). float16 and bfloat16
    compute in float32, rounded once."""
    x, y = _float_operands(self, y)
    if x.dtype.itemsize < 4: return x.float().logaddexp(y.float()).cast(x.dtype)
    d = (x == y).where(0.0, x - y)
    return (x == y).where(x * 0.5 + y * 0.5 + math.log(2), x.maximum(y) + (-d.abs()).exp().log1p())

  # ---- error function, inverse and hyperbolic trigonometry ----
  def erf(self: Tensor) -> Tensor:
    """The error function, odd: its Taylor series below 1/2, 1 - erfc above (_erfc_of_magnitude), to a few ulp."""
    def f(a: Tensor) -> Tensor:
      small, near = _erf_near_zero(a)
      return small.where(near, 1 - _erfc_of_magnitude(a.minimum(27.0)))  # erf is 1 past 27 (slope 0), and a^2 finite
    return self._math(lambda x: _odd(x, f))
  def atan(self: Tensor) -> Tensor:
    """arctan, odd: x >= 0 reduced to [0, tan(pi/8)] by pi/2 - atan(1/x) above tan(3pi/8) and pi/4 + atan((x-1)/(x+1))
    above tan(pi/8), then a polynomial of float32's or float64's precision (_ATAN_C)."""
    def f(a: Tensor) -> Tensor:
      big, mid = a > _TAN_3PI_8, a > _TAN_PI_8
      m = big.where(1.0, a)  # (a - 1) / (a + 1) is nan at a = inf, and its untaken slope then nan too
      r = big.where(-(big.where(a, 1.0).reciprocal()), mid.where((m - 1) / (m + 1), a))
      z = r * r
      base = big.where(a._const_like(math.pi / 2), mid.where(a._const_like(math.pi / 4), 0.0))  # in a's dtype (Python floats: float32)
      return base + r + r * z * _poly(z, _ATAN_C[a.dtype.itemsize])
    return self._math(lambda x: _odd(x, f))
  def asin(self: Tensor) -> Tensor:
    """arcsin = atan(x / sqrt(1 - x^2)), nan outside [-1, 1]; at +-1 it is +-(pi/2 - sqrt(2 (1 - |x|))), exactly +-pi/2
    with sqrt's slope at 0, inf, as PyTorch's 1 / sqrt(1 - x^2) (atan's 0 times the quotient's inf would be nan)."""
    def f(x: Tensor) -> Tensor:
      edge = x.abs() == 1
      inner, at_edge = edge.where(0.0, x), edge.where(x, 0.0)  # each branch finite where the other is taken
      return edge.where(_odd(at_edge, lambda a: math.pi / 2 - (2 * (1 - a)).sqrt()), (inner * ((1 - inner) * (1 + inner)).rsqrt()).atan())
    return self._math(f)
  def acos(self: Tensor) -> Tensor:
    """pi/2 - arcsin x for |x| <= 1/2, and 2 arcsin(sqrt((1 - |x|) / 2)) (pi minus it below 0) beyond, which keeps the
    digits pi/2 - arcsin would cancel near +-1; slope -inf at +-1 from sqrt's at 0."""
    def f(x: Tensor) -> Tensor:
      outer = x.abs() > 0.5
      side = outer.where(x, 0.0)  # each branch finite where the other is taken
      v = 2 * (((1 - (side < 0).where(-side, side)) * 0.5).sqrt()).asin()
      return outer.where((side < 0).where(math.pi - v, v), math.pi / 2 - outer.where(0.0, x).asin())
    return self._math(f)
  def sinh(self: Tensor) -> Tensor:
    """Odd; for x >= 0, (e + e / (e + 1)) / 2 with e = expm1(x) (that is (e^x - e^-x) / 2 without cancellation for small
    x), and e^x / 2 past 20 (_half_exp)."""
    def f(a: Tensor) -> Tensor:
      big = a > 20
      e = big.where(20.0, a).expm1()
      return big.where(_half_exp(big.where(a, 20.0)), (e + e / (e + 1)) * 0.5)
    return self._math(lambda x: _odd(x, f))
  def cosh(self: Tensor) -> Tensor:
    """1 + e^2 / 2(1 + e) with e = expm1(|x|) (that is (e^|x| + e^-|x|) / 2, whose slope (e^|x| - e^-|x|) / 2 would cancel
    near 0: 3e-4 off at 1e-4), and e^|x| / 2 past 20 (_half_exp)."""
    def f(x: Tensor) -> Tensor:
      a = (x < 0).where(-x, x)
      big = a > 20
      e = big.where(20.0, a).expm1()
      return big.where(_half_exp(big.where(a, 20.0)), 1 + e * e / (2 * (e + 1)))
    return self._math(f)
  def asinh(self: Tensor) -> Tensor:
    """Odd; for x >= 0, log1p(x + x^2 / (1 + sqrt(1 + x^2))), accurate near 0, and log(x) + log(2) past 1e9 (x^2 would
    overflow)."""
    def f(a: Tensor) -> Tensor:
      big = a > 1e9
      s = big.where(1.0, a)
      return big.where(big.where(a, 1.0).log() + math.log(2), (s + s * s / ((s * s + 1).sqrt() + 1)).log1p())
    return self._math(lambda x: _odd(x, f))
  def acosh(self: Tensor) -> Tensor:
    """log1p(t + sqrt(t) sqrt(t + 2)), t = x - 1: accurate near 1, slope inf at 1 (sqrt(2t + t^2)'s would be inf * 0);
    log(x) + log(2) past 1e9; nan below 1."""
    def f(x: Tensor) -> Tensor:
      big, below = x > 1e9, x < 1
      t = (big | below).where(1.0, x) - 1
      value = big.where(big.where(x, 1.0).log() + math.log(2), (t + t.sqrt() * (t + 2).sqrt()).log1p())
      # nan below 1, with PyTorch's slope 1 / sqrt(x^2 - 1) there all the same (nan in (-1, 1), finite below -1)
      slope = below.where((x * x - 1).rsqrt(), 0.0).detach()  # 0 where unused: the untaken branch passes 0 * it back
      return below.where((x - x.detach()) * slope + math.nan, value)
    return self._math(f)
  def atanh(self: Tensor) -> Tensor:
    """(log1p(x) - log1p(-x)) / 2: accurate near 0 and near +-1 (where 1 - |x| is exact), +-inf at +-1 with slope inf,
    nan outside."""
    return self._math(lambda x: (x.log1p() - (-x).log1p()) * 0.5)

  # ---- special functions: erfc, erfinv, lgamma, digamma (float32 accuracy, also in float64) ----
  def erfc(self: Tensor) -> Tensor:
    """1 - erf(x) without the cancellation, to a few ulp relatively: 1 - erf's series below |x| = 1/2, where erfc is
    near 1; above, _erfc_of_magnitude (so erfc(9) = 4.1e-37 in float32 to its last digits), and 2 - erfc(-x) below -1/2.
    Slope -2 / sqrt(pi) exp(-x^2), 0 past x = 27 (erfc is 0)."""
    def f(x: Tensor) -> Tensor:
      small, near = _erf_near_zero(x)
      c = _erfc_of_magnitude((x < 0).where(-x, x).minimum(27.0))  # |x| with slope 1 at 0 (abs's is 0)
      return small.where(1 - near, (x < 0).where(2 - c, c))
    return self._math(f)
  def erfinv(self: Tensor) -> Tensor:
    """The inverse of erf on [-1, 1]: Giles' single-precision approximation (a few ulp in float32), refined in float64
    by Newton's steps (_erfinv_newton_step) to a few ulp there too. +-inf at +-1, nan outside. Slope sqrt(pi) / 2
    exp(erfinv(x)^2) by composition: float32's is the approximation's own; float64's goes through the steps, whose
    slopes converge with their values (the approximation's alone was 70% off at 1 - 1e-14); inf at +-1 and nan
    outside, as PyTorch's (_edge_slopes)."""
    def f(x: Tensor) -> Tensor:
      inside = x.abs() < 1
      xi = inside.where(x, 0.0)  # log(0) and beyond: the untaken branch's slope must stay finite
      w = -((1 - xi) * (1 + xi)).log()
      tail = w >= 5
      central, far = _poly(tail.where(2.5, w) - 2.5, _ERFINV_CENTRAL), _poly(tail.where(w, 9.0).sqrt() - 3, _ERFINV_TAIL)
      y = xi * tail.where(far, central)
      for _ in range(_ERFINV_NEWTON_STEPS if x.dtype == dtypes.float64 else 0): y = y + _erfinv_newton_step(xi, y)
      edge = x.abs() == 1
      outside = (x == 1).where(math.inf, (x == -1).where(-math.inf, math.nan)) + _edge_slopes(x, edge, ~inside & ~edge)
      return inside.where(y, outside)
    return self._math(f)
  def lgamma(self: Tensor) -> Tensor:
    """log |Gamma(x)|: Stirling's series from x = 8 on; below it x = t + n with t in [1/2, 3/2), lgamma(t) from the
    series of lgamma(1 + z) in z = t - 1 and lgamma(x) = lgamma(t) + log(t (t + 1) ... (t + n - 1)), every term of one
    sign, so nothing cancels at the zeros 1 and 2; for x < 1/2 the reflection log(pi / |sin(pi x)|) - lgamma(1 - x), sin
    taken at x's distance to the nearest integer (about 1e-6 absolute where that cancels, at lgamma's zeros below -2).
    inf at 0, the negative integers and +-inf. Slope: the formula's, digamma(x) to about that accuracy; 0 at those
    points (PyTorch: digamma's +-inf or nan)."""
    def positive(x: Tensor) -> Tensor:  # x >= 1/2
      small = x < _GAMMA_SHIFT
      y, xs = small.where(_GAMMA_SHIFT, x), small.where(x, 1.0)
      n = (xs - 0.5).floor()
      t = xs - n  # in [1/2, 3/2)
      product = t
      for i in range(1, _GAMMA_SHIFT - 1): product = product * (n > i).where(t + i, 1.0)
      near = _poly(t - 1, _LGAMMA_NEAR_1[x.dtype.itemsize]) + (n > 0).where(product, 1.0).log()
      r = y.reciprocal()
      stirling = (y - 0.5) * y.log() - y + 0.5 * math.log(2 * math.pi) + r * _poly(r * r, _LGAMMA_STIRLING)
      return small.where(near, stirling)
    def f(x: Tensor) -> Tensor:
      reflect = x < 0.5
      xp = reflect.where(1 - x, x)
      lg = positive(xp.isinf().where(1.0, xp))  # inf - inf in Stirling's series: a constant where unused
      lg = xp.isinf().where(math.inf, lg)
      near = reflect.where(x - x.round(), 0.25)  # sin(pi x) from x's distance to the nearest integer, exact
      sine = (near * math.pi).sin().abs()
      reflected = (sine == 0).where(math.inf, math.log(math.pi) - (sine == 0).where(1.0, sine).log() - lg)
      return (x == -math.inf).where(math.inf, reflect.where(reflected, lg))
    return self._math(f)
  def digamma(self: Tensor) -> Tensor:
    """The logarithmic derivative of Gamma: the asymptotic series log x - 1 / 2x - sum B_2k / (2k x^2k) from x = 8 on, the
    recurrence digamma(x) = digamma(x + 8) - sum 1 / (x + i) below it, digamma(1 - x) - pi / tan(pi x) for x < 1/2, and
    -1 / x - Euler's gamma for |x| < 2**-30 (the next term, pi^2 x / 6, is below float64's rounding there).
    As PyTorch: -inf at +0.0, inf at -0.0, nan at the negative integers and -inf. Slope: the formula's (trigamma), 0 at
    those points."""
    def positive(x: Tensor) -> Tensor:  # x >= 1/2 (or inf)
      small = x < _GAMMA_SHIFT
      y, shift = small.where(x + _GAMMA_SHIFT, x), x.zeros_like()
      for i in range(_GAMMA_SHIFT): shift = shift + (x + i).reciprocal()
      r = y.reciprocal()
      series = y.log() - 0.5 * r + r * r * _poly(r * r, _DIGAMMA_ASYMPTOTIC)
      return small.where(series - small.where(shift, 0.0), series)
    def f(x: Tensor) -> Tensor:
      tiny = (x.abs() < 2.0 ** -30) & (x != 0)  # past pi x's rounding: -1 / x - gamma (-inf past -1 / float32's max)
      x, x_tiny = tiny.where(0.25, x), tiny.where(x, 1.0)  # each branch on its own inputs: an untaken slope is still multiplied by 0
      reflect = x < 0.5
      near = reflect.where(x - x.round(), 0.25)  # tan(pi x) from x's distance to the nearest integer, exact
      pole = reflect & (near == 0)
      cot = math.pi / (pole.where(0.25, near) * math.pi).sin() * (pole.where(0.25, near) * math.pi).cos()
      value = reflect.where(positive(reflect.where(1 - x, x)) - cot, positive(reflect.where(0.5, x)))
      value = tiny.where(-x_tiny.reciprocal() - np.euler_gamma, value)
      at_zero = _negative(x).where(math.inf, -math.inf)  # the pole at 0 keeps the sign of the side it is approached from
      return pole.where((x == 0).where(at_zero, math.nan), (x == -math.inf).where(math.nan, value))
    return self._math(f)

  # ---- rounding, linear interpolation ----
  def floor(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self: Tensor, decimals: int = 0) -> Tensor:
    """Round half to even, as PyTorch: from f = floor(x), up when x - f > 0.5, and at exactly 0.5 only if f is odd.
    (x - floor(x) is exact for every float; large floats are integers already and have x - f = 0.) `decimals` rounds
    x * 10**decimals and divides back, as PyTorch (x / 10**-decimals and multiplies back, for negative decimals)."""
    if not dtypes.is_float(self.dtype): return self
    if decimals and self.dtype.itemsize < 4: return self.float().round(decimals).cast(self.dtype)  # x * 10**d passes float16's range
    if decimals > 0: return (self * 10.0 ** decimals).round() / 10.0 ** decimals
    if decimals < 0: return (self / 10.0 ** -decimals).round() * 10.0 ** -decimals
    f = self.floor()
    frac, odd = self - f, (f * 0.5).floor() * 2 != f
    r = ((frac > 0.5) | ((frac == 0.5) & odd)).where(f + 1, f)
    return (r == 0).where(self * 0, r)  # a zero takes x's sign: round(-0.3) is -0.0
  def lerp(self: Tensor, end: Tensor | Scalar, weight: Tensor | Scalar) -> Tensor:
    """self + weight (end - self), from the nearer end as PyTorch's: end - (end - self)(1 - weight) for |weight| >= 1/2, so
    weight 1 gives end exactly, and lerp(-inf, 2, 0.9) is -inf (not -inf + inf). float16 and bfloat16 compute in float32
    (end - self may pass their range) and round once, as PyTorch."""
    if self.dtype.itemsize < 4 and dtypes.is_float(self.dtype):
      def wide(v: Tensor | Scalar) -> Tensor | Scalar: return v.float() if isinstance(v, type(self)) else v
      return self.float().lerp(wide(end), wide(weight)).cast(self.dtype)
    diff = end - self
    if not isinstance(weight, type(self)): return self + diff * weight if abs(weight) < 0.5 else end - diff * (1 - weight)  # one side only
    return (weight.abs() < 0.5).where(self + diff * weight, end - diff * (1 - weight))

  # ---- sign, remainder, comparison ----
  def sign(self: Tensor) -> Tensor:
    """-1, 0 or 1 in this dtype; +0.0 for +-0.0 and nan, as PyTorch's (numpy's is nan); bool is itself. Slope 0
    everywhere: a float's zero comes from x's own TRUNC, so the result stays in the graph (x.sign().sum().backward() works)."""
    if self.dtype == dtypes.bool: return self
    zero = (self == 0).where(self.trunc(), 0.0).abs() if dtypes.is_float(self.dtype) else self._const_like(0)
    s = (self > 0).where(self._const_like(1), zero)
    return s if dtypes.is_unsigned(self.dtype) else (self < 0).where(self._const_like(-1), s)
  def isnan(self: Tensor) -> Tensor: return self.ne(self) if dtypes.is_float(self.dtype) else self.full_like(False, dtypes.bool)
  def _equal_or_nan(self: Tensor, other: Tensor) -> Tensor:
    """x == y, or both nan: the nans as one value (mode's counts, median's ties)."""
    return (self == other) | (self.isnan() & other.isnan()) if dtypes.is_float(self.dtype) else self == other
  def isinf(self: Tensor, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    if not dtypes.is_float(self.dtype) or not (detect_positive or detect_negative): return self.full_like(False, dtypes.bool)
    return (self == math.inf) | (self == -math.inf) if detect_positive and detect_negative else self == (math.inf if detect_positive else -math.inf)
  def isfinite(self: Tensor) -> Tensor: return (self.isnan() | self.isinf()).logical_not()
  def idiv(self: Tensor, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
    """self / y rounded toward zero (tinygrad's idiv; div with rounding_mode="trunc")."""
    return self.div(y, reverse, rounding_mode="trunc")
  def _int_tensor_pow(self: Tensor, e: Tensor) -> Tensor:
    """self ** e for int tensors of one dtype and shape, exact and wrapping on overflow as PyTorch: square-and-multiply
    over every bit e's dtype has (a select per bit, since each element has its own e). A negative e is 1 / self ** -e
    truncated: 1 for self = 1, +-1 for self = -1 (by e's parity), else 0 (0 ** -1 too, as PyTorch)."""
    positive, out, base = (e < 0).where(0, e), self.ones_like(), self
    for bit in range(8 * self.dtype.itemsize - (0 if dtypes.is_unsigned(self.dtype) else 1)):
      if bit: base = base * base  # self ** 2**bit
      out = positive.bitwise_and(1 << bit).ne(0).where(out * base, out)
    odd = e.bitwise_and(1).ne(0)
    return (e < 0).where(self.eq(1).where(1, self.eq(-1).where(odd.where(-1, 1), 0)).cast(self.dtype), out)
  def copysign(self: Tensor, y: Tensor | Scalar) -> Tensor:
    """|x| with y's sign (-0.0 counts as negative, nan as positive). A Python y joins x once x is a float, not x's own
    dtype first (uint8's copysign(3, -1) is -3.0, as PyTorch's); a tensor y promotes with x as usual."""
    x, y = _float_operands(self, y) if isinstance(y, type(self)) else self._float()._broadcasted(y)
    magnitude = x.abs() + (y.sign() * 0).abs()  # + 0 with slope 0 in y: a y that requires grad gets zeros, as PyTorch's
    return _negative(y).where(-magnitude, magnitude)
  def _fmod_in_range(self: Tensor, d: Tensor, bits: int) -> tuple[Tensor, Tensor]:
    """C's fmod(x, d), exactly, and the quotient trunc(x / d), for finite x and a normal d with |x / d| below
    2**(bits - 4) (bits: the mantissa's): x - q d with q d taken exactly as p + e (Dekker's product of Veltkamp halves).
    q is trunc(x / d) or one past it, never short (a remainder of d or more may need a bit too many): x * (1 / d) is
    within 1.5 ulp of x / d, and is made 2**(3 - bits) larger, less than one unit below 2**(bits - 4); one past, one d
    back is exact.
    The remainder has x's sign, -0.0 included; its slopes: 1 in x, -q in d. The quotient has none."""
    x, q = self, (self / d * (1 + 2.0 ** (3 - bits))).trunc()
    split = _split_factor(self.dtype)
    def halves(v: Tensor) -> tuple[Tensor, Tensor]:
      hi = v * split - (v * split - v)
      return hi, v - hi
    (qh, ql), (dh, dl) = halves(q), halves(d.detach())
    p = q * d
    e = ((((qh * dh - p.detach()) + qh * dl) + ql * dh) + ql * dl).detach()  # q d - p, a rounding correction
    f, negative = (x - p) - e, _negative(x)
    past = _off_sign(f, negative)  # q one past x / d's integer part: one d back
    f, q = past.where(f + (negative == (d < 0)).where(d, -d), f), past.where(q - q.sign(), q).detach()
    return ((f == 0) & negative).where(-(f.detach() - f), f), q  # a zero takes x's sign, slope kept
  def _float_fmod(self: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """C's fmod for float32/64 x and y (same shape), and trunc(x / y) (rounded past 2**bits), both exact as C's while
    |x / y| < 2**60 (float32) or 2**98 (float64); past that only for a power-of-two y, else nan (C's stays exact).
    _fmod_in_range takes the remainder modulo y 2**(k s), k = steps .. 1, then modulo y, each step leaving a quotient
    below 2**s for the next (s = bits - 4; y 2**n is a multiple of y, so each keeps x mod y). Both are scaled by one power
    of two first where the products need it: up for a y too small for Dekker's products (they would lose bits below the
    normal range), down for an x so large that a Veltkamp split of y 2**n would overflow.
    x itself where |x| < |y| (its own remainder, however far apart they are) and for a finite x and y = +-inf; nan for
    x = +-inf, y = 0 or a nan.
    Slopes as PyTorch's: 1 in x, -trunc(x / y) in y (the steps' quotients, each times its power of two)."""
    regular, by_inf = self.isfinite() & y.isfinite() & (y != 0), self.isfinite() & y.isinf()
    x, d = regular.where(self, 0.0), regular.where(y, 1.0)  # finite where the general case is not used (0 * nan)
    bits, steps, tiny = (24, 2, -78) if x.dtype == dtypes.float32 else (53, 1, -916)  # tiny: 2 mantissas above the normal range
    huge = np.finfo(x.dtype.np).maxexp - bits  # from here y 2**n <= x, times the split factor, could overflow
    step, scale = bits - 4, (d.abs() < 2.0 ** tiny).where(x.full_like(2.0 ** (4 * bits)), (x.abs() >= 2.0 ** huge).where(2.0 ** (-2 * bits), 1.0))
    f, ds, quotient = x * scale, d * scale, x.zeros_like()
    for k in range(steps, 0, -1):
      m = ds * 2.0 ** (k * step)
      below = m.isinf() | (f.abs() < m.abs())  # f is its own remainder (and an infinite m would give 0 * inf)
      r, q = f._fmod_in_range(below.where(1.0, m), bits)
      f, quotient = below.where(f, r), below.where(0.0, q) * 2.0 ** (k * step) + quotient
    f, q = f._fmod_in_range(ds, bits)
    # past the steps' reach x is a multiple of its own ulp, which a power of two y divides: a zero of x's sign; else nan
    reached, big_q = x.abs() < d.abs() * 2.0 ** ((steps + 1) * step), (x / d).trunc().detach()
    zero = (x - x.detach()) - big_q.isfinite().where(big_q, 0.0) * (d - d.detach())  # +0.0; slopes 1 in x, -trunc(x / y) in y
    power_of_two = (ds.detach().bitcast(dtypes.int32 if bits == 24 else dtypes.int64) & (2 ** (bits - 1) - 1)) == 0  # ds is normal
    beyond = power_of_two.where(_negative(x).where(-(zero.detach() - zero), zero), zero + math.nan)
    f, quotient = reached.where(f / scale, beyond), reached.where(quotient + q, math.nan)
    own = x.abs() < d.abs()  # x is its own remainder (scaled, it could have lost bits below the normal range)
    f, quotient = own.where(x, f), own.where(0.0, quotient)
    undefined = (regular | by_inf).logical_not()
    nan = (self - self.detach()) + (y - y.detach()) * undefined.where(math.nan, 0.0) + math.nan  # PyTorch's slopes: 1 in x, nan in y
    return regular.where(f, by_inf.where(self, nan)), quotient
  def _float_remainder(self: Tensor, y: Tensor) -> Tensor:
    """x mod y with y's sign for float32/64 x and y, PyTorch's (and C's) way: f = fmod(x, y), then f + y where f is not 0
    and its sign is not y's, rounded once, so a zero keeps x's sign and -1e-30 mod 2 is 2. For a finite x and y = +-inf: x
    where their signs agree (or x is 0), else y. Slopes: 1 in x, -floor(x / y) in y."""
    f = self._float_fmod(y)[0]
    return _off_sign(f, y < 0).where(f + y, f)
  def _float_floordiv(self: Tensor, y: Tensor) -> Tensor:
    """floor(x / y) for float32/64 x and y as PyTorch and Python compute it: fmod's exact quotient trunc(x / y), less one
    where the fmod is not 0 and its sign is not y's; so 1.0 // 0.1 is 9 (x / y itself rounds up to 10) and
    x == (x // y) * y + x % y. Past fmod's reach x / y, a float so large it is an integer. A zero quotient takes x / y's
    sign; x / 0 where y is 0; nan for an infinite x or a nan (Python's and PyTorch's inf // 2)."""
    f, q = self._float_fmod(y)
    q = q.isnan().where(self / y, q)
    q = _off_sign(f, y < 0).where(q - 1, q)
    return (y == 0).where(self / y, (~self.isfinite() | y.isnan()).where(math.nan, (q == 0).where(self / y * 0, q)))
  def fmod(self: Tensor, y: Tensor | Scalar) -> Tensor:
    """C's fmod: the remainder of truncated division, with x's sign (Python's % floors and takes y's); exact for floats
    (see _float_fmod)."""
    x, y = self._broadcasted(y)
    if not dtypes.is_float(x.dtype):
      r = x % y
      return _off_sign(r, x < 0).where(r - y, r)
    return x.float()._float_fmod(y.float())[0].cast(x.dtype) if x.dtype.itemsize < 4 else x._float_fmod(y)[0]
  def isclose(self: Tensor, other: Tensor | Scalar, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> Tensor:
    """|x - y| <= atol + rtol |y| elementwise, or x == y (infinities of one sign); nan is close to nan only with equal_nan."""
    x, y = self._broadcasted(other)
    if x.dtype == dtypes.bool: return x == y
    if not dtypes.is_float(x.dtype):  # the error in the default float, as PyTorch: x - y in the ints may wrap
      return (x == y) | ((x._float() - y._float()).abs() <= atol + rtol * y._float().abs())
    close = (x == y) | ((x - y).abs() <= atol + rtol * y.abs())
    close = close & ~(x.isinf() | y.isinf()) | (x == y)
    return close | (x.isnan() & y.isnan()) if equal_nan else close
  def allclose(self: Tensor, other: Tensor | Scalar, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
    """Whether every element is close (isclose), as a Python bool, as PyTorch's (tinygrad's is a 0-d tensor)."""
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

  # ---- activations ----
  # The activations choose their kinks' slopes as PyTorch's backward does, and keep exp's argument <= 0 (or below a
  # threshold) in every branch: a branch not taken still passes 0 * its slope, and 0 * inf is nan.
  def relu(self: Tensor) -> Tensor:
    """0 where x <= 0, else x (nan stays nan): slope 0 at 0, where maximum(x, 0) would share it 0.5."""
    return (self <= 0).where(self._const_like(0), self)
  def leaky_relu(self: Tensor, neg_slope: float = 0.01) -> Tensor: return (x := self._float()).gt(0).where(x, x * neg_slope)  # neg_slope at 0
  def sigmoid(self: Tensor) -> Tensor:
    """1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) for x < 0: exp only sees -|x|, so sigmoid(-350) is 0 with slope 0
    (1 / (1 + e^350) is 0 too, but its slope is 0 * e^350 = nan) and sigmoid(-100) keeps its subnormal e^-100."""
    def f(x: Tensor) -> Tensor:
      neg = x < 0
      e = neg.where(x, -x).exp()
      r = (1 + e).reciprocal()
      return neg.where(e * r, r)
    return self._math(f)
  def tanh(self: Tensor) -> Tensor:
    """Odd; for |x| < 1/2 its Taylor series, else (1 - u) / (1 + u) with u = exp(-2|x|) <= 1/e, which rounds little
    and reaches 1 with slope 0. Within 3 ulp of tanh (2 sigmoid(2x) - 1, the old form, cancels near 0: tanh(1e-6)
    came out 7% off)."""
    def f(x: Tensor) -> Tensor:  # x >= 0
      near = x < 0.5
      xs, u = near.where(x, 0.0), (-2 * x).exp()  # 0 where unused: the series' powers of a large x overflow, and 0 * inf is nan
      return near.where(xs * _poly(xs * xs, _TANH_NEAR_0[x.dtype.itemsize]), (1 - u) / (1 + u))
    return self._math(lambda x: _odd(x, f))
  def silu(self: Tensor) -> Tensor: return self * self.sigmoid()
  swish = silu
  def softplus(self: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch), computed as
    (max(bx, 0) + log1p(exp(-|bx|))) / beta with both kinks on the same side of 0, so the slope at 0 is 1/2 (log1p: at
    bx = -20, 1 + exp(bx) would round to 1 and the result to 0, where it is 2.06e-9)."""
    x = self._float()
    bx, neg = x * beta, x * beta < 0
    return (bx > threshold).where(x, (neg.where(0.0, bx) + neg.where(bx, -bx).exp().log1p()) / beta)
  def elu(self: Tensor, alpha: float = 1.0) -> Tensor:
    """x for x > 0, else alpha expm1(x) (exp(x) - 1 would give 0 for x = -1e-8); nan takes the x branch, as PyTorch's backward."""
    nonpos = (x := self._float()) <= 0
    return nonpos.where(alpha * nonpos.where(x, 0.0).expm1(), x)
  def hardtanh(self: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """x clipped to [min_val, max_val]; unlike clamp (slope 1 at its bounds) no gradient at the bounds, as PyTorch. An int
    tensor keeps its dtype, the bounds truncated to ints, as PyTorch's."""
    if dtypes.is_int(self.dtype): return self.clamp(int(min_val), int(max_val))
    return (self <= min_val).where(min_val, (self >= max_val).where(max_val, self))
  def hardshrink(self: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0 (nan stays nan); slope 1 outside, 0 inside and at +-lambd, as PyTorch."""
    return ((self >= -lambd) & (self <= lambd)).where(0.0, self._float())
  def softshrink(self: Tensor, lambd: float = 0.5) -> Tensor:
    """x moved toward 0 by lambd, and 0 within [-lambd, lambd] (nan stays nan); slope 1 outside, 0 inside, as PyTorch."""
    if lambd < 0: raise RuntimeError(f"softshrink: lambd must be >= 0, got {lambd}")
    x = self._float()
    return (x > lambd).where(x - lambd, (x < -lambd).where(x + lambd, x.isnan().where(x, 0.0)))
  def gelu(self: Tensor, approximate: str = "tanh") -> Tensor:
    """x P(X <= x) for a standard normal X. The default, approximate="tanh", is tinygrad's Tensor.gelu (PyTorch has no
    Tensor.gelu): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). approximate="none" is the exact form, PyTorch's
    F.gelu default: 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2)."""
    if approximate not in ("none", "tanh"): raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    def tanh_form(x: Tensor) -> Tensor: return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())
    def exact(x: Tensor) -> Tensor: return 0.5 * x * (-x * math.sqrt(0.5)).erfc()  # not 1 + erf: for x << 0 that cancels
    return self._math(tanh_form if approximate == "tanh" else exact)  # halves in float32: x^3 passes float16's range
  def quick_gelu(self: Tensor) -> Tensor: return self * (self * 1.702).sigmoid()
  def relu6(self: Tensor) -> Tensor:
    """min(max(x, 0), 6); integers keep their dtype, as PyTorch's."""
    return self.clamp(0, 6) if dtypes.is_int(self.dtype) else self._float().hardtanh(0.0, 6.0)
  def hardsigmoid(self: Tensor) -> Tensor:
    """(x + 3) / 6 clipped to [0, 1]; slope 1/6 strictly inside (-3, 3) only, so 0 at the bounds and at nan, as PyTorch."""
    x = self._float()
    return ((x > -3) & (x < 3)).where((x + 3) / 6, (x <= -3).where(0.0, (x >= 3).where(1.0, x.detach())))
  def hardswish(self: Tensor) -> Tensor:
    """x (x + 3) / 6 inside (-3, 3), 0 below, x above and at nan (slope 1 there, as PyTorch; x times hardsigmoid's would be nan)."""
    x = self._float()
    inside = (x > -3) & (x < 3)
    xi = inside.where(x, 0.0)  # finite where unused: its branch passes 0 * slope back, and 0 * nan is nan
    return (x <= -3).where(0.0, inside.where(xi * (xi + 3) / 6, x))
  def mish(self: Tensor) -> Tensor:
    """x tanh(softplus(x)), the tanh as a ratio of polynomials in e = exp(-|x|): e (e + 2) / (e (e + 2) + 2) below 0 and
    (1 + 2e) / (1 + 2e + 2e^2) above, both in [0, 1] with bounded slopes, so at |x| near 3e38 the slope is PyTorch's 0 or 1
    (through tanh(2 softplus) the gradient x * 2 overflows to inf, then meets tanh's slope 0)."""
    def f(x: Tensor) -> Tensor:
      neg = x < 0
      e = neg.where(x, -x).exp()
      t = neg.where(e * (e + 2), 1 + 2 * e) / neg.where(e * (e + 2) + 2, 1 + 2 * e + 2 * e * e)
      return x * t
    return self._math(f)
  def selu(self: Tensor) -> Tensor:
    """scale * elu(x, alpha) with SELU's constants."""
    return 1.0507009873554804934193349852946 * self.elu(1.6732632423543772848170429916717)
  def celu(self: Tensor, alpha: float = 1.0) -> Tensor:
    """x for x > 0, else alpha expm1(x / alpha); x itself above 0, so x / alpha cannot overflow there (celu(3e38, 0.5))."""
    nonpos = (x := self._float()) <= 0
    return nonpos.where(alpha * (nonpos.where(x, 0.0) / alpha).expm1(), x)
  def logsigmoid(self: Tensor) -> Tensor: return -(-self).softplus(threshold=math.inf)  # no cut-off: float64 keeps log1p(e^-22)
  def softsign(self: Tensor) -> Tensor: return (x := self._float()) / (1 + x.abs())
  def softmin(self: Tensor, axis: int = -1) -> Tensor: return (-self).softmax(axis)
  def normalize(self: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """x divided by its p-norm along `dim` (Tensor.norm, at least eps), as torch.nn.functional.normalize. A zero norm is
    eps with slope 0, so an all-zero row's gradient is 1/eps, as PyTorch's."""
    x = self._float()
    return x / x.norm(p, dim, keepdim=True).maximum(eps)

  # ---- masks and copies ----
  def clone(self: Tensor) -> Tensor:
    """A copy with memory of its own once realized (the gradient flows through)."""
    return self.contiguous()
  def masked_fill(self: Tensor, mask: Tensor, value: Scalar | Tensor) -> Tensor:
    """`value` where the bool mask (broadcast to x's shape) is true, else x."""
    if mask.dtype != dtypes.bool: raise TypeError(f"masked_fill: the mask must be bool, got {mask.dtype}")
    if (out := mask.where(value, self)).shape != self.shape:
      raise RuntimeError(f"masked_fill: a mask of shape {mask.shape} does not broadcast to the tensor's shape {self.shape}")
    return out.cast(self.dtype)
  def roll(self: Tensor, shifts: int | tuple[int, ...], dims: int | tuple[int, ...] | None = None) -> Tensor:
    """Elements shifted along `dims` by `shifts`, wrapping around (the flattened tensor when dims is None), as torch.roll."""
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    shifts, dims = (shifts,) if isinstance(shifts, int) else tuple(shifts), (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims): raise RuntimeError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    out = self
    for s, d in zip(shifts, dims):
      d = resolve_dim(d, self.ndim)
      if (n := self.shape[d]) == 0 or (s := s % n) == 0: continue
      tail, head = (tuple(w if i == d else None for i in range(self.ndim)) for w in ((n - s, n), (0, n - s)))
      out = out.shrink(tail).cat(out.shrink(head), dim=d)
    return out
  def _triangle(self: Tensor, diagonal: int, lower: bool) -> Tensor:
    if self.ndim < 2: raise RuntimeError(f"{'tril' if lower else 'triu'}: needs at least 2 dimensions, got shape {self.shape}")
    r, c = self.shape[-2:]
    rows = type(self).arange(r, dtype=dtypes.int32, device=self.device).reshape(r, 1)
    cols = type(self).arange(c, dtype=dtypes.int32, device=self.device).reshape(1, c)
    keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
    return keep.where(self, self._const_like(0))
  def tril(self: Tensor, diagonal: int = 0) -> Tensor: return self._triangle(diagonal, True)
  def triu(self: Tensor, diagonal: int = 0) -> Tensor: return self._triangle(diagonal, False)
