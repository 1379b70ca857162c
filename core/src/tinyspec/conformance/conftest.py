"""The conformance suite's setup: the device under test is the default device for the whole run (so tensors made inside
tinyspec without a device land on it too), and `dev` and `caps` are short names for the plugin's fixtures."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tinyspec import Tensor
from tinyspec.conformance import Capabilities
from tinyspec.device import Device, UnsupportedDType


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

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
  """A test that ran a kernel in a dtype the device does not declare is skipped, naming the dtype, rather than failed: the
  suite checks what a device claims (`Capabilities`), and a test's own `require_dtype` can miss a dtype an op uses inside."""
  report = yield
  exc = call.excinfo.value if call.excinfo is not None else None
  if report.failed and isinstance(exc, UnsupportedDType):  # raised only for dtypes the renderer leaves out of supported_dtypes
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: device {exc.device} does not support dtype {' and '.join(exc.dtypes)}")
  return report

