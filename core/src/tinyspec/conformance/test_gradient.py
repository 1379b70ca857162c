"""Gradients computed on the device against central finite differences of the same function written in numpy (in float64,
so the reference is accurate): representative ops of every family, then backward's accumulation."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data


def np_softmax(x, axis):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

def np_conv(x, w):  # stride 1, no padding, one group
  n, _, h, wd = x.shape
  o, _, kh, kw = w.shape
  return sum(np.einsum("nchw,oc->nohw", x[:, :, i:i + h - kh + 1, j:j + wd - kw + 1], w[:, :, i, j]) for i in range(kh) for j in range(kw))

AWAY = {"lo": 0.2, "hi": 2}  # positive inputs, away from kinks and poles

# name: (input shapes, input ranges, the function on Tensors, the same in numpy)
CASES = {
  "mul_add_broadcast": (((3, 4), (4,)), ({}, {}), lambda a, b: a * b + b, lambda a, b: a * b + b),
  "div": (((5,), (5,)), ({}, AWAY), lambda a, b: a / b, lambda a, b: a / b),
  "exp_log": (((6,),), (AWAY,), lambda a: a.exp() + a.log(), lambda a: np.exp(a) + np.log(a)),
  "sin_sqrt": (((6,),), (AWAY,), lambda a: a.sin() * a.sqrt(), lambda a: np.sin(a) * np.sqrt(a)),
  "pow": (((5,), (5,)), (AWAY, {}), lambda a, b: a ** b, lambda a, b: a ** b),
  "sigmoid_tanh": (((6,),), ({},), lambda a: a.sigmoid() + a.tanh(), lambda a: 1 / (1 + np.exp(-a)) + np.tanh(a)),
  "relu_where": (((8,),), ({},), lambda a: a.relu() + (a > 0.5).where(a * 3, a), lambda a: np.maximum(a, 0) + np.where(a > 0.5, a * 3, a)),
  "sum_mean_axis": (((3, 4),), ({},), lambda a: a.sum(0) * a.mean(1).sum(), lambda a: a.sum(0) * a.mean(1).sum()),
  "max_reduce": (((3, 5),), ({},), lambda a: a.max(1), lambda a: a.max(1)),
  "softmax": (((2, 5),), ({},), lambda a: a.softmax(1), lambda a: np_softmax(a, 1)),
  "log_softmax": (((2, 5),), ({},), lambda a: a.log_softmax(0), lambda a: np.log(np_softmax(a, 0))),
  "matmul": (((3, 4), (4, 2)), ({}, {}), lambda a, b: a @ b, lambda a, b: a @ b),
  "conv2d": (((1, 2, 4, 4), (3, 2, 2, 2)), ({}, {}), lambda x, w: x.conv2d(w), np_conv),
  "movement": (((2, 3),), ({},), lambda a: a.permute(1, 0).flip(0).pad(((1, 0), (0, 2))).shrink(((0, 3), (1, 4))).reshape(9) * 2,
               lambda a: np.pad(a.T[::-1], ((1, 0), (0, 2)))[0:3, 1:4].reshape(9) * 2),
  "expand": (((3, 1),), ({},), lambda a: a.expand(3, 4) * Tensor.arange(4.0, device=a.device), lambda a: np.broadcast_to(a, (3, 4)) * np.arange(4.0)),
  "indexing_gather": (((4, 3),), ({},), lambda a: a[[2, 0, 2]] + a.gather(1, Tensor([[0], [2], [1], [1]], device=a.device)).sum(),
                      lambda a: a[[2, 0, 2]] + np.take_along_axis(a, np.array([[0], [2], [1], [1]]), 1).sum()),
  "cumsum": (((6,),), ({},), lambda a: a.cumsum(0) * a, lambda a: np.cumsum(a) * a),
  "layernorm": (((2, 5),), ({},), lambda a: a.layernorm(), lambda a: (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)),
  "max_pool": (((1, 1, 4, 4),), ({},), lambda a: a.max_pool2d(2), lambda a: a.reshape(1, 1, 2, 2, 2, 2).max((3, 5))),
}

def finite_difference(f, xs: list[np.ndarray], i: int, eps: float = 1e-6) -> np.ndarray:
  x, g = xs[i], np.zeros_like(xs[i])
  for idx in np.ndindex(*x.shape):
    old = x[idx]
    x[idx] = old + eps; hi = f(*xs)
    x[idx] = old - eps; lo = f(*xs)
    x[idx], g[idx] = old, (hi - lo) / (2 * eps)
  return g

@pytest.mark.parametrize("case", CASES)
def test_gradient_matches_finite_differences(dev, case):
  shapes, ranges, f, ref = CASES[case]
  xs = [data(dtypes.float32, s, seed=k + 1, **r) for k, (s, r) in enumerate(zip(shapes, ranges))]
  out_shape = np.shape(ref(*xs))
  w = data(dtypes.float32, out_shape, seed=99)  # a weighted sum, so every output's gradient counts differently
  ts = [Tensor(x, device=dev, requires_grad=True) for x in xs]
  (f(*ts) * Tensor(w, device=dev)).sum().backward()
  x64 = [x.astype(np.float64) for x in xs]
  def loss(*args): return float((np.asarray(ref(*args)) * w).sum())
  for k, t in enumerate(ts):
    assert t.grad is not None and t.grad.shape == t.shape and t.grad.dtype == dtypes.float32
    check(t.grad, finite_difference(loss, x64, k).astype(np.float32), rtol=2e-3, atol=2e-4)

def test_backward_accumulates_and_gradient_does_not(dev):
  x = Tensor(np.array([1.0, 2.0, 3.0], np.float32), device=dev, requires_grad=True)
  (x * x).sum().backward()
  check(x.grad, np.array([2.0, 4.0, 6.0], np.float32))
  (x * 3).sum().backward()
  check(x.grad, np.array([5.0, 7.0, 9.0], np.float32))
  g, = (x.exp()).sum().gradient(x)
  check(g, np.exp(np.array([1.0, 2.0, 3.0])).astype(np.float32), rtol=1e-5)
  check(x.grad, np.array([5.0, 7.0, 9.0], np.float32))

def test_detach_stops_gradient(dev):
  x = Tensor(np.array([1.0, -2.0], np.float32), device=dev, requires_grad=True)
  (x * x.detach() * 2).sum().backward()
  check(x.grad, np.array([2.0, -4.0], np.float32))

# issue 12: both backward passes below sum over an axis their kernel's loops do not all depend on; the sums came out doubled

def test_batched_matmul_gradient_wrt_broadcast_batch(dev):
  a, b = data(dtypes.float32, (4, 3), seed=1), data(dtypes.float32, (1, 3, 3, 5), seed=2)
  ta, tb = Tensor(a, device=dev, requires_grad=True), Tensor(b, device=dev, requires_grad=True)
  (ta @ tb).sum().backward()  # out[0, j, i, l] = sum_k a[i, k] * b[0, j, k, l]
  check(tb.grad, np.broadcast_to(a.sum(0)[None, None, :, None], b.shape).astype(np.float32), rtol=1e-5, atol=1e-5)
  check(ta.grad, np.broadcast_to(b.sum((0, 1, 3)), a.shape).astype(np.float32), rtol=1e-5, atol=1e-5)

def test_gradient_of_tensor_indexed_columns(dev):
  y, idx = data(dtypes.float32, (2, 3, 4), seed=3), np.array([2, 0, 2])
  t = Tensor(y, device=dev, requires_grad=True)
  t[:, Tensor(idx, device=dev)].sum().backward()
  want = np.zeros_like(y)
  np.add.at(want, (slice(None), idx), 1.0)  # a column picked twice gets twice the gradient
  check(t.grad, want)
