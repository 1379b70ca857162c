"""LLVM IR text from LINEAR programs: `LLVMRenderer`, shared by every device that compiles through LLVM (the CPU plugin
compiles it with llvmlite). Text only: nothing here imports llvmlite, so kernels render and can be checked anywhere.

A kernel becomes one function, `void @name(ptr noalias %data0, ..., i64 %var...)`:
  - buffer PARAMs are pointers (slot order), then the integer variables as i64 (sorted by name, as `vals` come);
  - RANGE/END are loops of basic blocks with a phi for the counter; IF/ENDIF a conditional block; a gated LOAD a branch
    around the load (so it never touches memory the gate excludes) joined by a phi;
  - a vector (what expand makes of an UPCAST range over consecutive elements) is `<n x T>`: one load or store at its
    first element's address, `extractelement` for a lane, `insertelement` to build one from lanes;
  - REG buffers (accumulators) are allocas in the entry block, which LLVM turns into registers;
  - index arithmetic is i64; bool is i1 in registers and i8 in memory; bfloat16 is held in float registers, rounded to
    bfloat16 after every op, and kept as its 16 bits in memory, so no runtime library call is ever needed.
With `threads` > 1, a kernel with a THREAD axis (the optimizer's split of an output axis over cores) takes one more
argument, `i64 %core_id`, which is that axis' value: no loop is made for it, and a runtime calls the kernel once per
value, spreading the calls over its threads.
The first line is a comment with what the caller needs: `; tinyspec {json}` (see `KernelInfo`).

GPU targets subclass the renderer and set its hooks: `kernel_cc` (the kernel's calling convention), the address spaces of
buffer PARAMs, LOCAL buffers (module globals, one per workgroup) and REG allocas, `special` (the intrinsic a SPECIAL
gidx/lidx reads) and `barrier` (what a BARRIER becomes). The defaults describe a CPU: no workgroups, one address space.
"""
from __future__ import annotations

import json
import re
import struct
from dataclasses import asdict, dataclass

import numpy as np

from tinyspec.dtype import ALL, AddrSpace, DType, bf16_round, dtypes, finite_max
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import AxisType, Ops
from tinyspec.uop.spec import buffer_of, reads_lane, register_update, vector_index
from tinyspec.uop.uop import UOp

_REG = {dtypes.bool: "i1", dtypes.int8: "i8", dtypes.uint8: "i8", dtypes.int16: "i16", dtypes.uint16: "i16", dtypes.int32: "i32",
        dtypes.uint32: "i32", dtypes.int64: "i64", dtypes.uint64: "i64", dtypes.index: "i64", dtypes.float16: "half",
        dtypes.bfloat16: "float", dtypes.float32: "float", dtypes.float64: "double"}
_MEM = {**_REG, dtypes.bool: "i8", dtypes.bfloat16: "i16"}
_SUFFIX = {"half": "f16", "float": "f32", "double": "f64"}
_FCMP = {Ops.CMPLT: "olt", Ops.CMPNE: "une", Ops.CMPGT: "ogt", Ops.CMPGE: "oge", Ops.CMPLE: "ole", Ops.CMPEQ: "oeq"}  # numpy's: nan is unordered
_ICMP = {Ops.CMPLT: "lt", Ops.CMPNE: "ne", Ops.CMPGT: "gt", Ops.CMPGE: "ge", Ops.CMPLE: "le", Ops.CMPEQ: "eq"}
_NOTHING = (Ops.GROUP, Ops.SINK)

def _isf(dt: DType) -> bool: return dtypes.is_float(dt)
def _signed(dt: DType) -> bool: return dtypes.is_int(dt) and not dtypes.is_unsigned(dt)

def _hex64(x: float) -> str: return f"0x{struct.unpack('<Q', struct.pack('<d', x))[0]:016X}"

def const(v, dt: DType) -> str:
  """An LLVM literal of scalar dtype `dt`. Floats are written as the hex of their double (LLVM's exact form, nan and inf
  included), half as 0xH and its 16 bits; ints in two's complement of their width."""
  if dt is dtypes.bool: return "true" if v else "false"
  if dt is dtypes.float16:
    with np.errstate(over="ignore"): return f"0xH{int(np.array(v, np.float16).view(np.uint16)):04X}"  # past 65504 is inf
  if dt is dtypes.bfloat16: return _hex64(float(bf16_round(float(v))))
  if dt is dtypes.float32: return _hex64(float(np.float32(v)))
  if dt is dtypes.float64: return _hex64(float(v))
  bits = 8 * dt.itemsize
  v = int(v) & ((1 << bits) - 1)
  return str(v - (1 << bits) if v >> (bits - 1) else v)

@dataclass(frozen=True)
class KernelInfo:
  """What calling a rendered kernel takes, from its first line: the buffer dtypes (parameter order), the variable names
  (the order of `vals`), `calls`, the size of its THREAD axis (how many times to call it, with core_id 0, 1, ... after the
  variables; None when it has none and takes no core_id), and `work`, about how many innermost iterations all calls run
  together (for deciding whether threads pay off)."""
  buffers: tuple[str, ...]
  variables: tuple[str, ...]
  calls: int | None
  work: int

  @staticmethod
  def parse(src: str) -> KernelInfo:
    """Read the info back from rendered source."""
    first = src.split("\n", 1)[0]
    if not first.startswith("; tinyspec "): raise ValueError("LLVM source without a '; tinyspec' header: was it made by LLVMRenderer?")
    d = json.loads(first[len("; tinyspec "):])
    return KernelInfo(tuple(d["buffers"]), tuple(d["variables"]), d["calls"], d["work"])

def _work(prog: tuple[UOp, ...]) -> int:
  """The most iterations any loop body runs (product of the bounds of its nest, variables at their maximum)."""
  best, nest = 1, [1]
  for u in prog:
    if u.op is Ops.RANGE: nest.append(nest[-1] * max(0, int(u.src[0].vmax))); best = max(best, nest[-1])
    elif u.op is Ops.END: del nest[-(len(u.src) - 1):]
  return best


MAX_REASSOCIATED = 2
"""Loops updating more register accumulators than this keep their float accumulation order (see _Function)."""

def _reassociable(prog: tuple[UOp, ...]) -> set[UOp]:
  """The accumulations whose order may change: the sums of each loop that updates at most MAX_REASSOCIATED accumulators. A
  tree of sums has one accumulator per loop, each vectorized along its loop; the optimizer's upcast copies are many in one
  loop, and stay in order so the SLP vectorizer packs them across the copies. A product stays in order: reassociated, LLVM
  moved the 1/7 out of a product of 64 means, the product of the sums overflowed to inf and (1/7)**64 to 0, so the
  result was nan (fuzz case uint16-100633)."""
  by_loop: dict[UOp | None, list[UOp]] = {}
  open_: list[UOp] = []
  for u in prog:
    if u.op is Ops.RANGE: open_.append(u)
    elif u.op is Ops.END: del open_[-(len(u.src) - 1):]
    elif u.op is Ops.STORE and (acc := register_update(u)) is not None: by_loop.setdefault(open_[-1] if open_ else None, []).append(acc.alu)
  return {acc for accs in by_loop.values() if len(accs) <= MAX_REASSOCIATED for acc in accs if acc.op is Ops.ADD}

class LLVMRenderer(Renderer):
  """LINEAR programs as LLVM IR functions (see the module docstring). A device subclass sets `device`; with `threads` > 1
  a kernel's THREAD axis is its `core_id` argument."""
  native = frozenset({Ops.NEG, Ops.SUB, Ops.DIV, Ops.CMPGT, Ops.CMPGE, Ops.CMPLE, Ops.CMPEQ, Ops.NOT, Ops.SQRT, Ops.MULACC})
  # LLVM legalizes a vector of any width to the target's registers; bool and bfloat16 differ in memory and in registers
  vector_widths = (1, 2, 4, 8, 16)
  vector_dtypes = frozenset(ALL) - {dtypes.bool, dtypes.bfloat16, dtypes.index, dtypes.void}
  kernel_cc: str = ""
  """The calling convention kernels are defined with, e.g. "amdgpu_kernel"; empty for the target's C convention."""
  global_addrspace: int = 0
  """The address space of buffer PARAMs, e.g. 1 for AMDGPU's global memory."""
  reg_addrspace: int = 0
  """The address space REG allocas live in: the target data layout's alloca space (5 on AMDGPU)."""
  local_addrspace: int | None = None
  """The address space of LOCAL (workgroup-shared) buffers, rendered as module globals in it (3 on AMDGPU); None when the
  target has no shared memory, and a LOCAL buffer is refused."""
  barrier: tuple[str, ...] = ()
  """The instructions a BARRIER becomes, e.g. a workgroup fence, the barrier intrinsic, a fence; none by default (a
  sequential kernel needs no synchronization). The intrinsics they call with no arguments are declared automatically."""

  def special(self, name: str) -> str:
    """The intrinsic (no arguments, returning i32) that reads the SPECIAL index `name`: gidxD, the workgroup id in dimension
    D, or lidxD, the id within the workgroup. A GPU subclass overrides it; the default refuses, having no workgroups."""
    raise NotImplementedError(f"SPECIAL is not supported: {type(self).__name__} renders for a target without workgroups ({name})")

  def wmma_intrinsic(self, tc) -> tuple[str, str, tuple[str, ...]]:
    """(intrinsic, the LLVM type of A's and B's elements in its call, its typed arguments after A, B and C) for
    instruction `tc` (a TensorCore of `tensor_cores`), e.g. ("llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v16f16", "half", ())."""
    raise NotImplementedError(f"{type(self).__name__} cannot render WMMA ({tc.name}): it declares no tensor cores")

  def render(self, name: str, linear: UOp) -> str:
    return _Function(name, linear.src, self).render()


class _Function:
  """The state of rendering one kernel: the lines so far, each value's operand text, the open blocks."""
  def __init__(self, name: str, prog: tuple[UOp, ...], renderer: LLVMRenderer):
    self.name, self.prog, self.r = name, prog, renderer
    self.lines: list[str] = []
    self.globals: list[str] = []  # module-level definitions (LOCAL buffers)
    self.allocas: list[str] = []
    self.decls: set[str] = set()
    self.val: dict[UOp, str] = {}
    self.ntmp = 0
    self.block = "entry"
    self.loops: dict[UOp, tuple[str, int]] = {}   # open RANGE -> (its block number, the line of its phi: patched at END)
    # only a register accumulation may be reassociated: that is what lets LLVM vectorize a float reduction over its loop.
    # Many accumulators are the optimizer's upcast copies: kept in order, LLVM's SLP vectorizer packs them across the
    # copies instead (one vector load feeding many accumulators), several times faster than vectorizing along the loop
    self.reductions = _reassociable(prog)
    # a THREAD axis is the core_id argument, where kernels run on threads (elsewhere it stays a loop)
    threads = [u for u in prog if u.op is Ops.RANGE and u.axis_type is AxisType.THREAD] if renderer.threads > 1 else []
    if len(threads) > 1 or any(t.size is None for t in threads):
      raise ValueError(f"LLVM render of {name}: one THREAD axis of constant size at most, got {[t.src[0].op.name for t in threads]}")
    self.thread = threads[0] if threads else None

  # ---- small helpers ----
  def tmp(self) -> str:
    self.ntmp += 1
    return f"%t{self.ntmp}"
  def emit(self, text: str) -> str:
    """Emit `%tN = text` and return %tN."""
    self.lines.append(f"  {(t := self.tmp())} = {text}")
    return t
  def label(self, name: str) -> None:
    self.lines.append(f"{name}:")
    self.block = name
  def intrinsic(self, name: str, ret: str, *args: str) -> str:
    self.decls.add(f"declare {ret} @{name}({', '.join(args)})")
    return name
  def call(self, base: str, ty: str, *ops: str) -> str:
    fn = self.intrinsic(f"llvm.{base}.{_SUFFIX[ty]}", ty, *([ty] * len(ops)))
    return self.emit(f"call {ty} @{fn}({', '.join(f'{ty} {o}' for o in ops)})")
  def ptr(self, u: UOp) -> str:
    """The pointer type of memory reached through `u` (a buffer, or an INDEX/AFTER of one): its address space's."""
    b = buffer_of(u)
    space = self.r.global_addrspace if b.op is Ops.PARAM else self.r.reg_addrspace if b.arg[3] is AddrSpace.REG else self.r.local_addrspace
    return f"ptr addrspace({space})" if space else "ptr"
  def op(self, u: UOp) -> str:
    if u.op is Ops.CONST: return const(u.arg[0], u.dtype.scalar())
    if u not in self.val: raise ValueError(f"LLVM render of {self.name}: {u.op.name} is used before it is computed (not in LINEAR order)")
    return self.val[u]

  # ---- the function ----
  def render(self) -> str:
    params = sorted((u for u in self.prog if u.op is Ops.PARAM), key=lambda u: (isinstance(u.arg[0], str), u.arg[0]))
    bufs = [p for p in params if not isinstance(p.arg[0], str)]
    variables = [p for p in params if isinstance(p.arg[0], str)]
    if (slots := [p.arg[0] for p in bufs]) != list(range(len(bufs))): raise ValueError(f"{self.name}: buffer PARAMs must be 0..n-1, got {slots}")
    gptr = f"ptr addrspace({self.r.global_addrspace})" if self.r.global_addrspace else "ptr"
    args = [f"{gptr} noalias %data{p.arg[0]}" for p in bufs] + [f"i64 %var{i}" for i in range(len(variables))]
    if self.thread is not None: args.append("i64 %core_id")
    for p in bufs: self.val[p] = f"%data{p.arg[0]}"
    for i, p in enumerate(variables):
      self.val[p] = f"%var{i}" if _REG[p.dtype] == "i64" else self.emit(f"trunc i64 %var{i} to {_REG[p.dtype]}")
    for u in self.prog:
      if u.op is Ops.PARAM or (u.dtype is dtypes.index and u.shape): continue  # an index vector is only a vector's address
      if (fn := _RENDER.get(u.op)) is None: raise NotImplementedError(f"LLVM render of {self.name}: {u.op.name} is not supported")
      if (out := fn(self, u)) is not None: self.val[u] = out
    info = KernelInfo(tuple(p.dtype.name for p in bufs), tuple(p.arg[0] for p in variables),
                      self.thread.size if self.thread is not None else None, _work(self.prog))
    body = "\n".join(["entry:", *self.allocas, *self.lines, "  ret void"])
    define = " ".join(["define", *([self.r.kernel_cc] if self.r.kernel_cc else []), "void", f"@{self.name}({', '.join(args)}) #0 {{"])
    return "\n".join([f"; tinyspec {json.dumps(asdict(info))}", *self.globals, define, body, "}",
                      *sorted(self.decls), 'attributes #0 = { nounwind "frame-pointer"="none" }', ""])

# ---- memory, loops and blocks ----

def _buffer(f: _Function, u: UOp) -> str:
  array = f"[{u.shape[0] if u.shape else 1} x {_MEM[u.dtype.scalar()]}]"
  if u.arg[3] is AddrSpace.LOCAL and f.r.local_addrspace is not None:  # one copy per workgroup: a global of that address space
    f.globals.append(f"@local{u.arg[0]} = internal addrspace({f.r.local_addrspace}) global {array} undef, align 16")
    return f"@local{u.arg[0]}"
  if u.arg[3] is not AddrSpace.REG: raise NotImplementedError(f"LLVM render of {f.name}: {u.arg[3].name} buffers need workgroups")
  space = f", addrspace({f.r.reg_addrspace})" if f.r.reg_addrspace else ""
  f.allocas.append(f"  %acc{u.arg[0]} = alloca {array}{space}")
  return f"%acc{u.arg[0]}"

def _vec(u: UOp, types: dict[DType, str] = _REG) -> str:
  """The type of value u: `<n x float>` for a vector of n lanes, else its scalar's."""
  return f"<{u.shape[0]} x {types[u.dtype.scalar()]}>" if u.shape else types[u.dtype.scalar()]

def _index(f: _Function, u: UOp) -> str:
  if reads_lane(u): return f.emit(f"extractelement {_vec(u.src[0])} {f.op(u.src[0])}, i32 {u.src[1].arg[0]}")
  base, (at, _) = buffer_of(u.src[0]), vector_index(u.src[1]) or (u.src[1], 1)  # a vector's address is its first element's
  return f.emit(f"getelementptr inbounds {_MEM[base.dtype.scalar()]}, {f.ptr(base)} {f.op(base)}, i64 {f.op(at)}")

def _stack(f: _Function, u: UOp) -> str:  # a vector of values (index STACKs, shapes and address offsets, are skipped in render)
  v = "poison"
  for j, s in enumerate(u.src): v = f.emit(f"insertelement {_vec(u)} {v}, {_REG[s.dtype.scalar()]} {f.op(s)}, i32 {j}")
  return v

def _wmma(f: _Function, u: UOp) -> str:  # the lanes' fragments as vectors of the intrinsic's types (bfloat16 as its 16 bits)
  name, elem, extra = f.r.wmma_intrinsic(u.arg)
  def vector(frag: UOp, ty: str) -> str:
    v = "poison"
    for j, s in enumerate(frag.src):
      x = _bf16_to_bits(f, f.op(s)) if s.dtype is dtypes.bfloat16 and ty == "i16" else f.op(s)
      v = f.emit(f"insertelement <{len(frag.src)} x {ty}> {v}, {ty} {x}, i32 {j}")
    return v
  ta, tout = f"<{u.src[0].shape[0]} x {elem}>", _vec(u)
  args = [f"{ta} {vector(u.src[0], elem)}", f"{ta} {vector(u.src[1], elem)}", f"{tout} {vector(u.src[2], _REG[u.dtype])}", *extra]
  f.decls.add(f"declare {tout} @{name}({', '.join(a.rsplit(' ', 1)[0] for a in args)})")
  return f.emit(f"call {tout} @{name}({', '.join(args)})")

def _special(f: _Function, u: UOp) -> str:
  fn = f.intrinsic(f.r.special(u.arg), "i32")
  return f.emit(f"zext i32 {f.emit(f'call i32 @{fn}()')} to i64")

_CALL = re.compile(r"call (\S+) @([\w.$]+)\(\)")

def _barrier(f: _Function, u: UOp) -> None:
  for line in f.r.barrier:
    if (m := _CALL.search(line)): f.intrinsic(m.group(2), m.group(1))
    f.lines.append(f"  {line}")

def _load_value(f: _Function, dt: DType, ptr: str, pty: str = "ptr") -> str:
  x = f.emit(f"load {_MEM[dt]}, {pty} {ptr}")
  if dt is dtypes.bool: return f.emit(f"trunc i8 {x} to i1")
  if dt is dtypes.bfloat16: return _bits_to_bf16(f, x)
  return x

def _store_value(f: _Function, dt: DType, ptr: str, v: str, pty: str = "ptr") -> None:
  if dt is dtypes.bool: v = f.emit(f"zext i1 {v} to i8")
  if dt is dtypes.bfloat16: v = _bf16_to_bits(f, v)
  f.lines.append(f"  store {_MEM[dt]} {v}, {pty} {ptr}")

def _guarded(f: _Function, gate: str, what) -> tuple[str | None, str, str]:
  """Run `what()` only where `gate` holds: returns what it returned, the label the guarded block ends in and the one before."""
  n, before = f.tmp()[2:], f.block
  f.lines.append(f"  br i1 {gate}, label %then{n}, label %join{n}")
  f.label(f"then{n}")
  out = what()
  inner = f.block
  f.lines.append(f"  br label %join{n}")
  f.label(f"join{n}")
  return out, inner, before

def _load(f: _Function, u: UOp) -> str:
  dt, pty = u.dtype.scalar(), f.ptr(u.src[0])
  if u.shape: return f.emit(f"load {_vec(u, _MEM)}, {pty} {f.op(u.src[0])}, align {dt.itemsize}")  # a vector (never gated)
  if len(u.src) < 3: return _load_value(f, dt, f.op(u.src[0]), pty)
  # a gated load reads memory only where the gate holds (the address may be out of bounds elsewhere), else it is alt
  ptr, alt = f.op(u.src[0]), f.op(u.src[1])
  x, inner, before = _guarded(f, f.op(u.src[2]), lambda: _load_value(f, dt, ptr, pty))
  return f.emit(f"phi {_REG[dt]} [ {x}, %{inner} ], [ {alt}, %{before} ]")

def _store(f: _Function, u: UOp) -> None:
  dt, ptr, v, pty = u.src[1].dtype.scalar(), f.op(u.src[0]), f.op(u.src[1]), f.ptr(u.src[0])
  if u.src[1].shape: f.lines.append(f"  store {_vec(u.src[1], _MEM)} {v}, {pty} {ptr}, align {dt.itemsize}")
  elif len(u.src) < 3: _store_value(f, dt, ptr, v, pty)
  else: _guarded(f, f.op(u.src[2]), lambda: _store_value(f, dt, ptr, v, pty))

def _range(f: _Function, u: UOp) -> str:
  if u is f.thread: return "%core_id"  # one call per value: no loop
  n, start, bound = f.tmp()[2:], "0", f.op(u.src[0])
  before = f.block
  f.lines.append(f"  br label %loop{n}")
  f.label(f"loop{n}")
  f.lines.append(f"  %r{n} = phi i64 [ {start}, %{before} ], [ %r{n}.next, %LATCH ]")
  f.loops[u] = (n, len(f.lines) - 1)
  more = f.emit(f"icmp slt i64 %r{n}, {bound}")
  f.lines.append(f"  br i1 {more}, label %body{n}, label %exit{n}")
  f.label(f"body{n}")
  return f"%r{n}"

def _end(f: _Function, u: UOp) -> None:
  for rng in u.src[1:]:
    if rng is f.thread: continue
    n, phi = f.loops.pop(rng)
    f.lines[phi] = f.lines[phi].replace("%LATCH", f"%{f.block}")
    f.lines.append(f"  %r{n}.next = add nuw nsw i64 %r{n}, 1")
    f.lines.append(f"  br label %loop{n}")
    f.label(f"exit{n}")

def _if(f: _Function, u: UOp) -> None:
  n = f.tmp()[2:]
  f.lines.append(f"  br i1 {f.op(u.src[0])}, label %if{n}, label %endif{n}")
  f.label(f"if{n}")
  f.val[u] = n

def _endif(f: _Function, u: UOp) -> None:
  n = f.val[u.src[0]]
  f.lines.append(f"  br label %endif{n}")
  f.label(f"endif{n}")

# ---- arithmetic ----

def _bf16(f: _Function, x: str) -> str:
  """A float register rounded to bfloat16 precision (to nearest even, nan kept): what every bfloat16 result goes through."""
  bits = f.emit(f"bitcast float {x} to i32")
  odd = f.emit(f"and i32 {f.emit(f'lshr i32 {bits}, 16')}, 1")
  bias = f.emit(f"add i32 {odd}, 32767")
  up = f.emit(f"add i32 {bits}, {bias}")
  rounded = f.emit(f"bitcast i32 {f.emit(f'and i32 {up}, -65536')} to float")
  return f.emit(f"select i1 {f.emit(f'fcmp uno float {x}, 0.0')}, float {x}, float {rounded}")

def _bits_to_bf16(f: _Function, x: str) -> str:
  wide = f.emit(f"zext i16 {x} to i32")
  return f.emit(f"bitcast i32 {f.emit(f'shl i32 {wide}, 16')} to float")

def _bf16_to_bits(f: _Function, x: str) -> str:
  bits = f.emit(f"bitcast float {x} to i32")
  return f.emit(f"trunc i32 {f.emit(f'lshr i32 {bits}, 16')} to i16")

def _divmod(f: _Function, u: UOp, t: str, a: str, b: str) -> str:
  """Integer // and % as Python floors them; x // 0 and x % 0 are 0. Signed: the divisor is made safe first (0 and -1
  become 1: sdiv by 0 is undefined, and MIN // -1 overflows), then a truncated quotient is moved toward -inf."""
  zero = f.emit(f"icmp eq {t} {b}, 0")
  if not _signed(u.dtype):
    safe = f.emit(f"select i1 {zero}, {t} 1, {t} {b}")
    res = f.emit(f"{'udiv' if u.op is Ops.IDIV else 'urem'} {t} {a}, {safe}")
    return f.emit(f"select i1 {zero}, {t} 0, {t} {res}")
  neg1 = f.emit(f"icmp eq {t} {b}, -1")
  safe = f.emit(f"select i1 {f.emit(f'or i1 {zero}, {neg1}')}, {t} 1, {t} {b}")
  q, r = f.emit(f"sdiv {t} {a}, {safe}"), f.emit(f"srem {t} {a}, {safe}")
  # floor: a nonzero remainder whose sign differs from the divisor's means the truncated quotient is one too high
  signs = f.emit(f"xor {t} {r}, {b}")
  fix = f.emit(f"and i1 {f.emit(f'icmp ne {t} {r}, 0')}, {f.emit(f'icmp slt {t} {signs}, 0')}")
  if u.op is Ops.IDIV:
    floored = f.emit(f"sub {t} {q}, {f.emit(f'zext i1 {fix} to {t}')}")
    q = f.emit(f"select i1 {neg1}, {t} {f.emit(f'sub {t} 0, {a}')}, {t} {floored}")
    return f.emit(f"select i1 {zero}, {t} 0, {t} {q}")
  r = f.emit(f"select i1 {fix}, {t} {f.emit(f'add {t} {r}, {b}')}, {t} {r}")
  return f.emit(f"select i1 {zero}, {t} 0, {t} {r}")

def _shift(f: _Function, u: UOp, t: str, a: str, b: str) -> str:
  """a << b, a >> b (arithmetic for signed a); a shift by a negative amount or by the width or more gives 0."""
  bt = _REG[u.src[1].dtype.scalar()]
  if bt != t:  # the amount may be another int width: bring it to a's
    wide = int(bt[1:]) > int(t[1:])
    ok = f.emit(f"icmp ult {bt} {b}, {8 * u.dtype.itemsize}")
    b = f.emit(f"{'trunc' if wide else 'zext' if not _signed(u.src[1].dtype) else 'sext'} {bt} {b} to {t}")
  else: ok = f.emit(f"icmp ult {t} {b}, {8 * u.dtype.itemsize}")
  amount = f.emit(f"select i1 {ok}, {t} {b}, {t} 0")
  shifted = f.emit(f"{'shl' if u.op is Ops.SHL else 'ashr' if _signed(u.dtype) else 'lshr'} {t} {a}, {amount}")
  return f.emit(f"select i1 {ok}, {t} {shifted}, {t} 0")

def _unsigned_to_float(f: _Function, x: str, st: str, dst: DType) -> str:
  """uitofp without uitofp. x read as signed, sitofp, is right where its top bit is clear; else, when the float register
  holds every x exactly, that float plus 2**bits; when it does not, x halved (the lost bit kept as a sticky bit, below
  where the one rounding happens) is converted and doubled. LLVM 22's SLP vectorizer narrows a uitofp's operand to the
  bits that are not copies of its sign bit, right for sitofp only: uitofp(sext i32 -6 to i64) came out 4294967290, not
  2**64 - 6 (the fuzzer's int32-30864, a mean of int32 values cast to uint64)."""
  dt, bits = _REG[dst], int(st[1:])
  held = np.finfo(np.float32 if dst is dtypes.bfloat16 else dst.np).nmant + 1  # the register's significand, implicit bit included
  top_set, signed = f.emit(f"icmp slt {st} {x}, 0"), f.emit(f"sitofp {st} {x} to {dt}")
  if held >= bits: big = f.emit(f"fadd {dt} {signed}, {const(2.0 ** bits, dst)}")
  else:
    half = f.emit(f"or {st} {f.emit(f'lshr {st} {x}, 1')}, {f.emit(f'and {st} {x}, 1')}")
    halved = f.emit(f"sitofp {st} {half} to {dt}")
    big = f.emit(f"fadd {dt} {halved}, {halved}")
  return f.emit(f"select i1 {top_set}, {dt} {big}, {dt} {signed}")

def _sign_bits_clear(u: UOp) -> bool:
  """Whether LLVM can see no copies of a sign bit in u's upper bits: a value loaded or constant, or a bool or unsigned int
  widened (its upper bits zeros)."""
  if u.op is not Ops.CAST: return u.op in (Ops.LOAD, Ops.CONST)
  src = u.src[0].dtype.scalar()
  return (src is dtypes.bool or dtypes.is_unsigned(src)) and src.itemsize < u.dtype.itemsize

def _cast(f: _Function, x: str, src: DType, dst: DType, of: UOp) -> str:
  """CAST as numpy does it: to bool is x != 0, bools are 0/1, ints wrap, floats to ints truncate (saturating out of range,
  nan to 0), float widths round to nearest. `of` is the value cast: an unsigned one whose upper bits may copy a sign bit
  goes through _unsigned_to_float."""
  st, dt = _REG[src], _REG[dst]
  if src is dst: return x
  if dst is dtypes.bool: return f.emit(f"fcmp une {st} {x}, 0.0") if _isf(src) else f.emit(f"icmp ne {st} {x}, 0")
  if _isf(dst):
    if src is dtypes.float64 and dst.itemsize == 2: x, st = _to_float_odd(f, x), "float"  # x86 has no direct double -> half
    if dtypes.is_unsigned(src) and not _sign_bits_clear(of): out = _unsigned_to_float(f, x, st, dst)
    elif src is dtypes.bool or not _isf(src): out = f.emit(f"{'sitofp' if _signed(src) else 'uitofp'} {st} {x} to {dt}")
    else: out = x if st == dt else f.emit(f"{'fpext' if _FBITS[st] < _FBITS[dt] else 'fptrunc'} {st} {x} to {dt}")
    return _bf16(f, out) if dst is dtypes.bfloat16 else out
  bits = 8 * dst.itemsize
  if _isf(src):  # dtype.float_to_int's rule: through 64 bits, so narrower ints wrap; nan, inf and the far out of range give 0
    def within(a: float, b: float) -> str:  # a <= x < b, false for nan (ordered compares); a past the type's range: its lowest
      a = max(a, -finite_max(src))           # finite value instead, or -inf (what -2**63 rounds to in half) would count as in
      return f.emit(f"and i1 {f.emit(f'fcmp oge {st} {x}, {const(a, src)}')}, {f.emit(f'fcmp olt {st} {x}, {const(b, src)}')}")
    wide = f.emit(f"call i64 @{f.intrinsic(f'llvm.fptosi.sat.i64.{_SUFFIX[st]}', 'i64', st)}({st} {x})")
    big = f.emit(f"call i64 @{f.intrinsic(f'llvm.fptoui.sat.i64.{_SUFFIX[st]}', 'i64', st)}({st} {x})")
    high = f.emit(f"select i1 {within(2.0 ** 63, 2.0 ** 64)}, i64 {big}, i64 0")
    out = f.emit(f"select i1 {within(-(2.0 ** 63), 2.0 ** 63)}, i64 {wide}, i64 {high}")
    return out if bits == 64 else f.emit(f"trunc i64 {out} to {dt}")
  sbits = 1 if src is dtypes.bool else 8 * src.itemsize
  if sbits == bits: return x
  if sbits > bits: return f.emit(f"trunc {st} {x} to {dt}")
  return f.emit(f"{'sext' if _signed(src) else 'zext'} {st} {x} to {dt}")

_FBITS = {"half": 16, "float": 32, "double": 64}

def _to_float_odd(f: _Function, x: str) -> str:
  """A double as a float rounded to odd (toward zero, then the last bit set if anything was lost): rounding that float
  again to 16 bits gives the correctly rounded result, where rounding to nearest twice could be off by one."""
  r = f.emit(f"fptrunc double {x} to float")
  back = f.emit(f"fpext float {r} to double")
  inexact = f.emit(f"fcmp une double {back}, {x}")
  away = f.emit(f"xor i1 {f.emit(f'fcmp ogt double {back}, {x}')}, {f.emit(f'fcmp olt double {x}, 0.0')}")  # |r| > |x|
  step = f.emit(f"zext i1 {f.emit(f'and i1 {away}, {inexact}')} to i32")
  toward_zero = f.emit(f"sub i32 {f.emit(f'bitcast float {r} to i32')}, {step}")
  odd = f.emit(f"or i32 {toward_zero}, {f.emit(f'zext i1 {inexact} to i32')}")
  return f.emit(f"bitcast i32 {odd} to float")

def _bitcast(f: _Function, x: str, src: DType, dst: DType) -> str:
  if src is dtypes.bfloat16: x, src = _bf16_to_bits(f, x), dtypes.int16
  if dst is dtypes.bfloat16: return _bits_to_bf16(f, x if _REG[src] == "i16" else f.emit(f"bitcast {_REG[src]} {x} to i16"))
  return x if _REG[src] == _REG[dst] else f.emit(f"bitcast {_REG[src]} {x} to {_REG[dst]}")

def _alu(f: _Function, u: UOp) -> str:
  op, dt = u.op, u.dtype.scalar()
  srcs = [f.op(s) for s in u.src]
  sdt = u.src[-1].dtype.scalar()  # the operands' dtype (WHERE's gate is src[0])
  t = _REG[sdt]
  if op is Ops.CAST: return _cast(f, srcs[0], sdt, dt, u.src[0])
  if op is Ops.BITCAST: return _bitcast(f, srcs[0], sdt, dt)
  if op is Ops.WHERE: return f.emit(f"select i1 {srcs[0]}, {t} {srcs[1]}, {t} {srcs[2]}")
  if op in _FCMP:
    if _isf(sdt): return f.emit(f"fcmp {_FCMP[op]} {t} {srcs[0]}, {srcs[1]}")
    cc = _ICMP[op] if op in (Ops.CMPNE, Ops.CMPEQ) else ("s" if _signed(sdt) else "u") + _ICMP[op]
    return f.emit(f"icmp {cc} {t} {srcs[0]}, {srcs[1]}")
  if op is Ops.NOT: return f.emit(f"xor i1 {srcs[0]}, true") if sdt is dtypes.bool else f.emit(f"icmp ne {t} {srcs[0]}, 1")
  if op in (Ops.IDIV, Ops.MOD): return _divmod(f, u, t, *srcs)
  if op in (Ops.SHL, Ops.SHR): return _shift(f, u, _REG[dt], *srcs)
  if _isf(dt): out = _float_alu(f, u, t, srcs)
  elif dt is dtypes.bool: out = f.emit(f"{_BOOL[op]} i1 {', '.join(srcs)}") if op in _BOOL else _int_alu(f, u, t, srcs)
  else: out = _int_alu(f, u, t, srcs)
  return _bf16(f, out) if dt is dtypes.bfloat16 and op not in (Ops.NEG, Ops.MAX) else out

_BOOL = {Ops.ADD: "or", Ops.MUL: "and", Ops.MAX: "or", Ops.SUB: "xor"}  # numpy's add/multiply/maximum on bools are or/and/or

def _float_alu(f: _Function, u: UOp, t: str, s: list[str]) -> str:
  op = u.op
  # only a register accumulation may be reassociated: that is what lets LLVM vectorize a float reduction
  fm = "reassoc nsz " if u in f.reductions else ""
  if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV): return f.emit(f"{_FOPS[op]} {fm}{t} {s[0]}, {s[1]}")
  if op is Ops.MULACC: return f.emit(f"fadd {t} {f.emit(f'fmul {t} {s[0]}, {s[1]}')}, {s[2]}")
  if op is Ops.NEG: return f.emit(f"fneg {t} {s[0]}")
  if op is Ops.RECIP: return f.emit(f"fdiv {t} {const(1.0, u.dtype.scalar())}, {s[0]}")
  if op is Ops.MAX: return f.call("maximum", t, *s)  # propagates nan, as numpy's maximum does
  if op is Ops.TRUNC: return f.call("trunc", t, *s)
  if op is Ops.SQRT: return f.call("sqrt", t, *s)
  raise NotImplementedError(f"LLVM render of {f.name}: {op.name} on {u.dtype}")

_FOPS = {Ops.ADD: "fadd", Ops.SUB: "fsub", Ops.MUL: "fmul", Ops.DIV: "fdiv"}

def _int_alu(f: _Function, u: UOp, t: str, s: list[str]) -> str:
  op, nsw = u.op, " nsw" if u.dtype is dtypes.index else ""  # index arithmetic never overflows 64 bits
  if op in (Ops.ADD, Ops.SUB, Ops.MUL): return f.emit(f"{op.name.lower()}{nsw} {t} {s[0]}, {s[1]}")
  if op in (Ops.XOR, Ops.OR, Ops.AND): return f.emit(f"{op.name.lower()} {t} {s[0]}, {s[1]}")
  if op is Ops.MULACC: return f.emit(f"add {t} {f.emit(f'mul {t} {s[0]}, {s[1]}')}, {s[2]}")
  if op is Ops.NEG: return f.emit(f"sub {t} 0, {s[0]}")
  if op is Ops.MAX:
    gt = f.emit(f"icmp {'s' if _signed(u.dtype) else 'u'}gt {t} {s[0]}, {s[1]}")
    return f.emit(f"select i1 {gt}, {t} {s[0]}, {t} {s[1]}")
  if op is Ops.TRUNC: return s[0]
  raise NotImplementedError(f"LLVM render of {f.name}: {op.name} on {u.dtype}")

_RENDER = {
  Ops.CONST: lambda f, u: None, Ops.BUFFER: _buffer, Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store,
  Ops.RANGE: _range, Ops.END: _end, Ops.IF: _if, Ops.ENDIF: _endif, Ops.AFTER: lambda f, u: f.val.get(u.src[0]),
  Ops.SPECIAL: _special, Ops.BARRIER: _barrier, Ops.STACK: _stack, Ops.WMMA: _wmma,
  **{op: (lambda f, u: None) for op in _NOTHING},
  **{op: _alu for op in (Ops.RECIP, Ops.TRUNC, Ops.CAST, Ops.BITCAST, Ops.ADD, Ops.MUL, Ops.MAX, Ops.MOD, Ops.IDIV, Ops.CMPLT, Ops.CMPNE,
                         Ops.XOR, Ops.OR, Ops.AND, Ops.SHR, Ops.SHL, Ops.WHERE, *LLVMRenderer.native)},
}
