"""The device behind the renderer: a program that loads the shared library the compiler (compiler.py) makes with ctypes,
and host memory. Imported only when the CC device is first opened (see plugin.py)."""
from __future__ import annotations

import ctypes
import os
import tempfile
import time

from tinyspec.device import HostAllocator, Program, Runtime

from tinyspec_ctemplate.compiler import CCompiler, describe, find_cc
from tinyspec_ctemplate.renderer import CRenderer


class CProgram(Program):
  """One kernel: the shared library loaded with ctypes, called with each buffer's address and the variables' values."""
  def __init__(self, name: str, binary: bytes):
    super().__init__(name, binary)
    # ctypes loads libraries from files only: write the bytes out, load, and delete the file (the mapping stays valid)
    with tempfile.NamedTemporaryFile(prefix=f"tinyspec-{name}-", suffix=".so", delete=False) as f: f.write(binary)
    try: self.lib = ctypes.CDLL(f.name)
    finally: os.unlink(f.name)
    self.fn = self.lib[name]
    self.fn.restype = None

  def __call__(self, *bufs, global_size=None, local_size=None, vals=(), wait=False):
    # the handles are HostAllocator's numpy arrays; ctypes releases the GIL while the kernel runs
    args = [ctypes.c_void_p(b.ctypes.data) for b in bufs] + [ctypes.c_int64(v) for v in vals]
    st = time.perf_counter()
    self.fn(*args)
    return time.perf_counter() - st if wait else None

class CRuntime(Runtime):
  """The opened CC device. Kernels run synchronously on the calling thread, so `synchronize` has nothing to wait for."""
  def __init__(self, name: str):
    if (cc := find_cc()) is None: raise RuntimeError("no C compiler found")
    super().__init__(name, CRenderer(float16=describe(cc)[1]), CCompiler(cc), HostAllocator())
  def program(self, name: str, binary: bytes) -> Program: return CProgram(name, binary)
