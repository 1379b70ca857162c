"""C-family source from LINEAR programs: `CStyleRenderer`, the base of every renderer whose output is C or one of its
dialects (C99, OpenCL C, CUDA C, Metal Shading Language, HIP). Text only: it imports no compiler, so kernels render anywhere.

A kernel becomes one function (OpenCL C shown):

    __kernel void E_8(__global float* data0, __global float* data1) {  <- kernel_prefix; buffer PARAMs in slot order, then variables
      __local float local0[8];                                         <- LOCAL and REG buffers, declared first
      long gidx0 = get_group_id(0); /* 4 */                            <- SPECIAL, with its bound in a comment
      for (long ridx3 = 0; ridx3 < 8; ridx3++) {                       <- RANGE ... END is a for loop
        float v4 = data1[ridx3];                                       <- LOAD(INDEX(PARAM 1, RANGE))
        float v5 = (float)(v4 * v4);                                   <- MUL
        data0[ridx3] = v5;                                             <- STORE
      }
    }

Every instruction that computes something becomes a variable named after its position in the program (`v5` is
instruction 5), so the source reads side by side with the `DEBUG=3` listing; CONST, INDEX and AFTER compute nothing and
are written into their users. Where C's meaning differs from tinyspec's (floor division, shifts past the width, float to
int of NaN or out-of-range values, signed overflow), small helper functions give tinyspec's; the prelude holds only the
ones a kernel calls.
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tinyspec.dtype import FLOATS, SINTS, AddrSpace, DType, bf16_round, dtypes
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import GroupOp, Ops
from tinyspec.uop.spec import buffer_of, reads_lane, vector_index
from tinyspec.uop.uop import UOp

_INFIX = {Ops.ADD: "+", Ops.MUL: "*", Ops.XOR: "^", Ops.OR: "|", Ops.AND: "&", Ops.SUB: "-", Ops.DIV: "/"}
_CMP = {Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPGT: ">", Ops.CMPGE: ">=", Ops.CMPLE: "<=", Ops.CMPEQ: "=="}
_UNSIGNED = {dtypes.int8: dtypes.uint8, dtypes.int16: dtypes.uint16, dtypes.int32: dtypes.uint32, dtypes.int64: dtypes.uint64,
             dtypes.index: dtypes.uint64}
_XYZ = "xyz"

@dataclass
class CKernel:
  """One kernel's parts, as `CStyleRenderer.render_kernel` assembles them into source."""
  name: str
  params: list[str]
  """The parameter declarations, in call order (`render_params`' result)."""
  decls: list[str]
  """Declarations at the top of the body: LOCAL and REG buffers."""
  body: list[str]
  """The statements, indented."""
  dtypes: set[DType]
  """Every scalar dtype the kernel uses: the prelude enables extensions for some (half, double)."""
  local_size: tuple[int, int, int]
  """The workgroup shape its lidx SPECIALs ask for ((1, 1, 1) without them), e.g. for CUDA's __launch_bounds__."""

class CStyleRenderer(Renderer):
  """Renders LINEAR programs as C-family source. A dialect subclasses it and changes only what differs:

  Class attributes:
    type_map           scalar dtype -> type name, e.g. {dtypes.int8: "char", ...}; a dtype missing here cannot be rendered
    kernel_prefix      before `void name(`: "" (C), "__kernel " (OpenCL), 'extern "C" __global__ ' (CUDA), "kernel " (Metal)
    buffer_prefix      before a buffer parameter's type: "__global " (OpenCL), "device " (Metal)
    local_prefix       before a LOCAL (workgroup) buffer's declaration: "__local " (OpenCL), "__shared__ " (CUDA), "threadgroup "
    helper_prefix      before each helper function of the prelude: "static inline " (C, OpenCL), "__device__ inline " (CUDA)
    prelude            fixed text at the top of every kernel's source (includes, pragmas)
    barrier            the statement a BARRIER becomes, e.g. "barrier(CLK_LOCAL_MEM_FENCE);"; "" for none
    specials           SPECIAL name prefix -> its expression, "{d}" the dimension's digit, "{xyz}" its letter:
                       {"gidx": "get_group_id({d})", "lidx": "get_local_id({d})"} (OpenCL), {"gidx": "blockIdx.{xyz}", ...} (CUDA)
    math_funcs         op -> math function, for TRUNC and the `native` ops rendered as calls (SQRT, EXP2, LOG2, SIN, POW)
    math_suffix        dtype -> suffix of the math function's name: {dtypes.float32: "f"} gives C's sqrtf; {} for overloads
    infinity, nan      the float expressions of inf and nan, cast to each type ("INFINITY", "NAN")
    int64_suffix       suffixes of 64-bit integer literals: ("ll", "ull") for C and CUDA, ("L", "UL") for OpenCL
    wrap_signed        compute signed 32/64-bit ADD, SUB and MUL in unsigned types, so overflow wraps (as tinyspec's integers do)
                       where the compiler treats it as undefined; False where the compiler wraps anyway (C with -fwrapv)

  Vectors (what expand makes of an UPCAST range over consecutive elements) exist for the renderer's `vector_dtypes` and
  `vector_widths` (none by default: plain C has no vector types).

  Methods to override for larger differences (each documented below): `render_bitcast`, `render_float`, `vector_type`,
  `render_vectorize`, `render_lane`, `render_load`, `render_store`, `render_vector_load`, `render_vector_store`,
  `render_atomic_add`, `render_special`, `helpers`, `render_prelude`, `render_params`, `buffer_param`, `var_param`,
  `kernel_attributes`, `render_kernel`, and `render_alu` for an op whose C form differs.
  """
  type_map: dict[DType, str] = {}
  kernel_prefix: str = ""
  buffer_prefix: str = ""
  local_prefix: str = ""
  helper_prefix: str = "static inline "
  prelude: str = ""
  barrier: str = ""
  specials: dict[str, str] = {}
  math_funcs: dict[Ops, str] = {Ops.TRUNC: "trunc", Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.POW: "pow"}
  math_suffix: dict[DType, str] = {}
  infinity, nan = "INFINITY", "NAN"
  int64_suffix: tuple[str, str] = ("ll", "ull")
  wrap_signed: bool = True

  # *** types and constants ***

  def render_dtype(self, dt: DType) -> str:
    """The type name of `dt`, a scalar or (count > 1) a vector; NotImplementedError for one this dialect lacks."""
    if dt.count > 1: return self.vector_type(dt)
    if dt not in self.type_map: raise NotImplementedError(f"{type(self).__name__} has no type for {dt!r}")
    return self.type_map[dt]

  def vector_type(self, dt: DType) -> str:
    """The type of a vector dtype: the scalar's name and the count ("float4"), as OpenCL, CUDA and Metal spell it."""
    if dt.scalar() not in self.vector_dtypes: raise NotImplementedError(f"{type(self).__name__} has no vector type for {dt!r}")
    return f"{self.render_dtype(dt.scalar())}{dt.count}"

  def render_vectorize(self, values: list[str], dt: DType) -> str:
    """A vector of dtype `dt` built from scalar expressions: OpenCL's `(float4)(a, b, c, d)`."""
    return f"({self.render_dtype(dt)})({', '.join(values)})"

  def render_lane(self, vec: str, j: int, n: int) -> str:
    """Lane j of the vector expression `vec` of n lanes: `.x` to `.w`, and OpenCL's `.s0` to `.sf` past four."""
    return f"{vec}.{'xyzw'[j]}" if n <= 4 else f"{vec}.s{j:x}"

  def render_float(self, value: float, dt: DType) -> str:
    """A finite float CONST of dtype `dt`. It is rounded to `dt` here, once, as numpy rounds a Python float: float64 is
    written as the double it is, float32 with an f suffix, narrower floats as an exact float32 literal cast to their type."""
    if dt is dtypes.float64: return repr(float(value))
    with np.errstate(over="ignore"):
      exact = np.float32(value) if dt is dtypes.float32 else np.float32(np.float16(value)) if dt is dtypes.float16 else bf16_round(float(value))
    if not np.isfinite(exact): return self.render_const(float(exact), dt)  # too big for dt: infinity
    # numpy prints the shortest digits that read back as this float32; narrower floats are then cast, exactly
    return f"{exact!s}f" if dt is dtypes.float32 else f"(({self.render_dtype(dt)}){exact!s}f)"

  def render_const(self, value, dt: DType) -> str:
    """A CONST as an expression of type `dt`. Integers that fit C's int are written bare: C converts them to the other
    operand's type. Wider ones carry `int64_suffix`."""
    if dt is dtypes.bool: return "1" if value else "0"
    if dtypes.is_float(dt):
      if math.isnan(value): return f"(({self.render_dtype(dt)}){self.nan})"
      if math.isinf(value): return f"({'-' if value < 0 else ''}({self.render_dtype(dt)}){self.infinity})"
      return self.render_float(value, dt)
    value = int(value)
    if -2**31 < value < 2**31: return str(value)
    signed, unsigned = self.int64_suffix
    if value == -2**63: return f"(-{2**63 - 1}{signed} - 1)"  # 2**63 itself does not fit int64, so it cannot be negated
    return f"{value}{unsigned if dtypes.is_unsigned(dt) else signed}"

  # *** elementwise ops ***

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
    """`x`'s bytes reinterpreted as `dst` (same size): a union, which C99 defines (a pointer cast would break aliasing
    rules). OpenCL's as_T(x), CUDA's intrinsics and Metal's as_type<T>(x) override this."""
    return f"((union {{ {self.render_dtype(src)} from; {self.render_dtype(dst)} to; }}){{ .from = {x} }}).to"

  def render_load(self, buf: str, idx: str, space: AddrSpace, dt: DType) -> str:
    """The expression that reads element `idx` of buffer `buf` (of `dt` elements, in memory `space`): `buf[idx]`."""
    return f"{buf}[{idx}]"

  def render_store(self, buf: str, idx: str, space: AddrSpace, val: str, dt: DType) -> str:
    """The statement that writes `val` to element `idx` of buffer `buf` (of `dt` elements, in memory `space`)."""
    return f"{buf}[{idx}] = {val};"

  def render_vector_load(self, buf: str, idx: str, space: AddrSpace, dt: DType) -> str:
    """The expression that reads the vector of dtype `dt` (a count > 1) at elements idx, idx+1, ... of buffer `buf`: a
    pointer cast, `*((float4*)(data1 + v7))`. OpenCL's vloadN and Metal's packed types override it."""
    return f"*(({self.buffer_prefix}{self.render_dtype(dt)}*)({buf} + {idx}))"

  def render_vector_store(self, buf: str, idx: str, space: AddrSpace, val: str, dt: DType) -> str:
    """The statement that writes the vector `val` of dtype `dt` to elements idx, idx+1, ... of buffer `buf`."""
    return f"{self.render_vector_load(buf, idx, space, dt)} = {val};"

  def render_special(self, name: str) -> str:
    """The expression of SPECIAL `name` ("gidx0", "lidx2"), from `specials`."""
    prefix, d = name.rstrip("0123456789"), name[len(name.rstrip("0123456789")):]
    if prefix not in self.specials or not d or int(d) > 2:
      raise NotImplementedError(f"{type(self).__name__} cannot render SPECIAL {name!r} (it knows {sorted(self.specials) or 'none'})")
    return self.specials[prefix].format(d=d, xyz=_XYZ[int(d)])

  def render_wmma(self, tc, out: str, a: list[str], b: list[str], c: list[str]) -> list[str]:
    """The statements of one WMMA (instruction `tc`, a TensorCore of `tensor_cores`): the lane's elements of A, B and C
    are the expressions a, b and c; they declare the array `out` of its elements of D, which the kernel reads as out[j]."""
    raise NotImplementedError(f"{type(self).__name__} cannot render WMMA ({tc.name}): it declares no tensor cores")

  def render_atomic_add(self, target: str, val: str, dt: DType) -> str:
    """The statement that adds `val` to the memory `target` (an lvalue such as `data0[v3]`) atomically."""
    raise NotImplementedError(f"{type(self).__name__} has no atomic add for {dt!r}")

  def _math(self, op: Ops, dt: DType, s: list[str]) -> str:
    # 16-bit floats go through float32: every dialect has its math there, and one rounding back to 16 bits is exact enough
    mdt = dtypes.float32 if dt.itemsize < 4 else dt
    args = ", ".join(s if mdt is dt else [f"({self.render_dtype(mdt)}){a}" for a in s])
    return f"({self.render_dtype(dt)}){self.math_funcs[op]}{self.math_suffix.get(mdt, '')}({args})"

  def render_alu(self, op: Ops, dt: DType, src_dt: DType, s: list[str]) -> str:
    """The expression for one elementwise op of dtype `dt` on operands `s` (expressions) of dtype `src_dt`, with tinyspec's
    semantics. Results are cast back to `dt`, since C computes small integers (and some dialects 16-bit floats) wider."""
    t, a = self.render_dtype(dt), s[0]
    b = s[1] if len(s) > 1 else ""
    if op in (Ops.ADD, Ops.SUB, Ops.MUL) and self.wrap_signed and dt in (dtypes.int32, dtypes.int64):
      u = self.render_dtype(_UNSIGNED[dt])  # unsigned arithmetic wraps by definition; signed overflow is undefined
      return f"({t})(({u}){a} {_INFIX[op]} ({u}){b})"
    if op in _INFIX: return f"({t})({a} {_INFIX[op]} {b})"
    if op in _CMP: return f"({a} {_CMP[op]} {b})"
    if op is Ops.NEG: return f"(!{a})" if dt is dtypes.bool else self.render_alu(Ops.SUB, dt, src_dt, ["0", a])
    if op is Ops.NOT: return f"(!{a})" if src_dt is dtypes.bool else f"({a} != 1)"
    if op is Ops.MULACC: return self.render_alu(Ops.ADD, dt, dt, [self.render_alu(Ops.MUL, dt, dt, s[:2]), s[2]])
    if op is Ops.MAX: return f"({a} > {b} || {a} != {a} ? {a} : {b})"  # a NaN on either side wins, as in numpy.maximum
    if op is Ops.WHERE: return f"({a} ? {b} : {s[2]})"
    if op in (Ops.IDIV, Ops.MOD):
      if dtypes.is_unsigned(dt): return f"({t})({b} == 0 ? 0 : {a} {'/' if op is Ops.IDIV else '%'} {b})"
      return f"{'idiv' if op is Ops.IDIV else 'mod'}_{dt.name}({a}, {b})"
    if op in (Ops.SHL, Ops.SHR):  # shifting by a negative amount or by the width or more gives 0 (undefined in C)
      u = self.render_dtype(_UNSIGNED.get(dt, dt))  # left shifts in unsigned: no overflow
      shifted = f"({t})(({u}){a} << {b})" if op is Ops.SHL else f"({t})({a} >> {b})"
      if b.lstrip("-").isdigit(): return shifted if 0 <= int(b) < 8 * dt.itemsize else "0"  # a constant amount: decided here
      return f"({b} >= 0 && {b} < {8 * dt.itemsize} ? {shifted} : 0)"
    if op is Ops.RECIP: return f"(({t})1 / {a})"
    if op in self.math_funcs: return self._math(op, dt, s)
    if op is Ops.CAST:
      if dt is dtypes.bool: return f"({a} != 0)"
      if dtypes.is_float(src_dt) and not dtypes.is_float(dt):  # via f2i: NaN, infinities and out-of-range values give 0
        via = src_dt if src_dt.itemsize >= 4 else dtypes.float32
        return f"({t})f2i_{via.name}({a})" if via is src_dt else f"({t})f2i_{via.name}(({self.render_dtype(via)}){a})"
      return f"({t}){a}"
    if op is Ops.BITCAST:
      if dt.itemsize != src_dt.itemsize: raise NotImplementedError(f"BITCAST from {src_dt!r} to {dt!r} changes the size")
      return self.render_bitcast(a, src_dt, dt)
    raise NotImplementedError(f"{type(self).__name__} cannot render {op.name}")

  # *** the prelude's helpers ***

  def helpers(self) -> dict[str, str]:
    """Helper functions by name: the prelude holds those whose name the kernel's body mentions. Floor division and modulo
    per signed integer type (x//0 and x%0 are 0; MIN // -1 wraps where C's / would trap), and float to int64 per float
    type (`dtype.float_to_int`'s rule: NaN, infinities and values outside [-2**63, 2**64) give 0; C leaves them
    undefined). A dialect may add its own."""
    out, p = {}, self.helper_prefix
    for dt in (*SINTS, dtypes.index):
      if dt not in self.type_map: continue
      t, u = self.type_map[dt], self.type_map[_UNSIGNED[dt]]
      out[f"idiv_{dt.name}"] = (f"{p}{t} idiv_{dt.name}({t} a, {t} b) {{ if (b == 0) return 0; if (b == -1) return ({t})(0 - ({u})a);\n"
                                f"  {t} q = a / b; return q * b != a && (a < 0) != (b < 0) ? q - 1 : q; }}")
      out[f"mod_{dt.name}"] = (f"{p}{t} mod_{dt.name}({t} a, {t} b) {{ if (b == 0 || b == -1) return 0;\n"
                               f"  {t} r = a % b; return r != 0 && (r < 0) != (b < 0) ? r + b : r; }}")
    if dtypes.int64 in self.type_map and dtypes.uint64 in self.type_map:
      i64, u64 = self.type_map[dtypes.int64], self.type_map[dtypes.uint64]
      for dt in FLOATS:
        if dt.itemsize < 4 or dt not in self.type_map: continue
        t, lo, hi, top = self.type_map[dt], *(self.render_float(v, dt) for v in (-2.0**63, 2.0**63, 2.0**64))
        out[f"f2i_{dt.name}"] = (f"{p}{i64} f2i_{dt.name}({t} x) {{\n"
                                 f"  return x >= {lo} && x < {hi} ? ({i64})x : x >= {hi} && x < {top} ? ({i64})({u64})x : 0; }}")
    return out

  @functools.cached_property
  def _helpers(self) -> dict[str, str]: return self.helpers()

  def render_prelude(self, k: CKernel) -> str:
    """The text before the kernel: `prelude`, then the helpers the body calls (and those they call), in `helpers`' order."""
    text = "\n".join(k.decls + k.body)
    used = {n for n in re.findall(r"\b(\w+)\(", text) if n in self._helpers}
    for name in list(self._helpers)[::-1]:  # helpers calling helpers defined before them
      if name in used: used |= {n for n in re.findall(r"\b(\w+)\(", self._helpers[name]) if n in self._helpers}
    return self.prelude + "".join(code + "\n" for name, code in self._helpers.items() if name in used)

  # *** the signature and the kernel ***

  def buffer_param(self, slot: int, dt: DType, written: bool) -> str:
    """The declaration of buffer PARAM `slot`, whose elements are `dt`; `written` says whether the kernel stores to it."""
    return f"{self.buffer_prefix}{self.render_dtype(dt)}* data{slot}"

  def var_param(self, name: str) -> str:
    """The declaration of an integer variable (a symbolic size), passed by value as an index-typed integer."""
    return f"{self.render_dtype(dtypes.index)} {name}"

  def render_params(self, bufs: list[tuple[int, DType, bool]], variables: list[str]) -> list[str]:
    """Every parameter, in the order the program passes them: buffers `(slot, dtype, written)` by slot, then variables by
    name. Metal overrides this to add [[buffer(n)]] and the thread-position parameters."""
    return [self.buffer_param(*b) for b in bufs] + [self.var_param(v) for v in variables]

  def kernel_attributes(self, k: CKernel) -> str:
    """What goes between `void` and the kernel's name, e.g. CUDA's `__launch_bounds__(256) `; nothing by default."""
    return ""

  def render_kernel(self, k: CKernel) -> str:
    """The whole source: prelude, then `kernel_prefix void attributes name(params) { decls body }`."""
    lines = [f"  {d}" for d in k.decls] + k.body
    head = f"{self.kernel_prefix}void {self.kernel_attributes(k)}{k.name}({', '.join(k.params) or 'void'})"
    return f"{self.render_prelude(k)}\n{head} {{\n" + "\n".join(lines) + "\n}\n"

  # *** the program ***

  def render(self, name: str, linear: UOp) -> str:
    """The source of kernel `name` (see the module docstring for its shape): each instruction through its entry of the
    op table `_RENDER`."""
    k = _Kernel(self, name, linear)
    for i, u in enumerate(linear.src):
      if u.dtype not in (dtypes.void, dtypes.index): k.used.add(u.dtype.scalar())
      if u.dtype is dtypes.index and u.shape: continue  # a shape, or a vector's address (its lanes): nothing to run
      if (fn := _RENDER.get(u.op)) is None: raise NotImplementedError(f"{type(self).__name__} cannot render {u.op.name} (instruction {i} of {name})")
      fn(k, i, u)
    params = self.render_params([(s, k.bufs[s], s in k.written) for s in sorted(k.bufs)], sorted(k.variables))  # vals come in name order
    return self.render_kernel(CKernel(name, params, k.decls, k.body, k.used, (k.local_size[0], k.local_size[1], k.local_size[2])))

  def _vdtype(self, u: UOp) -> DType:
    # a STACK of values (and ops on one) is a vector of its length; everything else has the dtype's own type
    n = u.shape[0] if len(u.shape) == 1 and u.op not in (Ops.PARAM, Ops.BUFFER) else 1
    return u.dtype if n == 1 or u.dtype.count > 1 else u.dtype.vec(n)



class _Kernel:
  """The state of rendering one kernel: each instruction's expression (its variable, or the expression itself where
  inlined), the parameters and declarations found so far, and the body's lines at the current depth of blocks."""
  def __init__(self, r: CStyleRenderer, name: str, linear: UOp):
    self.r, self.name = r, name
    self.expr: dict[UOp, str] = {}
    self.bufs: dict[int, DType] = {}
    self.variables: list[str] = []
    self.decls: list[str] = []
    self.body: list[str] = []
    self.used: set[DType] = set()
    self.local_size = [1, 1, 1]
    self.depth = 1
    self.written = {b.arg[0] for u in linear.src if u.op in (Ops.STORE, Ops.ATOMICADD) and (b := buffer_of(u.src[0])).op is Ops.PARAM}
    # STACKs only WMMAs read, element by element (they are never vectors of their own)
    self.fragments = {s for u in linear.src if u.op is Ops.WMMA for s in u.src} - {s for u in linear.src if u.op is not Ops.WMMA for s in u.src}

  def emit(self, line: str) -> None: self.body.append("  " * self.depth + line)

  def define(self, i: int, u: UOp, value: str) -> None:
    """A new variable holding instruction i's value."""
    self.expr[u] = f"v{i}"
    self.emit(f"{self.r.render_dtype(self.r._vdtype(u))} v{i} = {value};")

  def access(self, idx: UOp) -> tuple[str, str, AddrSpace]:
    """(buffer, index, memory) of the element an INDEX (maybe under AFTERs) names; a vector's address is its first element's."""
    while idx.op is Ops.AFTER: idx = idx.src[0]
    if idx.op is not Ops.INDEX or len(idx.src) != 2: raise NotImplementedError(f"{type(self.r).__name__}: memory access through {idx.op.name}")
    b, (at, _) = buffer_of(idx), vector_index(idx.src[1]) or (idx.src[1], 1)
    return self.expr[idx.src[0]], self.expr[at], AddrSpace.GLOBAL if b.op is Ops.PARAM else b.arg[3]

# ---- the op table: one function per op (or group of ops), each writing its instruction into the kernel ----

def _param(k: _Kernel, i: int, u: UOp) -> None:
  if isinstance(u.arg[0], str):  # an integer variable of the kernel, passed by value
    if not u.arg[0].isidentifier(): raise NotImplementedError(f"variable name {u.arg[0]!r} is not a C identifier")
    k.expr[u] = u.arg[0]
    k.variables.append(u.arg[0])
  else:
    k.expr[u] = f"data{u.arg[0]}"
    k.bufs[u.arg[0]] = u.dtype

def _buffer(k: _Kernel, i: int, u: UOp) -> None:  # REG: an accumulator or small per-thread array; LOCAL: memory shared by a workgroup
  space = u.arg[3]
  if space not in (AddrSpace.REG, AddrSpace.LOCAL) or (space is AddrSpace.LOCAL and not k.r.has_shared):
    raise NotImplementedError(f"{type(k.r).__name__} has no {space.name} memory")
  k.expr[u] = v = f"{'reg' if space is AddrSpace.REG else 'local'}{u.arg[0]}"
  k.decls.append(f"{k.r.local_prefix if space is AddrSpace.LOCAL else ''}{k.r.render_dtype(u.dtype)} {v}[{u.shape[0] if u.shape else 1}];")

def _special(k: _Kernel, i: int, u: UOp) -> None:
  k.expr[u] = u.arg
  k.emit(f"{k.r.render_dtype(dtypes.index)} {u.arg} = {k.r.render_special(u.arg)}; /* {k.expr[u.src[0]]} */")
  if u.arg.startswith("lidx") and u.size is not None: k.local_size[int(u.arg[4:])] = u.size

def _index(k: _Kernel, i: int, u: UOp) -> None:
  if reads_lane(u) and u.src[0].op is Ops.WMMA: k.expr[u] = f"{k.expr[u.src[0]]}[{u.src[1].arg[0]}]"; return  # D's elements: an array
  if reads_lane(u): k.expr[u] = k.r.render_lane(k.expr[u.src[0]], u.src[1].arg[0], u.src[0].shape[0]); return
  if len(u.src) != 2: raise NotImplementedError(f"INDEX with {len(u.src) - 1} indices (the pipeline makes flat ones)")
  if not u.src[1].shape: k.expr[u] = f"{k.expr[u.src[0]]}[{k.expr[u.src[1]]}]"  # (a vector's address is only read by access)

def _load(k: _Kernel, i: int, u: UOp) -> None:
  if u.shape: return k.define(i, u, k.r.render_vector_load(*k.access(u.src[0]), k.r._vdtype(u)))  # a vector: never gated
  val = k.r.render_load(*k.access(u.src[0]), u.dtype)  # a gated load reads memory only where the gate holds, and is alt elsewhere
  k.define(i, u, val if len(u.src) == 1 else f"({k.expr[u.src[2]]} ? {val} : {k.expr[u.src[1]]})")

def _store(k: _Kernel, i: int, u: UOp) -> None:
  if u.src[1].shape: return k.emit(k.r.render_vector_store(*k.access(u.src[0]), k.expr[u.src[1]], k.r._vdtype(u.src[1])))
  k.emit(("" if len(u.src) == 2 else f"if ({k.expr[u.src[2]]}) ") + k.r.render_store(*k.access(u.src[0]), k.expr[u.src[1]], u.src[1].dtype))

def _barrier(k: _Kernel, i: int, u: UOp) -> None:
  if not k.r.barrier: raise NotImplementedError(f"{type(k.r).__name__} has no barrier")
  k.emit(k.r.barrier)

def _open(k: _Kernel, line: str) -> None:
  k.emit(line)
  k.depth += 1

def _range(k: _Kernel, i: int, u: UOp) -> None:
  k.expr[u] = v = f"ridx{i}"
  _open(k, f"for ({k.r.render_dtype(dtypes.index)} {v} = 0; {v} < {k.expr[u.src[0]]}; {v}++) {{")

def _close(k: _Kernel, i: int, u: UOp) -> None:
  k.depth -= 1
  k.emit("}")

def _custom(k: _Kernel, i: int, u: UOp) -> None:  # arg is a format string over the sources' expressions: a statement, or a value if typed
  text = u.arg.format(*(k.expr[s] for s in u.src))
  if u.dtype is dtypes.void: k.emit(text)
  else: k.define(i, u, text)

def _stack(k: _Kernel, i: int, u: UOp) -> None:
  if u not in k.fragments: k.define(i, u, k.r.render_vectorize([k.expr[s] for s in u.src], k.r._vdtype(u)))  # a vector of values

def _wmma(k: _Kernel, i: int, u: UOp) -> None:
  k.expr[u] = f"wmma{i}"
  for line in k.r.render_wmma(u.arg, f"wmma{i}", *([k.expr[s] for s in frag.src] for frag in u.src)): k.emit(line)

def _alu(k: _Kernel, i: int, u: UOp) -> None:  # the primitives, the `native` decomposed ops, and BITCAST
  if not (k.r.supports(u.op) or u.op is Ops.BITCAST):
    raise NotImplementedError(f"{type(k.r).__name__} cannot render {u.op.name} (instruction {i} of {k.name})")
  k.define(i, u, k.r.render_alu(u.op, k.r._vdtype(u), u.src[0].dtype, [k.expr[s] for s in u.src]))

_RENDER: dict[Ops, Callable[[_Kernel, int, UOp], None]] = {
  Ops.CONST: lambda k, i, u: k.expr.__setitem__(u, k.r.render_const(u.arg[0], u.dtype)),          # written into its users
  Ops.STACK: _stack, Ops.WMMA: _wmma,                                                              # WMMA's fragments: its elements
  Ops.PARAM: _param, Ops.BUFFER: _buffer, Ops.SPECIAL: _special,
  Ops.AFTER: lambda k, i, u: k.expr.__setitem__(u, k.expr[u.src[0]]),                             # ordering only: statements run in order
  Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store,
  Ops.ATOMICADD: lambda k, i, u: k.emit(k.r.render_atomic_add(k.expr[u.src[0]], k.expr[u.src[1]], u.src[1].dtype)),
  Ops.BARRIER: _barrier, Ops.RANGE: _range, Ops.IF: lambda k, i, u: _open(k, f"if ({k.expr[u.src[0]]}) {{"),
  Ops.END: _close, Ops.ENDIF: _close,
  Ops.GROUP: lambda k, i, u: None,                                                                 # groups stores already in order
  Ops.CUSTOM: _custom,
  **{op: _alu for op in (*GroupOp.Elementwise, Ops.BITCAST)},
}
