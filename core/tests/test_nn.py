"""nn layers: PyTorch's default initializations, forward values against numpy and torch.nn, BatchNorm's train/eval modes and
running statistics, and gradients through the layers."""
import math

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.nn import BatchNorm, BatchNorm2d, Conv2d, Embedding, LayerNorm, Linear
from tinyspec.nn.state import get_state_dict, load_state_dict
from tinyspec.uop.ops import Ops

rng = np.random.default_rng(0)

def _f32(*shape) -> np.ndarray: return rng.standard_normal(shape).astype(np.float32)

def _from_torch(ours, theirs) -> None:
  load_state_dict(ours, {k: v.detach().numpy() for k, v in theirs.state_dict().items()})

# ---- initialization ----

@pytest.mark.parametrize("make, fan_in", [(lambda: Linear(50, 40), 50), (lambda: Conv2d(6, 8, 3, groups=2), 27),
                                          (lambda: Conv2d(3, 16, (2, 5)), 30)])
def test_init_bounds(make, fan_in):
  Tensor.manual_seed(1)
  layer = make()
  bound = 1 / math.sqrt(fan_in)
  for t in (layer.weight, layer.bias): assert t.dtype == dtypes.float32 and np.abs(t.numpy()).max() <= bound
  w = layer.weight.numpy()
  assert np.abs(w).max() > 0.9 * bound and abs(w.mean()) < 0.1 * bound  # fills the range, centered
  assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound  # uniform on [-bound, bound]

def test_init_matches_torch_bounds():
  torch = pytest.importorskip("torch")
  torch.manual_seed(0)
  for tl, bound in ((torch.nn.Linear(50, 40), 1 / math.sqrt(50)), (torch.nn.Conv2d(6, 8, 3, groups=2), 1 / math.sqrt(27))):
    assert 0.9 * bound < tl.weight.abs().max().item() <= bound and tl.bias.abs().max().item() <= bound

def test_init_shapes_and_options():
  Tensor.manual_seed(0)
  assert Linear(3, 5, bias=False).bias is None and Linear(3, 5).weight.shape == (5, 3)
  c = Conv2d(4, 6, 3, groups=2, bias=False)
  assert c.weight.shape == (6, 2, 3, 3) and c.bias is None
  with pytest.raises(ValueError, match="groups=3 must divide in_channels=4"): Conv2d(4, 6, 3, groups=3)
  bn = BatchNorm(3, affine=False, track_running_stats=False)
  assert bn.weight is None and list(get_state_dict(bn)) == []
  assert LayerNorm(4, bias=False).bias is None and LayerNorm((2, 3), elementwise_affine=False).weight is None
  assert BatchNorm2d is BatchNorm

def test_embedding_init_is_standard_normal():
  Tensor.manual_seed(0)
  w = Embedding(100, 50).weight.numpy()
  assert w.shape == (100, 50) and abs(w.mean()) < 0.05 and abs(w.std() - 1) < 0.05

def test_seeded_init_is_deterministic():
  Tensor.manual_seed(3)
  a = Linear(4, 4).weight.numpy()
  Tensor.manual_seed(3)
  np.testing.assert_array_equal(Linear(4, 4).weight.numpy(), a)

# ---- forward values ----

def test_linear_numpy():
  Tensor.manual_seed(0)
  lin, x = Linear(3, 2), _f32(5, 3)
  np.testing.assert_allclose(lin(Tensor(x)).numpy(), x @ lin.weight.numpy().T + lin.bias.numpy(), rtol=1e-5, atol=1e-6)
  assert lin(Tensor(_f32(2, 4, 3))).shape == (2, 4, 2)  # leading axes pass through

def test_conv2d_numpy():
  Tensor.manual_seed(0)
  conv, x = Conv2d(2, 3, 3, stride=2, padding=1), _f32(1, 2, 5, 5)
  w, b = conv.weight.numpy(), conv.bias.numpy()
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  want = np.array([[[(xp[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] * w[o]).sum() + b[o] for j in range(3)] for i in range(3)] for o in range(3)])
  np.testing.assert_allclose(conv(Tensor(x)).numpy()[0], want, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=(3, 2), stride=2, padding=1), dict(kernel_size=3, padding="same",
                                dilation=2), dict(kernel_size=1, groups=2)])
def test_conv2d_vs_torch(kw):
  torch = pytest.importorskip("torch")
  torch.manual_seed(0)
  tc, conv, x = torch.nn.Conv2d(4, 6, **kw), Conv2d(4, 6, **kw), _f32(2, 4, 7, 6)
  _from_torch(conv, tc)
  np.testing.assert_allclose(conv(Tensor(x)).numpy(), tc(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)

def test_layernorm_vs_numpy_and_torch():
  x = _f32(3, 4, 5)
  ln = LayerNorm((4, 5), eps=1e-3)
  ln.weight, ln.bias = Tensor(_f32(4, 5)), Tensor(_f32(4, 5))
  m, v = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
  np.testing.assert_allclose(ln(Tensor(x)).numpy(), (x - m) / np.sqrt(v + 1e-3) * ln.weight.numpy() + ln.bias.numpy(), rtol=1e-4, atol=1e-5)
  torch = pytest.importorskip("torch")
  tl = torch.nn.LayerNorm((4, 5), eps=1e-3)
  tl.load_state_dict({"weight": torch.tensor(ln.weight.numpy()), "bias": torch.tensor(ln.bias.numpy())})
  np.testing.assert_allclose(ln(Tensor(x)).numpy(), tl(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
  with pytest.raises(RuntimeError, match="normalized_shape"): ln(Tensor(_f32(3, 5, 4)))

def test_embedding():
  Tensor.manual_seed(0)
  emb = Embedding(6, 3)
  idx = np.array([[0, 5, 2], [2, 2, 1]])
  out = emb(Tensor(idx))
  assert out.shape == (2, 3, 3)
  np.testing.assert_array_equal(out.numpy(), emb.weight.numpy()[idx])
  with pytest.raises(TypeError, match="integer tensor"): emb(Tensor([0.0, 1.0]))

# ---- BatchNorm: modes and running statistics ----

def test_train_flag_context():
  assert Tensor.training is False
  with Tensor.train():
    assert Tensor.training is True
    with Tensor.train(False): assert Tensor.training is False
    assert Tensor.training is True
  assert Tensor.training is False
  @Tensor.train()
  def f(): return Tensor.training
  assert f() is True and Tensor.training is False

def test_batchnorm_by_hand():
  x = _f32(6, 2, 3)
  bn = BatchNorm(2, momentum=0.25)
  with Tensor.train(): y = bn(Tensor(x)).numpy()
  m, v = x.mean((0, 2)), x.var((0, 2))
  np.testing.assert_allclose(y, (x - m[:, None]) / np.sqrt(v[:, None] + 1e-5), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(bn.running_mean.numpy(), 0.25 * m, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(bn.running_var.numpy(), 0.75 + 0.25 * x.var((0, 2), ddof=1), rtol=1e-5)  # unbiased
  assert bn.num_batches_tracked.item() == 1 and bn.num_batches_tracked.dtype == dtypes.int64
  rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
  x2 = _f32(4, 2, 3)
  np.testing.assert_allclose(bn(Tensor(x2)).numpy(), (x2 - rm[:, None]) / np.sqrt(rv[:, None] + 1e-5), rtol=1e-5, atol=1e-6)  # eval
  np.testing.assert_array_equal(bn.running_mean.numpy(), rm)  # eval leaves the statistics alone

def test_batchnorm_computes_its_input_and_statistics_once():
  # training mode writes the running statistics now; the input (a convolution) and the batch's mean and variance are
  # computed in that same realize, so the output reads them instead of a second convolution and second reductions
  xn, wn = _f32(4, 2, 6, 6), _f32(3, 2, 3, 3)
  w = Tensor(wn, requires_grad=True)
  bn = BatchNorm(3)
  with Tensor.train(): y = bn(h := Tensor(xn).conv2d(w))
  assert h.uop.op is Ops.BUFFER and not [u for u in y.uop.toposort() if u.op is Ops.REDUCE]
  hn = h.numpy()
  m, v = hn.mean((0, 2, 3), keepdims=True), hn.var((0, 2, 3), keepdims=True)
  np.testing.assert_allclose(y.numpy(), (hn - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-4)
  # the gradient still reaches the convolution's weight (its graph is kept for backward): the same as through a
  # BatchNorm that tracks no statistics, and so realizes nothing early
  r = Tensor(_f32(4, 3, 4, 4))
  (g,) = (y * r).sum().gradient(w)
  with Tensor.train(): (want,) = (BatchNorm(3, track_running_stats=False)(Tensor(xn).conv2d(w)) * r).sum().gradient(w)
  assert np.abs(want.numpy()).max() > 0.1
  np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)

def test_batchnorm_without_running_stats_uses_batch_in_eval():
  x = _f32(5, 3)
  bn = BatchNorm(3, track_running_stats=False, affine=False)
  np.testing.assert_allclose(bn(Tensor(x)).numpy(), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-4, atol=1e-5)

def test_batchnorm_errors():
  bn = BatchNorm(3)
  with pytest.raises(RuntimeError, match=r"expected an input of shape \(N, 3, ...\)"): bn(Tensor(_f32(2, 4)))
  with Tensor.train(), pytest.raises(ValueError, match="more than 1 value per channel"): bn(Tensor(_f32(1, 3)))

@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_vs_torch(momentum):
  torch = pytest.importorskip("torch")
  tb, bn = torch.nn.BatchNorm2d(3, momentum=momentum), BatchNorm(3, momentum=momentum)
  with torch.no_grad(): tb.weight.copy_(torch.tensor([1.0, 2.0, 0.5])); tb.bias.copy_(torch.tensor([0.0, -1.0, 3.0]))
  _from_torch(bn, tb)
  tb.train()
  for _ in range(3):  # three training batches: the statistics move as PyTorch's
    x = _f32(4, 3, 2, 5) * 2 + 1
    with Tensor.train(): y = bn(Tensor(x))
    np.testing.assert_allclose(y.numpy(), tb(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
  for k, v in tb.state_dict().items(): np.testing.assert_allclose(get_state_dict(bn)[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
  tb.eval()
  x = _f32(2, 3, 2, 5)
  np.testing.assert_allclose(bn(Tensor(x)).numpy(), tb(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)

# ---- gradients through the layers ----

def test_gradients_vs_torch():
  torch = pytest.importorskip("torch")
  torch.manual_seed(0)
  tconv, tbn, tlin = torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.BatchNorm2d(3), torch.nn.Linear(12, 4)
  conv, bn, lin = Conv2d(2, 3, 3, padding=1), BatchNorm(3), Linear(12, 4)
  for o, t in ((conv, tconv), (bn, tbn), (lin, tlin)): _from_torch(o, t)
  x, target = _f32(5, 2, 4, 4), _f32(5, 4)
  params = [conv.weight, conv.bias, bn.weight, bn.bias, lin.weight, lin.bias]
  for p in params: p.requires_grad = True
  with Tensor.train():
    out = lin(bn(conv(Tensor(x))).relu().max_pool2d(2).flatten(1))
  ((out - Tensor(target)) ** 2).mean().backward()
  tout = tlin(torch.nn.functional.max_pool2d(tbn(tconv(torch.tensor(x))).relu(), 2).flatten(1))
  ((tout - torch.tensor(target)) ** 2).mean().backward()
  tparams = [tconv.weight, tconv.bias, tbn.weight, tbn.bias, tlin.weight, tlin.bias]
  for i, (p, tp) in enumerate(zip(params, tparams)):
    np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"parameter {i}")

def test_embedding_gradient():
  emb = Embedding(4, 2)
  emb.weight = Tensor(_f32(4, 2), requires_grad=True)
  emb(Tensor([[1, 3], [1, 1]])).sum().backward()
  np.testing.assert_array_equal(emb.weight.grad.numpy(), [[0, 0], [3, 3], [0, 0], [1, 1]])
