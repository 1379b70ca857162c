"""The `tinyspec` command line (also `python -m tinyspec`). `tinyspec devices` lists every device and whether it works here."""
from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata

from tinyspec.device import Device, DeviceError, DeviceStatus

NO_PLUGINS = """No tinyspec devices found: no device plugin is installed.
Install one, e.g. from a tinyspec checkout: pip install ./plugins/tinyspec-cpu"""

def version() -> str:
  """The installed core's version."""
  try: return metadata.version("tinyspec")
  except metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
    import tinyspec
    return getattr(tinyspec, "__version__", "unknown")

def format_devices(rows: Sequence[DeviceStatus]) -> str:
  """`rows` as an aligned table: device, plugin distribution and version, status, renderers (and the device's info)."""
  def status(r: DeviceStatus) -> str: return f"{r.status}: {' '.join(r.detail.split())}" if r.detail else r.status
  def renderers(r: DeviceStatus) -> str: return ", ".join(r.spec.renderers if r.spec else ()) + (f" ({r.info})" if r.info else "")
  table = [("DEVICE", "PLUGIN", "STATUS", "RENDERERS")] + [(r.name, r.plugin.origin, status(r), renderers(r)) for r in rows]
  widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
  return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table)

def devices(strict: bool = False) -> int:
  """Print every known device; returns 1 if `strict` (or TINYSPEC_STRICT_PLUGINS=1) and a plugin is broken, else 0."""
  if strict: Device.strict = True
  try: rows = Device.listing()
  except DeviceError as e:
    if e.__cause__ is not None: traceback.print_exception(e.__cause__, file=sys.stderr)
    print(f"tinyspec: error: {e}", file=sys.stderr)
    return 1
  print(format_devices(rows) if rows else NO_PLUGINS)
  return 0

def main(argv: Sequence[str] | None = None) -> int:
  """Run the command line with `argv` (default: sys.argv[1:]) and return the exit code."""
  parser = argparse.ArgumentParser(prog="tinyspec", description="tinyspec: a tensor compiler whose devices are plugins")
  parser.add_argument("--version", action="store_true", help="print the tinyspec version and exit")
  commands = parser.add_subparsers(dest="command", metavar="COMMAND")
  cmd = commands.add_parser("devices", help="list every device, its plugin, and whether it is usable here")
  cmd.add_argument("--strict", action="store_true", help="fail on the first broken or incompatible plugin (same as TINYSPEC_STRICT_PLUGINS=1)")
  cmd = commands.add_parser("demo", help="train a small MLP on generated spirals and report accuracy, kernels compiled and time")
  cmd.add_argument("--steps", type=int, default=150, help="Adam steps (default 150)")
  cmd.add_argument("--seed", type=int, default=0, help="seed of the data and the initialization (default 0)")
  cmd.add_argument("--device", help="device to train on (default: the default device, $DEVICE or the first available)")
  cmd.add_argument("--quiet", action="store_true", help="no header and no progress bar: only the summary")
  args = parser.parse_args(argv)
  if args.version: print(f"tinyspec {version()}")
  elif args.command == "devices": return devices(args.strict)
  elif args.command == "demo":
    from tinyspec.demo import demo  # imported here: `tinyspec devices` needs no Tensor machinery
    return demo(args.steps, args.seed, args.device, args.quiet)
  else: parser.print_help()
  return 0
