"""nn.optim: updates against hand-computed ones (numpy, float64) and torch.optim on the same gradients; one realize per
step, and every step after the first from the schedule cache."""
import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.engine import realize as engine
from tinyspec.nn import BatchNorm
from tinyspec.nn.optim import SGD, Adagrad, Adam, AdamW, RMSprop

STEPS = 4
_rng = np.random.default_rng(0)
P0 = [_rng.standard_normal((3, 4)).astype(np.float32), _rng.standard_normal(5).astype(np.float32)]
GRADS = [[_rng.standard_normal(p.shape).astype(np.float32) for p in P0] for _ in range(STEPS)]

def _run_ours(make, steps: int = STEPS) -> list[np.ndarray]:
  ps = [Tensor(p) for p in P0]
  opt = make(ps)
  for gs in GRADS[:steps]:
    for p, g in zip(ps, gs): p.grad = Tensor(g)
    opt.step()
  return [p.numpy() for p in ps]

def _sgd_ref(lr, momentum=0.0, weight_decay=0.0, nesterov=False):
  out = []
  for i, p0 in enumerate(P0):
    p, b = p0.astype(np.float64), np.zeros(p0.shape)
    for gs in GRADS:
      g = gs[i] + weight_decay * p
      if momentum:
        b = momentum * b + g
        g = g + momentum * b if nesterov else b
      p = p - lr * g
    out.append(p)
  return out

def _adam_ref(lr, b1, b2, eps, weight_decay=0.0, decoupled=False):
  out = []
  for i, p0 in enumerate(P0):
    p, m, v = p0.astype(np.float64), np.zeros(p0.shape), np.zeros(p0.shape)
    for t, gs in enumerate(GRADS, 1):
      g = gs[i].astype(np.float64)
      if decoupled: p = p * (1 - lr * weight_decay)
      else: g = g + weight_decay * p
      m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
      p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    out.append(p)
  return out

SGD_CASES = [dict(lr=0.1), dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.9, nesterov=True), dict(lr=0.1, weight_decay=0.1),
             dict(lr=0.02, momentum=0.5, weight_decay=0.01, nesterov=True)]
ADAM_CASES = [dict(lr=0.01, b1=0.9, b2=0.999, eps=1e-8), dict(lr=0.1, b1=0.5, b2=0.9, eps=1e-3, weight_decay=0.1)]

@pytest.mark.parametrize("kw", SGD_CASES)
def test_sgd_by_hand(kw):
  for got, want in zip(_run_ours(lambda ps: SGD(ps, **kw)), _sgd_ref(**kw)): np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("kw", ADAM_CASES)
@pytest.mark.parametrize("opt", [Adam, AdamW])
def test_adam_by_hand(opt, kw):
  want = _adam_ref(**({"weight_decay": 0.01} if opt is AdamW else {}) | kw, decoupled=opt is AdamW)  # AdamW's default decay is 0.01
  for got, w in zip(_run_ours(lambda ps: opt(ps, **kw)), want): np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)

def test_adam_first_step_is_lr_times_sign():
  # with bias correction, step 1 moves every element by lr * g / (|g| + eps'): about lr * sign(g)
  p = Tensor(np.zeros(4, np.float32))
  opt = Adam([p], lr=0.5)
  p.grad = Tensor(np.array([3.0, -0.01, 100.0, -7.0], np.float32))
  opt.step()
  np.testing.assert_allclose(p.numpy(), [-0.5, 0.5, -0.5, 0.5], rtol=1e-5)

def _torch_run(torch, cls, kw):
  ps = [torch.tensor(p, requires_grad=True) for p in P0]
  opt = cls(ps, **kw)
  for gs in GRADS:
    for p, g in zip(ps, gs): p.grad = torch.tensor(g)
    opt.step()
  return [p.detach().numpy() for p in ps]

RMSPROP_CASES = [dict(lr=0.01), dict(lr=0.01, alpha=0.9, eps=1e-3, weight_decay=0.1), dict(lr=0.01, momentum=0.9),
                 dict(lr=0.005, centered=True), dict(lr=0.005, centered=True, momentum=0.5, weight_decay=0.01)]
ADAGRAD_CASES = [dict(lr=0.1), dict(lr=0.1, lr_decay=0.5, weight_decay=0.1), dict(lr=0.05, initial_accumulator_value=0.5, eps=1e-3)]

@pytest.mark.parametrize("name, kw", [("SGD", k) for k in SGD_CASES] + [(n, k) for n in ("Adam", "AdamW") for k in ADAM_CASES] +
                         [("AdamW", dict(lr=0.01)), ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3)),
                          ("SGD", dict(lr=0.05, momentum=0.5, dampening=1.0, weight_decay=0.1))] +
                         [("RMSprop", k) for k in RMSPROP_CASES] + [("Adagrad", k) for k in ADAGRAD_CASES])
def test_vs_torch(name, kw):
  torch = pytest.importorskip("torch")
  ours = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW, "RMSprop": RMSprop, "Adagrad": Adagrad}[name]
  tkw = {k: v for k, v in kw.items() if k not in ("b1", "b2")} | ({"betas": (kw["b1"], kw["b2"])} if "b1" in kw else {})
  for got, want in zip(_run_ours(lambda ps: ours(ps, **kw)), _torch_run(torch, getattr(torch.optim, name), tkw)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps), lambda ps: AdamW(ps, lr=0.01)])
def test_one_realize_and_schedule_cache(make, monkeypatch):
  calls = []
  real = engine.realize
  monkeypatch.setattr(engine, "realize", lambda *a, **k: calls.append(a) or real(*a, **k))
  ps = [Tensor(p) for p in P0]
  opt = make(ps)
  for step in range(STEPS):
    for p, g in zip(ps, GRADS[step]): p.grad = Tensor(g)
    before, calls[:] = dict(engine.stats), []
    opt.step()
    assert len(calls) == 1  # parameters and state in one call
    assert all(p.uop.op.name == "BUFFER" for p in ps)
    if step >= 1: assert engine.stats["schedules_built"] == before["schedules_built"], f"step {step} missed the schedule cache"
    if step == 2: opt.lr = 0.001  # a new learning rate is new data, not a new graph
  assert engine.stats["kernels_compiled"] == before["kernels_compiled"]

def test_lr_change_takes_effect():
  p = Tensor(np.ones(3, np.float32))
  opt = SGD([p], lr=0.5)
  p.grad = Tensor(np.ones(3, np.float32)); opt.step()
  opt.lr = 0.25
  assert opt.lr.shape == () and opt.lr.item() == 0.25
  p.grad = Tensor(np.ones(3, np.float32)); opt.step()
  np.testing.assert_allclose(p.numpy(), [0.25] * 3)

def test_zero_grad_and_missing_grads():
  a, b = Tensor(np.ones(2, np.float32)), Tensor(np.ones(2, np.float32))
  opt = SGD([a, b], lr=1.0)
  a.grad = Tensor(np.full(2, 0.5, np.float32))
  opt.step()  # b has no gradient: left alone
  assert a.tolist() == [0.5, 0.5] and b.tolist() == [1.0, 1.0]
  opt.zero_grad()
  assert a.grad is None and b.grad is None

COUNTING = {"Adam": dict(lr=0.1), "AdamW": dict(lr=0.1), "Adagrad": dict(lr=0.1, lr_decay=0.3), "SGD": dict(lr=0.1, momentum=0.9, dampening=0.4)}

@pytest.mark.parametrize("name", COUNTING)
def test_each_parameter_counts_its_own_steps_as_torch(name):
  """A parameter's step count (Adam's b1^t and b2^t, Adagrad's decay, SGD's undamped first step) advances only in a step
  where it has a gradient: a step before any backward, or a layer whose gradients start later, leaves it where it was."""
  torch = pytest.importorskip("torch")
  ours, theirs = [Tensor(p) for p in P0], [torch.tensor(p, requires_grad=True) for p in P0]
  cls = {"Adam": Adam, "AdamW": AdamW, "Adagrad": Adagrad, "SGD": SGD}[name]
  opt, topt = cls(ours, **COUNTING[name]), getattr(torch.optim, name)(theirs, **COUNTING[name])
  for has in ((), (0,), (0, 1), (1,), (0, 1)):  # which parameters have a gradient in each step
    for i, (p, t) in enumerate(zip(ours, theirs)):
      p.grad = Tensor(GRADS[len(has)][i]) if i in has else None
      t.grad = torch.tensor(GRADS[len(has)][i]) if i in has else None
    opt.step(); topt.step()
  for p, t in zip(ours, theirs): np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1), lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps)])
def test_a_step_without_gradients_changes_nothing(make):
  ps = [Tensor(p) for p in P0]
  make(ps).step()  # SGD without momentum had nothing to realize, and raised
  for p, p0 in zip(ps, P0): np.testing.assert_array_equal(p.numpy(), p0)

def test_bad_gradient_changes_nothing():
  a, b = Tensor(np.ones(2, np.float32)), Tensor(np.ones(3, np.float32))
  opt = Adam([a, b], lr=0.1)
  a.grad, b.grad = Tensor(np.ones(2, np.float32)), Tensor(np.ones(2, np.float32))
  ua, ub, ut = a.uop, b.uop, opt.correction1.uop
  with pytest.raises(RuntimeError, match=r"parameter 1: gradient of shape \(2,\) for a parameter of shape \(3,\)"): opt.step()
  assert a.uop is ua and b.uop is ub and opt.correction1.uop is ut

def test_requires_grad_and_buffers():
  w, frozen, free = Tensor(np.ones(2, np.float32)), Tensor(np.ones(2, np.float32), requires_grad=False), Tensor(np.ones(1, np.float32))
  opt = SGD([w, frozen, free, w], lr=0.1)
  assert opt.params == [w, free] and opt.buffers == [frozen] and w.requires_grad and free.requires_grad and frozen.requires_grad is False
  count = Tensor(np.zeros(1, np.int64))
  assert SGD([w, count], lr=0.1).buffers == [count] and count.requires_grad is None  # an integer tensor is only realized
  with pytest.raises(ValueError, match="empty parameter list"): SGD([frozen], lr=0.1)

def test_batchnorm_statistics_are_written_at_the_call_and_kept_by_a_step():
  bn = BatchNorm(2)
  w = Tensor(np.ones(2, np.float32))
  opt = SGD([w, bn.running_mean, bn.running_var, bn.num_batches_tracked], lr=0.1)
  with Tensor.train(): bn(Tensor(np.arange(8, dtype=np.float32).reshape(2, 2, 2)))
  assert bn.running_mean.uop.op.name == "BUFFER"  # written into its buffer by the call (a TinyJit replay writes it again)
  w.grad = Tensor(np.ones(2, np.float32))
  opt.step()
  assert all(t.uop.op.name == "BUFFER" for t in (bn.running_mean, bn.running_var, bn.num_batches_tracked))
  np.testing.assert_allclose(bn.running_mean.numpy(), [0.1 * 2.5, 0.1 * 4.5])

def test_half_parameters_stay_half():
  p = Tensor(np.ones(3, np.float16))
  opt = Adam([p], lr=0.125)
  p.grad = Tensor(np.ones(3, np.float16))
  opt.step()
  assert p.dtype == dtypes.float16
  np.testing.assert_allclose(p.numpy(), [0.875] * 3, rtol=1e-3)

def test_bad_hyperparameters():
  p = [Tensor(np.ones(1, np.float32))]
  with pytest.raises(ValueError, match="nesterov"): SGD(p, lr=0.1, nesterov=True)
  with pytest.raises(ValueError, match="must be >= 0"): SGD(p, lr=-1.0)
  with pytest.raises(ValueError, match=r"b1=1.0 and b2=0.999 must be in \[0, 1\)"): Adam(p, b1=1.0)
  with pytest.raises(ValueError, match="must be >= 0"): AdamW(p, weight_decay=-0.1)
  with pytest.raises(ValueError, match="no dampening"): SGD(p, lr=0.1, momentum=0.9, nesterov=True, dampening=0.1)
  with pytest.raises(ValueError, match=r"alpha=1.5 must be in \[0, 1\]"): RMSprop(p, alpha=1.5)
  with pytest.raises(ValueError, match="lr_decay=-1"): Adagrad(p, lr_decay=-1)

def test_sharded_parameters():
  devs = ("PYTHON:0", "PYTHON:1")
  ps = [Tensor(P0[0]).shard(devs, axis=1), Tensor(P0[1]).to(devs)]  # one split over the devices, one replicated
  opt = Adam(ps, lr=0.01, b1=0.9, b2=0.999, eps=1e-8)
  for step, gs in enumerate(GRADS):
    ps[0].grad, ps[1].grad = Tensor(gs[0]).shard(devs, axis=1), Tensor(gs[1]).to(devs)
    before = engine.stats["schedules_built"]
    opt.step()
    if step >= 1: assert engine.stats["schedules_built"] == before
  assert all(p.device == devs for p in ps) and ps[0].uop.axis == 1
  for got, want in zip(ps, _adam_ref(lr=0.01, b1=0.9, b2=0.999, eps=1e-8)): np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
