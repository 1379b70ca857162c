"""For a plugin's test environment (tox, nox, CI): make sure its device is usable before the suite runs, installing the
system package it needs where that can be done, so a suite never passes by skipping every test.

    python -c "from tinyspec.device.ensure import ensure_device; ..."   # or a plugin's ensure_*.py, which calls it

`ensure_device` checks the device in a fresh interpreter (drivers such as an OpenCL ICD loader or wgpu-native read what is
installed once per process); when it is unusable and this runs as root where apt-get exists (CI runs as root on Debian),
it installs the package and checks again; otherwise it prints what to install and returns 1."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

_CHECK = """
import sys
from tinyspec.device import Device
name, plugin = sys.argv[1:3]
row = next((r for r in Device.listing() if r.name == name), None)
if row is None: raise SystemExit(f"the {name} device is not registered: pip install {plugin}")
print(row.info if row.status == "available" else f"{name} is {row.status}: {row.detail}")
raise SystemExit(0 if row.status == "available" else 1)
"""

def _say(device: str, text: str, err: bool = False) -> None:
  print(f"ensure {device}: {text}", file=sys.stderr if err else sys.stdout, flush=True)

def device_ready(device: str, plugin: str) -> bool:
  """Whether `device` is available now, checked in a fresh interpreter; prints its listing's detail, or why not (the last
  line a driver wrote to stderr when it printed nothing else)."""
  done = subprocess.run([sys.executable, "-c", _CHECK, device, plugin], capture_output=True, text=True)
  _say(device, done.stdout.strip() or (done.stderr.strip().splitlines() or ["no output"])[-1])
  return done.returncode == 0

def apt_install(device: str, package: str) -> bool:
  """apt-get update and install `package` (no recommends, no questions); whether both went through."""
  _say(device, f"installing {package} with apt-get (running as root)")
  env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
  for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]):
    if subprocess.run(cmd, env=env).returncode != 0:
      _say(device, f"`{' '.join(cmd)}` failed")
      return False
  return True

def ensure_device(device: str, plugin: str, package: str, advice: str) -> int:
  """0 when `device` (from the distribution `plugin`) is usable, installing the Debian `package` first where this runs as
  root with apt-get; else 1, after printing the reason and `advice` (what to install, on other systems too)."""
  if device_ready(device, plugin): return 0
  if os.name == "posix" and os.geteuid() == 0 and shutil.which("apt-get"):
    if apt_install(device, package) and device_ready(device, plugin): return 0
    _say(device, f"still unusable after installing {package}; see the reason above", err=True)
    return 1
  _say(device, f"unusable here (reason above). {advice}", err=True)
  return 1
