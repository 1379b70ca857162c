"""Gradients: every op family of the Tensor API against PyTorch (where installed) and against central finite differences
in float64 (always), then the autograd behaviour itself: accumulation, detach, errors, leaves, deep graphs, FUNCTION.

Each case is (id, input shapes, tinyspec function, torch function or None when the same code serves both, options).
The loss is sum(f(inputs) * w) for a random w, so every output element's gradient counts with its own weight."""
import math
import zlib

import numpy as np
import pytest
from tinyspec import Device, Ops, Tensor, UOp, dtypes
from tinyspec.engine.callify import param_for
from tinyspec.gradient import compute_gradient, pm_gradient

IDX = np.array([[0, 2, 2], [1, 0, 1]])                  # gather: repeated indices must accumulate
SCATTER_IDX = np.array([[3, 0, 1], [2, 4, 0]])          # scatter: distinct per row (repeats are unspecified in torch)
RUN = np.array([[0.1, -0.2, 0.3], [0.5, 1.5, 2.0]], np.float32)  # batch_norm's running mean and variance
POS = dict(lo=0.5, hi=2.0)                              # inputs where log, sqrt, 1/x and x**y are smooth


def _ti(a: np.ndarray) -> Tensor: return Tensor(a.astype(np.int32))
def _F():
  import torch.nn.functional as F
  return F
def _torch():
  import torch
  return torch

CASES = [
  # elementwise, with broadcasting
  ("add", [(2, 3), (3,)], lambda a, b: a + b, None, {}),
  ("sub", [(2, 3), (2, 1)], lambda a, b: a - b, None, {}),
  ("mul", [(2, 3), (3,)], lambda a, b: a * b, None, {}),
  ("div", [(2, 3), (3,)], lambda a, b: a / b, None, POS),
  ("scalar_ops", [(2, 3)], lambda a: 3 - a * 2 + 1 / (a + 3), None, {}),
  ("neg", [(4,)], lambda a: -a, None, {}),
  ("reciprocal", [(4,)], lambda a: a.reciprocal(), None, POS),
  ("sqrt", [(4,)], lambda a: a.sqrt(), None, POS),
  ("rsqrt", [(4,)], lambda a: a.rsqrt(), None, POS),
  ("exp", [(2, 3)], lambda a: a.exp(), None, {}),
  ("exp2", [(2, 3)], lambda a: a.exp2(), None, {}),
  ("log", [(2, 3)], lambda a: a.log(), None, POS),
  ("log2", [(2, 3)], lambda a: a.log2(), None, POS),
  ("sin", [(2, 3)], lambda a: a.sin(), None, {}),
  ("cos", [(2, 3)], lambda a: a.cos(), None, {}),
  ("tan", [(2, 3)], lambda a: a.tan(), None, dict(lo=-1.2, hi=1.2)),
  ("pow_int", [(2, 3)], lambda a: a ** 3, None, {}),
  ("pow_frac", [(2, 3)], lambda a: a ** 0.5, None, POS),
  ("pow_tensor", [(2, 3), (2, 3)], lambda a, b: a ** b, None, POS),
  ("rpow", [(2, 3)], lambda a: 2 ** a, None, {}),
  ("square_abs", [(2, 3)], lambda a: a.square() + a.abs(), None, {}),
  ("maximum_minimum", [(2, 3), (3,)], lambda a, b: a.maximum(b) * 2 + a.minimum(b), None, {}),
  ("where", [(2, 3), (2, 3)], lambda a, b: (a > 0).where(a * 2, b), lambda a, b: _torch().where(a > 0, a * 2, b), {}),
  ("clamp", [(3, 4)], lambda a: a.clamp(-0.5, 0.7), None, {}),
  ("lerp", [(3,), (3,)], lambda a, b: a.lerp(b, 0.3), None, {}),
  ("trunc_floor_ceil_round", [(2, 3)], lambda a: a.trunc() + a.floor() + a.ceil() + a.round() + a, None, {}),
  ("cast", [(2, 3)], lambda a: a.cast(dtypes.float64).cast(dtypes.float32) * a, lambda a: a.double().float() * a, dict(fd=False)),
  ("cast_half", [(2, 3)], lambda a: a.half().exp().float(), lambda a: a.half().exp().float(), dict(fd=False, tol=(2e-3, 2e-3))),
  # activations
  ("relu", [(2, 3)], lambda a: a.relu(), None, {}),
  ("leaky_relu", [(2, 3)], lambda a: a.leaky_relu(0.1), lambda a: _F().leaky_relu(a, 0.1), {}),
  ("sigmoid", [(2, 3)], lambda a: a.sigmoid(), None, {}),
  ("tanh", [(2, 3)], lambda a: a.tanh(), None, {}),
  ("gelu", [(2, 3)], lambda a: a.gelu(approximate="none"), lambda a: _F().gelu(a), {}),
  ("gelu_tanh", [(2, 3)], lambda a: a.gelu(approximate="tanh"), lambda a: _F().gelu(a, approximate="tanh"), {}),
  ("silu", [(2, 3)], lambda a: a.silu(), lambda a: _F().silu(a), {}),
  ("softplus", [(2, 3)], lambda a: a.softplus(), lambda a: _F().softplus(a), {}),
  ("elu", [(2, 3)], lambda a: a.elu(), lambda a: _F().elu(a), {}),
  ("hardtanh", [(2, 3)], lambda a: a.hardtanh(), lambda a: _F().hardtanh(a), {}),
  # reductions
  ("sum", [(3, 4)], lambda a: a.sum(1) + a.sum(), None, {}),
  ("sum_keepdim", [(2, 3, 4)], lambda a: a.sum((0, 2), keepdim=True), lambda a: a.sum((0, 2), keepdim=True), {}),
  ("prod", [(3, 4)], lambda a: a.prod(1), None, {}),
  ("max", [(3, 4)], lambda a: a.max(1) + a.max(), lambda a: a.amax(1) + a.amax(), {}),
  ("min", [(3, 4)], lambda a: a.min(0, keepdim=True), lambda a: a.amin(0, keepdim=True), {}),
  ("mean", [(3, 4)], lambda a: a.mean(1), None, {}),
  ("var", [(3, 4)], lambda a: a.var(1), None, {}),
  ("std", [(3, 4)], lambda a: a.std(0, correction=0), lambda a: a.std(0, correction=0), {}),
  ("logsumexp", [(3, 4)], lambda a: a.logsumexp(1), None, {}),
  ("softmax", [(3, 4)], lambda a: a.softmax(1), None, {}),
  ("log_softmax", [(3, 4)], lambda a: a.log_softmax(0), None, {}),
  ("cumsum", [(3, 5)], lambda a: a.cumsum(1), None, {}),
  ("cumprod", [(2, 4)], lambda a: a.cumprod(1), None, {}),
  ("cummax", [(2, 5)], lambda a: a.cummax(1).values, lambda a: _torch().cummax(a, 1).values, {}),
  # movement
  ("reshape", [(3, 4)], lambda a: a.reshape(2, 6) * a.reshape(2, 6).flip(1), None, {}),
  ("permute", [(2, 3, 4)], lambda a: a.permute(2, 0, 1), None, {}),
  ("expand", [(3, 1)], lambda a: a.expand(3, 4), None, {}),
  ("transpose", [(3, 4)], lambda a: a.transpose(0, 1) + a.T, lambda a: a.transpose(0, 1) + a.T, {}),
  ("flip", [(3, 4)], lambda a: a.flip(0), None, {}),
  ("pad", [(3, 4)], lambda a: a.pad((1, 2, 0, 1)), lambda a: _F().pad(a, (1, 2, 0, 1)), {}),
  ("pad_value_negative", [(3, 4)], lambda a: a.pad((1, -1), value=2.0), lambda a: _F().pad(a, (1, -1), value=2.0), {}),
  ("shrink", [(4, 5)], lambda a: a.shrink(((1, 3), None)), lambda a: a[1:3], {}),
  ("cat_stack", [(2, 3), (1, 3)], lambda a, b: a.cat(b).stack(a.cat(b)), lambda a, b: _torch().stack([_torch().cat([a, b])] * 2), {}),
  ("repeat", [(2, 3)], lambda a: a.repeat(2, 1, 2), None, {}),
  ("split_chunk", [(4, 3)], lambda a: a.split(1)[1] * 2 + a.chunk(2)[1][:1], None, {}),
  # indexing
  ("slice", [(4, 5)], lambda a: a[1:, ::2][:, :2] + a[::-1, 1:4:2][:3], lambda a: a[1:, ::2][:, :2] + a.flip(0)[:, 1:4:2][:3], {}),
  ("int_none_ellipsis", [(3, 4, 2)], lambda a: a[1, ..., None, 0], None, {}),
  ("advanced", [(4, 3)], lambda a: a[[0, 2, 2, 3]], None, {}),
  ("advanced_2d", [(4, 3)], lambda a: a[[0, 1, 3], [2, 2, 0]], None, {}),
  ("bool_mask", [(3, 4)], lambda a: a[a > 0], None, {}),
  ("gather", [(2, 4)], lambda a: a.gather(1, _ti(IDX)), lambda a: a.gather(1, _torch().tensor(IDX)), {}),
  ("scatter", [(2, 5), (2, 3)], lambda a, b: a.scatter(1, _ti(SCATTER_IDX), b), lambda a, b: a.scatter(1, _torch().tensor(SCATTER_IDX), b), {}),
  ("scatter_add", [(2, 5), (2, 3)], lambda a, b: a.scatter(1, _ti(SCATTER_IDX), b, reduce="add"),
   lambda a, b: a.scatter_add(1, _torch().tensor(SCATTER_IDX), b), {}),
  # matmul and nn
  ("matmul", [(3, 4), (4, 2)], lambda a, b: a @ b, None, {}),
  ("matmul_batched", [(2, 3, 4), (4, 5)], lambda a, b: a @ b, None, {}),
  ("matmul_vec", [(4,), (4, 3)], lambda a, b: a @ b + (b.T @ a).sum(), None, {}),
  ("linear", [(2, 4), (3, 4), (3,)], lambda x, w, b: x.linear(w, b), lambda x, w, b: _F().linear(x, w, b), {}),
  ("conv2d", [(2, 2, 5, 5), (3, 2, 3, 3), (3,)], lambda x, w, b: x.conv2d(w, b, padding=1), lambda x, w, b: _F().conv2d(x, w, b, padding=1), {}),
  ("conv2d_stride_dilation", [(1, 2, 7, 6), (2, 2, 2, 3)], lambda x, w: x.conv2d(w, stride=2, dilation=2, padding=(1, 0)),
   lambda x, w: _F().conv2d(x, w, stride=2, dilation=2, padding=(1, 0)), {}),
  ("conv2d_groups", [(1, 4, 5, 5), (4, 2, 3, 3)], lambda x, w: x.conv2d(w, stride=(2, 1), groups=2),
   lambda x, w: _F().conv2d(x, w, stride=(2, 1), groups=2), {}),
  ("conv1d", [(2, 2, 6), (3, 2, 3)], lambda x, w: x.conv2d(w, padding=1), lambda x, w: _F().conv1d(x, w, padding=1), {}),
  ("conv_transpose2d", [(1, 2, 3, 3), (2, 3, 3, 3)], lambda x, w: x.conv_transpose2d(w, stride=2, padding=1),
   lambda x, w: _F().conv_transpose2d(x, w, stride=2, padding=1), {}),
  ("max_pool2d", [(1, 2, 5, 5)], lambda x: x.max_pool2d(3, stride=2, padding=1), lambda x: _F().max_pool2d(x, 3, stride=2, padding=1), {}),
  ("avg_pool2d", [(1, 2, 5, 5)], lambda x: x.avg_pool2d(3, stride=2, padding=1, count_include_pad=False),
   lambda x: _F().avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), {}),
  ("layer_norm", [(3, 5), (5,), (5,)], lambda x, w, b: x.layer_norm(5, w, b), lambda x, w, b: _F().layer_norm(x, (5,), w, b), {}),
  ("batch_norm_train", [(4, 3, 2), (3,), (3,)], lambda x, w, b: x.batch_norm(None, None, w, b, training=True),
   lambda x, w, b: _F().batch_norm(x, None, None, w, b, training=True), {}),
  ("batch_norm_eval", [(4, 3), (3,)], lambda x, w: x.batch_norm(Tensor(RUN[0]), Tensor(RUN[1]), w, training=False),
   lambda x, w: _F().batch_norm(x, _torch().tensor(RUN[0]), _torch().tensor(RUN[1]), w, training=False), {}),
  ("batchnorm", [(4, 3, 2), (3,), (3,), (3,), (3,)], lambda x, w, b, m, i: x.batchnorm(w, b, m, i),
   lambda x, w, b, m, i: (x - m.reshape(1, 3, 1)) * i.reshape(1, 3, 1) * w.reshape(1, 3, 1) + b.reshape(1, 3, 1), {}),
  ("cross_entropy", [(3, 4)], lambda x: -x.log_softmax(1).gather(1, _ti(np.array([[1], [3], [0]]))).mean(),
   lambda x: _F().cross_entropy(x, _torch().tensor([1, 3, 0])), {}),
]
IDS = [c[0] for c in CASES]


def _inputs(case, dtype):
  name, shapes, _, _, opts = case
  rng = np.random.default_rng(zlib.crc32(name.encode()))
  data = [rng.uniform(opts.get("lo", -2.0), opts.get("hi", 2.0), s).astype(dtype) for s in shapes]
  return rng, data

def _backward(case, data, rng) -> tuple[list[Tensor], np.ndarray]:
  ts = [Tensor(d, requires_grad=True) for d in data]
  out = case[2](*ts)
  w = rng.standard_normal(out.shape).astype(data[0].dtype)
  (out * Tensor(w)).sum().backward()
  Tensor.realize(*(t.grad for t in ts))
  return ts, w

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vs_torch(case):
  torch = pytest.importorskip("torch")
  rng, data = _inputs(case, np.float32)
  ts, w = _backward(case, data, rng)
  tt = [torch.tensor(d, requires_grad=True) for d in data]
  ((case[3] or case[2])(*tt) * torch.tensor(w)).sum().backward()
  rtol, atol = case[4].get("tol", (1e-4, 1e-5))
  for i, (a, b) in enumerate(zip(ts, tt)):
    assert a.grad.shape == a.shape and a.grad.dtype == a.dtype
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"input {i}")

@pytest.mark.parametrize("case", [c for c in CASES if c[4].get("fd", True)], ids=[c[0] for c in CASES if c[4].get("fd", True)])
def test_vs_finite_differences(case):
  """The gradient's projection on random directions v matches (L(x + hv) - L(x - hv)) / 2h in float64."""
  rng, data = _inputs(case, np.float64)
  ts, w = _backward(case, data, rng)
  h, dirs = 1e-5, [rng.standard_normal(d.shape) for d in data]
  def loss(sign: float) -> Tensor: return (case[2](*(Tensor(d + sign * h * v) for d, v in zip(data, dirs))) * Tensor(w)).sum()
  plus, minus = loss(1.0), loss(-1.0)
  Tensor.realize(plus, minus)
  fd = (plus.item() - minus.item()) / (2 * h)
  analytic = sum(float((t.grad.numpy() * v).sum()) for t, v in zip(ts, dirs))
  assert abs(fd - analytic) <= 1e-6 * (1 + abs(analytic)), (fd, analytic)


# ---- ties: PyTorch's choices ----

def test_maximum_ties_share():
  a, b = Tensor([1.0, 2.0, 3.0], requires_grad=True), Tensor([1.0, 0.0, 3.0], requires_grad=True)
  a.maximum(b).sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [0.5, 1.0, 0.5])
  np.testing.assert_allclose(b.grad.numpy(), [0.5, 0.0, 0.5])

def test_max_min_reduce_ties():
  x = Tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], requires_grad=True)
  x.max(1).sum().backward()  # one axis (torch.max(x, 1)): the first maximum takes it all
  np.testing.assert_allclose(x.grad.numpy(), [[0, 1, 0], [1, 0, 0]])
  x.grad = None
  x.max((1,)).sum().backward()  # a tuple of axes (torch.amax): the maxima share it
  np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5], [1 / 3] * 3], rtol=1e-6)
  y = Tensor([[1.0, 3.0, 1.0], [0.0, 5.0, 0.0]], requires_grad=True)
  (y.min() * 4).backward()  # the two zeros are the minima of the whole tensor: they share it
  np.testing.assert_allclose(y.grad.numpy(), [[0, 0, 0], [2, 0, 2]])

def test_max_ties_match_torch():
  torch = pytest.importorskip("torch")
  d = np.array([[1.0, 4.0, 4.0, 0.0], [2.0, 2.0, 2.0, 2.0], [5.0, 1.0, 5.0, 5.0]], np.float32)
  for ours, theirs in ((lambda x: x.max(1), lambda t: t.max(1).values), (lambda x: x.max((1,)), lambda t: t.amax(1)),
                       (lambda x: x.min(0), lambda t: t.min(0).values), (lambda x: x.max(), lambda t: t.max())):
    x, t = Tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    out = ours(x)
    w = np.arange(1, out.numel() + 1, dtype=np.float32).reshape(out.shape)  # distinct weights: each output's share shows
    (out * Tensor(w)).sum().backward()
    (theirs(t) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)

def test_prod_with_zeros():
  x = Tensor([[2.0, 3.0, 4.0], [2.0, 0.0, 5.0], [0.0, 3.0, 0.0]], requires_grad=True)
  x.prod(1).sum().backward()  # no zero: prod/x; one zero: only it has a slope; two zeros: none
  np.testing.assert_allclose(x.grad.numpy(), [[12, 8, 6], [0, 10, 0], [0, 0, 0]])


# ---- autograd behaviour ----

def test_accumulates_across_backward_calls():
  x = Tensor([1.0, -2.0], requires_grad=True)
  y = (x * x).sum()
  y.backward()
  y.backward()  # the graph is still valid: the second call adds the same again
  np.testing.assert_allclose(x.grad.numpy(), [4.0, -8.0])
  (x * 3).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [7.0, -5.0])
  x.grad = None
  x.sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])

def test_grads_are_lazy():
  x = Tensor([1.0, 2.0], requires_grad=True)
  (x.exp()).sum().backward()
  assert x.grad.uop.op is not Ops.BUFFER and x.grad.requires_grad is False
  np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)

def test_two_equal_constants_are_two_leaves():
  a, b = Tensor(3.0, requires_grad=True), Tensor(3.0, requires_grad=True)
  (a + b).backward()
  assert a.grad.item() == 1.0 and b.grad.item() == 1.0
  c, d = Tensor.ones(2, requires_grad=True), Tensor.ones(2, requires_grad=True)
  (c * d * 2).sum().backward()
  np.testing.assert_allclose(c.grad.numpy(), [2.0, 2.0])
  np.testing.assert_allclose(d.grad.numpy(), [2.0, 2.0])

def test_detach_stops_gradient():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  (x.detach() * x).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0, 3.0])
  assert x.detach().requires_grad is None and (x * 2).requires_grad is True
  with pytest.raises(RuntimeError, match="does not require grad"): (x.detach() * 2).sum().backward()

def test_contiguous_backward():
  x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
  (x.contiguous_backward().T * Tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
  assert any(u.op is Ops.CONTIGUOUS for u in x.grad.uop.toposort())
  np.testing.assert_allclose(x.grad.numpy(), [[1.0, 3.0], [2.0, 4.0]])
  y = Tensor([1.0, 2.0], requires_grad=True)
  (y.contiguous() * 3).sum().backward()
  np.testing.assert_allclose(y.grad.numpy(), [3.0, 3.0])

def test_errors():
  x = Tensor([1.0, 2.0], requires_grad=True)
  with pytest.raises(RuntimeError, match=r"scalar outputs.*\(2,\)"): (x * 2).backward()
  with pytest.raises(RuntimeError, match=r"gradient of shape \(3,\).*\(2,\)"): (x * 2).backward(Tensor([1.0, 1.0, 1.0]))
  with pytest.raises(RuntimeError, match="does not require grad"): Tensor.ones(2).sum().backward()  # constants: no leaf
  with pytest.raises(RuntimeError, match="does not require grad"): (x > 1).sum().backward()  # a bool/int value has no gradient
  with pytest.raises(RuntimeError, match="floating point"): Tensor([1, 2], requires_grad=True)
  with pytest.raises(RuntimeError, match="floating point"): Tensor.arange(3, requires_grad=True)
  with pytest.raises(RuntimeError, match="floating point"): Tensor([True]).requires_grad_()
  assert Tensor([1, 2], requires_grad=False).requires_grad is False

def test_explicit_gradient_and_non_scalar():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  (x * x).backward(Tensor([1.0, 0.0, -1.0]))
  np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, -6.0])
  y = Tensor([[2.0]], requires_grad=True)
  (y * 5).backward()  # one element: implicit 1, whatever its shape
  np.testing.assert_allclose(y.grad.numpy(), [[5.0]])

def test_int_paths_carry_no_gradient():
  x = Tensor([1.5, -2.5, 3.0], requires_grad=True)
  (x.int().float() * x + (x > 0).where(x, 0)).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [1.0 + 1, -2.0, 3.0 + 1])

def test_unreached_leaf_gets_zeros_and_unused_leaf_nothing():
  x, z = Tensor([1.7, -2.2], requires_grad=True), Tensor([1.0], requires_grad=True)
  x.trunc().sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0])
  assert z.grad is None

def test_backward_after_realize_keeps_graph():
  x = Tensor([1.0, 2.0], requires_grad=True)
  loss = (x * x * x).sum()
  assert loss.item() == 9.0
  loss.backward()
  np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])

def test_backward_through_values_read_on_the_way():
  # as PyTorch: reading an intermediate (y.numpy(), print) realizes it, and what is built from it afterwards still
  # backpropagates to the leaves, through every read value in between; an assign to a read value cuts its old graph
  x, w = Tensor([1.0, 2.0, 3.0], requires_grad=True), Tensor([0.5, -1.0, 2.0], requires_grad=True)
  y = x * x
  np.testing.assert_allclose(y.numpy(), [1.0, 4.0, 9.0])
  z = y * w
  z.numpy()
  (z.sum() + y.sum()).backward()
  np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([1.0, 2.0, 3.0]) * (np.array([0.5, -1.0, 2.0]) + 1))
  np.testing.assert_allclose(w.grad.numpy(), [1.0, 4.0, 9.0])
  y.assign(Tensor([1.0, 1.0, 1.0])).realize()
  with pytest.raises(RuntimeError, match="does not require grad"): y.sum().backward()

def test_gradients_read_realized_values_from_their_buffers():
  # a value realized on the way (read, or computed early as BatchNorm's input is) is differentiated through its graph,
  # but where the gradient needs the value itself it reads the buffer: h = x @ w and then g = 3 * h are each realized,
  # so the gradient of sum(g^2) is one matmul, x^T @ 6g, reading g's buffer (whose graph reads h's), with no second
  # matmul recomputing h
  rng = np.random.default_rng(3)
  xn, wn = rng.standard_normal((4, 5), dtype=np.float32), rng.standard_normal((5, 3), dtype=np.float32)
  x, w = Tensor(xn), Tensor(wn, requires_grad=True)
  h = (x @ w).realize()
  g = (h * 3).realize()
  (grad,) = (g * g).sum().gradient(w)
  assert sum(u.op is Ops.REDUCE and u.src[0].op is Ops.MUL for u in grad.uop.toposort()) == 1 and g.uop in grad.uop.toposort()
  np.testing.assert_allclose(grad.numpy(), xn.T @ (18 * (xn @ wn)), rtol=1e-5, atol=1e-5)

def test_intermediate_requires_grad():
  x = Tensor([1.0, 2.0], requires_grad=True)
  y = x * 3
  y.requires_grad = True  # stays in its graph (it depends on x): it gets its own gradient, and x still gets one through it
  (y * y).sum().backward()
  np.testing.assert_allclose(y.grad.numpy(), [6.0, 12.0])
  np.testing.assert_allclose(x.grad.numpy(), [18.0, 36.0])

def test_gradient_method():
  x, y = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0])
  gx, gy = (x * y).sum().gradient(x, y)  # any tensor in the graph can be a target; nothing accumulates
  np.testing.assert_allclose(gx.numpy(), [3.0, 4.0])
  np.testing.assert_allclose(gy.numpy(), [1.0, 2.0])
  assert x.grad is None
  with pytest.raises(RuntimeError, match="not used"): (x * 2).sum().gradient(x, Tensor([5.0]))
  (zero,) = (x * 2).sum().gradient(Tensor([5.0]), materialize_grads=True)
  np.testing.assert_allclose(zero.numpy(), [0.0])

def test_deep_chain():
  x = Tensor([1.0, 2.0], requires_grad=True)
  y = x
  for _ in range(1000): y = y * 1.001 + 0.001
  y.sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [1.001 ** 1000] * 2, rtol=1e-4)

def test_copy_between_devices():
  x = Tensor([1.0, 2.0], requires_grad=True)
  other = "PYTHON:1" if Device.canonicalize(x.device) != Device.canonicalize("PYTHON:1") else "PYTHON:0"
  y = x.to(other) * Tensor([3.0, 4.0], device=other)
  y.sum().backward()
  assert x.grad.device == x.device
  np.testing.assert_allclose(x.grad.numpy(), [3.0, 4.0])

def test_float16_leaf():
  x = Tensor(np.array([0.5, 1.5], np.float16), requires_grad=True)
  (x * x).expand(3, 2).sum().backward()
  assert x.grad.dtype == dtypes.float16
  np.testing.assert_allclose(x.grad.numpy(), [3.0, 9.0])


# ---- UOp level ----

def _leaf(values) -> Tensor: return Tensor(np.array(values, np.float32))

def test_compute_gradient_walks_only_paths_to_targets():
  a, b = _leaf([1.0, 2.0]).uop, _leaf([3.0, 4.0]).uop
  root = (a * b + UOp(Ops.SIN, (b,))).reduce(Ops.ADD, (0,))
  one = UOp.const(1.0, dtypes.float32).reshape((1,))
  grads = compute_gradient(root, one, {a})
  assert set(grads) == {a}
  assert not any(u.op is Ops.SIN for u in grads[a].toposort())  # b's branch was never differentiated
  np.testing.assert_allclose(Tensor(grads[a]).numpy(), [3.0, 4.0])
  with pytest.raises(ValueError, match="shape"): compute_gradient(root, UOp.const(1.0, dtypes.float32), {a})

def test_broadcast_scalar_const_source():
  a = _leaf([1.0, 2.0, 3.0]).uop
  root = a * UOp.const(-2.0, dtypes.float32)  # an implicit () -> (3,) broadcast, as UOp's operators make
  g = compute_gradient(root, UOp.const(1.0, dtypes.float32).reshape((1,)).expand((3,)), {a})[a]
  np.testing.assert_allclose(Tensor(g).numpy(), [-2.0] * 3)

def test_rule_table_covers_tensor_ops():
  none = {Ops.CMPLT, Ops.CMPNE, Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.THREEFRY, Ops.BITCAST}
  diff = {Ops.ADD, Ops.MUL, Ops.MAX, Ops.RECIP, Ops.TRUNC, Ops.CAST, Ops.WHERE, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.POW,
          Ops.NEG, Ops.SUB, Ops.DIV, Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.FLIP, Ops.PAD, Ops.SHRINK, Ops.REDUCE,
          Ops.CONTIGUOUS, Ops.CONTIGUOUSBACKWARD, Ops.DETACH, Ops.COPY, Ops.GETTUPLE}
  assert none | diff <= set(pm_gradient.by_op)

def test_decomposed_ops_directly():
  a, b = _leaf([1.5, 2.0]).uop, _leaf([0.5, 4.0]).uop
  one = UOp.const(1.0, dtypes.float32).reshape((1,)).expand((2,))
  for root, want_a, want_b in [(UOp(Ops.SUB, (a, b)), [1, 1], [-1, -1]), (UOp(Ops.NEG, (a,)), [-1, -1], None),
                               (UOp(Ops.DIV, (a, b)), [2, 0.25], [-6, -0.125]), (UOp(Ops.MULACC, (a, b, a)), [1.5, 5], [1.5, 2])]:
    grads = compute_gradient(root, one, {a, b})
    np.testing.assert_allclose(Tensor(grads[a]).numpy(), want_a)
    if want_b is not None: np.testing.assert_allclose(Tensor(grads[b]).numpy(), want_b)

def _function(body: list, args: list[UOp]) -> UOp:
  """FUNCTION(TUPLE(body...), args...) with the body written over PARAMs made like callify's."""
  params = [param_for(a, k) for k, a in enumerate(args)]
  return UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, tuple(f(*params) for f in body)), *args))

def test_through_function():
  x, y = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 5.0], requires_grad=True)
  fn = _function([lambda p, q: p * q + p, lambda p, q: q * q], [x.uop, y.uop])
  out0, out1 = (Tensor._from_uop(UOp(Ops.GETTUPLE, (fn,), i)) for i in (0, 1))
  one = UOp.const(1.0, dtypes.float32).reshape((1,)).expand((2,))
  grads = compute_gradient(UOp(Ops.ADD, (out0.uop, out1.uop)), one, {x.uop, y.uop})  # two outputs of one call sum up
  np.testing.assert_allclose(Tensor(grads[x.uop]).numpy(), [4.0, 6.0])
  np.testing.assert_allclose(Tensor(grads[y.uop]).numpy(), [1.0 + 6.0, 2.0 + 10.0])
  same = _function([lambda p, q: p * q], [x.uop, x.uop])  # one argument passed twice: d(x*x) = 2x, counted once
  g = compute_gradient(UOp(Ops.GETTUPLE, (same,), 0), one, {x.uop})[x.uop]
  np.testing.assert_allclose(Tensor(g).numpy(), [2.0, 4.0])
  assert math.isclose(float(Tensor(g).sum().item()), 6.0)

def test_through_function_decorator():
  function = pytest.importorskip("tinyspec.function").function
  w = Tensor([2.0, 3.0], requires_grad=True)
  @function
  def f(a, b): return a * w + b, (a * a).sum()  # two outputs; w is captured (it becomes an argument of the call)
  x, y = Tensor([1.0, 4.0], requires_grad=True), Tensor([0.5, 0.5], requires_grad=True)
  o1, o2 = f(x, y)
  (o1.sum() + o2).backward()
  np.testing.assert_allclose(x.grad.numpy(), [4.0, 11.0])
  np.testing.assert_allclose(y.grad.numpy(), [1.0, 1.0])
  np.testing.assert_allclose(w.grad.numpy(), [1.0, 4.0])

def test_multi_device():
  devices = ("PYTHON:0", "PYTHON:1")
  x = Tensor([[0.0], [1.0], [2.0], [3.0]], requires_grad=True)
  (x.to(devices) * x.to(devices) * 3).sum().backward()  # replicated: COPY, REPLICATED; each copy's share sums back
  np.testing.assert_allclose(x.grad.numpy().ravel(), [0.0, 6.0, 12.0, 18.0])
  w = Tensor([[2.0], [2.0], [1.0], [1.0]], requires_grad=True)
  x.grad = None
  (x.shard(devices, axis=0) * w.to(devices)).sum().backward()  # sharded on axis 0
  np.testing.assert_allclose(x.grad.numpy().ravel(), [2.0, 2.0, 1.0, 1.0])
  np.testing.assert_allclose(w.grad.numpy().ravel(), [0.0, 1.0, 2.0, 3.0])
  assert x.grad.device == x.device and w.grad.device == w.device
