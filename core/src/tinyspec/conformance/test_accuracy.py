"""Transcendental accuracy against numpy, whether the device renders EXP2/LOG2/SIN natively or takes the core's
polynomial decompositions: float32 exp, log and sin within 2e-5 absolute or 1e-5 relative on [-100, 100] (log on
(0, 1e6]), sin within 3e-3 up to |x| = 1e6, the special values, float16 within 1e-2, and float64 close to its precision.
Then in ulps: sin, cos and tan up to |x| = 1e9 (huge arguments are reduced exactly, cos is not sin(x + pi/2)) and their
gradients there; exp, exp2, log, log2, sqrt and pow over their whole float32 domains; pow's special values as C99's pow
(and PyTorch's torch.pow) has them. The ulp bounds leave room for a native sin, exp2 or log2 within OpenCL's 4 ulp."""
import math

import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import close_to

X = np.linspace(-100, 100, 20001, dtype=np.float32)
POS = np.concatenate([np.geomspace(1e-30, 1e6, 10000), np.linspace(0.5, 2, 1001)]).astype(np.float32)

def want(f, x: np.ndarray, *more: np.ndarray) -> np.ndarray:
  """numpy's value at the exact inputs, computed in float64 and rounded to the first input's format."""
  with np.errstate(all="ignore"): return f(x.astype(np.float64), *(m.astype(np.float64) for m in more)).astype(x.dtype)

@pytest.mark.parametrize("fn,x", [("exp", X), ("log", POS), ("sin", X), ("cos", X), ("exp2", X / 2), ("log2", POS)])
def test_float32(dev, fn, x):
  close_to(getattr(Tensor(x, device=dev), fn)().numpy(), want(getattr(np, fn), x), 2e-5, 1e-5)

def test_sin_large_arguments(dev):
  x = np.concatenate([np.linspace(-1e6, 1e6, 20001), np.geomspace(1e2, 1e6, 2000)]).astype(np.float32)
  close_to(Tensor(x, device=dev).sin().numpy(), want(np.sin, x), 3e-3, 0)

def test_sqrt_and_division(dev):
  # the same bound as the transcendentals: the core's decompositions of SQRT and RECIP are not correctly rounded
  x, y = POS, POS[::-1].copy()
  close_to(Tensor(x, device=dev).sqrt().numpy(), want(np.sqrt, x), 0, 1e-5)
  close_to((Tensor(x, device=dev) / Tensor(y, device=dev)).numpy(), x.astype(np.float64) / y, 0, 1e-5)
  close_to(Tensor(x, device=dev).rsqrt().numpy(), want(lambda v: 1 / np.sqrt(v), x), 0, 1e-5)

def test_special_values(dev):
  x = np.array([np.inf, -np.inf, np.nan, 0.0], np.float32)
  np.testing.assert_array_equal(Tensor(x, device=dev).exp().numpy(), np.array([np.inf, 0.0, np.nan, 1.0], np.float32))
  logs = Tensor(np.array([0.0, -1.0, np.nan, np.inf, 1.0], np.float32), device=dev).log().numpy()
  np.testing.assert_array_equal(logs, np.array([-np.inf, np.nan, np.nan, np.inf, 0.0], np.float32))
  assert np.isnan(Tensor(np.array([np.inf, -np.inf, np.nan], np.float32), device=dev).sin().numpy()).all()
  np.testing.assert_array_equal(Tensor(np.array([0.0, 1.0, np.inf], np.float32), device=dev).sqrt().numpy(), [0.0, 1.0, np.inf])
  assert np.isnan(Tensor(np.array([-1.0], np.float32), device=dev).sqrt().numpy()).all()

@pytest.mark.parametrize("fn,x", [("exp", np.linspace(-10, 10, 2001)), ("log", np.geomspace(1e-3, 6e4, 2001)), ("sin", np.linspace(-100, 100, 2001))])
def test_float16(dev, caps, fn, x):
  caps.require_dtype(dtypes.float16)
  x16 = x.astype(np.float16)
  got = getattr(Tensor(x16, device=dev), fn)()
  assert got.dtype == dtypes.float16
  close_to(got.numpy(), getattr(np, fn)(x16.astype(np.float32)), 1e-2, 1e-2)

@pytest.mark.parametrize("fn,x,tol", [("exp", np.linspace(-700, 700, 20001), 1e-13), ("log", np.geomspace(1e-300, 1e300, 20001), 1e-14),
                                      ("sin", np.linspace(-100, 100, 20001), 1e-13)])
def test_float64(dev, caps, fn, x, tol):
  caps.require_dtype(dtypes.float64)
  got = getattr(Tensor(x, device=dev), fn)()
  assert got.dtype == dtypes.float64
  close_to(got.numpy(), getattr(np, fn)(x), tol, tol)

# ---- in ulps ----

def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """|got - want| in ulps of want in want's dtype; equal values (infinities, zeros of the same sign, nans) are 0 apart,
  a zero of the other sign or an infinity or nan where want has none infinitely many."""
  g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
  with np.errstate(all="ignore"): err = np.abs(g - w) / np.spacing(np.abs(want)).astype(np.float64)
  same = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
  return np.where(same, 0.0, np.where(np.isfinite(g) & np.isfinite(w) & (w != 0), err, np.inf))

def assert_ulps(got: np.ndarray, want: np.ndarray, bound: float, x: np.ndarray) -> None:
  err = ulps(got, want)
  i = int(np.argmax(err))
  assert err[i] <= bound, f"{(err > bound).sum()} of {err.size} beyond {bound} ulp; worst {err[i]:g} at x={x[i]!r}: got {got[i]!r}, want {want[i]!r}"

def trig_args(npdt, hi: float, n: int = 6000) -> np.ndarray:
  """+-x: the named huge arguments, log-uniform up to hi, the floats nearest k pi/2 up to hi (the hardest to reduce), [-10, 10]."""
  g = np.random.default_rng(1)
  named = [1e6, 1e7, 1e9, 3e8, 12345.678, 65504.0, 1.5707964, 3.1415927, 1e-30, 0.0, 2.0 ** -20]
  near = np.round(np.exp(g.uniform(0, math.log(hi / (math.pi / 2)), n))) * (math.pi / 2)
  x = np.concatenate([[v for v in named if v <= hi], np.exp(g.uniform(math.log(1e-3), math.log(hi), n)), near, g.uniform(0, 10, n)]).astype(npdt)
  return np.concatenate([x, -x])

TRIG_BOUND = {"sin": 4, "cos": 4, "tan": 8}  # tan = sin / cos: both errors and the division's rounding

@pytest.mark.parametrize("fn", ["sin", "cos", "tan"])
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16], ids=lambda d: d.name)
def test_trig_huge_arguments(dev, caps, fn, dt):
  caps.require_dtype(dt)
  x = trig_args(dt.np, 65504.0 if dt == dtypes.float16 else 1e9)
  got = getattr(Tensor(x, device=dev), fn)().numpy()
  assert got.dtype == x.dtype
  assert_ulps(got, want(getattr(np, fn), x), 1 if dt == dtypes.float16 else TRIG_BOUND[fn], x)  # float16 rounds a float32 result once

def test_trig_signs_and_specials(dev):
  x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
  sin, cos, tan = (getattr(Tensor(x, device=dev), f)().numpy() for f in ("sin", "cos", "tan"))
  for got, want_ in ((sin, [0.0, -0.0]), (cos, [1.0, 1.0]), (tan, [0.0, -0.0])):
    assert (ulps(got, np.array(want_ + [np.nan] * 3, np.float32)) == 0).all(), got

def test_trig_gradients_at_huge_arguments(dev):
  # d cos = -sin and d tan = 1 / cos**2: through SIN's slope at the reduced argument, so as accurate as the values
  x = np.array([1e6, -1e6, 1e7, 1e9, 123456.7, 3.0, 0.5], np.float32)
  for fn, slope, tol in (("cos", lambda v: -np.sin(v), 1e-6), ("tan", lambda v: 1 / np.cos(v) ** 2, 1e-5)):
    t = Tensor(x, device=dev, requires_grad=True)
    getattr(t, fn)().sum().backward()
    close_to(t.grad.numpy(), slope(x.astype(np.float64)), tol, tol)

def _domain(fn: str, n: int = 20000) -> tuple[np.ndarray, ...]:
  """float32 arguments over fn's whole domain: exp and exp2 from the subnormal results to overflow, the logs and sqrt
  log-uniform over all positive floats, pow with b log2 a across the normal range and negative bases with integral b."""
  g, fi = np.random.default_rng(2), np.finfo(np.float32)
  if fn in ("exp", "exp2"):
    base = math.e if fn == "exp" else 2.0
    return (g.uniform(math.log(float(fi.smallest_subnormal), base) * 1.01, math.log(float(fi.max), base) * 1.01, n).astype(np.float32),)
  if fn in ("log", "log2", "sqrt"): return (np.exp(g.uniform(math.log(float(fi.smallest_subnormal)), math.log(float(fi.max)), n)).astype(np.float32),)
  u = g.uniform(-20, 20, n)
  a = np.concatenate([np.exp2(u), -np.exp2(g.uniform(-4, 4, n // 4))]).astype(np.float32)
  b = np.concatenate([g.uniform(-125, 125, n) / u, np.round(g.uniform(-30, 30, n // 4))]).astype(np.float32)
  return a, b

@pytest.mark.parametrize("fn", ["exp", "exp2", "log", "log2", "sqrt", "pow"])
def test_float32_ulps(dev, fn):
  args = _domain(fn)
  if fn == "pow": got, ref = (Tensor(args[0], device=dev) ** Tensor(args[1], device=dev)).numpy(), want(np.power, *args)
  else: got, ref = getattr(Tensor(args[0], device=dev), fn)().numpy(), want(getattr(np, fn), args[0])
  assert_ulps(got, ref, 4, args[0])

# C99's pow (F.9.4.4), which torch.pow follows: (base, exponent, result)
NAN, INF = math.nan, math.inf
POW_SPECIALS = [
  (NAN, 0.0, 1.0), (INF, -0.0, 1.0), (-INF, 0.0, 1.0), (0.0, 0.0, 1.0), (1.0, NAN, 1.0), (1.0, INF, 1.0), (1.0, -INF, 1.0),  # x**0, 1**y
  (-1.0, INF, 1.0), (-1.0, -INF, 1.0),                                                                                      # (-1)**+-inf
  (-8.0, 1 / 3, NAN), (-2.0, 0.5, NAN), (-1.0, -0.5, NAN),                                                                  # no real power
  (0.0, -1.0, INF), (-0.0, -1.0, -INF), (-0.0, -3.0, -INF), (-0.0, -2.0, INF), (-0.0, -0.5, INF), (0.0, -INF, INF), (-0.0, -INF, INF),
  (-0.0, 3.0, -0.0), (0.0, 3.0, 0.0), (-0.0, 2.0, 0.0), (-0.0, 0.5, 0.0), (-0.0, INF, 0.0),                                # zero bases
  (0.5, -INF, INF), (-0.5, -INF, INF), (2.0, -INF, 0.0), (-2.0, -INF, 0.0), (0.5, INF, 0.0), (-0.5, INF, 0.0), (2.0, INF, INF), (-2.0, INF, INF),
  (-INF, -3.0, -0.0), (-INF, -1.0, -0.0), (-INF, -2.0, 0.0), (-INF, -0.3, 0.0), (-INF, 3.0, -INF), (-INF, 0.3, INF), (-INF, 2.0, INF),
  (INF, -0.5, 0.0), (INF, 0.5, INF), (NAN, 1.0, NAN), (2.0, NAN, NAN), (NAN, NAN, NAN),                                      # infinite bases, nan
  (-2.0, 3.0, -8.0), (-2.0, -3.0, -0.125), (-2.0, 2.0, 4.0), (-2.0, 129.0, -INF), (2.0, -149.0, 2.0 ** -149), (-2.0, -149.0, -(2.0 ** -149)),
]

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64], ids=lambda d: d.name)
def test_pow_special_values(dev, caps, dt):
  caps.require_dtype(dt)
  a, b, want_ = (np.array(v, dt.np) for v in zip(*POW_SPECIALS))
  if dt == dtypes.float64: want_[-3:] = [-(2.0 ** 129), 2.0 ** -149, -(2.0 ** -149)]  # finite there
  got = (Tensor(a, device=dev) ** Tensor(b, device=dev)).numpy()
  bad = ulps(got, want_) > 0
  assert not bad.any(), [(x, y, g, w) for x, y, g, w, k in zip(a, b, got, want_, bad) if k]

def test_pow_special_values_with_scalars(dev):
  # a Python exponent (integral ones up to 4 multiply instead of calling POW) and a Python base: numpy's power, but for
  # the exponents +-0.5, which are sqrt and rsqrt in PyTorch ((-0.0) ** -0.5 = -inf, (-inf) ** +-0.5 = nan)
  bases = np.array([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, -8.0, 3.0], np.float32)
  for e in (0.3, 3, -1, 0, 1 / 3, -2, 0.5, -0.5, 2.5, 7, -7.0, 1e10):
    with np.errstate(all="ignore"): ref = np.sqrt(bases) if e == 0.5 else 1 / np.sqrt(bases) if e == -0.5 else np.power(bases, np.float32(e))
    assert_ulps((Tensor(bases, device=dev) ** e).numpy(), ref, 2, bases)
  for base in (1.0, 2.0, 0.5, -2.0, 0.0):
    with np.errstate(all="ignore"): ref = np.power(np.float32(base), bases)
    assert_ulps((base ** Tensor(bases, device=dev)).numpy(), ref, 2, bases)
