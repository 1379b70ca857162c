"""Hand-built kernels for the CPU tests: core's builders (tinyspec.conformance.builders), a range shorthand, and
`run_linear`, which runs a LINEAR program on a CPU runtime and on the reference interpreter so the two can be compared."""
from __future__ import annotations

import numpy as np
from tinyspec.conformance.builders import end, f32, i32, load, lower, param, store  # noqa: F401 (re-exported to the tests)
from tinyspec.interpreter.run import Interpreter
from tinyspec.uop import AxisType, UOp


def rng(n, k: int = 0, axis: AxisType = AxisType.LOOP) -> UOp: return UOp.range(n, k, axis)

def run_linear(rt, linear: UOp, *arrays: np.ndarray, vals: dict[str, int] | None = None, name: str = "kernel"):
  """(copies of `arrays` after `linear` ran on them on runtime `rt`, the same after the interpreter ran it), and the program."""
  program = rt.program(name, rt.compiler.compile_cached(rt.renderer.render(name, linear)))
  cpu, ref = [np.array(a) for a in arrays], [np.array(a) for a in arrays]
  vals = vals or {}
  program(*cpu, vals=tuple(vals[k] for k in program.info.variables))
  Interpreter(linear, name)(ref, vals)
  return cpu, ref, program
