"""The compiler: the system's C compiler, run on each kernel's source to make a shared library. Imports no toolchain
itself: it runs one, found on PATH when the CC device is probed or opened (see plugin.py)."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile

from tinyspec.device import CompileError, Compiler

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
