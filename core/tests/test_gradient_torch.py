"""Forward values and gradients against PyTorch where the ops are hardest to get right (issue 12): the kinks and ties (which
side's slope, or what share, each op gives there), the singular points (sqrt and log at 0, pow at 0, 1 and inf and with
negative bases), the extreme inputs where an exp overflows in a branch that is not even taken, and the reductions' ties;
then a sweep of ordinary values through every elementwise op and activation.

Each case computes sum(f(inputs) * w) in both libraries and compares f's values and every input's gradient: nan where
PyTorch has nan, inf where it has inf. The two deliberate differences have tests of their own: d/dy of a negative base to
an integral power (nan in PyTorch, a number here) and torch.amax's gradient over a row whose maximum is nan."""
import math

import numpy as np
import pytest
from tinyspec import Tensor

torch = pytest.importorskip("torch")
F = torch.nn.functional
NAN, INF = math.nan, math.inf


def _compare(ours, theirs, *inputs, weights=None, rtol=1e-5, atol=1e-6):
  """f's values and the gradients of sum(f * weights) (weights 1 when None) agree; nan and inf where PyTorch has them."""
  data = [np.asarray(v, np.float32) for v in inputs]
  ts, tt = [Tensor(d, requires_grad=True) for d in data], [torch.tensor(d, requires_grad=True) for d in data]
  out, ref = ours(*ts), theirs(*tt)
  w = np.ones(ref.shape, np.float32) if weights is None else np.asarray(weights, np.float32)
  (out * Tensor(w)).sum().backward()
  (ref * torch.tensor(w)).sum().backward()
  np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol, err_msg="forward")
  for i, (a, b) in enumerate(zip(ts, tt)):
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")


# ---- kinks, ties and singular points: (id, ours, PyTorch's, inputs) ----

POINTS = [
  ("abs", lambda x: x.abs(), torch.abs, [0.0, -0.0, 1.5, -1.5, INF, -INF]),
  ("relu", lambda x: x.relu(), torch.relu, [0.0, -0.0, 2.0, -2.0, INF, -INF, NAN]),
  ("leaky_relu", lambda x: x.leaky_relu(0.1), lambda x: F.leaky_relu(x, 0.1), [0.0, 2.0, -2.0, NAN]),
  ("elu", lambda x: x.elu(1.5), lambda x: F.elu(x, 1.5), [0.0, -1.0, 1.0, 100.0, -100.0, NAN]),
  ("hardtanh", lambda x: x.hardtanh(), F.hardtanh, [-1.0, 1.0, 0.0, 2.0, -2.0, NAN]),
  ("clamp_scalar_bounds", lambda x: x.clamp(-1, 1), lambda x: x.clamp(-1, 1), [-1.0, 1.0, 0.0, 2.0, -2.0]),
  ("clamp_tensor_bounds", lambda x, lo, hi: x.clamp(lo, hi), lambda x, lo, hi: x.clamp(lo, hi),
   [-1.0, 1.0, 0.0, 2.0, -2.0, 1.5], [-1.0, -1.0, -1.0, -1.0, -1.0, 2.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
  ("maximum", lambda a, b: a.maximum(b), torch.maximum, [1.0, 2.0, 3.0, NAN, 0.0], [1.0, 0.0, 3.0, 1.0, -0.0]),
  ("minimum", lambda a, b: a.minimum(b), torch.minimum, [1.0, 2.0, 3.0, NAN, 0.0], [1.0, 0.0, 3.0, 1.0, -0.0]),
  ("sqrt", lambda x: x.sqrt(), torch.sqrt, [0.0, 4.0, -1.0, INF]),
  ("rsqrt", lambda x: x.rsqrt(), torch.rsqrt, [0.0, 4.0, -1.0]),
  ("log", lambda x: x.log(), torch.log, [0.0, 1.0, -1.0, INF]),
  ("log2", lambda x: x.log2(), torch.log2, [0.0, 1.0, -1.0]),
  ("reciprocal", lambda x: x.reciprocal(), torch.reciprocal, [0.0, -0.0, 2.0, INF]),
  ("exp", lambda x: x.exp(), torch.exp, [1000.0, 100.0, 89.0, 88.0, -88.0, -103.0, -200.0, -INF, INF]),
  ("sigmoid", lambda x: x.sigmoid(), torch.sigmoid, [-350.0, -100.0, -88.0, 0.0, 20.0, 350.0, INF, -INF, NAN]),
  ("tanh", lambda x: x.tanh(), torch.tanh, [-300.0, -10.0, 0.0, 10.0, 300.0, INF, -INF, NAN]),
  ("softplus", lambda x: x.softplus(), F.softplus, [350.0, 20.0, 20.5, 19.9, 0.0, -20.0, -100.0, -350.0, INF, -INF]),
  ("softplus_beta", lambda x: x.softplus(2.0, 5.0), lambda x: F.softplus(x, 2.0, 5.0), [2.5, 2.4, 0.0, -3.0, 1000.0, -1000.0]),
  ("silu", lambda x: x.silu(), F.silu, [-350.0, -100.0, 0.0, 350.0]),
  ("gelu", lambda x: x.gelu(approximate="none"), F.gelu, [-350.0, -10.0, 0.0, 350.0]),
  ("gelu_tanh", lambda x: x.gelu(approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), [-350.0, -10.0, 0.0, 350.0]),
  ("where_dead_branch_nan", lambda x: (x > 0).where(x.log(), 0.0), lambda x: torch.where(x > 0, x.log(), 0.0), [0.0, 1.0]),
  ("step_functions", lambda x: x.sign() + x.trunc() + x.floor() + x.ceil() + x.round(),
   lambda x: x.sign() + x.trunc() + x.floor() + x.ceil() + x.round(), [0.0, 1.0, -2.5, 0.5]),
  # pow: x ** 0 keeps x (gradient 0), 0 ** b has the slope b 0 ** (b - 1), a negative base a non-integral power is nan
  ("x_pow_0", lambda x: x ** 0, lambda x: x ** 0, [0.0, 2.0, -1.0, INF, -INF, NAN]),
  ("x_pow_2", lambda x: x ** 2, lambda x: x ** 2, [0.0, -0.0, -3.0]),
  ("x_pow_half", lambda x: x ** 0.5, lambda x: x ** 0.5, [0.0, 4.0, -4.0]),
  ("x_pow_minus_1", lambda x: x ** -1, lambda x: x ** -1, [0.0, 2.0]),
  ("x_pow_1.5", lambda x: x ** 1.5, lambda x: x ** 1.5, [-1.0, 0.0, 1.0]),
  ("scalar_pow_x", lambda x: 0.7 ** x, lambda x: 0.7 ** x, [0.0, 1.0, -INF, INF]),
  ("two_pow_x", lambda x: 2 ** x, lambda x: 2 ** x, [-INF, INF, 0.0]),
  ("zero_pow_x", lambda x: 0.0 ** x, lambda x: 0.0 ** x, [0.0, 1.0, -1.0, 0.5]),
  ("x_pow_y", lambda a, b: a ** b, lambda a, b: a ** b,
   [-2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, INF, INF, INF, INF, NAN, 2.0, 3.0, 0.5, -0.0],
   [0.5, 0.0, 1.0, 2.0, -1.0, 0.5, NAN, 2.0, INF, -INF, 0.0, 1.0, -1.0, 2.0, 0.0, NAN, 2.5, -1.5, 3.0]),
  ("x_pow_negative_ints", lambda x: x ** -2 + x ** -3 + x ** -4, lambda x: x ** -2 + x ** -3 + x ** -4, [0.0, 1e10, -2.0, INF]),
]

@pytest.mark.parametrize("case", POINTS, ids=[c[0] for c in POINTS])
def test_points(case):
  _compare(case[1], case[2], *case[3:])

def test_negative_base_integral_power():
  """Values and both slopes are PyTorch's, for a tensor base and for a scalar one: d/db of a^b is a^b ln a, nan for a
  negative base even where a^b is a number (an integral b). Not checked here, and not PyTorch's: at b = +-inf the slope
  in b is POW's, inf or 0, where PyTorch's is nan."""
  a, b = np.array([-2.0, -2.0, -0.5, -INF, 3.0, 0.0], np.float32), np.array([2.0, 3.0, -1.0, 0.0, 2.5, 2.0], np.float32)
  _compare(lambda x, y: x ** y, lambda x, y: x ** y, a, b)
  _compare(lambda y: (-2.0) ** y, lambda y: (-2.0) ** y, b)
  _compare(lambda y: 2.0 ** y, lambda y: 2.0 ** y, b)


# ---- reductions: ties, nans and extremes ----

TIES = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [5.0, NAN, 1.0, NAN]], np.float32)
REDUCTIONS = [
  # over one axis (torch.max(x, dim)) the first maximum (or nan) takes it all; over all axes or a tuple the maxima share it
  ("max_dim", lambda x: x.max(1), lambda x: x.max(1).values, TIES),
  ("min_dim", lambda x: x.min(0, keepdim=True), lambda x: x.min(0, keepdim=True).values, TIES),
  ("amax_tuple", lambda x: x.max((1,)), lambda x: x.amax(1), TIES[:2]),
  ("max_all", lambda x: x.max(), lambda x: x.max(), TIES[:2]),
  ("max_all_nan", lambda x: x.max(), lambda x: x.max(), TIES),
  ("min_all", lambda x: x.min(), lambda x: x.min(), [[1.0, 0.0, 3.0], [0.0, 0.0, 1.0]]),
  # cummax: the last maximum so far (PyTorch's indices), a nan from where it appears
  ("cummax", lambda x: x.cummax(0).values, lambda x: torch.cummax(x, 0).values, [3.0, 1.0, 3.0, 2.0, 3.0, 4.0, 4.0]),
  ("cummax_nan", lambda x: x.cummax(0).values, lambda x: torch.cummax(x, 0).values, [1.0, NAN, 3.0]),
  ("cummax_two_stage", lambda x: x.cummax(0).values, lambda x: torch.cummax(x, 0).values, np.repeat(np.arange(300.0), 2)[::-1].copy()),
  # max_pool2d: each window's first maximum in row-major order
  ("max_pool2d_ties", lambda x: x.max_pool2d(2, stride=1), lambda x: F.max_pool2d(x, 2, stride=1),
   [[[[0.0, 2.0, 2.0], [2.0, 1.0, 2.0], [0.0, 0.0, 0.0]]]]),
  ("max_pool2d_flat", lambda x: x.max_pool2d(2), lambda x: F.max_pool2d(x, 2), np.ones((1, 1, 4, 4))),
  # std: no gradient where the variance is 0 (sqrt's infinite slope times var's zero one)
  ("std_zero", lambda x: x.std(1), lambda x: x.std(1), [[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]]),
  ("std_one_element", lambda x: x.std(), lambda x: x.std(), [1.0]),
  ("logsumexp", lambda x: x.logsumexp(1), lambda x: x.logsumexp(1),
   [[1000.0, 1000.0, -1000.0], [-1000.0, 1.0, 0.0], [INF, 1.0, 0.0], [-INF, -INF, -INF]]),
  ("log_softmax", lambda x: x.log_softmax(1), lambda x: x.log_softmax(1), [[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]]),
  ("softmax", lambda x: x.softmax(1), lambda x: x.softmax(1), [[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]]),
]

@pytest.mark.parametrize("case", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
@pytest.mark.filterwarnings("ignore:std\\(\\)")  # PyTorch's, for the one-element std (nan, as here)
def test_reductions(case):
  _, ours, theirs, x = case
  with torch.no_grad(): shape = theirs(torch.tensor(np.asarray(x, np.float32))).shape
  w = np.arange(1, math.prod(shape) + 1, dtype=np.float32).reshape(shape)  # distinct: a gradient given to the wrong element shows
  _compare(ours, theirs, x, weights=w, rtol=1e-4)

def test_amax_nan_row():
  """Over a tuple of axes the maxima share the gradient; a row whose maximum is nan shares it among its nans, as PyTorch's
  x.max() does, where torch.amax gives every element of that row nan (its count of elements equal to nan is 0)."""
  x = Tensor(TIES, requires_grad=True)
  (x.max((1,)) * Tensor([1.0, 2.0, 4.0])).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5, 0], [0.5, 0.5, 0.5, 0.5], [0, 2, 0, 2]])

def test_argmax_agrees_with_max_gradient():
  x = Tensor(TIES, requires_grad=True)
  x.max(1).sum().backward()
  np.testing.assert_array_equal(np.argwhere(x.grad.numpy() == 1)[:, 1], torch.tensor(TIES).argmax(1).numpy())
  np.testing.assert_array_equal(Tensor(TIES).argmax(1).numpy(), torch.tensor(TIES).argmax(1).numpy())

def test_softmax_sum_has_zero_gradient():
  """softmax sums to 1, so the gradient of its sum is 0. PyTorch gets exactly 0 when its outputs sum to exactly 1; here
  it is exactly 0 for these typical inputs (as PyTorch), and otherwise within a rounding of each output."""
  for d in ([1.0, 2.0, 3.0], [0.3, -1.2, 2.5, 0.1], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [-5.0, 0.0, 5.0, 10.0]):
    _compare(lambda x: x.softmax(0), lambda x: x.softmax(0), d)
    x = Tensor(np.array(d, np.float32), requires_grad=True)
    x.softmax(0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0.0)
  rng = np.random.default_rng(0)
  for n in (5, 17, 100):
    d = rng.normal(0, 3, n).astype(np.float32)
    x = Tensor(d, requires_grad=True)
    y = x.softmax(0)
    y.sum().backward()
    assert (np.abs(x.grad.numpy()) <= 2 ** -22 * y.numpy() + 1e-30).all()


# ---- the same care for the leaves: requires_grad left unset ----

def test_unset_leaf_gets_gradient():
  x = Tensor.randn(3)  # requires_grad None: unset, so the leaf gets a gradient as in tinygrad
  assert x.requires_grad is None
  (x * x).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy(), rtol=1e-6)
  w, b = Tensor.randn(3, requires_grad=True), Tensor.randn(3)
  (w * b).sum().backward()  # a leaf marked True: only marked leaves get gradients, as PyTorch
  np.testing.assert_allclose(w.grad.numpy(), b.numpy(), rtol=1e-6)
  assert b.grad is None
  frozen = Tensor.randn(2, requires_grad=False)
  with pytest.raises(RuntimeError, match="does not require grad"): (frozen * 2).sum().backward()


# ---- a sweep of ordinary values ----

GRID = np.concatenate([np.linspace(-4.0, 4.0, 33), [-0.3, 0.7, 1.3, 2.9]]).astype(np.float32)
UNARY = [
  ("abs", lambda x: x.abs(), torch.abs), ("relu", lambda x: x.relu(), torch.relu),
  ("leaky_relu", lambda x: x.leaky_relu(0.2), lambda x: F.leaky_relu(x, 0.2)), ("elu", lambda x: x.elu(), F.elu),
  ("hardtanh", lambda x: x.hardtanh(-2.0, 2.0), lambda x: F.hardtanh(x, -2.0, 2.0)), ("sigmoid", lambda x: x.sigmoid(), torch.sigmoid),
  ("tanh", lambda x: x.tanh(), torch.tanh), ("silu", lambda x: x.silu(), F.silu), ("softplus", lambda x: x.softplus(), F.softplus),
  ("softplus_beta", lambda x: x.softplus(0.5, 1.0), lambda x: F.softplus(x, 0.5, 1.0)),
  ("gelu", lambda x: x.gelu(approximate="none"), F.gelu),
  ("gelu_tanh", lambda x: x.gelu(approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
  ("exp", lambda x: x.exp(), torch.exp),
  ("exp2", lambda x: x.exp2(), torch.exp2), ("sin", lambda x: x.sin(), torch.sin), ("cos", lambda x: x.cos(), torch.cos),
  ("square", lambda x: x.square(), torch.square), ("clamp", lambda x: x.clamp(-1.5, 0.5), lambda x: x.clamp(-1.5, 0.5)),
  ("pow_3", lambda x: x ** 3, lambda x: x ** 3), ("pow_neg_2", lambda x: x ** -2, lambda x: x ** -2),
  ("rpow", lambda x: 1.7 ** x, lambda x: 1.7 ** x), ("log_abs", lambda x: x.abs().log(), lambda x: x.abs().log()),
  ("sqrt_abs", lambda x: x.abs().sqrt(), lambda x: x.abs().sqrt()), ("pow_frac_abs", lambda x: x.abs() ** 1.7, lambda x: x.abs() ** 1.7),
]

@pytest.mark.parametrize("case", UNARY, ids=[c[0] for c in UNARY])
def test_sweep_unary(case):
  w = np.random.default_rng(1).uniform(0.5, 1.5, GRID.shape).astype(np.float32)
  _compare(case[1], case[2], GRID, weights=w, rtol=2e-5, atol=2e-6)

BINARY = [
  ("pow", lambda a, b: a ** b, lambda a, b: a ** b, (0.1, 3.0), (-2.5, 2.5)),
  ("maximum", lambda a, b: a.maximum(b), torch.maximum, (-2.0, 2.0), (-2.0, 2.0)),
  ("minimum", lambda a, b: a.minimum(b), torch.minimum, (-2.0, 2.0), (-2.0, 2.0)),
  ("div", lambda a, b: a / b, lambda a, b: a / b, (-2.0, 2.0), (0.5, 2.0)),
]

@pytest.mark.parametrize("case", BINARY, ids=[c[0] for c in BINARY])
def test_sweep_binary(case):
  rng = np.random.default_rng(2)
  a, b = rng.uniform(*case[3], 64), rng.uniform(*case[4], 64)
  b[::8] = a[::8] if case[0] in ("maximum", "minimum") else b[::8]  # some ties
  _compare(case[1], case[2], a, b, weights=rng.uniform(0.5, 1.5, 64), rtol=2e-5, atol=2e-6)

def test_sweep_reductions():
  rng = np.random.default_rng(3)
  x = np.round(rng.normal(0, 2, (4, 6)), 1)  # rounded: ties happen
  for ours, theirs in ((lambda t: t.max(1), lambda t: t.max(1).values), (lambda t: t.min(0), lambda t: t.min(0).values),
                       (lambda t: t.max(), lambda t: t.max()), (lambda t: t.logsumexp(1), lambda t: t.logsumexp(1)),
                       (lambda t: t.softmax(0), lambda t: t.softmax(0)), (lambda t: t.log_softmax(1), lambda t: t.log_softmax(1)),
                       (lambda t: t.std(1), lambda t: t.std(1)), (lambda t: t.cummax(1).values, lambda t: torch.cummax(t, 1).values),
                       (lambda t: t.prod(1), lambda t: t.prod(1))):
    with torch.no_grad(): shape = theirs(torch.tensor(x, dtype=torch.float32)).shape
    _compare(ours, theirs, x, weights=rng.uniform(0.5, 1.5, shape), rtol=1e-4, atol=1e-6)
