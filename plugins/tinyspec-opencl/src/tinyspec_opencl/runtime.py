"""The OPENCL device through pyopencl: device discovery, a compiler that builds OpenCL C into the device's binaries,
cl.Buffer memory, and programs launched on an in-order queue. Imported only when the device is probed or opened.

`OPENCL:k` is the k-th device of all platforms, in the order the ICD loader lists them (OPENCL is OPENCL:0). PoCL gives
one CPU device; `POCL_DEVICES="pthread pthread"` gives two, for trying several devices on one machine.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pyopencl as cl
from tinyspec.device import CompileError, Compiler, LRUAllocator, Program, Runtime

from tinyspec_opencl.renderer import OpenCLRenderer


@functools.cache
def devices() -> tuple[cl.Device, ...]:
  """Every OpenCL device of every platform; RuntimeError saying what is missing when there is none."""
  try: platforms = cl.get_platforms()
  except cl.Error as e:
    raise RuntimeError(f"no OpenCL platform: the ICD loader found none ({e}); install one, e.g. pip install pocl-binary-distribution "
                       "for a CPU device, or a GPU vendor's OpenCL driver") from None
  found, empty = [], []
  for p in platforms:
    try: found += p.get_devices()
    except cl.Error: empty.append(p.name)  # DEVICE_NOT_FOUND: a platform whose driver sees no hardware
  if not found: raise RuntimeError(f"the OpenCL platforms found have no devices: {', '.join(empty)}")
  return tuple(found)

def describe(d: cl.Device) -> str:
  """One line for `tinyspec devices`: platform, device, and what tinyspec reads from it."""
  exts = d.extensions.split()
  fp = "/".join(f for f, e in (("fp16", "cl_khr_fp16"), ("fp64", "cl_khr_fp64")) if e in exts) or "no fp16/fp64"
  platform = d.platform.version.split("  ")[0].strip()  # PoCL appends its build options after two spaces
  return (f"{d.platform.name} {platform}: {d.name.strip()}, {d.opencl_c_version.strip()}, {d.max_compute_units} compute units, "
          f"work-group {d.max_work_group_size}, local memory {d.local_mem_size // 1024} KiB, {fp}")

def renderer_for(d: cl.Device) -> OpenCLRenderer:
  """The renderer with `d`'s limits: work-group sizes (each dimension within the total), local memory, half and double."""
  exts, wg = d.extensions.split(), d.max_work_group_size
  # a 32-bit device counts work-items in 32 bits: keep the whole grid within that
  grid = None if d.address_bits >= 64 else (max(1, (2**31 - 1) // wg),) * 3
  return OpenCLRenderer(local_max=tuple(min(s, wg) for s in d.max_work_item_sizes[:3]), shared_max=d.local_mem_size, global_max=grid,
                        fp16="cl_khr_fp16" in exts, float64="cl_khr_fp64" in exts)

def build_options(d: cl.Device) -> list[str]:
  """Correctly rounded float division and sqrt where the device offers it (OpenCL otherwise allows 2.5 and 3 ulp)."""
  return ["-cl-fp32-correctly-rounded-divide-sqrt"] if d.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT else []

class OpenCLCompiler(Compiler):
  """OpenCL C to the device's program binary (clGetProgramInfo's BINARIES), which `OpenCLProgram` loads without building
  again. A binary belongs to one device and driver, so `version` names both, and the build options."""
  name = "opencl"
  def __init__(self, ctx: cl.Context, device: cl.Device):
    self.ctx, self.device, self.options = ctx, device, build_options(device)
    p = device.platform
    self.version = f"{p.name} {p.version} | {device.name} {device.driver_version} | {' '.join(self.options)}"

  def compile(self, src: str) -> bytes:
    prg = cl.Program(self.ctx, src)
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", cl.CompilerWarning)  # a build log on success (PoCL's notes): nothing for the user
      try: prg.build(options=self.options, devices=[self.device], cache_dir=False)
      except cl.Error as e:
        try: log = prg.get_build_info(self.device, cl.program_build_info.LOG)
        except cl.Error: log = ""
        raise CompileError(self.name, log.strip() or str(e), src) from None
    return prg.get_info(cl.program_info.BINARIES)[0]

class CLAllocator(LRUAllocator):
  """Device memory as cl.Buffer objects (the handles). Copies block, so the host bytes may be reused at once; the queue is
  in order, so they also wait for the kernels launched before them."""
  def __init__(self, ctx: cl.Context, queue: cl.CommandQueue):
    super().__init__()
    self.ctx, self.queue = ctx, queue
  def _alloc(self, nbytes: int, options) -> cl.Buffer:
    try: return cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, max(nbytes, 1))  # OpenCL has no empty buffers
    except cl.MemoryError as e: raise MemoryError(f"OpenCL could not allocate {nbytes} bytes: {e}") from None
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
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", cl.CompilerWarning)
      self.prg = cl.Program(rt.ctx, [rt.device], [binary]).build()
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
    index, found = int(name.partition(":")[2] or 0), devices()
    if index >= len(found):
      raise RuntimeError(f"{name}: there {'is' if len(found) == 1 else 'are'} only {len(found)} OpenCL device{'s' * (len(found) != 1)} here: "
                         + "; ".join(f"OPENCL:{i} {d.name.strip()}" for i, d in enumerate(found)))
    self.device = found[index]
    self.ctx = cl.Context([self.device])
    self.queue = cl.CommandQueue(self.ctx, self.device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    super().__init__(name, renderer_for(self.device), OpenCLCompiler(self.ctx, self.device), CLAllocator(self.ctx, self.queue))

  def program(self, name: str, binary: bytes) -> Program: return OpenCLProgram(name, binary, self)
  def synchronize(self) -> None: self.queue.finish()
