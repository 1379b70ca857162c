"""Transcendental accuracy through the Tensor API on the PYTHON device, which decomposes EXP2/LOG2/SIN into polynomials."""
import numpy as np
import pytest
from tinyspec import Tensor, dtypes


def close(got, want, abs_tol, rel_tol):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  finite = np.isfinite(want)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
  np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
  err = np.abs(got[finite] - want[finite])
  ok = (err <= abs_tol) | (err <= rel_tol * np.abs(want[finite]))
  assert ok.all(), f"worst: x at {np.argmax(err)}, err {err.max():.3g}"

X = np.linspace(-100, 100, 20001, dtype=np.float32)
POS = np.concatenate([np.geomspace(1e-30, 1e6, 10000), np.linspace(0.5, 2, 1001)]).astype(np.float32)

def test_exp_float32():
  with np.errstate(over="ignore"): want = np.exp(X)  # exp(100) overflows float32 to inf, as it should
  close(Tensor(X).exp().numpy(), want, 2e-5, 1e-5)
def test_log_float32(): close(Tensor(POS).log().numpy(), np.log(POS), 2e-5, 1e-5)
def test_sin_float32(): close(Tensor(X).sin().numpy(), np.sin(X), 2e-5, 1e-5)

def test_sin_large_arguments():
  x = np.concatenate([np.linspace(-1e6, 1e6, 20001), np.geomspace(1e2, 1e6, 2000)]).astype(np.float32)
  close(Tensor(x).sin().numpy(), np.sin(x), 3e-3, 0)

def test_special_values():
  x = np.array([np.inf, -np.inf, np.nan, 0.0], np.float32)
  np.testing.assert_array_equal(Tensor(x).exp().numpy(), np.array([np.inf, 0.0, np.nan, 1.0], np.float32))
  np.testing.assert_array_equal(Tensor(np.array([0.0, -1.0, np.nan, np.inf], np.float32)).log().numpy(),
                                np.array([-np.inf, np.nan, np.nan, np.inf], np.float32))
  assert np.isnan(Tensor(np.array([np.inf, np.nan], np.float32)).sin().numpy()).all()

@pytest.mark.parametrize("fn,x", [("exp", np.linspace(-10, 10, 2001)), ("log", np.geomspace(1e-3, 6e4, 2001)), ("sin", np.linspace(-100, 100, 2001))])
def test_float16(fn, x):
  x16 = x.astype(np.float16)
  got = getattr(Tensor(x16), fn)()
  assert got.dtype == dtypes.float16
  want = getattr(np, fn)(x16.astype(np.float32))
  close(got.numpy(), want, 1e-2, 1e-2)

def test_issue_examples():
  # cos(1e7) was sin(1e7 + pi/2) with 1e7 + pi/2 rounded to 10000002 (-0.99999 for -0.907), the slopes of cos and tan
  # at 1e6 were off by 0.016, and (-inf) ** 0.3 was nan (C99 and PyTorch: inf)
  x = np.array([1e7, 1e6, -1e9], np.float32)
  np.testing.assert_array_max_ulp(Tensor(x).cos().numpy(), np.cos(x.astype(np.float64)).astype(np.float32), 2)
  np.testing.assert_array_max_ulp(Tensor(x).tan().numpy(), np.tan(x.astype(np.float64)).astype(np.float32), 4)
  for fn, slope in (("cos", lambda v: -np.sin(v)), ("tan", lambda v: 1 / np.cos(v) ** 2)):
    t = Tensor(x, requires_grad=True)
    getattr(t, fn)().sum().backward()
    close(t.grad.numpy(), slope(x.astype(np.float64)), 1e-6, 1e-6)
  base = np.array([-np.inf, -np.inf, -8.0, 0.0, -0.0, np.nan, 1.0, -1.0], np.float32)
  expo = np.array([0.3, 3.0, 1 / 3, -1.0, -1.0, 0.0, np.nan, np.inf], np.float32)
  got = (Tensor(base) ** Tensor(expo)).numpy()
  np.testing.assert_array_equal(got, [np.inf, -np.inf, np.nan, np.inf, -np.inf, 1.0, 1.0, 1.0])
  assert np.signbit(got[4])

def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray: return np.abs(got - want) / np.spacing(np.abs(want))

def test_erf_erfc_gelu_float64_to_a_few_ulp():
  """float64's erf and erfc are float64's, not float32's (a Chebyshev series of erfc e^(x^2)), checked against the C
  library's through math; exact gelu is x erfc(-x / sqrt 2) / 2, so its far negative tail keeps its digits too."""
  import math
  x = np.concatenate([np.linspace(-6, 6, 1201), np.linspace(6, 27, 211), [1e-300, 1e-8, 0.4999, 0.5, 0.5001]])
  erf, erfc = np.vectorize(math.erf), np.vectorize(math.erfc)
  assert _ulps(Tensor(x).erf().numpy(), erf(x)).max() <= 4
  assert _ulps(Tensor(x).erfc().numpy(), erfc(x)).max() <= 8
  want = 0.5 * x * erfc(-x / math.sqrt(2))
  np.testing.assert_allclose(Tensor(x).gelu(approximate="none").numpy(), want, rtol=5e-14, atol=0)

def test_erfinv_float64_inverts_erf_to_a_few_ulp():
  """erfinv(x) = y to a few ulp where erf(y) = x: checked as a residual, erf(y) - x in the centre, erfc(y) - (1 - x) in
  the tail (1 - x exact), each within what 8 ulp of y move it by (erf's slope times 8 ulp) and the C library's ulp."""
  import math
  x = np.concatenate([np.linspace(-0.999, 0.999, 1999), 1 - np.geomspace(1e-16, 0.5, 300), [1e-300, 0.5, -(1 - 2.0 ** -53)]])
  y = Tensor(x).erfinv().numpy()
  m, ya = np.abs(x), np.abs(y)
  tail = m >= 0.5
  residual = np.where(tail, np.vectorize(math.erfc)(ya) - (1 - m), np.vectorize(math.erf)(ya) - m)
  slack = 2 / math.sqrt(math.pi) * np.exp(-ya * ya) * 8 * np.spacing(ya) + 2 * np.spacing(np.where(tail, 1 - m, m))
  assert (np.abs(residual) <= slack).all(), f"worst at x = {x[np.argmax(np.abs(residual) / slack)]}"
