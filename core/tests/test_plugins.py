"""The plugin contract: registration, validation, failure isolation, filtering, strict mode and entry-point discovery."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tinyspec
from tinyspec.device import Device, DeviceError, DeviceSpec, register_builtin
from tinyspec.hookspecs import PLUGIN_API_VERSION, hookimpl


@pytest.fixture(autouse=True)
def _registry(clean_registry): yield  # every test here starts from an empty registry (conftest.py)

class Fake:
  """A plugin providing devices `names`, each usable unless `reason` is set; records what it opened."""
  def __init__(self, *names, api=(PLUGIN_API_VERSION,), reason=None, renderers=("FAKEC",)):
    self.names, self.api, self.reason, self.renderers, self.opened, self.probes = names, api, reason, renderers, [], 0
  def probe(self):
    self.probes += 1
    return self.reason
  def open(self, name):
    self.opened.append(name)
    return ("runtime", name)
  @hookimpl
  def tinyspec_plugin_api(self): return self.api
  @hookimpl
  def tinyspec_devices(self): return [DeviceSpec(n, self.renderers, probe=self.probe, open=self.open) for n in self.names]

class Exploding(Fake):
  @hookimpl
  def tinyspec_devices(self): raise RuntimeError("driver table corrupt")

def row(name):
  return next(r for r in Device.listing() if r.name == name)

# *** in-process registration ***

def test_good_plugin_opens_and_caches():
  fake = Fake("FAKE")
  assert Device.register(fake, "fake").status == "ok"
  r = row("FAKE")
  assert (r.status, r.detail, r.plugin.origin, r.spec.renderers) == ("available", "", "built-in", ("FAKEC",))
  assert Device["fake"] == ("runtime", "FAKE")
  assert Device["FAKE"] is Device["fake"] and Device["fake:01"] == ("runtime", "FAKE:1")
  assert fake.opened == ["FAKE", "FAKE:1"] and fake.probes == 1

def test_unavailable_device_is_listed_with_reason_and_raises_on_use():
  Device.register(Fake("GPU", reason="no fake driver (libfake.so not found)"), "gpu")
  r = row("GPU")
  assert (r.status, r.detail) == ("unavailable", "no fake driver (libfake.so not found)")
  with pytest.raises(DeviceError, match=re.escape("device GPU (built-in) is not available here: no fake driver (libfake.so not found)")):
    Device["GPU"]

def test_probe_that_raises_counts_as_unavailable():
  fake = Fake("GPU")
  fake.probe = lambda: 1 / 0
  Device.register(fake, "gpu")
  assert row("GPU").detail == "probe raised ZeroDivisionError: division by zero"
  with pytest.raises(DeviceError, match="probe raised ZeroDivisionError") as e: Device["GPU"]
  assert isinstance(e.value.__cause__, ZeroDivisionError)

def test_open_failure_is_wrapped_and_not_cached():
  cards, fake = {}, Fake("FAKE")
  fake.open = lambda name: cards[name]
  Device.register(fake, "fake")
  with pytest.raises(DeviceError, match=re.escape("device FAKE:3 (built-in) failed to open: KeyError: 'FAKE:3'")) as e: Device["FAKE:3"]
  assert isinstance(e.value.__cause__, KeyError)
  cards["FAKE:3"] = "plugged in"
  assert Device["FAKE:3"] == "plugged in"

def test_broken_hook_is_recorded_and_raised_only_on_use():
  good = Device.register(Fake("GOOD"), "good")
  bad = Device.register(Exploding(), "bad", devices=["BROKEN"])
  assert (good.status, bad.status, bad.error) == ("ok", "failed", "RuntimeError: driver table corrupt")
  assert "Traceback" in bad.traceback and "in tinyspec_devices" in bad.traceback
  assert Device.pm.get_plugin("bad") is None and Device["GOOD"] == ("runtime", "GOOD")
  assert (row("BROKEN").status, row("BROKEN").detail) == ("failed", "RuntimeError: driver table corrupt")
  msg = "device BROKEN is unusable: plugin bad (built-in) failed to load: RuntimeError: driver table corrupt"
  with pytest.raises(DeviceError, match=re.escape(msg)) as e: Device["broken"]
  assert isinstance(e.value.__cause__, RuntimeError)

def test_import_error_is_recorded():
  bad = Device.register("tinyspec_no_such_plugin_module", devices=["GHOST"])
  assert (bad.status, bad.error) == ("failed", "ModuleNotFoundError: No module named 'tinyspec_no_such_plugin_module'")
  with pytest.raises(DeviceError, match="device GHOST is unusable: plugin tinyspec_no_such_plugin_module") as e: Device["GHOST"]
  assert isinstance(e.value.__cause__, ModuleNotFoundError)

def test_strict_mode_raises_at_once(monkeypatch):
  monkeypatch.setenv("TINYSPEC_STRICT_PLUGINS", "1")
  Device.reset()
  with pytest.raises(DeviceError, match=re.escape("plugin bad (built-in) failed to load: RuntimeError: driver table corrupt")) as e:
    Device.register(Exploding(), "bad")
  assert isinstance(e.value.__cause__, RuntimeError) and Device.pm.get_plugin("bad") is None

def test_strict_listing_raises_for_failures_recorded_earlier():
  Device.register(Exploding(), "bad")
  Device.strict = True
  with pytest.raises(DeviceError, match="plugin bad .* failed to load"): Device.listing()

@pytest.mark.parametrize("api, message", [
  ((999,), "it supports plugin API versions [999], this tinyspec speaks version 1"),
  (None, "it declares no plugin API version (no tinyspec_plugin_api hook); this tinyspec speaks version 1")])
def test_incompatible_plugin_is_refused_and_registry_unchanged(api, message):
  Device.register(Fake("GOOD"), "good")
  before = (Device.pm.get_plugins(), dict(Device._specs))
  plugin = Fake("NEW", api=api)
  if api is None: plugin.tinyspec_plugin_api = lambda: None  # a plain attribute carries no hookimpl marker: the hook is missing
  rec = Device.register(plugin, "new", devices=["NEW"])
  assert (rec.status, rec.error) == ("incompatible", message)
  assert (Device.pm.get_plugins(), Device._specs) == before
  assert (row("NEW").status, row("NEW").detail) == ("incompatible", message)
  with pytest.raises(DeviceError, match=re.escape(f"device NEW is unusable: plugin new (built-in) is incompatible: {message}")): Device["NEW"]

@pytest.mark.parametrize("plugin, error", [
  (Fake("DUP", "DUP"), "ValueError: device DUP is listed twice"),
  (type("Strs", (Fake,), {"tinyspec_devices": hookimpl(lambda self: ["CPU"])})(),
   "TypeError: tinyspec_devices must return a sequence of DeviceSpec, got ['CPU']"),
  (Fake("lower"), "ValueError: device name must be upper-case letters, digits and '_', got 'lower'"),
  (Fake("OK", renderers=["LLVM"]), "TypeError: DeviceSpec OK: renderers must be a tuple of str, got ['LLVM']"),
  (Fake("OK", api=1), "TypeError: tinyspec_plugin_api must return a sequence of int, got 1"),
  (type("Args", (Fake,), {"tinyspec_devices": hookimpl(lambda self, extra: [])})(),
   "PluginValidationError: Plugin 'bad' for hook 'tinyspec_devices'")])
def test_bad_hook_results_fail_the_plugin(plugin, error):
  rec = Device.register(plugin, "bad")
  assert rec.status == "failed" and rec.error.startswith(error)
  assert Device.pm.get_plugin("bad") is None and not Device._specs

def test_a_device_two_plugins_provide_is_listed_for_both_and_refused_naming_both():
  first, second = Fake("DUP", "ONE"), Fake("DUP", "OTHER")
  Device.register(first, "first"), Device.register(second, "second", devices=["DUP"])
  assert Device.plugins["second"].status == "ok"
  rows = [r for r in Device.listing() if r.name == "DUP"]
  assert [(r.plugin.name, r.status) for r in rows] == [("first", "conflict"), ("second", "conflict")]
  assert rows[0].detail == "also provided by second (built-in); TINYSPEC_PLUGINS picks one"
  with pytest.raises(DeviceError, match=r"^device DUP is provided by 2 plugins: first \(built-in\) and second \(built-in\); set TINYSPEC_PLUGINS"):
    Device["DUP"]
  assert first.opened == second.opened == []  # neither was opened
  assert Device["ONE"] == ("runtime", "ONE") and Device["OTHER"] == ("runtime", "OTHER")  # their other devices are unaffected
  assert Device.DEFAULT in ("ONE", "OTHER")  # a contested name is never the default

@pytest.mark.parametrize("exc", [SystemExit(3), GeneratorExit(), BaseException("odd")], ids=lambda e: type(e).__name__)
def test_a_plugin_raising_a_base_exception_is_recorded_not_fatal(exc):
  class Raising(Fake):
    @hookimpl
    def tinyspec_devices(self): raise exc
  Device.register(Fake("GOOD"), "good")
  rec = Device.register(Raising(), "raising", devices=["BAD"])
  assert rec.status == "failed" and rec.error.startswith(type(exc).__name__)
  assert row("BAD").status == "failed" and row("GOOD").status == "available" and Device["GOOD"] == ("runtime", "GOOD")
  with pytest.raises(DeviceError, match="device BAD is unusable: plugin raising .* failed to load"): Device["BAD"]

def test_keyboard_interrupt_in_a_plugin_is_not_swallowed():
  class Interrupted(Fake):
    @hookimpl
    def tinyspec_devices(self): raise KeyboardInterrupt
  with pytest.raises(KeyboardInterrupt): Device.register(Interrupted(), "interrupted")

def test_a_misspelt_hook_is_refused_naming_it():
  class Misspelt:
    @hookimpl
    def tinyspec_plugin_api(self): return (1,)
    @hookimpl
    def tinyspec_device(self): return (DeviceSpec("NEVER", ("X",), probe=lambda: None, open=lambda name: None),)
  rec = Device.register(Misspelt(), "misspelt", devices=["NEVER"])
  assert (rec.status, rec.error) == ("incompatible", "it implements tinyspec_device, which is no tinyspec hook "
                                                      "(the hooks: tinyspec_devices, tinyspec_plugin_api)")
  assert Device.pm.get_plugin("misspelt") is None
  assert Device.register(Fake("LATER"), "later").status == "ok"  # the refused plugin left nothing behind to fail the next check

def test_first_use_from_many_threads_sees_every_device():
  """Eight threads racing through the registry's first scan all find the device, which is opened once."""
  from concurrent.futures import ThreadPoolExecutor

  from tinyspec.device import registry
  racer = Fake("RACE")
  register_builtin(racer)  # registered again at every scan, like the PYTHON device
  try:
    Device.reset()
    with ThreadPoolExecutor(8) as pool: got = list(pool.map(lambda _: Device["RACE"], range(64)))
    assert got == [("runtime", "RACE")] * 64 and racer.opened == ["RACE"]
  finally: registry._BUILTINS.remove(racer)

def test_reusing_a_plugin_name_is_an_error():
  Device.register(Fake("A"), "same")
  with pytest.raises(DeviceError, match="a plugin named 'same' is already registered"): Device.register(Fake("B"), "same")

def test_unknown_and_malformed_names():
  Device.register(Fake("FAKE", "GPU"), "fake")
  with pytest.raises(DeviceError, match=re.escape("unknown device 'NOPE'; known devices: FAKE, GPU")): Device["nope"]
  for bad in ("", "cpu x", "CPU:", "CPU:-1", ":1", "1CPU"):
    with pytest.raises(DeviceError, match=re.escape(f"invalid device name {bad!r}: expected NAME or NAME:INDEX")): Device[bad]

def test_unknown_name_with_no_plugins_says_how_to_install():
  with pytest.raises(DeviceError, match=re.escape("unknown device 'CPU'; known devices: none (install a device plugin, e.g. pip install")):
    Device["CPU"]

def test_canonicalize():
  assert [Device.canonicalize(n) for n in ("cpu", "Cpu:1", " cuda:007 ", "CPU:0", "my_dev2")] == ["CPU", "CPU:1", "CUDA:7", "CPU:0", "MY_DEV2"]

def test_default_prefers_cpu_then_alphabetical_then_python():
  for name in ("PYTHON", "ZED", "BETA"): Device.register(Fake(name), name)
  assert Device.DEFAULT == "BETA"
  Device.reset()
  Device.register(Fake("PYTHON"), "py"), Device.register(Fake("ZED"), "zed"), Device.register(Fake("CPU", reason="no LLVM"), "cpu")
  assert Device.DEFAULT == "ZED"
  Device.reset()
  Device.register(Fake("AAA"), "a"), Device.register(Fake("CPU"), "cpu")
  assert Device.DEFAULT == "CPU"
  Device.DEFAULT = "aaa"
  assert Device.DEFAULT == "AAA"
  Device.reset()
  Device.register(Fake("AMD_CHECK"), "amd"), Device.register(Fake("PYTHON"), "py")
  assert Device.DEFAULT == "PYTHON"  # a checked device runs on the interpreter too, slower: never the default

def test_default_from_env_is_checked_when_used(monkeypatch):
  monkeypatch.setenv("DEVICE", "nope:1")
  assert Device.DEFAULT == "NOPE:1"
  with pytest.raises(DeviceError, match="unknown device 'NOPE'"): Device[Device.DEFAULT]

def test_default_with_nothing_available():
  Device.register(Fake("GPU", reason="no card"), "gpu")
  with pytest.raises(DeviceError, match=re.escape("no tinyspec device is available; GPU: no card. Install a device plugin, e.g. `pip")):
    assert Device.DEFAULT

def test_register_builtin_survives_reset():
  Device.listing()
  register_builtin(Fake("BUILTIN"))
  assert row("BUILTIN").plugin.origin == "built-in"
  Device.reset()
  assert row("BUILTIN").status == "available" and Device["BUILTIN"] == ("runtime", "BUILTIN")

# *** entry-point discovery from real (throw-away) distributions ***

GOOD_MODULE = """
from tinyspec.device import DeviceSpec
from tinyspec.hookspecs import hookimpl

@hookimpl
def tinyspec_plugin_api(): return (1,)

@hookimpl
def tinyspec_devices():
  return (DeviceSpec("FAKEGOOD", ("FAKEC",), probe=lambda: None, open=lambda name: ("good", name), info=lambda: "fake 1.0"),
          DeviceSpec("FAKEGOOD2", ("FAKEC",), probe=lambda: "no fake hardware", open=lambda name: None))
"""

def write_dist(root: Path, dist: str, version: str, module: str, source: str, entries: list[str]) -> Path:
  (pkg := root / dist).mkdir()
  (pkg / f"{module}.py").write_text(textwrap.dedent(source))
  (pkg / "pyproject.toml").write_text(textwrap.dedent(f"""
    [build-system]
    requires = ["setuptools"]
    build-backend = "setuptools.build_meta"
    [project]
    name = "{dist}"
    version = "{version}"
    [project.entry-points."tinyspec.devices"]
    {chr(10).join(f'{e} = "{module}"' for e in entries)}
    [tool.setuptools]
    py-modules = ["{module}"]
  """).replace("\n    ", "\n"))
  return pkg

@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
  """A directory holding three freshly installed plugin distributions: a good one (two entries, one module), one that
  raises at import, and one that raises SystemExit at import."""
  root, target = tmp_path_factory.mktemp("dists"), tmp_path_factory.mktemp("site")
  good = write_dist(root, "tinyspec-fake-good", "1.2.3", "tinyspec_fake_good", GOOD_MODULE, ["FAKEGOOD", "FAKEGOOD2"])
  broken = write_dist(root, "tinyspec-fake-broken", "0.0.1", "tinyspec_fake_broken", "raise RuntimeError('fake driver exploded at import')",
                      ["FAKEBROKEN"])
  # offline and without build isolation, so it uses the setuptools installed with the test extras
  pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "--target", str(target)]
  exiting = write_dist(root, "tinyspec-fake-exit", "0.0.2", "tinyspec_fake_exit", "raise SystemExit(3)", ["FAKEEXIT"])
  out = subprocess.run([*pip, str(good), str(broken), str(exiting)], capture_output=True, text=True)
  assert out.returncode == 0, out.stderr
  return target

@pytest.fixture
def on_path(site, monkeypatch):
  monkeypatch.syspath_prepend(str(site))
  for mod in ("tinyspec_fake_good", "tinyspec_fake_broken", "tinyspec_fake_exit"): monkeypatch.delitem(sys.modules, mod, raising=False)
  monkeypatch.delenv("TINYSPEC_PLUGINS")
  Device.reset()
  yield
  for mod in ("tinyspec_fake_good", "tinyspec_fake_broken", "tinyspec_fake_exit"): sys.modules.pop(mod, None)

def test_entry_point_loads_only_the_named_plugin(on_path):
  assert Device["fakegood"] == ("good", "FAKEGOOD")
  assert "tinyspec_fake_good" in sys.modules and "tinyspec_fake_broken" not in sys.modules
  plugin = Device.plugins["tinyspec_fake_good"]
  assert (plugin.origin, plugin.entries, plugin.devices) == ("tinyspec-fake-good 1.2.3", ["FAKEGOOD", "FAKEGOOD2"], ("FAKEGOOD", "FAKEGOOD2"))
  with pytest.raises(DeviceError, match=re.escape("device FAKEGOOD2 (tinyspec-fake-good 1.2.3) is not available here: no fake hardware")):
    Device["FAKEGOOD2"]

def test_entry_point_that_raises_at_import(on_path):
  msg = "device FAKEBROKEN is unusable: plugin tinyspec_fake_broken (tinyspec-fake-broken 0.0.1) failed to load: RuntimeError: fake driver exploded"
  with pytest.raises(DeviceError, match=re.escape(msg)) as e: Device["FAKEBROKEN"]
  assert isinstance(e.value.__cause__, RuntimeError) and "tinyspec_fake_good" not in sys.modules

@pytest.mark.parametrize("only", ["tinyspec-fake-good", "TINYSPEC_FAKE_GOOD", "fakegood2"])
def test_filter_by_distribution_or_entry_name(on_path, monkeypatch, only):
  monkeypatch.setenv("TINYSPEC_PLUGINS", f"{only}, something-else")
  Device.reset()
  assert (row("FAKEGOOD").status, row("FAKEBROKEN").status) == ("available", "filtered")
  assert row("FAKEBROKEN").detail == f"TINYSPEC_PLUGINS='{only}, something-else' does not name it"
  with pytest.raises(DeviceError, match="device FAKEBROKEN is unusable: plugin .* is filtered out"): Device["FAKEBROKEN"]
  assert "tinyspec_fake_broken" not in sys.modules

def run_python(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
  """Run a fresh interpreter that sees the throw-away plugins in `site`, with no tinyspec variables but those in `env`."""
  env = {k: v for k, v in os.environ.items() if k not in ("DEVICE", "TINYSPEC_PLUGINS", "TINYSPEC_STRICT_PLUGINS")} | env
  env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(tinyspec.__file__).parents[1])])  # the tinyspec under test, not another copy
  return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=60)

def line(output: str, device: str) -> str:
  return next(ln for ln in output.splitlines() if ln.split()[0] == device)

def test_importing_tinyspec_imports_no_plugin(site):
  code = "import sys, tinyspec, tinyspec.device, tinyspec.cli; print(sorted(m for m in sys.modules if m.startswith('tinyspec_fake')))"
  out = run_python(site, "-c", code)
  assert (out.returncode, out.stdout) == (0, "[]\n"), out.stderr

def test_cli_lists_installed_plugins(site):
  out = run_python(site, "-m", "tinyspec", "devices")
  assert out.returncode == 0, out.stderr
  assert re.fullmatch(r"FAKEGOOD +tinyspec-fake-good 1\.2\.3 +available +FAKEC \(fake 1\.0\)", line(out.stdout, "FAKEGOOD"))
  assert re.fullmatch(r"FAKEGOOD2 +tinyspec-fake-good 1\.2\.3 +unavailable: no fake hardware +FAKEC", line(out.stdout, "FAKEGOOD2"))
  assert re.fullmatch(r"FAKEBROKEN +tinyspec-fake-broken 0\.0\.1 +failed: RuntimeError: fake driver exploded at import",
                      line(out.stdout, "FAKEBROKEN"))
  assert re.fullmatch(r"FAKEEXIT +tinyspec-fake-exit 0\.0\.2 +failed: SystemExit: 3", line(out.stdout, "FAKEEXIT"))  # listed, not fatal

def test_cli_filtering(site):
  out = run_python(site, "-m", "tinyspec", "devices", TINYSPEC_PLUGINS="FakeBroken")
  assert out.returncode == 0, out.stderr
  assert "failed: RuntimeError: fake driver exploded at import" in line(out.stdout, "FAKEBROKEN")
  assert "filtered: TINYSPEC_PLUGINS='FakeBroken' does not name it" in line(out.stdout, "FAKEGOOD")

@pytest.mark.parametrize("args, env", [(("devices", "--strict"), {}), (("devices",), {"TINYSPEC_STRICT_PLUGINS": "1"})])
def test_cli_strict_fails_on_broken_plugin(site, args, env):
  out = run_python(site, "-m", "tinyspec", *args, TINYSPEC_PLUGINS="tinyspec-fake-broken,tinyspec-fake-good", **env)
  assert out.returncode == 1 and out.stdout == ""
  assert "RuntimeError: fake driver exploded at import" in out.stderr
  assert out.stderr.splitlines()[-1].startswith("tinyspec: error: plugin tinyspec_fake_broken (tinyspec-fake-broken 0.0.1) failed to load")

def test_every_plugin_in_the_repository_has_the_same_file_shape():
  """plugin.py (the hooks), renderer.py, compiler.py, runtime.py: a reader who knows one device plugin finds their way in
  all. Distributions that provide no device (no `tinyspec.devices` entry point, e.g. tinyspec-mpi) have a shape of their own."""
  root = Path(__file__).resolve().parents[2]
  def provides_devices(package: Path) -> bool:
    pyproject = package.parents[1] / "pyproject.toml"
    return pyproject.is_file() and '"tinyspec.devices"' in pyproject.read_text(encoding="utf-8")
  packages = sorted(p for d in ("plugins", "examples") if (root / d).is_dir()
                    for p in (root / d).glob("*/src/tinyspec_*") if (p / "__init__.py").is_file() and provides_devices(p))
  if not packages: pytest.skip("not run from a checkout of the repository: no plugins/ beside core/")
  shape = {"plugin.py", "renderer.py", "compiler.py", "runtime.py"}
  assert {p.name: sorted(shape - {f.name for f in p.glob("*.py")}) for p in packages} == {p.name: [] for p in packages}
  assert len(packages) >= 6  # cpu, opencl, cuda, metal, amd and the template
