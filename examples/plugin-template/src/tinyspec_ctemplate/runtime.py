"""The device behind the renderer: a compiler that runs the system's C compiler, a program that loads the shared library it
makes with ctypes, and host memory. Imported only when the CC device is first opened (see plugin.py)."""
from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import tempfile
import time

from tinyspec.device import CompileError, Compiler, HostAllocator, Program, Runtime

from tinyspec_ctemplate.renderer import CRenderer

# -fwrapv: signed integers wrap around, as tinyspec's do (in C their overflow is undefined);
# -ffp-contract=off: a*b+c stays two roundings, as in numpy, instead of one fused multiply-add where the CPU has it
STD = "-std=c99"
FLAGS = (STD, "-O2", "-fPIC", "-shared", "-fwrapv", "-ffp-contract=off")

def find_cc() -> str | None:
  """The C compiler: $CC if set, else `cc`, as a full path; None when it is not on PATH."""
  return shutil.which(os.environ.get("CC") or "cc")

@functools.cache
def describe(cc: str) -> tuple[str, bool]:
  """(compiler and version, whether it has _Float16), read from the macros it predefines: one quick run, no compile."""
  out = subprocess.run([cc, STD, "-dM", "-E", "-x", "c", os.devnull], capture_output=True, text=True, check=True).stdout
  macros = dict(line.split(" ", 2)[1:] for line in out.splitlines() if line.startswith("#define ") and line.count(" ") >= 2)
  version = macros.get("__VERSION__", "?").strip('"')  # gcc says "12.2.0", clang "Clang 16.0.6 ..."
  return version if "__clang__" in macros else f"gcc {version}" if "__GNUC__" in macros else f"{cc} {version}", "__FLT16_MAX__" in macros

class CCompiler(Compiler):
  """C source to a shared library's bytes. The core keeps the results in its disk cache, keyed by `name`, `version` and
  the source, so `version` holds everything else that changes the output: the compiler's path and version and the flags."""
  name = "cc"
  def __init__(self, cc: str): self.cc, self.version = cc, f"{cc} {describe(cc)[0]} {' '.join(FLAGS)}"

  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tinyspec-cc-") as tmp:
      out = os.path.join(tmp, "kernel.so")
      # the source goes in on stdin, named kernel.c in messages; -lm links C's math library (sqrtf, exp2f ...)
      done = subprocess.run([self.cc, *FLAGS, "-x", "c", "-", "-o", out, "-lm"], input=src, capture_output=True, text=True)
      if done.returncode != 0: raise CompileError(self.name, done.stderr.replace("<stdin>", "kernel.c"), src)
      with open(out, "rb") as f: return f.read()

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
