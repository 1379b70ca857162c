"""Devices: the plugin registry and the `Device` lookup (`Device["CPU"]`, `Device.DEFAULT`)."""
from tinyspec.device.registry import (
  ENTRY_POINT_GROUP,
  Device,
  DeviceError,
  DeviceRegistry,
  DeviceSpec,
  DeviceStatus,
  Plugin,
  register_builtin,
)

register_builtin("tinyspec.interpreter.plugin")  # the PYTHON device, always there

__all__ = ["ENTRY_POINT_GROUP", "Device", "DeviceError", "DeviceRegistry", "DeviceSpec", "DeviceStatus", "Plugin", "register_builtin"]
