"""The OPENCL device through pyopencl (PoCL on a machine without a GPU): listing, compile errors, hand-built kernels run
through the device's parts by hand (lanes, shared memory, atomics), float16 without cl_khr_fp16, and device limits. The
conformance suite (`pytest --pyargs tinyspec.conformance --tinyspec-device=OPENCL`) covers the Tensor API on top."""
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tinyspec import Device, Tensor, dtypes
from tinyspec.conformance import require_device
from tinyspec.conformance.builders import i32, load, param, special, store
from tinyspec.device import Buffer, CompileError, DeviceError
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

def devices_line(**env: str) -> str:
  """The OPENCL row of `tinyspec devices` run with `env` added to the environment."""
  out = subprocess.run([sys.executable, "-m", "tinyspec", "devices"], capture_output=True, text=True, env={**os.environ, **env}, check=True).stdout
  return next(x for x in out.splitlines() if x.startswith("OPENCL "))

def all_pocl() -> bool:
  import pyopencl as cl
  return all("PoCL" in p.version for p in cl.get_platforms())

def test_listed_with_its_platform():
  import pyopencl as cl
  line = devices_line()
  assert "available" in line and cl.get_platforms()[0].name in line and "work-group" in line, line

# the probe's three outcomes: no platform, platforms whose compiler fails, a device that builds (the test above)

def test_probe_says_when_there_is_no_platform():
  line = devices_line(OCL_ICD_VENDORS=os.devnull)  # the ICD loader then finds no platform
  assert "unavailable: no OpenCL platform" in line and "pocl-binary-distribution" in line, line

def test_probe_builds_a_kernel_before_calling_a_device_available():
  """A flag every PoCL refuses makes each device fail its probe build: OPENCL is unavailable with the compiler's first line,
  and asking for it raises that reason, not a CompileError from the first kernel."""
  if not all_pocl(): pytest.skip("POCL_EXTRA_BUILD_FLAGS breaks only PoCL's builds, and another platform is installed")
  line = devices_line(POCL_EXTRA_BUILD_FLAGS="-fno-such-flag")
  assert "unavailable: no OpenCL device here can build a kernel (OPENCL:0 " in line and "Invalid build option: -fno-such-flag" in line, line
  assert "Fix: a build option was refused" in line, line
  run = subprocess.run([sys.executable, "-c", "from tinyspec import Tensor; (Tensor([1.0]) + 1).numpy()"], capture_output=True, text=True,
                       env={**os.environ, "POCL_EXTRA_BUILD_FLAGS": "-fno-such-flag", "DEVICE": "OPENCL"})
  last = run.stderr.strip().splitlines()[-1]
  assert run.returncode == 1 and last.startswith("tinyspec.device.registry.DeviceError: device OPENCL (tinyspec-opencl"), run.stderr
  assert "not available here: no OpenCL device here can build a kernel" in last and "CompileError" not in run.stderr, run.stderr

def test_pypi_pocl_alone_works_or_says_what_to_install():
  """PyPI's PoCL (LLVM 14) builds on CPUs its LLVM knows (Zen 4) and fails on newer ones (Zen 5): then the row says so and
  names the distribution's package."""
  import pyopencl
  vendors = Path(pyopencl.__file__).parent / ".libs"
  if not (vendors / "pocl.icd").exists(): pytest.skip("PyPI's PoCL is not installed beside pyopencl (pip install pocl-binary-distribution)")
  line = devices_line(OCL_ICD_VENDORS=str(vendors))
  if "unavailable" in line:
    assert "unknown target CPU" in line and "apt-get install pocl-opencl-icd" in line, line
  else: assert "PoCL 3.0" in line and "work-group" in line, line

def test_opencl_is_the_first_device_that_builds(monkeypatch):
  """With a broken device listed first (as PyPI's PoCL can be, beside a working platform), OPENCL opens the next one, while
  OPENCL:0 still names the broken one and says why it cannot be used."""
  from tinyspec_opencl import runtime
  real = runtime.devices()[0]
  broken = SimpleNamespace(name="pthread-AMD EPYC", platform=SimpleNamespace(version="OpenCL 3.0 PoCL 3.0-rc2  Linux"))
  monkeypatch.setattr(runtime, "devices", lambda: (broken, real))
  monkeypatch.setattr(runtime, "build_failure", lambda d: "error: unknown target CPU 'generic'" if d is broken else None)
  assert runtime.first_usable() == 1 and runtime.OpenCLRuntime("OPENCL").device is real
  with pytest.raises(RuntimeError, match=r"^OPENCL:0 pthread-AMD EPYC \(OpenCL 3.0 PoCL 3.0-rc2\) cannot build kernels: error: unknown target"):
    runtime.OpenCLRuntime("OPENCL:0")

def test_a_device_that_cannot_build_is_refused_with_the_fix(monkeypatch):
  from tinyspec_opencl import runtime
  monkeypatch.setattr(runtime, "build_failure", lambda d: "error: unknown target CPU 'generic'")
  with pytest.raises(RuntimeError, match=r"no OpenCL device here can build a kernel \(OPENCL:0 .*: error: unknown target CPU 'generic'\)\. "
                                         r"Fix: this PoCL's LLVM does not know this CPU: .*apt-get install pocl-opencl-icd"):
    runtime.first_usable()
  with pytest.raises(RuntimeError, match=r"^OPENCL:0 .* cannot build kernels: error: unknown target CPU 'generic'\. Fix: this PoCL's"):
    runtime.OpenCLRuntime("OPENCL:0")

def test_compile_error_leads_with_the_kernel_and_the_build_log(monkeypatch):
  monkeypatch.delenv("DEBUG", raising=False)
  src = "__kernel void broken(__global int* a) { a[0] = undeclared; }"
  with pytest.raises(CompileError) as e: Device[DEV].compiler.compile_cached(src, "E_broken")
  msg = str(e.value)
  assert msg.startswith("opencl failed to compile kernel E_broken:\n") and "undeclared" in e.value.log and "error" in e.value.log
  assert "a[0] = undeclared" not in msg and f"its source is in {e.value.src_path}" in msg and e.value.src_path.read_text() == src
  monkeypatch.setenv("DEBUG", "4")
  assert "   1  __kernel void broken(" in str(e.value)

def test_unsupported_dtype_and_refused_allocation_name_the_device():
  with pytest.raises(DeviceError, match=r"^OPENCL does not support bfloat16 \(its dtypes: "):
    Tensor([1.0, 2.0], device=DEV).cast(dtypes.bfloat16).realize()
  limit = Device[DEV].device.max_mem_alloc_size
  with pytest.raises(MemoryError, match=rf"^OPENCL cannot allocate {limit + 4} bytes .*: the device's largest allocation is {limit} bytes "
                                        r"\(.*, CL_DEVICE_MAX_MEM_ALLOC_SIZE\)$") as e:
    Buffer(DEV, limit // 4 + 1, dtypes.float32).allocate()
  assert "During handling" not in "".join(traceback.format_exception(e.value))

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
  assert (dtypes.float64 in r.supported_dtypes) == ("cl_khr_fp64" in d.extensions) and dtypes.float16 in r.supported_dtypes

def test_a_device_index_past_the_last_says_which_exist():
  with pytest.raises(Exception, match=r"OPENCL:9: there (is|are) only \d+ OpenCL device.*OPENCL:0 "):
    Device["OPENCL:9"]

def test_zero_size_and_reduction():
  assert Tensor(np.zeros((0, 3), np.float32), device=DEV).sum(0).numpy().tolist() == [0, 0, 0]
  x = np.random.default_rng(1).standard_normal((33, 65)).astype(np.float32)
  np.testing.assert_allclose((Tensor(x, device=DEV) @ Tensor(x.T, device=DEV)).numpy(), x @ x.T, rtol=1e-4, atol=1e-4)

def test_a_cpu_device_gets_its_own_tuning():
  """On a CPU device (PoCL): big register tiles, 16-lane group reductions, core's transcendentals, B packed into panels.
  Both the tuned kernels and their results are checked."""
  import pyopencl as cl
  from tinyspec.engine import realize as R
  if not Device[DEV].device.type & cl.device_type.CPU: pytest.skip("not a CPU device: GPU defaults apply")
  r = Device[DEV].renderer
  assert (r.max_upcast, r.group_lanes, r.pack_width) == (128, 16, 16) and Ops.EXP2 not in r.native
  an, bn = (np.random.default_rng(s).standard_normal(sh).astype(np.float32) for s, sh in ((2, (64, 32)), (3, (32, 1024))))
  before = R.stats["kernels_run"]
  got = (Tensor(an, device=DEV) @ Tensor(bn, device=DEV)).realize()
  assert R.stats["kernels_run"] - before == 2  # B packed, then the matmul
  np.testing.assert_allclose(got.numpy(), an @ bn, rtol=1e-4, atol=1e-4)
  x = np.random.default_rng(4).random(2**18 + 3).astype(np.float32)
  np.testing.assert_allclose(Tensor(x, device=DEV).exp().sum().item(), np.exp(x.astype(np.float64)).sum(), rtol=1e-6)

def test_vector_loads_run(monkeypatch):
  """A CPU device declares no vectors (PoCL vectorizes across lanes, which vector types stop), so a GPU's are set here:
  vload4/vstore4 for an elementwise kernel and vloadN for a matmul's tile run on this device against numpy."""
  from tinyspec.conformance.test_vectors import elementwise_and_matmul
  from tinyspec_opencl.renderer import OpenCLRenderer
  r = Device[DEV].renderer
  monkeypatch.setattr(r, "vector_widths", OpenCLRenderer.vector_widths)
  monkeypatch.setattr(r, "vector_dtypes", OpenCLRenderer.vector_dtypes)
  elementwise, matmul = elementwise_and_matmul(DEV)
  assert "float4 v" in elementwise.source and "= vload4(0, data1 + " in elementwise.source and "vstore4(v" in elementwise.source, elementwise.source
  assert re.search(r"float(8|16) v\d+ = vload(8|16)\(0, data", matmul.source), matmul.source
