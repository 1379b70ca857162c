"""The AMD plugin's hooks: AMD (a GPU through HIP) and AMD_CHECK (every kernel built for ARCHS, run by the interpreter).
Importing this module is cheap: llvmlite and libamdhip64 are loaded by the probes and by `open`."""
from __future__ import annotations

from tinyspec.device import DeviceSpec
from tinyspec.hookspecs import hookimpl

from tinyspec_amd.renderer import ARCHS


def _llvm_probe() -> str | None:
  try:
    from tinyspec_amd.compiler import _target  # imports llvmlite
    _target()
  except ImportError as e: return f"llvmlite is not importable ({e}); pip install llvmlite"
  except RuntimeError as e: return str(e)
  return None

def _probe() -> str | None:
  if (why := _llvm_probe()) is not None: return why
  from tinyspec_amd.runtime import probe
  return probe()

def _open(name: str):
  from tinyspec_amd.runtime import AMDRuntime
  return AMDRuntime(name)

def _info() -> str:
  from tinyspec_amd.compiler import llvm_version
  from tinyspec_amd.runtime import find_hip, hip
  h = hip()
  return f"HIP {find_hip()}, {h.device_count()} GPU(s), device 0 is {h.arch(0)}; LLVM {llvm_version()}"

def _open_check(name: str):
  from tinyspec.interpreter.checked import CheckedRuntime

  from tinyspec_amd.compiler import AMDCompiler
  from tinyspec_amd.renderer import AMDRenderer
  return CheckedRuntime(name, AMDRenderer(ARCHS[0]), AMDCompiler(ARCHS), comment=";")

def _info_check() -> str:
  from tinyspec_amd.compiler import llvm_version
  return f"LLVM {llvm_version()} amdgcn for {', '.join(ARCHS)}; kernels run on the numpy interpreter"

@hookimpl
def tinyspec_plugin_api(): return (1,)  # the plugin API versions this plugin speaks

@hookimpl
def tinyspec_devices():
  return (DeviceSpec("AMD", ("LLVM_AMDGPU",), probe=_probe, open=_open, info=_info),
          DeviceSpec("AMD_CHECK", ("LLVM_AMDGPU",), probe=_llvm_probe, open=_open_check, info=_info_check))
