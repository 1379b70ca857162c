"""Learning-rate schedules with PyTorch's semantics (torch.optim.lr_scheduler): made with an optimizer, they set its
learning rate for step 0 at once, and each `step()` (after `optimizer.step()`) moves to the next step's rate. The rate is
a closed form of the step count, so `last_epoch` (the steps taken) says everything about a schedule's state; the
optimizer's `lr` is a buffer written in place, so a step captured by TinyJit reads the new rate."""
from __future__ import annotations

import math

from tinyspec.nn.optim import Optimizer


class LRScheduler:
  """A schedule: `lr_at(t)` is the rate at step t (from `base_lr`, the optimizer's rate when the schedule was made)."""
  def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
    self.optimizer, self.base_lr = optimizer, float(optimizer.lr.item())
    self.last_epoch = last_epoch
    self.step()

  def lr_at(self, t: int) -> float: raise NotImplementedError

  def step(self) -> None:
    """Advance one step and set the optimizer's learning rate."""
    self.last_epoch += 1
    self.optimizer.lr = self._last_lr = self.lr_at(self.last_epoch)

  def get_last_lr(self) -> list[float]:
    """The rate the last `step()` set (a list, one per parameter group, as PyTorch; tinyspec optimizers have one group)."""
    return [self._last_lr]


class StepLR(LRScheduler):
  """base_lr * gamma ** (t // step_size)."""
  def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
    if step_size < 1: raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
    self.step_size, self.gamma = step_size, gamma
    super().__init__(optimizer, last_epoch)
  def lr_at(self, t: int) -> float: return self.base_lr * self.gamma ** (t // self.step_size)


class LinearLR(LRScheduler):
  """base_lr times a factor going linearly from start_factor to end_factor over total_iters steps, then end_factor: a
  linear warmup with the defaults turned around (start_factor=0.1, end_factor=1.0)."""
  def __init__(self, optimizer: Optimizer, start_factor: float = 1 / 3, end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1):
    if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
      raise ValueError(f"LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got {start_factor}, {end_factor}")
    self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
    super().__init__(optimizer, last_epoch)
  def lr_at(self, t: int) -> float:
    done = min(t, self.total_iters) / self.total_iters if self.total_iters else 1.0
    return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * done)


class CosineAnnealingLR(LRScheduler):
  """eta_min + (base_lr - eta_min) (1 + cos(pi t / T_max)) / 2: half a cosine from base_lr down to eta_min at T_max (the
  closed form; PyTorch's recursive form agrees for t <= T_max)."""
  def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
    if T_max < 1: raise ValueError(f"CosineAnnealingLR: T_max must be >= 1, got {T_max}")
    self.T_max, self.eta_min = T_max, eta_min
    super().__init__(optimizer, last_epoch)
  def lr_at(self, t: int) -> float: return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * t / self.T_max)) / 2


class OneCycleLR(LRScheduler):
  """The 1cycle policy as torch's OneCycleLR: from max_lr / div_factor up to max_lr over the first pct_start of total_steps,
  then down to that start / final_div_factor, each phase a half cosine (anneal_strategy="cos") or a line ("linear"). The
  learning rate only: momentum is not cycled (PyTorch's cycle_momentum=False)."""
  def __init__(self, optimizer: Optimizer, max_lr: float, total_steps: int, pct_start: float = 0.3, anneal_strategy: str = "cos",
               div_factor: float = 25.0, final_div_factor: float = 1e4, last_epoch: int = -1):
    if total_steps < 2: raise ValueError(f"OneCycleLR: total_steps must be >= 2, got {total_steps}")
    if not 0 < pct_start < 1: raise ValueError(f"OneCycleLR: pct_start must be in (0, 1), got {pct_start}")
    if anneal_strategy not in ("cos", "linear"): raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
    self.total_steps, self.anneal = total_steps, anneal_strategy
    self.initial_lr, self.max_lr = max_lr / div_factor, max_lr
    self.min_lr = self.initial_lr / final_div_factor
    self.peak = float(pct_start * total_steps) - 1  # the step where the rate reaches max_lr
    super().__init__(optimizer, last_epoch)  # its first step sets initial_lr

  def _anneal(self, start: float, end: float, pct: float) -> float:
    if self.anneal == "linear": return start + (end - start) * pct
    return end + (start - end) / 2 * (1 + math.cos(math.pi * pct))

  def lr_at(self, t: int) -> float:
    if t > self.total_steps: raise ValueError(f"OneCycleLR: stepped {t} times, past total_steps={self.total_steps}")
    if t <= self.peak: return self._anneal(self.initial_lr, self.max_lr, t / self.peak if self.peak > 0 else 1.0)
    return self._anneal(self.max_lr, self.min_lr, (t - self.peak) / (self.total_steps - 1 - self.peak))


__all__ = ["CosineAnnealingLR", "LRScheduler", "LinearLR", "OneCycleLR", "StepLR"]
