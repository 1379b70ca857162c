"""The WEBGPU device through wgpu (wgpu-native): the adapter, storage-buffer memory, and kernels recorded into one
command encoder until something needs their results. Imported only when the device is probed or opened.

`WEBGPU` opens a device on the adapter wgpu prefers (`power_preference="high-performance"`): a real GPU through Vulkan,
Metal or D3D12, else Vulkan's software driver lavapipe (Debian's mesa-vulkan-drivers), which runs WGSL on the CPU.
`WEBGPU:k` opens a further logical device on the same adapter, with memory of its own: WebGPU has no way to name one of
several GPUs but the power preference.
"""
from __future__ import annotations

import functools
import threading
import time

import numpy as np
import wgpu
from tinyspec.device import LRUAllocator, Program, Runtime
from tinyspec.device.memory import format_bytes

from tinyspec_webgpu.compiler import WGSLCompiler, build_pipeline
from tinyspec_webgpu.renderer import WGSLRenderer, dispatch_grid

ADVICE = ("Without a GPU, install Vulkan's software driver lavapipe (Debian/Ubuntu: apt-get install mesa-vulkan-drivers; "
          "Fedora: dnf install mesa-vulkan-drivers)")
INSTALL = f"wgpu found no WebGPU adapter: no Vulkan, Metal or D3D12 driver here. {ADVICE}"
# wgpu falls back to OpenGL where there is no Vulkan driver, but its OpenGL backend gets integer division and some
# kernels wrong (12 conformance failures on Mesa 22's llvmpipe): such an adapter is refused, with the same advice
UNSUPPORTED_BACKENDS = ("OpenGL",)
# the limits a kernel's shape depends on: the device asks for the adapter's own, not WebGPU's defaults
LIMITS = ("max-storage-buffers-per-shader-stage", "max-storage-buffer-binding-size", "max-buffer-size", "max-compute-workgroup-storage-size",
          "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x", "max-compute-workgroup-size-y",
          "max-compute-workgroup-size-z", "max-compute-workgroups-per-dimension")
# loop iterations per lane a driver runs before it silently stops looping, by the adapter's device name (its first word):
# Mesa 22's llvmpipe, as Vulkan's lavapipe (Debian 12's mesa-vulkan-drivers) and as OpenGL (wgpu's fallback without them)
LOOP_LIMITS = {"llvmpipe": 65535}
MAX_PENDING = 512  # dispatches recorded before the encoder is submitted anyway: a command buffer's size stays bounded
USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST

@functools.cache
def adapter() -> wgpu.GPUAdapter:
  """The adapter every WEBGPU device opens on; RuntimeError saying what to install where there is none."""
  try: found = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
  except RuntimeError as e:  # "Request adapter failed (3): Validation Error\n\nCaused by:\n  No suitable graphics adapter found; ..."
    raise RuntimeError(f"{INSTALL} (wgpu: {str(e).strip().splitlines()[-1].strip()})") from None
  if found is not None and found.info["backend_type"] in UNSUPPORTED_BACKENDS:
    others = [a for a in wgpu.gpu.enumerate_adapters_sync() if a.info["backend_type"] not in UNSUPPORTED_BACKENDS]
    if not others:
      raise RuntimeError(f"wgpu found only {label(found)}: tinyspec does not support wgpu's {found.info['backend_type']} backend "
                         f"(it gets integer division wrong). {ADVICE}")
    found = others[0]
  if found is None: raise RuntimeError(INSTALL)
  return found

def label(a: wgpu.GPUAdapter) -> str:
  """The adapter in a few words: 'llvmpipe (LLVM 15.0.6, 256 bits), Vulkan, CPU, Mesa 22.3.6 (LLVM 15.0.6)'."""
  info = a.info
  return f"{info['device']}, {info['backend_type']}, {info['adapter_type']}, {info['description']}"

def describe(a: wgpu.GPUAdapter) -> str:
  """One line for `tinyspec devices`: the adapter, its backend, and what tinyspec reads from it."""
  lim = a.limits
  f16 = "shader-f16" if "shader-f16" in a.features else "no shader-f16"
  return (f"{label(a)}; {f16}; {lim['max-storage-buffers-per-shader-stage']} storage buffers per stage, workgroup "
          f"{lim['max-compute-invocations-per-workgroup']} lanes, {lim['max-compute-workgroup-storage-size'] // 1024} KiB workgroup memory")

def renderer_for(device: wgpu.GPUDevice) -> WGSLRenderer:
  """The renderer with the limits `device` was granted, float16 where it has shader-f16."""
  lim = device.limits
  sizes = tuple(lim[f"max-compute-workgroup-size-{d}"] for d in "xyz")
  loop_limit = LOOP_LIMITS.get(device.adapter.info["device"].split(" ")[0])
  return WGSLRenderer(f16="shader-f16" in device.features, local_max=sizes, max_invocations=lim["max-compute-invocations-per-workgroup"],
                      shared_max=lim["max-compute-workgroup-storage-size"], dispatch_max=lim["max-compute-workgroups-per-dimension"],
                      max_buffers=lim["max-storage-buffers-per-shader-stage"], max_loop_iterations=loop_limit)

def _padded(n: int) -> int: return max(4, (n + 3) // 4 * 4)  # WebGPU copies and binds whole 4-byte words

class WGPUAllocator(LRUAllocator):
  """Device memory as storage buffers (the handles), each a multiple of 4 bytes. Copies first submit the kernels recorded
  so far, so a copy in lands after the kernels that read the old contents and a copy out sees the kernels' writes."""
  def __init__(self, rt: WGPURuntime):
    super().__init__()
    self.rt, self.largest = rt, min(rt.device.limits["max-buffer-size"], rt.device.limits["max-storage-buffer-binding-size"])
  def _alloc(self, nbytes: int, options) -> wgpu.GPUBuffer:
    if _padded(nbytes) > self.largest:
      raise MemoryError(f"device {self.rt.name} binds at most {self.largest} bytes ({format_bytes(self.largest)}) per storage buffer "
                        "(maxStorageBufferBindingSize)")
    try: return self.rt.device.create_buffer(size=_padded(nbytes), usage=USAGE)
    except wgpu.GPUError as e: raise MemoryError(f"wgpu refused a buffer of {nbytes} bytes on {self.rt.name} ({e})") from None
  def _free(self, handle: wgpu.GPUBuffer, nbytes: int, options) -> None:
    pass  # dropped: wgpu frees it once no recorded command uses it (an explicit destroy would break the pending encoder)
  def copyin(self, dest: wgpu.GPUBuffer, src: memoryview) -> None:
    if not src.nbytes: return
    data = src.cast("B") if src.nbytes % 4 == 0 else bytes(src) + bytes(-src.nbytes % 4)
    with self.rt.lock:
      self.rt.flush()
      self.rt.device.queue.write_buffer(dest, 0, data)
  def copyout(self, dest: memoryview, src: wgpu.GPUBuffer) -> None:
    if not dest.nbytes: return
    with self.rt.lock:
      self.rt.flush()
      data = self.rt.device.queue.read_buffer(src, 0, _padded(dest.nbytes))
    np.frombuffer(dest.cast("B"), np.uint8)[:] = np.frombuffer(data, np.uint8)[:dest.nbytes]

class WGPUProgram(Program):
  """One kernel: its compute pipeline. A launch binds the buffers (and a uniform holding the variables' values) and
  records one dispatch of `global_size` workgroups into the runtime's open compute pass; the workgroup's shape is the
  shader's own @workgroup_size."""
  def __init__(self, name: str, binary: bytes, rt: WGPURuntime):
    super().__init__(name, binary)
    self.rt, self.pipeline = rt, build_pipeline(rt.device, binary.decode())
    self.layout = self.pipeline.get_bind_group_layout(0)

  def __call__(self, *bufs, global_size=None, local_size=None, vals=(), wait=False):
    if 0 in (global_size or ()): return 0.0 if wait else None  # an empty grid runs nothing
    grid = dispatch_grid(tuple(global_size or ()), self.rt.renderer.dispatch_max)
    entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(bufs)]
    if vals:
      if not all(-2**31 <= v < 2**31 for v in vals): raise ValueError(f"{self.name}: variable values {vals} do not fit WGSL's i32")
      data = np.zeros(-(-len(vals) // 4) * 4, np.int32)  # a uniform struct is a multiple of 16 bytes
      data[:len(vals)] = vals
      uniform = self.rt.device.create_buffer_with_data(data=data, usage=wgpu.BufferUsage.UNIFORM)
      entries.append({"binding": len(bufs), "resource": {"buffer": uniform}})
    group = self.rt.device.create_bind_group(layout=self.layout, entries=entries)
    if not wait: return self.rt.dispatch(self.pipeline, group, grid)
    with self.rt.lock:
      self.rt.synchronize()  # time this kernel alone
      start = time.perf_counter()
      self.rt.dispatch(self.pipeline, group, grid)
      self.rt.synchronize()
      return time.perf_counter() - start

class WGPURuntime(Runtime):
  """An opened WebGPU device. Launches are recorded into one compute pass of one command encoder (WebGPU orders the
  dispatches of a pass and makes each one's writes visible to the next); the encoder is submitted when memory is copied,
  on `synchronize`, or every MAX_PENDING dispatches. The open encoder is shared: `lock` keeps threads from recording into
  it while another submits it."""
  def __init__(self, name: str):
    a = adapter()
    features = [f for f in ("shader-f16",) if f in a.features]
    self.device = a.request_device_sync(required_features=features, required_limits={k: a.limits[k] for k in LIMITS})
    self.encoder: wgpu.GPUCommandEncoder | None = None
    self.compute_pass: wgpu.GPUComputePassEncoder | None = None
    self.pending = 0
    self.lock = threading.RLock()
    self.fence = self.device.create_buffer(size=4, usage=USAGE)
    super().__init__(name, renderer_for(self.device), WGSLCompiler(self.device, label(a)), WGPUAllocator(self))

  def program(self, name: str, binary: bytes) -> Program: return WGPUProgram(name, binary, self)

  def dispatch(self, pipeline: wgpu.GPUComputePipeline, group: wgpu.GPUBindGroup, grid: tuple[int, int, int]) -> None:
    """Record one dispatch into the open compute pass (opening one if none is)."""
    with self.lock:
      if self.compute_pass is None:
        self.encoder = self.device.create_command_encoder()
        self.compute_pass = self.encoder.begin_compute_pass()
      self.compute_pass.set_pipeline(pipeline)
      self.compute_pass.set_bind_group(0, group)
      self.compute_pass.dispatch_workgroups(*grid)
      self.pending += 1
      if self.pending >= MAX_PENDING: self.flush()

  def flush(self) -> None:
    """Submit the dispatches recorded so far (without waiting for them)."""
    with self.lock:
      if self.compute_pass is None: return
      compute_pass, encoder = self.compute_pass, self.encoder
      self.encoder, self.compute_pass, self.pending = None, None, 0  # a failed submit leaves no half-ended pass behind
      compute_pass.end()
      self.device.queue.submit([encoder.finish()])

  def synchronize(self) -> None:
    # reading a buffer back waits for the copy, and the queue runs in order: for everything submitted before it too
    # (wgpu-py 0.32's on_submitted_work_done_sync fails on its own callback's signature)
    with self.lock:
      self.flush()
      self.device.queue.read_buffer(self.fence, 0, 4)
