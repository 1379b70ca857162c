"""Reductions built on Tensor's basic sum/max: statistics (mean, var, std), arg reductions, any/all, logsumexp, softmax and the
cumulative scans. Everything stays one lazy graph: scans use the sliding-window trick of seed 001's prefix_sum."""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from tinyspec.dtype import DType, dtypes, position_dtype, to_dtype
from tinyspec.tensor.movement import F, resolve_dim, torch_keywords
from tinyspec.uop.ops import Ops
from tinyspec.uop.uop import UOp

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Tensor

Axis = int | tuple[int, ...] | list[int] | None
_CHUNK = 256  # scans longer than 2*_CHUNK run in two stages: an O(n^2) window over the whole axis would be too much work


class ValuesIndices(NamedTuple):
  """What cummax, cummin and max or min with `dim` return, as PyTorch's: `values, indices = x.cummax(0)` or
  `x.max(dim=1).values`."""
  values: Tensor
  indices: Tensor


def torch_max_forms(arg_method: str, pairwise: str) -> Callable[[F], F]:
  """For max and min, PyTorch's two other forms beside tinygrad's x.max(axis) (the values): the keyword `dim`
  (x.max(dim=1)) gives (values, indices), the indices from `arg_method`; a tensor (x.max(y)) is the elementwise
  `pairwise` (maximum or minimum)."""
  def decorate(method: F) -> F:
    @functools.wraps(method)
    def with_forms(self, *args, dim: int | None = None, **kwargs):
      if args and isinstance(args[0], type(self)):
        if len(args) > 1 or kwargs or dim is not None: raise TypeError(f"{method.__name__}(other) takes one tensor and nothing else")
        return getattr(self, pairwise)(args[0])
      if dim is None: return method(self, *args, **kwargs)
      if args or "axis" in kwargs: raise TypeError(f"{method.__name__}() takes axis (values) or PyTorch's dim (values, indices), not both")
      return ValuesIndices(method(self, dim, **kwargs), getattr(self, arg_method)(dim, **kwargs))
    return with_forms  # type: ignore[return-value]
  return decorate

def _acc(x: Tensor) -> Tensor:
  """x in the dtype its statistics accumulate in: halves sum in float32 (a sum of many halves overflows or loses the small terms)."""
  return x.cast(dtypes.float32) if x.dtype in (dtypes.float16, dtypes.bfloat16) else x

def _count(like: Tensor, n) -> Tensor | int:
  """A count of elements to divide by: an int, or a symbolic size read as a value of `like`'s dtype (the kernel takes its
  variable's value at run time)."""
  return n if isinstance(n, int) else like._new(UOp(Ops.CAST, (n,), like.dtype))

def identity(op: str, dtype: DType) -> bool | int | float:
  """The value that leaves `op` ("sum", "max" or "prod") unchanged: what a scan pads with."""
  if op == "sum": return False if dtype == dtypes.bool else 0
  if op == "prod": return True if dtype == dtypes.bool else 1
  return dtype.min  # max: -inf for floats, the smallest int, False


class ReduceMixin:
  """Reductions composed from sum and max (tensor.py's `_reduce` makes those)."""

  # ---- prod and min, beside tensor.py's sum and max ----
  @torch_keywords(dim="axis")
  def prod(self: Tensor, axis: Axis = None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    """Product over `axis`; dtypes as sum."""
    x = self._acc_dtype(dtype)
    if dtypes.is_float(x.dtype) and x.dtype.itemsize < 4: return x.float()._reduce(Ops.MUL, axis, keepdim).cast(x.dtype)
    return x._reduce(Ops.MUL, axis, keepdim)
  @torch_max_forms("argmin", "minimum")
  def min(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """The smallest value over `axis`: -max(-x) for floats, ~max(~x) for ints and bool (~ reverses their order exactly)."""
    if any(self.shape[a] == 0 for a in self._axes(axis)): raise RuntimeError(f"min: cannot reduce an empty axis of shape {self.shape}")
    if dtypes.is_float(self.dtype): return -((-self).max(axis, keepdim))
    return ~((~self).max(axis, keepdim))

  # ---- statistics ----
  @torch_keywords(dim="axis")
  def mean(self: Tensor, axis: Axis = None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    """The mean over `axis` (all axes if None). Ints and bool give the default float; an empty reduction gives nan. A
    float `dtype` casts the input to it first, as PyTorch."""
    if dtype is not None:
      if not dtypes.is_float(dt := to_dtype(dtype)): raise RuntimeError(f"mean: dtype must be a floating point dtype, got {dt}")
      return self.cast(dt).mean(axis, keepdim)
    x, axes = self._float(), self._axes(axis)
    # dividing by n = 0 multiplies by inf: an empty mean is 0 * inf = nan, as PyTorch gives
    total = _acc(x).sum(axes, keepdim=keepdim)
    return (total / _count(total, math.prod(self.shape[a] for a in axes))).cast(x.dtype)

  @torch_keywords(dim="axis", unbiased=("correction", int))
  def var(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int | float = 1) -> Tensor:
    """The variance over `axis`, dividing by n - correction (1: the unbiased estimate, as PyTorch's default; PyTorch's
    unbiased=False is correction=0)."""
    x, axes = self._float(), self._axes(axis)
    d = _acc(x) - _acc(x).mean(axes, keepdim=True)
    # n - correction <= 0 divides by 0: nan for a zero sum of squares, inf otherwise (PyTorch's answers)
    squares, n = (d * d).sum(axes, keepdim=keepdim), math.prod(self.shape[a] for a in axes)
    return (squares / (max(0, n - correction) if isinstance(n, int) else (_count(squares, n) - correction).maximum(0))).cast(x.dtype)

  @torch_keywords(dim="axis", unbiased=("correction", int))
  def std(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int | float = 1) -> Tensor:
    """The standard deviation over `axis`: sqrt of `var` with the same `correction`. Where the variance is 0 the gradient is
    0, as PyTorch's (sqrt's infinite slope there times var's zero slope would be nan). float16 takes the root in float32
    (its variance may pass float16's range when the deviation does not). So does a float32 variance past 3e38 from
    deviations past 1e19: there the root is taken of x 2**-80's variance and scaled back (PyTorch's float32 std sums in
    float64); a power of two scales exactly, so the root elsewhere stays the one from x itself."""
    def root(v: Tensor) -> Tensor: return (v == 0).where(0.0, v).sqrt()
    def std(x: Tensor) -> Tensor:
      v = x.var(axis, keepdim, correction)
      if x.dtype != dtypes.float32: return root(v)
      scaled = (x * 2.0 ** -80).var(axis, keepdim, correction)  # nan or inf where n - correction <= 0 is what overflowed
      return (v.isinf() & scaled.isfinite()).where(root(scaled) * 2.0 ** 80, root(v))
    return self._math(std)

  @torch_keywords(dim="axis", unbiased=("correction", int))
  def var_mean(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int | float = 1) -> tuple[Tensor, Tensor]:
    """(var, mean) over `axis`, as torch.var_mean."""
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

  @torch_keywords(dim="axis", unbiased=("correction", int))
  def std_mean(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int | float = 1) -> tuple[Tensor, Tensor]:
    """(std, mean) over `axis`, as torch.std_mean."""
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

  # ---- arg reductions ----
  @torch_keywords(dim="axis")
  def argmax(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the largest value along `axis`, the first one on ties (and the first nan, as PyTorch); its dtype is
    dtype.position_dtype's (the default int). axis None: the index into the flattened tensor."""
    if axis is None:
      out = self.flatten().argmax(0) if self.ndim else self.argmax(0)
      return out.reshape((1,) * self.ndim) if keepdim else out
    ax = resolve_dim(axis, self.ndim)
    if self.ndim == 0: return self._full_like_shape((), 0, position_dtype(1))
    if (n := self.shape[ax]) == 0: raise IndexError(f"argmax(): Expected reduction dim {ax} to have non-zero size.")
    hit, rev = self._maxima(ax)
    return (n - hit.where(rev, 0).max(ax, keepdim=keepdim)).cast(position_dtype(n))  # found in int32, the kernels' cheaper width

  def _maxima(self: Tensor, ax: int) -> tuple[Tensor, Tensor]:
    """(hit, rev) along axis ax: hit marks the maxima, rev = n - i (int32, size 1 on the other axes) is largest at the first
    index, so the max of hit.where(rev, 0) is n minus the first maximum's index. A nan is a maximum (as PyTorch's argmax):
    a max that propagates it matches nothing else."""
    n = self.shape[ax]
    hit = self == self.max((ax,), keepdim=True)  # a tuple: the plain reduction (an int axis would find its first maximum)
    if dtypes.is_float(self.dtype): hit = hit | (self != self)
    return hit, type(self).arange(n, 0, -1, dtype=dtypes.int32, device=self.device).reshape(tuple(n if i == ax else 1 for i in range(self.ndim)))

  @torch_keywords(dim="axis")
  def argmin(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """The index (argmax's dtype) of the smallest value along `axis`, the first one on ties. axis None: into the flattened
    tensor."""
    if self.dtype == dtypes.bool: flipped = self.logical_not()
    elif dtypes.is_int(self.dtype): flipped = ~self  # ~x reverses the order of signed and unsigned ints alike, without overflow
    else: flipped = -self
    return flipped.argmax(axis, keepdim)

  # ---- boolean ----
  @torch_keywords(dim="axis")
  def any(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """Whether any element along `axis` is nonzero (bool); False over an empty axis."""
    return self._bool_reduce(axis, keepdim, False)

  @torch_keywords(dim="axis")
  def all(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """Whether every element along `axis` is nonzero (bool); True over an empty axis."""
    return self._bool_reduce(axis, keepdim, True)

  def _full_like_shape(self: Tensor, shape: tuple[int, ...], value, dtype: DType) -> Tensor:
    return type(self).full(shape, value, dtype=dtype, device=self.device)

  def _bool_reduce(self: Tensor, axis: Axis, keepdim: bool, every: bool) -> Tensor:
    axes = self._axes(axis)
    if any(self.shape[a] == 0 for a in axes): return self._full_like_shape(_reduced_shape(self.shape, axes, keepdim), every, dtypes.bool)
    b = self.cast(dtypes.bool)
    return b.logical_not().max(axes, keepdim=keepdim).logical_not() if every else b.max(axes, keepdim=keepdim)

  # ---- exponentials ----
  @torch_keywords(dim="axis")
  def logsumexp(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over `axis`, computed stably around the max; -inf over an empty axis."""
    x, axes = self._float(), self._axes(axis)
    if any(self.shape[a] == 0 for a in axes): return x.sum(axes, keepdim) - math.inf  # -inf, an empty sum's: it keeps x's graph
    # the shift by the max cancels exactly, so it takes no gradient (through it only rounding noise would flow)
    m = x.max(axes, keepdim=True).detach()
    m = (m.abs() == math.inf).where(0.0, m)  # an infinite max would make x - m nan; shifting by 0 gives torch's inf/-inf
    out = (x - m).exp().sum(axes, keepdim=True).log() + m
    return out if keepdim else out.reshape(_reduced_shape(self.shape, axes, False))

  @torch_keywords(dim="axis")
  def softmax(self: Tensor, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis`, with the max subtracted first so exp never overflows. `dtype` casts the input first."""
    x, ax = (self if dtype is None else self.cast(dtype))._float(), resolve_dim(axis, self.ndim)
    if x.numel() == 0: return x
    e = (x - x.max((ax,), keepdim=True).detach()).exp()  # the shift cancels exactly: no gradient (see logsumexp)
    # one reciprocal of the sum, broadcast: its gradient -sum(g e) / sum(e)^2 is then rounded once, not summed from per-element
    # roundings, so for a constant g it cancels g / sum(e) exactly whenever sum(e) * (1 / sum(e)) rounds to 1
    return e * e.sum(ax, keepdim=True).reciprocal()

  @torch_keywords(dim="axis")
  def log_softmax(self: Tensor, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    """log(softmax(x)) along `axis`, as x - max - log(sum(exp(x - max))): stable, and exact where softmax underflows to 0."""
    x, ax = (self if dtype is None else self.cast(dtype))._float(), resolve_dim(axis, self.ndim)
    if x.numel() == 0: return x
    s = x - x.max((ax,), keepdim=True).detach()  # the shift cancels exactly: no gradient (see logsumexp)
    return s - s.exp().sum(ax, keepdim=True).log()

  # ---- scans ----
  @torch_keywords(dim="axis")
  def cumsum(self: Tensor, axis: int = 0) -> Tensor:
    """Running sums along `axis`, in the dtype `sum` gives (bool counts as int)."""
    return self._scan(axis, "sum")

  @torch_keywords(dim="axis")
  def cumprod(self: Tensor, axis: int = 0) -> Tensor:
    """Running products along `axis`, in the dtype `prod` gives."""
    return self._scan(axis, "prod")

  @torch_keywords(dim="axis")
  def cummax(self: Tensor, axis: int = 0) -> ValuesIndices:
    """(values, indices) of the running maxima along `axis`, as torch.cummax: a nan stays the maximum once met, and each
    index names the last element equal to its running maximum (the last nan after one). The values carry the gradient."""
    values = self._scan(axis, "max")
    return ValuesIndices(values, self._last_reached(values, axis))

  @torch_keywords(dim="axis")
  def cummin(self: Tensor, axis: int = 0) -> ValuesIndices:
    """(values, indices) of the running minima along `axis`, as torch.cummin: the values are -cummax(-x) for floats and
    ~cummax(~x) for ints and bools (~ reverses their order); the indices as cummax's."""
    values = -(-self)._scan(axis, "max") if dtypes.is_float(self.dtype) else ~(~self)._scan(axis, "max")
    return ValuesIndices(values, self._last_reached(values, axis))

  def _last_reached(self: Tensor, running: Tensor, axis: int) -> Tensor:
    """For a running max or min: the index of the last element so far equal to it (position_dtype's). The running value only moves
    one way, so an element equal to its own running value that comes later reaches the current one: the running max of
    those elements' positions is the index."""
    if self.ndim == 0: return type(self).zeros((), dtype=position_dtype(1), device=self.device)
    ax = resolve_dim(axis, self.ndim)
    n = self.shape[ax]
    pos = type(self).arange(n, dtype=position_dtype(n), device=self.device).reshape(n, *[1] * (self.ndim - ax - 1))
    reached = (self == running) | (self != self) if dtypes.is_float(self.dtype) else self == running
    return reached.where(pos, -1)._scan(ax, "max")

  @torch_keywords(dim="axis")
  def logcumsumexp(self: Tensor, axis: int = 0) -> Tensor:
    """log(sum_{j<=i} exp(x_j)) along `axis`. Each prefix i is shifted by its own running maximum c_i, so no exp overflows
    and none of a prefix's terms all underflow: sum_j [j <= i] exp(x_j - c_i), an (n, n) masked sum per row (as sort)."""
    x = self._float()
    if x.ndim == 0 or x.shape[axis] == 0: return x
    ax = resolve_dim(axis, x.ndim)
    xt = x.transpose(ax, -1)
    n = xt.shape[-1]
    c = xt._scan(-1, "max").detach()
    c = c.isinf().where(0.0, c)  # a prefix of -inf (or one reaching +inf): no shift
    i = type(self).arange(n, device=self.device)
    upto = i.reshape(1, n) <= i.reshape(n, 1)  # (i, j): j <= i
    diff = upto.where(xt.unsqueeze(-2) - c.unsqueeze(-1), 0.0)  # 0 where masked: exp of it stays finite
    return (upto.where(diff.exp(), 0.0).sum(-1).log() + c).transpose(ax, -1)

  def _scan(self: Tensor, axis: int, op: str) -> Tensor:
    ax = resolve_dim(axis, self.ndim)
    if self.ndim == 0 or self.shape[ax] == 0: return self.cast(getattr(self, op)().dtype) if op != "max" else self
    out = _scan_last(self.transpose(ax, -1), op)
    return out.transpose(ax, -1)


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
  return tuple(1 if i in axes else s for i, s in enumerate(shape)) if keepdim else tuple(s for i, s in enumerate(shape) if i not in axes)

def _windows(x: Tensor, fill) -> Tensor:
  """(..., n) -> (..., n, n) whose row i is x[0..i] preceded by n-1-i `fill`s: seed 001's prefix_sum window, on the last axis.
  Left-padding to 2n-1 and tiling n+1 rows of that length shifts each next row of width 2n by one element."""
  *b, n = x.shape
  x = x.pad(tuple([(0, 0)] * len(b) + [(n - 1, 0)]), value=fill)
  x = x.reshape(*b, 1, 2 * n - 1).expand(*b, n + 1, 2 * n - 1).reshape(*b, (n + 1) * (2 * n - 1))
  return x.shrink(tuple([(0, s) for s in b] + [(0, 2 * n * n)])).reshape(*b, n, 2 * n).shrink(tuple([(0, s) for s in b] + [(0, n), (0, n)]))

def _combine(a: Tensor, b: Tensor, op: str) -> Tensor:
  """a (later elements) combined with b (earlier ones). For max a tie goes to a, the later maximum (see _scan_last)."""
  return a + b if op == "sum" else a * b if op == "prod" else ((b > a) | (b != b)).where(b, a)

def _scan_last(x: Tensor, op: str) -> Tensor:
  """The inclusive scan of `op` along the last axis. Long axes go in two stages (a scan inside chunks of _CHUNK, then the chunk
  totals scanned and combined in), so the work is O(n * _CHUNK) instead of O(n^2)."""
  *b, n = x.shape
  fill = identity(op, x.dtype)
  # cummax's gradient goes to the last maximum so far (PyTorch's indices): the first maximum of each window reversed
  if n <= 2 * _CHUNK: return _windows(x, fill).flip(-1).max(-1) if op == "max" else getattr(_windows(x, fill), op)(-1)
  m = -(-n // _CHUNK)
  # pad on the left so the real data ends the last chunk: the padding's fills do not change any real element's scan
  chunks = _scan_last(x.pad(tuple([(0, 0)] * len(b) + [(m * _CHUNK - n, 0)]), value=fill).reshape(*b, m, _CHUNK), op)
  totals = chunks.shrink(tuple([(0, s) for s in b] + [(0, m), (_CHUNK - 1, _CHUNK)])).reshape(*b, m)
  # exclusive scan of the totals: shift right by one, filling the first with the identity
  before = _scan_last(totals, op).pad(tuple([(0, 0)] * len(b) + [(1, 0)]), value=identity(op, totals.dtype))
  before = before.shrink(tuple([(0, s) for s in b] + [(0, m)])).reshape(*b, m, 1)
  out = _combine(chunks, before.expand(*b, m, _CHUNK), op).reshape(*b, m * _CHUNK)
  return out.shrink(tuple([(0, s) for s in b] + [(m * _CHUNK - n, m * _CHUNK)]))
