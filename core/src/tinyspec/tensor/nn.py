"""Neural-network ops as lazy compositions: matmul, linear, convolution, pooling, normalization.

Each one is a single lazy graph of movement ops, elementwise ops and reduces, so the kernel fuser can make one kernel of
`a @ b` (seed 001's gemm: a broadcast multiply summed over the shared axis) and of conv2d (sliding windows built from
pad/shrink/reshape/expand/permute, multiplied by the weight and summed). Nothing in here realizes or inserts CONTIGUOUS;
the one marker is max_pool2d's CONTIGUOUSBACKWARD, which gives its input's gradient a buffer (see there)."""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from tinyspec.dtype import dtypes, position_dtype
from tinyspec.tensor.movement import broadcast_shape

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Tensor

IntOrTuple = int | Sequence[int]


def _tuple(x: IntOrTuple, n: int, name: str) -> tuple[int, ...]:
  """An int for every one of n spatial axes, or a sequence of exactly n."""
  if isinstance(x, int): return (x,) * n
  if len(x := tuple(x)) != n: raise ValueError(f"{name} must be an int or {n} ints, got {x}")
  return tuple(int(v) for v in x)

def _sum_keep_dtype(x: Tensor, axes: tuple[int, ...]) -> Tensor:
  """sum over axes in x's own dtype, as a matmul or convolution of ints gives (PyTorch's; sum alone widens ints to int64).
  bool sums as int32 and becomes bool again (any)."""
  return x.sum(axes, keepdim=True, dtype=dtypes.int32 if x.dtype == dtypes.bool else x.dtype if dtypes.is_int(x.dtype) else None).cast(x.dtype)

def _window_argmax(windows: Tensor, values: Tensor, positions: Tensor, past: int) -> Tensor:
  """Where each window's maximum (values) is, from the windows (last axis) and each element's input position (`past` for
  padding): the first maximum's, or the last nan's where a window has a nan, as PyTorch's max pools name them."""
  x = windows.detach()
  first_max = (x == values.detach().unsqueeze(-1)).where(positions, past).min(-1)
  if not dtypes.is_float(x.dtype): return first_max
  last_nan = x.isnan().where(positions, -1).max(-1)
  return (last_nan >= 0).where(last_nan, first_max)

def _sizes(output_size: int | Sequence[int | None], n: int, name: str) -> tuple[int | None, ...]:
  """An adaptive pool's output_size as n sizes: an int for every axis, or a sequence of exactly n."""
  if isinstance(output_size, int): return (output_size,) * n
  if len(sizes := tuple(output_size)) != n: raise RuntimeError(f"{name}: output_size {output_size} must have {n} entries")
  return sizes

def _adaptive_bounds(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
  """Adaptive pooling's windows along one axis, as PyTorch's: output r covers [floor(r * size / out), ceil((r + 1) * size / out))."""
  r = np.arange(out)
  return r * size // out, -(-(r + 1) * size // out)

def _pool(x: Tensor, k: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Tensor:
  """The sliding windows over the last len(k) axes: (*b, *i) -> (*b, *o, *k), where window element [o.., k..] is
  x[o*stride + k*dilation] along each axis, o = (i - dilation*(k-1) - 1) // stride + 1.

  Per axis, with the input (zero-)padded to length L >= max(i, o*stride): tiled r times end to end, cut into k rows of
  L + dilation, row j starts dilation*j elements further into x; each row's first o*stride elements, taken every
  stride-th, are the window positions. Only reshape/expand/pad/shrink/permute, so it stays one lazy view."""
  n, b = len(k), x.shape[:-len(k)]
  i_ = x.shape[-n:]
  o_ = tuple((i - d * (kk - 1) - 1) // s + 1 for i, kk, s, d in zip(i_, k, stride, dilation))
  if any(o <= 0 for o in o_):
    raise RuntimeError(f"window {k} with dilation {dilation} is larger than the (padded) input size {i_}: the output would be {o_}")
  keep, nb = [None] * len(b), len(b)
  if all(d == 1 for d in dilation) and all(s >= kk for s, kk in zip(stride, k)):
    # windows that do not overlap (a 2x2 max pool, a patchify conv): blocks of `stride`, the first k of each. Plain reshapes
    # read with no division, where the general tiling below costs its gradient (a max pool's backward) a few per element
    x = x.pad(keep + [(0, max(0, o * s - i)) for i, o, s in zip(i_, o_, stride)]).shrink(keep + [(0, o * s) for o, s in zip(o_, stride)])
    x = x.reshape(*b, *[v for o, s in zip(o_, stride) for v in (o, s)]).shrink(keep + [v for o, kk in zip(o_, k) for v in ((0, o), (0, kk))])
    return x.permute(*range(nb), *[nb + 2 * j for j in range(n)], *[nb + 2 * j + 1 for j in range(n)])
  L = tuple(max(i, o * s) for i, o, s in zip(i_, o_, stride))
  r = tuple(-(-kk * (l + d) // l) for kk, l, d in zip(k, L, dilation))
  x = x.pad(keep + [(0, l - i) for l, i in zip(L, i_)])
  x = x.reshape(*b, *[v for l in L for v in (1, l)]).expand(*b, *[v for rr, l in zip(r, L) for v in (rr, l)])
  x = x.reshape(*b, *[rr * l for rr, l in zip(r, L)]).shrink(keep + [(0, kk * (l + d)) for kk, l, d in zip(k, L, dilation)])
  x = x.reshape(*b, *[v for kk, l, d in zip(k, L, dilation) for v in (kk, l + d)])
  x = x.shrink(keep + [v for kk, o, s in zip(k, o_, stride) for v in ((0, kk), (0, o * s))])
  x = x.reshape(*b, *[v for kk, o, s in zip(k, o_, stride) for v in (kk, o, s)])
  x = x.shrink(keep + [v for kk, o in zip(k, o_) for v in ((0, kk), (0, o), (0, 1))]).reshape(*b, *[v for kk, o in zip(k, o_) for v in (kk, o)])
  return x.permute(*range(nb), *[nb + 2 * j + 1 for j in range(n)], *[nb + 2 * j for j in range(n)])

def _conv_pads(padding: IntOrTuple | str, k: tuple[int, ...], dilation: tuple[int, ...], stride: tuple[int, ...]) -> list[tuple[int, int]]:
  """conv2d's padding as (before, after) per spatial axis. An int or one int per axis pads both sides; 2n ints are
  (before, after) pairs from the last axis backwards, as F.pad; 'valid' is none and 'same' keeps the size (stride 1)."""
  n = len(k)
  if isinstance(padding, str):
    if padding == "valid": return [(0, 0)] * n
    if padding != "same": raise ValueError(f"padding must be 'valid', 'same', an int or a tuple of ints, got {padding!r}")
    if any(s != 1 for s in stride): raise ValueError("padding='same' is not supported for strided convolutions")
    return [(d * (kk - 1) // 2, d * (kk - 1) - d * (kk - 1) // 2) for kk, d in zip(k, dilation)]  # the odd one extra goes after
  if isinstance(padding, int): return [(padding, padding)] * n
  p = tuple(padding)
  if len(p) == n: return [(v, v) for v in p]
  if len(p) == 2 * n: return [(p[2 * (n - 1 - j)], p[2 * (n - 1 - j) + 1]) for j in range(n)]
  raise ValueError(f"padding must be an int, {n} ints or {2 * n} ints for {n} spatial axes, got {p}")


def _einsum_diagonals(formula: str, spec: str, t: Tensor) -> tuple[str, Tensor]:
  """An operand whose subscripts repeat a letter ("ii", "iij") reduced to its diagonal over each repeat: the letter once,
  as the last axis (torch.einsum("ii->i", a) is a's diagonal)."""
  while len(set(spec)) != len(spec):
    c = next(c for c in spec if spec.count(c) > 1)
    a, b = spec.index(c), spec.index(c, spec.index(c) + 1)
    if t.shape[a] != t.shape[b]: raise RuntimeError(f"einsum {formula!r}: letter {c!r} repeated in {spec!r} with sizes {t.shape[a]} and {t.shape[b]}")
    t, spec = t.diagonal(0, a, b), spec[:a] + spec[a + 1:b] + spec[b + 1:] + c
  return spec, t


def _linear_taps(n: int, m: int, ratio: float, align_corners: bool | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """The two source indices of each of m outputs along an axis of n, and the weight of the second (float64)."""
  if align_corners: src = np.arange(m) * ((n - 1) / (m - 1) if m > 1 else 0.0)
  else: src = np.maximum((np.arange(m) + 0.5) * ratio - 0.5, 0.0)
  i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
  return i0, np.minimum(i0 + 1, n - 1), src - i0


def _cubic_taps(n: int, m: int, ratio: float, align_corners: bool | None) -> list[tuple[np.ndarray, np.ndarray]]:
  """Bicubic's four (source index, weight) pairs of each of m outputs along an axis of n, as PyTorch's: Keys' cubic
  convolution with a = -0.75 around floor(src), src not clamped at the border (the indices are), weights in float64."""
  src = np.arange(m) * ((n - 1) / (m - 1) if m > 1 else 0.0) if align_corners else (np.arange(m) + 0.5) * ratio - 0.5
  base, a = np.floor(src), -0.75
  t = src - base
  def near(d: np.ndarray) -> np.ndarray: return ((a + 2) * d - (a + 3)) * d * d + 1  # a tap |d| <= 1 away
  def far(d: np.ndarray) -> np.ndarray: return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a  # a tap 1 < |d| < 2 away
  weights = (far(t + 1), near(t), near(1 - t), far(2 - t))
  return [(np.clip(base.astype(np.int64) + k, 0, n - 1), w) for k, w in zip((-1, 0, 1, 2), weights)]


def _resize_uint8(x: Tensor, taps: list[tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]) -> Tensor:
  """PyTorch's uint8 bilinear resize, bit for bit: axes are resized last first, each pass rounding back to uint8. A
  pass's weights are integers scaled by 2**bits, where bits is the most that keeps twice the largest weight of the axis
  under 2**15; the sum gets half of 2**bits added before it is shifted down. An axis that keeps its size is left as is."""
  for a, (i0, i1, w1) in reversed(taps):
    if len(i0) == x.shape[a]: continue
    w0 = 1 - w1
    largest = max(w0.max(initial=0.0), w1.max(initial=0.0))
    bits = next((b for b in range(22) if int(0.5 + largest * (1 << (b + 1))) >= 1 << 15), 21)
    shape, lead = (-1,) + (1,) * (x.ndim - a - 1), (slice(None),) * a
    fixed = [type(x)(np.floor(0.5 + w * (1 << bits)).astype(np.int32).reshape(shape), device=x.device) for w in (w0, w1)]
    total = x[lead + (i0,)].cast(dtypes.int32) * fixed[0] + x[lead + (i1,)].cast(dtypes.int32) * fixed[1]
    x = ((total + (1 << (bits - 1))) >> bits).clip(0, 255).cast(dtypes.uint8)
  return x


class NNMixin:
  """Neural-network building blocks for Tensor."""

  # ---- matrix products ----
  def matmul(self: Tensor, w: Tensor, reverse: bool = False) -> Tensor:
    """Matrix product as torch.matmul: 1-D x 1-D is a dot product, a 1-D operand acts as a row (left) or column (right)
    vector that is dropped from the result, and leading batch axes broadcast. One lazy graph: x[..., n, k, 1] times
    w[..., 1, k, m], summed over k."""
    if not isinstance(w, type(self)): w = type(self)(w, device=self.device)  # a list or numpy array on the left of @ lands here
    x, w = (w, self) if reverse else (self, w)
    if x.ndim == 0 or w.ndim == 0: raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {x.ndim}D and {w.ndim}D")
    kx, kw = x.shape[-1], w.shape[-2 if w.ndim > 1 else -1]
    if kx != kw: raise RuntimeError(f"matmul: shapes {x.shape} and {w.shape} cannot be multiplied ({kx} != {kw} in the shared dimension)")
    if w.ndim == 1: return _sum_keep_dtype(x * w, (x.ndim - 1,)).reshape(x.shape[:-1])
    if w.ndim == 2 and x.ndim > 2 and all(isinstance(s, int) for s in x.shape):
      # batch axes against one matrix (nn.Linear on (batch, time, features)) as one (rows, k) @ (k, m), as PyTorch does: w's
      # gradient is then one sum over all rows, a single long reduction, not one over each batch axis in turn
      return x.reshape(math.prod(x.shape[:-1]), kx).matmul(w).reshape(*x.shape[:-1], w.shape[-1])
    xb = x.shape[:-2] if x.ndim > 1 else ()
    try: batch = broadcast_shape(xb, w.shape[:-2])
    except RuntimeError: raise RuntimeError(f"matmul: the batch dimensions of shapes {x.shape} and {w.shape} do not broadcast") from None
    prod = x.reshape(*x.shape[:-1], kx, 1) * w.reshape(*w.shape[:-2], 1, kw, w.shape[-1])
    return _sum_keep_dtype(prod, (prod.ndim - 2,)).reshape(*batch, *(x.shape[-2:-1] if x.ndim > 1 else ()), w.shape[-1])

  def __matmul__(self: Tensor, w: Tensor) -> Tensor: return self.matmul(w)
  def __rmatmul__(self: Tensor, x: Tensor) -> Tensor: return self.matmul(x, reverse=True)

  def sequential(self: Tensor, layers: Sequence[Callable[[Tensor], Tensor]]) -> Tensor:
    """Each of `layers` applied in turn, the first to this tensor (tinygrad's)."""
    return functools.reduce(lambda x, f: f(x), layers, self)

  def dot(self: Tensor, w: Tensor) -> Tensor:
    """The same as matmul (as tinygrad's dot); for two 1-D tensors it is torch.dot."""
    return self.matmul(w)

  def linear(self: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """self @ weight.T + bias with PyTorch's layout: weight (out_features, in_features), bias (out_features,)."""
    out = self.matmul(weight.transpose(-1, -2) if weight.ndim > 1 else weight)
    return out if bias is None else out + bias

  # ---- convolution ----
  def conv2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1, padding: IntOrTuple | str = 0,
             dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """Convolution (cross-correlation, as PyTorch) of an (N, Cin, *spatial) input, or an unbatched (Cin, *spatial) one, with
    weight (Cout, Cin/groups, *kernel); any number of spatial axes, so it is also conv1d and conv3d. `padding`: an int,
    one int per axis, 2 per axis as F.pad's pairs from the last axis backwards, or 'valid'/'same'."""
    nd = weight.ndim - 2
    if nd < 1: raise RuntimeError(f"conv2d: weight must have at least 3 dimensions (Cout, Cin/groups, *kernel), got shape {weight.shape}")
    if self.ndim == nd + 1: return self.unsqueeze(0).conv2d(weight, bias, stride, padding, dilation, groups).squeeze(0)
    if self.ndim != nd + 2:
      raise RuntimeError(f"conv2d: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) input for weight of shape {weight.shape}, "
                         f"but got input of shape {self.shape}")
    k, s, d = weight.shape[2:], _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    return self._conv(weight, bias, s, _conv_pads(padding, k, d, s), d, groups)

  def _conv(self: Tensor, weight: Tensor, bias: Tensor | None, stride: tuple[int, ...], pads: list[tuple[int, int]],
            dilation: tuple[int, ...], groups: int) -> Tensor:
    nd = weight.ndim - 2
    (bs, cin), (cout, cin_g), k = self.shape[:2], weight.shape[:2], weight.shape[2:]
    if groups < 1 or cout % groups:
      raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                         f"but got weight of size {list(weight.shape)}")
    if cin_g * groups != cin:
      raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input{list(self.shape)} to have "
                         f"{cin_g * groups} channels, but got {cin} channels instead")
    if any(v < 1 for v in stride + dilation): raise RuntimeError(f"conv2d: stride {stride} and dilation {dilation} must be positive")
    x = _pool(self.pad([None, None, *pads]), k, stride, dilation)  # (bs, cin, *o, *k)
    o, rc = x.shape[2:2 + nd], cout // groups
    # (bs, groups, 1, cin_g, *o, *k) * (1, groups, rc, cin_g, 1.., *k), summed over cin_g and the kernel axes
    prod = x.reshape(bs, groups, 1, cin_g, *o, *k) * weight.reshape(1, groups, rc, cin_g, *[1] * nd, *k)
    out = _sum_keep_dtype(prod, (3, *range(4 + nd, 4 + 2 * nd))).reshape(bs, cout, *o)
    return out if bias is None else out + bias.reshape(1, cout, *[1] * nd)

  def conv_transpose2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                       output_padding: IntOrTuple = 0, groups: int = 1, dilation: IntOrTuple = 1) -> Tensor:
    """Transposed convolution (the gradient of conv2d with respect to its input), PyTorch's argument order and weight
    layout (Cin, Cout/groups, *kernel). Built as a conv2d: the input with stride-1 zeros between its elements, padded by
    dilation*(k-1) - padding (+ output_padding after), convolved with the kernel flipped and its channel axes swapped."""
    nd = weight.ndim - 2
    if nd < 1: raise RuntimeError(f"conv_transpose2d: weight must have at least 3 dimensions, got shape {weight.shape}")
    if self.ndim == nd + 1: return self.unsqueeze(0).conv_transpose2d(weight, bias, stride, padding, output_padding, groups, dilation).squeeze(0)
    if self.ndim != nd + 2: raise RuntimeError(f"conv_transpose2d: expected a {nd + 1}-d or {nd + 2}-d input, got shape {self.shape}")
    s, p, d = _tuple(stride, nd, "stride"), _tuple(padding, nd, "padding"), _tuple(dilation, nd, "dilation")
    op = _tuple(output_padding, nd, "output_padding")
    (bs, cin), (wcin, rc), k = self.shape[:2], weight.shape[:2], weight.shape[2:]
    if wcin != cin:
      raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input{list(self.shape)} to have {wcin} channels, "
                         f"but got {cin} channels instead")
    if groups < 1 or cin % groups: raise RuntimeError(f"conv_transpose2d: groups={groups} must divide the {cin} input channels")
    if any(o >= max(ss, dd) for o, ss, dd in zip(op, s, d)):
      raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got output_padding={op}, stride={s}, dilation={d}")
    x, sp = self, self.shape[2:]
    out = [(i - 1) * ss - 2 * pp + dd * (kk - 1) + oo + 1 for i, ss, pp, dd, kk, oo in zip(sp, s, p, d, k, op)]
    if any(o < 0 for o in out):
      raise RuntimeError(f"conv_transpose2d: input size per channel {tuple(sp)} gives output size {tuple(out)}, which is too small")
    if 0 in out:  # an empty output, as PyTorch's: still in the graph, so both inputs get their (zero) gradients
      return (self.sum() * 0 + weight.sum() * 0).reshape((1,) * (2 + nd)).expand(bs, groups * rc, *out)
    if any(v > 1 for v in s):  # stride - 1 zeros after each element: (i,) -> (i, 1) -> pad to (i, s) -> (i*s,) -> the first (i-1)*s + 1
      x = x.reshape(bs, cin, *[v for i in sp for v in (i, 1)]).pad([None, None, *[v for ss in s for v in (None, (0, ss - 1))]])
      x = x.reshape(bs, cin, *[i * ss for i, ss in zip(sp, s)]).shrink([None, None, *[(0, max(0, (i - 1) * ss + 1)) for i, ss in zip(sp, s)]])
    cin_g = cin // groups
    w = weight.reshape(groups, cin_g, rc, *k).transpose(1, 2).reshape(groups * rc, cin_g, *k).flip(range(2, 2 + nd))
    pads = [(dd * (kk - 1) - pp, dd * (kk - 1) - pp + oo) for kk, dd, pp, oo in zip(k, d, p, op)]
    return x._conv(w, bias, (1,) * nd, pads, d, groups)

  # ---- pooling ----
  def _pool_setup(self: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None, padding: IntOrTuple, dilation: IntOrTuple,
                  ceil_mode: bool, name: str):
    """Per spatial axis (the last len(kernel) axes): kernel, stride (default the kernel), dilation, the (before, after)
    padding given (an int or one per axis pads both sides; 2n ints are pairs from the last axis backwards, as F.pad and
    tinygrad), the same with the extra `after` that ceil_mode needs, and the output size."""
    nd = len(kernel_size) if not isinstance(kernel_size, int) else 2
    k = _tuple(kernel_size, nd, "kernel_size")
    s, d = _tuple(k if stride is None else stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    if self.ndim < nd: raise RuntimeError(f"{name}: a {nd}-d window needs an input of at least {nd} dimensions, got shape {self.shape}")
    if any(v < 1 for v in k + s + d): raise RuntimeError(f"{name}: kernel_size {k}, stride {s} and dilation {d} must be positive")
    if isinstance(padding, str): raise ValueError(f"{name}: padding must be an int or a tuple of ints, got {padding!r}")
    given = _conv_pads(padding, k, d, s)
    if any(min(pp) < 0 or max(pp) > (dd * (kk - 1) + 1) // 2 for pp, kk, dd in zip(given, k, d)):
      raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, but got pad={padding}, kernel_size={k} and dilation={d}")
    pads, out = [], []
    for i, kk, ss, (before, after), dd in zip(self.shape[-nd:], k, s, given, d):
      span = i + before + after - dd * (kk - 1) - 1
      o = (-(-span // ss) if ceil_mode else span // ss) + 1  # ceil_mode may fit a window that overhangs the padding
      if ceil_mode and (o - 1) * ss >= i + before: o -= 1  # a last window that would start in the right padding is dropped, as PyTorch
      if o < 1: raise RuntimeError(f"{name}: the window {k} (dilation {d}) does not fit the input {self.shape[-nd:]} padded by {padding}")
      pads.append((before, max(after, (o - 1) * ss + dd * (kk - 1) + 1 - i - before)))
      out.append(o)
    return k, s, d, given, pads, tuple(out)

  def max_pool2d(self: Tensor, kernel_size: IntOrTuple = (2, 2), stride: IntOrTuple | None = None, padding: IntOrTuple = 0,
                 dilation: IntOrTuple = 1, ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """The max over each window of the last len(kernel_size) axes (the last 2 for an int); padding counts as -inf. The
    gradient goes to each window's first maximum in row-major order, as PyTorch's (whose indices name that one). With
    return_indices, also where each maximum is, as an index (position_dtype's) into the flattened spatial axes of the
    input (the last nan of a window that has one, as PyTorch): what max_unpool2d takes."""
    k, s, d, _, pads, o = self._pool_setup(kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d")
    nd, keep = len(k), [None] * (self.ndim - len(k))
    # the input's gradient (each window's gradient sent back to its maximum) gets a buffer of its own: what comes before a
    # pool (BatchNorm's backward, say) reads it in several kernels, each of which would otherwise redo the window search
    windows = _pool(self.contiguous_backward().pad(keep + pads, value=self.dtype.min), k, s, d)
    windows = windows.shrink(keep + [(0, oo) for oo in o] + [None] * nd)
    windows = windows.flatten(windows.ndim - nd)
    values = windows.max(-1)
    if not return_indices: return values
    # each window's flat input positions, from the same windows over an arange (padding: a position past every real one)
    spatial, past = self.shape[-nd:], math.prod(self.shape[-nd:])
    positions = type(self).arange(past, dtype=position_dtype(past + 1), device=self.device).reshape(*spatial).pad(pads, value=past)
    positions = _pool(positions, k, s, d).shrink([(0, oo) for oo in o] + [None] * nd).flatten(nd)
    return values, _window_argmax(windows, values, positions, past)

  def max_unpool2d(self: Tensor, indices: Tensor, kernel_size: IntOrTuple = (2, 2), stride: IntOrTuple | None = None, dilation: IntOrTuple = 1,
                   padding: IntOrTuple = 0, output_size: Sequence[int] | None = None) -> Tensor:
    """The inverse of max_pool2d(return_indices=True) (F.max_unpool2d): zeros of the pooled input's spatial size, each
    value written at its index into the flattened spatial axes. The spatial size is (i - 1) * stride - 2 * padding +
    dilation * (kernel - 1) + 1 per axis, or the last axes of output_size. A scatter: work grows with input x output size."""
    nd = len(kernel_size) if not isinstance(kernel_size, int) else 2
    k, p = _tuple(kernel_size, nd, "kernel_size"), _tuple(padding, nd, "padding")
    s, d = _tuple(k if stride is None else stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    if indices.shape != self.shape: raise RuntimeError(f"max_unpool2d: indices of shape {indices.shape} for an input of shape {self.shape}")
    if output_size is None: out = tuple((i - 1) * ss - 2 * pp + dd * (kk - 1) + 1 for i, ss, pp, dd, kk in zip(self.shape[-nd:], s, p, d, k))
    else: out = tuple(output_size)[-nd:]
    if len(out) != nd or any(v < 1 for v in out): raise RuntimeError(f"max_unpool2d: output spatial size {out} for {nd} spatial axes")
    lead, n = self.shape[:-nd], math.prod(out)
    values, at = self.flatten(len(lead)), indices.flatten(len(lead))
    placed = type(self).zeros(*lead, n, dtype=self.dtype, device=self.device).scatter(-1, at, values.detach())
    if self.requires_grad is False or not dtypes.is_float(self.dtype): return placed.reshape(*lead, *out)
    # overlapping windows repeat an index, with the same value: the scatter writes it once, but PyTorch's gradient reaches
    # every repeat. So the values enter as zeros that carry their gradient (v - v.detach(); an infinite value carries none)
    zeros = values.isfinite().where(values - values.detach(), 0).unsqueeze(-1)
    hit = at.unsqueeze(-1) == type(self).arange(n, dtype=at.dtype, device=self.device)
    return (placed + hit.where(zeros, 0).sum(-2)).reshape(*lead, *out)

  def avg_pool2d(self: Tensor, kernel_size: IntOrTuple = (2, 2), stride: IntOrTuple | None = None, padding: IntOrTuple = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """The mean over each window of the last len(kernel_size) axes. As PyTorch, the divisor counts the zero padding when
    count_include_pad (but never the extra ceil_mode padding) and only the input's elements otherwise."""
    k, s, d, p, pads, o = self._pool_setup(kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d")
    x, keep, nd = self._float(), [None] * (self.ndim - len(k)), len(k)
    sums = _pool(x.pad(keep + pads), k, s, d).shrink(keep + [(0, oo) for oo in o] + [None] * nd).sum(tuple(range(-nd, 0)))
    if divisor_override is not None: return sums / divisor_override
    if pads == p and (count_include_pad or not any(map(any, p))): return sums / math.prod(k)
    # the divisor per window, elementwise (no second reduce): per axis, the window [o*s - before, o*s - before + k) clipped
    # to the padded input [-before, i + after) when the padding counts, else to the input [0, i); the axes' counts multiply
    count = None
    for j, (i, kk, ss, (before, after), oo) in enumerate(zip(self.shape[-nd:], k, s, p, o)):
      lo, hi = (-before, i + after) if count_include_pad else (0, i)
      start = type(self).arange(oo, dtype=dtypes.int32, device=self.device) * ss - before
      c = ((start + kk).minimum(hi) - start.maximum(lo)).reshape(oo, *[1] * (nd - 1 - j))
      count = c if count is None else count * c
    return sums / count

  def _adaptive_setup(self: Tensor, output_size: int | Sequence[int | None], nd: int, name: str) -> tuple[tuple[int, ...], bool]:
    """The output's spatial size (None keeps an axis' size) over the last nd axes, and whether each axis divides evenly
    (then adaptive pooling is the plain pool with kernel = stride = size // out)."""
    out = _sizes(output_size, nd, name)
    if self.ndim < nd + 1: raise RuntimeError(f"{name}: expected a {nd + 1}-D or {nd + 2}-D input, got shape {self.shape}")
    out = tuple(i if o is None else o for i, o in zip(self.shape[-nd:], out))
    if any(o < 1 for o in out) or any(i < 1 for i in self.shape[-nd:]):
      raise RuntimeError(f"{name}: output_size {out} and the input's spatial size {self.shape[-nd:]} must be positive")
    return out, all(i % o == 0 for i, o in zip(self.shape[-nd:], out))

  def _adaptive_windows(self: Tensor, out: tuple[int, ...], fill: float) -> tuple[Tensor, np.ndarray]:
    """Each output's window over the last len(out) axes, as trailing axes (..., *out, *longest window), the places past a
    shorter window's end holding `fill`: a gather per axis (adaptive windows are not evenly strided). And how many places
    each output's window has (an array of shape out)."""
    nd, x, valid = len(out), self, None
    for j, (size, o) in enumerate(zip(self.shape[-nd:], out)):
      start, end = _adaptive_bounds(size, o)
      k = np.arange(int((end - start).max()))
      x = x[(Ellipsis, np.minimum(start[:, None] + k, size - 1)) + (slice(None),) * (nd - 1 - j)]  # (..., o, k, rest)
      here = k < (end - start)[:, None]  # (o, k): which of the longest window's places this window has
      valid = here if valid is None else valid[..., None, None] & here
    lead = self.ndim - nd
    order = list(range(lead)) + [lead + 2 * j for j in range(nd)] + [lead + 2 * j + 1 for j in range(nd)]
    mask = type(self)(valid, device=self.device).permute([2 * j for j in range(nd)] + [2 * j + 1 for j in range(nd)])
    return mask.where(x.permute(order), fill), valid.sum(axis=tuple(range(1, 2 * nd, 2)))  # valid: (o1, k1, o2, k2, ...)

  def adaptive_avg_pool2d(self: Tensor, output_size: int | Sequence[int | None]) -> Tensor:
    """The mean over adaptive windows of the last 2 axes (F.adaptive_avg_pool2d; a tuple of 1 or 3 sizes pools 1 or 3
    axes): output r along an axis of size i averages [floor(r * i / o), ceil((r + 1) * i / o))."""
    nd = 2 if isinstance(output_size, int) else len(output_size)
    out, even = self._adaptive_setup(output_size, nd, "adaptive_avg_pool2d")
    if even: return self.avg_pool2d(tuple(i // o for i, o in zip(self.shape[-nd:], out)))
    windows, count = self._float()._adaptive_windows(out, 0)
    sums = windows.sum(tuple(range(-nd, 0)))
    return sums / type(self)(count.astype(np.float32), device=self.device).cast(sums.dtype)

  def adaptive_max_pool2d(self: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """The max over adaptive windows of the last 2 axes (F.adaptive_max_pool2d; windows as adaptive_avg_pool2d's). The
    gradient and the indices (into the flattened spatial axes) name each window's first maximum, as max_pool2d's."""
    nd = 2 if isinstance(output_size, int) else len(output_size)
    out, even = self._adaptive_setup(output_size, nd, "adaptive_max_pool2d")
    if even: return self.max_pool2d(tuple(i // o for i, o in zip(self.shape[-nd:], out)), return_indices=return_indices)
    windows = self.contiguous_backward()._adaptive_windows(out, self.dtype.min)[0].flatten(self.ndim)
    values = windows.max(-1)
    if not return_indices: return values
    spatial, past = self.shape[-nd:], math.prod(self.shape[-nd:])
    positions = type(self).arange(past, dtype=position_dtype(past + 1), device=self.device).reshape(*spatial)
    return values, _window_argmax(windows, values, positions._adaptive_windows(out, past)[0].flatten(nd), past)

  # PyTorch's 1-d and 3-d names: an int output_size is one size per pooled axis
  def adaptive_avg_pool1d(self: Tensor, output_size: int | Sequence[int | None]) -> Tensor:
    return self.adaptive_avg_pool2d(_sizes(output_size, 1, "adaptive_avg_pool1d"))
  def adaptive_avg_pool3d(self: Tensor, output_size: int | Sequence[int | None]) -> Tensor:
    return self.adaptive_avg_pool2d(_sizes(output_size, 3, "adaptive_avg_pool3d"))
  def adaptive_max_pool1d(self: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    return self.adaptive_max_pool2d(_sizes(output_size, 1, "adaptive_max_pool1d"), return_indices)
  def adaptive_max_pool3d(self: Tensor, output_size: int | Sequence[int | None], return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    return self.adaptive_max_pool2d(_sizes(output_size, 3, "adaptive_max_pool3d"), return_indices)

  # ---- normalization ----
  def layernorm(self: Tensor, axis: int | tuple[int, ...] = -1, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over `axis`, the biased variance (correction 0), without weight or bias; float16 in
    float32, rounded once (its variance overflows float16 for deviations of a few hundred), as PyTorch."""
    return self._math(lambda x: (x - x.mean(axis, keepdim=True)) * (x.var(axis, keepdim=True, correction=0) + eps).rsqrt())

  def layer_norm(self: Tensor, normalized_shape: IntOrTuple, weight: Tensor | None = None, bias: Tensor | None = None,
                 eps: float = 1e-5) -> Tensor:
    """PyTorch's F.layer_norm: normalize over the trailing axes `normalized_shape`, then scale by weight and shift by bias."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not 0 < len(ns) <= self.ndim or self.shape[self.ndim - len(ns):] != ns:
      raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape [*, {', '.join(map(str, ns))}], "
                         f"but got input of size{list(self.shape)}")
    out = self.layernorm(tuple(range(-len(ns), 0)), eps)
    if weight is not None: out = out * weight
    return out if bias is None else out + bias

  def batchnorm(self: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor) -> Tensor:
    """(x - mean) * invstd * weight + bias with the parameters, of shape (C,), along axis 1 (as tinygrad's batchnorm)."""
    shape = (1, -1, *[1] * (self.ndim - 2))
    x = (self - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    return x if bias is None else x + bias.reshape(shape)

  def batch_norm(self: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
                 bias: Tensor | None = None, training: bool = False, eps: float = 1e-5) -> Tensor:
    """PyTorch's F.batch_norm over axis 1: with training, the batch's own mean and biased variance (the running statistics
    are not updated: tensors are immutable here); otherwise running_mean and running_var."""
    if self.ndim < 2: raise RuntimeError(f"batch_norm: expected an input with at least 2 dimensions (N, C, ...), got shape {self.shape}")
    c = self.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
      if t is not None and t.shape != (c,): raise RuntimeError(f"batch_norm: {name} must have shape ({c},) for input {self.shape}, got {t.shape}")
    axes = (0, *range(2, self.ndim))
    if training:
      if math.prod(self.shape[a] for a in axes) <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(self.shape)}")
      def normalized(x: Tensor) -> Tensor: return x.batchnorm(weight, bias, x.mean(axes), (x.var(axes, correction=0) + eps).rsqrt())
      return self._math(normalized)  # float16 in float32, as layernorm
    if running_mean is None or running_var is None: raise RuntimeError("batch_norm: running_mean and running_var are needed when not training")
    return self._float().batchnorm(weight, bias, running_mean, (running_var + eps).rsqrt())

  # ---- attention and dropout ----
  def scaled_dot_product_attention(self: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v with `self` the query (..., L, E), key (..., S, E), value (..., S, Ev), as PyTorch's
    F.scaled_dot_product_attention: a bool mask keeps where true, a float mask is added; is_causal keeps the lower
    triangle; scale defaults to 1/sqrt(E). A row with every position masked gives 0 (PyTorch's answer), not nan; a masked
    inf score is masked too, a masked nan score makes its row nan. With enable_gqa, key and value may have fewer heads
    (axis -3) than the query, a divisor of its count: each serves a group. dropout_p drops attention weights under
    `Tensor.train()` only, as tinygrad's Tensor method and `dropout` do (PyTorch's functional form drops them in any mode)."""
    if is_causal and attn_mask is not None: raise RuntimeError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
    if enable_gqa and self.ndim >= 3 and key.shape[-3] != self.shape[-3]:
      heads, kv_heads = self.shape[-3], key.shape[-3]
      if kv_heads == 0 or heads % kv_heads or value.shape[-3] != kv_heads:
        raise RuntimeError(f"scaled_dot_product_attention: {heads} query heads do not split into groups over key heads {kv_heads} "
                           f"and value heads {value.shape[-3]}")
      key, value = key.repeat_interleave(heads // kv_heads, -3), value.repeat_interleave(heads // kv_heads, -3)
    q = self._float()
    if attn_mask is not None and attn_mask.dtype not in (dtypes.bool, dtypes.float32, q.dtype):
      raise RuntimeError(f"scaled_dot_product_attention: attn_mask must be bool, float32 or the query's {q.dtype.name}, got {attn_mask.dtype.name}")
    L, S = q.shape[-2], key.shape[-2]
    att = (q @ key.transpose(-2, -1)) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if S == 0: return att @ value  # no keys: zeros (an empty sum), as PyTorch
    if is_causal: attn_mask = type(self).ones(L, S, dtype=dtypes.bool, device=self.device).tril()
    if attn_mask is not None:
      # a bool mask as min(score, +-inf): -inf where masked, even over an inf score (PyTorch's math backend adds -inf and
      # gets nan there), and LLVM vectorizes the row max of it, where max(acc, where(m, -inf, s)) became a conditional
      # update (0.65 -> 0.13 ms a causal (16,4,64,64) row max). A masked nan score stays nan, as in that backend.
      att = att.minimum(attn_mask.where(math.inf, -math.inf).cast(att.dtype)) if attn_mask.dtype == dtypes.bool else \
        att + attn_mask.cast(att.dtype)  # a float32 mask of a float16 query is added in float16, the result's dtype (PyTorch's)
    # softmax written out, so one max serves both the shift and the rows with every position masked (all -inf): those
    # shift by 0 instead of -inf, their exps are all 0, and dividing by 1 instead of their sum 0 gives PyTorch's zeros
    top = att.max((-1,), keepdim=True).detach()  # a tuple: a plain MAX, not the two more reductions that route an int axis's gradient
    e = (att - (top == -math.inf).where(0.0, top)).exp()
    total = e.sum(-1, keepdim=True)
    return (e * (total == 0).where(1.0, total).reciprocal()).dropout(dropout_p) @ value  # one reciprocal per row, as softmax
  def dropout(self: Tensor, p: float = 0.5) -> Tensor:
    """Each element zeroed with probability p and the rest scaled by 1/(1-p), under `Tensor.train()` only (as nn.Dropout in
    training mode); outside training, the tensor itself."""
    if not 0.0 <= p <= 1.0: raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not type(self).training or p == 0: return self
    if p == 1: return self * 0
    return (type(self).rand(*self.shape, device=self.device) >= p).where(self / (1 - p), 0.0)

  # ---- einsum, interpolate ----
  @classmethod
  def einsum(cls, formula: str, *operands: Tensor) -> Tensor:
    """Einstein summation as torch.einsum: "ij,jk->ik", an implicit output (the letters used once, sorted) without "->",
    and "..." for leading broadcast axes. Each operand is laid out over all the letters (size 1 where it has none), the
    product taken, and the letters not in the output summed: one fused kernel, as matmul is."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    lhs, arrow, out = formula.replace(" ", "").partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands): raise RuntimeError(f"einsum {formula!r}: {len(inputs)} operands in the formula, {len(operands)} given")
    if any(spec.count("...") > 1 for spec in inputs + [out]): raise RuntimeError(f"einsum {formula!r}: more than one '...' in one operand")
    nell = max((t.ndim - (len(spec) - 3) for spec, t in zip(inputs, operands) if "..." in spec), default=0)
    ell = "".join(chr(0x100 + i) for i in range(nell))  # the "..." axes as letters of their own, past ASCII: no subscript's
    inputs = [spec.replace("...", ell[len(ell) - (t.ndim - (len(spec) - 3)):] if "..." in spec else "") for spec, t in zip(inputs, operands)]
    if not arrow: out = ell + "".join(sorted(c for c in set("".join(inputs)) if "".join(inputs).count(c) == 1 and c not in ell))
    else: out = out.replace("...", ell)
    sizes: dict[str, int] = {}
    for spec, t in zip(inputs, operands):
      if len(spec) != t.ndim: raise RuntimeError(f"einsum {formula!r}: operand of shape {t.shape} for subscripts {spec!r}")
    inputs, operands = map(list, zip(*(_einsum_diagonals(formula, spec, t) for spec, t in zip(inputs, operands))))
    for spec, t in zip(inputs, operands):
      for c, n in zip(spec, t.shape):
        if sizes.setdefault(c, n) != n and n != 1 and sizes[c] != 1:
          raise RuntimeError(f"einsum {formula!r}: letter {c!r} has sizes {sizes[c]} and {n}")
        sizes[c] = max(sizes[c], n)
    if unknown := set(out) - set(sizes): raise RuntimeError(f"einsum {formula!r}: output letters {sorted(unknown)} appear in no operand")
    letters = list(out) + sorted(set(sizes) - set(out))
    prod = None
    for spec, t in zip(inputs, operands):
      order = sorted(range(len(spec)), key=lambda a: letters.index(spec[a]))
      laid = t.permute(order).reshape(tuple(t.shape[spec.index(c)] if c in spec else 1 for c in letters))
      prod = laid if prod is None else prod * laid
    summed = tuple(range(len(out), len(letters)))
    if summed: return prod.sum(summed, dtype=None if prod.dtype == dtypes.bool else prod.dtype)  # int32 stays int32, as torch.einsum
    return prod.expand(*(sizes[c] for c in letters)) if letters else prod  # "->" of 0-d operands: their product

  def interpolate(self: Tensor, size: int | tuple[int, ...] | None = None, scale_factor: float | tuple[float, ...] | None = None,
                  mode: str = "nearest", align_corners: bool | None = None) -> Tensor:
    """Resizes the spatial axes of an (N, C, *spatial) input as F.interpolate: mode "nearest" (source index floor(i * in /
    out)), "nearest-exact" (floor((i + 0.5) * in / out): the nearest pixel center), or "linear"/"bilinear"/"trilinear"
    (each axis in turn, from the two nearest source positions; align_corners maps the corner pixels' centers onto each
    other), "bicubic" (4-D input; four taps per axis, see _cubic_taps) or "area" (each output the mean of the source cell it
    covers: adaptive_avg_pool2d). An integer input keeps its dtype. A uint8 image is resized with the linear modes as
    PyTorch does, one axis at a time from the last, each pass in fixed point (see _resize_uint8); other integers, and any
    integer with bicubic or area, are interpolated in float32 and rounded."""
    nd = self.ndim - 2
    if nd < 1: raise ValueError(f"interpolate: expected an (N, C, *spatial) input, got shape {self.shape}")
    if (size is None) == (scale_factor is None): raise ValueError("interpolate: give exactly one of size and scale_factor")
    if mode not in ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic", "area"):
      raise ValueError(f"interpolate: mode {mode!r} is not supported")
    if mode == "bicubic" and nd != 2: raise ValueError(f"interpolate: bicubic resizes a 4-D input, got shape {self.shape}")
    nearest = mode.startswith("nearest") or mode == "area"
    if nearest and align_corners is not None: raise ValueError("interpolate: align_corners is only for the linear and cubic modes")
    if size is not None:
      outs = (size,) * nd if isinstance(size, int) else tuple(size)
      ratios = tuple(n / m if m else 0.0 for n, m in zip(self.shape[2:], outs))
    else:  # as PyTorch, source positions come from the factor given, not from the rounded sizes
      factors = (scale_factor,) * nd if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
      outs = tuple(int(math.floor(n * f)) for n, f in zip(self.shape[2:], factors))
      # but an axis that keeps its size is copied, as PyTorch's linear kernels and its 2-d nearest one do (scale 1.25 of 3 is 3)
      copies = not nearest or (mode == "nearest" and nd == 2)
      ratios = tuple(1.0 if copies and m == n else 1 / f for n, m, f in zip(self.shape[2:], outs, factors))
    if len(outs) != nd or len(ratios) != nd: raise ValueError(f"interpolate: {len(outs)} output sizes for {nd} spatial axes")
    if mode == "area":  # each output the mean of the source pixels its cell covers: an adaptive average pool
      x = (self if dtypes.is_float(self.dtype) else self.float()).adaptive_avg_pool2d(outs)
      return x if dtypes.is_float(self.dtype) else x.round().clip(self.dtype.min, self.dtype.max).cast(self.dtype)
    if nearest:
      x = self
      for a, (n, m, ratio) in enumerate(zip(self.shape[2:], outs, ratios), start=2):
        x = x[(slice(None),) * a + (np.minimum(np.floor((np.arange(m) + (mode == "nearest-exact") * 0.5) * ratio).astype(np.int64), n - 1),)]
      return x
    axes = list(enumerate(zip(self.shape[2:], outs, ratios), start=2))
    taps = [(a, _linear_taps(n, m, ratio, align_corners)) for a, (n, m, ratio) in axes]
    if self.dtype == dtypes.uint8 and mode != "bicubic": return _resize_uint8(self, taps)
    x = self if self.dtype in (dtypes.float32, dtypes.float64) else self.float()  # float16 in float32, rounded once, as PyTorch
    def weight(w: np.ndarray, a: int) -> Tensor: return type(self)(w.reshape((-1,) + (1,) * (self.ndim - a - 1)), dtype=x.dtype, device=self.device)
    if mode == "bicubic":
      for a, (n, m, ratio) in axes:  # each output the weighted sum of its four taps along this axis
        terms = [x[(slice(None),) * a + (i,)] * weight(w, a) for i, w in _cubic_taps(n, m, ratio, align_corners)]
        x = sum(terms[1:], terms[0])
    else:
      for a, (i0, i1, w) in taps:
        lead, w = (slice(None),) * a, weight(w, a)
        x = x[lead + (i0,)] * (1 - w) + x[lead + (i1,)] * w
    if x.dtype == self.dtype or dtypes.is_float(self.dtype): return x.cast(self.dtype)
    return x.round().clip(self.dtype.min, self.dtype.max).cast(self.dtype)
