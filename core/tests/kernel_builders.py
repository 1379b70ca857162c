"""Short builders for hand-written kernels, shared by the tests that build kernels node by node (seed 000's style)."""
from tinyspec.dtype import AddrSpace, dtypes
from tinyspec.engine.linearize import linearize
from tinyspec.uop import Ops, UOp, verify

f32, i32 = dtypes.float32, dtypes.int32
ZERO = UOp.const(0)

def param(k, size, dtype): return UOp(Ops.PARAM, (UOp.vec((size,)),), (k, dtype))
def load(buf, i, *alt_gate): return UOp(Ops.LOAD, (buf.index(i), *alt_gate))
def store(buf, i, val, *gate): return UOp(Ops.STORE, (buf.index(i), val, *gate))
def special(name, n): return UOp(Ops.SPECIAL, (UOp.const(n),), name)
def end(body, *ranges): return UOp(Ops.END, (body, *ranges))
def local(size, dtype=f32, slot=0): return UOp(Ops.BUFFER, (UOp.vec((size,)),), (slot, dtype, None, AddrSpace.LOCAL))
def after(buf, *deps): return UOp(Ops.AFTER, (buf, *deps))
def barrier(*deps): return UOp(Ops.BARRIER, deps)

def lower(*roots: UOp) -> UOp:
  """SINK(roots), verified as a kernel, then linearized."""
  sink = roots[0] if len(roots) == 1 and roots[0].op is Ops.SINK else UOp.sink(*roots)
  verify(sink, "kernel")
  return linearize(sink)
