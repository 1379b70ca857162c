"""Kernel reuse: running the same computation again on new data of the same shapes compiles nothing and builds no
schedule (tinyspec.engine.realize.stats), and gives the new data's answer; other shapes compile anew."""
import numpy as np

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data
from tinyspec.engine import realize as R


def counts() -> tuple[int, int]: return R.stats["kernels_compiled"], R.stats["schedules_built"]

def step(x: Tensor, w: Tensor, b: Tensor) -> Tensor: return ((x @ w + b).relu().softmax(1) * 2).sum(0)

def ref(x, w, b):
  h = np.maximum(x @ w + b, 0)
  e = np.exp(h - h.max(1, keepdims=True))
  return (e / e.sum(1, keepdims=True) * 2).sum(0)

def test_same_computation_on_new_data_compiles_nothing(dev):
  runs = [[data(dtypes.float32, s, seed=10 * i + j) for j, s in enumerate(((5, 8), (8, 4), (4,)))] for i in range(3)]
  check(step(*(Tensor(a, device=dev) for a in runs[0])), ref(*runs[0]), rtol=1e-5, atol=1e-6)
  before = counts()
  for arrays in runs[1:]:
    check(step(*(Tensor(a, device=dev) for a in arrays)), ref(*arrays), rtol=1e-5, atol=1e-6)
  assert counts() == before, "the second run compiled kernels or built a schedule again"

def test_reuse_for_every_dtype_the_device_has(dev, caps):
  for dt in (dtypes.int32, dtypes.float32, dtypes.float16):
    if dt not in caps.dtypes: continue
    x = [data(dt, (3, 7), seed=s, lo=-9, hi=9) for s in range(3)]
    check((Tensor(x[0], device=dev) * 3 + 1).max(1), (x[0] * 3 + 1).max(1))
    before = counts()
    for v in x[1:]: check((Tensor(v, device=dev) * 3 + 1).max(1), (v * 3 + 1).max(1))
    assert counts() == before, f"{dt}: compiled again"

def test_reuse_of_a_realized_result(dev):
  x = data(dtypes.float32, (16,))
  a = (Tensor(x, device=dev) + 1).realize()
  check((a * a).sum(), np.array(((x + 1) ** 2).sum(), np.float32), rtol=1e-5)
  before = counts()
  b = (Tensor(x * 2, device=dev) + 1).realize()
  check((b * b).sum(), np.array(((x * 2 + 1) ** 2).sum(), np.float32), rtol=1e-5)
  assert counts() == before

def test_other_shapes_compile_anew(dev):
  (Tensor(data(dtypes.float32, (3, 19)), device=dev).exp() * 7).sum(1).realize()
  before = counts()
  got = (Tensor(x := data(dtypes.float32, (4, 19)), device=dev).exp() * 7).sum(1)
  check(got, (np.exp(x.astype(np.float64)) * 7).sum(1).astype(np.float32), rtol=1e-5)
  assert counts()[0] > before[0]
