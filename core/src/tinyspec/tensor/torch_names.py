"""PyTorch's names for what tinygrad names otherwise or lacks, so code written against torch.Tensor runs as it is: aliases
(absolute, multiply, arccos, greater ...), shape helpers (dim, t, movedim, unbind, narrow, tile ...), the matrix products
under their BLAS names (mm, bmm, addmm, addcmul ...), reductions (amax, nansum, norm, median ...), counting (bincount,
histc) and small pointwise composites (atan2, hypot, logit, xlogy, sinc, float_power ...). Each has PyTorch's
semantics, and its gradient by composition."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tinyspec.dtype import SINTS, dtypes, finite_max
from tinyspec.tensor.movement import resolve_dim, shape_arg
from tinyspec.tensor.pointwise import _edge_slopes, _float_operands, _poly
from tinyspec.tensor.reduce import ValuesIndices

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Scalar, Tensor

# sin(z) / z = sum (-1)^k z^2k / (2k + 1)! in z^2: for |z| < 1 the terms from k = 9 on add less than 1e-17
_SINC_TAYLOR = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(9))


class MinMax(NamedTuple):
  """What aminmax returns, as PyTorch's: `lo, hi = x.aminmax()` or `x.aminmax().max`."""
  min: Tensor
  max: Tensor


def _dims(dim: int | Sequence[int], ndim: int) -> tuple[int, ...]:
  return tuple(resolve_dim(d, ndim) for d in ((dim,) if isinstance(dim, int) else dim))

def _at(dim: int, index) -> tuple:
  """An indexing tuple that applies `index` to axis `dim` and keeps the axes before it whole."""
  return (slice(None),) * dim + (index,)

def _histc_edges(bins: int, lo: float, hi: float, dt: np.dtype) -> np.ndarray:
  """For k = 0 .. bins - 1, the least x of dtype dt in [lo, hi] that floor((x - lo) * bins / (hi - lo)), each step
  rounded to dt as PyTorch computes it, puts in bin k or above: a bisection over the floats' ordered bit patterns (the
  formula only grows with x), all k at once."""
  ints = {2: np.int16, 4: np.int32, 8: np.int64}[dt.itemsize]
  sign = np.iinfo(ints).min
  def key(v: np.ndarray) -> np.ndarray:  # floats' bit patterns as integers in the floats' order
    b = v.astype(dt).view(ints).astype(np.int64)
    return np.where(b >= 0, b, sign - b)
  def value(k: np.ndarray) -> np.ndarray: return np.where(k >= 0, k, sign - k).astype(ints).view(dt)
  low32, span, n = dt.type(lo), dt.type(hi) - dt.type(lo), dt.type(bins)
  def bin_of(v: np.ndarray) -> np.ndarray: return np.floor((v - low32) * n / span)
  want = np.arange(bins)
  a, b = np.full(bins, key(np.array([lo]))[0]), np.full(bins, key(np.array([hi]))[0])  # bin_of(lo) = 0 <= k; hi's >= k
  with np.errstate(all="ignore"):
    while (a < b).any():  # the least key whose value's bin is >= k lies in [a, b]
      mid = a // 2 + b // 2 + (a % 2 + b % 2) // 2  # (a + b) // 2, where a + b and b - a could overflow int64
      up = bin_of(value(mid)) >= want
      a, b = np.where(up, a, mid + 1), np.where(up, mid, b)
  return value(a)

def _need_ndim(name: str, t: Tensor, *ndims: int) -> None:
  if t.ndim not in ndims: raise RuntimeError(f"{name}: expected a {' or '.join(f'{n}-D' for n in ndims)} tensor, got shape {t.shape}")


class TorchNamesMixin:
  """torch.Tensor's method names for Tensor (see the module docstring)."""

  # ---- aliases: the same operation under PyTorch's (or numpy's) name ----
  def absolute(self: Tensor) -> Tensor: return self.abs()
  def negative(self: Tensor) -> Tensor: return self.neg()
  def sgn(self: Tensor) -> Tensor: return self.sign()
  def multiply(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.mul(other)
  def divide(self: Tensor, other: Tensor | Scalar, rounding_mode: str | None = None) -> Tensor: return self.div(other, rounding_mode=rounding_mode)
  def true_divide(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.div(other)
  def floor_divide(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.floordiv(other)
  def remainder(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.mod(other)
  def subtract(self: Tensor, other: Tensor | Scalar, alpha: Scalar = 1) -> Tensor: return self.sub(other if alpha == 1 else other * alpha)
  def greater(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.gt(other)
  def greater_equal(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.ge(other)
  def less(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.lt(other)
  def less_equal(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.le(other)
  def not_equal(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.ne(other)
  def arccos(self: Tensor) -> Tensor: return self.acos()
  def arcsin(self: Tensor) -> Tensor: return self.asin()
  def arctan(self: Tensor) -> Tensor: return self.atan()
  def arccosh(self: Tensor) -> Tensor: return self.acosh()
  def arcsinh(self: Tensor) -> Tensor: return self.asinh()
  def arctanh(self: Tensor) -> Tensor: return self.atanh()
  def arctan2(self: Tensor, other: Tensor | Scalar) -> Tensor: return self.atan2(other)
  def clamp_min(self: Tensor, min: Tensor | Scalar) -> Tensor: return self.clamp(min=min)
  def clamp_max(self: Tensor, max: Tensor | Scalar) -> Tensor: return self.clamp(max=max)

  # ---- shapes ----
  def dim(self: Tensor) -> int: return self.ndim
  def ndimension(self: Tensor) -> int: return self.ndim
  def nelement(self: Tensor) -> int: return self.numel()
  def ravel(self: Tensor) -> Tensor: return self.flatten()
  def expand_as(self: Tensor, other: Tensor) -> Tensor: return self.expand(other.shape)
  def view_as(self: Tensor, other: Tensor) -> Tensor: return self.view(other.shape)
  def reshape_as(self: Tensor, other: Tensor) -> Tensor: return self.reshape(other.shape)
  def type_as(self: Tensor, other: Tensor) -> Tensor: return self.cast(other.dtype)
  def swapaxes(self: Tensor, axis0: int, axis1: int) -> Tensor: return self.transpose(axis0, axis1)
  def swapdims(self: Tensor, dim0: int, dim1: int) -> Tensor: return self.transpose(dim0, dim1)
  def t(self: Tensor) -> Tensor:
    """The transpose of a matrix; a 0-d or 1-d tensor as it is."""
    if self.ndim > 2: raise RuntimeError(f"t: expects a tensor with <= 2 dimensions, got shape {self.shape} (use mT or transpose)")
    return self.transpose(0, 1) if self.ndim == 2 else self
  @property
  def mT(self: Tensor) -> Tensor:  # noqa: N802  (PyTorch's name)
    """The last two axes swapped (a batch of matrices transposed)."""
    if self.ndim < 2: raise RuntimeError(f"mT: expects a tensor with >= 2 dimensions, got shape {self.shape}")
    return self.transpose(-2, -1)
  def fliplr(self: Tensor) -> Tensor:
    if self.ndim < 2: raise RuntimeError(f"fliplr: expects a tensor with >= 2 dimensions, got shape {self.shape}")
    return self.flip(1)
  def flipud(self: Tensor) -> Tensor:
    if self.ndim < 1: raise RuntimeError("flipud: expects a tensor with >= 1 dimension, got a 0-d tensor")
    return self.flip(0)
  def movedim(self: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    """The axes `source` moved to the places `destination`, the others keeping their order (torch.movedim)."""
    src, dst = _dims(source, self.ndim), _dims(destination, self.ndim)
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
      raise RuntimeError(f"movedim: source {source} and destination {destination} must be as many distinct dims")
    order, rest = [None] * self.ndim, iter(a for a in range(self.ndim) if a not in src)
    for s, d in zip(src, dst): order[d] = s
    return self.permute([next(rest) if o is None else o for o in order])
  def moveaxis(self: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor: return self.movedim(source, destination)
  def unbind(self: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along `dim`, that axis removed from each."""
    d = resolve_dim(dim, self.ndim)
    return tuple(self[_at(d, i)] for i in range(self.shape[d]))
  def narrow(self: Tensor, dim: int, start: int, length: int) -> Tensor:
    """`length` elements of axis `dim` from `start` (negative counts from the end)."""
    d = resolve_dim(dim, self.ndim)
    s = start + self.shape[d] if start < 0 else start
    if not (0 <= s <= self.shape[d] and 0 <= length <= self.shape[d] - s):
      raise IndexError(f"narrow: start {start} and length {length} are out of range for dim {dim} of shape {self.shape}")
    return self[_at(d, slice(s, s + length))]
  def select(self: Tensor, dim: int, index: int) -> Tensor: return self[_at(resolve_dim(dim, self.ndim), index)]
  def index_select(self: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of axis `dim` that the 1-d integer tensor `index` names, in its order."""
    if index.ndim > 1 or not dtypes.is_int(index.dtype):
      raise RuntimeError(f"index_select: index must be a 0-d or 1-d integer tensor, got shape {index.shape} and dtype {index.dtype}")
    return self[_at(resolve_dim(dim, self.ndim), index.reshape(-1))]
  def split_with_sizes(self: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[Tensor, ...]: return self.split(list(split_sizes), dim)
  def tile(self: Tensor, *dims) -> Tensor:
    """Repeated `dims` times along each axis; fewer dims than axes count from the last axis (ones in front)."""
    reps = shape_arg(*dims)
    return self.repeat((1,) * (self.ndim - len(reps)) + tuple(reps))
  def rot90(self: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """Rotated by 90 degrees k times in the plane of `dims`, from the first axis toward the second."""
    if len(dims) != 2 or len(set(_dims(dims, self.ndim))) != 2: raise RuntimeError(f"rot90: dims must be two different axes, got {dims}")
    a, b = _dims(dims, self.ndim)
    return [self, self.flip(b).transpose(a, b), self.flip((a, b)), self.flip(a).transpose(a, b)][k % 4]
  def diff(self: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None) -> Tensor:
    """The n-th forward difference along `dim` (bools: x[i+1] != x[i]), after putting prepend and append at its ends."""
    d = resolve_dim(dim, self.ndim)
    x = self if append is None else self.cat(append, dim=d)
    if prepend is not None: x = prepend.cat(x, dim=d)
    for _ in range(n):
      hi, lo = x[_at(d, slice(1, None))], x[_at(d, slice(None, -1))]
      x = hi != lo if x.dtype == dtypes.bool else hi - lo
    return x

  def tensor_split(self: Tensor, indices_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """n pieces along `dim` as equal as can be (the first size % n one longer), or the pieces between the given indices
    (sliced as Python slices: past the end, empty)."""
    d = resolve_dim(dim, self.ndim)
    n = self.shape[d]
    if isinstance(indices_or_sections, int):
      if (k := indices_or_sections) <= 0: raise RuntimeError(f"tensor_split: the number of sections must be positive, got {k}")
      cuts = [i * (n // k) + min(i, n % k) for i in range(1, k)]
    else: cuts = list(indices_or_sections)
    return tuple(self[_at(d, slice(a, b))] for a, b in zip([None, *cuts], [*cuts, None]))
  def take_along_dim(self: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """gather along `dim` with self and indices broadcast against each other on the other axes; the flat elements for None."""
    if dim is None: return self.flatten().gather(0, indices.flatten())
    d = resolve_dim(dim, self.ndim)
    if indices.ndim != self.ndim: raise RuntimeError(f"take_along_dim: indices of shape {indices.shape} need the tensor's {self.ndim} dimensions")
    common = [1 if a == d else max(s, i) for a, (s, i) in enumerate(zip(self.shape, indices.shape))]
    return self.expand([self.shape[d] if a == d else c for a, c in enumerate(common)]).gather(d, indices.expand(
      [indices.shape[d] if a == d else c for a, c in enumerate(common)]))
  def _index_along(self: Tensor, name: str, dim: int, index: Tensor, source: Tensor) -> tuple[int, Tensor]:
    """(the axis, index as a scatter index of source's shape) for index_add and index_copy: slice i of source goes to
    slice index[i] of self."""
    d = resolve_dim(dim, self.ndim)
    if index.ndim > 1 or not dtypes.is_int(index.dtype):
      raise RuntimeError(f"{name}: index must be a 0-d or 1-d integer tensor, got shape {index.shape} and dtype {index.dtype}")
    want = tuple(index.numel() if a == d else s for a, s in enumerate(self.shape))
    if source.shape != want:
      raise RuntimeError(f"{name}: source must have shape {want} ({index.numel()} indices along dim {dim} of {self.shape}), got {source.shape}")
    return d, index.reshape((1,) * d + (-1,) + (1,) * (self.ndim - d - 1)).expand(want)
  def scatter_add(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor: return self.scatter_reduce(dim, index, src, "sum")
  def index_add(self: Tensor, dim: int, index: Tensor, source: Tensor, alpha: Scalar = 1) -> Tensor:
    """self with alpha * source's slice i added to its slice index[i] along `dim` (repeated indices add up)."""
    d, idx = self._index_along("index_add", dim, index, source)
    return self.scatter_reduce(d, idx, source if alpha == 1 else source * alpha, "sum")
  def index_copy(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """self with its slice index[i] along `dim` replaced by source's slice i."""
    d, idx = self._index_along("index_copy", dim, index, source)
    return self.scatter(d, idx, source)
  def index_fill(self: Tensor, dim: int, index: Tensor, value: Scalar) -> Tensor:
    """self with the slices along `dim` that index names (negative ones from the end) set to value."""
    d = resolve_dim(dim, self.ndim)
    index = self._index_tensor(index, d)
    hit = (type(self).arange(self.shape[d], dtype=index.dtype, device=self.device) == index.reshape(-1, 1)).any(0)
    return hit.reshape((-1,) + (1,) * (self.ndim - d - 1)).where(value, self)

  # ---- new tensors like this one (its dtype and device unless given) ----
  def new_zeros(self: Tensor, *size, dtype=None) -> Tensor: return type(self).zeros(*size, dtype=dtype or self.dtype, device=self.device)
  def new_ones(self: Tensor, *size, dtype=None) -> Tensor: return type(self).ones(*size, dtype=dtype or self.dtype, device=self.device)
  def new_empty(self: Tensor, *size, dtype=None) -> Tensor: return type(self).empty(*size, dtype=dtype or self.dtype, device=self.device)
  def new_full(self: Tensor, size: Sequence[int], fill_value: Scalar, dtype=None) -> Tensor:
    return type(self).full(tuple(size), fill_value, dtype=dtype or self.dtype, device=self.device)
  def new_tensor(self: Tensor, data, dtype=None) -> Tensor: return type(self)(data, dtype=dtype or self.dtype, device=self.device)

  # ---- matrix products under their BLAS names: out = beta * self + alpha * product ----
  def mm(self: Tensor, mat2: Tensor) -> Tensor:
    _need_ndim("mm", self, 2), _need_ndim("mm", mat2, 2)
    return self @ mat2
  def bmm(self: Tensor, mat2: Tensor) -> Tensor:
    _need_ndim("bmm", self, 3), _need_ndim("bmm", mat2, 3)
    if self.shape[0] != mat2.shape[0]: raise RuntimeError(f"bmm: batch sizes differ: {self.shape} and {mat2.shape}")
    return self @ mat2
  def mv(self: Tensor, vec: Tensor) -> Tensor:
    _need_ndim("mv", self, 2), _need_ndim("mv", vec, 1)
    return self @ vec
  def outer(self: Tensor, vec2: Tensor) -> Tensor:
    _need_ndim("outer", self, 1), _need_ndim("outer", vec2, 1)
    return self.unsqueeze(1) * vec2.unsqueeze(0)
  def _blas(self: Tensor, product: Tensor, beta: Scalar, alpha: Scalar) -> Tensor:
    """beta * self + alpha * product; with beta 0 self is not read (its nan and inf do not reach the result), as PyTorch."""
    scaled = product if alpha == 1 else product * alpha
    return scaled if beta == 0 else (self if beta == 1 else self * beta) + scaled
  def addmm(self: Tensor, mat1: Tensor, mat2: Tensor, beta: Scalar = 1, alpha: Scalar = 1) -> Tensor: return self._blas(mat1.mm(mat2), beta, alpha)
  def addmv(self: Tensor, mat: Tensor, vec: Tensor, beta: Scalar = 1, alpha: Scalar = 1) -> Tensor: return self._blas(mat.mv(vec), beta, alpha)
  def addr(self: Tensor, vec1: Tensor, vec2: Tensor, beta: Scalar = 1, alpha: Scalar = 1) -> Tensor: return self._blas(vec1.outer(vec2), beta, alpha)
  def baddbmm(self: Tensor, batch1: Tensor, batch2: Tensor, beta: Scalar = 1, alpha: Scalar = 1) -> Tensor:
    return self._blas(batch1.bmm(batch2), beta, alpha)
  def addcmul(self: Tensor, tensor1: Tensor, tensor2: Tensor, value: Scalar = 1) -> Tensor: return self + value * tensor1 * tensor2
  def addcdiv(self: Tensor, tensor1: Tensor, tensor2: Tensor, value: Scalar = 1) -> Tensor: return self + value * tensor1 / tensor2
  def kron(self: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: out[i * m + k] = self[i] * other[k] on every axis (the fewer axes padded in front with ones)."""
    nd = max(self.ndim, other.ndim)
    a, b = (t.reshape((1,) * (nd - t.ndim) + t.shape) for t in (self, other))
    inter = a.reshape(tuple(x for s in a.shape for x in (s, 1))) * b.reshape(tuple(x for s in b.shape for x in (1, s)))
    return inter.reshape(tuple(x * y for x, y in zip(a.shape, b.shape)))
  def cross(self: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along `dim` (None: the first axis of size 3), the inputs broadcast."""
    x, y = self._broadcasted(other)
    d = next((a for a, s in enumerate(x.shape) if s == 3), None) if dim is None else resolve_dim(dim, x.ndim)
    if d is None or x.shape[d] != 3:
      raise RuntimeError(f"cross: no dimension of size 3 {'in' if dim is None else f'at dim {dim} of'} shape {x.shape}")
    (a0, a1, a2), (b0, b1, b2) = x.unbind(d), y.unbind(d)
    return type(self).stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim=d)
  def trace(self: Tensor) -> Tensor:
    _need_ndim("trace", self, 2)
    return self.diagonal().sum()

  # ---- reductions ----
  def amax(self: Tensor, dim: int | Sequence[int] = (), keepdim: bool = False) -> Tensor:
    """The largest value over `dim` (all axes for ()); tied maxima share the gradient (unlike max(dim), as PyTorch)."""
    return self.max(_dims(dim, self.ndim) or None, keepdim)
  def amin(self: Tensor, dim: int | Sequence[int] = (), keepdim: bool = False) -> Tensor: return self.min(_dims(dim, self.ndim) or None, keepdim)
  def nansum(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The sum with nan counted as 0."""
    return (self.isnan().where(0, self) if dtypes.is_float(self.dtype) else self).sum(dim, keepdim)
  def nanmean(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The mean of the values that are not nan (nan where all are)."""
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"nanmean: expected a floating point tensor, got {self.dtype}")
    return self.nansum(dim, keepdim) / (~self.isnan()).sum(dim, keepdim).cast(self.dtype)
  def count_nonzero(self: Tensor, dim: int | Sequence[int] | None = None) -> Tensor: return (self != 0).sum(dim)
  def norm(self: Tensor, p: float | str = "fro", dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """The vector p-norm over `dim` (all axes for None), as torch.linalg.vector_norm: "fro" and 2 the Euclidean norm (slope 0
    at a zero vector), inf and -inf the largest and smallest |x|, 0 the count of nonzeros, else sum(|x|^p)^(1/p) (slope 0 at
    zero elements and vectors, as PyTorch's). float16 in float32 (its sums of powers overflow), rounded once."""
    if isinstance(p, str) and p != "fro":
      raise ValueError(f"norm: p must be a number or 'fro', got {p!r} (a matrix norm such as 'nuc' is not supported)")
    def vector_norm(x: Tensor) -> Tensor:
      if p in ("fro", 2, 2.0):
        s = (x * x).sum(dim, keepdim)
        return (s == 0).where(0.0, (s == 0).where(1.0, s).sqrt())  # sqrt's slope at 0 is inf, and inf * 0 is nan: 1 there instead
      a = x.abs()
      if p == math.inf: return a.amax(() if dim is None else dim, keepdim)  # amax: tied maxima share the slope, as PyTorch's
      if p == -math.inf: return a.amin(() if dim is None else dim, keepdim)
      if p == 0: return (x != 0).sum(dim, keepdim).cast(x.dtype)
      if p == 1: return a.sum(dim, keepdim)
      # slope 0 where an element is 0 (a ** p's is inf there for p < 1) and at a zero sum (s ** (1/p)'s is inf), as PyTorch
      nonzero = a != 0
      s = nonzero.where(nonzero.where(a, 1.0) ** p, 0.0).sum(dim, keepdim)
      return (s == 0).where(0.0, (s == 0).where(1.0, s) ** (1 / p))
    return self._math(vector_norm)
  def median(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | ValuesIndices:
    """The lower median (element (n - 1) // 2 in sorted order), nan if there is a nan; with `dim`, (values, indices) as
    torch.median(x, dim). Without `dim` the gradient is shared evenly by the elements equal to the median (by the nans, for
    a nan median), as PyTorch's; with it, the element picked has slope 1."""
    if dim is None: return self._whole_median("median")
    d = resolve_dim(dim, self.ndim)
    if self.ndim and self.shape[d] == 0: raise IndexError(f"median: cannot take the median of an empty dim {dim} of shape {self.shape}")
    v, i = self.kthvalue((self.shape[d] - 1) // 2 + 1 if self.ndim else 1, d, keepdim=True)
    if dtypes.is_float(self.dtype) and self.ndim:  # the first nan, where there is one: PyTorch's median propagates nan
      nan = self.isnan()
      first_nan = nan.cast(dtypes.int32).argmax(d, keepdim=True).cast(i.dtype)
      has_nan = nan.any(d, keepdim=True)
      v, i = has_nan.where(self.gather(d, first_nan), v), has_nan.where(first_nan, i)  # that nan itself: its slope is 1
    return ValuesIndices(v, i) if keepdim or not self.ndim else ValuesIndices(v.squeeze(d), i.squeeze(d))

  def nanmedian(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | ValuesIndices:
    """median of the values that are not nan (nan where all are), as torch.nanmedian: with `dim`, (values, indices), the
    index of the first nan where a row is all nan (PyTorch's is some nan's, which one its selection decides); without,
    the gradient shared as median's."""
    if dim is None: return self._whole_median("nanmedian")
    d = resolve_dim(dim, self.ndim)
    if self.ndim and self.shape[d] == 0: raise IndexError(f"nanmedian: cannot take the median of an empty dim {dim} of shape {self.shape}")
    if not dtypes.is_float(self.dtype) or not self.ndim: return self.median(dim, keepdim)
    numbers = (~self.isnan()).cast(dtypes.int32).sum(d, keepdim=True, dtype=dtypes.int32)
    v, i = self._kth_smallest(d, ((numbers - 1) // 2).maximum(0) + 1)  # the lower median among the numbers (nan last); the first nan if none
    return ValuesIndices(v, i) if keepdim else ValuesIndices(v.squeeze(d), i.squeeze(d))

  def _whole_median(self: Tensor, name: str) -> Tensor:
    """median() or nanmedian() over all elements: the value from the dim=0 form of the flattened tensor, its slope shared
    evenly by the elements equal to it (by the nans, for a nan result), as PyTorch's."""
    if self.numel() == 0:  # PyTorch's nan, kept in the graph (an empty gradient); an integer has no nan to give
      if not dtypes.is_float(self.dtype): raise IndexError(f"{name}: an empty {self.dtype.name} tensor {self.shape} has no median")
      return self.sum() + math.nan
    m = getattr(self.flatten(), name)(0)[0]
    if not self.requires_grad or not dtypes.is_float(self.dtype): return m
    ties = self._equal_or_nan(m.detach())  # a nan median: every nan shares its slope
    share = ties.where(self, 0.0).sum() / ties.sum().maximum(1).cast(self.dtype)  # the median itself, each tie's slope 1/count
    return m.isinf().where(share, m.detach() + (share - share.detach()))  # an infinite share minus itself is nan

  def aminmax(self: Tensor, dim: int | None = None, keepdim: bool = False) -> MinMax:
    """(min, max) over `dim` (all elements when None), as torch.aminmax; equal extremes share the slope, as amin's and
    amax's (a tuple of axes asks min and max for that, where one int axis gives it all to the first)."""
    axes = None if dim is None else (resolve_dim(dim, self.ndim),)
    return MinMax(self.min(axes, keepdim), self.max(axes, keepdim))

  def quantile(self: Tensor, q: float | Sequence[float] | Tensor, dim: int | None = None, keepdim: bool = False,
               interpolation: str = "linear") -> Tensor:
    """The q-th quantiles over `dim` (all elements for None) of the sorted values at rank q (n - 1): between the two
    neighbours by `interpolation` ("linear", "lower", "higher", "nearest" (half to even) or "midpoint"); nan where the
    values hold a nan. A sequence or 1-d tensor q puts its axis first. Sorting is sort's (tensor/sorting.py)."""
    if interpolation not in ("linear", "lower", "higher", "nearest", "midpoint"):
      raise ValueError(f"quantile: interpolation must be 'linear', 'lower', 'higher', 'nearest' or 'midpoint', got {interpolation!r}")
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"quantile: expected a floating point tensor, got {self.dtype}")
    if not isinstance(q, type(self)) and any(not 0 <= v <= 1 for v in ((q,) if isinstance(q, (int, float)) else q)):
      raise ValueError(f"quantile: q must be in [0, 1], got {q}")
    one_q = isinstance(q, (int, float)) or (isinstance(q, type(self)) and q.ndim == 0)
    qs = q if isinstance(q, type(self)) else type(self)([q] if one_q else list(q), dtype=self.dtype, device=self.device)
    qs = qs.reshape(-1).cast(self.dtype)
    x, d = (self.flatten(), 0) if dim is None or self.ndim == 0 else (self, resolve_dim(dim, self.ndim))
    values = x.sort(d)[0].movedim(d, -1)  # (..., n)
    n, rank = values.shape[-1], qs * (values.shape[-1] - 1)
    if n == 0: raise IndexError(f"quantile: cannot take a quantile of an empty dim of shape {self.shape}")
    def at(r: Tensor) -> Tensor:  # the sorted values at ranks r, (..., len(q))
      idx = r.cast(dtypes.int32).reshape((1,) * (values.ndim - 1) + (-1, 1)).expand(*values.shape[:-1], qs.numel(), 1)
      return values.unsqueeze(-2).expand(*values.shape[:-1], qs.numel(), n).gather(-1, idx).squeeze(-1)
    lo, hi = rank.floor(), rank.ceil()
    out = {"lower": lambda: at(lo), "higher": lambda: at(hi), "nearest": lambda: at(rank.round()), "midpoint": lambda: (at(lo) + at(hi)) * 0.5,
           "linear": lambda: at(lo).lerp(at(hi), rank - lo)}[interpolation]()
    out = x.isnan().any(d).unsqueeze(-1).where(math.nan, out).movedim(-1, 0)  # (len(q), ...)
    if keepdim and self.ndim: out = out.reshape(out.shape[:1] + ((1,) * self.ndim if dim is None else self.shape[:d] + (1,) + self.shape[d + 1:]))
    return out[0] if one_q else out

  # ---- counting: the output's length is read from the data (one read back) ----
  def bincount(self: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0 .. max(self) occurs in a 1-d tensor of non-negative ints (at least `minlength` counts), or
    the sum of `weights` (same shape) at each: counts in the default int, float weights in their dtype, int weights as
    float64, as PyTorch. One comparison with every bin, so meant for a few thousand bins."""
    if self.ndim != 1 or not dtypes.is_int(self.dtype):
      raise RuntimeError(f"bincount: needs a 1-d tensor of integers, got shape {self.shape} of {self.dtype}")
    if weights is not None and weights.shape != self.shape:
      raise RuntimeError(f"bincount: weights of shape {weights.shape} do not match the input's {self.shape}")
    if minlength < 0: raise RuntimeError(f"bincount: minlength must be non-negative, got {minlength}")
    smallest, largest = type(self).stack([self.min(), self.max()]).tolist() if self.numel() else (0, -1)  # one read back
    if smallest < 0: raise RuntimeError("bincount: the input holds negative values")
    bins = max(int(largest) + 1, minlength)
    hits = self.unsqueeze(-1) == type(self).arange(bins, device=self.device, dtype=self.dtype)  # (n, bins)
    if weights is None: return hits.sum(0, dtype=dtypes.default_int)
    w = weights if dtypes.is_float(weights.dtype) else weights.cast(dtypes.float64)
    return hits.where(w.unsqueeze(-1), 0).sum(0, dtype=w.dtype)
  def histc(self: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002 (PyTorch's names)
    """A histogram of `bins` equal bins over [min, max] (the data's own min and max where both are 0, which must be
    finite, widened by 1 each way if those are equal), in this float dtype; values outside, and nan, are not counted;
    max falls in the last bin. A value goes where PyTorch's floor((x - min) * bins / (max - min)) puts it, rounding
    included: _histc_edges finds each bin's least member on the host, and the counts are differences of how many values
    reach each edge."""
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"histc: needs a float tensor, got {self.dtype}")
    if bins <= 0: raise RuntimeError(f"histc: bins must be positive, got {bins}")
    if min > max: raise RuntimeError(f"histc: max ({max}) must be at least min ({min})")
    lo, hi = float(min), float(max)
    if lo == hi and self.numel():
      lo, hi = (float(v) for v in type(self).stack([self.min(), self.max()]).tolist())  # one read back
      if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"histc: the data's range [{lo}, {hi}] is not finite; give min and max")
    if lo == hi: lo, hi = lo - 1, hi + 1
    x = self.flatten().unsqueeze(-1)
    edges = type(self)(_histc_edges(bins, lo, hi, self.dtype.np or np.dtype(np.float32)), device=self.device).cast(self.dtype)
    reached = ((x >= edges) & (x <= hi)).sum(0, dtype=self.dtype)  # (bins,): how many values in [edge k, max], k = 0 ..
    return reached - reached[1:].pad(((0, 1),))

  # ---- pointwise ----
  def atan2(self: Tensor, other: Tensor | Scalar) -> Tensor:
    """The angle of the point (other, self) in (-pi, pi], with C's signed zeros and infinities: atan of the smaller of |y|,
    |x| over the larger (so no quotient overflows), then reflected into the point's octant; the sign is y's. |y| and |x|
    take their sign bits off, so their slopes at 0 are +-1 (abs's is 0): the gradient at y = 0 is 1 / x, as PyTorch's."""
    y, x = _float_operands(self, other)
    ay, ax = y.signbit().where(-y, y), x.signbit().where(-x, x)
    both_inf = ay.isinf() & ax.isinf()
    steep = ay > ax
    lo, hi = steep.where(ax, ay), steep.where(ay, ax)
    r = both_inf.where(1.0, (hi == 0).where(0.0, lo / (hi == 0).where(1.0, hi))).atan()  # 0/0 at the origin: angle 0 (or pi)
    r = steep.where(math.pi / 2 - r, r)
    r = x.signbit().where(math.pi - r, r)
    return (x.isnan() | y.isnan()).where(math.nan, y.signbit().where(-r, r))
  def hypot(self: Tensor, other: Tensor | Scalar) -> Tensor:
    """sqrt(x^2 + y^2) without overflow or underflow in the squares (scaled by the larger); inf if either is inf, nan too."""
    x, y = _float_operands(self, other)
    ax, ay = x.abs(), y.abs()
    big, small = ax.maximum(ay), ax.minimum(ay)
    safe = (big == 0) | big.isinf()
    usable = safe.where(1.0, big)  # finite where unused: the untaken branch's 0 times its slope in q must not be 0 * inf
    q = small / usable
    out = safe.where(big, usable * (1 + q * q).sqrt())
    return (ax.isinf() | ay.isinf()).where(math.inf, out)
  def logit(self: Tensor, eps: float | None = None) -> Tensor:
    """log(x / (1 - x)), x clamped to [eps, 1 - eps] first when eps is given: -inf and inf at 0 and 1 with slope inf,
    nan outside [0, 1] with slope nan, as PyTorch's (inside, the slope is 1 / (x (1 - x)))."""
    def f(x: Tensor) -> Tensor:
      if eps is not None: x = x.clamp(eps, 1 - eps)
      inside, edge = (x > 0) & (x < 1), (x == 0) | (x == 1)
      inner = inside.where(x, 0.5)  # x / (1 - x) at 1 is inf, and log's slope 0 there times the quotient's inf is nan
      edges = (x == 0).where(-math.inf, (x == 1).where(math.inf, math.nan)) + _edge_slopes(x, edge, ~inside & ~edge)
      return inside.where((inner / (1 - inner)).log(), edges)
    return self._math(f)
  def xlogy(self: Tensor, other: Tensor | Scalar) -> Tensor:
    """x * log(y), 0 where x is 0 (unless y is nan). The slope in x is log(y) there too, as PyTorch's (for a finite y > 0;
    0 at y = 0 and inf, where PyTorch's is infinite)."""
    x, y = _float_operands(self, other)
    zero = (x == 0) & ~y.isnan()
    slope = (zero & (y > 0) & y.isfinite()).where(y, 1.0).log().detach()  # 0 where unused, and never inf: 0 * inf is nan
    general = x * zero.where(1.0, y).log()  # y = 1 where unused: log(0)'s -inf (or 1 / a subnormal y) times 0 is nan
    return zero.where(x * slope - (x * slope).detach(), general)  # v - v is +0.0 (x * slope is -0.0 for a negative slope)
  def sinc(self: Tensor) -> Tensor:
    """sin(pi x) / (pi x), 1 at 0; float16 and bfloat16 in float32, rounded once. Below |pi x| = 1 its Taylor series
    (_SINC_TAYLOR, to float64's precision there): the quotient's slope (z cos z - sin z) / z^2 cancels near 0 (5% off at
    1e-3 in float32, 0 / 0 at tiny x)."""
    def f(x: Tensor) -> Tensor:
      near = (x * math.pi).abs() < 1
      px = near.where(1.0, x) * math.pi  # finite where unused: the untaken branch passes 0 * its slope back
      pn = near.where(x, 0.0) * math.pi
      return near.where(_poly(pn * pn, _SINC_TAYLOR), px.sin() / px)
    return self._math(f)
  def float_power(self: Tensor, exponent: Tensor | Scalar) -> Tensor:
    """self ** exponent computed in float64, as PyTorch's (the device must have float64)."""
    return self.cast(dtypes.float64).pow(exponent.cast(dtypes.float64) if isinstance(exponent, type(self)) else exponent)
  def nan_to_num(self: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """nan, inf and -inf replaced by `nan`, `posinf` and `neginf` (None: the dtype's largest and smallest finite values), as
    torch.nan_to_num; ints and bools are returned as they are. The replaced places have slope 0."""
    if not dtypes.is_float(self.dtype): return self
    top = finite_max(self.dtype)
    hi, lo = top if posinf is None else posinf, -top if neginf is None else neginf
    return self.isnan().where(nan, (self == math.inf).where(hi, (self == -math.inf).where(lo, self)))
  def heaviside(self: Tensor, values: Tensor | Scalar) -> Tensor:
    """1 where x > 0, `values` where x == 0, else 0 (nan included), as torch.heaviside; no slope."""
    x, v = self._broadcasted(values)
    return (x == 0).where(v, (x > 0).where(x._const_like(1), x._const_like(0))).detach()
  def positive(self: Tensor) -> Tensor:
    """self itself, as torch.positive (+x); a bool tensor raises, as PyTorch's."""
    if self.dtype == dtypes.bool: raise RuntimeError("positive: not supported for bool tensors")
    return self
  def __pos__(self: Tensor) -> Tensor: return self.positive()
  def deg2rad(self: Tensor) -> Tensor: return self._float() * (math.pi / 180)
  def rad2deg(self: Tensor) -> Tensor: return self._float() * (180 / math.pi)
  def frac(self: Tensor) -> Tensor: return self - self.trunc()
  def nextafter(self: Tensor, other: Tensor | Scalar) -> Tensor:
    """The next float after x toward y, as torch.nextafter (y where x == y, nan where either is): x's bits one step from
    or toward zero; from 0 the smallest subnormal with y's sign. The slope in x is 1, and 0 where x == y, as PyTorch's
    (also 0 at an infinite or nan x, where PyTorch's is 1); in y 0."""
    x, y = _float_operands(self, other)
    xd, yd = x.detach(), y.detach()
    ints = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[x.dtype.itemsize]
    bits = xd.bitcast(ints)
    stepped = ((yd > xd) == (xd > 0)).where(bits + 1, bits - 1)  # away from zero is one more in the magnitude bits
    tiny = (yd > 0).where(1, ints.min + 1).cast(ints)  # the bits of +-the smallest subnormal
    out = (xd == 0).where(tiny, stepped).bitcast(x.dtype)
    out = (xd.isnan() | yd.isnan()).where(math.nan, (xd == yd).where(yd, out))
    return (xd.isinf() | (xd == yd) | out.isnan()).where(out, x + (out - xd).detach())  # out - x is one ulp: exact
  def take(self: Tensor, index: Tensor) -> Tensor:
    """The elements at `index` into the flattened tensor (negative counts from the end), shaped as index, as torch.take. An
    index out of range gives 0, as gather's."""
    if not dtypes.is_int(index.dtype): raise RuntimeError(f"take: index must be an integer tensor, got {index.dtype}")
    flat = self.flatten()
    return flat.gather(0, flat._index_tensor(index.flatten(), 0)).reshape(index.shape)
  def signbit(self: Tensor) -> Tensor:
    """Whether the sign bit is set: true for -0.0 and negative nan too."""
    if dtypes.is_float(self.dtype): return self.bitcast(next(d for d in SINTS if d.itemsize == self.dtype.itemsize)) < 0
    return self < 0 if self.dtype in SINTS else self != self  # unsigned and bool: never
  def fmax(self: Tensor, other: Tensor | Scalar) -> Tensor:
    """The elementwise max ignoring nan (nan only where both are). A tie's gradient goes wholly to self, as PyTorch's
    (maximum shares it)."""
    x, y = self._broadcasted(other)
    return x.maximum(y) if not dtypes.is_float(x.dtype) else ((x >= y) | y.isnan()).where(x, y)
  def fmin(self: Tensor, other: Tensor | Scalar) -> Tensor:
    """The elementwise min ignoring nan (nan only where both are). A tie's gradient goes wholly to self, as PyTorch's."""
    x, y = self._broadcasted(other)
    return x.minimum(y) if not dtypes.is_float(x.dtype) else ((x <= y) | y.isnan()).where(x, y)
  def logaddexp2(self: Tensor, other: Tensor | Scalar) -> Tensor:
    """log2(2^x + 2^y); float16 and bfloat16 in float32, rounded once."""
    x, y = _float_operands(self, other)
    if x.dtype.itemsize < 4: return x.float().logaddexp2(y.float()).cast(x.dtype)
    return (x * math.log(2)).logaddexp(y * math.log(2)) * (1 / math.log(2))
