"""The LLVM IR renderer's text, without compiling it (llvmlite is the CPU plugin's, not the core's): function signature
and noalias pointers, loops as phi blocks, accumulators, the reassociation allowed on reductions only, a THREAD
axis as the core_id, gated loads, constants, and the header a runtime reads."""
import subprocess
import sys

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.conformance.builders import after, barrier, end, f32, i32, load, local, lower, param, special, store
from tinyspec.engine.callify import callify
from tinyspec.engine.expand import expand
from tinyspec.engine.isel import isel
from tinyspec.engine.linearize import linearize
from tinyspec.engine.optimize import Opt, OptOps, optimize
from tinyspec.engine.rangeify import rangeify
from tinyspec.renderer.llvmir import KernelInfo, LLVMRenderer, const
from tinyspec.uop import AxisType, Ops, UOp


class Sequential(LLVMRenderer): device = "TEST"
class Threaded(LLVMRenderer): device, threads = "TEST", 4

def kernel(t: Tensor, opts: list[Opt] | None = None) -> UOp:
  """The LINEAR program of the one kernel that computes `t` (with `opts`, if any)."""
  items = rangeify(callify(t.uop)).items
  assert len(items) == 1
  return linearize(isel(expand(optimize(items[0].ast, Sequential(), opts or [])), LLVMRenderer.native))

def vec(n: int, dt=np.float32) -> Tensor: return Tensor(np.arange(n, dtype=dt), device="PYTHON")

def test_elementwise_kernel():
  src = Sequential().render("E_16", kernel(vec(16) + vec(16)))
  assert "define void @E_16(ptr noalias %data0, ptr noalias %data1, ptr noalias %data2) #0 {" in src
  assert src.count("phi i64") == 1 and "icmp slt i64 %r1, 16" in src and "add nuw nsw i64 %r1, 1" in src
  assert "fadd float" in src and "reassoc" not in src and "alloca" not in src
  assert src.count("store float") == 1 and src.count("load float") == 2
  assert KernelInfo.parse(src) == KernelInfo(("float32", "float32", "float32"), (), None, 16)

def test_reduce_kernel_accumulates_in_a_register():
  src = Sequential().render("r_4_8", kernel((vec(32) + vec(32)).reshape(4, 8).sum(axis=1)))
  assert "%acc0 = alloca [1 x float]" in src
  assert src.index("alloca") < src.index("br label")  # in the entry block, where LLVM promotes it to a register
  assert src.count("phi i64") == 2 and "store float 0x0000000000000000" in src  # two loops; the identity stored first
  assert src.count("fadd reassoc nsz float") == 1 and src.count("fadd float") == 1  # only the accumulation may reassociate

def test_max_reduce_keeps_nan_and_starts_at_minus_inf():
  src = Sequential().render("r_8", kernel(vec(8).max()))
  assert "call float @llvm.maximum.f32(" in src and "declare float @llvm.maximum.f32(float, float)" in src
  assert "store float 0xFFF0000000000000" in src

def test_a_thread_axis_is_the_core_id():
  # rows 0-2 and 3-5 of a (6, 5) kernel as a THREAD axis of 2: one call per value, which is the core_id argument
  k = kernel(vec(30).reshape(6, 5) * 2, [Opt(OptOps.SPLIT, 0, (2, AxisType.THREAD, True))])
  src = Threaded().render("E_2_3_5", k)
  assert "ptr noalias %data1, i64 %core_id) #0 {" in src and src.count("phi i64") == 2  # loops over 3 rows and 5 columns
  info = KernelInfo.parse(src)
  assert info.calls == 2 and info.work == 30
  one = Sequential().render("E_2_3_5", k)  # a target without threads loops over the THREAD axis
  assert "core_id" not in one and one.count("phi i64") == 3 and KernelInfo.parse(one).calls is None

def test_gated_load_branches_around_the_load():
  r = UOp.range(8, 0)
  lin = lower(end(store(param(0, 8, f32), r, load(param(1, 8, f32), r + -2, UOp.const(-1.0, f32), UOp.const(1) < r)), r))
  src = Sequential().render("shifted", lin)
  lines = src.splitlines()
  br = next(i for i, line in enumerate(lines) if line.strip().startswith("br i1") and "%then" in line)
  assert lines[br + 1].startswith("then") and "load float" in lines[br + 2]
  assert any("phi float" in line and "0xBFF0000000000000" in line for line in lines)  # alt -1.0 where the gate is false

def test_integer_division_is_guarded():
  r = UOp.range(4, 0)
  a, b = load(param(1, 4, i32), r), load(param(2, 4, i32), r)
  src = Sequential().render("div", lower(end(store(param(0, 4, i32), r, UOp(Ops.IDIV, (a, b))), r)))
  assert "sdiv i32" in src and "icmp eq i32" in src and "select i1" in src  # x // 0 and MIN // -1 never reach sdiv

def test_variables_come_after_the_buffers():
  n = UOp.variable("n", 0, 8)
  r = UOp.range(n, 0)
  src = Sequential().render("k", lower(end(store(param(0, 8, i32), r, (r * n).cast(i32)), r)))
  assert "define void @k(ptr noalias %data0, i64 %var0) #0 {" in src and KernelInfo.parse(src).variables == ("n",)

@pytest.mark.parametrize("value, dt, text", [
  (float("nan"), dtypes.float32, "0x7FF8000000000000"), (float("inf"), dtypes.float64, "0x7FF0000000000000"),
  (0.1, dtypes.float32, "0x3FB99999A0000000"), (1.5, dtypes.float16, "0xH3E00"), (True, dtypes.bool, "true"),
  (2 ** 32 - 1, dtypes.uint32, "-1"), (-5, dtypes.int8, "-5"), (1.00390625, dtypes.bfloat16, "0x3FF0000000000000"),
])
def test_constants(value, dt, text):
  assert const(value, dt) == text

def test_workgroups_are_not_supported():
  lin = lower(store(param(0, 4, f32), special("gidx0", 4), UOp.const(1.0, f32)))
  with pytest.raises(NotImplementedError, match="SPECIAL is not supported"): Sequential().render("k", lin)

class Gpu(LLVMRenderer):
  """A made-up GPU target: every hook a GPU subclass sets."""
  device, kernel_cc, global_addrspace, local_addrspace, reg_addrspace = "TESTGPU", "test_kernel", 1, 3, 5
  barrier = ("fence syncscope(\"workgroup\") release", "call void @llvm.test.barrier()")
  def special(self, name): return f"llvm.test.{name}"

def test_gpu_hooks():
  g, lane, r = special("gidx0", 2), special("lidx0", 4), UOp.range(3, 0, AxisType.REDUCE)
  lb = local(4)
  acc = UOp(Ops.REDUCE, (load(param(1, 24, f32), (g * 4 + lane) * 3 + r), r), (Ops.ADD, ()))
  lin = lower(store(param(0, 8, f32), g * 4 + lane, load(after(lb, barrier(store(lb, lane, acc))), lane)))
  src = Gpu().render("k", lin)
  assert "define test_kernel void @k(ptr addrspace(1) noalias %data0, ptr addrspace(1) noalias %data1) #0 {" in src
  assert "@local0 = internal addrspace(3) global [4 x float] undef, align 16" in src and "store float %t" in src
  assert "= alloca [1 x float], addrspace(5)" in src and "load float, ptr addrspace(5)" in src  # the accumulator
  assert "call i32 @llvm.test.gidx0()" in src and "declare i32 @llvm.test.lidx0()" in src and "zext i32" in src
  assert "getelementptr inbounds float, ptr addrspace(3) @local0" in src and "load float, ptr addrspace(1)" in src
  assert src.index("release") < src.index("call void @llvm.test.barrier()") < src.rindex("load float, ptr addrspace(3)")
  assert "declare void @llvm.test.barrier()" in src

def test_cpu_defaults_use_one_address_space():
  src = Sequential().render("r_4_8", kernel(vec(32).reshape(4, 8).sum(axis=1)))
  assert "addrspace" not in src and "define void @r_4_8(ptr noalias %data0" in src
  lin = lower(store(local(4), UOp.const(0), UOp.const(1.0, f32)))
  with pytest.raises(NotImplementedError, match="LOCAL buffers need workgroups"): Sequential().render("k", lin)

def test_renders_without_llvmlite():
  code = "import sys, tinyspec.renderer.llvmir; sys.exit('llvmlite' in sys.modules)"
  assert subprocess.run([sys.executable, "-c", code]).returncode == 0
