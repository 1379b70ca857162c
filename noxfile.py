"""nox sessions mirroring tox.ini: `nox` runs them all (core, torch, cpu, template, opencl, cuda, metal, amd, webgpu, mpi,
lint); `nox -s core -- -k name` passes arguments on to pytest.

One session per backend: the GPU plugins without their hardware run the conformance suite on their *_CHECK device.
"""
import nox

nox.needs_version = ">=2024.4.15"
nox.options.sessions = ["core", "torch", "cpu", "template", "opencl", "cuda", "metal", "amd", "webgpu", "mpi", "lint"]
nox.options.reuse_venv = "yes"  # keep a session's virtualenv between runs; `nox -R`/`--no-reuse-existing-virtualenvs` rebuilds
nox.options.error_on_missing_interpreters = True

RUFF = "ruff>=0.17,<0.18"  # same range as tox.ini

@nox.session
def core(session: nox.Session) -> None:
  """Core tests against tinyspec installed (not editable) from ./core with the test extra, spec verifier on; then the
  conformance suite shipped in the wheel against the PYTHON device."""
  session.install("./core[test]")  # pip rebuilds and reinstalls a local directory on every run, so the code is current
  session.run("pytest", "core/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})
  session.run("pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-device=PYTHON", env={"TINYSPEC_VERIFY": "1"})

@nox.session
def torch(session: nox.Session) -> None:
  """The core tests again with PyTorch and safetensors installed, so every comparison with them runs too."""
  session.install("./core[test]", "torch==2.13.0", "safetensors")
  session.run("pytest", "core/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})

@nox.session
def template(session: nox.Session) -> None:
  """The plugin template (examples/plugin-template) as a third party ships it: its tests, then the conformance suite on its device CC."""
  session.install("./core", "./examples/plugin-template[test]")
  session.run("pytest", "examples/plugin-template/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})
  session.run("pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-device=CC", env={"TINYSPEC_VERIFY": "1"})

@nox.session
def cpu(session: nox.Session) -> None:
  """The CPU plugin (plugins/tinyspec-cpu, llvmlite): its tests, then the conformance suite on CPU."""
  session.install("./core", "./plugins/tinyspec-cpu[test]")
  session.run("pytest", "plugins/tinyspec-cpu/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})
  session.run("pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-device=CPU", env={"TINYSPEC_VERIFY": "1"})

@nox.session
def opencl(session: nox.Session) -> None:
  """The OpenCL plugin (plugins/tinyspec-opencl, pyopencl): its tests, then the conformance suite on OPENCL (PoCL's CPU
  device, two of them so the multi-device tests run). ensure_opencl.py first makes sure a device builds kernels: it
  installs the distribution's PoCL where PyPI's cannot (as root, with apt), or fails naming the package."""
  session.install("./core", "./plugins/tinyspec-opencl[test]")
  env = {"TINYSPEC_VERIFY": "1", "POCL_DEVICES": "pthread pthread"}
  session.run("python", "plugins/tinyspec-opencl/ensure_opencl.py", env=env)
  session.run("pytest", "plugins/tinyspec-opencl/tests", *session.posargs, env=env)
  session.run("pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-device=OPENCL", env=env)

@nox.session
def cuda(session: nox.Session) -> None:
  """The CUDA plugin (plugins/tinyspec-cuda): its tests, then the conformance suite on CUDA_CHECK (kernels compiled by NVRTC
  for sm_80 and sm_90, run by the interpreter)."""
  session.install("./core", "./plugins/tinyspec-cuda[test]")
  session.run("pytest", "plugins/tinyspec-cuda/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})
  session.run("pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-device=CUDA_CHECK", env={"TINYSPEC_VERIFY": "1"})

@nox.session
def metal(session: nox.Session) -> None:
  """The Metal plugin (plugins/tinyspec-metal): its tests, then the conformance suite on METAL_CHECK (kernels checked by the
  host C++ front end against a stand-in metal_stdlib, run by the interpreter)."""
  session.install("./core", "./plugins/tinyspec-metal[test]")
  session.run("pytest", "plugins/tinyspec-metal/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})
  session.run("pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-device=METAL_CHECK", env={"TINYSPEC_VERIFY": "1"})

@nox.session
def amd(session: nox.Session) -> None:
  """The AMD plugin (plugins/tinyspec-amd): its tests, then the conformance suite on AMD_CHECK (kernels built for gfx1100,
  gfx942 and gfx1201 by llvmlite, run by the interpreter)."""
  session.install("./core", "./plugins/tinyspec-amd[test]")
  session.run("pytest", "plugins/tinyspec-amd/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})
  session.run("pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-device=AMD_CHECK", env={"TINYSPEC_VERIFY": "1"})

@nox.session
def webgpu(session: nox.Session) -> None:
  """The WebGPU plugin (plugins/tinyspec-webgpu, wgpu): its tests, then the conformance suite on WEBGPU (lavapipe, Mesa's
  Vulkan on the CPU, where there is no GPU). ensure_webgpu.py first makes sure wgpu finds an adapter: it installs
  mesa-vulkan-drivers where none is (as root, with apt), or fails naming the package. The CPU device is the export's reference."""
  session.install("./core", "./plugins/tinyspec-cpu", "./plugins/tinyspec-webgpu[test]")
  env = {"TINYSPEC_VERIFY": "1"}
  session.run("python", "plugins/tinyspec-webgpu/ensure_webgpu.py", env=env)
  session.run("pytest", "plugins/tinyspec-webgpu/tests", *session.posargs, env=env)
  session.run("pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-device=WEBGPU", env=env)

@nox.session
def mpi(session: nox.Session) -> None:
  """The MPI plugin (plugins/tinyspec-mpi, mpi4py with PyPI's MPICH): its tests, 2 and 4 ranks on this machine through the
  mpiexec the mpich wheel installs in the session's virtualenv; the ranks run on the CPU device."""
  session.install("./core", "./plugins/tinyspec-cpu", "./plugins/tinyspec-mpi[test]")
  session.run("pytest", "plugins/tinyspec-mpi/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})

@nox.session
def lint(session: nox.Session) -> None:
  """ruff check core bench plugins examples (config: [tool.ruff] in pyproject.toml)."""
  session.install(RUFF)
  session.run("ruff", "check", "core", "bench", "plugins", "examples", *session.posargs)
