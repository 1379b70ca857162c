"""The rewrite engine: UPat matching, PatternMatcher tables, graph_rewrite to a fixed point (both orders, DAGs, ctx, GC, scale)
and graph_substitute. Results are checked by identity: UOps are hash-consed, so an equal graph is the same object."""
import gc
import random
import sys
from collections import Counter

import pytest
from tinyspec.dtype import dtypes
from tinyspec.uop import Ops, PatternMatcher, UOp, UPat, graph_rewrite, graph_substitute
from tinyspec.uop.symbolic import sym

a, b, c, d = (UOp.variable(n, 0, 10, dtypes.int32) for n in "abcd")
f = UOp.variable("f", 0, 10, dtypes.float32)

def i32(v) -> UOp: return UOp.const(v, dtypes.int32)
def raw(op: Ops, *src: UOp) -> UOp: return UOp(op, src)  # a node with its sources exactly in this order (e.g. a constant first)

# ---- UPat: what one pattern matches ----

def test_op_and_op_sets():
  assert UPat(Ops.ADD).match(a + b) == {} and UPat(Ops.ADD).match(a * b) is None
  for ops in ({Ops.ADD, Ops.MUL}, (Ops.ADD, Ops.MUL), frozenset((Ops.ADD, Ops.MUL))):
    p = UPat(ops, name="u")
    assert p.match(a + b)["u"] is a + b and p.match(a * b)["u"] is a * b and p.match(a // b) is None

def test_match_returns_empty_dict_not_none_without_names():
  assert UPat(Ops.ADD).match(a + 1) is not None  # {} is falsy: callers must test `is None`

def test_no_op_matches_any_op():
  p = UPat(name="x")
  for u in (a, a + 1, a // 2, i32(3), UOp.sink(a), a.cast(dtypes.int64)): assert p.match(u) == {"x": u}
  q = UPat(src=(UPat.var("x"), UPat.const(1)))  # any op whose sources are (anything, 1)
  assert q.match(a + 1) == {"x": a} and q.match(a * 1) == {"x": a} and q.match(a // 1) == {"x": a} and q.match(a + 2) is None
  assert q.match(a) is None  # PARAM has three sources, not two

def test_dtype_and_dtype_sets():
  assert UPat.var("x", dtypes.int32).match(a) == {"x": a} and UPat.var("x", dtypes.int32).match(f) is None
  p = UPat.var("x", (dtypes.int32, dtypes.float32))
  assert p.match(a) == {"x": a} and p.match(f) == {"x": f} and p.match(a.cast(dtypes.int64)) is None
  assert UPat(Ops.CMPLT, dtypes.bool).match(a < 3) is not None and UPat(Ops.ADD, dtypes.bool).match(a + 3) is None

def test_exact_arg():
  p = UPat(Ops.PARAM, arg=("a", dtypes.int32), name="p")
  assert p.match(a) == {"p": a} and p.match(b) is None
  assert UPat(Ops.SINK, arg=None).match(UOp.sink(a)) is not None  # arg=None means "arg is None", not "any arg"
  assert UPat(Ops.SINK, arg=None).match(UOp.sink(a, arg="info")) is None
  assert UPat(Ops.SINK).match(UOp.sink(a, arg="info")) is not None
  cast64 = UPat(Ops.CAST, arg=dtypes.int64)
  assert cast64.match(a.cast(dtypes.int64)) is not None and cast64.match(a.cast(dtypes.int16)) is None

def test_const_value_matching():
  # a CONST pattern's arg is the value alone, compared with ==: 1 matches 1, 1.0 and True; a dtype narrows it
  one = UPat.const(1, name="c")
  for u in (i32(1), UOp.const(1, dtypes.index), UOp.const(1.0, dtypes.float32), UOp.const(True, dtypes.bool)): assert one.match(u) == {"c": u}
  assert one.match(i32(2)) is None and one.match(UOp.const(1.5, dtypes.float32)) is None and one.match(a) is None
  assert UPat.const(1, dtypes.int32).match(UOp.const(1.0, dtypes.float32)) is None and UPat.const(1, dtypes.int32).match(i32(1)) == {}
  assert UPat.const(0).match(UOp.const(-0.0, dtypes.float32)) is not None  # -0.0 == 0
  assert UPat.const(float("nan")).match(UOp.const(float("nan"), dtypes.float32)) is None  # nan != nan: a nan pattern never matches
  assert UPat(Ops.CONST, arg=(1, dtypes.int32)).match(i32(1)) is None  # not the (value, dtype) tuple
  assert UPat.cvar("c").match(i32(7)) == {"c": i32(7)} and UPat.cvar("c").match(a) is None
  assert UPat.cvar("c", dtypes.float32).match(i32(7)) is None

def test_named_captures():
  p = UPat(Ops.ADD, src=(UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("k")), name="m"), UPat.var("y")), name="root")
  e = a * 3 + b
  assert p.match(e) == {"root": e, "m": a * 3, "x": a, "k": i32(3), "y": b}
  r = p.match(e)
  assert r["x"] is a and r["k"] is i32(3) and r["m"] is a * 3 and r["root"] is e
  assert UPat.var("x").named("renamed").match(a) == {"renamed": a}

def test_same_name_twice_is_the_same_node():
  p = UPat.var("x") + UPat.var("x")
  assert p.match(a + a) == {"x": a} and p.match(a + b) is None
  q = UPat(Ops.ADD, src=(UPat.var("x") * 2, UPat.var("x")))
  assert q.match(a * 2 + a) == {"x": a} and q.match(a * 2 + b) is None
  assert (UPat.var("x") * UPat.var("y") + UPat.var("x")).match(b + a * b) == {"x": b, "y": a}  # x fixed by one source, checked at the other

def test_tuple_src_is_in_order_list_src_any_order():
  ordered = UPat(Ops.ADD, src=(UPat.var("x"), UPat.cvar("k")))
  assert ordered.match(a + 1) == {"x": a, "k": i32(1)} and ordered.match(raw(Ops.ADD, i32(1), a)) is None
  anyorder = UPat(Ops.ADD, src=[UPat.var("x"), UPat.cvar("k")])
  assert anyorder.match(a + 1) == {"x": a, "k": i32(1)} and anyorder.match(raw(Ops.ADD, i32(1), a)) == {"x": a, "k": i32(1)}
  assert anyorder.match(a + b) is None

def test_tuple_src_length_must_match():
  p = UPat(Ops.SINK, src=(UPat.var("x"),))
  assert p.match(UOp.sink(a)) == {"x": a} and p.match(UOp.sink(a, b)) is None and p.match(UOp.sink()) is None

def test_empty_src_tuple_matches_no_sources():
  p = UPat(Ops.SINK, src=())
  assert p.match(UOp.sink()) == {} and p.match(UOp.sink(a)) is None

def test_nested_commutative_second_inner_order():
  # (x + k) * y: the outer pair matches only in its second order, the inner one only in its second
  p = (UPat.var("x") + UPat.cvar("k")) * UPat.var("y")
  e = raw(Ops.MUL, b, raw(Ops.ADD, i32(1), a))
  assert p.match(e) == {"x": a, "k": i32(1), "y": b}

def test_nested_commutative_backtracks_into_inner_order():
  # (x + y) * x on (a + b) * b: the inner first order binds x=a, which the outer source then rejects; the inner second order fits
  p = UPat(Ops.MUL, src=[UPat(Ops.ADD, src=[UPat.var("x"), UPat.var("y")]), UPat.var("x")])
  assert p.match((a + b) * b) == {"x": b, "y": a}
  assert p.match((a + b) * a) == {"x": a, "y": b}
  assert p.match(raw(Ops.MUL, b, a + b)) == {"x": b, "y": a}
  assert p.match((a + b) * c) is None

def test_first_matching_order_wins():
  p = UPat.var("x") + UPat.var("y")
  assert p.match(a + b) == {"x": a, "y": b}

def test_three_source_list_tries_every_permutation():
  p = UPat(Ops.WHERE, src=[UPat.cvar("k"), UPat(Ops.CMPLT, name="cond"), UPat.var("v")])
  e = (a < 3).where(b, 7)
  assert p.match(e) == {"k": i32(7), "cond": a < 3, "v": b}

def test_repeated_source_pattern_means_every_source():
  p = UPat(Ops.SINK, src=UPat(Ops.CONST), name="s")
  assert p.match(UOp.sink(i32(1), i32(2))) is not None and p.match(UOp.sink(i32(1), a)) is None and p.match(UOp.sink(a, i32(1))) is None
  assert p.match(UOp.sink()) is not None  # vacuously: every one of no sources matches
  q = UPat(Ops.SINK, src=UPat(Ops.ADD, src=(UPat(), UPat(Ops.CONST))))  # a tuple src inside the repeated pattern
  assert q.match(UOp.sink(a + 1, b + 2)) is not None and q.match(UOp.sink(a + 1, a + b)) is None

def test_repeated_source_with_commutative_element():
  p = UPat(Ops.SINK, src=UPat(Ops.ADD, src=[UPat(Ops.CONST), UPat()]))
  assert p.match(UOp.sink(a + 1)) is not None

def test_nested_repeated_source():
  p = UPat(Ops.SINK, src=UPat(Ops.STACK, src=UPat(Ops.CONST)))
  assert p.match(UOp.sink(UOp.vec((1, 2)))) is not None

def test_repeated_source_pattern_cannot_capture():
  with pytest.raises(ValueError, match="cannot capture"): UPat(Ops.SINK, src=UPat.var("x")).match(UOp.sink(a))
  with pytest.raises(ValueError, match="cannot capture"): UPat(Ops.SINK, src=UPat(Ops.ADD, src=(UPat.var("x"), UPat()))).match(UOp.sink(a))
  with pytest.raises(ValueError, match="cannot capture"): PatternMatcher([(UPat(Ops.SINK, src=UPat.cvar("k")), lambda: None)])

def test_allow_any_len_is_a_prefix():
  p = UPat(Ops.SINK, src=(UPat.cvar("k"), UPat.var("x")), allow_any_len=True)
  assert p.match(UOp.sink(i32(1), a, b, c)) == {"k": i32(1), "x": a}
  assert p.match(UOp.sink(i32(1), a)) == {"k": i32(1), "x": a}
  assert p.match(UOp.sink(i32(1))) is None and p.match(UOp.sink(a, i32(1), b)) is None
  assert UPat(Ops.SINK, src=(UPat.cvar("k"), UPat.var("x"))).match(UOp.sink(i32(1), a, b)) is None  # without it: exactly two

def test_operator_sugar():
  x, y = UPat.var("x"), UPat.var("y")
  for pat, hit, miss in [
    (x + 2, raw(Ops.ADD, i32(2), a), a * 2), (2 + x, a + 2, a + 3), (x * 2, raw(Ops.MUL, i32(2), a), a + 2), (2 * x, a * 2, a * 3),
    (x // 2, a // 2, raw(Ops.IDIV, i32(2), a)), (x % 2, a % 2, raw(Ops.MOD, i32(2), a)), (x < 2, a < 2, a > 2),
    (x.ne(2), raw(Ops.CMPNE, i32(2), a), a < 2), (x.maximum(2), raw(Ops.MAX, i32(2), a), a.maximum(3)),
    (x & 2, raw(Ops.AND, i32(2), a), a | 2), (x | 2, raw(Ops.OR, i32(2), a), a ^ 2), (x ^ 2, raw(Ops.XOR, i32(2), a), a & 2),
    (x.where(y, UPat.const(0)), (a < 2).where(b, 0), (a < 2).where(0, b)), (x.cast(dtypes.int64), a.cast(dtypes.int64), a.cast(dtypes.int16)),
  ]:
    assert pat.match(hit) is not None, pat
    assert pat.match(miss) is None, pat
  assert x.cast().match(a.cast(dtypes.int16)) == {"x": a} and x.cast().match(a) is None
  assert (x + y).match(a + b) == {"x": a, "y": b}

# ---- PatternMatcher ----

def test_rewrite_returns_replacement_or_none():
  pm = PatternMatcher([(UPat.var("x") + 0, lambda x: x)])
  assert pm.rewrite(a + 0) is a and pm.rewrite(raw(Ops.ADD, i32(0), a)) is a
  assert pm.rewrite(a + 1) is None and pm.rewrite(a * 0) is None and pm.rewrite(a) is None
  assert PatternMatcher([]).rewrite(a + 0) is None and len(PatternMatcher([])) == 0

def test_first_rule_in_table_order_wins():
  r1 = (UPat(Ops.ADD, name="u"), lambda u: i32(1))
  r2 = (UPat.var("x") + UPat.var("y"), lambda x, y: i32(2))
  assert PatternMatcher([r1, r2]).rewrite(a + b) is i32(1) and PatternMatcher([r2, r1]).rewrite(a + b) is i32(2)
  r3 = (UPat(name="u"), lambda u: i32(3))  # a rule with no op sits among the ADD rules at its table position
  assert PatternMatcher([r3, r1]).rewrite(a + b) is i32(3) and PatternMatcher([r1, r3]).rewrite(a + b) is i32(1)
  assert PatternMatcher([r1, r3]).rewrite(a * b) is i32(3)

def test_add_composes_in_order():
  pm1 = PatternMatcher([(UPat(Ops.ADD), lambda: i32(1)), (UPat(Ops.MUL), lambda: i32(10))])
  pm2 = PatternMatcher([(UPat(Ops.ADD), lambda: i32(2)), (UPat(Ops.IDIV), lambda: i32(20))])
  both = pm1 + pm2
  assert len(pm1) == len(pm2) == 2 and len(both) == 4 and len(pm2 + pm1 + pm1) == 6
  assert both.rewrite(a + b) is i32(1) and (pm2 + pm1).rewrite(a + b) is i32(2)
  assert both.rewrite(a * b) is i32(10) and both.rewrite(a // b) is i32(20) and both.rewrite(a % b) is None
  assert pm1.rewrite(a // b) is None  # the operands are unchanged

def test_none_or_same_node_falls_through():
  seen = []
  def passes(u): seen.append("none")
  def same(u): seen.append("same"); return u
  pm = PatternMatcher([(UPat(Ops.ADD, name="u"), passes), (UPat(Ops.ADD, name="u"), same), (UPat(Ops.ADD), lambda: i32(5))])
  assert pm.rewrite(a + b) is i32(5) and seen == ["none", "same"]
  assert PatternMatcher([(UPat(Ops.ADD, name="u"), same)]).rewrite(a + b) is None  # returning the node itself is "no change"

def test_ctx_is_passed_to_functions_that_name_it_first():
  got = []
  pm = PatternMatcher([(UPat(Ops.ADD, name="x"), lambda ctx, x: got.append((ctx, x))), (UPat(Ops.ADD, name="x"), lambda x: got.append(x))])
  token = object()
  assert pm.rewrite(a + b, token) is None and got == [(token, a + b), a + b]
  got.clear()
  assert pm.rewrite(a + b) is None and got == [(None, a + b), a + b]  # ctx defaults to None
  pm2 = PatternMatcher([(UPat.var("x") * UPat.cvar("k"), lambda ctx, x, k: ctx[x.arg[0]] * k)])  # ctx and captures
  assert pm2.rewrite(a * 3, {"a": b}) is b * 3

def test_missing_capture_raises_at_construction():
  with pytest.raises(ValueError, match=r"\['y'\]"): PatternMatcher([(UPat.var("x") + 1, lambda x, y: x)])
  with pytest.raises(ValueError, match=r"\['ctx'\]"): PatternMatcher([(UPat(Ops.ADD, name="x"), lambda x, ctx: x)])  # ctx must come first
  with pytest.raises(ValueError, match=r"\['x', 'z'\]"): PatternMatcher([(UPat(Ops.MUL), lambda x, z: x)])
  with pytest.raises(ValueError, match=r"\['y'\]"): PatternMatcher([(UPat(name="x"), lambda x, y: x)])  # a rule with no op too
  assert len(PatternMatcher([(UPat.var("x") + UPat.var("y"), lambda y, x: x)])) == 1  # parameter order is free

def test_parameters_are_bound_by_name():
  pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("x"), UPat.var("y"))), lambda y, x: x // y)])
  assert pm.rewrite(a + b) is a // b

def test_commutative_backtracks_when_function_passes():
  calls = []
  def fn(x, y):
    calls.append((x, y))
    return x * 2 if x is b else None
  pm = PatternMatcher([(UPat.var("x") + UPat.var("y"), fn)])
  assert pm.rewrite(a + b) is b * 2 and calls == [(a, b), (b, a)]
  calls.clear()
  assert pm.rewrite(b + a) is b * 2 and calls == [(b, a)]  # the first order worked: the second is not tried
  calls.clear()
  assert pm.rewrite(a + c) is None and calls == [(a, c), (c, a)]

def test_nested_commutative_backtracks_when_function_passes():
  calls = []
  def fn(x, y, z):
    calls.append((x, y, z))
    return i32(99) if (x, y, z) == (b, a, c) else None
  pm = PatternMatcher([((UPat.var("x") + UPat.var("y")) * UPat.var("z"), fn)])
  assert pm.rewrite((a + b) * c) is i32(99) and calls == [(a, b, c), (b, a, c)]

def test_all_orders_passing_falls_through_to_next_rule():
  calls = []
  pm = PatternMatcher([(UPat.var("x") + UPat.var("y"), lambda x, y: calls.append((x, y))), (UPat(Ops.ADD), lambda: i32(0))])
  assert pm.rewrite(a + b) is i32(0) and calls == [(a, b), (b, a)]

# ---- graph_rewrite ----

peel = (UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(1))), lambda x: x)  # x + 1 -> x

@pytest.mark.parametrize("bottom_up", [False, True])
def test_fixed_point_peels_a_chain(bottom_up):
  pm = PatternMatcher([peel])
  e = a
  for _ in range(6): e = e + 1
  assert graph_rewrite(e, pm, bottom_up=bottom_up) is a
  assert graph_rewrite(UOp.sink(e, e * 2, (e + 1) // 3), pm, bottom_up=bottom_up) is UOp.sink(a, a * 2, a // 3)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_rewrites_enable_rules_on_users_across_levels(bottom_up):
  # peeling makes max(a, a), which folds to a, which makes SINK(a), which the third rule turns into a
  pm = PatternMatcher([peel, (UPat.var("x").maximum(UPat.var("x")), lambda x: x), (UPat(Ops.SINK, src=(UPat(Ops.PARAM, name="p"),)), lambda p: p)])
  assert graph_rewrite(UOp.sink(((a + 1) + 1).maximum(a)), pm, bottom_up=bottom_up) is a
  assert graph_rewrite(UOp.sink(((a + 1) + 1).maximum(b)), pm, bottom_up=bottom_up) is UOp.sink(a.maximum(b))

@pytest.mark.parametrize("bottom_up", [False, True])
def test_results_are_rewritten_again(bottom_up):
  # x // 2 -> (x + 1) + 1, whose pieces peel back to x; x * 3 -> x // 2 goes through both
  pm = PatternMatcher([peel, (UPat.var("x") // 2, lambda x: (x + 1) + 1), (UPat.var("x") * 3, lambda x: x // 2)])
  assert graph_rewrite(a // 2, pm, bottom_up=bottom_up) is a
  assert graph_rewrite(a * 3, pm, bottom_up=bottom_up) is a
  assert graph_rewrite(UOp.sink((b * 3 + 1) % (a // 2)), pm, bottom_up=bottom_up) is UOp.sink(b % a)

@pytest.mark.parametrize("bottom_up", [False, True])
def test_constant_folding_reaches_a_fixed_point(bottom_up):
  fold = PatternMatcher([(UPat(Ops.ADD, src=(UPat.cvar("x"), UPat.cvar("y"))), lambda x, y: i32(x.arg[0] + y.arg[0])),
                         (UPat(Ops.MUL, src=(UPat.cvar("x"), UPat.cvar("y"))), lambda x, y: i32(x.arg[0] * y.arg[0]))])
  e = (i32(2) * i32(3) + i32(4)) * (i32(1) + i32(1)) + a
  assert graph_rewrite(e, fold, bottom_up=bottom_up) is i32(20) + a

@pytest.mark.parametrize("bottom_up", [False, True])
def test_unchanged_root_is_returned_as_is(bottom_up):
  e = UOp.sink((a + b) * c, a // 3)
  assert graph_rewrite(e, PatternMatcher([]), bottom_up=bottom_up) is e
  assert graph_rewrite(e, PatternMatcher([peel]), bottom_up=bottom_up) is e
  assert graph_rewrite(e, PatternMatcher([(UPat(name="u"), lambda u: u), (UPat(name="u"), lambda u: None)]), bottom_up=bottom_up) is e
  assert graph_rewrite(a, PatternMatcher([peel]), bottom_up=bottom_up) is a

@pytest.mark.parametrize("bottom_up", [False, True])
def test_repeated_and_shared_sources(bottom_up):
  pm = PatternMatcher([peel])
  s = (a + 1) * (b + 1)
  assert graph_rewrite(UOp.sink(s, s, a + 1, s + 1), pm, bottom_up=bottom_up) is UOp.sink(a * b, a * b, a, a * b)

def test_dag_rule_called_once_per_distinct_node():
  # u and v are each used twice; every ADD/MUL node is seen once. Sources are rewritten first, so the rule sees the rebuilt
  # nodes (3 + a, not (1 + 2) + a); the constant 3 made by folding is seen once too.
  calls: Counter = Counter()
  def count(ctx, n): ctx[n] += 1
  fold = (UPat(Ops.ADD, src=(UPat.cvar("x"), UPat.cvar("y"))), lambda x, y: i32(x.arg[0] + y.arg[0]))
  pm = PatternMatcher([(UPat({Ops.ADD, Ops.MUL, Ops.CONST}, name="n"), count), fold])
  three = i32(1) + i32(2)
  u, v = three + a, three * a
  out = graph_rewrite(UOp.sink(u + v, u * v, v), pm, calls)
  assert out is UOp.sink((i32(3) + a) + i32(3) * a, (i32(3) + a) * (i32(3) * a), i32(3) * a)
  assert calls == Counter({i32(1): 1, i32(2): 1, three: 1, i32(3): 1, i32(3) + a: 1, i32(3) * a: 1,
                           (i32(3) + a) + i32(3) * a: 1, (i32(3) + a) * (i32(3) * a): 1, i32(0): 1, i32(10): 1})  # 0, 10: a's bounds

def test_dag_rule_called_once_per_distinct_input_node():
  # a*1 + b rebuilds to a + b, which is also in the graph: the rule runs once for each of the two input nodes
  calls: Counter = Counter()
  def count(ctx, n): ctx[n] += 1
  pm = PatternMatcher([(UPat.var("x") * 1, lambda x: x), (UPat(Ops.ADD, name="n"), count)])
  assert graph_rewrite(UOp.sink(a * 1 + b, a + b, (a + b) * 1), pm, calls) is UOp.sink(a + b, a + b, a + b)
  assert calls == Counter({a + b: 2})

def test_bottom_up_sees_the_node_before_its_sources():
  # (x + 0) * y -> max(x, y) needs the ADD that the source rule x + 0 -> x removes
  pm = PatternMatcher([(UPat(Ops.MUL, src=(UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(0))), UPat.var("y"))), lambda x, y: x.maximum(y)),
                       (UPat.var("x") + 0, lambda x: x)])
  e = (a + 0) * b
  assert graph_rewrite(e, pm) is a * b
  assert graph_rewrite(e, pm, bottom_up=True) is a.maximum(b)
  # the rule fires on the outer (((a + 0) + 0) * b), then the sources of its result still reach a fixed point
  assert graph_rewrite(((a + 0) + 0) * b, pm, bottom_up=True) is a.maximum(b)
  assert graph_rewrite(UOp.sink(((a + 0) + 0) * b), pm) is UOp.sink(a * b)

def test_bottom_up_order_of_visits():
  seen = []
  pm = PatternMatcher([(UPat({Ops.ADD, Ops.MUL}, name="n"), lambda ctx, n: ctx.append(n))])
  e = (a + b) * c
  graph_rewrite(e, pm, seen, bottom_up=True)
  assert seen == [e, a + b]
  seen.clear()
  graph_rewrite(e, pm, seen)
  assert seen == [a + b, e]

def test_bottom_up_rewrites_node_again_after_sources_change():
  # bottom up, (a * 1) + 0 is first seen with an unfoldable source; after a * 1 -> a it is rebuilt as a + 0 and rewritten again
  pm = PatternMatcher([(UPat.var("x") * 1, lambda x: x), (UPat(Ops.ADD, src=(UPat(Ops.PARAM, name="p"), UPat.const(0))), lambda p: p)])
  assert graph_rewrite((a * 1) + 0, pm, bottom_up=True) is a
  assert graph_rewrite(UOp.sink((a * 1) + 0, (b * 1 * 1) + 0), pm, bottom_up=True) is UOp.sink(a, b)

def test_ctx_reaches_graph_rewrite_rules():
  env = {"a": i32(4), "b": i32(5)}
  pm = PatternMatcher([(UPat(Ops.PARAM, name="p"), lambda ctx, p: ctx.get(p.arg[0]))])
  assert graph_rewrite(a * b + c, pm, env) is i32(4) * i32(5) + c
  assert graph_rewrite(a * b + c, pm, {}) is a * b + c

@pytest.mark.parametrize("bottom_up", [False, True])
def test_wrap_once_rule_keeps_its_result(bottom_up):
  def wrap(ctx, x):
    if x in ctx: return None
    ctx.add(x)
    return UOp(Ops.CONTIGUOUS, (x,))
  pm = PatternMatcher([(UPat(Ops.ADD, name="x"), wrap)])
  assert pm.rewrite(a + b, set()) is UOp(Ops.CONTIGUOUS, (a + b,))
  assert graph_rewrite(a + b, pm, set(), bottom_up=bottom_up) is UOp(Ops.CONTIGUOUS, (a + b,))

@pytest.mark.parametrize("bottom_up", [False, True])
def test_tag_guarded_wrap_rule(bottom_up):
  # the same idea with the guard in the graph (a tag) instead of in ctx
  pm = PatternMatcher([(UPat(Ops.ADD, name="x"), lambda x: UOp(Ops.CONTIGUOUS, (x.replace(tag=1),)) if x.tag is None else None)])
  assert graph_rewrite(UOp.sink(a + b), pm, bottom_up=bottom_up) is UOp.sink(UOp(Ops.CONTIGUOUS, ((a + b).replace(tag=1),)))

# ---- the cyclic GC is paused while rewriting ----

def _gc_probe():
  states = []
  return states, PatternMatcher([(UPat(Ops.ADD, name="x"), lambda ctx, x: ctx.append(gc.isenabled()))])

def test_gc_paused_during_and_restored_after():
  assert gc.isenabled()
  states, pm = _gc_probe()
  graph_rewrite(a + b, pm, states)
  assert states == [False] and gc.isenabled()

def test_gc_stays_disabled_if_it_was():
  states, pm = _gc_probe()
  gc.disable()
  try:
    graph_rewrite(a + b, pm, states)
    assert states == [False] and not gc.isenabled()
  finally: gc.enable()

def test_gc_restored_after_a_rule_raises():
  def boom(x): raise RuntimeError("boom")
  with pytest.raises(RuntimeError, match="boom"): graph_rewrite(a + b, PatternMatcher([(UPat(Ops.ADD, name="x"), boom)]))
  assert gc.isenabled()

def test_nested_graph_rewrite_in_a_rule():
  inner = PatternMatcher([peel])
  states = []
  def simplify_arg(ctx, x):
    ctx.append(gc.isenabled())
    return None if x.src[0].op is Ops.PARAM else graph_rewrite(x.src[0], inner).cast(dtypes.int64)
  pm = PatternMatcher([(UPat(Ops.CAST, name="x"), simplify_arg)])
  assert graph_rewrite(((a + 1) + 1).cast(dtypes.int64), pm, states) is a.cast(dtypes.int64)
  assert states == [False, False] and gc.isenabled()

# ---- a property: the result is a normal form with the same value ----

def _random_expr(rng: random.Random, depth: int) -> UOp:
  if depth == 0 or rng.random() < 0.2: return rng.choice((a, b, c)) if rng.random() < 0.6 else i32(rng.randint(-4, 8))
  x, y = _random_expr(rng, depth - 1), _random_expr(rng, depth - 1)
  return rng.choice((lambda: x + y, lambda: x * y, lambda: x // rng.randint(1, 5), lambda: x % rng.randint(1, 5), lambda: x.maximum(y),
                     lambda: x + rng.randint(-3, 3), lambda: x * rng.randint(-2, 3), lambda: raw(Ops.ADD, i32(rng.randint(0, 2)), x)))()

@pytest.mark.parametrize("bottom_up", [False, True])
def test_sym_result_is_a_normal_form_with_the_same_value(bottom_up):
  rng = random.Random(1234)
  for _ in range(150):
    e = _random_expr(rng, rng.randint(1, 5))
    r = graph_rewrite(e, sym, bottom_up=bottom_up)
    assert [n for n in r.toposort() if sym.rewrite(n) is not None] == []
    for _ in range(3):
      env = {v: rng.randint(0, 10) for v in (a, b, c)}
      assert r.eval(env) == e.eval(env)

# ---- scale: no recursion on Python's stack ----

N = 100_000

@pytest.fixture(scope="module")
def chain():
  """x + 0 + 1 + ... + (N-1) over an index variable: N distinct ADD nodes, N deep."""
  x = UOp.variable("x", 0, 10)
  e = x
  for i in range(N): e = e + i
  return x, e

@pytest.fixture
def default_recursion_limit():
  old = sys.getrecursionlimit()
  sys.setrecursionlimit(1000)
  yield
  sys.setrecursionlimit(old)

@pytest.mark.usefixtures("default_recursion_limit")
def test_deep_chain_with_sym(chain):
  x, e = chain
  r = graph_rewrite(e, sym)
  assert r.op is Ops.ADD and r.src[0] is x and r.src[1].op is Ops.CONST and r.src[1].arg == (N * (N - 1) // 2, dtypes.index)
  assert r is x + N * (N - 1) // 2

@pytest.mark.usefixtures("default_recursion_limit")
@pytest.mark.parametrize("bottom_up", [False, True])
def test_deep_chain_with_custom_matcher(chain, bottom_up):
  x, e = chain
  pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("y"), UPat(Ops.CONST))), lambda y: y)])  # drop every constant term
  assert graph_rewrite(e, pm, bottom_up=bottom_up) is x

@pytest.mark.usefixtures("default_recursion_limit")
def test_wide_node():
  consts = [UOp.const(i) for i in range(10_000)]
  wide = UOp.sink(*(k * 1 for k in consts))  # 10k distinct sources, each rewritten
  pm = PatternMatcher([(UPat.var("x") * 1, lambda x: x)])
  assert graph_rewrite(wide, pm) is UOp.sink(*consts) and graph_rewrite(wide, pm, bottom_up=True) is UOp.sink(*consts)
  stacked = UOp(Ops.STACK, tuple(k + 1 for k in consts))
  assert graph_rewrite(stacked, sym) is UOp.vec(range(1, 10_001))

# ---- graph_substitute ----

def test_substitute_replaces_exactly_the_mapped_nodes():
  keep = c * 7 + 1
  root = UOp.sink((a + b) * c, a + b, keep, ((a + b) // 2).replace(tag="t"))
  out = graph_substitute(root, {a + b: d})
  assert out is UOp.sink(d * c, d, keep, (d // 2).replace(tag="t"))  # users rebuilt, tags kept
  assert out.src[2] is keep  # untouched subgraphs are the same objects

def test_substitute_is_one_shot():
  # a mapping value is not itself substituted: a swap swaps
  assert graph_substitute(a + b * 2, {a: b, b: a}) is b + a * 2
  assert graph_substitute(a + 1, {a: a + 1}) is (a + 1) + 1

def test_substitute_root_and_identity_cases():
  e = (a + b) * c
  assert graph_substitute(e, {e: d}) is d
  assert graph_substitute(e, {}) is e
  assert graph_substitute(e, {d: a}) is e  # a mapping for a node not in the graph changes nothing
  assert e.substitute({c: i32(2)}) is (a + b) * 2

@pytest.mark.usefixtures("default_recursion_limit")
def test_substitute_deep_chain():
  e = a
  for _ in range(5_000): e = e * 1 + 1  # 10k deep
  r = graph_substitute(e, {a: b})
  assert r.op is Ops.ADD and r.src[0].op is Ops.MUL and r.toposort()[0] is not a
  assert graph_rewrite(r, PatternMatcher([peel, (UPat.var("x") * 1, lambda x: x)])) is b
