"""The PYTHON device's plugin: built into the core (registered by tinyspec.device), always available."""
from __future__ import annotations

from tinyspec.device.registry import DeviceSpec
from tinyspec.hookspecs import PLUGIN_API_VERSION, hookimpl


def _open(name: str):
  from tinyspec.interpreter.runtime import PythonRuntime
  return PythonRuntime(name)

@hookimpl
def tinyspec_plugin_api(): return (PLUGIN_API_VERSION,)

@hookimpl
def tinyspec_devices():
  return (DeviceSpec("PYTHON", ("PYTHON",), probe=lambda: None, open=_open, info=lambda: "numpy reference interpreter"),)
