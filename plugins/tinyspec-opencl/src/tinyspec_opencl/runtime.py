"""The OPENCL device through pyopencl: device discovery, cl.Buffer memory, and programs launched on an in-order queue.
Imported only when the device is probed or opened.

`OPENCL:k` is the k-th device of all platforms, in the order the ICD loader lists them, whether or not it works; `OPENCL`
is the first of them whose compiler builds a kernel (`compiler.build_failure`), which is OPENCL:0 unless that one cannot.
PoCL gives one CPU device; `POCL_DEVICES="pthread pthread"` gives two, for trying several devices on one machine.
"""
from __future__ import annotations

import functools

import numpy as np
import pyopencl as cl
from tinyspec.device import LRUAllocator, Program, Runtime
from tinyspec.device.memory import format_bytes

from tinyspec_opencl.compiler import OpenCLCompiler, build_failure, fix_for, quiet_build
from tinyspec_opencl.renderer import OpenCLRenderer


@functools.cache
def devices() -> tuple[cl.Device, ...]:
  """Every OpenCL device of every platform; RuntimeError saying what is missing when there is none."""
  try: platforms = cl.get_platforms()
  except cl.Error as e:
    raise RuntimeError(f"no OpenCL platform: the ICD loader found none ({e}); install one, e.g. pip install pocl-binary-distribution "
                       "for a CPU device (on CPUs newer than its LLVM 14, such as Zen 5, your distribution's PoCL: apt-get install "
                       "pocl-opencl-icd), or a GPU vendor's OpenCL driver") from None
  found, empty = [], []
  for p in platforms:
    try: found += p.get_devices()
    except cl.Error: empty.append(p.name)  # DEVICE_NOT_FOUND: a platform whose driver sees no hardware
  if not found: raise RuntimeError(f"the OpenCL platforms found have no devices: {', '.join(empty)}")
  return tuple(found)

def _platform_version(d: cl.Device) -> str:
  return d.platform.version.split("  ")[0].strip()  # PoCL appends its build options after two spaces

def label(d: cl.Device) -> str:
  """The device and its platform in a few words: 'pthread-AMD EPYC (OpenCL 3.0 PoCL 3.0-rc2)'."""
  return f"{d.name.strip()} ({_platform_version(d)})"

def describe(d: cl.Device) -> str:
  """One line for `tinyspec devices`: platform, device, and what tinyspec reads from it, or why it cannot build kernels."""
  if (error := build_failure(d)) is not None: return f"{label(d)} cannot build kernels: {error}"
  exts = d.extensions.split()
  fp = "/".join(f for f, e in (("fp16", "cl_khr_fp16"), ("fp64", "cl_khr_fp64")) if e in exts) or "no fp16/fp64"
  return (f"{d.platform.name} {_platform_version(d)}: {d.name.strip()}, {d.opencl_c_version.strip()}, {d.max_compute_units} compute units, "
          f"work-group {d.max_work_group_size}, local memory {d.local_mem_size // 1024} KiB, {fp}")

def first_usable() -> int:
  """The index of the first device that builds kernels; RuntimeError saying why each cannot, and what to do, when none can."""
  found = devices()
  if (first := next((i for i, d in enumerate(found) if build_failure(d) is None), None)) is not None: return first  # builds no further
  failures = [build_failure(d) for d in found]  # cached: every device failed above
  by_error: dict[str, list[str]] = {}
  for i, (d, error) in enumerate(zip(found, failures)): by_error.setdefault(error, []).append(f"OPENCL:{i} {label(d)}")
  why = "; ".join(f"{', '.join(names)}: {error}" for error, names in by_error.items())
  fixes = dict.fromkeys(fix_for(error) for error in by_error)
  raise RuntimeError(f"no OpenCL device here can build a kernel ({why}). Fix: {'; '.join(fixes)}")

def renderer_for(d: cl.Device) -> OpenCLRenderer:
  """The renderer with `d`'s limits: work-group sizes (each dimension within the total), local memory, half and double."""
  exts, wg = d.extensions.split(), d.max_work_group_size
  # a 32-bit device counts work-items in 32 bits: keep the whole grid within that
  grid = None if d.address_bits >= 64 else (max(1, (2**31 - 1) // wg),) * 3
  return OpenCLRenderer(local_max=tuple(min(s, wg) for s in d.max_work_item_sizes[:3]), shared_max=d.local_mem_size, global_max=grid,
                        fp16="cl_khr_fp16" in exts, float64="cl_khr_fp64" in exts, cpu=bool(d.type & cl.device_type.CPU))

class CLAllocator(LRUAllocator):
  """Device memory as cl.Buffer objects (the handles). Copies block, so the host bytes may be reused at once; the queue is
  in order, so they also wait for the kernels launched before them."""
  def __init__(self, ctx: cl.Context, queue: cl.CommandQueue, device: cl.Device):
    super().__init__()
    self.ctx, self.queue, self.largest = ctx, queue, device.max_mem_alloc_size
  def _alloc(self, nbytes: int, options) -> cl.Buffer:
    if nbytes > self.largest:  # the driver would say only INVALID_BUFFER_SIZE
      raise MemoryError(f"the device's largest allocation is {self.largest} bytes ({format_bytes(self.largest)}, CL_DEVICE_MAX_MEM_ALLOC_SIZE)")
    try: return cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, max(nbytes, 1))  # OpenCL has no empty buffers
    except cl.Error as e: raise MemoryError(f"the OpenCL driver refused it ({e})") from None
  def _free(self, handle: cl.Buffer, nbytes: int, options) -> None: handle.release()
  def copyin(self, dest: cl.Buffer, src: memoryview) -> None:
    if src.nbytes: cl.enqueue_copy(self.queue, dest, src, is_blocking=True)
  def copyout(self, dest: memoryview, src: cl.Buffer) -> None:
    if dest.nbytes: cl.enqueue_copy(self.queue, dest, src, is_blocking=True)

class OpenCLProgram(Program):
  """One kernel. OpenCL's global work size is in work-items: core's `global_size` (workgroups) times `local_size`."""
  def __init__(self, name: str, binary: bytes, rt: OpenCLRuntime):
    super().__init__(name, binary)
    self.rt = rt
    with quiet_build(): self.prg = cl.Program(rt.ctx, [rt.device], [binary]).build()
    self.kernel = cl.Kernel(self.prg, name)

  def __call__(self, *bufs, global_size=None, local_size=None, vals=(), wait=False):
    local = tuple(local_size or (1, 1, 1))
    work = tuple(g * n for g, n in zip(global_size or (1, 1, 1), local))
    if 0 in work: return 0.0 if wait else None  # an empty grid runs nothing (OpenCL refuses a zero work size)
    self.kernel.set_args(*bufs, *(np.int64(v) for v in vals))
    event = cl.enqueue_nd_range_kernel(self.rt.queue, self.kernel, work, local)
    if not wait: return None
    event.wait()
    return (event.profile.end - event.profile.start) * 1e-9

class OpenCLRuntime(Runtime):
  """An opened OpenCL device: its own context and a profiling, in-order command queue."""
  def __init__(self, name: str):
    found, index = devices(), name.partition(":")[2]
    index = int(index) if index else first_usable()
    if index >= len(found):
      raise RuntimeError(f"{name}: there {'is' if len(found) == 1 else 'are'} only {len(found)} OpenCL device{'s' * (len(found) != 1)} here: "
                         + "; ".join(f"OPENCL:{i} {label(d)}" for i, d in enumerate(found)))
    if (error := build_failure(found[index])) is not None:
      raise RuntimeError(f"{name} {label(found[index])} cannot build kernels: {error}. Fix: {fix_for(error)}")
    self.device = found[index]
    self.ctx = cl.Context([self.device])
    self.queue = cl.CommandQueue(self.ctx, self.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    super().__init__(name, renderer_for(self.device), OpenCLCompiler(self.ctx, self.device), CLAllocator(self.ctx, self.queue, self.device))

  def program(self, name: str, binary: bytes) -> Program: return OpenCLProgram(name, binary, self)
  def synchronize(self) -> None: self.queue.finish()
