"""The METAL device: a Mac's GPU through PyObjC's Metal framework (the `runtime` extra). Imported only when it is opened.

Memory is shared between CPU and GPU (MTLResourceStorageModeShared), so copies are plain memory copies once the GPU's
queued work is done. Each launch is one command buffer on the device's queue; `synchronize` waits for the last one.
"""
from __future__ import annotations

import platform

import Metal
import numpy as np
import objc
from tinyspec.device import LRUAllocator, Program, Runtime

from tinyspec_metal.compiler import MetalCompiler
from tinyspec_metal.renderer import MetalRenderer


def _gpu(ordinal: int):
  devices = Metal.MTLCopyAllDevices()
  if not 0 <= ordinal < len(devices): raise RuntimeError(f"no Metal device {ordinal}: this Mac has {len(devices)}")
  return devices[ordinal]

def describe_gpu(ordinal: int) -> str:
  """e.g. "Apple M2 Pro, macOS 14.5"."""
  return f"{_gpu(ordinal).name()}, macOS {platform.mac_ver()[0]}"

class MetalBuffer:
  """An allocator handle: an MTLBuffer and a byte offset into it (non-zero for views)."""
  __slots__ = ("buf", "offset", "nbytes")
  def __init__(self, buf, offset: int, nbytes: int): self.buf, self.offset, self.nbytes = buf, offset, nbytes
  def host(self) -> np.ndarray: return np.frombuffer(self.buf.contents().as_buffer(self.offset + self.nbytes), np.uint8)[self.offset:]

class MetalAllocator(LRUAllocator):
  """Shared-storage MTLBuffers; copies wait for the GPU's queued work first, since it may still read or write them."""
  def __init__(self, rt: MetalRuntime):
    super().__init__()
    self.rt = rt
  def _alloc(self, nbytes, options):
    buf = self.rt.device.newBufferWithLength_options_(max(nbytes, 1), Metal.MTLResourceStorageModeShared)
    if buf is None:  # Buffer.allocate adds the device and the size
      limit = self.rt.device.maxBufferLength()
      raise MemoryError(f"newBufferWithLength refused it (out of memory, or past the device's maxBufferLength, {limit} bytes)")
    return MetalBuffer(buf, 0, nbytes)
  def _free(self, handle, nbytes, options): pass  # the MTLBuffer is released with its last Python reference
  def copyin(self, dest: MetalBuffer, src: memoryview):
    self.rt.synchronize()
    dest.host()[:src.nbytes] = np.frombuffer(src, np.uint8)
  def copyout(self, dest: memoryview, src: MetalBuffer):
    self.rt.synchronize()
    np.frombuffer(dest, np.uint8)[:] = src.host()[:dest.nbytes]
  def view(self, handle: MetalBuffer, offset: int, nbytes: int) -> MetalBuffer: return MetalBuffer(handle.buf, handle.offset + offset, nbytes)

class MetalProgram(Program):
  """One kernel's compute pipeline; each call encodes one dispatch in its own command buffer."""
  def __init__(self, rt: MetalRuntime, name: str, binary: bytes):
    super().__init__(name, binary)
    self.rt = rt
    fn = rt.compiler.library(binary.decode()).newFunctionWithName_(name)
    self.pipeline, err = rt.device.newComputePipelineStateWithFunction_error_(fn, None)
    if self.pipeline is None: raise RuntimeError(f"Metal could not build a pipeline for {name}: {err.localizedDescription() if err else '?'}")

  def __call__(self, *bufs, global_size=None, local_size=None, vals=(), wait=False):
    grid, block = (tuple(int(x) for x in (s or (1, 1, 1))) for s in (global_size, local_size))
    if (n := block[0] * block[1] * block[2]) > (most := self.pipeline.maxTotalThreadsPerThreadgroup()):
      raise RuntimeError(f"{self.name}: a workgroup of {n} threads, but this pipeline allows at most {most}")
    with objc.autorelease_pool():
      cb = self.rt.queue.commandBuffer()
      enc = cb.computeCommandEncoder()
      enc.setComputePipelineState_(self.pipeline)
      for i, b in enumerate(bufs): enc.setBuffer_offset_atIndex_(b.buf, b.offset, i)
      for i, v in enumerate(vals, len(bufs)): enc.setBytes_length_atIndex_(np.int64(v).tobytes(), 8, i)  # `constant long&` parameters
      enc.dispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSize(*grid), Metal.MTLSize(*block))
      enc.endEncoding()
      cb.commit()
      self.rt.pending = cb
      if not wait: return None
      self.rt.synchronize()
      return cb.GPUEndTime() - cb.GPUStartTime()

class MetalRuntime(Runtime):
  """An opened Metal GPU ("METAL" or "METAL:n" in the order MTLCopyAllDevices lists them)."""
  def __init__(self, name: str):
    self.device = _gpu(int(name.partition(":")[2] or 0))
    self.queue, self.pending = self.device.newCommandQueue(), None
    super().__init__(name, MetalRenderer(), MetalCompiler(self.device), MetalAllocator(self))
  def program(self, name: str, binary: bytes) -> Program: return MetalProgram(self, name, binary)
  def synchronize(self) -> None:
    # command buffers on one queue run in order: the last one done means all are
    if (cb := self.pending) is None: return
    cb.waitUntilCompleted()
    self.pending = None
    if cb.error() is not None: raise RuntimeError(f"Metal kernel failed: {cb.error().localizedDescription()}")
