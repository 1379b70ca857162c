"""Model state: finding a model's tensors, state dicts, and the safetensors file format.

get_state_dict walks an object's attributes, lists, tuples and dicts and names every Tensor by its path ("layers.0.weight",
PyTorch's names for the same layout); get_parameters is its tensors, each once. load_state_dict checks everything first
and changes nothing on an error. torch_load reads a checkpoint written by torch.save, without PyTorch and without running
any of the pickle's code.

safe_save / safe_load implement the safetensors format (https://huggingface.co/docs/safetensors) directly:
  8 bytes   N, the header's length, an unsigned little-endian 64-bit int
  N bytes   a UTF-8 JSON object: name -> {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, and optionally
            "__metadata__": {str: str}. Written padded with spaces to a multiple of 8 bytes.
  the rest  the tensors' bytes, row-major and little-endian; offsets count from the first byte after the header, and the
            tensors cover this part exactly (no gaps, no overlaps).
Loading checks the header and every tensor's dtype, shape and place against the file's size before reading any data, so a
bad file (cut short, padded, or malformed in any way) raises a SafetensorsError naming the problem and loads nothing; a good
one is memory-mapped, not read whole. Saving writes a temporary file beside the target and renames it into place, so a save
that fails leaves the old file as it was."""
from __future__ import annotations

import collections
import contextlib
import errno
import json
import math
import os
import pickle
import secrets
import stat
import types
import zipfile
from collections.abc import Callable, Iterator
from typing import IO, Any

import numpy as np

from tinyspec.device import Device
from tinyspec.dtype import DType, dtypes
from tinyspec.engine import realize as engine
from tinyspec.tensor import Tensor

# ---- state dicts ----

def _walk(obj: Any, prefix: str, seen: set[int]) -> Iterator[tuple[str, Tensor]]:
  if isinstance(obj, Tensor): yield prefix, obj; return
  if id(obj) in seen: return  # a cycle (a layer holding its parent) is walked once
  if isinstance(obj, dict): items = obj.items()
  elif isinstance(obj, (list, tuple)): items = enumerate(obj)
  elif hasattr(obj, "__dict__") and not isinstance(obj, (type, types.ModuleType)): items = vars(obj).items()
  else: return
  seen = seen | {id(obj)}
  for k, v in items: yield from _walk(v, f"{prefix}.{k}" if prefix else str(k), seen)

def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
  """Every Tensor reachable from `obj` through attributes, lists, tuples and dicts, by dotted path: {"l1.weight": ...}.
  `prefix` goes in front of every name (joined with a dot)."""
  return dict(_walk(obj, prefix.rstrip("."), set()))

def get_parameters(obj: Any) -> list[Tensor]:
  """The Tensors of get_state_dict(obj), each once (a tensor shared by two layers appears once)."""
  return list({id(t): t for t in get_state_dict(obj).values()}.values())

def load_state_dict(obj: Any, state_dict: dict[str, Tensor | np.ndarray], strict: bool = True) -> None:
  """Give each of obj's tensors the value in `state_dict` under its name, in place: cast to the tensor's dtype and moved to
  its device, or split over its devices along the same axis (as PyTorch's copy). Shapes must match; with `strict`, the
  names must match exactly. Every problem is reported together in one RuntimeError and nothing is changed; on success
  all new values are realized in one call."""
  own = get_state_dict(obj)
  missing = [k for k in own if k not in state_dict]
  unexpected = [k for k in state_dict if k not in own]
  sizes = [f"size mismatch for {k}: copying a param with shape {tuple(state_dict[k].shape)} from checkpoint, the shape in the current "
           f"model is {t.shape}" for k, t in own.items() if k in state_dict and tuple(state_dict[k].shape) != t.shape]
  errors = sizes + ([f"Missing key(s) in state_dict: {', '.join(map(repr, missing))}"] if strict and missing else []) + \
    ([f"Unexpected key(s) in state_dict: {', '.join(map(repr, unexpected))}"] if strict and unexpected else [])
  if errors: raise RuntimeError(f"Error(s) in loading state_dict for {type(obj).__name__}:\n\t" + "\n\t".join(errors))
  todo = []
  for k, t in own.items():
    if k not in state_dict: continue
    v = state_dict[k]
    v = v if isinstance(v, Tensor) else Tensor(np.asarray(v))
    if v.device != t.device or v.uop.axis != t.uop.axis:  # gathered onto one device, then split as the model's (or replicated)
      if isinstance(v.device, tuple): v = v.to(v.device[0])
      v = v.shard(t.device, t.uop.axis) if isinstance(t.device, tuple) else v.to(t.device)
    t.uop = v.cast(t.dtype).uop
    todo.append(t)
  if todo: Tensor.realize(*todo)

# ---- safetensors ----

class SafetensorsError(ValueError):
  """A safetensors file that does not follow the format, or a state dict that cannot be written as one."""

_ST_DTYPES: dict[str, DType] = {"BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8, "U16": dtypes.uint16, "I16": dtypes.int16,
                                "F16": dtypes.float16, "BF16": dtypes.bfloat16, "U32": dtypes.uint32, "I32": dtypes.int32,
                                "F32": dtypes.float32, "U64": dtypes.uint64, "I64": dtypes.int64, "F64": dtypes.float64}
_ST_NAMES = {dt: name for name, dt in _ST_DTYPES.items()}
_MAX_HEADER = 100_000_000  # the reference implementation's limit: a larger length is a corrupt or hostile file

def _raw_dtype(dt: DType) -> np.dtype:
  """The little-endian numpy dtype of a tensor's bytes in a file: bfloat16's raw bits as uint16, bool's byte as uint8
  (whose nonzero values are all true)."""
  return np.dtype({dtypes.bfloat16: np.uint16, dtypes.bool: np.uint8}.get(dt, dt.np)).newbyteorder("<")

def _check_save(tensors: dict[str, Tensor], metadata: dict[str, str] | None) -> None:
  """Refuse what a safetensors file cannot hold, before anything is computed or written."""
  if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
    raise SafetensorsError("safe_save: metadata must map str to str")
  for k, t in tensors.items():
    if not isinstance(k, str) or k == "__metadata__":
      raise SafetensorsError(f"safe_save: a tensor name must be a str other than '__metadata__', got {k!r}")
    if not isinstance(t, Tensor): raise SafetensorsError(f"safe_save: {k!r} is a {type(t).__name__}, not a Tensor")
    if t.dtype not in _ST_NAMES: raise SafetensorsError(f"safe_save: {k!r} has dtype {t.dtype}, which safetensors cannot store")

def _sync_dir(directory: str) -> None:
  """Make a rename in `directory` durable. Windows cannot open a directory to sync it, and some filesystems refuse (EINVAL,
  ENOTSUP) or deny reading a directory one may write to (EACCES): the file's own bytes are synced already, so those are skipped."""
  if not hasattr(os, "O_DIRECTORY"): return
  try:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try: os.fsync(fd)
    finally: os.close(fd)
  except OSError as e:
    if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EACCES, errno.EPERM): raise

def safe_save(tensors: dict[str, Tensor], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
  """Write `tensors` (name -> Tensor) to a safetensors file, with optional `metadata` (str -> str). The data is laid out
  largest itemsize first, then by name, so with the 8-byte-padded header every tensor starts aligned to its itemsize.

  The file is replaced whole or not at all: the bytes go to a temporary file beside it, which is synced to disk and then
  renamed over `path` (a symlink's target is replaced, the link kept; an existing file's permissions are kept). If anything
  fails (invalid input, a full disk, an interrupt) the temporary file is removed and the old file at `path` is untouched."""
  _check_save(tensors, metadata)
  target = os.path.realpath(path)
  if os.path.isdir(target): raise IsADirectoryError(errno.EISDIR, "safe_save: cannot replace a directory with a file", str(path))
  Tensor.realize(*tensors.values())
  header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
  order, offset = sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k)), 0
  for k in order:
    t, size = tensors[k], math.prod(tensors[k].shape) * tensors[k].dtype.itemsize
    header[k] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + size]}
    offset += size
  text = json.dumps(header, separators=(",", ":")).encode()
  text += b" " * (-len(text) % 8)
  directory = os.path.dirname(target)
  mode = stat.S_IMODE(os.stat(target).st_mode) if os.path.exists(target) else None
  tmp = os.path.join(directory, f".{os.path.basename(target)}.{secrets.token_hex(8)}.tmp")
  # O_EXCL: never reuse a file someone else made; 0o666 lets the umask decide a new file's permissions, as open() would
  fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
  try:
    with os.fdopen(fd, "wb") as f:
      if mode is not None: os.chmod(tmp, mode)
      f.write(len(text).to_bytes(8, "little"))
      f.write(text)
      for k in order:  # one tensor's bytes in memory at a time; bfloat16's numpy() is its raw bits already
        f.write(np.ascontiguousarray(tensors[k].numpy(), dtype=_raw_dtype(tensors[k].dtype)).data)
      f.flush()
      os.fsync(f.fileno())  # the bytes are on disk before the name points at them: a crash after the rename finds a whole file
    os.replace(tmp, target)
  except BaseException:
    with contextlib.suppress(OSError): os.unlink(tmp)  # the error that stopped the save is the one to report
    raise
  _sync_dir(directory)

def _show(x: Any) -> str:
  """repr(x), cut short: a hostile header's values can be megabytes long."""
  return r if len(r := repr(x)) <= 80 else r[:77] + "..."

def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
  """json's object hook: a JSON object as a dict, refusing a key given twice (json alone would keep the last silently)."""
  out: dict[str, Any] = {}
  for k, v in pairs:
    if k in out: raise SafetensorsError(f"bad header: the key {_show(k)} appears twice in one object")
    out[k] = v
  return out

_Entries = dict[str, tuple[DType, tuple[int, ...], int, int]]

def _layout(read: Callable[[int, int], bytes], size: int, what: str) -> tuple[_Entries, dict[str, str]]:
  """Check a safetensors file of `size` bytes from its header alone, read with read(offset, count): ({name: (dtype, shape,
  begin, end)} with absolute byte offsets, metadata). Every tensor's place is checked against `size`, so a file that is
  cut short or padded is refused without reading any of its data."""
  if size == 0: raise SafetensorsError(f"{what}: empty file: 0 bytes, not even the 8-byte header length")
  if size < 8: raise SafetensorsError(f"{what}: truncated: {size} bytes, shorter than the 8-byte header length")
  n = int.from_bytes(read(0, 8), "little")
  if n == 0: raise SafetensorsError(f"{what}: bad header: its length is 0; even an empty header is the 2 bytes {{}}")
  if n > _MAX_HEADER: raise SafetensorsError(f"{what}: bad header: its length {n} is over the limit of {_MAX_HEADER} bytes")
  if 8 + n > size: raise SafetensorsError(f"{what}: truncated: the header says {n} bytes but only {size - 8} follow")
  try: text = read(8, n).decode("utf-8")
  except UnicodeDecodeError as e: raise SafetensorsError(f"{what}: bad header: not UTF-8 ({e})") from None
  try: header = json.loads(text, object_pairs_hook=_no_duplicates)
  except RecursionError: raise SafetensorsError(f"{what}: bad header: its JSON is nested too deeply") from None
  except SafetensorsError as e: raise SafetensorsError(f"{what}: {e}") from None
  except ValueError as e: raise SafetensorsError(f"{what}: bad header: not valid JSON ({e})") from None  # also over-long int literals
  if not isinstance(header, dict): raise SafetensorsError(f"{what}: bad header: a JSON object expected, got {type(header).__name__}")
  meta = header.pop("__metadata__", None)
  if meta is None: meta = {}  # the reference reads null as no metadata
  if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
    raise SafetensorsError(f"{what}: bad header: __metadata__ must be an object of strings, got {_show(meta)}")
  data_size, out = size - 8 - n, {}
  for k, info in header.items():
    if not isinstance(info, dict):
      raise SafetensorsError(f"{what}: bad header: {_show(k)} must be an object with dtype, shape and data_offsets, got {_show(info)}")
    if missing := [key for key in ("dtype", "shape", "data_offsets") if key not in info]:  # other keys are ignored, as the reference does
      raise SafetensorsError(f"{what}: bad header: {_show(k)} needs the keys dtype, shape and data_offsets; it lacks {', '.join(missing)}")
    if not isinstance(info["dtype"], str) or (dt := _ST_DTYPES.get(info["dtype"])) is None:
      raise SafetensorsError(f"{what}: bad header: {_show(k)} has dtype {_show(info['dtype'])}; known: {', '.join(_ST_DTYPES)}")
    shape, offs = info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
      raise SafetensorsError(f"{what}: bad header: {_show(k)} has shape {_show(shape)}, not a list of non-negative ints")
    try: np.broadcast_to(np.empty((), np.uint8), shape)  # numpy's limits on the number and size of dimensions, without allocating
    except ValueError as e:
      raise SafetensorsError(f"{what}: bad header: {_show(k)} has shape {_show(shape)}, which no array can have ({e})") from None
    if not isinstance(offs, list) or len(offs) != 2 or not all(type(o) is int for o in offs) or not 0 <= offs[0] <= offs[1]:
      raise SafetensorsError(f"{what}: bad header: {_show(k)} has data_offsets {_show(offs)}, not two ints [begin, end] with 0 <= begin <= end")
    if offs[1] > data_size:
      raise SafetensorsError(f"{what}: data_offsets {offs} of {_show(k)} are out of range: the data is {data_size} bytes (truncated?)")
    if (want := math.prod(shape) * dt.itemsize) != offs[1] - offs[0]:
      raise SafetensorsError(f"{what}: {_show(k)} of shape {tuple(shape)} and dtype {info['dtype']} needs {want} bytes, its data_offsets {offs} "
                             f"give {offs[1] - offs[0]}")
    out[k] = (dt, tuple(shape), 8 + n + offs[0], 8 + n + offs[1])
  pos = 8 + n  # the tensors must tile the data exactly, as the reference loader requires
  for k, (_, _, b, e) in sorted(out.items(), key=lambda kv: kv[1][2:]):
    if b != pos:
      raise SafetensorsError(f"{what}: data_offsets of {_show(k)} start at {b - 8 - n}, expected {pos - 8 - n} ({'overlap' if b < pos else 'gap'})")
    pos = e
  if pos != size: raise SafetensorsError(f"{what}: {size - pos} bytes after the last tensor belong to none")
  return out, meta

def _open(path: str | os.PathLike | bytes, mapped: bool) -> tuple[_Entries, dict[str, str], np.ndarray | None]:
  """Check a safetensors file (or its bytes) from its header and size: (entries, metadata, and with `mapped` the whole file as
  uint8, a memory map of it for a path). The map is made from the file the header was read from, after the check."""
  if isinstance(path, (bytes, bytearray)):
    data = bytes(path)
    entries, meta = _layout(lambda o, k: data[o:o + k], len(data), "safetensors data")
    return entries, meta, np.frombuffer(data, np.uint8) if mapped else None
  what = os.fsdecode(path)
  if stat.S_ISDIR(mode := os.stat(path).st_mode): raise SafetensorsError(f"{what}: a directory, not a safetensors file")
  if not stat.S_ISREG(mode): raise SafetensorsError(f"{what}: not a regular file")  # a pipe or a device has no size to check against
  with open(path, "rb") as f:
    def read(offset: int, count: int) -> bytes:
      f.seek(offset)
      return f.read(count)
    entries, meta = _layout(read, size := os.fstat(f.fileno()).st_size, what)
    return entries, meta, np.memmap(f, np.uint8, mode="r", shape=(size,)) if mapped else None

def safe_load_metadata(path: str | os.PathLike | bytes) -> dict[str, str]:
  """The __metadata__ of a safetensors file (empty if it has none). `path` may also be the file's bytes. Only the header is
  read, but the whole layout is checked against the file's size."""
  return _open(path, mapped=False)[1]

def safe_load(path: str | os.PathLike | bytes, device: str | None = None) -> dict[str, Tensor]:
  """The tensors of a safetensors file (or of its bytes) as {name: Tensor} on `device` (default Device.DEFAULT), in file
  order. The header is checked against the file's size first: a bad file raises SafetensorsError having read nothing past
  its header and made no tensor. The file is then memory-mapped and each tensor copied from the map to the device."""
  entries, _, data = _open(path, mapped=True)
  home, out = Device.canonicalize(device or Device.DEFAULT), {}
  for k, (dt, shape, b, e) in entries.items():
    raw = data[b:e].view(_raw_dtype(dt)).reshape(shape)
    out[k] = Tensor._from_uop(engine.from_numpy(raw != 0 if dt == dtypes.bool else raw, dt, home), home)  # any nonzero byte is true
  return out

# ---- PyTorch checkpoints ----

# a checkpoint names its tensors' element types by the storage class of PyTorch's typed storages (or, for dtypes that have
# none, an UntypedStorage of bytes and a torch.<dtype> global)
_TORCH_STORAGES = {"FloatStorage": dtypes.float32, "DoubleStorage": dtypes.float64, "HalfStorage": dtypes.float16,
                   "BFloat16Storage": dtypes.bfloat16, "LongStorage": dtypes.int64, "IntStorage": dtypes.int32, "ShortStorage": dtypes.int16,
                   "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8, "BoolStorage": dtypes.bool, "UntypedStorage": dtypes.uint8}
_TORCH_DTYPES = {name: dt for dt in (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.int64, dtypes.int32, dtypes.int16,
                                     dtypes.int8, dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.bool) for name in (dt.name,)}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # the first pickle of torch.save's format before PyTorch 1.6 (_use_new_zipfile_serialization=False)

class _Storage:
  """One storage of a checkpoint: its element type and count and, once read, its bytes (and their byte order)."""
  def __init__(self, dtype: DType, numel: int): self.dtype, self.numel, self.data, self.order = dtype, numel, None, "<"
  def fill(self, data: bytes, what: str, key: str, big_endian: bool = False) -> None:
    if len(data) != self.numel * _raw_dtype(self.dtype).itemsize:
      raise pickle.UnpicklingError(f"{what}: storage {key} holds {len(data)} bytes, the checkpoint says {self.numel} of {self.dtype}")
    self.data, self.order = np.frombuffer(data, np.uint8), ">" if big_endian else "<"

class _TensorRecord:
  """A tensor of the checkpoint, made into a Tensor once its storage's bytes are read (in the legacy format they follow
  the pickle that names them)."""
  def __init__(self, storage: _Storage, offset: int, size: tuple[int, ...], stride: tuple[int, ...], dtype: DType | None = None):
    if not isinstance(storage, _Storage): raise pickle.UnpicklingError(f"a tensor's storage must be a checkpoint storage, got {_show(storage)}")
    self.storage, self.offset, self.size, self.stride, self.dtype = storage, offset, tuple(size), tuple(stride), dtype or storage.dtype
  def tensor(self, device: str, what: str) -> Tensor:
    raw = self.storage.data.view(_raw_dtype(self.dtype).newbyteorder(self.storage.order))  # from_numpy below makes it native
    last = self.offset + sum((n - 1) * st for n, st in zip(self.size, self.stride)) if 0 not in self.size else self.offset - 1
    if self.offset < 0 or any(n < 0 or st < 0 for n, st in zip(self.size, self.stride)) or last >= len(raw):
      raise pickle.UnpicklingError(f"{what}: a tensor of shape {self.size}, strides {self.stride} at offset {self.offset} lies outside "
                                   f"its storage of {len(raw)} elements")
    view = np.lib.stride_tricks.as_strided(raw[self.offset:], self.size, tuple(st * raw.itemsize for st in self.stride), writeable=False)
    return Tensor._from_uop(engine.from_numpy(view != 0 if self.dtype == dtypes.bool else view, self.dtype, device), device)

# the functions a checkpoint's pickle calls to make its tensors, by PyTorch's argument order (gradients and hooks are dropped)
def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
  return _TensorRecord(storage, offset, size, stride)
def _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
  return _TensorRecord(storage, offset, size, stride, dtype)
def _rebuild_parameter(data, requires_grad, hooks, state=None): return data  # a Parameter is its tensor here

_TORCH_GLOBALS: dict[tuple[str, str], Any] = {
  ("collections", "OrderedDict"): collections.OrderedDict,  # a state dict; its _metadata attribute is dropped by _resolve
  ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2, ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
  ("torch._utils", "_rebuild_parameter"): _rebuild_parameter, ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
}

class _CheckpointUnpickler(pickle.Unpickler):
  """An unpickler that knows only tensors, storages, dtypes and dicts: any other global (a class, a function such as
  os.system) is refused, so a checkpoint cannot run code, as torch.load(weights_only=True)."""
  def __init__(self, f: IO[bytes], what: str, read: Callable[[str, _Storage], None] | None):
    super().__init__(f)
    self.what, self.read, self.storages = what, read, {}
  def find_class(self, module: str, name: str) -> Any:
    if (module, name) in _TORCH_GLOBALS: return _TORCH_GLOBALS[module, name]
    if module in ("torch", "torch.storage") and name in _TORCH_STORAGES: return _TORCH_STORAGES[name]
    if module == "torch" and name in _TORCH_DTYPES: return _TORCH_DTYPES[name]
    raise pickle.UnpicklingError(f"{self.what}: refusing {module}.{name}: a checkpoint may hold only tensors, numbers, strings and "
                                 "containers (tinyspec has no dtype for it, or it would run code)")
  def persistent_load(self, pid: Any) -> _Storage:
    if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and isinstance(pid[1], DType)):
      raise pickle.UnpicklingError(f"{self.what}: unknown persistent id {_show(pid)}")
    _, dtype, key, _, numel = pid[:5]
    if len(pid) > 5 and pid[5] is not None: raise pickle.UnpicklingError(f"{self.what}: storage views (PyTorch before 0.4) are not supported")
    if key not in self.storages:
      self.storages[key] = _Storage(dtype, numel)
      if self.read is not None: self.read(key, self.storages[key])
    return self.storages[key]

def _resolve(obj: Any, device: str, what: str) -> Any:
  """The unpickled object with every tensor record made a Tensor: dicts, lists and tuples are rebuilt, anything else kept."""
  if isinstance(obj, _TensorRecord): return obj.tensor(device, what)
  if isinstance(obj, dict): return {k: _resolve(v, device, what) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)): return type(obj)(_resolve(v, device, what) for v in obj)
  return obj

def torch_load(path: str | os.PathLike, device: str | None = None) -> Any:
  """What torch.save wrote to `path` (a state dict is {name: Tensor}), with its tensors on `device` (default
  Device.DEFAULT): PyTorch's zip format, or the one before PyTorch 1.6. Nothing of PyTorch is needed, and nothing in the
  file runs: only tensors, numbers, strings and containers are read (others raise pickle.UnpicklingError, naming the global).
  A Parameter becomes a plain Tensor, and each tensor is a copy of its view of the storage (views do not share memory)."""
  what, home = os.fsdecode(path), Device.canonicalize(device or Device.DEFAULT)
  if zipfile.is_zipfile(path):
    with zipfile.ZipFile(path) as z:
      pkl = [n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
      if len(pkl) != 1: raise pickle.UnpicklingError(f"{what}: a zip file but not a PyTorch checkpoint (no single <name>/data.pkl)")
      prefix = pkl[0][:-len("data.pkl")]
      big = prefix + "byteorder" in z.namelist() and z.read(prefix + "byteorder") == b"big"
      def read(key: str, st: _Storage) -> None: st.fill(z.read(f"{prefix}data/{key}"), what, key, big)
      with z.open(pkl[0]) as f: return _resolve(_CheckpointUnpickler(f, what, read).load(), home, what)
  with open(path, "rb") as f:
    def load() -> Any: return _CheckpointUnpickler(f, what, None).load()  # every pickle of the file restricted, the first too
    try: magic = load()
    except Exception: magic = None  # anything that is not a pickle is simply not this format
    if magic != _LEGACY_MAGIC: raise pickle.UnpicklingError(f"{what}: not a PyTorch checkpoint (neither a zip file nor the legacy format)")
    load()  # the protocol version
    if not load().get("little_endian", True): raise pickle.UnpicklingError(f"{what}: a big-endian legacy checkpoint is not supported")
    unpickler = _CheckpointUnpickler(f, what, None)
    obj, keys = unpickler.load(), load()
    for key in keys:  # each storage: its element count (8 bytes), then its elements
      st = unpickler.storages[key]
      st.fill(f.read(int.from_bytes(f.read(8), "little") * _raw_dtype(st.dtype).itemsize), what, key)
    return _resolve(obj, home, what)


__all__ = ["SafetensorsError", "get_parameters", "get_state_dict", "load_state_dict", "safe_load", "safe_load_metadata", "safe_save",
           "torch_load"]
