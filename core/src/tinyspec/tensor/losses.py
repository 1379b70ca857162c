"""Loss functions with PyTorch's names and semantics (torch.nn.functional), and tinygrad's names for the same losses.
`self` is the prediction; each takes `reduction` "mean", "sum" or "none"."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tinyspec.dtype import dtypes

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Tensor

REDUCTIONS = ("mean", "sum", "none")


def _reduced(loss: Tensor, reduction: str, weight_sum: Tensor | None = None) -> Tensor:
  """The per-element loss reduced: its sum, its mean (over `weight_sum` where given: a weighted mean), or as it is."""
  if reduction == "none": return loss
  if reduction == "sum": return loss.sum()
  return loss.sum() / weight_sum if weight_sum is not None else loss.mean()

def _class_axis(x: Tensor) -> int:
  """The class axis: 1 of a batched (N, C, d...) input, 0 of an unbatched (C,) one."""
  return 1 if x.ndim >= 2 else 0

def _check(reduction: str, what: str, allowed: tuple[str, ...] = REDUCTIONS) -> None:
  if reduction not in allowed: raise ValueError(f"{what}: reduction must be one of {allowed}, got {reduction!r}")


class LossMixin:
  """Losses for Tensor."""

  def _class_mask(self: Tensor, target: Tensor, ignore_index: int) -> tuple[Tensor, Tensor]:
    """(one-hot of `target` along the class axis 1 of self's shape, the targets that count): class-index targets of shape
    (N, d...) for an input (N, C, d...), or () for (C,)."""
    if dtypes.is_float(target.dtype) or target.dtype == dtypes.bool:
      raise TypeError(f"class-index targets must be integers, got {target.dtype}")
    batched = self.ndim >= 2
    want = (self.shape[0], *self.shape[2:]) if batched else ()
    if target.shape != want: raise RuntimeError(f"targets of shape {target.shape} for an input of shape {self.shape}: expected {want}")
    c = self.shape[1] if batched else self.shape[0]
    classes = type(self).arange(c, dtype=target.dtype, device=self.device)
    if batched: classes = classes.reshape((1, c) + (1,) * (self.ndim - 2))
    t = target.unsqueeze(1) if batched else target
    valid = target != ignore_index
    return (t == classes) & (valid.unsqueeze(1) if batched else valid), valid

  def _class_weight(self: Tensor, weight: Tensor | None) -> Tensor | None:
    """A per-class weight (C,) laid along the class axis of self's shape."""
    return None if weight is None else weight.reshape((1, -1) + (1,) * (self.ndim - 2)) if self.ndim >= 2 else weight

  def _picked(self: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """For log-probabilities `self` and class indices: (-w_t * self[t] per target, 0 where ignored; self weighted per class;
    the weight of each target that counts; which targets count)."""
    onehot, valid = self._class_mask(target, ignore_index)
    axis, w = _class_axis(self), self._class_weight(weight)
    weighted = self if w is None else self * w
    counted = valid.cast(self.dtype) if w is None else onehot.where(w, 0.0).sum(axis)
    return -onehot.where(weighted, 0.0).sum(axis), weighted, counted, valid

  def nll_loss(self: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """-input[target] from log-probabilities of shape (N, C, d...) (or (C,)) and class indices; `weight` (C,) scales each
    class, and the mean is over the weights of the targets that count (`ignore_index` counts for nothing)."""
    _check(reduction, "nll_loss")
    nll, _, counted, _ = self._picked(target, weight, ignore_index)
    return _reduced(nll, reduction, counted.sum())

  def cross_entropy(self: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean",
                    label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy from logits (N, C, d...) (or (C,)) against class indices (N, d...), or class probabilities of the
    input's shape. label_smoothing e mixes the target with the uniform distribution: (1 - e) nll + e mean_c(-w_c logp_c)."""
    _check(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    axis = _class_axis(self)
    logp = self.log_softmax(axis)
    c = self.shape[axis]
    if dtypes.is_float(target.dtype):  # class probabilities
      if target.shape != self.shape: raise RuntimeError(f"cross_entropy: probabilities of shape {target.shape} for logits of shape {self.shape}")
      p = target * (1 - label_smoothing) + label_smoothing / c
      w = self._class_weight(weight)
      return _reduced(-(p * logp if w is None else p * logp * w).sum(axis), reduction)
    nll, weighted, counted, valid = logp._picked(target, weight, ignore_index)
    if label_smoothing:
      smooth = -valid.where(weighted.sum(axis), 0.0) / c
      nll = nll * (1 - label_smoothing) + smooth * label_smoothing
    return _reduced(nll, reduction, counted.sum())

  def binary_cross_entropy(self: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean") -> Tensor:
    """-(t log p + (1 - t) log(1 - p)) for probabilities p; each log is at least -100, as PyTorch. The slope in p is
    PyTorch's (p - t) / max(p (1 - p), 1e-12), finite at p = 0 and 1 (where the clamped logs' own slope is 0 * inf):
    it is carried by (p - detach(p)) * slope, which is 0 in value."""
    _check(reduction, "binary_cross_entropy")
    p, t = self._float(), target
    held = p.detach()
    loss = -(t * held.log().maximum(-100.0) + (1 - t) * (1 - held).log().maximum(-100.0))
    loss = loss + (p - held) * ((held - t) / (held * (1 - held)).maximum(1e-12)).detach()
    return _reduced(loss if weight is None else loss * weight, reduction)

  def binary_cross_entropy_with_logits(self: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean",
                                       pos_weight: Tensor | None = None) -> Tensor:
    """binary_cross_entropy of sigmoid(x), computed stably: (1 - t) x + (1 + (pw - 1) t) softplus(-x); `pos_weight` pw
    weighs the positive term."""
    _check(reduction, "binary_cross_entropy_with_logits")
    x = self._float()
    scale = 1 if pos_weight is None else 1 + (pos_weight - 1) * target
    loss = (1 - target) * x + scale * (-x).softplus()
    return _reduced(loss if weight is None else loss * weight, reduction)

  # ---- regression losses: on the difference d = self - target, broadcast as PyTorch does ----
  def _difference(self: Tensor, target: Tensor, reduction: str, what: str) -> Tensor:
    _check(reduction, what)
    return (self - target)._float()

  def mse_loss(self: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """(x - t)^2."""
    return _reduced(self._difference(target, reduction, "mse_loss").square(), reduction)

  def l1_loss(self: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """|x - t| (slope 0 where x = t, as PyTorch)."""
    return _reduced(self._difference(target, reduction, "l1_loss").abs(), reduction)

  def smooth_l1_loss(self: Tensor, target: Tensor, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; beta = 0 is l1_loss."""
    if beta < 0: raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = self._difference(target, reduction, "smooth_l1_loss")
    if beta == 0: return _reduced(d.abs(), reduction)
    a = d.abs()
    return _reduced((a < beta).where(0.5 / beta * d.square(), a - 0.5 * beta), reduction)

  def huber_loss(self: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta): smooth_l1_loss with beta = delta, times delta."""
    if not delta > 0: raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    d = self._difference(target, reduction, "huber_loss")
    a = d.abs()
    return _reduced((a < delta).where(0.5 * d.square(), delta * (a - 0.5 * delta)), reduction)

  def kl_div(self: Tensor, target: Tensor, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL(target || exp(self)) pointwise for log-probabilities `self`: t (log t - x), 0 where t = 0 (or, with `log_target`,
    e^t (t - x)); the slope in t is log t + 1 - x, nan at t = 0 as PyTorch's. "batchmean" divides the sum by the batch
    size (self.shape[0]), the true KL divergence per sample; "mean" by the element count, as PyTorch's default does."""
    _check(reduction, "kl_div", (*REDUCTIONS, "batchmean"))
    x, t = self._float(), target._float()
    # t log t is 0 at t = 0; its slope there, log 0 + 1, reaches the unselected branch as 0 * -inf: nan, as PyTorch's
    loss = t.exp() * (t - x) if log_target else (t == 0).where(0.0, t * t.log()) - t * x
    if reduction == "batchmean": return loss.sum() / (x.shape[0] if x.ndim else 1)
    return _reduced(loss, reduction)

  # ---- tinygrad's names ----
  def sparse_categorical_crossentropy(self: Tensor, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0,
                                      reduction: str = "mean") -> Tensor:
    """tinygrad's name: cross entropy of logits whose classes are the last axis, against class indices Y."""
    x = self if self.ndim < 2 else self.reshape(-1, self.shape[-1])
    return x.cross_entropy(Y.reshape(-1) if self.ndim >= 2 else Y, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)
  def binary_crossentropy(self: Tensor, Y: Tensor, reduction: str = "mean") -> Tensor:
    """tinygrad's name for binary_cross_entropy."""
    return self.binary_cross_entropy(Y, reduction=reduction)
  def binary_crossentropy_logits(self: Tensor, Y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """tinygrad's name for binary_cross_entropy_with_logits."""
    return self.binary_cross_entropy_with_logits(Y, reduction=reduction, pos_weight=pos_weight)
