"""The `Compiler` base a device plugin subclasses, and the on-disk cache of compiled kernels every compiler shares.

Entries live in one directory, one file per (compiler name, compiler version, source), named by the sha256 of the three
(and one per kernel BEAM search has searched, engine/search.py: its winning opts as JSON, each checked before use):

    $TINYSPEC_CACHE_DIR                 if set, else
    $XDG_CACHE_HOME/tinyspec/compile    if XDG_CACHE_HOME is set, else
    ~/.cache/tinyspec/compile

`TINYSPEC_COMPILE_CACHE=0` turns the cache off. Each entry holds its full key (the compiler's name and version and the
source itself), the compiled bytes and a sha256 over both; a lookup takes an entry only when its key is exactly the one
asked for, so an entry renamed, swapped or left by another compiler is never used for this source. Entries are written
to a temporary file then renamed into place, so readers never see half an entry; one that is corrupt, truncated,
unreadable or of another key is treated as missing (compiled again and rewritten). Nothing read from the cache is
unpickled or otherwise interpreted by tinyspec: entries are bytes handed to the device's `Runtime.program`.

The directories tinyspec creates are private (0700). A cache directory owned by another user, or writable by group or
others, is not used: one warning, then kernels are compiled in memory. So is a directory that cannot be written. The
cache is kept under `TINYSPEC_CACHE_MAX_MB` megabytes (default 1024): past it, the entries used least recently go.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import threading
import warnings
from pathlib import Path

# magic (format version in its last byte), key length, payload length, sha256 of key + payload; then the key, the payload
_HEADER = struct.Struct("<8sQQ32s")
_MAGIC = b"TSCACHE\x02"
_warned: set[Path] = set()
_written: dict[Path, int] = {}  # bytes written per directory since its size was last checked against the cap
_cache_lock = threading.Lock()  # eviction scans and the counters above

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

def cache_max_bytes() -> int:
  """The on-disk cache's size cap in bytes: $TINYSPEC_CACHE_MAX_MB megabytes, 1024 by default."""
  return int(float(os.environ.get("TINYSPEC_CACHE_MAX_MB", "") or 1024) * 2**20)

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

  def full_key(self, src: str) -> bytes:
    """Everything the compiled bytes depend on: the compiler name, its version and the source, each length-prefixed so no
    two different triples give the same bytes. Stored in the entry and compared on every lookup."""
    return b"".join(len(b).to_bytes(8, "little") + b for b in (part.encode() for part in (self.label, self.version, src)))

  def cache_key(self, src: str) -> str:
    """The hex sha256 of `full_key(src)`: the name of this source's entry."""
    return hashlib.sha256(self.full_key(src)).hexdigest()

  def compile_cached(self, src: str, kernel: str = "") -> bytes:
    """`compile(src)`, from the on-disk cache when an intact entry of exactly this key is there, else compiled now and
    stored. `kernel` names the kernel in a `CompileError`."""
    full = self.full_key(src)
    if (lib := cache_read(full)) is not None:
      self.cache_hits += 1
      return lib
    cache_write(full, lib := self._compile(src, kernel))
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

def cache_read(key: bytes) -> bytes | None:
  """The payload stored under `key` (any bytes naming what it depends on) in the on-disk cache, or None: no cache, no
  entry, or one that is not intact and exactly of this key."""
  if (d := _usable(cache_dir())) is None: return None
  return _read(d / hashlib.sha256(key).hexdigest(), key)

def cache_write(key: bytes, payload: bytes) -> None:
  """Store `payload` under `key` in the on-disk cache (nothing when it is off or cannot be written)."""
  if (d := _usable(cache_dir())) is not None: _write(d, hashlib.sha256(key).hexdigest(), key, payload)

def _warn_once(d: Path, why: str) -> None:
  with _cache_lock:
    if d in _warned: return
    _warned.add(d)
  warnings.warn(f"compile cache {d} {why}; compiling without caching", RuntimeWarning, stacklevel=4)

def _usable(d: Path | None) -> Path | None:
  """`d` if it may hold the cache: missing (it will be made private), or a directory of this user's that nobody else can
  write. Otherwise None, after one warning: another user's entries would be code this process runs."""
  if d is None: return None
  try: st = d.stat()
  except (FileNotFoundError, NotADirectoryError): return d  # made when first written (or found unwritable then)
  except OSError as e:
    _warn_once(d, f"cannot be read ({type(e).__name__}: {e})")
    return None
  if hasattr(os, "getuid") and st.st_uid != os.getuid(): _warn_once(d, f"belongs to another user (uid {st.st_uid}, this is {os.getuid()})")
  elif st.st_mode & 0o022: _warn_once(d, f"is writable by group or others (mode {st.st_mode & 0o777:o}): chmod go-w it to use it")
  else: return d
  return None

def _read(path: Path, full: bytes) -> bytes | None:
  try: data = path.read_bytes()
  except OSError: return None  # missing or unreadable: either way, compile and (try to) rewrite it
  if len(data) < _HEADER.size: return None
  magic, klen, n, digest = _HEADER.unpack_from(data)
  key, lib = data[_HEADER.size:_HEADER.size + klen], data[_HEADER.size + klen:]
  if magic != _MAGIC or key != full or n != len(lib) or hashlib.sha256(key + lib).digest() != digest: return None
  with contextlib.suppress(OSError): os.utime(path)  # used now: the last to be evicted
  return lib

def _makedirs_private(d: Path) -> None:
  for parent in reversed([p for p in (d, *d.parents) if not p.exists()]): parent.mkdir(mode=0o700, exist_ok=True)

def _write(d: Path, name: str, full: bytes, lib: bytes) -> None:
  try:
    _makedirs_private(d)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{name[:16]}.", suffix=".tmp")
    try:
      with os.fdopen(fd, "wb") as f: f.write(_HEADER.pack(_MAGIC, len(full), len(lib), hashlib.sha256(full + lib).digest()) + full + lib)
      os.replace(tmp, d / name)
    except BaseException:
      with contextlib.suppress(OSError): os.unlink(tmp)
      raise
  except OSError as e:
    _warn_once(d, f"is not writable ({type(e).__name__}: {e})")
    return
  _keep_under_cap(d, _HEADER.size + len(full) + len(lib))

def _keep_under_cap(d: Path, wrote: int) -> None:
  """Evict the least recently used entries once the directory passes the cap. The directory is measured on a process's
  first write and then after every cap/16 bytes written, so a write costs no directory scan."""
  cap = cache_max_bytes()
  with _cache_lock:
    first = d not in _written
    _written[d] = _written.get(d, 0) + wrote
    if not first and _written[d] < cap // 16: return
    _written[d] = 0
    entries = []
    for p in d.iterdir():
      with contextlib.suppress(OSError):
        if not p.name.startswith("."): entries.append(((st := p.stat()).st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries, key=lambda e: e[0]):
      if total <= cap * 3 // 4: break  # down to three quarters, so the next eviction is a while away
      with contextlib.suppress(OSError): p.unlink(); total -= size
