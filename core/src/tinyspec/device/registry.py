"""Device plugins: discovery through entry points, the registry, and the `Device` lookup.

Every device comes from a plugin: a module carrying hookimpls for `tinyspec.hookspecs`, announced in the
`tinyspec.devices` entry-point group. By convention an entry point's *name* is the device it provides
(`CPU = "tinyspec_cpu.plugin"`), so `Device["CPU"]` imports that one module and no other; several entries may name the
same module, which is then loaded once. Listing every device (`tinyspec devices`) loads every entry.

A plugin that fails to import, raises in a hook (anything but KeyboardInterrupt, SystemExit included), implements a hook
that does not exist (a misspelling), speaks another API version or returns bad specs is recorded, listed, and raised only
when one of its devices is asked for. `TINYSPEC_STRICT_PLUGINS=1` raises at once instead, and loads every plugin when the
registry is first used. `TINYSPEC_PLUGINS=a,b` loads only the plugins with an entry-point or distribution name in the
list (case-insensitive; set but empty loads none); built-ins are never filtered.

A device name provided by two plugins is never settled silently: both are listed as `conflict`, and asking for the name
raises an error naming both, until `TINYSPEC_PLUGINS` selects one. The registry is safe to use from several threads: one
lock guards discovery, loading, probing and opening.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import re
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from tinyspec.hookspecs import PLUGIN_API_VERSION, DeviceHooks, DeviceSpec

ENTRY_POINT_GROUP = "tinyspec.devices"
_DEVICE_NAME = re.compile(r"([A-Za-z][A-Za-z0-9_]*)(?::(\d+))?")
_BUILTINS: list[object] = []

class DeviceError(RuntimeError):
  """A device name is invalid or unknown, its device is unavailable here, or its plugin is broken; the message says which."""

class UnsupportedDType(DeviceError):
  """A kernel computes in dtypes its device's renderer does not declare (`dtypes`, by name): refused before any lowering."""
  def __init__(self, message: str, device: str, dtypes: tuple[str, ...]):
    super().__init__(message)
    self.device, self.dtypes = device, dtypes

@dataclass(eq=False)
class Plugin:
  """What the registry knows about one plugin, and how loading it went."""
  name: str
  """The entry point's module path, or the name a built-in was registered under."""
  dist: str | None = None
  """The distribution that installed it; None for built-ins."""
  version: str | None = None
  entries: list[str] = field(default_factory=list)
  """The devices it claims before it is loaded: its entry-point names (upper-cased)."""
  status: str = "pending"
  """pending, then ok, failed or incompatible; or filtered (never loaded)."""
  error: str = ""
  """Why it is not ok: "ExcType: message" when failed, the refusal when incompatible or filtered."""
  traceback: str = ""
  exc: BaseException | None = field(default=None, repr=False)
  devices: tuple[str, ...] = ()
  """The devices it provides, once ok."""
  source: Any = field(default=None, repr=False)  # what to load: an EntryPoint, a module path, or the plugin itself

  @property
  def origin(self) -> str:
    """The distribution and version, or "built-in"."""
    return f"{self.dist} {self.version}" if self.dist else "built-in"

  def __str__(self) -> str: return f"{self.name} ({self.origin})"

@dataclass(frozen=True)
class DeviceStatus:
  """One row of `tinyspec devices`: a device, or the device an unusable plugin's entry point claims."""
  name: str
  plugin: Plugin
  status: str
  """available, unavailable, failed, incompatible, filtered, or conflict (another plugin provides the same name)."""
  detail: str = ""
  """The probe's reason, or the plugin's error."""
  spec: DeviceSpec | None = None
  info: str = ""
  """The spec's `info()`, for available devices."""

class _Incompatible(Exception): pass

_PROBLEM = {"failed": "failed to load", "incompatible": "is incompatible", "filtered": "is filtered out"}
def _plugin_error(plugin: Plugin, device: str | None = None) -> DeviceError:
  prefix = f"device {device} is unusable: " if device else ""
  return DeviceError(f"{prefix}plugin {plugin} {_PROBLEM[plugin.status]}: {plugin.error}")

def _norm(name: str) -> str: return re.sub(r"[-_.]+", "-", name.strip()).lower()  # PEP 503, so tinyspec_cpu matches tinyspec-cpu

class DeviceRegistry:
  """Every device tinyspec knows of. `Device`, the process-wide instance, is what users touch:

      Device["CPU"]       # the opened runtime for CPU, cached per full name ("CPU" and "CPU:0" are distinct)
      Device.DEFAULT      # $DEVICE, else the first available of CPU, the others alphabetically, PYTHON
      Device.listing()    # every device and its status, as `tinyspec devices` prints it
  """

  def __init__(self):
    self._lock = threading.RLock()  # reentrant: the public calls nest (a scan registers the built-ins, a listing loads every plugin)
    self.reset()

  def reset(self) -> None:
    """Forget every plugin, probe and opened device; the next use scans entry points and reads the environment again."""
    with self._lock: self._reset()

  def _reset(self) -> None:
    self.pm = pluggy.PluginManager("tinyspec")
    self.pm.add_hookspecs(DeviceHooks)
    self.plugins: dict[str, Plugin] = {}
    self.strict = os.environ.get("TINYSPEC_STRICT_PLUGINS", "") not in ("", "0")
    self._claims: dict[str, list[Plugin]] = {}
    self._specs: dict[str, list[tuple[DeviceSpec, Plugin]]] = {}  # every provider of each device name, in load order
    self._probes: dict[str, tuple[str | None, BaseException | None]] = {}
    self._opened: dict[str, Any] = {}
    self._default: str | None = None
    self._scanned = False

  # *** discovery and loading ***

  def _scan(self) -> None:  # callers hold the lock, so no thread sees a half-filled registry
    if self._scanned: return
    self._scanned = True
    for plugin in _BUILTINS: self.register(plugin)
    only = os.environ.get("TINYSPEC_PLUGINS")
    wanted = None if only is None else {_norm(x) for x in only.split(",") if x.strip()}
    by_module: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP): by_module.setdefault(ep.value, []).append(ep)
    for module, eps in by_module.items():
      dist = eps[0].dist
      plugin = Plugin(module, dist and dist.name, dist and dist.version, [ep.name.upper() for ep in eps], source=eps[0])
      if wanted is not None and not wanted & {_norm(n) for n in [*(ep.name for ep in eps), *([dist.name] if dist else [])]}:
        plugin.status, plugin.error = "filtered", f"TINYSPEC_PLUGINS={only!r} does not name it"
      self._add(plugin)
    if self.strict: self.load_all()

  def _add(self, plugin: Plugin) -> None:
    if plugin.name in self.plugins: raise DeviceError(f"a plugin named {plugin.name!r} is already registered")
    self.plugins[plugin.name] = plugin
    for name in plugin.entries: self._claims.setdefault(name, []).append(plugin)

  def register(self, plugin: object, name: str | None = None, devices: Sequence[str] = ()) -> Plugin:
    """Add a plugin in-process and load it now: a module, an object carrying hookimpls, or a module path to import.

    `devices` are the device names it is expected to provide (what an entry point's name says), so that asking for
    one of them raises the plugin's error if it fails. Returns its record; failures are recorded, not raised, unless strict."""
    with self._lock:
      self._scan()
      if name is None: name = plugin if isinstance(plugin, str) else getattr(plugin, "__name__", None) or type(plugin).__name__
      self._add(record := Plugin(name, entries=[d.upper() for d in devices], source=plugin))
      self._load(record)
      return record

  def load_all(self) -> None:
    """Load every plugin not loaded yet (filtered ones stay unloaded); in strict mode, raise for the first broken one."""
    with self._lock:
      self._scan()
      for plugin in list(self.plugins.values()): self._load(plugin)

  def _load(self, plugin: Plugin) -> None:
    if plugin.status == "pending":
      src = plugin.source
      try: obj = src.load() if isinstance(src, EntryPoint) else importlib.import_module(src) if isinstance(src, str) else src
      except KeyboardInterrupt: raise
      except BaseException as e: self._fail(plugin, e)  # SystemExit from a plugin's import must not end the user's program
      else: self._register(plugin, obj)
    if self.strict and plugin.status in ("failed", "incompatible"): raise _plugin_error(plugin) from plugin.exc

  def _register(self, plugin: Plugin, obj: object) -> None:
    # validate everything before committing, so a refused plugin leaves the registry as it was
    try:
      self.pm.register(obj, name=plugin.name)
      self._check_hook_names(obj)
    except KeyboardInterrupt: raise
    except BaseException as e:
      if self.pm.get_plugin(plugin.name) is obj: self.pm.unregister(name=plugin.name)  # pluggy may have added some hookimpls
      return self._fail(plugin, e)
    try: specs = self._check(obj)
    except KeyboardInterrupt: raise
    except BaseException as e:
      self.pm.unregister(obj)
      return self._fail(plugin, e)
    plugin.status, plugin.devices = "ok", tuple(s.name for s in specs)
    for s in specs: self._specs.setdefault(s.name, []).append((s, plugin))

  def _check_hook_names(self, obj: object) -> None:
    # pluggy's check_pending: a hookimpl without a hookspec is a misspelt hook (tinyspec_device), which would leave the plugin
    # loaded with no devices and no word why. The plugins registered before passed this check, so a failure is obj's.
    try: self.pm.check_pending()
    except pluggy.PluginValidationError:
      known = sorted(n for n in vars(DeviceHooks) if n.startswith("tinyspec_"))
      unknown = sorted(n for n, caller in vars(self.pm.hook).items()
                       if not caller.has_spec() and any(i.plugin is obj for i in caller.get_hookimpls()))
      raise _Incompatible(f"it implements {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'} no tinyspec hook "
                          f"(the hooks: {', '.join(known)})") from None

  def _hook(self, obj: object, hook: str) -> Callable[[], Any] | None:
    # this plugin's own implementation, called alone so its errors are attributed to it and hide no one else's
    return next((impl.function for impl in getattr(self.pm.hook, hook).get_hookimpls() if impl.plugin is obj), None)

  def _check(self, obj: object) -> Sequence[DeviceSpec]:
    if (api := self._hook(obj, "tinyspec_plugin_api")) is None:
      raise _Incompatible(f"it declares no plugin API version (no tinyspec_plugin_api hook); this tinyspec speaks version {PLUGIN_API_VERSION}")
    versions = api()
    if not isinstance(versions, (list, tuple)) or not all(type(v) is int for v in versions):
      raise TypeError(f"tinyspec_plugin_api must return a sequence of int, got {versions!r}")
    if PLUGIN_API_VERSION not in versions:
      raise _Incompatible(f"it supports plugin API versions {list(versions)}, this tinyspec speaks version {PLUGIN_API_VERSION}")
    specs = hook() if (hook := self._hook(obj, "tinyspec_devices")) else ()
    if not isinstance(specs, (list, tuple)) or not all(isinstance(s, DeviceSpec) for s in specs):
      raise TypeError(f"tinyspec_devices must return a sequence of DeviceSpec, got {specs!r}")
    for i, spec in enumerate(specs):
      if any(s.name == spec.name for s in specs[:i]): raise ValueError(f"device {spec.name} is listed twice")
    return specs

  def _fail(self, plugin: Plugin, e: BaseException) -> None:
    plugin.status = "incompatible" if isinstance(e, _Incompatible) else "failed"
    plugin.error = str(e) if isinstance(e, _Incompatible) else f"{type(e).__name__}: {e}"
    plugin.exc, plugin.traceback = e, "".join(traceback.format_exception(e))

  # *** lookup ***

  @staticmethod
  def canonicalize(name: str) -> str:
    """'cpu' -> 'CPU', 'cpu:01' -> 'CPU:1'. 'CPU' and 'CPU:0' stay distinct names. Raises DeviceError on malformed names."""
    if not isinstance(name, str) or not (m := _DEVICE_NAME.fullmatch(name.strip())):
      raise DeviceError(f"invalid device name {name!r}: expected NAME or NAME:INDEX, e.g. 'CPU' or 'CPU:1'")
    return m[1].upper() + (f":{int(m[2])}" if m[2] is not None else "")

  def _find(self, name: str) -> tuple[DeviceSpec, Plugin]:
    self._scan()
    claims = self._claims.get(name, [])
    for plugin in claims: self._load(plugin)  # every plugin whose entry point names the device, so a rival cannot hide
    if name not in self._specs:
      if broken := next((p for p in claims if p.status != "ok"), None): raise _plugin_error(broken, name) from broken.exc
      self.load_all()  # a plugin may provide devices that none of its entry points names
    if name in self._specs: return self._provider(name)
    known = ", ".join(sorted(self._specs.keys() | self._claims.keys())) or "none (install a device plugin, e.g. pip install ./plugins/tinyspec-cpu)"
    raise DeviceError(f"unknown device {name!r}; known devices: {known}")

  def _provider(self, name: str) -> tuple[DeviceSpec, Plugin]:
    if len(providers := self._specs[name]) == 1: return providers[0]
    origins = " and ".join(str(p) for _, p in providers)
    raise DeviceError(f"device {name} is provided by {len(providers)} plugins: {origins}; set TINYSPEC_PLUGINS to the one to use "
                      f"(e.g. TINYSPEC_PLUGINS={providers[0][1].dist or providers[0][1].name})")

  def _probe(self, name: str) -> tuple[str | None, BaseException | None]:
    if name not in self._probes:
      try: self._probes[name] = (self._provider(name)[0].probe(), None)
      except KeyboardInterrupt: raise
      except BaseException as e: self._probes[name] = (f"probe raised {type(e).__name__}: {e}", e)
    return self._probes[name]

  def __getitem__(self, name: str) -> Any:
    """The runtime for `name` ("CPU", "cpu:1"): loads its plugin, probes and opens it on first use, then returns the cached object."""
    name = self.canonicalize(name)
    if (rt := self._opened.get(name)) is not None: return rt  # the common case takes no lock
    with self._lock:
      if name in self._opened: return self._opened[name]
      spec, plugin = self._find(name.partition(":")[0])
      reason, exc = self._probe(spec.name)
      if reason is not None: raise DeviceError(f"device {spec.name} ({plugin.origin}) is not available here: {reason}") from exc
      try: self._opened[name] = spec.open(name)
      except KeyboardInterrupt: raise
      except BaseException as e: raise DeviceError(f"device {name} ({plugin.origin}) failed to open: {type(e).__name__}: {e}") from e
      return self._opened[name]

  @property
  def DEFAULT(self) -> str:
    """The default device: $DEVICE if set (checked when used), else the first available of CPU, the others alphabetically, PYTHON."""
    if self._default is None:
      with self._lock: self._default = self.canonicalize(os.environ["DEVICE"]) if os.environ.get("DEVICE") else self._first_available()
    return self._default

  @DEFAULT.setter
  def DEFAULT(self, name: str) -> None: self._default = self.canonicalize(name)

  def _first_available(self) -> str:
    with contextlib.suppress(DeviceError):  # the usual case: CPU works, and no other plugin gets imported
      self._find("CPU")
      if self._probe("CPU")[0] is None: return "CPU"
    self.load_all()
    # PYTHON, the slow oracle, only as a last resort; a *_CHECK device (another device's kernels run by the interpreter) never;
    # nor a name two plugins provide
    usable = [n for n, providers in self._specs.items() if not n.endswith("_CHECK") and len(providers) == 1]
    for name in sorted(usable, key=lambda n: (n != "CPU", n == "PYTHON", n)):
      if self._probe(name)[0] is None: return name
    why = "".join(f"; {n}: {self._probe(n)[0] if len(self._specs[n]) == 1 else 'provided by several plugins'}" for n in sorted(self._specs))
    raise DeviceError(f"no tinyspec device is available{why}. Install a device plugin, e.g. `pip install ./plugins/tinyspec-cpu`, "
                      "and run `tinyspec devices` to see what is found")

  def listing(self) -> list[DeviceStatus]:
    """Every device known, sorted by name, with its plugin and status; loads every plugin and probes every device."""
    with self._lock:
      self.load_all()
      rows: list[DeviceStatus] = []
      for plugin in self.plugins.values():
        if plugin.status != "ok": rows += [DeviceStatus(n, plugin, plugin.status, plugin.error) for n in plugin.entries or [plugin.name]]
        for name in plugin.devices:
          spec = next(s for s, p in self._specs[name] if p is plugin)
          if rivals := [str(p) for _, p in self._specs[name] if p is not plugin]:
            rows.append(DeviceStatus(name, plugin, "conflict", f"also provided by {' and '.join(rivals)}; TINYSPEC_PLUGINS picks one", spec))
          elif (reason := self._probe(name)[0]) is None: rows.append(DeviceStatus(name, plugin, "available", "", spec, _info(spec)))
          else: rows.append(DeviceStatus(name, plugin, "unavailable", reason, spec))
      return sorted(rows, key=lambda r: r.name)

def _info(spec: DeviceSpec) -> str:
  if spec.info is None: return ""
  try: return spec.info()
  except KeyboardInterrupt: raise
  except BaseException as e: return f"info raised {type(e).__name__}: {e}"  # extra detail must never break the listing

Device = DeviceRegistry()

def register_builtin(plugin: object) -> None:
  """Make `plugin` (a module, an object carrying hookimpls, or a module path) part of the core: it is registered at every
  scan, survives `Device.reset()`, and is never filtered by TINYSPEC_PLUGINS."""
  with Device._lock:
    _BUILTINS.append(plugin)
    if Device._scanned: Device.register(plugin)
