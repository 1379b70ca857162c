"""Seeds 000 and 003 build kernels by hand with the older op names (UOps.DEFINE_GLOBAL, LOOP, ALU, ...). Each of their
examples is rebuilt here with seed 001's ops as tinyspec's kernels use them (docs/spec.md, "The older seeds' op names"),
verified at the "kernel" stage, linearized, checked in seed 003's listing form and run on the PYTHON device."""
import numpy as np
import pytest
from tinyspec.conformance.builders import ZERO, end, f32, i32, load, lower, param, seed003_add, special, store
from tinyspec.device import Buffer, Device
from tinyspec.dtype import AddrSpace
from tinyspec.engine.expand import expand
from tinyspec.engine.linearize import linearize
from tinyspec.uop import AxisType, Ops, UOp, verify
from tinyspec.viz import render_listing

rng = np.random.default_rng(0)


def rows(linear: UOp) -> list[tuple[str, str, list[int], str]]:
  """(op, dtype, source positions, arg) of each line of the listing."""
  out = []
  for line in render_listing(linear).splitlines():
    _, op, dt, rest = line.split(maxsplit=3)
    srcs, arg = rest[1:].split("]", 1)
    out.append((op, dt, [int(s) for s in srcs.split(", ") if s], arg.strip()))
  return out

# what a listing holds besides the work seed 003 shows: shapes, constants, addresses and their arithmetic, no-op GROUPs
PLUMBING = {"CONST", "STACK", "INDEX", "AFTER", "PARAM", "GROUP"}
def work(linear: UOp) -> list[str]:
  return [op for op, dt, _, _ in rows(linear) if op not in PLUMBING and (dt != "dtypes.index" or op in ("RANGE", "SPECIAL"))]

def run(linear: UOp, *arrays: np.ndarray, vals=()) -> list[np.ndarray]:
  """Launch on the PYTHON device the way realize does (render, compile, load), one Buffer per buffer PARAM in slot order;
  every buffer's contents afterwards."""
  rt = Device["PYTHON"]
  prog = rt.program("hand", rt.compiler.compile_cached(rt.renderer.render("hand", linear)))
  params = sorted((u for u in linear.src if u.op is Ops.PARAM and isinstance(u.arg[0], int)), key=lambda u: u.arg[0])
  assert len(params) == len(arrays)
  bufs = [Buffer("PYTHON", a.size, p.arg[1]).copyin(np.ascontiguousarray(a, p.arg[1].np)) for p, a in zip(params, arrays)]
  prog(*(b.handle for b in bufs), vals=vals)
  return [b.numpy() for b in bufs]

# ---- seed 000 ----

def test_const_stored():
  # seed 000: STORE(DEFINE_GLOBAL data0, CONST 0, CONST 10) renders `*(data0+0) = 10;`
  lin = lower(UOp.sink(store(param(0, 1, i32), ZERO, UOp.const(10, i32))))
  assert work(lin) == ["STORE"]
  r = rows(lin)
  (_, _, srcs, _), = [x for x in r if x[0] == "STORE"]
  assert [r[s][0] for s in srcs] == ["INDEX", "CONST"] and r[srcs[1]][3] == "10"
  assert run(lin, np.zeros(1, np.int32))[0].tolist() == [10]

def add_kernel(idx: UOp, n: int, out_dtype=i32) -> UOp: return UOp.sink(seed003_add(n, out_dtype, idx=idx))

def test_two_buffers_added():
  lin = lower(add_kernel(ZERO, 1))
  assert work(lin) == ["LOAD", "LOAD", "ADD", "STORE"]  # seed 003: LOAD, LOAD, ALU ADD, STORE
  r = rows(lin)
  assert [arg for op, _, _, arg in r if op == "PARAM"] == ["(0, dtypes.int32)", "(1, dtypes.int32)", "(2, dtypes.int32)"]  # 3 DEFINE_GLOBALs
  (_, dt, srcs, _), = [x for x in r if x[0] == "ADD"]
  assert dt == "dtypes.int32" and [r[s][0] for s in srcs] == ["LOAD", "LOAD"]
  assert run(lin, np.zeros(1), np.array([1]), np.array([2]))[0].tolist() == [3]

@pytest.mark.parametrize("name", ["gidx0", "lidx0"])
def test_two_buffers_added_per_thread(name):
  # seed 000 indexes by SPECIAL gidx0, seed 003 by lidx0: one thread per element
  a, b = rng.integers(-100, 100, 10), rng.integers(-100, 100, 10)
  lin = lower(add_kernel(special(name, 10), 10))
  assert work(lin) == ["SPECIAL", "LOAD", "LOAD", "ADD", "STORE"]
  r = rows(lin)
  (_, dt, srcs, arg), = [x for x in r if x[0] == "SPECIAL"]
  assert (dt, arg, r[srcs[0]][3]) == ("dtypes.index", repr(name), "10")  # seed 000's arg (0, "gidx0", 10): name in arg, bound in src
  assert run(lin, np.zeros(10), a, b)[0].tolist() == (a + b).tolist()

def test_loop_stores():
  # seed 000's LOOP(CONST 0, CONST 10) ... ENDLOOP is RANGE(10) ... END: a RANGE counts from 0
  r = UOp.range(10, 0)
  lin = lower(UOp.sink(end(store(param(0, 10, i32), r, (r * r).cast(i32)), r)))
  assert work(lin) == ["RANGE", "CAST", "STORE", "END"]
  assert run(lin, np.zeros(10))[0].tolist() == [i * i for i in range(10)]

def test_loop_adds_two_buffers():
  # seed 003's E_ kernel with the thread index replaced by a loop
  r = UOp.range(7, 0)
  a, b = rng.integers(-9, 9, 7), rng.integers(-9, 9, 7)
  lin = lower(UOp.sink(end(add_kernel(r, 7).src[0], r)))
  assert work(lin) == ["RANGE", "LOAD", "LOAD", "ADD", "STORE", "END"]
  assert run(lin, np.zeros(7), a, b)[0].tolist() == (a + b).tolist()

def test_loop_sums():
  # summing in a loop: the REDUCE becomes a register (seed 004's DEFINE_ACC) set before the loop and read after it
  r = UOp.range(10, 0, AxisType.REDUCE)
  x = rng.standard_normal(10).astype(np.float32)
  lin = lower(UOp.sink(store(param(0, 1, f32), ZERO, UOp(Ops.REDUCE, (load(param(1, 10, f32), r), r), (Ops.ADD, ())))))
  assert work(lin) == ["BUFFER", "STORE", "RANGE", "LOAD", "LOAD", "ADD", "STORE", "END", "LOAD", "STORE"]
  (arg,) = [u.arg for u in lin.src if u.op is Ops.BUFFER]
  assert arg[3] is AddrSpace.REG
  np.testing.assert_allclose(run(lin, np.zeros(1), x)[0], [x.sum()], rtol=1e-5)

# ---- seed 003 ----

def test_cast():
  # seed 003: c = (a + b).cast(float32) over lidx0: ... ALU ADD, CAST float, STORE into a float buffer
  lin = lower(add_kernel(special("lidx0", 2), 2, f32))
  assert work(lin) == ["SPECIAL", "LOAD", "LOAD", "ADD", "CAST", "STORE"]
  assert [dt for op, dt, _, _ in rows(lin) if op in ("ADD", "CAST")] == ["dtypes.int32", "dtypes.float32"]
  out = run(lin, np.zeros(2), np.array([1, 3]), np.array([4, 3]))[0]
  assert out.dtype == np.float32 and out.tolist() == [5.0, 6.0]

# ---- beyond the seeds: gates, reductions in loops, expansion ----

def relu_store(idx: UOp, n: int) -> UOp:
  """out[idx] = x[idx] only where x[idx] > 0: a STORE with a gate."""
  x = load(param(1, n, f32), idx)
  return store(param(0, n, f32), idx, x, UOp.const(0.0, f32) < x)

def test_gated_store_in_explicit_if():
  # a gated STORE spelled as a block: IF(gate); STORE into the buffer AFTER the IF; ENDIF
  g = special("gidx0", 8)
  st = relu_store(g, 8)
  block = UOp(Ops.IF, (st.src[2],))
  inside = UOp(Ops.STORE, (UOp(Ops.AFTER, (st.src[0].src[0], block)).index(g), st.src[1]))
  lin = lower(UOp.sink(inside, UOp(Ops.ENDIF, (block,))))
  assert work(lin) == ["SPECIAL", "LOAD", "CMPLT", "IF", "STORE", "ENDIF"]
  x = np.arange(8, dtype=np.float32) - 4
  assert run(lin, np.full(8, -9.0), x)[0].tolist() == [-9.0] * 5 + [1.0, 2.0, 3.0]

@pytest.mark.parametrize("in_loop", [False, True])
def test_gated_store(in_loop):
  idx = UOp.range(8, 0) if in_loop else special("gidx0", 8)
  lin = lower(UOp.sink(end(relu_store(idx, 8), idx) if in_loop else relu_store(idx, 8)))
  assert work(lin)[-4:] == ["CMPLT", "IF", "STORE", "ENDIF"] if not in_loop else ["IF", "STORE", "ENDIF", "END"]
  x = np.arange(8, dtype=np.float32) - 4
  assert run(lin, np.full(8, -9.0), x)[0].tolist() == [-9.0] * 5 + [1.0, 2.0, 3.0]

def matmul(M: int, K: int, N: int, types=(AxisType.LOOP, AxisType.LOOP, AxisType.REDUCE)) -> UOp:
  """C[i, j] = sum_k A[i, k] * B[k, j]: a REDUCE over k inside the loops over i and j."""
  i, j, k = (UOp.range(n, idx, t) for idx, (n, t) in enumerate(zip((M, N, K), types)))
  c, a, b = param(0, M * N, f32), param(1, M * K, f32), param(2, K * N, f32)
  acc = UOp(Ops.REDUCE, (load(a, i * K + k) * load(b, k * N + j), k), (Ops.ADD, ()))
  return UOp.sink(end(store(c, i * N + j, acc), j, i))

def test_reduce_in_loop():
  A, B = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
  lin = lower(matmul(3, 4, 5))
  assert work(lin) == ["BUFFER", "RANGE", "RANGE", "STORE", "RANGE", "LOAD", "LOAD", "LOAD", "MUL", "ADD", "STORE", "END",
                       "LOAD", "STORE", "END", "END"]  # the accumulator is reset inside the j loop, once per output
  np.testing.assert_allclose(run(lin, np.zeros(15), A, B)[0].reshape(3, 5), A @ B, rtol=1e-5)

@pytest.mark.parametrize("kind", [AxisType.UPCAST, AxisType.UNROLL])
def test_expanded_range_matches_loop(kind):
  x = rng.standard_normal(4).astype(np.float32)
  def kernel(t):
    r = UOp.range(4, 0, t)
    if kind is AxisType.UPCAST: return UOp.sink(end(store(param(0, 4, f32), r, load(param(1, 4, f32), r) * 2.0), r))
    return UOp.sink(store(param(0, 1, f32), ZERO, UOp(Ops.REDUCE, (load(param(1, 4, f32), r), r), (Ops.ADD, ()))))
  plain = lower(kernel(AxisType.LOOP if kind is AxisType.UPCAST else AxisType.REDUCE))
  expanded = expand(kernel(kind))
  verify(expanded, "kernel")
  lin = linearize(expanded)
  assert "RANGE" not in work(lin) and "BUFFER" not in work(lin)  # no loop and, for UNROLL, no accumulator: a chain of ADDs
  if kind is AxisType.UPCAST:  # the four copies load and store their consecutive elements as one vector each
    assert [u.shape for u in lin.src if u.op in (Ops.LOAD, Ops.STORE)] == [(4,), ()] and work(lin).count("MUL") == 4
    assert next(u for u in lin.src if u.op is Ops.STORE).src[1].shape == (4,)
  else: assert work(lin).count("ADD") == 3 and next(u for u in lin.src if u.op is Ops.LOAD).shape == (4,)
  size = 4 if kind is AxisType.UPCAST else 1
  np.testing.assert_array_equal(run(lin, np.zeros(size), x)[0], run(plain, np.zeros(size), x)[0])

def test_expanded_matmul_matches_loop():
  A, B = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
  lin = linearize(expand(matmul(3, 4, 2, (AxisType.LOOP, AxisType.UPCAST, AxisType.UNROLL))))
  # only i is left a loop; j's two outputs are consecutive, stored as one vector of 2, and k's 4 values of A one vector load
  assert work(lin).count("RANGE") == 1 and [u.src[1].shape for u in lin.src if u.op is Ops.STORE] == [(2,)]
  assert sorted(u.shape for u in lin.src if u.op is Ops.LOAD) == [(2,)] * 4 + [(4,)]  # a row of A; B's 2 columns per row
  want = run(lower(matmul(3, 4, 2)), np.zeros(6), A, B)[0]
  np.testing.assert_allclose(run(lin, np.zeros(6), A, B)[0], want, rtol=1e-6)
  np.testing.assert_allclose(want.reshape(3, 2), A @ B, rtol=1e-5)
