"""The WEBGPU device through wgpu (lavapipe on a machine without a GPU): listing, the probe's reason, WGSL errors,
hand-built kernels through the device's parts (packed bytes written by neighbouring lanes, a grid folded past the
dispatch limit), 64-bit integers against numpy, long loops under lavapipe's loop limiter, and dispatch batching. The
conformance suite (`pytest --pyargs tinyspec.conformance --tinyspec-device=WEBGPU`) covers the Tensor API on top."""
import os
import subprocess
import sys

import numpy as np
import pytest
from tinyspec import Device, Tensor, dtypes
from tinyspec.conformance import require_device
from tinyspec.conformance.builders import f32, load, lower, param, seed003_add, special, store
from tinyspec.device import Buffer, CompileError
from tinyspec.dtype import float_to_int
from tinyspec.uop import UOp

DEV = "WEBGPU"

@pytest.fixture(autouse=True, scope="module")
def webgpu_available():
  """Skip (naming the reason) where wgpu finds no adapter; a missing or broken plugin still fails."""
  require_device(DEV, "pip install -e plugins/tinyspec-webgpu")

def launch(linear: UOp, *arrays: np.ndarray, global_size=None) -> list[np.ndarray]:
  """Render, compile and load `linear` on WEBGPU, run it on copies of `arrays` (buffer slots in order), return them all."""
  rt = Device[DEV]
  prog = rt.program("hand", rt.compiler.compile_cached(rt.renderer.render("hand", linear)))
  bufs = [Buffer(DEV, a.size, dtypes.from_np(a.dtype)).copyin(a) for a in arrays]
  prog(*(b.handle for b in bufs), global_size=global_size, wait=True)
  return [b.numpy() for b in bufs]

def devices_line(**env: str) -> str:
  out = subprocess.run([sys.executable, "-m", "tinyspec", "devices"], capture_output=True, text=True, env={**os.environ, **env}, check=True).stdout
  return next(x for x in out.splitlines() if x.startswith("WEBGPU "))

def test_listed_with_its_adapter_and_backend():
  import wgpu
  info = wgpu.gpu.request_adapter_sync(power_preference="high-performance").info
  line = devices_line()
  assert "available" in line and info["device"] in line and info["backend_type"] in line and "storage buffers per stage" in line, line

def test_probe_says_what_to_install_without_an_adapter():
  line = devices_line(VK_ICD_FILENAMES=os.devnull, WGPU_BACKEND_TYPE="Vulkan")  # no Vulkan driver, and no other backend tried
  assert "unavailable: wgpu found no WebGPU adapter" in line and "mesa-vulkan-drivers" in line, line

def test_an_opengl_adapter_is_passed_over_or_refused(monkeypatch):
  """wgpu's OpenGL fallback (no Vulkan driver) gets integer division wrong: another backend's adapter is taken instead,
  and with none the device is unavailable and says what to install."""
  import types

  import wgpu
  from tinyspec_webgpu import runtime
  def fake(backend: str): return types.SimpleNamespace(info={"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "backend_type": backend,
                                                               "adapter_type": "CPU", "description": "Mesa 22.3.6"})
  gl, vulkan = fake("OpenGL"), fake("Vulkan")
  monkeypatch.setattr(wgpu.gpu, "request_adapter_sync", lambda **kw: gl)
  monkeypatch.setattr(wgpu.gpu, "enumerate_adapters_sync", lambda: [gl, vulkan])
  assert runtime.adapter.__wrapped__() is vulkan
  monkeypatch.setattr(wgpu.gpu, "enumerate_adapters_sync", lambda: [gl])
  with pytest.raises(RuntimeError, match="wgpu found only llvmpipe .* OpenGL backend .* mesa-vulkan-drivers"): runtime.adapter.__wrapped__()

def test_wgsl_errors_surface_with_the_line():
  rt = Device[DEV]
  with pytest.raises(CompileError) as e: rt.compiler.compile("@compute @workgroup_size(1)\nfn k() { let x: i32 = 1.5f; }\n")
  assert e.value.compiler == "wgsl" and "wgsl:2" in e.value.log and "f32" in e.value.log, e.value.log

def test_neighbouring_lanes_write_bytes_of_one_word():
  """Eight lanes store int8 into two u32 words at once: each byte lands, none is lost to another lane's write."""
  a, b = np.arange(-4, 4, dtype=np.int32) * 30, np.full(8, 7, np.int32)
  out, *_ = launch(lower(seed003_add(8, out=dtypes.int8)), np.zeros(8, np.int8), a, b)
  np.testing.assert_array_equal(out, (a + b).astype(np.int8))

def test_a_grid_past_the_dispatch_limit_runs_every_workgroup():
  n = 70_000
  g = special("gidx0", n)
  x = np.arange(n, dtype=np.float32)
  out, _ = launch(lower(store(param(0, n, f32), g, load(param(1, n, f32), g) * 2.0)), np.zeros(n, np.float32), x, global_size=(n,))
  np.testing.assert_array_equal(out, x * 2)

INT64_EDGES = np.array([0, 1, -1, 2**31, -2**31, 2**32 - 1, 2**32 + 3, 2**62 + 12345, -2**63, 2**63 - 1, 1234567890123, -98765432109], np.int64)

def test_int64_arithmetic_against_numpy():
  """int64 lives in pairs of u32 words: the carries, the 64-bit product, floor division and shifts, bit for bit."""
  a, b = np.meshgrid(INT64_EDGES, INT64_EDGES)
  a, b = a.reshape(-1), b.reshape(-1)
  ta, tb = Tensor(a, device=DEV), Tensor(b, device=DEV)
  with np.errstate(over="ignore"):
    for got, want in ((ta + tb, a + b), (ta - tb, a - b), (ta * tb, a * b), (ta ^ tb, a ^ b), (ta < tb, a < b), (ta.maximum(tb), np.maximum(a, b))):
      np.testing.assert_array_equal(got.numpy(), want)
  defined = (b != 0) & ~((a == -2**63) & (b == -1))  # numpy's // leaves these two to the hardware; tinyspec gives 0 and MIN
  np.testing.assert_array_equal((ta // tb).numpy()[defined], a[defined] // b[defined])
  np.testing.assert_array_equal((ta // tb).numpy()[~defined], np.where(b[~defined] == 0, 0, -2**63))
  shift = np.arange(12, dtype=np.int64) * 5  # up to 55: arithmetic shifts across the word boundary (64 and past give 0, numpy -1)
  np.testing.assert_array_equal((Tensor(INT64_EDGES, device=DEV) >> Tensor(shift, device=DEV)).numpy(), INT64_EDGES >> shift)

def test_int64_to_float_rounds_once():
  """2**53 + 1 and friends: the value's bits below float32's precision decide the rounding, not a second rounding."""
  x = np.array([2**24 + 1, 2**53 + 1, 2**60 + 2**36 + 1, -(2**40) - 2**16 - 1, 2**63 - 1, -2**63], np.int64)
  np.testing.assert_array_equal(Tensor(x, device=DEV).cast(dtypes.float32).numpy(), x.astype(np.float32))
  # past 2**63 it wraps as uint64 does; nan, infinities and 2**64 on give 0 (tinyspec.dtype.float_to_int, the reference)
  f = np.array([3.5e9, -3.5e9, 9.2e18, -9.2e18, 1.8e19, 2.0**64, np.nan, np.inf, -2.5], np.float32)
  np.testing.assert_array_equal(Tensor(f, device=DEV).cast(dtypes.int64).numpy(), float_to_int(f, np.dtype(np.int64)))

def test_a_loop_past_lavapipes_limit_counts_every_iteration():
  """A one-lane int32 sum of 200_001 ones: Mesa 22's llvmpipe would stop its loop at 65535 iterations; unrolled, it does not."""
  assert Tensor.ones(200_001, dtype=dtypes.int32, device=DEV).sum().item() == 200_001

def test_launches_are_batched_until_their_results_are_needed():
  rt = Device[DEV]
  x = Tensor(np.arange(16, dtype=np.float32), device=DEV)
  rt.synchronize()
  y = ((x + 1).contiguous() * 2).contiguous() + 3
  y.realize()
  assert rt.pending >= 2, "the kernels were submitted one by one"
  np.testing.assert_array_equal(y.numpy(), (np.arange(16) + 1) * 2 + 3)
  assert rt.pending == 0  # reading the result submitted them

def test_nan_is_true_as_a_condition():
  """Found by the slow fuzzer: a float cast to bool is x != 0, and naga's float != is false for nan; nan must be true."""
  x = np.array([np.nan, 0.0, -0.0, 2.5, -np.inf], np.float32)
  np.testing.assert_array_equal(Tensor(x, device=DEV).where(1.0, -1.0).numpy(), np.where(x.astype(bool), 1.0, -1.0))
  np.testing.assert_array_equal(Tensor(x, device=DEV).cast(dtypes.bool).numpy(), x.astype(bool))
