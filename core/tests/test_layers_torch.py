"""The nn layers, optimizers and learning-rate schedules added for real models, against PyTorch (LAMB and LARS against
their rules in numpy: PyTorch has neither): outputs and the gradients of input and parameters."""
import numpy as np
import pytest
from tinyspec import Tensor, nn
from tinyspec.nn import optim
from tinyspec.nn.optim import lr_scheduler

torch = pytest.importorskip("torch")
rng = np.random.default_rng(3)
X = rng.standard_normal((2, 6, 4, 3)).astype(np.float32)


def check_layer(ours, theirs, x, params):
  """ours(x) against theirs(x) and the gradients of sum(out^2) for x and each (tinyspec, torch) parameter pair."""
  tx, t = torch.tensor(x, requires_grad=True), Tensor(x, requires_grad=True)
  for p, _ in params: p.requires_grad = True
  out, ref = ours(t), theirs(tx)
  loss = (out * out).sum()
  np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
  loss.backward(); (ref * ref).sum().backward()
  for a, b in [(t, tx), *params]: np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)

def same_weights(ours, theirs):
  theirs.weight.data = torch.tensor(ours.weight.numpy())
  if ours.bias is not None: theirs.bias.data = torch.tensor(ours.bias.numpy())
  return ours, theirs

def test_group_norm():
  g, tg = nn.GroupNorm(3, 6), torch.nn.GroupNorm(3, 6)
  check_layer(g, tg, X, [(g.weight, tg.weight), (g.bias, tg.bias)])
  with pytest.raises(ValueError, match="must divide"): nn.GroupNorm(4, 6)

def test_rms_norm():
  r, tr = nn.RMSNorm((4, 3)), torch.nn.RMSNorm((4, 3))
  check_layer(r, tr, X, [(r.weight, tr.weight)])
  r, tr = nn.RMSNorm(3, eps=1e-3), torch.nn.RMSNorm(3, eps=1e-3)
  check_layer(r, tr, X * 1e-2, [(r.weight, tr.weight)])

def test_conv1d_and_conv_transpose2d():
  c, tc = same_weights(nn.Conv1d(6, 5, 3, padding=1, stride=2), torch.nn.Conv1d(6, 5, 3, padding=1, stride=2))
  assert c.weight.shape == tuple(tc.weight.shape)
  check_layer(c, tc, X.reshape(2, 6, 12), [(c.weight, tc.weight), (c.bias, tc.bias)])
  ct, tct = same_weights(nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1),
                         torch.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1))
  assert ct.weight.shape == tuple(tct.weight.shape)
  check_layer(ct, tct, X, [(ct.weight, tct.weight), (ct.bias, tct.bias)])

def test_conv_transpose1d():
  ct, tct = same_weights(nn.ConvTranspose1d(6, 4, 3, stride=2, padding=1, output_padding=1),
                         torch.nn.ConvTranspose1d(6, 4, 3, stride=2, padding=1, output_padding=1))
  assert ct.weight.shape == tuple(tct.weight.shape)
  check_layer(ct, tct, X.reshape(2, 6, 12), [(ct.weight, tct.weight), (ct.bias, tct.bias)])
  with pytest.raises(ValueError, match="ConvTranspose1d: kernel_size must be one int"): nn.ConvTranspose1d(6, 4, (3, 3))

def test_instance_norm():
  i, ti = nn.InstanceNorm(6), torch.nn.InstanceNorm2d(6, affine=True)
  check_layer(i, ti, X, [(i.weight, ti.weight), (i.bias, ti.bias)])
  i, ti = nn.InstanceNorm(6, affine=False), torch.nn.InstanceNorm1d(6)
  assert i.weight is None
  check_layer(i, ti, X.reshape(2, 6, 12), [])
  with pytest.raises(RuntimeError, match=r"InstanceNorm: expected an input of shape \(N, 6, ...\), got \(2, 5, 3\)"): i(Tensor.ones(2, 5, 3))

def test_layer_norm_2d():
  ln, tln = nn.LayerNorm2d(6), torch.nn.LayerNorm(6)
  check_layer(ln, lambda x: tln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2), X, [(ln.weight, tln.weight), (ln.bias, tln.bias)])

def test_lstm_cell_two_steps():
  """Two steps from a zero state (batched and unbatched): h', c' and the gradients of the input and all four parameters."""
  cell, tcell = nn.LSTMCell(3, 4), torch.nn.LSTMCell(3, 4)
  names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
  for n in names: getattr(tcell, n).data = torch.tensor(getattr(cell, n).numpy())
  assert cell.weight_ih.shape == tuple(tcell.weight_ih.shape) and cell.weight_hh.shape == tuple(tcell.weight_hh.shape)
  def two_steps(layer):
    def run(x):
      h, c = layer(x[0])
      h, c = layer(x[1], (h, c))
      return h * 2 + c
    return run
  check_layer(two_steps(cell), two_steps(tcell), X.reshape(2, 24, 3)[:, :5], [(getattr(cell, n), getattr(tcell, n)) for n in names])
  check_layer(two_steps(cell), two_steps(tcell), X.reshape(2, 72)[:, :3], [])  # unbatched: x[i] of shape (3,)
  with pytest.raises(RuntimeError, match=r"LSTMCell: expected h and c of shape \(5, 4\)"): cell(Tensor.ones(5, 3), (Tensor.ones(4), Tensor.ones(4)))

def test_dropout_layer():
  d = nn.Dropout(0.25)
  x = Tensor.ones(2000)
  assert d(x) is x
  with Tensor.train(): kept = (d(x).numpy() != 0).mean()
  assert 0.72 < kept < 0.78

@pytest.mark.parametrize("ours,theirs", [
  (nn.MaxPool2d(2), torch.nn.MaxPool2d(2)), (nn.MaxPool2d(3, 2, 1, ceil_mode=True), torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)),
  (nn.AvgPool2d((2, 3), 1, count_include_pad=False), torch.nn.AvgPool2d((2, 3), 1, count_include_pad=False)),
  (nn.AdaptiveAvgPool2d((1, 1)), torch.nn.AdaptiveAvgPool2d((1, 1))), (nn.AdaptiveAvgPool2d((3, 2)), torch.nn.AdaptiveAvgPool2d((3, 2))),
  (nn.AdaptiveMaxPool2d((3, None)), torch.nn.AdaptiveMaxPool2d((3, None))),
], ids=["max", "max_ceil", "avg", "global_avg", "adaptive_avg", "adaptive_max"])
def test_pool_layers(ours, theirs):
  check_layer(ours, theirs, rng.standard_normal((2, 3, 7, 5)).astype(np.float32), [])

def test_pool_layers_return_indices():
  x = rng.standard_normal((2, 3, 7, 5)).astype(np.float32)
  for ours, theirs in [(nn.MaxPool2d(2, return_indices=True), torch.nn.MaxPool2d(2, return_indices=True)),
                       (nn.AdaptiveMaxPool2d(3, return_indices=True), torch.nn.AdaptiveMaxPool2d(3, return_indices=True))]:
    (v, i), (tv, ti) = ours(Tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())

SCHEDULES = [
  ("step", lambda o: lr_scheduler.StepLR(o, 3, 0.5), lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5), 10),
  ("linear_warmup", lambda o: lr_scheduler.LinearLR(o, 0.1, 1.0, 4), lambda o: torch.optim.lr_scheduler.LinearLR(o, 0.1, 1.0, 4), 8),
  ("cosine", lambda o: lr_scheduler.CosineAnnealingLR(o, 10, 0.01), lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 10, 0.01), 11),
  ("one_cycle", lambda o: lr_scheduler.OneCycleLR(o, 1.0, 20, cycle_momentum=False),
   lambda o: torch.optim.lr_scheduler.OneCycleLR(o, 1.0, 20, cycle_momentum=False), 20),
  ("one_cycle_linear", lambda o: lr_scheduler.OneCycleLR(o, 0.5, 15, pct_start=0.4, anneal_strategy="linear", cycle_momentum=False),
   lambda o: torch.optim.lr_scheduler.OneCycleLR(o, 0.5, 15, pct_start=0.4, anneal_strategy="linear", cycle_momentum=False), 15),
  ("one_cycle_three_phase", lambda o: lr_scheduler.OneCycleLR(o, 0.5, epochs=4, steps_per_epoch=6, three_phase=True, cycle_momentum=False),
   lambda o: torch.optim.lr_scheduler.OneCycleLR(o, 0.5, epochs=4, steps_per_epoch=6, three_phase=True, cycle_momentum=False), 24),
  ("one_cycle_three_phase_linear", lambda o: lr_scheduler.OneCycleLR(o, 0.5, 17, pct_start=0.25, anneal_strategy="linear", three_phase=True,
                                                          cycle_momentum=False),
   lambda o: torch.optim.lr_scheduler.OneCycleLR(o, 0.5, 17, pct_start=0.25, anneal_strategy="linear", three_phase=True, cycle_momentum=False), 17),
  ("linear_no_iters", lambda o: lr_scheduler.LinearLR(o, 0.5, 1.0, 0), lambda o: torch.optim.lr_scheduler.LinearLR(o, 0.5, 1.0, 0), 4),
  ("multistep", lambda o: lr_scheduler.MultiStepLR(o, [5, 2, 7], 0.5), lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [5, 2, 7], 0.5), 10),
  ("exponential", lambda o: lr_scheduler.ExponentialLR(o, 0.8), lambda o: torch.optim.lr_scheduler.ExponentialLR(o, 0.8), 8),
  ("constant", lambda o: lr_scheduler.ConstantLR(o, 0.25, 3), lambda o: torch.optim.lr_scheduler.ConstantLR(o, 0.25, 3), 6),
  ("lambda", lambda o: lr_scheduler.LambdaLR(o, lambda t: 1 / (t + 1)), lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda t: 1 / (t + 1)), 6),
  ("warmup_then_cosine",  # the second part starts from the optimizer's first rate, not the one the warmup set
   lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.LinearLR(o, 0.1, 1.0, 3), lr_scheduler.CosineAnnealingLR(o, 8, 0.001)], [3]),
   lambda o: torch.optim.lr_scheduler.SequentialLR(o, [torch.optim.lr_scheduler.LinearLR(o, 0.1, 1.0, 3),
                                                       torch.optim.lr_scheduler.CosineAnnealingLR(o, 8, 0.001)], [3]), 11),
]

@pytest.mark.parametrize("name, ours, theirs, steps", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_schedules_set_pytorchs_rates(name, ours, theirs, steps):
  p, tp = Tensor(np.ones(3, np.float32)), torch.nn.Parameter(torch.ones(3))
  opt, topt = optim.SGD([p], lr=0.1), torch.optim.SGD([tp], lr=0.1)
  sched, tsched = ours(opt), theirs(topt)
  rates, trates = [], []
  for _ in range(steps):
    rates.append(opt.lr.item()); trates.append(topt.param_groups[0]["lr"])
    p.grad, tp.grad = Tensor(np.ones(3, np.float32)), torch.ones(3)
    opt.step(); sched.step(); topt.step(); tsched.step()
  np.testing.assert_allclose(rates, trates, rtol=1e-5, atol=1e-9)
  np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-5)  # the rates were the ones the steps used
  assert sched.get_last_lr() == [pytest.approx(tsched.get_last_lr()[0], rel=1e-6)]

CYCLED = [  # (id, ours, PyTorch's): optimizers whose momentum (or b1) OneCycleLR cycles
  ("sgd", lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
  ("sgd_nesterov", lambda ps: optim.SGD(ps, lr=0.1, momentum=0.5, nesterov=True),
   lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.5, nesterov=True)),
  ("rmsprop", lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.9), lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.9)),
  ("adam", lambda ps: optim.Adam(ps, lr=0.01), lambda ps: torch.optim.Adam(ps, lr=0.01)),
  ("adamw", lambda ps: optim.AdamW(ps, lr=0.01), lambda ps: torch.optim.AdamW(ps, lr=0.01)),
]

@pytest.mark.parametrize("three_phase", [False, True])
@pytest.mark.parametrize("name, ours, theirs", CYCLED, ids=[c[0] for c in CYCLED])
def test_one_cycle_cycles_the_momentum_as_pytorch(name, ours, theirs, three_phase):
  """OneCycleLR's default cycle_momentum: the momentum (b1 for Adam) each step, and the parameters it moves (Adam's bias
  correction 1 - b1^t from the current b1, as PyTorch's), over random gradients."""
  p0 = rng.standard_normal((4, 3)).astype(np.float32)
  p, tp = Tensor(p0.copy()), torch.nn.Parameter(torch.tensor(p0))
  opt, topt = ours([p]), theirs([tp])
  sched = lr_scheduler.OneCycleLR(opt, 0.05, 12, pct_start=0.3, base_momentum=0.8, max_momentum=0.9, three_phase=three_phase)
  tsched = torch.optim.lr_scheduler.OneCycleLR(topt, 0.05, 12, pct_start=0.3, base_momentum=0.8, max_momentum=0.9, three_phase=three_phase)
  key = "betas" if "betas" in topt.param_groups[0] else "momentum"
  for _ in range(12):
    theirs_momentum = topt.param_groups[0][key]
    assert opt._momentum.item() == pytest.approx(theirs_momentum[0] if key == "betas" else theirs_momentum, rel=1e-6)
    g = rng.standard_normal((4, 3)).astype(np.float32)
    p.grad, tp.grad = Tensor(g), torch.tensor(g)
    opt.step(); sched.step(); topt.step(); tsched.step()
  np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)

def test_one_cycle_refuses_an_optimizer_without_momentum_and_changes_nothing():
  p = Tensor(np.ones(3, np.float32))
  for opt in (optim.SGD([p], lr=0.1), optim.Adagrad([p], lr=0.1)):
    with pytest.raises(ValueError, match="cycle_momentum needs an optimizer with a momentum"): lr_scheduler.OneCycleLR(opt, 1.0, 10)
    assert opt.lr.item() == pytest.approx(0.1) and opt.initial_lr is None
  with pytest.raises(ValueError, match="has no momentum to set"): optim.SGD([p], lr=0.1).set_momentum(0.5)

def test_lamb_follows_its_rule():
  p0 = rng.standard_normal(5).astype(np.float32)
  p = Tensor(p0.copy())
  opt = optim.LAMB([p], lr=0.01, weight_decay=0.1)
  m, v, q = np.zeros(5), np.zeros(5), p0.astype(np.float64)
  for t in range(1, 6):
    g = np.sin(np.arange(5) + t).astype(np.float32)
    p.grad = Tensor(g)
    opt.step()
    m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
    r = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-6) + 0.1 * q
    q = q - 0.01 * (np.linalg.norm(q) / np.linalg.norm(r)) * r
  np.testing.assert_allclose(p.numpy(), q, rtol=1e-5)

@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD"])
def test_optimizers_with_parameters_of_one_shape_keep_separate_state(name):
  """Each parameter's moments live in a buffer of their own even where parameters share a shape (their zero initial states
  are one graph node): three steps equal PyTorch's."""
  values = [np.array([1.0, 2.5], np.float32), np.array([0.5, -1.0], np.float32), np.array([-2.0, 0.25], np.float32)]
  ours, theirs = [Tensor(v, requires_grad=True) for v in values], [torch.tensor(v, requires_grad=True) for v in values]
  kw = {"momentum": 0.9} if name == "SGD" else {}
  opt, topt = getattr(optim, name)(ours, lr=0.1, **kw), getattr(torch.optim, name)(theirs, lr=0.1, **kw)
  for _ in range(3):
    for ps, o in ((ours, opt), (theirs, topt)):
      o.zero_grad()
      ((ps[0] * ps[0]).sum() + (ps[1] * 3).sum() + (ps[2] * ps[0]).sum()).backward()
      o.step()
  for p, tp in zip(ours, theirs): np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-4, atol=1e-5)

def muon_reference(w0, grads, lr, wd=0.1, mu=0.95, nesterov=True, adjust=None):
  """torch.optim.Muon's rule in float64 (PyTorch runs its Newton-Schulz iterations in bfloat16)."""
  w, b = w0.astype(np.float64), np.zeros(w0.shape)
  for g in grads:
    b = mu * b + (1 - mu) * g
    u = (1 - mu) * g + mu * b if nesterov else b
    x = u if u.shape[0] <= u.shape[1] else u.T
    x = x / max(np.linalg.norm(x), 1e-7)
    for _ in range(5):
      gram = x @ x.T
      x = 3.4445 * x + (-4.7750 * gram + 2.0315 * gram @ gram) @ x
    rows, cols = w.shape
    scale = 0.2 * max(rows, cols) ** 0.5 if adjust == "match_rms_adamw" else max(1, rows / cols) ** 0.5
    w = w * (1 - lr * wd) - lr * scale * (x if u.shape[0] <= u.shape[1] else x.T)
  return w

@pytest.mark.parametrize("shape, kw", [((4, 6), {}), ((7, 3), {"nesterov": False, "adjust_lr_fn": "match_rms_adamw"}), ((5, 5), {"momentum": 0.0})])
def test_muon_follows_pytorchs_rule(shape, kw):
  """Three steps: equal to torch.optim.Muon's rule computed in float64, and to torch.optim.Muon itself within its bfloat16
  iterations' rounding (a step moves the weights by about 0.03 here)."""
  w0 = rng.standard_normal(shape).astype(np.float32)
  grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
  p, tp = Tensor(w0.copy()), torch.nn.Parameter(torch.tensor(w0))
  opt, topt = optim.Muon([p], lr=0.02, **kw), torch.optim.Muon([tp], lr=0.02, **kw)
  for g in grads:
    p.grad, tp.grad = Tensor(g), torch.tensor(g)
    opt.step(); topt.step()
  ref = muon_reference(w0, grads, 0.02, mu=kw.get("momentum", 0.95), nesterov=kw.get("nesterov", True), adjust=kw.get("adjust_lr_fn"))
  np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), atol=3e-3)
  with pytest.raises(ValueError, match=r"Muon: only 2-D parameters can be optimized, got shapes \[\(3,\)\]"): optim.Muon([p, Tensor.ones(3)])

@pytest.mark.parametrize("classic, nesterov", [(True, False), (False, False), (True, True)])
def test_lars_follows_its_rule(classic, nesterov):
  p0 = rng.standard_normal(6).astype(np.float32)
  p = Tensor(p0.copy())
  opt = optim.LARS([p], lr=0.5, momentum=0.9, weight_decay=0.01, nesterov=nesterov, classic=classic, tcoef=0.02)
  q, b = p0.astype(np.float64), np.zeros(6)
  for t in range(4):
    g = np.sin(np.arange(6) * 1.3 + t).astype(np.float32)
    p.grad = Tensor(g)
    opt.step()
    trust = 0.02 * np.linalg.norm(q) / (np.linalg.norm(g) + 0.01 * np.linalg.norm(q))
    s = trust * (g + 0.01 * q) * (0.5 if classic else 1.0)
    b = 0.9 * b + s
    s = s + 0.9 * b if nesterov else b
    q = q - (s if classic else 0.5 * s)
  np.testing.assert_allclose(p.numpy(), q, rtol=1e-5)

def test_optimizer_group_steps_as_its_optimizers_and_as_pytorch():
  """A Linear layer's weight by Muon and its bias by AdamW, stepped as one group: equal to the two optimizers stepped on
  their own (on a twin layer), and to PyTorch's two within its Muon's bfloat16 rounding (9e-4 in the weight here, which
  reaches the bias through the gradients: 3e-6). Its own data: with the module's generator the data, and so that
  rounding, depended on the tests run before it (alone it failed). A gradient of the wrong shape for the second
  optimizer leaves the first's parameters as they were."""
  r = np.random.default_rng(5)
  w, b, x = (r.standard_normal(shape).astype(np.float32) for shape in ((4, 5), (4,), (8, 5)))
  lin, twin, tlin = nn.Linear(5, 4), nn.Linear(5, 4), torch.nn.Linear(5, 4)
  for layer in (lin, twin): layer.weight, layer.bias = Tensor(w.copy()), Tensor(b.copy())
  tlin.weight.data, tlin.bias.data = torch.tensor(w), torch.tensor(b)
  group = optim.OptimizerGroup(optim.Muon([lin.weight], lr=0.02), optim.AdamW([lin.bias], lr=0.01))
  alone = [optim.Muon([twin.weight], lr=0.02), optim.AdamW([twin.bias], lr=0.01)]
  theirs = [torch.optim.Muon([tlin.weight], lr=0.02), torch.optim.AdamW([tlin.bias], lr=0.01)]
  for _ in range(3):
    for layer, opts in ((lin, [group]), (twin, alone), (tlin, theirs)):
      for o in opts: o.zero_grad()
      (layer(Tensor(x) if layer is not tlin else torch.tensor(x)) ** 2).mean().backward()
      for o in opts: o.step()
  np.testing.assert_allclose(lin.weight.numpy(), twin.weight.numpy(), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(lin.bias.numpy(), twin.bias.numpy(), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(lin.weight.numpy(), tlin.weight.detach().numpy(), atol=3e-3)
  np.testing.assert_allclose(lin.bias.numpy(), tlin.bias.detach().numpy(), rtol=1e-5, atol=1e-6)
  assert group[1].params == [lin.bias] and group.params == [lin.weight, lin.bias]
  before = lin.weight.numpy()
  lin.weight.grad, lin.bias.grad = Tensor.ones(4, 5), Tensor.ones(5)
  with pytest.raises(RuntimeError, match=r"gradient of shape \(5,\) for a parameter of shape \(4,\)"): group.step()
  np.testing.assert_array_equal(lin.weight.numpy(), before)


def test_sequential_lr_names_bad_milestones():
  opt = optim.SGD([Tensor(np.ones(2, np.float32))], lr=0.1)
  parts = [lr_scheduler.ConstantLR(opt, 0.5, 2), lr_scheduler.ExponentialLR(opt, 0.9)]
  with pytest.raises(ValueError, match="needs len\\(schedulers\\) - 1 = 1 increasing milestones, got \\[2, 4\\]"):
    lr_scheduler.SequentialLR(opt, parts, [2, 4])
  other = optim.SGD([Tensor(np.ones(2, np.float32))], lr=0.1)
  with pytest.raises(ValueError, match="must drive the optimizer given"): lr_scheduler.SequentialLR(other, parts, [2])
