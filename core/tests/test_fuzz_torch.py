"""Findings of the fuzz rounds against PyTorch that no other file's table covers, each a case where tinyspec's value,
gradient, dtype or error differed from PyTorch's on the same data (earlier rounds' findings sit beside the ops in
test_ops_torch.py and test_torch_names.py)."""
import math

import numpy as np
import pytest
from test_ops_torch import check
from tinyspec import Tensor, dtypes

torch = pytest.importorskip("torch")
F = torch.nn.functional


def test_fmax_fmin_give_a_tie_wholly_to_self_as_pytorch():
  # maximum shares a tie's gradient between its operands; fmax and fmin give it all to self (and a both-nan place too)
  x = np.float32([1.0, 2.0, math.nan, 3.0, math.nan, -0.5])
  y = np.float32([1.0, 5.0, 1.0, math.nan, math.nan, -0.5])
  check(lambda a, b: a.fmax(b), torch.fmax, x, y)
  check(lambda a, b: a.fmin(b), torch.fmin, x, y)
  check(lambda a, b: a.maximum(b), torch.maximum, x[[0, 1, 5]], y[[0, 1, 5]])


def test_median_of_an_empty_tensor_is_nan_as_pytorch():
  check(lambda a: a.median(), lambda a: a.median(), np.zeros((0, 3), np.float32))
  with pytest.raises(IndexError, match="empty int32 tensor"):  # PyTorch returns an arbitrary integer there
    Tensor.zeros(0, dtype=dtypes.int32).median()


def test_cat_skips_a_legacy_empty_1d_operand_as_pytorch():
  e, m = np.zeros((0,), np.float32), np.ones((2, 3), np.float32)
  check(lambda a, b: Tensor.cat(a, b, dim=1), lambda a, b: torch.cat([a, b], dim=1), e, m)
  check(lambda a, b, c: a.cat(b, c, dim=-2), lambda a, b, c: torch.cat([a, b, c], dim=-2), m, e, m)
  check(lambda a, b: a.cat(b), lambda a, b: torch.cat([a, b]), e, e)  # all 1-d: an ordinary cat
  mixed = Tensor.cat(Tensor.zeros(0), Tensor.ones(2, 2, dtype=dtypes.int32))
  assert mixed.dtype == dtypes.float32 and mixed.shape == (2, 2)  # the skipped operand still takes part in the dtype
  with pytest.raises(RuntimeError, match="must match except in dimension"):  # skipped only beside other ranks
    Tensor.cat(Tensor.zeros(0, 2), Tensor.ones(2, 3))


@pytest.mark.parametrize("dim", [None, 0, -1])
def test_unique_matches_pytorch(dim):
  rng = np.random.default_rng(3)
  for a in [np.float32([[3.0, 1.0, math.nan], [1.0, 3.0, math.nan], [3.0, 1.0, math.nan]]), rng.integers(0, 3, (6, 2)),
            np.array([True, False, True]), np.float32([0.0, -0.0, 2.0, 2.0]), np.zeros((0, 2), np.float32)]:
    if dim is not None and a.size == 0 and a.shape[dim] != 0:  # slices empty in another axis cannot be told apart: both refuse
      with pytest.raises(RuntimeError, match="unique"): torch.unique(torch.tensor(a), dim=dim)
      with pytest.raises(RuntimeError, match="cannot be told apart"): Tensor(a).unique(dim=dim)
      continue
    ours = Tensor(a).unique(return_inverse=True, return_counts=True, dim=dim)
    theirs = torch.unique(torch.tensor(a), return_inverse=True, return_counts=True, dim=dim)
    for o, t in zip(ours, theirs):
      assert o.shape == tuple(t.shape)
      np.testing.assert_array_equal(o.numpy(), t.numpy())  # nan at the same places: each nan is its own value
    assert ours[0].dtype.name == str(theirs[0].dtype).removeprefix("torch.")
  assert Tensor([2, 1, 2]).unique().tolist() == [1, 2]


def test_fourth_round_pointwise_values_match_pytorch():
  """Signed >> past the width, copysign of uint8 by a negative Python scalar, isclose of ints far apart, hardtanh of ints,
  celu near float32's max, a truncating float16 division by a scalar past its range, sign of nan."""
  i32 = np.array([-100, -1, 100, -8], np.int32)
  amounts = np.int32([32, -1, -1, 2])
  np.testing.assert_array_equal((Tensor(i32) >> Tensor(amounts)).numpy(), (torch.tensor(i32) >> torch.tensor(amounts)).numpy())
  np.testing.assert_array_equal((Tensor(np.int8([-8, 8])) >> 300).numpy(), [-1, 0])
  assert Tensor(np.uint8([3])).copysign(-1).tolist() == [-3.0]
  a, b = np.int8([-128, -1, 5]), np.int8([0, 127, 5])
  np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b)).numpy(), torch.isclose(torch.tensor(a), torch.tensor(b)).numpy())
  ht = Tensor(np.int32([-5, 0, 1, 5])).hardtanh(-2.0, 0.5)
  assert ht.dtype == dtypes.int32 and ht.tolist() == F.hardtanh(torch.tensor([-5, 0, 1, 5]), -2.0, 0.5).tolist()
  check(lambda x: x.celu(0.5), lambda x: F.celu(x, 0.5), np.float32([3e38, -1.0, 0.0, 2.0]))
  half = np.float16([np.inf, 3000.0, -7.0])
  np.testing.assert_array_equal(Tensor(half).div(1e10, rounding_mode="trunc").numpy(), torch.tensor(half).div(1e10, rounding_mode="trunc").numpy())
  check(lambda x: x.sign(), torch.sign, np.float32([math.nan, -1.0, 0.0, -0.0, 2.0, math.inf]))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fourth_round_half_precision_ops_compute_in_float32(dtype):
  """gelu (tanh), sinc, logaddexp(2), lerp, round(decimals) and logit of float16 and bfloat16 in float32, rounded once,
  as PyTorch's opmath: within an ulp of PyTorch's (logit's log may round the other way), where the half computation was
  off by up to 60% (and lerp and round(2) overflowed)."""
  tdt = getattr(torch, dtype)
  x = torch.tensor([-3.0, -2.5, -0.7, 0.0, 1.0, 2.0, 3.0, 100.0]).to(tdt)
  y = torch.tensor([-0.7, 1.0, -0.7, 5.0, -3.0, 2.0, 0.5, -60000.0 if dtype == "float16" else -1e30]).to(tdt)
  def ours(t): return Tensor(t.float().numpy()).cast(getattr(dtypes, dtype))
  cases = [(ours(x).gelu(approximate="tanh"), F.gelu(x, approximate="tanh")), (ours(x).sinc(), torch.sinc(x)),
           (ours(x).logaddexp(ours(y)), torch.logaddexp(x, y)), (ours(x).logaddexp2(ours(y)), torch.logaddexp2(x, y)),
           (ours(x).lerp(ours(y), 0.75), torch.lerp(x, y, 0.75)), (ours(x * 10).round(2), torch.round(x * 10, decimals=2)),
           (ours(x.sigmoid()).logit(), torch.logit(x.sigmoid()))]
  for o, t in cases:
    assert o.dtype.name == dtype
    np.testing.assert_allclose(o.cast(dtypes.float32).numpy(), t.float().numpy(), rtol=2.0 ** -10 if dtype == "float16" else 2.0 ** -7, atol=0)


def test_fourth_round_slopes_match_pytorch():
  """float64 erfinv's slope at 0, xlogy's in x where x = 0 and y <= 0, sinc's near 0 (its series: the quotient's slope
  cancels), hypot's in the finite operand beside an infinite one, logaddexp at float32's max, sign's (0, nan included)."""
  check(lambda x: x.erfinv(), torch.erfinv, np.float64([0.0, -0.0, 1e-3, 0.3, -0.7]), rtol=1e-12, atol=0)
  check(lambda x, y: x.xlogy(y), torch.xlogy, np.float32([0, 0, 0, 2, 1]), np.float32([1.0, -1.0, 2.0, 3.0, 0.5]))
  x = Tensor(np.float32([0.0, 0.0]), requires_grad=True)
  x.xlogy(Tensor(np.float32([0.0, -1.0]))).sum().backward()
  assert x.grad.tolist() == [0.0, 0.0]  # PyTorch's; log(0)'s -inf times the untaken branch's 0 was nan
  check(lambda x: x.sinc(), torch.sinc, np.float64([0.0, 1e-3, 0.2, -0.3, 0.5, 2.0]), rtol=1e-9, atol=1e-12)
  s = Tensor(np.float64([1e-6, 1e-30]), requires_grad=True)
  s.sinc().sum().backward()  # -pi^2 x / 3 near 0, where PyTorch's own slope cancels (7e-6 off at 1e-6, 0 at 1e-30)
  np.testing.assert_allclose(s.grad.numpy(), [-math.pi ** 2 * 1e-6 / 3, -math.pi ** 2 * 1e-30 / 3], rtol=1e-12)
  check(lambda x: x.sinc(), torch.sinc, np.float32([0.0, 0.2, -0.3, 0.5, 2.0]))
  h = Tensor(np.float32([1.0, 3.0]), requires_grad=True)
  h.hypot(Tensor(np.float32([math.inf, 4.0]))).sum().backward()
  np.testing.assert_allclose(h.grad.numpy(), [0.0, 0.6])
  check(lambda x, y: x.logaddexp(y), torch.logaddexp, np.float32([3e38, 1.0]), np.float32([3e38, 1.0]))
  check(lambda x: x.sign() * 3, lambda x: x.sign() * 3, np.float32([math.nan, -2.0, 0.0, 5.0]))


def test_fourth_round_reductions_and_new_ops_match_pytorch():
  """median of infinities (inf - inf was nan), the inf-norms' slopes shared by tied maxima over an int dim, and
  nan_to_num, heaviside and positive, which were missing."""
  for a in (np.float32([1.0, math.inf, math.inf]), np.float32([-math.inf, -math.inf, 0.0]), np.float32([1.0, 2.0, 2.0, 3.0])):
    check(lambda x: x.median(), lambda x: x.median(), a)
  for p in (math.inf, -math.inf):
    check(lambda x, p=p: x.norm(p, 0), lambda x, p=p: torch.linalg.vector_norm(x, p, 0), np.float32([[2.0, 1.0], [-2.0, 1.0]]))
  edges = np.float32([math.nan, math.inf, -math.inf, 1.5, -0.0, 0.0, -2.0])
  check(lambda x: x.nan_to_num(), lambda x: x.nan_to_num(), edges)
  check(lambda x: x.nan_to_num(1.0, 7.0, -9.0), lambda x: x.nan_to_num(1.0, 7.0, -9.0), edges)
  for name in ("float16", "bfloat16", "float64"):
    ours = Tensor(edges).cast(getattr(dtypes, name)).nan_to_num().cast(dtypes.float64).numpy()
    np.testing.assert_array_equal(ours, torch.tensor(edges).to(getattr(torch, name)).nan_to_num().double().numpy())
  np.testing.assert_array_equal(Tensor(edges).heaviside(Tensor(np.full(7, 0.5, np.float32))).numpy(),
                                torch.heaviside(torch.tensor(edges), torch.full((7,), 0.5)).numpy())
  assert Tensor(np.int32([-2, 0, 3])).heaviside(7).tolist() == [0, 7, 1]
  assert Tensor([1.0, -2.0]).positive().tolist() == [1.0, -2.0]
  with pytest.raises(RuntimeError, match="bool"): Tensor([True]).positive()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fmod_remainder_floor_divide_at_the_ends_of_the_range_match_pytorch(dtype):
  """An x smaller than y is its own remainder however far apart they are (1 % 3e38, 0 % 1e-300 were nan, 0 // -1e38
  was -1), a y near the top of the range no longer overflows a split (3e38 % 4e37 was nan), and a float64 y scaled up
  from below the normal range is scaled by a float64 power of two (it was a float32 inf)."""
  big = 3e38 if dtype == np.float32 else 1e308
  tiny = 1e-40 if dtype == np.float32 else 1e-300
  x = dtype([1.0, -5.0, 0.0, -0.0, big, big, tiny, -7.3 * tiny, 0.0, 2.5 * tiny])
  y = dtype([big, 2.0 ** 120, -big, 1e38, big / 7.5, big / 1e17, big, tiny, tiny, tiny])  # quotients within fmod's reach
  for ours, theirs in ((lambda a, b: a.fmod(b), torch.fmod), (lambda a, b: a % b, torch.remainder)):
    check(ours, theirs, x, y, rtol=0, atol=0)
  got, want = (Tensor(x) // Tensor(y)).numpy(), torch.floor_divide(torch.tensor(x), torch.tensor(y)).numpy()
  np.testing.assert_array_equal(got[:6], want[:6])
  np.testing.assert_array_equal(np.signbit(got[:6]), np.signbit(want[:6]))  # the zero quotients' signs


def test_float32_std_past_a_variance_of_3e38_matches_pytorch():
  # the variance overflows float32 from deviations of about 1e19, the deviation itself does not (PyTorch sums in float64)
  x = np.float32([[1e20, -1e20, 3.0], [2e19, 1.0, 0.5], [1.0, 2.0, 4.0]])
  check(lambda a: a.std(1), lambda a: a.std(1), x)
  check(lambda a: a.std(), lambda a: a.std(), x)
  check(lambda a: a.std_mean(0)[0], lambda a: torch.std_mean(a, 0)[0], x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_digamma_near_zero_matches_pytorch(dtype):
  # -1/x - gamma below 2**-30: float32's digamma(2**-128) is -inf (it was float32's max, from pi x rounded), slopes 1/x^2
  x = dtype([2.0 ** -128, -2.0 ** -128, 3e-39, 1e-38, 1e-9, -1e-9, 2.0 ** -29, 2.0 ** -31, 0.3])
  check(lambda a: a.digamma(), torch.digamma, x)


def test_copysign_gives_the_sign_tensor_a_zero_gradient_as_pytorch():
  # y only picks the sign: its gradient is zeros, not None (backward from an int x's copysign raised "does not require grad")
  y = np.float32([-1.0, 2.0, -0.0, math.nan, -math.inf, 0.0])
  check(lambda a, b: a.copysign(b), torch.copysign, np.float32([1.0, -2.0, 0.0, -0.0, 3.0, 7.0]), y)
  check(lambda a, b: a.copysign(b), torch.copysign, np.int32([1, -2, 0, 0, 5, 7]), y)


def test_median_of_nans_passes_its_slope_to_the_nans_as_pytorch():
  # all of a nan median's slope goes to the nans: shared by all of them without dim, to the first one (its index) with dim
  for a in ([math.nan, 1.0, math.nan], [[1.0, 3.0, 2.0], [math.nan, 2.0, math.nan]], [2.0, 2.0, 1.0]):
    check(lambda x: x.median(), lambda x: x.median(), np.float32(a))
    check(lambda x: x.median(-1), lambda x: tuple(x.median(-1)), np.float32(a))


def test_a_bool_tensor_with_an_int_past_int32_takes_int64_as_pytorch():
  # it took the default int, int32, and wrapped the scalar: mask + 2**40 was [1, 0] and mask < 2**40 all False
  m = np.array([True, False])
  for op in (lambda a: a + 2**40, lambda a: a * -(2**40), lambda a: a | 2**40, lambda a: a < 2**40, lambda a: a == 2**40):
    ours, theirs = op(Tensor(m)), op(torch.tensor(m))
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.") and ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_truncating_division_of_half_tensors_rounds_the_quotient_first_as_pytorch(dtype):
  # 1.5 / 0.3 in float16 is 4.9992 in float32, 5.0 once rounded: PyTorch truncates the rounded quotient
  a, b = (torch.tensor(v, dtype=getattr(torch, dtype)) for v in ([1.5, 3.0, 0.9, 7.0, -1.5, 6e4], [0.3, 0.3, 0.3, 0.3, 0.3, 0.5]))
  ours = Tensor(a.float().numpy()).cast(dtype).div(Tensor(b.float().numpy()).cast(dtype), rounding_mode="trunc")
  np.testing.assert_array_equal(ours.float().numpy(), a.div(b, rounding_mode="trunc").float().numpy())


@pytest.mark.parametrize("lambd", [0.5, 0.0])
def test_shrinks_and_unary_plus_match_pytorch(lambd):
  x = np.float32([-1.0, -0.5, -0.3, 0.0, 0.5, 0.7, math.nan, math.inf, -math.inf])  # slopes 0 at +-lambd, 1 at nan
  check(lambda a: a.hardshrink(lambd), lambda a: F.hardshrink(a, lambd), x)
  check(lambda a: a.softshrink(lambd), lambda a: F.softshrink(a, lambd), x)
  check(lambda a: +a, lambda a: +a, x)
