"""Data parallelism: every rank holds the whole model, trains on its own part of each batch, and after `backward()` the
gradients are averaged over the ranks, so every rank takes the same optimizer step.

    opt = Adam(get_parameters(model), lr=0.01)
    dp = DataParallel(opt)                 # rank 0's parameters copied to every rank
    for x, y in my_part_of_each_batch:
      opt.zero_grad()
      loss = loss_fn(model(x), y)
      loss.backward()
      mean_loss = dp.average_gradients(loss)   # the one call; returns the loss averaged over the ranks
      opt.step()

The gradients go in buckets: those of one dtype and device are laid end to end (`Tensor.cat`, computed by backward's own
kernels straight into the bucket) up to `bucket_mb` megabytes each, so a model of many small tensors sends a few large
messages, not one per tensor. The loss rides in the first bucket; bfloat16 gradients are summed in float32. Each bucket is
summed in place in its own memory (pre-divided by the number of ranks, so the sum is the mean), and every parameter's grad
becomes a view of its bucket."""
from __future__ import annotations

from typing import Any

from tinyspec.dtype import DType, dtypes
from tinyspec.engine.realize import buffer_of
from tinyspec.tensor import Tensor

from tinyspec_mpi.collectives import _host
from tinyspec_mpi.world import WORLD


class DataParallel:
  """Gradient averaging over the ranks for the parameters of a `tinyspec.nn.optim` optimizer (or any tensors)."""

  def __init__(self, params: Any, bucket_mb: float = 25.0, src: int = 0):
    """`params`: an optimizer (its `params`) or the tensors themselves. Rank `src`'s values are broadcast to every rank now,
    so all ranks start from the same model whatever their seeds."""
    WORLD.require("DataParallel")
    tensors = list(params.params if hasattr(params, "params") else params)
    if not tensors or not all(isinstance(p, Tensor) for p in tensors):
      raise TypeError(f"DataParallel: expected an optimizer or a list of Tensors, got {type(params).__name__}")
    if not bucket_mb > 0: raise ValueError(f"DataParallel: bucket_mb must be positive, got {bucket_mb!r}")
    self.params, self.bucket_bytes = tensors, int(bucket_mb * 2**20)
    Tensor.realize(*self.params)
    if WORLD.size == 1: return
    requests = [WORLD.comm.Ibcast(_writable(p, "DataParallel"), root=src) for p in self.params]
    for r in requests: WORLD.wait(r, "DataParallel: broadcast of the parameters")

  def _buckets(self, grads: list[tuple[Tensor, Tensor]]) -> list[list[tuple[Tensor, Tensor]]]:
    """The (parameter, gradient) pairs grouped by dtype and device, in order, each group cut into buckets of at most
    bucket_bytes (a single larger gradient gets a bucket of its own)."""
    groups: dict[tuple, list[tuple[Tensor, Tensor]]] = {}
    for p, g in grads: groups.setdefault((_wire_dtype(g.dtype), g.device), []).append((p, g))
    buckets: list[list[tuple[Tensor, Tensor]]] = []
    for group in groups.values():
      size = self.bucket_bytes
      for p, g in group:
        nbytes = g.numel() * g.dtype.itemsize
        if size + nbytes > self.bucket_bytes: buckets.append([]); size = 0
        buckets[-1].append((p, g)); size += nbytes
    return buckets

  def average_gradients(self, loss: Tensor | None = None) -> float | None:
    """Replace every parameter's grad by its mean over the ranks (parameters without one are left alone on every rank:
    the ranks must agree on which have one). `loss` (a scalar) is computed in the same schedule as the gradients and
    averaged with them; its mean is returned. Call it after `backward()`, before the optimizer's step."""
    comm = WORLD.require("average_gradients")
    if loss is not None and (loss.numel() != 1 or not dtypes.is_float(loss.dtype)):
      raise ValueError(f"average_gradients: loss must be one float value, got shape {loss.shape} {loss.dtype.name}")
    grads = [(p, p.grad) for p in self.params if p.grad is not None]
    for p, g in grads:
      if g.shape != p.shape: raise ValueError(f"average_gradients: a gradient of shape {g.shape} for a parameter of shape {p.shape}")
    buckets = self._buckets(grads)
    scale = 1 / WORLD.size
    # each gradient is computed into its own buffer first: fused into the bucket's kernel, backward would be redone per element
    flat = [Tensor.cat(*(g.contiguous().flatten().cast(_wire_dtype(g.dtype)) for _, g in b)) * scale for b in buckets]
    if loss is not None:
      lead = loss.reshape(1).cast(flat[0].dtype).to(flat[0].device) * scale if flat else loss.reshape(1) * scale
      flat = [lead.cat(flat[0]), *flat[1:]] if flat else [lead]
    # the loss itself is realized too: left lazy, the optimizer's step would compute it again (it reads the old parameters)
    Tensor.realize(*([loss] if loss is not None else []), *flat)
    memory = [_writable(b, "average_gradients") for b in flat]
    if WORLD.size > 1:
      requests = [comm.Iallreduce(WORLD.MPI.IN_PLACE, m, op=WORLD.MPI.SUM) for m in memory]
      for r in requests: WORLD.wait(r, "average_gradients")
    offset = 1 if loss is not None else 0
    for bucket, b in zip(buckets, flat):
      for p, g in bucket:
        p.grad = b[offset:offset + g.numel()].reshape(g.shape).cast(g.dtype)
        offset += g.numel()
      offset = 0
    return float(memory[0][0]) if loss is not None else None


def _wire_dtype(dt: DType) -> DType:
  """The dtype a gradient is summed in: its own, but float32 for bfloat16, which MPI cannot add."""
  return dtypes.float32 if dt is dtypes.bfloat16 else dt

def _writable(t: Tensor, op: str) -> Any:
  """The host memory of realized tensor t for MPI to write in place: its own buffer (host memory only)."""
  buf = buffer_of(t.uop)
  if not buf.allocator.supports_as_numpy:
    raise NotImplementedError(f"{op}: device {t.device}'s memory is not host memory; in-place transfers need CUDA-aware MPI (docs/scaling.md)")
  return _host(buf)

