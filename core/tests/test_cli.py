"""`tinyspec` command line, run in-process against fake plugins."""
from importlib import metadata

import pytest
from tinyspec.cli import main
from tinyspec.device import Device, DeviceSpec
from tinyspec.hookspecs import hookimpl


@pytest.fixture(autouse=True)
def _registry(clean_registry): yield  # every test here starts from an empty registry (conftest.py)

class Fake:
  def __init__(self, *specs): self.specs = specs
  @hookimpl
  def tinyspec_plugin_api(self): return (1,)
  @hookimpl
  def tinyspec_devices(self): return self.specs

class Broken(Fake):
  @hookimpl
  def tinyspec_devices(self): raise ImportError("libfake.so: cannot open shared object file")

def spec(name, reason=None, **kw): return DeviceSpec(name, ("C", "LLVM"), probe=lambda: reason, open=lambda full: full, **kw)

def test_devices_table(capsys):
  Device.register(Fake(spec("FAKE", info=lambda: "LLVM 17.0.6"), spec("FAKEGPU", "no fake GPU\n(driver missing)")), "fake")
  Device.register(Broken(), "broken", devices=["BROKEN"])
  assert main(["devices"]) == 0
  assert capsys.readouterr().out.splitlines() == [
    "DEVICE   PLUGIN    STATUS                                                           RENDERERS",
    "BROKEN   built-in  failed: ImportError: libfake.so: cannot open shared object file",
    "FAKE     built-in  available                                                        C, LLVM (LLVM 17.0.6)",
    "FAKEGPU  built-in  unavailable: no fake GPU (driver missing)                        C, LLVM"]

def test_devices_without_plugins_says_how_to_install(capsys):
  assert main(["devices"]) == 0
  assert capsys.readouterr().out == "No tinyspec devices found: no device plugin is installed.\n" \
                                    "Install one, e.g. from a tinyspec checkout: pip install ./plugins/tinyspec-cpu\n"

def test_devices_strict(capsys):
  Device.register(Fake(spec("FAKE")), "fake")
  Device.register(Broken(), "broken")
  assert main(["devices", "--strict"]) == 1
  out, err = capsys.readouterr()
  assert out == "" and "ImportError: libfake.so" in err
  assert err.splitlines()[-1] == "tinyspec: error: plugin broken (built-in) failed to load: ImportError: libfake.so: cannot open shared object file"

def test_info_that_raises_does_not_break_the_listing(capsys):
  Device.register(Fake(spec("FAKE", info=lambda: 1 / 0)), "fake")
  assert main(["devices"]) == 0
  assert capsys.readouterr().out.splitlines()[1].endswith("C, LLVM (info raised ZeroDivisionError: division by zero)")

def test_version(capsys):
  assert main(["--version"]) == 0
  assert capsys.readouterr().out == f"tinyspec {metadata.version('tinyspec')}\n"

def test_no_command_prints_help(capsys):
  assert main([]) == 0
  assert "devices" in capsys.readouterr().out
