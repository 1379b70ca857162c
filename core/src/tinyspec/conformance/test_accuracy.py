"""Transcendental accuracy against numpy, whether the device renders EXP2/LOG2/SIN natively or takes the core's
polynomial decompositions: float32 exp, log and sin within 2e-5 absolute or 1e-5 relative on [-100, 100] (log on
(0, 1e6]), sin within 3e-3 up to |x| = 1e6, the special values, float16 within 1e-2, and float64 close to its precision."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import close_to

X = np.linspace(-100, 100, 20001, dtype=np.float32)
POS = np.concatenate([np.geomspace(1e-30, 1e6, 10000), np.linspace(0.5, 2, 1001)]).astype(np.float32)

def want(f, x: np.ndarray) -> np.ndarray:
  """numpy's value at the exact inputs, computed in float64 and rounded to the input's format."""
  with np.errstate(all="ignore"): return f(x.astype(np.float64)).astype(x.dtype)

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
