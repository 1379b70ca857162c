"""The AMD device on real hardware: HIP's runtime (libamdhip64) through ctypes, no Python bindings needed.

Kernels are built by `AMDCompiler` for the GPU's arch, linked into a code object by ROCm's `ld.lld -shared`, loaded with
`hipModuleLoadData` and launched with `hipModuleLaunchKernel` on the null stream: grid = `global_size` workgroups,
workgroup = `local_size` lanes, arguments the buffers' device pointers then the variables as int64 (the kernel's
parameter order). Memory is `hipMalloc`ed; copies are `hipMemcpy`, which waits for the kernels queued before it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from tinyspec.device import LRUAllocator, Program, Runtime

from tinyspec_amd.compiler import AMDCompiler, unpack
from tinyspec_amd.renderer import AMDRenderer

_H2D, _D2H = 1, 2  # hipMemcpyKind
_OUT_OF_MEMORY = 2  # hipErrorOutOfMemory
_vp, _i, _u, _sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
_P = ctypes.POINTER
_SIGNATURES = {  # name: argument types; every one returns hipError_t (an int)
  "hipInit": [_u], "hipGetDeviceCount": [_P(_i)], "hipSetDevice": [_i], "hipDeviceSynchronize": [],
  "hipMalloc": [_P(_vp), _sz], "hipFree": [_vp], "hipMemcpy": [_vp, _vp, _sz, _i],
  "hipModuleLoadData": [_P(_vp), _vp], "hipModuleUnload": [_vp], "hipModuleGetFunction": [_P(_vp), _vp, ctypes.c_char_p],
  "hipModuleLaunchKernel": [_vp, _u, _u, _u, _u, _u, _u, _u, _vp, _P(_vp), _P(_vp)],
  "hipEventCreate": [_P(_vp)], "hipEventRecord": [_vp, _vp], "hipEventSynchronize": [_vp], "hipEventDestroy": [_vp],
  "hipEventElapsedTime": [_P(ctypes.c_float), _vp, _vp],
}

def rocm_dirs() -> list[Path]:
  """Where ROCm may be installed: $ROCM_PATH, $HIP_PATH, /opt/rocm."""
  return [Path(p) for p in (os.environ.get("ROCM_PATH"), os.environ.get("HIP_PATH"), "/opt/rocm") if p]

def find_hip() -> str | None:
  """The path of libamdhip64, or None."""
  for d in rocm_dirs():
    if (p := d / "lib" / "libamdhip64.so").exists(): return str(p)
  return ctypes.util.find_library("amdhip64")

def find_lld() -> str | None:
  """ROCm's ld.lld (it links AMDGPU objects into loadable code objects), else one on PATH."""
  for d in rocm_dirs():
    if (p := d / "llvm" / "bin" / "ld.lld").exists(): return str(p)
  return shutil.which("ld.lld")

class HIPError(RuntimeError):
  """A HIP call failed; the message names the call and HIP's error."""

class HIP:
  """libamdhip64 loaded, with argument types for the calls the device makes; `call` raises HIPError on any failure."""
  def __init__(self, path: str):
    self.lib = ctypes.CDLL(path)
    for name, args in _SIGNATURES.items():
      fn = getattr(self.lib, name)
      fn.argtypes, fn.restype = args, ctypes.c_int
    self.lib.hipGetErrorString.argtypes, self.lib.hipGetErrorString.restype = [ctypes.c_int], ctypes.c_char_p
    # ROCm 6 renamed the properties call (the struct changed); the arch name is found in it by pattern, not offset
    self.props = getattr(self.lib, "hipGetDevicePropertiesR0600", None) or self.lib.hipGetDeviceProperties
    self.props.argtypes, self.props.restype = [_vp, _i], ctypes.c_int

  def call(self, name: str, *args) -> None:
    if (rc := getattr(self.lib, name)(*args)) != 0:
      err = HIPError(f"{name} failed: {self.lib.hipGetErrorString(rc).decode()} ({rc})")
      raise MemoryError(str(err)) if rc == _OUT_OF_MEMORY else err

  def device_count(self) -> int:
    self.call("hipInit", 0)
    n = _i()
    self.call("hipGetDeviceCount", ctypes.byref(n))
    return n.value

  def arch(self, device: int) -> str:
    """The device's gfx arch name ("gfx1100"), from its properties' gcnArchName."""
    buf = ctypes.create_string_buffer(16384)  # larger than any version of hipDeviceProp_t
    if (rc := self.props(buf, device)) != 0: raise HIPError(f"hipGetDeviceProperties failed: {self.lib.hipGetErrorString(rc).decode()}")
    if not (m := re.search(rb"gfx[0-9a-f]+", buf.raw)): raise HIPError(f"no gfx arch name in the properties of AMD device {device}")
    return m.group().decode()

@functools.cache
def hip() -> HIP:
  """libamdhip64, loaded once; raises RuntimeError saying what is missing."""
  if (path := find_hip()) is None: raise RuntimeError("libamdhip64 not found (install ROCm, or set ROCM_PATH to it)")
  return HIP(path)

def probe() -> str | None:
  """None when an AMD GPU can run kernels here, else what is missing."""
  try: n = hip().device_count()
  except (RuntimeError, OSError, AttributeError) as e: return str(e)
  if n == 0: return "HIP found no AMD GPU (hipGetDeviceCount is 0)"
  if find_lld() is None: return "ld.lld not found (ROCm's llvm/bin/ld.lld links kernels into code objects)"
  return None

def link(obj: bytes) -> bytes:
  """A relocatable AMDGPU object linked into the shared code object HIP loads."""
  with tempfile.TemporaryDirectory(prefix="tinyspec-amd-") as d:
    src, out = Path(d) / "k.o", Path(d) / "k.hsaco"
    src.write_bytes(obj)
    res = subprocess.run([find_lld() or "ld.lld", "-shared", str(src), "-o", str(out)], capture_output=True, text=True)
    if res.returncode: raise RuntimeError(f"ld.lld failed to link an AMDGPU code object:\n{res.stderr}")
    return out.read_bytes()

class HIPAllocator(LRUAllocator):
  """Device memory: handles are device addresses (ints), so a view is an address plus an offset."""
  def __init__(self, rt: AMDRuntime):
    super().__init__()
    self.rt = rt
  def _alloc(self, nbytes, options) -> int:
    self.rt.select()
    p = _vp()
    self.rt.hip.call("hipMalloc", ctypes.byref(p), max(nbytes, 1))  # HIP returns null for 0 bytes
    return p.value
  def _free(self, handle, nbytes, options) -> None:
    self.rt.select()
    self.rt.hip.call("hipFree", handle)
  def copyin(self, dest: int, src: memoryview) -> None:
    a = np.frombuffer(src, np.uint8)
    self.rt.select()
    self.rt.hip.call("hipMemcpy", dest, a.ctypes.data, a.nbytes, _H2D)
  def copyout(self, dest: memoryview, src: int) -> None:
    a = np.frombuffer(dest, np.uint8)
    self.rt.select()
    self.rt.hip.call("hipMemcpy", a.ctypes.data, src, a.nbytes, _D2H)
  def view(self, handle: int, offset: int, nbytes: int) -> int: return handle + offset

class HIPProgram(Program):
  """One kernel's code object, loaded as a HIP module."""
  def __init__(self, name: str, binary: bytes, rt: AMDRuntime):
    super().__init__(name, binary)
    self.rt, (self.info, objs) = rt, unpack(binary)
    if rt.arch not in objs: raise RuntimeError(f"{name} was built for {', '.join(objs)}, not for {rt.name}'s {rt.arch}")
    self.image = link(objs[rt.arch])  # kept alive while the module lives
    rt.select()
    self.module, fn = _vp(), _vp()
    rt.hip.call("hipModuleLoadData", ctypes.byref(self.module), self.image)
    rt.hip.call("hipModuleGetFunction", ctypes.byref(fn), self.module, name.encode())
    self.fn = fn

  def __call__(self, *bufs, global_size=None, local_size=None, vals=(), wait=False):
    if len(bufs) != len(self.info.buffers): raise TypeError(f"{self.name} takes {len(self.info.buffers)} buffers, got {len(bufs)}")
    args = [_vp(b) for b in bufs] + [ctypes.c_int64(v) for v in vals]
    params = (_vp * max(len(args), 1))(*[ctypes.addressof(a) for a in args])
    grid, block = tuple(global_size or (1, 1, 1)), tuple(local_size or (1, 1, 1))
    grid, block = grid + (1,) * (3 - len(grid)), block + (1,) * (3 - len(block))
    hip_ = self.rt.hip
    self.rt.select()
    events = [self.rt.event() for _ in range(2)] if wait else []
    if wait: hip_.call("hipEventRecord", events[0], None)
    hip_.call("hipModuleLaunchKernel", self.fn, *grid, *block, 0, None, params, None)
    if not wait: return None
    hip_.call("hipEventRecord", events[1], None)
    hip_.call("hipEventSynchronize", events[1])
    ms = ctypes.c_float()
    hip_.call("hipEventElapsedTime", ctypes.byref(ms), *events)
    for e in events: hip_.call("hipEventDestroy", e)
    return ms.value / 1e3

  def __del__(self):
    if getattr(self, "module", None) and self.module.value:
      try: self.rt.hip.call("hipModuleUnload", self.module)
      except Exception: pass  # at interpreter exit HIP may be gone already

class AMDRuntime(Runtime):
  """An AMD GPU through HIP ("AMD" is device 0, "AMD:1" device 1); kernels compiled for its own arch."""
  def __init__(self, name: str):
    self.hip, self.index = hip(), int(name.partition(":")[2] or 0)
    if not 0 <= self.index < (n := self.hip.device_count()): raise RuntimeError(f"{name}: HIP sees {n} AMD GPU(s)")
    self.arch = self.hip.arch(self.index)
    super().__init__(name, AMDRenderer(self.arch), AMDCompiler((self.arch,)), HIPAllocator(self))

  def select(self) -> None:
    """Make this device HIP's current one for the calling thread (HIP keeps one per thread)."""
    self.hip.call("hipSetDevice", self.index)

  def event(self) -> ctypes.c_void_p:
    e = _vp()
    self.hip.call("hipEventCreate", ctypes.byref(e))
    return e

  def program(self, name: str, binary: bytes) -> Program: return HIPProgram(name, binary, self)

  def synchronize(self) -> None:
    self.select()
    self.hip.call("hipDeviceSynchronize")
