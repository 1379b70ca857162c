"""Indexing as compositions: getitem and setitem, gather and scatter are a one-hot mask compared against an arange,
selected with WHERE and summed away (seed 001's gather), so no INDEX appears in a tensor graph. Nothing is realized, except
that a bool mask index is turned into positions (its result's shape depends on its values)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tinyspec.dtype import dtypes, position_dtype
from tinyspec.tensor.movement import _INT, ShapeError, _sint, broadcast_shape, movement_base, resolve_dim, simplified
from tinyspec.uop.ops import Ops
from tinyspec.uop.properties import sint_is
from tinyspec.uop.uop import UOp

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Tensor


def _fitted(value: Tensor, shape: tuple, op: str) -> Tensor:
  """A value written at an index, broadcast to the indexed shape; PyTorch first drops its leading 1s."""
  v = value
  while v.ndim > len(shape) and v.shape[0] == 1: v = v.reshape(v.shape[1:])
  try: return v._broadcast_to(shape)
  except (ValueError, RuntimeError):
    raise ShapeError(f"{op}: a value of shape {value.shape} does not broadcast to the indexed shape {shape}") from None


def _is_region(indices: Any) -> bool:
  """Whether an index picks a plain region: ints, slices with step 1, None and Ellipsis only."""
  return all(e is None or e is Ellipsis or isinstance(e, _INT) and not isinstance(e, bool) or isinstance(e, slice) and e.step in (None, 1)
             for e in (indices if isinstance(indices, tuple) else (indices,)))


class IndexPlan(NamedTuple):
  """An index parsed against a shape: the axes to flip, then each axis' (start, stop) to shrink to, then the axes to
  take every step-th element of ({axis: (count, step)}), then the result's shape (None adds its 1s, ints drop their
  axes), then the advanced indices as (position in that shape, index Tensor) pairs, gathered last."""
  flips: list[int]
  bounds: list[tuple[Any, Any]]
  strides: dict[int, tuple[int, int]]
  shape: tuple
  advanced: list[tuple[int, Tensor]]


class IndexingMixin:
  def _select(self: Tensor, mask: Tensor, axes: tuple[int, ...], reduce: Ops = Ops.ADD) -> Tensor:
    """Reduce `self` over `axes` keeping only where `mask` (one-hot along them) is true: the gather of seed 001.
    The WHERE (not a multiply) keeps inf and nan elsewhere out of the result; bool values use MAX."""
    if self.dtype == dtypes.bool:  # as uint8, where the sum of the one picked value is a MAX
      return self.cast(dtypes.uint8)._select(mask, axes, Ops.MAX if reduce is Ops.ADD else reduce).cast(dtypes.bool)
    return mask.where(self, 1 if reduce is Ops.MUL else 0)._reduce(reduce, axes)

  def _index_tensor(self: Tensor, idx: Any, dim: int) -> Tensor:
    """An integer index (list, array or Tensor) for axis `dim`, negatives wrapped. Python and numpy data are checked now."""
    size = self.shape[dim]
    if isinstance(idx, np.ndarray):
      arr = idx
      if arr.size == 0: arr = arr.astype(np.int32)
      if arr.dtype.kind not in "iu": raise IndexError(f"tensors used as indices must be integer or bool, got {arr.dtype}")
      if arr.size and not (-size <= arr.min() and arr.max() < size):
        bad = arr[(arr < -size) | (arr >= size)].flat[0]
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
      return type(self)(np.where(arr < 0, arr + size, arr).astype(np.int32 if size <= 2 ** 31 else np.int64), device=self.device)
    if not dtypes.is_int(idx.dtype): raise IndexError(f"tensors used as indices must be integer or bool, got {idx.dtype}")
    if idx.device != self.device: raise RuntimeError(f"index on {idx.device}, tensor on {self.device}")
    if idx.dtype != dtypes.int64: idx = idx.cast(dtypes.int64 if idx.dtype.itemsize >= 4 and dtypes.is_unsigned(idx.dtype) else dtypes.int32)
    return (idx < 0).where(idx + size, idx)

  def _take(self: Tensor, dims: list[int], idxs: list[Tensor]) -> Tensor:
    """Advanced indexing of axes `dims` by broadcast index tensors: the axes go to the front, a one-hot mask of shape
    (broadcast index shape) + (their sizes) selects, a sum removes them. The index dims land where the first indexed axis
    was if the indexed axes are adjacent, else in front (PyTorch's and numpy's rule)."""
    try: bshape = broadcast_shape(*(t.shape for t in idxs))
    except RuntimeError as e: raise IndexError(f"indexing tensors could not be broadcast together: {e}") from None
    nb, k = len(bshape), len(dims)
    rest = [d for d in range(self.ndim) if d not in dims]
    x = self.permute(dims + rest)
    x = x.reshape((1,) * nb + x.shape)
    mask = None
    for j, (d, t) in enumerate(zip(dims, idxs)):
      pos = type(self).arange(self.shape[d], dtype=t.dtype, device=self.device).reshape((1,) * (nb + j) + (self.shape[d],) + (1,) * (k - j - 1))
      m = t.reshape((1,) * (nb - t.ndim) + t.shape + (1,) * k) == pos
      mask = m if mask is None else mask & m
    out = x._select(mask.reshape(mask.shape + (1,) * len(rest)), tuple(range(nb, nb + k)))
    if dims == list(range(dims[0], dims[0] + k)) and dims[0] > 0:
      out = out.permute(list(range(nb, nb + dims[0])) + list(range(nb)) + list(range(nb + dims[0], out.ndim)))
    return out

  def _index_plan(self: Tensor, indices: Any) -> IndexPlan:
    """What an index does to this tensor's shape (see IndexPlan), checked: out-of-range ints and lists raise IndexError."""
    parsed: list[Any] = []
    for e in (indices if isinstance(indices, tuple) else (indices,)):
      if isinstance(e, (list, tuple, np.ndarray)): e = np.asarray(e)
      if isinstance(e, IndexingMixin) and e.dtype == dtypes.bool: e = e.numpy()  # a mask's result shape depends on its values
      if isinstance(e, np.ndarray) and e.dtype == np.bool_:
        if e.ndim == 0: raise IndexError("a 0-d bool index is not supported")
        e = ("mask", e)  # covers e.ndim axes, becomes one position index per axis
      parsed.append(e)
    n_ell = sum(e is Ellipsis for e in parsed)
    if n_ell > 1: raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(e[1].ndim if isinstance(e, tuple) else 1 for e in parsed if e is not None and e is not Ellipsis)
    if used > self.ndim: raise IndexError(f"too many indices for a tensor of dimension {self.ndim} (got {used})")
    fill = [slice(None)] * (self.ndim - used)
    parsed = [f for e in parsed for f in (fill if e is Ellipsis else [e])] + ([] if n_ell else fill)
    bounds, flips, strides, out_shape, adv, d = [], [], {}, [], [], 0
    for e in parsed:
      if e is None: out_shape.append(1); continue
      if isinstance(e, tuple):  # a bool mask over axes d.. d+ndim-1
        if e[1].shape != self.shape[d:d + e[1].ndim]:
          raise IndexError(f"the mask of shape {e[1].shape} does not match the indexed shape {self.shape[d:d + e[1].ndim]} at dimension {d}")
        for a, pos in enumerate(np.nonzero(e[1]), start=d):
          adv.append((len(out_shape), self._index_tensor(pos, a))); out_shape.append(self.shape[a]); bounds.append((0, self.shape[a]))
        d += e[1].ndim; continue
      size = self.shape[d]
      if isinstance(e, _INT) and not isinstance(e, bool):
        if not -size <= e < size: raise IndexError(f"index {e} is out of bounds for dimension {d} with size {size}")
        bounds.append((int(e) % size, int(e) % size + 1))
      elif isinstance(e, slice) and (isinstance(e.start, UOp) or isinstance(e.stop, UOp)):  # a symbolic window: x[:n], x[n:n + 1]
        if e.step not in (None, 1): raise IndexError(f"a slice with a symbolic bound takes no step, got {e}")
        start, stop = _sint(0 if e.start is None else e.start), _sint(size if e.stop is None else e.stop)
        if isinstance(start, int) and start < 0 or isinstance(stop, int) and stop < 0:
          raise IndexError(f"a slice with a symbolic bound counts from the start: negative bounds are not supported, got {e}")
        bounds.append((start, stop)); out_shape.append(simplified(stop - start) if not sint_is(start, 0) else stop)
      elif isinstance(e, slice):
        start, stop, step = e.indices(size)
        n = len(range(start, stop, step))
        if step < 0: flips.append(d); start, step = size - 1 - start, -step
        bounds.append((start, start + (n - 1) * step + 1) if n else (0, 0))
        if step > 1 and n > 1: strides[d] = (n, step)
        out_shape.append(n)
      elif isinstance(e, (np.ndarray, IndexingMixin)):
        adv.append((len(out_shape), self._index_tensor(e, d))); out_shape.append(size); bounds.append((0, size))
      else: raise IndexError(f"only integers, slices, None, Ellipsis, lists and integer or bool tensors are valid indices, got {e!r}")
      d += 1
    return IndexPlan(flips, bounds, strides, tuple(out_shape), adv)

  def _indexed(self: Tensor, plan: IndexPlan) -> Tensor:
    """The view (and, with advanced indices, the gather) that `plan` describes."""
    x = self.flip(plan.flips) if plan.flips else self
    x = x.shrink(plan.bounds)
    for ax, (n, step) in plan.strides.items():  # every step-th element: pad to n*step, view as (n, step), keep column 0
      sh = x.shape
      x = x.pad(tuple((0, n * step - sh[ax]) if i == ax else None for i in range(x.ndim)))
      x = x.reshape(sh[:ax] + (n, step) + sh[ax + 1:]).shrink(tuple((0, 1) if i == ax + 1 else None for i in range(x.ndim + 1)))
      x = x.reshape(sh[:ax] + (n,) + sh[ax + 1:])
    x = x.reshape(plan.shape)
    return x._take([p for p, _ in plan.advanced], [t for _, t in plan.advanced]) if plan.advanced else x

  def _placed_back(self: Tensor, plan: IndexPlan, shape: tuple, fill: Any) -> Tensor:
    """The inverse of a plan without advanced indices: self, shaped as its result, put back where the index took it from
    in a tensor of the indexed `shape`, `fill` elsewhere (pads undo the shrink and the strides, a flip the flip)."""
    x = self.reshape(tuple(plan.strides[d][0] if d in plan.strides else simplified(hi - lo) for d, (lo, hi) in enumerate(plan.bounds)))
    for ax, (n, step) in plan.strides.items():  # n values become every step-th of (n - 1) * step + 1
      sh = x.shape
      x = x.reshape(sh[:ax] + (n, 1) + sh[ax + 1:]).pad(tuple((0, step - 1) if i == ax + 1 else None for i in range(x.ndim + 1)), value=fill)
      x = x.reshape(sh[:ax] + (n * step,) + sh[ax + 1:]).shrink(tuple((0, (n - 1) * step + 1) if i == ax else None for i in range(len(sh))))
    x = x.pad(tuple((lo, simplified(size - hi)) for (lo, hi), size in zip(plan.bounds, shape)), value=fill)
    return x.flip(plan.flips) if plan.flips else x

  def __getitem__(self: Tensor, indices: Any) -> Tensor:
    """Indexing as PyTorch: ints (negative from the end), slices with any step, None, Ellipsis, and integer index tensors or
    lists (advanced indexing, a one-hot gather), or bool masks (realized into positions). Ints select before advanced
    indexing, as PyTorch does (numpy counts them as advanced indices when deciding where the index dims go).
    Out-of-range ints and lists raise IndexError; out-of-range values in an index Tensor give 0."""
    return self._indexed(self._index_plan(indices))

  def __setitem__(self: Tensor, indices: Any, value: Any) -> None:
    """x[indices] = value, as PyTorch: value (a Tensor, a number or array data), broadcast to x[indices]'s shape and cast
    to x's dtype, is written where the index points; where advanced indices name a place twice, the last write wins.
    On a realized tensor, or a view of one, the write lands in its buffer (as assign) and every tensor sharing the buffer
    sees it; a slice of one is written now, in place. An unrealized tensor instead takes the updated value as its graph,
    with gradients to its old value and to value; other views of the graph it came from keep the old values (PyTorch's
    views would see the write)."""
    T = type(self)
    value = (value if isinstance(value, T) else T(value, device=self.device, dtype=self.dtype)).to(self.device).cast(self.dtype)
    if self.uop.op is Ops.AFTER: self.realize()  # a pending write lands first
    base, moves = movement_base(self.uop)
    one_buffer = base.op is Ops.BUFFER and not isinstance(self.device, tuple) and not moves & {Ops.EXPAND, Ops.PAD}
    if one_buffer and _is_region(indices):  # written now, into the buffer
      region = self[indices]
      region.assign(_fitted(value, region.shape, "setitem"))
    else: self._update(self._with_written(indices, value), "setitem")

  def _with_written(self: Tensor, indices: Any, value: Tensor) -> Tensor:
    """This tensor with value written at indices, as a new graph: a WHERE over the old values, or for advanced indices
    a scatter to the written places' positions in the flattened tensor."""
    T = type(self)
    lone = indices if isinstance(indices, (IndexingMixin, np.ndarray)) else None
    if lone is not None and lone.dtype in (dtypes.bool, np.bool_) and lone.shape == self.shape[:lone.ndim] and value.ndim <= self.ndim - lone.ndim:
      mask = lone if isinstance(lone, T) else T(lone, device=self.device)  # x[mask] = v, v the same for every row: a WHERE, nothing realized
      return mask.reshape(mask.shape + (1,) * (self.ndim - mask.ndim)).where(_fitted(value, self.shape[mask.ndim:], "setitem"), self)
    plan = self._index_plan(indices)
    if plan.advanced:
      places = self._places(plan)
      return self.flatten().scatter(0, places.flatten(), _fitted(value, places.shape, "setitem").flatten()).reshape(self.shape)
    written = T.full(plan.shape, True, dtype=dtypes.bool, device=self.device)._placed_back(plan, self.shape, False)
    return written.where(_fitted(value, plan.shape, "setitem")._placed_back(plan, self.shape, 0), self)  # value put back where the index took it

  def _places(self: Tensor, plan: IndexPlan) -> Tensor:
    """Where each element of self[index] lives in the flattened tensor, in the index result's shape."""
    return type(self).arange(self.numel(), dtype=position_dtype(self.numel()), device=self.device).reshape(self.shape)._indexed(plan)

  def _source_for(self: Tensor, op: str, values: Any) -> Tensor:
    """The values an index_put, put or masked_scatter writes: a Tensor of this dtype (PyTorch casts none)."""
    if not isinstance(values, type(self)): return type(self)(values, device=self.device, dtype=self.dtype)
    if values.dtype != self.dtype: raise RuntimeError(f"{op}: the values' dtype {values.dtype} differs from the tensor's {self.dtype}")
    return values

  def index_put(self: Tensor, indices: tuple, values: Any, accumulate: bool = False) -> Tensor:
    """A copy of self with values written at self[indices] (PyTorch's index_put; indices a tuple of index tensors, one per
    leading axis). accumulate adds them to what is there instead, repeated places adding up."""
    if not isinstance(indices, (tuple, list)): raise TypeError(f"index_put: indices must be a tuple of tensors, got {type(indices).__name__}")
    values = self._source_for("index_put", values)
    if not accumulate: return self._with_written(tuple(indices), values)
    places = self._places(self._index_plan(tuple(indices)))
    return self.flatten().scatter_reduce(0, places.flatten(), _fitted(values, places.shape, "index_put").flatten(), "sum").reshape(self.shape)

  def put(self: Tensor, index: Tensor, source: Any, accumulate: bool = False) -> Tensor:
    """A copy of self with source's elements written at the positions `index` names in the flattened tensor (negative
    from the end; PyTorch's put); accumulate adds them instead. index and source have the same number of elements."""
    source = self._source_for("put", source)
    if index.numel() != source.numel(): raise RuntimeError(f"put: index has {index.numel()} elements, source {source.numel()}")
    flat = self.flatten()
    places = flat._index_tensor(index.flatten(), 0)
    return (flat.scatter_reduce(0, places, source.flatten(), "sum") if accumulate else flat.scatter(0, places, source.flatten())).reshape(self.shape)

  def masked_scatter(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of self whose places where mask (broadcast to self's shape) is true take source's elements in order, the
    k-th true place (row-major) the k-th element of source flattened (PyTorch's masked_scatter). Where source has too few,
    the places beyond its end get 0 (PyTorch raises; checking would read the mask back to the host)."""
    if mask.dtype != dtypes.bool: raise RuntimeError(f"masked_scatter: mask must be bool, got {mask.dtype}")
    source, mask = self._source_for("masked_scatter", source), mask._broadcast_to(self.shape)
    order = mask.flatten().cast(position_dtype(self.numel())).cumsum() - 1  # the source element each true place takes
    return mask.where(source.flatten().gather(0, order.maximum(0)).reshape(self.shape), self)

  def gather(self: Tensor, dim: int, index: Tensor) -> Tensor:
    """out[i][j][k] = self[i][index[i][j][k]][k] for dim=1 (PyTorch's gather): index has self's ndim and no larger size
    on the other axes. A one-hot mask over self's axis `dim`, then a sum. An index value outside [0, size) matches no
    position and gives 0 (PyTorch raises; checking would read every index back to the host first)."""
    d, pos = self._index_axis("gather", dim, index)
    x = self.shrink(tuple(None if a == d else (0, i) for a, i in enumerate(index.shape))).unsqueeze(d)
    return x._select(index.unsqueeze(d + 1) == pos, (d + 1,))

  def _index_axis(self: Tensor, op: str, dim: int, index: Tensor) -> tuple[int, Tensor]:
    """What gather and the scatters check of an index tensor along `dim` (as many axes as self, integers, no larger than
    self outside dim), and (the axis, the positions 0 .. size - 1 along it on axis d + 1, for a one-hot against index)."""
    d = resolve_dim(dim, self.ndim)
    if index.ndim != self.ndim: raise RuntimeError(f"{op}: index has {index.ndim} dimensions, the tensor {self.ndim}")
    if not dtypes.is_int(index.dtype): raise RuntimeError(f"{op}: index must be an integer tensor, got {index.dtype}")
    if any(i > s for a, (i, s) in enumerate(zip(index.shape, self.shape)) if a != d):
      raise RuntimeError(f"{op}: index shape {index.shape} is larger than the tensor's {self.shape} outside dimension {dim}")
    size = self.shape[d]
    return d, type(self).arange(size, dtype=index.dtype, device=self.device).reshape((1,) * (d + 1) + (size,) + (1,) * (self.ndim - d - 1))

  def _scatter_onehot(self: Tensor, op: str, dim: int, index: Tensor, src: Tensor | float) -> tuple[int, Tensor, Tensor, tuple] | None:
    """What scatter and scatter_reduce share, checked: (the axis d, the one-hot mask of which position s of self each
    contribution j writes, on the axes index's ..., j, s, ...; src's values on the same axes; the padding from index's shape
    to self's), or None when index is empty. A scalar src is that value everywhere."""
    d, pos = self._index_axis(op, dim, index)
    if isinstance(src, IndexingMixin):
      if src.ndim != self.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
        raise RuntimeError(f"{op}: index shape {index.shape} is larger than src's {src.shape}")
      if src.dtype != self.dtype: raise RuntimeError(f"{op}: src's dtype {src.dtype} differs from the tensor's {self.dtype} (as PyTorch, no cast)")
    if index.numel() == 0: return None
    if isinstance(src, IndexingMixin): src = src.shrink(tuple((0, i) for i in index.shape))
    else: src = type(self).full(index.shape, src, self.dtype, self.device)
    pad = tuple((0, 0) if a == d else (0, s - i) for a, (i, s) in enumerate(zip(index.shape, self.shape)))
    return d, index.unsqueeze(d + 1) == pos, src.unsqueeze(d + 1), pad

  def scatter(self: Tensor, dim: int, index: Tensor, src: Tensor | float, reduce: str | None = None) -> Tensor:
    """A copy of self with self[i][index[i][j][k]][k] = src[i][j][k] for dim=1 (PyTorch's scatter); reduce 'add' or
    'multiply' combines instead. Where indices repeat, the last one wins (PyTorch leaves it unspecified). An index value
    outside [0, size) writes nothing (PyTorch raises).
    A one-hot mask (index axis j, self axis s) picks per position of self the contributions, summed or multiplied over j."""
    if reduce not in (None, "add", "multiply"): raise ValueError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")
    if (parts := self._scatter_onehot("scatter", dim, index, src)) is None: return self
    d, mask, vals, pad = parts
    if reduce == "multiply": return self * vals._select(mask, (d,), Ops.MUL).pad(pad, value=1)
    if reduce == "add": return self + vals._select(mask, (d,)).pad(pad)
    nj = index.shape[d]
    j = type(self).arange(nj, dtype=dtypes.int32, device=self.device).reshape((1,) * d + (nj,) + (1,) * (self.ndim - d))
    last = mask.where(j, -1).max(d, keepdim=True)  # the last j that writes each position (-1: none)
    picked = vals._select(mask & (j == last), (d,)).pad(pad)
    return (last.squeeze(d) >= 0).pad(pad).where(picked, self)

  def scatter_reduce(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
    """A copy of self where each position that `index` names (as in scatter) combines its src values with `reduce`: "sum",
    "prod", "mean", "amax" or "amin" (torch.scatter_reduce). With include_self the position's own value takes part, else
    only the src values do; positions no index names keep theirs. An integer mean rounds down, as PyTorch's."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise RuntimeError(f"scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got {reduce!r}")
    if not isinstance(src, IndexingMixin): raise TypeError(f"scatter_reduce: src must be a Tensor, got {type(src).__name__}")
    if (parts := self._scatter_onehot("scatter_reduce", dim, index, src)) is None: return self
    d, mask, vals, pad = parts
    count = mask.sum(d, dtype=dtypes.int32).pad(pad)  # contributions per position of self
    named = count > 0
    if reduce in ("amax", "amin"):
      # self's own value as one more candidate of the one reduction, so that ties share the gradient evenly, self included
      candidates = mask.where(vals, self.dtype.min if reduce == "amax" else self.dtype.max)
      if include_self:
        region = self.shrink(tuple((0, n) if a == d else (0, i) for a, (i, n) in enumerate(zip(index.shape, self.shape))))
        candidates = candidates.cat(region.unsqueeze(d), dim=d)
      return named.where((candidates.max((d,)) if reduce == "amax" else candidates.min((d,))).pad(pad), self)  # amax's sharing
    combine = Ops.MUL if reduce == "prod" else Ops.ADD
    total = vals._select(mask, (d,), combine).pad(pad, value=1 if reduce == "prod" else 0)
    if include_self: total = total * self if reduce == "prod" else total + self
    if reduce == "mean":
      n = count + 1 if include_self else count.maximum(1)
      total = total // n.cast(self.dtype) if dtypes.is_int(self.dtype) else total / n
    return named.where(total, self)

  def one_hot(self: Tensor, num_classes: int = -1) -> Tensor:
    """A new last axis of `num_classes` with 1 at each value's position (default int dtype; -1 realizes to find max + 1)."""
    if not dtypes.is_int(self.dtype): raise TypeError(f"one_hot takes an integer tensor, got {self.dtype}")
    if num_classes == -1:
      if self.numel() == 0: raise RuntimeError("one_hot: cannot infer num_classes of an empty tensor")
      num_classes = int(self.max().item()) + 1
    pos = type(self).arange(num_classes, dtype=self.dtype, device=self.device)
    return (self.unsqueeze(-1) == pos).cast(dtypes.default_int)
