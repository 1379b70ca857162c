"""Code objects from llvmlite's AMDGPU target for gfx1100, gfx942 and gfx1201: a kernel with SPECIALs, LDS and barriers
builds for each (checked in the ELF header), every dtype builds, errors carry LLVM's message, and AMD_CHECK runs kernels."""
import struct

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.conformance.builders import end, load, lower, param, store, workgroup_tree_sum
from tinyspec.conformance.test_tensor_cores import run_tensor_core_cases
from tinyspec.conformance.test_vectors import compiled
from tinyspec.device import CompileError, Device
from tinyspec.uop import Ops, UOp
from tinyspec_amd.compiler import CODE_OBJECT_VERSION, AMDCompiler, unpack
from tinyspec_amd.renderer import ARCHS, AMDRenderer

EF_AMDGPU_MACH = {"gfx1100": 0x041, "gfx942": 0x04C, "gfx1201": 0x04E}  # e_flags & 0xff, as AMDGPUUsage lists them

@pytest.fixture(scope="module")
def compiler(): return AMDCompiler(ARCHS)

def tree_sum() -> UOp: return lower(workgroup_tree_sum())  # the conformance suite's LDS-and-barrier kernel

def test_workgroup_kernel_builds_for_every_arch(compiler):
  info, objs = unpack(compiler.compile(AMDRenderer().render("tree_sum", tree_sum())))
  assert info.buffers == ("float32", "float32") and list(objs) == list(ARCHS)
  for arch, obj in objs.items():
    assert obj[:4] == b"\x7fELF" and obj[7] == 64 and obj[8] == CODE_OBJECT_VERSION - 2  # ELFOSABI_AMDGPU_HSA, ABI version 3 is v5
    assert struct.unpack_from("<H", obj, 18)[0] == 224, arch  # EM_AMDGPU
    assert struct.unpack_from("<I", obj, 48)[0] & 0xFF == EF_AMDGPU_MACH[arch], arch
    assert b"tree_sum.kd" in obj  # the kernel descriptor HIP looks the kernel up by

def test_version_names_the_targets(compiler):
  assert all(a in compiler.version for a in ARCHS) and "amdgcn-amd-amdhsa" in compiler.version and "LLVM 22" in compiler.version
  assert AMDCompiler(("gfx942",)).version != compiler.version  # another target, another cache entry

@pytest.mark.parametrize("dt", [dtypes.bool, dtypes.int8, dtypes.uint16, dtypes.int64, dtypes.float16, dtypes.bfloat16, dtypes.float64])
def test_every_dtype_builds(compiler, dt):
  r = UOp.range(16, 0)
  x, y = load(param(1, 16, dt), r), load(param(2, 16, dt), r)
  val = (x + y * x).maximum(y) if dt is not dtypes.bool else x ^ y
  src = AMDRenderer().render("k", lower(end(store(param(0, 16, dt), r, val), r)))
  assert len(unpack(compiler.compile(src))[1]) == 3

def test_integer_division_and_casts_build(compiler):
  r = UOp.range(8, 0)
  a, b = load(param(1, 8, dtypes.int64), r), load(param(2, 8, dtypes.int64), r)
  val = UOp(Ops.SQRT, ((a // b + a % b).cast(dtypes.float16).cast(dtypes.float64),)).cast(dtypes.uint64)
  assert len(unpack(compiler.compile(AMDRenderer().render("k", lower(end(store(param(0, 8, dtypes.uint64), r, val), r)))))[1]) == 3

def test_compile_error_carries_llvm_message(compiler, monkeypatch):
  monkeypatch.setenv("DEBUG", "4")  # the numbered source is in the message only at DEBUG>=4
  src = AMDRenderer().render("k", tree_sum()).replace("zext i32", "zext float", 1)
  with pytest.raises(CompileError, match=r"(?s)llvmlite-amdgpu \(gfx1100\) failed to compile:\n.*:6:20: error: '%t1' defined with type 'i32'") as e:
    compiler.compile(src)
  assert "define amdgpu_kernel void @k(" in str(e.value)  # the numbered source follows LLVM's message
  with pytest.raises(CompileError, match="without a '; tinyspec' header"): compiler.compile("define void @k() { ret void }")

def test_check_device_runs_kernels():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  np.testing.assert_allclose((Tensor(x, device="AMD_CHECK") * 2 + 1).sum(axis=1).numpy(), (x * 2 + 1).sum(axis=1))

@pytest.mark.parametrize("arch", ARCHS)
def test_tensor_cores_build_for_their_family_and_run_exactly(arch):
  renderer = AMDRenderer(arch)
  with Device["AMD_CHECK"].building_for(renderer, AMDCompiler((arch,)), comment=";"):
    for tc in renderer.tensor_cores: run_tensor_core_cases("AMD_CHECK", tc)

def test_a_matrix_intrinsic_is_built_for_its_family_only(capsys, monkeypatch):
  monkeypatch.setenv("DEBUG", "4")
  a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float16)
  with compiled() as kernels: got = (Tensor(a, device="AMD_CHECK") @ Tensor(a, device="AMD_CHECK")).numpy()
  np.testing.assert_allclose(got.astype(np.float32), a.astype(np.float32) @ a.astype(np.float32), rtol=2e-2, atol=5e-2)
  assert "call <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v16f16(<16 x half>" in capsys.readouterr().out
  [wmma] = [k for k in kernels if "llvm.amdgcn.wmma" in k.source]
  with pytest.raises(CompileError, match="calls matrix instructions of gfx11, none of gfx942"): AMDCompiler(("gfx942",)).compile(wmma.source)
