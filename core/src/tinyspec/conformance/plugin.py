"""The pytest plugin behind `pytest --pyargs tinyspec.conformance --tinyspec-device=NAME`, registered through the
`pytest11` entry point, so it is active in every pytest run where tinyspec is installed. It only adds an option, the
`slow` marker, two fixtures and a header line; the suite's own setup (the default device for the session) is in the
suite's conftest.py.

  --tinyspec-device=NAME   the device the conformance tests run on ("PYTHON", "CPU", "CPU:1"); default: the default
                           device ($DEVICE, else the first available). An unknown or unavailable device is a usage
                           error (exit status 4) naming the reason, before anything is collected. pytest's header
                           names the device and its capabilities.
  tinyspec_device          fixture: that device's canonical name
  tinyspec_caps            fixture: its `tinyspec.conformance.Capabilities`
"""
from __future__ import annotations

import os

import pytest

from tinyspec.conformance import Capabilities

_KEY = pytest.StashKey[str]()

def pytest_addoption(parser: pytest.Parser) -> None:
  group = parser.getgroup("tinyspec", "tinyspec conformance suite")
  group.addoption("--tinyspec-device", action="store", default=None, metavar="NAME",
                  help="device the tinyspec conformance suite runs on (pytest --pyargs tinyspec.conformance); default: the default device")

def resolve_device(name: str | None) -> str:
  """The canonical name of device `name` (the default device when None), opened; raises pytest.UsageError saying why
  it cannot be used."""
  from tinyspec.device import Device, DeviceError
  given = f"--tinyspec-device={name}" if name is not None else f"DEVICE={os.environ['DEVICE']}" if os.environ.get("DEVICE") else "the default device"
  try:
    name = Device.DEFAULT if name is None else Device.canonicalize(name)
    Device[name]
  except DeviceError as e: raise pytest.UsageError(f"{given}: {e}") from None
  return name

def pytest_configure(config: pytest.Config) -> None:
  # checked up front, so a typo ends the run with one clear message instead of an error in every test; a run of the
  # suite without the option resolves the default device here too, so the header says which device it tests
  name = config.getoption("tinyspec_device", None)
  suite = config.getoption("pyargs", False) and any(str(a).startswith("tinyspec.conformance") for a in config.args)
  if name is not None or suite: config.stash[_KEY] = resolve_device(name)
  # the suite's long runs (the fuzzer's 2000 cases) skip themselves unless selected with -m slow
  config.addinivalue_line("markers", "slow: a long conformance run, skipped unless selected with -m slow")

def pytest_report_header(config: pytest.Config) -> list[str]:
  if (name := config.stash.get(_KEY, None)) is None: return []
  return [f"tinyspec device: {name} ({Capabilities.of(name).summary()})"]

@pytest.fixture(scope="session")
def tinyspec_device(pytestconfig: pytest.Config) -> str:
  """The device the conformance suite tests: --tinyspec-device, else the default device."""
  if (name := pytestconfig.stash.get(_KEY, None)) is None: pytestconfig.stash[_KEY] = name = resolve_device(None)
  return name

@pytest.fixture(scope="session")
def tinyspec_caps(tinyspec_device: str) -> Capabilities:
  """What that device declares it can do; `tinyspec_caps.require_dtype(dt)` skips a test naming the missing dtype."""
  return Capabilities.of(tinyspec_device)
