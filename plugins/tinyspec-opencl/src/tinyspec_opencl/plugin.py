"""The OPENCL device's plugin hooks. Importing this module is cheap: pyopencl is imported by the probe and by `open`."""
from __future__ import annotations

from tinyspec.device import DeviceSpec
from tinyspec.hookspecs import hookimpl


def _probe() -> str | None:
  try:
    from tinyspec_opencl.runtime import first_usable  # imports pyopencl
  except ImportError as e: return f"pyopencl is not importable ({e}); pip install pyopencl"
  try: first_usable()  # lists the platforms' devices and builds a tiny kernel on each until one succeeds
  except RuntimeError as e: return str(e)
  return None

def _open(name: str):
  from tinyspec_opencl.runtime import OpenCLRuntime
  return OpenCLRuntime(name)

def _info() -> str:
  from tinyspec_opencl.runtime import describe, devices
  return "; ".join(f"OPENCL:{i} {describe(d)}" for i, d in enumerate(devices()))

@hookimpl
def tinyspec_plugin_api(): return (1,)  # the plugin API versions this plugin speaks

@hookimpl
def tinyspec_devices(): return (DeviceSpec("OPENCL", ("OPENCL_C",), probe=_probe, open=_open, info=_info),)
