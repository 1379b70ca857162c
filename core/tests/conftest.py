"""Shared test setup: the spec verifier runs between pipeline stages, and a `clean_registry` fixture for plugin tests."""
import os
from importlib import metadata

import pytest
from tinyspec.device import Device, registry
from tinyspec.uop import spec

_INSTALLED = {ep.value for ep in metadata.entry_points(group=registry.ENTRY_POINT_GROUP)}
# the core's tests run on the reference interpreter even where a plugin (which would be the default) is installed;
# DEVICE=CPU pytest core/tests runs them on another device instead
os.environ.setdefault("DEVICE", "PYTHON")


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
  # plugins installed in this environment (tinyspec-cpu ...) are not even listed; fakes a test puts on sys.path are
  monkeypatch.setattr(registry, "entry_points", lambda group: [ep for ep in metadata.entry_points(group=group) if ep.value not in _INSTALLED])
  monkeypatch.setattr(registry, "_BUILTINS", [])
  Device.reset()
  yield
  Device.reset()

@pytest.fixture
def pytorch_ints(monkeypatch):
  """dtypes.default_int set to int64, PyTorch's default: the positions tinyspec returns (argmax, sort's and cummax's
  indices, randperm) then have the dtype torch's do. By default they are int32, as the default int and tinygrad's are."""
  from tinyspec import dtypes
  monkeypatch.setattr(dtypes, "default_int", dtypes.int64)
