"""Movement: reshape, permute, expand, pad, shrink, flip and what is built from them (cat, stack, repeat, split,
rearrange), with the shape and dimension helpers the other mixins share. Indexing lives in indexing.py."""
from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from tinyspec.dtype import DType, dtypes, least_upper_dtype, position_dtype
from tinyspec.uop.ops import Ops
from tinyspec.uop.properties import sint_is, sint_max, sint_value
from tinyspec.uop.rewrite import graph_rewrite
from tinyspec.uop.symbolic import sym
from tinyspec.uop.uop import UOp

if TYPE_CHECKING:
  from tinyspec.tensor.tensor import Tensor

_INT = (int, np.integer)
F = TypeVar("F", bound=Callable[..., Any])


def _joined_tensors(op: str, first, others: tuple) -> list:
  """cat's and stack's operands: a.cat(b, c), a.cat([b, c]) or Tensor.cat([a, b, c]); a sequence and more tensors beside it
  (Tensor.cat([a, b], c)) is ambiguous, and so an error rather than a guess."""
  if isinstance(first, (list, tuple)):
    if others: raise ValueError(f"{op}: pass the tensors as one sequence or as separate arguments, not both (got a sequence and {len(others)} more)")
    ts = list(first)
  else: ts = [first, *others[0]] if len(others) == 1 and isinstance(others[0], (list, tuple)) else [first, *others]
  if not ts: raise ValueError(f"{op}: needs at least one tensor")
  return ts


class ShapeError(RuntimeError, ValueError):
  """A shape that cannot be: a negative size, a reshape to another number of elements, too few repeats. PyTorch raises a
  RuntimeError there, tinygrad (and Python, for a bad argument) a ValueError; this is both, so code written for either
  catches it (numpy's AxisError is a ValueError and an IndexError for the same reason)."""

class ShapeArgError(TypeError, ValueError):
  """A shape argument not in either accepted form (sizes, or one sequence of sizes): PyTorch's TypeError and tinygrad's
  ValueError, as ShapeError."""

class ZeroDimError(RuntimeError, IndexError):
  """An op that needs an axis applied to a 0-d tensor: PyTorch's RuntimeError and tinygrad's IndexError, as ShapeError."""

def no_negative_sizes(shape: tuple, op: str) -> None:
  """Raise ShapeError naming `op` when `shape` holds a negative size."""
  if any(isinstance(s, int) and s < 0 for s in shape): raise ShapeError(f"{op}: negative dimension in shape {shape}")


def torch_keywords(**aliases: str | tuple[str, Callable[[Any], Any]]) -> Callable[[F], F]:
  """A method decorator: the method also takes PyTorch's keyword names for its arguments, given as theirs="ours", or
  theirs=("ours", convert) where the value differs too. `@torch_keywords(dim="axis")` lets x.sum(dim=1) mean
  x.sum(axis=1), so code written for torch.Tensor runs as it is."""
  renames = {theirs: (alias, None) if isinstance(alias, str) else alias for theirs, alias in aliases.items()}
  def decorate(method: F) -> F:
    params = list(inspect.signature(method).parameters)[1:]  # after self: where each of ours sits among the positionals
    @functools.wraps(method)
    def with_aliases(self, *args, **kwargs):
      for theirs, (ours, convert) in renames.items():
        if theirs not in kwargs: continue
        if ours in kwargs or params.index(ours) < len(args):
          raise TypeError(f"{method.__name__}() got {ours!r} twice: positionally or by name, and as PyTorch's {theirs!r}")
        value = kwargs.pop(theirs)
        kwargs[ours] = value if convert is None else convert(value)
      return method(self, *args, **kwargs)
    return with_aliases  # type: ignore[return-value]
  return decorate

def resolve_dim(dim: int, ndim: int) -> int:
  """`dim` as a non-negative axis of an ndim-d tensor (negative counts from the end); a 0-d tensor takes 0 and -1."""
  if not isinstance(dim, _INT) or isinstance(dim, bool): raise TypeError(f"a dimension must be an int, got {dim!r}")
  n = max(ndim, 1)
  if not -n <= dim < n: raise IndexError(f"dimension {dim} is out of range for a tensor with {ndim} dimensions (expected in [{-n}, {n - 1}])")
  return int(dim) % n

def _sint(s: Any) -> Any:
  """A size or offset given to a method: an int, or a symbolic size (checked)."""
  return s if _symbolic_size(s) else int(s)

def simplified(s: Any) -> Any:
  """A symbolic size in its simplest form (an int where it folds to one); an int as it is."""
  if not isinstance(s, UOp): return s
  out = graph_rewrite(s, sym)
  return out.arg[0] if out.op is Ops.CONST else out

def _symbolic_size(s: Any) -> bool:
  """A size that is an index expression of bound variables (`UOp.variable("n", 1, 64).bind(7)`, or `n + 1`), never negative."""
  if not isinstance(s, UOp): return False
  if s.dtype is not dtypes.index or s.shape != () or s.vmin < 0:
    raise TypeError(f"a symbolic size must be a non-negative index scalar (a bound variable or an expression of them), got {s.op.name} {s.dtype}")
  if unbound := [v.arg[0] for v in s.toposort() if v.is_variable and v.bound_value is None]:
    raise TypeError(f"a symbolic size needs its variables bound to values: {', '.join(unbound)} has none (use .bind(value))")
  return True

def shape_arg(*args: Any) -> tuple:
  """A shape given as sizes, f(2, 3), or as one sequence, f((2, 3)); sizes may be -1 where a method allows it, and a bound
  variable (or an expression of bound variables) where a shape may be symbolic."""
  if len(args) == 1 and isinstance(args[0], (tuple, list)): args = tuple(args[0])
  if not all((isinstance(s, _INT) and not isinstance(s, bool)) or _symbolic_size(s) for s in args):
    raise ShapeArgError(f"a shape must be ints (or bound variables), as sizes or one sequence of them, got {args}")
  shape = tuple(s if isinstance(s, UOp) else int(s) for s in args)
  if all(sint_max(s) >= 0 for s in shape) and (n := math.prod(sint_max(s) for s in shape)) >= 2 ** 63:
    raise ValueError(f"shape {shape} has {n} elements: past 2**63, more than any device can address")
  return shape

def movement_base(u: UOp) -> tuple[UOp, set[Ops]]:
  """The node under a chain of movement ops (a BUFFER when it views realized memory) and which movement ops there were."""
  moves: set[Ops] = set()
  while u.op in (Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.SHRINK, Ops.FLIP, Ops.PAD): moves.add(u.op); u = u.src[0]
  return u, moves


def check_bytes(shape: tuple[int, ...], itemsize: int, what: str) -> None:
  """Refuse a tensor whose bytes no device can address (2**63 or more), naming the shape and the bytes."""
  if (nbytes := math.prod(sint_max(s) for s in shape) * itemsize) >= 2 ** 63:
    raise ValueError(f"{what}: shape {shape} needs {nbytes} bytes: past 2**63, more than any device can address")

def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  """The shape that `shapes` broadcast to: right-aligned, each axis equal or 1."""
  if all(s == shapes[0] for s in shapes[1:]): return shapes[0]
  nd = max(len(s) for s in shapes)
  out = []
  for i, dims in enumerate(zip(*((1,) * (nd - len(s)) + tuple(s) for s in shapes))):
    big = {d for d in dims if d != 1}
    if len(big) > 1:
      raise RuntimeError(f"shapes {', '.join(map(str, shapes))} do not broadcast: axis {i - nd} has sizes {sorted(big)} (each must be equal or 1)")
    out.append(big.pop() if big else 1)
  return tuple(out)

def broadcast_const(value: Any, dtype: DType, shape: tuple[int, ...]) -> UOp:
  """`value` as a CONST of `dtype` made `shape`-d by RESHAPE and EXPAND: the explicit form elementwise sources need."""
  c = UOp.const(value, dtype)
  if shape == (): return c
  c = c.reshape((1,) * len(shape))
  return c if all(s == 1 for s in shape) else c.expand(shape)

@functools.lru_cache(maxsize=256)
def iota(n: int, dtype: DType) -> UOp:
  """0, 1, ..., n-1 without a reduction: over k = bits(n) axes of size 2, axis j holds [0, 2^(k-1-j)] (a padded CONST),
  and their broadcast sum read in row-major order counts in binary; shrunk to n. O(log n) nodes, one elementwise kernel.
  Cached: UOps are immutable, and building the log n axes cost more than the kernels of a small topk."""
  k = max(n - 1, 0).bit_length()
  out = broadcast_const(0, dtype, (2,) * k)
  for j in range(k):
    digit = broadcast_const(1 << (k - 1 - j), dtype, (1,)).pad((1,), (2,))  # [0, 2^(k-1-j)]
    out = out + digit.reshape((1,) * j + (2,) + (1,) * (k - 1 - j)).expand((2,) * k)
  return out.reshape((1 << k,)).shrink((0,), (n,)) if (1 << k) != n else out.reshape((n,))

PAD_MODES = ("constant", "reflect", "replicate", "circular")
_EDGE_INDEX = {  # for positions i of the padded axis counted from the input's start (negative before it), the input position read
  "reflect": lambda i, n: np.abs((i + (n - 1)) % (2 * n - 2) - (n - 1)) if n > 1 else np.zeros_like(i),  # mirrored, the edge once
  "replicate": lambda i, n: np.clip(i, 0, n - 1),
  "circular": lambda i, n: i % n,
}

def _pad_pairs(padding: Sequence, ndim: int) -> list[tuple[int, int]]:
  """Padding as (before, after) per axis, from PyTorch's flat form (pairs from the last axis backwards) or one pair (or None) per axis."""
  padding = tuple(padding)
  if all(isinstance(p, (*_INT, UOp)) for p in padding):
    if len(padding) % 2 or len(padding) > 2 * ndim:
      raise ValueError(f"pad: {padding} must have an even length of at most 2 * ndim = {2 * ndim} (pairs from the last axis)")
    pairs = [(0, 0)] * ndim
    for i in range(len(padding) // 2): pairs[ndim - 1 - i] = (_sint(padding[2 * i]), _sint(padding[2 * i + 1]))
    return pairs
  if len(padding) != ndim: raise ValueError(f"pad: {padding} needs one (before, after) pair or None per axis of the {ndim}-d tensor")
  return [(0, 0) if p is None else (_sint(p[0]), _sint(p[1])) for p in padding]

def _cut(p: Any) -> int:
  """How much a pad amount cuts: -p for a negative int, else 0 (a symbolic amount is never negative)."""
  return -p if isinstance(p, int) and p < 0 else 0

def _added(p: Any) -> Any:
  """How much a pad amount adds: a positive int or a symbolic amount, else 0."""
  return p if not isinstance(p, int) or p > 0 else 0


def _einops_side(side: str, formula: str) -> list[list[str] | str]:
  """One side of an einops formula as its axes in order: a name or "..." each, a list of names for a parenthesized group
  ("()" and "1" are the empty group, an axis of size 1)."""
  groups: list[list[str] | str] = []
  group: list[str] | None = None
  for tok in side.replace("(", " ( ").replace(")", " ) ").replace("\u2026", "...").split():
    if tok == "(":
      if group is not None: raise ValueError(f"rearrange: nested parentheses in {formula!r}")
      group = []
    elif tok == ")":
      if group is None: raise ValueError(f"rearrange: unbalanced parentheses in {formula!r}")
      groups.append(group); group = None
    elif tok == "1":  # a size-1 axis: an empty group of its own, or nothing inside a group
      if group is None: groups.append([])
    elif tok != "..." and not tok.isidentifier(): raise ValueError(f"rearrange: {tok!r} in {formula!r} is not an axis name")
    elif group is None: groups.append(tok)
    else: group.append(tok)
  if group is not None: raise ValueError(f"rearrange: unbalanced parentheses in {formula!r}")
  return groups

class MovementMixin:
  """Movement ops and indexing for Tensor (every method builds lazily on `self.uop`)."""

  # ---- the six movement ops ----
  def reshape(self: Tensor, shape, *args) -> Tensor:
    """The same elements in row-major order with a new shape; one size may be -1 (inferred), and None keeps that axis' size."""
    given = tuple(shape) if isinstance(shape, (tuple, list)) and not args else (shape, *args)
    if any(s is None for s in given):
      if any(s is None and i >= self.ndim for i, s in enumerate(given)):
        raise RuntimeError(f"reshape {given}: a None past the tensor's {self.ndim} axes (shape {self.shape}) has no size to keep")
      given = tuple(self.shape[i] if s is None else s for i, s in enumerate(given))
      shape, args = given, ()
    new = shape_arg(shape, *args)
    if (unknown := sum(sint_is(s, -1) for s in new)) > 1: raise RuntimeError(f"reshape {new}: only one dimension can be -1")
    if any(isinstance(s, int) and s < -1 for s in new): raise RuntimeError(f"reshape {new}: invalid negative size")
    numel = self.numel()  # with symbolic sizes the counts are compared at the variables' values now
    if unknown:
      known = math.prod(s for s in new if not sint_is(s, -1))
      if sint_value(known) == 0 or sint_value(numel) % sint_value(known):
        raise ShapeError(f"reshape: shape {self.shape} ({numel} elements) cannot become {new}")
      new = tuple(simplified(numel // known) if sint_is(s, -1) else s for s in new)
    if sint_value(math.prod(new)) != sint_value(numel):
      raise ShapeError(f"reshape: shape {self.shape} ({numel} elements) cannot become {new} ({math.prod(new)} elements)")
    return self if new == self.shape else self._new(self.uop.reshape(new))

  def expand(self: Tensor, shape, *args) -> Tensor:
    """Size-1 axes repeated to `shape` without copying; -1 keeps a size, and new axes may be added on the left."""
    new = shape_arg(shape, *args)
    if len(new) < self.ndim: raise RuntimeError(f"expand: shape {new} has fewer dimensions than the tensor's {self.shape}")
    old = (1,) * (len(new) - self.ndim) + self.shape
    new = tuple(o if n == -1 and i >= len(new) - self.ndim else n for i, (o, n) in enumerate(zip(old, new)))
    for i, (o, n) in enumerate(zip(old, new)):
      if (isinstance(n, int) and n < 0) or (o is not n and o != n and not sint_is(o, 1)):
        raise RuntimeError(f"expand: shape {self.shape} -> {new}: dimension {i} of size {o} is not 1, so it cannot become {n}")
    x = self.reshape(old)
    return x if new == x.shape else self._new(x.uop.expand(new))

  @torch_keywords(dims="order")
  def permute(self: Tensor, order, *args) -> Tensor:
    """The axes reordered: output axis i is input axis order[i]."""
    order = tuple(resolve_dim(d, self.ndim) for d in shape_arg(order, *args)) if self.ndim else shape_arg(order, *args)
    if sorted(order) != list(range(self.ndim)): raise RuntimeError(f"permute: {order} is not a permutation of the axes of shape {self.shape}")
    return self if order == tuple(range(self.ndim)) else self._new(self.uop.permute(order))

  @torch_keywords(dims="axis")
  def flip(self: Tensor, axis, *args) -> Tensor:
    """The elements reversed along `axis` (an int or a sequence)."""
    axes = tuple(resolve_dim(d, self.ndim) for d in ((axis, *args) if isinstance(axis, _INT) else tuple(axis)))
    if len(set(axes)) != len(axes): raise RuntimeError(f"flip: axis {axes} appears more than once")
    return self._new(self.uop.flip(axes)) if axes and self.ndim else self

  def shrink(self: Tensor, arg: Sequence[tuple[int, int] | None]) -> Tensor:
    """The window [start, end) of each axis (None keeps an axis whole)."""
    if len(arg) != self.ndim: raise ValueError(f"shrink: {arg} needs one (start, end) or None per axis of shape {self.shape}")
    bounds = [(0, s) if a is None else (_sint(a[0]), _sint(a[1])) for a, s in zip(arg, self.shape)]
    for i, ((b, e), s) in enumerate(zip(bounds, self.shape)):
      if not 0 <= sint_value(b) <= sint_value(e) <= sint_value(s):
        raise IndexError(f"shrink: bounds {(b, e)} of axis {i} lie outside [0, {s}] (shape {self.shape})")
    if all(sint_is(b, 0) and (e is s or sint_is(e, s)) for (b, e), s in zip(bounds, self.shape)): return self
    return self._new(self.uop.shrink(tuple(b for b, _ in bounds), tuple(e if sint_is(b, 0) else simplified(e - b) for b, e in bounds)))

  def pad(self: Tensor, padding: Sequence, mode: str = "constant", value: float = 0.0) -> Tensor:
    """Padding as PyTorch's F.pad, (left, right) pairs from the last axis backwards, or one (before, after) pair (or None)
    per axis. Negative amounts cut instead. PAD fills zeros; another `value` is a WHERE over a padded mask."""
    if mode not in PAD_MODES: raise NotImplementedError(f"pad: mode must be one of {PAD_MODES}, got {mode!r}")
    pairs = _pad_pairs(padding, self.ndim)
    if mode != "constant": return self._pad_from_edges(pairs, mode)
    for i, ((b, a), s) in enumerate(zip(pairs, self.shape)):
      if sint_value(s) - _cut(b) - _cut(a) < 0: raise RuntimeError(f"pad: {(b, a)} cuts more than the size {s} of axis {i}")
    x = self.shrink(tuple((_cut(b), s if not _cut(a) else s - _cut(a)) for (b, a), s in zip(pairs, self.shape)))
    if all(sint_is(_added(b), 0) and sint_is(_added(a), 0) for b, a in pairs): return x
    off = tuple(_added(b) for b, _ in pairs)
    new = tuple(simplified(o + s + _added(a)) for o, s, (_, a) in zip(off, x.shape, pairs))
    out = x.uop.pad(off, new)
    if value != 0 or math.copysign(1.0, value) < 0:
      out = UOp(Ops.WHERE, (broadcast_const(True, dtypes.bool, x.shape).pad(off, new), out, broadcast_const(value, x.dtype, new)))
    return x._new(out)

  def _size_per_axis(self: Tensor, op: str, shape, args: tuple) -> tuple:
    """pad_to's and shrink_to's target: sizes or one sequence of them, one per axis, None keeping an axis."""
    shape = tuple(shape) if not args and isinstance(shape, (tuple, list)) else (shape, *args)
    if len(shape) != self.ndim: raise ValueError(f"{op}: shape {shape} needs one size (or None) per axis of shape {self.shape}")
    return shape
  def pad_to(self: Tensor, shape, *args, value: float = 0.0) -> Tensor:
    """Padded at the end of each axis to `shape` (tinygrad's; None keeps an axis), filled with `value`."""
    shape = self._size_per_axis("pad_to", shape, args)
    if any(n is not None and n < s for n, s in zip(shape, self.shape)): raise ValueError(f"pad_to: shape {shape} is smaller than {self.shape}")
    return self.pad([None if n is None else (0, n - s) for n, s in zip(shape, self.shape)], value=value)
  def shrink_to(self: Tensor, shape, *args) -> Tensor:
    """The first `shape` elements of each axis (tinygrad's; None keeps an axis)."""
    return self.shrink([None if n is None else (0, n) for n in self._size_per_axis("shrink_to", shape, args)])

  def _pad_from_edges(self: Tensor, pairs: list[tuple[int, int]], mode: str) -> Tensor:
    """Padding filled from the tensor itself, one axis at a time: each output position reads input position
    `_EDGE_INDEX[mode](i - before, size)` (a gather along the axis, so the gradient flows back to what was read). A
    negative amount cuts from what the padding on that axis made (as PyTorch's reflect and replicate do); circular padding
    cuts first and wraps around what is left, as PyTorch's."""
    out = self
    for a, (before, after) in enumerate(pairs):
      if not before and not after: continue
      n = self.shape[a]
      amounts = (before, after)
      if not isinstance(n, int): raise ValueError(f"pad: mode {mode!r} needs an axis of fixed size, got {n} for axis {a}")
      if n + before + after < 0: raise RuntimeError(f"pad: {amounts} cuts more than the size {n} of axis {a}")
      if mode == "circular" and min(amounts) < 0:  # PyTorch's: the negative amounts cut first, the rest wraps what is left
        cut_before, cut_after = max(-before, 0), max(-after, 0)
        out = out[(slice(None),) * a + (slice(cut_before, n - cut_after),)]
        n, before, after = n - cut_before - cut_after, max(before, 0), max(after, 0)
        if not before and not after: continue
        if max(before, after) > n:  # PyTorch reads memory outside the tensor there
          raise NotImplementedError(f"pad: circular padding {amounts} wraps more than the {n} elements left of axis {a} after its cut")
      if (mode == "reflect" and max(amounts) >= n) or (mode == "circular" and max(amounts) > n) or (mode == "replicate" and n == 0):
        raise ValueError(f"pad: {mode} padding {amounts} does not fit axis {a} of size {n} (reflect: less than it, circular: at most it)")
      idx = _EDGE_INDEX[mode](np.arange(-before, n + after), n)
      out = out[(slice(None),) * a + (idx,)]
    return out

  # ---- built from them ----
  def view(self: Tensor, *shape) -> Tensor:
    """PyTorch's view: a reshape (a lazy tensor has no strides that could make a view impossible)."""
    return self.reshape(*shape)
  def unfold(self: Tensor, dim: int, size: int, step: int) -> Tensor:
    """Every window of `size` elements along `dim`, `step` apart, as a new last axis (torch.Tensor.unfold): a gather of the
    window positions. A 0-d tensor is one element along dim 0 or -1, as PyTorch's."""
    if self.ndim == 0 and dim in (0, -1): return self.reshape(1).unfold(0, size, step)[0]
    d = resolve_dim(dim, self.ndim)
    n = self.shape[d]
    if size < 0 or step < 1 or size > n:
      raise RuntimeError(f"unfold: size {size} and step {step} for an axis of size {n} (need 0 <= size <= {n}, step >= 1)")
    at = np.arange((n - size) // step + 1)[:, None] * step + np.arange(size)[None, :]  # (windows, size)
    out = self[(slice(None),) * d + (at,)]  # the windows and their elements where the axis was
    return out.permute([a for a in range(out.ndim) if a != d + 1] + [d + 1])
  def masked_select(self: Tensor, mask: Tensor) -> Tensor:
    """The elements where the bool mask is true, both broadcast to one shape, as a 1-D tensor in row-major order. The mask
    is read now (the result's length depends on it); the values stay lazy and keep their gradient."""
    if mask.dtype != dtypes.bool: raise TypeError(f"masked_select: the mask must be bool, got {mask.dtype}")
    try: shape = np.broadcast_shapes(self.shape, mask.shape)
    except ValueError:
      raise RuntimeError(f"masked_select: a mask of shape {mask.shape} does not broadcast with the tensor's shape {self.shape}") from None
    return self.expand(shape).reshape(-1)[np.flatnonzero(np.broadcast_to(mask.numpy(), shape))]
  def nonzero(self: Tensor) -> Tensor:
    """The indices of the nonzero elements, one row of ndim indices (position_dtype's) each (torch.nonzero); reads the
    values now."""
    rows = np.argwhere(np.atleast_1d(self.numpy()))[:, :self.ndim]  # 0-d: (n, 0)
    return type(self)(rows.astype(position_dtype(max(self.shape, default=1)).np), device=self.device)
  def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of the (dim1, dim2) planes as a new last axis, above the main one for offset > 0 (torch.diagonal): the
    plane cut to n x n, flattened, padded to n rows of n + 1 and their first column kept."""
    d1, d2 = resolve_dim(dim1, self.ndim), resolve_dim(dim2, self.ndim)
    if d1 == d2: raise RuntimeError(f"diagonal: dim1 and dim2 are both {d1}")
    x = self.permute([a for a in range(self.ndim) if a not in (d1, d2)] + [d1, d2])
    r, c = x.shape[-2:]
    x = x[..., max(0, -offset):, max(0, offset):] if r and c else x
    n = max(0, min(x.shape[-2], x.shape[-1]))
    lead = x.shape[:-2]
    if n == 0: return x[..., :0, :0].reshape(*lead, 0)  # empty, still a view of self: backward gives it zeros, as PyTorch
    x = x[..., :n, :n].reshape(*lead, n * n).pad([None] * len(lead) + [(0, n)])
    return x.reshape(*lead, n, n + 1)[..., 0]
  def diag(self: Tensor, diagonal: int = 0) -> Tensor:
    """torch.diag: a 1-D tensor's values on a square matrix's `diagonal`, or a 2-D tensor's `diagonal`."""
    if self.ndim == 2: return self.diagonal(diagonal)
    if self.ndim != 1: raise RuntimeError(f"diag: expected a 1-D or 2-D tensor, got shape {self.shape}")
    n, k = self.shape[0], abs(diagonal)
    eye = type(self).eye(n, dtype=dtypes.bool, device=self.device)
    square = eye.where(self.reshape(n, 1), 0).cast(self.dtype)  # x[i] at (i, i)
    return square.pad(((0, k), (k, 0)) if diagonal >= 0 else ((k, 0), (0, k)))
  def meshgrid(self: Tensor, *others: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-D tensors (torch.meshgrid): indexing "ij" (matrix) or "xy" (the first two axes swapped)."""
    if indexing not in ("ij", "xy"): raise RuntimeError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = [t.reshape(1) if t.ndim == 0 else t for t in (self, *others)]  # a 0-d tensor counts as one element, as PyTorch
    if any(t.ndim != 1 for t in ts): raise RuntimeError(f"meshgrid: expected 0-D or 1-D tensors, got shapes {[t.shape for t in ts]}")
    shape = tuple(t.shape[0] for t in ts)
    grids = [t.reshape(*(-1 if i == j else 1 for j in range(len(ts)))).expand(*shape) for i, t in enumerate(ts)]
    return tuple(g.transpose(0, 1) for g in grids) if indexing == "xy" and len(ts) > 1 else tuple(grids)
  def transpose(self: Tensor, dim0: int = 1, dim1: int = 0) -> Tensor:
    """Axes dim0 and dim1 swapped."""
    order = list(range(self.ndim))
    d0, d1 = resolve_dim(dim0, self.ndim), resolve_dim(dim1, self.ndim)
    if self.ndim == 0: return self
    order[d0], order[d1] = order[d1], order[d0]
    return self.permute(order)
  @property
  def T(self: Tensor) -> Tensor:
    """All axes reversed (the transpose of a matrix)."""
    return self.permute(tuple(range(self.ndim))[::-1])

  def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Axes start_dim..end_dim (inclusive) merged into one; a 0-d tensor becomes shape (1,)."""
    if self.ndim == 0: return self.reshape(1)
    s, e = resolve_dim(start_dim, self.ndim), resolve_dim(end_dim, self.ndim)
    if s > e: raise RuntimeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def unflatten(self: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Axis `dim` split into `sizes` (one may be -1)."""
    d, sizes = resolve_dim(dim, self.ndim), shape_arg(sizes)
    known = math.prod(s for s in sizes if s != -1)
    if (-1 not in sizes and known != self.shape[d]) or (-1 in sizes and (known == 0 or self.shape[d] % known)):
      raise RuntimeError(f"unflatten: sizes {sizes} do not multiply to the size {self.shape[d]} of dimension {dim}")
    sizes = tuple(self.shape[d] // known if s == -1 else s for s in sizes)
    return self.reshape(self.shape[:d] + sizes + self.shape[d + 1:])
  def rearrange(self: Tensor, formula: str, **sizes: int) -> Tensor:
    """einops' rearrange: "b c (h w) -> b h w c" splits, reorders and merges axes by name; `sizes` gives the sizes a split
    cannot infer (h=4). "..." stands for the axes not named, "()" or "1" for an axis of size 1."""
    if not isinstance(formula, str): raise TypeError(f"rearrange: the formula must be a str, got {type(formula).__name__}")
    if formula.count("->") != 1: raise ValueError(f"rearrange: {formula!r} needs exactly one '->'")
    lhs, rhs = (_einops_side(side, formula) for side in formula.split("->"))
    def members(g: list[str] | str) -> list[str]: return g if isinstance(g, list) else [g]  # a lone axis: a group of one
    names = [n for g in lhs for n in members(g)]
    if sorted(names) != sorted(n for g in rhs for n in members(g)) or len(set(names)) != len(names):
      raise ValueError(f"rearrange: {formula!r} must name each axis once on each side")
    if unknown := set(sizes) - set(names): raise ValueError(f"rearrange: sizes given for {sorted(unknown)}, which {formula!r} does not name")
    if any(isinstance(g, list) and "..." in g for g in lhs): raise ValueError(f"rearrange: '...' cannot be split, as in {formula!r}")
    rest = self.ndim - (len(lhs) - ("..." in lhs))
    if rest < 0 or ("..." not in lhs and rest): raise ValueError(f"rearrange: {formula!r} names {len(lhs)} axes, the tensor has shape {self.shape}")
    size: dict[str, int] = {}
    dims = iter(self.shape)
    for g in lhs:  # each axis of the left side: a name, "..." (the rest), or a group whose sizes multiply to the axis'
      if g == "...": size.update((f"...{i}", next(dims)) for i in range(rest)); continue
      n, group = next(dims), members(g)
      known = math.prod(sizes[x] for x in group if x in sizes)
      free = [x for x in group if x not in sizes]
      if len(free) > 1 or (not free and known != n) or (free and (known == 0 or n % known)):
        raise ValueError(f"rearrange: axis of size {n} cannot split into {group} with sizes {sizes} ({formula!r})")
      size.update({x: sizes[x] for x in group if x in sizes} | {x: n // known for x in free})
    def names_in(g) -> list[str]:  # a group's (or a lone axis') names, "..." as the axes it stands for
      return [a for n in members(g) for a in ([f"...{i}" for i in range(rest)] if n == "..." else [n])]
    left, right = [a for g in lhs for a in names_in(g)], [a for g in rhs for a in names_in(g)]
    x = self.reshape(tuple(size[a] for a in left)).permute([left.index(a) for a in right])
    return x.reshape(tuple(d for g in rhs for d in ([size[a] for a in names_in(g)] if g == "..." else [math.prod(size[a] for a in names_in(g))])))
  def squeeze(self: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """Size-1 axes removed: all of them, or those of `dim` that have size 1 (others are kept, as PyTorch)."""
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dims = {resolve_dim(d, self.ndim) for d in ((dim,) if isinstance(dim, _INT) else dim)}
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1))) if self.ndim else self
  def unsqueeze(self: Tensor, dim: int) -> Tensor:
    """A size-1 axis inserted at `dim` (in [-ndim-1, ndim])."""
    d = resolve_dim(dim, self.ndim + 1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def repeat(self: Tensor, repeats, *args) -> Tensor:
    """The tensor tiled `repeats` times along each axis (more repeats than axes add leading axes), as PyTorch's repeat."""
    reps = shape_arg(repeats, *args)
    if len(reps) < self.ndim: raise ShapeError(f"repeat: {reps} has fewer entries than the tensor has dimensions ({self.shape})")
    if any(r < 0 for r in reps): raise RuntimeError(f"repeat: negative count in {reps}")
    base = (1,) * (len(reps) - self.ndim) + self.shape
    x = self.reshape(tuple(v for s in base for v in (1, s))).expand(tuple(v for r, s in zip(reps, base) for v in (r, s)))
    return x.reshape(tuple(r * s for r, s in zip(reps, base)))
  def repeat_interleave(self: Tensor, repeats: int | Sequence[int] | Tensor, dim: int | None = None) -> Tensor:
    """Each element repeated in place along `dim` (of the flattened tensor when dim is None), as PyTorch's: `repeats`
    times, or, for a 1-D tensor or list of counts (one, or one per element), each its own count; those are read now (the
    result's length depends on them), the values stay lazy and keep their gradient."""
    if dim is None: return self.flatten().repeat_interleave(repeats, 0)
    d = resolve_dim(dim, self.ndim)
    if not isinstance(repeats, _INT):
      counts = np.asarray(repeats.numpy() if isinstance(repeats, MovementMixin) else repeats)
      if counts.ndim > 1 or not np.issubdtype(counts.dtype, np.integer) or (counts < 0).any() or counts.size not in (1, self.shape[d]):
        raise ValueError(f"repeat_interleave: repeats must be non-negative ints, one or one per element of dim {d} (size "
                         f"{self.shape[d]}), got {repeats!r}")
      if counts.size == 1: return self.repeat_interleave(int(counts.reshape(-1)[0]), d)
      return self[(slice(None),) * d + (np.repeat(np.arange(self.shape[d]), counts),)]
    if repeats < 0: raise ValueError(f"repeat_interleave: repeats must be a non-negative int, got {repeats!r}")
    x = self.unsqueeze(d + 1)
    return x.expand(*x.shape[:d + 1], repeats, *x.shape[d + 2:]).reshape(*self.shape[:d], self.shape[d] * repeats, *self.shape[d + 1:])
  def split(self: Tensor, split_size: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces along `dim`: of `split_size` each (the last may be smaller), or of the listed sizes (which must add up)."""
    d = resolve_dim(dim, self.ndim)
    n = self.shape[d]
    if isinstance(split_size, _INT):
      if split_size <= 0: raise ValueError(f"split: split_size must be positive, got {split_size}")
      sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else []) or [0]
    else:
      sizes = list(split_size)
      if sum(sizes) != n or any(s < 0 for s in sizes): raise RuntimeError(f"split: sizes {sizes} must add up to the size {n} of dimension {dim}")
    offs = np.cumsum([0] + sizes).tolist()
    return tuple(self.shrink(tuple((o, o + s) if i == d else None for i in range(self.ndim))) for o, s in zip(offs, sizes))
  def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most `chunks` pieces of equal size along `dim` (the last may be smaller), as PyTorch's chunk."""
    if chunks <= 0: raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    return self.split(max(1, -(-self.shape[resolve_dim(dim, self.ndim)] // chunks)), dim)

  def cat(self: Tensor | Sequence[Tensor], *others: Tensor, dim: int = 0) -> Tensor:
    """Tensors joined along an existing axis: a.cat(b, c, dim=0) or Tensor.cat([a, b, c], dim=0). Each is padded out to the
    full size with zeros and the pieces are added (OR for bool): one lazy elementwise graph. Dtypes promote."""
    ts = _joined_tensors("cat", self, others)
    dt = least_upper_dtype(*(t.dtype for t in ts))
    skipped = []
    if any(t.ndim != 1 for t in ts):  # PyTorch's legacy rule: a 1-d empty operand is skipped beside tensors of other ranks
      skipped, ts = [t for t in ts if t.shape == (0,)], [t for t in ts if t.shape != (0,)] or ts
    first = ts[0]
    if first.ndim == 0 or any(t.ndim == 0 for t in ts): raise ZeroDimError("cat: zero-dimensional tensors cannot be concatenated; use stack")
    d = resolve_dim(dim, first.ndim)
    for t in ts[1:]:
      if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != d):
        raise RuntimeError(f"cat: shapes {[x.shape for x in ts]} must match except in dimension {dim}")
      if t.device != first.device: raise RuntimeError(f"cat: tensors on different devices, {first.device} and {t.device}")
    total, off, out = sum(t.shape[d] for t in ts), 0, None
    for t in ts:
      piece = t.cast(dt).pad(tuple((off, total - off - t.shape[d]) if i == d else None for i in range(first.ndim)))
      out, off = piece if out is None else out + piece, off + t.shape[d]
    for t in skipped:  # still in the graph, adding their empty sum, 0: their gradient is empty rather than None, as PyTorch's
      if t.requires_grad: out = out + t.cast(dt).sum()
    return out
  def stack(self: Tensor | Sequence[Tensor], *others: Tensor, dim: int = 0) -> Tensor:
    """Tensors of one shape joined along a new axis `dim`: each unsqueezed, then cat."""
    ts = _joined_tensors("stack", self, others)
    if any(t.shape != ts[0].shape for t in ts): raise RuntimeError(f"stack: every tensor needs the same shape, got {[t.shape for t in ts]}")
    d = resolve_dim(dim, ts[0].ndim + 1)
    return type(ts[0]).cat(*(t.unsqueeze(d) for t in ts), dim=d)
