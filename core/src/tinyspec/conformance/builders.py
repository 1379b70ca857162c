"""Short builders for kernels written by hand, node by node (seed 000's style), in the form the pipeline's kernels have
(docs/pipeline.md). Shipped with the conformance suite so that core's tests, plugins' tests and third parties build
hand-written kernels the same way."""
from __future__ import annotations

from tinyspec.dtype import AddrSpace, DType, dtypes
from tinyspec.engine.linearize import linearize
from tinyspec.uop import Ops, UOp, verify

f32, i32 = dtypes.float32, dtypes.int32
ZERO = UOp.const(0)

def param(k: int, size: int, dtype: DType) -> UOp: return UOp(Ops.PARAM, (UOp.vec((size,)),), (k, dtype))
def load(buf: UOp, i, *alt_gate: UOp) -> UOp: return UOp(Ops.LOAD, (buf.index(i), *alt_gate))
def store(buf: UOp, i, val: UOp, *gate: UOp) -> UOp: return UOp(Ops.STORE, (buf.index(i), val, *gate))
def special(name: str, n: int) -> UOp: return UOp(Ops.SPECIAL, (UOp.const(n),), name)
def end(body: UOp, *ranges: UOp) -> UOp: return UOp(Ops.END, (body, *ranges))
def local(size: int, dtype: DType = f32, slot: int = 0) -> UOp: return UOp(Ops.BUFFER, (UOp.vec((size,)),), (slot, dtype, None, AddrSpace.LOCAL))
def after(buf: UOp, *deps: UOp) -> UOp: return UOp(Ops.AFTER, (buf, *deps))
def barrier(*deps: UOp) -> UOp: return UOp(Ops.BARRIER, deps)

def lower(*roots: UOp) -> UOp:
  """SINK(roots) (or the one SINK given), verified as a kernel, then linearized."""
  sink = roots[0] if len(roots) == 1 and roots[0].op is Ops.SINK else UOp.sink(*roots)
  verify(sink, "kernel")
  return linearize(sink)
