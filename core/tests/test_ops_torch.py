"""The pointwise functions, losses, attention and dropout added for real models, against PyTorch on the same data: values
and gradients, with the edge cases (0 for the odd functions' slopes, ignore_index and label smoothing, rows of attention
with every position masked)."""
import math

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.tensor import sorting
from tinyspec.uop.ops import Ops

torch = pytest.importorskip("torch")
F = torch.nn.functional
rng = np.random.default_rng(7)

X = np.concatenate([(rng.standard_normal(48) * 3), [0.0, 1e-6, -1e-6, 1e-3, 0.49, 0.51, 20.5, -20.5, 30.0, -30.0]]).astype(np.float32)
UNIT = np.concatenate([rng.uniform(-0.999, 0.999, 40), [0.0, 1e-5, -0.5, 0.9999]]).astype(np.float32)
ABOVE_ONE = (np.abs(X) + 1.0001).astype(np.float32)
M = X[:56].reshape(7, 8)


def leaves(*arrays):
  """Each array as a tinyspec and a torch tensor, both requiring grad if it holds floats."""
  return [(Tensor(a, requires_grad=g), torch.tensor(a, requires_grad=g)) for a in arrays for g in [np.asarray(a).dtype.kind == "f"]]

def check(ours, theirs, *arrays, rtol=1e-5, atol=1e-6):
  """ours(*tinyspec tensors) against theirs(*torch tensors), each returning a tensor or a tuple of them: every output's
  shape and values, then the gradient of the sum of the float outputs for each input PyTorch gives one (also used by
  test_torch_names.py)."""
  pairs = leaves(*arrays)
  outs, refs = ours(*(p[0] for p in pairs)), theirs(*(p[1] for p in pairs))
  outs, refs = (outs, refs) if isinstance(outs, tuple) else ((outs,), (refs,))
  assert len(outs) == len(refs)
  floats = [(o, r) for o, r in zip(outs, refs) if dtypes.is_float(o.dtype)]
  total = sum(o.sum() for o, _ in floats) if floats else None  # built before the values are read: reading realizes them
  for o, r in zip(outs, refs):
    assert o.shape == tuple(r.shape)
    np.testing.assert_allclose(o.numpy(), r.detach().numpy(), rtol=rtol, atol=atol)
  if total is None or not all(r.requires_grad for _, r in floats): return  # an index, a count: no slope on either side
  total.backward(); sum(r.sum() for _, r in floats).backward()
  for x, tx in pairs:
    if tx.grad is not None: np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(force=True), rtol=rtol * 10, atol=atol * 10)


POINTWISE = [
  ("log1p", Tensor.log1p, torch.log1p, np.abs(X) - 0.5), ("expm1", Tensor.expm1, torch.expm1, X), ("erf", Tensor.erf, torch.erf, X),
  ("atan", Tensor.atan, torch.atan, X), ("asin", Tensor.asin, torch.asin, UNIT), ("acos", Tensor.acos, torch.acos, UNIT),
  ("sinh", Tensor.sinh, torch.sinh, X), ("cosh", Tensor.cosh, torch.cosh, X), ("asinh", Tensor.asinh, torch.asinh, X),
  ("acosh", Tensor.acosh, torch.acosh, ABOVE_ONE), ("atanh", Tensor.atanh, torch.atanh, UNIT), ("log10", Tensor.log10, torch.log10, ABOVE_ONE),
  ("gelu", lambda x: x.gelu(approximate="none"), F.gelu, X),
  ("gelu_tanh", lambda x: x.gelu(approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), X),
  ("quick_gelu", Tensor.quick_gelu, lambda x: x * torch.sigmoid(1.702 * x), X), ("relu6", Tensor.relu6, F.relu6, X),
  ("hardsigmoid", Tensor.hardsigmoid, F.hardsigmoid, np.append(X, [-3.0, 3.0]).astype(np.float32)),
  ("hardswish", Tensor.hardswish, F.hardswish, np.append(X, [-3.0, 3.0]).astype(np.float32)), ("mish", Tensor.mish, F.mish, X),
  ("selu", Tensor.selu, F.selu, X), ("celu", lambda x: x.celu(0.7), lambda x: F.celu(x, 0.7), X),
  ("logsigmoid", Tensor.logsigmoid, F.logsigmoid, X), ("softsign", Tensor.softsign, F.softsign, X), ("clone", Tensor.clone, torch.clone, X),
  ("softmin", lambda x: x.softmin(1), lambda x: F.softmin(x, 1), M), ("normalize", lambda x: x.normalize(dim=1), lambda x: F.normalize(x, dim=1), M),
  ("normalize_p3", lambda x: x.normalize(p=3, dim=0), lambda x: F.normalize(x, p=3, dim=0), M),
  ("tril", lambda x: x.tril(1), lambda x: x.tril(1), M), ("triu", lambda x: x.triu(-2), lambda x: x.triu(-2), M),
  ("roll", lambda x: x.roll((2, -3), (0, 1)), lambda x: x.roll((2, -3), (0, 1)), M), ("roll_flat", lambda x: x.roll(5), lambda x: x.roll(5), M),
  ("fmod", lambda x: x.fmod(1.7), lambda x: torch.fmod(x, 1.7), X), ("fmod_negative", lambda x: x.fmod(-1.3), lambda x: torch.fmod(x, -1.3), X),
]

@pytest.mark.parametrize("name, ours, theirs, x", POINTWISE, ids=[p[0] for p in POINTWISE])
def test_pointwise(name, ours, theirs, x):
  check(ours, theirs, x)

def test_the_odd_functions_have_their_slope_at_zero():
  for f, slope in ((Tensor.erf, 2 / math.sqrt(math.pi)), (Tensor.atan, 1.0), (Tensor.asinh, 1.0), (Tensor.sinh, 1.0)):
    x = Tensor(np.zeros(1, np.float32), requires_grad=True)
    f(x).sum().backward()
    assert abs(x.grad.item() - slope) < 1e-6, f.__name__

def test_cos_and_cosh_near_zero_and_the_hyperbolics_far_out_match_pytorch():
  """cos and cosh near 0 and at it, both signs: their slopes -sin x and sinh x to float32's precision (cos's slope was read
  at x - pi/2 rounded, 4e-8 at 0; cosh's was a difference of exponentials, 3e-4 off at 1e-4); cosh and sinh past 20 to
  2 ulp."""
  near = np.array([0.0, -0.0, 1e-30, 1e-8, -1e-8, 1e-4, -3e-3, 0.5, -0.7, 0.78, 0.79], np.float32)
  for ours, theirs in ((Tensor.cos, torch.cos), (Tensor.cosh, torch.cosh)):
    x, tx = Tensor(near, requires_grad=True), torch.tensor(near, requires_grad=True)
    ours(x).sum().backward(); theirs(tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=3e-7, atol=0, err_msg=ours.__name__)
    np.testing.assert_allclose(ours(Tensor(near)).numpy(), theirs(torch.tensor(near)).numpy(), rtol=2e-7, atol=0)
  far = np.array([20.5, -33.3, 47.9, 80.1, -88.9, 89.41], np.float32)  # e^|x| / 2: was 24 ulp off, e^(|x| - ln 2) rounding |x| - ln 2
  for ours, theirs in ((Tensor.cosh, torch.cosh), (Tensor.sinh, torch.sinh)):
    np.testing.assert_allclose(ours(Tensor(far)).numpy(), theirs(torch.tensor(far)).numpy(), rtol=3e-7, atol=0, err_msg=ours.__name__)

def test_two_argument_functions():
  y = X[::-1].copy()
  check(lambda a, b: a.logaddexp(b), torch.logaddexp, X, y)
  check(lambda a, b: a.copysign(b), torch.copysign, X, -y)
  np.testing.assert_array_equal(Tensor(np.array([-7, 7, -6, 5], np.int32)).fmod(3).numpy(), [-1, 1, 0, 2])  # C's sign rule on ints

def test_masked_fill_and_isclose():
  mask = np.arange(8) % 3 == 0
  check(lambda x: x.masked_fill(Tensor(mask), -1.5), lambda x: x.masked_fill(torch.tensor(mask), -1.5), M)
  with pytest.raises(RuntimeError, match="does not broadcast"): Tensor(M).masked_fill(Tensor(np.ones((2, 7, 8), bool)), 0.0)
  a = np.array([1.0, 1.00001, np.inf, -np.inf, np.nan, 0.0, 1e-9, np.inf], np.float32)
  b = np.array([1.0, 1.0, np.inf, np.inf, np.nan, 1e-9, 0.0, 1e30], np.float32)
  for equal_nan in (False, True):
    np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b), equal_nan=equal_nan).numpy(),
                                  torch.isclose(torch.tensor(a), torch.tensor(b), equal_nan=equal_nan).numpy())

# ---- losses ----
LOGITS = rng.standard_normal((6, 5)).astype(np.float32)
TARGETS = np.array([0, 4, 2, -100, 1, 3])
WEIGHT = rng.uniform(0.5, 2, 5).astype(np.float32)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_with_class_indices(reduction, label_smoothing, weighted):
  kw = dict(reduction=reduction, label_smoothing=label_smoothing)
  check(lambda x: x.cross_entropy(Tensor(TARGETS), weight=Tensor(WEIGHT) if weighted else None, **kw),
        lambda x: F.cross_entropy(x, torch.tensor(TARGETS), weight=torch.tensor(WEIGHT) if weighted else None, **kw), LOGITS)

def test_cross_entropy_other_shapes_and_probabilities():
  t3 = np.array([[0, 3, 1], [2, 2, -100]])
  check(lambda x: x.cross_entropy(Tensor(t3)), lambda x: F.cross_entropy(x, torch.tensor(t3)), rng.standard_normal((2, 4, 3)).astype(np.float32))
  check(lambda x: x.cross_entropy(Tensor(np.array(2))), lambda x: F.cross_entropy(x, torch.tensor(2)), LOGITS[0])
  p = rng.dirichlet(np.ones(5), 6).astype(np.float32)
  check(lambda x: x.cross_entropy(Tensor(p), label_smoothing=0.1), lambda x: F.cross_entropy(x, torch.tensor(p), label_smoothing=0.1), LOGITS)
  with pytest.raises(RuntimeError, match="expected"): Tensor(LOGITS).cross_entropy(Tensor(TARGETS[:3]))
  with pytest.raises(ValueError, match="reduction"): Tensor(LOGITS).cross_entropy(Tensor(TARGETS), reduction="avg")

def test_ignore_index_inside_the_class_range():
  t = np.where(TARGETS < 0, 1, TARGETS)
  check(lambda x: x.cross_entropy(Tensor(t), ignore_index=2, label_smoothing=0.1),
        lambda x: F.cross_entropy(x, torch.tensor(t), ignore_index=2, label_smoothing=0.1), LOGITS)

def test_nll_and_binary_losses():
  check(lambda x: x.log_softmax(1).nll_loss(Tensor(TARGETS), weight=Tensor(WEIGHT)),
        lambda x: F.nll_loss(F.log_softmax(x, 1), torch.tensor(TARGETS), weight=torch.tensor(WEIGHT)), LOGITS)
  probs, target = rng.uniform(0.01, 0.99, (4, 3)).astype(np.float32), rng.uniform(0, 1, (4, 3)).astype(np.float32)
  check(lambda x: x.binary_cross_entropy(Tensor(target)), lambda x: F.binary_cross_entropy(x, torch.tensor(target)), probs)
  pw = np.array([1.0, 2.0, 0.5], np.float32)
  check(lambda x: x.binary_cross_entropy_with_logits(Tensor(target), pos_weight=Tensor(pw), reduction="sum"),
        lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor(target), pos_weight=torch.tensor(pw), reduction="sum"),
        (rng.standard_normal((4, 3)) * 5).astype(np.float32))
  check(lambda x: x.sparse_categorical_crossentropy(Tensor(np.array([1, 0, 4, 2, 3, 0]))),
        lambda x: F.cross_entropy(x, torch.tensor([1, 0, 4, 2, 3, 0])), LOGITS)

loss_rng = np.random.default_rng(8)  # its own stream: the data of the tests below stays as it was
PRED, TRUTH = loss_rng.standard_normal((4, 5)).astype(np.float32), loss_rng.standard_normal((4, 5)).astype(np.float32)
TRUTH[0, :2] = PRED[0, :2]  # d = 0: the slope of |d| there is 0
TRUTH[1, :2] = PRED[1, :2] + np.float32(0.5)  # |d| = beta = delta: the switch between the branches
REGRESSION = [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}), ("smooth_l1_loss", {"beta": 0.0}),
              ("huber_loss", {}), ("huber_loss", {"delta": 0.5})]

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name, kw", REGRESSION, ids=[f"{n}{kw}" for n, kw in REGRESSION])
def test_regression_losses(name, kw, reduction):
  check(lambda x, t: getattr(x, name)(t, reduction=reduction, **kw), lambda x, t: getattr(F, name)(x, t, reduction=reduction, **kw), PRED, TRUTH)

def test_regression_losses_broadcast_and_refuse_bad_settings():
  check(lambda x, t: x.mse_loss(t), lambda x, t: F.mse_loss(x, t.expand(4, 5)), PRED, TRUTH[:1])
  with pytest.raises(ValueError, match="beta"): Tensor(PRED).smooth_l1_loss(Tensor(TRUTH), beta=-1.0)
  with pytest.raises(ValueError, match="delta"): Tensor(PRED).huber_loss(Tensor(TRUTH), delta=0.0)
  with pytest.raises(ValueError, match="reduction"): Tensor(PRED).l1_loss(Tensor(TRUTH), reduction="batchmean")

@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # PyTorch's advice to prefer batchmean: mean is checked on purpose
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
  log_p, q = np.log(loss_rng.dirichlet(np.ones(5), 4)).astype(np.float32), loss_rng.dirichlet(np.ones(5), 4).astype(np.float32)
  q[0, 1] = 0.0  # counts for 0; the slope in q is nan there, as PyTorch's
  target = np.log(q + np.float32(1e-3)) if log_target else q
  check(lambda x, t: x.kl_div(t, reduction=reduction, log_target=log_target),
        lambda x, t: F.kl_div(x, t, reduction=reduction, log_target=log_target), log_p, target)

# ---- attention, dropout ----
Q, K, V = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)))
MASK = rng.uniform(0, 1, (4, 6)) > 0.3
MASK[2] = False  # a row with every position masked: 0, as PyTorch

@pytest.mark.parametrize("kind", ["plain", "causal", "bool_mask", "float_mask", "scale"])
def test_scaled_dot_product_attention(kind):
  additive = np.where(MASK, 0, -np.inf).astype(np.float32)
  ours, theirs = {"plain": ({}, {}), "causal": ({"is_causal": True}, {"is_causal": True}),
                  "bool_mask": ({"attn_mask": Tensor(MASK)}, {"attn_mask": torch.tensor(MASK)}),
                  "float_mask": ({"attn_mask": Tensor(additive)}, {"attn_mask": torch.tensor(additive)}),
                  "scale": ({"scale": 0.3}, {"scale": 0.3})}[kind]
  check(lambda q, k, v: q.scaled_dot_product_attention(k, v, **ours), lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **theirs), Q, K, V)

def test_attention_masks_an_inf_score():
  """A key at +inf, masked for rows 0-2 by causality, does not matter to them: their values and the gradients of k and v
  are PyTorch's with that key at 0. (q's gradient is dS @ k, 0 * inf in that key's component. PyTorch's math backend
  adds -inf to the inf score and gives nan; its CPU kernel gives nan in some rows and not others.) Row 3 sees the key
  with q's first component < 0, a score of -inf, and is PyTorch's too."""
  k, k_finite = K[:, :, :4].copy(), K[:, :, :4].copy()
  k[0, 0, 3, 0], k_finite[0, 0, 3, 0] = np.inf, 0.0
  ours, theirs = leaves(Q, k, V[:, :, :4]), leaves(Q, k_finite, V[:, :, :4])
  out = ours[0][0].scaled_dot_product_attention(ours[1][0], ours[2][0], is_causal=True)
  ref = F.scaled_dot_product_attention(*(t for _, t in theirs), is_causal=True)
  loss = out[..., :3, :].sum()  # built before out is read: reading realizes it
  seen = F.scaled_dot_product_attention(*(torch.tensor(a) for a in (Q, k, V[:, :, :4])), is_causal=True)
  assert Q[0, 0, 3, 0] < 0 and np.isfinite(out.numpy()[0, 0, 3]).all()
  np.testing.assert_allclose(out.numpy()[..., 3, :], seen.numpy()[..., 3, :], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out.numpy()[..., :3, :], ref.detach().numpy()[..., :3, :], rtol=1e-5, atol=1e-6)
  loss.backward(); ref[..., :3, :].sum().backward()
  for (x, _), (_, tx) in zip(ours[1:], theirs[1:]): np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)

def test_dropout_only_in_training():
  x = Tensor.ones(4000)
  assert x.dropout(0.3) is x
  with Tensor.train():
    d = x.dropout(0.3).numpy()
  assert set(np.unique(d).tolist()) == {0.0, np.float32(1 / 0.7).item()} and 0.27 < (d == 0).mean() < 0.33
  with pytest.raises(ValueError, match="p must be in"): x.dropout(1.5)

# ---- sorting, einsum, repeat_interleave, pad modes, interpolate ----
TIES = np.array([[3, 1, 2, 1, np.nan, -np.inf, 2], [0, 0, 0, 5, -1, 7, 7]], np.float32)

@pytest.fixture(params=["ranks", "bitonic"])
def sort_way(request, monkeypatch):
  """Each sort test both ways: the (n, n) ranks, and the bitonic network that larger sorts take (forced here, and with it
  topk's selection for a small k)."""
  if request.param == "bitonic": monkeypatch.setattr(sorting, "RANK_WORK", 0)
  return request.param

@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_with_nan_last_as_pytorch(descending, pytorch_ints, sort_way):
  v, i = Tensor(TIES).sort(1, descending=descending)
  tv, ti = torch.sort(torch.tensor(TIES), dim=1, descending=descending, stable=True)
  np.testing.assert_array_equal(v.numpy(), tv.numpy())
  np.testing.assert_array_equal(i.numpy(), ti.numpy())
  assert i.dtype.name == "int64"
  np.testing.assert_array_equal(Tensor(TIES).argsort(1, descending).numpy(), ti.numpy())

def test_sort_values_carry_the_gradient_and_topk(sort_way):
  y = rng.standard_normal((4, 5, 6)).astype(np.float32)
  w = np.arange(6, dtype=np.float32)
  check(lambda x: x.sort(2, descending=True)[0] * Tensor(w), lambda x: torch.sort(x, 2, descending=True)[0] * torch.tensor(w), y)
  check(lambda x: x.topk(3, 1)[0], lambda x: torch.topk(x, 3, 1)[0], y)
  np.testing.assert_array_equal(Tensor(y).topk(2, -1, largest=False)[1].numpy(), torch.topk(torch.tensor(y), 2, -1, largest=False)[1].numpy())
  v, i = Tensor(TIES).topk(3, 1)  # ties: the earlier index first (PyTorch's order among ties is unspecified)
  np.testing.assert_array_equal(v.numpy(), torch.topk(torch.tensor(TIES), 3, 1)[0].numpy())
  assert i.numpy().tolist() == [[4, 0, 2], [5, 6, 3]]
  with pytest.raises(RuntimeError, match="out of range"): Tensor(y).topk(7, -1)

SORTABLE = {"float32": [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-45, -1e-45, 2.5, -2.5], "float64": [0.0, -0.0, np.nan, 1e308, -1e-320, 3.0],
            "float16": [0.0, -0.0, np.nan, 65504, -6e-8, 1.5], "int8": [-128, 127, 0, -1, 5], "int32": [-2**31, 2**31 - 1, 0, -1, 7],
            "int64": [-2**63, 2**63 - 1, 0, -1, 2**40], "uint8": [0, 255, 1, 128], "bool": [True, False]}

@pytest.mark.parametrize("dtype", list(SORTABLE))
@pytest.mark.parametrize("descending", [False, True])
def test_sort_every_dtype_both_ways_matches_pytorch(dtype, descending, sort_way):
  # ties, signed zeros, nans of both signs, subnormals and the dtype's extremes, in rows of 3 to 70 (padding to 4 ... 128)
  for n in (3, 70):
    a = np.array(SORTABLE[dtype], dtype=dtype)[rng.integers(0, len(SORTABLE[dtype]), (2, n))]
    v, i = Tensor(a).sort(-1, descending=descending)
    tv, ti = torch.sort(torch.tensor(a), dim=-1, descending=descending, stable=True)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    np.testing.assert_array_equal(v.numpy(), tv.numpy())  # -0.0 and 0.0 in their places: the values are read at the indices

@pytest.mark.parametrize("dtype", list(SORTABLE))
def test_topk_every_dtype_matches_pytorchs_stable_order(dtype, sort_way):
  # the first k of PyTorch's stable sort: ties to the earlier index, nan first when largest; k up to the selection's limit
  a = np.array(SORTABLE[dtype], dtype=dtype)[rng.integers(0, len(SORTABLE[dtype]), (3, 70))]
  for k, largest in ((1, True), (1, False), (5, False), (18, True)):  # k = 1: an argmin of the keys, nan last either way
    v, i = Tensor(a).topk(k, -1, largest=largest)
    tv, ti = torch.sort(torch.tensor(a), dim=-1, descending=largest, stable=True)
    np.testing.assert_array_equal(i.numpy(), ti[:, :k].numpy())
    np.testing.assert_array_equal(v.numpy(), tv[:, :k].numpy())

EINSUMS = ["ij,jk->ik", "ij,jk", "bij,kj->bik", "...j,jk->...k", "ij,kl->ikjl", "ij->", "ij->ji", "bij,bjk->bik", "ii->i", "ii", "iij,jk->ik",
           "A...->A", "...A->...", "...AB,...Bc"]  # capitals beside "...": its axes are letters of their own

@pytest.mark.parametrize("formula", EINSUMS)
def test_einsum(formula):
  shapes = {"ij,jk->ik": [(3, 4), (4, 5)], "ij,jk": [(3, 4), (4, 5)], "bij,kj->bik": [(2, 3, 4), (5, 4)], "...j,jk->...k": [(2, 3, 4), (4, 5)],
            "ij,kl->ikjl": [(3, 4), (2, 5)], "ij->": [(3, 4)], "ij->ji": [(3, 4)], "bij,bjk->bik": [(2, 3, 4), (2, 4, 5)],
            "ii->i": [(4, 4)], "ii": [(4, 4)], "iij,jk->ik": [(3, 3, 4), (4, 2)], "A...->A": [(3, 3)], "...A->...": [(3, 2)],
            "...AB,...Bc": [(2, 3, 4), (4, 5)]}[formula]
  arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
  check(lambda *xs: Tensor.einsum(formula, *xs), lambda *xs: torch.einsum(formula, *xs), *arrays, rtol=1e-4, atol=1e-5)

def test_einsum_errors_name_the_problem():
  with pytest.raises(RuntimeError, match="2 operands in the formula, 1 given"): Tensor.einsum("ij,jk->ik", Tensor.ones(2, 2))
  with pytest.raises(RuntimeError, match="letter 'j' has sizes 3 and 4"): Tensor.einsum("ij,jk->ik", Tensor.ones(2, 3), Tensor.ones(4, 2))
  with pytest.raises(RuntimeError, match="letter 'i' repeated in 'ii' with sizes 2 and 3"): Tensor.einsum("ii->i", Tensor.ones(2, 3))

def test_repeat_interleave_and_pad_modes():
  c = rng.standard_normal((2, 3, 4)).astype(np.float32)
  check(lambda x: x.repeat_interleave(3, 1), lambda x: x.repeat_interleave(3, 1), c)
  check(lambda x: x.repeat_interleave(2), lambda x: x.repeat_interleave(2), c)
  for counts, dim in (([2, 0, 1], 1), ([1, 3], 0), ([4], 2)):  # a count per element, read as a list or a tensor
    check(lambda x, n=counts, d=dim: x.repeat_interleave(n, d), lambda x, n=counts, d=dim: x.repeat_interleave(torch.tensor(n), d), c)
    check(lambda x, n=counts, d=dim: x.repeat_interleave(Tensor(n), d), lambda x, n=counts, d=dim: x.repeat_interleave(torch.tensor(n), d), c)
  with pytest.raises(ValueError, match="one per element"): Tensor(c).repeat_interleave([1, 2], 1)
  x4 = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
  for mode in ("reflect", "replicate", "circular"):
    check(lambda x, m=mode: x.pad((2, 1, 1, 3), mode=m), lambda x, m=mode: F.pad(x, (2, 1, 1, 3), mode=m), x4)
  with pytest.raises(ValueError, match="does not fit axis"): Tensor(x4).pad((6, 0), mode="reflect")
  with pytest.raises(NotImplementedError, match="mode must be one of"): Tensor(x4).pad((1, 1), mode="wrap")

@pytest.mark.parametrize("kw", [dict(size=(7, 4), mode="nearest"), dict(scale_factor=2, mode="nearest"),
                                dict(size=(8, 9), mode="bilinear", align_corners=False), dict(size=(3, 4), mode="bilinear", align_corners=True),
                                dict(scale_factor=1.5, mode="bilinear", align_corners=False),
                                dict(scale_factor=(1.5, 1.1), mode="bilinear"), dict(scale_factor=(2, 1.1), mode="nearest"),
                                dict(size=(8, 11), mode="bicubic"), dict(size=(3, 4), mode="bicubic"), dict(scale_factor=(0.5, 1.7), mode="bicubic"),
                                dict(size=(9, 5), mode="bicubic", align_corners=True), dict(size=(3, 4), mode="area"),
                                dict(size=(8, 11), mode="area"), dict(scale_factor=0.5, mode="area")], ids=str)
def test_interpolate(kw):
  check(lambda x: x.interpolate(**kw), lambda x: F.interpolate(x, **kw), rng.standard_normal((2, 3, 5, 6)).astype(np.float32), rtol=1e-4, atol=1e-5)
  line = rng.standard_normal((2, 3, 5)).astype(np.float32)
  check(lambda x: x.interpolate(size=11, mode="linear"), lambda x: F.interpolate(x, size=11, mode="linear"), line)
  # 5 * 1.1 is 5: copied, not resampled with ratio 1 / 1.1
  check(lambda x: x.interpolate(scale_factor=1.1, mode="linear"), lambda x: F.interpolate(x, scale_factor=1.1, mode="linear"), line)
  check(lambda x: x.interpolate(size=3, mode="area"), lambda x: F.interpolate(x, size=3, mode="area"), line)

def test_interpolate_errors():
  with pytest.raises(ValueError, match="bicubic resizes a 4-D input"): Tensor.ones(1, 2, 5).interpolate(size=3, mode="bicubic")
  with pytest.raises(ValueError, match="align_corners is only"): Tensor.ones(1, 2, 5, 5).interpolate(size=3, mode="area", align_corners=True)
  with pytest.raises(ValueError, match="'bilinearx' is not supported"): Tensor.ones(1, 2, 5, 5).interpolate(size=3, mode="bilinearx")

# ---- views, diagonals, grids, scans, initializers ----
def test_view_diagonal_diag_meshgrid():
  a, b3 = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((2, 5, 3)).astype(np.float32)
  v = rng.standard_normal(4).astype(np.float32)
  check(lambda x: x.view(6, 4), lambda x: x.view(6, 4), a)
  for offset in (0, 2, -1):
    check(lambda x, k=offset: x.diagonal(k), lambda x, k=offset: x.diagonal(k), a)
  check(lambda x: x.diagonal(1, 0, 2), lambda x: x.diagonal(1, 0, 2), b3)
  assert Tensor(a).diagonal(7).shape == (0,)
  for k in (0, 1, -2):
    check(lambda x, k=k: x.diag(k), lambda x, k=k: torch.diag(x, k), v)
  check(lambda x: x.diag(1), lambda x: torch.diag(x, 1), a)
  for indexing in ("ij", "xy"):
    ours = Tensor(v).meshgrid(Tensor(v[:3]), indexing=indexing)
    theirs = torch.meshgrid(torch.tensor(v), torch.tensor(v[:3]), indexing=indexing)
    for got, want in zip(ours, theirs): np.testing.assert_array_equal(got.numpy(), want.numpy())

@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_values_and_indices(name, pytorch_ints):
  """Indices name the last element equal to the running value (ties go late), a nan stays once met (its index the last nan)."""
  a = rng.standard_normal((4, 6)).astype(np.float32)
  check(lambda x: getattr(x, name)(1).values, lambda x: getattr(torch, name)(x, 1).values, a)
  nan = math.nan
  cases = [a, np.array([1.0, nan, 2.0, nan, 0.0], np.float32), np.array([3, 1, 3, 1, 3, 2], np.int32), np.array([[2, 2], [1, 2], [2, 0]], np.int64),
           np.array([True, False, True, False])]
  for x in cases:
    for axis in range(x.ndim):
      values, indices = getattr(Tensor(x), name)(axis)
      want = getattr(torch, name)(torch.tensor(x), axis)
      np.testing.assert_array_equal(values.numpy(), want.values.numpy())
      np.testing.assert_array_equal(indices.numpy(), want.indices.numpy())
      assert indices.dtype == Tensor.arange(1, dtype="int64").dtype
  values, indices = getattr(Tensor(2.5), name)(0)
  assert values.item() == 2.5 and indices.item() == 0 and getattr(Tensor.zeros(2, 0), name)(1).indices.shape == (2, 0)

@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
  """Against torch.scatter_reduce on floats (values and gradients of both inputs) and ints (an int mean rounds down); some
  positions are named by no index, some by several."""
  x, src = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
  index = rng.integers(0, 5, (3, 5))  # row 5 is never named
  check(lambda t, s: t.scatter_reduce(0, Tensor(index), s, reduce, include_self=include_self),
        lambda t, s: t.scatter_reduce(0, torch.tensor(index), s, reduce, include_self=include_self), x, src)
  xi, si = rng.integers(-9, 9, (5, 6)).astype(np.int32), rng.integers(-9, 9, (5, 4)).astype(np.int32)
  ii = rng.integers(0, 6, (5, 3))
  got = Tensor(xi).scatter_reduce(1, Tensor(ii), Tensor(si), reduce, include_self=include_self).numpy()
  want = torch.tensor(xi).scatter_reduce(1, torch.tensor(ii), torch.tensor(si), reduce, include_self=include_self).numpy()
  np.testing.assert_array_equal(got, want)

def test_scatter_reduce_errors():
  with pytest.raises(RuntimeError, match="reduce must be"): Tensor.ones(3).scatter_reduce(0, Tensor([0]), Tensor([1.0]), "max")
  with pytest.raises(RuntimeError, match="index must be an integer"): Tensor.ones(3).scatter_reduce(0, Tensor([0.0]), Tensor([1.0]), "sum")

POOLS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), ceil_mode=True),
         dict(kernel_size=3, stride=1, dilation=2, padding=1)]

@pytest.mark.parametrize("kw", POOLS, ids=str)
def test_max_pool2d_indices_and_max_unpool2d(kw):
  """return_indices names PyTorch's element (the first maximum of a tie; the last nan); max_unpool2d puts the values back
  there, and its gradient reads them from there."""
  x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
  x[0, 0, :2, :3], x[1, 2, 4, 4] = 1.5, math.nan  # a tie across windows and inside one; a nan
  values, indices = Tensor(x).max_pool2d(**kw, return_indices=True)
  want_values, want_indices = F.max_pool2d(torch.tensor(x), **kw, return_indices=True)
  np.testing.assert_array_equal(values.numpy(), want_values.numpy())
  np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
  if "dilation" in kw or "ceil_mode" in kw: return  # F.max_unpool2d takes neither
  unpool = {k: v for k, v in kw.items() if k in ("kernel_size", "stride", "padding")}
  pooled = np.nan_to_num(want_values.numpy())
  check(lambda v: v.max_unpool2d(Tensor(want_indices.numpy()), **unpool, output_size=x.shape),
        lambda v: F.max_unpool2d(v, want_indices, **unpool, output_size=x.shape[-2:]), pooled)

def test_pool_padding_per_side():
  """Four ints pad (left, right, top, bottom) as F.pad (and tinygrad's pools): max pads -inf, avg counts the zeros."""
  x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
  check(lambda t: t.max_pool2d(3, padding=(1, 0, 0, 1)), lambda t: F.max_pool2d(F.pad(t, (1, 0, 0, 1), value=-math.inf), 3), x)
  check(lambda t: t.avg_pool2d(3, padding=(1, 0, 1, 1)), lambda t: F.avg_pool2d(F.pad(t, (1, 0, 1, 1)), 3), x)
  with pytest.raises(ValueError, match="4 ints for 2 spatial axes"): Tensor(x).max_pool2d(3, padding=(1, 0, 1))

ADAPTIVE = [((2, 3, 7, 9), (3, 4)), ((2, 3, 8, 8), (4, 4)), ((1, 2, 5, 6), (5, None)), ((3, 7, 5), (8, 3)), ((2, 3, 6, 6), 1),
            ((2, 3, 10), (4,)), ((1, 2, 5, 6, 7), (2, 3, 4))]

@pytest.mark.parametrize("shape,out", ADAPTIVE, ids=str)
def test_adaptive_pools(shape, out):
  """Uneven windows (a gather per axis) and even ones (the plain pool), up- and downsampling, None keeping an axis, 1 to 3
  pooled axes: values, gradients, and the max's indices (a tie inside a window: PyTorch names the first)."""
  x = rng.standard_normal(shape).astype(np.float32)
  x[(0,) * (len(shape) - 2) + (slice(0, 2), slice(0, 2))] = 2.5
  nd = 2 if isinstance(out, int) else len(out)
  size = out[0] if nd == 1 else out
  avg, mx = getattr(F, f"adaptive_avg_pool{nd}d"), getattr(F, f"adaptive_max_pool{nd}d")
  check(lambda t: getattr(t, f"adaptive_avg_pool{nd}d")(size), lambda t: avg(t, size), x)
  check(lambda t: getattr(t, f"adaptive_max_pool{nd}d")(size, return_indices=True), lambda t: mx(t, size, return_indices=True), x)

def test_adaptive_pool_errors():
  with pytest.raises(RuntimeError, match="must have 1 entries"): Tensor.ones(1, 4, 4).adaptive_avg_pool1d((1, 2))
  with pytest.raises(RuntimeError, match="must be positive"): Tensor.ones(1, 4, 4).adaptive_max_pool2d((0, 2))
  with pytest.raises(RuntimeError, match="expected a 3-D or 4-D input"): Tensor.ones(4, 4).adaptive_avg_pool2d(2)

def test_cummin_logcumsumexp_and_initializers():
  a = rng.standard_normal((4, 6)).astype(np.float32)
  check(lambda x: x.logcumsumexp(1), lambda x: torch.logcumsumexp(x, 1), a * 30)  # terms 100 apart: a shared shift would underflow
  check(lambda x: x.logcumsumexp(0), lambda x: torch.logcumsumexp(x, 0), a)
  bound = math.sqrt(3) * math.sqrt(2 / (1 + 0.01 ** 2)) / math.sqrt(32)
  w = Tensor.kaiming_uniform(256, 32).numpy()
  assert np.abs(w).max() <= bound and abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
  assert abs(Tensor.kaiming_normal(256, 50).numpy().std() - math.sqrt(2 / (1 + 1e-4)) / math.sqrt(50)) < 0.01
  assert np.abs(Tensor.glorot_uniform(64, 32).numpy()).max() <= math.sqrt(6 / 96) and Tensor.xavier_uniform(3, 4).shape == (3, 4)
  assert np.abs(Tensor.scaled_uniform(4, 4).numpy()).max() <= 0.25

def test_unfold_masked_select_nonzero():
  a = rng.standard_normal((4, 7)).astype(np.float32)
  for dim, size, step in ((1, 3, 2), (0, 2, 1), (1, 7, 1), (-1, 1, 3)):
    check(lambda x, d=dim, n=size, s=step: x.unfold(d, n, s), lambda x, d=dim, n=size, s=step: x.unfold(d, n, s), a)
  with pytest.raises(RuntimeError, match="unfold: size 8"): Tensor(a).unfold(1, 8, 1)
  mask = a > 0.3
  check(lambda x: x.masked_select(Tensor(mask)), lambda x: x.masked_select(torch.tensor(mask)), a)
  check(lambda x: x.masked_select(Tensor(mask[0])), lambda x: x.masked_select(torch.tensor(mask[0])), a)  # broadcast over rows
  np.testing.assert_array_equal(Tensor(mask).nonzero().numpy(), torch.tensor(mask).nonzero().numpy())
  assert Tensor(np.zeros((2, 3), np.float32)).nonzero().shape == (0, 2)

def test_isinf_sides_randint_shape_and_reshape_none():
  x = Tensor(np.array([np.inf, -np.inf, 1.0, np.nan], np.float32))
  for pos, neg in ((True, True), (True, False), (False, True), (False, False)):
    want = torch.isposinf(torch.tensor(x.numpy())) & pos | torch.isneginf(torch.tensor(x.numpy())) & neg
    np.testing.assert_array_equal(x.isinf(detect_positive=pos, detect_negative=neg).numpy(), want.numpy())
  r = Tensor.randint(3, 4, low=5, high=9).numpy()  # tinygrad's form: sizes, with low and high as keywords
  assert r.shape == (3, 4) and r.min() >= 5 and r.max() < 9
  assert Tensor.randint(10, (2, 5)).shape == (2, 5)  # PyTorch's form still
  t = Tensor.ones(2, 3, 4)
  assert t.reshape(None, -1).shape == (2, 12) and t.reshape((None, 12)).shape == (2, 12) and t.reshape(None, None, 2, 2).shape == (2, 3, 2, 2)
  with pytest.raises(RuntimeError, match="has no size to keep"): t.reshape(1, 1, 1, None)

# ---- what tinygrad's op tests found missing or different from PyTorch ----
def test_gradients_outside_the_domain_are_pytorchs():
  """log1p below -1, acosh below -1, atanh past +-1: the value is nan, the slope PyTorch's formula (1/(1+x), 1/sqrt(x^2-1),
  1/(1-x^2)); logaddexp's tie splits its gradient in half."""
  check(Tensor.log1p, torch.log1p, np.array([-3.0, -1.5, -0.5, 0.0, 2.0], np.float32))
  check(Tensor.acosh, torch.acosh, np.array([-3.0, -1.5, 1.5, 5.0], np.float32))
  check(Tensor.atanh, torch.atanh, np.array([-3.0, -1.5, -0.5, 0.5, 2.0], np.float32))
  check(lambda x, y: x.logaddexp(y), torch.logaddexp, np.array([-1.0, 2.0, 0.5], np.float32), np.array([-1.0, 3.0, 0.5], np.float32))

def test_idiv_nearest_exact_gqa_and_negative_edge_pads():
  a, b = np.array([7, -7, 7, -7, 0], np.int32), np.array([2, 2, -2, -2, 3], np.int32)
  np.testing.assert_array_equal(Tensor(a).idiv(Tensor(b)).numpy(), torch.div(torch.tensor(a), torch.tensor(b), rounding_mode="trunc").numpy())
  image = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
  for size in ((8, 3), (10, 12)):
    check(lambda x, s=size: x.interpolate(size=s, mode="nearest-exact"), lambda x, s=size: F.interpolate(x, size=s, mode="nearest-exact"), image)
  q, kv = rng.standard_normal((2, 8, 5, 4)).astype(np.float32), rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
  check(lambda q, k, v: q.scaled_dot_product_attention(k, v, enable_gqa=True),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), q, kv, kv * 2, rtol=1e-4, atol=1e-5)
  with pytest.raises(RuntimeError, match="7 query heads"): Tensor(q[:, :7]).scaled_dot_product_attention(Tensor(kv), Tensor(kv), enable_gqa=True)
  for mode, pads in (("reflect", (-1, 2, 2, -1)), ("reflect", (3, -5, 1, -5)), ("replicate", (-1, 2, 2, -1)), ("replicate", (3, -5, 1, -5)),
                     ("circular", (-1, 2, 2, -1)), ("circular", (3, -3, 1, -2))):  # circular cuts first, then wraps what is left
    check(lambda x, m=mode, p=pads: x.pad(p, mode=m), lambda x, m=mode, p=pads: F.pad(x, p, mode=m), image)
  with pytest.raises(NotImplementedError, match="wraps more than the 0 elements left"): Tensor(image).pad((-6, 6), mode="circular")
  with pytest.raises(ValueError, match="does not fit axis"): Tensor(image).pad((0, 7), mode="circular")  # no cut: wraps twice

def test_uint8_images_keep_their_dtype_when_resized():
  """nearest modes pick pixels; bilinear matches PyTorch's fixed-point uint8 arithmetic exactly, up and down, with and
  without align_corners, by size or by scale factor (where an axis can keep its size yet move its samples)."""
  u = rng.integers(0, 256, (2, 3, 16, 16)).astype(np.uint8)
  for mode in ("nearest", "nearest-exact", "bilinear"):
    got, want = Tensor(u).interpolate(size=(5, 7), mode=mode).numpy(), F.interpolate(torch.tensor(u), size=(5, 7), mode=mode).numpy()
    assert got.dtype == np.uint8 and np.array_equal(got, want), mode
  for kw in ({"size": (37, 3)}, {"size": (16, 40)}, {"scale_factor": (1.2, 0.45)}, {"scale_factor": 2.5}):
    for align in (False, True):
      got = Tensor(u).interpolate(mode="bilinear", align_corners=align, **kw).numpy()
      want = F.interpolate(torch.tensor(u), mode="bilinear", align_corners=align, **kw).numpy()
      assert got.dtype == np.uint8 and np.array_equal(got, want), (kw, align)

def test_meshgrid_einsum_of_scalars_and_dtype_errors():
  grids = Tensor(10.0).meshgrid(Tensor([1.0, 2.0, 3.0]))
  assert [g.shape for g in grids] == [(1, 3), (1, 3)] and grids[0].tolist() == [[10.0, 10.0, 10.0]]
  with pytest.raises(RuntimeError, match="indexing"): Tensor([1.0]).meshgrid(Tensor([2.0]), indexing="bad")
  assert Tensor.einsum("->", Tensor(3.0)).item() == 3.0 and Tensor.einsum(",->", Tensor(3.0), Tensor(2.0)).item() == 6.0
  with pytest.raises(RuntimeError, match="more than one '...'"): Tensor.einsum("...i...,i->", Tensor.ones(2, 3, 4), Tensor.ones(3))
  x, index = Tensor.zeros(3, 4, dtype="float16"), Tensor([[0, 1, 2, 0]])
  with pytest.raises(RuntimeError, match="src's dtype dtypes.float32 differs"): x.scatter(0, index, Tensor.ones(1, 4))
  with pytest.raises(RuntimeError, match="src's dtype dtypes.float32 differs"): x.scatter_reduce(0, index, Tensor.ones(1, 4), "sum")
  with pytest.raises(NotImplementedError, match="bool"): Tensor.linspace(5, 10, 3, dtype="bool")
  with pytest.raises(RuntimeError, match="negative dimension"): Tensor.empty(2, -3, 0)
  from tinyspec import dtypes
  assert dtypes.max(dtypes.uint8) == 255 and dtypes.min(dtypes.int8) == -128 and dtypes.min(dtypes.float32) == -math.inf

@pytest.mark.parametrize("kind", [RuntimeError, ValueError])
def test_impossible_shapes_are_both_pytorchs_and_tinygrads_error(kind):
  """Code written for PyTorch catches RuntimeError, code written for tinygrad ValueError (IndexError for a 0-d cat): both work."""
  for make in (lambda: Tensor.full((2, -3), 1.0), lambda: Tensor.empty(2, -3), lambda: Tensor.rand(-3, 2), lambda: Tensor.randn((2, -3, 0)),
               lambda: Tensor.randint((2, -3)), lambda: Tensor.eye(-3, 3), lambda: Tensor.kaiming_uniform(-3, 3),
               lambda: Tensor.ones(4, 3).reshape(5, 2), lambda: Tensor.ones(4, 6, 3).repeat((2, 4))):
    with pytest.raises(kind): make()
  with pytest.raises(kind if kind is RuntimeError else IndexError): Tensor(3.0).cat(Tensor(3.0))

# inputs at the ends of the float range, where a formula's intermediate overflows or an untaken branch's slope is nan
EXTREME = [
  ("log1p", Tensor.log1p, torch.log1p, [math.inf, 3e38, 1e30, -1.0, -0.5, 1e-30, 0.0]),
  ("expm1", Tensor.expm1, torch.expm1, [88.0, -100.0, -1000.0, -math.inf, math.inf, 0.6, -0.6, 1e-30, 0.0]),
  ("erf", Tensor.erf, torch.erf, [1e5, -1e5, math.inf, -math.inf, 10.5, 9.9, 3e38]),
  ("atan", Tensor.atan, torch.atan, [math.inf, -math.inf, 1e30, -1e30]),
  ("gelu", lambda x: x.gelu(approximate="none"), F.gelu, [1e5, -1e5, 1e30]),
  ("sinh", Tensor.sinh, torch.sinh, [89.0, -89.0, 89.4, -20.5, 25.0]), ("cosh", Tensor.cosh, torch.cosh, [89.0, -89.0, 89.4, -20.5, 25.0]),
  ("acosh", Tensor.acosh, torch.acosh, [-1e4, -1e6, -2.0, 0.5, 1e10, 1.5, 1.0]),
  ("atanh", Tensor.atanh, torch.atanh, [1.0, -1.0, -0.999999, 0.999999, -0.9999, 1.5, -1.5]),
  ("asin", Tensor.asin, torch.asin, [1.0, -1.0, 0.999999, -0.999, 0.5, 1.5]), ("acos", Tensor.acos, torch.acos, [1.0, -1.0, 0.999999, -0.999, 0.7]),
  ("mish", Tensor.mish, F.mish, [3e38, -3e38, 1e4, -1e4, -100.0, 20.5]),
  ("hardsigmoid_nan", Tensor.hardsigmoid, F.hardsigmoid, [math.nan, 3.0, -3.0, 2.5]),
  ("hardswish_nan", Tensor.hardswish, F.hardswish, [math.nan, 3.0, -3.0, 2.5, -4.0]),
  ("clamp_nan", lambda x: x.clamp(-1, 1), lambda x: x.clamp(-1, 1), [math.nan, 1.0, -1.0, 0.5]),
  ("remainder", lambda x: x % 2.0, lambda x: torch.remainder(x, 2.0), [-4.0, -0.0, 0.0, -1e-30, 3e38, math.inf, math.nan]),
  ("fmod", lambda x: x.fmod(-2.0), lambda x: torch.fmod(x, -2.0), [-4.0, -0.0, 0.0, -1e-30, 3e38, math.inf, math.nan]),
  ("normalize_inf", lambda x: x.normalize(p=math.inf, dim=1), lambda x: F.normalize(x, p=math.inf, dim=1), [[1.0, -3.0, 2.0], [0.5, 0.25, -0.125]]),
  ("normalize_zero_row", lambda x: x.normalize(dim=1), lambda x: F.normalize(x, dim=1), [[0.0, 0.0], [3.0, 4.0]]),
  ("normalize_p3_zero_row", lambda x: x.normalize(p=3, dim=1), lambda x: F.normalize(x, p=3, dim=1), [[0.0, 0.0], [3.0, 4.0]]),
]

@pytest.mark.parametrize("name, ours, theirs, x", EXTREME, ids=[p[0] for p in EXTREME])
def test_extreme_inputs(name, ours, theirs, x):
  with np.errstate(all="ignore"): check(ours, theirs, np.array(x, np.float32), rtol=1e-5, atol=1e-6)

def test_floor_division_family_keeps_pytorchs_signs_and_infinities():
  """remainder, fmod and floor_divide as PyTorch computes them from C's exact fmod: a zero result keeps x's sign (floor
  division's, x / y's), -1e-30 mod 2 rounds to 2 (so -1e-30 // 2 is -1), inf // 2 is nan and -1e-4 // inf is -1."""
  x = np.array([-4.0, 4.0, -0.0, 0.0, -1e-30, 1e-30, math.inf, -1e-4, 1e-4, 0.0, 5.0, 1.0, 1e4], np.float32)
  y = np.array([2.0, -2.0, 3.0, -3.0, 2.0, -2.0, 2.0, math.inf, -math.inf, -math.inf, 0.0, 0.1, 0.999], np.float32)
  for ours, theirs in ((lambda a, b: a % b, torch.remainder), (lambda a, b: a.fmod(b), torch.fmod), (lambda a, b: a // b, torch.floor_divide)):
    got, want = ours(Tensor(x), Tensor(y)).numpy(), theirs(torch.tensor(x), torch.tensor(y)).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))

def test_remainder_by_infinity_and_zero_probabilities():
  """x % +-inf and fmod(x, +-inf) are x (or, for remainder, inf of y's sign where x's sign differs); binary_cross_entropy's
  slope at p = 0 and 1 is PyTorch's clamped (p - t) / max(p (1 - p), 1e-12), not 0 * inf."""
  x = np.array([0.0, 1.0, -5.0, 3.0, math.inf, 2.5], np.float32)
  y = np.array([math.inf, -math.inf, math.inf, -math.inf, math.inf, -1.5], np.float32)
  check(lambda a, b: a % b, torch.remainder, x, y)
  check(lambda a, b: a.fmod(b), torch.fmod, x, y)
  p, t = np.array([0.0, 1.0, 0.0, 1.0, 1e-20, 0.3], np.float32), np.array([0.0, 1.0, 1.0, 0.0, 0.5, 0.2], np.float32)
  check(lambda a: a.binary_cross_entropy(Tensor(t)), lambda a: F.binary_cross_entropy(a, torch.tensor(t)), p)

def test_amax_ties_share_with_self_and_empty_inputs():
  """scatter_reduce amax/amin with include_self: the tied values, self's included, share the gradient evenly (PyTorch's
  rule). Attention over zero keys is zeros; masked_select broadcasts the mask; nonzero and unfold take a 0-d tensor."""
  index = np.array([0, 0, 1, 0])
  for reduce in ("amax", "amin"):
    check(lambda a, b, r=reduce: a.scatter_reduce(0, Tensor(index), b, r), lambda a, b, r=reduce: a.scatter_reduce(0, torch.tensor(index), b, r),
          np.array([1.0, 2.0, 1.0], np.float32), np.array([1.0, 1.0, 5.0, 1.0], np.float32))
  q, kv = rng.standard_normal((2, 3)).astype(np.float32), np.zeros((0, 3), np.float32)
  check(lambda q, k, v: q.scaled_dot_product_attention(k, v), F.scaled_dot_product_attention, q, kv, kv)
  x, mask = np.arange(4, dtype=np.float32), np.array([[1, 0, 1, 1], [0, 1, 0, 0]], bool)
  check(lambda a: a.masked_select(Tensor(mask)), lambda a: a.masked_select(torch.tensor(mask)), x)
  for v in (1.0, 0.0): assert Tensor(np.float32(v)).nonzero().shape == tuple(torch.tensor(v).nonzero().shape)
  assert Tensor(np.float32(2.0)).unfold(0, 1, 1).tolist() == torch.tensor(2.0).unfold(0, 1, 1).tolist()
  m = rng.standard_normal((2, 3)).astype(np.float32)  # empty results still hang from their input: zero gradients
  check(lambda a: a.diagonal(5), lambda a: a.diagonal(5), m)
  check(lambda a: a[:0].logsumexp(0), lambda a: a[:0].logsumexp(0), m)

def test_relu6_keeps_integer_dtypes():
  for dt in (np.int64, np.int32, np.int8, np.uint8):
    x = np.array([0, 2, 9, 6, 7], dt)
    got, want = Tensor(x).relu6(), F.relu6(torch.tensor(x))
    assert got.numpy().dtype == want.numpy().dtype and got.tolist() == want.tolist(), dt

def test_remainder_and_fmod_round_once():
  """x mod y as C's fmod computes it, exactly: r = x - q y with q y taken as two floats, so 1e4 mod 0.999 is 0.0098711,
  not the 0.0097656 that one rounding of q y leaves; fmod is |x| mod |y| with x's sign. Quotients below 2**24 (float32)."""
  gen = np.random.default_rng(3)
  for dt in (np.float32, np.float64):
    x = np.concatenate([gen.uniform(-1e6, 1e6, 4000), gen.standard_normal(500) * 1e-3, [1e4, -1e4, 5.0]]).astype(dt)
    y = np.concatenate([gen.uniform(0.1, 3, 4000) * gen.choice([-1, 1], 4000), gen.standard_normal(500), [0.999, 0.999, -3.0]]).astype(dt)
    for ours, theirs in ((lambda a, b: a % b, torch.remainder), (lambda a, b: a.fmod(b), torch.fmod)):
      np.testing.assert_array_max_ulp(ours(Tensor(x), Tensor(y)).numpy(), theirs(torch.tensor(x), torch.tensor(y)).numpy(), maxulp=1)

def test_fmod_remainder_and_floor_divide_are_exact_for_large_quotients():
  """Quotients |x / y| from 2**-10 to past 2**60 (float32) and 2**98 (float64): fmod and remainder are C's exact ones
  up to there (so equal to PyTorch's), floor division is the exact floor while that is a float (PyTorch's (x - fmod) / y
  rounds from 2**22 on, so it is checked against Python's integers) and within an ulp of it past; gradients as
  PyTorch's. Past the reach: a signed zero for a power-of-two y, nan otherwise (C's stays exact; a wrong remainder
  would be worse)."""
  from fractions import Fraction
  gen = np.random.default_rng(11)
  for dt, reach, tiny in ((np.float32, 60, -45), (np.float64, 98, -320)):
    y = (gen.uniform(1, 2, 3000) * 2.0 ** gen.uniform(tiny, 30, 3000) * gen.choice([-1, 1], 3000)).astype(dt)
    ratio = 2.0 ** gen.uniform(-10, reach + 8, 3000) * gen.choice([-1, 1], 3000)
    x = (y.astype(np.float64) * ratio).astype(dt)
    x[:300] = (y[:300] * np.round(ratio[:300])).astype(dt)  # multiples, rounded: remainders of zero or almost one y
    multiple = np.arange(3000) < 300
    x, y, multiple = x[np.isfinite(x)], y[np.isfinite(x)], multiple[np.isfinite(x)]
    exact = np.abs(x.astype(np.float64) / y.astype(np.float64)) < 2.0 ** reach
    power_of_two = np.frexp(y)[0] == 0.5 * np.sign(y)
    tx, ty = torch.tensor(x), torch.tensor(y)
    for ours, theirs in ((lambda a, b: a.fmod(b), torch.fmod), (lambda a, b: a % b, torch.remainder)):
      got, want = ours(Tensor(x), Tensor(y)).numpy(), theirs(tx, ty).numpy()
      np.testing.assert_array_equal(got[exact], want[exact])
      assert np.isnan(got[~exact & ~power_of_two]).all()
    got = Tensor(x).fmod(Tensor(y)).numpy()
    np.testing.assert_array_equal(got[~exact & power_of_two], np.fmod(x, y)[~exact & power_of_two])  # zeros, with x's sign
    assert np.array_equal(np.signbit(got[~exact & power_of_two]), np.signbit(x[~exact & power_of_two]))
    floors = (Tensor(x[exact]) // Tensor(y[exact])).numpy()
    want = np.array([float(math.floor(Fraction(float(a)) / Fraction(float(b)))) for a, b in zip(x[exact], y[exact])], dt)
    integral = np.abs(want) <= 2.0 ** np.finfo(dt).nmant  # every integer to there is a float: exact; past it, rounded
    np.testing.assert_array_equal(floors[integral], want[integral])
    np.testing.assert_array_max_ulp(floors[~integral], want[~integral], maxulp=1)
    # PyTorch's slope in y is -trunc of the rounded x / y, which can round across an integer next to a multiple
    pick = exact & ~multiple & (np.abs(x.astype(np.float64) / y) < 2.0 ** 20)
    check(lambda a, b: a.fmod(b), torch.fmod, x[pick][:200], y[pick][:200])
    check(lambda a, b: a % b, torch.remainder, x[pick][:200], y[pick][:200])

def test_porting_helpers_match_pytorch(pytorch_ints):
  """allclose (a Python bool), nbytes (a property), is_floating_point, and the dtypes randperm and multinomial give."""
  pairs = [([1.0, 2.0], [1.0, 2.00001]), ([1.0, math.nan], [1.0, math.nan]), ([math.inf], [math.inf]), ([1.0], [1.1]), ([0.0], [1e-9])]
  for a, b in pairs:
    for equal_nan in (False, True):
      assert Tensor(a).allclose(Tensor(b), equal_nan=equal_nan) == torch.allclose(torch.tensor(a), torch.tensor(b), equal_nan=equal_nan)
  for dt, tdt in (("float16", torch.float16), ("int64", torch.int64), ("bool", torch.bool)):
    t, r = Tensor.ones(3, 5, dtype=dt), torch.ones(3, 5, dtype=tdt)
    assert t.nbytes == r.nbytes and t.is_floating_point() == r.is_floating_point()
  assert str(Tensor.randperm(4).dtype).endswith(str(torch.randperm(4).dtype).split(".")[1])
  assert str(Tensor([1.0, 2.0]).multinomial(1).dtype).endswith(str(torch.tensor([1.0, 2.0]).multinomial(1).dtype).split(".")[1])

@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5), (2, 4, 4), (1, 1)])
def test_qr_matches_pytorch(shape):
  """Q and R as torch.linalg.qr gives them (LAPACK's signs), both modes, and the reduced factors' gradient."""
  a = rng.standard_normal(shape).astype(np.float32)
  for mode in ("reduced", "complete"):
    for ours, theirs in zip(Tensor(a).qr(mode), torch.linalg.qr(torch.tensor(a), mode=mode)):
      np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=2e-6)
  a64 = a.astype(np.float64)  # the gradient in float64: the two ways to it (ours through the reflections) round apart
  wq, wr = (rng.standard_normal(f.shape).astype(np.float64) for f in np.linalg.qr(a64))
  def loss(q, r, w=lambda v: v): return (q * w(wq)).sum() + (r * w(wr)).sum()
  check(lambda x: loss(*x.qr(), w=Tensor), lambda x: loss(*torch.linalg.qr(x), w=torch.tensor), a64)

@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (3, 6), (2, 5, 3)])
def test_svd_matches_pytorch(shape):
  """S as torch.linalg.svd's, both modes' shapes, U diag(S) Vh = A; the gradient of S (sign-free, unlike U's and Vh's)
  in float64, where ours (through the Jacobi rotations) and PyTorch's (analytic) agree to rounding."""
  a = rng.standard_normal(shape).astype(np.float32)
  for full in (True, False):
    ours, theirs = Tensor(a).svd(full), torch.linalg.svd(torch.tensor(a), full_matrices=full)
    assert [t.shape for t in ours] == [tuple(t.shape) for t in theirs]
    np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy(), atol=2e-6)
  check(lambda x: x.svd()[1] ** 2 + x.svd()[1], lambda x: torch.linalg.svdvals(x) ** 2 + torch.linalg.svdvals(x), a.astype(np.float64))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_activations_keep_their_precision_near_zero(dt):
  # 2 sigmoid(2x) - 1 cancelled near 0 (tanh(1e-6) was 7% off), log(1 + e^x) and e^x - 1 rounded small terms away
  # (softplus(-20) and elu(-1e-8) were 0), and logsigmoid's softplus cut off at 20 (float64 lost log1p(e^-22)): each is
  # now within 4 ulp of float64 PyTorch, from 1e-30 to 30 on both sides, zeros keeping their sign
  mag = 10.0 ** np.linspace(-30, 1.5, 400)
  x = np.concatenate([mag, -mag, [0.0, -0.0, 0.4999, 0.5, 0.5001, 19.9, 20, 20.1, -20, -31]]).astype(dt)
  ref = torch.tensor(x.astype(np.float64))
  for name, ours, theirs in [("tanh", Tensor.tanh, torch.tanh), ("softplus", Tensor.softplus, F.softplus),
                             ("logsigmoid", Tensor.logsigmoid, F.logsigmoid),
                             ("elu", Tensor.elu, F.elu), ("selu", Tensor.selu, F.selu), ("celu", lambda t: t.celu(0.7), lambda t: F.celu(t, 0.7))]:
    got, want = ours(Tensor(x)).numpy(), theirs(ref).numpy()
    assert got.dtype == dt, name
    ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(dt)).astype(np.float64)
    assert ulps.max() <= 4, f"{name}: {ulps.max():.1f} ulp at x = {x[ulps.argmax()]}"
    assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0])), name

@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_inverse_trigonometry_to_the_dtypes_precision(dt):
  # float64 atan used float32's polynomial (and float32's pi / 4): 4e8 ulp off. Within 4 ulp of PyTorch now, both dtypes
  r = np.random.default_rng(3)
  wide = np.concatenate([r.standard_normal(3000), 10.0 ** r.uniform(-20, 20, 3000) * r.choice([-1, 1], 3000)]).astype(dt)
  unit, other = r.uniform(-1, 1, 3000).astype(dt), r.standard_normal(6000).astype(dt)
  for name, got, want in [("atan", Tensor(wide).atan(), torch.atan(T64 := torch.tensor(wide.astype(np.float64)))),
                          ("asin", Tensor(unit).asin(), torch.asin(torch.tensor(unit.astype(np.float64)))),
                          ("acos", Tensor(unit).acos(), torch.acos(torch.tensor(unit.astype(np.float64)))),
                          ("atan2", Tensor(wide).atan2(Tensor(other)), torch.atan2(T64, torch.tensor(other.astype(np.float64))))]:
    got, want = got.numpy(), want.numpy()
    assert got.dtype == dt, name
    ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(dt)).astype(np.float64)
    assert ulps.max() <= 4, f"{name}: {ulps.max():.1f} ulp"

def test_nan_infinities_signed_zeros_and_promotions_match_pytorch():
  # cases a differential fuzz against PyTorch found
  T = torch.tensor
  def same(ours: Tensor, theirs, rtol=0.0):
    got, want = ours.numpy(), theirs.numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    if got.dtype.kind == "f": assert np.array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0]))
  a, b = np.float32([np.nan, np.inf, -np.inf, 1, -1, 5, -7.5]), np.float32([-3, -2, 3, np.inf, np.inf, 0, 2])
  same(Tensor(a) // Tensor(b), torch.floor_divide(T(a), T(b)))  # inf // y and nan // y are nan, not -1
  same(Tensor(np.float32([1.5])).copysign(Tensor(np.array([-1.0]))), torch.copysign(T([1.5]), T([-1.0], dtype=torch.float64)))  # float64
  i32, f16 = np.int32([1, -2]), np.float16([1, 3])
  for name in ("atan2", "hypot", "logaddexp", "xlogy", "copysign"):  # int32 with float16 is float16
    same(getattr(Tensor(i32), name)(Tensor(f16)), getattr(torch, name)(T(i32), T(f16)), rtol=1e-3)
  i, ti = np.int32([1, 2]), T([1, 2], dtype=torch.int32)
  same(Tensor.einsum("i,i->", Tensor(i), Tensor(i)), torch.einsum("i,i->", ti, ti))  # int32 stays int32
  same(Tensor(np.array([True, False])).square(), T([True, False]).square())  # int64
  same(Tensor(np.array([True, False])).isclose(Tensor(np.array([True, True]))), torch.isclose(T([True, False]), T([True, True])))
  q64 = np.array([3.0, -1.9, 5.5, -4.0, -2.0])
  same(Tensor(q64).quantile(0.3), T(q64).quantile(0.3), rtol=1e-15)  # q in float64, not rounded to float32 first
  same(Tensor(np.float32([1.1, -2, -np.inf, 2.4])).quantile(0.3), T([1.1, -2, -np.inf, 2.4]).quantile(0.3))  # -inf, not nan
  same(Tensor(np.float32(1.0)).quantile([0.5, 0.6], 0, keepdim=True), T(1.0).quantile(T([0.5, 0.6]), 0, keepdim=True))
  start, end = np.float32([1, -np.inf, 0, 2]), np.float32([3, 2, 1, 6])
  same(Tensor(start).lerp(Tensor(end), 0.75), torch.lerp(T(start), T(end), 0.75))
  same(Tensor(np.float32([-0.0, 0.0])) + 0, T([-0.0, 0.0]) + 0)  # -0.0 + 0 is +0.0: x + 0 is not folded to x for floats
  same(0.0 - Tensor(np.float32([0.0])), 0.0 - T([0.0]))
  same(Tensor(np.float32([-0.3, 0.3, -0.5, 2.5, -2.7])).round(), T([-0.3, 0.3, -0.5, 2.5, -2.7]).round())  # round(-0.3) is -0.0
  same(Tensor(np.float32([-1, 5])).clamp(math.nan, 1.0), T([-1.0, 5]).clamp(T(math.nan), T(1.0)))  # a nan bound gives nan
  for y, x in [([0.0, 1.0, -0.0], [2.0, 2.0, 2.0]), ([1.0, -3.0], [0.0, 0.0])]:  # atan2's slopes where y or x is 0 (abs's slope there is 0)
    (ty, py), (tx, px) = leaves(np.float32(y), np.float32(x))
    ty.atan2(tx).sum().backward(); torch.atan2(py, px).sum().backward()
    np.testing.assert_allclose(ty.grad.numpy(), py.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-6)

@pytest.mark.parametrize("device", ["PYTHON", None])  # PYTHON decomposes DIV (isel's scaled reciprocal); the default device may divide natively
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_division_by_tiny_huge_zero_and_infinite_divisors(device, dtype):
  from tinyspec.device import Device
  f = np.finfo(dtype)
  a = np.array([0, 1e-30, 7, -3, 1, f.max, f.tiny, f.smallest_subnormal, 0, 5, np.inf, np.nan, -0.0, 2, 6], dtype)
  b = np.array([f.smallest_subnormal, f.smallest_subnormal, 3, f.max / 4, f.max, 3, f.max, f.smallest_subnormal, 0, -0.0, 2, 1, 1e-30,
                np.inf, 4], dtype)
  dev = device or Device.DEFAULT
  (ta, pa), (tb, pb) = [(Tensor(v, device=dev, requires_grad=True), torch.tensor(v, requires_grad=True))
                        for v in (a, b)]
  got, want = ta / tb, pa / pb
  # a native DIV is correctly rounded, as PyTorch's; a * recip(b) rounds twice, but is never an inf or nan where the
  # quotient is finite (0 / 1e-40 is 0, not 0 * inf)
  rtol = 0 if Ops.DIV in Device[dev].renderer.native else 2 * float(f.eps)
  np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=rtol, atol=0)
  got.sum().backward(); want.sum().backward()  # (g / b, -g (a / b) / b), as PyTorch
  for ours, theirs in ((ta, pa), (tb, pb)): np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=2 * rtol, atol=0)

def test_second_fuzz_round_float16_statistics_dtypes_and_edges_match_pytorch():
  # cases a second differential fuzz against PyTorch found
  import tinyspec.nn as tnn
  T = torch.tensor
  x16 = np.array([[300, -300, 1000, 20]], np.float16)  # a float16 variance of 3e5 overflows: statistics in float32, rounded once
  for ours, theirs in [(Tensor(x16).layer_norm(4), F.layer_norm(T(x16), (4,))), (Tensor(x16).std(), T(x16).std()),
                       (tnn.RMSNorm(4, elementwise_affine=False)(Tensor(x16)), F.rms_norm(T(x16), (4,))),
                       (Tensor(x16).normalize(dim=1), F.normalize(T(x16), dim=1)), (Tensor(x16).norm(3), T(x16).norm(3)),
                       (tnn.GroupNorm(1, 4, affine=False)(Tensor(x16.reshape(1, 4, 1))), F.group_norm(T(x16.reshape(1, 4, 1)), 1)),
                       (Tensor(x16.T).batch_norm(None, None, training=True), F.batch_norm(T(x16.T), None, None, training=True))]:
    assert ours.dtype == dtypes.float16
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=2e-3)
  img = np.array([[[[0.3, 0.7], [1.2, -0.4]]]], np.float16)  # float16 was rounded to integers on the way out
  np.testing.assert_allclose(Tensor(img).interpolate(size=(3, 3), mode="bilinear").numpy(),
                             F.interpolate(T(img), size=(3, 3), mode="bilinear").numpy(), rtol=2e-3)
  q = rng.standard_normal((2, 5, 4)).astype(np.float16)
  assert Tensor(q).scaled_dot_product_attention(Tensor(q), Tensor(q), is_causal=True).dtype == dtypes.float16
  np.testing.assert_array_equal(Tensor(np.zeros((2, 3), np.float32)).index_fill(1, Tensor([-1]), 5.0).numpy(),
                                torch.zeros(2, 3).index_fill(1, T([-1]), 5.0).numpy())  # a negative index counts from the end
  w = np.arange(12, dtype=np.float32).reshape(1, 1, 6, 2)  # ceil_mode fits a window that overhangs the padding
  np.testing.assert_array_equal(Tensor(w).max_pool2d((1, 3), None, (0, 1), (1, 2), ceil_mode=True).numpy(),
                                F.max_pool2d(T(w), (1, 3), None, (0, 1), (1, 2), ceil_mode=True).numpy())
  r = np.float32([1.2345, -2.5, 1234.5, 0.125, 0.15])
  for d in (2, 1, -1): np.testing.assert_allclose(Tensor(r).round(d).numpy(), T(r).round(decimals=d).numpy(), rtol=2.4e-7)  # a decomposed DIV: 2 ulp
  assert Tensor(np.arange(4)).mean(dtype="float64").dtype == dtypes.float64
  check(lambda x: x.median(), lambda x: x.median(), np.float32([0, 2, 1, 1, 5]))  # ties share the median's gradient

def test_third_fuzz_round_attention_masks_and_empty_transposed_convolutions_match_pytorch():
  T = torch.tensor
  q = rng.standard_normal((1, 2, 3, 4)).astype(np.float16)  # a float32 mask of a float16 query: a float16 result
  mask = rng.standard_normal((3, 3)).astype(np.float32)
  ours = Tensor(q).scaled_dot_product_attention(Tensor(q), Tensor(q), attn_mask=Tensor(mask))
  theirs = F.scaled_dot_product_attention(T(q), T(q), T(q), attn_mask=T(mask))
  assert ours.dtype == dtypes.float16
  np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=5e-3, atol=2e-3)
  with pytest.raises(RuntimeError, match="attn_mask must be bool, float32"):  # PyTorch refuses an int mask too
    Tensor(q).scaled_dot_product_attention(Tensor(q), Tensor(q), attn_mask=Tensor(np.zeros((3, 3), np.int32)))
  # slopes at and past the domain's edges: inf at logit's 0 and 1 and erfinv's +-1, nan outside, as PyTorch's
  check(lambda x: x.logit(), torch.logit, np.float32([-0.5, 0.0, 1.0, 0.3, 1.5, np.nan]))
  check(lambda x: x.erfinv(), torch.erfinv, np.float32([-1.0, 1.0, 0.5, 2.0, -0.2]))
  check(lambda x: x.erfinv(), torch.erfinv, np.array([-0.3, 0.5, 0.99, 1 - 1e-10, 1 - 1e-14, -(1 - 2.0 ** -53)]), rtol=1e-12, atol=0)  # float64
  # a transposed convolution whose output has a zero-size axis is empty (and both inputs get zero gradients), as PyTorch's
  check(lambda x, w: x.conv_transpose2d(w, padding=1, dilation=(2, 1)), lambda x, w: F.conv_transpose2d(x, w, padding=1, dilation=(2, 1)),
        np.ones((2, 2, 2, 2), np.float32), np.ones((2, 2, 3, 1), np.float32))

@pytest.mark.parametrize("p", [3.0, 0.5, 1.0, 2.0, math.inf])
def test_norm_and_normalize_slopes_at_zero_elements_and_vectors_match_pytorch(p):
  # sum(|x|^p)^(1/p) has infinite slopes at a zero element (p < 1) and a zero vector (p > 1): PyTorch's are 0 there
  x = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, -2.0], [0.5, -3.0, 0.25]], np.float32)
  check(lambda t: t.norm(p, dim=1), lambda t: torch.linalg.vector_norm(t, p, dim=1), x)
  check(lambda t: t.normalize(p, dim=1), lambda t: F.normalize(t, p, dim=1), x, rtol=1e-5, atol=1e-3)  # 1/eps slopes of the zero row
