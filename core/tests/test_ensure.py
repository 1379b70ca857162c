"""tinyspec.device.ensure, which a plugin's test environment runs before its suite (ensure_opencl.py, ensure_webgpu.py)."""
from tinyspec.device import ensure


def test_an_available_device_passes_without_installing(monkeypatch, capsys):
  monkeypatch.setattr(ensure, "apt_install", lambda *a: (_ for _ in ()).throw(AssertionError("installed for an available device")))
  assert ensure.ensure_device("PYTHON", "tinyspec", "no-such-package", "advice") == 0
  assert capsys.readouterr().out.startswith("ensure PYTHON: ")

def test_an_unknown_device_fails_naming_what_to_install(monkeypatch, capsys):
  monkeypatch.setattr(ensure.os, "geteuid", lambda: 1000)  # not root: nothing is installed, the advice is printed
  assert ensure.ensure_device("NOSUCHDEV", "./plugins/tinyspec-nosuchdev", "nosuchdev-driver", "Install nosuchdev-driver.") == 1
  out = capsys.readouterr()
  assert "the NOSUCHDEV device is not registered: pip install ./plugins/tinyspec-nosuchdev" in out.out
  assert "Install nosuchdev-driver." in out.err

def test_as_root_with_apt_it_installs_then_checks_again(monkeypatch):
  monkeypatch.setattr(ensure.os, "geteuid", lambda: 0)
  monkeypatch.setattr(ensure.shutil, "which", lambda name: "/usr/bin/apt-get")
  installed, checks = [], iter([False, True])
  monkeypatch.setattr(ensure, "apt_install", lambda device, package: installed.append(package) or True)
  monkeypatch.setattr(ensure, "device_ready", lambda device, plugin: next(checks))
  assert ensure.ensure_device("MYDEV", "tinyspec-mydev", "mydev-driver", "advice") == 0 and installed == ["mydev-driver"]
