"""The CPU device's compiler: LLVM IR to a relocatable object for the host, through llvmlite at O3."""
from __future__ import annotations

import hashlib
import threading

import llvmlite
import llvmlite.binding as llvm
from tinyspec.device import CompileError, Compiler, llvm_o3
from tinyspec.renderer.llvmir import KernelInfo

from tinyspec_cpu.renderer import Host


class CPUCompiler(Compiler):
  """LLVM IR to a relocatable object for the host CPU, optimized at O3 by LLVM's new pass manager. The binary (what the
  disk cache keeps) is the source's `; tinyspec` header line, the kernel's symbol, then the object. The symbol is the
  kernel's name made unique by a hash of the source, since different kernels may share a name and all share one JIT."""
  name = "llvmlite"
  def __init__(self, h: Host):
    self.host = h
    self.version = f"llvmlite {llvmlite.__version__} LLVM {h.llvm_version} {h.triple} {h.cpu} {h.features} O3"
    self.tm = h.target_machine()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization, pto.slp_vectorization, pto.loop_unrolling = True, True, True
    self.pipeline = llvm_o3.O3Pipeline(self.tm, pto)
    self.lock = threading.Lock()

  def compile(self, src: str) -> bytes:
    try:
      header = src.split("\n", 1)[0]
      KernelInfo.parse(src)
      mod = llvm.parse_assembly(src, context=llvm.create_context())  # a context of its own: the global one would keep every
      # kernel's constants and types for the life of the process
      mod.verify()
    except (RuntimeError, ValueError, KeyError) as e: raise CompileError(self.name, str(e), src) from None
    kernel = next(fn for fn in mod.functions if not fn.is_declaration)
    kernel.name = symbol = f"{kernel.name}_{hashlib.sha256(src.encode()).hexdigest()[:16]}"
    with self.lock:
      mod.triple, mod.data_layout = self.host.triple, str(self.tm.target_data)
      self.pipeline.optimize(mod)
      return f"{header}\n{symbol}\n".encode() + self.tm.emit_object(mod)
