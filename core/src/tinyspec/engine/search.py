"""BEAM search: `BEAM=n` times the legal opts of each kernel on its device and keeps the fastest, instead of the heuristic's.

    seeds: the heuristic's opts, each prefix of them, and no opts   -> timed; the best n are the beam
    each round: every opt sequence of the beam, extended by each legal next opt (`actions`)
                -> lowered and compiled in parallel worker processes -> timed one at a time -> the best n are the beam
    until a round improves the best time by under 1%, or the kernel's time budget is spent
    then: the fastest candidate's output is checked against the kernel with no opts; the first that agrees wins

Starting from the heuristic's choice (and its prefixes, which reach its alternatives: another tile, another workgroup)
means the search never ends worse than the heuristic and spends its time near good kernels, instead of timing slow,
barely optimized ones first. Candidates are compiled and run in worker processes (`search_worker.py`): one that
crashes, fails to compile or runs past its timeout is dropped and its worker restarted. Timing runs alone in one worker
after the round's compiles, each candidate's best of a few runs (one if its first run is 3x the best so far).

Winners are kept in the on-disk cache of device/compiler.py, keyed by the kernel, device, renderer and compiler version
and beam width, so a second run searches nothing. Settings (environment):
  BEAM=n             beam width; 0 or unset: no search
  BEAM_BUDGET=s      seconds of search per kernel (default 10 on a CPU, 25 on a GPU, where compiles take longer)
  BEAM_TIMEOUT=s     seconds a candidate may run before it is dropped (default: 10x the best so far, at least 1)
  BEAM_WORKERS=k     worker processes (default: the number of cores)
  BEAM_CACHE=0       search again even where a winner is cached
DEBUG>=1 prints each search's outcome; a progress bar per kernel shows candidates timed and the best time.
"""
from __future__ import annotations

import atexit
import functools
import json
import math
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from importlib import metadata
from multiprocessing.connection import Connection

import numpy as np
from tqdm import tqdm

import tinyspec
from tinyspec.device import Device
from tinyspec.device.compiler import cache_read, cache_write, debug_level
from tinyspec.engine import optimize as O
from tinyspec.engine import tensorcore as TC
from tinyspec.engine.lower import kernel_name
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import AxisType, Ops
from tinyspec.uop.spec import buffer_of
from tinyspec.uop.uop import UOp
from tinyspec.viz import render_listing

A = AxisType
SEARCH_VERSION = 1  # part of each cached winner's key: a change to how search picks makes old winners stale
IMPROVEMENT = 0.99  # a round must bring the best time under this fraction of the last to go on
GIVE_UP = 3.0       # a candidate whose first run takes this many times the best so far is not run again
RUNS = 3            # timed runs after the first, the best of which counts
CPU_BUDGET, GPU_BUDGET = 10.0, 25.0  # default seconds of search per kernel (a GPU's compiles, PoCL's too, take longer)
BUILD_TIMEOUT = 60.0   # seconds a worker may take to lower and compile one candidate before it counts as hung
# the amounts each SPLIT target is tried with (THREAD: the renderer's thread count)
AMOUNTS: dict[AxisType, tuple[int, ...]] = {
  A.UPCAST: (2, 3, 4, 8, 16), A.UNROLL: (2, 3, 4, 8, 16), A.LOCAL: (2, 4, 8, 16, 32, 64, 128, 256),
  A.GROUP_REDUCE: (8, 16, 32, 64, 128, 256),
}
PAD_MULTIPLES = (4, 8, 16, 32)  # what PADTO rounds an axis up to, where its size is not a multiple already
MAX_UNROLL = 16                 # UNROLL copies per kernel (each is a copy of the reduction's body)

def beam_width() -> int:
  """$BEAM as an int: the beam width, 0 for no search."""
  try: return max(0, int(os.environ.get("BEAM", "0") or 0))
  except ValueError: raise ValueError(f"BEAM must be a whole number (a beam width), got {os.environ['BEAM']!r}") from None

def _seconds(env: str, default: float) -> float:
  try: return float(os.environ.get(env, "") or default)
  except ValueError: raise ValueError(f"{env} must be a number of seconds, got {os.environ[env]!r}") from None

# ---- the search space ----

def actions(kernel: UOp, renderer: Renderer) -> list[O.Opt]:
  """The opts worth trying next on `kernel` (opts so far applied), most promising kinds first (a search out of time has
  tried those): on an unsplit kernel each TC match, then SPLITs of each axis to each target the device has by each of
  AMOUNTS, SWAPs of output axes, NOLOCALS and PADTOs. Many will not apply; the optimizer decides (OptError)."""
  rngs, gpu = O.axes(kernel), O.is_gpu(renderer)
  out: list[O.Opt] = []
  if all(r.axis_type in (*TC.OUTPUT, A.REDUCE) for r in rngs):
    out += [O.Opt(O.OptOps.TC, c, tc) for tc in renderer.tensor_cores for c in range(len(TC.matches(kernel, tc)))]
  amounts = {A.UPCAST: AMOUNTS[A.UPCAST], A.LOCAL: AMOUNTS[A.LOCAL] if gpu else (), A.UNROLL: AMOUNTS[A.UNROLL],
             A.THREAD: (renderer.threads,) if renderer.threads > 1 else (),
             A.GROUP_REDUCE: AMOUNTS[A.GROUP_REDUCE] if gpu and renderer.has_shared else ()}
  for target, sizes in amounts.items():
    for i, r in enumerate(rngs):
      if r.size is not None and r.axis_type in O.SPLIT_FROM[target]:
        out += [O.Opt(O.OptOps.SPLIT, i, (f, target, target is A.THREAD)) for f in sizes if f <= r.size and r.size % f == 0]
  out += [O.Opt(O.OptOps.SWAP, i, j) for i, r in enumerate(rngs) for j in range(i + 1, len(rngs))
          if r.axis_type is rngs[j].axis_type in (A.GLOBAL, A.LOOP)]
  if gpu and not any(r.axis_type in O.NO_LOCALS for r in rngs): out.append(O.Opt(O.OptOps.NOLOCALS, None))
  out += [O.Opt(O.OptOps.PADTO, i, m) for i, r in enumerate(rngs) if r.size is not None and r.axis_type in O.PADDABLE
          for m in PAD_MULTIPLES if m < r.size and r.size % m]
  return out

def within_limits(kernel: UOp, renderer: Renderer) -> bool:
  """Whether an optimized kernel keeps its copies in registers, compiles quickly and launches: UPCAST copies within the
  renderer's max_upcast (at least 1), UNROLL copies within MAX_UNROLL, a workgroup's lanes within local_max[0] (the
  launch checks each dimension, the device also their product)."""
  def size(*kinds: AxisType) -> int: return math.prod(r.size for r in O.axes(kernel) if r.axis_type in kinds)
  lanes = renderer.local_max[0] if renderer.local_max else 1
  return size(A.UPCAST) <= max(1, renderer.max_upcast) and size(A.UNROLL) <= MAX_UNROLL and size(*O.NO_LOCALS) <= lanes

def seeds(kernel: UOp, renderer: Renderer) -> list[tuple[O.Opt, ...]]:
  """Where the search starts: the heuristic's opts, then each of their prefixes down to no opts."""
  h = tuple(O.heuristic_opts(kernel, renderer))
  return [h[:i] for i in range(len(h), -1, -1)]

# ---- worker processes ----

class CandidateFailed(RuntimeError):
  """A candidate could not be built or run: a compile error, a crash, or no answer within its timeout."""

class Worker:
  """One `search_worker` process for a device, started on first use and again after it crashes or is killed. `setup`
  requests are remembered and sent again to a restarted process, so it holds the same buffers."""
  def __init__(self, device: str):
    self.device, self.proc, self.conn, self.setup = device, None, None, None

  def _start(self) -> None:
    ours, theirs = socket.socketpair()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # the child imports what this process does
    self.proc = subprocess.Popen([sys.executable, "-m", "tinyspec.engine.search_worker", self.device, str(theirs.fileno())],
                                 pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
    theirs.close()
    self.conn = Connection(ours.detach())
    if self.setup is not None: self._call(*self.setup, timeout=None)

  def call(self, fn: str, *args, timeout: float | None = None):
    """Bench.fn(*args) in the worker; CandidateFailed when it raises, dies or takes longer than `timeout` seconds."""
    if fn == "setup": self.setup = (fn, *args)
    if self.proc is None or self.proc.poll() is not None: self._start()
    return self._call(fn, *args, timeout=timeout)

  def _call(self, fn: str, *args, timeout: float | None):
    try:
      self.conn.send((fn, args))
      if not self.conn.poll(timeout):
        self.stop()
        raise CandidateFailed(f"no answer from the worker in {timeout:.1f} s: stopped")
      status, value = self.conn.recv()
    except (EOFError, OSError) as e:
      code = self.stop()
      raise CandidateFailed(f"the worker process died (exit code {code})") from e
    if status != "ok": raise CandidateFailed(value)
    return value

  def stop(self) -> int | None:
    """Kill the process; its exit code (None when none was running)."""
    if self.proc is None: return None
    if self.conn is not None: self.conn.close()
    if self.proc.poll() is None: self.proc.kill()
    code, self.proc, self.conn = self.proc.wait(), None, None
    return code

_workers: dict[str, list[Worker]] = {}
_workers_lock = threading.Lock()

def workers(device: str) -> list[Worker]:
  """The device's workers: $BEAM_WORKERS, default one per core. The first also times. They are kept, idle, for this
  process's life (each holds the device open and the last kernel's buffers), so the next search starts at once."""
  n = max(1, int(os.environ.get("BEAM_WORKERS", "") or os.cpu_count() or 1))
  with _workers_lock:
    have = _workers.setdefault(device, [])
    while len(have) < n: have.append(Worker(device))
    return have[:n]

@atexit.register
def _stop_workers() -> None:
  for ws in _workers.values():
    for w in ws: w.stop()

# ---- candidates ----

@dataclass
class Candidate:
  """One opt sequence tried: what it built (name, source, launch shape, binary), its best time, or why it was dropped."""
  opts: tuple[O.Opt, ...]
  name: str = ""
  source: str = ""
  launch: tuple = (None, None)   # global and local size
  binary: bytes = b""
  time: float = math.inf
  error: str = ""

def _build_all(cands: list[Candidate], ast: UOp, ws: list[Worker], deadline: float) -> None:
  """Lower and compile each candidate in the workers at once; an opt sequence the optimizer refuses gets error "illegal"."""
  todo: queue.Queue = queue.Queue()
  for c in cands: todo.put(c)
  def drain(w: Worker) -> None:
    while time.perf_counter() < deadline:
      try: c = todo.get_nowait()
      except queue.Empty: return
      try: built = w.call("build", ast, c.opts, timeout=BUILD_TIMEOUT)
      except CandidateFailed as e: c.error = str(e); continue
      if built is None: c.error = "illegal"
      else: c.name, c.source, c.launch, c.binary = built
  threads = [threading.Thread(target=drain, args=(w,), daemon=True) for w in ws]
  for t in threads: t.start()
  for t in threads: t.join()
  while not todo.empty(): todo.get_nowait().error = "over budget"

def _time(c: Candidate, w: Worker, best: float, deadline: float) -> None:
  timeout = _seconds("BEAM_TIMEOUT", 0) or max(1.0, 10 * best if best < math.inf else deadline - time.perf_counter() + 2.0)
  try: runs = w.call("time", c.name, c.binary, *c.launch, RUNS, GIVE_UP * best, timeout=timeout)
  except CandidateFailed as e: c.error = str(e); return
  c.time = min(runs[1:] or runs)

def _params(ast: UOp) -> tuple[list[tuple[int, object]], list[int]] | None:
  """The kernel's buffer parameters (size, dtype) by slot and the slots it stores to; None for a kernel with variables."""
  nodes = ast.toposort()
  params = {u.arg[0]: u for u in nodes if u.op is Ops.PARAM}
  if not params or any(not isinstance(k, int) for k in params) or sorted(params) != list(range(len(params))): return None
  stored = sorted({buffer_of(u.src[0]).arg[0] for u in nodes if u.op is Ops.STORE and buffer_of(u.src[0]).op is Ops.PARAM})
  return [(math.prod(params[k].shape), params[k].arg[1]) for k in sorted(params)], stored

def _agrees(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
  """Outputs equal up to the rounding a different summation order gives (float16 and bfloat16 looser)."""
  for g, w in zip(got, want):
    if g.dtype.kind != "f" or w.dtype.kind != "f":
      if not np.array_equal(g, w): return False
      continue
    tol = 1e-2 if g.dtype.itemsize <= 2 else 1e-3
    scale = float(np.nanmax(np.abs(w))) if w.size and np.isfinite(w).any() else 1.0
    if not np.allclose(g, w, rtol=tol, atol=tol * max(1.0, scale), equal_nan=True): return False
  return True

def beam_search(ast: UOp, device: str, width: int) -> tuple[list[O.Opt] | None, dict]:
  """The fastest opts for `ast` on `device` that keep its output (None: keep the heuristic's), and what the search did."""
  rt = Device[device]
  start_time = time.perf_counter()
  deadline = start_time + _seconds("BEAM_BUDGET", GPU_BUDGET if O.is_gpu(rt.renderer) else CPU_BUDGET)
  info = {"kernel": kernel_name(ast), "timed": 0, "failed": 0}
  if (io := _params(ast)) is None: return None, {**info, "skipped": "the kernel has symbolic sizes"}
  params, stored = io
  ws = workers(device)
  try: ws[0].call("setup", params, 0, timeout=None)
  except CandidateFailed as e:
    warnings.warn(f"BEAM: {device} cannot run candidates in a worker process ({e}); kernel {info['kernel']} keeps its heuristic opts",
                  RuntimeWarning, stacklevel=3)
    return None, {**info, "skipped": str(e)}
  start = O.search_start(ast, rt.renderer)
  seen: dict[tuple, Candidate] = {}     # every opt sequence tried
  by_source: dict[str, Candidate] = {}  # one candidate per distinct kernel
  best = math.inf
  bar = tqdm(desc=f"BEAM {info['kernel']}"[:40], unit=" kernels", leave=False, disable=None, file=sys.stderr)
  def evaluate(opt_lists: list[tuple[O.Opt, ...]], until: float) -> list[Candidate]:
    """Build and time each new opt sequence, a few at a time (as many as the workers build at once, twice), until `until`."""
    nonlocal best
    fresh = [seen.setdefault(o, Candidate(o)) for o in dict.fromkeys(opt_lists) if o not in seen]
    for i in range(0, len(fresh), chunk := 2 * len(ws)):
      if time.perf_counter() > until: break
      _build_all(part := fresh[i:i + chunk], ast, ws, until)
      for c in part:
        if c.error or time.perf_counter() > until: continue
        if (twin := by_source.get(c.source)) is not None: c.time, c.error = twin.time, twin.error; continue
        by_source[c.source] = c
        _time(c, ws[0], best, until)
        info["timed" if not c.error else "failed"] += 1
        best = min(best, c.time)
        if debug_level() >= 3: print(f"  BEAM {c.name}: {c.error or f'{c.time * 1e6:.0f} us'}  {list(c.opts)}")
        bar.update(1); bar.set_postfix_str(f"best {best * 1e6:.0f} us")
    return [c for c in fresh if not c.error and c.time < math.inf]
  try:
    starts = seeds(ast, rt.renderer)
    # the seeds are timed whatever the budget: the heuristic's is the fallback, and no opts the reference for the check
    beam = sorted(evaluate(starts, max(deadline, time.perf_counter() + BUILD_TIMEOUT)), key=lambda c: c.time)[:width]
    info["heuristic"] = seen[starts[0]].time
    while beam and time.perf_counter() < deadline:
      nexts = []
      for c in beam:
        k = O.apply_opts(start, c.opts)
        nexts += [c.opts + (a,) for a in actions(k, rt.renderer) if _plausible(k, a, rt.renderer)]
      found = evaluate(nexts, deadline)
      new_beam = sorted({id(c): c for c in beam + found}.values(), key=lambda c: c.time)[:width]
      if new_beam[0].time >= beam[0].time * IMPROVEMENT: break
      beam = new_beam
    winner = _verified(sorted(by_source.values(), key=lambda c: c.time), seen.get(()), ws[0], stored, info)
  finally: bar.close()
  info["seconds"] = time.perf_counter() - start_time
  return (list(winner.opts) if winner else None), info

def _plausible(kernel: UOp, opt: O.Opt, renderer: Renderer) -> bool:
  """Whether `opt` on `kernel` applies and stays within_limits (checked before any worker builds it)."""
  try: return within_limits(O.apply_opts(kernel, [opt]), renderer)
  except O.OptError: return False

def _verified(ranked: list[Candidate], plain: Candidate | None, w: Worker, stored: list[int], info: dict) -> Candidate | None:
  """The first of `ranked` (fastest first) whose output agrees with the kernel's without opts (`plain`)."""
  if plain is None or plain.error or not plain.binary: return None  # no reference to check against: keep the heuristic
  want = w.call("output", plain.name, plain.binary, *plain.launch, stored, timeout=None)
  for c in ranked:
    if c.error or c.time == math.inf: continue
    try: got = w.call("output", c.name, c.binary, *c.launch, stored, timeout=max(2.0, 10 * c.time))
    except CandidateFailed: continue
    if _agrees(got, want):
      info["best"] = c.time
      return c
    warnings.warn(f"BEAM: kernel {c.name} with opts {list(c.opts)} gives a different result than without opts; not used",
                  RuntimeWarning, stacklevel=4)
  return None

# ---- the cache of winners ----

def _encode(opt: O.Opt, renderer: Renderer) -> list:
  arg = opt.arg
  if opt.op is O.OptOps.SPLIT: arg = [arg[0], arg[1].name, arg[2]]
  elif opt.op is O.OptOps.TC: arg = renderer.tensor_cores.index(arg)
  return [opt.op.name, opt.axis, arg]

def _decode(item: list, renderer: Renderer) -> O.Opt:
  op, axis, arg = O.OptOps[item[0]], item[1], item[2]
  if op is O.OptOps.SPLIT: arg = (int(arg[0]), A[arg[1]], bool(arg[2]))
  elif op is O.OptOps.TC: arg = renderer.tensor_cores[arg]
  return O.Opt(op, axis, arg)

@functools.cache
def _dist_version(module: str) -> str:
  top = module.split(".")[0]
  dists = metadata.packages_distributions().get(top, [])
  return " ".join(f"{d} {metadata.version(d)}" for d in dists) or top

def cache_key(ast: UOp, device: str, width: int) -> bytes:
  """What a cached winner depends on: the kernel (its listing), the device, the renderer's class and its distribution's
  version, the compiler's version, the beam width and SEARCH_VERSION."""
  rt = Device[device]
  cls = type(rt.renderer)
  parts = ["beam", str(SEARCH_VERSION), tinyspec.__version__, device, f"{cls.__module__}.{cls.__qualname__}", _dist_version(cls.__module__),
           rt.compiler.label, rt.compiler.version, str(width), render_listing(ast)]
  return b"".join(len(b).to_bytes(8, "little") + b for b in (p.encode() for p in parts))

def _cached(key: bytes, ast: UOp, renderer: Renderer) -> list[O.Opt] | None:
  if os.environ.get("BEAM_CACHE", "") == "0" or (data := cache_read(key)) is None: return None
  try:
    opts = [_decode(item, renderer) for item in json.loads(data)]
    O.optimize(ast, renderer, opts)  # a winner from an older optimizer that no longer applies is searched again
    return opts
  except (ValueError, KeyError, IndexError, TypeError, O.OptError): return None

stats = {"searched": 0, "cache_hits": 0}
_search_lock = threading.Lock()

def beam_opts(ast: UOp, device: str, width: int) -> list[O.Opt] | None:
  """The opts BEAM search picks for `ast` on `device` (the cached winner where there is one); None keeps the heuristic's."""
  rt = Device[device]
  if (opts := _cached(key := cache_key(ast, device, width), ast, rt.renderer)) is not None:
    stats["cache_hits"] += 1
    return opts
  with _search_lock:  # one search at a time: candidates timed side by side would slow each other
    opts, info = beam_search(ast, device, width)
  stats["searched"] += 1
  if opts is not None: cache_write(key, json.dumps([_encode(o, rt.renderer) for o in opts]).encode())
  if debug_level() >= 1:
    gain = f"{info.get('heuristic', math.inf) * 1e6:.0f} us -> {info.get('best', math.inf) * 1e6:.0f} us" if opts is not None else "heuristic kept"
    print(f"BEAM {info['kernel']} on {device}: {info['timed']} kernels timed ({info['failed']} failed) in {info.get('seconds', 0):.1f} s, "
          f"{gain}: {opts}")
  return opts
