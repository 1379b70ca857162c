"""Metal Shading Language from LINEAR programs: core's `CStyleRenderer` with Metal's spelling. Text only: renders anywhere.

    #include <metal_stdlib>
    using namespace metal;
    kernel void E_2(device int* data0, const device int* data1, const device int* data2,
                    uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]) {
      long lidx0 = lid.x; /* 2 */                              <- SPECIAL gidx: gid (the threadgroup), lidx: lid (the thread in it)
      int v4 = data1[lidx0];
      ...
    }

Buffers are `device` pointers bound by index ([[buffer(n)]]); integer variables follow them as `constant long&`
arguments, then the two thread-position arguments. Workgroup memory is `threadgroup`, a BARRIER is
threadgroup_barrier(mem_flags::mem_threadgroup), and a bitcast is as_type<T>(x). Metal has no double.
"""
from __future__ import annotations

from tinyspec.dtype import AddrSpace, DType, dtypes
from tinyspec.renderer import TensorCore
from tinyspec.renderer.cstyle import CStyleRenderer
from tinyspec.uop import Ops

METAL_TYPES: dict[DType, str] = {
  dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort", dtypes.int32: "int",
  dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong", dtypes.index: "long", dtypes.float16: "half", dtypes.float32: "float",
}

class MetalRenderer(CStyleRenderer):
  """Metal Shading Language for Apple GPUs. The math calls are metal::precise's, correctly rounded whatever the compile
  options say; the runtime turns fast math off as well, so NaN and infinities behave as in numpy. The tensor-core table
  is simdgroup_matrix's 8x8x8 multiply-accumulate, one SIMD group of 32 threads holding 2 elements of each matrix."""
  device = "METAL"
  native = frozenset({Ops.SUB, Ops.DIV, Ops.CMPGT, Ops.CMPGE, Ops.CMPLE, Ops.CMPEQ, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN})
  has_local, has_shared = True, True
  local_max, global_max, shared_max = (1024, 1024, 1024), (2**31 - 1, 65535, 65535), 32 * 1024
  # thread_elements() of an 8x8 simdgroup matrix, as measured on Apple GPUs (Apple does not document it)
  tensor_cores = tuple(TensorCore((8, 8, 8), 32, (2, 2, 2), di, do, "simdgroup_multiply_accumulate",
                                  ("k1 m0 m1 k2 m2 | k0", "n1 k0 k1 n2 k2 | n0", "n1 m0 m1 n2 m2 | n0"))
                       for di, do in ((dtypes.float32, dtypes.float32), (dtypes.float16, dtypes.float32), (dtypes.float16, dtypes.float16)))
  type_map = METAL_TYPES
  kernel_prefix, buffer_prefix, local_prefix, helper_prefix = "kernel ", "device ", "threadgroup ", "inline "
  prelude = "#include <metal_stdlib>\nusing namespace metal;\n"
  barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);"
  specials = {"gidx": "gid.{xyz}", "lidx": "lid.{xyz}"}
  math_funcs = {Ops.TRUNC: "trunc", Ops.SQRT: "precise::sqrt", Ops.EXP2: "precise::exp2", Ops.LOG2: "precise::log2", Ops.SIN: "precise::sin"}
  int64_suffix = ("l", "ul")  # Metal's long is 64 bits and it has no long long
  # float4 and kin, read and written through their packed types, which need only the scalar's alignment
  vector_widths, vector_dtypes = (1, 2, 4), frozenset({dtypes.float32, dtypes.float16, dtypes.int32, dtypes.uint32})
  supported_dtypes = frozenset(METAL_TYPES) - {dtypes.index}

  def render_vectorize(self, values: list[str], dt: DType) -> str: return f"{self.render_dtype(dt)}({', '.join(values)})"

  def render_vector_load(self, buf: str, idx: str, space: AddrSpace, dt: DType) -> str:
    return f"{self.render_dtype(dt)}(*((const device packed_{self.render_dtype(dt)}*)({buf} + {idx})))"

  def render_vector_store(self, buf: str, idx: str, space: AddrSpace, val: str, dt: DType) -> str:
    t = self.render_dtype(dt)
    return f"*((device packed_{t}*)({buf} + {idx})) = packed_{t}({val});"

  def render_wmma(self, tc, out: str, a: list[str], b: list[str], c: list[str]) -> list[str]:
    # each thread puts its two elements of A, B and C into simdgroup matrices and takes its two of D back out
    t_in, t_out = self.render_dtype(tc.dtype_in), self.render_dtype(tc.dtype_out)
    lines = [f"simdgroup_{t_in}8x8 {out}_a, {out}_b; simdgroup_{t_out}8x8 {out}_c;"]
    for name, vals in (("a", a), ("b", b), ("c", c)): lines += [f"{out}_{name}.thread_elements()[{j}] = {x};" for j, x in enumerate(vals)]
    lines.append(f"simdgroup_multiply_accumulate({out}_c, {out}_a, {out}_b, {out}_c);")
    return lines + [f"{t_out} {out}[{len(c)}] = {{{', '.join(f'{out}_c.thread_elements()[{j}]' for j in range(len(c)))}}};"]

  def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
    # a constant is written as a bare literal (an int literal has 4 bytes, which as_type<uchar>(5) refuses): given its own type first
    if not x.isidentifier(): x = f"(({self.render_dtype(src)}){x})"
    return f"as_type<{self.render_dtype(dst)}>({x})"

  def render_params(self, bufs: list[tuple[int, DType, bool]], variables: list[str]) -> list[str]:
    # argument n is bound by [[buffer(n)]]: the buffers in order, then the variables (the runtime binds them so); buffers
    # the kernel only reads are const, as Metal's compiler likes them
    out = [f"{'' if w else 'const '}device {self.render_dtype(dt)}* data{slot} [[buffer({i})]]" for i, (slot, dt, w) in enumerate(bufs)]
    out += [f"constant long& {v} [[buffer({i})]]" for i, v in enumerate(variables, len(bufs))]
    return out + ["uint3 gid [[threadgroup_position_in_grid]]", "uint3 lid [[thread_position_in_threadgroup]]"]
