"""LLVM IR to AMDGPU code objects with llvmlite's amdgcn target (no ROCm needed), for one or several archs.

The binary is the source's `; tinyspec` header line, a line of JSON naming each arch and the length of its object, then
the objects (relocatable ELF, code object version 5) one after another. HIP loads a linked code object: the runtime links
the object for its arch with ROCm's `ld.lld -shared` (see runtime.py) when it loads a program.
"""
from __future__ import annotations

import functools
import json
import threading

import llvmlite
import llvmlite.binding as llvm
from tinyspec.device import CompileError, Compiler, llvm_o3
from tinyspec.renderer.llvmir import KernelInfo

from tinyspec_amd.renderer import TENSOR_CORES, AMDRenderer, family

TRIPLE = "amdgcn-amd-amdhsa"
CODE_OBJECT_VERSION = 5
"""Code object v5: what ROCm 5.3 and every later ROCm loads (LLVM 22 would default to v6, which needs ROCm 6.3+)."""
_COV = f'\n!llvm.module.flags = !{{!0}}\n!0 = !{{i32 1, !"amdhsa_code_object_version", i32 {CODE_OBJECT_VERSION}00}}\n'

@functools.cache
def _target() -> llvm.Target:
  llvm.initialize_all_targets()
  llvm.initialize_all_asmprinters()
  try: return llvm.Target.from_triple(TRIPLE)
  except RuntimeError as e: raise RuntimeError(f"this llvmlite's LLVM has no AMDGPU target ({e})") from None

def llvm_version() -> str: return ".".join(map(str, llvm.llvm_version_info))

@functools.cache
def matrix_intrinsics() -> dict[str, str]:
  """{LLVM intrinsic: the arch family that has it} for every tensor-core table entry (renderer.TENSOR_CORES)."""
  return {AMDRenderer(f"{fam}00").wmma_intrinsic(tc)[0]: fam for fam, tcs in TENSOR_CORES.items() for tc in tcs}

class AMDCompiler(Compiler):
  """Builds each kernel for every arch in `archs` (O3), failing with LLVM's message on the first that cannot be built."""
  name = "llvmlite-amdgpu"
  def __init__(self, archs: tuple[str, ...]):
    if not archs: raise ValueError("AMDCompiler needs at least one arch")
    self.archs = archs
    self.version = f"llvmlite {llvmlite.__version__} LLVM {llvm_version()} {TRIPLE} {','.join(archs)} O3 cov{CODE_OBJECT_VERSION}"
    target = _target()
    self.machines = {a: target.create_target_machine(cpu=a, opt=3, reloc="pic") for a in archs}
    self.pipelines = {a: llvm_o3.O3Pipeline(tm, llvm.create_pipeline_tuning_options(speed_level=3)) for a, tm in self.machines.items()}
    self.lock = threading.Lock()  # one llvmlite pass pipeline at a time

  def compile(self, src: str) -> bytes:
    try: KernelInfo.parse(src)  # the runtime needs the header: refuse source without one here, not at load
    except (ValueError, KeyError) as e: raise CompileError(self.name, str(e), src) from None
    header = src.split("\n", 1)[0]
    # a matrix intrinsic exists on its family only (LLVM aborts the process on another): such a kernel is built for those
    needs = {fam for name, fam in matrix_intrinsics().items() if f"@{name}(" in src}
    archs = [a for a in self.archs if not needs or family(a) in needs]
    if not archs:
      raise CompileError(self.name, f"the kernel calls matrix instructions of {', '.join(sorted(needs))}, none of {', '.join(self.archs)}", src)
    objs = {arch: self._object(src, arch, self.machines[arch]) for arch in archs}
    return f"{header}\n{json.dumps({a: len(o) for a, o in objs.items()})}\n".encode() + b"".join(objs.values())

  def _object(self, src: str, arch: str, tm: llvm.TargetMachine) -> bytes:
    with self.lock:
      try:  # parsing and the verifier catch bad IR as exceptions; the module is fresh per arch, codegen changes it
        mod = llvm.parse_assembly(src + _COV, context=llvm.create_context())  # its own context, freed with the module
        mod.triple, mod.data_layout = TRIPLE, str(tm.target_data)
        mod.verify()
      except RuntimeError as e: raise CompileError(f"{self.name} ({arch})", str(e), src) from None
      self.pipelines[arch].optimize(mod)
      return tm.emit_object(mod)

def unpack(binary: bytes) -> tuple[KernelInfo, dict[str, bytes]]:
  """The kernel info and the object for each arch, from what `AMDCompiler.compile` returned."""
  header, sizes, rest = binary.split(b"\n", 2)
  objs, at = {}, 0
  for arch, n in json.loads(sizes).items(): objs[arch], at = rest[at:at + n], at + n
  return KernelInfo.parse(header.decode()), objs
