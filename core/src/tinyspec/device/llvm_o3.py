"""LLVM's O3 pipeline through llvmlite, for the plugins that compile LLVM IR in-process (CPU, AMD). Core does not depend on
llvmlite: only those plugins, which do, import this module.

Why a helper: llvmlite 0.50 (the release we checked) needs two things done by hand, or a long-running process that
compiles many kernels grows and slows down (measured over 2500 small kernels):
- a `ModulePassManager` is never freed: its class lists `ffi.ObjectRef` before `NewPassManager` among its bases, so
  `close()` finds ObjectRef's empty `_dispose`, and the pipeline with what it built while running stays: about 70 KB per
  compile;
- a `PassBuilder` gets slower with every module it runs (5.9 ms per compile at first, 20 ms after 2000), while a new one
  leaves about 1.7 KB behind when freed; so a builder serves `RUNS_PER_BUILDER` modules, then a new one takes over.
"""
import llvmlite.binding as llvm
from llvmlite.binding.newpassmanagers import NewPassManager

RUNS_PER_BUILDER = 64

class O3Pipeline:
  """LLVM's per-module default pipeline for a target machine and tuning options (the speed level among them). Not safe to
  share between threads: callers compile under a lock."""
  def __init__(self, tm: llvm.TargetMachine, pto: llvm.PipelineTuningOptions):
    self.tm, self.pto, self.builder, self.runs = tm, pto, None, 0

  def optimize(self, mod: llvm.ModuleRef) -> None:
    """Optimize `mod` in place."""
    if self.builder is None or self.runs >= RUNS_PER_BUILDER: self.builder, self.runs = llvm.create_pass_builder(self.tm, self.pto), 0
    self.runs += 1
    mpm = self.builder.getModulePassManager()
    try: mpm.run(mod, self.builder)
    finally:
      NewPassManager._dispose(mpm)  # the disposal llvmlite's own close() misses
      mpm.detach()
