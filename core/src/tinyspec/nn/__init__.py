"""Neural-network layers with PyTorch's arguments, parameter layouts and default initializations (tinygrad's names).

A layer is a plain object: its parameters are Tensor attributes (`weight`, `bias`, ...), found by `nn.state.get_parameters`
and named by `nn.state.get_state_dict` ("layers.0.weight"), and calling it applies it. Parameters are created lazily on
their device (random initializations are THREEFRY graphs, computed on first use) with `requires_grad` left None, so an
optimizer given them turns it on.

Train and eval mode follow tinygrad: one global flag, `Tensor.training` (False by default), set for a block with
`with Tensor.train():` (`Tensor.train(False)` for eval). BatchNorm and Dropout read it.

BatchNorm's running statistics are Tensors with requires_grad=False whose buffers are written (assigned and realized) on
every training-mode call, in one realize with the input and the batch's statistics, which the output then reads; they are
among `get_parameters(model)` (an optimizer given them only realizes them: a no-op)."""
from __future__ import annotations

import math
from collections.abc import Sequence

from tinyspec.dtype import DType, dtypes
from tinyspec.tensor import Tensor
from tinyspec.uop.ops import Ops

IntOrTuple = int | Sequence[int]
MACHINE_EPS = {dtypes.float16: 2.0 ** -10, dtypes.bfloat16: 2.0 ** -7, dtypes.float32: 2.0 ** -23, dtypes.float64: 2.0 ** -52}  # torch.finfo(dt).eps


def _kaiming_bound(fan_in: int) -> float:
  """PyTorch's default bound for a weight, kaiming_uniform with a = sqrt(5): gain sqrt(2 / (1 + 5)) times sqrt(3 / fan_in),
  which is 1 / sqrt(fan_in); its default bias bound is the same."""
  return 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0

def _uniform(shape: tuple[int, ...], bound: float, device: str | None, dtype: DType | None) -> Tensor:
  return Tensor.uniform(*shape, low=-bound, high=bound, dtype=dtype, device=device)

def _write_now(writes: list[tuple[Tensor, Tensor]], *also: Tensor) -> None:
  """Write each new value into its tensor's buffer now (`assign`), so every holder of the tensor (a state dict, an
  optimizer) sees it, and a step captured by TinyJit writes it again on every replay. One realize does all the writes
  and computes `also` with them: values the writes read that are used again later, kept instead of computed twice."""
  for t, _ in writes:
    if t.uop.op is not Ops.BUFFER: t.realize()  # a fresh statistic (zeros, ones) gets its buffer on first use
  Tensor.realize(*(t.assign(new.cast(t.dtype)) for t, new in writes), *also)


class Linear:
  """y = x @ weight.T + bias, weight (out_features, in_features). Weight and bias are uniform in +-1/sqrt(in_features)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True, device: str | None = None, dtype: DType | None = None):
    bound = _kaiming_bound(in_features)
    self.weight = _uniform((out_features, in_features), bound, device, dtype)
    self.bias = _uniform((out_features,), bound, device, dtype) if bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight, self.bias)


def _conv_setup(layer: str, in_channels: int, out_channels: int, kernel_size: IntOrTuple, spatial: int, groups: int) -> tuple[int, ...]:
  """The kernel as a tuple of `spatial` sizes (an int repeated), after checking that `groups` divides both channel counts."""
  if groups < 1 or in_channels % groups or out_channels % groups:
    raise ValueError(f"{layer}: groups={groups} must divide in_channels={in_channels} and out_channels={out_channels}")
  k = (kernel_size,) * spatial if isinstance(kernel_size, int) else tuple(kernel_size)
  if spatial == 1 and len(k) != 1: raise ValueError(f"{layer}: kernel_size must be one int, got {kernel_size}")
  return k


class Conv2d:
  """2-D convolution as torch.nn.Conv2d: weight (out_channels, in_channels/groups, *kernel_size); padding an int, a tuple or
  'valid'/'same'. Weight and bias are uniform in +-1/sqrt(fan_in), fan_in = in_channels/groups * prod(kernel_size)."""
  spatial = 2  # the axes an int kernel_size covers
  def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple | str = 0,
               dilation: IntOrTuple = 1, groups: int = 1, bias: bool = True, device: str | None = None, dtype: DType | None = None):
    k = _conv_setup(type(self).__name__, in_channels, out_channels, kernel_size, self.spatial, groups)
    self.stride, self.padding, self.dilation, self.groups, self.kernel_size = stride, padding, dilation, groups, k
    bound = _kaiming_bound(in_channels // groups * math.prod(k))
    self.weight = _uniform((out_channels, in_channels // groups, *k), bound, device, dtype)
    self.bias = _uniform((out_channels,), bound, device, dtype) if bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.conv2d(self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(Conv2d):
  """1-D convolution as torch.nn.Conv1d: an (N, C, L) input, weight (out_channels, in_channels/groups, kernel_size)."""
  spatial = 1


class ConvTranspose2d:
  """Transposed 2-D convolution as torch.nn.ConvTranspose2d: weight (in_channels, out_channels/groups, *kernel_size), uniform
  in +-1/sqrt(fan_in) with PyTorch's fan_in = out_channels/groups * prod(kernel_size) (read off the weight's axis 1)."""
  spatial = 2  # the axes an int kernel_size covers
  def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
               output_padding: IntOrTuple = 0, groups: int = 1, bias: bool = True, dilation: IntOrTuple = 1, device: str | None = None,
               dtype: DType | None = None):
    k = _conv_setup(type(self).__name__, in_channels, out_channels, kernel_size, self.spatial, groups)
    self.stride, self.padding, self.output_padding, self.groups, self.dilation = stride, padding, output_padding, groups, dilation
    bound = _kaiming_bound(out_channels // groups * math.prod(k))
    self.weight = _uniform((in_channels, out_channels // groups, *k), bound, device, dtype)
    self.bias = _uniform((out_channels,), bound, device, dtype) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups, self.dilation)


class ConvTranspose1d(ConvTranspose2d):
  """Transposed 1-D convolution as torch.nn.ConvTranspose1d: an (N, C, L) input, weight (in_channels, out_channels/groups,
  kernel_size)."""
  spatial = 1


class BatchNorm:
  """Batch normalization over axis 1 of an (N, C, ...) input, as torch.nn.BatchNorm1d/2d/3d (argument order as PyTorch's).

  In training mode (`Tensor.training`) it normalizes by the batch's mean and biased variance and, with
  track_running_stats, moves running_mean and running_var toward them (the variance unbiased, n/(n-1)) by `momentum`, or
  by the cumulative average 1/num_batches_tracked when momentum is None. In eval mode it uses the running statistics, or
  the batch's when it tracks none. weight starts at ones and bias at zeros (with affine)."""
  def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
               track_running_stats: bool = True, device: str | None = None):
    self.num_features, self.eps, self.momentum, self.track_running_stats = num_features, eps, momentum, track_running_stats
    self.weight = Tensor.ones(num_features, device=device) if affine else None
    self.bias = Tensor.zeros(num_features, device=device) if affine else None
    if track_running_stats:
      self.running_mean = Tensor.zeros(num_features, device=device, requires_grad=False)
      self.running_var = Tensor.ones(num_features, device=device, requires_grad=False)
      self.num_batches_tracked = Tensor.zeros((), dtype=dtypes.int64, device=device, requires_grad=False)

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_features:
      raise RuntimeError(f"BatchNorm: expected an input of shape (N, {self.num_features}, ...), got {x.shape}")
    if not Tensor.training and self.track_running_stats: mean, var = self.running_mean, self.running_var
    else:
      axes = (0, *range(2, x.ndim))
      if (n := math.prod(x.shape[a] for a in axes)) <= 1:
        raise ValueError(f"BatchNorm: expected more than 1 value per channel when training, got input of shape {x.shape}")
      xf = x if dtypes.is_float(x.dtype) else x.float()
      mean, var = xf.mean(axes), xf.var(axes, correction=0)
      if Tensor.training and self.track_running_stats:
        count = self.num_batches_tracked + 1
        f = self.momentum if self.momentum is not None else 1 / count.float()
        # the input and its statistics are computed with the writes, so the normalization below (and its backward)
        # reads them instead of computing the input (a convolution) and the statistics again
        _write_now([(self.num_batches_tracked, count), (self.running_mean, (1 - f) * self.running_mean + f * mean.detach()),
                    (self.running_var, (1 - f) * self.running_var + f * (var.detach() * (n / (n - 1))))], x, mean, var)
    return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())

BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm


class LayerNorm:
  """Normalization over the trailing axes `normalized_shape`, as torch.nn.LayerNorm: weight ones and bias zeros (with
  elementwise_affine; bias=False leaves the bias out)."""
  def __init__(self, normalized_shape: IntOrTuple, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
               device: str | None = None):
    self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    self.eps = eps
    self.weight = Tensor.ones(self.normalized_shape, device=device) if elementwise_affine else None
    self.bias = Tensor.zeros(self.normalized_shape, device=device) if elementwise_affine and bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.layer_norm(self.normalized_shape, self.weight, self.bias, self.eps)


class LayerNorm2d(LayerNorm):
  """LayerNorm over the channel axis of an (N, C, H, W) input (tinygrad's; a ConvNeXt block's norm): each pixel's C values
  normalized, as torch.nn.LayerNorm(C) on the input permuted to channels-last and back."""
  def __init__(self, channels: int, eps: float = 1e-5, elementwise_affine: bool = True, device: str | None = None):
    super().__init__(channels, eps, elementwise_affine, device=device)
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim != 4: raise RuntimeError(f"LayerNorm2d: expected an (N, C, H, W) input, got shape {x.shape}")
    return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class GroupNorm:
  """Normalization over groups of channels, as torch.nn.GroupNorm: an (N, C, ...) input's C channels in num_groups groups,
  each normalized by its mean and biased variance over its channels and the spatial axes; weight ones and bias zeros
  per channel (with affine)."""
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device: str | None = None):
    if num_groups < 1 or num_channels % num_groups: raise ValueError(f"GroupNorm: num_groups={num_groups} must divide num_channels={num_channels}")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight = Tensor.ones(num_channels, device=device) if affine else None
    self.bias = Tensor.zeros(num_channels, device=device) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_channels:
      raise RuntimeError(f"{type(self).__name__}: expected an input of shape (N, {self.num_channels}, ...), got {x.shape}")
    y = x.reshape(x.shape[0], self.num_groups, -1).layernorm(-1, self.eps).reshape(x.shape)
    if self.weight is None: return y
    per_channel = (1, self.num_channels) + (1,) * (x.ndim - 2)
    return y * self.weight.reshape(per_channel) + self.bias.reshape(per_channel)


class InstanceNorm(GroupNorm):
  """Each sample's channels normalized one by one over the spatial axes (a GroupNorm of one channel per group), as
  torch.nn.InstanceNorm1d/2d/3d with affine=True, tinygrad's default (affine=False leaves weight and bias out). It keeps
  no running statistics (PyTorch's track_running_stats=False)."""
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True, device: str | None = None):
    super().__init__(num_features, num_features, eps, affine, device)


class RMSNorm:
  """x / sqrt(mean(x^2) + eps) over the trailing axes `normalized_shape`, times weight (ones), as torch.nn.RMSNorm; eps None
  is the input dtype's machine epsilon (PyTorch's default)."""
  def __init__(self, normalized_shape: IntOrTuple, eps: float | None = None, elementwise_affine: bool = True, device: str | None = None):
    self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    self.eps = eps
    self.weight = Tensor.ones(self.normalized_shape, device=device) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    n = len(self.normalized_shape)
    if x.shape[x.ndim - n:] != self.normalized_shape:
      raise RuntimeError(f"RMSNorm: expected an input whose last axes are {self.normalized_shape}, got {x.shape}")
    eps = self.eps if self.eps is not None else MACHINE_EPS.get(x.dtype, MACHINE_EPS[dtypes.float32])
    y = x._math(lambda x: x * ((x * x).mean(tuple(range(x.ndim - n, x.ndim)), keepdim=True) + eps).rsqrt())  # float16 in float32
    return y if self.weight is None else y * self.weight


class Dropout:
  """Zeroes each element with probability p under `Tensor.train()` (scaling the rest by 1/(1-p)); the identity in eval."""
  def __init__(self, p: float = 0.5):
    if not 0.0 <= p <= 1.0: raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
    self.p = p
  def __call__(self, x: Tensor) -> Tensor: return x.dropout(self.p)


class MaxPool2d:
  """x.max_pool2d with these settings, as torch.nn.MaxPool2d."""
  def __init__(self, kernel_size: IntOrTuple, stride: IntOrTuple | None = None, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
               return_indices: bool = False, ceil_mode: bool = False):
    self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
    self.return_indices, self.ceil_mode = return_indices, ceil_mode
  def __call__(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
    return x.max_pool2d(self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode, self.return_indices)


class AvgPool2d:
  """x.avg_pool2d with these settings, as torch.nn.AvgPool2d."""
  def __init__(self, kernel_size: IntOrTuple, stride: IntOrTuple | None = None, padding: IntOrTuple = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None):
    self.kernel_size, self.stride, self.padding, self.ceil_mode = kernel_size, stride, padding, ceil_mode
    self.count_include_pad, self.divisor_override = count_include_pad, divisor_override
  def __call__(self, x: Tensor) -> Tensor:
    return x.avg_pool2d(self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool2d:
  """x.adaptive_avg_pool2d(output_size), as torch.nn.AdaptiveAvgPool2d (output_size (1, 1): a global average pool)."""
  def __init__(self, output_size: int | tuple[int | None, int | None]): self.output_size = output_size
  def __call__(self, x: Tensor) -> Tensor: return x.adaptive_avg_pool2d(self.output_size)


class AdaptiveMaxPool2d:
  """x.adaptive_max_pool2d(output_size, return_indices), as torch.nn.AdaptiveMaxPool2d."""
  def __init__(self, output_size: int | tuple[int | None, int | None], return_indices: bool = False):
    self.output_size, self.return_indices = output_size, return_indices
  def __call__(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]: return x.adaptive_max_pool2d(self.output_size, self.return_indices)


class Embedding:
  """A lookup table: integer indices of any shape -> their rows of weight (vocab_size, embed_size), which starts as
  standard normal samples (as torch.nn.Embedding)."""
  def __init__(self, vocab_size: int, embed_size: int, device: str | None = None, dtype: DType | None = None):
    self.vocab_size, self.embed_size = vocab_size, embed_size
    self.weight = Tensor.randn(vocab_size, embed_size, dtype=dtype, device=device)
  def __call__(self, idx: Tensor) -> Tensor:
    if not dtypes.is_int(idx.dtype): raise TypeError(f"Embedding: indices must be an integer tensor, got {idx.dtype}")
    return self.weight[idx]


class LSTMCell:
  """One step of an LSTM, as torch.nn.LSTMCell: gates i, f, g, o = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh
  split in four along the last axis; c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c'). Weights (4 *
  hidden_size, input_size) and (4 * hidden_size, hidden_size), all parameters uniform in +-1/sqrt(hidden_size). Called
  with x (N, input_size) or unbatched (input_size,), and (h, c) or None for zeros; returns (h', c')."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: str | None = None, dtype: DType | None = None):
    self.input_size, self.hidden_size = input_size, hidden_size
    bound = _kaiming_bound(hidden_size)
    self.weight_ih = _uniform((4 * hidden_size, input_size), bound, device, dtype)
    self.weight_hh = _uniform((4 * hidden_size, hidden_size), bound, device, dtype)
    self.bias_ih = _uniform((4 * hidden_size,), bound, device, dtype) if bias else None
    self.bias_hh = _uniform((4 * hidden_size,), bound, device, dtype) if bias else None
  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
      raise RuntimeError(f"LSTMCell: expected an input of shape (N, {self.input_size}) or ({self.input_size},), got {x.shape}")
    if hc is None: hc = (Tensor.zeros(*x.shape[:-1], self.hidden_size, dtype=self.weight_ih.dtype, device=x.device),) * 2
    h, c = hc
    if h.shape != (*x.shape[:-1], self.hidden_size) or c.shape != h.shape:
      raise RuntimeError(f"LSTMCell: expected h and c of shape {(*x.shape[:-1], self.hidden_size)} for an input of shape {x.shape}, "
                         f"got {h.shape} and {c.shape}")
    i, f, g, o = (x.linear(self.weight_ih, self.bias_ih) + h.linear(self.weight_hh, self.bias_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


from tinyspec.nn import optim, state  # noqa: E402  (nn.optim and nn.state after `import tinyspec.nn`, as tinygrad's)

__all__ = ["optim", "state", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool2d", "BatchNorm", "BatchNorm1d", "BatchNorm2d",
           "BatchNorm3d", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "Dropout", "Embedding", "GroupNorm", "InstanceNorm",
           "LSTMCell", "LayerNorm", "LayerNorm2d", "Linear", "MaxPool2d", "RMSNorm"]
