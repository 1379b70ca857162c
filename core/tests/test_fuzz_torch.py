"""Findings of the fuzz rounds against PyTorch that no other file's table covers, each a case where tinyspec's value,
gradient, dtype or error differed from PyTorch's on the same data (earlier rounds' findings sit beside the ops in
test_ops_torch.py and test_torch_names.py)."""
import math

import numpy as np
import pytest
from test_ops_torch import check
from tinyspec import Tensor, dtypes

torch = pytest.importorskip("torch")


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
