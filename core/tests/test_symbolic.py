"""The symbolic simplifier: each rule family on its classic case, and property tests that simplifying never changes a value."""
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tinyspec.dtype import dtypes
from tinyspec.uop import Ops, UOp, verify
from tinyspec.uop.rewrite import graph_rewrite
from tinyspec.uop.symbolic import simplify, sym

x, y, z = UOp.variable("x", 0, 10), UOp.variable("y", 0, 3), UOp.variable("z", -5, 5)

def const_value(u: UOp):
  assert u.op is Ops.CONST, f"expected a constant, got {u.op}"
  return u.arg[0]

@pytest.mark.parametrize("expr, expected", [
  (lambda: x + 0, lambda: x), (lambda: x * 1, lambda: x), (lambda: x // 1, lambda: x), (lambda: x.maximum(x), lambda: x),
  (lambda: (x * 4 + y) // 4, lambda: x), (lambda: (x * 4 + y) % 4, lambda: y), (lambda: (y + x * 4) // 4, lambda: x),
  (lambda: y % 4, lambda: y), (lambda: (x * 8) // 4, lambda: x * 2), (lambda: x // 2 // 3, lambda: x // 6), (lambda: x % 6 % 3, lambda: x % 3),
  (lambda: (x + 3) + 4, lambda: x + 7), (lambda: x * 2 * 3, lambda: x * 6), (lambda: x * 2 + x * 3, lambda: x * 5), (lambda: x + x, lambda: x * 2),
  (lambda: (x + 1) * 3, lambda: x * 3 + 3), (lambda: 3 + x, lambda: x + 3), (lambda: (z + x) + x, lambda: z + x * 2),
  (lambda: (x < 100).where(y, z), lambda: y), (lambda: (x < 0).where(y, z), lambda: z), (lambda: (x > 3).where(y, y), lambda: y),
  (lambda: ((x * 4 + y) // 4 + (x * 4 + y) % 4 + x * 0 + y * 1 - y) * z, lambda: (x + y) * z),
], ids=["x+0", "x*1", "x//1", "max(x,x)", "(x*4+y)//4", "(x*4+y)%4", "(y+x*4)//4", "y%4", "(x*8)//4", "x//2//3", "x%6%3", "(x+3)+4", "x*2*3",
        "x*2+x*3", "x+x", "(x+1)*3", "3+x", "(z+x)+x", "where-true", "where-false", "where-same", "bench-term"])
def test_rewrites_to(expr, expected):
  assert simplify(expr()) is expected()

@pytest.mark.parametrize("expr, value", [
  (lambda: x * 0, 0), (lambda: x % 1, 0), (lambda: x - x, 0), (lambda: x // x, None), (lambda: y // 4, 0), (lambda: (x * 4) % 2, 0),
  (lambda: x < 11, True), (lambda: x < 0, False), (lambda: x.ne(-1), True), (lambda: x.ne(x), False), (lambda: (x + 5) < 3, False),
  (lambda: UOp.const(7) // 2, 3), (lambda: UOp.const(-7) // 2, -4), (lambda: UOp.const(-7) % 2, 1), (lambda: x.maximum(11) - x.maximum(11), 0),
], ids=["x*0", "x%1", "x-x", "x//x-has-0", "y//4", "(x*4)%2", "x<11", "x<0", "x!=-1", "x!=x", "x+5<3", "7//2", "-7//2", "-7%2", "max-max"])
def test_folds_to_constant(expr, value):
  out = simplify(expr())
  if value is None: assert out.op is Ops.IDIV  # x can be 0, so x//x must stay
  else: assert const_value(out) == value

@pytest.mark.parametrize("expr, dtype", [(lambda: UOp.const(1) < 2, dtypes.bool), (lambda: UOp.const(3).ne(3), dtypes.bool),
                                          (lambda: UOp.const(3, dtypes.int8) * 100, dtypes.int8), (lambda: x < 11, dtypes.bool)])
def test_folded_constants_keep_the_node_dtype(expr, dtype):
  out = simplify(expr())
  assert out.op is Ops.CONST and out.dtype is dtype and type(out.arg[0]) is (bool if dtype is dtypes.bool else int)
  if dtype is dtypes.int8: assert out.arg[0] == 44  # 300 wraps to 44 in int8

def test_coefficients_past_the_divisor_are_split():
  # a conv's input row: (y + 59*ky) % 58 and // 58 with y < 56, ky < 3; 59*ky is 58*ky + ky, and y + ky < 58
  yy, ky = UOp.variable("yy", 0, 55), UOp.variable("ky", 0, 2)
  assert simplify((yy + ky * 59) % 58) in (yy + ky, ky + yy) and simplify((yy + ky * 59) // 58) is ky
  assert simplify((x * 7 + y) % 5).op is Ops.MOD and all(((a * 7 + b) % 5) == simplify((x * 7 + y) % 5).eval({x: a, y: b})
                                                          for a in range(11) for b in range(4))  # x*2 + y can pass 5: the % stays

def test_x_div_x_when_never_zero():
  w = UOp.variable("w", 1, 9)
  assert const_value(simplify(w // w)) == 1 and const_value(simplify(w % w)) == 0

def test_floats_are_not_reassociated():
  f = UOp.variable("f", 0, 10, dtypes.float32)
  assert simplify((f + 1.0) + 2.0).src[1].arg[0] == 2.0  # float addition is not associative: (f+1)+2 stays
  assert simplify(f * 0.0).op is Ops.MUL  # nan * 0 is nan, not 0

def test_no_fold_when_int32_may_wrap():
  big = UOp.variable("big", 0, 2**31 - 1, dtypes.int32)
  e = (big * 4 + 1) // 4  # big*4 wraps in int32, so (q*4 + r)//4 -> q is not exact there
  out = simplify(e)
  for v in (0, 5, 2**29, 2**31 - 1): assert out.eval({big: v}) == e.eval({big: v})

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint64], ids=lambda d: d.name)
def test_multiples_and_quotients_of_wrapped_ints(dt):
  # found by the fuzzer (uint64-50322 on OPENCL, on every device): -x, in uint64 x * (2**64 - 1), was "a multiple of 3",
  # so (-x) % 3 folded to 0; and int8 x // 100 // 100 became x // 16, 10000 wrapped to int8
  v = UOp.variable("v", dt.min, dt.max, dt)
  for e in ((v * -6) % 3, (v * 6) % 3, (-v) % 5, v // 100 // 100):
    out = simplify(e)
    for x in (dt.min, 0, 1, 7, 50, dt.max // 2 + 3, dt.max): assert out.eval({v: x}) == e.eval({v: x}), (e, x)
  assert simplify((UOp.variable("i", 0, 10, dt) * 6) % 3).op is Ops.CONST  # no wrap: still a multiple of 3

def test_sym_is_a_composition_of_named_tables():
  from tinyspec.uop import symbolic
  parts = [symbolic.pm_fold_consts, symbolic.pm_identities, symbolic.pm_decide_by_range, symbolic.pm_collect_terms, symbolic.pm_div_mod,
           symbolic.pm_binary_digits]
  assert len(sym) == sum(len(p) for p in parts)

# ---- property tests: random expressions over bounded variables keep their value ----

VARS = [UOp.variable(f"v{i}", lo, lo + span) for i, (lo, span) in enumerate([(0, 10), (0, 3), (-8, 16), (1, 6), (-3, 0), (0, 100)])]

@st.composite
def int_expr(draw, depth: int = 0):
  """A random index expression: variables and constants combined by + * // % max, where and comparisons."""
  if depth >= 4 or draw(st.integers(0, 3)) == 0:
    return draw(st.sampled_from(VARS)) if draw(st.booleans()) else UOp.const(draw(st.integers(-12, 12)))
  kind = draw(st.sampled_from(["add", "sub", "mul", "idiv", "mod", "max", "where", "cmul", "cdiv", "cmod"]))
  a = draw(int_expr(depth + 1))
  if kind in ("cmul", "cdiv", "cmod"):
    c = draw(st.integers(-9, 9).filter(lambda v: v != 0))
    return a * c if kind == "cmul" else a // c if kind == "cdiv" else a % c
  b = draw(int_expr(depth + 1))
  if kind == "where": return draw(bool_expr(depth + 1)).where(a, b)
  if kind in ("idiv", "mod"): b = b.maximum(1)  # a divisor that is never 0 (x//0 is a convention, not arithmetic)
  return {"add": a + b, "sub": a - b, "mul": a * b, "idiv": a // b, "mod": a % b, "max": a.maximum(b)}[kind]

@st.composite
def bool_expr(draw, depth: int = 0):
  a, b = draw(int_expr(depth + 1)), draw(int_expr(depth + 1))
  kind = draw(st.sampled_from(["lt", "ne", "eq", "ge", "and", "or"]))
  if kind in ("and", "or"):
    p, q = a < b, a.ne(b)
    return p & q if kind == "and" else p | q
  return {"lt": a < b, "ne": a.ne(b), "eq": a.eq(b), "ge": a >= b}[kind]

assignments = st.lists(st.tuples(*(st.integers(v.vmin, v.vmax) for v in VARS)), min_size=1, max_size=8)

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(int_expr(), assignments)
def test_simplify_keeps_int_values(e, points):
  s = simplify(e)
  assert s.dtype is e.dtype and s.shape == e.shape
  verify(s, "tensor")  # and the result is well-formed: dtypes of folded constants, sources of one dtype
  for vals in points:
    env = dict(zip(VARS, vals))
    assert s.eval(env) == e.eval(env), f"{e} simplified to {s} differs at {vals}"

@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bool_expr(), assignments)
def test_simplify_keeps_bool_values(e, points):
  s = simplify(e)
  assert s.dtype is e.dtype
  verify(s, "tensor")
  for vals in points:
    env = dict(zip(VARS, vals))
    assert bool(s.eval(env)) == bool(e.eval(env))

@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(int_expr(), assignments)
def test_min_max_bounds_every_value(e, points):
  """The interval rules are sound: every value an expression takes lies inside its min_max, before and after simplifying."""
  s = simplify(e)
  for vals in points:
    env = dict(zip(VARS, vals))
    assert e.vmin <= e.eval(env) <= e.vmax and s.vmin <= s.eval(env) <= s.vmax

@settings(max_examples=100, deadline=None)
@given(st.integers(-128, 127), st.integers(-128, 127), st.sampled_from(["add", "mul", "sub"]))
def test_int8_wraps_like_hardware(a, b, kind):
  va, vb = UOp.variable("a8", -128, 127, dtypes.int8), UOp.variable("b8", -128, 127, dtypes.int8)
  e = {"add": (va + vb) + 100, "mul": (va * vb) * 3, "sub": (va - vb) - 100}[kind]
  expected = {"add": a + b + 100, "mul": a * b * 3, "sub": a - b - 100}[kind]
  expected = (expected + 128) % 256 - 128
  assert e.eval({va: a, vb: b}) == expected and simplify(e).eval({va: a, vb: b}) == expected

@settings(max_examples=400, deadline=None)
@given(st.sampled_from(VARS[:3] + VARS[4:5]),
       st.lists(st.tuples(st.sampled_from(["+", "*", "//", "%"]), st.integers(-7, 7).filter(bool)), min_size=1, max_size=4))
def test_constant_chains_keep_values_everywhere(v, steps):
  """Chains like ((v % 6) % 4) // 2 hit the division and modulo rules directly; checked at every value v can take."""
  e = v
  for op, c in steps: e = {"+": e + c, "*": e * c, "//": e // c, "%": e % c}[op]
  s = simplify(e)
  for val in range(v.vmin, v.vmax + 1): assert s.eval({v: val}) == e.eval({v: val}), f"{steps} at {v.arg[0]}={val}"

def test_every_two_step_constant_chain():
  """Exhaustive over two steps: every (op, c) pair after every other, for c in -5..5, at every value of v in [-6, 6]."""
  v = UOp.variable("v2s", -6, 6)
  steps = [(op, c) for op in ("+", "*", "//", "%") for c in range(-5, 6) if c != 0]
  apply = {"+": lambda e, c: e + c, "*": lambda e, c: e * c, "//": lambda e, c: e // c, "%": lambda e, c: e % c}
  for op1, c1 in steps:
    first = apply[op1](v, c1)
    for op2, c2 in steps:
      e = apply[op2](first, c2)
      s = simplify(e)
      for val in range(-6, 7): assert s.eval({v: val}) == e.eval({v: val}), f"v {op1} {c1} {op2} {c2} at v={val}"

def test_quotient_and_remainder_sum_back():
  assert simplify((x // 4) * 4 + x % 4) is x
  assert simplify((x // 8) * 8 + ((x // 4) % 2) * 4) is simplify((x // 4) * 4)

def test_binary_digits_sum_back_to_the_index():
  # how rangeify lowers arange's binary count (Tensor._iota): where(digit >= 1, 2**b, 0) per digit, highest first
  i32 = dtypes.int32
  digits = [((x // (1 << b)) % 2 < 1).ne(True).where(UOp.const(1 << b, i32), UOp.const(0, i32)) for b in range(3, -1, -1)]
  total = digits[0]
  for d in digits[1:]: total = total + d
  assert simplify(total) is x.cast(i32)
  assert [total.eval({x: v}) for v in range(11)] == list(range(11))

def test_arange_lowers_to_its_index():
  from tinyspec import Tensor
  from tinyspec.engine.callify import callify
  from tinyspec.engine.rangeify import rangeify
  ast = rangeify(callify(Tensor.arange(80).uop)).items[0].ast
  assert not {Ops.IDIV, Ops.MOD, Ops.WHERE} & {u.op for u in ast.toposort()}
  assert (Tensor.arange(80).numpy() == list(range(80))).all()

def test_rows_of_a_reshape_divide_whole():
  # (n, c) rows read through a reshape: x*c + y with 0 <= y < c, divided by a multiple of c
  assert simplify((x * 4 + y) // 8) is simplify(x // 2)
  assert simplify((x * 4 + y) % 8) is simplify((x % 2) * 4 + y)
  assert simplify((x // 3) * 12 + (x % 3) * 4) is simplify(x * 4)
  assert simplify((x * 4 + y) // -8).op is Ops.IDIV and simplify((x * 4 + z) // 8).op is Ops.IDIV  # a negative divisor, a y below 0

def test_rows_whose_offset_is_several_terms_divide_whole():
  # a conv weight gradient's flattened index, r*1152 + (c*72 + i*9 + ky*3 + kx) < (r + 1) * 1152, in whatever order its
  # terms come: divided by 64 rows of 1152 it is r // 64, and its remainder keeps the row offset
  r, c, i = UOp.variable("r", 0, 1023), UOp.variable("c", 0, 15), UOp.variable("i", 0, 7)
  ky, kx = UOp.variable("ky", 0, 2), UOp.variable("kx", 0, 2)
  n = (((r * 1152 + c * 72) + i * 9) + ky * 3) + kx
  assert simplify(n // 73728) is simplify(r // 64)
  rem = simplify(n % 73728)  # (r % 64) * 1152 + the rest, the rest's terms in some order
  assert [u.src[1].arg[0] for u in rem.toposort() if u.op is Ops.MOD] == [64]
  for vals in [(0, 0, 0, 0, 0), (1023, 15, 7, 2, 2), (64, 3, 5, 1, 0), (700, 9, 1, 2, 1)]:
    env = dict(zip((r, c, i, ky, kx), vals))
    assert rem.eval(env) == n.eval(env) % 73728
  assert simplify((((kx + ky * 3) + r * 1152) + c * 72) // 1152) is simplify(r)
  assert simplify((r * 1152 + c * 72 + i * 9 + ky * 3 + kx + 1) // 73728).op is Ops.IDIV  # 1152 at the top: the rest can reach k

def test_a_reshaped_batch_reads_its_rows_without_division():
  from tinyspec import Tensor
  from tinyspec.engine.callify import callify
  from tinyspec.engine.rangeify import rangeify
  ast = rangeify(callify(Tensor.empty(16, 64, 80).reshape(1024, 80).max(-1).uop)).items[-1].ast
  assert not {Ops.IDIV, Ops.MOD} & {u.op for u in ast.toposort()}

def test_pool_windows_that_do_not_overlap_are_plain_reshapes():
  # a 2x2 max pool's gradient reads the windows back through reshapes: only the window's own // 2 and % 2 (a shift and a
  # mask), where the general tiling of overlapping windows divides by its tile lengths (17, 51, 867, ...) an element
  from tinyspec import Tensor
  from tinyspec.engine.callify import callify
  from tinyspec.engine.rangeify import rangeify
  x = Tensor.empty(4, 3, 16, 16).requires_grad_()
  for pooled in (x.max_pool2d(2), x.avg_pool2d(2), x.conv2d(Tensor.empty(5, 3, 2, 2), stride=2)):
    (g,) = pooled.sum().gradient(x)
    divisors = {u.src[1].arg[0] for item in rangeify(callify(g.uop)).items for u in item.ast.toposort() if u.op in (Ops.IDIV, Ops.MOD)}
    assert divisors <= {2}, divisors

def test_a_gated_loads_index_uses_the_bounds_its_gate_sets():
  # a padded window: r = w + k (0..40) is read at row r // 33 of 1089-element planes only where r < 33, so there the
  # quotient is 0 and the index is r itself. The gate may name the sum in another order than the index does
  from tinyspec.uop.symbolic import pm_index_given_valid
  w, k = UOp.variable("w", 0, 30), UOp.variable("k", 0, 10)
  buf = UOp(Ops.PARAM, (UOp.vec((4096,)),), (0, dtypes.float32))
  def load(idx, gate): return UOp(Ops.LOAD, (buf.index(idx), UOp.const(0.0, dtypes.float32), gate))
  r = w + k
  assert graph_rewrite(load(r + (r // 33) * 1089, (k + w) < 33), sym + pm_index_given_valid) is load(r, (k + w) < 33)
  # not (r < 5) bounds r from below: (r - 5) // 36 is 0 for r in 5..40
  assert graph_rewrite(load((r + -5) // 36, (r < 5).ne(True)), sym + pm_index_given_valid).src[0].src[1].arg[0] == 0
  # so does a gate on one term: w < 20 keeps r under 30
  assert graph_rewrite(load(r + (r // 33) * 1089, w < 20), sym + pm_index_given_valid) is load(r, w < 20)
  # a gate that narrows nothing the index holds, or nothing at all, leaves the load as it was
  for gate in (UOp.variable("q", 0, 9) < 5, r < 100, w < 40):
    assert graph_rewrite(load(r + (r // 33) * 1089, gate), sym + pm_index_given_valid) is graph_rewrite(load(r + (r // 33) * 1089, gate), sym)

def test_a_division_by_a_power_of_two_is_a_multiplication():
  f = UOp.variable("i", 0, 10).cast(dtypes.float32)
  for c, want in ((4.0, 0.25), (-0.5, -2.0), (2.0 ** 14, 2.0 ** -14)):
    out = simplify(UOp(Ops.DIV, (f, UOp.const(c, dtypes.float32))))
    assert out.op is Ops.MUL and out.src[1].arg[0] == want  # 1/c is exact, so x * (1/c) rounds as x / c does
  for c in (3.0, 2.0 ** 20, 0.0, math.inf):  # 1/3 is inexact; 2**-20 is subnormal in float16; 1/0, 1/inf are no exact scale
    assert simplify(UOp(Ops.DIV, (f, UOp.const(c, dtypes.float32)))).op is Ops.DIV
