"""Derived properties (seed 001's table, seed 002's axis): dtype, shape, device, addrspace, min_max, axis, and the construction errors."""
import math
import sys

import pytest
from tinyspec.dtype import AddrSpace, dtypes
from tinyspec.uop import Ops, SpecViolation, UOp

I32 = dtypes.int32
I32_RANGE = (-2**31, 2**31 - 1)
D2 = ("GPU:0", "GPU:1")

def bounded(shape, lo, hi, dtype=I32, device="CPU", slot=0):
  """A PARAM tensor whose values are known to lie in [lo, hi]."""
  return UOp(Ops.PARAM, (UOp.vec(shape), UOp.const(lo, dtype), UOp.const(hi, dtype)), (slot, dtype, device))

def props(u): return (u.dtype, u.shape, u.device, u.min_max)

T = bounded((2, 3), -4, 9)  # int32 in [-4, 9] on CPU

# ---- source ops ----

def test_buffer():
  b = UOp.buffer((2, 3), dtypes.uint8, "CPU", 0)
  assert props(b) == (dtypes.uint8, (2, 3), "CPU", (0, 255))
  assert (b.addrspace, b.axis, b.arg) == (AddrSpace.GLOBAL, None, (0, dtypes.uint8, "CPU", AddrSpace.GLOBAL))
  assert props(UOp.buffer((4,), dtypes.float16, "GPU", 1)) == (dtypes.float16, (4,), "GPU", (-math.inf, math.inf))
  assert UOp.buffer((4,), I32, "CPU", 2, AddrSpace.LOCAL).addrspace is AddrSpace.LOCAL
  assert UOp.buffer((), I32, "CPU", 3).shape == ()

def test_const():
  c = UOp.const(7, dtypes.int16)
  assert props(c) == (dtypes.int16, (), None, (7, 7)) and (c.addrspace, c.axis) == (AddrSpace.REG, None)
  assert UOp.const(-2.5, dtypes.float32).min_max == (-2.5, -2.5) and UOp.const(True, dtypes.bool).min_max == (True, True)
  lo, hi = UOp.const(math.nan, dtypes.float32).min_max
  assert math.isnan(lo) and math.isnan(hi)

def test_param():
  p = UOp(Ops.PARAM, (UOp.vec((4, 5)),), (0, dtypes.int16))
  assert props(p) == (dtypes.int16, (4, 5), None, (-32768, 32767)) and p.addrspace is AddrSpace.GLOBAL
  q = UOp(Ops.PARAM, (UOp.vec((4,)),), (1, dtypes.float32, "GPU", AddrSpace.LOCAL))
  assert props(q) == (dtypes.float32, (4,), "GPU", (-math.inf, math.inf)) and q.addrspace is AddrSpace.LOCAL
  assert props(T) == (I32, (2, 3), "CPU", (-4, 9))  # min_max from src
  v = UOp.variable("n", 1, 8)
  assert props(v) == (dtypes.index, (), None, (1, 8))

def test_binary_source():
  b = UOp(Ops.BINARY, (), b"\x00\x01\x02")
  assert props(b) == (dtypes.uint8, (3,), None, (0, 255))

# ---- movement ops: src[0].dtype, their own shape, src[0].device, src[0].min_max ----

@pytest.mark.parametrize("build,shape", [
  (lambda t: t.permute((1, 0)), (3, 2)),
  (lambda t: t.flip((1,)), (2, 3)),
  (lambda t: t.reshape((6,)), (6,)),
  (lambda t: t.reshape((3, 1, 2)), (3, 1, 2)),
  (lambda t: t.reshape((1, 2, 3)).expand((4, 2, 3)), (4, 2, 3)),
  (lambda t: t.pad((1, 0), (4, 5)), (4, 5)),
  (lambda t: t.shrink((1, 1), (1, 2)), (1, 2)),
  (lambda t: t.index(UOp.const(1)), (3,)),
  (lambda t: t.index(UOp.range(2, 0), UOp.range(3, 1)), ()),
  (lambda t: t.index(UOp.vec((0, 1, 1, 0))), (4, 3)),
  (lambda t: t.index(UOp.range(2, 0), UOp.vec((2, 0))), (2,)),
  (lambda t: UOp(Ops.STACK, (t, t, t)), (3, 2, 3)),
], ids=["PERMUTE", "FLIP", "RESHAPE", "RESHAPE3", "EXPAND", "PAD", "SHRINK", "INDEX", "INDEX_ALL", "INDEX_VEC", "INDEX_MIXED", "STACK"])
def test_movement(build, shape):
  u = build(T)
  assert props(u) == (I32, shape, "CPU", (-4, 9))
  assert u.addrspace is AddrSpace.GLOBAL  # movement passes the source's address space through

@pytest.mark.parametrize("dtype,shape,mm", [
  (dtypes.uint32, (2, 3), (0, 2**32 - 1)), (dtypes.float32, (2, 3), (-math.inf, math.inf)),
  (dtypes.uint8, (2, 12), (0, 255)), (dtypes.int16, (2, 6), (-32768, 32767)),
])
def test_bitcast(dtype, shape, mm):
  u = T.bitcast(dtype)
  assert props(u) == (dtype, shape, "CPU", mm)  # dtype from arg, min_max the dtype range: bits say nothing about values
  assert u.addrspace is AddrSpace.GLOBAL

def test_bitcast_to_wider_type_shrinks_last_axis():
  assert bounded((2, 4), 0, 1, dtypes.uint8).bitcast(dtypes.float32).shape == (2, 1)
  assert UOp.const(1.0, dtypes.float32).bitcast(I32).shape == ()

def test_stack_of_no_sources_is_an_empty_index_vector():
  e = UOp.vec(())
  assert (e.dtype, e.shape, e.device, e.addrspace) == (dtypes.index, (0,), None, AddrSpace.REG)
  assert e.min_max == (-2**63, 2**63 - 1) and e.axis is None

# ---- reduce, cast, copy ----

@pytest.mark.parametrize("op", [Ops.ADD, Ops.MAX, Ops.MUL])
@pytest.mark.parametrize("axes,shape", [((0,), (1, 3)), ((1,), (2, 1)), ((0, 1), (1, 1)), ((), (2, 3))])
def test_reduce(op, axes, shape):
  r = T.reduce(op, axes)
  assert props(r) == (I32, shape, "CPU", I32_RANGE) and r.addrspace is AddrSpace.REG

@pytest.mark.parametrize("src,dtype,mm", [
  ((0, 255, dtypes.uint8), I32, (0, 255)),                   # fits: converted bounds
  ((0, 255, dtypes.uint8), dtypes.int8, (-128, 127)),         # does not fit: dtype range
  ((-4, 9, I32), dtypes.uint8, (0, 255)),
  ((-4, 9, I32), dtypes.float16, (-4.0, 9.0)),
  ((-4, 9, I32), dtypes.bool, (False, True)),
  ((1, 9, I32), dtypes.bool, (True, True)),
  ((0, 0, I32), dtypes.bool, (False, False)),
  ((False, True, dtypes.bool), I32, (0, 1)),
  ((-2.7, 3.9, dtypes.float32), dtypes.int8, (-2, 3)),       # float -> int truncates toward zero
  ((-1e10, 1.0, dtypes.float32), I32, I32_RANGE),
  ((0, 100_000, I32), dtypes.float16, (-math.inf, math.inf)),  # 100000 overflows float16 to inf: not in [0, 100000]
  ((0, 2**24 + 3, I32), dtypes.float32, (0.0, 2.0**24 + 4)),  # the bound rounds up as the cast does
  ((-3, 257, I32), dtypes.bfloat16, (-3.0, 256.0)),           # bfloat16 keeps 8 significant bits: 257 -> 256
  ((0.1, 0.1, dtypes.float64), dtypes.float32, (0.10000000149011612, 0.10000000149011612)),
  ((-math.inf, math.inf, dtypes.float32), dtypes.float64, (-math.inf, math.inf)),
])
def test_cast(src, dtype, mm):
  lo, hi, sdt = src
  c = bounded((2, 3), lo, hi, sdt).cast(dtype)
  assert props(c) == (dtype, (2, 3), "CPU", mm) and c.addrspace is AddrSpace.REG
  assert all(type(x) is type(y) for x, y in zip(c.min_max, mm))

def test_cast_min_max_is_sound_on_samples():
  np = pytest.importorskip("numpy")
  for lo, hi, dt in ((0, 2**24 + 3, dtypes.float32), (-70000, 70000, dtypes.float16), (-300, 300, dtypes.float16)):
    c = bounded((), lo, hi).cast(dt)
    with np.errstate(over="ignore"): vals = np.array([lo, hi, (lo + hi) // 2], dtype=np.int64).astype(dt.np)
    assert all(c.vmin <= float(v) <= c.vmax for v in vals)

def test_copy():
  c = UOp(Ops.COPY, (T,), "GPU")
  assert props(c) == (I32, (2, 3), "GPU", (-4, 9)) and c.axis is None and c.addrspace is AddrSpace.GLOBAL
  assert UOp(Ops.COPY, (T,), D2).device == D2

# ---- elementwise ----

@pytest.mark.parametrize("op", [Ops.RECIP, Ops.TRUNC])
def test_alu_unary(op):
  u = UOp(op, (T,))
  assert props(u) == (I32, (2, 3), "CPU", I32_RANGE) and u.addrspace is AddrSpace.REG
  f = UOp(op, (bounded((3,), 1.0, 2.0, dtypes.float32, "GPU"),))
  assert props(f) == (dtypes.float32, (3,), "GPU", (-math.inf, math.inf))

@pytest.mark.parametrize("a,b,mm", [
  ((-4, 9), (1, 2), (-3, 11)), ((0, 0), (-5, 5), (-5, 5)),
  ((2**31 - 10, 2**31 - 1), (0, 1), I32_RANGE),        # may overflow: dtype range
  ((-2**31, 0), (-1, 0), I32_RANGE),
])
def test_add(a, b, mm):
  u = bounded((2, 3), *a) + bounded((3,), *b, slot=1)
  assert props(u) == (I32, (2, 3), "CPU", mm)

def test_add_float_and_uint8():
  assert (bounded((), 0.5, 1.5, dtypes.float32) + 1.0).min_max == (1.5, 2.5)
  assert (bounded((), -math.inf, 0.0, dtypes.float32) + bounded((), 0.0, math.inf, dtypes.float32, slot=1)).min_max == (-math.inf, math.inf)
  assert (UOp.buffer((2,), dtypes.uint8, "CPU", 0) + 1).min_max == (0, 255)  # 255 + 1 wraps

@pytest.mark.parametrize("a,b,mm", [
  ((-4, 9), (-2, 3), (-18, 27)), ((2, 3), (4, 5), (8, 15)), ((-3, -2), (-5, -4), (8, 15)), ((-4, 9), (0, 0), (0, 0)),
  ((-4, 9), (-1, -1), (-9, 4)), ((65536, 65536), (32768, 32768), I32_RANGE),
])
def test_mul(a, b, mm):
  assert props(bounded((2, 3), *a) * bounded((2, 3), *b, slot=1)) == (I32, (2, 3), "CPU", mm)

def test_mul_by_inf_times_zero_is_the_dtype_range():
  z = bounded((), 0.0, 0.0, dtypes.float32)
  assert (z * math.inf).min_max == (-math.inf, math.inf)  # 0 * inf is nan

@pytest.mark.parametrize("a,b,mm", [((-4, 9), (0, 0), (0, 9)), ((-4, 9), (20, 30), (20, 30)), ((-4, 9), (-10, -5), (-4, 9)),
                                    ((1, 2), (3, 4), (3, 4))])
def test_max(a, b, mm):
  assert props(bounded((2, 3), *a).maximum(bounded((1, 3), *b, slot=1))) == (I32, (2, 3), "CPU", mm)

@pytest.mark.parametrize("op,b,mm", [
  (Ops.IDIV, (2, 2), (-2, 4)), (Ops.IDIV, (2, 3), (-2, 4)), (Ops.IDIV, (-2, 2), I32_RANGE),  # floor division, exact for a positive divisor
  (Ops.MOD, (4, 4), (0, 3)), (Ops.MOD, (10, 20), (0, 19)), (Ops.MOD, (0, 3), I32_RANGE),
  (Ops.XOR, (1, 1), I32_RANGE), (Ops.OR, (1, 1), I32_RANGE), (Ops.AND, (1, 1), I32_RANGE), (Ops.SHL, (1, 1), I32_RANGE), (Ops.SHR, (1, 1), I32_RANGE),
])
def test_other_binary(op, b, mm):
  u = UOp(op, (T, bounded((), *b, slot=1)))
  assert props(u) == (I32, (2, 3), "CPU", mm) and u.addrspace is AddrSpace.REG

@pytest.mark.parametrize("a,b", [((-4, 9), (2, 3)), ((0, 5), (5, 5)), ((-20, -10), (1, 7)), ((7, 7), (1, 12)), ((-9, 9), (3, 3)), ((0, 3), (4, 9))])
def test_idiv_mod_min_max_with_a_positive_divisor(a, b):
  x, y = bounded((), *a), bounded((), *b, slot=1)
  pairs = [(i, j) for i in range(a[0], a[1] + 1) for j in range(b[0], b[1] + 1)]
  divs, mods = [i // j for i, j in pairs], [i % j for i, j in pairs]
  assert (x // y).min_max == (min(divs), max(divs))  # exact
  assert (x % y).vmin <= min(mods) and (x % y).vmax >= max(mods)  # sound
  if b[0] == b[1] or 0 <= a[0] <= a[1] < b[0]: assert (x % y).min_max == (min(mods), max(mods))  # and exact here

def test_mod_inside_one_period():
  assert (bounded((), 5, 7) % 4).min_max == (1, 3) and (bounded((), 2, 3) % 10).min_max == (2, 3)

@pytest.mark.parametrize("a,b,lt,ne", [
  ((-4, 9), (10, 20), (True, True), (True, True)),
  ((10, 20), (-4, 9), (False, False), (True, True)),
  ((-4, 9), (9, 9), (False, True), (False, True)),
  ((9, 9), (9, 9), (False, False), (False, False)),
  ((0, 5), (5, 10), (False, True), (False, True)),
])
def test_cmplt_cmpne(a, b, lt, ne):
  x, y = bounded((2, 1), *a), bounded((3,), *b, slot=1)
  assert props(x < y) == (dtypes.bool, (2, 3), "CPU", lt)
  assert props(x.ne(y)) == (dtypes.bool, (2, 3), "CPU", ne)

def test_cmp_of_vectors_is_bool_vector():
  v = UOp(Ops.PARAM, (UOp.vec(()),), (0, dtypes.float32.vec(4)))
  assert UOp(Ops.CMPLT, (v, v)).dtype is dtypes.bool.vec(4)

def test_where():
  p = bounded((2, 1), False, True, dtypes.bool, device="GPU")
  w = p.where(bounded((3,), -4, 9, dtypes.int16, device="CPU"), UOp.const(100, dtypes.int16))
  assert props(w) == (dtypes.int16, (2, 3), "GPU", (-4, 100)) and w.addrspace is AddrSpace.REG
  assert p.where(1.5, 2.5).dtype is dtypes.float32 and p.where(1.5, 2.5).min_max == (1.5, 2.5)

def test_alu_device_skips_constants():
  b = UOp.buffer((3,), I32, "GPU", 0)
  assert (UOp.const(1, I32) + b).device == "GPU" and (UOp.const(1, I32) + UOp.const(2, I32)).device is None
  assert UOp.const(True, dtypes.bool).where(UOp.const(1, I32), b).device == "GPU"

def test_decomposed_ops():
  assert props(UOp(Ops.NEG, (T,))) == (I32, (2, 3), "CPU", I32_RANGE)
  assert props(UOp(Ops.CMPEQ, (T, UOp.const(1, I32)))) == (dtypes.bool, (2, 3), "CPU", (False, True))
  assert UOp(Ops.SUB, (T, bounded((3,), 0, 1, slot=1))).shape == (2, 3)

# ---- call ops ----

def _function(op):
  p = UOp(Ops.PARAM, (UOp.vec((4, 5)),), (0, dtypes.int16))
  body = UOp(Ops.TUPLE, (p + p, p.cast(dtypes.float32), UOp.const(3, I32)))
  return UOp(op, (body, UOp.buffer((4, 5), dtypes.int16, "GPU", 7)))

@pytest.mark.parametrize("op", [Ops.FUNCTION, Ops.CALL])
def test_function_call(op):
  f = _function(op)
  assert (f.dtype, f.shape, f.device) == (dtypes.void, (), "GPU")  # device of src[1], the first argument
  assert (f.src[0].dtype, f.src[0].shape) == (dtypes.void, ())
  g0, g1, g2 = (UOp(Ops.GETTUPLE, (f,), i) for i in range(3))
  assert props(g0) == (dtypes.int16, (4, 5), "GPU", (-32768, 32767))
  assert props(g1) == (dtypes.float32, (4, 5), "GPU", (-math.inf, math.inf))
  assert props(g2) == (I32, (), "GPU", I32_RANGE)  # dtype range, not the constant's [3, 3]: the call is opaque

def test_gettuple_of_tuple():
  t = UOp(Ops.TUPLE, (T, UOp.const(2.0, dtypes.float32)))
  assert UOp(Ops.GETTUPLE, (t,), 1).dtype is dtypes.float32 and UOp(Ops.GETTUPLE, (t,), 0).shape == (2, 3)

def test_function_substitutes_symbolic_param_shapes():
  n = UOp.variable("n", 1, 16)
  p = UOp(Ops.PARAM, (UOp.vec((n,)),), (0, dtypes.float32))
  f = UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, (p + p, p.reshape((n, 1)).expand((n, n * 2)))), UOp.buffer((8,), dtypes.float32, "CPU", 0)))
  assert UOp(Ops.GETTUPLE, (f,), 0).shape == (8,) and UOp(Ops.GETTUPLE, (f,), 1).shape == (8, 16)

# ---- ordering and memory ops ----

def test_range():
  r = UOp.range(10, 0)
  assert props(r) == (dtypes.index, (), None, (0, 9)) and r.addrspace is AddrSpace.REG
  assert UOp.range(UOp.variable("n", 1, 8), 1).min_max == (0, 7)
  assert (UOp.range(4, 0) * 3 + UOp.range(3, 1)).min_max == (0, 11)

def test_index_of_pointer_param():
  p = UOp(Ops.PARAM, (UOp.vec((4,)),), (0, dtypes.float32.ptr(4)))
  i = p.index(UOp.range(4, 0))
  assert (i.dtype, i.shape, i.device, i.addrspace) == (dtypes.float32.ptr(4), (), None, AddrSpace.GLOBAL)
  assert i.min_max is None and p.min_max is None  # a pointer has no value range
  ld = UOp(Ops.LOAD, (i,))
  assert (ld.dtype, ld.shape, ld.min_max, ld.addrspace) == (dtypes.float32, (), (-math.inf, math.inf), AddrSpace.REG)

def test_store():
  b = UOp.buffer((2, 3), I32, "GPU", 1)
  s = UOp(Ops.STORE, (b, T + 1))
  assert (s.dtype, s.shape, s.device, s.min_max) == (dtypes.void, (), "GPU", None)
  gated = UOp(Ops.STORE, (b, T, T < 0))
  assert gated.shape == () and gated.dtype is dtypes.void

def test_after():
  b = UOp.buffer((2, 3), I32, "GPU", 1)
  a = UOp(Ops.AFTER, (b, UOp(Ops.STORE, (b, T))))
  assert props(a) == (I32, (2, 3), "GPU", I32_RANGE) and a.addrspace is AddrSpace.GLOBAL
  assert props(UOp(Ops.AFTER, (T,))) == props(T)

def test_load():
  b = UOp.buffer((2, 3), dtypes.float32, "CPU", 0)
  ld = UOp(Ops.LOAD, (b,), ("GPU", AddrSpace.LOCAL))
  assert (ld.dtype, ld.shape, ld.device, ld.addrspace) == (dtypes.float32, (2, 3), "GPU", AddrSpace.LOCAL)
  ld2 = UOp(Ops.LOAD, (b,), (None, AddrSpace.REG))
  assert (ld2.device, ld2.addrspace) == ("CPU", AddrSpace.REG)

def test_void_ops():
  s = UOp(Ops.STORE, (T, T))
  for u in (UOp.sink(s), UOp(Ops.GROUP, (s, s)), UOp(Ops.END, (s, UOp.range(3, 0))), UOp(Ops.LINEAR, (s,))):
    assert (u.dtype, u.shape, u.min_max) == (dtypes.void, (), None)

def test_markers_pass_through():
  for op in (Ops.CONTIGUOUS, Ops.CONTIGUOUSBACKWARD, Ops.DETACH):
    m = UOp(op, (T,))
    assert props(m) == props(T) and m.addrspace is AddrSpace.GLOBAL

# ---- addrspace ----

def test_addrspace():
  g = UOp.buffer((4,), I32, "CPU", 0)
  loc = UOp.buffer((4,), I32, "CPU", 1, AddrSpace.LOCAL)
  assert loc.reshape((2, 2)).permute((1, 0)).addrspace is AddrSpace.LOCAL
  assert UOp(Ops.CONTIGUOUS, (loc,)).addrspace is AddrSpace.LOCAL and UOp(Ops.COPY, (loc,), "GPU").addrspace is AddrSpace.LOCAL
  assert (g + loc).addrspace is AddrSpace.REG and g.cast(dtypes.float32).addrspace is AddrSpace.REG
  assert UOp(Ops.LOAD, (g,), ("CPU", AddrSpace.LOCAL)).addrspace is AddrSpace.LOCAL
  assert UOp(Ops.PARAM, (UOp.vec(()),), (0, I32, None, None)).addrspace is AddrSpace.GLOBAL
  assert UOp.variable("v", 0, 3).addrspace is AddrSpace.GLOBAL and UOp.const(1).addrspace is AddrSpace.REG

# ---- broadcasting ----

@pytest.mark.parametrize("a,b,out", [
  ((2, 3), (2, 3), (2, 3)), ((3, 1), (4,), (3, 4)), ((), (2, 3), (2, 3)), ((5, 1, 1), (1,), (5, 1, 1)), ((1, 3), (2, 1), (2, 3)),
  ((4, 1, 6), (5, 1), (4, 5, 6)), ((0,), (1,), (0,)), ((2, 0), (2, 1), (2, 0)),
])
def test_broadcast(a, b, out):
  x, y = bounded(a, 0, 1), bounded(b, 0, 1, slot=1)
  assert (x + y).shape == out and (y + x).shape == out and (x < y).shape == out
  assert bounded((), False, True, dtypes.bool, slot=2).where(x, y).shape == out

@pytest.mark.parametrize("a,b", [((2, 3), (3, 2)), ((3,), (4,)), ((2, 1, 3), (2, 2)), ((0,), (2,))])
def test_broadcast_errors(a, b):
  x, y = bounded(a, 0, 1), bounded(b, 0, 1, slot=1)
  msg = rf"^ADD: shapes must broadcast: right-aligned, each axis equal or 1 \(source shapes: {_re(a)}, {_re(b)}\)$"
  with pytest.raises(SpecViolation, match=msg): x + y

def test_broadcast_symbolic():
  n, m = UOp.variable("n", 1, 8), UOp.variable("m", 1, 8)
  x, y = bounded((n,), 0, 1), bounded((1,), 0, 1, slot=1)
  assert (x + y).shape == (n,) and (x + x).shape == (n,)
  assert (bounded((3, 1), 0, 1, slot=2) + x).shape == (3, n)
  with pytest.raises(SpecViolation, match="ADD: shapes must broadcast"): x + bounded((m,), 0, 1, slot=3)
  with pytest.raises(SpecViolation, match="ADD: shapes must broadcast"): x + bounded((3,), 0, 1, slot=3)

def _re(shape): return str(shape).replace("(", r"\(").replace(")", r"\)")

# ---- construction errors ----

B = UOp.buffer((2, 3), dtypes.float32, "CPU", 0)
C = UOp.buffer((4, 3), dtypes.float32, "CPU", 1)

@pytest.mark.parametrize("build,msg", [
  (lambda: B.reshape((5,)), r"^RESHAPE: shape \(2, 3\) -> \(5,\): the element count must not change \(6 != 5\)"),
  (lambda: B.reshape((2, 2)), r"RESHAPE: .*6 != 4"),
  (lambda: B.expand((4, 3)), r"^EXPAND: shape \(2, 3\) -> \(4, 3\): only size-1 axes expand"),
  (lambda: B.expand((1, 2, 3)), r"^EXPAND: shape \(2, 3\) -> \(1, 2, 3\): .*the number of axes must match"),
  (lambda: B.permute((0, 0)), r"^PERMUTE: arg \(0, 0\) must be a permutation of range\(2\) for shape \(2, 3\)"),
  (lambda: B.permute((0,)), r"^PERMUTE: arg \(0,\) must be a permutation of range\(2\)"),
  (lambda: B.permute((1, 2)), r"^PERMUTE: arg \(1, 2\) must be a permutation"),
  (lambda: UOp(Ops.FLIP, (B,), (True,)), r"^FLIP: arg \(True,\) must be one bool per axis of shape \(2, 3\)"),
  (lambda: B.pad((1, 0), (2, 3)), r"^PAD: shape \(2, 3\), offsets \(1, 0\), new shape \(2, 3\): T must fit inside the padded shape"),
  (lambda: B.pad((-1, 0), (3, 3)), r"^PAD: .*offsets \(-1, 0\).*T must fit inside the padded shape"),
  (lambda: B.pad((0,), (3,)), r"^PAD: .*one offset and size per axis"),
  (lambda: B.shrink((1, 0), (2, 3)), r"^SHRINK: shape \(2, 3\), offsets \(1, 0\), new shape \(2, 3\): the kept window must lie inside T"),
  (lambda: B.shrink((0, -1), (2, 2)), r"^SHRINK: .*the kept window must lie inside T"),
  (lambda: B.shrink((0, 0), (2, 4)), r"^SHRINK: .*the kept window must lie inside T"),
  (lambda: UOp(Ops.STORE, (B, C)), r"^STORE: buf.shape \(2, 3\) must equal val.shape \(4, 3\)"),
  (lambda: UOp(Ops.STORE, (B, UOp.const(1.0, dtypes.float32))), r"^STORE: buf.shape \(2, 3\) must equal val.shape \(\)"),
  (lambda: B.bitcast(dtypes.float64), r"^BITCAST: dtypes.float32 -> dtypes.float64 on shape \(2, 3\): total bytes must be preserved"),
  (lambda: UOp.const(1.0, dtypes.float32).bitcast(dtypes.int64), r"^BITCAST: .*on shape \(\): total bytes must be preserved"),
  (lambda: B + C, r"^ADD: shapes must broadcast.*\(source shapes: \(2, 3\), \(4, 3\)\)"),
  (lambda: (B < 1.0).where(B, C), r"^WHERE: shapes must broadcast.*\(2, 3\), \(2, 3\), \(4, 3\)"),
  (lambda: UOp(Ops.STACK, (B, C)), r"^STACK: all stacked shapes must match \(source shapes: \(2, 3\), \(4, 3\)\)"),
  (lambda: B.index(UOp.const(0), UOp.const(0), UOp.const(0)), r"^INDEX: 3 indices for a tensor of shape \(2, 3\)"),
  (lambda: B.index(UOp(Ops.STACK, (UOp.vec((0,)),))), r"^INDEX: an index must be \(\)- or \(k,\)-shaped, got \(1, 1\)"),
  (lambda: B.reduce(Ops.ADD, (2,)), r"^REDUCE: axes \(2,\) out of range for shape \(2, 3\)"),
  (lambda: UOp(Ops.REPLICATED, (B,), (-1,)), r"^REPLICATED: axes \(-1,\) out of range"),
  (lambda: UOp(Ops.GETTUPLE, (UOp(Ops.TUPLE, (B,)),), 1), r"^GETTUPLE: index 1 needs a TUPLE"),
  (lambda: UOp(Ops.GETTUPLE, (B,), 0), r"^GETTUPLE: index 0 needs a TUPLE"),
  (lambda: UOp(Ops.GETTUPLE, (UOp.const(1),), 0), r"^GETTUPLE: index 0 needs a TUPLE"),
  (lambda: UOp(Ops.RESHAPE, (B, UOp.const(6))), r"^RESHAPE: a shape argument must be a STACK of index scalars, got CONST"),
  (lambda: UOp(Ops.BUFFER, (B,), (0, dtypes.float32, "CPU")), r"^BUFFER: a shape argument must be a STACK"),
], ids=lambda x: "" if callable(x) else x.split(":")[0].strip("^"))
def test_construction_errors(build, msg):
  with pytest.raises(SpecViolation, match=msg): build()

def test_spec_violation_is_a_value_error():
  assert issubclass(SpecViolation, ValueError)

# ---- axis (multi-device sharding) ----

SB = UOp.buffer((4, 6), dtypes.float32, D2, 0)

def test_axis_of_sources():
  assert SB.axis == 0 and SB.device == D2
  assert UOp.buffer((4, 6), dtypes.float32, "GPU", 0).axis is None
  assert UOp(Ops.PARAM, (UOp.vec((4, 6)),), (0, dtypes.float32, D2)).axis == 0
  assert UOp.const(1.0, dtypes.float32).axis is None

@pytest.mark.parametrize("shape,axis", [((2, 2, 6), 0), ((24,), 0), ((8, 3), 0), ((1, 4, 6), 1), ((1, 1, 4, 6), 2), ((4, 6, 1), 0), ((2, 12), 0)])
def test_axis_reshape(shape, axis):
  assert SB.reshape(shape).axis == axis

def test_axis_reshape_after_permute():
  t = SB.permute((1, 0))  # (6, 4), sharded on axis 1
  assert t.axis == 1 and t.reshape((6, 2, 2)).axis == 1 and t.reshape((3, 2, 4)).axis == 2 and t.reshape((6, 4, 1)).axis == 1
  with pytest.raises(SpecViolation, match=r"RESHAPE: reshape \(6, 4\) -> \(2, 12\) moves the shard boundary of axis 1 over 2 devices"):
    _ = t.reshape((2, 12)).axis
  with pytest.raises(SpecViolation, match=r"RESHAPE: reshape \(6, 4\) -> \(24,\) moves the shard boundary"):
    _ = t.reshape((24,)).axis  # shards of columns are not runs of the flat array

def test_axis_reshape_that_splits_a_shard():
  with pytest.raises(SpecViolation, match=r"RESHAPE: reshape \(4, 6\) -> \(3, 8\) moves the shard boundary"): _ = SB.reshape((3, 8)).axis
  four = UOp.buffer((8, 6), dtypes.float32, ("A", "B", "C", "D"), 0)
  assert four.reshape((4, 2, 6)).axis == 0
  with pytest.raises(SpecViolation, match="moves the shard boundary"): _ = four.reshape((2, 4, 6)).axis

def test_axis_permute_reduce_replicated():
  t = SB.reshape((4, 1, 6)).permute((2, 0, 1))
  assert t.axis == 1
  assert SB.reduce(Ops.ADD, (0,)).axis is None and SB.reduce(Ops.MAX, (1,)).axis == 0 and SB.reduce(Ops.ADD, (0, 1)).axis is None
  assert UOp(Ops.REPLICATED, (SB,), (0,)).axis is None and UOp(Ops.REPLICATED, (SB,), (1,)).axis == 0

def test_axis_copy():
  assert UOp(Ops.COPY, (SB,), "CPU").axis is None
  assert UOp(Ops.COPY, (UOp.buffer((4, 6), dtypes.float32, "CPU", 0),), D2).axis == 0

def test_axis_alu_inherits():
  plain = UOp.buffer((4, 6), dtypes.float32, "GPU:0", 3)
  assert (SB + SB).axis == 0 and (plain + SB).axis == 0 and (SB * 2.0).axis == 0 and (SB < 1.0).where(SB, 0.0).axis == 0
  assert SB.cast(dtypes.int32).axis == 0 and SB.recip().axis == 0 and (plain + plain).axis is None
  assert (plain < 1.0).where(SB, 0.0).axis == 0

def test_axis_alu_broadcast_right_aligns():
  row = SB.reshape((24,))  # axis 0 of a (24,) tensor
  big = UOp.buffer((3, 24), dtypes.float32, "GPU:0", 3)
  assert (row + big).shape == (3, 24) and (row + big).axis == 1 and (big + row).axis == 1

def test_axis_other_movement():
  assert SB.flip((0,)).axis == 0 and SB.pad((0, 1), (4, 8)).axis == 0 and SB.shrink((0, 0), (4, 2)).axis == 0
  assert SB.reshape((4, 1, 6)).expand((4, 5, 6)).axis == 0 and UOp(Ops.STACK, (SB, SB)).axis == 1
  assert SB.permute((1, 0)).index(UOp.const(1)).axis == 0
  assert SB.index(UOp.vec((0, 1))).axis == 0 and SB.index(UOp.const(1)).axis is None
  assert UOp(Ops.CONTIGUOUS, (SB,)).axis == 0 and UOp(Ops.AFTER, (SB,)).axis == 0 and UOp(Ops.LOAD, (SB,), (None, AddrSpace.REG)).axis == 0

# ---- no recursion on deep graphs ----

def _chain(n):
  v = UOp.variable("v", 0, 1, I32)
  c = v
  for _ in range(n): c = UOp(Ops.ADD, (c, v))
  return c

def test_deep_chain_properties_do_not_recurse():
  limit = sys.getrecursionlimit()
  sys.setrecursionlimit(1000)
  try:
    c = _chain(100_000)
    assert c.min_max == (0, 100_001) and c.dtype is I32 and c.shape == ()
    c = _chain(5_000)  # deeper than the recursion limit; each property walks the graph on its own
    assert c.device is None and c.addrspace is AddrSpace.REG and c.axis is None and c.vmax == 5_001
  finally:
    sys.setrecursionlimit(limit)
