"""The METAL device's compiler: the Mac's own Metal compiler, through PyObjC (the `runtime` extra). Imported only when the
device is opened; off macOS, METAL_CHECK's syntax check (check.py) stands in for it."""
from __future__ import annotations

import platform

import Metal
from tinyspec.device import CompileError, Compiler


class MetalCompiler(Compiler):
  """Compiles with the device's Metal compiler, fast math off (Metal's default is on, which breaks NaN and rounding
  semantics). Metal keeps no portable binary of a library, so the result is the checked source, compiled again when the
  program is loaded (Metal caches that compile itself)."""
  name = "metal"
  def __init__(self, device):
    self.device, self.version = device, f"metal {device.name()} macOS {platform.mac_ver()[0]} fastmath=off"
    self.options = Metal.MTLCompileOptions.new()
    self.options.setFastMathEnabled_(False)
  def library(self, src: str):
    lib, err = self.device.newLibraryWithSource_options_error_(src, self.options, None)
    if lib is None: raise CompileError(self.name, str(err.localizedDescription()) if err is not None else "unknown error", src)
    return lib
  def compile(self, src: str) -> bytes:
    self.library(src)
    return src.encode()
