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

def seed003_add(n: int = 1, out: DType = i32, bitcast: bool = False, idx: UOp | None = None) -> UOp:
  """Seed 003's kernels as a STORE: data0[i] = data1[i] + data2[i] over int32 (seed 000's ALU example), at i = lidx0, or the
  constant 0 when n is 1, or `idx`. For another `out` dtype the sum is cast to it (seed 003's cast kernel), or bitcast."""
  i = idx if idx is not None else special("lidx0", n) if n > 1 else ZERO
  total = load(param(1, n, i32), i) + load(param(2, n, i32), i)
  return store(param(0, n, out), i, total if out is i32 else total.bitcast(out) if bitcast else total.cast(out))

def workgroup_tree_sum(groups: int = 3, lanes: int = 8) -> UOp:
  """A STORE of data0[g] = the sum of data1[g*lanes : (g+1)*lanes], for each of `groups` workgroups of `lanes` lanes: the
  inputs go to LOCAL memory, then lane i adds lane i+s for s = lanes/2, lanes/4 ... 1, with a BARRIER between every
  read and every write."""
  g, l, lb = special("gidx0", groups), special("lidx0", lanes), local(lanes)
  written, s = store(lb, l, load(param(1, groups * lanes, f32), g * lanes + l)), lanes // 2
  while s:
    now = after(lb, barrier(written))
    total = load(now, l) + load(now, l + s, UOp.const(0.0, f32), l + s < lanes)
    written, s = store(after(lb, barrier(total)), l, total), s // 2
  return store(param(0, groups, f32), g, load(after(lb, barrier(written)), ZERO))

def lower(*roots: UOp) -> UOp:
  """SINK(roots) (or the one SINK given), verified as a kernel, then linearized."""
  sink = roots[0] if len(roots) == 1 and roots[0].op is Ops.SINK else UOp.sink(*roots)
  verify(sink, "kernel")
  return linearize(sink)
