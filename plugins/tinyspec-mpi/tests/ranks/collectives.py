"""Every collective against numpy, on every rank, for several dtypes and shapes (zero-size ones included), then the errors
on bad input. Run by test_collectives.py as `mpiexec -n N python collectives.py`; prints `rank R: ok C checks`."""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import DTYPES, SHAPES, as_numpy, tensor, values
from tinyspec import Tensor
from tinyspec import distributed as dist
from tinyspec.dtype import dtypes

dist.init(check=True)
R, N = dist.rank(), dist.world_size()
checks = 0

def same(got: Tensor, want: np.ndarray, dtype, what: str) -> None:
  global checks
  assert got.dtype is dtype, f"{what}: dtype {got.dtype.name}, wanted {dtype.name}"
  assert got.shape == want.shape, f"{what}: shape {got.shape}, wanted {want.shape}"
  np.testing.assert_array_equal(as_numpy(got), want.astype(np.float32 if dtype is dtypes.bfloat16 else want.dtype), err_msg=what)
  checks += 1

def expect(error: type, text: str, fn, *args, **kwargs) -> None:
  global checks
  try: fn(*args, **kwargs)
  except error as e:
    assert text in str(e), f"{fn.__name__}: {error.__name__} without {text!r}: {e}"
    checks += 1
    return
  raise AssertionError(f"{fn.__name__}{args}: no {error.__name__} ({text!r})")

REDUCE = {"sum": lambda a: a.sum(0), "max": lambda a: a.max(0), "min": lambda a: a.min(0), "mean": lambda a: a.mean(0)}
for case, (dtype, shape) in enumerate(itertools.product(DTYPES, SHAPES)):
  everyone = np.stack([values(shape, dtype, r, case) for r in range(N)])
  mine = tensor(everyone[R], dtype)
  for op, numpy_op in REDUCE.items():
    if op == "mean" and not dtypes.is_float(dtype): continue
    want = numpy_op(everyone.astype(np.float64 if dtype is not dtypes.bool else bool))
    if dtype is dtypes.bool: want = everyone.all(0) if op == "min" else everyone.any(0)
    same(dist.all_reduce(mine, op), want.astype(everyone.dtype), dtype, f"all_reduce {op} {dtype.name} {shape}")
  # a lazy input (computed in the call's schedule) and a view of a buffer (a transpose), and the result used lazily after
  if dtype is not dtypes.bool and len(shape) == 2:
    lazy = dist.all_reduce(mine * 2 + 1) - 1
    same(lazy, (everyone * 2 + 1).sum(0).astype(everyone.dtype) - 1, dtype, f"all_reduce of a lazy graph {dtype.name} {shape}")
    same(dist.all_reduce(mine.realize().T), everyone.sum(0).T.astype(everyone.dtype), dtype, f"all_reduce of a transpose {dtype.name} {shape}")
  for src in range(N):
    same(dist.broadcast(mine, src=src), everyone[src], dtype, f"broadcast from {src} {dtype.name} {shape}")
  if len(shape) >= 1:
    # uneven: rank r passes r rows (rank 0 none) made from its data
    rows = [np.resize(everyone[r], (r, *shape[1:])) for r in range(N)]
    same(dist.all_gather(tensor(rows[R], dtype)), np.concatenate(rows), dtype, f"all_gather uneven {dtype.name} {shape}")
    same(dist.all_gather(mine), np.concatenate(list(everyone)), dtype, f"all_gather {dtype.name} {shape}")
    if dtype is not dtypes.bool:
      # each rank passes its data N times over on axis 0: every rank's chunk of the sum is the sum of everyone's data
      whole = tensor(np.concatenate([everyone[R]] * N), dtype)
      same(dist.reduce_scatter(whole), everyone.sum(0).astype(everyone.dtype), dtype, f"reduce_scatter {dtype.name} {shape}")
  # point to point around the ring
  if N > 1:  # a send may wait for its recv: even ranks send first, odd ones receive first
    for sending in ((True, False) if R % 2 == 0 else (False, True)):
      if sending: dist.send(mine, dst=(R + 1) % N, tag=case)
      else: same(dist.recv((R - 1) % N, shape, dtype, tag=case), everyone[(R - 1) % N], dtype, f"send/recv {dtype.name} {shape}")

# a float32 case that is not integers: sums compared with numpy's to rounding
rng = np.random.default_rng(7)
everyone = rng.standard_normal((N, 1000)).astype(np.float32)
np.testing.assert_allclose(dist.all_reduce(Tensor(everyone[R]), "mean").numpy(), everyone.mean(0), rtol=1e-5, atol=1e-6)
checks += 1

# another host-memory device: the PYTHON interpreter's buffers go to MPI the same way, and results stay on it
on_python = Tensor(everyone[R], device="PYTHON")
total, gathered = dist.all_reduce(on_python * 1), dist.all_gather(on_python.reshape(10, 100))
assert total.device == gathered.device == "PYTHON", (total.device, gathered.device)
np.testing.assert_allclose(total.numpy(), everyone.sum(0), rtol=1e-5, atol=1e-5)
np.testing.assert_array_equal(gathered.numpy(), everyone.reshape(N * 10, 100))
checks += 2

# out=: into a given buffer, and in place
x, into = Tensor(everyone[R]).realize(), Tensor.empty(1000).realize()
assert dist.all_reduce(x, "max", out=into) is into and x.numpy().tolist() == everyone[R].tolist()
np.testing.assert_array_equal(into.numpy(), everyone.max(0))
assert dist.all_reduce(x, "mean", out=x) is x
np.testing.assert_allclose(x.numpy(), everyone.mean(0), rtol=1e-5, atol=1e-6)
checks += 2

# errors: every rank raises the same, naming what was wrong, and the world stays usable after
expect(ValueError, "op must be one of", dist.all_reduce, Tensor([1.0]), "prod")
expect(TypeError, "op 'mean' needs a float dtype, got int32", dist.all_reduce, Tensor([1]), "mean")
expect(TypeError, "op 'mean' needs a number dtype, got bool", dist.all_reduce, Tensor([True]), "mean")
expect(TypeError, "expected a Tensor, got ndarray", dist.all_reduce, np.ones(3))
expect(ValueError, "out is float32 (3,) on", dist.all_reduce, Tensor([1.0, 2.0]), out=Tensor.empty(3).realize())
expect(ValueError, "out must be a realized tensor, not a view or a lazy graph", dist.all_reduce, Tensor([1.0]), out=Tensor.ones(1) + 1)
bf16 = Tensor([1.0]).cast(dtypes.bfloat16).realize()
expect(TypeError, "out cannot be bfloat16", dist.all_reduce, bf16, out=bf16)
expect(ValueError, "a 0-d tensor has no axis 0", dist.all_gather, Tensor(1.0))
expect(ValueError, f"must split into {N} equal parts", dist.reduce_scatter, Tensor.ones(N + 1) if N > 1 else Tensor(1.0))
expect(ValueError, "src must be a rank in", dist.broadcast, Tensor([1.0]), src=N)
expect(dist.DistributedError, "the ranks passed different tensors", dist.all_reduce, Tensor.ones(R + 1))
expect(dist.DistributedError, "the axes after the first and the dtype must agree", dist.all_gather, Tensor.ones(1, R + 1))
int_on_rank_1 = Tensor.ones(2, dtype=dtypes.int32 if R else dtypes.float32)
expect(dist.DistributedError, "the axes after the first and the dtype must agree", dist.all_gather, int_on_rank_1)
if N > 1:  # 3 elements fit the eager protocol: the send completes before its recv is posted
  dist.send(Tensor.ones(3), dst=(R + 1) % N, tag=999)
  expect(dist.DistributedError, "expected 4 elements of float32", dist.recv, (R - 1) % N, (4,), tag=999)
same(dist.all_reduce(Tensor([float(R)])), np.array([sum(range(N))], np.float32), dtypes.float32, "all_reduce after the errors")
dist.barrier()
print(f"rank {R}: ok {checks} checks", flush=True)
