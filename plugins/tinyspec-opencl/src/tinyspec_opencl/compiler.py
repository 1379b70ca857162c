"""OpenCL C to a device's program binary, and the probe build that tells whether a device's compiler works at all.

A platform can list a device whose compiler fails on every kernel: PyPI's PoCL (3.0, LLVM 14) on a CPU its LLVM does not
know answers `error: unknown target CPU 'generic'`. So a device counts as usable only once it has built `PROBE_KERNEL`;
the first line of the log of a failed build, and what to do about it, is what `tinyspec devices` shows.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import warnings

import pyopencl as cl
from tinyspec.device import CompileError, Compiler

PROBE_KERNEL = "__kernel void tinyspec_probe(__global float* out) { out[get_global_id(0)] = 1.0f; }"
"""Built on every device before it is called usable: the smallest kernel that exercises the device's whole compiler."""

# (what a failed build's log says, what to do about it), first match wins
FIXES: tuple[tuple[str, str], ...] = (
  # PyPI's PoCL bundles an LLVM older than the CPU (Zen 5 and LLVM 14); a distribution's PoCL is built on a newer one
  ("unknown target CPU", "this PoCL's LLVM does not know this CPU: install your distribution's PoCL, which pyopencl finds beside "
                         "PyPI's (Debian/Ubuntu: apt-get install pocl-opencl-icd; Fedora: dnf install pocl)"),
  ("Invalid build option", "a build option was refused: check POCL_EXTRA_BUILD_FLAGS and similar settings of the platform"),
)
GENERAL_FIX = "the platform's OpenCL compiler cannot build kernels here: update or reinstall its driver"

def fix_for(error: str) -> str:
  """What to do about a device whose probe build failed with `error`."""
  return next((fix for clue, fix in FIXES if clue in error), GENERAL_FIX)

def build_options(d: cl.Device) -> list[str]:
  """Correctly rounded float division and sqrt where the device offers it (OpenCL otherwise allows 2.5 and 3 ulp)."""
  return ["-cl-fp32-correctly-rounded-divide-sqrt"] if d.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT else []

_quiet_lock = threading.Lock()

@contextlib.contextmanager
def quiet_build():
  """Around a program build: pyopencl's CompilerWarning for a build log on success (PoCL's notes) is nothing for the user.
  The warnings filter is process-wide, so builds on several threads take turns rather than undo each other's filter."""
  with _quiet_lock, warnings.catch_warnings():
    warnings.simplefilter("ignore", cl.CompilerWarning)
    yield

def _build(ctx: cl.Context, device: cl.Device, src: str, options: list[str]) -> tuple[cl.Program, str | None]:
  """Build `src` for `device`: the program, and None or the build log (the error itself where the log is empty)."""
  prg = cl.Program(ctx, src)
  with quiet_build():
    try: prg.build(options=options, devices=[device], cache_dir=False)
    except cl.Error as e:
      try: log = prg.get_build_info(device, cl.program_build_info.LOG)
      except cl.Error: log = ""
      return prg, log.strip() or str(e)
  return prg, None

@functools.cache
def build_failure(device: cl.Device) -> str | None:
  """None when `device` builds `PROBE_KERNEL`; else the first line of what its compiler said. Cached per device."""
  _, log = _build(cl.Context([device]), device, PROBE_KERNEL, build_options(device))
  return None if log is None else next((line.strip() for line in log.splitlines() if line.strip()), "the build failed")

class OpenCLCompiler(Compiler):
  """OpenCL C to the device's program binary (clGetProgramInfo's BINARIES), which `OpenCLProgram` loads without building
  again. A binary belongs to one device and driver, so `version` names both, and the build options."""
  name = "opencl"
  def __init__(self, ctx: cl.Context, device: cl.Device):
    self.ctx, self.device, self.options = ctx, device, build_options(device)
    p = device.platform
    self.version = f"{p.name} {p.version} | {device.name} {device.driver_version} | {' '.join(self.options)}"

  def compile(self, src: str) -> bytes:
    prg, log = _build(self.ctx, self.device, src, self.options)
    if log is not None: raise CompileError(self.name, log, src)
    return prg.get_info(cl.program_info.BINARIES)[0]
