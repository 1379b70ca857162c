"""Make sure an OpenCL device that builds kernels is here before the opencl tests run (tox -e opencl, nox -s opencl).

PyPI's PoCL (the plugin's test extra) works on CPUs its LLVM 14 knows, such as Zen 4, and fails every build on newer ones,
such as Zen 5. There, as root on a system with apt (CI runs as root on Debian 12), this installs the distribution's PoCL,
`pocl-opencl-icd`, which pyopencl's ICD loader finds beside PyPI's; otherwise it says what to install and exits 1, so the
suite never passes by skipping every test (core's tinyspec.device.ensure does the work). Run it with the environment's
Python: python ensure_opencl.py
"""
import sys

from tinyspec.device.ensure import ensure_device

ADVICE = ("Install your distribution's PoCL and run again:\n  Debian/Ubuntu: sudo apt-get install pocl-opencl-icd\n"
          "  Fedora: sudo dnf install pocl\nor a GPU vendor's OpenCL driver.")

if __name__ == "__main__": sys.exit(ensure_device("OPENCL", "./plugins/tinyspec-opencl", "pocl-opencl-icd", ADVICE))
