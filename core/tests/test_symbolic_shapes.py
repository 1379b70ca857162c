"""Symbolic shapes at the Tensor level: binding a variable, where a bound one may stand, the errors for what it may not, and
one compile (and one schedule) serving every value of the variable. The values on each device: conformance/test_symbolic.py."""
import numpy as np
import pytest
from tinyspec import Tensor, TinyJit, dtypes
from tinyspec.engine.realize import stats
from tinyspec.uop.uop import UOp

N = UOp.variable("n", 1, 16)


def test_bind_checks_the_variable_and_the_value():
  n = N.bind(5)
  assert n.bound_value == 5 and n.unbind() is N and N.bound_value is None and n.vmin == 1 and n.vmax == 16
  assert N.bind(5) is n  # hash-consed: one node per value
  with pytest.raises(ValueError, match=r"n takes an int in \[1, 16\], got 17"): N.bind(17)
  with pytest.raises(ValueError, match="takes an int"): N.bind(2.5)
  with pytest.raises(ValueError, match="already bound to 5"): n.bind(6)
  with pytest.raises(TypeError, match="only a variable"): UOp.const(3).bind(3)

def test_shape_entries_must_be_bound_non_negative_sizes():
  with pytest.raises(TypeError, match="n has none"): Tensor.empty(N, 2)
  with pytest.raises(TypeError, match="non-negative index scalar"): Tensor.zeros(UOp.variable("m", -3, 3).bind(1))
  with pytest.raises(TypeError, match="non-negative index scalar"): Tensor.ones(UOp.variable("f", 0, 3, dtypes.int32).bind(1))

def test_one_variable_one_value_per_computation():
  a, b = Tensor.ones(N.bind(3)), Tensor.ones(N.bind(4))
  with pytest.raises(RuntimeError, match="do not broadcast"): a + b
  with pytest.raises(ValueError, match="n is bound to both 3 and 4"): (a.sum() + b.sum()).numpy()

def test_shapes_print_with_their_values():
  t = Tensor.empty(N.bind(5) * 2, 3)
  assert repr(t.shape) == "((n=5*2), 3)" and t.numpy().shape == (10, 3)

def test_methods_taking_shapes_accept_a_bound_variable():
  a = np.arange(64, dtype=np.float32).reshape(16, 4)
  t = Tensor(a).realize()
  for k in (2, 7, 16):
    n = N.bind(k)
    assert Tensor.empty(n, 4).numpy().shape == (k, 4)
    np.testing.assert_array_equal(Tensor.zeros(n).numpy(), np.zeros(k))
    np.testing.assert_array_equal(Tensor.ones(2, n).numpy(), np.ones((2, k)))
    np.testing.assert_array_equal(Tensor.full((n,), 3, dtype=dtypes.int32).numpy(), np.full(k, 3))
    assert Tensor.rand(n, 2).numpy().shape == (k, 2)
    np.testing.assert_array_equal(t.shrink(((0, n), None)).numpy(), a[:k])
    np.testing.assert_array_equal(t[1:n].numpy(), a[1:k])
    np.testing.assert_array_equal(t[:n].reshape(n * 4).numpy(), a[:k].reshape(-1))
    if k % 2 == 0: np.testing.assert_array_equal(t[:n].reshape(2, -1).numpy(), a[:k].reshape(2, -1))
    np.testing.assert_array_equal(t[:n].pad(((0, 16 - n), (1, 0))).numpy(), np.pad(a[:k], ((0, 16 - k), (1, 0))))
    np.testing.assert_array_equal(Tensor.ones(1, 4).expand(n, 4).numpy(), np.ones((k, 4)))
    np.testing.assert_allclose(t[:n].mean(0).numpy(), a[:k].mean(0), rtol=1e-6)
    np.testing.assert_allclose(t[:n].var(0).numpy(), a[:k].var(0, ddof=1) if k > 1 else np.full(4, np.nan), rtol=1e-5)

def test_kernels_compile_once_for_every_value():
  t = Tensor(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)).realize()
  def f(k: int) -> np.ndarray: return (t[:N.bind(k)] * 3).softmax(0).numpy()
  f(5)
  compiled, schedules = stats["kernels_compiled"], stats["schedules_built"]
  for k in (1, 9, 16):
    e = np.exp(3 * t.numpy()[:k] - (3 * t.numpy()[:k]).max(0))
    np.testing.assert_allclose(f(k), e / e.sum(0), rtol=1e-5)
  assert (stats["kernels_compiled"], stats["schedules_built"]) == (compiled, schedules)

def test_slice_with_a_symbolic_bound_takes_no_step_or_negative_bound():
  t = Tensor(np.arange(8, dtype=np.float32))
  with pytest.raises(IndexError, match="takes no step"): t[:N.bind(4):2]
  with pytest.raises(IndexError, match="negative bounds"): t[-2:N.bind(4)]
  with pytest.raises(IndexError, match="outside"): t[:N.bind(12)]

def test_tinyjit_replays_with_each_new_value():
  cache = Tensor(np.arange(48, dtype=np.float32).reshape(16, 3)).realize()
  calls = []
  @TinyJit
  def f(x, n):
    calls.append(1)
    return (x * cache[:n]).sum(0)
  for i, k in enumerate((3, 5, 11, 2, 16)):
    x = np.full((1, 3), i + 1, np.float32)
    before = stats["kernels_compiled"]
    np.testing.assert_allclose(f(Tensor(x), N.bind(k)).numpy(), (x * cache.numpy()[:k]).sum(0))
    if i: assert stats["kernels_compiled"] == before
  assert len(calls) == 2  # run, capture, then replays with the new values
  with pytest.raises(ValueError, match="other arguments differ"): f(Tensor(np.ones((1, 3), np.float32)), UOp.variable("m", 1, 16).bind(3))

def test_tinyjit_output_takes_the_new_shape():
  src = Tensor(np.arange(32, dtype=np.float32).reshape(16, 2)).realize()
  f = TinyJit(lambda x: x + 1)
  for k in (4, 6, 9):
    out = f(src[:N.bind(k)].contiguous().realize())
    assert out.shape[0].bound_value == k
    np.testing.assert_array_equal(out.numpy(), src.numpy()[:k] + 1)
