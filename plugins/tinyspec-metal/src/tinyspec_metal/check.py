"""Checking Metal Shading Language off macOS: the host C++ compiler in syntax-only mode, against a stand-in metal_stdlib.

Metal Shading Language is C++14 with address-space keywords, attributes and its own library. `include/metal_stdlib`,
beside this module, declares that library (types, as_type, math, barriers, atomics) and nothing else, and poisons
`double`; the compiler runs with no system headers. So a kernel that misspells a name, mixes types Metal would not, calls
something Metal lacks or uses double fails here, with the compiler's message. Attributes the host compiler does not know
(all of Metal's) are only warned about: each such warning must name one of Metal's attributes, or the check fails.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess

from tinyspec.device import CompileError, Compiler

INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
# C++14, like Metal; no exceptions, RTTI or system headers, which Metal has none of either
FLAGS = ("-std=c++14", "-fsyntax-only", "-nostdinc", "-nostdinc++", "-fno-exceptions", "-fno-rtti", "-x", "c++")
METAL_ATTRIBUTES = frozenset({
  "buffer", "threadgroup", "texture", "sampler", "kernel", "host_name", "function_constant", "max_total_threads_per_threadgroup",
  "thread_position_in_grid", "thread_position_in_threadgroup", "threadgroup_position_in_grid", "threads_per_threadgroup",
  "threadgroups_per_grid", "threads_per_grid", "thread_index_in_threadgroup", "thread_index_in_simdgroup",
  "simdgroup_index_in_threadgroup", "threads_per_simdgroup", "dispatch_threads_per_threadgroup"})
# g++: 'buffer' attribute directive ignored; clang++: unknown attribute 'buffer' ignored
_IGNORED = re.compile(r"['‘]([\w:]+)['’] (?:scoped )?attribute directive ignored|unknown attribute ['‘]([\w:]+)['’] ignored")

def find_cxx() -> str | None:
  """The host C++ compiler: $CXX if set, else clang++ (Metal's compiler is clang's), else g++; None when there is none."""
  return next((p for c in (os.environ.get("CXX"), "clang++", "g++") if c and (p := shutil.which(c))), None)

@functools.cache
def describe(cxx: str) -> str:
  """The compiler's name and version, e.g. "g++ 12.2.0", from its first line of --version."""
  first = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
  return f"{os.path.basename(cxx)} {first[0].split()[-1] if first and first[0].split() else '?'}"

class MetalSyntaxCompiler(Compiler):
  """Checks each Metal kernel with the host C++ compiler (see the module's doc); CompileError with its messages when it
  fails. Nothing is built: the result is empty, so this serves the METAL_CHECK device, whose kernels the interpreter runs."""
  name = "metal-syntax"
  def __init__(self, cxx: str | None = None):
    if (cxx := cxx or find_cxx()) is None: raise RuntimeError("no host C++ compiler: neither $CXX, clang++ nor g++ is on PATH")
    with open(os.path.join(INCLUDE, "metal_stdlib"), "rb") as f: header = f.read()
    self.cxx, self.version = cxx, f"{describe(cxx)} {' '.join(FLAGS)} stdlib {hashlib.sha256(header).hexdigest()[:16]}"

  def compile(self, src: str) -> bytes:
    # LC_ALL=C: messages (and their quotes) in plain ASCII, which the attribute check reads
    done = subprocess.run([self.cxx, *FLAGS, f"-I{INCLUDE}", "-"], input=src, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    log = done.stderr.replace("<stdin>", "kernel.metal")
    unknown = sorted({a or b for a, b in _IGNORED.findall(log)} - METAL_ATTRIBUTES)
    if done.returncode != 0 or unknown:
      raise CompileError(self.name, log + (f"\nattributes Metal does not have: {', '.join(unknown)}" if unknown else ""), src)
    return b""
