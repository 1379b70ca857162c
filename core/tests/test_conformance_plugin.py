"""The conformance suite's pytest plugin: its entry point, --tinyspec-device resolution and its errors, the capabilities
read from a renderer and the skip messages naming them, and a whole run against a third-party device that lacks some."""
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest
from tinyspec import dtypes
from tinyspec.conformance import TENSOR_DTYPES, Capabilities, plugin
from tinyspec.device import Device, DeviceSpec
from tinyspec.hookspecs import PLUGIN_API_VERSION, hookimpl
from tinyspec.renderer import Renderer


def test_registered_as_a_pytest_plugin():
  assert "tinyspec.conformance.plugin" in {ep.value for ep in entry_points(group="pytest11")}

def test_device_names_are_canonicalized():
  assert plugin.resolve_device("python") == "PYTHON" and plugin.resolve_device(" Python:01 ") == "PYTHON:1"

def test_unknown_and_malformed_devices_are_usage_errors():
  with pytest.raises(pytest.UsageError, match=r"^--tinyspec-device=nope: unknown device 'NOPE'; known devices: .*PYTHON"):
    plugin.resolve_device("nope")
  with pytest.raises(pytest.UsageError, match=r"^--tinyspec-device=cpu-1: invalid device name 'cpu-1'"): plugin.resolve_device("cpu-1")

class _Gone:
  @hookimpl
  def tinyspec_plugin_api(self): return (PLUGIN_API_VERSION,)
  @hookimpl
  def tinyspec_devices(self): return (DeviceSpec("GONE", ("X",), probe=lambda: "no GONE card found", open=lambda n: None),)

def test_a_bad_default_device_names_the_variable(monkeypatch):
  monkeypatch.setenv("DEVICE", "nope")
  monkeypatch.setattr(Device, "_default", None)
  with pytest.raises(pytest.UsageError, match=r"^DEVICE=nope: unknown device 'NOPE'"): plugin.resolve_device(None)

def test_unavailable_device_is_a_usage_error_with_the_reason(clean_registry):
  Device.register(_Gone())
  with pytest.raises(pytest.UsageError, match=r"^--tinyspec-device=GONE: device GONE \(built-in\) is not available here: no GONE card found$"):
    plugin.resolve_device("GONE")

def test_configure_checks_the_option_up_front():
  class Config:  # what pytest_configure touches
    stash = pytest.Stash()
    def getoption(self, name, default=None): return {"tinyspec_device": "NOPE"}.get(name, default)
    def addinivalue_line(self, name, line): pass
  with pytest.raises(pytest.UsageError, match="unknown device 'NOPE'"): plugin.pytest_configure(Config())

def test_capabilities_of_the_python_device():
  caps = Capabilities.of("PYTHON")
  assert caps.dtypes == frozenset(TENSOR_DTYPES)  # bfloat16 too, computed in float32 and rounded
  assert caps.has_local and caps.has_shared and caps.tensor_cores == () and caps.threads == 1 and caps.vector_widths == (1, 2, 4, 8, 16, 32)
  dts = "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64"
  assert caps.summary().startswith(f"dtypes {dts}; native -; local True")

def test_skips_name_the_missing_capability():
  caps = Capabilities("MYDEV", frozenset({dtypes.float32}), frozenset(), False, False, (), 1, (1,))
  caps.require_dtype(dtypes.float32)
  with pytest.raises(pytest.skip.Exception, match=r"^device MYDEV does not support dtype bfloat16$"):
    caps.require_dtype(dtypes.float32, dtypes.bfloat16)
  with pytest.raises(pytest.skip.Exception, match=r"^device MYDEV does not support workgroups \(its renderer's has_local is False\)$"):
    caps.require_local()
  with pytest.raises(pytest.skip.Exception, match="does not support workgroups"): caps.require_shared()
  with pytest.raises(pytest.skip.Exception, match=r"^device MYDEV does not support local memory \(its renderer's has_shared is False\)$"):
    Capabilities("MYDEV", frozenset(), frozenset(), True, False, (), 1, (1,)).require_shared()

@pytest.mark.parametrize("attrs", [{"threads": 0}, {"threads": 2.0}, {"vector_widths": ()}, {"vector_widths": [4]}, {"vector_widths": (4, 0)}])
def test_renderer_refuses_bad_threads_and_vector_widths(attrs):
  with pytest.raises(TypeError, match="threads must be an int >= 1 and vector_widths a non-empty tuple"): type("Bad", (Renderer,), attrs)

FAKE_DEVICE = '''
from tinyspec.device import DeviceSpec, HostAllocator, Runtime
from tinyspec.device.registry import register_builtin
from tinyspec.hookspecs import PLUGIN_API_VERSION, hookimpl
from tinyspec.interpreter.runtime import PythonCompiler, PythonProgram, PythonRenderer

class FakeRenderer(PythonRenderer):  # the interpreter, declaring fewer capabilities: no workgroups, no float64
  device = "FAKE"
  has_local, has_shared, local_max, shared_max = False, False, None, 0
  supported_dtypes = frozenset(d for d in PythonRenderer.supported_dtypes if d.name != "float64")

class FakeRuntime(Runtime):
  def __init__(self, name): super().__init__(name, FakeRenderer(), PythonCompiler(), HostAllocator())
  def program(self, name, binary): return PythonProgram(name, binary)

class Plugin:
  @hookimpl
  def tinyspec_plugin_api(self): return (PLUGIN_API_VERSION,)
  @hookimpl
  def tinyspec_devices(self): return (DeviceSpec("FAKE", ("PYTHON",), probe=lambda: None, open=FakeRuntime),)

register_builtin(Plugin())
'''

def test_a_third_party_device_runs_the_suite_and_skips_what_it_lacks(tmp_path):
  (tmp_path / "fake_device.py").write_text(textwrap.dedent(FAKE_DEVICE))
  env = {k: v for k, v in os.environ.items() if k not in ("DEVICE", "TINYSPEC_PLUGINS", "PYTEST_ADDOPTS")}
  env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
  cmd = [sys.executable, "-m", "pytest", "-p", "fake_device", "-p", "no:cacheprovider", "--pyargs", "tinyspec.conformance",
         "--tinyspec-device=fake", "-k", "test_kernels or (test_dtypes and float64)", "-rs"]
  out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stdout + out.stderr
  dts = "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32"  # no float64
  assert f"tinyspec device: FAKE (dtypes {dts}; native -; local False" in out.stdout
  assert "device FAKE does not support workgroups (its renderer's has_local is False)" in out.stdout
  assert "device FAKE does not support dtype float64" in out.stdout
  assert " passed" in out.stdout.splitlines()[-1] and " skipped" in out.stdout.splitlines()[-1]

NARROW_DEVICE = FAKE_DEVICE.replace('if d.name != "float64"', 'if d.name not in ("int8", "int16", "float16")')

def test_a_device_without_small_dtypes_skips_the_tests_that_use_them(tmp_path):
  (tmp_path / "fake_device.py").write_text(textwrap.dedent(NARROW_DEVICE))
  env = {k: v for k, v in os.environ.items() if k not in ("DEVICE", "TINYSPEC_PLUGINS", "PYTEST_ADDOPTS")}
  env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
  tests = "test_fills or test_movement_keeps_ints_and_bools or test_argmax_argmin or test_rand_like"
  cmd = [sys.executable, "-m", "pytest", "-p", "fake_device", "-p", "no:cacheprovider", "--pyargs", "tinyspec.conformance",
         "--tinyspec-device=fake", "-k", tests, "-rs"]
  out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stdout + out.stderr  # skipped, not failed
  for dt in ("int8", "int16", "float16"): assert f"device FAKE does not support dtype {dt}" in out.stdout
  assert " failed" not in out.stdout.splitlines()[-1] and " skipped" in out.stdout.splitlines()[-1]

