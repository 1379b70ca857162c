"""Device memory: the `Allocator` interface a plugin implements, a caching `LRUAllocator`, the numpy-backed `HostAllocator`,
and `Buffer`, the typed, lazily allocated piece of a device's memory that the rest of tinyspec holds.

An allocator deals in *handles*: whatever the device uses to name a block of memory (a pointer, a cl.Buffer, a numpy
array). Only the allocator and the device's `Program` look inside one; everyone else holds a `Buffer`.
"""
from __future__ import annotations

import operator
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

import numpy as np

from tinyspec.device.registry import Device
from tinyspec.dtype import DType, PtrDType, dtypes


class Allocator:
  """Allocates, frees and copies a device's memory. A plugin subclasses this (or, better, `LRUAllocator`).

  `options` is a device-specific, hashable description of the kind of memory wanted (host-pinned, uncached ...); None is
  ordinary device memory. Out of memory must be raised as `MemoryError`, so that caches can be flushed and the
  allocation retried. Copies may return before they finish only if `Runtime.synchronize` waits for them; `copyout` must
  have filled `dest` when it returns."""

  def alloc(self, nbytes: int, options: Hashable | None = None) -> Any:
    """A handle to `nbytes` of fresh memory (contents undefined)."""
    raise NotImplementedError(f"{type(self).__name__} does not implement alloc")

  def free(self, handle: Any, nbytes: int, options: Hashable | None = None) -> None:
    """Give back memory from `alloc(nbytes, options)`; called once per handle, never for handles made by `view`."""
    raise NotImplementedError(f"{type(self).__name__} does not implement free")

  def copyin(self, dest: Any, src: memoryview) -> None:
    """Copy host bytes `src` (C-contiguous, format "B", exactly the size of `dest`) into the memory `dest` names."""
    raise NotImplementedError(f"{type(self).__name__} does not implement copyin")

  def copyout(self, dest: memoryview, src: Any) -> None:
    """Copy the memory `src` names into the writable host bytes `dest` (format "B", exactly its size)."""
    raise NotImplementedError(f"{type(self).__name__} does not implement copyout")

  def view(self, handle: Any, offset: int, nbytes: int) -> Any:
    """A handle to bytes [offset, offset + nbytes) of `handle`'s memory, sharing it. Optional: `supports_view` says whether
    it is implemented. The view is never freed; the Buffer that owns `handle` outlives it."""
    raise NotImplementedError(f"{type(self).__name__} cannot make views of its memory")

  def as_numpy(self, handle: Any, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """A numpy array of `dtype` and `shape` over `handle`'s memory, no copy: only for memory the host can address.
    Optional: `supports_as_numpy` says whether it is implemented."""
    raise NotImplementedError(f"{type(self).__name__}'s memory is not addressable from the host")

  @property
  def supports_view(self) -> bool:
    """Whether `view` is implemented (a subclass overrides it)."""
    return type(self).view is not Allocator.view

  @property
  def supports_as_numpy(self) -> bool:
    """Whether `as_numpy` is implemented (a subclass overrides it)."""
    return type(self).as_numpy is not Allocator.as_numpy

def alloc_cache_max_bytes() -> int:
  """How much freed memory an LRUAllocator keeps for reuse: $TINYSPEC_ALLOC_CACHE_MB megabytes, 1024 by default."""
  return int(float(os.environ.get("TINYSPEC_ALLOC_CACHE_MB", "") or 1024) * 2**20)

class LRUAllocator(Allocator):
  """An allocator that keeps freed memory for reuse: a later `alloc` of the same size and options takes it back instead of
  asking the device, which is slow on most. Subclasses implement `_alloc` and `_free` (the device's real calls) in place of
  `alloc` and `free`.

  The memory kept is capped (`alloc_cache_max_bytes`): past the cap, the sizes freed longest ago go back to the device, so
  a program that runs many shapes does not keep a buffer of each. When `_alloc` raises MemoryError, the cached memory is
  released (`free_cache`) and the allocation tried once more. Safe to use from several threads."""

  def __init__(self):
    self.cache: OrderedDict[tuple[int, Hashable], list[Any]] = OrderedDict()
    """Freed handles waiting for reuse, by (nbytes, options), the key freed into least recently first."""
    self.cached_bytes = 0
    self.lock = threading.Lock()

  def _alloc(self, nbytes: int, options: Hashable | None) -> Any:
    """Ask the device for `nbytes` of memory; raise MemoryError when it has none."""
    raise NotImplementedError(f"{type(self).__name__} does not implement _alloc")

  def _free(self, handle: Any, nbytes: int, options: Hashable | None) -> None:
    """Give memory back to the device for real."""
    raise NotImplementedError(f"{type(self).__name__} does not implement _free")

  def alloc(self, nbytes: int, options: Hashable | None = None) -> Any:
    with self.lock:
      if handles := self.cache.get(key := (nbytes, options)):
        self.cached_bytes -= nbytes
        if len(handles) == 1: del self.cache[key]
        return handles.pop()
    try: return self._alloc(nbytes, options)
    except MemoryError: pass  # retried below, outside the handler: a second refusal is then reported once, not chained to the first
    self.free_cache()
    return self._alloc(nbytes, options)

  def free(self, handle: Any, nbytes: int, options: Hashable | None = None) -> None:
    if nbytes > (cap := alloc_cache_max_bytes()): return self._free(handle, nbytes, options)  # would push out everything else
    released = []
    with self.lock:
      self.cache.setdefault(key := (nbytes, options), []).append(handle)
      self.cache.move_to_end(key)
      self.cached_bytes += nbytes
      while self.cached_bytes > cap:
        (n, opts), handles = next(iter(self.cache.items()))
        released.append((handles.pop(0), n, opts))
        if not handles: del self.cache[(n, opts)]
        self.cached_bytes -= n
    for h, n, opts in released: self._free(h, n, opts)  # outside the lock: a device call may be slow

  def free_cache(self) -> None:
    """Release every cached handle to the device."""
    with self.lock: cache, self.cache, self.cached_bytes = self.cache, OrderedDict(), 0
    for (nbytes, options), handles in cache.items():
      for handle in handles: self._free(handle, nbytes, options)

_ALIGN = 64  # a cache line, and enough for any vector load on the host

class HostAllocator(LRUAllocator):
  """Host memory as 64-byte aligned numpy uint8 arrays: the handles are the arrays, so `as_numpy` and `view` copy nothing.
  The built-in PYTHON device uses it, and so can any device whose kernels run on the host."""

  def _alloc(self, nbytes: int, options: Hashable | None) -> np.ndarray:
    try: raw = np.empty(nbytes + _ALIGN, np.uint8)
    except (MemoryError, ValueError):  # ValueError: past numpy's largest array
      raise MemoryError(f"the host has {format_bytes(_host_memory())} of memory") from None
    start = -raw.ctypes.data % _ALIGN
    return raw[start:start + nbytes]

  def _free(self, handle: np.ndarray, nbytes: int, options: Hashable | None) -> None: pass  # numpy frees it with its last reference
  def copyin(self, dest: np.ndarray, src: memoryview) -> None: dest[:] = np.frombuffer(src, np.uint8)
  def copyout(self, dest: memoryview, src: np.ndarray) -> None: np.frombuffer(dest, np.uint8)[:] = src
  def view(self, handle: np.ndarray, offset: int, nbytes: int) -> np.ndarray: return handle[offset:offset + nbytes]
  def as_numpy(self, handle: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray: return handle.view(dtype).reshape(shape)

def _host_memory() -> int:
  try: return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
  except (ValueError, OSError, AttributeError): return 0  # not POSIX: unknown

def format_bytes(n: int) -> str:
  """`n` bytes for a human: '512 B', '3.0 KiB', '1.0 TiB'."""
  unit = "B"
  for larger in ("KiB", "MiB", "GiB", "TiB"):
    if n < 1024: break
    n, unit = n / 1024, larger
  return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"

def buffer_np_dtype(dt: DType) -> np.dtype:
  """The numpy dtype a Buffer of `dt` reads and writes: its own, or uint16 (the raw bits) for bfloat16, which numpy lacks."""
  return np.dtype(np.uint16) if dt is dtypes.bfloat16 else dt.np

class Buffer:
  """`size` elements of `dtype` in `device`'s memory, allocated on first need and given back to the allocator when
  garbage-collected (or `free`d).

  With `base`, it is a *view*: `size` elements of `dtype` starting `offset` bytes into `base`'s memory, sharing it. A view
  keeps its base alive and never frees it; views of views are views of the first base. The memory comes from
  `Device[device].allocator`; `options` (hashable, device-specific) say what kind, and views take their base's."""

  def __init__(self, device: str, size: int, dtype: DType, base: Buffer | None = None, offset: int = 0, options: Hashable | None = None):
    if not isinstance(dtype, DType) or isinstance(dtype, PtrDType) or dtype.count != 1 or dtype in (dtypes.index, dtypes.void):
      raise TypeError(f"a Buffer holds a scalar dtype that can be stored, got {dtype!r}")
    if (size := operator.index(size)) < 0: raise ValueError(f"Buffer size must be >= 0 elements, got {size}")
    self.device, self.size, self.dtype = Device.canonicalize(device), size, dtype
    if base is not None:
      if base.device != self.device: raise ValueError(f"a view on {self.device} of a buffer on {base.device}")
      if options is not None and options != base.options: raise ValueError(f"a view has its base's options {base.options!r}, got {options!r}")
      if (offset := operator.index(offset)) < 0 or offset + self.nbytes > base.nbytes:
        raise ValueError(f"view of bytes [{offset}, {offset + self.nbytes}) is out of range of {base!r}, which has bytes [0, {base.nbytes})")
      offset, base, options = base.offset + offset, base.base, base.options
    elif offset != 0: raise ValueError(f"offset={offset} needs a base buffer to be an offset into")
    self._base, self.offset, self.options = base, offset, options
    self._handle: Any = None
    self._allocator: Allocator | None = None
    self._finalizer: weakref.finalize | None = None
    self._freed = False

  @property
  def base(self) -> Buffer:
    """The buffer that owns the memory: itself, unless this is a view."""
    return self if self._base is None else self._base

  @property
  def is_view(self) -> bool: return self._base is not None

  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize

  @property
  def is_allocated(self) -> bool:
    """Whether the memory exists now (for a view: its base's). False again once freed."""
    if self._freed: return False
    return self._base.is_allocated if self._base is not None else self._handle is not None

  def allocate(self) -> Buffer:
    """Get the memory now if it is not there yet (for a view: its base's). Returns self."""
    self._check_live()
    if self._base is not None: self._base.allocate()
    elif self._handle is None:
      self._allocator = allocator = Device[self.device].allocator
      try: self._handle = allocator.alloc(self.nbytes, self.options)
      except MemoryError as e:  # the allocator says why (and the limit, where it knows it); the device and the size are said here
        raise MemoryError(f"{self.device} cannot allocate {self.nbytes} bytes ({format_bytes(self.nbytes)}) for {self!r}: {e}") from None
      self._finalizer = weakref.finalize(self, allocator.free, self._handle, self.nbytes, self.options)
      self._finalizer.atexit = False  # at interpreter exit the device may already be gone; the process frees everything anyway
    return self

  def free(self) -> None:
    """Give the memory back to the allocator now (a view only drops itself); any later use raises."""
    if self._finalizer is not None: self._finalizer()
    self._handle, self._freed = None, True

  @property
  def allocator(self) -> Allocator:
    """The allocator the memory came from; the buffer must be allocated."""
    self._check_live()
    if not self.is_allocated: raise RuntimeError(f"{self!r} is not allocated yet: copyin or allocate() first")
    return self.base._allocator  # type: ignore[return-value]

  @property
  def handle(self) -> Any:
    """The allocator's handle to this buffer's memory (what a `Program` is called with); the buffer must be allocated."""
    if self._base is None and self._handle is not None: return self._handle  # the common case, checked first: it is on every launch
    allocator = self.allocator
    if self._base is None: return self._handle
    if self._handle is None:
      if not allocator.supports_view: raise NotImplementedError(f"device {self.device} cannot make views of its memory ({type(allocator).__name__})")
      self._handle = allocator.view(self._base._handle, self.offset, self.nbytes)
    return self._handle

  def copyin(self, arr: np.ndarray) -> Buffer:
    """Copy `arr` in, allocating first if needed. It must have this buffer's numpy dtype and `size` elements (any shape).
    Returns self."""
    if not isinstance(arr, np.ndarray): raise TypeError(f"copyin takes a numpy array, got {type(arr).__name__}")
    if arr.dtype != (want := buffer_np_dtype(self.dtype)):
      raise TypeError(f"copyin of a {arr.dtype} array into a {self.dtype.name} buffer (needs {want})")
    if arr.size != self.size: raise ValueError(f"copyin of {arr.size} elements into a buffer of {self.size} elements")
    self.allocate()
    self.allocator.copyin(self.handle, memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8)))
    return self

  def numpy(self) -> np.ndarray:
    """A copy of the contents: a new 1-D array of `size` elements (bfloat16 as its uint16 bits)."""
    out = np.empty(self.size, buffer_np_dtype(self.dtype))
    self.allocator.copyout(memoryview(out.view(np.uint8)), self.handle)
    return out

  def as_numpy(self) -> np.ndarray:
    """The contents as a 1-D numpy array sharing the memory, no copy; only where the allocator `supports_as_numpy`."""
    allocator, handle = self.allocator, self.handle
    if not allocator.supports_as_numpy: raise NotImplementedError(f"device {self.device}'s memory is not host-addressable; numpy() copies it out")
    return allocator.as_numpy(handle, buffer_np_dtype(self.dtype), (self.size,))

  def view(self, size: int, dtype: DType, offset: int = 0) -> Buffer:
    """A Buffer of `size` elements of `dtype` starting `offset` bytes into this one, sharing its memory."""
    return Buffer(self.device, size, dtype, base=self, offset=offset)

  def _check_live(self) -> None:
    if self._freed or (self._base is not None and self._base._freed): raise RuntimeError(f"use of a freed buffer: {self!r}")

  def __repr__(self):
    view = f" view of {self._base.nbytes} bytes at +{self.offset}" if self._base is not None else ""
    return f"<Buffer {self.device} {self.size} x {self.dtype.name}{view}{' (freed)' if self._freed else ''}>"
