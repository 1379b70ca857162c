"""The interfaces a device implements: Renderer, Compiler (and its on-disk cache), Allocator/LRUAllocator/HostAllocator, Buffer,
Runtime and Program, exercised through a fake device registered like any plugin."""
import gc
import os
import re
import tempfile
import traceback
import warnings
from pathlib import Path

import numpy as np
import pytest
from tinyspec.device import (
  Allocator,
  Buffer,
  CompileError,
  Compiler,
  Device,
  DeviceError,
  DeviceSpec,
  HostAllocator,
  LRUAllocator,
  Program,
  Runtime,
)
from tinyspec.device import compiler as compiler_mod
from tinyspec.dtype import dtypes
from tinyspec.hookspecs import PLUGIN_API_VERSION, hookimpl
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import Ops
from tinyspec.uop.uop import UOp

# *** a fake device: host memory, a "compiler" that reverses its source, a program that adds a constant ***

class FakeRenderer(Renderer):
  device, native = "FAKE", frozenset({Ops.SQRT})
  def render(self, name, linear): return f"kernel {name}: out = in + val  # {len(linear.src)} uops"

class FakeCompiler(Compiler):
  name, version = "fakecc", "1.0"
  def compile(self, src):
    if "syntax error" in src: raise CompileError(self.name, "kernel.c:2: error: expected ';'", src)
    return src.encode()[::-1]

class CountingHost(HostAllocator):
  """Host memory that counts real allocations and frees, and runs out past `cap` live bytes."""
  def __init__(self, cap=None):
    super().__init__()
    self.cap, self.live, self.allocs, self.frees = cap, 0, 0, 0
  def _alloc(self, nbytes, options):
    self.allocs += 1
    if self.cap is not None and self.live + nbytes > self.cap: raise MemoryError(f"out of fake memory ({self.live} of {self.cap} used)")
    self.live += nbytes
    return super()._alloc(nbytes, options)
  def _free(self, handle, nbytes, options):
    self.frees, self.live = self.frees + 1, self.live - nbytes

class BytesAllocator(LRUAllocator):
  """Memory the host cannot address directly and that has no views: the optional methods stay unimplemented."""
  def _alloc(self, nbytes, options): return bytearray(nbytes)
  def _free(self, handle, nbytes, options): pass
  def copyin(self, dest, src): dest[:] = src
  def copyout(self, dest, src): dest[:] = src

class AddProgram(Program):
  def __call__(self, *bufs, global_size=None, local_size=None, vals=(), wait=False):
    out, inp = bufs
    out.view(np.float32)[:] = inp.view(np.float32) + vals[0]
    return 0.0 if wait else None

class FakeRuntime(Runtime):
  def __init__(self, name, allocator=None):
    super().__init__(name, FakeRenderer(), FakeCompiler(), allocator if allocator is not None else CountingHost())
  def program(self, name, binary): return AddProgram(name, binary)

class FakePlugin:
  @hookimpl
  def tinyspec_plugin_api(self): return (PLUGIN_API_VERSION,)
  @hookimpl
  def tinyspec_devices(self):
    return (DeviceSpec("FAKE", ("FAKE",), probe=lambda: None, open=FakeRuntime),
            DeviceSpec("OPAQUE", ("FAKE",), probe=lambda: None, open=lambda name: FakeRuntime(name, BytesAllocator())))

@pytest.fixture(autouse=True)
def fake_device(clean_registry):
  Device.register(FakePlugin(), "fake")
  yield Device["FAKE"]

@pytest.fixture
def cache(tmp_path, monkeypatch):
  monkeypatch.setenv("TINYSPEC_CACHE_DIR", str(tmp_path / "cc"))
  monkeypatch.delenv("TINYSPEC_COMPILE_CACHE", raising=False)
  return tmp_path / "cc"

# *** Runtime, Program, Renderer ***

def test_runtime_end_to_end(fake_device):
  rt = Device["fake"]
  assert isinstance(rt, Runtime) and rt is fake_device and rt.name == "FAKE"
  assert isinstance(rt.renderer, Renderer) and isinstance(rt.compiler, Compiler) and isinstance(rt.allocator, Allocator)
  src = rt.renderer.render("add1", UOp(Ops.LINEAR, src=()))
  prg = rt.program("add1", rt.compiler.compile(src))
  a = Buffer("FAKE", 5, dtypes.float32).copyin(np.arange(5, dtype=np.float32))
  out = Buffer("FAKE", 5, dtypes.float32).allocate()
  assert prg(out.handle, a.handle, vals=(2,)) is None and isinstance(prg(out.handle, a.handle, vals=(3,), wait=True), float)
  rt.synchronize()
  np.testing.assert_equal(out.numpy(), np.arange(5, dtype=np.float32) + 3)

def test_base_classes_say_what_is_missing():
  with pytest.raises(NotImplementedError, match="Program does not implement __call__"): Program("k", b"")()
  with pytest.raises(NotImplementedError, match="Runtime does not implement program"):
    Runtime("X", FakeRenderer(), FakeCompiler(), HostAllocator()).program("k", b"")
  with pytest.raises(NotImplementedError, match="Renderer does not implement render"): Renderer().render("k", UOp(Ops.LINEAR, src=()))
  with pytest.raises(NotImplementedError, match="Compiler does not implement compile"): Compiler().compile("")

def test_renderer_defaults_and_supports():
  r = FakeRenderer()
  assert r.supports(Ops.ADD) and r.supports(Ops.WHERE) and r.supports(Ops.SQRT) and not r.supports(Ops.SIN)
  assert (r.has_local, r.has_shared, r.local_max, r.tensor_cores) == (False, False, None, ())
  assert dtypes.float32 in r.supported_dtypes and dtypes.bfloat16 in r.supported_dtypes and dtypes.index not in r.supported_dtypes

@pytest.mark.parametrize("attrs, message", [
  ({"native": frozenset({Ops.ADD})}, "native must be a frozenset of GroupOp.Decomposed ops, got ['ADD']"),
  ({"native": {Ops.SIN}}, "native must be a frozenset"),
  ({"supported_dtypes": frozenset({dtypes.float32.vec(4)})}, "supported_dtypes must be a frozenset of scalar DTypes"),
  ({"local_max": (256, 256, 64)}, "sets local_max but has_local is False"),
])
def test_renderer_rejects_bad_tables_at_class_creation(attrs, message):
  with pytest.raises(TypeError, match=re.escape(message)): type("BadRenderer", (Renderer,), attrs)

# *** Compiler and its cache ***

def test_cache_hit_across_instances(cache):
  c1, c2 = FakeCompiler(), FakeCompiler()
  assert c1.compile_cached("int x;") == b";x tni" and (c1.compiles, c1.cache_hits) == (1, 0)
  assert c2.compile_cached("int x;") == b";x tni" and (c2.compiles, c2.cache_hits) == (0, 1)
  assert [p.name for p in cache.iterdir()] == [c1.cache_key("int x;")]  # no temporary file left behind

def test_cache_key_covers_source_name_and_version(cache):
  base = FakeCompiler()
  other_version, other_name = FakeCompiler(), FakeCompiler()
  other_version.version, other_name.name = "2.0", "othercc"
  for c in (base, other_version, other_name): c.compile_cached("int x;")
  base.compile_cached("int y;")
  assert (base.compiles, other_version.compiles, other_name.compiles) == (2, 1, 1)
  assert len({c.cache_key("int x;") for c in (base, other_version, other_name)}) == 3

def _entry(cache):
  c = FakeCompiler()
  c.compile_cached("int x;")
  return cache / c.cache_key("int x;")

@pytest.mark.parametrize("damage", [
  lambda b: b[:10], lambda b: b[:-1], lambda b: b"", lambda b: b + b"x", lambda b: bytes(len(b)),
  lambda b: b[:-1] + bytes([b[-1] ^ 1]), lambda b: b"XXXXXXXX" + b[8:],
], ids=["header-truncated", "payload-truncated", "empty", "trailing-garbage", "zeros", "bit-flip", "bad-magic"])
def test_damaged_entry_is_recompiled_and_rewritten(cache, damage):
  entry = _entry(cache)
  entry.write_bytes(damage(entry.read_bytes()))
  c = FakeCompiler()
  assert c.compile_cached("int x;") == b";x tni" and c.compiles == 1
  again = FakeCompiler()
  assert again.compile_cached("int x;") == b";x tni" and (again.compiles, again.cache_hits) == (0, 1)

def test_entry_of_another_key_is_not_trusted(cache):
  entry = _entry(cache)
  c = FakeCompiler()
  c.compile_cached("int y;")
  (cache / c.cache_key("int y;")).write_bytes(entry.read_bytes())  # an intact entry, but for other source
  assert c.compile_cached("int y;") == b";y tni" and c.compiles == 2

def test_swapped_payloads_are_refused_even_with_checksums_recomputed(cache):
  """Swapping two entries' compiled bytes (x*3's for x*5's) and fixing up each checksum over its payload, as a tool that
  knew the old format could, still fails: each entry holds its full key, and the checksum covers key and payload."""
  import hashlib
  import struct
  c = FakeCompiler()
  a, b = (cache / c.cache_key(src) for src in ("int x3;", "int x5;") if c.compile_cached(src))
  def forged(entry: Path, payload: bytes) -> bytes:
    magic, klen, _, _ = struct.unpack_from("<8sQQ32s", raw := entry.read_bytes())
    key = raw[56:56 + klen]
    return struct.pack("<8sQQ32s", magic, klen, len(payload), hashlib.sha256(payload).digest()) + key + payload
  pa, pb = a.read_bytes()[-7:], b.read_bytes()[-7:]  # ";3x tni" and ";5x tni"
  a.write_bytes(forged(a, pb)), b.write_bytes(forged(b, pa))
  fresh = FakeCompiler()
  assert fresh.compile_cached("int x3;") == b";3x tni" and fresh.compile_cached("int x5;") == b";5x tni" and fresh.compiles == 2

def test_cache_dirs_are_private_and_a_shared_dir_is_not_used(tmp_path, monkeypatch):
  monkeypatch.setenv("TINYSPEC_CACHE_DIR", str(tmp_path / "new" / "cc"))
  monkeypatch.delenv("TINYSPEC_COMPILE_CACHE", raising=False)
  FakeCompiler().compile_cached("int x;")
  assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700 and (tmp_path / "new" / "cc").stat().st_mode & 0o777 == 0o700
  (shared := tmp_path / "shared").mkdir(mode=0o777)
  shared.chmod(0o777)  # past the umask: writable by everyone
  monkeypatch.setenv("TINYSPEC_CACHE_DIR", str(shared))
  c = FakeCompiler()
  with pytest.warns(RuntimeWarning, match=re.escape(f"compile cache {shared} is writable by group or others (mode 777)")):
    assert c.compile_cached("int x;") == b";x tni"
  assert c.compile_cached("int x;") == b";x tni" and (c.compiles, c.cache_hits) == (2, 0) and list(shared.iterdir()) == []

def test_a_cache_dir_of_another_user_is_not_used(tmp_path, monkeypatch):
  real_stat = Path.stat
  def foreign(self, **kw):
    st = real_stat(self, **kw)
    if self == tmp_path / "theirs": return os.stat_result((st.st_mode, *st[1:4], st.st_uid + 1, *st[5:]))
    return st
  (tmp_path / "theirs").mkdir(mode=0o700)
  monkeypatch.setattr(Path, "stat", foreign)
  monkeypatch.setenv("TINYSPEC_CACHE_DIR", str(tmp_path / "theirs"))
  with pytest.warns(RuntimeWarning, match="belongs to another user"): FakeCompiler().compile_cached("int x;")
  assert list((tmp_path / "theirs").iterdir()) == []

def test_disk_cache_stays_under_its_cap_evicting_least_recently_used(cache, monkeypatch):
  monkeypatch.setenv("TINYSPEC_CACHE_MAX_MB", str(64 * 1024 / 2**20))  # 64 KiB
  c = FakeCompiler()
  keep = "int keep; // " + "k" * 2000
  for i in range(200):
    c.compile_cached(f"int v{i}; // " + "x" * 2000)
    c.compile_cached(keep)  # used all along: never the least recent
    assert sum(p.stat().st_size for p in cache.iterdir()) <= 64 * 1024 + 64 * 1024 // 16 + 4096
  assert (cache / c.cache_key(keep)).exists() and c.cache_hits == 199

def test_unreadable_entry_is_recompiled_and_rewritten(cache, monkeypatch):
  entry, read_bytes = _entry(cache), Path.read_bytes
  def deny(self):
    if self == entry: raise PermissionError(13, "Permission denied", str(self))
    return read_bytes(self)
  monkeypatch.setattr(Path, "read_bytes", deny)
  entry.write_bytes(b"stale")
  c = FakeCompiler()
  assert c.compile_cached("int x;") == b";x tni" and c.compiles == 1
  monkeypatch.undo()
  assert read_bytes(entry).endswith(b";x tni") and len(read_bytes(entry)) > len(b";x tni")

def test_disabled_cache_always_compiles(cache, monkeypatch):
  monkeypatch.setenv("TINYSPEC_COMPILE_CACHE", "0")
  c = FakeCompiler()
  c.compile_cached("int x;"), c.compile_cached("int x;")
  assert (c.compiles, c.cache_hits) == (2, 0) and not cache.exists()

def test_unwritable_cache_dir_warns_once_and_still_compiles(tmp_path, monkeypatch):
  (blocker := tmp_path / "a-file").write_text("not a directory")
  monkeypatch.setenv("TINYSPEC_CACHE_DIR", str(blocker / "cc"))
  c = FakeCompiler()
  with pytest.warns(RuntimeWarning, match=re.escape(f"compile cache {blocker / 'cc'} is not writable")):
    assert c.compile_cached("int x;") == b";x tni"
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert c.compile_cached("int y;") == b";y tni"
  assert c.compiles == 2

def test_default_cache_dir(monkeypatch, tmp_path):
  monkeypatch.delenv("TINYSPEC_CACHE_DIR", raising=False)
  monkeypatch.delenv("TINYSPEC_COMPILE_CACHE", raising=False)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
  assert compiler_mod.cache_dir() == tmp_path / "xdg" / "tinyspec" / "compile"
  monkeypatch.delenv("XDG_CACHE_HOME")
  monkeypatch.setenv("HOME", str(tmp_path))
  assert compiler_mod.cache_dir() == tmp_path / ".cache" / "tinyspec" / "compile"

def test_compile_error_leads_with_compiler_kernel_and_log_and_names_the_source_file(cache, monkeypatch, tmp_path):
  monkeypatch.delenv("DEBUG", raising=False)
  monkeypatch.setenv("TMPDIR", str(tmp_path))
  monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
  c = FakeCompiler()
  with pytest.raises(CompileError) as e: c.compile_cached("int x = 1;\nsyntax error\n", "E_4")
  assert (e.value.compiler, e.value.kernel, e.value.log) == ("fakecc", "E_4", "kernel.c:2: error: expected ';'")
  msg = str(e.value)
  assert msg.startswith("fakecc failed to compile kernel E_4:\nkernel.c:2: error: expected ';'\n") and "syntax error" not in msg
  assert e.value.src_path is not None and e.value.src_path.is_relative_to(tmp_path) and str(e.value.src_path) in msg
  assert e.value.src_path.read_text() == "int x = 1;\nsyntax error\n" and e.value.src_path.name.startswith("E_4-")
  assert c.compiles == 0 and not cache.exists()

def test_compile_error_shows_the_numbered_source_at_debug_4(cache, monkeypatch):
  monkeypatch.setenv("DEBUG", "4")
  with pytest.raises(CompileError) as e: FakeCompiler().compile_cached("int x = 1;\nsyntax error\n", "E_4")
  assert str(e.value).endswith("--- source ---\n   1  int x = 1;\n   2  syntax error")

def test_compile_must_return_bytes(cache):
  class Sloppy(FakeCompiler):
    def compile(self, src): return src
  with pytest.raises(TypeError, match="fakecc.compile must return bytes, got str"): Sloppy().compile_cached("int x;")

# *** allocators ***

def test_lru_reuses_freed_memory_per_size_and_options():
  a = CountingHost()
  h = a.alloc(64)
  a.free(h, 64)
  assert a.alloc(64) is h and a.allocs == 1
  a.free(h, 64)
  assert a.alloc(64, "pinned") is not h and a.alloc(32) is not h and a.allocs == 3
  a.free_cache()
  assert (a.frees, a.cache) == (1, {}) and a.alloc(64) is not h

def test_lru_flushes_cache_and_retries_once_on_memory_error():
  a = CountingHost(cap=100)
  for n in (40, 30): a.free(a.alloc(n), n)
  assert a.live == 70
  a.alloc(60)  # does not fit beside the cached 70 bytes: the cache is released and the alloc retried
  assert (a.live, a.frees, a.allocs) == (60, 2, 4)
  with pytest.raises(MemoryError, match="out of fake memory"): a.alloc(60)
  assert a.allocs == 6

def test_lru_keeps_at_most_its_cap_releasing_the_sizes_freed_longest_ago(monkeypatch):
  """Many shapes free buffers of many sizes: past $TINYSPEC_ALLOC_CACHE_MB the oldest go back to the device."""
  monkeypatch.setenv("TINYSPEC_ALLOC_CACHE_MB", str(100 / 2**20))  # 100 bytes
  a = CountingHost()
  handles = {n: a.alloc(n) for n in (40, 30, 20, 50)}
  for n, h in handles.items(): a.free(h, n)
  assert (a.cached_bytes, list(a.cache), a.frees) == (100, [(30, None), (20, None), (50, None)], 1)  # 40 was released
  assert a.alloc(50) is handles[50] and a.cached_bytes == 50
  a.free(a.alloc(200), 200)  # larger than the whole cap: released at once, and it pushes nothing else out
  assert (a.cached_bytes, a.frees) == (50, 2)

def test_a_refused_allocation_names_device_bytes_and_limit_once(fake_device):
  fake_device.allocator.cap = 1000
  with pytest.raises(MemoryError) as e: Buffer("FAKE", 300, dtypes.float32).allocate()
  assert str(e.value) == "FAKE cannot allocate 1200 bytes (1.2 KiB) for <Buffer FAKE 300 x float32>: out of fake memory (0 of 1000 used)"
  assert "During handling" not in "".join(traceback.format_exception(e.value))  # the allocator's retry is not chained in
  fake_device.allocator.cap = None
  with pytest.raises(MemoryError, match=r"^FAKE cannot allocate 4611686018427387904 bytes \(4194304\.0 TiB\) .*: the host has [\d.]+ [GMT]iB"):
    Buffer("FAKE", 2**60, dtypes.float32).allocate()  # past numpy's largest array: numpy's ValueError becomes a MemoryError

def test_host_allocator_is_aligned_and_zero_copy():
  a = HostAllocator()
  for n in (1, 3, 64, 1000):
    assert a.alloc(n).ctypes.data % 64 == 0 and a.alloc(n).nbytes == n
  h = a.alloc(16)
  a.copyin(h, memoryview(np.arange(4, dtype=np.float32)).cast("B"))
  arr = a.as_numpy(h, np.dtype(np.float32), (2, 2))
  arr[1, 1] = 42
  out = np.empty(4, np.float32)
  a.copyout(memoryview(out.view(np.uint8)), a.view(h, 0, 16))
  np.testing.assert_equal(out, [0, 1, 2, 42])
  assert a.supports_view and a.supports_as_numpy and not BytesAllocator().supports_view and not BytesAllocator().supports_as_numpy
  with pytest.raises(NotImplementedError, match="BytesAllocator cannot make views"): BytesAllocator().view(bytearray(4), 0, 2)

# *** Buffer ***

@pytest.mark.parametrize("dtype", [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32,
                                   dtypes.int64, dtypes.uint64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64], ids=str)
@pytest.mark.parametrize("device", ["FAKE", "OPAQUE"])
def test_buffer_roundtrip(dtype, device):
  npdt = np.uint16 if dtype is dtypes.bfloat16 else dtype.np
  vals = np.random.default_rng(0).integers(0, 2 if dtype is dtypes.bool else 100, 37).astype(npdt)
  b = Buffer(device, 37, dtype).copyin(vals)
  out = b.numpy()
  assert out.dtype == npdt and out.shape == (37,) and b.nbytes == 37 * dtype.itemsize
  np.testing.assert_equal(out, vals)
  out[0] = 1
  assert b.numpy()[0] == vals[0]  # numpy() is a copy

def test_buffer_takes_any_shape_and_empty():
  np.testing.assert_equal(Buffer("FAKE", 6, dtypes.int32).copyin(np.arange(6, dtype=np.int32).reshape(2, 3)[:, ::-1]).numpy(), [2, 1, 0, 5, 4, 3])
  assert Buffer("FAKE", 0, dtypes.float32).copyin(np.zeros(0, np.float32)).numpy().shape == (0,)

def test_buffer_is_allocated_lazily(fake_device):
  b = Buffer("fake", 8, dtypes.float32)
  assert b.device == "FAKE" and not b.is_allocated and fake_device.allocator.allocs == 0
  assert b.allocate() is b and b.is_allocated and fake_device.allocator.allocs == 1
  b.allocate()
  assert fake_device.allocator.allocs == 1 and b.allocator is fake_device.allocator

def test_unknown_device_fails_on_first_use():
  b = Buffer("NOPE", 4, dtypes.float32)
  with pytest.raises(DeviceError, match="unknown device 'NOPE'"): b.allocate()

def test_views_share_memory():
  b = Buffer("FAKE", 8, dtypes.float32).copyin(np.zeros(8, np.float32))
  v = b.view(2, dtypes.float32, offset=8).copyin(np.array([5, 6], np.float32))
  np.testing.assert_equal(b.numpy(), [0, 0, 5, 6, 0, 0, 0, 0])
  b.as_numpy()[3] = 7
  np.testing.assert_equal(v.numpy(), [5, 7])
  np.testing.assert_equal(v.as_numpy(), [5, 7])
  vv = v.view(1, dtypes.uint8, offset=4)  # a view of a view is a view of the base
  assert vv.base is b and vv.offset == 12 and vv.numpy()[0] == np.float32(7).tobytes()[0]
  assert v.is_view and not b.is_view and b.base is b

def test_view_of_unallocated_base_allocates_the_base(fake_device):
  b = Buffer("FAKE", 4, dtypes.int32)
  v = b.view(2, dtypes.int32, offset=8)
  assert not v.is_allocated
  v.copyin(np.array([1, 2], np.int32))
  assert b.is_allocated and b.numpy()[2:].tolist() == [1, 2] and fake_device.allocator.allocs == 1

def test_garbage_collected_buffer_goes_back_to_the_allocator(fake_device):
  a = fake_device.allocator
  b = Buffer("FAKE", 16, dtypes.float32).allocate()
  handle = b.handle
  v = b.view(4, dtypes.float32).copyin(np.ones(4, np.float32))
  del b
  gc.collect()
  assert a.cache == {} and v.numpy().tolist() == [1, 1, 1, 1]  # the view keeps its base alive
  del v
  gc.collect()
  assert a.cache[(64, None)] == [handle]
  assert Buffer("FAKE", 16, dtypes.float32).allocate().handle is handle and a.allocs == 1

def test_freeing_a_view_keeps_the_base():
  b = Buffer("FAKE", 4, dtypes.int32).copyin(np.arange(4, dtype=np.int32))
  v = b.view(2, dtypes.int32)
  v.free()
  assert b.numpy().tolist() == [0, 1, 2, 3] and not v.is_allocated
  with pytest.raises(RuntimeError, match="use of a freed buffer"): v.numpy()

def test_use_after_free():
  b = Buffer("FAKE", 4, dtypes.int32).copyin(np.arange(4, dtype=np.int32))
  v = b.view(2, dtypes.int32)
  b.free()
  assert not b.is_allocated and Device["FAKE"].allocator.cache[(16, None)]
  for use in (b.numpy, lambda: b.copyin(np.zeros(4, np.int32)), b.allocate, v.numpy, lambda: b.handle):
    with pytest.raises(RuntimeError, match=re.escape("use of a freed buffer: <Buffer FAKE ")): use()

@pytest.mark.parametrize("arr, error, message", [
  (np.zeros(4, np.float64), TypeError, "copyin of a float64 array into a float32 buffer (needs float32)"),
  (np.zeros(3, np.float32), ValueError, "copyin of 3 elements into a buffer of 4 elements"),
  ([0.0] * 4, TypeError, "copyin takes a numpy array, got list"),
])
def test_copyin_errors(arr, error, message):
  with pytest.raises(error, match=re.escape(message)): Buffer("FAKE", 4, dtypes.float32).copyin(arr)

def test_view_errors():
  b = Buffer("FAKE", 4, dtypes.float32)
  with pytest.raises(ValueError, match=re.escape("view of bytes [8, 24) is out of range of <Buffer FAKE 4 x float32>, which has bytes [0, 16)")):
    b.view(4, dtypes.float32, offset=8)
  with pytest.raises(ValueError, match=re.escape("view of bytes [-4, 0)")): b.view(1, dtypes.float32, offset=-4)
  with pytest.raises(ValueError, match=re.escape("view of bytes [4, 12) is out of range")):
    b.view(2, dtypes.float32, offset=4).view(2, dtypes.float32, offset=4)
  with pytest.raises(ValueError, match="offset=4 needs a base buffer"): Buffer("FAKE", 1, dtypes.float32, offset=4)
  with pytest.raises(ValueError, match="a view on OPAQUE of a buffer on FAKE"): Buffer("OPAQUE", 1, dtypes.float32, base=b)

@pytest.mark.parametrize("dtype", [dtypes.index, dtypes.void, dtypes.float32.vec(4), dtypes.float32.ptr(), "float32"], ids=str)
def test_buffer_refuses_unstorable_dtypes(dtype):
  with pytest.raises(TypeError, match="a Buffer holds a scalar dtype that can be stored"): Buffer("FAKE", 4, dtype)

def test_unallocated_and_unsupported_uses():
  with pytest.raises(RuntimeError, match=re.escape("<Buffer FAKE 4 x float32> is not allocated yet")): Buffer("FAKE", 4, dtypes.float32).numpy()
  opaque = Buffer("OPAQUE", 4, dtypes.float32).copyin(np.ones(4, np.float32))
  with pytest.raises(NotImplementedError, match="device OPAQUE's memory is not host-addressable"): opaque.as_numpy()
  with pytest.raises(NotImplementedError, match="device OPAQUE cannot make views"): opaque.view(2, dtypes.float32).numpy()

def test_a_kernel_in_a_dtype_the_device_lacks_is_refused_naming_device_and_dtype(fake_device, monkeypatch):
  from tinyspec import Tensor
  monkeypatch.setattr(fake_device.renderer, "supported_dtypes", frozenset({dtypes.float32, dtypes.int32}))
  x = Tensor(np.array([1.5, 2.5]), dtype=dtypes.float64, device="FAKE")  # storing a float64 needs no kernel
  with pytest.raises(DeviceError, match=r"^FAKE does not support float64 \(its dtypes: float32, int32\)$"): (x * 3).realize()
  with pytest.raises(DeviceError, match=r"^FAKE does not support bfloat16 and float64 "): x.cast(dtypes.bfloat16).realize()
