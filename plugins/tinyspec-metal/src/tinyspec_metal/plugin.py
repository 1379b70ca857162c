"""The Metal plugin's hooks: METAL (a Mac's GPU, through PyObjC) and METAL_CHECK (host C++ syntax check + the interpreter).

Importing this module is cheap: PyObjC's Metal framework is imported by the probe and by `open`, on macOS only."""
from __future__ import annotations

import importlib.util
import sys

from tinyspec.device import DeviceSpec
from tinyspec.hookspecs import hookimpl


def _probe_metal() -> str | None:
  if sys.platform != "darwin": return f"Metal needs macOS (this is {sys.platform})"
  if importlib.util.find_spec("Metal") is None: return "PyObjC's Metal framework not installed (pip install 'tinyspec-metal[runtime]')"
  import Metal
  return None if Metal.MTLCreateSystemDefaultDevice() is not None else "no Metal GPU found"

def _probe_check() -> str | None:
  from tinyspec_metal.check import find_cxx
  return None if find_cxx() else "no host C++ compiler to check Metal kernels with: neither $CXX, clang++ nor g++ is on PATH"

def _open_metal(name: str):
  from tinyspec_metal.runtime import MetalRuntime
  return MetalRuntime(name)

def _open_check(name: str):
  from tinyspec.interpreter.checked import CheckedRuntime

  from tinyspec_metal.check import MetalSyntaxCompiler
  from tinyspec_metal.renderer import MetalRenderer
  return CheckedRuntime(name, MetalRenderer(), MetalSyntaxCompiler())

def _info_metal() -> str:
  from tinyspec_metal.runtime import describe_gpu
  return describe_gpu(0)

def _info_check() -> str:
  from tinyspec_metal.check import describe, find_cxx
  return f"checked by {describe(find_cxx())} against a stand-in metal_stdlib; kernels run on the numpy interpreter"

@hookimpl
def tinyspec_plugin_api(): return (1,)  # the plugin API versions this plugin speaks

@hookimpl
def tinyspec_devices():
  return (DeviceSpec("METAL", ("METAL",), probe=_probe_metal, open=_open_metal, info=_info_metal),
          DeviceSpec("METAL_CHECK", ("METAL",), probe=_probe_check, open=_open_check, info=_info_check))
