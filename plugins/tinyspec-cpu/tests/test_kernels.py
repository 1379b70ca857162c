"""Hand-built kernels (loops, accumulators, gated loads and stores, IF blocks, variables, loop-carried dependencies) run
on the CPU device against the reference interpreter, each on one thread and split over three; and Tensor programs
(reductions over every axis, padding, matmul, zero-size) against numpy."""
import numpy as np
import pytest
import tinyspec_cpu.renderer
from helpers import end, f32, i32, load, lower, param, rng, run_linear, store
from tinyspec import Device, Tensor, dtypes
from tinyspec.engine.optimize import Opt, OptOps, thread_split
from tinyspec.uop import AxisType, Ops, UOp
from tinyspec_cpu.renderer import THREADS_ENV
from tinyspec_cpu.runtime import CPURuntime

gen = np.random.default_rng(0)

@pytest.fixture(params=[1, 3], ids=["1thread", "3threads"])
def rt(request, monkeypatch):
  """A CPU runtime with 1 or 3 threads; with 3, every kernel with a THREAD axis runs on threads, however small."""
  monkeypatch.setenv(THREADS_ENV, str(request.param))
  monkeypatch.setattr(tinyspec_cpu.renderer, "MIN_WORK_PER_THREAD", 1)
  return CPURuntime("CPU")

def matmul(m=7, n=5, k=4, thread=1):
  """C = A @ B with its rows (m of them) split into `thread` THREAD parts (no THREAD axis for 1)."""
  t, i, j, r = rng(thread, 3, AxisType.THREAD), rng(m // thread, 0), rng(n, 1), rng(k, 2, AxisType.REDUCE)
  row = t * (m // thread) + i if thread > 1 else i
  acc = UOp(Ops.REDUCE, (load(param(1, m * k, f32), row * k + r) * load(param(2, k * n, f32), r * n + j), r), (Ops.ADD, ()))
  return lower(end(store(param(0, m * n, f32), row * n + j, acc), j, i, *([t] if thread > 1 else [])))

@pytest.mark.parametrize("thread", [1, 2, 3, 6])
def test_matmul_over_a_thread_axis(rt, thread):
  cpu_out, ref, program = run_linear(rt, matmul(6, thread=thread), np.zeros(30, np.float32), gen.standard_normal(24).astype(np.float32),
                                     gen.standard_normal(20).astype(np.float32))
  np.testing.assert_allclose(cpu_out[0], ref[0], rtol=1e-5, atol=1e-6)  # LLVM may reorder a row's 4 products' sum
  # one call per value of the THREAD axis (a loop where the runtime has one thread), spread over the threads
  calls = thread if thread > 1 and rt.threads > 1 else None
  assert program.info.calls == calls and program.cores == min(rt.threads, calls or 1)

@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.MAX])
def test_reduce_ops_on_ints_and_floats(rt, op):
  for dt in (f32, i32, dtypes.uint8, dtypes.float16):
    r, row = rng(6, 1, AxisType.REDUCE), rng(3, 0)
    lin = lower(end(store(param(0, 3, dt), row, UOp(Ops.REDUCE, (load(param(1, 18, dt), row * 6 + r), r), (op, ()))), row))
    x = (gen.standard_normal(18) * 3).astype(dt.np) if dtypes.is_float(dt) else gen.integers(0, 5, 18).astype(dt.np)
    cpu_out, ref, _ = run_linear(rt, lin, np.zeros(3, dt.np), x)
    tol = 1e-2 if dt is dtypes.float16 else 1e-5  # a float reduction may be reassociated: half sums differ in the last bits
    np.testing.assert_allclose(cpu_out[0], ref[0], rtol=tol, atol=tol, err_msg=f"{op.name} {dt.name}")

@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.MAX])
def test_full_reduction(rt, op):
  # one reduce loop over the whole input and work after it (x2)
  for dt in (f32, i32, dtypes.uint8, dtypes.bool, dtypes.float16):
    r = rng(50, 0, AxisType.REDUCE)
    red = UOp(Ops.REDUCE, (load(param(1, 50, dt), r), r), (op, ()))
    lin = lower(store(param(0, 1, dt), UOp.const(0), red + red))
    x = gen.integers(0, 2, 50) if dt is dtypes.bool else 1 + gen.standard_normal(50) / 10 if dtypes.is_float(dt) else gen.integers(1, 3, 50)
    x = x.astype(dt.np)
    cpu_out, ref, program = run_linear(rt, lin, np.zeros(1, dt.np), x)
    tol = 1e-2 if dt is dtypes.float16 else 1e-5
    np.testing.assert_allclose(cpu_out[0].astype(np.float64), ref[0].astype(np.float64), rtol=tol, err_msg=f"{op.name} {dt.name}")
    assert program.info.calls is None and program.cores == 1

def test_gated_load_never_reads_outside(rt):
  # out[r] = x[r-2] where r >= 2, else -1: the address r-2 is out of bounds where the gate is false
  r = rng(8)
  lin = lower(end(store(param(0, 8, f32), r, load(param(1, 8, f32), r + -2, UOp.const(-1.0, f32), UOp.const(1) < r)), r))
  x = gen.standard_normal(8).astype(np.float32)
  cpu_out, ref, _ = run_linear(rt, lin, np.zeros(8, np.float32), x)
  np.testing.assert_array_equal(cpu_out[0], np.concatenate([[-1, -1], x[:-2]]))
  np.testing.assert_array_equal(cpu_out[0], ref[0])

def test_gated_store_becomes_if_block(rt):
  r = rng(10)
  x = load(param(1, 10, i32), r)
  lin = lower(end(store(param(0, 10, i32), r, x * 2, x < 3), r))
  assert any(u.op is Ops.IF for u in lin.src)
  xs = np.arange(-3, 7, dtype=np.int32)
  cpu_out, ref, _ = run_linear(rt, lin, np.full(10, 99, np.int32), xs)
  np.testing.assert_array_equal(cpu_out[0], np.where(xs < 3, xs * 2, 99))
  np.testing.assert_array_equal(cpu_out[0], ref[0])

def test_loop_carried_dependency_is_not_split(rt):
  # out[r] = out[r-1] + x[r]: the loop reads what it writes, so the optimizer gives it no THREAD axis: it runs in order
  n = 64
  r = rng(n)
  out, x = param(0, n, f32), param(1, n, f32)
  kernel = UOp.sink(end(store(out, r, load(out, r + -1, UOp.const(0.0, f32), UOp.const(0) < r) + load(x, r)), r))
  assert thread_split(kernel, rt.renderer) == []
  # without the read of out it splits (a 63 of 3 threads: 64 is no multiple of 3)
  r63 = rng(63)
  assert thread_split(UOp.sink(end(store(out, r63, load(x, r63) * 2.0), r63)), rt.renderer) == ([] if rt.threads == 1 else
    [Opt(OptOps.SPLIT, 0, (3, AxisType.THREAD, True))])
  assert thread_split(UOp.sink(end(store(out, r, load(x, r) * 2.0), r)), rt.renderer) == []
  xs = np.arange(1, n + 1, dtype=np.float32)
  cpu_out, _, program = run_linear(rt, lower(kernel), np.zeros(n, np.float32), xs)
  np.testing.assert_array_equal(cpu_out[0], np.cumsum(xs))
  assert program.info.calls is None and program.cores == 1

def test_variable_loop_bound(rt):
  n = UOp.variable("n", 0, 8)
  r = rng(n)
  lin = lower(end(store(param(0, 8, i32), r, (r * n).cast(i32)), r))
  for k in (0, 1, 5, 8):
    cpu_out, ref, program = run_linear(rt, lin, np.full(8, -1, np.int32), vals={"n": k})
    assert cpu_out[0].tolist() == ref[0].tolist() == [i * k for i in range(k)] + [-1] * (8 - k)
  assert program.info.variables == ("n",)

def test_reduce_over_empty_range(rt):
  n = UOp.variable("n", 0, 8)
  r = rng(n, 0, AxisType.REDUCE)
  lin = lower(store(param(0, 1, f32), UOp.const(0), UOp(Ops.REDUCE, (load(param(1, 8, f32), r), r), (Ops.ADD, ()))))
  for k in (0, 3):
    cpu_out, ref, _ = run_linear(rt, lin, np.full(1, 7, np.float32), np.ones(8, np.float32), vals={"n": k})
    assert cpu_out[0].tolist() == ref[0].tolist() == [float(k)]

def test_if_block_in_loop(rt):
  r = rng(8)
  out, x = param(0, 8, f32), param(1, 8, f32)
  v = load(x, r)
  block = UOp(Ops.IF, (UOp.const(0.0, f32) < v,))
  nxt = load(x, r + 1, UOp.const(100.0, f32), r < 7)
  body = UOp(Ops.GROUP, (UOp(Ops.STORE, (UOp(Ops.AFTER, (out, block)).index(r), v + nxt)), UOp(Ops.ENDIF, (block,))))
  lin = UOp(Ops.LINEAR, tuple(UOp.sink(end(body, r)).toposort()[:-1]))
  xs = np.array([-1, 2, -3, 4, 5, -6, 7, 8], np.float32)
  cpu_out, ref, _ = run_linear(rt, lin, np.full(8, -9, np.float32), xs)
  np.testing.assert_array_equal(cpu_out[0], np.where(xs > 0, xs + np.append(xs[1:], 100), -9))
  np.testing.assert_array_equal(cpu_out[0], ref[0])

# ---- Tensor programs on the CPU device ----

@pytest.mark.parametrize("axis", [None, 0, 1, 2, (0, 2)])
def test_reductions_over_axes(axis):
  x = gen.standard_normal((5, 6, 7)).astype(np.float32)
  t = Tensor(x, device="CPU")
  np.testing.assert_allclose(t.sum(axis=axis).numpy(), x.sum(axis=axis), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(t.max(axis=axis).numpy(), x.max(axis=axis))
  np.testing.assert_allclose(t.prod(axis=axis).numpy(), x.prod(axis=axis), rtol=1e-4)

def test_max_propagates_nan_and_sum_of_ints():
  x = np.array([1.0, np.nan, 3.0], np.float32)
  assert np.isnan(Tensor(x, device="CPU").max().numpy())
  xi = gen.integers(-1000, 1000, 10001).astype(np.int32)
  assert Tensor(xi, device="CPU").sum().numpy() == xi.sum()

def test_a_product_keeps_its_order():
  # fuzz case uint16-100633: the product of 64 column means of min(x, 1), each a sum times 1/7. Reassociated, LLVM moved
  # the 1/7 out of the product: the sums' product overflowed to inf, (1/7)**64 underflowed to 0, the result was nan.
  # Products are not reassociated
  x = np.random.default_rng(100633).integers(0, 3, (7, 64)).astype(np.uint16)
  want = np.prod(np.minimum(x, 1).astype(np.float64).mean(0))
  assert 0 < want < 1e-3  # a product that fits, of sums whose product (up to 7**64) does not
  np.testing.assert_allclose(Tensor(x, device="CPU").minimum(True).mean(0).prod().numpy(), want, rtol=1e-5)

def test_pad_matmul_and_softmax():
  a, b = gen.standard_normal((33, 17)).astype(np.float32), gen.standard_normal((17, 9)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), a @ b, rtol=1e-4, atol=1e-5)
  np.testing.assert_array_equal(Tensor(a, device="CPU").pad(((1, 2), (3, 0))).numpy(), np.pad(a, ((1, 2), (3, 0))))
  e = np.exp(a - a.max(axis=1, keepdims=True))
  np.testing.assert_allclose(Tensor(a, device="CPU").softmax(axis=1).numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)

def test_zero_size_and_scalar():
  assert Tensor(np.zeros((0, 3), np.float32), device="CPU").sum(axis=0).numpy().tolist() == [0.0, 0.0, 0.0]
  assert (Tensor(2.5, device="CPU") * 2).numpy() == 5.0

def test_big_elementwise_splits_over_threads():
  x = gen.standard_normal(1 << 18).astype(np.float32)
  np.testing.assert_allclose((Tensor(x, device="CPU") * 2 + 1).numpy(), x * 2 + 1, rtol=1e-6)

def test_long_reductions_spread_over_threads():
  # 2**18 elements into one value: 256 partial results split over the threads, then their reduction (with 2 or more cores)
  from tinyspec.engine import realize
  xi, xf = gen.integers(-9, 9, 1 << 18).astype(np.int32), gen.standard_normal(1 << 18).astype(np.float32)
  before = realize.stats["kernels_run"]
  got = Tensor(xi, device="CPU").sum().item(), Tensor(xi, device="CPU").max().item(), Tensor(xf, device="CPU").sum().item()
  assert got[:2] == (xi.sum(), xi.max()) and abs(got[2] - xf.astype(np.float64).sum()) < 1e-2
  assert realize.stats["kernels_run"] - before == (6 if Device["CPU"].renderer.threads > 1 else 3)

def truncs_per_kernel(t: Tensor) -> dict[str, int]:
  """The TRUNCs in each kernel realizing t on the CPU, compiled from empty caches (restored after)."""
  from tinyspec.engine import realize as R
  saved = (dict(R._kernels), dict(R._schedules))
  R._kernels.clear(); R._schedules.clear()
  try:
    t.realize()
    return {k.name: sum(u.op is Ops.TRUNC for u in k.linear.src) for k in R._kernels.values()}
  finally:
    R._kernels.clear(); R._schedules.clear(); R._kernels.update(saved[0]); R._schedules.update(saved[1])

@pytest.mark.parametrize("fn", ["softmax", "sigmoid", "gelu_tanh", "silu"])
def test_exp_in_real_kernels_reduces_once(fn, monkeypatch):
  # exp's fast path on a CPU (no native EXP2): isel's EXP_REDUCED recognises the reduced argument by its shape, so a
  # rewrite on the way that reordered that shape would silently cost each exp a second range reduction. Each kernel with
  # an exp must have fewer TRUNCs than with the rule turned off (transcendental.exp2_of_reduced declining every match).
  import tinyspec.engine.transcendental as T
  x = Tensor(gen.standard_normal((64, 256)).astype(np.float32), device="CPU").realize()
  build = {"softmax": lambda: x.softmax(-1), "sigmoid": lambda: x.sigmoid(), "gelu_tanh": lambda: x.gelu(approximate="tanh"),
           "silu": lambda: x.silu()}[fn]
  fast = truncs_per_kernel(build())
  monkeypatch.setattr(T, "exp2_of_reduced", lambda *a: None)
  general = truncs_per_kernel(build())
  with_exp = [k for k in general if general[k] > 0]
  assert with_exp and all(fast[k] < general[k] for k in with_exp), (fast, general)
