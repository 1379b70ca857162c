"""Checked devices (tinyspec.interpreter.checked): the device's renderer and compiler see every kernel, the interpreter
runs it, and the device's dtypes are claimed, bfloat16 included."""
import numpy as np
import pytest
from tinyspec.conformance.builders import lower, seed003_add
from tinyspec.device import CompileError, Compiler
from tinyspec.dtype import dtypes
from tinyspec.interpreter.checked import CheckedRuntime
from tinyspec.renderer import Renderer


class Listing(Renderer):
  """A stand-in device renderer: its 'source' names the kernel; it claims every dtype, bfloat16 included."""
  device = "LISTING"
  def __init__(self): self.suffix = "ok"  # instance settings must reach the checked copy too
  def render(self, name, linear): return f"kernel {name} {len(linear.src)} {self.suffix}"

class Strict(Compiler):
  """Refuses sources without "ok", remembering what it was given."""
  name, version = "strict", "1"
  def __init__(self): self.seen = []
  def compile(self, src):
    self.seen.append(src)
    if " ok" not in src.splitlines()[0]: raise CompileError(self.name, "not ok", src)
    return b"binary"

def test_checked_device_compiles_for_real_and_runs_on_the_interpreter():
  rt = CheckedRuntime("LISTING_CHECK", Listing(), inner := Strict())
  # the interpreter computes in each dtype
  assert rt.renderer.supported_dtypes == Listing().supported_dtypes and dtypes.bfloat16 in rt.renderer.supported_dtypes
  linear = lower(seed003_add(1))
  src = rt.renderer.render("E_1", linear)
  assert src.startswith(f"kernel E_1 {len(linear.src)} ok\n// tinyspec-program: ")
  prog = rt.program("E_1", rt.compiler.compile(src))
  assert inner.seen == [src]
  out, a, b = (np.array([v], np.int32) for v in (0, 2, 40))
  prog(out, a, b)
  assert out.tolist() == [42]

def test_checked_device_fails_where_its_compiler_does():
  rt = CheckedRuntime("LISTING_CHECK", Listing(), Strict())
  rt.renderer.suffix = "bad"
  with pytest.raises(CompileError, match="not ok"): rt.compiler.compile(rt.renderer.render("E_1", lower(seed003_add(1))))

def test_nothing_read_from_the_disk_cache_is_unpickled(tmp_path, monkeypatch):
  """The device compiler's output is cached on disk; the interpreter's program (a pickle) never is: an entry planted under
  any key in the cache directory is not what runs."""
  import pickle
  monkeypatch.setenv("TINYSPEC_CACHE_DIR", str(tmp_path))
  monkeypatch.delenv("TINYSPEC_COMPILE_CACHE", raising=False)
  rt = CheckedRuntime("LISTING_CHECK", Listing(), inner := Strict())
  src = rt.renderer.render("E_1", lower(seed003_add(1)))
  binary = rt.compiler.compile_cached(src, "E_1")
  assert [p.name for p in tmp_path.iterdir()] == [inner.cache_key(src)]  # the inner compiler's entry, and no other
  class Bomb:
    def __reduce__(self): return (exec, ("raise SystemExit('unpickled from the cache')",))
  from tinyspec.device import compiler as cache
  cache._write(tmp_path, rt.compiler.cache_key(src), rt.compiler.full_key(src), pickle.dumps(Bomb()))  # a well-formed entry
  again = CheckedRuntime("LISTING_CHECK", Listing(), Strict())
  assert again.compiler.compile_cached(src, "E_1") == binary  # the planted entry was never read: the program comes from the source
  out, a, b = (np.array([v], np.int32) for v in (0, 2, 40))
  again.program("E_1", binary)(out, a, b)
  assert out.tolist() == [42]
