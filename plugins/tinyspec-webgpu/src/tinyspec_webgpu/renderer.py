"""WGSL from LINEAR programs: `WGSLRenderer`, one compute shader per kernel. Text only: renders anywhere, no wgpu import.

    @group(0) @binding(0) var<storage, read_write> data0: array<f32>;   <- one binding per buffer PARAM, in slot order
    @group(0) @binding(1) var<storage, read> data1: array<f32>;         <- read-only where the kernel never stores to it
    @compute @workgroup_size(16, 1, 1)
    fn E_64(@builtin(workgroup_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
      let gidx0: i32 = i32(gid.x); // 4                                  <- SPECIAL gidx: the workgroup, lidx: the lane in it
      let lidx0: i32 = i32(lid.x); // 16
      let v4: i32 = ((gidx0 * 16i) + lidx0);
      let v5: f32 = data1[v4];
      let v6: f32 = (v5 * v5);
      data0[v4] = v6;
    }

WGSL is no C dialect: declarations are `let name: type = value;`, there is no ternary (`select(else, then, cond)`), no
implicit conversion between types, no pointer casts, and workgroup memory is declared at module scope (`var<workgroup>`).
So this renderer is a `Renderer` of its own, with its own op tables (`_RENDER` for instructions, `_ALU` for arithmetic),
not a `CStyleRenderer` subclass.

What WGSL lacks and how it is made up for:
- 8- and 16-bit integers and bool have no storage type: such a buffer is an array of u32 words, each holding four bytes
  (or two halves) in little-endian order, as the host wrote them. A load extracts its byte; a store replaces it with an
  atomicAnd that clears it and an atomicOr that sets it (a written buffer of these types is `array<atomic<u32>>`), so
  lanes writing neighbouring bytes of one word never lose each other's writes. In registers they are i32/u32 values,
  wrapped back to their width after every op.
- 64-bit types need native-only extensions (wgpu's shader-int64/shader-f64) that no browser has. int64 and uint64 are
  emulated in pairs of u32 words (`int64.py`), so exported kernels run anywhere WebGPU does; float64 is not supported.
  Indices (dtypes.index) are i32: a storage buffer is bound at most 2 GiB.
- Integer variables (symbolic sizes) are fields of a uniform struct bound after the buffers.
- float16 is WGSL's f16 where the adapter offers the `shader-f16` feature (`enable f16;` in kernels that use it).
"""
from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable

import numpy as np
from tinyspec.dtype import AddrSpace, DType, dtypes
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import GroupOp, Ops
from tinyspec.uop.spec import buffer_of, reads_lane
from tinyspec.uop.uop import UOp

from tinyspec_webgpu import int64

# the WGSL type a value of each dtype lives in, in registers and workgroup memory
REGISTER: dict[DType, str] = {
  dtypes.bool: "bool", dtypes.int8: "i32", dtypes.int16: "i32", dtypes.int32: "i32", dtypes.index: "i32",
  dtypes.uint8: "u32", dtypes.uint16: "u32", dtypes.uint32: "u32", dtypes.float16: "f16", dtypes.float32: "f32",
  dtypes.int64: int64.TYPE, dtypes.uint64: int64.TYPE,
}
# dtypes whose storage buffers are u32 words holding 32 // bits elements: bits per element
PACKED: dict[DType, int] = {dtypes.bool: 8, dtypes.int8: 8, dtypes.uint8: 8, dtypes.int16: 16, dtypes.uint16: 16}
NARROW_INTS = frozenset({dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16})

# the WGSL reserved words a variable name may not be (those a symbolic size is plausibly called)
_RESERVED = frozenset("alias break case const continue default diagnostic discard else enable false fn for if let loop override return "
                      "struct switch true var while array atomic bool f16 f32 i32 mat2x2 ptr sampler u32 vec2 vec3 vec4".split())

def _wrap(x: str, dt: DType) -> str:
  """An i32/u32 expression brought back to `dt`'s width: sign-extended from its low bits, or masked to them."""
  if dt not in NARROW_INTS: return x
  bits = 8 * dt.itemsize
  return f"(({x} << {32 - bits}u) >> {32 - bits}u)" if dtypes.is_int(dt) and not dtypes.is_unsigned(dt) else f"({x} & {hex(2**bits - 1)}u)"

def _is_float(dt: DType) -> bool: return dtypes.is_float(dt)

def _bits(value: float, dt: DType) -> str:
  """A float constant by its bits: nan, infinities, -0.0 and subnormals, which decimal literals cannot all say exactly."""
  if dt is dtypes.float32: return f"bitcast<f32>({struct.unpack('<I', struct.pack('<f', value))[0]:#010x}u)"
  return f"f16({_bits(value, dtypes.float32)})"  # f32 to f16 is exact for f16's own values

def render_const(value, dt: DType) -> str:
  """A CONST as a WGSL expression of `dt`'s register type, typed by its suffix (WGSL converts no concrete type)."""
  if dt is dtypes.bool: return "true" if value else "false"
  if _is_float(dt):
    with np.errstate(over="ignore"): exact = float(np.float32(value) if dt is dtypes.float32 else np.float16(value))
    tiny = np.finfo(np.float32 if dt is dtypes.float32 else np.float16).tiny
    if not math.isfinite(exact) or exact == 0 and math.copysign(1, exact) < 0 or 0 < abs(exact) < tiny: return _bits(exact, dt)
    text = str(np.float32(exact) if dt is dtypes.float32 else np.float16(exact))
    text = f"{text}{'f' if dt is dtypes.float32 else 'h'}"
    return f"({text})" if exact < 0 else text
  if dt in int64.WIDE: return int64.const(value)
  value = int(value)
  if REGISTER[dt] == "u32": return f"{value & 0xFFFFFFFF}u"
  if value == -2**31: return "(-2147483647i - 1i)"  # 2147483648i does not fit i32, so it cannot be negated
  return f"({value}i)" if value < 0 else f"{value}i"

# ---- elementwise ops: (renderer, result dtype, operand dtype, operand expressions) -> expression ----

def _low_word(word: str, dt: DType) -> str:
  """A u32 holding the low bits of an integer, as `dt` (32 bits or narrower)."""
  return _wrap(word if REGISTER[dt] == "u32" else f"bitcast<i32>({word})", dt)

def _cast(dt: DType, src: DType, a: str) -> str:
  if dt is dtypes.bool:
    if src is dtypes.bool: return a
    if src in int64.WIDE: return f"any({a} != {int64.ZERO})"
    return f"(!({a} == {render_const(0, src)}))" if _is_float(src) else f"({a} != {render_const(0, src)})"  # nan is true: see _compare
  if src is dtypes.bool and _is_float(dt):  # 0.0 through the opaque zero: a false the compiler proves (x < x) must not make 0 * inf 0
    f32 = f"select(bitcast<f32>({OPAQUE_ZERO}), 1.0f, {a})"
    return f32 if dt is dtypes.float32 else f"f16({f32})"
  if src is dtypes.bool: return int64.widen(a, "bool") if dt in int64.WIDE else f"{REGISTER[dt]}({a})"
  if _is_float(dt):
    if src in int64.WIDE: return int64.to_float(a, src, dt)
    return f"{REGISTER[dt]}({a})" if _is_float(src) or dt is dtypes.float32 else f"f16(f32({a}))"  # ints via f32: rounds once
  if _is_float(src):  # float_to_int: truncated to int64 (or uint64) and wrapped to dt; nan and out-of-range values give 0
    wide = f"f2i64(f32({a}))" if src is dtypes.float16 else f"f2i64({a})"
    return wide if dt in int64.WIDE else _low_word(f"{wide}.x", dt)
  if dt in int64.WIDE: return a if src in int64.WIDE else int64.widen(a, REGISTER[src])
  if src in int64.WIDE: return _low_word(f"{a}.x", dt)
  return _wrap(a if REGISTER[dt] == REGISTER[src] else f"bitcast<{REGISTER[dt]}>({a})", dt)  # two's complement: the bits stay

def _bitcast(dt: DType, src: DType, a: str) -> str:
  if dt.itemsize != src.itemsize: raise NotImplementedError(f"BITCAST from {src!r} to {dt!r} changes the size")
  # 16-bit floats' bits through (un)pack2x16float, which convert f16 and f32 exactly (naga mistypes bitcast<vec2<f16>>)
  if dt is dtypes.float16: return f"f16(unpack2x16float(bitcast<u32>({a}) & 0xffffu).x)"
  if src is dtypes.float16: return _wrap(f"bitcast<{REGISTER[dt]}>(pack2x16float(vec2<f32>(f32({a}), 0.0f)) & 0xffffu)", dt)
  if dt is dtypes.bool or src is dtypes.bool: return _cast(dt, src, a)  # bool's one byte is 0 or 1 either way
  return _cast(dt, src, a) if not (_is_float(dt) or _is_float(src)) else f"bitcast<{REGISTER[dt]}>({a})"

def _infix(op: str, bool_op: str | None = None) -> Callable[[DType, DType, list[str]], str]:
  def render(dt: DType, src: DType, s: list[str]) -> str:
    if src is dtypes.bool:
      if bool_op is None: raise NotImplementedError(f"WGSL has no {op!r} on bool")
      return f"({s[0]} {bool_op} {s[1]})"
    return _wrap(f"({s[0]} {op} {s[1]})", dt)
  return render

def _compare(op: str) -> Callable[[DType, DType, list[str]], str]:
  def render(dt: DType, src: DType, s: list[str]) -> str:
    if src is dtypes.bool and op not in ("==", "!="): return f"(u32({s[0]}) {op} u32({s[1]}))"  # WGSL orders no bools: false < true
    # float != as not-equal: naga's != is an ordered comparison (false where either side is NaN; lavapipe agrees), IEEE's is true
    if op == "!=" and _is_float(src): return f"(!({s[0]} == {s[1]}))"
    return f"({s[0]} {op} {s[1]})"
  return render

def _shift(op: str) -> Callable[[DType, DType, list[str]], str]:
  # shifting by a negative amount or by the width or more gives 0 (WGSL takes the amount modulo 32)
  def render(dt: DType, src: DType, s: list[str]) -> str:
    a, b, width = s[0], s[1], 8 * dt.itemsize
    shifted = _wrap(f"({a} {op} u32({b}))", dt)
    return f"select({render_const(0, dt)}, {shifted}, {b} >= {render_const(0, src)} && {b} < {render_const(width, src)})"
  return render

def _divmod(name: str, op: str) -> Callable[[DType, DType, list[str]], str]:
  # floor division and modulo, x // 0 == x % 0 == 0: helpers for i32; u32's own operators floor already
  def render(dt: DType, src: DType, s: list[str]) -> str:
    if REGISTER[dt] == "u32": return f"select(({s[0]} {op} {s[1]}), 0u, {s[1]} == 0u)"
    return _wrap(f"{name}({s[0]}, {s[1]})", dt)
  return render

def _neg(dt: DType, src: DType, s: list[str]) -> str:
  if dt is dtypes.bool: return f"(!{s[0]})"
  return _wrap(f"({render_const(0, dt)} - {s[0]})", dt) if REGISTER[dt] == "u32" else _wrap(f"(-{s[0]})", dt)

_ALU: dict[Ops, Callable[[DType, DType, list[str]], str]] = {
  Ops.ADD: _infix("+", "|"), Ops.SUB: _infix("-"), Ops.MUL: _infix("*", "&"), Ops.DIV: _infix("/"),
  Ops.XOR: _infix("^", "!="), Ops.OR: _infix("|", "|"), Ops.AND: _infix("&", "&"),
  Ops.CMPLT: _compare("<"), Ops.CMPGT: _compare(">"), Ops.CMPLE: _compare("<="), Ops.CMPGE: _compare(">="),
  Ops.CMPNE: _compare("!="), Ops.CMPEQ: _compare("=="),
  Ops.NEG: _neg, Ops.NOT: lambda dt, src, s: f"(!{s[0]})" if src is dtypes.bool else f"({s[0]} != {render_const(1, src)})",
  # a NaN on either side wins, as in numpy.maximum; bools have no order, their maximum is `or`
  Ops.MAX: lambda dt, src, s: f"({s[0]} | {s[1]})" if dt is dtypes.bool else f"select({s[1]}, {s[0]}, {s[0]} > {s[1]} || !({s[0]} == {s[0]}))",
  Ops.WHERE: lambda dt, src, s: f"select({s[2]}, {s[1]}, {s[0]})",
  Ops.IDIV: _divmod("idiv", "/"), Ops.MOD: _divmod("imod", "%"), Ops.SHL: _shift("<<"), Ops.SHR: _shift(">>"),
  Ops.RECIP: lambda dt, src, s: f"({render_const(1, dt)} / {s[0]})",
  Ops.TRUNC: lambda dt, src, s: f"trunc({s[0]})", Ops.SQRT: lambda dt, src, s: f"sqrt({s[0]})",
  Ops.CAST: lambda dt, src, s: _cast(dt, src, s[0]), Ops.BITCAST: lambda dt, src, s: _bitcast(dt, src, s[0]),
}

# helpers a kernel may call, by name; the module holds those its body mentions (and those they call)
HELPERS: dict[str, str] = {**int64.HELPERS,
  "idiv": "fn idiv(a: i32, b: i32) -> i32 { if (b == 0i) { return 0i; } let q = a / b;\n"  # WGSL's MIN / -1 is MIN: wrapped, as ours
          "  return select(q, q - 1i, q * b != a && (a < 0i) != (b < 0i)); }",
  "imod": "fn imod(a: i32, b: i32) -> i32 { if (b == 0i || b == -1i) { return 0i; } let r = a % b;\n"
          "  return select(r, r + b, r != 0i && (r < 0i) != (b < 0i)); }",
}

def dispatch_grid(grid: tuple[int, ...], dispatch_max: int) -> tuple[int, int, int]:
  """The workgroups to dispatch for a kernel's grid (gidx sizes): the grid itself, or where its first dimension passes
  `dispatch_max`, (dispatch_max, g1, g2 * ceil(g0 / dispatch_max)): the kernel then reads gidx0 and gidx2 out of x and z
  (see `_special`), and the workgroups past g0 return at once."""
  g0, g1, g2 = (*grid, 1, 1, 1)[:3]
  if g0 <= dispatch_max: return g0, g1, g2
  if (z := g2 * -(-g0 // dispatch_max)) > dispatch_max:
    raise ValueError(f"a grid of {grid} workgroups cannot be dispatched within {dispatch_max} per dimension (maxComputeWorkgroupsPerDimension)")
  return dispatch_max, g1, z

def _called(text: str) -> list[str]:
  """The helpers `text` calls, and those they call, in HELPERS' order."""
  found, todo = set(), set(re.findall(r"\b(\w+)\(", text)) & set(HELPERS)
  while todo:
    found |= todo
    todo = {n for h in todo for n in re.findall(r"\b(\w+)\(", HELPERS[h]) if n in HELPERS} - found
  return [h for h in HELPERS if h in found]

class WGSLRenderer(Renderer):
  """Renders kernels as WGSL compute shaders. The class attributes are WebGPU's default limits, which every adapter
  (a browser's too) offers; the runtime builds an instance with the limits the opened device was granted.

  `native`: WGSL's sqrt and division (correctly rounded on Vulkan's lavapipe; WebGPU allows 2.5 ulp for division) and
  the comparisons. exp2, log2 and sin are left to the core's polynomials: WGSL allows sin an absolute error of 2**-11."""
  device = "WEBGPU"
  native = frozenset({Ops.SUB, Ops.NEG, Ops.DIV, Ops.CMPGT, Ops.CMPGE, Ops.CMPLE, Ops.CMPEQ, Ops.NOT, Ops.SQRT})
  has_local, has_shared = True, True
  dispatch_max = 65535
  """maxComputeWorkgroupsPerDimension. A grid wider than this in its first dimension is folded into the third (`dispatch_grid`)."""
  global_max = (2**31 - 1, dispatch_max, dispatch_max)
  local_max = (256, 256, 64)          # maxComputeWorkgroupSizeX/Y/Z; their product within maxComputeInvocationsPerWorkgroup (256)
  shared_max = 16384                  # maxComputeWorkgroupStorageSize
  max_invocations = 256
  """maxComputeInvocationsPerWorkgroup: a kernel whose workgroup has more lanes is refused when rendered."""
  max_buffers = 8
  """maxStorageBuffersPerShaderStage: the most buffers one kernel may bind; more are refused when rendered."""
  max_loop_iterations: int | None = None
  """The most loop iterations one lane may run, all loops of the kernel together; None: no limit. Mesa 22's llvmpipe
  (lavapipe) counts every loop's back edges against one counter per lane and silently stops looping at 65535: longer
  loops are unrolled (`unroll_for`) so that they stay within it."""
  supported_dtypes = frozenset(REGISTER) - {dtypes.index, dtypes.float16}
  f16: bool = False
  """Whether the adapter offers `shader-f16`: float16 is then supported, as WGSL's f16."""

  def __init__(self, f16: bool = False, local_max: tuple[int, ...] | None = None, max_invocations: int | None = None,
               shared_max: int | None = None, dispatch_max: int | None = None, max_buffers: int | None = None,
               max_loop_iterations: int | None = None):
    if f16: self.f16, self.supported_dtypes = True, type(self).supported_dtypes | {dtypes.float16}
    if local_max is not None: self.local_max = tuple(local_max)
    if max_invocations is not None: self.max_invocations = max_invocations
    if shared_max is not None: self.shared_max = shared_max
    if dispatch_max is not None: self.dispatch_max, self.global_max = dispatch_max, (2**31 - 1, dispatch_max, dispatch_max)
    if max_buffers is not None: self.max_buffers = max_buffers
    self.max_loop_iterations = max_loop_iterations

  def unroll_for(self, trips: int, around: int, spent: int) -> int:
    """How many copies of its body a loop of `trips` iterations gets per iteration (1: a plain loop), run `around` times
    by the loops it is in, after `spent` iterations of the kernel's earlier loops: within `max_loop_iterations`."""
    if (limit := self.max_loop_iterations) is None or spent + around * trips <= limit: return 1
    if (unroll := next((u for u in (2**j for j in range(1, 11)) if spent + around * (trips // u + u) <= limit), None)) is None:
      raise NotImplementedError(f"a kernel of {spent + around * trips} loop iterations per lane: device {self.device} runs at most {limit} "
                                "(Mesa's llvmpipe loop limiter), more than unrolling by 1024 saves")
    return unroll
  def storage_type(self, dt: DType, written: bool) -> str:
    """The element type of a storage buffer of `dt`: packed types as u32 words (atomic where the kernel writes them)."""
    if dt in PACKED: return "atomic<u32>" if written else "u32"
    if dt not in self.supported_dtypes: raise NotImplementedError(f"{type(self).__name__} has no storage type for {dt!r} (device {self.device})")
    return REGISTER[dt]

  def render_load(self, buf: str, idx: str, space: AddrSpace, dt: DType, atomic: bool) -> str:
    """The expression reading element `idx` of `buf`: a byte or half of a packed buffer's word extracted and widened."""
    if space is not AddrSpace.GLOBAL or dt not in PACKED: return f"{buf}[{idx}]"
    bits = PACKED[dt]
    word = f"{buf}[{idx} >> {6 - bits.bit_length()}u]"  # 8 bits: idx >> 2, 16 bits: idx >> 1
    word = f"atomicLoad(&{word})" if atomic else word
    raw = f"(({word} >> u32(({idx} & {32 // bits - 1}i) * {bits}i)) & {hex(2**bits - 1)}u)"
    if dt is dtypes.bool: return f"({raw} != 0u)"
    return _wrap(f"bitcast<i32>({raw})", dt) if REGISTER[dt] == "i32" else raw

  def render_store(self, buf: str, idx: str, space: AddrSpace, val: str, dt: DType) -> str:
    """The statement writing `val` to element `idx` of `buf`: a packed buffer's element replaced in its word atomically."""
    if space is not AddrSpace.GLOBAL or dt not in PACKED: return f"{buf}[{idx}] = {val};"
    bits = PACKED[dt]
    word, mask, shift = f"&{buf}[{idx} >> {6 - bits.bit_length()}u]", hex(2**bits - 1), f"u32(({idx} & {32 // bits - 1}i) * {bits}i)"
    value = f"u32({val})" if dt is dtypes.bool else f"(bitcast<u32>({val}) & {mask}u)"
    return f"atomicAnd({word}, ~({mask}u << {shift})); atomicOr({word}, {value} << {shift});"

  def render_alu(self, op: Ops, dt: DType, src: DType, s: list[str]) -> str:
    """One elementwise op of result dtype `dt` on operand expressions `s` of dtype `src`, with tinyspec's semantics."""
    if (rule := _ALU.get(op)) is None or not (self.supports(op) or op is Ops.BITCAST):
      raise NotImplementedError(f"{type(self).__name__} cannot render {op.name} (device {self.device})")
    if src in int64.WIDE and op not in (Ops.CAST, Ops.BITCAST): return int64.alu(op, dt, src, s)
    if src is dtypes.float16 and op not in (Ops.CAST, Ops.BITCAST):
      # lavapipe assumes f16 math never meets an infinity or nan (it folds x - x to 0, drops max's nan test), and not f32
      # math: so in f32, whose one rounding to f16 at the end gives f16's own result for each of these ops
      out = rule(dtypes.float32 if dt is dtypes.float16 else dt, dtypes.float32, [f"f32({x})" for x in s])
      return f"f16({out})" if dt is dtypes.float16 else out
    return rule(dt, src, s)

  def render(self, name: str, linear: UOp) -> str:
    k = _Kernel(self, name, linear)
    for i, u in enumerate(linear.src):
      if u.dtype not in (dtypes.void, dtypes.index): k.used.add(u.dtype.scalar())
      if u.dtype is dtypes.index and u.shape: continue  # a shape: nothing to run
      if (fn := _RENDER.get(u.op)) is None: raise NotImplementedError(f"{type(self).__name__} cannot render {u.op.name} (instruction {i} of {name})")
      fn(k, i, u)
    return k.source()

class _Kernel:
  """The state of rendering one kernel: each instruction's expression, the bindings and declarations found so far, and
  the body's lines at the current depth of blocks."""
  def __init__(self, r: WGSLRenderer, name: str, linear: UOp):
    self.r, self.name = r, name
    self.expr: dict[UOp, str] = {}
    self.bufs: dict[int, DType] = {}
    self.variables: list[str] = []
    self.shared: list[str] = []
    self.regs: list[str] = []
    self.body: list[str] = []
    self.used: set[DType] = set()
    self.local_size = [1, 1, 1]
    self.grid = {u.arg: u.size for u in linear.src if u.op is Ops.SPECIAL and u.arg.startswith("gidx")}
    self.folded = self.grid.get("gidx0", 1) > r.dispatch_max  # see dispatch_grid
    self.depth = 1
    self.loops: list[tuple[str, int | None, int, int]] = []
    """The RANGEs open: (variable, trips where constant, copies of the body per iteration, where its body starts)."""
    self.spent = 0  # loop iterations per lane counted so far (only where max_loop_iterations matters)
    self.written = {b.arg[0] for u in linear.src if u.op is Ops.STORE and (b := buffer_of(u.src[0])).op is Ops.PARAM}

  def emit(self, line: str) -> None: self.body.append("  " * self.depth + line)

  def define(self, i: int, u: UOp, value: str) -> None:
    self.expr[u] = f"v{i}"
    self.emit(f"let v{i}: {REGISTER[u.dtype]} = {value};")

  def access(self, idx: UOp) -> tuple[str, str, AddrSpace, bool]:
    """(buffer, index, memory, whether the buffer is atomic) of the element an INDEX (maybe under AFTERs) names."""
    while idx.op is Ops.AFTER: idx = idx.src[0]
    if idx.op is not Ops.INDEX or len(idx.src) != 2 or idx.src[1].shape:
      raise NotImplementedError(f"{type(self.r).__name__}: memory access through {idx.op.name} (vectors are not declared)")
    b = buffer_of(idx)
    space = AddrSpace.GLOBAL if b.op is Ops.PARAM else b.arg[3]
    return self.expr[idx.src[0]], self.expr[idx.src[1]], space, space is AddrSpace.GLOBAL and b.arg[0] in self.written and b.dtype in PACKED

  def folded_gidx0(self) -> str:
    """gidx0 of a folded grid (dispatch_grid): x, plus the dispatch's width for each step of z past the grid's third dimension."""
    return f"(gid.x + (gid.z / {self.grid.get('gidx2', 1)}u) * {self.r.dispatch_max}u)"

  def source(self) -> str:
    r, slots = self.r, sorted(self.bufs)
    if len(slots) > r.max_buffers:
      raise NotImplementedError(f"kernel {self.name} binds {len(slots)} buffers; device {r.device} allows {r.max_buffers} per shader stage "
                                "(maxStorageBuffersPerShaderStage)")
    if (lanes := math.prod(self.local_size)) > r.max_invocations:
      raise NotImplementedError(f"kernel {self.name} has workgroups of {lanes} lanes {tuple(self.local_size)}; device {r.device} allows "
                                f"{r.max_invocations} (maxComputeInvocationsPerWorkgroup)")
    head = ["enable f16;"] if dtypes.float16 in self.used else []
    for binding, slot in enumerate(slots):
      access = "read_write" if slot in self.written else "read"
      head.append(f"@group(0) @binding({binding}) var<storage, {access}> data{slot}: array<{r.storage_type(self.bufs[slot], slot in self.written)}>;")
    if self.variables:
      fields = " ".join(f"{v}: i32," for v in sorted(self.variables))  # vals come in name order
      head += [f"struct Variables {{ {fields} }}", f"@group(0) @binding({len(slots)}) var<uniform> variables: Variables;"]
    head += self.shared
    head += [HELPERS[h] for h in _called("\n".join(self.body))]
    x, y, z = self.local_size
    args = "@builtin(workgroup_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>"
    # a folded grid's dispatch is rounded up: the workgroups past it return at once
    guard = [f"  if ({self.folded_gidx0()} >= {self.grid['gidx0']}u) {{ return; }}"] if self.folded else []
    if any(OPAQUE_ZERO in line for line in self.body): guard.append(f"  let {OPAQUE_ZERO}: u32 = gid.x & 0x80000000u;")
    lines = [f"@compute @workgroup_size({x}, {y}, {z})", f"fn {self.name}({args}) {{", *guard, *(f"  {d}" for d in self.regs), *self.body, "}"]
    return "\n".join(head + lines) + "\n"

# ---- the instruction table: one function per op, each writing its instruction into the kernel ----

# WGSL lets a compiler assume no infinity or nan is ever computed, and lavapipe's does where it sees a constant: 0.0 * x
# becomes 0.0 and an empty sum's 0.0 times 1/0 (a mean over nothing) 0.0, not nan; x + x * -1.0 (x - x) becomes 0.0, not
# nan for an infinite x. Zero, -1, infinities and nan are therefore written through a zero it cannot see: the top bit of
# the workgroup id, always clear (at most 65535 of them).
OPAQUE_ZERO = "opaque_zero"

def _const(k: _Kernel, i: int, u: UOp) -> None:
  value, dt = u.arg[0], u.dtype
  if _is_float(dt) and (value in (0, -1) or not math.isfinite(value)):
    with np.errstate(over="ignore"): bits = int(np.float32(value).view(np.uint32))
    f32 = f"bitcast<f32>({bits:#010x}u | {OPAQUE_ZERO})"
    k.expr[u] = f32 if dt is dtypes.float32 else f"f16({f32})"
  else: k.expr[u] = render_const(value, dt)

def _param(k: _Kernel, i: int, u: UOp) -> None:
  if isinstance(u.arg[0], str):  # an integer variable of the kernel: a field of the uniform struct
    if not u.arg[0].isidentifier() or u.arg[0] in _RESERVED or u.arg[0].startswith("__"):
      raise NotImplementedError(f"variable name {u.arg[0]!r} is no WGSL identifier")
    k.expr[u] = f"variables.{u.arg[0]}"
    k.variables.append(u.arg[0])
  else:
    k.expr[u] = f"data{u.arg[0]}"
    k.bufs[u.arg[0]] = u.dtype

def _buffer(k: _Kernel, i: int, u: UOp) -> None:  # REG: a private array; LOCAL: workgroup memory, declared at module scope
  space, n = u.arg[3], u.shape[0] if u.shape else 1
  if space is AddrSpace.REG:
    k.expr[u] = f"reg{u.arg[0]}"
    k.regs.append(f"var reg{u.arg[0]}: array<{REGISTER[u.dtype]}, {n}>;")
  elif space is AddrSpace.LOCAL and k.r.has_shared:
    k.expr[u] = f"local{u.arg[0]}"
    k.shared.append(f"var<workgroup> local{u.arg[0]}: array<{REGISTER[u.dtype]}, {n}>;")
  else: raise NotImplementedError(f"{type(k.r).__name__} has no {space.name} memory")

_BUILTIN = {"gidx": "gid", "lidx": "lid"}

def _special(k: _Kernel, i: int, u: UOp) -> None:
  prefix, d = u.arg[:4], u.arg[4:]
  if prefix not in _BUILTIN or d not in ("0", "1", "2"): raise NotImplementedError(f"{type(k.r).__name__} cannot render SPECIAL {u.arg!r}")
  k.expr[u] = u.arg
  value = f"{_BUILTIN[prefix]}.{'xyz'[int(d)]}"
  if k.folded and u.arg == "gidx0": value = k.folded_gidx0()
  if k.folded and u.arg == "gidx2": value = f"(gid.z % {k.grid['gidx2']}u)"
  k.emit(f"let {u.arg}: i32 = i32({value}); // {k.expr[u.src[0]]}")
  if prefix == "lidx" and u.size is not None: k.local_size[int(d)] = u.size

def _index(k: _Kernel, i: int, u: UOp) -> None:
  if reads_lane(u): raise NotImplementedError(f"{type(k.r).__name__} declares no vectors, but instruction {i} reads a lane of one")
  if len(u.src) != 2: raise NotImplementedError(f"INDEX with {len(u.src) - 1} indices (the pipeline makes flat ones)")
  k.expr[u] = f"{k.expr[u.src[0]]}[{k.expr[u.src[1]]}]"  # a name for AFTERs to pass on: loads and stores go through `access`

def _load(k: _Kernel, i: int, u: UOp) -> None:
  buf, idx, space, atomic = k.access(u.src[0])
  val = k.r.render_load(buf, idx, space, u.dtype, atomic)
  # gated: WebGPU bounds-checks every access, so reading where the gate is false is safe, and select picks alt there
  k.define(i, u, val if len(u.src) == 1 else f"select({k.expr[u.src[1]]}, {val}, {k.expr[u.src[2]]})")

def _store(k: _Kernel, i: int, u: UOp) -> None:
  buf, idx, space, _ = k.access(u.src[0])
  line = k.r.render_store(buf, idx, space, k.expr[u.src[1]], u.src[1].dtype)
  k.emit(line if len(u.src) == 2 else f"if ({k.expr[u.src[2]]}) {{ {line} }}")

def _open(k: _Kernel, line: str) -> None:
  k.emit(line)
  k.depth += 1

def _range(k: _Kernel, i: int, u: UOp) -> None:
  k.expr[u] = v = f"ridx{i}"
  trips = u.src[0].arg[0] if u.src[0].op is Ops.CONST else None
  around = math.prod(t // n + n - 1 for _, t, n, _ in k.loops if t is not None)
  unroll = k.r.unroll_for(trips, around, k.spent) if trips else 1
  if trips: k.spent += around * (trips // unroll + unroll - 1)
  k.loops.append((v, trips, unroll, len(k.body)))
  if unroll == 1: return _open(k, f"for (var {v}: i32 = 0i; {v} < {k.expr[u.src[0]]}; {v}++) {{")
  k.depth += 2  # the body goes inside the loop and one copy's braces; END writes the loop around its copies

def _end(k: _Kernel, i: int, u: UOp) -> None:
  v, trips, unroll, start = k.loops.pop()
  if unroll == 1: return _close(k, i, u)
  body, k.body = k.body[start:], k.body[:start]
  k.depth -= 2
  whole = trips // unroll * unroll
  k.emit(f"for (var {v}_base: i32 = 0i; {v}_base < {whole}i; {v}_base += {unroll}i) {{  // unrolled: see max_loop_iterations")
  for j in range(unroll):
    k.emit(f"  {{ let {v}: i32 = {v}_base + {j}i;")
    k.body += body
    k.emit("  }")
  k.emit("}")
  if trips > whole:
    k.emit(f"for (var {v}: i32 = {whole}i; {v} < {trips}i; {v}++) {{")
    k.body += [line[2:] for line in body]  # one level out: no copy's braces
    k.emit("}")

def _close(k: _Kernel, i: int, u: UOp) -> None:
  k.depth -= 1
  k.emit("}")

def _alu(k: _Kernel, i: int, u: UOp) -> None:
  if u.shape: raise NotImplementedError(f"{type(k.r).__name__} declares no vectors, but instruction {i} ({u.op.name}) is one")
  k.define(i, u, k.r.render_alu(u.op, u.dtype, u.src[0].dtype, [k.expr[s] for s in u.src]))

_RENDER: dict[Ops, Callable[[_Kernel, int, UOp], None]] = {
  Ops.CONST: _const,                                                                           # written into its users
  Ops.PARAM: _param, Ops.BUFFER: _buffer, Ops.SPECIAL: _special,
  Ops.AFTER: lambda k, i, u: k.expr.__setitem__(u, k.expr[u.src[0]]),                         # ordering only: statements run in order
  Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store,
  Ops.BARRIER: lambda k, i, u: k.emit("workgroupBarrier();"),
  Ops.RANGE: _range, Ops.IF: lambda k, i, u: _open(k, f"if ({k.expr[u.src[0]]}) {{"), Ops.END: _end, Ops.ENDIF: _close,
  Ops.GROUP: lambda k, i, u: None,                                                             # groups stores already in order
  **{op: _alu for op in (*GroupOp.Elementwise, Ops.BITCAST)},
}
