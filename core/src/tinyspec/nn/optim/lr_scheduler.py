"""Learning-rate schedules with PyTorch's semantics (torch.optim.lr_scheduler): made with an optimizer, they set its
learning rate for step 0 at once, and each `step()` (after `optimizer.step()`) moves to the next step's rate. The rate is
a closed form of the step count, so `last_epoch` (the steps taken) says everything about a schedule's state; the
optimizer's `lr` is a buffer written in place, so a step captured by TinyJit reads the new rate."""
from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from tinyspec.nn.optim import Optimizer


class LRScheduler:
  """A schedule: `lr_at(t)` is the rate at step t, from `base_lr`: the optimizer's rate when its first schedule was made
  (PyTorch's initial_lr), so a second schedule on it (SequentialLR's parts) starts from the same rate, not the one the
  first has set."""
  def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
    if optimizer.initial_lr is None: optimizer.initial_lr = float(optimizer.lr.item())
    self.optimizer, self.base_lr = optimizer, optimizer.initial_lr
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
    done = min(t, self.total_iters) / self.total_iters if self.total_iters else 0.0  # no iterations: start_factor throughout
    return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * done)


class MultiStepLR(LRScheduler):
  """base_lr * gamma ** (the number of milestones reached by step t)."""
  def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1, last_epoch: int = -1):
    self.milestones, self.gamma = sorted(milestones), gamma
    super().__init__(optimizer, last_epoch)
  def lr_at(self, t: int) -> float: return self.base_lr * self.gamma ** bisect.bisect_right(self.milestones, t)


class ExponentialLR(LRScheduler):
  """base_lr * gamma ** t."""
  def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
    self.gamma = gamma
    super().__init__(optimizer, last_epoch)
  def lr_at(self, t: int) -> float: return self.base_lr * self.gamma ** t


class ConstantLR(LRScheduler):
  """base_lr * factor for the first total_iters steps, then base_lr."""
  def __init__(self, optimizer: Optimizer, factor: float = 1 / 3, total_iters: int = 5, last_epoch: int = -1):
    if not 0 <= factor <= 1: raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
    self.factor, self.total_iters = factor, total_iters
    super().__init__(optimizer, last_epoch)
  def lr_at(self, t: int) -> float: return self.base_lr * (self.factor if t < self.total_iters else 1.0)


class LambdaLR(LRScheduler):
  """base_lr * lr_lambda(t)."""
  def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float], last_epoch: int = -1):
    self.lr_lambda = lr_lambda
    super().__init__(optimizer, last_epoch)
  def lr_at(self, t: int) -> float: return self.base_lr * self.lr_lambda(t)


class CosineAnnealingLR(LRScheduler):
  """eta_min + (base_lr - eta_min) (1 + cos(pi t / T_max)) / 2: half a cosine from base_lr down to eta_min at T_max (the
  closed form; PyTorch's recursive form agrees for t <= T_max)."""
  def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
    if T_max < 1: raise ValueError(f"CosineAnnealingLR: T_max must be >= 1, got {T_max}")
    self.T_max, self.eta_min = T_max, eta_min
    super().__init__(optimizer, last_epoch)
  def lr_at(self, t: int) -> float: return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * t / self.T_max)) / 2


class _Phase(NamedTuple):
  """One of OneCycleLR's phases: the step it ends at, and the (first, last) rate and momentum it goes between."""
  last: float
  rates: tuple[float, float]
  momenta: tuple[float, float]


class OneCycleLR(LRScheduler):
  """The 1cycle policy as torch's OneCycleLR: from max_lr / div_factor up to max_lr over the first pct_start of the steps,
  then down to that start / final_div_factor; with three_phase, back down to the start over as many steps as the way up
  took, and only then to the end. Each phase is a half cosine (anneal_strategy="cos") or a line ("linear"). The steps are
  total_steps, or epochs * steps_per_epoch. With cycle_momentum (the default, as PyTorch's) the momentum (SGD's,
  RMSprop's, LARS's, Muon's; the Adam family's b1: Optimizer.set_momentum) goes the other way in each phase, from max_momentum
  down to base_momentum while the rate rises and back (three_phase: back in the second phase, then it stays)."""
  def __init__(self, optimizer: Optimizer, max_lr: float, total_steps: int | None = None, epochs: int | None = None,
               steps_per_epoch: int | None = None, pct_start: float = 0.3, anneal_strategy: str = "cos", cycle_momentum: bool = True,
               base_momentum: float = 0.85, max_momentum: float = 0.95, div_factor: float = 25.0, final_div_factor: float = 1e4,
               three_phase: bool = False, last_epoch: int = -1):
    if total_steps is None:
      if not epochs or not steps_per_epoch: raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
      total_steps = epochs * steps_per_epoch
    if total_steps < 2: raise ValueError(f"OneCycleLR: total_steps must be >= 2, got {total_steps}")
    if not 0 < pct_start < 1: raise ValueError(f"OneCycleLR: pct_start must be in (0, 1), got {pct_start}")
    if anneal_strategy not in ("cos", "linear"): raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
    if cycle_momentum and optimizer.momentum_name is None:
      raise ValueError(f"OneCycleLR: cycle_momentum needs an optimizer with a momentum (or b1); {type(optimizer).__name__} has none "
                       "(SGD, RMSprop and LARS have one when built with momentum > 0): pass cycle_momentum=False")
    self.total_steps, self.anneal, self.cycle_momentum = total_steps, anneal_strategy, cycle_momentum
    start = max_lr / div_factor
    end, peak = start / final_div_factor, float(pct_start * total_steps) - 1  # the step where the rate reaches max_lr
    down, up = (max_momentum, base_momentum), (base_momentum, max_momentum)  # the momentum, as the rate goes up and down
    self.phases = [_Phase(peak, (start, max_lr), down), _Phase(2 * peak, (max_lr, start), up),
                   _Phase(total_steps - 1.0, (start, end), (max_momentum, max_momentum))] if three_phase else \
                  [_Phase(peak, (start, max_lr), down), _Phase(total_steps - 1.0, (max_lr, end), up)]  # as PyTorch's phases
    super().__init__(optimizer, last_epoch)  # its first step sets the start rate (and momentum)

  def _anneal(self, ends: tuple[float, float], pct: float) -> float:
    start, end = ends
    if self.anneal == "linear": return start + (end - start) * pct
    return end + (start - end) / 2 * (1 + math.cos(math.pi * pct))

  def _at(self, t: int) -> tuple[int, float]:
    """Step t's phase and how far into it (0 to 1)."""
    if t > self.total_steps: raise ValueError(f"OneCycleLR: stepped {t} times, past total_steps={self.total_steps}")
    i = next((i for i, phase in enumerate(self.phases[:-1]) if t <= phase.last), len(self.phases) - 1)
    first, last = self.phases[i - 1].last if i else 0.0, self.phases[i].last
    return i, (t - first) / (last - first) if last > first else 1.0

  def lr_at(self, t: int) -> float:
    i, pct = self._at(t)
    return self._anneal(self.phases[i].rates, pct)

  def momentum_at(self, t: int) -> float:
    i, pct = self._at(t)
    return self._anneal(self.phases[i].momenta, pct)

  def step(self) -> None:
    """Advance one step and set the optimizer's learning rate, and its momentum with cycle_momentum."""
    super().step()
    if self.cycle_momentum: self.optimizer.set_momentum(self.momentum_at(self.last_epoch))


class SequentialLR(LRScheduler):
  """schedulers[i] from milestones[i - 1] on, each counting its steps from there (a warmup, then a decay: milestones
  [warmup_steps]). The parts share the optimizer's first rate, and only this one is stepped."""
  def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler], milestones: Sequence[int], last_epoch: int = -1):
    if len(milestones) != len(schedulers) - 1 or list(milestones) != sorted(milestones):
      raise ValueError(f"SequentialLR: needs len(schedulers) - 1 = {len(schedulers) - 1} increasing milestones, got {list(milestones)}")
    if any(s.optimizer is not optimizer for s in schedulers): raise ValueError("SequentialLR: every scheduler must drive the optimizer given")
    self.schedulers, self.milestones = list(schedulers), list(milestones)
    super().__init__(optimizer, last_epoch)
  def lr_at(self, t: int) -> float:
    i = bisect.bisect_right(self.milestones, t)
    return self.schedulers[i].lr_at(t - (self.milestones[i - 1] if i else 0))


__all__ = ["ConstantLR", "CosineAnnealingLR", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR", "OneCycleLR", "SequentialLR",
           "StepLR"]
