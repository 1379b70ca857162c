"""Matrix factorizations over the last two axes: qr (Householder), svd (one-sided Jacobi), det, solve and inverse
(Gauss-Jordan elimination with partial pivoting), cholesky, and tinygrad's Newton-Schulz iteration. Unlike the ops
elsewhere in tensor/, the factorizations are loops that realize as they go (each step reads the last one's result several
times; svd stops when the data says it has converged, solve, inverse and cholesky read back whether the matrix was
singular or not positive-definite), so they are for the small matrices a model factors (an initialization, a layer's
weights, a covariance), and do not belong inside a TinyJit step. Their gradients flow through the steps, as through any
other composition."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tinyspec.dtype import dtypes, least_upper_dtype

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


class LinAlgError(RuntimeError):
  """A matrix the factorization cannot be completed for (singular for inverse and solve, not positive-definite for
  cholesky): a RuntimeError, as torch.linalg.LinAlgError is."""


def _square(op: str, x: Tensor) -> None:
  """The checks every square-matrix op makes: at least 2 dimensions, the last two equal, a float dtype."""
  if x.ndim < 2 or x.shape[-1] != x.shape[-2]: raise RuntimeError(f"{op}: expected a batch of square matrices, got shape {x.shape}")
  if not dtypes.is_float(x.dtype): raise RuntimeError(f"{op}: expected a floating point tensor, got {x.dtype}")


def _gauss_jordan(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
  """Gauss-Jordan elimination with partial pivoting (the row with the largest magnitude in the column, the first on ties,
  as LAPACK's) of square a, (..., n, n), and b, (..., n, k), alike: (a^-1 b, the pivots (..., n), the permutation's sign
  (..., 1, 1)). The pivots are LU's diagonal; a zero one (a singular a) divides by 1 instead, so the determinant's product
  is 0 rather than nan. One realized step per column, its index a buffer so every step runs the same kernels."""
  cls, n = type(a), a.shape[-1]
  rows, cols = cls.arange(n, device=a.device).reshape(n, 1), cls.arange(n, device=a.device)
  def swapped(m: Tensor, j: Tensor, p: Tensor) -> tuple[Tensor, Tensor]:  # rows j and p exchanged; and the new row j
    row_j, row_p = (rows == j).where(m, 0.0).sum(-2, keepdim=True), (rows == p).where(m, 0.0).sum(-2, keepdim=True)
    return (rows == j).where(row_p, (rows == p).where(row_j, m)), row_p
  sign, pivots = cls.ones(*a.shape[:-2], 1, 1, dtype=a.dtype, device=a.device), []
  for step in range(n):
    j = cls(np.array(step, np.int32), device=a.device)
    column = (cols == j).where(a, 0.0).sum(-1, keepdim=True)  # (..., n, 1)
    p = (rows >= j).where(column.abs(), -1.0).argmax(-2, keepdim=True).detach()  # the pivot row: a choice, so no slope
    a, a_row = swapped(a, j, p)
    b, b_row = swapped(b, j, p)
    pivot = (cols == j).where(a_row, 0.0).sum(-1, keepdim=True)  # (..., 1, 1)
    usable = (pivot == 0).where(1.0, pivot)
    factors = (cols == j).where(a, 0.0).sum(-1, keepdim=True)  # each row's multiple of the pivot row to take away
    a = (rows == j).where(a_row / usable, a - factors * (a_row / usable)).realize()
    b = (rows == j).where(b_row / usable, b - factors * (b_row / usable)).realize()
    sign, pivots = ((p == j).where(sign, -sign)).realize(), pivots + [pivot]
  return b, cls.cat(*pivots, dim=-1).squeeze(-2) if pivots else a.sum(-1)[..., :0], sign


def _nonsingular_solve(op: str, a: Tensor, b: Tensor) -> Tensor:
  """a^-1 b by _gauss_jordan, raising LinAlgError for a singular a (a zero pivot, LAPACK's test): the pivots read back once."""
  x, pivots, _ = _gauss_jordan(a, b)
  if pivots.numel() and (pivots == 0).any().item():
    raise LinAlgError(f"{op}: the matrix of shape {a.shape} is singular (a zero pivot), so it has no inverse")
  return x


class LinalgMixin:
  """qr, svd, det, slogdet, logdet, inverse, solve, cholesky and newton_schulz for Tensor."""

  def det(self: Tensor) -> Tensor:
    """The determinant of the last two axes' square matrices, as torch.linalg.det: the product of LU's pivots (Gauss-Jordan
    elimination with partial pivoting) times the row exchanges' sign. The slope is that of the elimination, PyTorch's
    det * inverse^T, except at a singular matrix (PyTorch's is 0 there)."""
    _square("det", self)
    if self.dtype.itemsize < 4: return self.float().det().cast(self.dtype)
    _, pivots, sign = _gauss_jordan(self, self[..., :0])
    return pivots.prod(-1) * sign.squeeze((-2, -1))

  def slogdet(self: Tensor) -> tuple[Tensor, Tensor]:
    """(sign, log |det|) of the last two axes' square matrices, as torch.linalg.slogdet: from the same pivots as det, so a
    determinant past the dtype's range keeps its logarithm. A singular matrix gives (0, -inf)."""
    _square("slogdet", self)
    if self.dtype.itemsize < 4: return tuple(t.cast(self.dtype) for t in self.float().slogdet())
    _, pivots, sign = _gauss_jordan(self, self[..., :0])
    return pivots.sign().prod(-1) * sign.squeeze((-2, -1)), pivots.abs().log().sum(-1)

  def logdet(self: Tensor) -> Tensor:
    """log det, as torch.logdet: nan for a negative determinant, -inf for a zero one."""
    sign, log_magnitude = self.slogdet()
    return (sign < 0).where(math.nan, log_magnitude)

  def solve(self: Tensor, other: Tensor) -> Tensor:
    """X with self @ X = other, as torch.linalg.solve(self, other): other (..., n, k) or a vector (..., n), batches broadcast.
    Gauss-Jordan elimination with partial pivoting; a singular matrix (a zero pivot) raises LinAlgError, as PyTorch's,
    which reads the pivots back once."""
    _square("solve", self)
    vector = other.ndim == 1 or (other.ndim == self.ndim - 1 and other.shape == self.shape[:-1])  # torch's rule for a vector b
    b = other.unsqueeze(-1) if vector else other
    if b.shape[-2] != self.shape[-1]: raise RuntimeError(f"solve: shapes {self.shape} and {other.shape} do not fit A X = B")
    dt = self.dtype if self.dtype == b.dtype else least_upper_dtype(self.dtype, b.dtype)
    if dt.itemsize < 4: return self.float().solve(other.float()).cast(dt)
    batch = tuple(np.broadcast_shapes(self.shape[:-2], b.shape[:-2]))
    a, b = self.cast(dt).expand(*batch, *self.shape[-2:]), b.cast(dt).expand(*batch, *b.shape[-2:])
    x = _nonsingular_solve("solve", a, b)
    return x.squeeze(-1) if vector else x

  def inverse(self: Tensor) -> Tensor:
    """The inverse of the last two axes' square matrices, as torch.linalg.inv: solve(self, I). A singular matrix raises
    LinAlgError."""
    _square("inverse", self)
    if self.dtype.itemsize < 4: return self.float().inverse().cast(self.dtype)
    return _nonsingular_solve("inverse", self, type(self).eye(self.shape[-1], dtype=self.dtype, device=self.device).expand(*self.shape))

  def cholesky(self: Tensor, upper: bool = False) -> Tensor:
    """L, lower triangular with a positive diagonal and L @ L^T = self, from self's lower triangle (the upper is not read),
    as torch.linalg.cholesky; L^T with upper. Column by column: L's column j is (A's column j - L L_j^T) / sqrt(its j-th
    entry). A matrix that is not positive-definite raises LinAlgError (the diagonal is read back once). The slope is
    symmetric, as PyTorch's: that of a symmetric input."""
    _square("cholesky", self)
    if self.dtype.itemsize < 4: return self.float().cholesky(upper).cast(self.dtype)
    cls, n = type(self), self.shape[-1]
    rows, cols = cls.arange(n, device=self.device).reshape(n, 1), cls.arange(n, device=self.device)
    mirrored = (rows >= cols).where(self, self.transpose(-2, -1))  # the lower triangle, reflected
    symmetric = (self + self.transpose(-2, -1)) / 2
    a = mirrored.detach() + (symmetric - symmetric.detach())  # mirrored's values, a symmetric input's slope
    low, positive = cls.zeros(*self.shape, dtype=self.dtype, device=self.device), []
    for step in range(n):
      j = cls(np.array(step, np.int32), device=self.device)
      row_j = (rows == j).where(low, 0.0).sum(-2, keepdim=True)  # (..., 1, n)
      column = (cols == j).where(a, 0.0).sum(-1, keepdim=True) - (low * row_j).sum(-1, keepdim=True)  # (..., n, 1)
      diagonal = (rows == j).where(column, 0.0).sum(-2, keepdim=True)
      root = (diagonal > 0).where(diagonal, 1.0).sqrt()
      low = (cols == j).where((rows == j).where(root, (rows > j).where(column / root, 0.0)), low).realize()
      positive.append((diagonal > 0).all().reshape(1))  # a failed minor takes root 1, so later steps stay finite
    failed = np.flatnonzero(~cls.cat(*positive).numpy()) if positive else ()
    if len(failed):
      raise LinAlgError(f"cholesky: the matrix of shape {self.shape} is not positive-definite (its leading minor of order {failed[0] + 1} is not)")
    return low.transpose(-2, -1) if upper else low

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
