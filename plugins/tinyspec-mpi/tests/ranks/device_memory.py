"""Collectives on a device whose memory the host cannot address (as a GPU's): a PYTHON interpreter device whose allocator
offers no `as_numpy`, so the data goes through one host copy each way. Checked against numpy; prints `rank R: ok`."""
from __future__ import annotations

import numpy as np
from tinyspec import Tensor
from tinyspec import distributed as dist
from tinyspec.device import Device
from tinyspec.device.memory import LRUAllocator
from tinyspec.hookspecs import DeviceSpec, hookimpl
from tinyspec.interpreter.runtime import PythonRuntime


class DeviceOnlyMemory(LRUAllocator):
  """Memory reached only by copies: numpy arrays underneath (so the interpreter runs on them), but no `as_numpy`."""
  def _alloc(self, nbytes, options): return np.empty(nbytes, np.uint8)
  def _free(self, handle, nbytes, options): pass
  def copyin(self, dest, src): dest[:] = np.frombuffer(src, np.uint8)
  def copyout(self, dest, src): np.frombuffer(dest, np.uint8)[:] = src

class DeviceMemoryRuntime(PythonRuntime):
  def __init__(self, name: str):
    super().__init__(name)
    self.allocator = DeviceOnlyMemory()

class DeviceMemoryPlugin:
  @hookimpl
  def tinyspec_plugin_api(self): return (1,)
  @hookimpl
  def tinyspec_devices(self): return (DeviceSpec("DEVMEM", ("PYTHON",), probe=lambda: None, open=DeviceMemoryRuntime),)

Device.register(DeviceMemoryPlugin(), devices=["DEVMEM"])
dist.init()
R, N = dist.rank(), dist.world_size()
everyone = np.stack([np.random.default_rng(r).integers(-8, 9, (4, 6)).astype(np.float32) for r in range(N)])
mine = Tensor(everyone[R], device="DEVMEM")
assert not Device["DEVMEM"].allocator.supports_as_numpy
for got, want in ((dist.all_reduce(mine), everyone.sum(0)), (dist.all_reduce(mine * 1, "max"), everyone.max(0)),
                  (dist.broadcast(mine, src=N - 1), everyone[N - 1]), (dist.all_gather(mine), everyone.reshape(N * 4, 6)),
                  (dist.reduce_scatter(Tensor(np.tile(everyone[R], (N, 1)), device="DEVMEM")), everyone.sum(0))):
  assert got.device == "DEVMEM", got.device
  np.testing.assert_array_equal(got.numpy(), want)
try: dist.all_reduce(mine, out=mine.realize())
except ValueError as e: assert "is not in host memory" in str(e), e
else: raise AssertionError("out= on device memory did not raise")
try: dist.DataParallel([mine.requires_grad_()])
except NotImplementedError as e: assert "not host memory" in str(e), e
else: raise AssertionError("DataParallel on device memory did not raise")
print(f"rank {R}: ok", flush=True)
