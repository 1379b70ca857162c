"""The spec verifier: a well-formed graph per stage passes; for each rule, a small graph that breaks it is reported by name."""
import os
import re
import subprocess
import sys
from typing import NamedTuple

import pytest
from tinyspec.dtype import AddrSpace, dtypes
from tinyspec.uop import Ops, SpecViolation, UOp, spec
from tinyspec.uop.ops import AxisType
from tinyspec.uop.spec import Violation, check, verify, verify_between_stages

f32, i32, idx = dtypes.float32, dtypes.int32, dtypes.index
T, K, L = "tensor", "kernel", "linear"

def buf(slot: int, dtype=f32, shape=(4,)) -> UOp: return UOp.buffer(shape, dtype, "CPU", slot)
def raw_const(value, dtype) -> UOp: return UOp(Ops.CONST, (), (value, dtype))  # no conversion, unlike UOp.const
PTR = f32.ptr(4)
def param(slot: int, shape=(4,), dtype=PTR) -> UOp: return UOp(Ops.PARAM, (UOp.vec(shape),), (slot, dtype))
A, B, I = buf(0), buf(1), buf(2, i32)
R = UOp.range(4, 0)
GATE = R < 2

def kernel(value=None, *extra: UOp) -> UOp:
  """out[r] = in[r] * 2 over one RANGE: what rangeify makes of `out = in * 2`."""
  val = UOp(Ops.LOAD, (param(1).index(R),)) * 2.0 if value is None else value
  return UOp.sink(UOp(Ops.END, (UOp(Ops.STORE, (param(0).index(R), val)), R)), *extra)

def linear(root: UOp) -> UOp: return UOp(Ops.LINEAR, tuple(root.toposort()))

def broken(root: UOp, stage: str, rule: str):
  with pytest.raises(SpecViolation, match=re.escape(rule)): verify(root, stage)


# ---- well-formed graphs pass ----

def test_tensor_graph_passes():
  n = UOp.variable("n", 1, 8)
  moved = (A * 2.0 + B).reshape((2, 2)).expand((2, 2)).pad((1, 0), (3, 2)).shrink((1, 0), (2, 2)).permute((1, 0)).flip((0,))
  body = UOp(Ops.TUPLE, (UOp(Ops.PARAM, (UOp.vec((4,)),), (0, f32)) + 1.0,))
  called = UOp(Ops.GETTUPLE, (UOp(Ops.FUNCTION, (body, A)),), 0)
  store = UOp(Ops.STORE, (buf(3), called))
  picked = (A < B).where(UOp(Ops.SUB, (A, B)), UOp(Ops.CONST, (), (0.0, f32)))
  ints = (I // 2) % 3 & 1 | (I << UOp.const(1, dtypes.uint8))
  verify(UOp.sink(moved.reduce(Ops.ADD, (1,)), store, UOp(Ops.AFTER, (buf(3), store)), UOp(Ops.COPY, (picked,), ("CPU:0", "CPU:1")),
                  A.bitcast(dtypes.float16), ints.cast(f32), UOp(Ops.EXP2, (A,)), buf(4, shape=(n, 4)), UOp(Ops.DETACH, (A,))), "tensor")

def test_kernel_passes():
  acc = UOp(Ops.REDUCE, (UOp(Ops.LOAD, (param(1).index(R),)), UOp.range(8, 1, AxisType.REDUCE)), (Ops.ADD, ()))
  verify(kernel(), "kernel")
  verify(kernel(acc.bitcast(dtypes.int32).cast(f32)), "kernel")

def test_linear_passes():
  iff = UOp(Ops.IF, (GATE,))
  verify(linear(kernel()), "linear")
  verify(linear(UOp.sink(kernel(), UOp(Ops.ENDIF, (iff,)))), "linear")


# ---- each rule, broken ----

class NotADType(NamedTuple):
  nbytes: int = 4  # enough of a dtype for BITCAST's shape rule, so only the verifier objects

@pytest.mark.parametrize("stage, build, rule", [
  # elementwise dtypes
  (T, lambda: UOp(Ops.ADD, (UOp.const(1, i32), A)), "#4 ADD(src: CONST, BUFFER): sources must share one dtype, got int32 and float32"),
  (T, lambda: UOp(Ops.CMPLT, (A, I)), "CMPLT(src: BUFFER, BUFFER): sources must share one dtype, got float32 and int32"),
  (T, lambda: UOp(Ops.MULACC, (A, A, I)), "sources must share one dtype, got float32, float32 and int32"),
  (T, lambda: UOp(Ops.STACK, (UOp.const(1), UOp.const(1, i32))), "STACK(src: CONST, CONST): sources must share one dtype, got index and int32"),
  (T, lambda: UOp(Ops.WHERE, (A, A, B)), "WHERE(src: BUFFER, BUFFER, BUFFER): the gate (src[0]) must be bool, got float32"),
  (T, lambda: UOp(Ops.WHERE, (A < B, A, I)), "the branches (src[1], src[2]) must share one dtype, got bool, float32 and int32"),
  (T, lambda: UOp(Ops.IDIV, (A, A)), "IDIV(src: BUFFER, BUFFER): takes integer sources, got float32 and float32"),
  (T, lambda: UOp(Ops.MOD, (I, I.cast(f32))), "MOD(src: BUFFER, CAST): takes integer sources"),
  (T, lambda: UOp(Ops.SHL, (I, A)), "SHL(src: BUFFER, BUFFER): takes integer sources, got int32 and float32"),
  (T, lambda: UOp(Ops.AND, (A, A)), "AND(src: BUFFER, BUFFER): takes int or bool sources, got float32 and float32"),
  (T, lambda: UOp(Ops.RECIP, (I,)), "RECIP(src: BUFFER): computes on floats, got int32"),
  (T, lambda: UOp(Ops.SQRT, (I,)), "SQRT(src: BUFFER): computes on floats, got int32"),
  (T, lambda: UOp(Ops.CAST, (A,), "float16"), "CAST(src: BUFFER): arg must be the target DType, got 'float16'"),
  (T, lambda: UOp(Ops.BITCAST, (A,), NotADType()), "BITCAST(src: BUFFER): arg must be the target DType"),
  # CONST
  (T, lambda: raw_const(1.0, f32.vec(4)), "#0 CONST: arg must be (value, scalar dtype), got (1.0, dtypes.float32.vec(4))"),
  (T, lambda: raw_const(1, "int32"), "CONST: arg must be (value, scalar dtype), got (1, 'int32')"),
  (T, lambda: raw_const(1.5, i32), "CONST: the value must have its dtype's Python type (bool, int or float), got (1.5, dtypes.int32)"),
  (T, lambda: raw_const(True, i32), "CONST: the value must have its dtype's Python type"),
  (T, lambda: raw_const(1, f32), "CONST: the value must have its dtype's Python type"),
  (T, lambda: raw_const(1, dtypes.bool), "CONST: the value must have its dtype's Python type"),
  (T, lambda: raw_const(300, dtypes.int8), "CONST: the value must lie in its dtype's range, got (300, dtypes.int8)"),
  (T, lambda: raw_const(-1, dtypes.uint32), "CONST: the value must lie in its dtype's range"),
  # PARAM, BUFFER, BUFFER_VIEW, shape vectors
  (T, lambda: UOp(Ops.PARAM, (UOp.vec((4,)),), (0, "float32")), "PARAM(src: STACK): arg must be (slot, dtype, device?, addrspace?)"),
  (T, lambda: UOp(Ops.PARAM, (UOp.vec((4,)),), (0, f32, "CPU", "GLOBAL")), "arg must be (slot, dtype, device?, addrspace?)"),
  (T, lambda: UOp(Ops.PARAM, (UOp.vec((4,)), UOp.const(0), UOp.const(9)), ("n", idx)),
   "PARAM(src: STACK, CONST, CONST): a PARAM with (s, min, max) must be a scalar with CONST bounds of its dtype, min <= max"),
  (T, lambda: UOp(Ops.PARAM, (UOp.vec(()), UOp.const(9), UOp.const(0)), ("n", idx)), "must be a scalar with CONST bounds of its dtype, min <= max"),
  (T, lambda: UOp(Ops.PARAM, (UOp.vec(()), UOp.const(0, i32), UOp.const(9, i32)), ("n", idx)), "with CONST bounds of its dtype"),
  (T, lambda: UOp(Ops.BUFFER, (UOp.vec((4,)),), (0, f32, None, AddrSpace.GLOBAL)),
   "BUFFER(src: STACK): arg must be (slot, dtype, device, addrspace) with a device (None only for REG and LOCAL), "
   "got (0, dtypes.float32, None, AddrSpace.GLOBAL)"),
  (T, lambda: UOp(Ops.BUFFER, (UOp.vec((4,)),), (0, f32, "CPU")), "arg must be (slot, dtype, device, addrspace) with a device"),
  (T, lambda: UOp(Ops.BUFFER_VIEW, (A,), (2, f32, -1)), "BUFFER_VIEW(src: BUFFER): arg must be (size, dtype, offset) with size, offset >= 0"),
  (T, lambda: UOp(Ops.BUFFER_VIEW, (A + 1.0,), (2, f32, 0)), "BUFFER_VIEW(src: ADD): views a buffer: src[0] must be a BUFFER, PARAM"),
  (T, lambda: A.reshape(UOp.vec((2, 2), i32).src), "RESHAPE(src: BUFFER, STACK): shapes and offsets must be STACKs of non-negative index scalars"),
  (T, lambda: buf(0, shape=(-4,)), "BUFFER(src: STACK): shapes and offsets must be STACKs of non-negative index scalars"),
  # movement and reduce args
  (T, lambda: UOp(Ops.FLIP, (A,), (1,)), "FLIP(src: BUFFER): arg must be one bool per axis, got (1,)"),
  (T, lambda: UOp(Ops.REPLICATED, (A,), (0.0,)), "REPLICATED(src: BUFFER): arg must be a tuple of axes, got (0.0,)"),
  (T, lambda: A.index(UOp.const(1.0, f32)), "INDEX(src: BUFFER, CONST): indices must be integers, got float32 and float32"),
  (T, lambda: A.reduce(Ops.SUB, (0,)), "REDUCE(src: BUFFER): arg must be (ADD, MAX or MUL, tuple of axes), got (Ops.SUB, (0,))"),
  (K, lambda: kernel(UOp(Ops.REDUCE, (UOp.const(1.0, f32), UOp.const(3)), (Ops.ADD, ()))),
   "REDUCE(src: CONST, CONST): sources after the first must be RANGEs, got CONST and CONST"),
  # STORE and LOAD
  (T, lambda: UOp(Ops.STORE, (A + 1.0, B)), "STORE(src: ADD, BUFFER): src[0] must be a buffer: BUFFER, PARAM, AFTER, BUFFER_VIEW or a movement op"),
  (T, lambda: UOp(Ops.STORE, (A, I)), "STORE(src: BUFFER, BUFFER): the value's dtype must be the buffer's, got float32 and int32"),
  (T, lambda: UOp(Ops.STORE, (A, B, UOp.const(1, i32))), "STORE(src: BUFFER, BUFFER, CONST): the gate (src[2]) must be bool"),
  (T, lambda: UOp(Ops.LOAD, (A, B)), "LOAD(src: BUFFER, BUFFER): takes (buf,) or (buf, alt, gate)"),
  (T, lambda: UOp(Ops.LOAD, (A, I, UOp.const(True, dtypes.bool))),
    "LOAD(src: BUFFER, BUFFER, CONST): alt (src[1]) must have the loaded dtype float32"),
  (T, lambda: UOp(Ops.LOAD, (A, B, UOp.const(1, i32))),
    "LOAD(src: BUFFER, BUFFER, CONST): the gate (src[2]) must be bool, got float32, float32 and int32"),
  (T, lambda: UOp(Ops.LOAD, (A,), ("CPU",)), "LOAD(src: BUFFER): arg must be (device, addrspace), got ('CPU',)"),
  (T, lambda: UOp(Ops.COPY, (A,), 1), "COPY(src: BUFFER): arg must be the target device (a name or a tuple of names), got 1"),
  (T, lambda: UOp(Ops.COPY, (A,), ()), "COPY(src: BUFFER): arg must be the target device"),
  # call
  (T, lambda: UOp(Ops.FUNCTION, (A + 1.0, A)), "FUNCTION(src: ADD, BUFFER): the body (src[0]) must be a TUPLE, got ADD and BUFFER"),
  (T, lambda: UOp.sink(UOp(Ops.TUPLE, (A,))), "TUPLE(src: BUFFER): may only be a FUNCTION/CALL body or a GETTUPLE source"),
  (T, lambda: UOp(Ops.CALL, (UOp.sink(), UOp(Ops.TUPLE, (A,)))), "TUPLE(src: BUFFER): may only be a FUNCTION/CALL body"),
  # ordering and codegen
  (K, lambda: kernel(None, UOp(Ops.RANGE, (UOp.const(4.0, f32),), (1, AxisType.LOOP))),
    "RANGE(src: CONST): the bound must be an integer scalar, got float32"),
  (K, lambda: kernel(None, UOp(Ops.RANGE, (UOp.vec((4,)),), (1, AxisType.LOOP))), "RANGE(src: STACK): the bound must be an integer scalar"),
  (K, lambda: kernel(None, UOp(Ops.RANGE, (UOp.const(4),), (1, "LOOP"))), "RANGE(src: CONST): arg must be (id, AxisType), got (1, 'LOOP')"),
  (K, lambda: kernel(None, UOp(Ops.SPECIAL, (UOp.const(4),), 0)), "SPECIAL(src: CONST): arg must be the index name (e.g. gidx0), got 0"),
  (K, lambda: UOp.sink(UOp(Ops.END, (kernel().src[0].src[0], UOp.const(4)))),
    "END(src: STORE, CONST): closes RANGEs: sources after the body must be RANGEs"),
  (K, lambda: kernel(None, UOp(Ops.IF, (R,))), "IF(src: RANGE): the gate must be bool, got index"),
  (K, lambda: kernel(None, UOp(Ops.ENDIF, (GATE,))), "ENDIF(src: CMPLT): closes an IF: src[0] must be an IF, got CMPLT"),
  # tensor stage
  (T, lambda: UOp.sink(R), "RANGE(src: CONST): is a loop or codegen op: the tensor graph has none"),
  (T, lambda: UOp(Ops.SPECIAL, (UOp.const(4),), "gidx0"), "SPECIAL(src: CONST): is a loop or codegen op"),
  (T, lambda: UOp(Ops.BARRIER, (A,)), "BARRIER(src: BUFFER): is a loop or codegen op"),
  (T, lambda: UOp(Ops.SOURCE, (), "int main;"), "#0 SOURCE: is a loop or codegen op"),
  (T, lambda: linear(A), "LINEAR(src: CONST, STACK, BUFFER): is a loop or codegen op"),
  # kernel stage
  (K, lambda: kernel().src[0], "END(src: STORE, RANGE): the root of a kernel must be a SINK"),
  (K, lambda: kernel(None, param(2).reshape((2, 2))), "RESHAPE(src: PARAM, STACK): is a movement op: after rangeify only INDEX addresses memory"),
  (K, lambda: kernel(None, UOp(Ops.STACK, (UOp.vec((1.0, 2.0), f32),) * 2)), "STACK(src: STACK, STACK): a STACK here joins scalars"),
  (K, lambda: kernel(None, UOp.vec((1.0, 2.0), f32).index(R)), "INDEX(src: STACK, RANGE): reads a vector's lane: the index must be one CONST"),
  (K, lambda: kernel(None, A.bitcast(dtypes.float16)),
    "BITCAST(src: BUFFER): reinterprets a scalar here: itemsizes must match, got float32 -> dtypes.float16"),
  (K, lambda: kernel(None, UOp(Ops.STORE, (A, B))), "STORE(src: BUFFER, BUFFER): in a kernel, STORE writes through an INDEX, got BUFFER and BUFFER"),
  (K, lambda: kernel(None, UOp(Ops.COPY, (A,), "CPU:1")), "COPY(src: BUFFER): has no place in a kernel"),
  (K, lambda: kernel(None, UOp(Ops.CALL, (UOp.sink(), A))), "CALL(src: SINK, BUFFER): has no place in a kernel"),
  # linear stage
  (L, lambda: kernel(), "SINK(src: END): the root of a linear program must be a LINEAR"),
  (L, lambda: UOp(Ops.LINEAR, tuple(reversed(kernel().toposort()))), "#10 STORE(src: INDEX, MUL): must come after all its sources in the LINEAR"),
  (L, lambda: UOp(Ops.LINEAR, tuple(kernel().toposort()[1:])), "STACK(src: CONST): must come after all its sources in the LINEAR"),
  (L, lambda: linear(UOp.sink(kernel().src[0].src[0])), "RANGE(src: CONST): must be closed by exactly one END after it in the LINEAR"),
  (L, lambda: linear(UOp.sink(kernel(), UOp(Ops.END, (kernel().src[0], R)))), "RANGE(src: CONST): must be closed by exactly one END after it"),
  (L, lambda: linear(kernel(None, UOp(Ops.IF, (GATE,)))), "IF(src: CMPLT): must be closed by exactly one ENDIF after it in the LINEAR"),
  (L, lambda: linear(kernel(UOp(Ops.REDUCE, (UOp.const(1.0, f32), R), (Ops.ADD, ())))),
    "REDUCE(src: CONST, RANGE): has no place in a linear program"),
  (L, lambda: linear(kernel(None, param(2).reshape((2, 2)))), "RESHAPE(src: PARAM, STACK): is a movement op"),
])
def test_broken_rule(stage, build, rule): broken(build(), stage, rule)

def test_comparison_gives_bool():
  # properties.py always derives bool for comparisons; the rule guards against that ever changing, so fake the derived dtype
  cmp = UOp(Ops.CMPNE, (A, UOp(Ops.CONST, (), (0.5, f32), tag="test_comparison_gives_bool")))
  UOp.__dict__["dtype"].__set__(cmp, f32)  # dtype is a slot: set it behind UOp's immutability, for this test only
  broken(cmp, "tensor", "CMPNE(src: BUFFER, CONST): a comparison gives bool, got float32")

def test_endif_after_if():
  iff = UOp(Ops.IF, (GATE,))
  good = linear(UOp.sink(kernel(), UOp(Ops.ENDIF, (iff,))))
  entries = list(good.src)
  entries.remove(iff)
  broken(UOp(Ops.LINEAR, tuple(entries) + (iff,)), "linear", "IF(src: CMPLT): must be closed by exactly one ENDIF after it")

def summed_in_a_loop(*first: str) -> tuple[UOp, UOp]:
  """out[o] = sum_r in[r] as a LINEAR program that lists the nodes named in `first` (and what they need) before the rest, and
  the accumulator's update. The sum does not depend on the output loop o, as in issue 12's kernels, so the order alone
  decides whether the init runs inside o."""
  o, r = UOp.range(4, 0), UOp.range(8, 1, AxisType.REDUCE)
  acc, at0 = UOp(Ops.BUFFER, (UOp.vec((1,)),), (0, f32, None, AddrSpace.REG)), UOp.const(0)
  init = UOp(Ops.STORE, (acc.index(at0), UOp.const(0.0, f32)))
  inside = UOp(Ops.AFTER, (acc, init, r)).index(at0)
  update = UOp(Ops.STORE, (inside, UOp(Ops.LOAD, (inside,)) + UOp(Ops.LOAD, (param(1, (8,)).index(r),))))
  total = UOp(Ops.LOAD, (UOp(Ops.AFTER, (acc, UOp(Ops.END, (update, r)))).index(at0),))
  named = {"o": o, "r": r, "init": init, "total": total}
  entries: list[UOp] = []
  for part in [named[n] for n in first] + [UOp.sink(UOp(Ops.END, (UOp(Ops.STORE, (param(0).index(o), total)), o)))]:
    entries += [u for u in part.toposort() if u not in entries]
  return UOp(Ops.LINEAR, tuple(entries)), update

UPDATE_RULE = "updates an accumulator: every RANGE open here but its reduce ranges must be open at its init, and no reduce range may be"

@pytest.mark.parametrize("first", [("o", "init"), ("total",)], ids=["init_inside_the_output_loop", "sum_hoisted_out_of_it"])
def test_accumulator_placed_well_passes(first):
  verify(summed_in_a_loop(*first)[0], "linear")

@pytest.mark.parametrize("first", [("init",), ("o", "r", "init")], ids=["init_outside_the_output_loop", "init_inside_the_reduce_loop"])
def test_accumulator_placed_badly_is_refused(first):
  program, update = summed_in_a_loop(*first)
  assert [v.uop for v in check(program, "linear")] == [update]  # the update alone breaks a rule
  broken(program, "linear", f"STORE(src: INDEX, ADD): {UPDATE_RULE}")


# ---- reporting ----

def test_all_broken_nodes_reported_at_once():
  root = UOp.sink(UOp(Ops.IDIV, (A, A)), UOp(Ops.STORE, (A, I)), R, raw_const(300, dtypes.int8))
  with pytest.raises(SpecViolation) as e: verify(root, "tensor")
  lines = str(e.value).splitlines()
  assert lines[0] == "4 spec violations in the tensor graph (root SINK):"
  assert [re.sub(r"^#\d+ ", "", x) for x in lines[1:]] == [
    "IDIV(src: BUFFER, BUFFER): takes integer sources, got float32 and float32",
    "STORE(src: BUFFER, BUFFER): the value's dtype must be the buffer's, got float32 and int32",
    "RANGE(src: CONST): is a loop or codegen op: the tensor graph has none",
    "CONST: the value must lie in its dtype's range, got (300, dtypes.int8)"]
  topo = root.toposort()
  assert [int(x.split()[0][1:]) for x in lines[1:]] == [topo.index(u) for u in root.src]

def test_check_returns_violations():
  bad = UOp(Ops.IDIV, (A, A))
  assert check(kernel(), "kernel") == []
  assert check(bad, "tensor") == [Violation(bad, "takes integer sources, got float32 and float32", len(bad.toposort()) - 1)]

def test_unreadable_node_is_a_violation_not_a_crash():
  # comparing the str "7" with int32's range raises TypeError inside the rule: that is reported as the rule broken
  assert [v.rule for v in check(raw_const("7", i32), T)] == [
    "the value must have its dtype's Python type (bool, int or float), got ('7', dtypes.int32)",
    "the value must lie in its dtype's range, got ('7', dtypes.int32)"]

def test_unknown_stage():
  with pytest.raises(ValueError, match="unknown stage 'schedule'; the stages are tensor, kernel, linear"): verify(A, "schedule")

def test_deep_chain_verifies_without_recursion():
  x = UOp.variable("x", 0, 10)
  for _ in range(100_000): x = x + 1
  verify(x, "tensor")
  with pytest.raises(SpecViolation, match=r"#\d+ IDIV\(src: ADD, CONST\): takes integer sources, got index and float32"):
    verify(UOp(Ops.IDIV, (x, UOp.const(2.0, f32))), "tensor")


# ---- the switch between pipeline stages ----

def test_verify_between_stages_switch(monkeypatch):
  bad = UOp(Ops.IDIV, (A, A))
  monkeypatch.setattr(spec, "VERIFY", False)
  verify_between_stages(bad, "tensor")
  monkeypatch.setattr(spec, "VERIFY", True)
  with pytest.raises(SpecViolation, match="takes integer sources"): verify_between_stages(bad, "tensor")

@pytest.mark.parametrize("value, on", [("1", True), ("0", False)])
def test_verify_env_var(value, on):
  code = "import tinyspec.uop.spec as s; print(s.VERIFY)"
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TINYSPEC_VERIFY": value}, capture_output=True, text=True, check=True)
  assert out.stdout.strip() == str(on)
