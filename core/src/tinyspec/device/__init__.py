"""Devices: the plugin registry and the `Device` lookup (`Device["CPU"]`, `Device.DEFAULT`), and the interfaces a device's
runtime implements: `Runtime`, `Compiler`, `Allocator`, `Program`, with `Buffer` on top."""
from tinyspec.device.compiler import CompileError, Compiler
from tinyspec.device.memory import Allocator, Buffer, HostAllocator, LRUAllocator
from tinyspec.device.registry import (
  ENTRY_POINT_GROUP,
  Device,
  DeviceError,
  DeviceRegistry,
  DeviceSpec,
  DeviceStatus,
  Plugin,
  UnsupportedDType,
  register_builtin,
)
from tinyspec.device.runtime import Program, Runtime
from tinyspec.interpreter import plugin as _python_plugin

register_builtin(_python_plugin)  # the PYTHON device, always there

__all__ = ["ENTRY_POINT_GROUP", "Device", "DeviceError", "DeviceRegistry", "DeviceSpec", "DeviceStatus", "Plugin", "UnsupportedDType",
           "register_builtin", "Allocator", "Buffer", "CompileError", "Compiler", "HostAllocator", "LRUAllocator", "Program", "Runtime"]
