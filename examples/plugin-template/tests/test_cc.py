"""The CC device against numpy: every primitive ALU op on every dtype it claims, casts and bitcasts, loops, reductions, gated
loads, matmul and conv2d; then the plugin's own parts (entry point, renderer, compiler and its cache). The conformance
suite (`pytest --pyargs tinyspec.conformance --tinyspec-device=CC`) covers the Tensor API on top of this."""
import itertools
import re
import subprocess
import sys

import numpy as np
import pytest
from tinyspec import Device, Tensor, dtypes
from tinyspec.conformance import require_device
from tinyspec.device import Buffer, CompileError
from tinyspec.dtype import INTS, SINTS, DType
from tinyspec.engine.linearize import linearize
from tinyspec.uop import AxisType, Ops, UOp
from tinyspec_ctemplate.compiler import CCompiler
from tinyspec_ctemplate.renderer import CRenderer

DEV = "CC"

@pytest.fixture(autouse=True, scope="module")
def cc_available():
  """Skip (naming the reason) where the device is unavailable, e.g. no C compiler; a missing or broken plugin still fails."""
  require_device(DEV, "install the template first (pip install ./examples/plugin-template)")

FLOATS = [dtypes.float16, dtypes.float32, dtypes.float64]  # bfloat16 has no C type: CC does not claim it
ALL = [dtypes.bool, *INTS, *FLOATS]

def values(dt: DType) -> np.ndarray:
  """Ordinary values and the edges: the extremes, zero, -1, and for floats -0.0, infinities and nan."""
  if dt is dtypes.bool: return np.array([False, True])
  if dt in INTS:
    info = np.iinfo(dt.np)
    return np.array(sorted(v for v in {info.min, info.min + 1, -7, -1, 0, 1, 2, 3, 7, 8, 100, info.max} if info.min <= v <= info.max), dt.np)
  return np.array([-np.inf, -100.5, -2.5, -1.0, -0.0, 0.0, 0.25, 1.0, 3.0, 7.5, 1e4, np.inf, np.nan], dt.np)

def pairs(dt: DType) -> tuple[np.ndarray, np.ndarray]:
  """Every value against every value: the operands of a binary op, as two broadcastable arrays."""
  v = values(dt)
  return v[:, None], v[None, :]

def run(f, *arrays: np.ndarray) -> np.ndarray: return f(*(Tensor(a, device=DEV) for a in arrays)).numpy()

def check(got: np.ndarray, want: np.ndarray):
  """Same dtype and exactly the same values (nan where numpy has nan): each op rounds once, in C as in numpy."""
  assert got.dtype == want.dtype, (got.dtype, want.dtype)
  np.testing.assert_array_equal(got, want)

def ok(dt: DType) -> bool: return dt in Device[DEV].renderer.supported_dtypes

# ---- elementwise ops: (Tensor op, numpy reference with tinyspec's semantics, which dtypes) ----

def _shift(f, bits):  # a shift by a negative amount, or by the width or more, gives 0
  def ref(a, b):
    fine = (b >= 0) & (b < bits)
    return np.where(fine, f(a, np.where(fine, b, 0).astype(a.dtype)), 0).astype(a.dtype)
  return ref

def _floor(f):  # x // 0 and x % 0 are 0
  def ref(a, b): return np.where(b == 0, 0, f(a, np.where(b == 0, 1, b))).astype(a.dtype)
  return ref

BINARY = {
  "add": (lambda a, b: a + b, lambda a, b: a + b if a.dtype != np.bool_ else a | b, ALL),
  "mul": (lambda a, b: a * b, lambda a, b: a * b, ALL),
  "sub": (lambda a, b: a - b, lambda a, b: a - b, [*INTS, *FLOATS]),
  "floordiv": (lambda a, b: a // b, _floor(np.floor_divide), INTS),
  "mod": (lambda a, b: a % b, _floor(np.mod), INTS),
  "and": (lambda a, b: a & b, np.bitwise_and, [dtypes.bool, *INTS]),
  "or": (lambda a, b: a | b, np.bitwise_or, [dtypes.bool, *INTS]),
  "xor": (lambda a, b: a ^ b, np.bitwise_xor, [dtypes.bool, *INTS]),
  "maximum": (lambda a, b: a.maximum(b), np.maximum, ALL),
  "minimum": (lambda a, b: a.minimum(b), np.minimum, ALL),
  "lt": (lambda a, b: a < b, np.less, ALL),
  "ne": (lambda a, b: a != b, np.not_equal, ALL),
  "eq": (lambda a, b: a == b, np.equal, ALL),
  "le": (lambda a, b: a <= b, np.less_equal, ALL),
  "where": (lambda a, b: (a > b).where(a, b), lambda a, b: np.where(a > b, a, b), ALL),
}

@pytest.mark.parametrize("name,dt", [(n, d) for n, (_, _, dts) in BINARY.items() for d in dts], ids=lambda x: getattr(x, "name", x))
def test_binary(name: str, dt: DType):
  if not ok(dt): pytest.skip(f"CC does not claim {dt.name}")
  op, ref, _ = BINARY[name]
  a, b = pairs(dt)
  with np.errstate(all="ignore"): check(run(op, a, b), ref(np.broadcast_to(a, (len(a), len(a))), np.broadcast_to(b, (len(a), len(a)))))

@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["shl", "shr"])
def test_shifts(op: str, dt: DType):
  a = values(dt)[:, None]
  b = np.array([-1, 0, 1, 3, 8 * dt.itemsize - 1, 8 * dt.itemsize, 8 * dt.itemsize + 3], np.int64).clip(dt.min, dt.max).astype(dt.np)[None, :]
  bits = 8 * dt.itemsize
  ref = _shift(np.left_shift if op == "shl" else np.right_shift, bits)
  if op == "shr" and not dtypes.is_unsigned(dt):  # Tensor's signed >> shifts an out-of-range amount by bits - 1 (PyTorch's fill)
    b = np.where((b < 0) | (b >= bits), bits - 1, b).astype(dt.np)
  got = run(lambda x, y: x << y if op == "shl" else x >> y, a, b)
  check(got, ref(np.broadcast_to(a, got.shape), np.broadcast_to(b, got.shape)))

UNARY = {  # name: (Tensor op, numpy reference); floats only
  "neg": (lambda x: -x, np.negative), "reciprocal": (lambda x: x.reciprocal(), np.reciprocal), "trunc": (lambda x: x.trunc(), np.trunc),
  "sqrt": (lambda x: x.sqrt(), np.sqrt), "exp2": (lambda x: x.exp2(), np.exp2), "log2": (lambda x: x.log2(), np.log2),
  "sin": (lambda x: x.sin(), np.sin), "exp": (lambda x: x.exp(), np.exp), "abs": (lambda x: x.abs(), np.abs),
}

@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("name", UNARY)
def test_unary(name: str, dt: DType):
  if not ok(dt): pytest.skip(f"CC does not claim {dt.name}")
  op, ref = UNARY[name]
  x = np.concatenate([values(dt), np.linspace(-20, 20, 41, dtype=dt.np)])
  if name == "log2": x = np.abs(x)
  with np.errstate(all="ignore"): want = ref(x)
  got = run(op, x)
  # C's math library is within an ulp or two; exp is exp2(x * log2(e)), whose rounding error grows with |x|
  rtol = {2: 1e-3, 4: 2e-7, 8: 1e-15}[dt.itemsize] * (32 if name == "exp" else 1)
  np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=0)

# the casts that can lose information, over the edge values: widening ones are plain C conversions (the conformance suite checks them)
LOSSY = [(s, d) for s, d in itertools.product(ALL, ALL) if s is not d and not np.can_cast(s.np, d.np, "safe")]

@pytest.mark.parametrize("src,dst", LOSSY, ids=lambda d: d.name)
def test_cast(src: DType, dst: DType):
  if not (ok(src) and ok(dst)): pytest.skip("CC does not claim one of the dtypes")
  x = values(src)
  if dtypes.is_float(src) and not dtypes.is_float(dst) and dst is not dtypes.bool:
    x = x[np.isfinite(x) & (x > (-100 if dst in SINTS else 0)) & (x < 100)]  # out-of-range float-to-int is undefined on hardware
  with np.errstate(all="ignore"): want = x != 0 if dst is dtypes.bool else x.astype(dst.np)
  check(run(lambda t: t.cast(dst), x), want)

@pytest.mark.parametrize("src,dst", [(s, d) for s, d in itertools.product(ALL[1:], ALL[1:]) if s is not d and s.itemsize == d.itemsize],
                         ids=lambda d: d.name)
def test_bitcast(src: DType, dst: DType):
  if not (ok(src) and ok(dst)): pytest.skip("CC does not claim one of the dtypes")
  x = values(src)
  np.testing.assert_array_equal(run(lambda t: t.bitcast(dst), x).view(np.uint8), x.view(np.uint8))

def test_float_to_int_of_nan_and_infinities_is_zero():  # undefined in C; the renderer's f2i makes it 0, as the PYTHON device does
  np.testing.assert_array_equal(run(lambda t: t.cast(dtypes.int32), np.array([np.nan, np.inf, -np.inf, -2.5], np.float32)), [0, 0, 0, -2])

def test_constants_nan_inf():
  got = run(lambda t: t.where(float("nan"), float("-inf")), np.array([True, False]))
  assert np.isnan(got[0]) and got[1] == -np.inf

def test_int64_extremes():
  x = np.array([2**62, -2**63, 2**63 - 1], np.int64)
  np.testing.assert_array_equal(run(lambda t: t + (-2**63), x), x + np.int64(-2**63))

# ---- kernels with loops: reductions (REG accumulators), gated loads (PAD), IF blocks, matmul, conv2d ----

RNG = np.random.default_rng(0)

@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2)])
def test_reductions(axis):
  x = RNG.standard_normal((5, 7, 3)).astype(np.float32)
  np.testing.assert_allclose(run(lambda t: t.sum(axis=axis), x), x.sum(axis=axis), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(run(lambda t: t.max(axis=axis), x), x.max(axis=axis))
  np.testing.assert_allclose(run(lambda t: t.prod(axis=axis), x), x.prod(axis=axis), rtol=1e-5)

def test_int_reduction_wraps():
  x = np.full(300, 100, np.int8)
  np.testing.assert_array_equal(run(lambda t: t.sum(dtype=dtypes.int8), x), x.sum(dtype=np.int8))

def test_gated_loads_pad():
  x = RNG.standard_normal((3, 4)).astype(np.float32)
  got = run(lambda t: t.pad(((1, 2), (3, 0))).sum(axis=0)[:4] + t.pad(((0, 0), (1, 1)))[:, :4], x)
  want = np.pad(x, ((1, 2), (3, 0))).sum(axis=0)[:4] + np.pad(x, ((0, 0), (1, 1)))[:, :4]
  np.testing.assert_allclose(got, want, rtol=1e-6)

def test_matmul():
  a, b = RNG.standard_normal((33, 65)).astype(np.float32), RNG.standard_normal((65, 17)).astype(np.float32)
  np.testing.assert_allclose(run(lambda x, y: x @ y, a, b), a @ b, rtol=1e-4, atol=1e-4)

def test_conv2d():
  x, w = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
  got = run(lambda t, k: t.conv2d(k, padding=1), x, w)
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  want = np.zeros((2, 4, 9, 8), np.float32)
  for i, j in itertools.product(range(3), range(3)): want += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 9, j:j + 8], w[:, :, i, j])
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

def test_softmax_and_gradient():
  x = RNG.standard_normal((4, 10)).astype(np.float32)
  t = Tensor(x, device=DEV, requires_grad=True)
  (t.softmax(axis=1) * Tensor(np.arange(10, dtype=np.float32), device=DEV)).sum().backward()
  e = np.exp(x - x.max(axis=1, keepdims=True))
  s = e / e.sum(axis=1, keepdims=True)
  w = np.arange(10, dtype=np.float32)
  np.testing.assert_allclose(t.grad.numpy(), s * (w - (s * w).sum(axis=1, keepdims=True)), rtol=1e-4, atol=1e-5)

def test_empty_and_scalar():
  assert run(lambda t: t * 2, np.zeros((0, 3), np.float32)).shape == (0, 3)
  assert run(lambda t: t.sum(), np.zeros((0,), np.float32)) == 0
  assert run(lambda t: t + 1, np.array(2.5, np.float32)) == 3.5

# ---- the plugin's parts ----

def test_listed_through_the_entry_point():
  out = subprocess.run([sys.executable, "-m", "tinyspec", "devices"], capture_output=True, text=True, check=True).stdout
  assert any(line.split()[:2] == ["CC", "tinyspec-c-template"] and "available" in line for line in out.splitlines()), out

def test_renders_readable_c():
  """The renderer alone, as on a machine without a compiler: a hand-built kernel that doubles 4 floats."""
  out, inp = (UOp(Ops.PARAM, (UOp.vec((4,)),), (k, dtypes.float32)) for k in (0, 1))
  i = UOp(Ops.RANGE, (UOp.const(4),), (0, AxisType.LOOP))
  st = UOp(Ops.STORE, (out.index(i), UOp(Ops.LOAD, (inp.index(i),)) * 2.0))
  src = CRenderer().render("double4", linearize(UOp.sink(UOp(Ops.END, (st, i)))))
  assert "void double4(float* data0, float* data1) {" in src
  assert re.search(r"for \(int64_t (ridx\d+) = 0; \1 < 4; \1\+\+\) {", src), src

def test_declares_float16_only_with_a_compiler_that_has_it():
  assert dtypes.float16 in CRenderer().supported_dtypes and dtypes.float16 not in CRenderer(float16=False).supported_dtypes
  assert dtypes.bfloat16 not in CRenderer().supported_dtypes  # C has no bfloat16

def test_probe_names_the_missing_compiler(monkeypatch):
  from tinyspec_ctemplate import plugin
  monkeypatch.setenv("CC", "no-such-cc")
  assert "no C compiler" in plugin._probe()

def test_hand_built_kernel_with_a_variable():
  """A kernel built node by node, run through the device's parts by hand: render, compile, load, call with a variable's value."""
  n = UOp.variable("n", 1, 16)
  out = UOp(Ops.PARAM, (UOp.vec((16,)),), (0, dtypes.int32))
  i = UOp(Ops.RANGE, (n,), (0, AxisType.LOOP))
  kernel = UOp.sink(UOp(Ops.END, (UOp(Ops.STORE, (out.index(i), i.cast(dtypes.int32) * 3)), i)))
  rt = Device[DEV]
  src = rt.renderer.render("times3", linearize(kernel))
  assert "void times3(int32_t* data0, int64_t n) {" in src
  buf = Buffer(DEV, 16, dtypes.int32).copyin(np.full(16, -1, np.int32))
  rt.program("times3", rt.compiler.compile_cached(src))(buf.handle, vals=(5,))
  np.testing.assert_array_equal(buf.numpy(), [0, 3, 6, 9, 12] + [-1] * 11)

def test_compile_error_shows_log_and_source(monkeypatch):
  monkeypatch.setenv("DEBUG", "4")  # the numbered source is in the message only at DEBUG>=4
  with pytest.raises(CompileError, match=r"(?s)error.*1  int broken\("):
    Device[DEV].compiler.compile("int broken( {")

def test_disk_cache(tmp_path, monkeypatch):
  monkeypatch.setenv("TINYSPEC_CACHE_DIR", str(tmp_path))
  src = "int seven(void) { return 7; }\n"
  c1, c2 = CCompiler(Device[DEV].compiler.cc), CCompiler(Device[DEV].compiler.cc)
  assert c1.compile_cached(src) == c2.compile_cached(src)
  assert (c1.compiles, c1.cache_hits, c2.compiles, c2.cache_hits) == (1, 0, 0, 1)
  assert Device[DEV].program("seven", c2.compile_cached(src)).lib.seven() == 7  # the cached bytes load and run
