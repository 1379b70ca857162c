"""The OPENCL device through pyopencl (PoCL on a machine without a GPU): listing, compile errors, hand-built kernels run
through the device's parts by hand (lanes, shared memory, atomics), float16 without cl_khr_fp16, and device limits. The
conformance suite (`pytest --pyargs tinyspec.conformance --tinyspec-device=OPENCL`) covers the Tensor API on top."""
import os
import subprocess
import sys

import numpy as np
import pytest
from tinyspec import Device, Tensor, dtypes
from tinyspec.conformance import require_device
from tinyspec.conformance.builders import i32, load, param, special, store
from tinyspec.device import Buffer, CompileError
from tinyspec.engine.linearize import linearize
from tinyspec.uop import Ops, UOp

DEV = "OPENCL"

@pytest.fixture(autouse=True, scope="module")
def opencl_available():
  """Skip (naming the reason) where no OpenCL device is found; a missing or broken plugin still fails."""
  require_device(DEV, "pip install -e plugins/tinyspec-opencl")

def launch(linear: UOp, *arrays: np.ndarray, global_size=None, local_size=None) -> list[np.ndarray]:
  """Render, compile and load `linear` on OPENCL, run it on copies of `arrays` (buffer slots in order), return them all."""
  rt = Device[DEV]
  prog = rt.program("hand", rt.compiler.compile_cached(rt.renderer.render("hand", linear)))
  bufs = [Buffer(DEV, a.size, dtypes.from_np(a.dtype)).copyin(a) for a in arrays]
  prog(*(b.handle for b in bufs), global_size=global_size, local_size=local_size, wait=True)
  return [b.numpy() for b in bufs]

def test_listed_with_its_platform():
  import pyopencl as cl
  out = subprocess.run([sys.executable, "-m", "tinyspec", "devices"], capture_output=True, text=True, check=True).stdout
  line = next(x for x in out.splitlines() if x.startswith("OPENCL "))
  assert "available" in line and cl.get_platforms()[0].name in line and "work-group" in line, line

def test_probe_says_when_there_is_no_platform():
  env = {**os.environ, "OCL_ICD_VENDORS": os.devnull}  # the ICD loader then finds no platform
  out = subprocess.run([sys.executable, "-m", "tinyspec", "devices"], capture_output=True, text=True, env=env, check=True).stdout
  line = next(x for x in out.splitlines() if x.startswith("OPENCL "))
  assert "unavailable: no OpenCL platform" in line and "pocl-binary-distribution" in line, line

def test_compile_error_carries_the_build_log_and_source():
  with pytest.raises(CompileError) as e:
    Device[DEV].compiler.compile("__kernel void broken(__global int* a) { a[0] = undeclared; }")
  msg = str(e.value)
  assert msg.startswith("opencl failed to compile:") and "undeclared" in e.value.log and "error" in e.value.log
  assert "   1  __kernel void broken(" in msg

def test_a_plus_b_on_lanes():
  n = 5
  i = special("lidx0", n)
  linear = linearize(UOp.sink(store(param(0, n, i32), i, load(param(1, n, i32), i) + load(param(2, n, i32), i))))
  a, b = np.array([1, 2, 3, 2**31 - 1, -7], np.int32), np.array([2, 5, 6, 1, 7], np.int32)
  np.testing.assert_array_equal(launch(linear, np.zeros(n, np.int32), a, b, global_size=(1, 1, 1), local_size=(n, 1, 1))[0], a + b)

@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.float32], ids=lambda d: d.name)
def test_atomic_add(dt):
  """Every work-item adds its value into one of 3 bins: a histogram, correct only if the adds are atomic."""
  G, L = 4, 16
  g, l = special("gidx0", G), special("lidx0", L)
  x = load(param(1, G * L, dt), g * L + l)
  bin_ = (g * L + l) % 3
  linear = linearize(UOp.sink(UOp(Ops.ATOMICADD, (param(0, 3, dt).index(bin_), x))))
  vals = (np.arange(G * L) * (0.5 if dt is dtypes.float32 else 1)).astype(dt.np)  # halves: float sums stay exact in any order
  got = launch(linear, np.zeros(3, dt.np), vals, global_size=(G, 1, 1), local_size=(L, 1, 1))[0]
  np.testing.assert_array_equal(got, [vals[k::3].sum() for k in range(3)])

@pytest.mark.parametrize("op", ["add", "mul", "recip", "sqrt", "cast64"])
def test_float16_without_cl_khr_fp16(op):
  """Rounded to half after every op: exactly numpy's float16 results (PoCL has no cl_khr_fp16, GPUs may have it)."""
  g = np.random.default_rng(0)
  a = np.concatenate([g.standard_normal(200) * 100, [0.0, -0.0, 65504, np.inf, -np.inf, np.nan, 6e-8, 1e-4]]).astype(np.float16)
  b = np.abs(a[::-1]) + np.float16(0.5)
  wide = b.astype(np.float64) * 1.0001
  run, ref = {"add": (lambda x, y: x + y, np.add), "mul": (lambda x, y: x * y, np.multiply),
              "recip": (lambda x, y: y.reciprocal(), lambda x, y: np.reciprocal(y)), "sqrt": (lambda x, y: y.sqrt(), lambda x, y: np.sqrt(y)),
              "cast64": (lambda x, y: Tensor(wide, device=DEV).cast(dtypes.float16), lambda x, y: wide.astype(np.float16))}[op]
  with np.errstate(all="ignore"): want = ref(a, b)
  np.testing.assert_array_equal(run(Tensor(a, device=DEV), Tensor(b, device=DEV)).numpy(), want)

def test_limits_come_from_the_device():
  import pyopencl as cl
  d, r = Device[DEV].device, Device[DEV].renderer
  assert isinstance(d, cl.Device) and max(r.local_max) <= d.max_work_group_size and r.shared_max == d.local_mem_size
  assert (dtypes.float64 in r.dtypes) == ("cl_khr_fp64" in d.extensions) and dtypes.float16 in r.dtypes

def test_a_device_index_past_the_last_says_which_exist():
  with pytest.raises(Exception, match=r"OPENCL:9: there (is|are) only \d+ OpenCL device.*OPENCL:0 "):
    Device["OPENCL:9"]

def test_zero_size_and_reduction():
  assert Tensor(np.zeros((0, 3), np.float32), device=DEV).sum(0).numpy().tolist() == [0, 0, 0]
  x = np.random.default_rng(1).standard_normal((33, 65)).astype(np.float32)
  np.testing.assert_allclose((Tensor(x, device=DEV) @ Tensor(x.T, device=DEV)).numpy(), x @ x.T, rtol=1e-4, atol=1e-4)
