"""The backend conformance suite: what every tinyspec device must compute, checked against numpy.

    pytest --pyargs tinyspec.conformance --tinyspec-device=NAME

runs it against the installed device NAME (the built-in PYTHON device, CPU, or a third party's); without the option it
runs against the default device (`$DEVICE`, else the first available one). Arguments after it go to pytest as usual:
`-k matmul`, `-x`, `-n 4` with pytest-xdist.

It covers every Tensor op family (creation, elementwise and activations, comparisons, bitwise, reductions, movement,
indexing, gather/scatter, matmul, convolution, pooling, normalization), every dtype the device claims and the casts
between them, broadcasting, 0-d and zero-size tensors, tensors past 2**24 elements, transcendental accuracy, kernel
reuse, gradients, @function, devices with several indices, and hand-built kernels with workgroups and local memory.

A device says what it can do through its renderer (`Device[NAME].renderer`, see `tinyspec.renderer.Renderer`): the
dtypes it computes in, whether it has workgroups and shared memory, its tensor cores, threads and vector widths. A test
that needs something the device does not declare is skipped, and the skip names the capability ("device METAL does not
support dtype float64"), so `-ra` lists everything that was not checked. A device that declares a capability it does
not have fails the tests that use it.

The pytest plugin (`tinyspec.conformance.plugin`, registered through the `pytest11` entry point) adds the option and the
`tinyspec_device` and `tinyspec_caps` fixtures, which a plugin's own tests may use too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyspec.device import Device
from tinyspec.dtype import FLOATS, INTS, DType, dtypes
from tinyspec.uop.ops import Ops


def require_device(name: str, install: str) -> None:
  """For a plugin's own tests: skip, naming the reason, where device `name` is unavailable here (no driver, no compiler);
  fail where it is not registered (`install` says how to get it) or its plugin is broken."""
  import pytest
  row = next((r for r in Device.listing() if r.name == name), None)
  assert row is not None, f"the {name} device is not registered: {install}"
  if row.status == "unavailable": pytest.skip(f"{name} is unavailable here: {row.detail}")
  assert row.status == "available", f"{name} is {row.status}: {row.detail}"

TENSOR_DTYPES: tuple[DType, ...] = (dtypes.bool, *INTS, *FLOATS)
"""Every dtype a Tensor can have, in promotion order: the ones the suite checks where the device claims them."""

@dataclass(frozen=True)
class Capabilities:
  """What a device declares it can do, read from its renderer. The `require_*` methods skip the calling test, naming
  the missing capability, when the device lacks it."""
  device: str
  dtypes: frozenset[DType]
  """The Tensor dtypes it computes in (the renderer's `dtypes`)."""
  native: frozenset[Ops]
  """The decomposed ops it renders directly."""
  has_local: bool
  has_shared: bool
  tensor_cores: tuple[Any, ...]
  threads: int
  vector_widths: tuple[int, ...]

  @classmethod
  def of(cls, device: str) -> Capabilities:
    """The capabilities of `device` (opens it)."""
    from tinyspec.device import Device
    r = Device[device].renderer
    return cls(device, frozenset(r.supported_dtypes) & frozenset(TENSOR_DTYPES), frozenset(r.native), bool(r.has_local), bool(r.has_shared),
               tuple(r.tensor_cores), int(getattr(r, "threads", 1)), tuple(getattr(r, "vector_widths", (1,))))

  def require_dtype(self, *dts: DType) -> None:
    """Skip unless the device supports every one of `dts`."""
    import pytest
    for dt in dts:
      if dt not in self.dtypes: pytest.skip(f"device {self.device} does not support dtype {dt.name}")

  def require_local(self) -> None:
    """Skip unless kernels can run as a grid of workgroups (SPECIAL gidx/lidx indices)."""
    import pytest
    if not self.has_local: pytest.skip(f"device {self.device} does not support workgroups (its renderer's has_local is False)")

  def require_shared(self) -> None:
    """Skip unless workgroups have shared (LOCAL) memory with barriers."""
    import pytest
    self.require_local()
    if not self.has_shared: pytest.skip(f"device {self.device} does not support local memory (its renderer's has_shared is False)")

  def summary(self) -> str:
    """One line for pytest's header."""
    names = [d.name for d in TENSOR_DTYPES if d in self.dtypes]
    return (f"dtypes {' '.join(names)}; native {' '.join(sorted(o.name for o in self.native)) or '-'}; local {self.has_local}, "
            f"shared {self.has_shared}; tensor cores {len(self.tensor_cores)}; threads {self.threads}; vector widths {self.vector_widths}")

__all__ = ["Capabilities", "TENSOR_DTYPES"]
