"""CUDA C from LINEAR programs: core's `CStyleRenderer` with CUDA's spelling. Text only: renders on any machine.

    extern "C" __global__ void __launch_bounds__(8) E_3_8(float* data0, float* data1) {
      __shared__ float local0[8];                         <- LOCAL buffers
      long long gidx0 = blockIdx.x; /* 3 */               <- SPECIAL gidx: the block, lidx: the thread in it
      long long lidx1 = threadIdx.x; /* 8 */
      ...
      __syncthreads();                                    <- BARRIER
    }

half comes from cuda_fp16.h and bfloat16 from cuda_bf16.h (NVRTC's include path holds them, see compiler.py), included only
by kernels that use them. Bitcasts of floats go through CUDA's __float_as_uint-style intrinsics.
"""
from __future__ import annotations

import math

from tinyspec.dtype import AddrSpace, DType, bf16_round, dtypes
from tinyspec.renderer import TensorCore
from tinyspec.renderer.cstyle import CKernel, CStyleRenderer
from tinyspec.uop import Ops

CUDA_TYPES: dict[DType, str] = {
  dtypes.bool: "bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short", dtypes.uint16: "unsigned short",
  dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long", dtypes.uint64: "unsigned long long",
  dtypes.index: "long long", dtypes.float16: "half", dtypes.bfloat16: "__nv_bfloat16", dtypes.float32: "float", dtypes.float64: "double",
}
# the CUDA vector types tinyspec loads and stores (float4, int2, uint4 ...): their names, before the count
_VECTOR_NAMES = {dtypes.float32: "float", dtypes.int32: "int", dtypes.uint32: "uint"}
# float <-> the unsigned integer of its size, through CUDA's intrinsics (a union or pointer cast would be undefined in C++)
_AS_BITS = {dtypes.float16: "__half_as_ushort", dtypes.bfloat16: "__bfloat16_as_ushort", dtypes.float32: "__float_as_uint",
            dtypes.float64: "__double_as_longlong"}
_FROM_BITS = {dtypes.float16: ("__ushort_as_half", "unsigned short"), dtypes.bfloat16: ("__ushort_as_bfloat16", "unsigned short"),
              dtypes.float32: ("__uint_as_float", "unsigned int"), dtypes.float64: ("__longlong_as_double", "long long")}
_TO_16 = {dtypes.float16: "__float2half_rn", dtypes.bfloat16: "__float2bfloat16_rn"}
_FROM_DOUBLE = {dtypes.float16: "__double2half", dtypes.bfloat16: "__double2bfloat16"}

# mma.sync shapes (PTX ISA, "Matrix Fragments for mma.m16n8k*"): one warp of 32 threads; a lane's groupID (lane >> 2) is
# its row of A and C and column of B, its threadID_in_group (lane % 4) picks columns of A and C and rows of B
_C = "n1 n2 m0 m1 m2 | n0 m3"  # every shape's C/D: rows groupID and groupID + 8, columns 2 * threadID_in_group + 0, 1
_K8 = ("k1 k2 m0 m1 m2 | k0 m3", "k1 k2 n0 n1 n2 | k0", _C)
_K16 = ("k1 k2 m0 m1 m2 | k0 m3 k3", "k1 k2 n0 n1 n2 | k0 k3", _C)
_TF32 = ("k0 k1 m0 m1 m2 | m3 k2", "k0 k1 n0 n1 n2 | k2", _C)  # one 32-bit value per register: columns threadID_in_group + 0, 4
_S8 = ("k2 k3 m0 m1 m2 | k0 k1 m3 k4", "k2 k3 n0 n1 n2 | k0 k1 k4", _C)  # four 8-bit values per register
def _mma(shape, elements, di, do, layout, types) -> TensorCore:
  return TensorCore(shape, 32, elements, di, do, f"mma.sync.aligned.m{shape[0]}n{shape[1]}k{shape[2]}.row.col.{types}", layout)
TC_SM75 = (_mma((16, 8, 8), (4, 2, 4), dtypes.float16, dtypes.float32, _K8, "f32.f16.f16.f32"),)
TC_SM80 = (
  _mma((16, 8, 16), (8, 4, 4), dtypes.float16, dtypes.float32, _K16, "f32.f16.f16.f32"),
  _mma((16, 8, 16), (8, 4, 4), dtypes.float16, dtypes.float16, _K16, "f16.f16.f16.f16"),
  _mma((16, 8, 16), (8, 4, 4), dtypes.bfloat16, dtypes.float32, _K16, "f32.bf16.bf16.f32"),
  _mma((16, 8, 8), (4, 2, 4), dtypes.float32, dtypes.float32, _TF32, "f32.tf32.tf32.f32"),
  _mma((16, 8, 32), (16, 8, 4), dtypes.int8, dtypes.int32, _S8, "s32.s8.s8.s32"),
)

class CUDARenderer(CStyleRenderer):
  """CUDA C for NVRTC, for one GPU architecture (`arch`, e.g. "sm_90"), which picks the tensor-core table: sm_75 has only
  the f16 m16n8k8 shape, sm_80 and later add bf16, tf32 and int8. bfloat16 arithmetic needs sm_80."""
  device = "CUDA"
  native = frozenset({Ops.SUB, Ops.DIV, Ops.CMPGT, Ops.CMPGE, Ops.CMPLE, Ops.CMPEQ, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN})
  has_local, has_shared = True, True
  local_max, global_max, shared_max = (1024, 1024, 64), (2**31 - 1, 65535, 65535), 48 * 1024
  type_map = CUDA_TYPES
  kernel_prefix = 'extern "C" __global__ '
  local_prefix = "__shared__ "
  helper_prefix = "__device__ inline "
  barrier = "__syncthreads();"
  specials = {"gidx": "blockIdx.{xyz}", "lidx": "threadIdx.{xyz}"}
  math_suffix = {dtypes.float32: "f"}  # sqrtf for float (and half, computed in float), sqrt for double
  # NVRTC has no math.h macros; the bit patterns of +inf and a quiet NaN, converted to each type
  infinity, nan = "__int_as_float(0x7f800000)", "__int_as_float(0x7fffffff)"
  # float4 and kin: loads and stores of 16 bytes at once, at addresses that are multiples of their size (arithmetic on
  # them has no operators, so it stays scalar, lane by lane)
  vector_widths, vector_dtypes, vector_aligned = (1, 2, 4), frozenset(_VECTOR_NAMES), True
  supported_dtypes = frozenset(CUDA_TYPES) - {dtypes.index}

  def __init__(self, arch: str = "sm_80"):
    self.arch = arch
    sm = int(arch.removeprefix("sm_"))
    self.tensor_cores = TC_SM80 if sm >= 80 else TC_SM75
    if sm < 80: self.supported_dtypes = type(self).supported_dtypes - {dtypes.bfloat16}

  def render_alu(self, op: Ops, dt: DType, src_dt: DType, s: list[str]) -> str:
    # half and bfloat16 compute in float: exact for the operands, and one rounding back is the correctly rounded result
    # (float has more than twice their precision). It also keeps clear of cuda_fp16.h's operator overloads, which make
    # mixed expressions such as `h != 0` ambiguous.
    if op is Ops.CAST and dt in _TO_16:
      # to half, integers wider than float's 24 bits go through double, exactly as numpy converts them (its rounding
      # included); to bfloat16 every integer goes through float, as the interpreter's, LLVM's and PyTorch's conversions do
      if src_dt is dtypes.float64 or (dt is dtypes.float16 and dtypes.is_int(src_dt) and src_dt.itemsize >= 4):
        return f"{_FROM_DOUBLE[dt]}((double){s[0]})"
      return f"{_TO_16[dt]}({s[0] if src_dt is dtypes.float32 else f'(float){s[0]}'})"
    if op is Ops.CAST and src_dt in _TO_16 and dt is dtypes.float32: return f"(float){s[0]}"
    if src_dt in _TO_16 and op not in (Ops.WHERE, Ops.BITCAST):
      out = super().render_alu(op, dtypes.float32 if dt in _TO_16 else dt, dtypes.float32, [f"(float){x}" for x in s])
      return f"{_TO_16[dt]}({out})" if dt in _TO_16 else out
    return super().render_alu(op, dt, src_dt, s)

  def vector_type(self, dt: DType) -> str: return f"{_VECTOR_NAMES[dt.scalar()]}{dt.count}"
  def render_vectorize(self, values: list[str], dt: DType) -> str: return f"make_{self.render_dtype(dt)}({', '.join(values)})"

  # a float4 access needs a 16-byte aligned address: the optimizer only makes them at indexes that are multiples of 4,
  # but a buffer may be a view at any offset, so the helpers check the address and go element by element when it is not
  def render_vector_load(self, buf: str, idx: str, space: AddrSpace, dt: DType) -> str: return f"load_{self.render_dtype(dt)}({buf} + {idx})"
  def render_vector_store(self, buf: str, idx: str, space: AddrSpace, val: str, dt: DType) -> str:
    return f"store_{self.render_dtype(dt)}({buf} + {idx}, {val});"

  def helpers(self) -> dict[str, str]:
    out, p = super().helpers(), self.helper_prefix
    for sdt, name in _VECTOR_NAMES.items():
      for n in (w for w in self.vector_widths if w > 1):
        t, v, lanes = self.type_map[sdt], f"{name}{n}", "xyzw"[:n]
        aligned = f"((unsigned long long)p & {n * sdt.itemsize - 1}) == 0"
        out[f"load_{v}"] = (f"{p}{v} load_{v}(const {t}* p) {{ return {aligned} ? *(const {v}*)p : "
                            f"make_{v}({', '.join(f'p[{j}]' for j in range(n))}); }}")
        out[f"store_{v}"] = (f"{p}void store_{v}({t}* p, {v} v) {{ if ({aligned}) *({v}*)p = v; "
                             f"else {{ {' '.join(f'p[{j}] = v.{c};' for j, c in enumerate(lanes))} }} }}")
    return out

  def render_wmma(self, tc, out: str, a: list[str], b: list[str], c: list[str]) -> list[str]:
    # mma.sync takes 32-bit registers: two 16-bit or four 8-bit values each (the lower element in the low bits), or one
    # float for tf32; a float32 C/D is one "f" register per element, f16 and s32 ones are "r" registers
    def regs(vals: list[str], dt: DType) -> list[str]:
      per = 4 // dt.itemsize
      bits = lambda x: f"(unsigned){_AS_BITS[dt]}({x})" if dt in _AS_BITS else f"(unsigned)(unsigned char)({x})"  # noqa: E731
      return [" | ".join(f"({bits(x)} << {8 * dt.itemsize * j})" if j else bits(x) for j, x in enumerate(vals[r:r + per]))
              for r in range(0, len(vals), per)]
    dt_out, n = tc.dtype_out, len(c)
    packed, kind = dt_out.itemsize < 4, "f" if dt_out is dtypes.float32 else "r"  # f16 results come two to a register
    d = [f"{out}_d[{j}]" for j in range(n // 2)] if packed else [f"{out}[{j}]" for j in range(n)]
    operands = [[f'"={kind}"({x})' for x in d], [f'"r"({x})' for x in regs(a, tc.dtype_in)], [f'"r"({x})' for x in regs(b, tc.dtype_in)],
                [f'"r"({x})' for x in regs(c, dt_out)] if packed else [f'"{kind}"({x})' for x in c]]
    first = [sum(map(len, operands[:i])) for i in range(4)]  # each group's first %-number in the asm template
    template = ", ".join("{" + ", ".join(f"%{f + j}" for j in range(len(g))) + "}" for f, g in zip(first, operands))
    lines = [f"{self.render_dtype(dt_out)} {out}[{n}];"] + ([f"unsigned {out}_d[{n // 2}];"] if packed else [])
    lines.append(f'asm volatile("{tc.name} {template};" : {", ".join(operands[0])} : {", ".join(sum(operands[1:], []))});')
    if packed: lines += [f"{out}[{j}] = {_FROM_BITS[dt_out][0]}((unsigned short)({out}_d[{j // 2}] >> {16 * (j % 2)}));" for j in range(n)]
    return lines

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
    if src in _AS_BITS: x = f"{_AS_BITS[src]}({x})"
    if dst in _FROM_BITS:
      fn, bits = _FROM_BITS[dst]
      return f"{fn}(({bits}){x})"
    return f"(({self.render_dtype(dst)}){x})"  # integers of one size: the conversion keeps the bits (two's complement)

  def render_float(self, value: float, dt: DType) -> str:
    # bfloat16: rounded here, once, then written as the float literal it now exactly is
    if dt is dtypes.bfloat16 and math.isinf(r := float(bf16_round(value))): return self.render_const(r, dt)  # rounds up to infinity
    if dt is dtypes.bfloat16: return f"__float2bfloat16_rn({r!r}f)"
    return super().render_float(value, dt)

  def render_prelude(self, k: CKernel) -> str:
    # the headers cost NVRTC some time to parse: only kernels using half or bfloat16 include them
    includes = "".join(f"#include <{h}>\n" for dt, h in ((dtypes.float16, "cuda_fp16.h"), (dtypes.bfloat16, "cuda_bf16.h")) if dt in k.dtypes)
    return includes + super().render_prelude(k)

  def kernel_attributes(self, k: CKernel) -> str:
    # __launch_bounds__: the block size is fixed by the kernel's lidx SPECIALs, so the compiler can budget registers for it
    threads = k.local_size[0] * k.local_size[1] * k.local_size[2]
    return f"__launch_bounds__({threads}) " if threads > 1 else ""

