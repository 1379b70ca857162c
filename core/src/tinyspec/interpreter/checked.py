"""Checked devices: a device's kernels proved on a machine that cannot run them (no GPU, no macOS).

`CheckedRuntime` takes a device's own renderer and compiler. Every kernel is rendered by that renderer, with its LINEAR
program appended in a comment, and compiled by that compiler, so a render or compile error fails exactly as it would on
the device; then the program is taken back out of the source and run by the numpy interpreter. The conformance suite on
a checked device (e.g. `--tinyspec-device=CUDA_CHECK`) so checks every kernel the device would get, built for its
limits, compiled by its real compiler, with numbers from the interpreter, not from the hardware.
"""
from __future__ import annotations

import base64
import pickle
from collections.abc import Iterator
from contextlib import contextmanager

from tinyspec.device.compiler import Compiler
from tinyspec.device.memory import HostAllocator
from tinyspec.device.runtime import Program, Runtime
from tinyspec.interpreter.runtime import PythonProgram
from tinyspec.renderer import Renderer
from tinyspec.uop.uop import UOp

PAYLOAD = "tinyspec-program: "

def checked_renderer(renderer: Renderer, comment: str = "//") -> Renderer:
  """A copy of `renderer` (same class attributes and instance settings, its dtypes included: the interpreter computes in
  every dtype) whose source ends with a `comment` line carrying the LINEAR program."""
  base = type(renderer)
  def render(self, name: str, linear: UOp) -> str:
    payload = base64.b64encode(pickle.dumps((name, linear))).decode()
    return f"{base.render(self, name, linear)}\n{comment} {PAYLOAD}{payload}\n"
  out = object.__new__(type(f"Checked{base.__name__}", (base,), {"render": render}))
  out.__dict__.update(renderer.__dict__)
  return out

class CheckedCompiler(Compiler):
  """Compiles with the device's compiler (its errors propagate), then hands on the program carried in the source."""
  def __init__(self, inner: Compiler):
    self.inner = inner
    self.name, self.version = f"{inner.name}+interpreter", inner.version
  def compile(self, src: str) -> bytes:
    self.inner.compile(src)
    return _program_in(src)

  def compile_cached(self, src: str, kernel: str = "") -> bytes:
    """The device compiler's output goes through the disk cache like any (it is only checked here, never run); the program
    always comes from the source in hand, never from disk, since running it unpickles it."""
    self.inner.compile_cached(src, kernel)
    return _program_in(src)

def _program_in(src: str) -> bytes:
  line = next((ln for ln in reversed(src.splitlines()) if PAYLOAD in ln), None)
  if line is None: raise ValueError("checked compile: the source carries no program line (was it made by checked_renderer?)")
  return base64.b64decode(line.split(PAYLOAD, 1)[1])

class CheckedRuntime(Runtime):
  """A device run by the interpreter on host memory, with kernels rendered and compiled by the device's own tools."""
  def __init__(self, name: str, renderer: Renderer, compiler: Compiler, comment: str = "//"):
    super().__init__(name, checked_renderer(renderer, comment), CheckedCompiler(compiler), HostAllocator())
  def program(self, name: str, binary: bytes) -> Program: return PythonProgram(name, binary)

  @contextmanager
  def building_for(self, renderer: Renderer, compiler: Compiler, comment: str = "//") -> Iterator[None]:
    """Within, kernels are rendered by `renderer` and checked by `compiler` (another arch of this device, say, with its
    own tensor cores); compiled kernels cached meanwhile are the caller's to drop."""
    saved = self.renderer, self.compiler
    self.renderer, self.compiler = checked_renderer(renderer, comment), CheckedCompiler(compiler)
    try: yield
    finally: self.renderer, self.compiler = saved
