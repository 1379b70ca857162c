"""The hooks a tinyspec device plugin implements.

A plugin is a module (or any object) whose functions are marked with `hookimpl` and named after the hooks below;
it is announced through the `tinyspec.devices` entry-point group (see `tinyspec.device.registry`). Importing it must
be cheap: heavy imports and hardware probing belong in `DeviceSpec.probe` and `DeviceSpec.open`.

    from tinyspec.hookspecs import hookimpl

    @hookimpl
    def tinyspec_plugin_api(): return (1,)

    @hookimpl
    def tinyspec_devices(): return (DeviceSpec("CPU", ("LLVM",), probe=_probe, open=_open),)
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # only for the annotation: tinyspec.device imports this module
  from tinyspec.device import DeviceSpec

PLUGIN_API_VERSION = 1
"""The plugin API this core speaks; bumped whenever a hook or `DeviceSpec` changes incompatibly."""

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
