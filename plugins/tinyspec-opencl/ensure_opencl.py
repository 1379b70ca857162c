"""Make sure an OpenCL device that builds kernels is here before the opencl tests run (tox -e opencl, nox -s opencl).

PyPI's PoCL (the plugin's test extra) works on CPUs its LLVM 14 knows, such as Zen 4, and fails every build on newer ones,
such as Zen 5. There, as root on a system with apt (CI runs as root on Debian 12), this installs the distribution's PoCL,
`pocl-opencl-icd`, which pyopencl's ICD loader finds beside PyPI's; otherwise it says what to install and exits 1, so the
suite never passes by skipping every test. Run it with the environment's Python: python ensure_opencl.py
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

PACKAGE = "pocl-opencl-icd"
# run in a fresh interpreter each time: the ICD loader reads the installed platforms once per process
CHECK = """
from tinyspec.device import Device
row = next((r for r in Device.listing() if r.name == "OPENCL"), None)
if row is None: raise SystemExit("the OPENCL device is not registered: pip install ./plugins/tinyspec-opencl")
print(row.info if row.status == "available" else f"OPENCL is {row.status}: {row.detail}")
raise SystemExit(0 if row.status == "available" else 1)
"""

def check() -> bool:
  """Whether OPENCL is available now; prints its devices, or why not."""
  done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
  print(f"ensure_opencl: {(done.stdout + done.stderr).strip()}", flush=True)
  return done.returncode == 0

def install() -> bool:
  """apt-get install the distribution's PoCL; whether it went through."""
  print(f"ensure_opencl: installing {PACKAGE} with apt-get (running as root)", flush=True)
  env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
  for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", PACKAGE]):
    if subprocess.run(cmd, env=env).returncode != 0:
      print(f"ensure_opencl: `{' '.join(cmd)}` failed", flush=True)
      return False
  return True

def main() -> int:
  if check(): return 0
  if os.name == "posix" and os.geteuid() == 0 and shutil.which("apt-get"):
    if install() and check(): return 0
    print("ensure_opencl: still no OpenCL device that builds kernels; see the reason above", file=sys.stderr)
    return 1
  print(f"ensure_opencl: no OpenCL device here builds kernels (reason above). Install your distribution's PoCL and run again:\n"
        f"  Debian/Ubuntu: sudo apt-get install {PACKAGE}\n  Fedora: sudo dnf install pocl\n"
        "or a GPU vendor's OpenCL driver.", file=sys.stderr)
  return 1

if __name__ == "__main__": sys.exit(main())
