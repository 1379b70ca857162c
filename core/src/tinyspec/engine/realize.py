"""Realize: turn Tensor graphs into buffers. TEMPORARY stand-in that evaluates the tensor graph directly with numpy;
the pipeline (callify ... memory plan) replaces the evaluation, the functions and their contracts stay."""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from tinyspec.dtype import DType
from tinyspec.interpreter.alu import np_dtype, run_alu
from tinyspec.uop.ops import GroupOp, Ops
from tinyspec.uop.properties import vec_values
from tinyspec.uop.uop import UOp

_slots = itertools.count()
_data: weakref.WeakKeyDictionary[UOp, np.ndarray] = weakref.WeakKeyDictionary()

def new_buffer(shape: tuple[int, ...], dtype: DType, device: str) -> UOp:
  """A fresh BUFFER UOp with storage (contents undefined until written)."""
  buf = UOp.buffer(tuple(shape), dtype, device, next(_slots))
  _data[buf] = np.empty(tuple(shape), np_dtype(dtype))
  return buf

def from_numpy(arr: np.ndarray, dtype: DType, device: str) -> UOp:
  """A new BUFFER UOp holding a copy of `arr` converted to `dtype`."""
  buf = new_buffer(arr.shape, dtype, device)
  _data[buf][...] = arr
  return buf

def to_numpy(buf: UOp) -> np.ndarray:
  """A copy of a BUFFER UOp's contents, shaped as the buffer."""
  return _data[buf].copy()

def realize(*uops: UOp) -> tuple[UOp, ...]:
  """Compute each tensor-graph UOp into a BUFFER UOp (a BUFFER is returned as it is)."""
  out = []
  for u in uops:
    if u.op is Ops.BUFFER: out.append(u); continue
    val = _eval(u)
    out.append(from_numpy(val, u.dtype, u.device))
  return tuple(out)

def _eval(root: UOp) -> np.ndarray:
  vals: dict[UOp, np.ndarray] = {}
  for u in root.toposort():
    if u.op is Ops.STACK and u.dtype.name == "index": continue
    s = [vals.get(x) for x in u.src]
    if u.op is Ops.BUFFER: v = _data[u]
    elif u.op is Ops.CONST: v = np.array(u.arg[0], np_dtype(u.dtype))
    elif u.op is Ops.RESHAPE: v = s[0].reshape(u.shape)
    elif u.op is Ops.EXPAND: v = np.broadcast_to(s[0], u.shape)
    elif u.op is Ops.PERMUTE: v = s[0].transpose(u.arg)
    elif u.op is Ops.FLIP: v = np.flip(s[0], tuple(i for i, f in enumerate(u.arg) if f))
    elif u.op is Ops.PAD:
      off = vec_values(u.src[1])
      v = np.pad(s[0], [(o, n - o - k) for o, k, n in zip(off, u.src[0].shape, u.shape)])
    elif u.op is Ops.SHRINK:
      off = vec_values(u.src[1])
      v = s[0][tuple(slice(o, o + n) for o, n in zip(off, u.shape))]
    elif u.op is Ops.REDUCE:
      f = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum}[u.arg[0]]
      v = f.reduce(s[0], axis=u.arg[1], keepdims=True).astype(s[0].dtype) if u.arg[1] else s[0]
    elif u.op in GroupOp.Marker or u.op is Ops.COPY: v = s[0]
    elif u.op in GroupOp.Elementwise or u.op is Ops.BITCAST:
      v = run_alu(u.op, u.dtype, *[np.broadcast_to(x, u.shape) for x in s])
    else: raise NotImplementedError(f"realize: {u.op.name}")
    vals[u] = np.asarray(v)
  return vals[root]
