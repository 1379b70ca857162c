"""The CUDA plugin's hooks: two devices, CUDA (the GPU, through pycuda) and CUDA_CHECK (NVRTC + the numpy interpreter).

Importing this module is cheap: NVRTC, the driver and pycuda are looked at by the probes and loaded by `open`."""
from __future__ import annotations

import ctypes
import importlib.util
import sys

from tinyspec.device import DeviceSpec
from tinyspec.hookspecs import hookimpl

CHECK_ARCHS = ("sm_80", "sm_90")
"""The architectures CUDA_CHECK builds every kernel for."""

def _nvrtc_missing() -> str | None:
  from tinyspec_cuda.compiler import load
  try: load()
  except RuntimeError as e: return str(e)
  return None

def _probe_cuda() -> str | None:
  # everything that is missing, at once, so that one read says all there is to install
  driver = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
  missing = [] if sys.platform != "darwin" else ["CUDA does not run on macOS"]
  try: ctypes.CDLL(driver)
  except OSError: missing.append(f"no NVIDIA driver ({driver} not found)")
  if importlib.util.find_spec("pycuda") is None: missing.append("pycuda not installed (pip install 'tinyspec-cuda[runtime]')")
  if (reason := _nvrtc_missing()) is not None: missing.append(reason)
  if missing: return "; ".join(missing)
  from tinyspec_cuda.runtime import driver_problem
  return driver_problem()

def _probe_check() -> str | None: return _nvrtc_missing()

def _open_cuda(name: str):
  from tinyspec_cuda.runtime import CUDARuntime
  return CUDARuntime(name)

def _open_check(name: str):
  from tinyspec_cuda.runtime import check_runtime
  return check_runtime(name, CHECK_ARCHS)

def _nvrtc_info() -> str:
  from tinyspec_cuda.compiler import load
  return f"NVRTC {'.'.join(map(str, load().version))}"

def _info_cuda() -> str:
  from tinyspec_cuda.runtime import describe_gpu
  return f"{describe_gpu(0)}, {_nvrtc_info()}"

def _info_check() -> str: return f"{_nvrtc_info()} for {', '.join(CHECK_ARCHS)}; kernels run on the numpy interpreter"

@hookimpl
def tinyspec_plugin_api(): return (1,)  # the plugin API versions this plugin speaks

@hookimpl
def tinyspec_devices():
  return (DeviceSpec("CUDA", ("CUDA",), probe=_probe_cuda, open=_open_cuda, info=_info_cuda),
          DeviceSpec("CUDA_CHECK", ("CUDA",), probe=_probe_check, open=_open_check, info=_info_check))
