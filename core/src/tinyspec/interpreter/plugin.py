"""The PYTHON device's plugin: built into the core (registered by tinyspec.device), always available."""
from __future__ import annotations

from tinyspec.hookspecs import DeviceSpec, hookimpl


def _open(name: str):
  from tinyspec.interpreter.runtime import PythonRuntime
  return PythonRuntime(name)

@hookimpl
def tinyspec_plugin_api(): return (1,)  # the plugin API versions this plugin speaks

@hookimpl
def tinyspec_devices():
  return (DeviceSpec("PYTHON", ("PYTHON",), probe=lambda: None, open=_open, info=lambda: "numpy reference interpreter"),)
