"""Optimizers with PyTorch's update rules: SGD (momentum, dampening, Nesterov, L2 weight decay), Adam (L2 weight decay),
AdamW (decoupled weight decay), RMSprop, Adagrad, Muon; tinygrad's LAMB and LARS; OptimizerGroup to step several as one;
learning-rate schedules in `lr_scheduler`.

A step is one lazy graph: every parameter's new value and every piece of optimizer state (momenta, moment estimates, the
bias corrections) is built from the current buffers and the gradients and assigned into its buffer
(`Tensor.assign`), and all of it is realized in a single `Tensor.realize` call: the kernels write into the buffers the
parameters already have, so a step allocates no new memory for them (and the Tensor objects, which models and state
dicts hold, keep their buffers). Hyperparameters that a schedule may change (the learning rate, the momentum) and
per-step values (the step counts, 1 - b2**t) are buffers, not constants, and the state starts as zero buffers, so every step has the
same graph and every one after the first runs from the schedule cache.

`Tensor.realize(loss, *opt.schedule_step())` computes the loss in the same schedule as the update (no second forward)."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tinyspec.dtype import dtypes
from tinyspec.tensor import Tensor


def _unique(ts: Iterable[Tensor]) -> list[Tensor]: return list({id(t): t for t in ts}.values())

def _realize(ts: list[Tensor]) -> None:
  """Realize tensors together; none (a step with no gradient anywhere, an optimizer state of no parameters) does nothing."""
  if ts: Tensor.realize(*ts)

def _zeros_like(ps: list[Tensor]) -> list[Tensor]:
  """A zero buffer per parameter, laid out as it (split over the same devices along the same axis), realized now: so the
  first step's graph already reads buffers, as every later one does."""
  def zeros(p: Tensor) -> Tensor:
    if not isinstance(p.device, tuple): return Tensor.zeros(p.shape, dtype=p.dtype, device=p.device)
    return Tensor.zeros(p.shape, dtype=p.dtype, device=p.device[0]).shard(p.device, p.uop.axis)
  out = [zeros(p) for p in ps]
  _realize(out)
  return out

def _set(t: Tensor, new: Tensor) -> Tensor:
  """Write `new` into `t`'s buffer (`Tensor.assign`, lazily: realized with the rest of the step) and return t."""
  return t.assign(new)

def _entry(per_param: Tensor, i: int, p: Tensor) -> Tensor:
  """Entry i of a per-parameter buffer, on parameter p's device."""
  return per_param[i] if p.device == per_param.device else per_param[i].to(p.device)


class Optimizer:
  """The parameters it updates (those that require gradients; a float tensor's None requires_grad is turned on) and the
  tensors it only realizes with each step (the rest: integer tensors, and BatchNorm's running statistics, which BatchNorm
  writes itself)."""
  def __init__(self, params: Iterable[Tensor], lr: float):
    params = _unique(params)
    for p in params:
      if p.requires_grad is None and dtypes.is_float(p.dtype): p.requires_grad = True
    self.params = [p for p in params if p.requires_grad]
    self.buffers = [p for p in params if not p.requires_grad]
    if not self.params: raise ValueError("optimizer got an empty parameter list (no tensor that requires gradients)")
    self._lr = self._hyper(lr)
    self._momentum: Tensor | None = None  # the momentum a schedule may cycle, for the optimizers that have one (_with_momentum)
    self.momentum_name: str | None = None  # which hyperparameter that is ("momentum", "b1"), None where there is none
    self.initial_lr: float | None = None  # the rate its first learning-rate schedule started from (PyTorch's initial_lr)

  def _hyper(self, value: float) -> Tensor:
    """A 0-d float32 buffer for a hyperparameter a schedule may change, realized now (a copy to several devices is lazy)."""
    return Tensor(np.array(value, np.float32), device=self.params[0].device).realize()
  def _with_momentum(self, name: str, value: float) -> None:
    """Keep hyperparameter `name` (SGD's momentum, Adam's b1) as the attribute and as the buffer the update reads, which
    set_momentum changes."""
    setattr(self, name, value)
    self._momentum, self.momentum_name = self._hyper(value), name

  @property
  def lr(self) -> Tensor:
    """The learning rate: a 0-d float32 buffer. Assign a number (or Tensor) to change it; the step's graph stays the same."""
    return self._lr
  @lr.setter
  def lr(self, value: float | Tensor) -> None:
    v = value.numpy() if isinstance(value, Tensor) else value
    self._lr.assign(Tensor(np.array(v, np.float32), device=self._lr.device)).realize()  # in place: a TinyJit capture reads it

  def set_momentum(self, value: float) -> None:
    """Set the momentum (SGD's, RMSprop's, LARS's and Muon's momentum; the Adam family's b1) as OneCycleLR's momentum
    cycling does: in place like `lr`, so the step's graph stays the same."""
    if self._momentum is None or self.momentum_name is None:
      raise ValueError(f"{type(self).__name__}: has no momentum to set (SGD, RMSprop and LARS have one only when built with momentum > 0)")
    setattr(self, self.momentum_name, value)
    self._momentum.assign(Tensor(np.array(value, np.float32), device=self._momentum.device)).realize()

  def _on(self, hyper: Tensor, p: Tensor) -> Tensor: return hyper if p.device == hyper.device else hyper.to(p.device)
  def _lr_on(self, p: Tensor) -> Tensor: return self._on(self._lr, p)
  def _momentum_on(self, p: Tensor) -> Tensor: return self._on(self._momentum, p)

  def _per_parameter(self, value: float = 0.0) -> Tensor:
    """A float32 buffer with one entry per parameter (a step count, a bias correction), realized now."""
    return Tensor(np.full(len(self.params), value, np.float32), device=self._lr.device).realize()

  def _advance(self, *updates: tuple[Tensor, Tensor]) -> list[Tensor]:
    """Write each (per-parameter buffer, new value) pair's value where the parameter has a gradient this step, as PyTorch
    counts a parameter's steps: one mask for all of them, and none when every parameter has one (the usual step), so its
    graph stays the same from step to step."""
    stepped = [p.grad is not None for p in self.params]
    mask = None if all(stepped) else Tensor(np.array(stepped), device=self._lr.device)
    return [_set(buf, new if mask is None else mask.where(new, buf)) for buf, new in updates]

  def zero_grad(self) -> None:
    """Forget the gradients (each parameter's grad becomes None), so the next backward does not add to them."""
    for p in self.params: p.grad = None

  def schedule_step(self) -> list[Tensor]:
    """Give every parameter and piece of state its next value, lazily, and return all the tensors to realize for the step.
    Parameters without a gradient are left as they are."""
    self._check_grads()  # before anything changes: a bad gradient leaves every parameter as it was
    out = self._step_state()
    for i, p in enumerate(self.params):
      if p.grad is not None: out += self._update(i, p, p.grad.detach())
    return _unique(out + self.buffers)

  def step(self) -> None:
    """Update the parameters in place: all new values and state realized together in one call."""
    _realize(self.schedule_step())

  def _check_grads(self) -> None:
    for i, p in enumerate(self.params):
      if p.grad is not None and p.grad.shape != p.shape:
        raise RuntimeError(f"parameter {i}: gradient of shape {p.grad.shape} for a parameter of shape {p.shape}")

  def _step_state(self) -> list[Tensor]:
    """Advance the state shared by all parameters (before any parameter's update reads it); returns the tensors changed."""
    return []
  def _update(self, i: int, p: Tensor, g: Tensor) -> list[Tensor]:
    """Give parameter i its next value from gradient g (and its own state); returns the tensors changed."""
    raise NotImplementedError


class SGD(Optimizer):
  """Stochastic gradient descent as torch.optim.SGD: g = grad + weight_decay * p; with momentum, b = g at a parameter's
  first step, then b = momentum * b + (1 - dampening) * g, and g = b, or g + momentum * b with nesterov; then p -= lr * g."""
  def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
               dampening: float = 0.0):
    if nesterov and (momentum <= 0 or dampening != 0):
      raise ValueError(f"{type(self).__name__}: nesterov momentum requires a momentum > 0 and no dampening")
    if lr < 0 or momentum < 0 or weight_decay < 0:
      raise ValueError(f"{type(self).__name__}: lr={lr}, momentum={momentum}, weight_decay={weight_decay} must be >= 0")
    super().__init__(params, lr)
    self.momentum, self.weight_decay, self.nesterov, self.dampening = momentum, weight_decay, nesterov, dampening
    if momentum: self._with_momentum("momentum", momentum)
    self.b = _zeros_like(self.params) if momentum else []
    # with dampening the first step differs (b = g, undamped): each parameter's steps so far tell it apart
    self.steps = self._per_parameter() if momentum and dampening else None

  def _step_state(self) -> list[Tensor]:
    return [] if self.steps is None else self._advance((self.steps, self.steps + 1))

  def _update(self, i: int, p: Tensor, g: Tensor) -> list[Tensor]:
    if self.weight_decay: g = g + self.weight_decay * p
    state = []
    if self.b:
      momentum = self._momentum_on(p)
      new = momentum * self.b[i] + (1 - self.dampening) * g
      b = _set(self.b[i], new if self.steps is None else (_entry(self.steps, i, p) == 1).where(g, new))
      g, state = (g + momentum * b if self.nesterov else b), [b]
    return [_set(p, p - self._lr_on(p) * g), *state]


class Adam(Optimizer):
  """Adam as torch.optim.Adam: g = grad + weight_decay * p (L2, coupled); m and v the moving averages of g and g^2 with
  rates b1 and b2; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps) at a parameter's step t. t counts the
  steps that parameter had a gradient in, as PyTorch's. t and the bias corrections are buffers of one entry per parameter,
  advanced where it has a gradient: 1 - b1^t as -expm1(t log b1) from the current b1, as PyTorch's from its current beta1
  (OneCycleLR cycles it), 1 - b2^t as 1 - b2^(t+1) = (1 - b2) + b2 (1 - b2^t). Both keep float32's rounding (1 - b2^t
  from a float32 b2^t would lose four digits to cancellation at b2 = 0.999)."""
  decoupled = False

  def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0):
    if not (0 <= b1 < 1 and 0 <= b2 < 1): raise ValueError(f"{type(self).__name__}: b1={b1} and b2={b2} must be in [0, 1)")
    if lr < 0 or eps < 0 or weight_decay < 0: raise ValueError(f"{type(self).__name__}: lr={lr}, eps={eps}, weight_decay={weight_decay} must be >= 0")
    super().__init__(params, lr)
    self._with_momentum("b1", b1)
    self.b2, self.eps, self.weight_decay = b2, eps, weight_decay
    self.m, self.v = _zeros_like(self.params), _zeros_like(self.params)
    # t, 1 - b1^t and 1 - b2^t for each parameter (t = the steps it had a gradient in, 0 at first)
    self.steps, self.correction1, self.correction2 = self._per_parameter(), self._per_parameter(), self._per_parameter()

  def _step_state(self) -> list[Tensor]:
    t = self.steps + 1
    c1 = -(t * self._momentum.log()).expm1()  # b1 = 0 gives log 0 = -inf, and 1
    return self._advance((self.steps, t), (self.correction1, c1), (self.correction2, (1 - self.b2) + self.b2 * self.correction2))

  def _moments(self, i: int, p: Tensor, g: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Parameter i's moving averages m and v advanced by gradient g (written in place), and its 1 - b1^t, 1 - b2^t on p's
    device."""
    b1, c1, c2 = self._momentum_on(p), _entry(self.correction1, i, p), _entry(self.correction2, i, p)
    m = _set(self.m[i], b1 * self.m[i] + (1 - b1) * g)
    v = _set(self.v[i], self.b2 * self.v[i] + (1 - self.b2) * (g * g))
    return m, v, c1, c2

  def _update(self, i: int, p: Tensor, g: Tensor) -> list[Tensor]:
    lr = self._lr_on(p)
    if self.weight_decay and not self.decoupled: g = g + self.weight_decay * p
    m, v, c1, c2 = self._moments(i, p, g)
    base = p * (1 - lr * self.weight_decay) if self.weight_decay and self.decoupled else p
    return [_set(p, base - (lr / c1) * m / (v.sqrt() / c2.sqrt() + self.eps)), m, v]


class AdamW(Adam):
  """Adam with decoupled weight decay, as torch.optim.AdamW: p *= 1 - lr * weight_decay, then Adam's update of the plain
  gradient. weight_decay defaults to 0.01 (PyTorch's)."""
  decoupled = True

  def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.01):
    super().__init__(params, lr, b1, b2, eps, weight_decay)


class LAMB(Adam):
  """LAMB (You et al., tinygrad's): Adam's bias-corrected step r = m_hat / (sqrt(v_hat) + eps) + weight_decay * p, scaled
  per parameter by the trust ratio ||p|| / ||r|| (1 where either norm is 0): p -= lr * trust * r."""
  def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6, weight_decay: float = 0.0):
    super().__init__(params, lr, b1, b2, eps, weight_decay)

  def _update(self, i: int, p: Tensor, g: Tensor) -> list[Tensor]:
    m, v, c1, c2 = self._moments(i, p, g)
    r = (m / c1) / ((v / c2).sqrt() + self.eps) + self.weight_decay * p
    p_norm, r_norm = (p * p).sum().sqrt(), (r * r).sum().sqrt()
    trust = ((p_norm > 0) & (r_norm > 0)).where(p_norm / r_norm, 1.0)
    return [_set(p, p - self._lr_on(p) * trust * r), m, v]


class RMSprop(Optimizer):
  """RMSprop as torch.optim.RMSprop: g = grad + weight_decay * p; v = alpha * v + (1 - alpha) * g^2; the step is
  g / (sqrt(v) + eps), or with `centered` g / (sqrt(v - a^2) + eps) for a = alpha * a + (1 - alpha) * g, the mean
  gradient; with momentum b = momentum * b + step and p -= lr * b, else p -= lr * step."""
  def __init__(self, params: Iterable[Tensor], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0,
               momentum: float = 0.0, centered: bool = False):
    if not 0 <= alpha <= 1: raise ValueError(f"RMSprop: alpha={alpha} must be in [0, 1]")
    if lr < 0 or eps < 0 or weight_decay < 0 or momentum < 0:
      raise ValueError(f"RMSprop: lr={lr}, eps={eps}, weight_decay={weight_decay}, momentum={momentum} must be >= 0")
    super().__init__(params, lr)
    self.alpha, self.eps, self.weight_decay, self.momentum, self.centered = alpha, eps, weight_decay, momentum, centered
    if momentum: self._with_momentum("momentum", momentum)
    self.v = _zeros_like(self.params)
    self.mean_grad = _zeros_like(self.params) if centered else []
    self.b = _zeros_like(self.params) if momentum else []

  def _update(self, i: int, p: Tensor, g: Tensor) -> list[Tensor]:
    if self.weight_decay: g = g + self.weight_decay * p
    v = _set(self.v[i], self.alpha * self.v[i] + (1 - self.alpha) * (g * g))
    state, var = [v], v
    if self.centered:
      a = _set(self.mean_grad[i], self.alpha * self.mean_grad[i] + (1 - self.alpha) * g)
      state, var = [*state, a], v - a * a
    step = g / (var.sqrt() + self.eps)
    if self.b:
      step = _set(self.b[i], self._momentum_on(p) * self.b[i] + step)
      state.append(step)
    return [_set(p, p - self._lr_on(p) * step), *state]


class Adagrad(Optimizer):
  """Adagrad as torch.optim.Adagrad: g = grad + weight_decay * p; s += g^2 (starting at initial_accumulator_value);
  p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps) at the parameter's step t."""
  def __init__(self, params: Iterable[Tensor], lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
               initial_accumulator_value: float = 0.0, eps: float = 1e-10):
    if lr < 0 or lr_decay < 0 or weight_decay < 0 or initial_accumulator_value < 0 or eps < 0:
      raise ValueError(f"Adagrad: lr={lr}, lr_decay={lr_decay}, weight_decay={weight_decay}, "
                       f"initial_accumulator_value={initial_accumulator_value}, eps={eps} must be >= 0")
    super().__init__(params, lr)
    self.lr_decay, self.weight_decay, self.eps = lr_decay, weight_decay, eps
    self.sum = _zeros_like(self.params)
    if initial_accumulator_value: _realize([_set(s, s + initial_accumulator_value) for s in self.sum])
    self.steps = self._per_parameter()

  def _step_state(self) -> list[Tensor]: return self._advance((self.steps, self.steps + 1))

  def _update(self, i: int, p: Tensor, g: Tensor) -> list[Tensor]:
    if self.weight_decay: g = g + self.weight_decay * p
    s = _set(self.sum[i], self.sum[i] + g * g)
    lr = self._lr_on(p) / (1 + (_entry(self.steps, i, p) - 1) * self.lr_decay) if self.lr_decay else self._lr_on(p)
    return [_set(p, p - lr * g / (s.sqrt() + self.eps)), s]


def _norm(t: Tensor) -> Tensor: return (t * t).sum().sqrt()


class LARS(SGD):
  """LARS (You, Gitman and Ginsburg, 2017; tinygrad's arguments): SGD whose step for each parameter is scaled by the trust
  ratio tcoef ||p|| / (||g|| + weight_decay ||p||), 1 where either norm is 0: s = trust * (g + weight_decay * p). With
  classic (the paper's Algorithm 1) the learning rate is inside the momentum, b = momentum * b + lr * s and p -= b; without,
  b = momentum * b + s and p -= lr * b. Nesterov takes momentum * b plus the new term instead of b."""
  def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, momentum: float = 0.9, weight_decay: float = 1e-4, nesterov: bool = False,
               classic: bool = True, tcoef: float = 1e-3):
    if tcoef < 0: raise ValueError(f"LARS: tcoef={tcoef} must be >= 0")
    super().__init__(params, lr, momentum, weight_decay, nesterov)
    self.classic, self.tcoef = classic, tcoef

  def _update(self, i: int, p: Tensor, g: Tensor) -> list[Tensor]:
    p_norm, g_norm = _norm(p), _norm(g)
    trust = ((p_norm > 0) & (g_norm > 0)).where(self.tcoef * p_norm / (g_norm + self.weight_decay * p_norm), 1.0)
    lr = self._lr_on(p)
    s = trust * (g + self.weight_decay * p) * (lr if self.classic else 1.0)
    state = []
    if self.b:
      momentum = self._momentum_on(p)
      b = _set(self.b[i], momentum * self.b[i] + s)
      s, state = (s + momentum * b if self.nesterov else b), [b]
    return [_set(p, p - (s if self.classic else lr * s)), *state]


class Muon(SGD):
  """Muon as torch.optim.Muon, for 2-D parameters (the weights of hidden layers; give the others to AdamW, in an
  OptimizerGroup): b = momentum * b + (1 - momentum) * grad; u = (1 - momentum) * grad + momentum * b with nesterov, else
  b; u orthogonalized by ns_steps Newton-Schulz iterations with ns_coefficients (a, b, c): X = u / max(||u||, eps)
  (transposed to have no more rows than columns), then X = a X + (b A + c A A) X with A = X X^T. Then p *= 1 - lr *
  weight_decay and p -= lr * scale * X, scale sqrt(max(1, rows / cols)) ("original") or 0.2 sqrt(max(rows, cols))
  ("match_rms_adamw"). PyTorch runs the iterations in bfloat16, this in the parameter's dtype."""
  def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95, nesterov: bool = True,
               ns_coefficients: tuple[float, float, float] = (3.4445, -4.7750, 2.0315), eps: float = 1e-7, ns_steps: int = 5,
               adjust_lr_fn: str | None = None):
    if adjust_lr_fn not in (None, "original", "match_rms_adamw"):
      raise ValueError(f"Muon: adjust_lr_fn must be None, 'original' or 'match_rms_adamw', got {adjust_lr_fn!r}")
    if len(ns_coefficients) != 3 or not 0 <= ns_steps < 100:
      raise ValueError(f"Muon: ns_coefficients={ns_coefficients} must be 3 numbers and ns_steps={ns_steps} in [0, 100)")
    params = _unique(params)
    if bad := [p.shape for p in params if p.ndim != 2]: raise ValueError(f"Muon: only 2-D parameters can be optimized, got shapes {bad}")
    super().__init__(params, lr, momentum, weight_decay)
    self.nesterov, self.ns_coefficients, self.eps, self.ns_steps, self.adjust_lr_fn = nesterov, ns_coefficients, eps, ns_steps, adjust_lr_fn

  def _orthogonalize(self, u: Tensor) -> Tensor:
    wide = u.shape[0] <= u.shape[1]
    x = u if wide else u.T
    x = x / _norm(x).maximum(self.eps)
    a, b, c = self.ns_coefficients
    for _ in range(self.ns_steps):
      gram = x @ x.T
      x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x if wide else x.T

  def _update(self, i: int, p: Tensor, g: Tensor) -> list[Tensor]:
    momentum = self._momentum_on(p) if self.b else 0.0
    buf = _set(self.b[i], momentum * self.b[i] + (1 - momentum) * g) if self.b else g  # else b is g: SGD kept no buffer
    state = [buf] if self.b else []
    u = (1 - momentum) * g + momentum * buf if self.nesterov else buf
    rows, cols = p.shape
    scale = 0.2 * max(rows, cols) ** 0.5 if self.adjust_lr_fn == "match_rms_adamw" else max(1.0, rows / cols) ** 0.5
    lr = self._lr_on(p)
    return [_set(p, p * (1 - lr * self.weight_decay) - (lr * scale) * self._orthogonalize(u)), *state]


class OptimizerGroup:
  """Several optimizers stepped as one (tinygrad's): zero_grad and step reach every one, and a step is a single realize
  of all their updates. optimizers[i] (or group[i]) is one of them, for its learning rate or schedule."""
  def __init__(self, *optimizers: Optimizer):
    if not optimizers: raise ValueError("OptimizerGroup: got no optimizers")
    self.optimizers = optimizers
    self.params = _unique(p for o in optimizers for p in o.params)
    self.buffers = _unique(b for o in optimizers for b in o.buffers)
  def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]
  def zero_grad(self) -> None:
    for o in self.optimizers: o.zero_grad()
  def schedule_step(self) -> list[Tensor]:
    for o in self.optimizers: o._check_grads()  # every gradient first: a bad one in the last optimizer changes nothing
    return _unique(t for o in self.optimizers for t in o.schedule_step())
  def step(self) -> None: _realize(self.schedule_step())


from tinyspec.nn.optim import lr_scheduler  # noqa: E402  (the schedules, after the optimizers they drive)

__all__ = ["LAMB", "LARS", "SGD", "Adagrad", "Adam", "AdamW", "Muon", "Optimizer", "OptimizerGroup", "RMSprop", "lr_scheduler"]
