"""Several devices of one kind (NAME:0 and NAME:1): copies between them, values sharded or replicated over both, and the
ops on them, against the same ops on one device. Skipped, with the reason, where the second index cannot be opened."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data
from tinyspec.device import Device, DeviceError


@pytest.fixture
def pair(dev) -> tuple[str, str]:
  base = dev.partition(":")[0]
  names = (f"{base}:0", f"{base}:1")
  for name in names:
    try: Device[name]
    except DeviceError as e: pytest.skip(f"device {base} does not support several devices ({name} cannot be opened: {e})")
  return names

def test_copy_between_devices(pair):
  x = data(dtypes.float32, (5, 3))
  a = Tensor(x, device=pair[0])
  b = (a * 2).to(pair[1])
  assert b.device == pair[1]
  check(b + 1, x * 2 + 1)
  back = (b.exp() + 0).to(pair[0])
  check(back, np.exp(x * 2).astype(np.float32), rtol=1e-5)
  check(Tensor(data(dtypes.int16, (7,)), device=pair[1]).to(pair[0]), data(dtypes.int16, (7,)))

def test_ops_across_devices_need_a_copy(pair):
  with pytest.raises(RuntimeError, match="same device"): Tensor.ones(3, device=pair[0]) + Tensor.ones(3, device=pair[1]).realize()

@pytest.mark.parametrize("axis", [0, 1])
def test_sharded_elementwise_reduce_matmul(pair, axis):
  x, y, w = data(dtypes.float32, (4, 6), seed=1), data(dtypes.float32, (4, 6), seed=2), data(dtypes.float32, (6, 3), seed=3)
  a, b = Tensor(x).shard(pair, axis=axis), Tensor(y).shard(pair, axis=axis)
  assert a.device == pair
  check((a + b) * a - 1, (x + y) * x - 1, rtol=1e-6)
  for ax in (0, 1, None): check((a * b).sum(ax), (x * y).sum(ax), rtol=1e-5, atol=1e-5)
  check(a.max(1), x.max(1))
  check(a @ Tensor(w).to(pair), x @ w, rtol=1e-5, atol=1e-5)
  check((a * 2.5 + 1).exp(), np.exp(x * 2.5 + 1), rtol=1e-5)

def test_replicated_value(pair):
  x = data(dtypes.float32, (3, 4))
  t = Tensor(x).to(pair)
  check(t.softmax(1).sum(1), np.ones(3, np.float32), rtol=1e-5)
  check(t.permute(1, 0).contiguous(), x.T)
