"""The PYTHON device's runtime: a renderer whose "source" is the program's listing plus the program itself, a compiler that
decodes it, host memory, and programs run by the numpy interpreter."""
from __future__ import annotations

import base64
import pickle
import time

import numpy as np

from tinyspec.device.compiler import Compiler
from tinyspec.device.memory import HostAllocator, buffer_np_dtype
from tinyspec.device.runtime import Program, Runtime
from tinyspec.interpreter.run import Interpreter
from tinyspec.renderer import STORABLE, Renderer
from tinyspec.uop.ops import Ops
from tinyspec.uop.uop import UOp
from tinyspec.viz import render_listing

_PAYLOAD = "# program: "


class PythonRenderer(Renderer):
  """Renders a LINEAR program as its numbered listing (comments) followed by the pickled program on one line. It has every
  GPU feature the interpreter emulates (workgroups, local memory, barriers) and decomposes every decomposed op, so that the
  approximations other devices use are the ones checked here."""
  device = "PYTHON"
  has_local, has_shared = True, True
  local_max, shared_max = (1024, 1024, 64), 48 * 1024
  max_upcast = 1  # no upcasts: the interpreter vectorises every loop with numpy, and copies would only add numpy calls
  # vectors of any dtype and width run (an axis more in numpy): opts that upcast (the conformance suite's) are checked here
  vector_widths, vector_dtypes = (1, 2, 4, 8, 16, 32), frozenset(STORABLE)
  def render(self, name: str, linear: UOp) -> str:
    listing = "\n".join("# " + line for line in render_listing(linear).splitlines())
    return f"# kernel {name}\n{listing}\n{_PAYLOAD}{base64.b64encode(pickle.dumps((name, linear))).decode()}\n"

class PythonCompiler(Compiler):
  """Takes the program back out of the rendered text. Nothing to cache on disk: decoding is as fast as reading a cache entry."""
  name, version = "python", "1"
  def compile(self, src: str) -> bytes:
    line = next((ln for ln in src.splitlines() if ln.startswith(_PAYLOAD)), None)
    if line is None: raise ValueError("PYTHON source without a program line: was it made by PythonRenderer?")
    return base64.b64decode(line[len(_PAYLOAD):])
  def compile_cached(self, src: str, kernel: str = "") -> bytes: return self._compile(src, kernel)

class PythonProgram(Program):
  """A LINEAR program run by the interpreter on host buffers (numpy uint8 arrays, viewed as each parameter's dtype as a
  Buffer holds it: bfloat16 as its raw bits)."""
  def __init__(self, name: str, binary: bytes):
    super().__init__(name, binary)
    _, linear = pickle.loads(binary)
    self.interp = Interpreter(linear, name)
    params = sorted((u for u in linear.src if u.op is Ops.PARAM and isinstance(u.arg[0], int)), key=lambda u: u.arg[0])
    self.dtypes = [buffer_np_dtype(p.dtype.scalar()) for p in params]
    self.var_names = sorted(u.arg[0] for u in linear.src if u.op is Ops.PARAM and isinstance(u.arg[0], str))

  def __call__(self, *bufs, global_size=None, local_size=None, vals=(), wait=False):
    if len(bufs) != len(self.dtypes): raise TypeError(f"{self.name} takes {len(self.dtypes)} buffers, got {len(bufs)}")
    st = time.perf_counter()
    self.interp([np.asarray(b).view(dt) for b, dt in zip(bufs, self.dtypes)], dict(zip(self.var_names, vals)))
    return time.perf_counter() - st if wait else None

class PythonRuntime(Runtime):
  """The opened PYTHON device (any index: "PYTHON:1" is another, separate device with its own memory)."""
  def __init__(self, name: str): super().__init__(name, PythonRenderer(), PythonCompiler(), HostAllocator())
  def program(self, name: str, binary: bytes) -> Program: return PythonProgram(name, binary)
