"""The PYTHON device's interpreter on hand-built kernels: GPU-style launches over SPECIAL thread indices, workgroup (LOCAL)
memory with BARRIERs, loops that must run one iteration at a time and loops that may run at once, bounds checks, gated
loads, IF blocks, dtypes and variables."""
import numpy as np
import pytest
from tinyspec.conformance.builders import ZERO, after, barrier, end, f32, i32, load, local, lower, param, special, store, workgroup_tree_sum
from tinyspec.device import Buffer, Device
from tinyspec.dtype import AddrSpace, bf16_round, bf16_to_bits, dtypes
from tinyspec.interpreter.run import Interpreter
from tinyspec.uop import AxisType, Ops, UOp, verify

rng = np.random.default_rng(1)


def run(linear: UOp, *arrays: np.ndarray, vals=None, name="kernel") -> list[np.ndarray]:
  """Run on copies of `arrays` (one per buffer PARAM, already in its dtype); the copies afterwards."""
  bufs = [np.array(a) for a in arrays]
  Interpreter(linear, name)(bufs, vals)
  return bufs

def loop_positions(linear: UOp) -> set[int]: return {i for i, u in enumerate(linear.src) if u.op is Ops.RANGE}

# ---- GPU-style launches ----

@pytest.mark.parametrize("name", ["gidx0", "lidx0"])
def test_special_1d(name):
  x = rng.standard_normal(12).astype(np.float32)
  t = special(name, 12)
  lin = lower(store(param(0, 12, f32), t, load(param(1, 12, f32), t) * 2.0 + 1.0))
  np.testing.assert_allclose(run(lin, np.zeros(12, np.float32), x)[0], x * 2 + 1, rtol=1e-6)

def test_special_2d_grid():
  # a transpose, one thread per element of a 3x4 grid: out[g1, g0] = x[g0, g1]
  g0, g1 = special("gidx0", 4), special("gidx1", 3)
  lin = lower(store(param(0, 12, i32), g1 * 4 + g0, load(param(1, 12, i32), g0 * 3 + g1)))
  x = np.arange(12, dtype=np.int32)
  np.testing.assert_array_equal(run(lin, np.zeros(12, np.int32), x)[0].reshape(3, 4), x.reshape(4, 3).T)

def test_special_workgroups_of_2d_lanes():
  # 2 workgroups of 4x2 lanes; each lane writes its global id
  g, l0, l1 = special("gidx0", 2), special("lidx0", 4), special("lidx1", 2)
  gid = g * 8 + l1 * 4 + l0
  lin = lower(store(param(0, 16, i32), gid, gid.cast(i32)))
  np.testing.assert_array_equal(run(lin, np.full(16, -1, np.int32))[0], np.arange(16))

def test_thread_loops_over_its_row():
  # each thread (gidx0) sums its own row with a REDUCE: the accumulator is per thread
  x = rng.standard_normal((5, 6)).astype(np.float32)
  g, k = special("gidx0", 5), UOp.range(6, 0, AxisType.REDUCE)
  lin = lower(store(param(0, 5, f32), g, UOp(Ops.REDUCE, (load(param(1, 30, f32), g * 6 + k), k), (Ops.ADD, ()))))
  np.testing.assert_allclose(run(lin, np.zeros(5, np.float32), x.ravel())[0], x.sum(1), rtol=1e-5)

# ---- workgroup memory ----

G, L = 3, 8

def test_local_reverse_in_workgroup():
  # each workgroup loads its chunk into LOCAL memory; after the BARRIER lane i reads what lane L-1-i wrote
  g, l = special("gidx0", G), special("lidx0", L)
  lb = local(L)
  filled = store(lb, l, load(param(1, G * L, f32), g * L + l))
  lin = lower(store(param(0, G * L, f32), g * L + l, load(after(lb, barrier(filled)), l * -1 + (L - 1))))
  assert [u.op for u in lin.src].count(Ops.BARRIER) == 1
  x = np.arange(G * L, dtype=np.float32)
  np.testing.assert_array_equal(run(lin, np.zeros(G * L, np.float32), x)[0].reshape(G, L), x.reshape(G, L)[:, ::-1])

def test_local_tree_sum_of_workgroup():
  # halving steps: lane i adds lane i+s (a gated load, 0 past the end); a BARRIER between every read and every write
  lin = lower(workgroup_tree_sum(G, L))  # every lane writes the same sum
  x = rng.standard_normal(G * L).astype(np.float32)
  np.testing.assert_allclose(run(lin, np.zeros(G, np.float32), x)[0], x.reshape(G, L).sum(1), rtol=1e-5)

def test_local_tile_transpose_2d_lanes():
  # a 4x4 tile per workgroup through LOCAL memory: lanes (l0, l1) write [l1, l0] and read [l0, l1]
  g, l0, l1 = special("gidx0", 2), special("lidx0", 4), special("lidx1", 4)
  lb = local(16, i32)
  filled = store(lb, l1 * 4 + l0, load(param(1, 32, i32), g * 16 + l1 * 4 + l0))
  lin = lower(store(param(0, 32, i32), g * 16 + l1 * 4 + l0, load(after(lb, barrier(filled)), l0 * 4 + l1)))
  x = np.arange(32, dtype=np.int32)
  np.testing.assert_array_equal(run(lin, np.zeros(32, np.int32), x)[0].reshape(2, 4, 4), x.reshape(2, 4, 4).transpose(0, 2, 1))

# ---- sequential and vectorised loops ----

def running_total(n: int) -> UOp:
  """out[r] = (out[n] += x[r]): the running total lives at one address, so iteration r needs iteration r-1's store."""
  out, x = param(0, n + 1, f32), param(1, n, f32)
  r = UOp.range(n, 0)
  total = load(after(out, r), UOp.const(n)) + load(x, r)  # AFTER ties the read to the loop: its address does not move with r
  return lower(end(UOp(Ops.GROUP, (store(out, UOp.const(n), total), store(out, r, total))), r))

def prefix_from_previous(n: int) -> UOp:
  """out[r] = out[r-1] + x[r], out[-1] read as 0 through a gated load."""
  out, x = param(0, n, f32), param(1, n, f32)
  r = UOp.range(n, 0)
  prev = load(out, r + -1, UOp.const(0.0, f32), UOp.const(0) < r)
  return lower(end(store(out, r, prev + load(x, r)), r))

def test_loop_carried_dependency_runs_sequentially():
  x = np.arange(1, 9, dtype=np.float32)
  lin = running_total(8)
  assert Interpreter(lin).sequential == loop_positions(lin)
  np.testing.assert_array_equal(run(lin, np.zeros(9, np.float32), x)[0], np.append(np.cumsum(x), x.sum()))
  lin = prefix_from_previous(8)
  assert Interpreter(lin).sequential == loop_positions(lin)
  np.testing.assert_array_equal(run(lin, np.zeros(8, np.float32), x)[0], np.cumsum(x))

def scaled() -> UOp:
  r = UOp.range(8, 0)
  return lower(end(store(param(0, 8, f32), r, load(param(1, 8, f32), r) * 3.0), r))

def matmul() -> UOp:
  i, j, k = UOp.range(3, 0), UOp.range(5, 1), UOp.range(4, 2, AxisType.REDUCE)
  acc = UOp(Ops.REDUCE, (load(param(1, 12, f32), i * 4 + k) * load(param(2, 20, f32), k * 5 + j), k), (Ops.ADD, ()))
  return lower(end(store(param(0, 15, f32), i * 5 + j, acc), j, i))

def shifted() -> UOp:
  """out[r] = x[r-2], or -1 where r < 2."""
  r = UOp.range(8, 0)
  return lower(end(store(param(0, 8, f32), r, load(param(1, 8, f32), r + -2, UOp.const(-1.0, f32), UOp.const(1) < r)), r))

def test_independent_loops_run_vectorised():
  assert Interpreter(scaled()).sequential == set()
  assert Interpreter(matmul()).sequential == set()  # an accumulation is a reduction over the loop's axis, not a dependency

KERNELS = {  # name: (kernel, sizes of its buffers)
  "scaled": (scaled, (8, 8)), "matmul": (matmul, (15, 12, 20)), "shifted": (shifted, (8, 8)), "running_total": (lambda: running_total(6), (7, 6)),
}

@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_sequential_and_vectorised_agree(kernel):
  make, sizes = KERNELS[kernel]
  lin, arrays = make(), [rng.standard_normal(n).astype(np.float32) for n in sizes]
  fast = run(lin, *arrays)
  one_at_a_time = Interpreter(lin)
  one_at_a_time.sequential = loop_positions(lin)  # every loop, one iteration at a time: the program read literally
  slow = [np.array(a) for a in arrays]
  one_at_a_time(slow)
  for a, b in zip(fast, slow): np.testing.assert_allclose(a, b, rtol=1e-6)

def test_loop_carried_dependency_through_local_memory():
  # lb[r+1] = lb[r] + x[r] in LOCAL memory: a prefix sum, so the loop must run one iteration at a time
  n = 6
  lb, x = local(n + 1), param(1, n, f32)
  ready = after(lb, store(lb, ZERO, UOp.const(0.0, f32)))
  r, r2 = UOp.range(n, 0), UOp.range(n, 1)
  filled = end(store(ready, r + 1, load(ready, r) + load(x, r)), r)
  lin = lower(end(store(param(0, n, f32), r2, load(after(lb, barrier(filled)), r2 + 1)), r2))
  assert Interpreter(lin).sequential == {lin.src.index(r)}  # lb is read and written in loop r
  xs = np.arange(1, n + 1, dtype=np.float32)
  np.testing.assert_array_equal(run(lin, np.zeros(n, np.float32), xs)[0], np.cumsum(xs))

def test_register_keeps_last_write_of_loop():
  # a register written (not accumulated) in a loop holds the last iteration's value after it
  reg = UOp(Ops.BUFFER, (UOp.vec((1,)),), (0, f32, None, AddrSpace.REG))
  r, k = UOp.range(5, 0), UOp.range(3, 1, AxisType.REDUCE)
  last = end(store(reg, ZERO, load(param(1, 5, f32), r)), r)
  total = UOp(Ops.REDUCE, (load(after(reg, last), ZERO) * load(param(2, 3, f32), k), k), (Ops.ADD, ()))
  lin = lower(store(param(0, 1, f32), ZERO, total))
  pos = {u: i for i, u in enumerate(lin.src)}
  assert pos[last] < pos[k]  # loop r runs once, before the reduction's loop, not inside it
  x, y = np.arange(10, 15, dtype=np.float32), np.ones(3, np.float32)
  assert run(lin, np.zeros(1, np.float32), x, y)[0].tolist() == [14.0 * 3]

def test_second_loop_after_first():
  # the loop the second loop waits for (through AFTER) runs once, before it: its stores must not repeat
  r, r2 = UOp.range(4, 0), UOp.range(4, 1)
  x = param(1, 4, f32)
  bumped = end(store(x, r, load(x, r) + 1.0), r)
  lin = lower(end(store(param(0, 4, f32), r2, load(after(x, bumped), r2)), r2))
  pos = {u: i for i, u in enumerate(lin.src)}
  assert pos[bumped] < pos[r2]  # r is closed before r2 opens
  out, xs = run(lin, np.zeros(4, np.float32), np.zeros(4, np.float32))
  assert out.tolist() == xs.tolist() == [1.0] * 4

def test_register_and_accumulator_are_apart():
  # linearize numbers its accumulators after the kernel's own REG buffers, so they never hash-cons into one
  reg = UOp(Ops.BUFFER, (UOp.vec((1,)),), (0, f32, None, AddrSpace.REG))
  k = UOp.range(3, 0, AxisType.REDUCE)
  kept = store(reg, ZERO, UOp.const(100.0, f32))
  total = UOp(Ops.REDUCE, (load(param(1, 3, f32), k), k), (Ops.ADD, ()))
  lin = lower(store(param(0, 1, f32), ZERO, total + load(after(reg, kept), ZERO)))
  assert run(lin, np.zeros(1, np.float32), np.ones(3, np.float32))[0].tolist() == [103.0]

# ---- bounds, gates, IF blocks ----

def test_out_of_bounds_load_names_kernel():
  r = UOp.range(4, 0)
  lin = lower(end(store(param(0, 4, f32), r, load(param(1, 4, f32), r + 1)), r))
  with pytest.raises(IndexError, match=r"^shift: buffer 1: index 4 out of bounds for 4 elements$"):
    run(lin, np.zeros(4, np.float32), np.zeros(4, np.float32), name="shift")
  lin = lower(end(store(param(0, 4, f32), r, load(param(1, 4, f32), r + -1)), r))
  with pytest.raises(IndexError, match=r"^back: buffer 1: index -1 out of bounds"):
    run(lin, np.zeros(4, np.float32), np.zeros(4, np.float32), name="back")

def test_out_of_bounds_store_names_kernel():
  g = special("gidx0", 5)
  lin = lower(store(param(0, 4, i32), g, g.cast(i32)))
  with pytest.raises(IndexError, match=r"^wide: buffer 0: index 4 out of bounds"):
    run(lin, np.zeros(4, np.int32), name="wide")

def test_out_of_bounds_on_device_names_program():
  rt = Device["PYTHON"]
  r = UOp.range(4, 0)
  lin = lower(end(store(param(0, 4, f32), r, load(param(1, 3, f32), r)), r))
  prog = rt.program("E_4", rt.compiler.compile_cached(rt.renderer.render("E_4", lin)))
  bufs = [Buffer("PYTHON", 4, f32).allocate(), Buffer("PYTHON", 3, f32).allocate()]
  with pytest.raises(IndexError, match=r"^E_4: buffer 1: index 3 out of bounds for 3 elements$"): prog(*(b.handle for b in bufs))

def test_out_of_bounds_local_load():
  l = special("lidx0", 4)
  lb = local(4)
  lin = lower(store(param(0, 4, f32), l, load(after(lb, barrier(store(lb, l, UOp.const(1.0, f32)))), l + 1)))
  with pytest.raises(IndexError, match=r"^lk: local buffer 0: index 4 out of bounds for 4 elements$"): run(lin, np.zeros(4, np.float32), name="lk")

@pytest.mark.parametrize("offset", [-1, 1])
def test_out_of_bounds_local_store(offset):
  l = special("lidx0", 4)
  lb = local(4)
  lin = lower(store(param(0, 4, f32), l, load(after(lb, barrier(store(lb, l + offset, UOp.const(1.0, f32)))), l)))
  with pytest.raises(IndexError, match=rf"^ls: local buffer 0: index {-1 if offset < 0 else 4} out of bounds for 4 elements$"):
    run(lin, np.zeros(4, np.float32), name="ls")

def test_gated_load_gives_alt():
  # out[r] = x[r-2] for r >= 2, else -1: the gated-off lanes never touch the (out of bounds) address
  x = rng.standard_normal(8).astype(np.float32)
  np.testing.assert_array_equal(run(shifted(), np.zeros(8, np.float32), x)[0], np.concatenate([[-1, -1], x[:-2]]))

def test_gated_load_int_alt_per_lane():
  # the alt value may vary per lane: out[g] = x[g] at even g, else -g
  g = special("gidx0", 6)
  lin = lower(store(param(0, 6, i32), g, load(param(1, 6, i32), g, (g * -1).cast(i32), (g % 2).ne(1))))
  assert run(lin, np.zeros(6, np.int32), np.arange(10, 16, dtype=np.int32))[0].tolist() == [10, -1, 12, -3, 14, -5]

def test_if_block_in_loop():
  # a LINEAR assembled by hand with an IF inside a loop; a gated load inside the IF is masked by both
  r = UOp.range(8, 0)
  out, x = param(0, 8, f32), param(1, 8, f32)
  v = load(x, r)
  block = UOp(Ops.IF, (UOp.const(0.0, f32) < v,))
  nxt = load(x, r + 1, UOp.const(100.0, f32), r < 7)
  body = UOp(Ops.GROUP, (UOp(Ops.STORE, (after(out, block).index(r), v + nxt)), UOp(Ops.ENDIF, (block,))))
  lin = UOp(Ops.LINEAR, tuple(UOp.sink(end(body, r)).toposort()[:-1]))
  verify(lin, "linear")
  xs = np.array([-1, 2, -3, 4, 5, -6, 7, 8], np.float32)
  want = np.where(xs > 0, xs + np.append(xs[1:], 100), -9)
  np.testing.assert_array_equal(run(lin, np.full(8, -9, np.float32), xs)[0], want)

# ---- dtypes ----

def binary_loop(dtype, out_dtype, fn, n=6):
  r = UOp.range(n, 0)
  return lower(end(store(param(0, n, out_dtype), r, fn(load(param(1, n, dtype), r), load(param(2, n, dtype), r))), r))

@pytest.mark.parametrize("dtype, fn, ref", [
  (dtypes.int8, lambda a, b: a + b, lambda a, b: (a.astype(int) + b + 128) % 256 - 128),   # wraps around
  (dtypes.uint8, lambda a, b: a * b, lambda a, b: (a.astype(int) * b) % 256),
  (i32, lambda a, b: a // b, lambda a, b: np.floor_divide(a, b)),                           # floors, as Python does
  (i32, lambda a, b: a % b, lambda a, b: np.mod(a, b)),
  (dtypes.float16, lambda a, b: a * b + a, lambda a, b: a * b + a),                          # rounded to half after each op
])
def test_int_and_half_arithmetic(dtype, fn, ref):
  npdt = dtype.np
  if dtypes.is_float(dtype): a, b = (rng.standard_normal(6) * 100).astype(npdt), rng.standard_normal(6).astype(npdt)
  else:
    info = np.iinfo(npdt)
    a, b = rng.integers(info.min, info.max, 6).astype(npdt), rng.integers(1, info.max, 6).astype(npdt)
    if info.min < 0: b[::2] *= -1
  out = run(binary_loop(dtype, dtype, fn), np.zeros(6, npdt), a, b)[0]
  assert out.dtype == npdt
  np.testing.assert_array_equal(out, np.asarray(ref(a, b)).astype(npdt))

def test_bool_buffers():
  a, b = np.array([1, 5, 3, 3, -2, 0], np.int32), np.array([2, 4, 3, 1, -1, 0], np.int32)
  lt = run(binary_loop(i32, dtypes.bool, lambda x, y: x < y), np.zeros(6, bool), a, b)[0]
  assert lt.dtype == np.bool_ and lt.tolist() == (a < b).tolist()
  p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
  for fn, want in ((lambda x, y: x & y, p & q), (lambda x, y: x | y, p | q), (lambda x, y: x.ne(y), p ^ q), (lambda x, y: x.where(y, False), p & q)):
    assert run(binary_loop(dtypes.bool, dtypes.bool, fn, 4), np.zeros(4, bool), p, q)[0].tolist() == want.tolist()

def test_casts_and_bitcast():
  x = np.array([1.5, -1.5, 2.99, -0.5, 1e9, 0.0], np.float32)
  g = special("gidx0", 6)
  v = load(param(1, 6, f32), g)
  lin = lower(store(param(0, 6, i32), g, v.cast(i32)), store(param(2, 6, i32), g, v.bitcast(i32)),
              store(param(3, 6, dtypes.float16), g, v.cast(dtypes.float16)))
  out, _, bits, half = run(lin, np.zeros(6, np.int32), x, np.zeros(6, np.int32), np.zeros(6, np.float16))
  assert out.tolist() == [1, -1, 2, 0, 1000000000, 0]  # toward zero
  np.testing.assert_array_equal(bits, x.view(np.int32))
  with np.errstate(over="ignore"): np.testing.assert_array_equal(half, x.astype(np.float16))  # 1e9 is inf in half

# ---- bfloat16: computed in float32, rounded to nearest even after every op; its buffers hold the raw 16 bits ----

bf16 = dtypes.bfloat16
def bits(x) -> np.ndarray: return bf16_to_bits(bf16_round(np.asarray(x, np.float32)))  # values as the bfloat16 bits a buffer holds

def test_bfloat16_rounds_after_every_op():
  a, b = (rng.standard_normal(6) * 100).astype(np.float32), rng.standard_normal(6).astype(np.float32)
  a[0], b[0] = 1 + 2**-7, 1 - 2**-8  # the product, 1 + 2**-8 - 2**-15, rounds to 1; then 2 + 2**-7 is a tie, and goes to 2
  out = run(binary_loop(bf16, bf16, lambda x, y: x * y + x), np.zeros(6, np.uint16), bits(a), bits(b))[0]
  fa, fb = bf16_round(a), bf16_round(b)
  assert out.dtype == np.uint16 and out[0] == bits(2.0)  # (rounded once, a * b + a would be 2 + 2**-6)
  np.testing.assert_array_equal(out, bits(bf16_round(fa * fb) + fa))  # the product rounded, then the sum
  # ties go to the even neighbour: 1 + 2**-8 is halfway between 1 and 1 + 2**-7, 257 between 256 and 258
  one, tie = np.array([1, -1, 256, 258, 1, 2.0**-133], np.float32), np.array([2**-8, -2**-8, 1, 1, 3 * 2**-8, 2.0**-133], np.float32)
  got = run(binary_loop(bf16, bf16, lambda x, y: x + y), np.zeros(6, np.uint16), bits(one), bits(tie))[0]
  np.testing.assert_array_equal(got, bits([1, -1, 256, 260, 1 + 2**-6, 2.0**-132]))

def test_bfloat16_casts():
  g = special("gidx0", 7)
  f = load(param(1, 7, f32), g)
  h = f.cast(bf16)
  lin = lower(store(param(0, 7, bf16), g, h), store(param(2, 7, f32), g, h.cast(f32)), store(param(3, 7, i32), g, h.cast(i32)),
              store(param(4, 7, dtypes.float16), g, h.cast(dtypes.float16)), store(param(5, 7, bf16), g, load(param(6, 7, i32), g).cast(bf16)),
              store(param(7, 7, bf16), g, load(param(8, 7, dtypes.float64), g).cast(bf16)))
  x = np.array([1 + 2**-8, 1 + 2**-8 + 2**-23, -2.5e-41, 3.4e38, -np.inf, np.nan, 65536 * 3 / 2], np.float32)
  big = np.array([2**25 + 2**17 + 1, 2**24 + 1, -7, 2**31 - 1, 0, 1, -2**31], np.int32)
  d = np.array([1 + 2**-8 + 2**-30, 1 + 2**-8, -3.0, 1e300, 1e-300, -0.0, np.nan])
  out, _, wide, ints, half, from_int, _, from_double, _ = run(lin, np.zeros(7, np.uint16), x, np.zeros(7, np.float32), np.zeros(7, np.int32),
                                                               np.zeros(7, np.float16), np.zeros(7, np.uint16), big, np.zeros(7, np.uint16), d)
  np.testing.assert_array_equal(out, [0x3F80, 0x3F81, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x47C0])  # ties to even, -0, inf, nan
  np.testing.assert_array_equal(wide, [1, 1 + 2**-7, -0.0, np.inf, -np.inf, np.nan, 98304])  # bfloat16 -> float32 is exact
  assert ints.tolist() == [1, 1, 0, ints[3], ints[4], 0, 98304] and half.tolist()[:2] == [1, 1.0078125] and half[6] == np.inf
  # ints through float32: 2**25 + 2**17 + 1 becomes 2**25 + 2**17, a tie that goes down (rounding once would go up)
  np.testing.assert_array_equal(from_int, bits([2**25, 2**24, -7, 2**31, 0, 1, -2**31]))
  # a float64 is rounded once: 1 + 2**-8 + 2**-30 is above the tie (through float32 it would be on it)
  np.testing.assert_array_equal(from_double, [0x3F81, 0x3F80, 0xC040, 0x7F80, 0x0000, 0x8000, 0x7FC0])

def test_bfloat16_bitcasts_keep_every_bit():
  raw = np.array([0x3F80, 0x8000, 0x7F81, 0xFFC1, 0x0001, 0x7F7F], np.uint16)  # 1, -0, a signalling and a negative nan, tiny, max
  g = special("gidx0", 6)
  v = load(param(1, 6, dtypes.int16), g).bitcast(bf16)
  h = load(param(5, 6, dtypes.float16), g).bitcast(bf16)
  lin = lower(store(param(0, 6, bf16), g, v), store(param(2, 6, dtypes.uint16), g, v.bitcast(dtypes.uint16)),
              store(param(3, 6, f32), g, v.cast(f32)), store(param(4, 6, dtypes.int16), g, h.bitcast(dtypes.int16)))
  halves = np.array([1.0, -2.0, 0.5, np.inf, 65504.0, -0.0], np.float16)
  out, _, back, wide, from_half, _ = run(lin, np.zeros(6, np.uint16), raw.view(np.int16), np.zeros(6, np.uint16), np.zeros(6, np.float32),
                                         np.zeros(6, np.int16), halves)
  np.testing.assert_array_equal(out, raw)
  np.testing.assert_array_equal(back, raw)
  np.testing.assert_array_equal(wide.view(np.uint32), raw.astype(np.uint32) << 16)
  np.testing.assert_array_equal(from_half, halves.view(np.int16))

def test_bfloat16_sum_rounds_each_step_in_order():
  # 1 + 2**-8 rounds back to 1 every time: in order the sum stays 1 (summing first and rounding once would give 1 + 2**-6)
  r = UOp.range(5, 0, AxisType.REDUCE)
  for op, want in ((Ops.ADD, 1.0), (Ops.MAX, 1.0)):
    lin = lower(store(param(0, 1, bf16), ZERO, UOp(Ops.REDUCE, (load(param(1, 5, bf16), r), r), (op, ()))))
    assert loop_positions(lin) <= Interpreter(lin).sequential if op is Ops.ADD else not Interpreter(lin).sequential  # max is exact in any order
    np.testing.assert_array_equal(run(lin, np.zeros(1, np.uint16), bits([1, 2**-8, 2**-8, 2**-8, 2**-8]))[0], bits([want]))

# ---- variables ----

def test_variable_loop_bound():
  n = UOp.variable("n", 0, 8)
  r = UOp.range(n, 0)
  lin = lower(end(store(param(0, 8, i32), r, (r * n).cast(i32)), r))
  for k in (0, 1, 5, 8):
    assert run(lin, np.full(8, -1, np.int32), vals={"n": k})[0].tolist() == [i * k for i in range(k)] + [-1] * (8 - k)

def test_variable_on_device():
  rt = Device["PYTHON"]
  n = UOp.variable("n", 1, 8)
  r = UOp.range(n, 0, AxisType.REDUCE)
  lin = lower(store(param(0, 1, f32), ZERO, UOp(Ops.REDUCE, (load(param(1, 8, f32), r), r), (Ops.ADD, ()))))
  prog = rt.program("r_n", rt.compiler.compile_cached(rt.renderer.render("r_n", lin)))
  out, x = Buffer("PYTHON", 1, f32).allocate(), Buffer("PYTHON", 8, f32).copyin(np.arange(8, dtype=np.float32))
  for k in (1, 3, 8):
    prog(out.handle, x.handle, vals=(k,))
    assert out.numpy().tolist() == [sum(range(k))]

def test_reduce_over_empty_range():
  n = UOp.variable("n", 0, 8)
  r = UOp.range(n, 0, AxisType.REDUCE)
  lin = lower(store(param(0, 1, f32), ZERO, UOp(Ops.REDUCE, (load(param(1, 8, f32), r), r), (Ops.ADD, ()))))
  assert run(lin, np.full(1, 7, np.float32), np.ones(8, np.float32), vals={"n": 0})[0].tolist() == [0.0]
