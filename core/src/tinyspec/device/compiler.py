"""The `Compiler` base a device plugin subclasses, and the on-disk cache of compiled kernels every compiler shares.

Entries live in one directory, one file per (compiler name, compiler version, source), named by the sha256 of the three:

    $TINYSPEC_CACHE_DIR                 if set, else
    $XDG_CACHE_HOME/tinyspec/compile    if XDG_CACHE_HOME is set, else
    ~/.cache/tinyspec/compile

`TINYSPEC_COMPILE_CACHE=0` turns the cache off. Each entry carries a header with its key, length and checksum, and is
written to a temporary file then renamed into place, so readers never see half an entry; an entry that is corrupt,
truncated or unreadable anyway is treated as missing (compiled again and rewritten). A directory that cannot be written
costs only the caching: one warning, then compiles go on without it.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import warnings
from pathlib import Path

# magic (format version in its last byte), sha256 of the key, payload length, sha256 of the payload
_HEADER = struct.Struct("<8s32sQ32s")
_MAGIC = b"TSCACHE\x01"
_warned: set[Path] = set()

class CompileError(RuntimeError):
  """A compiler refused a kernel. The message names the compiler and carries its log and the numbered source, so the line
  a log points at ("kernel.c:12: error ...") can be read off directly."""
  def __init__(self, compiler: str, log: str, src: str = ""):
    self.compiler, self.log, self.src = compiler, log, src
    listing = "\n".join(f"{i:4d}  {line}" for i, line in enumerate(src.splitlines(), 1))
    super().__init__(f"{compiler} failed to compile:\n{log.rstrip()}" + (f"\n--- source ---\n{listing}" if src else ""))

def cache_dir() -> Path | None:
  """The compile cache's directory as the environment says now, or None when `TINYSPEC_COMPILE_CACHE=0` disables it."""
  if os.environ.get("TINYSPEC_COMPILE_CACHE", "").strip() == "0": return None
  if d := os.environ.get("TINYSPEC_CACHE_DIR"): return Path(d).expanduser()
  return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tinyspec" / "compile"

class Compiler:
  """Turns rendered source into a binary the device's `Runtime.program` loads. Subclasses set `name` and `version` and
  implement `compile`; the pipeline calls `compile_cached`.

  `name` and `version` are part of the cache key, so `version` must change whenever the same source could compile to
  different bytes: put the toolchain's version *and* every target or flag in it (e.g. "nvrtc 12.4 sm_90 -O3").
  `compiles` and `cache_hits` count, per instance, the real compiles and the cache hits."""
  name: str = ""
  """Which compiler this is, e.g. "clang" or "nvrtc"; shown in errors. Defaults to the class name."""
  version: str = ""
  """Whatever, besides the source, decides the output: toolchain version, target, flags."""
  compiles: int = 0
  cache_hits: int = 0

  @property
  def label(self) -> str:
    """`name`, or the class name when unset."""
    return self.name or type(self).__name__

  def compile(self, src: str) -> bytes:
    """Compile `src` (what the device's `Renderer.render` produced) to bytes. Raise `CompileError` when the toolchain
    refuses it, with its log. Must not depend on anything but `src`, `name` and `version`, or the cache will go stale."""
    raise NotImplementedError(f"{type(self).__name__} does not implement compile")

  def cache_key(self, src: str) -> str:
    """The hex sha256 naming this source's entry: of the compiler name, its version and the source."""
    h = hashlib.sha256()
    for part in (self.label, self.version, src):
      b = part.encode()
      h.update(len(b).to_bytes(8, "little") + b)  # length-prefixed, so no two different triples hash the same bytes
    return h.hexdigest()

  def compile_cached(self, src: str) -> bytes:
    """`compile(src)`, from the on-disk cache when an intact entry is there, else compiled now and stored."""
    if (d := cache_dir()) is None: return self._compile(src)
    key = self.cache_key(src)
    if (lib := _read(d / key, key)) is not None:
      self.cache_hits += 1
      return lib
    _write(d, key, lib := self._compile(src))
    return lib

  def _compile(self, src: str) -> bytes:
    lib = self.compile(src)
    if not isinstance(lib, (bytes, bytearray, memoryview)): raise TypeError(f"{self.label}.compile must return bytes, got {type(lib).__name__}")
    self.compiles += 1
    return bytes(lib)

  def __repr__(self): return f"<{type(self).__name__} {self.label!r} version={self.version!r}>"

def _read(path: Path, key: str) -> bytes | None:
  try: data = path.read_bytes()
  except OSError: return None  # missing or unreadable: either way, compile and (try to) rewrite it
  if len(data) < _HEADER.size: return None
  magic, kdigest, n, digest = _HEADER.unpack_from(data)
  lib = data[_HEADER.size:]
  if magic != _MAGIC or kdigest != bytes.fromhex(key) or n != len(lib) or hashlib.sha256(lib).digest() != digest: return None
  return lib

def _write(d: Path, key: str, lib: bytes) -> None:
  try:
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{key[:16]}.", suffix=".tmp")
    try:
      with os.fdopen(fd, "wb") as f: f.write(_HEADER.pack(_MAGIC, bytes.fromhex(key), len(lib), hashlib.sha256(lib).digest()) + lib)
      os.replace(tmp, d / key)
    except BaseException:
      with contextlib.suppress(OSError): os.unlink(tmp)
      raise
  except OSError as e:
    if d not in _warned:
      _warned.add(d)
      warnings.warn(f"compile cache {d} is not writable ({type(e).__name__}: {e}); compiling without caching", RuntimeWarning, stacklevel=3)
