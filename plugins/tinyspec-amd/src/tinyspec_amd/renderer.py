"""AMDGPU kernels as LLVM IR for the amdgcn target: core's `LLVMRenderer` with its GPU hooks set. Text only (no llvmlite
import), so kernels render on any machine.

A kernel is an `amdgpu_kernel` function whose buffers are global pointers (`ptr addrspace(1)`), LOCAL buffers are
`addrspace(3)` globals (LDS, one copy per workgroup), accumulators allocas in the private address space 5; a SPECIAL
gidxD reads `llvm.amdgcn.workgroup.id.{x,y,z}`, lidxD `llvm.amdgcn.workitem.id.{x,y,z}`; a BARRIER is a workgroup
release fence, `s_barrier` and an acquire fence, so LDS writes before it are seen by every lane after it.
"""
from __future__ import annotations

import re

from tinyspec.dtype import dtypes
from tinyspec.renderer import TensorCore
from tinyspec.renderer.llvmir import LLVMRenderer

ARCHS = ("gfx1100", "gfx942", "gfx1201")
"""The targets every kernel is built for by the AMD_CHECK device: RDNA3 (Radeon RX 7900), CDNA3 (Instinct MI300) and RDNA4
(Radeon RX 9070)."""

_F16, _BF16, _F32 = dtypes.float16, dtypes.bfloat16, dtypes.float32

# where each value lives (see TensorCore.layout), from AMD's manuals: RDNA3 holds a row of A (a column of B) in each lane,
# lanes 16-31 repeating lanes 0-15, and C's even rows in lanes 0-15, odd rows in 16-31; RDNA4 holds each value once
RDNA3 = ("m0 m1 m2 m3 - | k0 k1 k2 k3", "n0 n1 n2 n3 - | k0 k1 k2 k3", "n0 n1 n2 n3 m0 | m1 m2 m3")
RDNA4 = ("m0 m1 m2 m3 k2 | k0 k1 k3", "n0 n1 n2 n3 k2 | k0 k1 k3", "n0 n1 n2 n3 m3 | m0 m1 m2")
# CDNA3's MFMA on a wave64: lane % 16 (or % 32) is the row of A and column of B and C, the lane's quarter (half) picks k
MFMA_16 = ("m0 m1 m2 m3 k2 k3 | k0 k1", "n0 n1 n2 n3 k2 k3 | k0 k1", "n0 n1 n2 n3 m2 m3 | m0 m1")
MFMA_32 = ("m0 m1 m2 m3 m4 k2 | k0 k1", "n0 n1 n2 n3 n4 k2 | k0 k1", "n0 n1 n2 n3 n4 m2 | m0 m1 m3 m4")

def _wmma(layout, inp, out) -> TensorCore:
  name = f"v_wmma_{'f32' if out is _F32 else 'f16'}_16x16x16_{'f16' if inp is _F16 else 'bf16'}"
  return TensorCore((16, 16, 16), 32, (16, 16, 8) if layout is RDNA3 else (8, 8, 8), inp, out, name, layout)

def _mfma(dims, inp, layout) -> TensorCore:
  m, n, k = dims
  return TensorCore(dims, 64, (4, 4, m * n // 64), inp, _F32, f"v_mfma_f32_{m}x{n}x{k}_{'f16' if inp is _F16 else 'bf16'}", layout)

TENSOR_CORES: dict[str, tuple[TensorCore, ...]] = {
  # RDNA3's f16 result fills every other half of its registers, which no layout here spells: only f32 results on gfx11
  "gfx11": (_wmma(RDNA3, _F16, _F32), _wmma(RDNA3, _BF16, _F32)),
  "gfx12": (_wmma(RDNA4, _F16, _F32), _wmma(RDNA4, _BF16, _F32), _wmma(RDNA4, _F16, _F16)),
  "gfx9": (_mfma((16, 16, 16), _F16, MFMA_16), _mfma((16, 16, 16), _BF16, MFMA_16), _mfma((32, 32, 8), _F16, MFMA_32),
           _mfma((32, 32, 8), _BF16, MFMA_32)),
}
"""The matrix instructions of each AMD family (gfx9: CDNA's MFMA; gfx11, gfx12: RDNA's WMMA), keyed by the arch prefix."""

_SPECIAL = re.compile(r"(gidx|lidx)([012])")

def family(arch: str) -> str:
  """The family prefix of an arch name: "gfx1100" -> "gfx11", "gfx942" -> "gfx9"."""
  if not (m := re.fullmatch(r"gfx(\d+)[0-9a-f]{2}(:.*)?", arch)): raise ValueError(f"not an AMD GPU arch name: {arch!r} (expected e.g. gfx1100)")
  return f"gfx{m.group(1)}"

class AMDRenderer(LLVMRenderer):
  """LLVM IR for amdgcn-amd-amdhsa. `arch` picks the tensor-core table; the IR itself is the same for every arch."""
  device = "AMD"
  kernel_cc = "amdgpu_kernel"
  global_addrspace, local_addrspace, reg_addrspace = 1, 3, 5
  barrier = ('fence syncscope("workgroup") release', "call void @llvm.amdgcn.s.barrier()", 'fence syncscope("workgroup") acquire')
  has_local = has_shared = True
  local_max = (1024, 1024, 1024)  # HIP's maxThreadsDim; a workgroup holds at most 1024 lanes in all
  global_max = (2 ** 31 - 1, 65535, 65535)  # workgroups per grid dimension (HIP's maxGridSize for y and z is smaller)
  shared_max = 64 * 1024  # LDS per workgroup (gfx942 and RDNA have 64 KiB)
  # bfloat16 is computed in float registers (core's LLVM renderer), so LLVM handles every dtype on amdgcn

  def __init__(self, arch: str = ARCHS[0]):
    self.arch, self.tensor_cores = arch, TENSOR_CORES.get(family(arch), ())

  def special(self, name: str) -> str:
    if not (m := _SPECIAL.fullmatch(name)): raise ValueError(f"AMD render: unknown SPECIAL {name!r} (expected gidx0-2 or lidx0-2)")
    return f"llvm.amdgcn.{'workgroup' if m.group(1) == 'gidx' else 'workitem'}.id.{'xyz'[int(m.group(2))]}"

  def wmma_intrinsic(self, tc: TensorCore) -> tuple[str, str, tuple[str, ...]]:
    # LLVM's amdgcn intrinsics: bfloat16 goes in as its 16 bits (i16); MFMA takes three modifiers (cbsz, abid, blgp), 0 for
    # a plain product; an f16 result takes op_sel, false: in RDNA4's packed registers it is no choice
    m, n, k = tc.dims
    elem = "half" if tc.dtype_in is _F16 else "i16"
    a, out = f"v{tc.elements[0]}{'f16' if elem == 'half' else 'i16'}", f"v{tc.elements[2]}{'f32' if tc.dtype_out is _F32 else 'f16'}"
    if tc.threads == 64:
      return f"llvm.amdgcn.mfma.f32.{m}x{n}x{k}{'f16' if elem == 'half' else 'bf16.1k'}", elem, ("i32 0",) * 3
    kind = f"{'f32' if tc.dtype_out is _F32 else 'f16'}.16x16x16.{'f16' if elem == 'half' else 'bf16'}"
    return f"llvm.amdgcn.wmma.{kind}.{out}.{a}", elem, () if tc.dtype_out is _F32 else ("i1 false",)

  def __repr__(self): return f"<AMDRenderer {self.arch}>"
