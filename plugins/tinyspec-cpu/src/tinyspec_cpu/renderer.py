"""The CPU device's target and renderer: the host as LLVM names it (triple, CPU, features), how many cores kernels may
use, and core's LLVM IR renderer set up for them (vector widths, register budget, pack width, threads)."""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

import llvmlite.binding as llvm
from tinyspec.dtype import dtypes
from tinyspec.renderer.llvmir import LLVMRenderer

THREADS_ENV = "TINYSPEC_CPU_THREADS"
MIN_WORK_PER_THREAD = 1 << 17
"""Innermost iterations each thread must get for a kernel to be split: handing work to a pool thread costs tens of
microseconds, about what this many iterations of a simple elementwise kernel take."""
_SHOWN = re.compile(r"sse4\.2|avx|avx2|fma|f16c|avx512(f|bw|dq|vl|bf16|fp16|vnni)|amx-tile|neon|sve2?|dotprod|bf16")

@dataclass(frozen=True)
class Host:
  """The machine code targets: LLVM's names for this process's triple, CPU and its features."""
  triple: str
  cpu: str
  features: str
  llvm_version: str

  @property
  def shown_features(self) -> list[str]:
    """The enabled vector features worth naming in `tinyspec devices`."""
    return [f[1:] for f in self.features.split(",") if f.startswith("+") and _SHOWN.fullmatch(f[1:])]

  def target_machine(self) -> llvm.TargetMachine:
    # the small code model and PIC: kernels are small, and their objects may be loaded anywhere in the address space
    return llvm.Target.from_triple(self.triple).create_target_machine(cpu=self.cpu, features=self.features, opt=3, reloc="pic",
                                                                      codemodel="default")

@functools.cache
def host() -> Host:
  """The host target, initialized once; raises when LLVM cannot generate code for it."""
  llvm.initialize_native_target()
  llvm.initialize_native_asmprinter()
  triple = llvm.get_process_triple()
  try: features = llvm.get_host_cpu_features().flatten()
  except RuntimeError: features = ""  # LLVM cannot read the features on every OS; the CPU name alone still picks them
  h = Host(triple, llvm.get_host_cpu_name(), features, ".".join(map(str, llvm.llvm_version_info)))
  h.target_machine()
  return h

def thread_count() -> int:
  """$TINYSPEC_CPU_THREADS, else the cores this process may run on."""
  if (env := os.environ.get(THREADS_ENV, "").strip()):
    if not env.isdigit() or int(env) < 1: raise ValueError(f"{THREADS_ENV} must be a whole number >= 1, got {env!r}")
    return int(env)
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class CPURenderer(LLVMRenderer):
  """Core's LLVM IR renderer for the host: kernels split over `threads` cores when it is more than 1."""
  device = "CPU"
  def __init__(self, threads: int, h: Host):
    self.threads, self.split_min_work = threads, 2 * MIN_WORK_PER_THREAD
    # float32 lanes of the widest SIMD registers: what the optimizer upcasts the output's contiguous axis by
    self.vector_widths = (1, 2, 4, 8, 16) if "+avx512f" in h.features else (1, 2, 4, 8) if "+avx" in h.features else (1, 2, 4)
    self.max_upcast = 256 if "+avx512f" in h.features else 64  # accumulators that stay in registers: 16 of 32 zmm, 8 of 16 ymm
    self.pack_width = self.vector_widths[-1]  # a matmul's B in panels as wide as the register tile: matmul 2048 110 -> 300 GFLOP/s
    # half precision converts with F16C on x86; without it LLVM would call runtime library functions the JIT cannot find
    if h.triple.startswith(("x86_64", "i686", "i386")) and "+f16c" not in h.features:
      self.supported_dtypes = LLVMRenderer.supported_dtypes - {dtypes.float16}
