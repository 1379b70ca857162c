"""OpenCL C from LINEAR programs: `OpenCLRenderer`, core's `CStyleRenderer` in OpenCL's spelling.

    __kernel void E_3(__global int* data0, __global int* data1, __global int* data2) {
      long lidx0 = get_local_id(0); /* 3 */
      int v5 = data1[lidx0];
      int v6 = data2[lidx0];
      int v7 = (int)((uint)v5 + (uint)v6);      <- signed overflow is undefined in OpenCL C: add in unsigned, which wraps
      data0[lidx0] = v7;
    }

What differs from C: the `__kernel` and `__global`/`__local` qualifiers, OpenCL's type names, SPECIALs as
get_group_id/get_local_id, `barrier(CLK_LOCAL_MEM_FENCE)`, bitcasts as `as_T(x)`, `L`/`UL` literals, and pragmas:
FP_CONTRACT OFF always (a*b+c stays two roundings, as in numpy), cl_khr_fp16/cl_khr_fp64 where a kernel uses half/double.
Imports nothing but tinyspec: kernels render on machines without OpenCL.
"""
from __future__ import annotations

from tinyspec.dtype import AddrSpace, DType, dtypes
from tinyspec.renderer.cstyle import CKernel, CStyleRenderer
from tinyspec.uop import Ops

CLTYPES: dict[DType, str] = {
  dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort",
  dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong", dtypes.index: "long",
  dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double",
}

# float atomics are no core OpenCL 1.2 function: a compare-and-swap loop on the value's bits
_ATOMIC_ADD_FLOAT = """static inline void atomic_add_float32(volatile __global float* p, float v) {
  union { uint u; float f; } old, upd;
  do { old.f = *p; upd.f = old.f + v; } while (atomic_cmpxchg((volatile __global uint*)p, old.u, upd.u) != old.u);
}"""

# float16 on a device without cl_khr_fp16: memory holds half, registers hold float, and every result is rounded to half
# through the core storage functions (vstore_half_rte rounds to nearest even, vload_half widens exactly)
_HALF = {
  "half_round_float32": "static inline float half_round_float32(float x) { ushort h; vstore_half_rte(x, 0, (__private half*)&h); "
                        "return vload_half(0, (__private half*)&h); }",
  "half_round_float64": "static inline float half_round_float64(double x) { ushort h; vstore_half_rte(x, 0, (__private half*)&h); "
                        "return vload_half(0, (__private half*)&h); }",  # straight from double: rounding via float could round twice
  "half_bits": "static inline ushort half_bits(float x) { ushort h; vstore_half_rte(x, 0, (__private half*)&h); return h; }",
  "half_from_bits": "static inline float half_from_bits(ushort h) { return vload_half(0, (__private half*)&h); }",
}
# OpenCL C's vector types, read and written with vloadN/vstoreN (which need only the scalar's alignment); OpenCL has no
# bool vectors, and half's depend on cl_khr_fp16
CL_VECTORS = frozenset(CLTYPES) - {dtypes.bool, dtypes.float16, dtypes.index}
_EXACT = frozenset({Ops.MAX, Ops.WHERE, Ops.NEG})  # ops whose float16 result needs no rounding: it is one of the operands, or -x

class OpenCLRenderer(CStyleRenderer):
  """Renders kernels as OpenCL C 1.2. The class attributes are what any OpenCL device is assumed to have; the runtime
  builds an instance from the opened device (`local_max`, `shared_max`, float64 only where the device has cl_khr_fp64).

  float16 works everywhere: as OpenCL's `half` where the device has cl_khr_fp16 (`fp16=True`), and otherwise stored as
  half and computed in float, rounded to half after every op, which gives the same results (one float op on half
  operands, rounded to half, is the correctly rounded half op). bfloat16 has no OpenCL type: unsupported."""
  device = "OPENCL"
  # OpenCL's built-in math functions (within a few ulp), and division: one rounding, as numpy's, not a * (1/b)
  native = frozenset({Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.DIV})
  has_local, has_shared = True, True
  global_max = (2**31 - 1,) * 3       # workgroups per dimension: OpenCL bounds only the work-items, by size_t
  local_max = (256, 256, 64)          # within what GPUs and PoCL allow; the opened device's own limits replace these
  shared_max = 32 * 1024              # CL_DEVICE_LOCAL_MEM_SIZE's minimum for a full-profile device
  type_map = CLTYPES
  kernel_prefix, buffer_prefix, local_prefix = "__kernel ", "__global ", "__local "
  barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
  specials = {"gidx": "get_group_id({d})", "lidx": "get_local_id({d})"}
  int64_suffix = ("L", "UL")
  prelude = "#pragma OPENCL FP_CONTRACT OFF\n"
  fp16: bool = False
  """Whether the device has cl_khr_fp16 (float16 as OpenCL's half); without it float16 is stored as half, computed in float."""
  supported_dtypes = frozenset(CLTYPES) - {dtypes.index}
  vector_widths, vector_dtypes = (1, 2, 4, 8, 16), CL_VECTORS

  def __init__(self, local_max: tuple[int, ...] | None = None, shared_max: int | None = None, global_max: tuple[int, ...] | None = None,
               fp16: bool = False, float64: bool = True, cpu: bool = False):
    # a CPU device (PoCL) runs a lane's registers as wide SIMD vectors with 32 of them: a 16x8 register tile fits there
    # (matmul 1024 on PoCL: 108 GFLOP/s against 17 with a GPU-sized 4x4 tile); it runs a workgroup's lanes one after
    # another, so a GROUP_REDUCE over 16 lanes, not 256, keeps combining their partials cheap (sum 16M: 45 GB/s against 4)
    if cpu: self.max_upcast, self.group_lanes = 128, 16
    # and its built-in exp2, log2 and sin are scalar calls per lane: core's polynomials vectorize (4-7x faster on PoCL 3.1);
    # a large matmul's B is packed into panels as wide as the lane's tile, as on the CPU device (matmul 2048: 76 -> 213)
    if cpu: self.native, self.pack_width = type(self).native - {Ops.EXP2, Ops.LOG2, Ops.SIN}, 16
    # and it vectorizes across the lanes of a workgroup, which LLVM's loop vectorizer gives up on for a kernel holding
    # vector types: with float16 loads of B, matmul 1024 ran at 99-116 GFLOP/s against 112-221 with scalar loads
    if cpu: self.vector_widths, self.vector_dtypes = (1,), frozenset()
    if local_max is not None: self.local_max = tuple(local_max)
    if shared_max is not None: self.shared_max = shared_max
    if global_max is not None: self.global_max = tuple(global_max)
    if not float64: self.supported_dtypes = type(self).supported_dtypes - {dtypes.float64}
    self.fp16 = fp16
    if not fp16: self.type_map = {**CLTYPES, dtypes.float16: "float"}  # float16 values live in float registers

  def _emulated(self, dt: DType) -> bool: return dt is dtypes.float16 and not self.fp16

  def buffer_param(self, slot: int, dt: DType, written: bool) -> str:
    return f"__global half* data{slot}" if self._emulated(dt) else super().buffer_param(slot, dt, written)

  def render_load(self, buf: str, idx: str, space: AddrSpace, dt: DType) -> str:
    return f"vload_half({idx}, {buf})" if self._emulated(dt) and space is AddrSpace.GLOBAL else super().render_load(buf, idx, space, dt)

  def render_vector_load(self, buf: str, idx: str, space: AddrSpace, dt: DType) -> str: return f"vload{dt.count}(0, {buf} + {idx})"

  def render_vector_store(self, buf: str, idx: str, space: AddrSpace, val: str, dt: DType) -> str:
    return f"vstore{dt.count}({val}, 0, {buf} + {idx});"

  def render_store(self, buf: str, idx: str, space: AddrSpace, val: str, dt: DType) -> str:
    if self._emulated(dt) and space is AddrSpace.GLOBAL: return f"vstore_half_rte({val}, {idx}, {buf});"
    return super().render_store(buf, idx, space, val, dt)

  def render_alu(self, op: Ops, dt: DType, src_dt: DType, s: list[str]) -> str:
    if op is Ops.BITCAST and self._emulated(src_dt): return f"as_{self.render_dtype(dt)}(half_bits({s[0]}))"
    if op is Ops.BITCAST and self._emulated(dt): return f"half_from_bits(as_ushort({s[0]}))"
    if not self._emulated(dt) or op in _EXACT: return super().render_alu(op, dt, src_dt, s)
    if op is Ops.CAST and src_dt is dtypes.float64: return f"half_round_float64({s[0]})"
    return f"half_round_float32({super().render_alu(op, dt, src_dt, s)})"

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
    # a constant is written as a bare literal (an int literal has 4 bytes, which as_uchar(5) refuses): given its own type first
    if not x.isidentifier(): x = f"(({self.render_dtype(src)}){x})"
    return f"as_{self.render_dtype(dst)}({x})"

  def render_atomic_add(self, target: str, val: str, dt: DType) -> str:
    """int and uint: OpenCL's atomic_add; long and ulong: atom_add (cl_khr_int64_base_atomics); float: a CAS loop on global
    memory (the helper takes a __global pointer, so float atomics on local memory fail to compile)."""
    if dt in (dtypes.int32, dtypes.uint32): return f"atomic_add(&{target}, {val});"
    if dt in (dtypes.int64, dtypes.uint64): return f"atom_add(&{target}, {val});"
    if dt is dtypes.float32: return f"atomic_add_float32(&{target}, {val});"
    return super().render_atomic_add(target, val, dt)

  def helpers(self) -> dict[str, str]: return {**super().helpers(), "atomic_add_float32": _ATOMIC_ADD_FLOAT, **_HALF}

  def render_prelude(self, k: CKernel) -> str:
    exts = [ext for ext, need in (("cl_khr_fp16", dtypes.float16 in k.dtypes and self.fp16), ("cl_khr_fp64", dtypes.float64 in k.dtypes),
                                  ("cl_khr_int64_base_atomics", any("atom_add(" in line for line in k.body))) if need]
    return "".join(f"#pragma OPENCL EXTENSION {e} : enable\n" for e in exts) + super().render_prelude(k)
