"""The AMD plugin's tests run with the spec verifier on between pipeline stages, as the core's tests do."""
import pytest
from tinyspec.uop import spec


@pytest.fixture(autouse=True, scope="session")
def verify_between_stages():
  old, spec.VERIFY = spec.VERIFY, True
  yield
  spec.VERIFY = old
