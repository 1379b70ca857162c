"""Eight threads at once on one device: the same kernels run concurrently (one program object, many callers), new
shapes compile while others run, and every value is checked. tinyspec's threading model (docs/reliability.md): the
registry, the kernel and schedule caches, the interpreter and every runtime may be used from any number of threads."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tinyspec import Tensor

THREADS, ROUNDS = 8, 6
SHAPES = [(3, 5), (4, 7), (1, 9), (6, 2)]  # few shapes, so threads share compiled programs

def _one_thread(dev: str, tid: int) -> list[str]:
  rng, wrong = np.random.default_rng(tid), []
  for i in range(ROUNDS):
    shape = SHAPES[(tid + i) % len(SHAPES)]
    a, b = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    ta, tb = Tensor(a, device=dev), Tensor(b, device=dev)
    got = {"fused": ((ta * tb + 1).sum(1) + ta.max(1)).numpy(), "matmul": (ta @ tb.T).numpy(), "exp": ta.exp().numpy()}
    want = {"fused": (a * b + 1).sum(1) + a.max(1), "matmul": a @ b.T, "exp": np.exp(a)}
    wrong += [f"thread {tid} round {i} {k} {shape}" for k in got if not np.allclose(got[k], want[k], rtol=1e-5, atol=1e-5)]
  return wrong

def test_eight_threads_every_value_right(dev):
  with ThreadPoolExecutor(THREADS) as pool: results = list(pool.map(lambda t: _one_thread(dev, t), range(THREADS)))
  assert [w for r in results for w in r] == []
