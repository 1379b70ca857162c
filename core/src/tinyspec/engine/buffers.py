"""The realized values' memory: a BUFFER UOp stands for a device `Buffer`, looked up here by the UOp (held weakly, so a
buffer is freed with the last UOp naming it)."""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from tinyspec.device.memory import Buffer, buffer_np_dtype
from tinyspec.dtype import DType
from tinyspec.engine.rangeify import buffer_size
from tinyspec.uop.ops import Ops
from tinyspec.uop.uop import UOp

_slots = itertools.count()
_buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()

def buffer_uop(shape: tuple[int, ...], buf: Buffer) -> UOp:
  """A new BUFFER UOp of `shape` backed by `buf`."""
  u = UOp.buffer(tuple(shape), buf.dtype, buf.device, next(_slots))
  _buffers[u] = buf
  return u

def buffer_of(u: UOp) -> Buffer:
  """The device Buffer behind a BUFFER UOp."""
  return _buffers[u]

def new_buffer(shape: tuple, dtype: DType, device: str) -> UOp:
  """A fresh BUFFER UOp with storage (contents undefined until written); a symbolic shape gets room for its largest value."""
  return buffer_uop(shape, Buffer(device, buffer_size(shape), dtype).allocate())

def from_numpy(arr: np.ndarray, dtype: DType, device: str) -> UOp:
  """A new BUFFER UOp holding a copy of `arr` converted to `dtype`."""
  arr = np.asarray(arr)
  return buffer_uop(arr.shape, Buffer(device, arr.size, dtype).copyin(np.ascontiguousarray(arr, buffer_np_dtype(dtype))))

_realized_views: weakref.WeakSet[UOp] = weakref.WeakSet()

def is_realized(u: UOp) -> bool:
  """A BUFFER, or the form realize gives a value on several devices (a view of a BUFFER over them)."""
  return u.op is Ops.BUFFER or u in _realized_views
