"""UOp: hash-consing, immutability, constants, source counts, replace, toposort, eval and exec_alu, pickling."""
import gc
import math
import pickle
import re
import sys
import threading
import weakref

import pytest
from tinyspec.dtype import AddrSpace, dtypes
from tinyspec.uop import OPS, AxisType, Ops, SpecViolation, UOp, exec_alu


def x_var(lo=-10, hi=10, dtype=dtypes.int32): return UOp.variable("x", lo, hi, dtype)

# ---- hash-consing and immutability ----

def test_hash_consing_gives_the_same_object():
  x = x_var()
  assert UOp(Ops.ADD, (x, UOp.const(1, dtypes.int32))) is x + 1
  assert (x + 1) * 2 is (x + 1) * 2
  assert UOp.buffer((2, 3), dtypes.float32, "CPU", 0) is UOp.buffer((2, 3), dtypes.float32, "CPU", 0)
  assert UOp.vec((2, 3)) is UOp.vec((2, 3)) and UOp.vec((2, 3)) is not UOp.vec((3, 2))
  assert x + 1 is not x + 2 and (x + 1).replace(tag="t") is not x + 1
  assert x + 1 == x + 1 and x + 1 != x + 2 and hash(x + 1) == object.__hash__(x + 1)  # identity semantics
  assert {x + 1: "a"}[x + 1] == "a"

def test_hash_consing_does_not_keep_nodes_alive():
  u = UOp(Ops.CUSTOM, (UOp.const(12345, dtypes.int32),), "test_hash_consing_does_not_keep_nodes_alive")
  ref = weakref.ref(u)
  del u
  gc.collect()
  assert ref() is None
  v = UOp(Ops.CUSTOM, (UOp.const(12345, dtypes.int32),), "test_hash_consing_does_not_keep_nodes_alive")  # rebuilt, and unique again
  assert v is UOp(Ops.CUSTOM, (UOp.const(12345, dtypes.int32),), "test_hash_consing_does_not_keep_nodes_alive")

def test_hash_consing_across_threads_gives_one_node(monkeypatch):
  """Two threads building the same node at once get one node: both are held in the middle of building it (in its shape
  rule, before either is registered), and the second to register takes the first's."""
  from tinyspec.uop import uop as uop_module
  meet, rule = threading.Barrier(2), uop_module._SHAPE_RULES[Ops.CUSTOM]
  def meet_then_rule(u):
    meet.wait(timeout=10)
    return rule(u)
  monkeypatch.setitem(uop_module._SHAPE_RULES, Ops.CUSTOM, meet_then_rule)
  built = [None, None]
  def build(i): built[i] = UOp(Ops.CUSTOM, (UOp.const(7, dtypes.int32),), "test_hash_consing_across_threads_gives_one_node")
  threads = [threading.Thread(target=build, args=(i,)) for i in range(2)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert built[0] is built[1] is not None
  monkeypatch.undo()
  assert UOp(Ops.CUSTOM, (UOp.const(7, dtypes.int32),), "test_hash_consing_across_threads_gives_one_node") is built[0]

def test_immutable():
  u = x_var() + 1
  for field, value in (("op", Ops.MUL), ("src", ()), ("arg", 1), ("tag", "t"), ("dtype", dtypes.int8), ("new_field", 0)):
    with pytest.raises(AttributeError, match="immutable"): setattr(u, field, value)
  assert u.op is Ops.ADD and u.tag is None and u.dtype is dtypes.int32

def test_constants_by_bits():
  pz, nz = UOp.const(0.0, dtypes.float32), UOp.const(-0.0, dtypes.float32)
  assert pz is not nz and math.copysign(1, pz.arg[0]) == 1 and math.copysign(1, nz.arg[0]) == -1
  assert pz is UOp.const(0.0, dtypes.float32) and nz is UOp.const(-0.0, dtypes.float32)
  n1, n2 = UOp.const(math.nan, dtypes.float32), UOp.const(float("nan"), dtypes.float32)
  assert n1 is n2 and math.isnan(n1.arg[0])  # nan != nan, yet one node
  assert UOp.const(math.inf, dtypes.float32) is not UOp.const(-math.inf, dtypes.float32)
  assert UOp.const(1.0, dtypes.float32) is not UOp.const(1.0, dtypes.float64)  # dtype is part of the key
  assert UOp(Ops.CONST, arg=(1, dtypes.int32)) is not UOp(Ops.CONST, arg=(True, dtypes.int32))  # so is the Python type: 1 == True

def test_const_converts_value_to_dtype():
  assert UOp.const(3, dtypes.float32).arg == (3.0, dtypes.float32) and type(UOp.const(3, dtypes.float32).arg[0]) is float
  assert UOp.const(2.9, dtypes.int32).arg == (2, dtypes.int32) and UOp.const(-2.9, dtypes.int32).arg[0] == -2
  assert UOp.const(5, dtypes.bool).arg == (True, dtypes.bool) and UOp.const(True, dtypes.int8).arg[0] == 1
  assert UOp.const(7).dtype is dtypes.index
  assert UOp.const(1.5, dtypes.float32.vec(4)).dtype is dtypes.float32  # a CONST is a scalar; vectors are STACKs
  v = UOp.vec((1, 2, 3))
  assert v.op is Ops.STACK and v.shape == (3,) and v.dtype is dtypes.index and [s.arg[0] for s in v.src] == [1, 2, 3]

@pytest.mark.parametrize("op,nsrc", [(Ops.ADD, 1), (Ops.ADD, 3), (Ops.WHERE, 2), (Ops.CONST, 1), (Ops.RESHAPE, 1), (Ops.STORE, 1),
                                     (Ops.STORE, 4), (Ops.PAD, 4), (Ops.INDEX, 0), (Ops.RANGE, 0), (Ops.BUFFER, 2), (Ops.END, 1), (Ops.RECIP, 2)])
def test_source_count_errors(op, nsrc):
  x = x_var()
  lo, hi = OPS[op].nsrc
  want = f"{lo}" if lo == hi else f"{lo}+" if hi is None else f"{lo}..{hi}"
  with pytest.raises(SpecViolation, match=rf"^{op.name}: takes {re.escape(want)} sources .*, got {nsrc}$"):
    UOp(op, (x,) * nsrc, (1, dtypes.int32) if op is Ops.CONST else None)

def test_source_count_message_shows_the_src_spec():
  with pytest.raises(SpecViolation, match=r"^STORE: takes 2\.\.3 sources \(buf, val, gate\?\), got 1$"): UOp(Ops.STORE, (x_var(),))
  with pytest.raises(SpecViolation, match=r"^WHERE: takes 3 sources \(P, A, B\), got 2$"): UOp(Ops.WHERE, (x_var(), x_var()))

def test_sources_must_be_uops():
  with pytest.raises(TypeError, match=r"ADD: every source must be a UOp, got \['UOp', 'int'\]"): UOp(Ops.ADD, (x_var(), 1))

def test_bad_node_is_not_registered():
  b = UOp.buffer((2, 3), dtypes.float32, "CPU", 0)
  for _ in range(2):
    with pytest.raises(SpecViolation, match="RESHAPE"): b.reshape((5,))

# ---- replace ----

def test_replace():
  x = x_var()
  e = x + 1
  assert e.replace() is e and e.replace(op=Ops.ADD, src=e.src) is e
  assert e.replace(op=Ops.MUL) is x * 1
  assert e.replace(src=(x, x)) is x + x
  t = e.replace(tag="mark")
  assert t.tag == "mark" and t.src is e.src and t.replace(tag=None) is e
  assert UOp.const(1.0, dtypes.float32).replace(arg=(2.0, dtypes.float32)) is UOp.const(2.0, dtypes.float32)
  with pytest.raises(TypeError, match=r"unknown fields \['dtype'\]"): e.replace(dtype=dtypes.int8)
  with pytest.raises(SpecViolation, match="ADD: takes 2 sources"): e.replace(src=(x,))

# ---- toposort ----

def test_toposort_order():
  x = x_var()
  one = UOp.const(1, dtypes.int32)
  a = x + one
  b = a * a
  c = b + a
  order = c.toposort()
  assert order[-1] is c and len(order) == len(set(order)) == 8  # x(STACK, lo, hi, PARAM), one, a, b, c
  pos = {u: i for i, u in enumerate(order)}
  for u in order:
    assert all(pos[s] < pos[u] for s in u.src)
  assert set(order) == {c, b, a, one, x, *x.src}
  assert pos[x] < pos[one]  # sources in src order: x is reached before the constant
  assert x.toposort()[-1] is x and UOp.const(3).toposort() == [UOp.const(3)]

def test_toposort_deep_chain():
  limit = sys.getrecursionlimit()
  one = UOp.const(1, dtypes.int32)
  c = one
  for _ in range(100_000): c = UOp(Ops.ADD, (c, one))
  order = c.toposort()
  assert sys.getrecursionlimit() == limit
  assert len(order) == 100_001 and order[0] is one and order[-1] is c and order[1].src == (one, one)
  assert c.eval() == 100_001

# ---- eval and exec_alu ----

@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3), (-1, 5), (6, 3), (-6, 3)])
def test_floor_division_and_modulo(a, b):
  assert exec_alu(Ops.IDIV, dtypes.int32, (a, b)) == a // b
  assert exec_alu(Ops.MOD, dtypes.int32, (a, b)) == a % b
  x, y = UOp.variable("x", -10, 10, dtypes.int32), UOp.variable("y", -3, 3, dtypes.int32)
  assert (x // y).eval({x: a, y: b}) == a // b and (x % y).eval({x: a, y: b}) == a % b
  assert ((x // y) * y + x % y).eval({x: a, y: b}) == a

def test_division_by_zero_folds_to_zero():
  assert exec_alu(Ops.IDIV, dtypes.int32, (7, 0)) == 0 and exec_alu(Ops.MOD, dtypes.int32, (7, 0)) == 0
  assert (UOp.const(5, dtypes.int32) // 0).eval() == 0
  assert exec_alu(Ops.RECIP, dtypes.float32, (0.0,)) == math.inf and exec_alu(Ops.RECIP, dtypes.float32, (-0.0,)) == -math.inf

@pytest.mark.parametrize("dt,op,a,b,want", [
  (dtypes.int8, Ops.ADD, 127, 1, -128), (dtypes.int8, Ops.MUL, 16, 16, 0), (dtypes.int8, Ops.ADD, -128, -1, 127),
  (dtypes.int8, Ops.IDIV, -128, -1, -128),
  (dtypes.uint8, Ops.ADD, 255, 1, 0), (dtypes.uint8, Ops.ADD, 0, -1, 255), (dtypes.uint8, Ops.MUL, 16, 17, 16), (dtypes.uint8, Ops.SHL, 1, 8, 0),
  (dtypes.int32, Ops.ADD, 2**31 - 1, 1, -2**31), (dtypes.int32, Ops.MUL, 2**30, 4, 0), (dtypes.int32, Ops.MUL, 65536, 65537, 65536),
  (dtypes.uint32, Ops.ADD, 0, -1, 2**32 - 1), (dtypes.int64, Ops.ADD, 2**63 - 1, 1, -2**63), (dtypes.uint64, Ops.MUL, 2**63, 2, 0),
  (dtypes.int16, Ops.SHL, 1, 15, -32768), (dtypes.int8, Ops.SHR, -8, 1, -4), (dtypes.uint8, Ops.XOR, 0xF0, 0xFF, 0x0F),
])
def test_integer_wraparound(dt, op, a, b, want):
  assert exec_alu(op, dt, (a, b)) == want

def test_wraparound_in_eval_matches_numpy():
  np = pytest.importorskip("numpy")
  x = UOp.variable("x", -128, 127, dtypes.int8)
  e = x * 3 + 100
  for v in (-128, -50, 0, 9, 127):
    with np.errstate(over="ignore"): want = int(np.int8(v) * np.int8(3) + np.int8(100))
    assert e.eval({x: v}) == want

def test_bool_ops():
  for a in (False, True):
    for b in (False, True):
      assert exec_alu(Ops.AND, dtypes.bool, (a, b)) is (a and b)
      assert exec_alu(Ops.OR, dtypes.bool, (a, b)) is (a or b)
      assert exec_alu(Ops.XOR, dtypes.bool, (a, b)) is (a != b)
      assert exec_alu(Ops.CMPNE, dtypes.bool, (a, b)) is (a != b)
      assert exec_alu(Ops.CMPLT, dtypes.bool, (a, b)) is (a < b)
  assert exec_alu(Ops.CMPLT, dtypes.bool, (-1, 2)) is True and exec_alu(Ops.CMPNE, dtypes.bool, (3, 3)) is False
  p = UOp.variable("p", 0, 1, dtypes.bool)
  assert (p & True).eval({p: True}) is True and (p | False).eval({p: False}) is False and p.ne(True).eval({p: False}) is True

@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # numpy warns as float16 overflows to inf
def test_other_alu():
  assert exec_alu(Ops.MAX, dtypes.int32, (-2, 3)) == 3 and exec_alu(Ops.MAX, dtypes.float32, (-2.5, -3.0)) == -2.5
  assert exec_alu(Ops.WHERE, dtypes.int32, (False, 1, 2)) == 2 and exec_alu(Ops.WHERE, dtypes.int32, (True, 1, 2)) == 1
  assert exec_alu(Ops.TRUNC, dtypes.float32, (-2.5,)) == -2 and exec_alu(Ops.TRUNC, dtypes.float32, (2.5,)) == 2
  assert exec_alu(Ops.RECIP, dtypes.float32, (3.0,)) == float(__import__("numpy").float32(1 / 3))  # rounded to float32
  assert exec_alu(Ops.ADD, dtypes.float16, (65504.0, 32.0)) == math.inf  # float16 overflow
  with pytest.raises(ValueError, match="exec_alu: CAST is not an ALU op"): exec_alu(Ops.CAST, dtypes.int32, (1,))

def test_eval():
  x = UOp.variable("x", -10, 10, dtypes.int32)
  assert (x - 3).eval({x: 2}) == -1 and (-x).eval({x: 5}) == -5 and (3 - x).eval({x: 5}) == -2
  assert (x < 3).eval({x: 2}) is True and (x > 3).eval({x: 2}) is False and (x >= 2).eval({x: 2}) is True and (x <= 1).eval({x: 2}) is False
  assert x.eq(4).eval({x: 4}) is True and x.maximum(0).eval({x: -4}) == 0 and x.minimum(0).eval({x: -4}) == -4
  assert (x < 0).where(-x, x).eval({x: -7}) == 7
  assert x.cast(dtypes.float32).eval({x: 3}) == 3.0 and UOp.const(-2.7, dtypes.float32).cast(dtypes.int32).eval() == -2
  assert UOp.const(3, dtypes.int32).cast(dtypes.bool).eval() is True
  assert (x.cast(dtypes.int8) * 100).eval({x: 3}) == 44  # 300 wraps in int8
  r = UOp.range(8, 0)
  assert (r * 2 + 1).eval({r: 3}) == 7
  with pytest.raises(ValueError, match=r"eval: no value for PARAM \(arg \('x', dtypes.int32\)\); pass it in env"): x.eval()

def test_variable_and_range():
  v = UOp.variable("n", 1, 8)
  assert (v.op, v.arg, v.shape, v.dtype, v.min_max) == (Ops.PARAM, ("n", dtypes.index), (), dtypes.index, (1, 8))
  with pytest.raises(ValueError, match=r"variable n: empty range \[3, 2\]"): UOp.variable("n", 3, 2)
  r = UOp.range(4, 1, AxisType.REDUCE)
  assert r.arg == (1, AxisType.REDUCE) and r.src == (UOp.const(4),) and UOp.range(4, 1, AxisType.REDUCE) is r and UOp.range(4, 2) is not r

# ---- pickling ----

def test_pickle_round_trip_is_the_same_node():
  x = x_var()
  b = UOp.buffer((4, 4), dtypes.float32, ("CPU:0", "CPU:1"), 0, AddrSpace.GLOBAL)
  for u in (x, x * 2 + 1, UOp.const(-0.0, dtypes.float32), UOp.const(math.nan, dtypes.float16), b.permute((1, 0)).reshape((16,)),
            (x + 1).replace(tag=("t", 1)), UOp.range(3, 0, AxisType.GLOBAL)):
    assert pickle.loads(pickle.dumps(u)) is u
  nz = pickle.loads(pickle.dumps(UOp.const(-0.0, dtypes.float32)))
  assert math.copysign(1, nz.arg[0]) == -1

def test_pickle_deep_graph():
  c = x_var()
  for _ in range(300): c = c + 1  # well within pickle's own recursion
  assert pickle.loads(pickle.dumps(c)) is c
