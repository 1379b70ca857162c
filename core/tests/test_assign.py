"""Tensor.assign: STORE + AFTER in the tensor graph, writing into the buffer a tensor already has."""
import numpy as np
import pytest
from tinyspec import Tensor
from tinyspec.device import Device
from tinyspec.nn import Linear, optim


def _realized(a: np.ndarray) -> Tensor: return Tensor(a, device="PYTHON").realize()

def test_whole_assign_writes_the_same_buffer():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  t = _realized(a)
  buf, alias = t.uop, Tensor(t.uop)  # another Tensor holding the same buffer
  t.assign(t * 2 + 1)
  assert t.realize().uop is buf
  np.testing.assert_array_equal(t.numpy(), a * 2 + 1)
  np.testing.assert_array_equal(alias.numpy(), a * 2 + 1)  # a later read through any holder sees it

def test_assign_broadcasts_casts_and_takes_numbers():
  t = _realized(np.zeros((2, 3), np.int32))
  t.assign(Tensor([1.7, 2.2, -3.9], device="PYTHON")).realize()
  np.testing.assert_array_equal(t.numpy(), [[1, 2, -3]] * 2)
  t.assign(5).realize()
  np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 5))

def test_slice_assign_writes_only_that_region():
  a = np.arange(20, dtype=np.float32).reshape(4, 5)
  t = _realized(a)
  buf = t.uop
  t[1:3, 2:4].assign(Tensor(np.array([[-1, -2], [-3, -4]], np.float32), device="PYTHON"))
  expect = a.copy()
  expect[1:3, 2:4] = [[-1, -2], [-3, -4]]
  assert t.uop is buf
  np.testing.assert_array_equal(t.numpy(), expect)
  t.T[0].assign(np.float32(9))  # through a transpose: column 0
  expect[:, 0] = 9
  np.testing.assert_array_equal(t.numpy(), expect)

def test_value_reading_its_own_target_elsewhere():
  a = np.arange(6, dtype=np.float32)
  t = _realized(a)
  t.assign(t.flip(0)).realize()  # would overwrite elements still to be read without a copy first
  np.testing.assert_array_equal(t.numpy(), a[::-1])
  t.assign(t - t.sum()).realize()  # a reduction over the target
  np.testing.assert_array_equal(t.numpy(), a[::-1] - a.sum())

def test_reads_of_the_old_value_run_before_the_write():
  a = np.arange(8, dtype=np.float32)
  t = _realized(a)
  total, doubled = t.sum(), t.reshape(2, 4).sum(1)  # lazy reads of the old contents, realized with the assign
  t.assign(t + 100)
  after = t * 1  # reads the AFTER: the new contents
  Tensor.realize(after, total, t, doubled)
  assert total.item() == a.sum()
  np.testing.assert_array_equal(doubled.numpy(), a.reshape(2, 4).sum(1))
  np.testing.assert_array_equal(after.numpy(), a + 100)

def test_bad_assigns_say_what_is_wrong():
  t = _realized(np.zeros((2, 3), np.float32))
  with pytest.raises(ValueError, match=r"shape \(4,\) into a tensor of shape \(2, 3\)"): t.assign(Tensor.zeros(4, device="PYTHON"))
  with pytest.raises(ValueError, match="repeats or pads"): t[0:1].expand(4, 3).assign(1.0)
  with pytest.raises(ValueError, match="view of an unrealized value"): (Tensor.zeros(4, 4, device="PYTHON") + 1)[1:2].assign(3.0)
  np.testing.assert_array_equal(t.numpy(), np.zeros((2, 3)))

def test_unrealized_tensor_takes_the_value():
  t = Tensor.zeros(3, device="PYTHON") + 1
  t.assign(Tensor([4.0, 5.0, 6.0], device="PYTHON"))
  np.testing.assert_array_equal(t.numpy(), [4, 5, 6])

@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), lambda ps: optim.Adam(ps, lr=1e-2)])
def test_optimizer_updates_in_place_with_flat_memory(make, monkeypatch):
  """100 training steps: every parameter and piece of state keeps its buffer, and the memory held stays flat."""
  allocator, held = Device["PYTHON"].allocator, {"bytes": 0}
  alloc, free = allocator.alloc, allocator.free
  def counting_alloc(nbytes, options=None): held["bytes"] += nbytes; return alloc(nbytes, options)
  def counting_free(handle, nbytes, options=None): held["bytes"] -= nbytes; return free(handle, nbytes, options)
  monkeypatch.setattr(allocator, "alloc", counting_alloc)
  monkeypatch.setattr(allocator, "free", counting_free)
  rng = np.random.default_rng(0)
  l1, l2 = Linear(2, 8, device="PYTHON"), Linear(8, 1, device="PYTHON")
  params = [l1.weight, l1.bias, l2.weight, l2.bias]
  opt = make(params)
  x = Tensor(rng.standard_normal((16, 2)).astype(np.float32), device="PYTHON")
  y = Tensor(rng.standard_normal((16, 1)).astype(np.float32), device="PYTHON")
  losses, held_at = [], {}
  for step in range(100):
    opt.zero_grad()
    loss = ((l2(l1(x).relu()) - y) ** 2).mean()
    loss.backward()
    Tensor.realize(loss, *opt.schedule_step())
    losses.append(loss.item())
    if step == 1: buffers = [t.uop for t in opt.params + getattr(opt, "m", []) + getattr(opt, "b", [])]
    if step in (10, 99): held_at[step] = held["bytes"]
  assert all(t.uop is b for t, b in zip(opt.params + getattr(opt, "m", []) + getattr(opt, "b", []), buffers))
  assert held_at[99] == held_at[10], held_at
  assert losses[-1] < 0.6 * losses[0]  # and it trains (the update rules themselves are checked against PyTorch in test_optim)

def test_lazy_reads_made_before_an_assign_see_the_old_contents():
  """PyTorch computes `loss` before `step()` changes the weights; here loss is lazy, so it is computed with the write."""
  w = _realized(np.array([1.0, 2.0], np.float32))
  loss = (w * 3).sum()  # built before the write, realized after it
  view = w[0:1]         # a view, though, sees the write (as a PyTorch view would)
  w.assign(w * 10).realize()
  assert loss.item() == 9.0
  np.testing.assert_array_equal(w.numpy(), [10, 20])
  np.testing.assert_array_equal(view.numpy(), [10])

def test_an_assign_realized_inside_another_value_lands_once():
  t = _realized(np.array([1.0, 2.0], np.float32))
  t.assign(t + 1)
  doubled = (t * 2).realize()  # realizes the assign as part of its graph
  np.testing.assert_array_equal(doubled.numpy(), [4, 6])
  np.testing.assert_array_equal(t.numpy(), [2, 3])  # t became its buffer then: reading it does not add 1 again

def test_an_assign_built_on_a_pending_one_runs_each_write_once():
  t = Tensor(np.ones(3, np.float32)).realize()
  t.assign(t * 2)
  t.assign(t + 1)  # its value reads the first write's result; that write lands first and must not run again
  np.testing.assert_array_equal(t.numpy(), [3, 3, 3])
  a, want = Tensor(np.ones(3, np.float32)).realize(), 1.0
  for i in range(5):  # a running average, as BatchNorm keeps: each step's value reads the previous step's pending write
    m = Tensor(np.full(3, i + 1, np.float32))
    a.assign(0.9 * a + 0.1 * m)
    (m * 2).numpy()  # other work realized in between leaves the pending write alone
    want = 0.9 * want + 0.1 * (i + 1)
  np.testing.assert_allclose(a.numpy(), np.full(3, want), rtol=1e-6)

def test_tensors_built_alike_and_realized_together_get_memory_of_their_own():
  """Hash-consing makes two equal graphs one node; realized together they still get a buffer each, so an assign to one
  leaves the other alone (PyTorch's separate storage)."""
  x, y = Tensor.zeros(3), Tensor.zeros(3)
  Tensor.realize(x, y)
  x.assign(Tensor([1.0, 2.0, 3.0])).realize()
  assert x.tolist() == [1.0, 2.0, 3.0] and y.tolist() == [0.0, 0.0, 0.0]
  c = Tensor([5.0, 5.0])
  d, e = c + 0, c + 0
  Tensor.realize(d, e, d)  # the same tensor twice is one
  d.assign(Tensor([1.0, 1.0])).realize()
  assert e.tolist() == [5.0, 5.0] and c.tolist() == [5.0, 5.0]

def test_assign_to_a_tensor_without_elements_writes_nothing():
  """A zero-size buffer has no memory to write (this failed in rangeify); equal zero-size gradients realize together too."""
  assert Tensor.empty(4, 0, 3).assign(Tensor.ones(4, 0, 3)).realize().shape == (4, 0, 3)
  parts = [Tensor(np.zeros((5, 0, 2), np.float32), requires_grad=True) for _ in range(3)]
  parts[0].cat(parts[1], parts[2], dim=1).sum().backward()
  Tensor.realize(*(p.grad for p in parts))
  assert all(p.grad.shape == (5, 0, 2) for p in parts)
