"""`Runtime`, what a plugin's `DeviceSpec.open` returns, and `Program`, one loaded kernel ready to launch.

The pipeline uses a device only through these: `renderer.render` makes source, `compiler.compile_cached` makes a binary,
`program(name, binary)` loads it, and the program is called with buffer handles from `allocator`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tinyspec.device.compiler import Compiler
from tinyspec.device.memory import Allocator
from tinyspec.renderer import Renderer


class Program:
  """One compiled kernel, loaded and ready to run. A device subclasses it and implements `__call__`."""

  def __init__(self, name: str, binary: bytes):
    self.name, self.binary = name, binary

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] | None = None, local_size: tuple[int, ...] | None = None,
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    """Launch the kernel on `bufs` (allocator handles, in the kernel's parameter order) and the integer variable values
    `vals` (in the order the kernel declares them).

    `global_size` is the grid in workgroups per dimension and `local_size` the workgroup shape; None means (1, 1, 1), and a
    device without workgroups gets None for `local_size`. With `wait`, block until the kernel has finished and return the
    seconds it ran (device time where the device can measure it); otherwise the launch may be asynchronous and the
    result is None."""
    raise NotImplementedError(f"{type(self).__name__} does not implement __call__")

  def __repr__(self): return f"<{type(self).__name__} {self.name}>"

@dataclass(frozen=True)
class Launch:
  """One kernel launch TinyJit captured: `program` called with `handles` (a list, its slots in `inputs` refilled with the
  replay's input handles: (position in handles, input number) pairs) and the grid it was launched with. `keep` holds the
  Buffers behind the handles, so their memory lives as long as the capture; `variables` names the kernel's variables (in
  the order of its `vals`), whose values a replay passes (a device graph is not asked for launches that take any)."""
  program: Program
  handles: list[Any]
  inputs: tuple[tuple[int, int], ...]
  global_size: tuple[int, ...] | None
  local_size: tuple[int, ...] | None
  keep: tuple[Any, ...] = ()
  variables: tuple[str, ...] = ()

class Runtime:
  """One opened device, e.g. "CUDA:1": what `Device[name]` returns. A plugin builds one in `DeviceSpec.open(name)`, giving it
  the device's renderer, compiler and allocator, and implements `program` (and `synchronize` if work can be pending)."""

  def __init__(self, name: str, renderer: Renderer, compiler: Compiler, allocator: Allocator):
    self.name = name
    """The full device name it was opened as, e.g. "CUDA:1"."""
    self.renderer, self.compiler, self.allocator = renderer, compiler, allocator

  def program(self, name: str, binary: bytes) -> Program:
    """Load `binary` (from `compiler`) and return the kernel called `name` in it, ready to launch."""
    raise NotImplementedError(f"{type(self).__name__} does not implement program")

  def synchronize(self) -> None:
    """Wait for every launch and copy queued on this device to finish. Devices that run everything synchronously keep this no-op."""

  def graph(self, launches: list[Launch]) -> Callable[[list[Any]], None] | None:
    """Optional: `launches` (consecutive, all on this device) prepared to run as one unit, as a callable taking the replay's
    input handles (TinyJit's inputs, in order); e.g. a CUDA graph, or one native call sequence. None (the default): TinyJit
    calls each launch's Program in turn."""
    return None

  def __repr__(self): return f"<{type(self).__name__} {self.name}>"
