"""The renderer: a LINEAR program (see docs/pipeline.md in the tinyspec repository) becomes one C99 function.

    void E_4(float* data0, float* data1) {            <- one pointer per buffer PARAM, in slot order
      for (int64_t ridx2 = 0; ridx2 < 4; ridx2++) {   <- RANGE ... END is a for loop
        float v4 = data1[ridx2];                      <- LOAD(INDEX(PARAM 1, RANGE))
        float v5 = (float)(v4 * v4);                  <- MUL
        data0[ridx2] = v5;                            <- STORE
      }
    }

Every instruction that computes something becomes a local variable named after its position in the program, so the C
lines can be read side by side with the `DEBUG=3` listing. CONST, INDEX and AFTER compute nothing and are written into
their users instead. Where C's own meaning differs from tinyspec's (division, shifts, float-to-int casts), PRELUDE holds a
few small helpers that give tinyspec's.

This module imports no compiler and touches nothing on the machine: kernels can be rendered anywhere.
"""
from __future__ import annotations

import math

from tinyspec.dtype import AddrSpace, DType, dtypes
from tinyspec.renderer import Renderer
from tinyspec.uop import Ops, UOp

# C's name for each dtype; index (the dtype of loop counters and addresses) is 64-bit. bfloat16 has no C type: unsupported.
CTYPES: dict[DType, str] = {
  dtypes.bool: "_Bool", dtypes.int8: "int8_t", dtypes.uint8: "uint8_t", dtypes.int16: "int16_t", dtypes.uint16: "uint16_t",
  dtypes.int32: "int32_t", dtypes.uint32: "uint32_t", dtypes.int64: "int64_t", dtypes.uint64: "uint64_t", dtypes.index: "int64_t",
  dtypes.float16: "_Float16", dtypes.float32: "float", dtypes.float64: "double",
}
_UNSIGNED = {"int8_t": "uint8_t", "int16_t": "uint16_t", "int32_t": "uint32_t", "int64_t": "uint64_t"}
_INFIX = {Ops.ADD: "+", Ops.MUL: "*", Ops.XOR: "^", Ops.OR: "|", Ops.AND: "&"}
_LIBM = {Ops.TRUNC: "trunc", Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin"}  # C's math library does these
_LIBM_SUFFIX = {dtypes.float16: "f", dtypes.float32: "f", dtypes.float64: ""}  # sqrtf for half and float, sqrt for double

PRELUDE = r"""#include <math.h>
#include <stdint.h>
/* IDIV and MOD floor like Python's // and %, x//0 and x%0 are 0, and MIN // -1 wraps where C's / would trap */
#define FLOORDIV(T, U) \
  static inline T idiv_##T(T a, T b) { if (b == 0) return 0; if (b == -1) return (T)(0 - (U)a); \
                                       T q = a / b; return q * b != a && (a < 0) != (b < 0) ? q - 1 : q; } \
  static inline T mod_##T(T a, T b) { if (b == 0 || b == -1) return 0; T r = a % b; return r != 0 && (r < 0) != (b < 0) ? r + b : r; }
FLOORDIV(int8_t, uint8_t) FLOORDIV(int16_t, uint16_t) FLOORDIV(int32_t, uint32_t) FLOORDIV(int64_t, uint64_t)
/* float to integer truncates; C leaves NaN, infinities and values out of range undefined, here they give 0 */
static inline int64_t f2i(double x) { return x > -0x1p63 && x < 0x1p63 ? (int64_t)x : x >= 0x1p63 && x < 0x1p64 ? (int64_t)(uint64_t)x : 0; }
"""

def ctype(dt: DType) -> str:
  """The C type of a scalar dtype; NotImplementedError for those this renderer lacks (bfloat16, vectors)."""
  if dt not in CTYPES: raise NotImplementedError(f"the C renderer has no type for {dt!r}")
  return CTYPES[dt]

def literal(value, dt: DType) -> str:
  """A CONST as a C expression of type `dt`. Floats are written as the double Python holds and converted once, as numpy does."""
  if dt is dtypes.bool: return "1" if value else "0"
  if dtypes.is_float(dt):
    if math.isnan(value): return f"(({ctype(dt)})NAN)"
    if math.isinf(value): return f"({'-' if value < 0 else ''}({ctype(dt)})INFINITY)"
    return repr(float(value)) if dt is dtypes.float64 else f"(({ctype(dt)}){float(value)!r})"
  value = int(value)
  if -2**31 < value < 2**31: return str(value)  # fits C's int; C converts it to the other operand's type
  if value == -2**63: return "INT64_MIN"  # its digits alone do not fit int64, so the literal cannot be negated into place
  return f"{value}{'ull' if dtypes.is_unsigned(dt) else 'll'}"

def alu(op: Ops, dt: DType, src_dt: DType, s: list[str]) -> str:
  """The C expression for one elementwise op of dtype `dt` on operands `s` (C expressions) of dtype `src_dt`, with tinyspec's
  semantics. Results are cast back to `dt`, since C computes small integers (and _Float16) in wider types."""
  t, a = ctype(dt), s[0]
  b = s[1] if len(s) > 1 else ""
  if op in _INFIX: return f"({t})({a} {_INFIX[op]} {b})"
  if op is Ops.CMPLT: return f"({a} < {b})"
  if op is Ops.CMPNE: return f"({a} != {b})"
  if op is Ops.MAX: return f"({a} > {b} || {a} != {a} ? {a} : {b})"  # a NaN on either side wins, as in numpy.maximum
  if op is Ops.WHERE: return f"({a} ? {b} : {s[2]})"
  if op in (Ops.IDIV, Ops.MOD):
    if dtypes.is_unsigned(dt): return f"({t})({b} == 0 ? 0 : {a} {'/' if op is Ops.IDIV else '%'} {b})"
    return f"{'idiv' if op is Ops.IDIV else 'mod'}_{t}({a}, {b})"
  if op in (Ops.SHL, Ops.SHR):  # shifting by a negative amount or by the width or more gives 0 (undefined in C)
    shifted = f"({t})(({_UNSIGNED.get(t, t)}){a} << {b})" if op is Ops.SHL else f"({t})({a} >> {b})"  # left shifts in unsigned: no overflow
    return f"({b} >= 0 && {b} < {8 * dt.itemsize} ? {shifted} : 0)"
  if op is Ops.RECIP: return f"(({t})1 / {a})"
  if op in _LIBM: return f"({t}){_LIBM[op]}{_LIBM_SUFFIX[dt]}({a})"
  if op is Ops.CAST:
    if dt is dtypes.bool: return f"({a} != 0)"
    if dtypes.is_float(src_dt) and not dtypes.is_float(dt): return f"({t})f2i({a})"
    return f"({t}){a}"
  if op is Ops.BITCAST:  # reinterpreting bytes through a union is well defined in C99, unlike a pointer cast
    if dt.itemsize != src_dt.itemsize: raise NotImplementedError(f"BITCAST from {src_dt!r} to {dt!r} changes the size")
    return f"((union {{ {ctype(src_dt)} from; {t} to; }}){{ .from = {a} }}).to"
  raise NotImplementedError(f"the C renderer cannot render {op.name}")


class CRenderer(Renderer):
  """Renders kernels as C99 for the host's C compiler. A plain sequential target: no workgroups, no shared memory.

  `native` lists the decomposed ops C's math library does well; every other decomposed op (SUB, DIV, POW ...) reaches
  `render` already rewritten into primitives by the core. `float16=False` (a compiler without _Float16) drops float16 from
  the dtypes this device claims, which the conformance suite reads to skip those tests."""
  device = "CC"
  native = frozenset({Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN})
  dtypes = frozenset(CTYPES) - {dtypes.index}

  def __init__(self, float16: bool = True):
    if not float16: self.dtypes = type(self).dtypes - {dtypes.float16}

  def render(self, name: str, linear: UOp) -> str:
    """The C source of kernel `name`: PRELUDE, then `void name(T0* data0, ..., int64_t var, ...)`."""
    expr: dict[UOp, str] = {}   # each instruction's C expression: its variable, or the expression itself where inlined
    bufs: dict[int, str] = {}   # buffer PARAM slot -> its declaration in the signature
    variables: list[str] = []   # integer variable PARAMs (symbolic sizes), passed by value after the buffers
    body: list[str] = []
    depth = 1
    def emit(line: str): body.append("  " * depth + line)
    def define(i: int, u: UOp, value: str):  # a new variable holding instruction i's value
      expr[u] = f"v{i}"
      emit(f"{ctype(u.dtype)} v{i} = {value};")

    for i, u in enumerate(linear.src):
      op = u.op
      if u.dtype.count != 1: raise NotImplementedError(f"the C renderer has no vector types ({u.dtype!r} at instruction {i})")
      if op is Ops.CONST: expr[u] = literal(u.arg[0], u.dtype)
      elif op is Ops.STACK and u.dtype is dtypes.index: pass  # a shape spelled as a vector of sizes: nothing to run
      elif op is Ops.PARAM and isinstance(u.arg[0], str):  # an integer variable of the kernel, passed by value
        if not u.arg[0].isidentifier(): raise NotImplementedError(f"variable name {u.arg[0]!r} is not a C identifier")
        expr[u] = u.arg[0]
        variables.append(u.arg[0])
      elif op is Ops.PARAM:
        expr[u] = f"data{u.arg[0]}"
        bufs[u.arg[0]] = f"{ctype(u.dtype)}* data{u.arg[0]}"
      elif op is Ops.BUFFER:  # a REG buffer: the accumulator of a reduction, a small local array
        if u.arg[3] is not AddrSpace.REG: raise NotImplementedError(f"the C renderer has no {u.arg[3].name} memory")
        expr[u] = f"reg{u.arg[0]}"
        emit(f"{ctype(u.dtype)} reg{u.arg[0]}[{u.shape[0] if u.shape else 1}];")
      elif op is Ops.AFTER: expr[u] = expr[u.src[0]]  # ordering only: C runs statements in the order written
      elif op is Ops.INDEX:
        if len(u.src) != 2: raise NotImplementedError(f"INDEX with {len(u.src) - 1} indices (the pipeline makes flat ones)")
        expr[u] = f"{expr[u.src[0]]}[{expr[u.src[1]]}]"
      elif op is Ops.LOAD:  # a gated load reads memory only where the gate holds, and is alt elsewhere
        define(i, u, expr[u.src[0]] if len(u.src) == 1 else f"({expr[u.src[2]]} ? {expr[u.src[0]]} : {expr[u.src[1]]})")
      elif op is Ops.STORE: emit(("" if len(u.src) == 2 else f"if ({expr[u.src[2]]}) ") + f"{expr[u.src[0]]} = {expr[u.src[1]]};")
      elif op is Ops.RANGE:
        expr[u] = v = f"ridx{i}"
        emit(f"for (int64_t {v} = 0; {v} < {expr[u.src[0]]}; {v}++) {{")
        depth += 1
      elif op is Ops.IF:
        emit(f"if ({expr[u.src[0]]}) {{")
        depth += 1
      elif op in (Ops.END, Ops.ENDIF):
        depth -= 1
        emit("}")
      elif op is Ops.GROUP: pass  # groups stores that are already in order
      elif self.supports(op) or op is Ops.BITCAST: define(i, u, alu(op, u.dtype, u.src[0].dtype, [expr[s] for s in u.src]))  # primitives and `native`
      else: raise NotImplementedError(f"the C renderer cannot render {op.name} (instruction {i} of {name})")
    params = [bufs[k] for k in sorted(bufs)] + [f"int64_t {v}" for v in sorted(variables)]  # vals come in name order
    return f"{PRELUDE}\nvoid {name}({', '.join(params) or 'void'}) {{\n" + "\n".join(body) + "\n}\n"
