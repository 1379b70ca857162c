"""The WEBGPU device's plugin hooks. Importing this module is cheap: wgpu is imported by the probe and by `open`."""
from __future__ import annotations

from tinyspec.device import DeviceSpec
from tinyspec.hookspecs import hookimpl


def _probe() -> str | None:
  try:
    from tinyspec_webgpu.runtime import adapter  # imports wgpu, which loads wgpu-native
  except ImportError as e: return f"wgpu is not importable ({e}); pip install wgpu"
  try: adapter()
  except RuntimeError as e: return str(e)
  return None

def _open(name: str):
  from tinyspec_webgpu.runtime import WGPURuntime
  return WGPURuntime(name)

def _info() -> str:
  from tinyspec_webgpu.runtime import adapter, describe
  return describe(adapter())

@hookimpl
def tinyspec_plugin_api(): return (1,)  # the plugin API versions this plugin speaks

@hookimpl
def tinyspec_devices(): return (DeviceSpec("WEBGPU", ("WGSL",), probe=_probe, open=_open, info=_info),)
