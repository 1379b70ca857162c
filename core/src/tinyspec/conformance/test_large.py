"""Tensors past 2**24 elements, where a float32 index or counter can no longer count one by one and a 32-bit byte offset
is near its end: elementwise ops, reductions and addressing the last elements."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check

N = 2 ** 24 + 2  # the last index, 2**24 + 1, is not a float32

@pytest.fixture(scope="module")
def big() -> np.ndarray:
  x = (np.arange(N, dtype=np.int64) % 4099 - 2049).astype(np.float32)  # every element known, none equal to its neighbours
  x[-1] = 5000.0
  return x

def test_elementwise(dev, big):
  got = (Tensor(big, device=dev) * 2 + 1).numpy()
  np.testing.assert_array_equal(got, big * 2 + 1)

def test_sum_and_max(dev, big):
  t = Tensor(big, device=dev)
  s, m = t.sum(), t.max()
  Tensor.realize(s, m)
  assert s.item() == pytest.approx(float(big.astype(np.float64).sum()), rel=1e-3, abs=1e3) and m.item() == 5000.0

def test_sum_is_exact_where_it_can_be(dev):
  ones = Tensor.ones(N, dtype=dtypes.int32, device=dev)
  check(ones.sum(), np.array(N, np.int64))  # int32 input, int64 sum: every element counted
  x = np.zeros(N, np.float32)
  x[[0, 2 ** 24, N - 1]] = [1.0, 2.0, 4.0]
  check(Tensor(x, device=dev).sum(), np.array(7.0, np.float32))  # the elements past 2**24 are reached

def test_long_float_sums_are_accurate(dev, big):
  """A long float sum is a tree of blocks (rangeify's split_long_sums), not one chain of additions: exact where every
  partial sum is representable (one chain of 10**8 float32 ones stops counting at 2**24), close on random values."""
  assert Tensor.ones(10_000, 10_000, device=dev).sum().item() == 100_000_000
  assert Tensor.ones(N, device=dev).sum().item() == N
  x = np.random.default_rng(0).random(N).astype(np.float32)
  want = x.astype(np.float64).sum()
  assert abs(Tensor(x, device=dev).sum().item() - want) / want <= 1e-6
  assert Tensor(big, device=dev).reshape(2, N // 2).sum(1).numpy() == pytest.approx(big.astype(np.float64).reshape(2, N // 2).sum(1), rel=1e-6)

def test_addressing_the_end(dev, big):
  t = Tensor(big, device=dev)
  check(t[N - 1], np.array(5000.0, np.float32))
  check(t[2 ** 24 - 1:], big[2 ** 24 - 1:])
  check(t.flip(0)[:3], big[::-1][:3])
  check(t.reshape(2, N // 2)[:, -2:].contiguous(), big.reshape(2, N // 2)[:, -2:])
