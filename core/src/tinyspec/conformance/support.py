"""Helpers the conformance tests share: test data per dtype (bfloat16 as float32 holding it) and comparisons with numpy."""
from __future__ import annotations

import numpy as np

from tinyspec import Tensor, TinyJit, dtypes
from tinyspec.dtype import DType, bf16_round
from tinyspec.nn import Linear

# tolerances (rtol, atol) for results of a few float ops in each float dtype: half precision rounds at about 1e-3
TOL = {dtypes.float16: (2e-3, 2e-3), dtypes.bfloat16: (1.6e-2, 1.6e-2), dtypes.float32: (1e-5, 1e-6), dtypes.float64: (1e-12, 1e-13)}

def rng(seed: int = 0) -> np.random.Generator: return np.random.default_rng(seed)

def data(dt: DType, shape: tuple[int, ...], seed: int = 0, lo: float = -4, hi: float = 4) -> np.ndarray:
  """Test values of dtype `dt` (float32 standing in for bfloat16, already rounded to it): floats uniform in [lo, hi),
  ints in [lo, hi] clipped to the dtype's range, bools half true."""
  g = rng(seed)
  if dt == dtypes.bool: return g.random(shape) < 0.5
  if dtypes.is_int(dt): return g.integers(max(lo, dt.min), min(hi, dt.max), shape, endpoint=True).astype(dt.np)
  x = g.uniform(lo, hi, shape).astype(np.float32)
  return bf16_round(x) if dt == dtypes.bfloat16 else x.astype(dt.np)

def tensor(x: np.ndarray, dt: DType, device: str) -> Tensor:
  """A Tensor of dtype `dt` on `device` holding x (bfloat16 tensors are made from float32 by a cast on the device)."""
  return Tensor(x, device=device, dtype=dtypes.float32).cast(dt) if dt == dtypes.bfloat16 else Tensor(x, device=device, dtype=dt)

def read(t: Tensor) -> np.ndarray:
  """A Tensor's values in numpy (bfloat16 widened to float32 on the device, exactly)."""
  return (t.float() if t.dtype == dtypes.bfloat16 else t).numpy()

def np_dtype(dt: DType) -> np.dtype: return np.dtype(np.float32) if dt == dtypes.bfloat16 else dt.np

def check(got: Tensor | np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6, dtype: DType | None = None) -> None:
  """got's values equal want's, within the tolerances for floats and exactly otherwise; the shape must match, and the
  dtype where `dtype` (or, for a Tensor, want's dtype) says which."""
  if isinstance(got, Tensor):
    assert got.dtype == (dtype or dtypes.from_np(np.asarray(want).dtype)), f"dtype {got.dtype}, expected {dtype or np.asarray(want).dtype}"
    got = read(got)
  want = np.asarray(want)
  assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
  if want.dtype.kind == "f" or np.asarray(got).dtype.kind == "f":
    np.testing.assert_allclose(np.asarray(got, np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
  else: np.testing.assert_array_equal(got, want)

def close_to(got: np.ndarray, want: np.ndarray, abs_tol: float, rel_tol: float) -> None:
  """Every finite want is matched within abs_tol or rel_tol (relative to want); infinities and nans exactly."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
  inf = np.isinf(want)
  np.testing.assert_array_equal(got[inf], want[inf])
  fin = np.isfinite(want)
  err = np.abs(got[fin] - want[fin])
  bad = (err > abs_tol) & (err > rel_tol * np.abs(want[fin]))
  if bad.any():
    i = np.argmax(np.where(bad, err, -1))
    raise AssertionError(f"{bad.sum()} of {fin.sum()} values out of tolerance; worst at {want[fin][i]!r}: got {got[fin][i]!r}, error {err[i]:.3g}")

def mlp_training_losses(dev: str, make_optimizer, jit: bool, sizes: tuple[int, int, int], batch: int, seed: int, scale: float = 1.0,
                        steps: int = 8) -> list[float]:
  """The losses of `steps` training steps (forward, backward, optimizer step) of a two-layer ReLU MLP with `sizes`
  (in, hidden, out) on new random data each step, from weights drawn with `seed` times `scale`; with `jit` the step runs
  through TinyJit. The same arguments give the same losses with and without it, if the capture replays correctly."""
  rng = np.random.default_rng(seed)
  l1, l2 = Linear(sizes[0], sizes[1], device=dev), Linear(sizes[1], sizes[2], device=dev)
  params = [l1.weight, l1.bias, l2.weight, l2.bias]
  for p in params: p.assign(rng.standard_normal(p.shape).astype(np.float32) * scale).realize()
  opt = make_optimizer(params)
  def step(x, y):
    opt.zero_grad()
    loss = ((l2(l1(x).relu()) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss
  run = TinyJit(step) if jit else step
  return [run(Tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32), device=dev),
              Tensor(rng.standard_normal((batch, sizes[2])).astype(np.float32), device=dev)).item() for _ in range(steps)]
