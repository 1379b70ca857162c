"""PyTorch's in-place methods: `x.add_(y)` computes `x.add(y)` and writes it back into x, returning x. The write is the
one x[idx] = v makes: into the buffer of a realized tensor (seen by every tensor over that buffer), or, on an unrealized
one, a new graph for this Tensor object, with gradients through it. The result must keep x's shape, and its dtype must be
one x's can hold without changing kind (a float result into an int tensor is an error), as PyTorch's rule."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tinyspec.dtype import DType, dtypes
from tinyspec.tensor.movement import movement_base
from tinyspec.uop.ops import Ops

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Scalar, Tensor

# the out-of-place methods that have an in-place twin named with a trailing underscore (x.clamp_(0, 1), x.masked_fill_(m, 0))
IN_PLACE_TWINS = (
  "add", "sub", "mul", "div", "true_divide", "floor_divide", "fmod", "remainder", "pow", "neg", "abs", "sign", "reciprocal",
  "square", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan",
  "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "atan2", "hypot", "erf", "lgamma", "digamma", "sigmoid", "logit", "relu",
  "clamp", "clamp_min", "clamp_max", "clip", "floor", "ceil", "round", "trunc", "frac", "nan_to_num", "lerp", "addcmul", "addcdiv",
  "xlogy", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_and", "logical_or", "logical_xor", "logical_not",
  "masked_fill", "masked_scatter", "index_fill", "index_add", "index_copy", "index_put", "put", "scatter", "scatter_add",
  "scatter_reduce", "tril", "triu", "deg2rad", "rad2deg", "sinc", "cumsum", "cumprod",
)

def _kind(dt: DType) -> int: return 0 if dt == dtypes.bool else 2 if dtypes.is_float(dt) else 1

def _twin(name: str) -> Callable[..., Any]:
  def in_place(self: Tensor, *args: Any, **kwargs: Any) -> Tensor: return self._update(getattr(self, name)(*args, **kwargs), f"{name}_")
  in_place.__name__ = in_place.__qualname__ = f"{name}_"
  in_place.__doc__ = f"In place: x.{name}_(...) writes x.{name}(...) into x and returns x."
  return in_place


class InPlaceMixin:
  def _update(self: Tensor, updated: Tensor, op: str) -> Tensor:
    """Write `updated` into this tensor (see the module docstring), after checking that it fits: the same shape, and a
    dtype of no higher kind (bool < int < float)."""
    if updated.shape != self.shape:
      raise RuntimeError(f"{op}: the result's shape {updated.shape} differs from this tensor's {self.shape}; an in-place op cannot change it")
    if _kind(updated.dtype) > _kind(self.dtype):
      raise RuntimeError(f"{op}: the result's dtype {updated.dtype.name} cannot be written into this tensor's {self.dtype.name}")
    updated = updated.cast(self.dtype)
    base, _ = movement_base(self.uop.src[0] if self.uop.op is Ops.AFTER else self.uop)
    return self.assign(updated) if base.op is Ops.BUFFER else self.replace(updated)

  def fill_(self: Tensor, value: Scalar | Tensor) -> Tensor:
    """Every element set to value (a number or a one-element tensor), in place."""
    if isinstance(value, type(self)):
      if value.numel() != 1: raise RuntimeError(f"fill_: takes a number or a one-element tensor, got a tensor of shape {value.shape}")
      return self._update(value.reshape(()).cast(self.dtype).expand(self.shape), "fill_")
    return self._update(type(self).full_like(self, value), "fill_")
  def zero_(self: Tensor) -> Tensor:
    """Every element set to 0, in place."""
    return self._update(type(self).zeros_like(self), "zero_")
  def copy_(self: Tensor, src: Tensor | Any) -> Tensor:
    """src's values (broadcast to this shape, cast to this dtype, moved to this device) written into this tensor."""
    src = src if isinstance(src, type(self)) else type(self)(src, device=self.device, dtype=self.dtype)
    return self._update(src.to(self.device).cast(self.dtype)._broadcast_to(self.shape), "copy_")
  def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Every element drawn uniformly from [a, b), in place."""
    return self._update(type(self).uniform(*self.shape, low=a, high=b, dtype=self.dtype, device=self.device), "uniform_")
  def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Every element drawn from a normal distribution, in place."""
    return self._update(type(self).normal(*self.shape, mean=mean, std=std, dtype=self.dtype, device=self.device), "normal_")


for _name in IN_PLACE_TWINS: setattr(InPlaceMixin, f"{_name}_", _twin(_name))
