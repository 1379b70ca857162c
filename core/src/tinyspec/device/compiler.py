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
  """A compiler refused a kernel. The message leads with the compiler, the kernel's name (once the pipeline knows it) and
  the compiler's log; the numbered source follows only at `DEBUG>=4`, and is otherwise written to a file the message names,
  so a log's line numbers ("kernel.c:12: error ...") can be read off it without a page of source in every traceback."""
  def __init__(self, compiler: str, log: str, src: str = "", kernel: str = ""):
    super().__init__(compiler, log)
    self.compiler, self.log, self.src, self.kernel = compiler, log, src, kernel
    self.src_path: Path | None = None
    """Where the source was saved for reading (set by `save_source`), or None."""

  def save_source(self) -> None:
    """Write the source beside the other failed kernels' (`failed_sources_dir()`), once; the message then names the file."""
    if not self.src or self.src_path is not None: return
    try:
      d = failed_sources_dir()
      d.mkdir(mode=0o700, parents=True, exist_ok=True)
      path = d / f"{self.kernel or 'kernel'}-{hashlib.sha256(self.src.encode()).hexdigest()[:12]}.txt"
      path.write_text(self.src)
      self.src_path = path
    except OSError: pass  # the message then points at DEBUG=4 instead

  def __str__(self) -> str:
    head = f"{self.compiler} failed to compile" + (f" kernel {self.kernel}" if self.kernel else "") + f":\n{self.log.rstrip()}"
    if not self.src: return head
    if debug_level() >= 4:
      return head + "\n--- source ---\n" + "\n".join(f"{i:4d}  {line}" for i, line in enumerate(self.src.splitlines(), 1))
    where = f"its source is in {self.src_path}; " if self.src_path else ""
    return head + f"\n({where}DEBUG=4 prints the numbered source here)"

def debug_level() -> int:
  """$DEBUG as an int (0 when unset): 1 kernel names and times, 2 buffers, 3 UOp listings, 4 sources, 5 every stage."""
  return int(os.environ.get("DEBUG", "0") or 0)

def failed_sources_dir() -> Path:
  """Where the sources of kernels that failed to compile are saved: $TMPDIR/tinyspec-$USER-uid/failed."""
  return Path(tempfile.gettempdir()) / f"tinyspec-{os.getuid() if hasattr(os, 'getuid') else 'user'}" / "failed"

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

  def compile_cached(self, src: str, kernel: str = "") -> bytes:
    """`compile(src)`, from the on-disk cache when an intact entry is there, else compiled now and stored. `kernel` names
    the kernel in a `CompileError`."""
    if (d := cache_dir()) is None: return self._compile(src, kernel)
    key = self.cache_key(src)
    if (lib := _read(d / key, key)) is not None:
      self.cache_hits += 1
      return lib
    _write(d, key, lib := self._compile(src, kernel))
    return lib

  def _compile(self, src: str, kernel: str) -> bytes:
    try: lib = self.compile(src)
    except CompileError as e:
      e.kernel = e.kernel or kernel
      e.save_source()
      raise
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
