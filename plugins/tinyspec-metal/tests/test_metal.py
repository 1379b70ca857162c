"""The Metal plugin off macOS: seed 003's kernels rendered by hand, every kernel checked by the host C++ compiler against
the stand-in metal_stdlib (and that check failing where Metal would), the devices it lists, and METAL_CHECK running
kernels on the interpreter against numpy."""
import sys

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.conformance.builders import f32, i32, load, lower, param, seed003_add, special, store, workgroup_tree_sum
from tinyspec.conformance.test_vectors import compiled
from tinyspec.device import CompileError, Device
from tinyspec.engine.expand import expand
from tinyspec.engine.isel import isel
from tinyspec.engine.linearize import linearize
from tinyspec.uop import AxisType, Ops, UOp
from tinyspec_metal.check import MetalSyntaxCompiler
from tinyspec_metal.renderer import MetalRenderer

SIGNATURE = ("kernel void E_2(device int* data0 [[buffer(0)]], const device int* data1 [[buffer(1)]], const device int* data2 [[buffer(2)]], "
             "uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]) {")

@pytest.fixture(scope="module")
def check() -> MetalSyntaxCompiler: return MetalSyntaxCompiler()

def seed003(n: int = 2, out=i32, how: str = "") -> UOp: return lower(seed003_add(n, out, bitcast=how == "bitcast"))
def tree_sum() -> UOp: return lower(workgroup_tree_sum())

def test_seed003_add_renders_as_metal(check):
  src = MetalRenderer().render("E_2", seed003())
  assert src.startswith("#include <metal_stdlib>\nusing namespace metal;\n") and SIGNATURE in src
  assert "long lidx0 = lid.x; /* 2 */" in src and "data1[lidx0]" in src and "data2[lidx0]" in src and "data0[lidx0] = v" in src
  one = MetalRenderer().render("E_2", seed003(1))
  assert SIGNATURE in one and "data1[0]" in one and "lid.x" not in one  # one element: the index is the constant 0
  for s in (src, one): assert check.compile(s) == b""

def test_seed003_cast_and_bitcast_render_as_metal(check):
  cast, bitcast = (MetalRenderer().render("E_2", seed003(out=f32, how=h)) for h in ("cast", "bitcast"))
  assert "kernel void E_2(device float* data0 [[buffer(0)]], const device int* data1" in cast
  assert "float v12 = (float)v11;" in cast and "float v12 = as_type<float>(v11);" in bitcast  # Metal's bitcast (seed 003)
  for s in (cast, bitcast): check.compile(s)

def test_workgroup_kernel_renders_checks_and_runs(check):
  src = MetalRenderer().render("tree", tree_sum())
  assert "threadgroup float local0[8];" in src and src.count("threadgroup_barrier(mem_flags::mem_threadgroup);") == 7
  assert "long gidx0 = gid.x; /* 3 */" in src
  check.compile(src)
  x = np.random.default_rng(0).standard_normal(24).astype(np.float32)
  rt = Device["METAL_CHECK"]
  prog = rt.program("tree", rt.compiler.compile_cached(rt.renderer.render("tree", tree_sum())))
  out, inp = rt.allocator.alloc(12), rt.allocator.alloc(96)
  rt.allocator.copyin(inp, memoryview(x).cast("B"))
  prog(out, inp, global_size=(3, 1, 1), local_size=(8, 1, 1), wait=True)
  res = np.empty(3, np.float32)
  rt.allocator.copyout(memoryview(res).cast("B"), out)
  np.testing.assert_allclose(res, x.reshape(3, 8).sum(1), rtol=1e-5)

def test_variables_follow_buffers(check):
  n = UOp.variable("n", 1, 8)
  r = UOp.range(n, 0, AxisType.REDUCE)
  kernel = store(param(0, 1, f32), UOp.const(0), UOp(Ops.REDUCE, (load(param(1, 8, f32), r), r), (Ops.ADD, ())))
  src = MetalRenderer().render("vsum", linearize(isel(expand(UOp.sink(kernel)), MetalRenderer.native)))
  assert "const device float* data1 [[buffer(1)]], constant long& n [[buffer(2)]], uint3 gid" in src
  check.compile(src)

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.int8, dtypes.uint16, dtypes.int64, dtypes.uint64, dtypes.bool])
def test_every_dtype_checks(check, dt):
  i = special("lidx0", 4)
  a, b = load(param(1, 4, dt), i), load(param(2, 4, dt), i)
  v = (a * b + a).maximum(b) if dt is not dtypes.bool else a & b
  flag = (v < UOp.const(1, dt)) if dt is not dtypes.bool else v
  mix = flag.where(UOp(Ops.SQRT, (v.cast(f32),)).cast(dt), v.cast(dtypes.int64).cast(dt) + UOp.const(2**40 if dt.itemsize == 8 else 1, dt))
  src = MetalRenderer().render("k", lower(store(param(0, 4, dt), i, mix)))
  assert "precise::sqrt(" in src and "double" not in src
  if dt.itemsize == 8: assert "1099511627776" + ("ul" if dt is dtypes.uint64 else "l") in src  # Metal has no long long
  check.compile(src)

def test_metal_has_no_double():
  assert dtypes.float64 not in MetalRenderer().supported_dtypes and dtypes.float64 not in Device["METAL_CHECK"].renderer.supported_dtypes
  with pytest.raises(NotImplementedError, match="MetalRenderer has no type for dtypes.float64"):
    MetalRenderer().render("d", lower(store(param(0, 2, dtypes.float64), i := special("lidx0", 2), load(param(1, 2, dtypes.float64), i))))

@pytest.mark.parametrize("edit, message", [
  (("int v10", "double v10"), 'attempt to use poisoned "double"'),                                      # Metal has no double
  (("data2[lidx0]", "nope[lidx0]"), "'nope' was not declared"),                                        # a misspelt name
  (("[[buffer(2)]]", "[[bufer(2)]]"), "attributes Metal does not have: bufer"),                        # a misspelt attribute
  (("int v11 =", "float v11 = as_type<float>((long)1) + max(1.0f, (half)2) +"), "as_type: the source and destination types differ"),
  (("int v11 =", "int v11 = (int)sqrtf(2.0f) +"), "'sqrtf' was not declared"),                          # C's math library is not Metal's
])
def test_check_fails_where_metal_would(check, edit, message):
  src = MetalRenderer().render("E_2", seed003()).replace(*edit)
  with pytest.raises(CompileError) as e: check.compile(src)
  assert str(e.value).startswith("metal-syntax failed to compile:") and message in str(e.value)
  assert "kernel.metal:" in str(e.value) or "attributes" in message

def test_mixed_half_float_call_is_ambiguous(check):
  src = MetalRenderer().render("E_2", seed003()).replace("int v11 =", "half h = max((half)1, 2.0f); int v11 =")
  with pytest.raises(CompileError, match="ambiguous"): check.compile(src)

def test_tensor_cores_and_limits():
  r = MetalRenderer()
  assert {(tc.dims, tc.threads, tc.elements) for tc in r.tensor_cores} == {((8, 8, 8), 32, (2, 2, 2))}
  assert {(tc.dtype_in, tc.dtype_out) for tc in r.tensor_cores} >= {(dtypes.float16, dtypes.float32), (dtypes.float32, dtypes.float32)}
  assert r.has_local and r.has_shared and r.shared_max == 32 * 1024 and r.local_max == (1024, 1024, 1024)

def test_devices_listing():
  rows = {r.name: r for r in Device.listing()}
  assert rows["METAL_CHECK"].status == "available" and "against a stand-in metal_stdlib" in rows["METAL_CHECK"].info
  if sys.platform != "darwin": assert rows["METAL"].status == "unavailable" and rows["METAL"].detail == f"Metal needs macOS (this is {sys.platform})"

def test_metal_check_runs_tensor_programs():
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((9, 7)).astype(np.float32), rng.standard_normal((7, 5)).astype(np.float32)
  got = (Tensor(a, device="METAL_CHECK") @ Tensor(b, device="METAL_CHECK")).relu().sum(axis=1).numpy()
  np.testing.assert_allclose(got, np.maximum(a @ b, 0).sum(1), rtol=1e-5, atol=1e-5)
  h = rng.standard_normal(100).astype(np.float16)
  want = (h * np.float16(3) - np.float16(1)).astype(np.int8)  # computed in half, then truncated
  np.testing.assert_array_equal((Tensor(h, device="METAL_CHECK") * 3 - 1).cast(dtypes.int8).numpy(), want)

def test_elementwise_and_matmul_use_float4():
  """What DEBUG=4 shows: float4 loads and stores through packed_float4, checked against the stand-in metal_stdlib; the
  METAL_CHECK interpreter runs the same program."""
  from tinyspec.conformance.test_vectors import elementwise_and_matmul
  elementwise, matmul = elementwise_and_matmul("METAL_CHECK")
  assert "= float4(*((const device packed_float4*)(data1 + " in elementwise.source, elementwise.source
  assert "*((device packed_float4*)(data0 + " in elementwise.source and "packed_float4*)(data" in matmul.source, matmul.source

def simdgroup_element(operand: str, lane: int, i: int) -> tuple[int, int]:
  """(row, column) of thread_elements()[i] of an 8x8 simdgroup matrix in SIMD lane `lane`, as measured on Apple GPUs
  (Apple documents no layout): a quad of lanes covers 2x2 pairs of columns; written out independently of the table."""
  row = (lane >> 1 & 1) + 2 * (lane >> 2 & 1) + 4 * (lane >> 4 & 1)
  col = 2 * (lane & 1) + 4 * (lane >> 3 & 1) + i
  if operand == "C": return row, col
  # A's rows and B's columns are C's; the shared dimension takes the other lane bits
  k_a, k_b = 2 * (lane & 1) + 4 * (lane >> 3 & 1) + i, (lane >> 1 & 1) + 2 * (lane >> 2 & 1) + 4 * (lane >> 4 & 1)
  return (row, k_a) if operand == "A" else (k_b, col)

def test_tensor_core_layout_is_simdgroup_matrix():
  for tc in MetalRenderer().tensor_cores:
    for operand in "ABC":
      assert [tc.coords(operand, lane, i) for lane in range(32) for i in range(2)] == \
             [simdgroup_element(operand, lane, i) for lane in range(32) for i in range(2)], (tc, operand)

def test_debug_4_shows_simdgroup_matrix_code(capsys, monkeypatch):
  monkeypatch.setenv("DEBUG", "4")
  a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float16)
  with compiled():
    got = (Tensor(a, device="METAL_CHECK") @ Tensor(a, device="METAL_CHECK")).numpy()
  np.testing.assert_allclose(got.astype(np.float32), a.astype(np.float32) @ a.astype(np.float32), rtol=2e-2, atol=5e-2)
  out = capsys.readouterr().out
  assert "simdgroup_half8x8" in out and "simdgroup_multiply_accumulate(" in out and "thread_elements()[1]" in out
