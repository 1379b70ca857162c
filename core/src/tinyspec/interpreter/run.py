"""Runs a LINEAR program with numpy, vectorised: each RANGE and SPECIAL owns one axis of an iteration space, and every
value is an array over the axes it depends on (size 1 on the others), so a whole loop nest runs as a few numpy calls.

A loop runs vectorised unless its iterations depend on each other: a STORE to memory whose address does not move with
the loop, a register written without being an accumulation, a buffer both read and written inside, a bfloat16 sum or
product accumulated across it (every step rounds, so the loop's order is the result's). Those loops run one iteration
at a time. An accumulation `acc = acc <op> x` inside vectorised loops reduces x over the loops' axes at once.
A loop nest bigger than LANES iterations runs its loops in chunks, which keeps memory bounded.
A vector value (a LOAD through INDEX(buf, lanes(i, n)), a STACK of lanes) has one more axis, in front: its lanes.
GPU-style programs run in lockstep over SPECIAL gidx/lidx axes: LOCAL memory is one array per workgroup, and a BARRIER
needs no action because every lane finishes each instruction before the next begins. A WMMA takes every lane of its warp
at once (interpreter/wmma.py), so the WARP range (or the lidx0 it became) is always one whole axis."""
from __future__ import annotations

import copy
import math

import numpy as np

from tinyspec.dtype import AddrSpace, bf16_from_bits, bf16_to_bits, dtypes
from tinyspec.interpreter.alu import bitcast, held, np_dtype, run_alu
from tinyspec.interpreter.wmma import run_wmma
from tinyspec.uop.ops import AxisType, GroupOp, Ops
from tinyspec.uop.spec import buffer_of, is_register, reads_lane, register_update
from tinyspec.uop.uop import UOp

LANES = 1 << 20  # the most iterations a vectorised loop nest runs at once
_REDUCE_UFUNC = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum}
_NOTHING = (Ops.END, Ops.ENDIF, Ops.BARRIER, Ops.GROUP, Ops.SINK)


def _rounds_each_step(st: UOp, op: Ops) -> bool:
  """Whether accumulation STORE st must take its steps in order: a bfloat16 sum or product rounds at each (max is exact)."""
  return op is not Ops.MAX and st.src[1].dtype.scalar() is dtypes.bfloat16


class _Global:
  def __init__(self, arr: np.ndarray, what: str): self.arr, self.what = arr, what
  def _check(self, addr: np.ndarray):
    if addr.size and (addr.min() < 0 or addr.max() >= self.arr.size):
      raise IndexError(f"{self.what}: index {int(addr.min()) if addr.min() < 0 else int(addr.max())} out of bounds for {self.arr.size} elements")
  def load(self, addr, gate):
    if gate is not None:
      # masked-off lanes read element 0, which a zero-size buffer lacks (the gate is then false everywhere: a pad of nothing)
      if not self.arr.size and not np.any(gate): return np.zeros(np.broadcast(addr, gate).shape, self.arr.dtype)
      addr = np.where(gate, addr, 0)
    self._check(addr)
    return self.arr[addr]
  def store(self, addr, val, gate):
    if gate is None: addr, val = np.broadcast_arrays(addr, val)
    else: addr, val, gate = np.broadcast_arrays(addr, val, gate); addr, val = addr[gate], val[gate]
    self._check(addr)
    self.arr[addr] = val

class _GlobalBF16(_Global):
  """Device memory of bfloat16: the buffer holds the raw 16 bits, as a Buffer of bfloat16 does; values are float32."""
  def load(self, addr, gate): return bf16_from_bits(super().load(addr, gate))
  def store(self, addr, val, gate): super().store(addr, bf16_to_bits(val), gate)

class _Local(_Global):
  """Workgroup memory: one row per workgroup (the gidx axes), shared by its lanes (the lidx axes)."""
  def __init__(self, size: int, dtype, group_axes: dict[int, int], ndim: int, what: str):
    shape = tuple(group_axes.get(k, 1) for k in range(ndim))
    self.arr, self.what = np.zeros(shape + (size,), dtype), what
    self.group = tuple(np.arange(n).reshape((1,) * k + (n,) + (1,) * (ndim - k - 1)) if n > 1 else 0 for k, n in enumerate(shape))
  def _at(self, addr):
    if addr.size and (addr.min() < 0 or addr.max() >= self.arr.shape[-1]):
      raise IndexError(f"{self.what}: index {int(addr.min()) if addr.min() < 0 else int(addr.max())} out of bounds for {self.arr.shape[-1]} elements")
    return self.group + (addr,)
  def load(self, addr, gate):
    if gate is not None: addr = np.where(gate, addr, 0)
    return self.arr[self._at(addr)]
  def store(self, addr, val, gate):
    if gate is not None: addr = np.where(gate, addr, 0)
    at = np.broadcast_arrays(*self._at(addr), val)
    val, at = at[-1], at[:-1]
    if gate is not None:
      gate = np.broadcast_to(gate, val.shape); at, val = tuple(a[gate] for a in at), val[gate]
    self.arr[at] = val

class _Registers:
  """A REG buffer: each element an array over the lanes it was first written in."""
  def __init__(self, size: int): self.vals: list = [None] * size; self.lanes: frozenset[int] | None = None
  @staticmethod
  def _slot(addr) -> int:
    if addr.size and (addr.min() != addr.max()): raise ValueError("a register index must not vary across lanes")
    return int(addr.reshape(-1)[0])
  def load(self, addr, gate): return self.vals[self._slot(addr)]


class Interpreter:
  """A LINEAR program prepared to run: `interp(bufs, vals)` runs it on typed 1-D numpy arrays, one per buffer PARAM."""
  def __init__(self, linear: UOp, name: str = "kernel"):
    self.name, self.prog = name, linear.src
    self.axis = {u: k for k, u in enumerate(u for u in self.prog if u.op in (Ops.RANGE, Ops.SPECIAL))}
    self.ndim = len(self.axis)
    self.closing: dict[int, int] = {}
    pos = {u: i for i, u in enumerate(self.prog)}
    for i, u in enumerate(self.prog):
      if u.op is Ops.END: self.closing[pos[u.src[1]]] = i
      if u.op is Ops.ENDIF: self.closing[pos[u.src[0]]] = i
    self.accum = {st: a for st in self.prog if st.op is Ops.STORE and (a := register_update(st)) is not None}
    # the STACKs whose values are read (a vector's lanes, its address' offsets), not just shapes of buffers: only those run
    self.vectors = {s for u in self.prog if u.op not in (Ops.PARAM, Ops.BUFFER) for s in u.src if s.op is Ops.STACK}
    first_write: dict[UOp, int] = {}
    for i, u in enumerate(self.prog):
      if u.op is Ops.STORE: first_write.setdefault(buffer_of(u.src[0]), i)
    # a WMMA's lanes: the WARP range, or the lidx0 a GPU made of it; its loop runs whole, never in steps or chunks
    self.warp = next((k for u, k in self.axis.items() if (u.op is Ops.RANGE and u.axis_type is AxisType.WARP) or u.arg == "lidx0"), None)
    self.sequential = {i for i, u in enumerate(self.prog)
                       if u.op is Ops.RANGE and u.axis_type is not AxisType.WARP and self._dependent(i, first_write)}

  def _dependent(self, i: int, first_write: dict[UOp, int]) -> bool:
    """Whether the iterations of the RANGE at position i depend on each other (see the module docstring)."""
    rng, body = self.prog[i], self.prog[i + 1:self.closing[i]]
    stored = {buffer_of(u.src[0]) for u in body if u.op is Ops.STORE}
    for u in body:
      if u.op is Ops.LOAD and (b := buffer_of(u.src[0])) in stored and not is_register(b): return True
      if u.op is not Ops.STORE: continue
      base = buffer_of(u.src[0])
      if is_register(base):
        if first_write[base] < i and (u not in self.accum or _rounds_each_step(u, self.accum[u].op)): return True
      elif rng not in u.src[0].toposort(): return True
    return False

  def _lane(self, u: UOp, values: np.ndarray) -> np.ndarray:
    k = self.axis[u]
    return values.reshape((1,) * k + (-1,) + (1,) * (self.ndim - k - 1))

  def __call__(self, bufs: list[np.ndarray], vals: dict[str, int] | None = None) -> None:
    run = copy.copy(self)  # the state of one run (values, buffers, open axes) is its own: a program may run on several threads
    run.env, run.bufs, run.vals, run.open_axes = {}, bufs, vals or {}, {}
    run._run(0, len(self.prog), None)

  def _scalar(self, u: UOp) -> int: return int(np.asarray(self.env[u]).reshape(-1)[0])

  def _run(self, lo: int, hi: int, mask):
    env, prog, i = self.env, self.prog, lo
    while i < hi:
      u = prog[i]
      op = u.op
      if op is Ops.RANGE:
        end, n = self.closing[i], self._scalar(u.src[0])
        if i in self.sequential:
          for v in range(n): env[u] = np.full((1,) * self.ndim, v, np.int64); self._run(i + 1, end, mask)
        else:  # in chunks, so no value holds more than LANES elements: a big loop nest must not exhaust memory
          step = n if u.axis_type is AxisType.WARP else max(1, LANES // max(1, math.prod(self.open_axes.values())))
          for start in range(0, n, step):
            env[u] = self._lane(u, np.arange(start, min(n, start + step))); self.open_axes[self.axis[u]] = min(step, n - start)
            self._run(i + 1, end, mask)
          self.open_axes.pop(self.axis[u], None)
        i = end + 1; continue
      if op is Ops.IF:
        gate = env[u.src[0]]
        self._run(i + 1, self.closing[i], gate if mask is None else mask & gate)
        i = self.closing[i] + 1; continue
      if op is Ops.CONST: env[u] = np.full((1,) * self.ndim, u.arg[0], np_dtype(u.dtype))
      elif op is Ops.SPECIAL: env[u] = self._lane(u, np.arange(self._scalar(u.src[0])))
      elif op is Ops.PARAM:
        if isinstance(u.arg[0], str): env[u] = np.full((1,) * self.ndim, self.vals[u.arg[0]], np.int64)
        else: env[u] = (_GlobalBF16 if u.dtype.scalar() is dtypes.bfloat16 else _Global)(self.bufs[u.arg[0]], f"{self.name}: buffer {u.arg[0]}")
      elif op is Ops.BUFFER:
        size = u.shape[0] if u.shape else 1
        if u.arg[3] is AddrSpace.REG: env[u] = _Registers(size)
        else:
          groups = {self.axis[s]: self._scalar(s.src[0]) for s in self.axis if s.op is Ops.SPECIAL and s.arg.startswith("g")}
          env[u] = _Local(size, np_dtype(u.dtype), groups, self.ndim, f"{self.name}: local buffer {u.arg[0]}")
      elif op is Ops.INDEX and reads_lane(u): env[u] = env[u.src[0]][u.src[1].arg[0]]
      elif op is Ops.INDEX: env[u] = (env[buffer_of(u)], env[u.src[1]])
      elif op is Ops.AFTER: env[u] = env[u.src[0]]
      elif op is Ops.LOAD: env[u] = self._load(u, mask)
      elif op is Ops.STORE: self._store(u, mask)
      elif op is Ops.STACK and u in self.vectors: env[u] = np.stack(np.broadcast_arrays(*(env[s] for s in u.src)))
      elif op is Ops.STACK or op in _NOTHING: pass
      elif op in GroupOp.Elementwise: env[u] = run_alu(op, u.dtype, *(env[s] for s in u.src))
      elif op is Ops.BITCAST: env[u] = bitcast(env[u.src[0]], u.src[0].dtype, u.dtype)
      elif op is Ops.WMMA: env[u] = run_wmma(u.arg, *(env[s] for s in u.src), self.warp)
      else: raise NotImplementedError(f"{self.name}: the PYTHON device cannot run {op.name}")
      i += 1

  def _load(self, u: UOp, mask):
    mem, addr = self.env[u.src[0]]
    gate = self.env[u.src[2]] if len(u.src) == 3 else None
    if mask is not None: gate = mask if gate is None else gate & mask
    val = mem.load(addr, gate)
    return val if len(u.src) < 3 else np.where(gate, val, self.env[u.src[1]])

  def _store(self, u: UOp, mask):
    mem, addr = self.env[u.src[0]]
    gate = self.env[u.src[2]] if len(u.src) == 3 else None
    if mask is not None: gate = mask if gate is None else gate & mask
    if not isinstance(mem, _Registers): return mem.store(addr, self.env[u.src[1]], gate)
    slot = mem._slot(addr)
    if mem.lanes is None: mem.lanes = frozenset(self.open_axes) | {k for s, k in self.axis.items() if s.op is Ops.SPECIAL}
    if (acc := self.accum.get(u)) is not None and mem.vals[slot] is not None:
      rop, x = acc.op, acc.x
      x = self.env[x]
      ufunc = _REDUCE_UFUNC[rop]
      if gate is not None: x = np.where(gate, x, ufunc.identity if rop is not Ops.MAX else _lowest(x.dtype))
      # every open vectorised loop the register does not live in is summed over, also where x does not vary along it
      with np.errstate(all="ignore"):  # inf - inf is nan and a sum may overflow, as in run_alu: results, not warnings
        if axes := tuple(k for k in self.open_axes if k not in mem.lanes):
          full = tuple(self.open_axes[k] if k in axes else n for k, n in enumerate(x.shape))
          x = ufunc.reduce(np.broadcast_to(x, full), axis=axes, keepdims=True)
        mem.vals[slot] = held(ufunc(mem.vals[slot], x), u.src[1].dtype)
    else:
      val = self.env[u.src[1]]
      mem.vals[slot] = val if gate is None or mem.vals[slot] is None else np.where(gate, val, mem.vals[slot])

def _lowest(dt: np.dtype):
  if dt == np.bool_: return False
  return -np.inf if np.issubdtype(dt, np.floating) else np.iinfo(dt).min
