"""Seed 001's multi-device collectives, built from the primitives exactly as the seed writes them.

D = (d_0 .. d_{n-1}) is an n-tuple of devices. `broadcast` and `scatter` take T of shape (s,) on one device; the others take
T of shape (n*s,) on D sharded on axis 0 (device i holds elements [i*s, (i+1)*s)). COPY to an n-tuple device shards on
axis 0; REPLICATED on the shard axis turns the n pieces (one row each) into replicas."""
from __future__ import annotations

from tinyspec.tensor import Tensor
from tinyspec.uop.ops import Ops
from tinyspec.uop.uop import UOp


def _copy(t: Tensor, device) -> Tensor: return Tensor._from_uop(UOp(Ops.COPY, (t.uop,), device), device)
def _replicated(t: Tensor, axis: int) -> Tensor: return Tensor._from_uop(UOp(Ops.REPLICATED, (t.uop,), (axis,)), t.device)

def _sharded(t: Tensor) -> tuple[str, ...]:
  if not isinstance(t.device, tuple) or t.uop.axis != 0 or t.ndim != 1:
    raise ValueError(f"expected a 1-D tensor sharded on axis 0 over several devices, got shape {t.shape} on {t.device} (axis {t.uop.axis})")
  return t.device

def broadcast(t: Tensor, devices: tuple[str, ...]) -> Tensor:
  """T (s,) on one device -> (s,) replicated on every device of D."""
  s, n = t.shape[0], len(devices)
  return _replicated(_copy(t.reshape(1, s).expand(n, s), tuple(devices)), 0).reshape(s)

def scatter(t: Tensor, devices: tuple[str, ...]) -> Tensor:
  """T (n*s,) on one device -> sharded on D: device i gets chunk i."""
  return _copy(t, tuple(devices))

def gather(t: Tensor) -> Tensor:
  """Sharded T (n*s,) -> all of it on D[0]."""
  return _copy(t, _sharded(t)[0])

def reduce(t: Tensor) -> Tensor:
  """Sharded T (n*s,) -> the sum of the n chunks, (s,) on D[0]."""
  n = len(_sharded(t))
  return gather(t).reshape(n, t.shape[0] // n).sum(0)

def allgather(t: Tensor) -> Tensor:
  """Sharded T (n*s,) -> all of it, replicated on every device."""
  n, ns = len(_sharded(t)), t.shape[0]
  return _replicated(_copy(t.reshape(1, ns).expand(n, ns), t.device), 0).reshape(ns)

def reduce_scatter(t: Tensor) -> Tensor:
  """Sharded T (n*s,) -> (s,) sharded: device i holds chunk i of the sum of the n pieces."""
  n, s = len(_sharded(t)), t.shape[0] // len(t.device)
  if s % n: raise ValueError(f"reduce_scatter: each device's {s} elements do not split into {n} chunks")
  return _copy(t.reshape(n, n, s // n).permute(1, 0, 2), t.device).sum(1).reshape(s)

def allreduce(t: Tensor) -> Tensor:
  """Sharded T (n*s,) -> the sum of the n pieces, (s,) replicated on every device."""
  return allgather(reduce_scatter(t))
