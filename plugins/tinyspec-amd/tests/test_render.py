"""AMDGPU LLVM IR rendered without a GPU or llvmlite: seed 003's `a + b` and cast kernels (signature, address spaces,
indexing, the cast instruction), SPECIAL indices, LOCAL buffers, barriers, private accumulators, the tensor-core tables."""
import re
import subprocess
import sys

import pytest
from tinyspec.conformance.builders import ZERO, after, barrier, end, f32, i32, load, local, lower, param, seed003_add, special, store
from tinyspec.uop import AxisType, Ops, UOp
from tinyspec_amd.renderer import ARCHS, TENSOR_CORES, AMDRenderer, family

SIG3 = "(ptr addrspace(1) noalias %data0, ptr addrspace(1) noalias %data1, ptr addrspace(1) noalias %data2) #0 {"

def add_kernel(n: int, idx: UOp, out=i32) -> UOp: return lower(seed003_add(n, out, idx=idx))

def test_add_one_element():
  src = AMDRenderer().render("E_", add_kernel(1, ZERO))
  assert f"define amdgpu_kernel void @E_{SIG3}" in src
  assert "getelementptr inbounds i32, ptr addrspace(1) %data1, i64 0" in src and "getelementptr inbounds i32, ptr addrspace(1) %data2, i64 0" in src
  assert re.search(r"%t\d+ = add i32 %t\d+, %t\d+", src) and re.search(r"store i32 %t\d+, ptr addrspace\(1\) %t\d+", src)
  assert "llvm.amdgcn" not in src and "alloca" not in src

def test_add_over_lanes_indexes_by_workitem_id():
  src = AMDRenderer().render("E_3", add_kernel(3, special("lidx0", 3)))
  lane = re.search(r"(%t\d+) = call i32 @llvm\.amdgcn\.workitem\.id\.x\(\)", src).group(1)
  idx = re.search(rf"(%t\d+) = zext i32 {lane} to i64", src).group(1)
  for k in range(3): assert f"getelementptr inbounds i32, ptr addrspace(1) %data{k}, i64 {idx}" in src
  assert "declare i32 @llvm.amdgcn.workitem.id.x()" in src

def test_cast_kernel():
  src = AMDRenderer().render("E_2", add_kernel(2, special("lidx0", 2), f32))
  s = re.search(r"(%t\d+) = add i32 %t\d+, %t\d+", src).group(1)
  f = re.search(rf"(%t\d+) = sitofp i32 {s} to float", src).group(1)
  assert re.search(rf"store float {f}, ptr addrspace\(1\) %t\d+", src)
  assert "getelementptr inbounds float, ptr addrspace(1) %data0" in src and "load i32, ptr addrspace(1)" in src

@pytest.mark.parametrize("name, intrinsic", [("gidx0", "workgroup.id.x"), ("gidx1", "workgroup.id.y"), ("gidx2", "workgroup.id.z"),
                                             ("lidx0", "workitem.id.x"), ("lidx1", "workitem.id.y"), ("lidx2", "workitem.id.z")])
def test_specials(name, intrinsic):
  assert AMDRenderer().special(name) == f"llvm.amdgcn.{intrinsic}"

def test_unknown_special_is_refused():
  linear = lower(store(param(0, 4, f32), special("gidx3", 4), UOp.const(1.0, f32)))
  with pytest.raises(ValueError, match="unknown SPECIAL 'gidx3'"): AMDRenderer().render("k", linear)

def test_local_buffer_and_barrier():
  g, lane = special("gidx0", 2), special("lidx0", 8)
  lb = local(8)
  filled = store(lb, lane, load(param(1, 16, f32), g * 8 + lane))
  src = AMDRenderer().render("rev", lower(store(param(0, 16, f32), g * 8 + lane, load(after(lb, barrier(filled)), lane * -1 + 7))))
  assert "@local0 = internal addrspace(3) global [8 x float] undef, align 16" in src
  assert "getelementptr inbounds float, ptr addrspace(3) @local0" in src and "store float" in src and "load float, ptr addrspace(3)" in src
  at = [src.index(s) for s in ("store float %t", 'fence syncscope("workgroup") release', "call void @llvm.amdgcn.s.barrier()",
                               'fence syncscope("workgroup") acquire', "load float, ptr addrspace(3)")]
  assert at == sorted(at)  # the LDS write, then release, barrier, acquire, then the read
  assert "declare void @llvm.amdgcn.s.barrier()" in src and "declare i32 @llvm.amdgcn.workgroup.id.x()" in src

def test_accumulator_is_private_memory():
  r = UOp.range(8, 0, AxisType.REDUCE)
  src = AMDRenderer().render("r_8", lower(store(param(0, 1, f32), ZERO, UOp(Ops.REDUCE, (load(param(1, 8, f32), r), r), (Ops.ADD, ())))))
  assert "%acc0 = alloca [1 x float], addrspace(5)" in src and "store float 0x0000000000000000, ptr addrspace(5)" in src
  assert "load float, ptr addrspace(5)" in src and "core_id" not in src  # one lane runs the loop: no CPU thread split

def test_loop_with_variable():
  n = UOp.variable("n", 1, 8)
  r = UOp.range(n, 0)
  src = AMDRenderer().render("k", lower(end(store(param(0, 8, i32), r, (r * 2).cast(i32)), r)))
  assert "define amdgpu_kernel void @k(ptr addrspace(1) noalias %data0, i64 %var0) #0 {" in src and "icmp slt i64 %r" in src

def test_tensor_cores():
  for arch in ("gfx1100", "gfx1201"):
    wmma = next(tc for tc in AMDRenderer(arch).tensor_cores if tc.dtype_in.name == "float16" and tc.dtype_out.name == "float32")
    # RDNA3 holds each value of A and B in two lanes (16 per lane), RDNA4 in one
    assert (wmma.dims, wmma.threads, wmma.elements) == ((16, 16, 16), 32, (16, 16, 8) if arch == "gfx1100" else (8, 8, 8))
    assert "v_wmma_f32_16x16x16_f16" in wmma.name
  mfma = AMDRenderer("gfx942").tensor_cores
  assert {tc.threads for tc in mfma} == {64} and any(tc.dims == (32, 32, 8) and tc.elements == (4, 4, 16) for tc in mfma)
  assert [family(a) for a in ARCHS] == ["gfx11", "gfx9", "gfx12"] and set(TENSOR_CORES) == {"gfx9", "gfx11", "gfx12"}
  with pytest.raises(ValueError, match="not an AMD GPU arch"): AMDRenderer("sm_90")

def test_limits():
  r = AMDRenderer()
  assert r.has_local and r.has_shared and r.local_max == (1024, 1024, 1024) and r.shared_max == 65536 and r.threads == 1
  assert {d.name for d in r.supported_dtypes} >= {"bool", "int8", "uint64", "float16", "bfloat16", "float32", "float64"}

def test_renders_without_llvmlite():
  code = "import sys, tinyspec_amd.plugin, tinyspec_amd.renderer; sys.exit('llvmlite' in sys.modules)"
  assert subprocess.run([sys.executable, "-c", code]).returncode == 0

def manual_fragment(fam: str, tc, operand: str, lane: int, i: int) -> tuple[int, int]:
  """(row, column) of value i of a lane's fragment, as AMD documents them (RDNA3: GPUOpen's "How to accelerate AI
  applications on RDNA 3 using WMMA"; CDNA3: the MI300 ISA's and AMD's matrix instruction calculator; RDNA4: as tinygrad's
  gfx12 table places them, not yet checked on hardware), written out here independently of the tables' layout strings."""
  if fam == "gfx11": return {"A": (lane % 16, i), "B": (i, lane % 16), "C": (2 * i + lane // 16, lane % 16)}[operand]
  if fam == "gfx12":
    k = i % 4 + 4 * (lane // 16) + 8 * (i // 4)
    return {"A": (lane % 16, k), "B": (k, lane % 16), "C": (i + 8 * (lane // 16), lane % 16)}[operand]
  m = tc.dims[0]  # gfx9: 16x16x16 or 32x32x8 on 64 lanes
  k = 4 * (lane // m) + i
  c_row = 4 * (lane // 16) + i if m == 16 else 8 * (i // 4) + 4 * (lane // 32) + i % 4
  return {"A": (lane % m, k), "B": (k, lane % m), "C": (c_row, lane % m)}[operand]

@pytest.mark.parametrize("fam", sorted(TENSOR_CORES))
def test_tensor_core_layouts_are_amds(fam):
  for tc in TENSOR_CORES[fam]:
    for operand, count in zip("ABC", tc.elements):
      got = [tc.coords(operand, lane, i) for lane in range(tc.threads) for i in range(count)]
      assert got == [manual_fragment(fam, tc, operand, lane, i) for lane in range(tc.threads) for i in range(count)], (tc, operand)
