"""A fault run: bad inputs and faults thrown at tinyspec as a careful user would, each outcome counted.

    python3 bench/faults.py            # every case on PYTHON, CPU and OPENCL where installed; prints the counts

Each case either expects an error (handled when that error type is raised, with a message naming the problem; a crash
when something else escapes; wrong when nothing is raised) or a value (handled when it is right, wrong otherwise).
Cases about files also check nothing was lost (the old checkpoint still loads). Not a test: the tests that prove each
guarantee are listed in docs/reliability.md; this is the tally a reliability review asks for.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tinyspec import Device, Tensor, dtypes
from tinyspec.device import Buffer, DeviceError
from tinyspec.nn.state import SafetensorsError, safe_load, safe_save

CASES: list[tuple[str, str, Callable[[], object], object]] = []

def case(category: str, name: str, expect: type[BaseException] | Callable[[object], bool]):
  """Register a case: `expect` is the exception type it must raise, or a check its result must pass."""
  def register(fn):
    CASES.append((category, name, fn, expect))
    return fn
  return register

def devices() -> list[str]:
  return [d for d in ("PYTHON", "CPU", "OPENCL") if any(r.name == d and r.status == "available" for r in Device.listing())]

# ---- bad shapes, dtypes, indices, devices ----

BAD_CALLS = [
  ("shape", "reshape to another size", lambda: Tensor.ones(2, 3).reshape(4, 2), RuntimeError),
  ("shape", "reshape with two -1", lambda: Tensor.ones(2, 3).reshape(-1, -1), RuntimeError),
  ("shape", "negative size", lambda: Tensor.zeros(-1, 3), RuntimeError),
  ("shape", "expand a non-1 axis", lambda: Tensor.ones(2, 3).expand(4, 3), RuntimeError),
  ("shape", "permute with a repeated axis", lambda: Tensor.ones(2, 3).permute(0, 0), RuntimeError),
  ("shape", "pad that cuts past the size", lambda: Tensor.ones(2, 3).pad(((0, 0), (-5, 0))), RuntimeError),
  ("shape", "shrink out of bounds", lambda: Tensor.ones(2, 3).shrink(((0, 2), (1, 9))), IndexError),
  ("shape", "flip an axis that is not there", lambda: Tensor.ones(2, 3).flip(5), IndexError),
  ("shape", "cat of mismatched shapes", lambda: Tensor.ones(2, 3).cat(Tensor.ones(2, 4), dim=0), RuntimeError),
  ("shape", "matmul of mismatched inner sizes", lambda: Tensor.ones(2, 3) @ Tensor.ones(4, 5), RuntimeError),
  ("shape", "broadcast of incompatible shapes", lambda: Tensor.ones(2, 3) + Tensor.ones(4, 3), RuntimeError),
  ("shape", "a shape of 2**64 elements", lambda: Tensor.empty(2**62, 4), ValueError),
  ("shape", "a shape of 2**64 bytes", lambda: Tensor.ones(2**60, 4), ValueError),
  ("shape", "max over an empty axis", lambda: Tensor.ones(0, 3).max(0), RuntimeError),
  ("dtype", "unknown dtype name", lambda: Tensor.ones(2, dtype="float128"), (ValueError, KeyError, TypeError)),
  ("dtype", "bitwise and of floats", lambda: Tensor.ones(2) & Tensor.ones(2), RuntimeError),
  ("dtype", "an integer past uint64", lambda: Tensor([2**64, -1]), OverflowError),
  ("dtype", "a tensor of strings", lambda: Tensor(["a", "b"]), TypeError),
  ("index", "int index past the end", lambda: Tensor.ones(2, 3)[5], IndexError),
  ("index", "list index past the end", lambda: Tensor.ones(2, 3)[[0, 7]], IndexError),
  ("index", "too many indices", lambda: Tensor.ones(2, 3)[0, 0, 0], IndexError),
  ("index", "bool mask of the wrong shape", lambda: Tensor.ones(2, 3)[Tensor([True, False, True])], IndexError),
  ("index", "gather with a float index", lambda: Tensor.ones(2, 3).gather(1, Tensor([[0.5]])), RuntimeError),
  ("device", "unknown device", lambda: Tensor.ones(2, device="NOPE").realize(), DeviceError),
  ("device", "malformed device name", lambda: Tensor.ones(2, device="CPU:x"), DeviceError),
  ("device", "device index past the last", lambda: Tensor.ones(2, device="OPENCL:9").realize(), DeviceError),
  ("device", "ops across two devices", lambda: Tensor.ones(2, device="PYTHON") + Tensor.ones(2, device="CPU").realize(), RuntimeError),
  ("device", "bfloat16 on a device without it", lambda: Tensor.ones(2, device="OPENCL").cast(dtypes.bfloat16).realize(), DeviceError),
  ("memory", "an allocation past host memory", lambda: Buffer("CPU", 2**40, dtypes.float32).allocate(), MemoryError),
  ("memory", "an allocation past OPENCL's largest", lambda: Buffer("OPENCL", 2**34, dtypes.float32).allocate(), MemoryError),
  ("value", "arange with step 0", lambda: Tensor.arange(0, 5, 0), ValueError),
  ("value", "full with a string", lambda: Tensor.full((2,), "x"), TypeError),
  ("grad", "backward of a non-scalar", lambda: Tensor.ones(3, requires_grad=True).exp().backward(), RuntimeError),
]
for cat, name, fn, expect in BAD_CALLS: case(cat, name, expect)(fn)

# ---- values that used to come out silently wrong ----

def _exact(want):
  return lambda got: np.array_equal(np.asarray(got), np.asarray(want))

for dev in ("PYTHON", "CPU", "OPENCL"):
  case("value", f"{dev}: ones(10_000, 10_000).sum() exact", _exact(100_000_000))(lambda dev=dev: Tensor.ones(10_000, 10_000, device=dev).sum().item())
  x = np.array([np.nan, np.inf, -np.inf, 1e20, -3e9, 2.7], np.float32)
  case("value", f"{dev}: float -> int32 of nan/inf/huge", _exact([0, 0, 0, 0, 1294967296, 2]))(
    lambda dev=dev, x=x: Tensor(x, device=dev).cast(dtypes.int32).numpy())
  a = np.arange(1, 5, dtype=np.float32).reshape(2, 1, 2, 1)
  case("value", f"{dev}: expand then sum over the expanded axis", _exact(np.broadcast_to(a, (2, 2, 2, 2)).sum(0)))(
    lambda dev=dev, a=a: Tensor(a, device=dev).expand(2, 2, 2, 2).sum(0).numpy())
case("value", "arange past int32", lambda v: v == (2**31 + 4, "int64"))(lambda: ((t := Tensor.arange(2**31 + 5))[-1].item(), t.dtype.name))
case("value", "cos(1e7) in float32", lambda v: abs(v - np.cos(1e7)) < 1e-6)(lambda: Tensor([1e7]).cos().item())
case("value", "relu's gradient at 0", _exact([0.0]))(lambda: _grad(lambda t: t.relu(), [0.0]))
case("value", "sigmoid's gradient at -350", _exact([0.0]))(lambda: _grad(lambda t: t.sigmoid(), [-350.0]))

def _grad(f, x):
  t = Tensor(np.array(x, np.float32), requires_grad=True)
  f(t).sum().backward()
  return t.grad.numpy()

# ---- threads ----

def _hammer(dev: str) -> bool:
  def one(tid):
    rng = np.random.default_rng(tid)
    for i in range(8):
      a = rng.standard_normal((1 + (tid + i) % 5, 7)).astype(np.float32)
      if not np.allclose((Tensor(a, device=dev) * 2 + 1).sum(1).numpy(), (a * 2 + 1).sum(1), rtol=1e-5, atol=1e-5): return False
    return True
  with ThreadPoolExecutor(8) as pool: return all(pool.map(one, range(8)))
for dev in ("PYTHON", "CPU", "OPENCL"): case("threads", f"{dev}: 8 threads, every value checked", bool)(lambda dev=dev: _hammer(dev))

# ---- files: safetensors and the compile cache ----

def _saved(tmp: Path) -> Path:
  safe_save({"w": Tensor(np.arange(6, dtype=np.float32))}, path := tmp / "ckpt.safetensors")
  return path

def _malformed(edit: Callable[[bytes], bytes]):
  def run():
    with tempfile.TemporaryDirectory() as d:
      path = _saved(Path(d))
      path.write_bytes(edit(path.read_bytes()))
      safe_load(str(path))
  return run
for name, edit in [("one byte short", lambda b: b[:-1]), ("header length past the file", lambda b: (10**9).to_bytes(8, "little") + b[8:]),
                   ("header not JSON", lambda b: b[:8] + b"{" * (len(b) - 8)), ("empty file", lambda b: b""),
                   ("deeply nested header", lambda b: len(p := b"[" * 5000 + b"]" * 5000).to_bytes(8, "little") + p)]:
  case("files", f"safetensors: {name}", SafetensorsError)(_malformed(edit))

def _failed_save_keeps_old() -> str:
  """Save over a checkpoint with a file-size limit too small for the new one: the save must fail and the old one load."""
  with tempfile.TemporaryDirectory() as d:
    path = _saved(Path(d))
    script = textwrap.dedent(f"""
      import resource, signal, numpy as np
      from tinyspec import Tensor
      from tinyspec.nn.state import safe_save
      signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
      resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
      try: safe_save({{"w": Tensor(np.ones(100_000, np.float32))}}, {str(path)!r})
      except OSError: print("refused")""")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    try: ok = np.array_equal(safe_load(str(path))["w"].numpy(), np.arange(6, dtype=np.float32))
    except Exception: return "lost"
    return "handled" if ok and "refused" in out.stdout else "wrong"
case("files", "a save that hits the file-size limit", lambda v: v)(_failed_save_keeps_old)

class _Bomb:
  def __reduce__(self): return (exec, ("raise SystemExit('a cache entry was unpickled')",))

def _poisoned_cache() -> bool:
  """A well-formed cache entry holding a pickle, planted under the key of a CHECK device's kernel, is never unpickled:
  the kernel still computes x * 3."""
  from tinyspec.device import compiler as cache
  from tinyspec.engine import realize
  dev = "CUDA_CHECK" if any(r.name == "CUDA_CHECK" and r.status == "available" for r in Device.listing()) else "AMD_CHECK"
  with tempfile.TemporaryDirectory() as d:
    os.environ["TINYSPEC_CACHE_DIR"] = d
    try:
      x = Tensor(np.arange(4, dtype=np.float32), device=dev)
      (x * 3).numpy()
      rt = Device[dev]
      for (kdev, _), k in list(realize._kernels.items()):
        if kdev == dev: cache._write(Path(d), rt.compiler.cache_key(k.source), rt.compiler.full_key(k.source), pickle.dumps(_Bomb()))
      realize._kernels.clear(), realize._schedules.clear()
      return np.array_equal((x * 3).numpy(), np.arange(4) * 3)
    finally: os.environ.pop("TINYSPEC_CACHE_DIR")
case("files", "a poisoned compile cache entry", bool)(_poisoned_cache)

# ---- plugins ----

_PLUGIN_HEAD = "from tinyspec.device import DeviceSpec\nfrom tinyspec.hookspecs import hookimpl\n"
_PLUGINS = {  # modules a broken or careless plugin author might ship
  "exiting_plugin": "raise SystemExit(3)\n",
  "misspelt_plugin": _PLUGIN_HEAD + "@hookimpl\ndef tinyspec_plugin_api(): return (1,)\n@hookimpl\ndef tinyspec_device(): return ()\n",
  "future_plugin": _PLUGIN_HEAD + "@hookimpl\ndef tinyspec_plugin_api(): return (99,)\n@hookimpl\ndef tinyspec_devices(): return ()\n",
  "second_cpu_plugin": _PLUGIN_HEAD + "@hookimpl\ndef tinyspec_plugin_api(): return (1,)\n"
                       "@hookimpl\ndef tinyspec_devices(): return (DeviceSpec('CPU', ('X',), probe=lambda: None, open=lambda n: None),)\n",
}

def _in_fresh_process(code: str) -> list[str]:
  """Run `code` in a new interpreter that can import the plugins above; its printed words."""
  with tempfile.TemporaryDirectory() as d:
    for module, text in _PLUGINS.items(): Path(d, f"{module}.py").write_text(text)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": d})
    return out.stdout.split()

_USABLE = "any(r.name == 'PYTHON' and r.status == 'available' for r in Device.listing())"
PLUGIN_CASES = [
  ("a plugin raising SystemExit at import", ["failed", "True"],
   f"from tinyspec.device import Device\nprint(Device.register('exiting_plugin', devices=['EXITING']).status, {_USABLE})"),
  ("a plugin with a misspelt hook", ["incompatible", "True"],
   f"from tinyspec.device import Device\nprint(Device.register('misspelt_plugin').status, {_USABLE})"),
  ("a plugin for a future API version", ["incompatible", "True"],
   f"from tinyspec.device import Device\nprint(Device.register('future_plugin').status, {_USABLE})"),
  ("a second plugin providing CPU", ["DeviceError", "True"],
   "from tinyspec.device import Device, DeviceError\nDevice.register('second_cpu_plugin', devices=['CPU'])\n"
   "try: Device['CPU']\nexcept DeviceError as e: print('DeviceError', 'second_cpu_plugin' in str(e) and 'tinyspec-cpu' in str(e))"),
  ("first use of the registry from 8 threads", ["True"],
   "from concurrent.futures import ThreadPoolExecutor\nfrom tinyspec.device import Device\n"
   "with ThreadPoolExecutor(8) as pool: print(all(pool.map(lambda _: Device['CPU'] is not None, range(64))))"),
]
for name, want, code in PLUGIN_CASES: case("plugins", name, lambda v, want=want: v == want)(lambda code=code: _in_fresh_process(code))

def _swapped_cache_entries() -> bool:
  """Swap the payloads of two CPU kernels' cache entries (x*3 and x*5): neither is taken for the other."""
  with tempfile.TemporaryDirectory() as d:
    code = textwrap.dedent("""
      import os, numpy as np
      from pathlib import Path
      from tinyspec import Tensor
      x = Tensor(np.arange(4, dtype=np.float32), device="CPU")
      (x * 3).numpy(); (x * 5).numpy()
      a, b = sorted(p for p in Path(os.environ["TINYSPEC_CACHE_DIR"]).rglob("*") if p.is_file() and not p.name.startswith("."))
      pa, pb = a.read_bytes(), b.read_bytes()
      a.write_bytes(pb); b.write_bytes(pa)""")
    check = "import numpy as np\nfrom tinyspec import Tensor\nx = Tensor(np.arange(4, dtype=np.float32), device='CPU')\n" \
            "print(list((x * 3).numpy()) == [0, 3, 6, 9] and list((x * 5).numpy()) == [0, 5, 10, 15])"
    env = {**os.environ, "TINYSPEC_CACHE_DIR": d}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True).stdout.split() == ["True"]
case("files", "two CPU cache entries with their payloads swapped", bool)(_swapped_cache_entries)

def _shared_cache_dir() -> bool:
  """A cache directory writable by everyone is not used: kernels compile in memory, and nothing is written there."""
  with tempfile.TemporaryDirectory() as d:
    os.chmod(d, 0o777)
    code = "import numpy as np\nfrom tinyspec import Tensor\nprint((Tensor(np.ones(3, np.float32), device='CPU') * 7).tolist())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TINYSPEC_CACHE_DIR": d}, capture_output=True, text=True)
    return out.stdout.strip() == "[7.0, 7.0, 7.0]" and "compiling without caching" in out.stderr and not any(Path(d).iterdir())
case("files", "a cache directory writable by others", bool)(_shared_cache_dir)

# ---- the run ----

def run() -> Counter:
  available = set(devices())
  tally: Counter = Counter()
  by_cat: dict[str, Counter] = {}
  for cat, name, fn, expect in CASES:
    if "OPENCL" in name and "OPENCL" not in available: continue
    try:
      got = fn()
      outcome = ("wrong" if isinstance(expect, type) and issubclass(expect, BaseException)
                 else got if isinstance(got, str) else "handled" if expect(got) else "wrong")
    except Exception as e:  # counting what escapes is the point
      expected = isinstance(expect, tuple) or (isinstance(expect, type) and issubclass(expect, BaseException))
      outcome = "handled" if expected and isinstance(e, expect) and str(e) else "crash"
      if outcome == "crash": print(f"  crash: {cat}: {name}: {type(e).__name__}: {str(e)[:160]}")
    if outcome == "wrong": print(f"  wrong: {cat}: {name}")
    if outcome == "lost": print(f"  lost: {cat}: {name}")
    tally["tried"] += 1
    tally[outcome] += 1
    by_cat.setdefault(cat, Counter())[outcome] += 1
  print(f"{'category':10s} tried handled crash wrong lost")
  for cat, c in by_cat.items(): print(f"{cat:10s} {sum(c.values()):5d} {c['handled']:7d} {c['crash']:5d} {c['wrong']:5d} {c['lost']:4d}")
  print(f"{'total':10s} {tally['tried']:5d} {tally['handled']:7d} {tally['crash']:5d} {tally['wrong']:5d} {tally['lost']:4d}")
  return tally

if __name__ == "__main__": run()
