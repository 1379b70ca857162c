"""The plugin's devices: `tinyspec devices` says what AMD is missing and that AMD_CHECK works; the AMD probe names each
missing piece; and the HIP runtime (memory, module loading, launch arguments, timing) against a stand-in for
libamdhip64, since no AMD GPU is here."""
import ctypes

import numpy as np
import pytest
import tinyspec_amd.runtime as hipmod
from tinyspec.cli import format_devices
from tinyspec.conformance.builders import end, f32, i32, load, lower, param, special, store
from tinyspec.device import Device
from tinyspec.uop import UOp
from tinyspec_amd.compiler import unpack


def test_devices_listing():
  rows = {r.name: r for r in Device.listing()}
  assert rows["AMD_CHECK"].status == "available" and all(a in rows["AMD_CHECK"].info for a in ("gfx1100", "gfx942", "gfx1201"))
  if hipmod.find_hip() is None: assert rows["AMD"].status == "unavailable" and "libamdhip64 not found" in rows["AMD"].detail
  table = format_devices(list(rows.values()))  # what `tinyspec devices` prints
  assert any(line.startswith("AMD_CHECK") and "tinyspec-amd 0.1.0" in line and "gfx942" in line for line in table.splitlines())

class FakeHIP:
  """Stands in for `hip.HIP`: device memory is host memory, a launch is recorded with its arguments decoded."""
  def __init__(self, count=1, arch="gfx942"):
    self.count, self.gpu, self.mem, self.calls, self.launches = count, arch, {}, [], []
  def device_count(self): return self.count
  def arch(self, device): return self.gpu
  def call(self, name, *args):
    self.calls.append(name)
    if name == "hipMalloc":
      a = np.zeros(args[1], np.uint8)
      self.mem[a.ctypes.data] = a
      args[0]._obj.value = a.ctypes.data
    elif name == "hipMemcpy": ctypes.memmove(args[0], args[1], args[2])
    elif name == "hipModuleLoadData": self.image, args[0]._obj.value = bytes(args[1]), 0x1000
    elif name == "hipModuleGetFunction": self.function, args[0]._obj.value = args[2].decode(), 0x2000
    elif name == "hipEventCreate": args[0]._obj.value = 0x3000 + len(self.calls)
    elif name == "hipEventElapsedTime": args[0]._obj.value = 0.25
    elif name == "hipModuleLaunchKernel":
      fn, grid, block, params, nbufs = args[0].value, args[1:4], args[4:7], args[9], self.nbufs
      bufs = [ctypes.c_void_p.from_address(params[k]).value for k in range(nbufs)]
      variables = [ctypes.c_int64.from_address(params[k]).value for k in range(nbufs, nbufs + self.nvars)]
      self.launches.append((fn, grid, block, bufs, variables))

@pytest.fixture
def fake(monkeypatch):
  h = FakeHIP()
  monkeypatch.setattr(hipmod, "hip", lambda: h)
  monkeypatch.setattr(hipmod, "link", lambda obj: b"linked:" + obj)  # no ld.lld here
  return h

def test_runtime_memory(fake):
  rt = hipmod.AMDRuntime("AMD:0")
  assert rt.arch == "gfx942" and rt.renderer.arch == "gfx942" and rt.compiler.archs == ("gfx942",)
  h = rt.allocator.alloc(16)
  rt.allocator.copyin(h, memoryview(np.arange(4, dtype=np.int32).tobytes()))
  out = bytearray(8)
  rt.allocator.copyout(memoryview(out), rt.allocator.view(h, 8, 8))
  assert np.frombuffer(out, np.int32).tolist() == [2, 3] and fake.calls.count("hipSetDevice") == 3

def test_program_launch(fake):
  rt = hipmod.AMDRuntime("AMD")
  n = UOp.variable("n", 1, 8)
  r, g, lane = UOp.range(n, 0), special("gidx0", 4), special("lidx0", 32)
  idx = (g * 32 + lane) * 8 + r
  linear = lower(end(store(param(0, 1024, f32), idx, load(param(1, 1024, i32), idx).cast(f32)), r))
  binary = rt.compiler.compile_cached(rt.renderer.render("k", linear))
  prog = rt.program("k", binary)
  assert fake.image == b"linked:" + unpack(binary)[1]["gfx942"] and fake.function == "k"
  a, b = rt.allocator.alloc(4096), rt.allocator.alloc(4096)
  fake.nbufs, fake.nvars = 2, 1
  assert prog(a, b, global_size=(4, 1, 1), local_size=(32, 1, 1), vals=(5,), wait=True) == 0.25 / 1e3
  assert fake.launches == [(0x2000, (4, 1, 1), (32, 1, 1), [a, b], [5])]
  prog(a, b, vals=(3,))  # no SPECIALs' sizes given: one lane
  assert fake.launches[-1][1:3] == ((1, 1, 1), (1, 1, 1))
  with pytest.raises(TypeError, match="takes 2 buffers, got 1"): prog(a, vals=(1,))
  with pytest.raises(RuntimeError, match="built for gfx942, not for AMD's gfx1100"):
    fake.gpu = "gfx1100"
    hipmod.AMDRuntime("AMD").program("k", binary)

def test_runtime_refuses_a_missing_index(fake):
  with pytest.raises(RuntimeError, match="AMD:3: HIP sees 1 AMD GPU"): hipmod.AMDRuntime("AMD:3")

def test_probe_names_what_is_missing(monkeypatch):
  monkeypatch.setattr(hipmod, "find_hip", lambda: None)
  hipmod.hip.cache_clear()
  assert hipmod.probe() == "libamdhip64 not found (install ROCm, or set ROCM_PATH to it)"
  hipmod.hip.cache_clear()
  monkeypatch.setattr(hipmod, "hip", lambda: FakeHIP(count=0))
  assert hipmod.probe() == "HIP found no AMD GPU (hipGetDeviceCount is 0)"
  monkeypatch.setattr(hipmod, "hip", lambda: FakeHIP())
  monkeypatch.setattr(hipmod, "find_lld", lambda: None)
  assert "ld.lld not found" in hipmod.probe()
  monkeypatch.setattr(hipmod, "find_lld", lambda: "/opt/rocm/llvm/bin/ld.lld")
  assert hipmod.probe() is None

def test_hip_library_that_is_not_hip(tmp_path, monkeypatch):
  monkeypatch.setattr(hipmod, "find_hip", lambda: str(tmp_path / "libamdhip64.so"))  # no such file: dlopen fails
  hipmod.hip.cache_clear()
  try: assert "libamdhip64.so" in hipmod.probe()
  finally: hipmod.hip.cache_clear()
