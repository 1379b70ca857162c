"""Tensor: a lazy n-dimensional array. Its value is `uop`, a tensor graph of seed 001's ops; `realize()` computes it into a
BUFFER on the tensor's device. Nothing runs before that: every op below only builds UOps.

Making Tensors from UOps (the mixin modules beside this one must not import it; they reach Tensor through `type(self)`):
  Tensor._from_uop(uop, device=None)  wraps a tensor-graph UOp as it is, no copy. A graph of constants only has no device
                                      (CONST carries none), so the Tensor keeps `device` for it (default Device.DEFAULT).
  t._new(uop)                         the same with t's device as that fallback: what every op on t uses.

The graphs keep to the pipeline's form: elementwise sources have one shape (made explicit with RESHAPE + EXPAND) and one
dtype (made explicit with CAST); constants are CONSTs of shape () broadcast the same way; only `.contiguous()` inserts
CONTIGUOUS and nothing realizes inside an op.

Dtypes follow PyTorch's promotion with tinyspec's defaults (float32, int32): Python scalars are "weak" and only lift the
category (bool < int < float), so `int8_tensor + 1` stays int8 and `int_tensor * 2.5` is float32. 0-d tensors are not
weak (PyTorch treats them like scalars; here they promote like any tensor). `sum` and `prod` of bool and integer
tensors give int64 as PyTorch does (uint64 stays uint64); float16 sums accumulate in float32.
"""
from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tinyspec.device import Device
from tinyspec.dtype import DType, dtypes, least_upper_dtype, promoted_dtype, scalar_dtype, to_dtype
from tinyspec.engine import multi
from tinyspec.engine import realize as engine
from tinyspec.engine import transcendental as T
from tinyspec.gradient import compute_gradient, grad_path
from tinyspec.tensor.indexing import IndexingMixin
from tinyspec.tensor.inplace import InPlaceMixin
from tinyspec.tensor.linalg import LinalgMixin
from tinyspec.tensor.losses import LossMixin
from tinyspec.tensor.movement import (
  MovementMixin,
  broadcast_const,
  broadcast_shape,
  check_bytes,
  iota,
  movement_base,
  no_negative_sizes,
  resolve_dim,
  shape_arg,
  torch_keywords,
)
from tinyspec.tensor.nn import NNMixin
from tinyspec.tensor.pointwise import PointwiseMixin
from tinyspec.tensor.random import RandomMixin
from tinyspec.tensor.reduce import ReduceMixin, torch_max_forms
from tinyspec.tensor.sorting import SortMixin
from tinyspec.tensor.torch_names import TorchNamesMixin
from tinyspec.uop.ops import GroupOp, Ops
from tinyspec.uop.properties import sint_is
from tinyspec.uop.uop import UOp

Scalar = bool | int | float
_NP_SCALAR = (np.bool_, np.integer, np.floating)
_INT32 = (-2 ** 31, 2 ** 31 - 1)
class _LiveSet:
  """Live Tensors, held weakly and told apart by identity (a WeakSet compares its members with ==, elementwise here)."""
  def __init__(self): self._refs: dict[int, weakref.ref] = {}
  def add(self, t: Tensor):
    k = id(t)
    self._refs[k] = weakref.ref(t, lambda _: self._refs.pop(k, None))
  def discard(self, t: Tensor): self._refs.pop(id(t), None)
  def __iter__(self) -> Iterator[Tensor]: return (t for r in list(self._refs.values()) if (t := r()) is not None)
  def __bool__(self) -> bool: return bool(self._refs)

_grad_tensors = _LiveSet()  # live tensors with requires_grad=True: backward's leaves
# live float leaves (made by a constructor: Tensor(...), rand, randn...) with requires_grad left None, that own their value
# (a BUFFER: not a hash-consed constant, which other constants would share): backward's leaves when it reaches no tensor
# with requires_grad=True, as tinygrad gives such leaves gradients
_unset_leaves = _LiveSet()
# every live Tensor, for assign: before a write lands, the lazy tensors reading the old contents are computed with it
_all_tensors = _LiveSet()
_assigned: weakref.WeakKeyDictionary[UOp, None] = weakref.WeakKeyDictionary()  # BUFFERs with an assign not yet realized
# AFTERs whose write has run -> their BUFFER: a graph built before the write landed (x = t + 1 with t's assign pending)
# reads the buffer, and must not run that write again
_landed: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
# a realized BUFFER -> the graph it was computed from, where that graph reaches a tensor that needs gradients: backward
# puts the graph back wherever the buffer is read (y.numpy(); y.sum().backward() still reaches y's leaves)
_forward_of: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()

def _old_readers(todo: list[Tensor]) -> list[Tensor]:
  """The live lazy tensors (not in `todo`) whose value reads a buffer with a pending assign directly, not through that
  assign's AFTER: realized together with the assign, so they see the contents from before the write (as PyTorch would,
  having computed them already). One walk over all their graphs, each node visited once."""
  reads: dict[UOp, bool] = {}
  def reads_old(root: UOp) -> bool:
    stack = [root]
    while stack:
      u = stack[-1]
      if u in reads: stack.pop(); continue
      if u.op is Ops.AFTER or u.op is Ops.BUFFER: reads[stack.pop()] = u in _assigned; continue
      if missing := [s for s in u.src if s not in reads]: stack.extend(missing); continue
      reads[stack.pop()] = any(reads[s] for s in u.src)
    return reads[root]
  def view_of_buffer(u: UOp) -> bool:  # a view (a slice, a reshape) sees the new contents, as a PyTorch view would
    while u.op in GroupOp.Movement: u = u.src[0]
    return u.op is Ops.BUFFER
  skip = {id(t) for t in todo}
  return [t for t in _all_tensors if id(t) not in skip and t.uop.op is not Ops.BUFFER and not isinstance(t.device, tuple)
          and not view_of_buffer(t.uop) and reads_old(t.uop)]


def _canon(device: str | tuple[str, ...]) -> str | tuple[str, ...]:
  """A device name, or an n-tuple of them for a value spread over several devices, in canonical form."""
  if isinstance(device, (tuple, list)):
    if len(device) < 1: raise ValueError("a multi-device tuple needs at least one device")
    return tuple(Device.canonicalize(d) for d in device)
  return Device.canonicalize(device)
def _dev(device: str | tuple[str, ...] | None) -> str | tuple[str, ...]: return Device.DEFAULT if device is None else _canon(device)

def _scalar(x: Any) -> Scalar | None:
  """x as a Python scalar if it is one (numpy scalars included), else None."""
  if type(x) in (bool, int, float): return x
  return x.item() if isinstance(x, _NP_SCALAR) else None

def _scalar_in_float32(x: Tensor, y: Any) -> bool:
  """Whether `x * y`, `x / y`, `x // y` or a truncating division is computed in float32 and rounded once, as PyTorch's
  "opmath" does for a float16 or bfloat16 x and a Python scalar y: x * 1e5 and x / 1e5 never see 1e5 rounded to inf or
  1e-5 to 0 first. (PyTorch's + and - do round the scalar to x's dtype, and so do these.)"""
  return x.dtype in (dtypes.float16, dtypes.bfloat16) and not isinstance(y, Tensor) and _scalar(y) is not None

def _to_numpy(data: Any, dtype: DType | None) -> np.ndarray:
  """Nested lists, tuples and numpy data as an array of `dtype`, or of the dtype PyTorch would infer (with tinyspec's defaults)."""
  if isinstance(data, (list, tuple)):
    try: arr = np.array(data)
    except ValueError as e: raise ValueError(f"Tensor: ragged nested sequence: every list at one depth needs the same length ({e})") from None
    if arr.dtype == object and all(type(v) is int for v in arr.flat):  # numpy falls back to objects past uint64
      raise OverflowError(f"Tensor: the integers in [{min(arr.flat)}, {max(arr.flat)}] fit no tinyspec dtype (int64 and uint64 are the widest)")
    if arr.dtype.kind == "f" or arr.size == 0: infer = dtypes.default_float
    elif arr.dtype.kind == "b": infer = dtypes.bool
    elif arr.dtype.kind in "iu":
      # past the default int's range, the dtype of the widest value (int64, as PyTorch; uint64 past that)
      infer = least_upper_dtype(dtypes.from_py(int(arr.min())), dtypes.from_py(int(arr.max())))
    else: infer = None
  elif isinstance(data, (np.ndarray, np.generic)): arr, infer = np.asarray(data), None
  else: raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__}; pass a number, a nested list, a numpy array, a Tensor or a UOp")
  if arr.dtype.kind not in "biuf": raise TypeError(f"Tensor: data of numpy dtype {arr.dtype} holds no numbers tinyspec knows (bool, int, float)")
  dt = dtype or infer or dtypes.from_np(arr.dtype)
  if dt.np is None: raise NotImplementedError(f"Tensor: {dt} data cannot be built from numpy yet")
  with np.errstate(all="ignore"): return arr.astype(dt.np)


def _moved(uop: UOp, device: str | tuple[str, ...]) -> UOp:
  """uop on `device`: a COPY, or for a tuple of devices a whole replica on each."""
  return multi.replicate(uop, device) if isinstance(device, tuple) else UOp(Ops.COPY, (uop,), device)


class Tensor(MovementMixin, IndexingMixin, InPlaceMixin, ReduceMixin, SortMixin, PointwiseMixin, NNMixin, LinalgMixin, LossMixin, RandomMixin,
             TorchNamesMixin):
  """A lazy n-dimensional array on a device. `Tensor(data, device=None, dtype=None)` takes a Python number, nested
  lists, a numpy array (its dtype kept), another Tensor or a UOp."""
  __hash__ = object.__hash__  # == is elementwise, so a Tensor hashes by identity
  __array_ufunc__ = None      # numpy defers to the reflected operators: np.float32(2) * t is a Tensor
  uop: UOp
  grad: Tensor | None
  _requires_grad: bool | None = None
  training: bool = False  # train/eval mode, read by nn layers (BatchNorm); set it for a block with Tensor.train()

  class train(contextlib.ContextDecorator):
    """`with Tensor.train():` (or as a decorator) runs a block with Tensor.training set, restoring it after; train(False) is eval."""
    def __init__(self, mode: bool = True): self.mode = mode
    def __enter__(self): self.prev, Tensor.training = Tensor.training, self.mode
    def __exit__(self, *exc): Tensor.training = self.prev

  def __init__(self, data: Any, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None):
    dt = None if dtype is None else to_dtype(dtype)
    if device is not None: self._device = _canon(device)
    elif isinstance(data, (Tensor, UOp)) and data.device is not None: self._device = data.device
    else: self._device = Device.DEFAULT
    if isinstance(data, Tensor): uop = data.uop
    elif isinstance(data, UOp): uop = data
    elif type(data) in (bool, int, float):  # a Python number is a CONST (numpy scalars keep their dtype: they take the array path)
      uop, dt = UOp.const(data, dt or dtypes.from_py(data)), None
    else:
      arr = _to_numpy(data, dt)
      home = self._device[0] if isinstance(self._device, tuple) else self._device  # data for several devices starts on the first
      uop, dt = engine.from_numpy(arr, dt or dtypes.from_np(arr.dtype), home), None
    if dt is not None: uop = uop.cast(dt)
    if device is not None and uop.device is not None and uop.device != self._device: uop = _moved(uop, self._device)
    self.uop, self.requires_grad, self.grad = uop, requires_grad, None
    _all_tensors.add(self)

  @classmethod
  def _from_uop(cls, uop: UOp, device: str | None = None) -> Tensor:
    """A Tensor whose value is `uop`, without a copy. `device` is where a constant-only graph (which has no device) lives."""
    t = cls.__new__(cls)
    t.uop, t.grad = uop, None  # requires_grad stays unset (the class's None) without the setter: not a leaf
    t._device = device if device is not None else uop.device if uop.device is not None else Device.DEFAULT
    _all_tensors.add(t)
    return t
  def _new(self, uop: UOp) -> Tensor: return type(self)._from_uop(uop, self.device)

  # ---- properties ----
  @property
  def device(self) -> str:
    """The device the value lives on (a tuple of devices for a sharded value)."""
    return d if (d := self.uop.device) is not None else self._device
  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def ndim(self) -> int: return len(self.uop.shape)
  def numel(self) -> int: return math.prod(self.shape)
  def size(self, dim: int | None = None) -> tuple[int, ...] | int:
    """The shape, or the size of one dimension."""
    return self.shape if dim is None else self.shape[resolve_dim(dim, self.ndim)]
  def element_size(self) -> int: return self.dtype.itemsize
  @property
  def nbytes(self) -> int: return self.numel() * self.dtype.itemsize  # a property, as PyTorch's (tinygrad's is a method)
  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)
  def __repr__(self) -> str:
    return f"<Tensor shape={self.shape} dtype={self.dtype!r} device={self.device!r} {'realized' if self.uop.op is Ops.BUFFER else 'lazy'}>"

  # ---- realizing and reading ----
  def realize(self, *others: Tensor) -> Tensor:
    """Compute this tensor (and `others`, scheduled together) into buffers; afterwards each one's `uop` is its BUFFER."""
    todo = list({id(t): t for t in (self, *others) if not engine.is_realized(t.uop)}.values())
    # two tensors built alike share one graph node (hash-consing), but each must get memory of its own, or an assign to
    # one would change the other: every further one stores the value into a new buffer
    first: dict[UOp, Tensor] = {}
    for t in todo:
      if t.uop.op is not Ops.AFTER and not isinstance(t.device, tuple) and first.setdefault(t.uop, t) is not t:
        t.uop = Tensor.empty(t.shape, dtype=t.dtype, device=t.device).assign(Tensor._from_uop(t.uop, t.device)).uop
    unlanded: dict[int, UOp] = {}  # a tensor's graph as it was, before the landed writes in it were taken out
    if _landed:
      done = dict(_landed.items())
      for t in todo:
        if (new := t.uop.substitute(done)) is not t.uop: unlanded[id(t)], t.uop = t.uop, new
    if _assigned and (afters := {u for t in todo for u in t.uop.toposort() if u.op is Ops.AFTER}):
      # an assign lands now: the tensors it is the value of become its buffer too, and reads of the old contents run first
      chosen = {id(t) for t in todo}
      todo += [t for t in _all_tensors if t.uop in afters and id(t) not in chosen]
      todo += _old_readers(todo)
    for device in dict.fromkeys(t.device for t in todo):  # a constant-only graph names no device: each group says where it goes
      group = [t for t in todo if t.device == device]
      # a value that needs gradients keeps its graph for backward (loss.item() before loss.backward()); a leaf starts afresh
      graphs = [t._graph() for t in group] if _grad_tensors else []
      keep = grad_path(UOp.sink(*graphs), {x.uop for x in _grad_tensors}) if _grad_tensors else set()
      for i, (t, buf) in enumerate(zip(group, engine.realize(*(t.uop for t in group), device=device))):
        # an assign's buffer holds another value now: its old graph goes, and the write is no graph to differentiate
        if t._requires_grad is None and graphs and graphs[i] in keep and t.uop.op is not Ops.AFTER: _forward_of[buf] = t.uop
        else: _forward_of.pop(buf, None)
        if t.uop.op is Ops.AFTER:
          _assigned.pop(t.uop.src[0], None)
          for after in (t.uop, unlanded.get(id(t))):  # other graphs may hold either form of this write
            if after is not None: _landed[after] = buf
        t.uop = buf
    return self
  def numpy(self) -> np.ndarray:
    """The value as a new numpy array (realizes)."""
    return engine.to_numpy(self.realize().uop)
  def data(self) -> memoryview:
    """The value as a memoryview in the dtype's struct format and this shape, tinygrad's data() (realizes; a new buffer)."""
    if self.dtype == dtypes.bfloat16: raise TypeError("data(): bfloat16 has no memoryview format; read .float().data() or .numpy()")
    return memoryview(self.numpy())  # numpy() is a new array shaped from a flat buffer: C-contiguous
  def tolist(self) -> Any:
    """The value as nested Python lists (a Python scalar for a 0-d tensor)."""
    return self.numpy().tolist()
  def item(self) -> Scalar:
    """The one element as a Python scalar."""
    if self.numel() != 1: raise RuntimeError(f"item(): a Tensor with {self.numel()} elements (shape {self.shape}) cannot be converted to a scalar")
    return self.numpy().reshape(-1)[0].item()
  def __len__(self) -> int:
    if self.ndim == 0: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __iter__(self) -> Iterator[Tensor]:
    if self.ndim == 0: raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))
  def __bool__(self) -> bool:
    if self.numel() != 1: raise RuntimeError(f"the truth value of a Tensor with {self.numel()} elements is ambiguous; use .any() or .all()")
    return bool(self.item())
  def __int__(self) -> int: return int(self.item())
  def __float__(self) -> float: return float(self.item())

  # ---- gradients ----
  @property
  def requires_grad(self) -> bool | None:
    """Whether backward fills this tensor's `.grad`. Set on a leaf (True/False); a computed tensor that was not set says
    True when its value depends on a leaf that requires grad (not through detach), else None. A leaf left None is "unset":
    backward fills its `.grad` when it reaches no leaf that requires grad (see backward)."""
    if self._requires_grad is not None: return self._requires_grad
    return True if _grad_tensors and (root := self._graph()) in grad_path(root, {t.uop for t in _grad_tensors}) else None
  @requires_grad.setter
  def requires_grad(self, value: bool | None):
    if value:
      if not dtypes.is_float(self.dtype): raise RuntimeError(f"only floating point tensors can require gradients, got {self.dtype}")
      # a leaf needs a node of its own (two equal constants are one hash-consed CONST): a lazy one that depends on no
      # other leaf is realized into its own BUFFER; one that does stays in its graph and gets its gradient there
      if not engine.is_realized(self.uop) and self.uop not in grad_path(self.uop, {t.uop for t in _grad_tensors}): self.realize()
      _grad_tensors.add(self)
    elif self._requires_grad: _grad_tensors.discard(self)
    if value is None and dtypes.is_float(self.dtype) and any(u.op is Ops.BUFFER for u in self.uop.toposort()): _unset_leaves.add(self)
    else: _unset_leaves.discard(self)
    self._requires_grad = value
  def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    """Set requires_grad in place; returns self."""
    self.requires_grad = requires_grad
    return self
  def _graph(self, restored: dict[UOp, UOp] | None = None) -> UOp:
    """The graph of this tensor's value, with each buffer in it that realize cut from a graph needing gradients put back
    as that graph (which may read such buffers in turn); each such buffer and its graph go into `restored` if given."""
    root = self.uop
    while _forward_of:
      topo = root.toposort()
      written = {u.src[0] for u in topo if u.op is Ops.AFTER}  # a pending assign's target stays itself
      if not (cut := {u: g for u in topo if u.op is Ops.BUFFER and u not in written and (g := _forward_of.get(u)) is not None}): break
      root = root.substitute(cut)
      if restored is not None: restored.update(cut)
    return root

  def gradient(self, *targets: Tensor, gradient: Tensor | None = None, materialize_grads: bool = False) -> list[Tensor]:
    """d(self)/d(target) for each target, as lazy tensors with requires_grad=False (nothing is accumulated). `gradient` is
    d(loss)/d(self), implicitly 1 for a one-element tensor. A target the value does not depend on is an error, or zeros
    with materialize_grads."""
    root, want = self._graph(restored := {}), {t.uop for t in targets}
    path = grad_path(root, want)
    if root not in path and not materialize_grads: raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
      if self.numel() != 1:
        raise RuntimeError(f"grad can be implicitly created only for scalar outputs: this tensor has shape {self.shape}; pass gradient=")
      seed = broadcast_const(1.0, self.dtype, self.shape)
    elif gradient.shape != self.shape: raise RuntimeError(f"backward: gradient of shape {gradient.shape} for a tensor of shape {self.shape}")
    else: seed = gradient.cast(self.dtype).uop
    grads, out = compute_gradient(root, seed, want), []
    # the gradients read a forward value from the buffer it was realized into, instead of computing its graph again; a
    # graph put back inside another is a buffer again only once the inner one is, so this repeats until nothing changes
    if restored:
      back, sink = {g: b for b, g in restored.items()}, UOp.sink(*grads.values())
      while (again := sink.substitute(back)) is not sink: sink = again
      grads = dict(zip(grads, sink.src))
    for t in targets:
      if t.uop not in path and not materialize_grads: raise RuntimeError(f"gradient: a target (shape {t.shape}) is not used in this tensor's graph")
      u = grads.get(t.uop)  # None: on a path, but every rule along it gave none (trunc): zero
      out.append(type(self)._from_uop(u if u is not None else broadcast_const(0.0, t.dtype, t.shape), t.device).requires_grad_(False))
    return out
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Add d(self)/d(leaf) to `.grad` (grad += new; None becomes the new one) of every live tensor with requires_grad=True
    this value depends on; when there is none, of every live leaf left unset (requires_grad None: Tensor.randn(3), a
    layer's weight before an optimizer marks it) that it depends on, as tinygrad does. Marking any leaf True limits it to
    those marked, as PyTorch. `gradient` seeds it (implicitly 1 for a one-element tensor). The graph stays valid: backward
    can run again, and the gradients are lazy tensors. realize() keeps a value's graph only where it depends on a leaf
    marked True, so an unset leaf's gradient needs backward before the loss is read."""
    root = self._graph()
    for candidates in (list(_grad_tensors), list(_unset_leaves)):
      path = grad_path(root, {t.uop for t in candidates})
      if leaves := [t for t in candidates if t.uop in path]: break
    for t, g in zip(leaves, self.gradient(*leaves, gradient=gradient)): t.grad = g if t.grad is None else (t.grad + g).requires_grad_(False)
    return self

  # ---- device, markers, dtype ----
  def to(self, device: str | tuple[str, ...]) -> Tensor:
    """This tensor on `device`: a COPY when the value lives elsewhere (a constant-only graph needs none). A tuple of
    devices replicates it on each (seed 001's broadcast); see `shard` to split it instead."""
    device = _canon(device)
    if device == self.device: return self
    return type(self)._from_uop(self.uop if self.uop.device is None else _moved(self.uop, device), device)
  def shard(self, devices: tuple[str, ...], axis: int | None = 0) -> Tensor:
    """This tensor split into len(devices) equal chunks along `axis`, chunk i on devices[i] (each a separate buffer);
    axis=None replicates it on every device instead."""
    devices = _canon(tuple(devices))
    if axis is None: return self.to(devices)
    axis = resolve_dim(axis, self.ndim)
    if self.shape[axis] % len(devices): raise ValueError(f"shard: axis {axis} of shape {self.shape} does not split into {len(devices)} equal chunks")
    x = self.to(devices[0]) if isinstance(self.device, tuple) else self
    order = (axis, *(d for d in range(self.ndim) if d != axis))  # COPY to n devices scatters axis 0 (seed 001)
    moved = UOp(Ops.COPY, (x.uop.permute(order) if axis else x.uop,), devices)
    return self._from_uop(moved.permute(tuple(order.index(d) for d in range(self.ndim))) if axis else moved, devices)
  def to_(self, device: str | tuple[str, ...]) -> Tensor: return self.replace(self.to(device))  # in place, as tinygrad's
  def shard_(self, devices: tuple[str, ...], axis: int | None = 0) -> Tensor: return self.replace(self.shard(devices, axis))
  def replace(self, x: Tensor) -> Tensor:
    """This Tensor object now holds x's value (and device and dtype), tinygrad's in-place swap; the shapes must match."""
    if x.shape != self.shape: raise ValueError(f"replace: shape {x.shape} differs from this tensor's {self.shape}")
    self.uop, self._device = x.uop, x.device
    return self
  def assign(self, x: Tensor | Scalar | np.ndarray) -> Tensor:
    """Write `x` (broadcast to this shape, cast to this dtype, moved to this device) into this tensor's memory, in place
    (PyTorch's copy_), and return self: seed 001's STORE followed by AFTER. On a realized tensor the write is lazy, done
    when this tensor is realized (with whatever else is realized with it: the optimizers realize a whole step at once);
    every Tensor holding the same buffer then reads the new value, and so does any graph realized later that reads it.
    On a view of a realized tensor (a slice, a reshape, a transpose) the write happens now and changes only that region
    of the buffer underneath. An unrealized tensor simply takes x's value; a value over several devices too (its shards
    are replaced, not written in place)."""
    if not isinstance(x, Tensor): x = Tensor(x, device=self.device, dtype=self.dtype)
    try: value = x.to(self.device).cast(self.dtype)._broadcast_to(self.shape).uop
    except (ValueError, RuntimeError) as e: raise ValueError(f"assign: a value of shape {x.shape} into a tensor of shape {self.shape}: {e}") from None
    if isinstance(self.device, tuple): self.uop = value; return self  # shards are replaced
    if any(sint_is(s, 0) for s in self.shape): return self  # no element: nothing to write
    if self.uop.op is Ops.AFTER: self.realize()  # an assign still pending lands first
    base, moves = movement_base(self.uop)
    if base.op is not Ops.BUFFER:
      if base is not self.uop: raise ValueError(f"assign: this tensor is a view of an unrealized value ({base.op.name}); realize what it views first")
      self.uop = value
      return self
    if moves & {Ops.EXPAND, Ops.PAD}:
      raise ValueError(f"assign: this view of a buffer (shape {self.shape}) repeats or pads elements: no single place to write each value")
    written = UOp(Ops.AFTER, (base, UOp(Ops.STORE, (self.uop, value))))
    _assigned[base] = None
    if base is self.uop: self.uop = written
    else: Tensor._from_uop(written, self.device).realize()
    return self
  def contiguous(self) -> Tensor:
    """The same values with a kernel boundary: the value is materialized in its own buffer."""
    return self._new(UOp(Ops.CONTIGUOUS, (self.uop,)))
  def detach(self) -> Tensor:
    """The same values with gradients stopped."""
    return self._new(UOp(Ops.DETACH, (self.uop,)))
  def contiguous_backward(self) -> Tensor:
    """The same values; the gradient flowing back through here is made contiguous (its own buffer)."""
    return self._new(UOp(Ops.CONTIGUOUSBACKWARD, (self.uop,)))
  def cast(self, dtype: DType | str) -> Tensor:
    """The values converted to `dtype` (floats to ints truncate toward zero, anything to bool is != 0)."""
    return self if (dt := to_dtype(dtype)) == self.dtype else self._new(self.uop.cast(dt))
  def bitcast(self, dtype: DType | str) -> Tensor:
    """The same bits read as `dtype`, which must have this dtype's itemsize."""
    dt = to_dtype(dtype)
    if dt.itemsize != self.dtype.itemsize:
      raise ValueError(f"bitcast: {self.dtype} ({self.dtype.itemsize} bytes) -> {dt} ({dt.itemsize} bytes): the itemsizes must match")
    return self if dt == self.dtype else self._new(self.uop.bitcast(dt))
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def bfloat16(self) -> Tensor: return self.cast(dtypes.bfloat16)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def short(self) -> Tensor: return self.cast(dtypes.int16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)

  # ---- creation ----
  @classmethod
  def full(cls, shape: tuple[int, ...] | int, fill_value: Scalar, dtype: DType | str | None = None, device: str | None = None,
           requires_grad: bool | None = None) -> Tensor:
    """A tensor of `shape` filled with `fill_value` (a broadcast CONST: no memory until realized). An int fill value past
    int32 gives int64, as PyTorch's."""
    shape, v = shape_arg(shape), _scalar(fill_value)
    if v is None: raise TypeError(f"full: fill_value must be a number, got {type(fill_value).__name__}")
    no_negative_sizes(shape, "full")
    dt = to_dtype(dtype) if dtype is not None else dtypes.from_py(v)
    check_bytes(shape, dt.itemsize, "full")
    t = cls._from_uop(broadcast_const(v, dt, shape), _dev(device))
    t.requires_grad = requires_grad
    return t
  @classmethod
  def zeros(cls, *shape, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None) -> Tensor:
    """A tensor of zeros (float32 unless `dtype`). Takes sizes or one tuple: zeros(2, 3) or zeros((2, 3))."""
    return cls.full(shape_arg(*shape), 0.0, dtype or dtypes.default_float, device, requires_grad)
  @classmethod
  def ones(cls, *shape, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None) -> Tensor:
    """A tensor of ones (float32 unless `dtype`)."""
    return cls.full(shape_arg(*shape), 1.0, dtype or dtypes.default_float, device, requires_grad)
  @classmethod
  def empty(cls, *shape, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """A new buffer of `shape` whose contents are undefined."""
    shape, dt = shape_arg(*shape), to_dtype(dtype) if dtype is not None else dtypes.default_float
    no_negative_sizes(shape, "empty")
    check_bytes(shape, dt.itemsize, "empty")
    return cls._from_uop(engine.new_buffer(shape, dt, _dev(device)))
  def full_like(self, fill_value: Scalar, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """A tensor of this one's shape (and dtype and device, unless given) filled with `fill_value`."""
    return type(self).full(self.shape, fill_value, dtype or self.dtype, device or self.device)
  def zeros_like(self, dtype: DType | str | None = None, device: str | None = None) -> Tensor: return self.full_like(0, dtype, device)
  def ones_like(self, dtype: DType | str | None = None, device: str | None = None) -> Tensor: return self.full_like(1, dtype, device)
  def empty_like(self, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return type(self).empty(self.shape, dtype=dtype or self.dtype, device=device or self.device)

  @classmethod
  def _iota(cls, n: int, dtype: DType, device: str | None) -> Tensor: return cls._from_uop(iota(n, dtype), _dev(device))
  @classmethod
  def arange(cls, start: Scalar, stop: Scalar | None = None, step: Scalar = 1, dtype: DType | str | None = None,
             device: str | None = None, requires_grad: bool | None = None) -> Tensor:
    """start, start+step, ... up to (not including) stop, as numpy's and PyTorch's arange: int32 for int arguments (int64
    where a value passes int32, as PyTorch's), else float32."""
    if stop is None: start, stop = 0, start
    if step == 0: raise ValueError("arange: step must be nonzero")
    ints = not any(isinstance(x, float) for x in (start, stop, step))
    n = max(0, -(-(stop - start) // step) if ints else math.ceil((stop - start) / step))  # exact for big ints
    last = start + (n - 1) * step if n else start
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float if not ints \
      else least_upper_dtype(dtypes.from_py(start), dtypes.from_py(last))
    idx_dt = dt if dtypes.is_int(dt) else dtypes.int64 if n > _INT32[1] else dtypes.int32
    t = cls._iota(n, idx_dt, device).cast(dt)
    if step != 1: t = t * step
    if start != 0: t = t + start
    (t := t.cast(dt)).requires_grad = requires_grad
    return t
  @classmethod
  def linspace(cls, start: Scalar, end: Scalar, steps: int, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """`steps` evenly spaced values from start to end, both included. The first half counts up from start and the second
    half down from end (as PyTorch does), so both ends are exact."""
    if steps < 0: raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if dt == dtypes.bool: raise NotImplementedError("linspace: not implemented for bool (as PyTorch)")
    if steps == 1: return cls.full((1,), start, dt, device)
    i = cls._iota(steps, dtypes.int32, device).cast(dt if dtypes.is_float(dt) and dt.itemsize >= 4 else dtypes.float32)
    step = (end - start) / max(steps - 1, 1)
    return (i < steps // 2).where(i * step + start, (i - (steps - 1)) * step + end).cast(dt)
  @classmethod
  def eye(cls, n: int, m: int | None = None, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """The n x m identity. For the k x k square, k = min(n, m): rows [1, 0 .. 0] of length k+1 laid end to end and cut into
    rows of k put the ones on the diagonal (no comparison, no arange); then zero padding to n x m."""
    m = n if m is None else m
    no_negative_sizes((n, m), "eye")
    dt, k = to_dtype(dtype) if dtype is not None else dtypes.default_float, min(n, m)
    sq = broadcast_const(1, dt, (k, 1)).pad((0, 0), (k, k + 1)).reshape((k * (k + 1),)).shrink((0,), (k * k,)).reshape((k, k))
    return cls._from_uop(sq if (k, k) == (n, m) else sq.pad((0, 0), (n, m)), _dev(device))

  # ---- elementwise: broadcasting and promotion ----
  def _broadcast_to(self, shape: tuple[int, ...]) -> Tensor: return self if self.shape == shape else self.expand(shape)
  def _broadcasted(self, y: Tensor | Scalar, reverse: bool = False, match_dtype: bool = True) -> tuple[Tensor, Tensor]:
    """(self, y) brought to one shape (broadcasting) and, with match_dtype, one dtype (PyTorch's promotion, scalars weak);
    swapped when `reverse`. Python scalars become CONSTs on self's device."""
    if isinstance(y, Tensor):
      if y.device != self.device:
        raise RuntimeError(f"expected all tensors on the same device, got {self.device} and {y.device} (move one with .to())")
      dt = promoted_dtype(self.dtype, y.dtype, self.ndim == 0, y.ndim == 0)
    elif (v := _scalar(y)) is not None: dt = scalar_dtype(self.dtype, v); y = self._new(UOp.const(v, dt))
    else: raise TypeError(f"unsupported operand: Tensor and {type(y).__name__}")
    x, shape = self, broadcast_shape(self.shape, y.shape)
    if match_dtype: x, y = x.cast(dt), y.cast(dt)
    x, y = x._broadcast_to(shape), y._broadcast_to(shape)
    return (y, x) if reverse else (x, y)
  def _binop(self, op: Ops, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
    x, y = self._broadcasted(y, reverse)
    return x._new(UOp(op, (x.uop, y.uop)))
  def _unop(self, op: Ops) -> Tensor: return self._new(UOp(op, (self.uop,)))
  def _float(self) -> Tensor:
    """This tensor in a float dtype: its own if it has one, else the default float (as PyTorch's exp of an int tensor)."""
    return self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)
  def _const_like(self, v: Scalar) -> Tensor: return self._new(broadcast_const(v, self.dtype, self.shape))

  # ---- arithmetic ----
  def add(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
    """self + y (bool + bool is logical or, as in PyTorch)."""
    x, y = self._broadcasted(y, reverse)
    return x._new(UOp(Ops.OR if x.dtype == dtypes.bool else Ops.ADD, (x.uop, y.uop)))
  def sub(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
    """self - y: ADD(self, MUL(y, -1)), which wraps around correctly for unsigned ints too. A bool operand is an error even
    where the other one promotes it (PyTorch's rule: `mask - 1` is almost always a mistaken inversion)."""
    if dtypes.bool in (self.dtype, y.dtype if isinstance(y, Tensor) else dtypes.from_py(y) if _scalar(y) is not None else None):
      raise RuntimeError("subtraction with a bool operand is not supported; use ~ or logical_not() to invert a mask, ^ for bools")
    x, y = self._broadcasted(y, reverse)
    return x._new(x.uop + (-y.uop))
  def mul(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
    """self * y (bool * bool is logical and)."""
    if _scalar_in_float32(self, y): return self.float().mul(y, reverse).cast(self.dtype)
    x, y = self._broadcasted(y, reverse)
    return x._new(UOp(Ops.AND if x.dtype == dtypes.bool else Ops.MUL, (x.uop, y.uop)))
  def div(self, y: Tensor | Scalar, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    """self / y: true division (ints give the default float) as DIV, IEEE's correctly rounded quotient where the backend
    divides natively (isel's decomposition elsewhere); rounding_mode "floor" or "trunc" as PyTorch."""
    if rounding_mode == "floor": return self.floordiv(y, reverse)
    if rounding_mode == "trunc" and _scalar_in_float32(self, y): return self.float().div(y, reverse, "trunc").cast(self.dtype)
    if rounding_mode is None and _scalar_in_float32(self, y):  # y / x as PyTorch: x's reciprocal rounded, then the product
      return (self.reciprocal().float() * y if reverse else self.float() / y).cast(self.dtype)
    # true division of an int tensor by a Python scalar goes to float first, so the scalar is not wrapped (uint8 / -2 is -x/2)
    x, y = (self if rounding_mode is not None or isinstance(y, Tensor) else self._float())._broadcasted(y, reverse)
    if rounding_mode == "trunc":
      if not dtypes.is_float(x.dtype):
        q = x // y  # floor; step toward zero where the quotient is negative and inexact
        return (((x % y).ne(0)) & ((x < 0).ne(y < 0))).where(q + 1, q)
      # two half tensors: x/y in float32, rounded to the half dtype, then truncated, as PyTorch (1.5 / 0.3 is 5, where the
      # float32 quotient 4.9992 would truncate to 4); by a Python scalar the float32 quotient is truncated (above)
      return (x.float() / y.float()).cast(x.dtype).trunc() if x.dtype.itemsize < 4 else (x / y).trunc()
    if rounding_mode is not None: raise RuntimeError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
    x, y = x._float(), y._float()
    return x._new(UOp(Ops.DIV, (x.uop, y.uop)))
  def floordiv(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
    """floor(self / y), PyTorch's floor_divide: IDIV for ints (x // 0 is 0 here; PyTorch raises), pointwise._float_floordiv for floats."""
    if not reverse and _scalar_in_float32(self, y): return self.float().floordiv(y).cast(self.dtype)
    x, y = self._broadcasted(y, reverse)
    if x.dtype == dtypes.bool: raise RuntimeError("floor division of bool tensors is not supported")
    if dtypes.is_int(x.dtype): return x._new(UOp(Ops.IDIV, (x.uop, y.uop)))
    # float16's rounded x/y can cross an integer: compute in float32 and round once, as PyTorch
    return x.float().floordiv(y.float()).cast(x.dtype) if x.dtype.itemsize < 4 else x._float_floordiv(y)
  def mod(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
    """self mod y with y's sign, PyTorch's remainder: MOD for ints (x % 0 is 0), pointwise._float_remainder for floats."""
    x, y = self._broadcasted(y, reverse)
    if x.dtype == dtypes.bool: raise RuntimeError("remainder of bool tensors is not supported")
    if dtypes.is_int(x.dtype): return x._new(UOp(Ops.MOD, (x.uop, y.uop)))
    return x.float().mod(y.float()).cast(x.dtype) if x.dtype.itemsize < 4 else x._float_remainder(y)  # float16: as floordiv
  def neg(self) -> Tensor:
    if self.dtype == dtypes.bool: raise RuntimeError("negation of a bool tensor is not supported; use ~ or logical_not() to invert a mask")
    return self._new(-self.uop)
  def _int_pow(self, e: int) -> Tensor:
    """self ** e for an int e >= 0 by square-and-multiply: exact, and about 2*log2(e) multiplies."""
    out, base = None, self
    while e:
      if e & 1: out = base if out is None else out * base
      if e := e >> 1: base = base * base
    return out if out is not None else self.ones_like()
  def pow(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor:
    """self ** y as PyTorch, with C99 pow's special values: POW on |base|, whose sign comes back for a negative base (-0.0
    and -inf included) and an odd integral exponent; nan for a finite negative base and a non-integral exponent;
    x ** 0 = 1 ** y = (-1) ** +-inf = 1, nan included. Ints multiply, exactly (pointwise._int_tensor_pow for a tensor
    exponent). So does an integral scalar exponent of a float base up to |y| = 4, where the at most three roundings of
    the products are as close as POW. A scalar exponent of +-0.5 is sqrt or rsqrt, as PyTorch has it (so
    (-0.0) ** 0.5 = -0.0 and (-inf) ** 0.5 = nan there, where C99's pow gives 0.0 and inf)."""
    base, v = self, None if reverse else _scalar(y)
    if v in (0.5, -0.5) and not isinstance(v, bool): return self.sqrt() if v > 0 else self.rsqrt()
    if v is not None and not isinstance(v, bool) and float(v).is_integer() and abs(v) <= 2 ** 31:
      base = self.cast(scalar_dtype(self.dtype, v))  # a bool base takes the default int or float
      if not dtypes.is_float(base.dtype):
        if v < 0: raise RuntimeError("integers to negative integer powers are not allowed")
        return base._int_pow(int(v))
      # not x ** 0: a constant 1 would cut x out of the graph, where PyTorch gives it gradient 0 (POW's 1 keeps it). A
      # negative power is (1/x) ** k, not 1 / x ** k, whose slope at 0 is inf * 0 (PyTorch's k x ** (k-1) is -inf there)
      if 0 < abs(v) <= 4: return base._int_pow(int(v)) if v > 0 else base.reciprocal()._int_pow(int(-v))
    if self.dtype == dtypes.bool and (y.dtype == dtypes.bool if isinstance(y, Tensor) else reverse and isinstance(_scalar(y), bool)):
      raise RuntimeError("pow of a bool base to a bool tensor exponent is not supported (as PyTorch)")
    # a tensor exponent gets PyTorch's nan slope at a negative base (below); a scalar base >= 0 (2 ** x) has none
    nan_slope_at_negative_base = isinstance(y, Tensor) or (reverse and not (_scalar(y) is not None and _scalar(y) >= 0))
    x, y = base._broadcasted(y, reverse)
    if dtypes.is_int(x.dtype): return x._int_tensor_pow(y)
    a, b = x._float(), y._float()
    if a.dtype == dtypes.float16: a, b = a.float(), b.float()  # POW's float16 decomposition is float32's anyway
    # |a| as a select, not abs(): its slope at a = 0 is +1, so 0 ** b keeps PyTorch's slope b * 0 ** (b - 1)
    p = a._new(UOp(Ops.POW, ((a < 0).where(-a, a).uop, b.uop)))
    integral = b.trunc() == b  # +-inf too, as even
    odd = integral & ((b * 0.5).trunc() != b * 0.5)
    negative = a.signbit()  # -0.0 and -inf are negative
    # the sign as a factor, not a select between p and a constant: the gradient then flows through POW everywhere, and its
    # rule (gradient._pow) gives PyTorch's slopes: nan for the nan of a negative base's non-integral power, and at
    # x ** 0 = 1 ** y = 1, which POW itself gives (C99's values), d/dy 0.7 ** y = ln 0.7 and d/dy inf ** y = inf at y = 0
    out = p * (negative & odd).where(-1.0, ((a < 0) & (a > -math.inf) & integral.logical_not()).where(math.nan, 1.0))
    if nan_slope_at_negative_base:
      # PyTorch's slope in b, a ** b ln a, is nan for a < 0, where POW's (of |a|) is finite. 1 - POW(c, b - detach(b)) is
      # +0 (C99: x ** 0 = 1 ** y = 1; b - detach(b) is 0, nan at b = +-inf), subtracted so -0.0 stays, with slope -ln(c) in
      # b: nan for c = nan, 0 for 1 (at b = +-inf c is 1, so the value stays inf or 0 and the slope POW's). isel computes
      # this POW as a select (rule ZERO_OR_NAN), so the factor costs the forward a few operations, not a second POW
      c = ((a < 0) & (b.abs() < math.inf)).where(math.nan, 1.0).cast(b.dtype)
      out = out - (1.0 - c._new(UOp(Ops.POW, (c.uop, (b - b.detach()).uop))))
    return out.cast(x.dtype)

  __add__ = add
  __sub__ = sub
  __mul__ = mul
  __truediv__ = div
  __floordiv__ = floordiv
  __mod__ = mod
  __pow__ = pow
  __neg__ = neg
  def __radd__(self, y) -> Tensor: return self.add(y, True)
  def __rsub__(self, y) -> Tensor: return self.sub(y, True)
  def __rmul__(self, y) -> Tensor: return self.mul(y, True)
  def __rtruediv__(self, y) -> Tensor: return self.div(y, True)
  def __rfloordiv__(self, y) -> Tensor: return self.floordiv(y, True)
  def __rmod__(self, y) -> Tensor: return self.mod(y, True)
  def __rpow__(self, y) -> Tensor: return self.pow(y, True)

  # ---- comparisons and logic: all give bool ----
  def lt(self, y: Tensor | Scalar) -> Tensor: return self._binop(Ops.CMPLT, y)
  def gt(self, y: Tensor | Scalar) -> Tensor: return self._binop(Ops.CMPLT, y, reverse=True)
  def ne(self, y: Tensor | Scalar) -> Tensor: return self._binop(Ops.CMPNE, y)
  def eq(self, y: Tensor | Scalar) -> Tensor: return self.ne(y).logical_not()
  def le(self, y: Tensor | Scalar) -> Tensor:
    # not (y < x) is wrong for nan: floats need (x < y) or (x == y)
    x, y = self._broadcasted(y)
    return x.lt(y) | x.eq(y) if dtypes.is_float(x.dtype) else y.lt(x).logical_not()
  def ge(self, y: Tensor | Scalar) -> Tensor:
    x, y = self._broadcasted(y)
    return y.le(x)
  __lt__, __gt__, __le__, __ge__ = lt, gt, le, ge
  def __eq__(self, y) -> Tensor: return self.eq(y) if isinstance(y, Tensor) or _scalar(y) is not None else NotImplemented  # type: ignore[override]
  def __ne__(self, y) -> Tensor: return self.ne(y) if isinstance(y, Tensor) or _scalar(y) is not None else NotImplemented  # type: ignore[override]
  def logical_not(self) -> Tensor:
    """Elementwise not, as bool (nonzero is true)."""
    return self._new(self.cast(dtypes.bool).uop.ne(True))
  def logical_and(self, y: Tensor | Scalar) -> Tensor: return self.cast(dtypes.bool) & (y.cast(dtypes.bool) if isinstance(y, Tensor) else bool(y))
  def logical_or(self, y: Tensor | Scalar) -> Tensor: return self.cast(dtypes.bool) | (y.cast(dtypes.bool) if isinstance(y, Tensor) else bool(y))
  def logical_xor(self, y: Tensor | Scalar) -> Tensor: return self.cast(dtypes.bool) ^ (y.cast(dtypes.bool) if isinstance(y, Tensor) else bool(y))
  def _bitwise(self, op: Ops, y: Tensor | Scalar, reverse: bool = False, shift: bool = False) -> Tensor:
    x, y = self._broadcasted(y, reverse)
    if dtypes.is_float(x.dtype) or (shift and x.dtype == dtypes.bool):
      raise RuntimeError(f"{op.name.lower()} is not defined for {x.dtype}: it takes {'integer' if shift else 'integer or bool'} tensors")
    return x._new(UOp(op, (x.uop, y.uop)))
  def bitwise_and(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor: return self._bitwise(Ops.AND, y, reverse)
  def bitwise_or(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor: return self._bitwise(Ops.OR, y, reverse)
  def bitwise_xor(self, y: Tensor | Scalar, reverse: bool = False) -> Tensor: return self._bitwise(Ops.XOR, y, reverse)
  def lshift(self, y: Tensor | int, reverse: bool = False) -> Tensor: return self._bitwise(Ops.SHL, y, reverse, shift=True)
  def rshift(self, y: Tensor | int, reverse: bool = False) -> Tensor:
    """self >> y: arithmetic for signed ints (the sign fills in), logical for unsigned. A signed shift by a negative amount or
    the width or more gives the sign's fill, -1 or 0, as PyTorch's (the IR's SHR gives 0 there): a shift by width - 1."""
    x, y = self._broadcasted(y, reverse)
    if dtypes.is_int(x.dtype) and not dtypes.is_unsigned(x.dtype) and x.dtype != dtypes.bool:
      bits = 8 * x.dtype.itemsize
      y = ((y < 0) | (y >= bits)).where(bits - 1, y)
    return x._bitwise(Ops.SHR, y, shift=True)
  def bitwise_not(self) -> Tensor:
    """~self: logical not for bool, XOR with all ones for ints."""
    if dtypes.is_float(self.dtype): raise NotImplementedError(f"bitwise_not is not defined for {self.dtype}: it takes integer or bool tensors")
    return self._new(self.uop ^ (True if self.dtype == dtypes.bool else -1))
  __and__, __or__, __xor__, __lshift__, __rshift__ = bitwise_and, bitwise_or, bitwise_xor, lshift, rshift
  def __invert__(self) -> Tensor:  # ~ of a float tensor is a TypeError in PyTorch, its bitwise_not a NotImplementedError
    if dtypes.is_float(self.dtype): raise TypeError(f"~ is not defined for {self.dtype}: it takes integer or bool tensors")
    return self.bitwise_not()
  def __rand__(self, y) -> Tensor: return self.bitwise_and(y, True)
  def __ror__(self, y) -> Tensor: return self.bitwise_or(y, True)
  def __rxor__(self, y) -> Tensor: return self.bitwise_xor(y, True)
  def __rlshift__(self, y) -> Tensor: return self.lshift(y, True)
  def __rrshift__(self, y) -> Tensor: return self.rshift(y, True)

  def maximum(self, y: Tensor | Scalar) -> Tensor:
    """Elementwise max (nan wins, as PyTorch)."""
    x, y = self._broadcasted(y)
    return x | y if x.dtype == dtypes.bool else x._new(UOp(Ops.MAX, (x.uop, y.uop)))
  def minimum(self, y: Tensor | Scalar) -> Tensor:
    """Elementwise min: -max(-x, -y) for floats (keeps nan), a select for ints (negation overflows at the most negative int)."""
    x, y = self._broadcasted(y)
    if x.dtype == dtypes.bool: return x & y
    return -((-x).maximum(-y)) if dtypes.is_float(x.dtype) else (x < y).where(x, y)
  def where(self: Tensor, x: Tensor | Scalar, y: Tensor | Scalar) -> Tensor:
    """x where this condition is true (nonzero), else y; Tensor.where(cond, x, y) reads the same. x and y promote together."""
    cond = self.cast(dtypes.bool)
    if isinstance(x, Tensor): x, y = x._broadcasted(y)
    elif isinstance(y, Tensor): y, x = y._broadcasted(x)
    else:
      if (vx := _scalar(x)) is None or (vy := _scalar(y)) is None: raise TypeError(f"where: x and y must be tensors or numbers, got {x!r}, {y!r}")
      dt = least_upper_dtype(dtypes.from_py(vx), dtypes.from_py(vy))
      x, y = cond._new(UOp.const(vx, dt)), cond._new(UOp.const(vy, dt))
    if x.device != cond.device: raise RuntimeError(f"where: condition on {cond.device}, values on {x.device}")
    shape = broadcast_shape(cond.shape, x.shape)
    cond, x, y = cond._broadcast_to(shape), x._broadcast_to(shape), y._broadcast_to(shape)
    return x._new(UOp(Ops.WHERE, (cond.uop, x.uop, y.uop)))

  # ---- unary ----
  def _math(self, f: Callable[[Tensor], Tensor]) -> Tensor:
    """f computed in a float dtype: ints take the default float; float16 computes in float32 and rounds once at the end (as
    PyTorch does), since the decompositions of EXP2, LOG2, SIN... lose too much in 11 bits."""
    x = self._float()
    return f(x.float()).cast(x.dtype) if x.dtype.itemsize < 4 else f(x)
  def reciprocal(self) -> Tensor: return self._float()._unop(Ops.RECIP)
  def sqrt(self) -> Tensor: return self._math(lambda x: x._unop(Ops.SQRT))
  def rsqrt(self) -> Tensor: return self._math(lambda x: x._unop(Ops.SQRT)._unop(Ops.RECIP))
  def exp2(self) -> Tensor: return self._math(lambda x: x._unop(Ops.EXP2))
  def log2(self) -> Tensor: return self._math(lambda x: x._unop(Ops.LOG2))
  def exp(self) -> Tensor:
    """e**x as 2**n * EXP2(r * log2(e)) for x = n ln 2 + r, reduced exactly (see transcendental.exp)."""
    return self._math(lambda x: x._new(T.exp(x.uop)))
  def log(self) -> Tensor:
    """ln(x) as LOG2(x) * ln(2)."""
    return self._math(lambda x: x._unop(Ops.LOG2) * math.log(2))
  def sin(self) -> Tensor: return self._math(lambda x: x._unop(Ops.SIN))
  def cos(self) -> Tensor:
    """cos(x) = +-SIN(x - J pi/2) for the odd J nearest x * 2/pi, the reduction done exactly (see transcendental.sin_cos)."""
    return self._math(lambda x: x._new(T.sin_cos(x.uop, 1)))
  def tan(self) -> Tensor:
    """sin(x) / cos(x), both by exact reductions, so that the gradient (SIN's slope at small arguments) is accurate too."""
    return self._math(lambda x: x._new(T.tan(x.uop)))
  def trunc(self) -> Tensor: return self._unop(Ops.TRUNC) if dtypes.is_float(self.dtype) else self

  # ---- the basic reductions: sum and max (the rest, prod and min among them, are in reduce.py) ----
  def _axes(self, axis: int | tuple[int, ...] | list[int] | None) -> tuple[int, ...]:
    """`axis` as sorted non-negative axes; None is all of them. A 0-d tensor accepts axis 0 or -1 and reduces nothing."""
    if axis is None: return tuple(range(self.ndim))
    axes = tuple(resolve_dim(a, self.ndim) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if len(set(axes)) != len(axes): raise RuntimeError(f"axis {axis}: an axis appears more than once")
    return () if self.ndim == 0 else tuple(sorted(axes))
  def _reduce(self, op: Ops, axis: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor:
    """REDUCE with op ADD, MUL or MAX over `axis` in this dtype; the reduced axes kept as size 1 or dropped."""
    axes = self._axes(axis)
    if not axes: return self
    out = self.uop.reduce(op, axes)
    return self._new(out if keepdim else out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes)))
  def _acc_dtype(self, dtype: DType | str | None) -> Tensor:
    if dtype is not None: return self.cast(dtype)
    return self.cast(dtypes.int64) if self.dtype == dtypes.bool or (dtypes.is_int(self.dtype) and self.dtype != dtypes.uint64) else self
  @torch_keywords(dim="axis")
  def sum(self, axis: int | tuple[int, ...] | None = None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    """Sum over `axis` (all axes when None). bool and ints give int64, as PyTorch; float16 and bfloat16 accumulate in float32."""
    x = self._acc_dtype(dtype)
    if dtypes.is_float(x.dtype) and x.dtype.itemsize < 4: return x.float()._reduce(Ops.ADD, axis, keepdim).cast(x.dtype)
    return x._reduce(Ops.ADD, axis, keepdim)
  @torch_max_forms("argmax", "maximum")
  def max(self, axis: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor:
    """The largest value over `axis` (values only; dim= gives (values, indices), a tensor the elementwise maximum, as PyTorch's:
    torch_max_forms). Reducing an empty axis is an error. The gradient is PyTorch's:
    over one axis given as an int (torch.max(x, dim)) it all goes to the first maximum, the one argmax picks; over all axes
    or a tuple of them (x.max(), torch.amax) the maxima share it. The first costs two more reductions (argmax's)."""
    if any(self.shape[a] == 0 for a in self._axes(axis)): raise RuntimeError(f"max: cannot reduce an empty axis of shape {self.shape}")
    if self.dtype == dtypes.bool: return self.cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
    if isinstance(axis, int) and self.ndim and dtypes.is_float(self.dtype):
      hit, rev = self._maxima(ax := resolve_dim(axis, self.ndim))
      pick = hit.where(rev, 0)
      return (pick == pick.max(ax, keepdim=True)).where(self, 0.0)._reduce(Ops.ADD, ax, keepdim)  # the first maximum, plus zeros
    return self._reduce(Ops.MAX, axis, keepdim)
