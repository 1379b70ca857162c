"""tensor/torch_names.py: torch.Tensor's method names, each against the PyTorch method of the same name on the same data,
values and gradients (the table's name is the method called on both sides unless a lambda says otherwise)."""
import math

import numpy as np
import pytest
from test_ops_torch import check
from tinyspec import Tensor, dtypes
from tinyspec.tensor import sorting

torch = pytest.importorskip("torch")
rng = np.random.default_rng(11)

A = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((3, 4)).astype(np.float32)
P = rng.uniform(0.05, 0.95, (3, 4)).astype(np.float32)
SQ = rng.standard_normal((4, 4)).astype(np.float32)
V3, W3 = rng.standard_normal(3).astype(np.float32), rng.standard_normal(4).astype(np.float32)
BATCH1, BATCH2 = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal((2, 5, 4)).astype(np.float32)
T3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
EDGES = np.array([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, 2.5, -2.5, 1e-30, 3e38], np.float32)


def same(name, *args, **kw):
  """The method `name` called with the same extra arguments on both sides."""
  return lambda *xs: getattr(xs[0], name)(*xs[1:], *args, **kw)

CASES = [  # (id, ours, theirs or None for the same call, inputs)
  *[(n, same(n), None, (A,)) for n in ("absolute", "negative", "sgn", "ravel", "t", "fliplr", "flipud", "frac", "deg2rad", "rad2deg", "sinc")],
  *[(n, same(n), None, (A, B)) for n in ("multiply", "true_divide", "subtract", "fmax", "fmin", "logaddexp2", "hypot", "atan2", "arctan2")],
  *[(n, same(n), None, (P,)) for n in ("arccos", "arcsin", "arctan", "arcsinh", "arctanh", "logit")],
  ("arccosh", same("arccosh"), None, (P + 1,)), ("divide_floor", same("divide", rounding_mode="floor"), None, (A, B)),
  ("subtract_alpha", same("subtract", alpha=2.5), None, (A, B)), ("clamp_min", same("clamp_min", 0.1), None, (A,)),
  ("clamp_max", same("clamp_max", 0.1), None, (A,)), ("logit_eps", same("logit", eps=0.2), None, (P,)), ("xlogy", same("xlogy"), None, (A, P)),
  ("xlogy_zeros", same("xlogy"), None, (np.where(A > 0, A, 0).astype(np.float32), P)),
  ("mT", lambda x: x.mT, lambda x: x.mT, (T3,)), ("movedim", same("movedim", (0, 2), (2, 0)), None, (T3,)),
  ("moveaxis", same("moveaxis", 0, -1), None, (T3,)), ("swapaxes", same("swapaxes", 0, 2), None, (T3,)),
  ("unbind", same("unbind", 1), None, (T3,)), ("narrow", same("narrow", 2, -3, 2), None, (T3,)), ("select", same("select", 1, -1), None, (T3,)),
  ("tile", same("tile", (2, 1, 1, 2)), None, (T3,)), ("tile_short", same("tile", (2,)), None, (T3,)),
  ("rot90", same("rot90", 1, (1, 2)), None, (T3,)), ("rot90_k3", same("rot90", -1), None, (T3,)), ("rot90_k2", same("rot90", 2, (0, 2)), None, (T3,)),
  ("diff", same("diff"), None, (T3,)), ("diff_n2_dim0", same("diff", 2, 1), None, (T3,)),
  ("diff_prepend", lambda x, p: x.diff(dim=0, prepend=p), lambda x, p: x.diff(dim=0, prepend=p), (A, B[:1])),
  ("expand_as", lambda x, y: x[:1].expand_as(y), lambda x, y: x[:1].expand_as(y), (A, B)),
  ("view_as", lambda x, y: x.view_as(y), lambda x, y: x.view_as(y), (A, B.reshape(6, 2))),
  ("mm", same("mm"), None, (A, SQ)), ("bmm", same("bmm"), None, (BATCH1, BATCH2)), ("mv", same("mv"), None, (SQ, W3)),
  ("outer", same("outer"), None, (V3, W3)), ("trace", same("trace"), None, (SQ,)),
  ("addmm", same("addmm", beta=0.5, alpha=2.0), None, (A, A, SQ)), ("addmv", same("addmv"), None, (V3, A, W3)),
  ("addr", same("addr", alpha=3), None, (A, V3, W3)), ("baddbmm", same("baddbmm", beta=2), None, (T3, BATCH1, BATCH2)),
  ("addcmul", same("addcmul", value=0.5), None, (A, B, P)), ("addcdiv", same("addcdiv", value=-2), None, (A, B, P)),
  ("amax", same("amax", 1), None, (A,)), ("amin_all", same("amin"), None, (A,)), ("amax_dims", same("amax", (0, 2), keepdim=True), None, (T3,)),
  ("norm", same("norm"), None, (A,)), ("norm_1_dim", same("norm", 1, 1), None, (A,)), ("norm_3", same("norm", 3, 0, True), None, (A,)),
  ("norm_inf", same("norm", math.inf, 1), None, (A,)), ("norm_ninf", same("norm", -math.inf), None, (A,)),
  ("norm_0", lambda x: x.norm(0, 1).detach(), None, (A,)),
  ("median", same("median"), None, (A,)), ("median_dim", same("median", 1), None, (A,)), ("median_dim_keep", same("median", 0, True), None, (T3,)),
]

def ints(x, values):
  """An integer index on x's side: a tinyspec Tensor next to a tinyspec input, a torch tensor (int64) next to a torch one."""
  return Tensor(np.array(values, np.int32)) if isinstance(x, Tensor) else torch.tensor(np.array(values, np.int64))

def floats(x, values):
  return Tensor(np.array(values, np.float32)) if isinstance(x, Tensor) else torch.tensor(np.array(values, np.float32))

IDX = [[2, 0, 1, 1], [0, 2, 2, 1]]  # rows of a (2, 4) index into an axis of 3
CASES += [
  ("scatter_add", lambda x, s: x.scatter_add(0, ints(x, IDX), s), None, (A, B[:2])),
  ("index_add", lambda x, s: x.index_add(1, ints(x, [3, 0, 3]), s, alpha=2), None, (A, B[:, :3])),
  ("index_copy", lambda x, s: x.index_copy(0, ints(x, [2, 0]), s), None, (A, B[:2])),
  ("index_fill", lambda x: x.index_fill(1, ints(x, [1, 3]), -1.5), None, (A,)),
  ("take_along_dim", lambda x: x.take_along_dim(ints(x, [[[0, 2, 1]]]), 2), None, (T3[:, :1, :3],)),
  ("take_along_dim_bcast", lambda x: x.take_along_dim(ints(x, [[[1], [0], [3]]]), 2), None, (T3,)),
  ("take_along_dim_flat", lambda x: x.take_along_dim(ints(x, [5, 0, 11])), None, (A,)),
  ("tensor_split_n", same("tensor_split", 3, 1), None, (rng.standard_normal((2, 7)).astype(np.float32),)),
  ("tensor_split_at", same("tensor_split", [1, 5, 9], 1), None, (rng.standard_normal((2, 7)).astype(np.float32),)),
  ("kron", same("kron"), None, (A[:2, :3], B[:3, :2])), ("kron_ndim", same("kron"), None, (V3, T3)),
  ("cross", same("cross"), same("cross", dim=0), (A[:, :3], B[:, :3])),  # no dim: the first of size 3 (PyTorch's, deprecated there)
  ("cross_dim0", same("cross", dim=0), None, (A, B)), ("cross_last", same("cross", dim=-1), None, (A[:, :3], B[:, :3])),
  ("quantile", same("quantile", 0.3), None, (A,)), ("quantile_dim", lambda x: x.quantile(floats(x, [0.0, 0.25, 1.0]), 1), None, (A,)),
  *[(f"quantile_{m}", lambda x, m=m: x.quantile(floats(x, [0.1, 0.5, 0.75]), 0, True, interpolation=m), None, (T3,))
    for m in ("linear", "lower", "higher", "nearest", "midpoint")],
]

# PyTorch's keyword names for the arguments of tinygrad-named methods: dim for axis (max and min then give (values,
# indices)), unbiased for correction, dims for flip's and permute's axes
CASES += [
  *[(f"{n}_dim", same(n, dim=1), None, (A,)) for n in ("sum", "prod", "mean", "var", "std", "logsumexp", "softmax", "log_softmax",
                                                       "cumsum", "cumprod", "logcumsumexp", "argmax", "argmin", "any", "all")],
  *[(f"{n}_dims_keep", same(n, dim=(0, 2), keepdim=True), None, (T3,)) for n in ("sum", "mean", "var", "std")],
  *[(f"{n}_dim", same(n, dim=-1), None, (T3,)) for n in ("max", "min", "cummax", "cummin")],
  *[(f"{n}_dim", same(n, dim=-1), lambda x, n=n: getattr(torch, n)(x, dim=-1), (T3,)) for n in ("var_mean", "std_mean")],
  ("max_dim_keep", same("max", dim=0, keepdim=True), None, (A,)), ("max_other", same("max"), None, (A, B)), ("min_other", same("min"), None, (A, B)),
  ("min_dim_ties", same("min", dim=1), None, (np.round(A).astype(np.float32),)),
  ("var_unbiased", same("var", 1, unbiased=False), None, (A,)), ("std_unbiased", same("std", dim=0, unbiased=False, keepdim=True), None, (A,)),
  ("std_mean_unbiased", same("std_mean", dim=1, unbiased=False), lambda x: torch.std_mean(x, dim=1, unbiased=False), (A,)),
  ("flip_dims", same("flip", dims=(0, 2)), None, (T3,)), ("permute_dims", same("permute", dims=(2, 0, 1)), None, (T3,)),
]

NANS = np.where(rng.uniform(0, 1, (4, 5)) < 0.3, np.nan, np.round(rng.standard_normal((4, 5)) * 2)).astype(np.float32)
NANS[:, 0] = 1.0  # no row all nan: PyTorch's index there is whichever nan its selection ends on
REPEATS = np.array([[3, 6, 3, 1, 6], [1, 7, 7, 2, 2], [5, 4, 3, 2, 1]], np.float32)  # (kthvalue's index among ties is PyTorch's selection's)
SEQ, SEQ2 = np.array([-1.0, 0.5, 0.5, 2.0, 3.0], np.float32), np.sort(rng.standard_normal((3, 6)).astype(np.float32), -1)
PROBES = np.array([[-2.0, 0.5, 2.5], [3.0, np.nan, 0.0], [np.inf, -np.inf, 1.0]], np.float32)
ints64 = lambda x, values: ints(x, values) if isinstance(x, Tensor) else torch.tensor(values)  # noqa: E731
CASES += [
  ("kthvalue", same("kthvalue", 2, 1), None, (A,)), ("kthvalue_keep", same("kthvalue", 2, 0, True), None, (T3,)),
  ("mode", same("mode"), None, (REPEATS,)), ("mode_dim0_keep", same("mode", 0, True), None, (np.round(T3),)),
  ("mode_ints", same("mode"), None, (REPEATS.astype(np.int32),)),
  ("nanmedian_dim", same("nanmedian", 1), None, (NANS,)), ("nanmedian_keep", same("nanmedian", 0, True), None, (NANS,)),
  ("nanmedian_all", same("nanmedian"), None, (NANS,)), ("nanmedian_no_nan", same("nanmedian", 1), None, (A,)),
  ("aminmax", same("aminmax"), None, (A,)), ("aminmax_dim", same("aminmax", dim=1, keepdim=True), None, (np.round(A),)),
  ("take", lambda x: x.take(ints64(x, [[0, -1], [5, 11]])), None, (A,)),
  ("nextafter", same("nextafter"), None, (np.array([0, 1, -1, 1e-45, 3e38, -0.0, 1, 2], np.float32),
                                           np.array([1, 2, -2, 0, np.inf, -1, 1, -3], np.float32))),  # (slopes at inf, nan: 0 here, 1 there)
]
SEARCHES = [("searchsorted", {}), ("searchsorted_right", {"right": True}), ("searchsorted_side", {"side": "right"}),
            ("searchsorted_int32", {"out_int32": True})]

@pytest.mark.parametrize("name, kw", SEARCHES, ids=[s[0] for s in SEARCHES])
def test_searchsorted_and_bucketize(name, kw):
  for seq, probes in ((SEQ, PROBES), (SEQ2, PROBES), (SEQ, np.float32(0.5))):
    want = torch.searchsorted(torch.tensor(seq), torch.tensor(probes), **kw)
    got = Tensor(seq).searchsorted(Tensor(probes), **kw)
    assert got.shape == tuple(want.shape) and got.dtype == dtypes.int32  # positions are int32 below 2**31 here (PyTorch's int64)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
  shuffled = rng.permutation(SEQ)
  order = np.argsort(shuffled, kind="stable")
  np.testing.assert_array_equal(Tensor(shuffled).searchsorted(Tensor(PROBES), sorter=Tensor(order), **kw).numpy(),
                                torch.searchsorted(torch.tensor(shuffled), torch.tensor(PROBES), sorter=torch.tensor(order), **kw).numpy())
  right = kw.get("right", False) or kw.get("side") == "right"
  np.testing.assert_array_equal(Tensor(PROBES).bucketize(Tensor(SEQ), right=right).numpy(),
                                torch.bucketize(torch.tensor(PROBES), torch.tensor(SEQ), right=right).numpy())

def test_torch_keywords_refuse_the_argument_twice():
  with pytest.raises(TypeError, match="'axis' twice"): Tensor(A).sum(0, dim=1)
  with pytest.raises(TypeError, match="'correction' twice"): Tensor(A).var(0, False, 1, unbiased=True)
  with pytest.raises(TypeError, match="not both"): Tensor(A).max(0, dim=1)
  with pytest.raises(TypeError, match="one tensor"): Tensor(A).min(Tensor(B), 1)
  assert Tensor(A).max(1).shape == (3,)  # tinygrad's axis: the values alone

@pytest.mark.parametrize("name, ours, theirs, arrays", CASES, ids=[c[0] for c in CASES])
def test_against_pytorch(name, ours, theirs, arrays):
  check(ours, theirs or ours, *arrays)

ONE_NAN = np.where(np.eye(3, 4, 1, dtype=bool), np.nan, A)  # one nan in each row (PyTorch's pick among nans is its own)

@pytest.mark.parametrize("select", [False, True], ids=["sort", "radix_select"])
def test_kthvalue_and_medians_by_sort_and_by_selection(select, monkeypatch):
  """kthvalue, median(dim) and nanmedian(dim) select by radix where a sort would be the bitonic network's (forced here):
  values, indices and the slope to the element picked, as PyTorch's; nan counts after every number."""
  if select: monkeypatch.setattr(sorting, "RANK_WORK", 0)
  for name, args, x in (("kthvalue", (2, 1), A), ("kthvalue", (2, 0, True), T3), ("kthvalue", (3, 1), T3),
                        ("kthvalue", (4, 1), ONE_NAN), ("kthvalue", (3, 1), ONE_NAN), ("median", (1,), A),
                        ("median", (0, True), NANS), ("nanmedian", (1,), NANS), ("nanmedian", (0, True), NANS)):
    check(same(name, *args), same(name, *args), x)

def test_edge_values_of_atan2_hypot_sinc_signbit():
  """Signed zeros, infinities and nan in every pairing: C's atan2 values (+-pi at (+-0, -0)), hypot(inf, nan) = inf,
  nextafter's bits."""
  y, x = np.meshgrid(EDGES, EDGES)
  for name in ("atan2", "hypot", "fmax", "fmin", "xlogy"):
    ours, ref = getattr(Tensor(y), name)(Tensor(x)).numpy(), getattr(torch.tensor(y), name)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-6, err_msg=name)
    if name not in ("fmax", "fmin"):  # which zero fmax(-0.0, 0.0) returns IEEE leaves open (PyTorch: the first)
      assert (np.signbit(ours) == np.signbit(ref))[~np.isnan(ref)].all(), name
  np.testing.assert_array_equal(Tensor(y).nextafter(Tensor(x)).numpy(), torch.tensor(y).nextafter(torch.tensor(x)).numpy())  # to the bit
  for dt in (np.float16, np.float64):
    with np.errstate(over="ignore"): yd, xd = y.astype(dt), x.astype(dt)  # 3e38 is inf in float16
    np.testing.assert_array_equal(Tensor(yd).nextafter(Tensor(xd)).numpy(), np.nextafter(yd, xd))
  with_nan = np.array([math.nan, -math.nan, 0.0, -0.0, -3.0], np.float32)
  np.testing.assert_array_equal(Tensor(with_nan).signbit().numpy(), torch.tensor(with_nan).signbit().numpy())
  np.testing.assert_allclose(Tensor(EDGES).sinc().numpy(), torch.tensor(EDGES).sinc().numpy(), rtol=1e-6, atol=1e-7)  # sin(pi) is not 0
  np.testing.assert_array_equal(Tensor([-2, 0, 5], dtype="int32").signbit().numpy(), [True, False, False])
  assert not np.signbit(Tensor([0.0, -0.0]).abs().numpy()).any()  # abs is max(x, -x), and MAX of the two zeros may be either

def test_slopes_at_zero():
  """The Euclidean norm of a zero vector and sinc at 0 have slope 0, as PyTorch's."""
  for ours, theirs in ((lambda t: t.norm(), lambda t: t.norm()), (lambda t: t.sinc().sum(), lambda t: t.sinc().sum())):
    x, tx = Tensor.zeros(3, requires_grad=True), torch.zeros(3, requires_grad=True)
    ours(x).backward(); theirs(tx).backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())

def test_reductions_with_nan():
  x = np.array([[1.0, math.nan, 3.0], [math.nan, math.nan, math.nan], [4.0, 2.0, 5.0]], np.float32)
  for name, kw in (("nansum", {}), ("nansum", {"dim": 1}), ("nanmean", {"dim": 1}), ("nanmean", {}), ("count_nonzero", {"dim": 0})):
    np.testing.assert_allclose(getattr(Tensor(x), name)(**kw).numpy(), getattr(torch.tensor(x), name)(**kw).numpy(), rtol=1e-6, err_msg=name)
  values, indices = Tensor(x).median(1)  # a nan row: the first nan, as torch's
  tv, ti = torch.tensor(x).median(1)
  np.testing.assert_array_equal(values.numpy(), tv.numpy()); np.testing.assert_array_equal(indices.numpy(), ti.numpy())
  for name in ("median", "nanmedian"):  # torch's named pair: .values and .indices
    ours, theirs = getattr(Tensor(x[[0, 2]]), name)(1), getattr(torch.tensor(x[[0, 2]]), name)(1)
    np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
    np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
  assert math.isnan(Tensor(x).median().item()) and math.isnan(torch.tensor(x).median().item())
  np.testing.assert_array_equal(Tensor(x).quantile(0.5, 1).numpy(), torch.tensor(x).quantile(0.5, 1).numpy())
  np.testing.assert_array_equal(Tensor(x).quantile([0.2, 0.9], 0).numpy(), torch.tensor(x).quantile(torch.tensor([0.2, 0.9]), 0).numpy())

def test_shape_helpers_and_new_tensors():
  x = Tensor(A)
  assert x.dim() == x.ndimension() == 2 and x.nelement() == 12
  assert x.type_as(Tensor([1], dtype="int32")).dtype == dtypes.int32
  assert [t.shape for t in x.split_with_sizes([1, 3], 1)] == [(3, 1), (3, 3)]
  np.testing.assert_array_equal(x.index_select(1, Tensor([3, 0, 3])).numpy(), A[:, [3, 0, 3]])
  z, o, f = x.new_zeros(2, 3), x.new_ones((2,), dtype="int32"), x.new_full((2, 2), 7.5)
  assert (z.shape, z.dtype, o.dtype, f.numpy().tolist()) == ((2, 3), dtypes.float32, dtypes.int32, [[7.5, 7.5], [7.5, 7.5]])
  assert x.new_tensor([1, 2]).dtype == dtypes.float32 and x.new_empty(4).shape == (4,)
  b = Tensor([True, False, False, True])
  np.testing.assert_array_equal(b.diff().numpy(), torch.tensor([True, False, False, True]).diff().numpy())

@pytest.mark.parametrize("call, message", [
  (lambda: Tensor(T3).t(), r"t: expects a tensor with <= 2 dimensions, got shape \(2, 3, 4\)"),
  (lambda: Tensor(A).mm(Tensor(T3)), r"mm: expected a 2-D tensor, got shape \(2, 3, 4\)"),
  (lambda: Tensor(BATCH1).bmm(Tensor(BATCH2[:1])), r"bmm: batch sizes differ"),
  (lambda: Tensor(A).narrow(1, 3, 2), r"narrow: start 3 and length 2 are out of range for dim 1 of shape \(3, 4\)"),
  (lambda: Tensor(A).index_select(0, Tensor([[0]])), r"index_select: index must be a 0-d or 1-d integer tensor"),
  (lambda: Tensor(T3).movedim((0, 1), 2), r"movedim: source \(0, 1\) and destination 2 must be as many distinct dims"),
  (lambda: Tensor(A).rot90(1, (1, 1)), r"rot90: dims must be two different axes"),
  (lambda: Tensor(T3).rot90(1, (0, 1, 2)), r"rot90: dims must be two different axes, got \(0, 1, 2\)"),
  (lambda: Tensor(A).norm("nuc"), r"norm: p must be a number or 'fro', got 'nuc'"),
  (lambda: Tensor([1, 2]).nanmean(), r"nanmean: expected a floating point tensor, got dtypes.int32"),
  (lambda: Tensor(A).index_add(0, Tensor([0]), Tensor(B)), r"index_add: source must have shape \(1, 4\) \(1 indices along dim 0"),
  (lambda: Tensor(A[:2]).cross(Tensor(B[:2])), r"cross: no dimension of size 3 in shape \(2, 4\)"),
  (lambda: Tensor(A).cross(Tensor(B), dim=1), r"cross: no dimension of size 3 at dim 1 of shape \(3, 4\)"),
  (lambda: Tensor(A).quantile(1.5), r"quantile: q must be in \[0, 1\], got 1.5"),
  (lambda: Tensor(A).quantile(0.5, interpolation="cubic"), r"quantile: interpolation must be"),
  (lambda: Tensor(A).tensor_split(0), r"tensor_split: the number of sections must be positive, got 0"),
])
def test_bad_calls_name_the_problem(call, message):
  with pytest.raises((RuntimeError, IndexError, ValueError), match=message): call()

def test_special_functions_match_pytorch():
  """erfc, erfinv, lgamma and digamma over a wide range (PyTorch's float32 values, to float32 accuracy: erfc relative
  even in its tail, lgamma 1e-6 absolute where it crosses 0), their values at poles, infinities and nan exactly, and
  their gradients away from the poles. (Subnormal results have too few digits for a relative tolerance.)"""
  gen = np.random.default_rng(5)
  x = np.concatenate([gen.uniform(-12, 12, 3000), gen.uniform(0, 3, 1000), 10 ** gen.uniform(-5, 30, 200)]).astype(np.float32)
  u = np.concatenate([gen.uniform(-1, 1, 2000), 1 - 10 ** gen.uniform(-7, -1, 200)]).astype(np.float32)
  edges = np.array([0.0, -0.0, 1.0, 2.0, -1.0, -3.0, math.inf, -math.inf, math.nan, 1e-30, -1e-30, 8.0, 0.5, -30.5, 1e20], np.float32)
  for name, data, atol in (("erfc", x, 1e-43), ("lgamma", x, 1e-6), ("digamma", x, 1e-6), ("erfinv", u, 0.0)):  # erfc: subnormals
    got, want = getattr(Tensor(data), name)().numpy(), getattr(torch, name)(torch.tensor(data)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=atol, err_msg=name)
    edge = np.concatenate([edges, [1.0, -1.0, 1.5]]).astype(np.float32)
    got, want = getattr(Tensor(edge), name)().numpy(), getattr(torch, name)(torch.tensor(edge)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=atol, err_msg=name)
  away = x[(np.abs(x - np.round(x)) > 0.05) & (np.abs(x) < 1e4)][:600]  # PyTorch's float32 trigamma is off near poles
  for name in ("erfc", "lgamma", "digamma"): check(getattr(Tensor, name), getattr(torch, name), away)
  check(Tensor.erfinv, torch.erfinv, u[np.abs(u) < 0.999999])

def test_lgamma_and_digamma_in_float64_to_its_precision():
  """float64 lgamma and digamma as PyTorch's to 1e-13 (lgamma's series near 1 and Stirling's, digamma's asymptotic series,
  all carried to float64's precision: lgamma was 1e-9 off between its poles)."""
  gen = np.random.default_rng(6)
  x = np.concatenate([gen.uniform(-12, 12, 2000), gen.uniform(0, 3, 1000), 10 ** gen.uniform(-5, 30, 200)])
  x = x[np.abs(x - np.round(x)) > 1e-3]  # off the poles, where PyTorch's digamma loses digits to its own reflection
  for name in ("lgamma", "digamma"):
    got, want = getattr(Tensor(x), name)().numpy(), getattr(torch, name)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13, err_msg=name)

def test_bincount_histc_and_float_power_match_pytorch(pytorch_ints):
  """bincount (counts, float and int weights, minlength, empty), histc (values on and between its bin edges, integer
  data, the data's own range, values outside and nan) exactly as PyTorch's, in float32 and float64; float_power's
  values, dtype and gradient; and the errors for bad input."""
  gen = np.random.default_rng(9)
  x = gen.integers(0, 12, 200)
  for w in (None, gen.standard_normal(200).astype(np.float32), gen.integers(-3, 3, 200)):
    for minlength in (0, 20):
      got = Tensor(x).bincount(None if w is None else Tensor(w), minlength=minlength)
      want = torch.tensor(x).bincount(None if w is None else torch.tensor(w), minlength=minlength)
      assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
      np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
  assert Tensor(np.array([], np.int64)).bincount().numpy().shape == (0,)
  for bad in (np.array([1, -1]), np.array([[1]]), np.array([1.5], np.float32)):
    with pytest.raises(RuntimeError, match="bincount"): Tensor(bad).bincount()
  for _ in range(60):
    bins, lo = int(gen.integers(1, 40)), float(np.float32(gen.uniform(-5, 1)))
    hi = float(np.float32(lo + gen.uniform(0.1, 10)))
    v = np.concatenate([gen.uniform(lo - 1, hi + 1, 300), lo + (hi - lo) * np.arange(bins + 1) / bins, [np.nan, np.inf, -np.inf]])
    for dt in (np.float32, np.float64):
      np.testing.assert_array_equal(Tensor(v.astype(dt)).histc(bins, lo, hi).numpy(), torch.histc(torch.tensor(v.astype(dt)), bins, lo, hi).numpy())
    lo_i = int(gen.integers(-50, 10))
    hi_i = lo_i + int(gen.integers(1, 200))
    k = int(gen.integers(1, hi_i - lo_i + 1))
    ints = np.arange(lo_i, hi_i + 1).astype(np.float32)
    np.testing.assert_array_equal(Tensor(ints).histc(k, lo_i, hi_i).numpy(), torch.histc(torch.tensor(ints), k, lo_i, hi_i).numpy())
  for v in (np.array([1.0, 2, 1, 2.5, 7, -1], np.float32), np.array([2.0, 2.0], np.float32), np.array([], np.float32)):
    np.testing.assert_array_equal(Tensor(v).histc(3).numpy(), torch.histc(torch.tensor(v), 3).numpy())
  for bad, args in (([1.0], (3, 2.0, 1.0)), ([1.0, math.nan], (3,)), ([1.0, math.inf], (3,)), ([1.0], (0,))):
    with pytest.raises(RuntimeError, match="histc"): Tensor(bad).histc(*args)
    with pytest.raises(RuntimeError): torch.histc(torch.tensor(bad), *args)
  assert Tensor([2, 3]).float_power(2).dtype == dtypes.float64
  check(lambda a, b: a.float_power(b), lambda a, b: a.float_power(b), P, B)
