"""Make sure a WebGPU adapter is here before the webgpu tests run (tox -e webgpu, nox -s webgpu).

wgpu (wgpu-native) needs a Vulkan, Metal or D3D12 driver. A Linux machine without a GPU has one in Mesa's lavapipe, Vulkan
in software on the CPU: Debian's `mesa-vulkan-drivers`. As root on a system with apt (CI runs as root on Debian 12),
this installs it when wgpu finds no adapter; otherwise it says what to install and exits 1, so the suite never passes by
skipping every test (core's tinyspec.device.ensure does the work). Run it with the environment's Python: python ensure_webgpu.py
"""
import sys

from tinyspec.device.ensure import ensure_device

ADVICE = ("Install a Vulkan driver and run again:\n  Debian/Ubuntu: sudo apt-get install mesa-vulkan-drivers\n"
          "  Fedora: sudo dnf install mesa-vulkan-drivers\nor a GPU vendor's Vulkan driver.")

if __name__ == "__main__": sys.exit(ensure_device("WEBGPU", "./plugins/tinyspec-webgpu", "mesa-vulkan-drivers", ADVICE))
