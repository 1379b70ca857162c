"""The renderer alone, as on a machine without OpenCL: seed 003's kernels and a workgroup kernel, hand-built, rendered
and checked for OpenCL's shape (signature, indexing, casts, qualifiers, pragmas). Nothing here needs pyopencl."""
import re
import subprocess
import sys

from tinyspec.conformance.builders import ZERO, after, barrier, f32, i32, load, local, lower, param, special, store
from tinyspec.dtype import dtypes
from tinyspec.uop import Ops, UOp
from tinyspec_opencl.renderer import OpenCLRenderer


def render(root: UOp, **kw) -> str: return OpenCLRenderer(**kw).render("E_", lower(root))

def a_plus_b(n: int) -> UOp:
  """Seed 003: c = a + b on int32; one element is indexed by the constant 0, more by lidx0."""
  i = ZERO if n == 1 else special("lidx0", n)
  return store(param(0, n, i32), i, load(param(1, n, i32), i) + load(param(2, n, i32), i))

def test_a_plus_b_one_element():
  src = render(a_plus_b(1))
  assert "__kernel void E_(__global int* data0, __global int* data1, __global int* data2) {" in src
  a, b = re.search(r"int (v\d+) = data1\[0\];", src), re.search(r"int (v\d+) = data2\[0\];", src)
  assert a and b, src
  # int32 adds in uint: signed overflow is undefined in OpenCL C, and tinyspec's integers wrap
  add = re.search(rf"int (v\d+) = \(int\)\(\(uint\){a[1]} \+ \(uint\){b[1]}\);", src)
  assert add and f"data0[0] = {add[1]};" in src, src

def test_a_plus_b_on_lanes():
  src = render(a_plus_b(3))
  assert "long lidx0 = get_local_id(0); /* 3 */" in src
  assert re.search(r"int v\d+ = data1\[lidx0\];", src) and re.search(r"data0\[lidx0\] = v\d+;", src), src

def test_cast_kernel():
  """Seed 003: (a + b).cast(float32): a C cast of the sum, stored to a float buffer."""
  l0 = special("lidx0", 2)
  src = render(store(param(0, 2, f32), l0, (load(param(1, 2, i32), l0) + load(param(2, 2, i32), l0)).cast(f32)))
  assert "__kernel void E_(__global float* data0, __global int* data1, __global int* data2) {" in src
  cast = re.search(r"float (v\d+) = \(float\)(v\d+);", src)
  assert cast and f"data0[lidx0] = {cast[1]};" in src, src

def test_workgroups_shared_memory_and_barrier():
  G, L = 3, 8
  g, l = special("gidx0", G), special("lidx0", L)
  lb = local(L)
  filled = store(lb, l, load(param(1, G * L, f32), g * L + l))
  src = render(store(param(0, G * L, f32), g * L + l, load(after(lb, barrier(filled)), l * -1 + (L - 1))))
  body = src[src.index("{") + 1:].splitlines()
  assert body[1].strip() == "__local float local0[8];", src  # declared first, at kernel scope as OpenCL requires
  assert "long gidx0 = get_group_id(0); /* 3 */" in src and "long lidx0 = get_local_id(0); /* 8 */" in src
  lines = [x.strip() for x in body]
  at = lines.index("barrier(CLK_LOCAL_MEM_FENCE);")
  assert lines[at - 1].startswith("local0[lidx0] = ") and re.fullmatch(r"float v\d+ = local0\[v\d+\];", lines[at + 3]), src

def test_bitcast_and_literals():
  x = load(param(1, 4, f32), special("lidx0", 4))
  src = render(store(param(0, 4, dtypes.uint32), special("lidx0", 4), UOp(Ops.BITCAST, (x * 0.1,), dtypes.uint32) + (2**32 - 1)))
  assert re.search(r"uint v\d+ = as_uint\(v\d+\);", src) and "0.1f" in src and "4294967295UL" in src, src

def test_pragmas_only_where_used():
  l0 = special("lidx0", 2)
  assert "cl_khr_fp64" not in render(a_plus_b(2)) and "#pragma OPENCL FP_CONTRACT OFF" in render(a_plus_b(2))
  src = render(store(param(0, 2, dtypes.float64), l0, load(param(1, 2, dtypes.float64), l0) * 2.0))
  assert "#pragma OPENCL EXTENSION cl_khr_fp64 : enable" in src and "__global double* data0" in src

def test_float16_with_and_without_cl_khr_fp16():
  l0 = special("lidx0", 2)
  kernel = store(param(0, 2, dtypes.float16), l0, load(param(1, 2, dtypes.float16), l0) * 0.1)
  native = render(kernel, fp16=True)
  assert "#pragma OPENCL EXTENSION cl_khr_fp16 : enable" in native and re.search(r"half v\d+ = data1\[lidx0\];", native), native
  emulated = render(kernel)  # stored as half, computed in float, rounded to half after each op
  assert "cl_khr_fp16" not in emulated and "__global half* data1" in emulated
  assert re.search(r"float v\d+ = vload_half\(lidx0, data1\);", emulated), emulated
  assert re.search(r"float v\d+ = half_round_float32\(\(float\)\(v\d+ \* \(\(float\)0.099975586f\)\)\);", emulated), emulated
  assert re.search(r"vstore_half_rte\(v\d+, lidx0, data0\);", emulated), emulated

def test_floor_division_helper_only_when_used():
  l0 = special("lidx0", 4)
  src = render(store(param(0, 4, i32), l0, load(param(1, 4, i32), l0) // 3))
  assert "static inline int idiv_int32(int a, int b)" in src and "mod_int32" not in src and re.search(r"idiv_int32\(v\d+, 3\)", src)

def test_device_limits_from_constructor():
  r = OpenCLRenderer(local_max=(1024, 1024, 64), shared_max=65536, float64=False)
  assert (r.local_max, r.shared_max) == ((1024, 1024, 64), 65536)
  assert dtypes.float64 not in r.supported_dtypes and dtypes.float16 in r.supported_dtypes
  assert OpenCLRenderer.has_local and OpenCLRenderer.has_shared and dtypes.bfloat16 not in OpenCLRenderer.supported_dtypes

def test_importing_the_plugin_imports_no_pyopencl():
  code = "import sys, tinyspec_opencl.plugin, tinyspec_opencl.renderer; print('pyopencl' in sys.modules)"
  assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
