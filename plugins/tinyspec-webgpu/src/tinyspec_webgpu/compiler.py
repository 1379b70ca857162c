"""WGSL to a checked shader: the module is created and its compute pipeline built on the opened device, so WGSL errors
(naga's messages, with the line and a caret) surface as a `CompileError` at compile time, never at launch.

WebGPU has no binaries to keep: what `compile` returns, and the core's disk cache stores, is the WGSL itself, checked.
`WGPUProgram` builds the pipeline from it again when it is loaded (wgpu caches nothing across processes)."""
from __future__ import annotations

import re

import wgpu
from tinyspec.device import CompileError, Compiler

_ENTRY = re.compile(r"@compute[^\n]*\nfn (\w+)\(")

def entry_point(src: str) -> str:
  """The name of the kernel's compute entry point (the function after `@compute`)."""
  if (m := _ENTRY.search(src)) is None: raise ValueError("no @compute entry point in this WGSL")
  return m.group(1)

def build_pipeline(device: wgpu.GPUDevice, src: str) -> wgpu.GPUComputePipeline:
  """The compute pipeline of `src` on `device`, its bind group layout derived from the shader; GPUError on bad WGSL."""
  module = device.create_shader_module(code=src)
  return device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": entry_point(src)})

def _log(e: Exception) -> str:
  # wgpu-native's message starts "Validation Error\n\nCaused by:\n  In wgpuDeviceCreateShaderModule\n\n": what naga said follows
  text = str(e)
  return text.split("\n\n", 2)[-1].strip() if text.startswith("Validation Error") else text

class WGSLCompiler(Compiler):
  """WGSL checked by the device's own shader compiler (naga, then the backend's). A shader that passes on one adapter
  may not on another, so `version` names wgpu's version, the adapter, its backend and the features the device enables."""
  name = "wgsl"
  def __init__(self, device: wgpu.GPUDevice, adapter_info: str):
    self.device = device
    self.version = f"wgpu {wgpu.__version__} | {adapter_info} | {' '.join(sorted(device.features))}"

  def compile(self, src: str) -> bytes:
    try: build_pipeline(self.device, src)
    except (wgpu.GPUError, ValueError) as e: raise CompileError(self.name, _log(e), src) from None
    return src.encode()
