"""WMMA as the hardware runs it: every lane of a warp hands in its elements of A and B, placed as the TensorCore's layout
says; the matrices are assembled from all lanes, multiplied with exact products and accumulated in the output dtype, and
each lane gets back its elements of D, placed by the same layout. The TC opt builds the fragments from the same table, so
this checks the lowering (a fragment built for the wrong lane or element gives a wrong result), not the table: each
plugin's tests check its tables against the formulas of the vendor's manual."""
from __future__ import annotations

import functools

import numpy as np

from tinyspec.dtype import dtypes
from tinyspec.interpreter.alu import held


@functools.cache
def _places(tc, operand: str) -> tuple[np.ndarray, np.ndarray]:
  """(rows, cols), each shaped (elements, lanes): where each lane's each element of `operand` lives in its matrix."""
  count = tc.elements["ABC".index(operand)]
  at = np.array([[tc.coords(operand, lane, e) for lane in range(tc.threads)] for e in range(count)], dtype=np.int64)
  return at[..., 0], at[..., 1]

def _assemble(tc, operand: str, frag: np.ndarray, shape: tuple[int, int], dt) -> np.ndarray:
  """The (rows, cols, ...) matrices held by the lanes: frag is (elements, lanes, ...)."""
  rows, cols = _places(tc, operand)
  out = np.zeros(shape + frag.shape[2:], dt)
  out[rows, cols] = frag  # lanes that hold copies of one value (RDNA3's A and B) write it more than once
  return out

def run_wmma(tc, a: np.ndarray, b: np.ndarray, c: np.ndarray, lane_axis: int) -> np.ndarray:
  """D = A @ B + C for the fragments a, b, c (each (elements, ...) with the warp's lanes along `lane_axis` + 1 and any
  other axes broadcast); D's fragments in the same form."""
  m, n, k = tc.dims
  shape = np.broadcast_shapes(a.shape[1:], b.shape[1:], c.shape[1:])
  if shape[lane_axis] != tc.threads:
    raise ValueError(f"WMMA {tc.name}: the warp axis has {shape[lane_axis]} lanes, the instruction needs {tc.threads}")
  def lanes_first(x: np.ndarray) -> np.ndarray: return np.moveaxis(np.broadcast_to(x, x.shape[:1] + shape), lane_axis + 1, 1)
  exact = np.int64 if dtypes.is_int(tc.dtype_out) else np.float64 if tc.dtype_out is dtypes.float64 else np.float32
  mat_a = _assemble(tc, "A", lanes_first(a), (m, k), exact)
  mat_b = _assemble(tc, "B", lanes_first(b), (k, n), exact)
  mat_c = _assemble(tc, "C", lanes_first(c), (m, n), exact)
  d = np.einsum("ik...,kj...->ij...", mat_a, mat_b) + mat_c  # products of f16/bf16 are exact in float32
  rows, cols = _places(tc, "C")
  return np.moveaxis(held(d[rows, cols], tc.dtype_out), 1, lane_axis + 1)  # an int32 sum wraps as the hardware's does
