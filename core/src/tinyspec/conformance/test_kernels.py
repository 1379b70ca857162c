"""Hand-built kernels run straight through the device's renderer, compiler and program, as the pipeline's last stages
run them: a loop with a variable bound, and (where the device has them) grids of workgroups over SPECIAL indices and
workgroup-shared memory with barriers. The launch sizes come from the SPECIALs: gidx<i> sizes the grid, lidx<i> the
workgroup."""
import numpy as np

from tinyspec.conformance.builders import ZERO, after, barrier, f32, i32, load, local, param, special, store, workgroup_tree_sum
from tinyspec.device import Buffer, Device
from tinyspec.engine.expand import expand
from tinyspec.engine.isel import devectorize, isel
from tinyspec.engine.linearize import linearize
from tinyspec.engine.lower import launch_dims
from tinyspec.uop import AxisType, Ops, UOp, verify


def launch(dev: str, root: UOp, *arrays: np.ndarray, vals: tuple[int, ...] = ()) -> list[np.ndarray]:
  """Lower a kernel (a STORE or SINK) for `dev` as realize does (expand, isel for its renderer, linearize), render,
  compile and load it, run it on copies of `arrays` (one per buffer PARAM, in slot order), and return every buffer."""
  rt = Device[dev]
  sink = root if root.op is Ops.SINK else UOp.sink(root)
  verify(sink, "kernel")
  linear = linearize(isel(devectorize(expand(sink), rt.renderer), rt.renderer.native))
  prog = rt.program("hand", rt.compiler.compile_cached(rt.renderer.render("hand", linear)))
  params = sorted((u for u in linear.src if u.op is Ops.PARAM and isinstance(u.arg[0], int)), key=lambda u: u.arg[0])
  bufs = [Buffer(dev, a.size, p.arg[1]).copyin(np.ascontiguousarray(a, p.arg[1].np)) for p, a in zip(params, arrays)]
  global_size, local_size = launch_dims(linear)
  prog(*(b.handle for b in bufs), global_size=global_size, local_size=local_size, vals=vals, wait=True)
  return [b.numpy() for b in bufs]

def test_loop_with_variable_bound(dev):
  n = UOp.variable("n", 1, 8)
  r = UOp.range(n, 0, AxisType.REDUCE)
  x = np.arange(8, dtype=np.float32)
  kernel = store(param(0, 1, f32), ZERO, UOp(Ops.REDUCE, (load(param(1, 8, f32), r), r), (Ops.ADD, ())))
  for k in (1, 3, 8): assert launch(dev, kernel, np.zeros(1, np.float32), x, vals=(k,))[0].tolist() == [sum(range(k))]

def test_nested_loops(dev):
  i, j = UOp.range(4, 0), UOp.range(5, 1)
  x = np.arange(20, dtype=np.int32)
  kernel = UOp(Ops.END, (store(param(0, 20, i32), j * 4 + i, load(param(1, 20, i32), i * 5 + j) * 3), i, j))
  np.testing.assert_array_equal(launch(dev, kernel, np.zeros(20, np.int32), x)[0].reshape(5, 4), x.reshape(4, 5).T * 3)

def test_grid_of_workgroups(dev, caps):
  caps.require_local()
  g0, g1 = special("gidx0", 4), special("gidx1", 3)
  x = np.arange(12, dtype=np.int32)
  np.testing.assert_array_equal(launch(dev, store(param(0, 12, i32), g1 * 4 + g0, load(param(1, 12, i32), g0 * 3 + g1)), np.zeros(12, np.int32), x)[0]
                                .reshape(3, 4), x.reshape(4, 3).T)

def test_workgroups_of_2d_lanes(dev, caps):
  caps.require_local()
  g, l0, l1 = special("gidx0", 2), special("lidx0", 4), special("lidx1", 2)
  gid = g * 8 + l1 * 4 + l0
  np.testing.assert_array_equal(launch(dev, store(param(0, 16, i32), gid, gid.cast(i32)), np.full(16, -1, np.int32))[0], np.arange(16))

def test_shared_memory_reverse(dev, caps):
  caps.require_shared()
  G, L = 3, 8
  g, l = special("gidx0", G), special("lidx0", L)
  lb = local(L)
  filled = store(lb, l, load(param(1, G * L, f32), g * L + l))
  kernel = store(param(0, G * L, f32), g * L + l, load(after(lb, barrier(filled)), l * -1 + (L - 1)))
  x = np.arange(G * L, dtype=np.float32)
  np.testing.assert_array_equal(launch(dev, kernel, np.zeros(G * L, np.float32), x)[0].reshape(G, L), x.reshape(G, L)[:, ::-1])

def test_shared_memory_tree_sum(dev, caps):
  caps.require_shared()
  G, L = 3, 8
  x = np.random.default_rng(0).standard_normal(G * L).astype(np.float32)
  got = launch(dev, workgroup_tree_sum(G, L), np.zeros(G, np.float32), x)[0]
  np.testing.assert_allclose(got, x.reshape(G, L).sum(1), rtol=1e-5, atol=1e-6)
