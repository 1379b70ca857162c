"""Shared by the rank programs: the data each rank makes (so every rank can compute what every other holds, and so the
numpy answer), and the dtypes and shapes checked."""
from __future__ import annotations

import numpy as np
from tinyspec import Tensor
from tinyspec.dtype import dtypes

DTYPES = [dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.int32, dtypes.int64, dtypes.int8, dtypes.uint8, dtypes.bool]
SHAPES = [(0,), (1,), (7,), (3, 5), (2, 0, 3), (64, 33)]

def values(shape: tuple[int, ...], dtype, rank: int, case: int) -> np.ndarray:
  """Rank `rank`'s data for check `case`: small integers (exact in every dtype, so sums and means compare exactly), or
  booleans; as float32 for bfloat16 (which numpy lacks), else in the dtype itself."""
  rng = np.random.default_rng(1000 * case + rank)
  if dtype is dtypes.bool: return rng.integers(0, 2, shape).astype(bool)
  low = 0 if dtype is dtypes.uint8 else -8
  return rng.integers(low, 9, shape).astype(np.float32 if dtype is dtypes.bfloat16 else dtype.np)

def tensor(arr: np.ndarray, dtype) -> Tensor:
  return Tensor(arr).cast(dtypes.bfloat16) if dtype is dtypes.bfloat16 else Tensor(arr, dtype=dtype)

def as_numpy(t: Tensor) -> np.ndarray:
  """t's values (bfloat16 widened to float32, which holds them exactly)."""
  return t.float().numpy() if t.dtype is dtypes.bfloat16 else t.numpy()
