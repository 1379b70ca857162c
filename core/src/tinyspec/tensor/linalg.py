"""Matrix factorizations over the last two axes: qr (Householder), svd (one-sided Jacobi) and tinygrad's Newton-Schulz
iteration. Unlike the ops elsewhere in tensor/, qr and svd are loops that realize as they go (each step reads the last
one's result several times, and svd stops when the data says it has converged), so they are for the small matrices a
model factors (an initialization, a layer's weights), and svd does not belong inside a TinyJit step. Their gradients
flow through the steps, as through any other composition."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tinyspec.dtype import dtypes

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Tensor


def _circle_move(n: int) -> list[int]:
  """The column each position takes from after a round of the round-robin (circle method) over n (even) columns paired as
  (0, 1), (2, 3), ...: position 0 stays, the others move one place around the circle, so in n - 1 rounds every two
  columns are paired once."""
  first, second, h = list(range(0, n, 2)), list(range(1, n, 2)), n // 2
  src = list(range(n))
  if h > 1:
    for i in range(1, h - 1): src[first[i + 1]] = first[i]
    src[second[h - 1]] = first[h - 1]
    for i in range(1, h): src[second[i - 1]] = second[i]
    src[first[1]] = second[0]
  return src


class LinalgMixin:
  """qr, svd and newton_schulz for Tensor."""

  def newton_schulz(self: Tensor, steps: int, params: tuple[float, ...], eps: float = 1e-7) -> Tensor:
    """tinygrad's Newton-Schulz iteration (Muon's orthogonalization) on the last two axes: X scaled to Frobenius norm 1
    (plus eps), then `steps` times X <- sum_i params[i] (X X^T)^i X, an odd polynomial of X; a tall X is done transposed."""
    if self.ndim < 2: raise ValueError(f"newton_schulz: needs at least 2 dimensions, got shape {self.shape}")
    if not params: raise ValueError("newton_schulz: params must hold at least one coefficient")
    if self.shape[-2] > self.shape[-1]: return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    x = self / ((self * self).sum((-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      gram, term = x @ x.transpose(-2, -1), x
      out = params[0] * x
      for p in params[1:]:
        term = gram @ term
        out = out + p * term
      x = out
    return x

  def qr(self: Tensor, mode: str = "reduced") -> tuple[Tensor, Tensor]:
    """(Q, R) with Q orthonormal, R upper triangular and Q @ R = self over the last two axes, as torch.linalg.qr: mode
    "reduced" gives Q (m, k), R (k, n) for k = min(m, n); "complete" (tinygrad's qr) gives Q (m, m), R (m, n). Householder
    reflections with LAPACK's signs (R's diagonal has the sign opposite to the column's), so Q and R are PyTorch's; one
    reflection per column, each realized (the column index is data, so every step runs the same compiled kernels)."""
    if mode not in ("reduced", "complete"): raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    if self.ndim < 2: raise RuntimeError(f"qr: the input must have at least 2 dimensions, got shape {self.shape}")
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"qr: expected a floating point tensor, got {self.dtype}")
    if self.dtype.itemsize < 4: return tuple(f.cast(self.dtype) for f in self.float().qr(mode))  # half types: in float32, rounded once
    (m, n), batch = self.shape[-2:], self.shape[:-2]
    rows, cols = type(self).arange(m, device=self.device).reshape(m, 1), type(self).arange(n, device=self.device)
    r, q = self, type(self).eye(m, dtype=self.dtype, device=self.device).expand(*batch, m, m)
    for step in range(min(m - 1, n)):  # as LAPACK, no reflection for a last row of its own
      j = type(self)(np.array(step, np.int32), device=self.device)  # a buffer, not a constant: every step runs the same kernels
      x = (rows >= j).where((cols == j).where(r, 0.0).sum(-1, keepdim=True), 0.0)  # column j from the diagonal down, (..., m, 1)
      norm, below = x.square().sum(-2, keepdim=True).sqrt(), (rows > j).where(x, 0.0).square().sum(-2, keepdim=True)
      xj = (rows == j).where(x, 0.0).sum(-2, keepdim=True)
      v = x - (rows == j).where((xj < 0).where(norm, -norm), 0.0)  # x - alpha e_j, alpha = -sign(x_j) |x|
      vv = v.square().sum(-2, keepdim=True)
      scale = (below == 0).where(0.0, 2 / (below == 0).where(1.0, vv))  # H = I - scale v v^T; none (LAPACK's too) where x has no
      r = (r - v @ (v.transpose(-2, -1) @ r * scale)).realize()         # entries below the diagonal; realized per step, as
      q = (q - (q @ v * scale) @ v.transpose(-2, -1)).realize()          # the next step reads r and q several times
    r = r.triu()  # the reflections leave rounding below the diagonal; R has exact zeros there
    return (q, r) if mode == "complete" else (q[..., :, :min(m, n)], r[..., :min(m, n), :])

  def svd(self: Tensor, full_matrices: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """(U, S, Vh) with self = U diag(S) Vh over the last two axes, as torch.linalg.svd (and tinygrad's svd): S descending,
    U (m, m) and Vh (n, n), or (m, k) and (k, n) for k = min(m, n) without full_matrices. One-sided Jacobi: pairs of
    columns are rotated until orthogonal, in round-robin rounds of n/2 disjoint pairs, sweeps of n - 1 rounds until
    every pair's cosine is below the dtype's precision (read back once a sweep; at most 30). The signs of a singular
    pair (U's column, Vh's row) are not PyTorch's, which are LAPACK's choice: compare U diag(S) Vh, or S."""
    if self.ndim < 2: raise RuntimeError(f"svd: the input must have at least 2 dimensions, got shape {self.shape}")
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"svd: expected a floating point tensor, got {self.dtype}")
    if self.dtype.itemsize < 4: return tuple(f.cast(self.dtype) for f in self.float().svd(full_matrices))  # as qr
    (m, n), batch = self.shape[-2:], self.shape[:-2]
    if m == 0 or n == 0:  # no singular values: U and Vh are identities (full) or empty, as LAPACK's
      def eye(k: int, keep: int) -> Tensor: return type(self).eye(k, dtype=self.dtype, device=self.device)[:, :keep].expand(*batch, k, keep)
      return eye(m, m if full_matrices else 0), self.sum(-1)[..., :0], eye(n, n if full_matrices else 0).transpose(-2, -1)
    if m < n:  # self^T = U' S V'^T, so self = V' S U'^T
      u, s, vh = self.transpose(-2, -1).svd(full_matrices)
      return vh.transpose(-2, -1), s, u.transpose(-2, -1)
    cls, even = type(self), n + n % 2  # an odd n gets a zero column, which no rotation moves
    w = self.pad([None] * len(batch) + [None, (0, even - n)]).realize()
    eye = cls.eye(even, dtype=self.dtype, device=self.device)
    v = eye.expand(*batch, even, even).realize()
    move = np.zeros((even, even), self.dtype.np)
    move[_circle_move(even), np.arange(even)] = 1  # column d of the result is column src[d]
    move_t = cls(move, device=self.device)
    tol = 8 * float(np.finfo(self.dtype.np).eps) * max(n, 1)
    tiny = 1e-300 if self.dtype == dtypes.float64 else 1e-30  # a zero column's cosines are 0, not 0 / 0
    for _ in range(30):
      for _ in range(even - 1):
        w, v = _rotate_pairs(w, v, batch, m, even)
        w, v = (w @ move_t).realize(), (v @ move_t).realize()
      norms = (w * w).sum(-2).sqrt()
      cosines = (w.transpose(-2, -1) @ w).abs() / (norms.unsqueeze(-1) * norms.unsqueeze(-2) + tiny)
      if (cosines - eye * cosines).max().item() <= tol: break  # every pair orthogonal to the dtype's precision
    squares = (w * w).sum(-2)  # (..., even): the column norms squared, the zero column's included
    s_all = (squares > 0).where((squares > 0).where(squares, 1.0).sqrt(), 0.0)  # sqrt's slope at 0 is inf, and 0 * inf nan
    s, order = s_all.sort(-1, descending=True)
    s, order = s[..., :n], order[..., :n]  # the padding column (norm 0) sorts last
    pick = (order.unsqueeze(-2) == cls.arange(even, device=self.device).reshape(even, 1)).cast(self.dtype)  # (..., even, n)
    u, v = w @ pick, v @ pick  # the columns in S's order
    u = (s > 0).unsqueeze(-2).where(u / (s > 0).where(s, 1.0).unsqueeze(-2), 0.0)
    v = v[..., :n, :]  # without the padding column's row
    if full_matrices or (s == 0).any().item():  # columns for S = 0 (and U's last m - n): an orthonormal complement
      q = u.qr("complete")[0]
      u = cls.cat(s.unsqueeze(-2).expand(*batch, m, n).gt(0).where(u, q[..., :, :n]), q[..., :, n:], dim=-1)
      if not full_matrices: u = u[..., :, :n]
    return u, s, v.transpose(-2, -1)


def _rotate_pairs(w: Tensor, v: Tensor, batch: tuple, m: int, n: int) -> tuple[Tensor, Tensor]:
  """One Jacobi round: each pair of columns (2i, 2i+1) of w rotated so the two are orthogonal, v by the same rotations.
  The rotation (c, s) zeroes gamma = a.b for alpha = |a|^2, beta = |b|^2: zeta = (beta - alpha) / 2 gamma,
  t = sign(zeta) / (|zeta| + sqrt(1 + zeta^2)), c = 1 / sqrt(1 + t^2), s = c t; none where gamma is 0."""
  pw, pv = w.reshape(*batch, m, n // 2, 2), v.reshape(*batch, n, n // 2, 2)
  a, b = pw[..., 0], pw[..., 1]
  alpha, beta, gamma = (a * a).sum(-2), (b * b).sum(-2), (a * b).sum(-2)
  zeta = ((beta - alpha) / (2 * (gamma == 0).where(1.0, gamma))).clamp(-1e18, 1e18)  # zeta^2 stays finite in float32
  t = (zeta >= 0).where(1.0, -1.0) / (zeta.abs() + (1 + zeta * zeta).sqrt())
  t = (gamma == 0).where(0.0, t)
  c = (1 + t * t).rsqrt().unsqueeze(-2)  # one rotation per pair, the same down the pair's columns
  s = c * t.unsqueeze(-2)
  def turn(p: Tensor) -> Tensor:
    x, y = p[..., 0], p[..., 1]
    return (c * x - s * y).unsqueeze(-1).cat((s * x + c * y).unsqueeze(-1), dim=-1).reshape(*p.shape[:-2], n)
  return turn(pw), turn(pv)
