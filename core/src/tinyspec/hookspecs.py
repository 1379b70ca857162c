"""The hooks a tinyspec device plugin implements.

A plugin is a module (or any object) whose functions are marked with `hookimpl` and named after the hooks below;
it is announced through the `tinyspec.devices` entry-point group (see `tinyspec.device.registry`). Importing it must
be cheap: heavy imports and hardware probing belong in `DeviceSpec.probe` and `DeviceSpec.open`.

    from tinyspec.hookspecs import hookimpl

    @hookimpl
    def tinyspec_plugin_api(): return (1,)   # the API versions this plugin was written for, as a literal

    @hookimpl
    def tinyspec_devices(): return (DeviceSpec("CPU", ("LLVM",), probe=_probe, open=_open),)
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

PLUGIN_API_VERSION = 1
"""The plugin API this core speaks; bumped whenever a hook or `DeviceSpec` changes incompatibly. A plugin states the
versions it speaks as a literal in its `tinyspec_plugin_api`, never by returning this constant (it would always match)."""

@dataclass(frozen=True)
class DeviceSpec:
  """One device a plugin provides, returned by its `tinyspec_devices` hook. Building one must be cheap."""
  name: str
  """Upper-case device name, e.g. "CPU"; users may add an index, "CPU:1"."""
  renderers: tuple[str, ...]
  """Names of the renderers the device offers, e.g. ("LLVM",)."""
  probe: Callable[[], str | None]
  """None when the device is usable here, else the reason for a human, e.g. "no NVIDIA driver (libcuda.so not found)".
  Called once, on first use or by `tinyspec devices`; heavy imports belong here."""
  open: Callable[[str], Any]
  """Builds the `tinyspec.device.runtime.Runtime` for a full device name like "CPU:1" (its renderer, compiler, allocator
  and program loader). Called once per name, on first use; this is where the driver is imported and opened."""
  info: Callable[[], str] | None = None
  """Optional extra detail for the listing, e.g. an LLVM version; called only for available devices."""

  def __post_init__(self):
    if not isinstance(self.name, str) or not re.fullmatch(r"[A-Z][A-Z0-9_]*", self.name):
      raise ValueError(f"device name must be upper-case letters, digits and '_', got {self.name!r}")
    if not isinstance(self.renderers, tuple) or not all(isinstance(r, str) for r in self.renderers):
      raise TypeError(f"DeviceSpec {self.name}: renderers must be a tuple of str, got {self.renderers!r}")
    if not (callable(self.probe) and callable(self.open) and (self.info is None or callable(self.info))):
      raise TypeError(f"DeviceSpec {self.name}: probe and open must be callable, info callable or None")

hookspec = pluggy.HookspecMarker("tinyspec")
hookimpl = pluggy.HookimplMarker("tinyspec")

class DeviceHooks:
  """The hook specifications; each plugin's implementations are called one plugin at a time, so failures are its own."""

  @hookspec
  def tinyspec_plugin_api(self) -> Sequence[int]:
    """The plugin API versions this plugin supports, e.g. `(1,)`.

    Required: a plugin without it, or one whose versions do not include `PLUGIN_API_VERSION`, is refused as incompatible
    (listed by `tinyspec devices`, raised when one of its devices is asked for)."""

  @hookspec
  def tinyspec_devices(self) -> Sequence[DeviceSpec]:
    """The devices this plugin provides, one `DeviceSpec` each, with names unique across all plugins.

    Called once, when the plugin is loaded, so it must stay cheap: no heavy imports, no probing of drivers or hardware."""
