"""Multi-device values: before callify, a graph over n-tuple devices becomes n single-device graphs, one per device.

A value on devices D = (d_0 .. d_{n-1}) with shard axis `a` (its derived `axis`) is held as n pieces: piece i is the i-th
of n equal chunks along `a`, on d_i. With axis None it is replicated: every d_i holds all of it. Per op:

  elementwise, CAST, markers   piece by piece (a replicated source is cut to the piece's chunk; one sharded on another
                               axis is first gathered)
  RESHAPE PERMUTE EXPAND       piece by piece, to the local shape (the `axis` rule already checked the shard boundary)
  FLIP on the axis             piece i is the flip of piece n-1-i, copied over
  PAD SHRINK on the axis       on the gathered whole, then cut to the new chunks
  REDUCE over the axis         each piece reduced, then the partial results summed on every device (an allreduce)
  REPLICATED on the axis       the pieces are already whole (the axis has size n): they become replicas
  COPY single -> D             scatter: chunk i of axis 0 copied to d_i
  COPY D -> single, D -> D'    gather: every piece copied to the target and concatenated; then scattered again for D'

Cross-device data moves only through COPY, so each piece's graph is an ordinary single-device graph for the pipeline.
A realized value on D is a BUFFER over D (axis 0), a PERMUTE of one (another axis), or a RESHAPE of a REPLICATED one
(axis None); `shards` says which single-device BUFFERs hold its pieces."""
from __future__ import annotations

import functools
import weakref

from tinyspec.dtype import dtypes
from tinyspec.uop.ops import GroupOp, Ops
from tinyspec.uop.uop import UOp

_pieces: weakref.WeakKeyDictionary[UOp, tuple[UOp, ...]] = weakref.WeakKeyDictionary()

def shards(buf: UOp) -> tuple[UOp, ...]:
  """The single-device BUFFERs holding the pieces of a BUFFER on an n-tuple device, in device order."""
  if (p := _pieces.get(buf)) is None: raise ValueError(f"BUFFER on {buf.device} holds no data: it was not made by realize or Tensor.shard")
  return p

def set_shards(buf: UOp, pieces: tuple[UOp, ...]) -> None:
  if len(pieces) != len(buf.device): raise ValueError(f"{len(pieces)} pieces for a buffer on {len(buf.device)} devices")
  _pieces[buf] = pieces

def is_multi(u: UOp) -> bool: return isinstance(u.device, tuple)

def local_shape(u: UOp) -> tuple[int, ...]:
  """The shape of one piece of u."""
  if (a := u.axis) is None: return u.shape
  n = len(u.device)
  if u.shape[a] % n: raise ValueError(f"{u.op.name}: axis {a} of shape {u.shape} does not split evenly over {n} devices {u.device}")
  return tuple(s // n if i == a else s for i, s in enumerate(u.shape))

def _chunk(full: UOp, axis: int, i: int, n: int) -> UOp:
  """Chunk i of n along `axis` of a whole value."""
  k = full.shape[axis] // n
  return full.shrink(tuple(i * k if d == axis else 0 for d in range(full.ndim)), tuple(k if d == axis else s for d, s in enumerate(full.shape)))

def _concat(parts: list[UOp], axis: int) -> UOp:
  """The parts joined along `axis` (equal shapes): each padded into place, then added (OR for bool)."""
  k, n = parts[0].shape[axis], len(parts)
  full = tuple(s * n if d == axis else s for d, s in enumerate(parts[0].shape))
  placed = [p.pad(tuple(i * k if d == axis else 0 for d in range(p.ndim)), full) for i, p in enumerate(parts)]
  return functools.reduce(lambda x, y: x | y if x.dtype is dtypes.bool else x + y, placed)

def replicate(uop: UOp, devices: tuple[str, ...]) -> UOp:
  """uop with a whole copy on each of `devices` (seed 001's broadcast: one row per device, COPY, REPLICATED)."""
  if is_multi(uop): uop = UOp(Ops.COPY, (uop,), uop.device[0])
  rows = uop.reshape((1, *uop.shape)).expand((len(devices), *uop.shape))
  return UOp(Ops.REPLICATED, (UOp(Ops.COPY, (rows,), devices),), (0,)).reshape(uop.shape)

def _copy(u: UOp, device: str) -> UOp: return u if u.device == device else UOp(Ops.COPY, (u,), device)


class _Splitter:
  """Maps every node of a graph to its pieces (a tuple, one per device) or, for single-device nodes, its new node."""
  def __init__(self): self.out: dict[UOp, UOp | tuple[UOp, ...]] = {}

  def whole_on(self, u: UOp, device: str) -> UOp:
    """All of multi-device value u, on `device`."""
    pieces = self.out[u]
    if u.axis is None: return _copy(pieces[u.device.index(device)] if device in u.device else pieces[0], device)
    return _concat([_copy(p, device) for p in pieces], u.axis)

  def piece(self, s: UOp, i: int, devices: tuple[str, ...], axis: int | None, shape: tuple[int, ...]) -> UOp:
    """Source s as seen by piece i of a node on `devices` with shard `axis` and whole `shape` (s broadcasts to it)."""
    s_axis = None if axis is None else axis - (len(shape) - s.ndim)  # the shard axis in s's own (right-aligned) axes
    def cut(v: UOp) -> UOp: return v if s_axis is None or s_axis < 0 or v.shape[s_axis] == 1 else _chunk(v, s_axis, i, len(devices))
    if not is_multi(s): return cut(self.out.get(s, s))  # a constant graph (no device): each piece takes its chunk
    if s.device != devices: raise ValueError(f"{s.op.name}: sources on {s.device} and {devices}; copy one with .to() first")
    return self.out[s][i] if s.axis == s_axis else cut(self.whole_on(s, devices[i]))

  def split(self, u: UOp) -> UOp | tuple[UOp, ...]:
    op, src = u.op, u.src
    if not is_multi(u):
      if op is Ops.COPY and is_multi(src[0]): return self.whole_on(src[0], u.arg)  # gather
      if bad := [s.device for s in src if is_multi(s)]: raise ValueError(f"{op.name}: mixes {u.device} with {bad[0]}; copy one with .to() first")
      return u.replace(src=tuple(self.out.get(s, s) for s in src))
    devs, n, a = u.device, len(u.device), u.axis
    if op is Ops.BUFFER: return shards(u)
    if op is Ops.COPY:
      whole = self.out.get(src[0], src[0]) if not is_multi(src[0]) else self.whole_on(src[0], devs[0])
      return tuple(_copy(_chunk(whole, 0, i, n), d) for i, d in enumerate(devs))  # scatter on axis 0
    s0 = src[0] if src else None
    if op in GroupOp.Elementwise or op in GroupOp.Marker or op in (Ops.CAST, Ops.BITCAST):
      return tuple(u.replace(src=tuple(self.piece(s, i, devs, a, u.shape) for s in src)) for i in range(n))
    loc = local_shape(u)
    if op is Ops.REDUCE:
      if s0.axis not in u.arg[1]: return tuple(p.reduce(*u.arg) for p in self.out[s0])
      partial = [p.reduce(*u.arg) for p in self.out[s0]]  # then every device adds up all partial results: an allreduce
      return tuple(functools.reduce(lambda x, y: UOp(u.arg[0], (x, y)), [_copy(p, d) for p in partial]) for d in devs)
    if op is Ops.REPLICATED:
      if s0.axis in u.arg and s0.shape[s0.axis] != n: raise ValueError(f"REPLICATED: axis {s0.axis} of {s0.shape} must have size {n}, one per device")
      return self.out[s0]
    if op in (Ops.RESHAPE, Ops.EXPAND): return tuple(p.reshape(loc) if op is Ops.RESHAPE else p.expand(loc) for p in self.out[s0])
    if op is Ops.PERMUTE: return tuple(p.permute(u.arg) for p in self.out[s0])
    if op is Ops.FLIP:
      if a is None or not u.arg[a]: return tuple(p.flip(tuple(i for i, f in enumerate(u.arg) if f)) for p in self.out[s0])
      return tuple(_copy(p, d).flip(tuple(i for i, f in enumerate(u.arg) if f)) for p, d in zip(reversed(self.out[s0]), devs))
    if op in (Ops.PAD, Ops.SHRINK):  # on the whole value, then cut to the new chunks
      whole = [u.replace(src=(self.whole_on(s0, d), *src[1:])) for d in devs]
      return tuple(w if a is None else _chunk(w, a, i, n) for i, w in enumerate(whole))
    raise NotImplementedError(f"multi-device: {op.name} on {devs} is not supported")


def split_devices(*uops: UOp) -> list[UOp | tuple[UOp, ...]]:
  """Each value as single-device graphs: a tuple of pieces for a value on an n-tuple device, else one new UOp."""
  sp = _Splitter()
  for u in UOp.sink(*uops).toposort():
    if u.op is Ops.SINK: continue
    if u.op is Ops.STACK and u.dtype is dtypes.index: continue  # a shape vector
    sp.out[u] = sp.split(u)
  return [sp.out[u] for u in uops]
