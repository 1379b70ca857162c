"""Shared test setup: the spec verifier runs between pipeline stages, and a `clean_registry` fixture for plugin tests."""
import pytest
from tinyspec.device import Device, registry
from tinyspec.uop import spec


@pytest.fixture(autouse=True, scope="session")
def verify_between_stages():
  """Tests run with the verifier on (the run-time default is off), as TINYSPEC_VERIFY=1 does."""
  old, spec.VERIFY = spec.VERIFY, True
  yield
  spec.VERIFY = old

@pytest.fixture
def clean_registry(monkeypatch):
  """A registry that sees only the plugins a test registers: installed plugins, built-ins and device env vars stay out."""
  for var in ("DEVICE", "TINYSPEC_STRICT_PLUGINS"): monkeypatch.delenv(var, raising=False)
  monkeypatch.setenv("TINYSPEC_PLUGINS", "")
  monkeypatch.setattr(registry, "_BUILTINS", [])
  Device.reset()
  yield
  Device.reset()
