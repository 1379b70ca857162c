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
from dataclasses import dataclass

import numpy as np

from tinyspec.dtype import FLOATS, SINTS, AddrSpace, DType, bf16_round, dtypes
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import Ops
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
  `render_kernel`, and `render_alu` for an op whose C form differs.
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

  def render_kernel(self, k: CKernel) -> str:
    """The whole source: prelude, then `kernel_prefix void name(params) { decls body }`."""
    lines = [f"  {d}" for d in k.decls] + k.body
    return f"{self.render_prelude(k)}\n{self.kernel_prefix}void {k.name}({', '.join(k.params) or 'void'}) {{\n" + "\n".join(lines) + "\n}\n"

  # *** the program ***

  def render(self, name: str, linear: UOp) -> str:
    """The source of kernel `name` (see the module docstring for its shape)."""
    expr: dict[UOp, str] = {}   # each instruction's expression: its variable, or the expression itself where inlined
    bufs: dict[int, DType] = {}
    variables: list[str] = []
    decls: list[str] = []
    body: list[str] = []
    used: set[DType] = set()
    local_size = [1, 1, 1]
    depth = 1
    written = {b.arg[0] for u in linear.src if u.op in (Ops.STORE, Ops.ATOMICADD) and (b := buffer_of(u.src[0])).op is Ops.PARAM}
    def emit(line: str): body.append("  " * depth + line)
    def access(idx: UOp) -> tuple[str, str, AddrSpace]:  # (buffer, index, memory) of the element an INDEX (maybe under AFTERs) names
      while idx.op is Ops.AFTER: idx = idx.src[0]
      if idx.op is not Ops.INDEX or len(idx.src) != 2: raise NotImplementedError(f"{type(self).__name__}: memory access through {idx.op.name}")
      b, (at, _) = buffer_of(idx), vector_index(idx.src[1]) or (idx.src[1], 1)  # a vector's address is its first element's
      return expr[idx.src[0]], expr[at], AddrSpace.GLOBAL if b.op is Ops.PARAM else b.arg[3]
    def define(i: int, u: UOp, value: str):  # a new variable holding instruction i's value
      expr[u] = f"v{i}"
      emit(f"{self.render_dtype(self._vdtype(u))} v{i} = {value};")

    for i, u in enumerate(linear.src):
      op = u.op
      if u.dtype not in (dtypes.void, dtypes.index): used.add(u.dtype.scalar())
      if op is Ops.CONST: expr[u] = self.render_const(u.arg[0], u.dtype)
      elif u.dtype is dtypes.index and u.shape: pass  # a shape, or a vector's address (its lanes): nothing to run
      elif op is Ops.STACK: define(i, u, self.render_vectorize([expr[s] for s in u.src], u.dtype.vec(len(u.src))))
      elif op is Ops.PARAM and isinstance(u.arg[0], str):  # an integer variable of the kernel, passed by value
        if not u.arg[0].isidentifier(): raise NotImplementedError(f"variable name {u.arg[0]!r} is not a C identifier")
        expr[u] = u.arg[0]
        variables.append(u.arg[0])
      elif op is Ops.PARAM:
        expr[u] = f"data{u.arg[0]}"
        bufs[u.arg[0]] = u.dtype
      elif op is Ops.BUFFER:  # REG: an accumulator or small per-thread array; LOCAL: memory shared by a workgroup
        space = u.arg[3]
        if space not in (AddrSpace.REG, AddrSpace.LOCAL) or (space is AddrSpace.LOCAL and not self.has_shared):
          raise NotImplementedError(f"{type(self).__name__} has no {space.name} memory")
        expr[u] = v = f"{'reg' if space is AddrSpace.REG else 'local'}{u.arg[0]}"
        decls.append(f"{self.local_prefix if space is AddrSpace.LOCAL else ''}{self.render_dtype(u.dtype)} {v}[{u.shape[0] if u.shape else 1}];")
      elif op is Ops.SPECIAL:
        expr[u] = u.arg
        emit(f"{self.render_dtype(dtypes.index)} {u.arg} = {self.render_special(u.arg)}; /* {expr[u.src[0]]} */")
        if u.arg.startswith("lidx") and u.size is not None: local_size[int(u.arg[4:])] = u.size
      elif op is Ops.AFTER: expr[u] = expr[u.src[0]]  # ordering only: statements run in the order written
      elif op is Ops.INDEX and reads_lane(u): expr[u] = self.render_lane(expr[u.src[0]], u.src[1].arg[0], u.src[0].shape[0])
      elif op is Ops.INDEX:
        if len(u.src) != 2: raise NotImplementedError(f"INDEX with {len(u.src) - 1} indices (the pipeline makes flat ones)")
        if not u.src[1].shape: expr[u] = f"{expr[u.src[0]]}[{expr[u.src[1]]}]"  # (a vector's address is only read by access)
      elif op is Ops.LOAD and u.shape: define(i, u, self.render_vector_load(*access(u.src[0]), self._vdtype(u)))  # never gated
      elif op is Ops.LOAD:  # a gated load reads memory only where the gate holds, and is alt elsewhere
        val = self.render_load(*access(u.src[0]), u.dtype)
        define(i, u, val if len(u.src) == 1 else f"({expr[u.src[2]]} ? {val} : {expr[u.src[1]]})")
      elif op is Ops.STORE and u.src[1].shape: emit(self.render_vector_store(*access(u.src[0]), expr[u.src[1]], self._vdtype(u.src[1])))
      elif op is Ops.STORE:
        emit(("" if len(u.src) == 2 else f"if ({expr[u.src[2]]}) ") + self.render_store(*access(u.src[0]), expr[u.src[1]], u.src[1].dtype))
      elif op is Ops.ATOMICADD: emit(self.render_atomic_add(expr[u.src[0]], expr[u.src[1]], u.src[1].dtype))
      elif op is Ops.BARRIER:
        if not self.barrier: raise NotImplementedError(f"{type(self).__name__} has no barrier")
        emit(self.barrier)
      elif op is Ops.RANGE:
        expr[u] = v = f"ridx{i}"
        emit(f"for ({self.render_dtype(dtypes.index)} {v} = 0; {v} < {expr[u.src[0]]}; {v}++) {{")
        depth += 1
      elif op is Ops.IF:
        emit(f"if ({expr[u.src[0]]}) {{")
        depth += 1
      elif op in (Ops.END, Ops.ENDIF):
        depth -= 1
        emit("}")
      elif op is Ops.GROUP: pass  # groups stores that are already in order
      elif op is Ops.CUSTOM:  # arg is a format string over the sources' expressions: a statement, or a value if typed
        text = u.arg.format(*(expr[s] for s in u.src))
        if u.dtype is dtypes.void: emit(text)
        else: define(i, u, text)
      elif self.supports(op) or op is Ops.BITCAST:  # primitives and `native`
        define(i, u, self.render_alu(op, self._vdtype(u), u.src[0].dtype, [expr[s] for s in u.src]))
      else: raise NotImplementedError(f"{type(self).__name__} cannot render {op.name} (instruction {i} of {name})")
    params = self.render_params([(k, bufs[k], k in written) for k in sorted(bufs)], sorted(variables))  # vals come in name order
    return self.render_kernel(CKernel(name, params, decls, body, used, (local_size[0], local_size[1], local_size[2])))

  def _vdtype(self, u: UOp) -> DType:
    # a STACK of values (and ops on one) is a vector of its length; everything else has the dtype's own type
    n = u.shape[0] if len(u.shape) == 1 and u.op not in (Ops.PARAM, Ops.BUFFER) else 1
    return u.dtype if n == 1 or u.dtype.count > 1 else u.dtype.vec(n)

