"""dtypes: scalar, vector and pointer types, their ranges, numpy mapping and the promotion lattice."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from functools import cache
from typing import ClassVar

import numpy as np


class AddrSpace(enum.Enum):
  """Where a buffer lives: device memory, workgroup-shared memory, or registers."""
  GLOBAL = enum.auto()
  LOCAL = enum.auto()
  REG = enum.auto()
  def __repr__(self): return f"AddrSpace.{self.name}"


@dataclass(frozen=True, eq=False)
class DType:
  """A scalar type, or a vector of `count` scalars when count > 1. Ordered by promotion priority.

  Interned: building the same type twice gives the same object, so == and hash are identity (fast in every pattern match)."""
  priority: int   # rank in the promotion lattice; ties broken by itemsize
  itemsize: int   # bytes of one scalar
  name: str
  fmt: str | None  # struct/numpy format character, None for types numpy lacks (bfloat16, index, void)
  count: int = 1
  _interned: ClassVar[dict[tuple, DType]] = {}

  def __new__(cls, *args, **kwargs):
    given = dict(zip((f.name for f in fields(cls)), args), **kwargs)
    key = (cls, *(given.get(f.name, f.default) for f in fields(cls)))  # defaults filled in: one key per distinct type
    if (dt := DType._interned.get(key)) is None: dt = DType._interned[key] = super().__new__(cls)
    return dt
  def __reduce__(self): return (type(self), tuple(getattr(self, f.name) for f in fields(self)))

  def vec(self, n: int) -> DType:
    """This scalar type as an n-wide vector."""
    if self.count != 1: raise ValueError(f"vec of a vector dtype {self}")
    if n < 1: raise ValueError(f"vec width must be >= 1, got {n}")
    return self if n == 1 else DType(self.priority, self.itemsize, self.name, self.fmt, n)
  def scalar(self) -> DType: return self if self.count == 1 else DType(self.priority, self.itemsize, self.name, self.fmt)
  def ptr(self, size: int = -1, addrspace: AddrSpace = AddrSpace.GLOBAL) -> PtrDType:
    """A pointer to `size` elements of this type (-1: unknown size) in `addrspace`."""
    return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self.count, self, addrspace, size)
  @property
  def nbytes(self) -> int: return self.itemsize * self.count
  @property
  def min(self) -> int | float | bool: return dtype_range(self.scalar())[0]
  @property
  def max(self) -> int | float | bool: return dtype_range(self.scalar())[1]
  @property
  def np(self) -> np.dtype | None:
    """The numpy dtype of one scalar, or None where numpy has none (bfloat16, void)."""
    return None if self.fmt is None else np.dtype(self.fmt)
  def __repr__(self): return f"dtypes.{self.name}" + (f".vec({self.count})" if self.count > 1 else "")
  def _order(self): return (self.priority, self.itemsize, self.name, self.count)
  def __lt__(self, other: DType): return self._order() < other._order()


@dataclass(frozen=True, eq=False, repr=False)
class PtrDType(DType):
  """A pointer: what a BUFFER or PARAM in a kernel has. `base` is the pointee type."""
  base: DType = None  # type: ignore[assignment]
  addrspace: AddrSpace = AddrSpace.GLOBAL
  size: int = -1
  def vec(self, n: int) -> DType: raise ValueError(f"vec of a pointer dtype {self}")
  def scalar(self) -> DType: return self
  def __repr__(self): return f"{self.base!r}.ptr({self.size}, {self.addrspace!r})"


class dtypes:
  """Every dtype of the spec by name, and the questions asked about them."""
  void = DType(-1, 0, "void", None)
  index = DType(-1, 8, "index", "q")  # integer of index arithmetic: 64-bit, never stored in a buffer
  bool = DType(0, 1, "bool", "?")
  int8 = DType(1, 1, "int8", "b")
  uint8 = DType(2, 1, "uint8", "B")
  int16 = DType(3, 2, "int16", "h")
  uint16 = DType(4, 2, "uint16", "H")
  int32 = DType(5, 4, "int32", "i")
  uint32 = DType(6, 4, "uint32", "I")
  int64 = DType(7, 8, "int64", "q")
  uint64 = DType(8, 8, "uint64", "Q")
  float16 = DType(9, 2, "float16", "e")
  bfloat16 = DType(10, 2, "bfloat16", None)
  float32 = DType(11, 4, "float32", "f")
  float64 = DType(12, 8, "float64", "d")
  half, float, double, char, uchar, short, ushort, long, ulong = float16, float32, float64, int8, uint8, int16, uint16, int64, uint64
  int, uint = int32, uint32
  default_float: DType = float32
  default_int: DType = int32

  @staticmethod
  def is_float(dt: DType) -> bool: return dt.scalar() in FLOATS
  @staticmethod
  def is_int(dt: DType) -> bool: return dt.scalar() in INTS or dt.scalar() == dtypes.index
  @staticmethod
  def is_unsigned(dt: DType) -> bool: return dt.scalar() in UINTS
  @staticmethod
  def is_bool(dt: DType) -> bool: return dt.scalar() == dtypes.bool
  @staticmethod
  def min(dt: DType) -> int | float | bool:
    """The smallest value of `dt` (tinygrad's dtypes.min; the same as dt.min): -inf for floats."""
    return dt.min
  @staticmethod
  def max(dt: DType) -> int | float | bool:
    """The largest value of `dt` (tinygrad's dtypes.max; the same as dt.max): inf for floats."""
    return dt.max
  @staticmethod
  def from_py(x) -> DType:
    """The dtype of a Python scalar, as PyTorch infers it (bool, default int or int64/uint64 for larger ints, default float)."""
    if isinstance(x, (bool, np.bool_)): return dtypes.bool
    if isinstance(x, (int, np.integer)):  # past the default int's range, the smallest that holds it, as PyTorch picks int64
      if -(2 ** 31) <= x < 2 ** 31: return dtypes.default_int
      if -(2 ** 63) <= x < 2 ** 63: return dtypes.int64
      if 0 <= x < 2 ** 64: return dtypes.uint64
      raise OverflowError(f"the integer {x} fits no tinyspec dtype (int64 and uint64 are the widest)")
    if isinstance(x, (float, np.floating)): return dtypes.default_float
    raise TypeError(f"no dtype for Python value {x!r} of type {type(x).__name__}")
  @staticmethod
  def from_np(npdt) -> DType:
    """The dtype of a numpy dtype."""
    npdt = np.dtype(npdt)
    for dt in ALL:
      if dt.fmt is not None and dt != dtypes.index and np.dtype(dt.fmt) == npdt: return dt
    raise TypeError(f"numpy dtype {npdt} has no tinyspec dtype")
  @staticmethod
  def from_name(name: str) -> DType:
    """Look up a dtype by name: "float32", or an alias such as "float" or "half"."""
    dt = getattr(dtypes, name, None)
    if not isinstance(dt, DType): raise UnknownDTypeName(f"unknown dtype name {name!r}")
    return dt

def position_dtype(count: int) -> DType:
  """The dtype of the positions 0..count-1 that a Tensor op hands back (argmax, the indices of sort, topk, cummax and
  max_pool2d, nonzero, unique, multinomial, randperm): Tensor.arange(count)'s. That is the default int, int32 as in tinygrad, and
  int64 where count - 1 does not fit it. `dtypes.default_int = dtypes.int64` gives PyTorch's int64 everywhere."""
  return dtypes.from_py(max(count - 1, 0))

class UnknownDTypeName(ValueError, AttributeError):
  """A dtype name that is not an attribute of `dtypes`: a ValueError, and the AttributeError that `getattr(dtypes, name)`
  (tinygrad's lookup) raises, so code written for either catches it."""

FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
UINTS = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
SINTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
INTS = SINTS + UINTS
ALL = (dtypes.bool,) + INTS + FLOATS + (dtypes.index, dtypes.void)

_FLOAT_MAX = {dtypes.float16: 65504.0, dtypes.bfloat16: 3.3895313892515355e38, dtypes.float32: 3.4028234663852886e38,
              dtypes.float64: 1.7976931348623157e308}

@cache
def dtype_range(dt: DType) -> tuple:
  """(min, max) a value of scalar dtype `dt` can hold; floats span (-inf, inf) since they hold infinities."""
  if dt == dtypes.bool: return (False, True)
  if dt in FLOATS: return (-math.inf, math.inf)
  if dt in UINTS: return (0, 2 ** (8 * dt.itemsize) - 1)
  if dt in SINTS or dt == dtypes.index: return (-2 ** (8 * dt.itemsize - 1), 2 ** (8 * dt.itemsize - 1) - 1)
  raise ValueError(f"{dt} has no value range")

def finite_max(dt: DType) -> float:
  """The largest finite value of a float dtype."""
  return _FLOAT_MAX[dt.scalar()]

def float_to_int(x: np.ndarray, to: np.dtype) -> np.ndarray:
  """Float to integer as every device casts (C leaves the out-of-range cases undefined; tinyspec does not): truncate
  toward zero; a result in [-2**63, 2**64) then wraps to the target's width, as int64 or uint64 arithmetic would; nan,
  infinities and anything outside that range give 0. The renderers implement the same rule; this is its numpy reference."""
  with np.errstate(invalid="ignore"):
    t = np.trunc(np.asarray(x, np.float64))
    signed, high = (t >= -(2.0 ** 63)) & (t < 2.0 ** 63), (t >= 2.0 ** 63) & (t < 2.0 ** 64)
    out = np.where(signed, t, 0).astype(np.int64).view(np.uint64)
    out = np.where(high, np.where(high, t, 0).astype(np.uint64), out)
  return out.astype(to)

# bfloat16, which numpy lacks: its values are held in float32 (which holds each exactly), its memory as the raw 16 bits,
# the top half of the float32's. The one home of its rounding: the renderers, the folder and the interpreter all use it.
def bf16_round(x) -> np.ndarray:
  """x (a number or an array of them, of any dtype) rounded once to bfloat16: to nearest, ties to even, 8 significant bits
  down to the subnormal 2**-133, past the largest bfloat16 to infinity, nan kept. As float32. A float64 is rounded once,
  as hardware converts a double; round it to float32 first for the conversion through float32."""
  with np.errstate(over="ignore", invalid="ignore"):  # (a signalling nan is "invalid" to widen)
    x = np.asarray(x, np.float64)
    q = np.maximum(np.frexp(x)[1], -125) - 8  # bfloat16 values around x are 2**q apart (8 bits; a fixed step below the normal range)
    # the scalings by powers of two are exact: rint's rounding, ties to even, is the only one; 2**128 overflows to inf
    return np.ldexp(np.rint(np.ldexp(x, -q)), q).astype(np.float32)

def bf16_to_bits(x) -> np.ndarray:
  """bfloat16 values (float32 holding them exactly, as bf16_round gives them) as their raw bits, uint16."""
  return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)

def bf16_from_bits(bits) -> np.ndarray:
  """Raw bfloat16 bits (any 16-bit dtype) as the float32 values they are: the widening is exact."""
  return (np.asarray(bits).view(np.uint16).astype(np.uint32) << 16).view(np.float32)

# The promotion lattice: each dtype's direct parents. The result of mixing two dtypes is the smallest common ancestor,
# so bool < ints < floats, signed and unsigned of one size meet in the next wider signed type, and any int meets a float in that float.
_PARENTS: dict[DType, tuple[DType, ...]] = {
  dtypes.bool: (dtypes.int8, dtypes.uint8),
  dtypes.int8: (dtypes.int16,), dtypes.int16: (dtypes.int32,), dtypes.int32: (dtypes.int64,),
  dtypes.int64: (dtypes.float16, dtypes.bfloat16),
  dtypes.uint8: (dtypes.int16, dtypes.uint16), dtypes.uint16: (dtypes.int32, dtypes.uint32),
  dtypes.uint32: (dtypes.int64, dtypes.uint64), dtypes.uint64: (dtypes.float16, dtypes.bfloat16),
  dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,), dtypes.float32: (dtypes.float64,), dtypes.float64: (),
}

@cache
def _ancestors(dt: DType) -> frozenset[DType]:
  return frozenset((dt,)).union(*(_ancestors(p) for p in _PARENTS[dt]))

def least_upper_dtype(*dts: DType) -> DType:
  """The dtype two or more dtypes promote to, as PyTorch does: int32 with float16 is float16, uint8 with int8 is int16."""
  for dt in dts:
    if dt.scalar() not in _PARENTS: raise TypeError(f"{dt} takes no part in type promotion")
  common = frozenset.intersection(*(_ancestors(dt.scalar()) for dt in dts))
  return min(common, key=lambda d: (d.priority, d.itemsize))

def _category(dt: DType) -> int: return 2 if dtypes.is_float(dt) else 0 if dt == dtypes.bool else 1  # bool < int < float

def scalar_dtype(dt: DType, v: bool | int | float) -> DType:
  """The dtype of `tensor op v` for a tensor of dtype dt and a Python scalar v (PyTorch's weak scalars): v lifts the
  category (bool < int < float) to its default, never the width; a bool tensor with an int past the default int's range
  takes int64, as PyTorch (mask + 2**40 is not wrapped)."""
  if isinstance(v, bool): return dt
  if isinstance(v, int):
    if dt != dtypes.bool: return dt
    return dtypes.default_int if dtypes.default_int.min <= v <= dtypes.default_int.max else dtypes.int64
  return dt if dtypes.is_float(dt) else dtypes.default_float

def promoted_dtype(a: DType, b: DType, a_is_0d: bool = False, b_is_0d: bool = False) -> DType:
  """The dtype of `x op y` for tensors of dtypes a and b, PyTorch's: a 0-d tensor beside one with axes counts only by its
  category, as a Python scalar does (float16 times a 0-d float32 is float16, int8 plus a 0-d int64 int8), unless its
  category is higher (then its own dtype: int8 times a 0-d float64 is float64); otherwise least_upper_dtype."""
  if a_is_0d != b_is_0d:
    shaped, zero_d = (b, a) if a_is_0d else (a, b)
    return zero_d if _category(zero_d) > _category(shaped) else shaped
  return least_upper_dtype(a, b)

def to_dtype(x) -> DType:
  """Accept a DType, a name ("float32") or a numpy dtype, as users pass them."""
  if isinstance(x, DType): return x
  if isinstance(x, str): return dtypes.from_name(x)
  return dtypes.from_np(x)
