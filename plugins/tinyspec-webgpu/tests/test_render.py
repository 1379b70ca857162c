"""The WGSL renderer alone, as on a machine without wgpu: hand-built kernels rendered and checked for WGSL's shape
(bindings, packed small types, 64-bit pairs, the workgroup, folded grids, unrolled loops, the limits it refuses past).
Nothing here imports wgpu."""
import re

import pytest
from tinyspec.conformance.builders import ZERO, f32, i32, load, lower, param, seed003_add, special, store, workgroup_tree_sum
from tinyspec.dtype import dtypes
from tinyspec.uop import Ops, UOp
from tinyspec.uop.ops import AxisType
from tinyspec_webgpu.renderer import WGSLRenderer, dispatch_grid, render_const


def render(root: UOp, **kw) -> str: return WGSLRenderer(**kw).render("E_", lower(root))

def test_a_plus_b_on_lanes():
  src = render(seed003_add(3))
  assert "@group(0) @binding(0) var<storage, read_write> data0: array<i32>;" in src
  assert "@group(0) @binding(1) var<storage, read> data1: array<i32>;" in src and "@binding(2) var<storage, read> data2" in src
  assert "@compute @workgroup_size(3, 1, 1)" in src and "let lidx0: i32 = i32(lid.x); // 3i" in src
  a, b = re.search(r"let (v\d+): i32 = data1\[lidx0\];", src), re.search(r"let (v\d+): i32 = data2\[lidx0\];", src)
  add = re.search(rf"let (v\d+): i32 = \({a[1]} \+ {b[1]}\);", src)
  assert add and f"data0[lidx0] = {add[1]};" in src, src

def test_workgroup_memory_and_barrier():
  src = render(workgroup_tree_sum(3, 8))
  assert "var<workgroup> local0: array<f32, 8>;" in src and src.count("workgroupBarrier();") >= 4
  assert "let gidx0: i32 = i32(gid.x); // 3i" in src and "@workgroup_size(8, 1, 1)" in src

def test_int8_stores_replace_their_byte_atomically():
  """int8 has no WGSL type: the written buffer is u32 words, each store clears its byte and sets it with two atomics."""
  src = render(seed003_add(4, out=dtypes.int8))
  assert "var<storage, read_write> data0: array<atomic<u32>>;" in src
  assert "atomicAnd(&data0[lidx0 >> 2u], ~(0xffu << u32((lidx0 & 3i) * 8i)));" in src
  assert re.search(r"atomicOr\(&data0\[lidx0 >> 2u\], \(bitcast<u32>\(v\d+\) & 0xffu\) << u32\(\(lidx0 & 3i\) \* 8i\)\);", src), src

def test_int8_loads_sign_extend_their_byte():
  l0 = special("lidx0", 4)
  src = render(store(param(0, 4, i32), l0, load(param(1, 4, dtypes.int8), l0).cast(i32)))
  assert "var<storage, read> data1: array<u32>;" in src
  assert "((bitcast<i32>(((data1[lidx0 >> 2u] >> u32((lidx0 & 3i) * 8i)) & 0xffu)) << 24u) >> 24u)" in src, src

def test_int64_is_a_pair_of_words():
  l0 = special("lidx0", 2)
  src = render(store(param(0, 2, dtypes.int64), l0, load(param(1, 2, dtypes.int64), l0) * load(param(2, 2, dtypes.int64), l0)))
  assert "var<storage, read_write> data0: array<vec2<u32>>;" in src and "fn mul64(" in src and "fn mulhi32(" in src
  assert re.search(r"let v\d+: vec2<u32> = mul64\(v\d+, v\d+\);", src), src

def test_float_not_equal_is_true_for_nan():
  """naga's != on floats is an ordered comparison (false for nan), so float CMPNE is rendered as not-equal."""
  l0 = special("lidx0", 2)
  x = load(param(1, 2, f32), l0)
  src = render(store(param(0, 2, dtypes.bool), l0, x.ne(x)))
  assert re.search(r"let v\d+: bool = \(!\((v\d+) == \1\)\);", src), src

def test_constants_are_typed():
  assert render_const(-2**31, i32) == "(-2147483647i - 1i)" and render_const(7, dtypes.uint32) == "7u" and render_const(-3, i32) == "(-3i)"
  assert render_const(2**63 + 5, dtypes.uint64) == "vec2<u32>(0x5u, 0x80000000u)"
  assert render_const(-1, dtypes.int64) == "vec2<u32>(0xffffffffu, 0xffffffffu)"
  assert render_const(0.5, f32) == "0.5f" and render_const(-1.5, dtypes.float16) == "(-1.5h)"
  assert render_const(1e-45, f32) == "bitcast<f32>(0x00000001u)"  # a subnormal, by its bits

def test_special_floats_pass_through_an_opaque_zero():
  """lavapipe folds 0.0 * x to 0.0 where it sees the constant (WGSL allows assuming no nan or infinity): zero, infinities
  and nan are written through a zero the compiler cannot see."""
  l0 = special("lidx0", 2)
  src = render(store(param(0, 2, f32), l0, load(param(1, 2, f32), l0) * UOp.const(float("inf"), f32)))
  assert "let opaque_zero: u32 = gid.x & 0x80000000u;" in src and "bitcast<f32>(0x7f800000u | opaque_zero)" in src, src

def test_a_grid_past_the_dispatch_limit_is_folded():
  g = special("gidx0", 70_000)
  src = render(store(param(0, 70_000, f32), g, load(param(1, 70_000, f32), g) + 1.0))
  assert "if ((gid.x + (gid.z / 1u) * 65535u) >= 70000u) { return; }" in src and "let gidx0: i32 = i32((gid.x + (gid.z / 1u) * 65535u));" in src
  assert dispatch_grid((70_000,), 65535) == (65535, 1, 2) and dispatch_grid((70_000, 3, 5), 65535) == (65535, 3, 10)
  assert dispatch_grid((100, 2), 65535) == (100, 2, 1)
  with pytest.raises(ValueError, match="cannot be dispatched"): dispatch_grid((65535 * 70_000,), 65535)

def test_long_loops_are_unrolled_under_a_loop_limit():
  """Mesa 22's llvmpipe stops a lane after 65535 loop iterations in all: a longer loop gets copies of its body."""
  n = 200_000
  r = UOp.range(n, 0, AxisType.LOOP)
  kernel = UOp(Ops.END, (store(param(0, n, f32), r, load(param(1, n, f32), r) * 2.0), r))
  plain, limited = render(kernel), render(kernel, max_loop_iterations=65535)
  assert "for (var ridx" in plain and "_base" not in plain
  m = re.search(r"for \(var (ridx\d+)_base: i32 = 0i; \1_base < (\d+)i; \1_base \+= (\d+)i\)", limited)
  assert m and int(m[2]) // int(m[3]) + n % int(m[3]) <= 65535, limited
  assert limited.count(f"let {m[1]}: i32 = {m[1]}_base + ") == int(m[3])

def test_limits_are_refused_with_their_names():
  with pytest.raises(NotImplementedError, match=r"binds 3 buffers; device WEBGPU allows 2 per shader stage \(maxStorageBuffersPerShaderStage\)"):
    render(seed003_add(2), max_buffers=2)
  with pytest.raises(NotImplementedError, match=r"workgroups of 300 lanes .* allows 256 \(maxComputeInvocationsPerWorkgroup\)"):
    render(seed003_add(300))

def test_float16_enables_f16_and_is_declared_only_with_shader_f16():
  assert dtypes.float16 not in WGSLRenderer().supported_dtypes and dtypes.float16 in WGSLRenderer(f16=True).supported_dtypes
  assert dtypes.float64 not in WGSLRenderer(f16=True).supported_dtypes and dtypes.int64 in WGSLRenderer().supported_dtypes
  l0 = special("lidx0", 2)
  src = render(store(param(0, 2, dtypes.float16), l0, load(param(1, 2, f32), l0).cast(dtypes.float16)), f16=True)
  assert src.startswith("enable f16;\n") and "array<f16>" in src and re.search(r"let v\d+: f16 = f16\(v\d+\);", src), src

def test_constant_index_kernel_has_no_lanes():
  src = render(store(param(0, 1, i32), ZERO, load(param(1, 1, i32), ZERO)))
  assert "@workgroup_size(1, 1, 1)" in src and "data0[0i] = " in src
