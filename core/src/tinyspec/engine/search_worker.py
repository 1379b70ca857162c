"""The process BEAM search compiles and times candidate kernels in, so a candidate that crashes or hangs costs that process,
never the user's: `python -m tinyspec.engine.search_worker DEVICE FD` serves requests on the socket FD until it closes.

A request is (function name, args), a function of `Bench`; the answer is ("ok", value) or ("error", "Type: message").
Several workers compile at once; one of them also times, alone, so no compile competes with a timed run for the cores.
"""
from __future__ import annotations

import os
import sys
import time
from multiprocessing.connection import Connection

import numpy as np

from tinyspec.device import Device
from tinyspec.device.memory import Buffer, buffer_np_dtype
from tinyspec.dtype import DType, bf16_to_bits, dtypes
from tinyspec.engine.lower import render_kernel
from tinyspec.engine.optimize import Opt, OptError, optimize
from tinyspec.uop.uop import UOp


def sample_data(dtype: DType, size: int, rng: np.random.Generator) -> np.ndarray:
  """What a candidate's buffer holds while it is timed and checked: floats uniform in [-1, 1] (bfloat16 as its bits),
  integers and bools 0, so a kernel that indexes with a loaded value stays in bounds."""
  if not dtypes.is_float(dtype): return np.zeros(size, buffer_np_dtype(dtype))
  x = rng.uniform(-1, 1, size).astype(np.float32)
  return bf16_to_bits(x) if dtype == dtypes.bfloat16 else x.astype(buffer_np_dtype(dtype))

class Bench:
  """One kernel's buffers on `device`, and the programs of its candidates compiled, timed and run on them."""
  def __init__(self, device: str):
    self.rt = Device[device]
    self.buffers: list[Buffer] = []
    self.initial: list[np.ndarray] = []
    self.loaded: dict[tuple[str, bytes], object] = {}

  def compile(self, name: str, src: str) -> bytes:
    """The device's binary of `src` (through the on-disk compile cache)."""
    return self.rt.compiler.compile_cached(src, name)

  def build(self, ast: UOp, opts: tuple[Opt, ...]) -> tuple[str, str, tuple, bytes] | None:
    """`ast` with `opts` lowered and compiled: (name, source, (global size, local size), binary); None when the optimizer
    refuses the opts."""
    try: kernel = optimize(ast, self.rt.renderer, list(opts))
    except OptError: return None
    k = render_kernel(kernel, self.rt.renderer, quiet=True)
    return k.name, k.source, (k.global_size, k.local_size), self.compile(k.name, k.source)

  def setup(self, params: list[tuple[int, DType]], seed: int) -> None:
    """Allocate the kernel's buffers (size, dtype per parameter slot) and fill them with `sample_data`."""
    rng = np.random.default_rng(seed)
    self.initial = [sample_data(dtype, size, rng) for size, dtype in params]
    self.buffers = [Buffer(self.rt.name, size, dtype).allocate().copyin(x) for (size, dtype), x in zip(params, self.initial)]
    self.loaded.clear()

  def _program(self, name: str, binary: bytes):
    if (p := self.loaded.get((name, binary))) is None:
      if len(self.loaded) >= 64: self.loaded.clear()
      p = self.loaded[(name, binary)] = self.rt.program(name, binary)
    return p

  def time(self, name: str, binary: bytes, global_size, local_size, runs: int, give_up: float) -> list[float]:
    """Seconds per run: a first run (it pays for loading), then up to `runs` more unless the first took over `give_up`."""
    p, handles = self._program(name, binary), [b.handle for b in self.buffers]
    out = [p(*handles, global_size=global_size, local_size=local_size, wait=True)]
    for _ in range(runs if out[0] <= give_up else 0): out.append(p(*handles, global_size=global_size, local_size=local_size, wait=True))
    return out

  def output(self, name: str, binary: bytes, global_size, local_size, slots: list[int]) -> list[np.ndarray]:
    """The contents of buffers `slots` after one run from the initial data."""
    for b, x in zip(self.buffers, self.initial): b.copyin(x)
    self._program(name, binary)(*(b.handle for b in self.buffers), global_size=global_size, local_size=local_size, wait=True)
    return [self.buffers[i].numpy() for i in slots]

  def sleep(self, seconds: float) -> None:
    """Wait (tests use it to stand for a hanging candidate)."""
    time.sleep(seconds)

  def exit(self, code: int) -> None:
    """End the process at once (tests use it to stand for a crashing candidate)."""
    sys.stdout.flush()
    os._exit(code)

def serve(device: str, fd: int) -> None:
  """Answer requests on socket `fd` with a Bench of `device` until the other end closes it (a device that cannot be
  opened here answers every request with why)."""
  conn = Connection(fd)
  try: bench: Bench | None = Bench(device); opened = None
  except Exception as e: bench, opened = None, f"{type(e).__name__}: {e}"
  while True:
    try: fn, args = conn.recv()
    except (EOFError, OSError): return  # the searching process is gone
    if bench is None: conn.send(("error", f"{device} cannot be opened in a worker process: {opened}")); continue
    try: conn.send(("ok", getattr(bench, fn)(*args)))
    except Exception as e: conn.send(("error", f"{type(e).__name__}: {e}"))

if __name__ == "__main__":
  serve(sys.argv[1], int(sys.argv[2]))
