"""The hooks tinyspec calls: the module the `tinyspec.devices` entry point names (see pyproject.toml).

Importing it must stay cheap and safe on any machine, so it only describes the device; finding the compiler is `probe`'s
job and building the runtime is `open`'s, and both run only when someone uses CC or runs `tinyspec devices`."""
from __future__ import annotations

from tinyspec.device import DeviceSpec
from tinyspec.hookspecs import hookimpl


def _probe() -> str | None:
  from tinyspec_ctemplate.compiler import find_cc
  return None if find_cc() else "no C compiler: neither $CC nor cc is on PATH (install gcc or clang, e.g. apt-get install gcc)"

def _open(name: str):
  from tinyspec_ctemplate.runtime import CRuntime
  return CRuntime(name)

def _info() -> str:
  from tinyspec_ctemplate.compiler import describe, find_cc
  return describe(find_cc())[0]

@hookimpl
def tinyspec_plugin_api(): return (1,)  # the plugin API versions this plugin speaks (tinyspec.hookspecs.PLUGIN_API_VERSION)

@hookimpl
def tinyspec_devices(): return (DeviceSpec("CC", ("C",), probe=_probe, open=_open, info=_info),)
