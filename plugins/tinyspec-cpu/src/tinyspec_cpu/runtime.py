"""The CPU device: core's LLVM IR renderer, llvmlite compiling for the host CPU at O3, objects loaded into one MCJIT engine
and called through ctypes on host memory from core's HostAllocator (numpy arrays, so buffers are shared with numpy).

A kernel with a THREAD axis runs on several cores: the program calls it once per value of that axis (its core_id) from a
thread pool, and ctypes releases the GIL for each call.
"""
from __future__ import annotations

import ctypes
import os
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm
from tinyspec.device import HostAllocator, Program, Runtime
from tinyspec.device.runtime import Launch
from tinyspec.renderer.llvmir import KernelInfo

from tinyspec_cpu import renderer as target
from tinyspec_cpu.compiler import CPUCompiler
from tinyspec_cpu.renderer import CPURenderer, Host, host, thread_count

_SYM = struct.Struct("<IBBHQQ")  # an ELF64 symbol: name offset, info, other, section index, value, size

def _undefined_symbols(objfile: llvm.ObjectFileRef) -> list[str]:
  """The names an ELF object file uses but does not define (empty for other formats, which are not checked)."""
  sections = {s.name(): s.data() for s in objfile.sections()}
  if b".symtab" not in sections or b".strtab" not in sections: return []
  table, names = sections[b".symtab"], sections[b".strtab"]
  out = []
  for off in range(0, len(table) - _SYM.size + 1, _SYM.size):
    name, _, _, shndx, _, _ = _SYM.unpack_from(table, off)
    if shndx == 0 and name: out.append(names[name:names.index(b"\0", name)].decode())
  return out

def _address(handle) -> int:
  """A host buffer's address. ctypes' view of the array's memory is 3x quicker than numpy's `.ctypes.data`, which costs
  more than the rest of a small call; it needs at least one byte."""
  return ctypes.addressof(ctypes.c_char.from_buffer(handle)) if handle.nbytes else handle.ctypes.data

class CPUProgram(Program):
  """One kernel loaded into the runtime's JIT, called through ctypes with the buffers' addresses."""
  def __init__(self, name: str, binary: bytes, runtime: CPURuntime):
    super().__init__(name, binary)
    header, symbol, obj = binary.split(b"\n", 2)
    self.info, self.runtime = KernelInfo.parse(header.decode()), runtime
    self.engine, addr = runtime.load(symbol.decode(), obj)  # the engine lives as long as a program loaded into it
    info = self.info
    args = [ctypes.c_void_p] * len(info.buffers) + [ctypes.c_int64] * (len(info.variables) + (info.calls is not None))
    self.fn = ctypes.CFUNCTYPE(None, *args)(addr)
    # threads only pay off with enough work for each (the optimizer decided that when it made the THREAD axis; the work
    # may still be small where a variable bound is)
    self.cores = max(1, min(runtime.threads, info.calls or 1, info.work // target.MIN_WORK_PER_THREAD))

  def __call__(self, *bufs, global_size=None, local_size=None, vals=(), wait=False):
    if len(bufs) != len(self.info.buffers): raise TypeError(f"{self.name} takes {len(self.info.buffers)} buffers, got {len(bufs)}")
    st = time.perf_counter()
    self.launch([_address(b) for b in bufs] + list(vals))
    return time.perf_counter() - st if wait else None

  def launch(self, args: list[int]) -> None:
    """Run on buffer addresses and variable values."""
    if self.info.calls is None: self.fn(*args)
    elif self.cores == 1:
      for core in range(self.info.calls): self.fn(*args, core)
    else: self.runtime.parallel(self.fn, args, self.info.calls)

OBJECTS_PER_ENGINE = 64
"""How many object files one MCJIT engine takes before the next program starts a new engine. MCJIT cannot unload an
object, so an engine's code is freed only with the engine: once the kernel cache has let go of every program in it."""

class CPURuntime(Runtime):
  """The opened CPU device. Programs are loaded into MCJIT engines, each holding up to `OBJECTS_PER_ENGINE` of them and
  freed with the last; kernels run synchronously, so there is nothing to wait for."""
  def __init__(self, name: str):
    h = host()
    self.threads = thread_count()
    super().__init__(name, CPURenderer(self.threads, h), CPUCompiler(h), HostAllocator())
    self.host, self.engine, self.loaded = h, self._new_engine(h), 0
    self.lock = threading.Lock()
    self.pool: ThreadPoolExecutor | None = None
    self.pool_pid = 0

  @staticmethod
  def _new_engine(h: Host) -> llvm.ExecutionEngine:
    return llvm.create_mcjit_compiler(llvm.parse_assembly(""), h.target_machine())  # the engine owns its target machine

  def load(self, symbol: str, obj: bytes) -> tuple[llvm.ExecutionEngine, int]:
    """The engine holding `symbol` and its address, adding the object file that defines it to the current engine unless it
    is there already."""
    with self.lock:
      if not (addr := self.engine.get_function_address(symbol)):
        if self.loaded >= OBJECTS_PER_ENGINE: self.engine, self.loaded = self._new_engine(self.host), 0
        self.loaded += 1
        objfile = llvm.ObjectFileRef.from_data(obj)
        # the JIT would leave a call to a function this process lacks as a jump to address 0: refuse such code instead
        if missing := [s for s in _undefined_symbols(objfile) if not llvm.address_of_symbol(s)]:
          raise RuntimeError(f"kernel {symbol} calls {', '.join(missing)}, which this process does not provide")
        self.engine.add_object_file(objfile)
        self.engine.finalize_object()
        addr = self.engine.get_function_address(symbol)
      if not addr: raise RuntimeError(f"the CPU JIT did not find {symbol} in its object file")
      return self.engine, addr

  def program(self, name: str, binary: bytes) -> Program: return CPUProgram(name, binary, self)

  def graph(self, launches: list[Launch]) -> Callable[[list], None]:
    """TinyJit's launches with every address but the inputs' worked out once: a replay only fills those in and calls."""
    prepared = [(launch.program, [_address(h) for h in launch.handles], launch.inputs) for launch in launches]
    def run(handles: list) -> None:
      for program, args, inputs in prepared:
        for position, slot in inputs: args[position] = _address(handles[slot])
        program.launch(args)
    return run

  def parallel(self, fn, args: list[int], n: int) -> None:
    """fn(*args, core) for each core in 0..n-1: the first on this thread, the others on the pool (threads - 1 of them)."""
    if self.pool is None or self.pool_pid != os.getpid():  # a forked child inherits the pool but not its threads
      self.pool, self.pool_pid = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="tinyspec-cpu"), os.getpid()
    futures = [self.pool.submit(fn, *args, i) for i in range(1, n)]
    fn(*args, 0)
    for f in futures: f.result()
