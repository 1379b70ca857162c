"""Model state: finding a model's tensors, state dicts, and the safetensors file format.

get_state_dict walks an object's attributes, lists, tuples and dicts and names every Tensor by its path ("layers.0.weight",
PyTorch's names for the same layout); get_parameters is its tensors, each once. load_state_dict checks everything first
and changes nothing on an error.

safe_save / safe_load implement the safetensors format (https://huggingface.co/docs/safetensors) directly:
  8 bytes   N, the header's length, an unsigned little-endian 64-bit int
  N bytes   a UTF-8 JSON object: name -> {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, and optionally
            "__metadata__": {str: str}. Written padded with spaces to a multiple of 8 bytes.
  the rest  the tensors' bytes, row-major and little-endian; offsets count from the first byte after the header, and the
            tensors cover this part exactly (no gaps, no overlaps).
A file is checked in full before any tensor is made, so a bad one raises a SafetensorsError and loads nothing."""
from __future__ import annotations

import json
import math
import os
import types
from collections.abc import Iterator
from typing import Any

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
  """The little-endian numpy dtype of a tensor's bytes in the file (bfloat16's raw bits are uint16)."""
  return (np.dtype(np.uint16) if dt == dtypes.bfloat16 else np.dtype(dt.np)).newbyteorder("<")

def safe_save(tensors: dict[str, Tensor], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
  """Write `tensors` (name -> Tensor) to a safetensors file, with optional `metadata` (str -> str). The data is laid out
  largest itemsize first, then by name, so with the 8-byte-padded header every tensor starts aligned to its itemsize."""
  if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
    raise SafetensorsError("safe_save: metadata must map str to str")
  for k, t in tensors.items():
    if not isinstance(k, str) or k == "__metadata__":
      raise SafetensorsError(f"safe_save: a tensor name must be a str other than '__metadata__', got {k!r}")
    if not isinstance(t, Tensor): raise SafetensorsError(f"safe_save: {k!r} is a {type(t).__name__}, not a Tensor")
    if t.dtype not in _ST_NAMES: raise SafetensorsError(f"safe_save: {k!r} has dtype {t.dtype}, which safetensors cannot store")
  Tensor.realize(*tensors.values())
  header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
  blobs, offset = [], 0
  for k in sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k)):
    t = tensors[k]
    raw = np.ascontiguousarray(t.numpy(), dtype=_raw_dtype(t.dtype)).tobytes()  # bfloat16's numpy() is its raw bits already
    header[k] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
  text = json.dumps(header, separators=(",", ":")).encode()
  text += b" " * (-len(text) % 8)
  with open(path, "wb") as f:
    f.write(len(text).to_bytes(8, "little"))
    f.write(text)
    for b in blobs: f.write(b)

def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
  if len(keys := [k for k, _ in pairs]) != len(set(keys)): raise SafetensorsError(f"bad header: a name appears twice ({keys})")
  return dict(pairs)

def _parse(data: bytes | memoryview, what: str) -> tuple[dict[str, tuple[DType, tuple[int, ...], int, int]], dict[str, str], int]:
  """Check a whole safetensors file: ({name: (dtype, shape, begin, end)} with absolute byte offsets, metadata, data start)."""
  if len(data) < 8: raise SafetensorsError(f"{what}: truncated: {len(data)} bytes, shorter than the 8-byte header length")
  n = int.from_bytes(data[:8], "little")
  if n > _MAX_HEADER: raise SafetensorsError(f"{what}: bad header: its length {n} is over the limit of {_MAX_HEADER} bytes")
  if 8 + n > len(data): raise SafetensorsError(f"{what}: truncated: the header says {n} bytes but only {len(data) - 8} follow")
  try: header = json.loads(bytes(data[8:8 + n]).decode("utf-8"), object_pairs_hook=_no_duplicates)
  except (UnicodeDecodeError, json.JSONDecodeError) as e: raise SafetensorsError(f"{what}: bad header: not UTF-8 JSON ({e})") from None
  if not isinstance(header, dict): raise SafetensorsError(f"{what}: bad header: a JSON object expected, got {type(header).__name__}")
  meta = header.pop("__metadata__", None) or {}
  if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
    raise SafetensorsError(f"{what}: bad header: __metadata__ must be an object of strings")
  size, out = len(data) - 8 - n, {}
  for k, info in header.items():
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):  # other keys are ignored, as the reference does
      raise SafetensorsError(f"{what}: bad header: {k!r} needs the keys dtype, shape and data_offsets, got {info!r}")
    if (dt := _ST_DTYPES.get(info["dtype"])) is None:
      raise SafetensorsError(f"{what}: bad header: {k!r} has dtype {info['dtype']!r}; known: {', '.join(_ST_DTYPES)}")
    shape, offs = info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
      raise SafetensorsError(f"{what}: bad header: {k!r} has shape {shape!r}, not a list of non-negative ints")
    if not isinstance(offs, list) or len(offs) != 2 or not all(type(o) is int for o in offs) or not 0 <= offs[0] <= offs[1]:
      raise SafetensorsError(f"{what}: bad header: {k!r} has data_offsets {offs!r}, not [begin, end] with 0 <= begin <= end")
    if offs[1] > size: raise SafetensorsError(f"{what}: data_offsets {offs} of {k!r} are out of range: the data is {size} bytes (truncated?)")
    if (want := math.prod(shape) * dt.itemsize) != offs[1] - offs[0]:
      raise SafetensorsError(f"{what}: {k!r} of shape {tuple(shape)} and dtype {info['dtype']} needs {want} bytes, its data_offsets {offs} give "
                             f"{offs[1] - offs[0]}")
    out[k] = (dt, tuple(shape), 8 + n + offs[0], 8 + n + offs[1])
  pos = 8 + n  # the tensors must tile the data exactly, as the reference loader requires
  for k, (_, _, b, e) in sorted(out.items(), key=lambda kv: kv[1][2:]):
    if b != pos:
      raise SafetensorsError(f"{what}: data_offsets of {k!r} start at {b - 8 - n}, expected {pos - 8 - n} ({'overlap' if b < pos else 'gap'})")
    pos = e
  if pos != len(data): raise SafetensorsError(f"{what}: {len(data) - pos} bytes after the last tensor belong to none")
  return out, meta, 8 + n

def _read(path: str | os.PathLike | bytes) -> tuple[bytes, str]:
  if isinstance(path, (bytes, bytearray)): return bytes(path), "safetensors data"
  with open(path, "rb") as f: return f.read(), str(path)

def safe_load_metadata(path: str | os.PathLike | bytes) -> dict[str, str]:
  """The __metadata__ of a safetensors file (empty if it has none). `path` may also be the file's bytes."""
  data, what = _read(path)
  return _parse(data, what)[1]

def safe_load(path: str | os.PathLike | bytes, device: str | None = None) -> dict[str, Tensor]:
  """The tensors of a safetensors file (or of its bytes) as {name: Tensor} on `device` (default Device.DEFAULT), in file
  order. The file is checked in full first: a bad one raises SafetensorsError and makes no tensor."""
  data, what = _read(path)
  entries = _parse(data, what)[0]
  out = {}
  for k, (dt, shape, b, _) in entries.items():
    raw = np.frombuffer(data, dtype=_raw_dtype(dt if dt != dtypes.bool else dtypes.uint8), count=math.prod(shape), offset=b).reshape(shape)
    if dt == dtypes.bfloat16: out[k] = Tensor._from_uop(engine.from_numpy(raw, dt, home := Device.canonicalize(device or Device.DEFAULT)), home)
    else: out[k] = Tensor(raw != 0 if dt == dtypes.bool else raw, device=device, dtype=dt)  # any nonzero byte is true
  return out


__all__ = ["SafetensorsError", "get_parameters", "get_state_dict", "load_state_dict", "safe_load", "safe_load_metadata", "safe_save"]
