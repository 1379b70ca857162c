"""The CUDA plugin without a GPU: seed 003's kernels rendered by hand, every kernel compiled by NVRTC for the four target
architectures, compile errors, the devices it lists, and CUDA_CHECK running kernels on the interpreter against numpy."""
import ctypes
import importlib.util

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.conformance.builders import f32, i32, load, lower, param, seed003_add, special, store, workgroup_tree_sum
from tinyspec.conformance.test_tensor_cores import run_tensor_core_cases
from tinyspec.conformance.test_vectors import compiled
from tinyspec.device import CompileError, Device
from tinyspec.uop import Ops, UOp
from tinyspec_cuda.compiler import NVRTCCompiler
from tinyspec_cuda.renderer import CUDARenderer
from tinyspec_cuda.runtime import compiler_for

ARCHS = ("sm_75", "sm_80", "sm_89", "sm_90")

def seed003(n: int = 2, out=i32, how: str = "") -> UOp: return lower(seed003_add(n, out, bitcast=how == "bitcast"))
def tree_sum() -> UOp: return lower(workgroup_tree_sum())

def test_seed003_add_renders_as_cuda():
  src = CUDARenderer().render("E_2", seed003())
  assert 'extern "C" __global__ void __launch_bounds__(2) E_2(int* data0, int* data1, int* data2) {' in src
  assert "long long lidx0 = threadIdx.x; /* 2 */" in src
  assert "data1[lidx0]" in src and "data2[lidx0]" in src and "data0[lidx0] = v" in src
  assert "#include" not in src  # no half, no headers
  one = CUDARenderer().render("E_", seed003(1))
  assert 'extern "C" __global__ void E_(int* data0, int* data1, int* data2) {' in one and "data1[0]" in one and "threadIdx" not in one

def test_seed003_cast_and_bitcast_render_as_cuda():
  assert "float v12 = (float)v11;" in CUDARenderer().render("E_2", seed003(out=f32, how="cast"))
  assert "float v12 = __uint_as_float((unsigned int)v11);" in CUDARenderer().render("E_2", seed003(out=f32, how="bitcast"))

@pytest.mark.parametrize("how", ["", "cast", "bitcast"])
def test_seed003_compiles_to_cubin_and_ptx_for_every_arch(how):
  src = CUDARenderer().render("E_2", seed003(out=i32 if not how else f32, how=how))
  for arch in ARCHS:
    assert NVRTCCompiler((arch,)).compile(src)[:4] == b"\x7fELF"  # a cubin is an ELF file
    ptx = NVRTCCompiler((arch,), ptx=True).compile(src).decode()
    assert f".target {arch}" in ptx and ".entry E_2" in ptx

def test_workgroup_kernel_renders_compiles_and_runs():
  src = CUDARenderer().render("tree", tree_sum())
  assert "__shared__ float local0[8];" in src and src.count("__syncthreads();") == 7
  assert "long long gidx0 = blockIdx.x; /* 3 */" in src and "__launch_bounds__(8)" in src
  assert NVRTCCompiler(ARCHS).compile(src)[:4] == b"\x7fELF"
  rt = Device["CUDA_CHECK"]
  prog = rt.program("tree", rt.compiler.compile_cached(rt.renderer.render("tree", tree_sum())))
  x = np.random.default_rng(0).standard_normal(24).astype(np.float32)
  out, inp = rt.allocator.alloc(12), rt.allocator.alloc(96)
  rt.allocator.copyin(inp, memoryview(x).cast("B"))
  prog(out, inp, global_size=(3, 1, 1), local_size=(8, 1, 1), wait=True)
  got = np.empty(3, np.float32)
  rt.allocator.copyout(memoryview(got).cast("B"), out)
  np.testing.assert_allclose(got, x.reshape(3, 8).sum(1), rtol=1e-5)

def test_no_fused_multiply_add():
  # a*b+c must round twice, as numpy does; NVRTC fuses it into one fma unless told not to
  lin = lower(store(param(0, 4, f32), i := special("lidx0", 4), load(param(1, 4, f32), i) * load(param(2, 4, f32), i) + load(param(3, 4, f32), i)))
  ptx = NVRTCCompiler(("sm_90",), ptx=True).compile(CUDARenderer().render("mad", lin)).decode()
  assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx and "fma" not in ptx

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float64, dtypes.int8, dtypes.uint64, dtypes.bool])
def test_every_dtype_compiles(dt):
  # arithmetic, a comparison against a constant, max, sqrt, and casts to and from float and int64, in one kernel
  i = special("lidx0", 4)
  a, b = load(param(1, 4, dt), i), load(param(2, 4, dt), i)
  v = (a * b + a).maximum(b) if dt is not dtypes.bool else a & b
  flag = (v < UOp.const(1, dt)) if dt is not dtypes.bool else v
  mix = flag.where(UOp(Ops.SQRT, (v.cast(f32),)).cast(dt), v.cast(dtypes.int64).cast(dt))
  src = CUDARenderer().render("k", lower(store(param(0, 4, dt), i, mix)))
  assert ("#include <cuda_fp16.h>" in src) == (dt is dtypes.float16) and ("#include <cuda_bf16.h>" in src) == (dt is dtypes.bfloat16)
  for arch in ARCHS if dt is not dtypes.bfloat16 else ARCHS[1:]:  # bfloat16 arithmetic needs sm_80
    assert NVRTCCompiler((arch,)).compile(src)[:4] == b"\x7fELF"

@pytest.mark.parametrize("pair", [(dtypes.float16, dtypes.int16), (dtypes.uint16, dtypes.float16), (dtypes.bfloat16, dtypes.uint16),
                                  (dtypes.float16, dtypes.bfloat16), (dtypes.float32, dtypes.int32), (dtypes.uint32, dtypes.float32),
                                  (dtypes.float64, dtypes.uint64), (dtypes.int64, dtypes.float64), (dtypes.int32, dtypes.uint32)])
def test_bitcasts_compile(pair):
  src_dt, dst_dt = pair
  i = special("lidx0", 2)
  src = CUDARenderer().render("bc", lower(store(param(0, 2, dst_dt), i, load(param(1, 2, src_dt), i).bitcast(dst_dt))))
  assert "union" not in src and "memcpy" not in src
  assert NVRTCCompiler(("sm_80",)).compile(src)[:4] == b"\x7fELF"

def test_integers_convert_to_bfloat16_through_float():
  # as the interpreter converts them (a wide int to half goes through double, as numpy's conversion does)
  i = special("lidx0", 2)
  def cast(s, d): return CUDARenderer().render("c", lower(store(param(0, 2, d), i, load(param(1, 2, s), i).cast(d))))
  assert all("__float2bfloat16_rn((float)" in cast(s, dtypes.bfloat16) for s in (dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint64))
  assert "__double2bfloat16(" in cast(dtypes.float64, dtypes.bfloat16) and "__double2half((double)" in cast(dtypes.int32, dtypes.float16)

def test_constants_nan_inf_and_wide_ints_compile():
  i = special("lidx0", 2)
  vals = [UOp.const(float("inf"), f32), UOp.const(float("-inf"), dtypes.float16), UOp.const(float("nan"), dtypes.float64),
          UOp.const(3e38, dtypes.bfloat16), UOp.const(1e-40, dtypes.bfloat16)]
  stores = [store(param(k, 2, v.dtype), i, v) for k, v in enumerate(vals)]
  stores.append(store(param(len(vals), 2, dtypes.int64), i, load(param(len(vals) + 1, 2, dtypes.int64), i) * -2**63 + 2**40))
  src = CUDARenderer().render("consts", lower(*stores))
  assert "__int_as_float(0x7f800000)" in src and "1099511627776ll" in src and "__float2bfloat16_rn(" in src
  assert NVRTCCompiler(("sm_80", "sm_90")).compile(src)[:4] == b"\x7fELF"

def test_compile_error_carries_nvrtc_log_and_source(monkeypatch):
  monkeypatch.setenv("DEBUG", "4")  # the numbered source is in the message only at DEBUG>=4
  src = CUDARenderer().render("E_2", seed003()).replace("data2[lidx0]", "nope[lidx0]")
  with pytest.raises(CompileError) as e: NVRTCCompiler(("sm_80", "sm_90")).compile(src)
  msg = str(e.value)
  assert msg.startswith("nvrtc sm_80 failed to compile:") and 'identifier "nope" is undefined' in msg
  assert "kernel.cu(" in msg and "nope[lidx0];" in msg.split("--- source ---")[1]  # the numbered source follows the log

def test_unknown_architecture_is_refused():
  with pytest.raises(ValueError, match=r"NVRTC \d+\.\d+ cannot build for sm_52; it knows sm_75.*sm_90"): NVRTCCompiler(("sm_52",))

def test_compiler_for_a_gpu():
  assert compiler_for(90).archs == ("sm_90",) and not compiler_for(90).ptx
  newer = compiler_for(990)  # a GPU newer than this NVRTC knows: PTX for the newest arch it has, for the driver to build
  assert newer.ptx and int(newer.archs[0][3:]) < 990
  with pytest.raises(RuntimeError, match="this GPU is sm_50, older than any architecture"): compiler_for(50)

def test_tensor_core_tables():
  for arch in ("sm_75", "sm_80", "sm_90"):
    r = CUDARenderer(arch)
    assert r.tensor_cores and all(tc.threads == 32 and tc.name.startswith("mma.sync") for tc in r.tensor_cores)
    assert any(tc.dtype_in is dtypes.bfloat16 for tc in r.tensor_cores) == (arch != "sm_75") == (dtypes.bfloat16 in r.supported_dtypes)
  tc = next(t for t in CUDARenderer("sm_90").tensor_cores if t.dtype_in is dtypes.float16 and t.dtype_out is dtypes.float32)
  assert (tc.dims, tc.elements) == ((16, 8, 16), (8, 4, 4))
  assert dtypes.bfloat16 in Device["CUDA_CHECK"].renderer.supported_dtypes  # the interpreter running CUDA_CHECK computes in bfloat16 too

def test_devices_listing():
  rows = {r.name: r for r in Device.listing()}
  assert rows["CUDA_CHECK"].status == "available" and "NVRTC 13." in rows["CUDA_CHECK"].info and "sm_80, sm_90" in rows["CUDA_CHECK"].info
  cuda = rows["CUDA"]
  if cuda.status == "available": return
  # unavailable: the reason names everything that is missing, each with what to do
  try: ctypes.CDLL("libcuda.so.1")
  except OSError: assert "no NVIDIA driver (libcuda.so.1 not found)" in cuda.detail
  if importlib.util.find_spec("pycuda") is None: assert "pycuda not installed (pip install 'tinyspec-cuda[runtime]')" in cuda.detail

def test_cuda_check_runs_tensor_programs():
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((9, 7)).astype(np.float32), rng.standard_normal((7, 5)).astype(np.float32)
  got = (Tensor(a, device="CUDA_CHECK") @ Tensor(b, device="CUDA_CHECK")).relu().sum(axis=1).numpy()
  np.testing.assert_allclose(got, np.maximum(a @ b, 0).sum(1), rtol=1e-5, atol=1e-5)
  h = rng.standard_normal(100).astype(np.float16)
  want = (h * np.float16(3) - np.float16(1)).astype(np.int8)  # computed in half, then truncated
  np.testing.assert_array_equal((Tensor(h, device="CUDA_CHECK") * 3 - 1).cast(dtypes.int8).numpy(), want)

def test_every_op_family_reaches_nvrtc():
  # one program per op family through the whole pipeline; CUDA_CHECK compiles each kernel with NVRTC first
  x = Tensor(np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6), device="CUDA_CHECK")
  got = (x.exp2() + x.abs().sqrt() + x.sin() + (x > 0).where(x, -x).log2() - x.max(axis=1, keepdim=True)).numpy()
  xn = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
  want = np.exp2(xn) + np.sqrt(np.abs(xn)) + np.sin(xn) + np.log2(np.abs(xn)) - xn.max(1, keepdims=True)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
  assert Ops.SIN in Device["CUDA_CHECK"].renderer.native

def test_elementwise_and_matmul_use_float4():
  """What DEBUG=4 shows: float4 loads and stores, compiled by NVRTC; the CUDA_CHECK interpreter runs the same program."""
  from tinyspec.conformance.test_vectors import elementwise_and_matmul
  elementwise, matmul = elementwise_and_matmul("CUDA_CHECK")
  assert "float4 v" in elementwise.source and "= load_float4(data1 + " in elementwise.source and "store_float4(data0 + " in elementwise.source
  assert "= load_float4(data" in matmul.source, matmul.source

def ptx_fragment(tc, operand: str, lane: int, i: int) -> tuple[int, int]:
  """(row, column) of element i of a lane's fragment, as the PTX ISA's "Matrix Fragments for mma.m16n8k*" tables give them
  (groupID = lane >> 2, threadID_in_group = lane % 4), written out here independently of the tables' layout strings."""
  g, t = lane >> 2, lane % 4
  k, kind = tc.dims[2], tc.dtype_in
  if operand == "C": return g + 8 * (i >= 2), t * 2 + (i & 1)
  if kind is dtypes.float32:  # m16n8k8 tf32
    return (g + 8 * (i % 2), t + 4 * (i >= 2)) if operand == "A" else (t + 4 * i, g)
  if kind is dtypes.int8:  # m16n8k32 s8
    return (g + 8 * (i % 8 >= 4), t * 4 + (i & 3) + 16 * (i >= 8)) if operand == "A" else (t * 4 + (i & 3) + 16 * (i >= 4), g)
  if k == 8: return (g + 8 * (i >= 2), t * 2 + (i & 1)) if operand == "A" else (t * 2 + i, g)  # m16n8k8 f16
  return (g + 8 * (i in (2, 3, 6, 7)), t * 2 + (i & 1) + 8 * (i >= 4)) if operand == "A" else (t * 2 + (i & 1) + 8 * (i >= 2), g)

@pytest.mark.parametrize("arch", ["sm_75", "sm_80"])
def test_tensor_core_layouts_are_the_ptx_isa_fragments(arch):
  for tc in CUDARenderer(arch).tensor_cores:
    for operand, count in zip("ABC", tc.elements):
      got = [tc.coords(operand, lane, i) for lane in range(32) for i in range(count)]
      assert got == [ptx_fragment(tc, operand, lane, i) for lane in range(32) for i in range(count)], (tc, operand)

@pytest.mark.parametrize("arch", ["sm_75", "sm_80"])
def test_tensor_cores_compile_with_nvrtc_and_run_exactly(arch):
  rt = Device["CUDA_CHECK"]
  renderer = CUDARenderer(arch)
  with rt.building_for(renderer, NVRTCCompiler((arch,))):
    for tc in renderer.tensor_cores: run_tensor_core_cases("CUDA_CHECK", tc)

def test_debug_4_shows_mma_for_a_half_matmul(capsys, monkeypatch):
  monkeypatch.setenv("DEBUG", "4")
  a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float16)
  with compiled():
    got = (Tensor(a, device="CUDA_CHECK") @ Tensor(a, device="CUDA_CHECK")).numpy()
  np.testing.assert_allclose(got.astype(np.float32), (a.astype(np.float32) @ a.astype(np.float32)), rtol=2e-2, atol=5e-2)
  out = capsys.readouterr().out
  assert 'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32' in out and "TensorCore(mma.sync" in out
