"""Sorting as composition, two ways to one stable order (equal values keep their order, nan after every number, as
PyTorch's stable sort):

- small work: each element's rank along the axis is the count of elements that come before it (smaller, or equal and
  earlier), and a one-hot of the ranks places values and indices. One kernel, but an (n, n) comparison per row: O(n^2).
- large work (rows * n^2 past `RANK_WORK`): a bitonic network over the axis padded to a power of two m, log2(m) (log2(m)
  + 1) / 2 compare-exchange steps of m/2 pairs each, one elementwise kernel per step. Each element travels as one uint64
  key, its value's bits made unsigned-ordered in the high word and its index in the low word, so a compare-exchange is
  a min and a max and ties fall to the index; the values are then read at the sorted indices (one load each). 64-bit
  dtypes leave no room for the index: their keys and indices travel as a pair.

topk of a small k out of a long axis selects before it sorts (_smallest_keys, _top_by_selection): a radix select
finds the k-th element by one counting reduction per key bit, then only the k kept are sorted. unique's result has a
length the data decides, so it reads the values (numpy's unique) instead of composing.

The values keep their gradient (through the one-hot's WHERE, or the gather); the indices have none."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tinyspec.dtype import DType, dtypes, position_dtype
from tinyspec.tensor.movement import resolve_dim
from tinyspec.tensor.reduce import ValuesIndices

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Tensor


RANK_WORK = 1 << 28  # rows * n^2 comparisons (tens of ms on a CPU core) past which the bitonic network is the faster way


def _ordered_bits(x: Tensor, descending: bool) -> Tensor:
  """Unsigned ints (uint32, uint64 for 64-bit dtypes) whose order is x's sort order: a float's sign bit flipped, or all its
  bits where it is negative; an int's sign bit flipped. -0.0 is +0.0 and every nan the one largest key; descending
  inverts them all."""
  wide = x.dtype.itemsize == 8
  u, top = (dtypes.uint64, 1 << 63) if wide else (dtypes.uint32, 1 << 31)
  if dtypes.is_float(x.dtype):
    f = x if wide else x.float()  # float16 and bfloat16 widen exactly
    bits = f.isnan().where(math.nan, f + 0.0).bitcast(u)  # x + 0.0 turns -0.0 into +0.0
    key = (bits >= top).where(~bits, bits | top)
  elif dtypes.is_unsigned(x.dtype) or x.dtype == dtypes.bool: key = x.cast(u)
  else: key = x.cast(dtypes.int64 if wide else dtypes.int32).bitcast(u) ^ top
  return ~key if descending else key

def _bitonic(state: list[Tensor], swap) -> list[Tensor]:
  """The tensors of `state` (..., m), m a power of two, put in order by a bitonic network: at each step the axis is cut
  into blocks of 2j as (lo, hi) halves of j, and where swap(lo, hi) holds the two trade places. The first step of each
  merge of width 2j compares the lower half with the upper one reversed, so every step sorts the same way."""
  pre, m = state[0].shape[:-1], state[0].shape[-1]
  def step(state: list[Tensor], j: int, reversed_hi: bool) -> list[Tensor]:
    halves = [t.reshape(pre + (m // (2 * j), 2, j)) for t in state]
    lo, hi = [h[..., 0, :] for h in halves], [h[..., 1, :] for h in halves]
    if reversed_hi: hi = [h.flip(-1) for h in hi]
    trade = swap(lo, hi)
    new_lo, new_hi = [trade.where(b, a) for a, b in zip(lo, hi)], [trade.where(a, b) for a, b in zip(lo, hi)]
    if reversed_hi: new_hi = [h.flip(-1) for h in new_hi]
    return [a.unsqueeze(-2).cat(b.unsqueeze(-2), dim=-2).reshape(pre + (m,)).contiguous() for a, b in zip(new_lo, new_hi)]
  width = 2
  while width <= m:
    state, j = step(state, width // 2, True), width // 4
    while j >= 1: state, j = step(state, j, False), j // 2
    width *= 2
  return state

def _bitonic_order(x: Tensor, descending: bool, index_dtype: DType) -> Tensor:
  """The indices that sort x's last axis stably, by the bitonic network."""
  n, pre = x.shape[-1], x.shape[:-1]
  m = 1 << (n - 1).bit_length()
  pad = ((0, 0),) * len(pre) + ((0, m - n),)  # padding sorts last: the largest key, and an index past every real one
  key = _ordered_bits(x, descending)
  index = type(x).arange(n, dtype=dtypes.uint32, device=x.device).reshape((1,) * len(pre) + (n,)).expand(*pre, n)
  if key.dtype == dtypes.uint32:  # value bits high, index low: one uint64 per element, all distinct
    packed = (key.cast(dtypes.uint64) << 32) | index.cast(dtypes.uint64)
    [packed] = _bitonic([packed.pad(pad, value=dtypes.uint64.max)], lambda lo, hi: hi[0] < lo[0])
    return (packed & 0xFFFFFFFF).cast(index_dtype).shrink(tuple((0, s) for s in x.shape))
  def before(a: list[Tensor], b: list[Tensor]) -> Tensor: return (a[0] < b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
  state = [key.pad(pad, value=dtypes.uint64.max), index.cast(dtypes.uint64).pad(pad, value=dtypes.uint64.max)]
  return _bitonic(state, lambda lo, hi: before(hi, lo))[1].cast(index_dtype).shrink(tuple((0, s) for s in x.shape))

DIGIT_BITS = 4  # a radix select settles this many bits per counting pass (2**DIGIT_BITS - 1 trials at once)

def _kth_pair(key: Tensor, k: int | Tensor) -> tuple[Tensor, Tensor]:
  """Each row's k-th smallest (key, index) pair ((..., 1) each; k from 1, one for all rows or a tensor of one per row) of
  the unsigned int keys (..., n), found a digit at a time from the top (a radix select: the key's digits, then the
  index's among the keys equal to the k-th's). Each digit is one counting reduction: for every trial digit d, how many
  pairs come before the k-th's digits so far with d in place; the digit is the largest d with fewer than k before it,
  which is how many of the trials have fewer than k, since the counts grow with d."""
  n = key.shape[-1]
  def settle(bits: int, dtype: DType, before) -> Tensor:  # the k-th's value of `bits` bits, a digit per pass
    digits = type(key).arange(1, 1 << DIGIT_BITS, dtype=dtype, device=key.device)
    found = key.shrink(tuple((0, s) for s in key.shape[:-1]) + ((0, 1),)).zeros_like().cast(dtype)
    for shift in reversed(range(0, bits, DIGIT_BITS)):
      trials = (found | (digits << shift)).unsqueeze(-1)  # (..., trials, 1) against the pairs (..., 1, n)
      counts = before(trials).sum(-1, dtype=dtypes.int32)
      # stored each pass (one value per row), not a chain of selects that every later kernel would recompute per element
      found = (found | ((counts < k).sum(-1, keepdim=True, dtype=dtypes.int32).cast(dtype) << shift)).contiguous()
    return found
  pairs_key, pairs_index = key.unsqueeze(-2), type(key).arange(n, dtype=dtypes.int32, device=key.device).unsqueeze(-2)
  kth_key = settle(8 * key.dtype.itemsize, key.dtype, lambda trial: pairs_key < trial)
  tied = kth_key.unsqueeze(-1)
  kth_index = settle(max((n - 1).bit_length(), 1), dtypes.int32, lambda trial: (pairs_key < tied) | ((pairs_key == tied) & (pairs_index < trial)))
  return kth_key, kth_index

def _smallest_keys(key: Tensor, k: int) -> Tensor:
  """A bool mask of each row's k smallest keys (unsigned ints, ..., n), ties to the earlier index: every pair up to the
  k-th smallest."""
  kth_key, kth_index = _kth_pair(key, k)
  index = type(key).arange(key.shape[-1], dtype=dtypes.int32, device=key.device)
  return (key < kth_key) | ((key == kth_key) & (index <= kth_index))

def _top_by_selection(x: Tensor, k: int, largest: bool) -> tuple[Tensor, Tensor]:
  """topk along x's last axis without a full sort: the k kept elements chosen by _smallest_keys, their indices gathered
  in index order by a one-hot of their places among the kept ((..., n, k), so O(n k) per row), then the k sorted."""
  n = x.shape[-1]
  keep = _smallest_keys(_ordered_bits(x, largest), k)
  place = keep.cumsum(-1) - keep.cast(dtypes.int32)
  one_hot = keep.unsqueeze(-1) & (place.unsqueeze(-1) == type(x).arange(k, dtype=dtypes.int32, device=x.device))  # (..., n, k)
  indices = type(x).arange(n, dtype=position_dtype(n), device=x.device).reshape(n, 1)._select(one_hot, (-2,))
  values, order = x.gather(-1, indices).sort(-1, descending=largest)  # stable: equal values keep their index order
  return values, indices.gather(-1, order)


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
    if n > 1 and math.prod(x.shape[:-1]) * n * n > RANK_WORK:
      indices = _bitonic_order(x, descending, position_dtype(n))
      return x.gather(-1, indices).transpose(d, -1), indices.transpose(d, -1)
    place = x._ranks(descending).unsqueeze(-1) == type(self).arange(n, dtype=dtypes.int32, device=self.device)  # (..., i, k)
    values = x.unsqueeze(-1)._select(place, (-2,))  # the one element the one-hot keeps per place k, in x's dtype
    indices = type(self).arange(n, dtype=position_dtype(n), device=self.device).reshape(n, 1)._select(place, (-2,))
    return values.transpose(d, -1), indices.transpose(d, -1)

  def argsort(self: Tensor, dim: int = -1, descending: bool = False) -> Tensor:
    """The indices that sort along `dim` (stable)."""
    return self.sort(dim, descending)[1]

  def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Tensor]:
    """(values, indices) of the k largest (or smallest) along `dim`, in sorted order; among equal values the earlier index
    comes first. Where a sort would be the bitonic network's, a small k selects the k first (_top_by_selection)."""
    d = resolve_dim(dim, self.ndim)
    if not 0 <= k <= (self.shape[d] if self.ndim else 1): raise RuntimeError(f"topk: k={k} is out of range for dimension {dim} of shape {self.shape}")
    rows, n = (math.prod(self.shape) // self.shape[d], self.shape[d]) if self.ndim else (1, 1)
    # where a sort would be the bitonic network's (rows * n * log2(n)^2 / 2 work), a small k selects first (rows * n * k)
    if 0 < k and rows * n * n > RANK_WORK and 2 * k <= (n - 1).bit_length() ** 2:
      x = self.transpose(d, -1)
      if k == 1:  # the first smallest key: an argmin, and the value read there (the slope goes to that one element)
        indices = _ordered_bits(x, largest).argmin(-1, keepdim=True).cast(position_dtype(n))
        values = x.gather(-1, indices)
      else: values, indices = _top_by_selection(x, k, largest)
      return values.transpose(d, -1), indices.transpose(d, -1)
    values, indices = self.sort(d, descending=largest)
    window = tuple((0, k) if a == d else None for a in range(self.ndim))
    return (values.shrink(window), indices.shrink(window)) if self.ndim else (values, indices)

  def kthvalue(self: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """(values, indices) of the k-th smallest (k from 1) along `dim`, as torch.kthvalue; nan after every number, equal
    values count in their order (PyTorch's index among equal values is whichever its selection ends on)."""
    d = resolve_dim(dim, self.ndim)
    n = self.shape[d] if self.ndim else 1
    if not 1 <= k <= n: raise RuntimeError(f"kthvalue: k={k} is out of range for dimension {dim} of shape {self.shape}")
    if not self.ndim: return ValuesIndices(*self.sort())  # the element itself, at index 0
    values, indices = self._kth_smallest(d, k)
    return ValuesIndices(values, indices) if keepdim else ValuesIndices(values.squeeze(d), indices.squeeze(d))

  def _kth_smallest(self: Tensor, d: int, k: int | Tensor) -> tuple[Tensor, Tensor]:
    """The k-th smallest along axis d (k from 1: an int, or a tensor of self's shape with d of size 1) and its index, d
    kept (size 1). Where a sort would be the bitonic network's, a radix select finds it without sorting (_kth_pair)."""
    n, x = self.shape[d], self.transpose(d, -1)
    if math.prod(x.shape[:-1]) * n * n > RANK_WORK:
      indices = _kth_pair(_ordered_bits(x, False), k if isinstance(k, int) else k.transpose(d, -1))[1].cast(position_dtype(n))
    else:
      order = x.sort(-1)[1]
      indices = order[..., k - 1:k] if isinstance(k, int) else order.gather(-1, k.transpose(d, -1).cast(order.dtype) - 1)
    return x.gather(-1, indices).transpose(d, -1), indices.transpose(d, -1)  # gathered: the slope goes to that element

  def mode(self: Tensor, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """(values, indices) of the most frequent value along `dim`, the smallest of those equally frequent, and the last
    index holding it, as torch.mode. The nans count as one value, after every number (PyTorch's picks among rows with nan
    follow its sort's handling of nan, which this does not copy). An (n, n) comparison per row."""
    if not self.ndim: return ValuesIndices(self, type(self).zeros((), dtype=position_dtype(1), device=self.device))
    d = resolve_dim(dim, self.ndim)
    if (n := self.shape[d]) == 0: raise IndexError(f"mode: cannot take the mode of an empty dim {dim} of shape {self.shape}")
    x = self.transpose(d, -1)
    counts = x.unsqueeze(-1)._equal_or_nan(x.unsqueeze(-2)).cast(dtypes.int32).sum(-1, dtype=dtypes.int32)  # how often each one occurs
    most = counts == counts.max(-1, keepdim=True)
    if dtypes.is_float(x.dtype):
      numbers = most & ~x.isnan()
      value = numbers.any(-1, keepdim=True).where(numbers.where(x, math.inf).min(-1, keepdim=True), math.nan)
    else: value = most.where(x, x.dtype.max).min(-1, keepdim=True)
    at = type(self).arange(n, dtype=position_dtype(n), device=self.device)
    index = x._equal_or_nan(value).where(at, -1).max(-1, keepdim=True)  # the last position holding it
    values, indices = x.gather(-1, index).transpose(d, -1), index.transpose(d, -1)  # gathered: the slope goes to that element
    return ValuesIndices(values, indices) if keepdim else ValuesIndices(values.squeeze(d), indices.squeeze(d))

  def searchsorted(self: Tensor, values: Tensor | float, right: bool = False, side: str | None = None, out_int32: bool = False,
                   sorter: Tensor | None = None) -> Tensor:
    """torch.searchsorted(self, values): for each value, how many elements of the ascending sequence `self` (its last axis;
    the axes before it pair with values' own) come before it: those < value, or <= with right (or side="right").
    `sorter` sorts an unsorted self. A value of nan comes after everything; a sequence holding nan has no defined answer.
    An (m, n) comparison per row."""
    if side is not None:
      if side not in ("left", "right"): raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
      if right and side == "left": raise RuntimeError("searchsorted: right=True and side='left' contradict each other")
      right = side == "right"
    seq = self if sorter is None else self.gather(-1, sorter)
    v = values if isinstance(values, type(self)) else type(self)(values, device=self.device)
    if seq.ndim > 1 and seq.shape[:-1] != v.shape[:-1]:
      raise RuntimeError(f"searchsorted: the leading dimensions of the sequence {seq.shape} and of the values {v.shape} must match")
    s = seq.reshape(*seq.shape[:-1], *((1,) * (v.ndim - max(seq.ndim - 1, 0))), seq.shape[-1]) if seq.ndim > 1 else seq
    before = (v.unsqueeze(-1) < s) if right else (v.unsqueeze(-1) <= s)  # negated: a nan value comes after every element
    return (~before).cast(dtypes.int32).sum(-1, dtype=dtypes.int32).cast(dtypes.int32 if out_int32 else position_dtype(seq.shape[-1] + 1))

  def bucketize(self: Tensor, boundaries: Tensor, right: bool = False, out_int32: bool = False) -> Tensor:
    """torch.bucketize: the index of each element's bucket among the ascending 1-d `boundaries`: how many boundaries are
    < it (<= with right)."""
    if boundaries.ndim != 1: raise RuntimeError(f"bucketize: boundaries must be 1-d, got shape {boundaries.shape}")
    return boundaries.searchsorted(self, right=right, out_int32=out_int32)

  def unique(self: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
             dim: int | None = None) -> Tensor | tuple[Tensor, ...]:
    """The distinct values (dim None) or distinct slices along `dim`, ascending, as torch.unique; with return_inverse each
    element's (or slice's) place among them, with return_counts how often each occurs (both position_dtype's). The values
    are read now, since the result's length depends on them, so there is no gradient. Each nan is distinct, as in PyTorch;
    `sorted=False` sorts anyway (PyTorch's CPU does too)."""
    values = self.numpy()
    if dim is None: found, inverse, counts = np.unique(values.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
    else:
      d = resolve_dim(dim, self.ndim)
      if values.size == 0 and self.shape[d] != 0:
        raise RuntimeError(f"unique: shape {self.shape} is empty in a dimension other than dim={dim}, so its slices cannot be told apart")
      found, inverse, counts = np.unique(values, axis=d, return_inverse=True, return_counts=True, equal_nan=False)
    index_dtype = position_dtype(max(self.numel(), 1))
    out = [type(self)(found, device=self.device).cast(self.dtype)]
    inverse = inverse.reshape(self.shape if dim is None else (self.shape[d],))
    if return_inverse: out.append(type(self)(inverse.astype(index_dtype.np), device=self.device))
    if return_counts: out.append(type(self)(counts.astype(index_dtype.np), device=self.device))
    return out[0] if len(out) == 1 else tuple(out)
