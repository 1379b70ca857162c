"""The lowering pipeline on tensor graphs built from UOps: kernel split, kernel names, schedule cache, memory plan, DEBUG."""
import math

import numpy as np
import pytest
from tinyspec import Ops, UOp, dtypes
from tinyspec.engine import realize as R
from tinyspec.engine.callify import callify
from tinyspec.engine.lower import kernel_name
from tinyspec.engine.memplan import memory_plan
from tinyspec.engine.rangeify import find_realized, rangeify
from tinyspec.uop.ops import AxisType

rng = np.random.default_rng(0)

def buf(arr): return R.from_numpy(np.asarray(arr), dtypes.from_np(np.asarray(arr).dtype), "PYTHON")
def run(u: UOp) -> np.ndarray: return R.to_numpy(R.realize(u)[0])
def n_kernels(*us: UOp) -> int: return len(rangeify(callify(*us)).items)
def bcast(u: UOp, shape) -> UOp: return u.reshape(u.shape + (1,) * (len(shape) - u.ndim)).expand(shape)

def softmax_graph(x: UOp) -> UOp:
  m = bcast(x.reduce(Ops.MAX, (1,)).reshape((x.shape[0],)), x.shape)
  e = UOp(Ops.EXP2, (x + m * -1.0,))
  return e * bcast(UOp(Ops.RECIP, (e.reduce(Ops.ADD, (1,)),)).reshape((x.shape[0],)), x.shape)

def test_fused_reduce_is_one_kernel():
  a, b, c = (buf(rng.standard_normal(100, dtype=np.float32)) for _ in range(3))
  out = ((a + b) * c).reduce(Ops.ADD, (0,))
  assert n_kernels(out) == 1
  an, bn, cn = (R.to_numpy(x) for x in (a, b, c))
  np.testing.assert_allclose(run(out), [((an + bn) * cn).sum()], rtol=1e-5)

def test_softmax_is_one_kernel_per_row_on_a_cpu_and_three_on_a_gpu():
  xn = rng.standard_normal((4, 8), dtype=np.float32)
  out = softmax_graph(buf(xn))
  # both reductions are read through a broadcast of the innermost axis: a CPU kernel computes them once per row, before
  # its loop over the row; a GPU lane per element would redo them, so there they are kernels of their own
  assert n_kernels(out) == 1 and len(rangeify(callify(out), gpu=True).items) == 3
  e = np.exp2(xn - xn.max(1, keepdims=True))
  np.testing.assert_allclose(run(out), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)

def test_reduce_broadcast_over_an_outer_axis_is_a_kernel_of_its_own():
  xn = rng.standard_normal((5, 7), dtype=np.float32)
  x = buf(xn)
  out = x * UOp(Ops.RECIP, (x.reduce(Ops.ADD, (0,)),)).expand(x.shape)  # fused, each row would redo the column sums
  assert n_kernels(out) == 2
  np.testing.assert_allclose(run(out), xn / xn.sum(0), rtol=1e-5)

def test_gemm_is_one_kernel():
  an, bn = rng.standard_normal((5, 7), dtype=np.float32), rng.standard_normal((7, 3), dtype=np.float32)
  a, b = buf(an), buf(bn)
  out = (a.reshape((5, 7, 1)).expand((5, 7, 3)) * b.reshape((1, 7, 3)).expand((5, 7, 3))).reduce(Ops.ADD, (1,)).reshape((5, 3))
  assert n_kernels(out) == 1
  np.testing.assert_allclose(run(out), an @ bn, rtol=1e-5, atol=1e-5)

def test_contraction_inside_another_reduction_is_a_kernel_of_its_own():
  # a product's sum (a matmul) read by a reduction over its output axes (attention's dO @ v.T under its row sums): nested in
  # that reduction's loop it would run as a scalar loop per step; alone it gets a register tile. A sum of a plain sum nests.
  an, bn = rng.standard_normal((5, 7), dtype=np.float32), rng.standard_normal((7, 3), dtype=np.float32)
  mm = (buf(an).reshape((5, 7, 1)).expand((5, 7, 3)) * buf(bn).reshape((1, 7, 3)).expand((5, 7, 3))).reduce(Ops.ADD, (1,)).reshape((5, 3))
  out = mm.reduce(Ops.ADD, (1,))
  assert mm.src[0] in find_realized(UOp(Ops.TUPLE, (out,))) and n_kernels(out) == 2  # mm.src[0]: the REDUCE
  np.testing.assert_allclose(run(out).reshape(-1), (an @ bn).sum(1), rtol=1e-5, atol=1e-5)
  plain = buf(an).reduce(Ops.ADD, (1,)).reshape((5,)).reduce(Ops.ADD, (0,))
  assert n_kernels(plain) == 1
  np.testing.assert_allclose(run(plain).reshape(-1), [an.sum()], rtol=1e-5)

def test_elementwise_after_reduce_fuses():
  xn = rng.standard_normal((6, 5), dtype=np.float32)
  out = (buf(xn).reduce(Ops.ADD, (1,)) * 2.0 + 1.0).maximum(0.0)
  assert n_kernels(out) == 1
  np.testing.assert_allclose(run(out), np.maximum(xn.sum(1, keepdims=True) * 2 + 1, 0), rtol=1e-5)

def test_contiguous_ends_a_kernel():
  xn = rng.standard_normal((3, 4), dtype=np.float32)
  mid = UOp(Ops.CONTIGUOUS, (buf(xn) * 2.0,))
  out = mid.permute((1, 0)) + 1.0
  assert mid in find_realized(UOp(Ops.TUPLE, (out,)))
  assert n_kernels(out) == 2
  np.testing.assert_allclose(run(out), (xn * 2).T + 1)

def test_movement_ops_become_index_arithmetic():
  xn = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
  x = buf(xn)
  out = x.permute((2, 0, 1)).flip((0,)).shrink((1, 0, 1), (2, 2, 2)).pad((0, 1, 0), (3, 4, 2)).reshape((6, 4))
  expect = np.pad(np.flip(xn.transpose(2, 0, 1), 0)[1:3, 0:2, 1:3], ((0, 1), (1, 1), (0, 0))).reshape(6, 4)
  assert n_kernels(out) == 1
  np.testing.assert_array_equal(run(out), expect)

def test_kernel_names_show_the_iteration_space():
  x = buf(np.ones((16, 4), np.float32))
  sched = rangeify(callify(x.reduce(Ops.ADD, (1,)), x * 2.0))
  assert [kernel_name(it.ast) for it in sched.items] == ["r_16_4", "E_16_4"]

def test_schedule_cache_reuses_compiled_kernels():
  def graph(a, b): return ((a + b) * a).reduce(Ops.ADD, (1,))
  data = [rng.standard_normal((4, 8), dtype=np.float32) for _ in range(4)]
  run(graph(buf(data[0]), buf(data[1])))
  before = dict(R.stats)
  for x, y in ((data[2], data[3]), (data[1], data[0])):
    out = run(graph(buf(x), buf(y)))
    np.testing.assert_allclose(out, ((x + y) * x).sum(1, keepdims=True), rtol=1e-5)
  assert R.stats["schedules_built"] == before["schedules_built"] and R.stats["kernels_compiled"] == before["kernels_compiled"]
  assert R.stats["kernels_run"] == before["kernels_run"] + 2

def test_same_kernel_on_other_buffers_compiles_once():
  x = buf(rng.standard_normal(32, dtype=np.float32))
  before = R.stats["kernels_compiled"]
  a, b = UOp(Ops.CONTIGUOUS, (x * 3.0,)), UOp(Ops.CONTIGUOUS, (x * 3.0 + 0.5,))
  run(a * 3.0 + b)  # two different kernels; then the same two again under another graph
  mid = R.stats["kernels_compiled"]
  run(b * 3.0 + a)
  assert mid - before >= 2 and R.stats["kernels_compiled"] - mid <= 1

def test_memory_plan_reuses_dead_intermediates():
  x = buf(rng.standard_normal(64, dtype=np.float32))
  y = x
  for k in range(4): y = UOp(Ops.CONTIGUOUS, (y * 2.0 + float(k),))
  sched = rangeify(callify(y))
  home = memory_plan(sched)
  intermediates = [b for b in range(sched.n_args, sched.n_args + len(sched.buffers)) if b not in sched.outputs]
  assert len({home[b] for b in intermediates}) < len(intermediates)  # a chain needs two buffers at a time, not one per step
  expect = R.to_numpy(x)
  for k in range(4): expect = expect * 2 + k
  np.testing.assert_allclose(run(y), expect, rtol=1e-5)

def test_realize_returns_buffers_as_they_are():
  x = buf(np.arange(3, dtype=np.int32))
  assert R.realize(x) == (x,)

def test_const_only_graph_goes_to_the_given_device():
  u = UOp.const(2.5, dtypes.float32).reshape((1,)).expand((3,))
  out, = R.realize(u, device="PYTHON")
  assert out.device == "PYTHON"
  np.testing.assert_array_equal(R.to_numpy(out), [2.5, 2.5, 2.5])

EIGHT_STAGES = ("callify", "rangeify", "optimize", "expand", "isel", "linearize", "memory plan", "render")  # seed 001's, as DEBUG=5 names them

@pytest.mark.parametrize("level,expect", [(1, ["r_3_4", "ms"]), (2, ["MB"]), (3, ["RANGE", "END"]), (4, ["# kernel r_3_4"]),
                                          (5, [f"--- after {stage} ---" for stage in EIGHT_STAGES])])
def test_debug_levels(monkeypatch, capsys, level, expect):
  R._kernels.clear(); R._schedules.clear()
  monkeypatch.setenv("DEBUG", str(level))
  run(buf(np.ones((3, 4), np.float32)).reduce(Ops.ADD, (1,)))
  out = capsys.readouterr().out
  for text in expect: assert text in out

def test_reduce_ranges_are_typed():
  sched = rangeify(callify(buf(np.ones((3, 4), np.float32)).reduce(Ops.MAX, (0,))))
  kinds = sorted(r.arg[1].name for r in sched.items[0].ast.toposort() if r.op is Ops.RANGE)
  assert kinds == [AxisType.LOOP.name, AxisType.REDUCE.name]

@pytest.mark.parametrize("np_dt", [np.int32, np.int8, np.uint16, np.float16, np.bool_])
def test_dtypes_round_trip_through_a_kernel(np_dt):
  xn = (rng.integers(0, 50, (3, 5)) % (2 if np_dt is np.bool_ else 50)).astype(np_dt)
  x = buf(xn)
  out = x.permute((1, 0)).flip((1,))
  np.testing.assert_array_equal(run(out), np.flip(xn.T, 1))

def test_reduce_read_by_two_kernels_is_computed_once():
  xn = rng.standard_normal((4, 6), dtype=np.float32)
  s = buf(xn).reduce(Ops.ADD, (1,))
  a, b = s * 2.0, s.permute((1, 0)) + 1.0  # two shapes: two kernels, reading the sum made once
  assert s in find_realized(UOp(Ops.TUPLE, (a, b)))
  assert n_kernels(a, b) == 3
  out = R.realize(a, b)
  np.testing.assert_allclose(R.to_numpy(out[0]), xn.sum(1, keepdims=True) * 2, rtol=1e-5)
  np.testing.assert_allclose(R.to_numpy(out[1]), xn.sum(1, keepdims=True).T + 1, rtol=1e-5)

def test_outputs_of_one_shape_sharing_a_reduce_are_one_kernel():
  xn = rng.standard_normal((4, 6), dtype=np.float32)
  s = buf(xn).reduce(Ops.ADD, (1,))
  a, b = s * 2.0, s + 1.0
  sched = rangeify(callify(a, b))
  assert len(sched.items) == 1 and sched.items[0].outputs == 2
  assert sum(u.op is Ops.REDUCE for u in sched.items[0].ast.toposort()) == 1  # the sum, once for both
  out = R.realize(a, b)
  np.testing.assert_allclose(R.to_numpy(out[0]), xn.sum(1, keepdims=True) * 2, rtol=1e-5)
  np.testing.assert_allclose(R.to_numpy(out[1]), xn.sum(1, keepdims=True) + 1, rtol=1e-5)

@pytest.mark.parametrize("op,expect", [(Ops.ADD, 24.0), (Ops.MUL, 2.0 ** 12), (Ops.MAX, 2.0)])
def test_reduce_of_a_value_that_does_not_vary(op, expect):
  u = UOp.const(2.0, dtypes.float32).reshape((1, 1)).expand((4, 3)).reduce(op, (0, 1))
  np.testing.assert_array_equal(run(u).reshape(-1), [expect])

def test_zero_size_reduce_and_loop_invariant_reduction():
  z = buf(np.zeros((0, 3), np.float32))
  np.testing.assert_array_equal(run(z.reduce(Ops.ADD, (0,))), [[0, 0, 0]])
  ones = UOp.const(1.0, dtypes.float32).reshape((1, 1)).expand((4, 3)).reduce(Ops.ADD, (0,))
  np.testing.assert_array_equal(run(ones), [[4, 4, 4]])

def test_big_loop_nests_run_in_chunks(monkeypatch):
  from tinyspec.interpreter import run as interp
  monkeypatch.setattr(interp, "LANES", 7)  # every loop nest is far bigger: each loop runs in chunks of a few iterations
  R._kernels.clear()
  an, bn = rng.standard_normal((5, 9), dtype=np.float32), rng.standard_normal((9, 4), dtype=np.float32)
  a, b = buf(an), buf(bn)
  out = (a.reshape((5, 9, 1)).expand((5, 9, 4)) * b.reshape((1, 9, 4)).expand((5, 9, 4))).reduce(Ops.ADD, (1,)).reshape((5, 4))
  np.testing.assert_allclose(run(out), an @ bn, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(run(a.reduce(Ops.MAX, (0, 1))), [[an.max()]])

def test_deep_graphs_lower_without_recursion():
  x = buf(np.array([1.0, 2.0], np.float32))
  y = x
  for _ in range(3000): y = y * 1.0 + 0.5  # deeper than Python's recursion limit
  np.testing.assert_allclose(run(y), [1501.0, 1502.0])

def test_a_10k_op_fused_kernel_compiles_as_one_kernel():
  """Every stage handles a 10,000-op kernel (about 1.5 s here on PYTHON; 1k to 10k ops on CPU grew 0.5 s to 4.8 s)."""
  x, expect = buf(np.array([1.0, -2.0, 3.0], np.float32)), np.array([1.0, -2.0, 3.0], np.float32)
  y = x
  for i in range(5000):  # two ops each: 10,000 ALU ops in one kernel
    y, expect = (y * 0.5 + 1.0, expect * np.float32(0.5) + np.float32(1.0)) if i % 2 else (y.maximum(0.25), np.maximum(expect, np.float32(0.25)))
  before = R.stats["kernels_run"]
  np.testing.assert_allclose(run(y), expect, rtol=1e-6)
  assert R.stats["kernels_run"] == before + 1

def test_accumulator_inside_a_loop_it_does_not_depend_on():
  # the reduction depends on axes 0 and 2 but runs inside the loop of axis 1 too: its register is set up again each time
  xn = rng.standard_normal((2, 3, 1, 1), dtype=np.float32)
  out = buf(xn).expand((2, 3, 4, 2)).reduce(Ops.ADD, (1,)).permute((1, 0, 2, 3))
  np.testing.assert_allclose(run(out), np.broadcast_to(xn, (2, 3, 4, 2)).sum(1, keepdims=True).transpose(1, 0, 2, 3), rtol=1e-6)

def test_upcast_output_axis_with_a_reduction_shares_one_loop():
  # out[i, j] = sum_k a[i, k] * b[k, j] with j UPCAST: expand copies the reduction per j, and the copies share k's loop
  from tinyspec.conformance.builders import end, f32, load, param, store
  from tinyspec.engine.expand import expand
  from tinyspec.engine.linearize import linearize
  from tinyspec.interpreter.run import Interpreter
  n, m, kk = 3, 4, 5
  i, j, k = UOp.range(n, 0), UOp.range(m, 1, AxisType.UPCAST), UOp.range(kk, 2, AxisType.REDUCE)
  a, b, out = param(1, n * kk, f32), param(2, kk * m, f32), param(0, n * m, f32)
  acc = UOp(Ops.REDUCE, (load(a, i * kk + k) * load(b, k * m + j), k), (Ops.ADD, ()))
  lin = linearize(expand(UOp.sink(end(store(out, i * m + j, acc), j, i))))
  assert sum(u.op is Ops.END and u.src[1] is k for u in lin.src) == 1
  an, bn = rng.standard_normal((n, kk), dtype=np.float32), rng.standard_normal((kk, m), dtype=np.float32)
  bufs = [np.zeros(n * m, np.float32), an.reshape(-1), bn.reshape(-1)]
  Interpreter(lin)(bufs)
  np.testing.assert_allclose(bufs[0].reshape(n, m), an @ bn, rtol=1e-5)

def test_kernel_and_schedule_caches_are_bounded_lru(monkeypatch):
  monkeypatch.setenv("TINYSPEC_KERNEL_CACHE", "3")
  monkeypatch.setenv("TINYSPEC_SCHEDULE_CACHE", "2")
  R._kernels.clear(); R._schedules.clear()
  for n in range(1, 11):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    np.testing.assert_array_equal(run(buf(x).reduce(Ops.ADD, (1,))).ravel(), x.sum(1))
    assert len(R._kernels) <= 3 and len(R._schedules) <= 2
  compiled = R.stats["kernels_compiled"]
  run(buf(np.ones((10, 3), np.float32)).reduce(Ops.ADD, (1,)))  # the most recent shape: still cached
  assert R.stats["kernels_compiled"] == compiled

def test_long_float_sums_split_into_blocks():
  from tinyspec.engine.rangeify import SUM_BLOCK, sum_blocks
  assert sum_blocks(10**8) == [100, 1000, 1000] and sum_blocks(1000) == [1000] and sum_blocks(2**24) == [16, 1024, 1024]
  for n in (1025, 10007, 2**24 + 2, 3 * 10**9):  # primes and awkward sizes pad up to a product past n
    blocks = sum_blocks(n)
    assert max(blocks) <= SUM_BLOCK and n <= math.prod(blocks) < n + n // 8, (n, blocks)
  x = np.random.default_rng(0).random(3 * 5 * 700).astype(np.float32).reshape(3, 5, 700)
  for axes in ((0, 2), (1, 2), (0, 1, 2)):  # the reduced axes are gathered next to the first, the rest keep their order
    np.testing.assert_allclose(run(buf(x).reduce(Ops.ADD, axes)), x.sum(axes, keepdims=True), rtol=1e-6)
