"""Sorting as composition: each element's rank along the axis is the count of elements that come before it (smaller, or
equal and earlier: a stable order, nan after every number as PyTorch), and a one-hot of the ranks places values and
indices. It is O(n^2) in the axis' length (an (n, n) comparison per row): meant for the axes models sort (top-k over a
vocabulary, a few thousand at most), not for sorting millions of values. The values keep their gradient (through the
one-hot's WHERE); the indices have none."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tinyspec.dtype import dtypes, position_dtype
from tinyspec.tensor.movement import resolve_dim

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Tensor


class SortMixin:
  """sort, argsort and topk for Tensor, with PyTorch's arguments and results."""

  def _ranks(self: Tensor, descending: bool) -> Tensor:
    """Each element's place in the stable sorted order of the last axis (int32)."""
    n = self.shape[-1]
    a, b = self.unsqueeze(-1), self.unsqueeze(-2)  # a: element i (rows), b: element j (columns)
    before = (b > a) if descending else (b < a)
    if dtypes.is_float(self.dtype):  # nan is larger than every number, and equal to nan
      na, nb = a.isnan(), b.isnan()
      before = before | ((nb & ~na) if descending else (na & ~nb))
      same = (b == a) | (na & nb)
    else: same = b == a
    i = type(self).arange(n, dtype=dtypes.int32, device=self.device)
    earlier = i.reshape(1, n) < i.reshape(n, 1)  # j < i
    return (before | (same & earlier)).cast(dtypes.int32).sum(-1, dtype=dtypes.int32)

  def sort(self: Tensor, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
    """(values, indices) sorted along `dim`, stable: equal values keep their order (torch.sort with stable=True)."""
    if self.ndim == 0: return self, type(self).zeros((), dtype=position_dtype(1), device=self.device)
    d = resolve_dim(dim, self.ndim)
    x = self.transpose(d, -1)
    n = x.shape[-1]
    place = x._ranks(descending).unsqueeze(-1) == type(self).arange(n, dtype=dtypes.int32, device=self.device)  # (..., i, k)
    values = x.unsqueeze(-1)._select(place, (-2,))  # the one element the one-hot keeps per place k, in x's dtype
    indices = type(self).arange(n, dtype=position_dtype(n), device=self.device).reshape(n, 1)._select(place, (-2,))
    return values.transpose(d, -1), indices.transpose(d, -1)

  def argsort(self: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
    """The indices that sort along `dim` (stable)."""
    return self.sort(dim, descending)[1]

  def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Tensor]:
    """(values, indices) of the k largest (or smallest) along `dim`, in sorted order; among equal values the earlier index
    comes first."""
    d = resolve_dim(dim, self.ndim)
    if not 0 <= k <= (self.shape[d] if self.ndim else 1): raise RuntimeError(f"topk: k={k} is out of range for dimension {dim} of shape {self.shape}")
    values, indices = self.sort(d, descending=largest)
    window = tuple((0, k) if a == d else None for a in range(self.ndim))
    return (values.shrink(window), indices.shrink(window)) if self.ndim else (values, indices)
