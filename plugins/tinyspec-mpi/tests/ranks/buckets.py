"""DataParallel's gradient averaging against numpy: parameters of several shapes and dtypes (float32, float64, float16,
bfloat16), one without a gradient, buckets small enough that there are several of each dtype, and the loss."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import as_numpy, tensor
from tinyspec import Tensor
from tinyspec import distributed as dist
from tinyspec.dtype import dtypes

dist.init()
R, N = dist.rank(), dist.world_size()
SPECS = [((3, 4), dtypes.float32), ((5,), dtypes.float64), ((300,), dtypes.float32), ((2, 2), dtypes.float16), ((7,), dtypes.bfloat16),
         ((1,), dtypes.float32), ((64, 16), dtypes.float32), ((0,), dtypes.float32)]
def grad_values(i: int, shape, rank: int) -> np.ndarray:  # multiples of 1/4: exact in every dtype, and so are their means
  return np.random.default_rng(100 * i + rank).integers(-16, 17, shape).astype(np.float32) / 4

params = [tensor(np.full(shape, R, np.float32), dt).requires_grad_() for shape, dt in SPECS]  # rank 0's values must win
no_grad = Tensor.full((2,), float(R), requires_grad=True)
dp = dist.DataParallel([*params, no_grad], bucket_mb=1000 / 2**20)  # 1000 bytes: the 64 x 16 one alone, the rest in several
for p, (shape, _) in zip(params, SPECS): np.testing.assert_array_equal(as_numpy(p), np.zeros(shape))
for i, (p, (shape, dt)) in enumerate(zip(params, SPECS)): p.grad = tensor(grad_values(i, shape, R), dt)
loss = Tensor(float(R + 1))
mean_loss = dp.average_gradients(loss)
assert mean_loss == sum(range(1, N + 1)) / N, mean_loss
assert len(dp._buckets([(p, p.grad) for p in params])) > 4
for i, (p, (shape, dt)) in enumerate(zip(params, SPECS)):
  assert p.grad.dtype is dt and p.grad.shape == shape, (i, p.grad.dtype, p.grad.shape)
  np.testing.assert_array_equal(as_numpy(p.grad), np.mean([grad_values(i, shape, r) for r in range(N)], 0), err_msg=f"parameter {i}")
assert no_grad.grad is None
print(f"rank {R}: ok buckets", flush=True)
