"""64-bit integers for WGSL, which has none without extensions no browser offers: a value is a `vec2<u32>`, its low and
high words, two's complement. In memory that is the int64's own 8 bytes, little-endian, so buffers of int64 and uint64
are `array<vec2<u32>>` and the host's bytes need no conversion. `&`, `|`, `^` and `select` work on the vector as it is;
every other op is a helper below. The core needs these even where no tensor is 64-bit: integer sums and argmax are
int64, sin's argument reduction (Payne-Hanek) and the random generator (Threefry) compute in uint64.
"""
from __future__ import annotations

from tinyspec.dtype import DType, dtypes
from tinyspec.uop.ops import Ops

WIDE = frozenset({dtypes.int64, dtypes.uint64})
TYPE = "vec2<u32>"
ZERO = "vec2<u32>(0u, 0u)"

def const(value: int) -> str:
  v = int(value) % 2**64
  return f"vec2<u32>({v & 0xFFFFFFFF:#x}u, {v >> 32:#x}u)"

def _signed(dt: DType) -> str: return "true" if dt is dtypes.int64 else "false"

def widen(a: str, register: str) -> str:
  """A 32-bit register value (i32 sign-extended, u32 zero-extended, bool 0 or 1) as a 64-bit one."""
  if register == "i32": return f"vec2<u32>(bitcast<u32>({a}), select(0u, 0xffffffffu, {a} < 0i))"
  return f"vec2<u32>(u32({a}), 0u)"

def to_float(a: str, src: DType, dt: DType) -> str:
  """int64/uint64 to f32 or f16, rounded once."""
  return f"{'i' if src is dtypes.int64 else 'u'}64_to_{'f32' if dt is dtypes.float32 else 'f16'}({a})"

def alu(op: Ops, dt: DType, src: DType, s: list[str]) -> str:
  """One elementwise op on 64-bit operands (`src` int64 or uint64), or NotImplementedError."""
  a, b, sg = s[0], s[1] if len(s) > 1 else "", _signed(src)
  rules = {
    Ops.ADD: lambda: f"add64({a}, {b})", Ops.SUB: lambda: f"sub64({a}, {b})", Ops.MUL: lambda: f"mul64({a}, {b})",
    Ops.NEG: lambda: f"neg64({a})", Ops.XOR: lambda: f"({a} ^ {b})", Ops.OR: lambda: f"({a} | {b})", Ops.AND: lambda: f"({a} & {b})",
    Ops.CMPLT: lambda: f"lt64({a}, {b}, {sg})", Ops.CMPGT: lambda: f"lt64({b}, {a}, {sg})",
    Ops.CMPLE: lambda: f"(!lt64({b}, {a}, {sg}))", Ops.CMPGE: lambda: f"(!lt64({a}, {b}, {sg}))",
    Ops.CMPEQ: lambda: f"all({a} == {b})", Ops.CMPNE: lambda: f"any({a} != {b})", Ops.NOT: lambda: f"any({a} != {const(1)})",
    Ops.MAX: lambda: f"select({b}, {a}, lt64({b}, {a}, {sg}))",
    Ops.IDIV: lambda: f"idiv64({a}, {b}, {sg})", Ops.MOD: lambda: f"imod64({a}, {b}, {sg})",
    # shifting by a negative amount or by 64 or more gives 0
    Ops.SHL: lambda: f"select({ZERO}, shl64({a}, {b}.x & 63u), {b}.y == 0u && {b}.x < 64u)",
    Ops.SHR: lambda: f"select({ZERO}, shr64({a}, {b}.x & 63u, {sg}), {b}.y == 0u && {b}.x < 64u)",
  }
  if op not in rules: raise NotImplementedError(f"WGSLRenderer cannot render {op.name} on {src!r} (device WEBGPU)")
  return rules[op]()

HELPERS: dict[str, str] = {
  "add64": "fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { let lo = a.x + b.x; return vec2<u32>(lo, a.y + b.y + u32(lo < a.x)); }",
  "neg64": "fn neg64(a: vec2<u32>) -> vec2<u32> { return add64(~a, vec2<u32>(1u, 0u)); }",
  "sub64": "fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return add64(a, neg64(b)); }",
  # the high word of a 32x32-bit product, from its four 16x16-bit partial products
  "mulhi32": "fn mulhi32(a: u32, b: u32) -> u32 {\n"
             "  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;\n"
             "  let mid = ((a0 * b0) >> 16u) + ((a1 * b0) & 0xffffu) + ((a0 * b1) & 0xffffu);\n"
             "  return a1 * b1 + ((a1 * b0) >> 16u) + ((a0 * b1) >> 16u) + (mid >> 16u); }",
  "mul64": "fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return vec2<u32>(a.x * b.x, mulhi32(a.x, b.x) + a.x * b.y + a.y * b.x); }",
  "shl64": "fn shl64(a: vec2<u32>, n: u32) -> vec2<u32> {\n"
           "  if (n == 0u) { return a; }\n  if (n >= 32u) { return vec2<u32>(0u, a.x << (n - 32u)); }\n"
           "  return vec2<u32>(a.x << n, (a.y << n) | (a.x >> (32u - n))); }",
  "shr64": "fn shr64(a: vec2<u32>, n: u32, signed: bool) -> vec2<u32> {\n"
           "  let fill = select(0u, 0xffffffffu, signed && (a.y >> 31u) == 1u);\n  if (n == 0u) { return a; }\n"
           "  if (n >= 32u) { return vec2<u32>(select(a.y >> (n - 32u), bitcast<u32>(bitcast<i32>(a.y) >> (n - 32u)), signed), fill); }\n"
           "  return vec2<u32>((a.x >> n) | (a.y << (32u - n)), select(a.y >> n, bitcast<u32>(bitcast<i32>(a.y) >> n), signed)); }",
  "lt64": "fn lt64(a: vec2<u32>, b: vec2<u32>, signed: bool) -> bool {\n"
          "  if (a.y == b.y) { return a.x < b.x; }\n  return select(a.y < b.y, bitcast<i32>(a.y) < bitcast<i32>(b.y), signed); }",
  # long division, a bit at a time: (quotient, remainder) of unsigned n / d; a remainder past 2**64 shows in its carried top bit
  "udivmod64": "fn udivmod64(n: vec2<u32>, d: vec2<u32>) -> vec4<u32> {\n"
               "  var q = vec2<u32>(0u, 0u); var r = vec2<u32>(0u, 0u);\n"
               "  for (var i: i32 = 63i; i >= 0i; i--) {\n"
               "    let carry = (r.y >> 31u) == 1u;\n"
               "    r = shl64(r, 1u) | vec2<u32>(shr64(n, u32(i), false).x & 1u, 0u);\n"
               "    if (carry || !lt64(r, d, false)) { r = sub64(r, d); q = q | shl64(vec2<u32>(1u, 0u), u32(i)); }\n"
               "  }\n  return vec4<u32>(q, r); }",
  # floor division, x // 0 == 0; MIN // -1 wraps to MIN (|MIN| is 2**63 as unsigned, negated back to MIN)
  "idiv64": "fn idiv64(a: vec2<u32>, b: vec2<u32>, signed: bool) -> vec2<u32> {\n"
            "  if (all(b == vec2<u32>(0u, 0u))) { return b; }\n  if (!signed) { return udivmod64(a, b).xy; }\n"
            "  let na = (a.y >> 31u) == 1u; let nb = (b.y >> 31u) == 1u;\n"
            "  let qr = udivmod64(select(a, neg64(a), na), select(b, neg64(b), nb));\n  if (na == nb) { return qr.xy; }\n"
            "  return sub64(neg64(qr.xy), vec2<u32>(u32(any(qr.zw != vec2<u32>(0u, 0u))), 0u)); }",
  "imod64": "fn imod64(a: vec2<u32>, b: vec2<u32>, signed: bool) -> vec2<u32> {\n"
            "  if (all(b == vec2<u32>(0u, 0u))) { return b; }\n  return sub64(a, mul64(idiv64(a, b, signed), b)); }",
  # rounded once: the top 32 bits from the leading one, the bits below folded into the lowest (below f32's rounding point)
  "u64_to_f32": "fn u64_to_f32(a: vec2<u32>) -> f32 {\n  if (a.y == 0u) { return f32(a.x); }\n"
                "  let n = countLeadingZeros(a.y); let v = shl64(a, n);\n  return ldexp(f32(v.y | u32(v.x != 0u)), i32(32u - n)); }",
  "i64_to_f32": "fn i64_to_f32(a: vec2<u32>) -> f32 { if ((a.y >> 31u) == 1u) { return -u64_to_f32(neg64(a)); } return u64_to_f32(a); }",
  # below 65520 the value is exact in f32 and rounds once to f16; from there on it is f16's infinity
  "u64_to_f16": "fn u64_to_f16(a: vec2<u32>) -> f16 {\n"
                "  if (a.y != 0u || a.x >= 65520u) { return f16(bitcast<f32>(0x7f800000u)); }\n  return f16(f32(a.x)); }",
  "i64_to_f16": "fn i64_to_f16(a: vec2<u32>) -> f16 { if ((a.y >> 31u) == 1u) { return -u64_to_f16(neg64(a)); } return u64_to_f16(a); }",
  # float_to_int: truncated; nan, infinities and values outside [-2**63, 2**64) give 0; the split into words is exact
  "f2i64": "fn f2i64(x: f32) -> vec2<u32> {\n  let t = trunc(x);\n"
           "  if (!(t >= -0x1p63f && t < 0x1p64f)) { return vec2<u32>(0u, 0u); }\n"
           "  let m = abs(t); let hi = floor(m / 0x1p32f); let v = vec2<u32>(u32(m - hi * 0x1p32f), u32(hi));\n"
           "  return select(v, neg64(v), t < 0.0f); }",
}
