"""The CPU device's plugin hooks. Importing this module is cheap: llvmlite is imported by the probe and by `open`."""
from __future__ import annotations

from tinyspec.device import DeviceSpec
from tinyspec.hookspecs import hookimpl


def _probe() -> str | None:
  try:
    from tinyspec_cpu.renderer import host  # imports llvmlite
  except ImportError as e: return f"llvmlite is not importable ({e}); pip install llvmlite"
  try: host()
  except Exception as e: return f"LLVM cannot compile for this host: {type(e).__name__}: {e}"
  return None

def _open(name: str):
  from tinyspec_cpu.runtime import CPURuntime
  return CPURuntime(name)

def _info() -> str:
  from tinyspec_cpu.renderer import host, thread_count
  h = host()
  return f"LLVM {h.llvm_version}, {h.cpu}, {thread_count()} threads, features {' '.join(h.shown_features) or 'baseline'}"

@hookimpl
def tinyspec_plugin_api(): return (1,)  # the plugin API versions this plugin speaks

@hookimpl
def tinyspec_devices(): return (DeviceSpec("CPU", ("LLVM",), probe=_probe, open=_open, info=_info),)
