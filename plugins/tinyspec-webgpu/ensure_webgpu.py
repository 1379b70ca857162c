"""Make sure a WebGPU adapter is here before the webgpu tests run (tox -e webgpu, nox -s webgpu).

wgpu (wgpu-native) needs a Vulkan, Metal or D3D12 driver. A Linux machine without a GPU has one in Mesa's lavapipe, Vulkan
in software on the CPU: Debian's `mesa-vulkan-drivers`. As root on a system with apt (CI runs as root on Debian 12),
this installs it when wgpu finds no adapter; otherwise it says what to install and exits 1, so the suite never passes by
skipping every test. Run it with the environment's Python: python ensure_webgpu.py
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

PACKAGE = "mesa-vulkan-drivers"
# run in a fresh interpreter each time: wgpu-native reads the installed Vulkan drivers once per process
CHECK = """
from tinyspec.device import Device
row = next((r for r in Device.listing() if r.name == "WEBGPU"), None)
if row is None: raise SystemExit("the WEBGPU device is not registered: pip install ./plugins/tinyspec-webgpu")
print(row.info if row.status == "available" else f"WEBGPU is {row.status}: {row.detail}")
raise SystemExit(0 if row.status == "available" else 1)
"""

def check() -> bool:
  """Whether WEBGPU is available now; prints its adapter, or why not."""
  done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
  print(f"ensure_webgpu: {done.stdout.strip() or done.stderr.strip().splitlines()[-1]}", flush=True)
  return done.returncode == 0

def install() -> bool:
  """apt-get install Mesa's Vulkan drivers (lavapipe among them); whether it went through."""
  print(f"ensure_webgpu: installing {PACKAGE} with apt-get (running as root)", flush=True)
  env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
  for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", PACKAGE]):
    if subprocess.run(cmd, env=env).returncode != 0:
      print(f"ensure_webgpu: `{' '.join(cmd)}` failed", flush=True)
      return False
  return True

def main() -> int:
  if check(): return 0
  if os.name == "posix" and os.geteuid() == 0 and shutil.which("apt-get"):
    if install() and check(): return 0
    print("ensure_webgpu: still no WebGPU adapter; see the reason above", file=sys.stderr)
    return 1
  print(f"ensure_webgpu: wgpu finds no WebGPU adapter here (reason above). Install a Vulkan driver and run again:\n"
        f"  Debian/Ubuntu: sudo apt-get install {PACKAGE}\n  Fedora: sudo dnf install mesa-vulkan-drivers\n"
        "or a GPU vendor's Vulkan driver.", file=sys.stderr)
  return 1

if __name__ == "__main__": sys.exit(main())
