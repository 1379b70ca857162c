"""Collectives and point-to-point transfers between ranks, on Tensors.

Each operation takes a Tensor that may be any lazy graph on one device. It realizes it (one schedule, fused with whatever
produced it), hands the buffer's memory to MPI and returns a Tensor on the same device backed by the result's buffer, so
what follows composes with it as with any realized value. Where the device's memory is host memory (CPU, PYTHON) MPI
reads and writes the device buffers themselves (`Buffer.as_numpy`: no copy); elsewhere the data goes through one host
copy each way. Operations run when called, in program order, as MPI requires every rank to call them in the same order;
they are not differentiated through.

bfloat16, which MPI lacks, is reduced in float32 (exact for max and min; sums rounded once at the end)."""
from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np
from tinyspec.device import Device
from tinyspec.device.memory import Buffer, buffer_np_dtype
from tinyspec.dtype import DType, dtypes, to_dtype
from tinyspec.engine.realize import buffer_of, buffer_uop, is_realized
from tinyspec.tensor import Tensor
from tinyspec.uop.ops import Ops

from tinyspec_mpi.world import WORLD

REDUCE_OPS = ("sum", "max", "min", "mean")
_MAX_NDIM = 16
_DESCRIPTION_BYTES = 256  # what _agree exchanges: a tensor's dtype, shape and the call's details, as text


def _check_tensor(op: str, t: Any) -> Tensor:
  if not isinstance(t, Tensor): raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}")
  if isinstance(t.device, tuple): raise ValueError(f"{op}: the tensor is spread over devices {t.device}; gather it on one first (.to(device))")
  if not all(type(s) is int for s in t.shape): raise ValueError(f"{op}: symbolic shape {t.shape} is not supported; bind its variables first")
  return t

def _input_buffer(t: Tensor) -> tuple[Tensor, Buffer, bool]:
  """t realized (as a Tensor of its own: the caller's t stays as it was), its buffer, and whether this call owns that
  buffer (realized from a lazy graph just now, so nothing else sees it and MPI may write into it)."""
  if t.uop.op is Ops.BUFFER: return t, buffer_of(t.uop), False
  if is_realized(t.uop): t = t.contiguous()  # a view of a buffer (a slice, a transpose): laid out afresh
  value = Tensor._from_uop(t.uop, t.device).realize()
  return value, buffer_of(value.uop), not any(u is value.uop for u in t.uop.toposort() if u.op is Ops.BUFFER)

_host_memory: weakref.WeakKeyDictionary[Buffer, np.ndarray] = weakref.WeakKeyDictionary()

def _host(buf: Buffer) -> np.ndarray:
  """The buffer's contents as a flat numpy array: its own memory where the host can address it (kept per buffer: looking it
  up again costs more than a small exchange), else a copy."""
  if (memory := _host_memory.get(buf)) is not None: return memory
  if not buf.allocator.supports_as_numpy: return buf.numpy()
  memory = _host_memory[buf] = buf.as_numpy()
  return memory

def _new_output(device: str, size: int, dtype: DType) -> tuple[Buffer, np.ndarray]:
  """A fresh device buffer and the host array MPI writes; `_land` puts that array into the buffer when it is a copy."""
  buf = Buffer(device, size, dtype).allocate()
  return buf, buf.as_numpy() if buf.allocator.supports_as_numpy else np.empty(size, buffer_np_dtype(dtype))

def _land(buf: Buffer, host: np.ndarray, shape: tuple[int, ...], device: str) -> Tensor:
  if not buf.allocator.supports_as_numpy: buf.copyin(host)
  return Tensor._from_uop(buffer_uop(shape, buf), device)

def _mpi_op(op: str, reduce: str, dtype: DType) -> Any:
  MPI = WORLD.MPI
  if reduce not in REDUCE_OPS: raise ValueError(f"{op}: op must be one of {', '.join(map(repr, REDUCE_OPS))}, got {reduce!r}")
  if dtype is dtypes.bool:
    if reduce == "mean": raise TypeError(f"{op}: op 'mean' needs a number dtype, got bool")
    return MPI.LAND if reduce == "min" else MPI.LOR  # any (sum, max) and all (min)
  if reduce == "mean" and not dtypes.is_float(dtype): raise TypeError(f"{op}: op 'mean' needs a float dtype, got {dtype.name}; cast first")
  return {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[reduce]

def _agree(op: str, t: Tensor, detail: str) -> None:
  """With checking on (init(check=True), TINYSPEC_MPI_CHECK=1): every rank must pass the same dtype, shape and `detail`
  (the op, the source rank), else all raise, naming what each passed. Off by default: it is one more exchange per call."""
  if not WORLD.check: return
  text = f"{t.dtype.name} {t.shape} {detail}".encode()
  if len(text) > _DESCRIPTION_BYTES: raise ValueError(f"{op}: shape {t.shape} is too long to check across ranks")
  mine = np.zeros(_DESCRIPTION_BYTES, np.uint8)
  mine[:len(text)] = np.frombuffer(text, np.uint8)
  everyone = np.empty((WORLD.size, _DESCRIPTION_BYTES), np.uint8)
  WORLD.wait(WORLD.comm.Iallgather(mine, everyone), op)  # nonblocking like every call, so a dead rank cannot hang the check
  if (everyone != mine).any():
    passed = "; ".join(f"rank {r}: {bytes(e).rstrip(bytes(1)).decode()}" for r, e in enumerate(everyone))
    raise WORLD.fail(op, f"the ranks passed different tensors ({passed})")

def _reduced(op: str, t: Tensor, reduce: str) -> tuple[Tensor, DType, Any]:
  """t as MPI reduces it (bfloat16 widened to float32), the dtype the result goes back to, and MPI's reduction op."""
  _check_tensor(op, t)
  mpi_op = _mpi_op(op, reduce, t.dtype)
  return (t.float(), t.dtype, mpi_op) if t.dtype is dtypes.bfloat16 else (t, t.dtype, mpi_op)

def _finish(out: Tensor, reduce: str, dtype: DType) -> Tensor:
  if reduce == "mean": out = out / WORLD.size
  return out.cast(dtype) if out.dtype is not dtype else out


def all_reduce(t: Tensor, op: str = "sum", out: Tensor | None = None) -> Tensor:
  """The elementwise sum (or max, min, mean) of t over every rank, on every rank; t has the same shape and dtype on all.
  `out`: a realized tensor of t's shape and dtype in host memory to write the result into and return (t itself: in place),
  so nothing is allocated; graphs over `out` not realized yet then read the result, as after an in-place op."""
  comm = WORLD.require("all_reduce")
  x, dtype, mpi_op = _reduced("all_reduce", t, op)
  if out is not None: _check_out("all_reduce", out, x)
  _agree("all_reduce", t, f"op {op}")
  value, src, owned = _input_buffer(x)
  MPI = WORLD.MPI
  if out is not None:
    target = _host(buffer_of(out.uop))
    source = MPI.IN_PLACE if out.uop is value.uop else _host(src)
    WORLD.wait(comm.Iallreduce(source, target, op=mpi_op), "all_reduce")
    if op == "mean": np.divide(target, WORLD.size, out=target)
    return out
  if owned and src.allocator.supports_as_numpy:  # a buffer only this call sees: reduced in place, nothing allocated
    WORLD.wait(comm.Iallreduce(MPI.IN_PLACE, _host(src), op=mpi_op), "all_reduce")
    return _finish(value, op, dtype)
  result, host = _new_output(x.device, src.size, x.dtype)
  WORLD.wait(comm.Iallreduce(_host(src), host, op=mpi_op), "all_reduce")
  return _finish(_land(result, host, x.shape, x.device), op, dtype)

def _check_out(op: str, out: Any, x: Tensor) -> None:
  if not isinstance(out, Tensor): raise TypeError(f"{op}: out must be a Tensor, got {type(out).__name__}")
  if out.dtype is dtypes.bfloat16: raise TypeError(f"{op}: out cannot be bfloat16, which is reduced in float32; leave out=None")
  if out.shape != x.shape or out.dtype is not x.dtype or out.device != x.device:
    raise ValueError(f"{op}: out is {out.dtype.name} {out.shape} on {out.device}, the result is {x.dtype.name} {x.shape} on {x.device}")
  if out.uop.op is not Ops.BUFFER:
    raise ValueError(f"{op}: out must be a realized tensor, not a view or a lazy graph (its graph is {out.uop.op.name}); realize() it first")
  if buffer_of(out.uop) not in _host_memory and not buffer_of(out.uop).allocator.supports_as_numpy:
    raise ValueError(f"{op}: out on {out.device} is not in host memory; leave out=None there")

def reduce_scatter(t: Tensor, op: str = "sum") -> Tensor:
  """t, of shape (world_size * s, ...) on every rank, reduced elementwise over the ranks; rank i gets rows [i*s, (i+1)*s)."""
  comm, n = WORLD.require("reduce_scatter"), WORLD.size
  x, dtype, mpi_op = _reduced("reduce_scatter", t, op)
  if x.ndim == 0 or x.shape[0] % n:
    raise ValueError(f"reduce_scatter: axis 0 of shape {x.shape} must split into {n} equal parts, one per rank")
  _agree("reduce_scatter", t, f"op {op}")
  _, src, _ = _input_buffer(x)
  shape = (x.shape[0] // n, *x.shape[1:])
  out, host = _new_output(x.device, math.prod(shape), x.dtype)
  WORLD.wait(comm.Ireduce_scatter_block(_host(src), host, op=mpi_op), "reduce_scatter")
  return _finish(_land(out, host, shape, x.device), op, dtype)

def broadcast(t: Tensor, src: int = 0) -> Tensor:
  """Rank `src`'s t on every rank. The other ranks' t only gives the shape and dtype (it is not computed); on `src` the
  result is t's own buffer."""
  comm = WORLD.require("broadcast")
  _check_tensor("broadcast", t)
  _check_rank("broadcast", "src", src)
  _agree("broadcast", t, f"from rank {src}")
  if WORLD.rank == src:
    value, buf, _ = _input_buffer(t)
    WORLD.wait(comm.Ibcast(_host(buf), root=src), "broadcast")
    return Tensor._from_uop(value.uop, t.device)  # t's buffer, in a Tensor of its own
  out, host = _new_output(t.device, math.prod(t.shape), t.dtype)
  WORLD.wait(comm.Ibcast(host, root=src), "broadcast")
  return _land(out, host, t.shape, t.device)

def all_gather(t: Tensor) -> Tensor:
  """Every rank's t concatenated on axis 0, in rank order, on every rank. The ranks may pass different lengths on axis 0
  (zero too); the other axes and the dtype must agree, else every rank raises naming what each passed."""
  comm = WORLD.require("all_gather")
  _check_tensor("all_gather", t)
  if t.ndim == 0: raise ValueError("all_gather: a 0-d tensor has no axis 0 to concatenate on; reshape(1) it")
  if t.ndim > _MAX_NDIM: raise ValueError(f"all_gather: at most {_MAX_NDIM} dimensions, got shape {t.shape}")
  # one small exchange first: each rank's row count, with its dtype and other axes (padded with -1) to check they agree
  mine = np.array([t.shape[0], _dtype_code(t.dtype), *t.shape[1:], *[-1] * (_MAX_NDIM - t.ndim)], np.int64)
  everyone = np.empty((WORLD.size, mine.size), np.int64)
  WORLD.wait(comm.Iallgather(mine, everyone), "all_gather")
  if (everyone[:, 1:] != mine[1:]).any():
    passed = "; ".join(f"rank {r}: {_DTYPE_NAMES[int(e[1])]} of shape (n, {', '.join(str(int(s)) for s in e[2:] if s >= 0)})"
                       for r, e in enumerate(everyone))
    raise WORLD.fail("all_gather", f"the axes after the first and the dtype must agree ({passed})")
  counts = everyone[:, 0] * math.prod(t.shape[1:])
  _, src, _ = _input_buffer(t)
  out, host = _new_output(t.device, int(counts.sum()), t.dtype)
  displacements = np.concatenate([[0], np.cumsum(counts)[:-1]])
  WORLD.wait(comm.Iallgatherv(_host(src), [host, counts, displacements, _mpi_type(t.dtype)]), "all_gather")
  return _land(out, host, (int(everyone[:, 0].sum()), *t.shape[1:]), t.device)

def send(t: Tensor, dst: int, tag: int = 0) -> None:
  """Send t to rank `dst`, which receives it with `recv(src=this rank, shape=t.shape, dtype=t.dtype)`. Returns once t's
  buffer may be reused (MPI may still hold the data in flight)."""
  comm = WORLD.require("send")
  _check_tensor("send", t)
  _check_rank("send", "dst", dst)
  _, buf, _ = _input_buffer(t)
  WORLD.wait(comm.Isend(_host(buf), dest=dst, tag=tag), f"send to rank {dst}")

def recv(src: int, shape: tuple[int, ...] | int, dtype: DType | str = dtypes.float32, device: str | None = None, tag: int = 0) -> Tensor:
  """A tensor of `shape` and `dtype` sent by rank `src` with `send`, on `device` (default: the default device)."""
  comm = WORLD.require("recv")
  _check_rank("recv", "src", src)
  shape, dtype = ((shape,) if isinstance(shape, int) else tuple(shape)), to_dtype(dtype)
  if not all(type(s) is int and s >= 0 for s in shape): raise ValueError(f"recv: shape must be non-negative ints, got {shape}")
  device = Device.DEFAULT if device is None else Device.canonicalize(device)
  out, host = _new_output(device, math.prod(shape), dtype)
  status = WORLD.wait(comm.Irecv([host, _mpi_type(dtype)], source=src, tag=tag), f"recv from rank {src}", with_status=True)
  if (got := status.Get_count(_mpi_type(dtype))) != host.size:
    raise WORLD.fail("recv", f"expected {host.size} elements of {dtype.name} (shape {shape}) from rank {src}, got {got}")
  return _land(out, host, shape, device)


def _check_rank(op: str, name: str, r: int) -> None:
  if type(r) is not int or not 0 <= r < WORLD.size: raise ValueError(f"{op}: {name} must be a rank in [0, {WORLD.size}), got {r!r}")

_DTYPE_NAMES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64"]
def _dtype_code(dt: DType) -> int:
  if dt.name not in _DTYPE_NAMES: raise TypeError(f"dtype {dt.name} cannot be sent between ranks")
  return _DTYPE_NAMES.index(dt.name)

def _mpi_type(dt: DType) -> Any:
  """The MPI datatype of dt's storage (bfloat16 moves as its 16 bits)."""
  return WORLD.MPI.Datatype.fromcode(buffer_np_dtype(dt).char)
