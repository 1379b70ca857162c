"""Random numbers generated lazily on the device with THREEFRY (Threefry-2x32, a counter-based generator).

Every call draws a fresh key: THREEFRY(call number, seed), read from a two-word buffer (data, not constants, so every
call is the same kernel), so two calls differ and `Tensor.manual_seed(s)` replays the same sequence of calls. Element i
of a call is THREEFRY(i, key) on the uint64 counter from an arange: 64 random bits, computed where the tensor is used
(the host supplies only the two words, and nothing is materialized before use).

Bits to floats: the top m+1 bits of the 64 (m = the dtype's mantissa bits: 24 for float32, 11 for float16, 8 for bfloat16,
53 for float64) as an integer times 2^-(m+1). Every such value is exactly representable in the dtype, so the result is
uniform on a grid of step 2^-(m+1) over [0, 1), never 1.0 (a rounding cast from a finer grid could give 1.0)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tinyspec.dtype import DType, dtypes, position_dtype, to_dtype
from tinyspec.tensor.movement import no_negative_sizes, shape_arg
from tinyspec.uop.ops import Ops
from tinyspec.uop.properties import sint_max
from tinyspec.uop.uop import UOp

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Tensor

_GRID_BITS = {dtypes.float16: 11, dtypes.bfloat16: 8, dtypes.float32: 24, dtypes.float64: 53}


class RandomMixin:
  """Seeded random tensors. The generator state is two ints shared by every Tensor: the seed and the number of calls so far."""
  _seed: int = 0
  _calls: int = 0

  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    """Restart the generator at `seed` (any int; taken modulo 2^64): the calls that follow give the same numbers every time."""
    RandomMixin._seed, RandomMixin._calls = int(seed), 0

  @classmethod
  def _random_bits(cls, n: int, device: str | None) -> Tensor:
    """n uint64 words of random bits: THREEFRY of the counters 0..n-1 under this call's key."""
    call, RandomMixin._calls = RandomMixin._calls, RandomMixin._calls + 1
    # the call number and seed are data, not constants, so every call is the same computation: compiled once, then cached
    state = cls(np.array([call, RandomMixin._seed % 2 ** 64], np.uint64), device=device).uop
    key = UOp(Ops.THREEFRY, (state.shrink((0,), (1,)), state.shrink((1,), (1,))))
    counter = cls.arange(n, dtype=dtypes.uint64, device=device)
    return counter._new(UOp(Ops.THREEFRY, (counter.uop, key.expand((n,)))))

  @classmethod
  def rand(cls, *shape, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None) -> Tensor:
    """Uniform samples in [0, 1) of `shape` (sizes or one tuple) and float `dtype` (default float32)."""
    shape, dt = shape_arg(*shape), dtypes.default_float if dtype is None else to_dtype(dtype)
    if dt not in _GRID_BITS: raise RuntimeError(f"rand: dtype must be a float dtype ({', '.join(map(str, _GRID_BITS))}), got {dt}")
    no_negative_sizes(shape, "rand")
    if any(isinstance(s, UOp) for s in shape):  # symbolic: drawn at the largest shape, the window of the values now kept
      out = cls.rand(tuple(sint_max(s) for s in shape), dtype=dt, device=device).shrink(tuple((0, s) for s in shape))
      out.requires_grad = requires_grad
      return out
    k = _GRID_BITS[dt]
    wide = dtypes.float64 if dt == dtypes.float64 else dtypes.float32
    out = ((cls._random_bits(math.prod(shape), device) >> (64 - k)).cast(wide) * 2.0 ** -k).cast(dt).reshape(shape)
    out.requires_grad = requires_grad
    return out

  @classmethod
  def randn(cls, *shape, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None) -> Tensor:
    """Standard normal samples (mean 0, std 1) by the Box-Muller transform: cos(2 pi u1) * sqrt(-2 ln(1 - u2)), with u1 and u2
    uniform in [0, 1) (so 1 - u2 is in (0, 1] and the log is finite)."""
    shape, dt = shape_arg(*shape), dtypes.default_float if dtype is None else to_dtype(dtype)
    if dt not in _GRID_BITS: raise RuntimeError(f"randn: dtype must be a float dtype, got {dt}")
    no_negative_sizes(shape, "randn")
    n = math.prod(shape)
    u = cls.rand(2, n, dtype=dtypes.float64 if dt == dtypes.float64 else dtypes.float32, device=device)
    u1, u2 = u.shrink(((0, 1), None)).reshape(n), u.shrink(((1, 2), None)).reshape(n)
    out = ((u1 * (2 * math.pi)).cos() * ((1 - u2).log() * -2).sqrt()).cast(dt).reshape(shape)
    out.requires_grad = requires_grad
    return out

  @classmethod
  def randint(cls, *args, low: int | None = None, high: int | None = None, size=None, dtype: DType | str | None = None,
              device: str | None = None) -> Tensor:
    """Uniform integers in [low, high), as torch.randint: randint(high, size), randint(low, high, size), or keywords; or
    tinygrad's randint(*shape, low=0, high=10): positional ints alone, with no size, are the shape (torch's form always
    has a size). `dtype` defaults to int32. The bits taken modulo (high - low): the bias is below (high - low) / 2^64."""
    if size is None and len(args) == 1 and isinstance(args[0], (tuple, list)): args = tuple(args[0])  # randint((2, 3)), tinygrad's too
    if args and size is None and all(isinstance(a, int) and not isinstance(a, bool) for a in args):
      size, args, high = args, (), 10 if high is None else high
    if len(args) == 3: low, high, size = args
    elif len(args) == 2 and isinstance(args[1], (tuple, list)): high, size = args
    elif len(args) == 2: low, high = args
    elif len(args) == 1: high = args[0]
    elif args: raise TypeError(f"randint takes (high, size) or (low, high, size), got {len(args)} positional arguments")
    low = 0 if low is None else low
    if high is None or size is None: raise TypeError("randint: high and size are required, as randint(high, size) or randint(low, high, size)")
    if not isinstance(low, int) or not isinstance(high, int): raise TypeError(f"randint: low and high must be ints, got {low!r}, {high!r}")
    if low >= high: raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    dt, shape = dtypes.default_int if dtype is None else to_dtype(dtype), shape_arg(size)
    no_negative_sizes(shape, "randint")
    if not dtypes.is_int(dt): raise RuntimeError(f"randint: dtype must be an integer dtype, got {dt}")
    if low < dt.min or high - 1 > dt.max: raise RuntimeError(f"randint: [{low}, {high}) does not fit {dt} [{dt.min}, {dt.max}]")
    # the offset is added in dt: it wraps around like the hardware, and the sum always lands back in [low, high)
    return ((cls._random_bits(math.prod(shape), device) % (high - low)).cast(dt) + low).reshape(shape)

  @classmethod
  def randperm(cls, n: int, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """A random permutation of 0..n-1 (position_dtype's unless `dtype`), as torch.randperm: n random 64-bit keys from the
    seeded generator, argsorted. The argsort runs on the host (numpy's, cheaper than the device's sort of n keys), so this realizes:
    keep it out of a TinyJit step."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0: raise RuntimeError(f"randperm: n must be a non-negative int, got {n!r}")
    dt = position_dtype(n) if dtype is None else to_dtype(dtype)
    if not (dtypes.is_int(dt) or dtypes.is_float(dt)) or n - 1 > dt.max: raise RuntimeError(f"randperm: {n} values do not fit {dt}")
    keys = cls._random_bits(n, device).numpy() if n else np.zeros(0, np.uint64)
    return cls(np.argsort(keys, kind="stable").astype(dt.np), device=device)

  def multinomial(self: Tensor, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """`num_samples` category indices (position_dtype's) drawn with the probabilities proportional to this tensor's last
    axis (1-d, or 2-d: one row of weights per draw), as torch.multinomial. With replacement, or for one sample, by the
    inverse of the cumulative weights; without, Efraimidis and Spirakis' keys log(u) / w, the largest num_samples of them
    (topk: sort's ranks or bitonic network). The weights are not read: negative or all-zero ones give no error, unlike PyTorch's."""
    if self.ndim not in (1, 2): raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {self.shape}")
    if num_samples <= 0: raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples (got {num_samples})")
    if self.shape[-1] == 0: raise RuntimeError(f"multinomial: cannot sample from an empty distribution (shape {self.shape})")
    w, n = (self if self.ndim == 2 else self.unsqueeze(0)).float(), self.shape[-1]
    if not replacement and num_samples > n:
      raise RuntimeError(f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement ({num_samples} > {n})")
    if replacement or num_samples == 1:
      cdf = w.cumsum(-1)
      u = type(self).rand(w.shape[0], num_samples, 1, device=self.device) * cdf[:, -1:].unsqueeze(1)
      picked = (cdf.unsqueeze(1) <= u).sum(-1).clamp(max=n - 1)  # the first category whose cumulative weight passes u
    else: picked = (type(self).rand(*w.shape, device=self.device).log() / w).topk(num_samples, -1)[1]
    return (picked if self.ndim == 2 else picked.squeeze(0)).cast(position_dtype(n))

  @classmethod
  def uniform(cls, *shape, low: float = 0.0, high: float = 1.0, dtype: DType | str | None = None, device: str | None = None,
              requires_grad: bool | None = None) -> Tensor:
    """Uniform samples in [low, high)."""
    out = cls.rand(*shape, dtype=dtype, device=device) * (high - low) + low
    out.requires_grad = requires_grad
    return out

  @classmethod
  def normal(cls, *shape, mean: float = 0.0, std: float = 1.0, dtype: DType | str | None = None, device: str | None = None,
             requires_grad: bool | None = None) -> Tensor:
    """Normal samples with `mean` and standard deviation `std`."""
    out = cls.randn(*shape, dtype=dtype, device=device) * std + mean
    out.requires_grad = requires_grad
    return out

  # ---- initializers, tinygrad's: fan_in is the product of the axes after the first ----
  @classmethod
  def scaled_uniform(cls, *shape, **kwargs) -> Tensor:
    """Uniform in [-1, 1) scaled by 1/sqrt(numel)."""
    shape = shape_arg(*shape)
    return cls.uniform(*shape, low=-1.0, high=1.0, **kwargs) * math.prod(shape) ** -0.5
  @classmethod
  def glorot_uniform(cls, *shape, **kwargs) -> Tensor:
    """Uniform in +-sqrt(6 / (fan_out + fan_in)) (Glorot and Bengio; PyTorch's xavier_uniform_ with gain 1)."""
    shape = shape_arg(*shape)
    bound = math.sqrt(6 / (shape[0] + math.prod(shape[1:]))) if shape else 1.0
    return cls.uniform(*shape, low=-bound, high=bound, **kwargs)
  xavier_uniform = glorot_uniform
  @classmethod
  def kaiming_uniform(cls, *shape, a: float = 0.01, **kwargs) -> Tensor:
    """Uniform in +-sqrt(3) * gain / sqrt(fan_in), gain sqrt(2 / (1 + a^2)) (He et al., leaky ReLU slope a)."""
    shape = shape_arg(*shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a * a)) / math.sqrt(max(1, math.prod(shape[1:])))
    return cls.uniform(*shape, low=-bound, high=bound, **kwargs)
  @classmethod
  def kaiming_normal(cls, *shape, a: float = 0.01, **kwargs) -> Tensor:
    """Normal with standard deviation sqrt(2 / (1 + a^2)) / sqrt(fan_in)."""
    shape = shape_arg(*shape)
    return cls.normal(*shape, std=math.sqrt(2.0 / (1 + a * a)) / math.sqrt(max(1, math.prod(shape[1:]))), **kwargs)

  def rand_like(self: Tensor, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """rand with this tensor's shape, dtype and device unless given."""
    return type(self).rand(self.shape, dtype=dtype or self.dtype, device=device or self.device)

  def randn_like(self: Tensor, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """randn with this tensor's shape, dtype and device unless given."""
    return type(self).randn(self.shape, dtype=dtype or self.dtype, device=device or self.device)
