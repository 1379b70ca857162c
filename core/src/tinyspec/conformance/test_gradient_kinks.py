"""Gradients where an op has a kink, a tie, a singular point or an overflowing exp (issue 12), with PyTorch's values
written out: which side's slope or what share each op gives there, and no nan from a branch that is not taken. Each
expected value says where it comes from. (core/tests/test_gradient_torch.py checks the same cases against PyTorch.)"""
import math

import numpy as np
import pytest

from tinyspec import Tensor
from tinyspec.conformance.support import check

NAN, INF = math.nan, math.inf


def grad(f, *inputs, dev: str) -> list[np.ndarray]:
  """The gradients of f(*inputs).sum() w.r.t. each input (float32 leaves on dev)."""
  ts = [Tensor(np.array(v, np.float32), device=dev, requires_grad=True) for v in inputs]
  f(*ts).sum().backward()
  return [t.grad.numpy() for t in ts]

def exactly(got: np.ndarray, want) -> None:
  """Equal values, nan where want has nan; -0.0 equals 0.0."""
  np.testing.assert_array_equal(got, np.array(want, np.float32))


# kinks: PyTorch's abs' is sign(x), 0 at 0; relu's is 1 only where the output is > 0; leaky_relu and elu take the
# negative side's slope at 0; clamp passes the gradient at its bounds, hardtanh does not
KINKS = {
  "abs": (lambda x: x.abs(), [0.0, -0.0, 2.0, -2.0], [0, 0, 1, -1]),
  "relu": (lambda x: x.relu(), [0.0, -0.0, 2.0, -2.0], [0, 0, 1, 0]),
  "leaky_relu": (lambda x: x.leaky_relu(0.25), [0.0, 2.0, -2.0], [0.25, 1, 0.25]),
  "elu": (lambda x: x.elu(2.0), [0.0, 3.0], [2, 1]),  # alpha * e^0 at 0
  "clamp": (lambda x: x.clamp(-1.0, 1.0), [-1.0, 1.0, 0.5, 2.0, -2.0], [1, 1, 1, 0, 0]),
  "hardtanh": (lambda x: x.hardtanh(), [-1.0, 1.0, 0.5, 2.0, -2.0], [0, 0, 1, 0, 0]),
}

@pytest.mark.parametrize("name", KINKS)
def test_kinks(dev, name):
  f, x, want = KINKS[name]
  exactly(grad(f, x, dev=dev)[0], want)

def test_maximum_minimum_ties_split(dev):
  # torch.maximum / torch.minimum: a tie gives each side half
  ga, gb = grad(lambda a, b: a.maximum(b) + a.minimum(b) * 2, [1.0, 3.0, 2.0], [1.0, 0.0, 2.0], dev=dev)
  exactly(ga, [1.5, 1, 1.5])
  exactly(gb, [1.5, 2, 1.5])

def test_max_ties(dev):
  x = [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]
  # one axis (torch.max(x, 1)): the first maximum, the one argmax returns, takes it all
  exactly(grad(lambda t: t.max(1), x, dev=dev)[0], [[0, 1, 0], [1, 0, 0]])
  exactly(grad(lambda t: t.min(0), [[1.0, 0.0], [1.0, 0.0]], dev=dev)[0], [[1, 1], [0, 0]])
  # all axes (x.max()) or a tuple (torch.amax): the maxima share it
  exactly(grad(lambda t: t.max() * 6, x, dev=dev)[0], [[0, 3, 3], [0, 0, 0]])
  exactly(grad(lambda t: t.max((1,)) * 6, x, dev=dev)[0], [[0, 3, 3], [2, 2, 2]])

def test_cummax_and_max_pool_ties(dev):
  # torch.cummax's indices name the last maximum so far: x[0], x[0], x[2], x[2], x[4]
  exactly(grad(lambda t: t.cummax(0).values, [3.0, 1.0, 3.0, 2.0, 3.0], dev=dev)[0], [2, 0, 2, 0, 1])
  # F.max_pool2d's indices name each window's first maximum in row-major order
  exactly(grad(lambda t: t.max_pool2d(2, stride=1), [[[[0.0, 2.0, 2.0], [2.0, 1.0, 2.0], [0.0, 0.0, 0.0]]]], dev=dev)[0],
          [[[[0, 2, 0], [1, 0, 1], [0, 0, 0]]]])

def test_exp_overflow_passes_no_nan(dev):
  # sigmoid(-350) = 1 / (1 + e^350) is 0 with slope 0; tanh likewise; softplus(350) = 350 with slope 1 (PyTorch's values:
  # computed as 0 * e^350, each was nan)
  exactly(grad(lambda x: x.sigmoid(), [-350.0, 350.0, 0.0], dev=dev)[0], [0, 0, 0.25])
  exactly(grad(lambda x: x.tanh(), [-300.0, 300.0, 0.0], dev=dev)[0], [0, 0, 1])
  exactly(grad(lambda x: x.softplus(), [350.0, -350.0, 0.0], dev=dev)[0], [1, 0, 0.5])
  exactly(grad(lambda x: x.silu() + x.gelu() + x.elu(), [-350.0, 350.0], dev=dev)[0], [0, 3])
  exactly(grad(lambda x: x.exp(), [-INF, -200.0, INF], dev=dev)[0], [0, 0, INF])  # exp' = exp, inf past its range

def test_pow_special_points(dev):
  # x ** 0 = 1 still depends on x: gradient 0 (no "does not require grad")
  exactly(grad(lambda x: x ** 0, [0.0, 2.0, -1.0, INF], dev=dev)[0], [0, 0, 0, 0])
  # d/dx 0.7 ** x = 0.7 ** x ln 0.7: ln 0.7 at x = 0
  check(grad(lambda x: 0.7 ** x, [0.0], dev=dev)[0], np.array([math.log(0.7)], np.float32))
  # a negative base to a non-integral power is nan, and so are both slopes (PyTorch: b a^(b-1) and a^b ln a)
  ga, gb = grad(lambda a, b: a ** b, [-2.0], [0.5], dev=dev)
  exactly(ga, [NAN])
  exactly(gb, [NAN])
  # d/dy inf ** y at y = 0 is inf ** 0 * ln inf = inf; d/dx 0 ** b is b 0 ** (b - 1): 1 for b = 1, inf for b = 0.5;
  # d/db 0 ** b is 0 for b >= 0 (PyTorch's mask); d/dx 1 ** b is b
  ga, gb = grad(lambda a, b: a ** b, [INF, 0.0, 0.0, 1.0], [0.0, 1.0, 0.5, 2.5], dev=dev)
  exactly(ga, [0, 1, INF, 2.5])
  exactly(gb, [INF, 0, 0, 0])
  # negative integral powers at 0: -k 0 ** (-k - 1) = -inf (1 / x ** k would give inf * 0 = nan)
  exactly(grad(lambda x: x ** -2, [0.0], dev=dev)[0], [-INF])

def test_singular_points(dev):
  # sqrt' = 1 / (2 sqrt x) and log' = 1 / x are inf at 0; std has no slope where the variance is 0 (PyTorch masks it)
  exactly(grad(lambda x: x.sqrt(), [0.0, 4.0], dev=dev)[0], [INF, 0.25])
  exactly(grad(lambda x: x.log(), [0.0, 0.5], dev=dev)[0], [INF, 2])
  exactly(grad(lambda x: x.std(1), [[3.0, 3.0, 3.0]], dev=dev)[0], [[0, 0, 0]])

def test_softmax_sum_gradient_is_zero(dev):
  # softmax sums to 1, so the gradient of its sum is 0: PyTorch gives exactly 0 for these inputs, and so does this (the
  # max it subtracts takes no gradient, and 1 / sum(e^x) is rounded once)
  for x in ([1.0, 2.0, 3.0], [0.3, -1.2, 2.5, 0.1], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]):
    exactly(grad(lambda t: t.softmax(0), x, dev=dev)[0], np.zeros(len(x)))
  # log_softmax and logsumexp at extremes: no nan where exp under- or overflows
  exactly(grad(lambda t: t.log_softmax(0) * Tensor([1.0, 0.0, 0.0], device=dev), [1000.0, 0.0, -1000.0], dev=dev)[0], [0, 0, 0])
  exactly(grad(lambda t: t.logsumexp(0), [1000.0, 1000.0, -1000.0], dev=dev)[0], [0.5, 0.5, 0])

def test_unset_leaf_gets_a_gradient(dev):
  # requires_grad left None is "unset": with no leaf marked True in the graph, backward fills the unset leaves' .grad (tinygrad)
  x = Tensor.randn(4, device=dev)
  (x * x).sum().backward()
  check(x.grad, 2 * x.numpy(), rtol=1e-6)
