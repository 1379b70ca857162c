"""The CUDA device on a GPU, through pycuda (the `runtime` extra), and CUDA_CHECK, NVRTC with the numpy interpreter.

Each device ("CUDA:0", "CUDA:1" ...) uses its GPU's primary context, made current around every driver call, so several
devices (and other libraries sharing the primary context) coexist in one process. Kernels are launched on the default
stream, in order; copies to the host wait for them. Imported only when a device is opened (see plugin.py).
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np
from tinyspec.device import LRUAllocator, Program, Runtime
from tinyspec.interpreter.checked import CheckedRuntime

from tinyspec_cuda.compiler import NVRTCCompiler, load
from tinyspec_cuda.renderer import CUDARenderer


@functools.cache
def _driver():
  import pycuda.driver as cuda  # links against libcuda: the probe has made sure it is there
  cuda.init()
  return cuda

def driver_problem() -> str | None:
  """Why no CUDA device can run here once the driver, pycuda and NVRTC are installed, or None when one can."""
  try: cuda = _driver()
  except Exception as e: return f"the CUDA driver failed to start: {type(e).__name__}: {e}"
  if cuda.Device.count() == 0: return "no NVIDIA GPU found (the driver sees none)"
  # code from a newer CUDA than the driver knows does not load: a kernel would fail only at its first launch
  driver, nvrtc = cuda.get_driver_version(), load().version
  if (driver // 1000, driver % 1000 // 10) < nvrtc:
    return (f"the NVIDIA driver supports CUDA {driver // 1000}.{driver % 1000 // 10}, older than NVRTC {nvrtc[0]}.{nvrtc[1]}: "
            "update the driver, or point $TINYSPEC_NVRTC at an NVRTC no newer than it")
  return None

def describe_gpu(ordinal: int) -> str:
  """e.g. "NVIDIA H100 80GB HBM3 (sm_90, 80 GiB), driver CUDA 12.4"."""
  cuda = _driver()
  dev, driver = cuda.Device(ordinal), cuda.get_driver_version()
  major, minor = dev.compute_capability()
  return f"{dev.name()} (sm_{major}{minor}, {dev.total_memory() // 2**30} GiB), driver CUDA {driver // 1000}.{driver % 1000 // 10}"

def compiler_for(sm: int) -> NVRTCCompiler:
  """A cubin for `sm` (e.g. 90) where this NVRTC can build one, else PTX for the newest architecture below it, which the
  driver compiles when loading (a GPU newer than the NVRTC)."""
  nvrtc = load()
  if sm in nvrtc.archs: return NVRTCCompiler((f"sm_{sm}",))
  if older := [a for a in nvrtc.archs if a < sm]: return NVRTCCompiler((f"sm_{max(older)}",), ptx=True)
  raise RuntimeError(f"this GPU is sm_{sm}, older than any architecture NVRTC {nvrtc.version[0]}.{nvrtc.version[1]} builds for "
                     f"(sm_{min(nvrtc.archs)} and up); point $TINYSPEC_NVRTC at an older NVRTC")

class CUDAContext:
  """One GPU and its primary context; `active()` makes the context current for the calls inside it."""
  def __init__(self, ordinal: int):
    self.cuda = cuda = _driver()
    if not 0 <= ordinal < (n := cuda.Device.count()): raise RuntimeError(f"no CUDA device {ordinal}: this machine has {n}")
    self.dev = cuda.Device(ordinal)
    self.ctx = self.dev.retain_primary_context()

  @contextlib.contextmanager
  def active(self):
    self.ctx.push()
    try: yield self.cuda
    finally: self.cuda.Context.pop()

class CUDAAllocator(LRUAllocator):
  """Device memory from cuMemAlloc. Handles are pycuda DeviceAllocations, or plain addresses for views into them."""
  def __init__(self, gpu: CUDAContext):
    super().__init__()
    self.gpu = gpu
  def _alloc(self, nbytes, options):
    with self.gpu.active() as cuda:
      try: return cuda.mem_alloc(max(nbytes, 1))  # cuMemAlloc refuses 0 bytes
      except cuda.MemoryError as e:  # Buffer.allocate adds the device and the size
        free, total = cuda.mem_get_info()
        raise MemoryError(f"the GPU has {free} of its {total} bytes free ({e})") from None
  def _free(self, handle, nbytes, options):
    with self.gpu.active(): handle.free()
  def copyin(self, dest, src: memoryview):
    if src.nbytes == 0: return
    with self.gpu.active() as cuda: cuda.memcpy_htod(int(dest), np.frombuffer(src, np.uint8))
  def copyout(self, dest: memoryview, src):
    if dest.nbytes == 0: return
    with self.gpu.active() as cuda: cuda.memcpy_dtoh(np.frombuffer(dest, np.uint8), int(src))  # waits for the kernels before it
  def view(self, handle, offset: int, nbytes: int) -> int: return int(handle) + offset

class CUDAProgram(Program):
  """One kernel: the module loaded from its cubin (or PTX), launched with each buffer's address and the variables' values."""
  def __init__(self, gpu: CUDAContext, name: str, binary: bytes):
    super().__init__(name, binary)
    self.gpu = gpu
    with gpu.active() as cuda:
      self.module = cuda.module_from_buffer(binary)
      self.fn = self.module.get_function(name)

  def __call__(self, *bufs, global_size=None, local_size=None, vals=(), wait=False):
    grid, block = (tuple(int(x) for x in (s or (1, 1, 1))) for s in (global_size, local_size))
    args = [np.uintp(int(b)) for b in bufs] + [np.int64(v) for v in vals]  # pointers, then the int64 variables by name
    with self.gpu.active() as cuda:
      if not wait:
        self.fn(*args, grid=grid, block=block)
        return None
      start, stop = cuda.Event(), cuda.Event()
      start.record()
      self.fn(*args, grid=grid, block=block)
      stop.record()
      stop.synchronize()
      return start.time_till(stop) * 1e-3

class CUDARuntime(Runtime):
  """An opened GPU ("CUDA" or "CUDA:n"), with kernels built for its own architecture."""
  def __init__(self, name: str):
    self.gpu = CUDAContext(int(name.partition(":")[2] or 0))
    major, minor = self.gpu.dev.compute_capability()
    super().__init__(name, CUDARenderer(f"sm_{major}{minor}"), compiler_for(major * 10 + minor), CUDAAllocator(self.gpu))
  def program(self, name: str, binary: bytes) -> Program: return CUDAProgram(self.gpu, name, binary)
  def synchronize(self) -> None:
    with self.gpu.active() as cuda: cuda.Context.synchronize()

def check_runtime(name: str, archs: tuple[str, ...]) -> CheckedRuntime:
  """CUDA_CHECK: every kernel rendered for CUDA and compiled by NVRTC for each of `archs` (a compile error fails), then run
  by the numpy interpreter, bfloat16 included. The renderer is the newest arch's."""
  return CheckedRuntime(name, CUDARenderer(archs[-1]), NVRTCCompiler(archs))
