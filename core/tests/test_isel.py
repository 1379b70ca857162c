"""isel's decompositions: only primitives remain, each seed row equals numpy's op, the polynomials meet their accuracy
targets on dense grids and at the special values, threefry matches the reference bit for bit, and native ops stay."""
import math

import numpy as np
import pytest
from tinyspec.dtype import DType, dtypes
from tinyspec.engine import transcendental as T
from tinyspec.engine.isel import isel
from tinyspec.interpreter.alu import bitcast, np_dtype, run_alu, threefry2x32
from tinyspec.uop import Ops, UOp, verify
from tinyspec.uop.ops import OPS, GroupOp

PRIMITIVES = GroupOp.ALU | {Ops.CONST, Ops.BITCAST, Ops.PARAM, Ops.STACK}

def param(dt: DType, slot: int = 0) -> UOp: return UOp(Ops.PARAM, (UOp.vec(()),), (slot, dt))

def run(root: UOp, env: dict[UOp, np.ndarray]) -> np.ndarray:
  """Evaluate an elementwise graph over numpy arrays: PARAMs from env, every other node by the interpreter's ALU."""
  vals: dict[UOp, np.ndarray] = {}
  for u in root.toposort():
    if u in env: vals[u] = np.asarray(env[u], np_dtype(u.dtype))
    elif u.op is Ops.CONST: vals[u] = np.array(u.arg[0], np_dtype(u.dtype))
    elif u.op is Ops.STACK: continue  # a shape vector: no value
    elif u.op is Ops.BITCAST: vals[u] = bitcast(vals[u.src[0]], u.src[0].dtype, u.dtype)
    else: vals[u] = run_alu(u.op, u.dtype, *[vals[s] for s in u.src])
  return vals[root]

def lowered(root: UOp, native=frozenset()) -> UOp:
  """isel's output, checked: no decomposed op but the native ones, primitives only, and a graph the verifier accepts."""
  out = isel(root, frozenset(native))
  assert {u.op for u in out.toposort()} <= PRIMITIVES | set(native)
  verify(out, "tensor")
  return out

def evaluate(build, dt: DType, xs: np.ndarray) -> np.ndarray:
  x = param(dt)
  return run(lowered(build(x)), {x: xs})

def assert_close(got, want, atol: float, rtol: float):
  """Each value within atol OR rtol of the reference; infinities and nans must match exactly."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  same = (got == want) | (np.isnan(got) & np.isnan(want))
  with np.errstate(invalid="ignore"): err = np.abs(got - want)
  bad = ~same & ~((err <= atol) | (err <= rtol * np.abs(want)))
  assert not bad.any(), f"{bad.sum()} off, e.g. got {got[bad][:4]} want {want[bad][:4]}"

def exp(x: UOp) -> UOp: return UOp(Ops.EXP2, (x * math.log2(math.e),))  # as the front end spells exp and log
def log(x: UOp) -> UOp: return UOp(Ops.LOG2, (x,)) * math.log(2)
def sin(x: UOp) -> UOp: return UOp(Ops.SIN, (x,))
def unary(op: Ops): return lambda x: UOp(op, (x,))

def reference(f, xs: np.ndarray, npdt) -> np.ndarray:
  """numpy's value at the exact inputs, computed in float64 and rounded to the format (so overflow gives inf there too)."""
  with np.errstate(all="ignore"): return f(xs.astype(np.float64)).astype(npdt)

SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0]

# ---- only primitives remain ----

@pytest.mark.parametrize("op", sorted(GroupOp.Decomposed - {Ops.THREEFRY}))
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32, dtypes.float64])
def test_every_decomposed_float_op_lowers_to_primitives(op, dt):
  lowered(UOp(op, tuple(param(dt, i) for i in range(OPS[op].nsrc[0]))))

def test_threefry_lowers_to_uint32_arx():
  out = lowered(UOp(Ops.THREEFRY, (param(dtypes.uint64), param(dtypes.uint64, 1))))
  assert {u.dtype for u in out.toposort() if u.op in (Ops.ADD, Ops.XOR, Ops.SHL)} == {dtypes.uint32, dtypes.uint64}

def test_other_nodes_pass_through():
  x, buf = param(dtypes.float32), param(dtypes.float32, 1)
  sink = UOp.sink(UOp(Ops.STORE, (buf, UOp(Ops.SUB, (x, UOp(Ops.NEG, (x,)))))))
  out = isel(sink)
  assert out.op is Ops.SINK and out.src[0].op is Ops.STORE and out.src[0].src[0] is buf
  assert out.src[0].src[1] is x + x * -1 * -1
  assert isel(out) is out  # nothing left to do

# ---- each seed row equals numpy's op ----

INT_VALS = np.array([-7, -3, -1, 0, 1, 2, 5, 100], np.int32)
FLOAT_VALS = np.array([-7.5, -3.0, -1.0, -0.0, 0.0, 0.25, 1.0, 2.0, 5.0, 1e30], np.float32)
BOOL_VALS = np.array([False, True])

@pytest.mark.parametrize("op, dtypes_", [
  (Ops.NEG, (dtypes.int32, dtypes.float32, dtypes.uint8)), (Ops.SUB, (dtypes.int32, dtypes.float32, dtypes.uint8)),
  (Ops.DIV, (dtypes.float32,)), (Ops.CMPGT, (dtypes.int32, dtypes.float32, dtypes.bool)), (Ops.CMPGE, (dtypes.int32, dtypes.float32, dtypes.bool)),
  (Ops.CMPLE, (dtypes.int32, dtypes.float32, dtypes.bool)), (Ops.CMPEQ, (dtypes.int32, dtypes.float32, dtypes.bool)),
  (Ops.NOT, (dtypes.bool, dtypes.int32)), (Ops.MULACC, (dtypes.int32, dtypes.float32)),
])
def test_seed_rows_equal_numpy(op, dtypes_):
  for dt in dtypes_:
    vals = {dtypes.bool: BOOL_VALS, dtypes.float32: FLOAT_VALS}.get(dt, INT_VALS).astype(np_dtype(dt))
    n = 1 if op in (Ops.NEG, Ops.NOT) else 3 if op is Ops.MULACC else 2
    args = [a.ravel() for a in np.meshgrid(*[vals] * n)]  # every combination of values
    ps = [param(dt, i) for i in range(n)]
    node = UOp(op, tuple(ps))
    with np.errstate(all="ignore"):
      got, want = run(lowered(node), dict(zip(ps, args))), run_alu(op, node.dtype, *args)
      if op is Ops.DIV: assert_close(got, want, 0, 2.0 ** -23)  # a * recip(b) rounds twice: within an ulp of a / b
      else: np.testing.assert_array_equal(got, want, err_msg=f"{op} {dt}")

def test_comparisons_with_nan_follow_the_seed_rows():
  # the seed's CMPGE is "not (a < b)", which is true for nan: the decomposition is what the table says, not IEEE's >=
  a, b = param(dtypes.float32), param(dtypes.float32, 1)
  got = run(lowered(UOp(Ops.CMPGE, (a, b))), {a: np.float32([math.nan]), b: np.float32([1.0])})
  assert got.tolist() == [True]

def test_sqrt_and_pow():
  xs = np.concatenate([np.geomspace(1e-30, 1e30, 20001), [0.0, math.inf, -1.0, math.nan]]).astype(np.float32)
  assert_close(evaluate(unary(Ops.SQRT), dtypes.float32, xs), reference(np.sqrt, xs, np.float32), 0, 1e-5)
  a, b = param(dtypes.float32), param(dtypes.float32, 1)
  base, expo = np.meshgrid(np.geomspace(0.01, 100, 101, dtype=np.float32), np.linspace(-8, 8, 101, dtype=np.float32))
  got = run(lowered(UOp(Ops.POW, (a, b))), {a: base.ravel(), b: expo.ravel()})
  assert_close(got, np.power(base.ravel().astype(np.float64), expo.ravel()).astype(np.float32), 0, 2e-5)  # |log2| <= 53: its error is scaled up

# ---- accuracy of the polynomials ----

def test_exp_float32():
  xs = np.concatenate([np.linspace(-100, 100, 200001), SPECIALS, [88.7, 88.8, -87.3, -103.9]]).astype(np.float32)
  assert_close(evaluate(exp, dtypes.float32, xs), reference(np.exp, xs, np.float32), 2e-5, 1e-5)

def test_log_float32():
  xs = np.concatenate([np.linspace(0, 1e6, 100001)[1:], np.geomspace(1e-45, 1e6, 100000), SPECIALS, [-5.0, 1e-40, 3e38]]).astype(np.float32)
  assert_close(evaluate(log, dtypes.float32, xs), reference(np.log, xs, np.float32), 2e-5, 1e-5)

def test_exp2_log2_float32_in_ulps():
  # the approximations themselves, over the whole range: within a few ulp of the rounded true value
  xs = np.linspace(-125, 127, 100001).astype(np.float32)
  want = reference(np.exp2, xs, np.float32)
  assert np.all(np.abs(evaluate(unary(Ops.EXP2), dtypes.float32, xs) - want) <= 2 * np.spacing(want))
  xs = np.geomspace(1e-45, 3e38, 100001).astype(np.float32)
  want = reference(np.log2, xs, np.float32)
  assert np.all(np.abs(evaluate(unary(Ops.LOG2), dtypes.float32, xs) - want) <= 4 * np.spacing(np.abs(want)))

def test_exp2_float32_subnormal_and_overflow():
  xs = np.float32([-126.5, -140.25, -149.0, -149.5, -150.5, -200.0, 127.99, 128.0, 1000.0])
  np.testing.assert_array_equal(evaluate(unary(Ops.EXP2), dtypes.float32, xs), reference(np.exp2, xs, np.float32))

def test_sin_float32():
  xs = np.concatenate([np.linspace(-1e6, 1e6, 200001), np.linspace(-10, 10, 20001), SPECIALS, [1e-30, -1e-40]]).astype(np.float32)
  assert_close(evaluate(sin, dtypes.float32, xs), reference(np.sin, xs, np.float32), 3e-3, 0)
  assert_close(evaluate(sin, dtypes.float32, xs), reference(np.sin, xs, np.float32), 2e-7, 1e-6)  # the exact reduction does far better

def test_sin_float32_reduction_is_exact_everywhere():
  rng = np.random.default_rng(0)
  xs = np.concatenate([np.exp(rng.uniform(0, 88, 50000)), np.float32(np.pi) * np.arange(1, 10001)]).astype(np.float32)
  xs = np.concatenate([xs, -xs, [np.finfo(np.float32).max]])
  assert_close(evaluate(sin, dtypes.float32, xs), reference(np.sin, xs, np.float32), 2e-7, 1e-6)

@pytest.mark.parametrize("build, f, xs", [
  (unary(Ops.EXP2), np.exp2, np.linspace(-25, 16, 20001)), (unary(Ops.LOG2), np.log2, np.geomspace(6e-8, 65504, 20001)),
  (sin, np.sin, np.linspace(-65504, 65504, 20001)), (unary(Ops.SQRT), np.sqrt, np.geomspace(6e-8, 65504, 20001)),
  (exp, np.exp, np.linspace(-17, 11, 20001)), (log, np.log, np.geomspace(6e-8, 65504, 20001)),
], ids=["exp2", "log2", "sin", "sqrt", "exp", "log"])
def test_float16_computes_in_float32(build, f, xs):
  xs = np.concatenate([xs, SPECIALS]).astype(np.float16)
  out = evaluate(build, dtypes.float16, xs)
  assert out.dtype == np.float16
  loose = build in (exp, log)  # x * log2(e) and log2(x) * ln 2 round to float16 first: the front end's error, not isel's
  assert_close(out, reference(f, xs, np.float16), 1e-2 if loose else 1e-3, 1e-2 if loose else 1e-3)

def test_exp_log_float64():
  xs = np.concatenate([np.linspace(-700, 700, 100001), SPECIALS])
  assert_close(evaluate(exp, dtypes.float64, xs), np.exp(xs), 0, 1e-13)  # x * log2(e) rounds with |x| * 2**-53: 1e-13 at 700
  assert_close(evaluate(unary(Ops.EXP2), dtypes.float64, xs), np.exp2(xs), 0, 3e-16)
  xs = np.concatenate([np.geomspace(5e-324, 1e308, 100001), np.linspace(0.5, 2, 10001), SPECIALS, [-3.0]])
  with np.errstate(all="ignore"):
    assert_close(evaluate(log, dtypes.float64, xs), np.log(xs), 0, 1e-15)
    assert_close(evaluate(unary(Ops.LOG2), dtypes.float64, xs), np.log2(xs), 0, 1e-15)

def test_sin_float64():
  rng = np.random.default_rng(1)
  xs = np.concatenate([np.linspace(-10, 10, 20001), rng.uniform(-1e6, 1e6, 20000), np.exp(rng.uniform(-700, 709, 20000)),
                       np.pi * np.arange(1, 2001), [1.3e13, 1.4e13, 1e300], SPECIALS])
  xs = np.concatenate([xs, -xs])
  with np.errstate(all="ignore"): assert_close(evaluate(sin, dtypes.float64, xs), np.sin(xs), 1e-18, 1e-12)

def test_specials():
  # exp(inf) = inf, exp(-inf) = 0, log(0) = -inf, log(-1) = nan, log(inf) = inf, sin(+-inf) = nan, nan in gives nan out
  xs = np.float32([math.inf, -math.inf, math.nan, 0.0, -0.0, -1.0])
  for dt, npdt in ((dtypes.float32, np.float32), (dtypes.float64, np.float64), (dtypes.float16, np.float16)):
    with np.errstate(all="ignore"):
      for build, f in ((exp, np.exp), (log, np.log), (sin, np.sin), (unary(Ops.SQRT), np.sqrt)):
        got = evaluate(build, dt, xs.astype(npdt))
        assert_close(got, f(xs.astype(npdt)), 0, 1e-6)
        if f is np.sin: assert np.signbit(got[4])  # sin(-0.0) = -0.0

def ulps(got, want) -> np.ndarray:
  """|got - want| in ulps of want (want's dtype); equal values (zeros of the same sign, infinities, nans) are 0 apart."""
  g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
  with np.errstate(all="ignore"): err = np.abs(g - w) / np.spacing(np.abs(want)).astype(np.float64)
  same = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
  return np.where(same, 0.0, np.where(np.isfinite(g) & np.isfinite(w) & (w != 0), err, np.inf))

def trig_args(npdt, hi: float, n: int = 20000) -> np.ndarray:
  """+-x log-uniform in [1e-6, hi], uniform in [0, 10], and the floats nearest k pi/2 (the hardest to reduce) up to 1e9."""
  rng = np.random.default_rng(3)
  near = np.round(np.exp(rng.uniform(0, math.log(1e9 / (math.pi / 2)), n))) * (math.pi / 2)
  xs = np.concatenate([np.exp(rng.uniform(math.log(1e-6), math.log(hi), n)), rng.uniform(0, 10, n), near]).astype(npdt)
  return np.concatenate([xs, -xs])

@pytest.mark.parametrize("dt, npdt, hi, bound", [(dtypes.float32, np.float32, 3e38, 2), (dtypes.float64, np.float64, 1e9, 2),
                                                  (dtypes.float64, np.float64, 1e300, 3)], ids=["float32", "float64", "float64-huge"])
def test_sin_in_ulps(dt, npdt, hi, bound):
  # the quadrant reduction and the two series: within 2 ulp of the rounded true value over the whole range; float64 past
  # Cody-Waite's range (6.6e12) makes r from the fixed-point bits in float arithmetic, which rounds a few more times
  xs = trig_args(npdt, hi)
  assert ulps(evaluate(sin, dt, xs), reference(np.sin, xs, npdt)).max() <= bound

def strip_detach(root: UOp) -> UOp: return root.substitute({u: u.src[0] for u in root.toposort() if u.op is Ops.DETACH})  # as realize does

FRONT = {"sin": (lambda x: T.sin_cos(x, 0), np.sin, 2), "cos": (lambda x: T.sin_cos(x, 1), np.cos, 2), "tan": (T.tan, np.tan, 4)}

@pytest.mark.parametrize("native", [frozenset(), frozenset({Ops.SIN, Ops.DIV})], ids=["decomposed", "native"])
@pytest.mark.parametrize("fn", FRONT)
@pytest.mark.parametrize("dt, npdt", [(dtypes.float32, np.float32), (dtypes.float64, np.float64)], ids=["float32", "float64"])
def test_front_end_trig(fn, native, dt, npdt):
  # the front end's sin, cos and tan: SIN of the exactly reduced argument, whether isel decomposes SIN or the device has it
  # (here numpy's sin, as the interpreter runs a native SIN); up to 1e9, as exact as SIN itself
  build, f, bound = FRONT[fn]
  x = param(dt)
  xs = trig_args(npdt, 1e9)
  assert ulps(run(lowered(strip_detach(build(x)), native), {x: xs}), reference(f, xs, npdt)).max() <= bound
  specials = np.array([0.0, -0.0, math.inf, -math.inf, math.nan], npdt)
  want = {"sin": [0.0, -0.0, math.nan, math.nan, math.nan], "cos": [1.0, 1.0, math.nan, math.nan, math.nan]}.get(fn, [0.0, -0.0] + [math.nan] * 3)
  assert (ulps(run(lowered(strip_detach(build(x)), native), {x: specials}), np.array(want, npdt)) == 0).all()

@pytest.mark.parametrize("native", [frozenset(), frozenset({Ops.EXP2})], ids=["decomposed", "native"])
@pytest.mark.parametrize("dt, npdt", [(dtypes.float32, np.float32), (dtypes.float64, np.float64)], ids=["float32", "float64"])
def test_front_end_exp(native, dt, npdt):
  # e**x = 2**n EXP2(r / ln 2), x = n ln 2 + r exact: within 2 ulp from the subnormal results to overflow
  fi = np.finfo(npdt)
  xs = np.concatenate([np.random.default_rng(4).uniform(math.log(float(fi.smallest_subnormal)) - 2, math.log(float(fi.max)) + 2, 100000),
                       [0.0, -0.0, 1.0, math.inf, -math.inf, math.nan, 1e30, -1e30]]).astype(npdt)
  x = param(dt)
  assert ulps(run(lowered(T.exp(x), native), {x: xs}), reference(np.exp, xs, npdt)).max() <= 2

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64])
def test_exp_reduces_its_argument_once(dt):
  # the front end's exp reduces x itself, so isel's EXP2 of that argument is the series alone: no second TRUNC, fewer
  # operations (float32: 51 against 64); an EXP2 of anything else keeps its own reduction
  x = param(dt)
  def count(root: UOp, op) -> int: return sum(u.op in op for u in root.toposort())
  exp, plain = lowered(T.exp(x)), lowered(UOp(Ops.EXP2, (x,)))
  assert count(exp, {Ops.TRUNC}) == 1 and count(plain, {Ops.TRUNC}) == 1
  twice = count(lowered(T.exp(x), frozenset({Ops.EXP2})), GroupOp.ALU) - 1 + count(plain, GroupOp.ALU)  # a general EXP2 in place of EXP2
  assert count(exp, GroupOp.ALU) < twice

def test_front_end_exp_is_exact_at_zero():
  x = param(dtypes.float32)
  assert run(lowered(T.exp(x)), {x: np.float32([0.0, -0.0])}).tolist() == [1.0, 1.0]

def test_sqrt_in_ulps():
  # EXP2(LOG2(a) / 2) and a Newton step: within an ulp over all positive floats; sqrt(-0.0) = -0.0
  for dt, npdt in ((dtypes.float32, np.float32), (dtypes.float64, np.float64)):
    fi = np.finfo(npdt)
    xs = np.concatenate([np.exp(np.random.default_rng(5).uniform(math.log(float(fi.smallest_subnormal)), math.log(float(fi.max)), 100000)),
                         [0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, 4.0]]).astype(npdt)
    with np.errstate(invalid="ignore"): assert ulps(evaluate(unary(Ops.SQRT), dt, xs), np.sqrt(xs)).max() <= 1

def pow_args(npdt, span: float, n: int = 50000) -> tuple[np.ndarray, np.ndarray]:
  """a = 2**u, u uniform in [-20, 20], and b = y / u with y uniform in [-span, span]: b log2 a across the exponent range,
  with |b| up to thousands where a is near 1 or |log2 a| is about 1/2 (where the product's rounding would cost most)."""
  rng = np.random.default_rng(6)
  u = np.concatenate([rng.uniform(-20, 20, n), rng.uniform(-0.6, 0.6, n)])
  return np.exp2(u).astype(npdt), (rng.uniform(-span, span, 2 * n) / u).astype(npdt)

@pytest.mark.parametrize("dt, npdt, span", [(dtypes.float32, np.float32, 125), (dtypes.float64, np.float64, 1000)], ids=["float32", "float64"])
def test_pow_in_ulps(dt, npdt, span):
  a, b = param(dt), param(dt, 1)
  base, expo = pow_args(npdt, span)
  with np.errstate(all="ignore"): want = np.power(base.astype(np.float64), expo.astype(np.float64)).astype(npdt)
  assert ulps(run(lowered(UOp(Ops.POW, (a, b))), {a: base, b: expo}), want).max() <= 2

def test_pow_special_values():
  # POW(a, b) for a >= 0 follows C99's pow (numpy's power), negative a gives nan; subnormal bases and results included
  vals = [0.0, -0.0, 1.0, 2.0, 0.5, 3.0, 0.3, math.inf, -math.inf, math.nan, 1e-40, 1e30, -2.0, -0.5, 149.0, -149.0, -150.0, 128.0]
  for dt, npdt in ((dtypes.float32, np.float32), (dtypes.float64, np.float64)):
    base, expo = (v.ravel().astype(npdt) for v in np.meshgrid(vals, vals))
    a, b = param(dt), param(dt, 1)
    with np.errstate(all="ignore"): want = np.where(base < 0, np.nan, np.power(np.abs(base), expo)).astype(npdt)
    want = np.where(expo == 0, 1.0, want).astype(npdt)  # x**0 = 1 even for a negative or nan x
    got = run(lowered(UOp(Ops.POW, (a, b))), {a: base, b: expo})
    assert ulps(got, want).max() <= 1, [(x, y, g, w) for x, y, g, w in zip(base, expo, got, want) if ulps(g, w) > 1][:5]

def test_pow_of_x_minus_x_is_a_select():
  # Tensor.pow's nan-slope factor is c ** (b - detach(b)), b - b once lowered: +0 for finite b, whatever c (C99's x ** 0 =
  # 1), nan for b = +-inf or nan, so c ** nan: 1 for c = 1, else nan. isel selects those instead of computing a POW
  vals = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 1e30, math.inf, -math.inf, math.nan]
  for dt, npdt in ((dtypes.float32, np.float32), (dtypes.float64, np.float64)):
    c, b = (v.ravel().astype(npdt) for v in np.meshgrid(vals, vals))
    pc, pb = param(dt), param(dt, 1)
    out = lowered(UOp(Ops.POW, (pc, pb + pb * -1)))
    assert out.dtype == dt and sum(u.op is Ops.TRUNC for u in out.toposort()) == 0  # no POW was decomposed (no exp2 series)
    with np.errstate(all="ignore"): want = np.power(c, b - b)
    np.testing.assert_array_equal(run(out, {pc: c, pb: b}), want)

def test_constants():
  assert T.INV_PI >> (T.INV_PI_BITS - 53) == int(math.ldexp(1 / math.pi, 53))  # the top bits of 1/pi
  assert math.fsum(T.CW_PI_PARTS) == math.pi
  for i, c in enumerate(T.CW_PI_PARTS[:-1]): assert math.ldexp(c, 30 + 32 * i).is_integer()  # 32 bits each: products with n < 2**21 are exact

# ---- threefry ----

def test_threefry_matches_reference():
  rng = np.random.default_rng(2)
  xs, keys = rng.integers(0, 2**64, 20000, dtype=np.uint64), rng.integers(0, 2**64, 20000, dtype=np.uint64)
  x, key = param(dtypes.uint64), param(dtypes.uint64, 1)
  out = lowered(UOp(Ops.THREEFRY, (x, key)))
  np.testing.assert_array_equal(run(out, {x: xs, key: keys}), threefry2x32(xs, keys))
  # Random123's known-answer vectors for threefry2x32_20: (counter, key) -> result, each as (low word, high word)
  for ctr, k, want in [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
                       ((0xFFFFFFFF,) * 2, (0xFFFFFFFF,) * 2, (0x1CB996FC, 0xBB002BE7)),
                       ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0))]:
    pack = lambda w: np.uint64([w[0] | w[1] << 32])
    assert run(out, {x: pack(ctr), key: pack(k)})[0] == pack(want)[0]

# ---- native ops stay ----

def test_native_ops_are_left_alone():
  x = param(dtypes.float32)
  for op in (Ops.EXP2, Ops.SIN, Ops.SQRT, Ops.NEG):
    assert isel(UOp(op, (x,)), frozenset({op})) is UOp(op, (x,))
  # SQRT goes to EXP2 and LOG2 (and a Newton step), which stay where they are native and become polynomials where they are not
  sqrt = UOp(Ops.SQRT, (x,))
  assert UOp(Ops.EXP2, (UOp(Ops.LOG2, (x,)) * 0.5,)) in isel(sqrt, frozenset({Ops.EXP2, Ops.LOG2})).toposort()
  partly = isel(sqrt, frozenset({Ops.LOG2}))
  assert UOp(Ops.LOG2, (x,)) in partly.toposort() and Ops.EXP2 not in {u.op for u in partly.toposort()}
  # SUB is ADD(a, NEG(b)): with NEG native, NEG stays
  y = param(dtypes.float32, 1)
  assert isel(UOp(Ops.SUB, (x, y)), frozenset({Ops.NEG})) is x + UOp(Ops.NEG, (y,))
  # a native op on 16-bit floats is not widened
  h = param(dtypes.float16)
  assert isel(UOp(Ops.SIN, (h,)), frozenset({Ops.SIN})) is UOp(Ops.SIN, (h,))
  lowered(UOp(Ops.EXP2, (h,)), {Ops.SIN})  # ... and one that is not native is, whatever else is
