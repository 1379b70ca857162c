"""Tensors over several devices: sharding, the axis property through ops, collectives, resharding, and concurrent work."""
import threading

import numpy as np
import pytest
from tinyspec import Ops, Tensor
from tinyspec import collectives as C
from tinyspec.engine import multi
from tinyspec.engine import realize as R
from tinyspec.interpreter.runtime import PythonProgram

D = ("PYTHON:0", "PYTHON:1")
rng = np.random.default_rng(7)

def pieces(t: Tensor) -> list[tuple[str, np.ndarray]]:
  """(device, contents) of each single-device buffer holding a piece of realized t."""
  t.realize()
  buf = next(u for u in t.uop.toposort() if u.op is Ops.BUFFER)
  return [(p.device, R.to_numpy(p)) for p in multi.shards(buf)]

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_shard_puts_one_chunk_on_each_device(axis):
  x = rng.standard_normal((4, 6), dtype=np.float32)
  t = Tensor(x).shard(D, axis=axis)
  assert t.device == D and t.uop.axis == axis % 2 and t.shape == (4, 6)
  got = pieces(t)
  assert [d for d, _ in got] == list(D)
  chunks = np.split(x, 2, axis=axis)
  for (_, p), c in zip(got, chunks): np.testing.assert_array_equal(p.reshape(c.shape) if axis % 2 == 0 else p.reshape(c.T.shape).T, c)
  np.testing.assert_array_equal(t.numpy(), x)

def test_to_devices_replicates():
  x = rng.standard_normal(5, dtype=np.float32)
  t = Tensor(x).to(D)
  assert t.uop.axis is None
  for _, p in pieces(t): np.testing.assert_array_equal(p.reshape(-1), x)

@pytest.mark.parametrize("axis", [0, 1])
def test_elementwise_and_reduce_match_one_device(axis):
  x, y = rng.standard_normal((4, 6), dtype=np.float32), rng.standard_normal((4, 6), dtype=np.float32)
  a, b = Tensor(x).shard(D, axis=axis), Tensor(y).shard(D, axis=axis)
  np.testing.assert_allclose(((a + b) * a - 1).numpy(), (x + y) * x - 1, rtol=1e-6)
  for ax in (0, 1, None):
    s = (a * b).sum(ax)
    np.testing.assert_allclose(s.numpy(), (x * y).sum(ax), rtol=1e-5, atol=1e-6)
    assert s.uop.axis == (None if ax in (axis, None) else axis - (ax is not None and ax < axis))
  np.testing.assert_allclose(a.max(1).numpy(), x.max(1))
  np.testing.assert_allclose((a + Tensor(y).to(D)).numpy(), x + y, rtol=1e-6)  # sharded with replicated
  np.testing.assert_allclose((a * 2.5 + 1).exp().numpy(), np.exp(x * 2.5 + 1), rtol=1e-5)

def test_sharded_matmul_matches_one_device():
  x, w = rng.standard_normal((8, 6), dtype=np.float32), rng.standard_normal((6, 4), dtype=np.float32)
  for xa, wa in ((0, None), (1, 0), (None, 1)):
    a = Tensor(x).shard(D, axis=xa) if xa is not None else Tensor(x).to(D)
    b = Tensor(w).shard(D, axis=wa) if wa is not None else Tensor(w).to(D)
    np.testing.assert_allclose((a @ b).numpy(), x @ w, rtol=1e-5, atol=1e-5)

def test_axis_follows_movement_ops():
  t = Tensor(rng.standard_normal((4, 6), dtype=np.float32)).shard(D, axis=1)
  assert t.permute(1, 0).uop.axis == 0
  assert t.reshape(4, 2, 3).uop.axis == 1        # the shard boundary stays on a dim of its own
  assert t.reshape(2, 2, 6).uop.axis == 2
  assert t.sum(1).uop.axis is None and t.sum(0).uop.axis == 0
  assert t.to("PYTHON:0").uop.axis is None
  np.testing.assert_allclose(t.reshape(4, 2, 3).numpy(), t.numpy().reshape(4, 2, 3))
  np.testing.assert_allclose(t.flip(1).numpy(), np.flip(t.numpy(), 1))
  np.testing.assert_allclose(t.pad(((0, 0), (1, 1))).numpy(), np.pad(t.numpy(), ((0, 0), (1, 1))))
  np.testing.assert_allclose(t[:, 1:5].numpy(), t.numpy()[:, 1:5])

def test_resharding_and_gather():
  x = rng.standard_normal((4, 6), dtype=np.float32)
  t = Tensor(x).shard(D, axis=0)
  r = t.shard(D, axis=1)
  assert r.uop.axis == 1
  np.testing.assert_array_equal(r.numpy(), x)
  g = t.to("PYTHON:1")
  assert g.device == "PYTHON:1" and g.uop.axis is None
  np.testing.assert_array_equal(g.numpy(), x)

def test_collectives():
  n, s = len(D), 4
  x = rng.standard_normal(n * s, dtype=np.float32)
  t = Tensor(x, device="PYTHON:0")
  b = C.broadcast(t, D)
  assert b.uop.axis is None and all(np.array_equal(p.reshape(-1), x) for _, p in pieces(b))
  sc = C.scatter(t, D)
  assert sc.uop.axis == 0 and [p.reshape(-1).tolist() for _, p in pieces(sc)] == [c.tolist() for c in np.split(x, n)]
  g = C.gather(sc)
  assert g.device == D[0]
  np.testing.assert_array_equal(g.numpy(), x)
  r = C.reduce(sc)
  assert r.device == D[0]
  np.testing.assert_allclose(r.numpy(), x.reshape(n, s).sum(0), rtol=1e-6)
  ag = C.allgather(sc)
  assert ag.uop.axis is None and all(np.array_equal(p.reshape(-1), x) for _, p in pieces(ag))
  rs = C.reduce_scatter(sc)
  assert rs.uop.axis == 0 and rs.shape == (s,)
  np.testing.assert_allclose(np.concatenate([p.reshape(-1) for _, p in pieces(rs)]), x.reshape(n, s).sum(0), rtol=1e-6)
  ar = C.allreduce(sc)
  assert ar.uop.axis is None and ar.shape == (s,)
  for _, p in pieces(ar): np.testing.assert_allclose(p.reshape(-1), x.reshape(n, s).sum(0), rtol=1e-6)

def test_errors():
  t = Tensor(np.ones((3, 4), np.float32))
  with pytest.raises(ValueError, match="does not split"): t.shard(D, axis=0)
  a = t.shard(D, axis=1)
  with pytest.raises(RuntimeError, match="same device"): a + t
  with pytest.raises(ValueError, match="1-D tensor sharded on axis 0"): C.gather(a)

def test_work_on_different_devices_runs_at_the_same_time(monkeypatch):
  # each kernel waits until a kernel on the other device has started too: run one after the other, they would time out
  both = threading.Barrier(2, timeout=10)
  run = PythonProgram.__call__
  def meet(self, *bufs, **kw):
    both.wait()
    return run(self, *bufs, **kw)
  x = rng.standard_normal((4, 3), dtype=np.float32)
  t = Tensor(x).shard(D, axis=0).realize()
  out = t * 3 + 1
  with monkeypatch.context() as m:
    m.setattr(PythonProgram, "__call__", meet)
    out.realize()  # one kernel per device
  np.testing.assert_allclose(out.numpy(), x * 3 + 1, rtol=1e-6)
