"""Hand-built kernels for the CPU tests: short builders, and `run_linear`, which runs a LINEAR program on a CPU runtime
and on the reference interpreter so the two can be compared."""
from __future__ import annotations

import numpy as np
from tinyspec.dtype import DType, dtypes
from tinyspec.engine.linearize import linearize
from tinyspec.interpreter.run import Interpreter
from tinyspec.uop import AxisType, Ops, UOp, verify

f32, i32 = dtypes.float32, dtypes.int32

def param(k: int, size: int, dtype: DType) -> UOp: return UOp(Ops.PARAM, (UOp.vec((size,)),), (k, dtype))
def load(buf: UOp, i, *alt_gate: UOp) -> UOp: return UOp(Ops.LOAD, (buf.index(i), *alt_gate))
def store(buf: UOp, i, val: UOp, *gate: UOp) -> UOp: return UOp(Ops.STORE, (buf.index(i), val, *gate))
def end(body: UOp, *ranges: UOp) -> UOp: return UOp(Ops.END, (body, *ranges))
def rng(n, k: int = 0, axis: AxisType = AxisType.LOOP) -> UOp: return UOp.range(n, k, axis)

def lower(*roots: UOp) -> UOp:
  """SINK(roots), verified as a kernel, then linearized."""
  sink = UOp.sink(*roots)
  verify(sink, "kernel")
  return linearize(sink)

def run_linear(rt, linear: UOp, *arrays: np.ndarray, vals: dict[str, int] | None = None, name: str = "kernel"):
  """(copies of `arrays` after `linear` ran on them on runtime `rt`, the same after the interpreter ran it), and the program."""
  program = rt.program(name, rt.compiler.compile_cached(rt.renderer.render(name, linear)))
  cpu, ref = [np.array(a) for a in arrays], [np.array(a) for a in arrays]
  vals = vals or {}
  program(*cpu, vals=tuple(vals[k] for k in program.info.variables))
  Interpreter(linear, name)(ref, vals)
  return cpu, ref, program
