"""The conformance suite's setup: the device under test is the default device for the whole run (so tensors made inside
tinyspec without a device land on it too), and `dev` and `caps` are short names for the plugin's fixtures."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tinyspec import Tensor
from tinyspec.conformance import Capabilities
from tinyspec.device import Device


@pytest.fixture(autouse=True, scope="session")
def _default_device(tinyspec_device: str) -> Iterator[None]:
  old, Device.DEFAULT = Device.DEFAULT, tinyspec_device
  yield
  Device.DEFAULT = old

@pytest.fixture(autouse=True)
def _seeded() -> None:
  Tensor.manual_seed(0)  # the random tests compare statistics, and failures should reproduce

@pytest.fixture
def dev(tinyspec_device: str) -> str: return tinyspec_device

@pytest.fixture
def caps(tinyspec_caps: Capabilities) -> Capabilities: return tinyspec_caps
