"""Random tensors: THREEFRY on the device, reproducible with manual_seed, with the right ranges, moments, dtypes and shapes."""
import math

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.device import Device
from tinyspec.uop.ops import Ops


@pytest.fixture(autouse=True)
def seeded():
  Tensor.manual_seed(1234)

def test_manual_seed_reproduces_and_calls_differ():
  a, b = Tensor.rand(64).numpy(), Tensor.rand(64).numpy()
  assert not np.array_equal(a, b)
  Tensor.manual_seed(1234)
  np.testing.assert_array_equal(Tensor.rand(64).numpy(), a)
  np.testing.assert_array_equal(Tensor.rand(64).numpy(), b)
  Tensor.manual_seed(1235)
  assert not np.array_equal(Tensor.rand(64).numpy(), a)
  # a graph realized twice gives the same numbers: the randomness is in the key, fixed when the tensor is made
  t = Tensor.rand(8)
  again = Tensor(t.uop)
  np.testing.assert_array_equal(t.numpy(), again.numpy())

def test_rand_is_lazy_threefry():
  t = Tensor.rand(3, 4)
  buffers = [u for u in t.uop.toposort() if u.op is Ops.BUFFER]
  assert Ops.THREEFRY in {u.op for u in t.uop.toposort()}
  assert [b.shape for b in buffers] == [(2,)]  # generated where it is used: the host only supplies the call number and seed

def test_rand_calls_reuse_one_compiled_kernel():
  from tinyspec.engine.realize import stats
  Tensor.rand(3, 4).realize()
  before = stats["kernels_compiled"]
  a, b = Tensor.rand(3, 4).numpy(), Tensor.rand(3, 4).numpy()
  assert stats["kernels_compiled"] == before and (a != b).any()

def test_rand_range_and_moments():
  u = Tensor.rand(10000).numpy()
  assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
  assert abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 1 / 12) < 0.01
  assert len(np.unique(u)) > 9900  # distinct counters give distinct numbers
  hist = np.histogram(u, 10, (0, 1))[0]
  assert hist.min() > 850 and hist.max() < 1150

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32, dtypes.float64])
def test_rand_dtypes_stay_below_one(dt):
  u = Tensor.rand(4000, dtype=dt)
  assert u.dtype == dt
  v = u.numpy()
  assert v.dtype == dt.np and v.min() >= 0 and v.max() < 1 and abs(float(v.astype(np.float64).mean()) - 0.5) < 0.03

def test_randn_moments():
  z = Tensor.randn(100, 100).numpy()
  assert z.shape == (100, 100) and z.dtype == np.float32 and np.isfinite(z).all()
  assert abs(z.mean()) < 0.04 and abs(z.std() - 1) < 0.04
  assert abs((np.abs(z) < 1).mean() - 0.6827) < 0.02  # the normal's shape, not just its moments
  h = Tensor.randn(500, dtype=dtypes.float16)
  assert h.dtype == dtypes.float16 and np.isfinite(h.numpy()).all()

def test_uniform_normal():
  u = Tensor.uniform(5000, low=-3.0, high=5.0).numpy()
  assert u.min() >= -3.0 and u.max() < 5.0 and abs(u.mean() - 1.0) < 0.15
  n = Tensor.normal(2, 2500, mean=10.0, std=0.5).numpy()
  assert n.shape == (2, 2500) and abs(n.mean() - 10.0) < 0.03 and abs(n.std() - 0.5) < 0.03

def test_randint():
  r = Tensor.randint(-3, 5, (6000,))
  assert r.dtype == dtypes.int32 and r.shape == (6000,)
  v = r.numpy()
  assert v.min() == -3 and v.max() == 4 and np.bincount(v + 3).min() > 600
  assert Tensor.randint(7, (2, 3)).numpy().max() < 7 and Tensor.randint(7, (2, 3)).shape == (2, 3)
  assert Tensor.randint(low=2, high=4, size=(50,)).numpy().min() >= 2
  w = Tensor.randint(-2 ** 31, 2 ** 31 - 1, (1000,)).numpy()  # a range wider than int32's positive half: wraps back into range
  assert w.min() < -2 ** 30 and w.max() > 2 ** 30
  b = Tensor.randint(0, 256, (1000,), dtype=dtypes.uint8).numpy()
  assert b.dtype == np.uint8 and b.max() > 200
  assert Tensor.randint(10 ** 12, 10 ** 12 + 5, (100,), dtype=dtypes.int64).numpy().min() >= 10 ** 12

def test_like_shapes_and_devices():
  x = Tensor.zeros(2, 3, dtype=dtypes.float16)
  assert Tensor.rand_like(x).shape == (2, 3) and x.rand_like().dtype == dtypes.float16
  assert x.randn_like(dtype=dtypes.float32).dtype == dtypes.float32
  assert Tensor.rand((2, 0)).shape == (2, 0) and Tensor.rand((2, 0)).numpy().shape == (2, 0)
  assert Tensor.rand().shape == () and 0 <= Tensor.rand().item() < 1
  assert Tensor.rand(2, device="PYTHON").device == Device.canonicalize("PYTHON")
  assert Tensor.rand(2).device == Device.DEFAULT

def test_random_errors():
  with pytest.raises(RuntimeError, match="float dtype"): Tensor.rand(2, dtype=dtypes.int32)
  with pytest.raises(RuntimeError, match="float dtype"): Tensor.zeros(2, dtype=dtypes.int32).rand_like()
  with pytest.raises(RuntimeError, match="negative dimension"): Tensor.rand(-1)
  with pytest.raises(RuntimeError, match="from=5 >= to=5"): Tensor.randint(5, 5, (2,))
  with pytest.raises(RuntimeError, match="integer dtype"): Tensor.randint(0, 5, (2,), dtype=dtypes.float32)
  with pytest.raises(RuntimeError, match="does not fit"): Tensor.randint(0, 300, (2,), dtype=dtypes.uint8)
  with pytest.raises(TypeError, match="size"): Tensor.randint(high=5)

def test_randint_takes_tinygrads_shape_form():
  """Positional ints alone (no size) are tinygrad's shape, in [low, high) = [0, 10) unless given; torch's forms need a size."""
  a, b = Tensor.randint(3, 1, 2).numpy(), Tensor.randint(4, high=3).numpy()
  assert a.shape == (3, 1, 2) and a.min() >= 0 and a.max() < 10 and b.shape == (4,) and set(b.tolist()) <= {0, 1, 2}
  assert Tensor.randint(5, (3,)).shape == (3,) and Tensor.randint(2, 5, (6,)).numpy().min() >= 2 and Tensor.randint((2, 3)).shape == (2, 3)

def test_box_muller_tails_are_finite():
  # the largest uniform is 1 - 2^-24, so 1 - u2 >= 2^-24 and |z| <= sqrt(2 * 24 * ln 2) ~ 5.77
  z = Tensor.randn(20000).numpy()
  assert np.abs(z).max() <= math.sqrt(-2 * math.log(2.0 ** -24)) + 1e-3

def test_randperm_is_a_seeded_permutation():
  p = Tensor.randperm(1000)
  assert p.dtype == dtypes.int32 and p.shape == (1000,)  # arange(1000)'s dtype: the default int
  got = p.numpy()
  np.testing.assert_array_equal(np.sort(got), np.arange(1000))
  assert not np.array_equal(got, np.arange(1000)) and not np.array_equal(got, Tensor.randperm(1000).numpy())
  Tensor.manual_seed(1234)
  np.testing.assert_array_equal(Tensor.randperm(1000).numpy(), got)
  assert Tensor.randperm(0).shape == (0,) and Tensor.randperm(5, dtype="int32").dtype == dtypes.int32
  with pytest.raises(RuntimeError, match="do not fit"): Tensor.randperm(300, dtype="int8")
  with pytest.raises(RuntimeError, match="non-negative"): Tensor.randperm(-1)

def test_multinomial_frequencies_follow_the_weights():
  w = np.array([1.0, 2.0, 3.0, 4.0, 0.0], np.float32)
  draws = Tensor(w).multinomial(40000, replacement=True)
  assert draws.dtype == dtypes.int32 and draws.shape == (40000,)
  freq = np.bincount(draws.numpy(), minlength=5) / 40000
  np.testing.assert_allclose(freq, w / w.sum(), atol=0.01)  # 4 standard deviations at most ~0.009
  rows = Tensor(np.stack([w, w[::-1]])).multinomial(4)  # without replacement: 4 distinct categories per row, never weight 0
  got = rows.numpy()
  assert rows.shape == (2, 4) and all(len(set(r)) == 4 for r in got) and 4 not in got[0] and 0 not in got[1]
  first = np.bincount(np.concatenate([Tensor(w).multinomial(1).numpy() for _ in range(400)]), minlength=5) / 400
  np.testing.assert_allclose(first, w / w.sum(), atol=0.1)
  with pytest.raises(RuntimeError, match="without replacement"): Tensor(w).multinomial(6)
  with pytest.raises(RuntimeError, match="1 or 2 dim"): Tensor.ones(2, 2, 2).multinomial(1)
  with pytest.raises(RuntimeError, match="n_sample <= 0"): Tensor(w).multinomial(0)
  with pytest.raises(RuntimeError, match="empty distribution"): Tensor(np.zeros(0, np.float32)).multinomial(1, replacement=True)
