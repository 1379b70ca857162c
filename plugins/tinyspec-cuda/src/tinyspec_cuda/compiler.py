"""NVRTC, NVIDIA's runtime compiler, called through ctypes: CUDA C source to cubin (or PTX) with no CUDA toolkit installed.

The library comes from PyPI: `nvidia-cuda-nvrtc` puts libnvrtc.so.13 and its builtins library into site-packages
(nvidia/cu13/lib; CUDA 12's wheels use nvidia/cuda_nvrtc/lib), and `nvidia-cuda-runtime` brings the headers NVRTC
lacks (cuda_fp16.h, cuda_bf16.h), which kernels include only when they use half or bfloat16. `$TINYSPEC_NVRTC` names
another libnvrtc. Nothing here needs a GPU or a driver.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import importlib.util
import os
import sys
import threading

from tinyspec.device import CompileError, Compiler

# -fmad=false: a*b+c stays two roundings, as numpy computes it (NVRTC fuses them into one FMA by default);
# precise division and square root are NVRTC's defaults, and denormals are kept (-ftz=false)
FLAGS = ("--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--std=c++17", "-default-device")

def _nvidia_dirs() -> list[str]:
  """The folders of the `nvidia` namespace package that PyPI's CUDA wheels install into (found without importing it)."""
  spec = importlib.util.find_spec("nvidia")
  return list(spec.submodule_search_locations or ()) if spec else []

def _candidates() -> list[str]:
  """Paths to try for libnvrtc, best first: $TINYSPEC_NVRTC, the wheels (newest CUDA first), then the system's."""
  out = [os.environ["TINYSPEC_NVRTC"]] if os.environ.get("TINYSPEC_NVRTC") else []
  pattern = ("bin", "nvrtc64_*.dll") if sys.platform == "win32" else ("lib", "libnvrtc.so.*")
  for d in _nvidia_dirs():
    for sub in ("cu13", "cu12", "cuda_nvrtc"):
      out += sorted((p for p in glob.glob(os.path.join(d, sub, *pattern)) if "builtins" not in p), reverse=True)
  if found := ctypes.util.find_library("nvrtc"): out.append(found)
  return out

class NVRTC:
  """The loaded library: `version` (major, minor), `archs` (the sm_ numbers it can build for) and `compile`."""
  def __init__(self, path: str):
    # libnvrtc opens its builtins library by name at run time, and the wheel's folder is not on the loader's search path:
    # loading it first, globally, makes that lookup find the copy already in memory
    for builtins in glob.glob(os.path.join(os.path.dirname(path), "*nvrtc-builtins*")):
      ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    self.path, self.lib = path, ctypes.CDLL(path)
    self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    major, minor, n = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    self._check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    self.version = (major.value, minor.value)
    self._check(self.lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
    archs = (ctypes.c_int * n.value)()
    self._check(self.lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    self.archs: tuple[int, ...] = tuple(archs)
    self.lock = threading.Lock()  # an nvrtcProgram is not safe to share; one compile at a time keeps the log with its program

  def _check(self, status: int, what: str):
    if status != 0: raise RuntimeError(f"{what} failed: {self.lib.nvrtcGetErrorString(status).decode()}")

  def _get(self, prog, what: str) -> bytes:
    size = ctypes.c_size_t()
    self._check(getattr(self.lib, f"nvrtcGet{what}Size")(prog, ctypes.byref(size)), f"nvrtcGet{what}Size")
    buf = ctypes.create_string_buffer(size.value)
    self._check(getattr(self.lib, f"nvrtcGet{what}")(prog, buf), f"nvrtcGet{what}")
    return buf.raw

  def compile(self, src: str, options: tuple[str, ...], output: str) -> tuple[bytes | None, str]:
    """(`output` ("CUBIN" or "PTX"), log), or (None, log) when NVRTC refuses the source. The source is named kernel.cu."""
    with self.lock:
      prog = ctypes.c_void_p()
      self._check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"kernel.cu", 0, None, None), "nvrtcCreateProgram")
      try:
        opts = [o.encode() for o in options]
        status = self.lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        log = self._get(prog, "ProgramLog").rstrip(b"\0").decode(errors="replace")
        if status != 0: return None, log or self.lib.nvrtcGetErrorString(status).decode()
        return self._get(prog, output), log
      finally: self.lib.nvrtcDestroyProgram(ctypes.byref(prog))

@functools.cache
def load() -> NVRTC:
  """The first libnvrtc that loads; RuntimeError saying what was tried and how to install one when none does."""
  tried = []
  for path in _candidates():
    try: return NVRTC(path)
    except (OSError, RuntimeError, AttributeError) as e: tried.append(f"{path}: {e}")
  raise RuntimeError("NVRTC not found (pip install nvidia-cuda-nvrtc)" + (f"; tried {'; '.join(tried)}" if tried else ""))

@functools.cache
def include_dirs() -> tuple[str, ...]:
  """The folder holding cuda_fp16.h, for kernels that use half: PyPI's nvidia-cuda-runtime, else a CUDA toolkit's. One
  folder only, so headers of two CUDA versions never mix; () when there is none."""
  dirs = [os.path.join(d, sub, "include") for d in _nvidia_dirs() for sub in ("cu13", "cu12", "cuda_runtime")]
  dirs += [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)] + ["/usr/local/cuda/include"]
  return next(((d,) for d in dirs if os.path.exists(os.path.join(d, "cuda_fp16.h"))), ())

class NVRTCCompiler(Compiler):
  """CUDA C to a cubin for each architecture in `archs` (e.g. ("sm_80", "sm_90")); every one must compile, and the first
  one's binary is returned. `ptx=True` returns PTX for the first instead, for a GPU newer than this NVRTC knows, which the
  driver then compiles. The version holds NVRTC's version, the architectures, the flags and the header folders."""
  name = "nvrtc"
  def __init__(self, archs: tuple[str, ...] = ("sm_80",), ptx: bool = False):
    self.nvrtc, self.archs, self.ptx = load(), archs, ptx
    if bad := [a for a in archs if not a.startswith("sm_") or int(a[3:]) not in self.nvrtc.archs]:
      raise ValueError(f"NVRTC {'.'.join(map(str, self.nvrtc.version))} cannot build for {', '.join(bad)}; "
                       f"it knows sm_{', sm_'.join(map(str, self.nvrtc.archs))}")
    self.version = f"nvrtc {'.'.join(map(str, self.nvrtc.version))} {' '.join(archs)}{' ptx' if ptx else ''} {' '.join(FLAGS)} {include_dirs()}"

  def compile(self, src: str) -> bytes:
    out = b""
    for i, arch in enumerate(self.archs):
      ptx = self.ptx and i == 0
      target = f"--gpu-architecture={arch.replace('sm_', 'compute_') if ptx else arch}"
      binary, log = self.nvrtc.compile(src, (target, *FLAGS, *(f"--include-path={d}" for d in include_dirs())), "PTX" if ptx else "CUBIN")
      if binary is None:
        if "could not open source file" in log and ("cuda_fp16.h" in log or "cuda_bf16.h" in log):
          log += "\n(the half and bfloat16 headers come from PyPI: pip install nvidia-cuda-runtime)"
        raise CompileError(f"{self.name} {arch}", log, src)
      if i == 0: out = binary
    return out
