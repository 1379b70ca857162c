"""tinyspec next to numpy, PyTorch and tinygrad, in one run: throughput of matmul, a fused elementwise op, a reduction, softmax, conv2d,
training steps of the two example models (bench/gpt_step.py: tokens per second; bench/cnn_step.py: images per second), the dispatch
cost of a small fused expression, and the cold first call with an empty compile cache.

Every system runs in fresh processes of its own (so nothing one measures warms a cache another reads): one for the cold
first call (TINYSPEC_CACHE_DIR, and tinygrad's CACHEDB, pointing at an empty temporary directory), one for the first call
with that cache now filled and the steady per-call time (as bench/dispatch.py measures them), and one for the throughput
figures. A figure is the median of several timed calls (fewer, down to one, where a call takes seconds) after one untimed
warm-up call (which compiles), and every result is checked against numpy's once. Sizes where a system would take minutes
are skipped with "-" and a note. The table is printed and written to bench/RESULTS.md with the machine's CPU, core count
and the date.

Run: python bench/run.py [--quick] [--systems numpy,tinyspec:PYTHON] [--repeats 7] [--output bench/RESULTS.md]
"""
from __future__ import annotations

import argparse
import ctypes.util
import datetime
import glob
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cnn_step  # bench/cnn_step.py: the CNN training step, in tinyspec and in PyTorch
import dispatch  # bench/dispatch.py, next to this file: the dispatch figures are measured exactly as it does
import gpt_step  # bench/gpt_step.py: the GPT training step, in tinyspec and in PyTorch
import numpy as np

M16 = 1 << 24
# (key, what it measures, unit, work per call: FLOPs for GFLOP/s, bytes moved for GB/s, None for a time)
BENCHES: list[tuple[str, str, str, float | None]] = [
  ("matmul256", "matmul 256x256 @ 256x256", "GFLOP/s", 2 * 256**3),
  ("matmul1024", "matmul 1024x1024 @ 1024x1024", "GFLOP/s", 2 * 1024**3),
  ("matmul2048", "matmul 2048x2048 @ 2048x2048", "GFLOP/s", 2 * 2048**3),
  ("fma", "a*b+c, 16M float32 (4 arrays of traffic)", "GB/s", 4 * 4 * M16),
  ("sum", "sum of 16M float32", "GB/s", 4 * M16),
  ("softmax", "softmax over (4096,1024), last axis (in + out)", "GB/s", 2 * 4 * 4096 * 1024),
  ("conv", "conv2d (8,64,56,56) x (64,64,3,3), padding 1", "GFLOP/s", 2 * 8 * 64 * 56 * 56 * 64 * 9),
  ("sort", "sort of 1M float32 (values)", "M elements/s", 1 << 20),
  ("topk", "topk(50) of 50257 float32 (a GPT-2 vocabulary's logits)", "M elements/s", 50257),
  ("gpt", f"GPT training step (examples/gpt.py's model, {gpt_step.BATCH}x{gpt_step.CONTEXT} tokens, AdamW)", "k tokens/s", gpt_step.TOKENS),
  ("cnn", f"CNN training step (examples/cnn.py's model, {cnn_step.BATCH} 16x16 images, BatchNorm, Adam)", "k images/s", cnn_step.BATCH),
  ("first", f"first call of ((a+b)*c).sum(), {dispatch.N} floats (compile cache warm)", "ms", None),
  ("steady", f"steady call of ((a+b)*c).sum(), {dispatch.N} floats", "us", None),
  ("jit", "steady call of the same through TinyJit", "us", None),
  ("cold", "cold first call of the same, empty compile cache", "ms", None),
]
SCALE = {"ms": 1e3, "us": 1e6}
PER_SECOND = {"GFLOP/s": 1e9, "GB/s": 1e9, "M elements/s": 1e6, "k tokens/s": 1e3, "k images/s": 1e3}  # work per second is divided by this
THROUGHPUT = [k for k, _, _, work in BENCHES if work is not None]
LARGEST = {"matmul2048", "conv"}  # left out by --quick
TRAINING = {"gpt": gpt_step, "cnn": cnn_step}  # rows that time a whole training step, each module's measure()

SYSTEMS = ["numpy", "tinyspec:CPU", "tinyspec:OPENCL", "tinyspec:WEBGPU", "tinyspec:PYTHON", "torch", "tinygrad:CPU", "tinygrad:CL",
           "tinygrad:WEBGPU", "tinygrad:PYTHON"]
# what a system skips, with the note printed under the table: sizes that would take minutes, figures that do not apply
TOO_SLOW = "the PYTHON interpreter would take minutes at this size"
NOT_PORTED = "not ported: the models are the examples', written with tinyspec.nn"
SKIPS: dict[str, dict[str, str]] = {
  "numpy": {"cold": "no compiler", "jit": "no JIT", "gpt": "no automatic differentiation", "cnn": "no automatic differentiation"},
  "torch": {"cold": "no compiler (eager kernels are built ahead of time)", "jit": "not measured (torch.compile is another design)"},
  "tinyspec:PYTHON": {"matmul2048": TOO_SLOW, "conv": TOO_SLOW, "gpt": TOO_SLOW, "cnn": TOO_SLOW},
  **{f"tinygrad:{d}": {"gpt": NOT_PORTED, "cnn": NOT_PORTED} for d in ("CPU", "CL", "WEBGPU")},
  "tinygrad:PYTHON": {k: "tinygrad's PYTHON device emulates every GPU thread in Python: minutes even at the smallest size"
                      for k in THROUGHPUT},
}

def available(system: str) -> str | None:
  """None if `system` can run here, else why not."""
  if system == "numpy": return None
  if system == "torch": return None if importlib.util.find_spec("torch") else "PyTorch is not installed"
  lib, _, device = system.partition(":")
  if lib == "tinygrad":
    if importlib.util.find_spec("tinygrad") is None: return "tinygrad is not installed"
    if device == "CPU" and shutil.which("clang") is None: return "tinygrad's CPU device compiles with clang, which is not installed here"
    if device == "CL": return _tinygrad_fails("CL", opencl_env(), PYOPENCL_FIRST)
    # tinygrad's WEBGPU loads Dawn's libwebgpu_dawn, which neither Debian nor PyPI's wgpu (wgpu-native) provides
    if device == "WEBGPU": return _tinygrad_fails("WEBGPU")
    return None
  from tinyspec.device import Device, DeviceError
  try: Device[device]
  except DeviceError as e: return str(e)
  return None

# pyopencl's import prepares its bundled ICD loader to find the platforms installed as wheels (PoCL): without it, that
# loader finds none, or crashes, when tinygrad opens it through OPENCL_PATH
PYOPENCL_FIRST = "import pyopencl; " if importlib.util.find_spec("pyopencl") else ""

def opencl_env() -> dict[str, str]:
  """Where the system has no libOpenCL, point tinygrad's CL device (OPENCL_PATH) at the ICD loader bundled with pyopencl's
  wheel, so it finds the same OpenCL platforms (PoCL here) as tinyspec's OPENCL device."""
  if "OPENCL_PATH" in os.environ or ctypes.util.find_library("OpenCL") or importlib.util.find_spec("pyopencl") is None: return {}
  found = sorted(glob.glob(os.path.join(os.path.dirname(importlib.util.find_spec("pyopencl").origin), ".libs", "libOpenCL*")))
  return {"OPENCL_PATH": found[0]} if found else {}

def cache_env(cache: str) -> dict[str, str]:
  """This environment for a measuring process whose compile caches (tinyspec's and tinygrad's) live in `cache`."""
  return {**os.environ, "TINYSPEC_CACHE_DIR": cache, "CACHEDB": os.path.join(cache, "tinygrad.db"), **opencl_env()}

def _tinygrad_fails(device: str, env: dict[str, str] | None = None, first: str = "") -> str | None:
  """Why tinygrad's `device` cannot run here, or None when a trial kernel runs (`first`: code run before tinygrad's import)."""
  trial = f"{first}from tinygrad import Tensor; assert (Tensor([1.0]) + 1).numpy()[0] == 2.0"
  environ = {**os.environ, "DEV": device, **(env or {})}
  try: p = subprocess.run([sys.executable, "-c", trial], env=environ, capture_output=True, text=True, timeout=300)
  except subprocess.TimeoutExpired: return f"tinygrad's {device} device did not finish a trial kernel in 300 s"
  if p.returncode == 0: return None
  last = (p.stderr.strip().splitlines() or ["no output"])[-1]
  return f"tinygrad's {device} device fails here: {last[:160]}"

# ---- the systems, as seen by a worker process ----

def _np_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
  """conv2d with padding 1 the way one writes it in numpy: windows of the padded input (a view), contracted with the
  weights by tensordot (which copies the windows into one matrix and calls BLAS)."""
  win = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), w.shape[2:], axis=(2, 3))
  return np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)

def _np_softmax(x: np.ndarray) -> np.ndarray:
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)

OPS_NUMPY = {"matmul": lambda a, b: a @ b, "fma": lambda a, b, c: a * b + c, "sum": lambda a: a.sum(), "softmax": _np_softmax,
             "conv": _np_conv, "sort": np.sort, "topk": lambda a: -np.sort(-np.partition(a, len(a) - 50)[-50:])}

class Backend:
  """One system in a worker: how to make its tensors, run each benchmark's expression to completion, and read results."""
  def __init__(self, system: str):
    self.system, (self.lib, _, self.device) = system, system.partition(":")
    if self.lib == "tinygrad": os.environ["DEV"] = self.device  # read when tinygrad is imported
    if self.lib == "torch":
      import torch
      self.torch = torch
      self.ops = {**OPS_NUMPY, "softmax": lambda a: torch.softmax(a, -1), "conv": lambda a, w: torch.nn.functional.conv2d(a, w, padding=1),
                  "sort": lambda a: torch.sort(a)[0], "topk": lambda a: torch.topk(a, 50)[0]}
    elif self.lib in ("tinyspec", "tinygrad"):
      lib = importlib.import_module(self.lib)  # both export Tensor and Device, a registry whose items have synchronize()
      self.Tensor, self.runtime = lib.Tensor, lib.Device[self.device]
      self.ops = {**OPS_NUMPY, "softmax": lambda a: a.softmax(-1), "conv": lambda a, w: a.conv2d(w, padding=1),
                  "sort": lambda a: a.sort()[0], "topk": lambda a: a.topk(50)[0]}
    else: self.ops = OPS_NUMPY

  def tensor(self, x: np.ndarray) -> Any:
    if self.lib == "torch": return self.torch.from_numpy(x)
    if self.lib in ("tinyspec", "tinygrad"): return self.Tensor(x, device=self.device).realize()
    return x

  def run(self, op: str, *args: Any) -> Any:
    """The result of `op`, computed: lazy systems realize it and wait for the device."""
    out = self.ops[op](*args)
    if self.lib in ("tinyspec", "tinygrad"):
      out.realize()
      self.runtime.synchronize()
    return out

  def numpy(self, x: Any) -> np.ndarray: return x if self.lib == "numpy" else x.numpy()

def _inputs(key: str, rng: np.random.Generator) -> tuple[str, list[np.ndarray]]:
  """The op a benchmark runs and its inputs (uniform in [0, 1) for the sum, so its relative error means something)."""
  if key.startswith("matmul"): n = int(key[6:]); return "matmul", [rng.standard_normal((n, n), dtype=np.float32) for _ in range(2)]
  if key == "fma": return "fma", [rng.standard_normal(M16, dtype=np.float32) for _ in range(3)]
  if key == "sum": return "sum", [rng.random(M16, dtype=np.float32)]
  if key == "softmax": return "softmax", [rng.standard_normal((4096, 1024), dtype=np.float32)]
  if key in ("sort", "topk"): return key, [rng.standard_normal(1 << 20 if key == "sort" else 50257, dtype=np.float32)]
  return "conv", [rng.standard_normal((8, 64, 56, 56), dtype=np.float32), rng.standard_normal((64, 64, 3, 3), dtype=np.float32) / 24]

BUDGET = 20.0  # seconds of timed calls per figure: a system slow at a size gets fewer calls (down to one), with a note
# a size left out when a smaller one predicts a call over LONG seconds: (the smaller benchmark, how many times its work)
PREDICT, LONG = {"matmul2048": ("matmul1024", 8)}, 10.0

def timed(fn, repeats: int, settle: bool, min_time: float = 0.2, max_calls: int = 200) -> float:
  """The median time of `fn()`: at least `repeats` calls, more while they add up to under `min_time` (fast ops are noisy).
  With `settle` (for fast calls), untimed calls for 0.1 s first, so worker threads that went to sleep (OpenBLAS's, torch's)
  are awake again: on a busy machine waking them costs milliseconds per call."""
  t0 = time.perf_counter()
  while settle and time.perf_counter() - t0 < 0.1: fn()
  times: list[float] = []
  while len(times) < repeats or (sum(times) < min_time and len(times) < max_calls):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)

def throughput(system: str, keys: list[str], repeats: int) -> dict[str, Any]:
  """Seconds per call of each benchmark in `keys` on `system` (an {"error": ...} where the run failed or was wrong)."""
  be, out, notes = Backend(system), {}, []
  for key in keys:
    print(f"  {system}: {key}", file=sys.stderr, flush=True)
    if key in PREDICT and isinstance(t := out.get(PREDICT[key][0]), float) and (guess := t * PREDICT[key][1]) > LONG:
      notes.append(f"{key}: left out, a call would take about {guess:.0f} s ({PREDICT[key][0]} took {t:.1f} s)")
      continue
    try:
      if key in TRAINING:  # a training step: checked against numpy's loss of the same weights inside
        out[key] = TRAINING[key].measure(be.lib, be.device, max(repeats, 10))
        continue
      op, xs = _inputs(key, np.random.default_rng(0))
      args = [be.tensor(x) for x in xs]
      t0 = time.perf_counter()
      got = be.numpy(be.run(op, *args))  # the warm-up call, which compiles; its result is checked once
      warm, want = time.perf_counter() - t0, OPS_NUMPY[op](*xs)
      tol = 1e-3 * float(np.abs(want).max() if op != "sum" else want)
      if got.shape != want.shape or not np.allclose(got, want, rtol=1e-3, atol=tol): raise AssertionError("result differs from numpy's")
      if (n := max(1, min(repeats, int(BUDGET / warm)))) < repeats: notes.append(f"{key}: {n} timed call(s), the warm-up took {warm:.1f} s")
      out[key] = timed(lambda: be.run(op, *args), n, settle=warm < 0.1)  # noqa: B023  (called before the loop moves on)
    except Exception as e: out[key] = {"error": f"{type(e).__name__}: {e}"[:200]}
  return {**out, "notes": notes}

def first_and_steady(system: str, repeat: int) -> dict[str, float]:
  """dispatch.py's figures for tinyspec and tinygrad; for numpy and torch the same expression, eagerly."""
  lib, _, device = system.partition(":")
  if lib in dispatch.MEASURE: return dispatch.MEASURE[lib](device, repeat)
  be = Backend(system)
  data = [np.random.default_rng(i).standard_normal((3, dispatch.N), dtype=np.float32) for i in range(repeat + 1)]
  ins = [[be.tensor(x) for x in d] for d in data]
  def call(a, b, c): return float(((a + b) * c).sum())
  t0 = time.perf_counter()
  call(*ins[0])
  first = time.perf_counter() - t0
  times = []
  for a, b, c in ins[1:]:
    t0 = time.perf_counter()
    call(a, b, c)
    times.append(time.perf_counter() - t0)
  return {"first": first, "steady": statistics.median(times), "kernels": -1}

def worker(system: str, part: str, keys: list[str], repeats: int) -> dict[str, Any]:
  if system == "tinygrad:CL" and PYOPENCL_FIRST: importlib.import_module("pyopencl")  # see PYOPENCL_FIRST
  if part == "cold": return {"cold": first_and_steady(system, 3)["first"]}
  if part == "dispatch":
    r = first_and_steady(system, 40 * repeats)
    return {k: r[k] for k in ("first", "steady", "jit") if k in r}
  return throughput(system, keys, repeats)

# ---- the driver ----

def measure(system: str, keys: list[str], repeats: int, cache: str) -> dict[str, Any]:
  """Run the worker processes of one system; returns {benchmark: seconds | {"error": ...}}."""
  env = cache_env(cache)
  results: dict[str, Any] = {}
  parts = {"cold": ["cold"], "dispatch": ["first", "steady", "jit"], "throughput": THROUGHPUT}  # cold first: it must find the cache empty
  for part, part_keys in parts.items():
    if not (part_keys := [k for k in part_keys if k in keys]): continue
    print(f"measuring {system} ({part}) ...", file=sys.stderr, flush=True)
    cmd = [sys.executable, __file__, "--worker", system, "--part", part, "--repeats", str(repeats), "--keys", ",".join(part_keys)]
    try: proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, timeout=600)
    except subprocess.TimeoutExpired: proc = None
    if proc is None or proc.returncode != 0:
      why = "timed out" if proc is None else f"worker exited with {proc.returncode}"
      results.update({k: {"error": why} for k in part_keys})
      continue
    results.update(json.loads(proc.stdout.strip().splitlines()[-1]))
  return results

def fmt(x: float, digits: int = 3) -> str: return f"{x:.{digits}g}" if x < 10 ** digits else f"{x:.0f}"

def cell(key: str, r: Any, base: Any, ratio: bool) -> str:
  """One figure and its ratio to numpy's, both oriented so that more is better: throughput over numpy's, or numpy's time over this."""
  unit, work = next((u, w) for k, _, u, w in BENCHES if k == key)
  if not isinstance(r, float): return "error" if isinstance(r, dict) else "-"
  value = work / r / PER_SECOND[unit] if work is not None else r * SCALE[unit]
  if not ratio or not isinstance(base, float): return fmt(value)
  return f"{fmt(value)} ({fmt(base / r, 2)}x)"

def cpu_model() -> str:
  try: return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
  except (OSError, StopIteration): return platform.processor() or platform.machine()

def cpu_features() -> str:
  try: flags = set(next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")).split(":", 1)[1].split())
  except (OSError, StopIteration): return "unknown"
  return ", ".join(name for name, flag in (("AVX-512", "avx512f"), ("AVX2", "avx2"), ("FMA", "fma")) if flag in flags) or "no AVX"

def versions(systems: list[str]) -> str:
  from importlib import metadata
  dists = {"numpy": "numpy", "tinyspec": "tinyspec", "torch": "torch", "tinygrad": "tinygrad"}
  libs = dict.fromkeys(s.partition(":")[0] for s in systems)
  for dev in ("CPU", "OPENCL", "WEBGPU"):
    if f"tinyspec:{dev}" in systems: dists[f"tinyspec-{dev.lower()}"] = f"tinyspec-{dev.lower()}"; libs[f"tinyspec-{dev.lower()}"] = None
  return ", ".join(f"{lib} {metadata.version(dists[lib])}" for lib in libs)

def report(systems: list[str], results: dict[str, dict[str, Any]], keys: list[str], left_out: dict[str, str], args) -> str:
  base = results.get("numpy", {})
  lines = [f"# bench/run.py results\n\n{datetime.datetime.now():%Y-%m-%d %H:%M}; {cpu_model()}, {os.cpu_count()} cores ({cpu_features()});"
           f" {platform.system()} {platform.machine()}, Python {platform.python_version()}; {versions(systems)};"
           f" load average {args.load:.1f} at the start (other work on the machine skews every figure).",
           f"`python bench/run.py{' --quick' if args.quick else ''}`: medians of {args.repeats} or more calls after a warm-up call."
           " In brackets: the ratio to numpy, more is better (throughput over numpy's; numpy's time over this one's).", "",
           "| benchmark | unit | " + " | ".join(systems) + " |", "|---|---|" + "---|" * len(systems)]
  for key, what, unit, _ in BENCHES:
    if key not in keys: continue
    lines.append(f"| {what} | {unit} | " + " | ".join(cell(key, results[s].get(key), base.get(key), s != "numpy") for s in systems) + " |")
  notes = []
  for s in systems:  # one line per system and reason
    by_reason: dict[str, list[str]] = {}
    for k, why in SKIPS.get(s, {}).items():
      if k in keys: by_reason.setdefault(why, []).append(k)
    notes += [f"- {s}, {', '.join(ks)}: {why}" for why, ks in by_reason.items()]
  notes += [f"- {s}, {k}: {r['error']}" for s in systems for k, r in results[s].items() if isinstance(r, dict)]
  notes += [f"- {s}, {note}" for s in systems for note in results[s].get("notes", [])]
  notes += [f"- {s}: not measured: {why}" for s, why in left_out.items()]
  if args.quick: notes.append(f"- --quick: {', '.join(sorted(LARGEST))} left out")
  return "\n".join(lines + (["", "Notes (\"-\": not measured):", *notes] if notes else [])) + "\n"

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--quick", action="store_true", help="fewer repeats, and leave out the largest sizes (matmul 2048, conv2d)")
  ap.add_argument("--systems", help=f"comma-separated, from {','.join(SYSTEMS)} (default: all that are available)")
  ap.add_argument("--repeats", type=int, help="timed calls per figure, at least (default 7, --quick 3)")
  ap.add_argument("--output", default=str(Path(__file__).with_name("RESULTS.md")), help="where to write the table (default bench/RESULTS.md)")
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  ap.add_argument("--part", help=argparse.SUPPRESS)
  ap.add_argument("--keys", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.repeats is None: args.repeats = 3 if args.quick else 7
  if args.worker:
    print(json.dumps(worker(args.worker, args.part, args.keys.split(","), args.repeats)))
    return 0
  args.load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
  wanted = args.systems.split(",") if args.systems else SYSTEMS
  if unknown := [s for s in wanted if s not in SYSTEMS]: ap.error(f"unknown systems {unknown}; choose from {SYSTEMS}")
  left_out = {s: why for s in wanted if (why := available(s)) is not None}
  for s, why in left_out.items(): print(f"{s}: left out: {why}", file=sys.stderr)
  systems = [s for s in wanted if s not in left_out]
  keys = [k for k, *_ in BENCHES if not (args.quick and k in LARGEST)]
  results = {}
  with tempfile.TemporaryDirectory(prefix="tinyspec-bench-") as tmp:
    for s in systems:
      cache = os.path.join(tmp, s.replace(":", "-"))
      os.makedirs(cache)
      todo = [k for k in keys if k not in SKIPS.get(s, {})]
      results[s] = measure(s, todo, args.repeats, cache) if todo else {}
  text = report(systems, results, keys, left_out, args)
  print(text)
  Path(args.output).write_text(text)
  print(f"written to {args.output}", file=sys.stderr)
  return 0

if __name__ == "__main__":
  raise SystemExit(main())
