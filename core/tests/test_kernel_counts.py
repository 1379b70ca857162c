"""The kernel split as users meet it: how many kernels common Tensor expressions become, and that the numbers are right."""
import math

import numpy as np
from tinyspec import Tensor
from tinyspec.engine import realize as R

rng = np.random.default_rng(1)

def kernels_run(t: Tensor) -> tuple[int, np.ndarray]:
  """Kernels realizing t ran (its inputs realized beforehand), and its value."""
  before = R.stats["kernels_run"]
  t.realize()
  return R.stats["kernels_run"] - before, t.numpy()

def inputs(*shapes):
  arrs = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
  return arrs, [Tensor(a).realize() for a in arrs]

def test_fused_elementwise_sum_is_one_kernel():
  (an, bn, cn), (a, b, c) = inputs((1000,), (1000,), (1000,))
  n, out = kernels_run(((a + b) * c).sum())
  assert n == 1
  np.testing.assert_allclose(out, ((an + bn) * cn).sum(), rtol=1e-4)

def test_softmax_is_one_kernel():
  (xn,), (x,) = inputs((8, 16))
  n, out = kernels_run(x.softmax(1))
  assert n == 1  # max, sum and divide, once per row
  e = np.exp(xn - xn.max(1, keepdims=True))
  np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)

def test_mean_and_var_realized_together_are_one_kernel():
  (xn,), (x,) = inputs((8, 16))
  m, v = x.mean(1), x.var(1)
  before = R.stats["kernels_run"]
  Tensor.realize(m, v)
  assert R.stats["kernels_run"] - before == 1  # one pass per row: the sum shared, then the squares
  np.testing.assert_allclose(m.numpy(), xn.mean(1), rtol=1e-5)
  np.testing.assert_allclose(v.numpy(), xn.var(1, ddof=1), rtol=1e-4)

def test_layernorm_is_one_kernel():
  (xn,), (x,) = inputs((8, 16))
  n, out = kernels_run(x.layernorm(axis=-1))
  assert n == 1
  np.testing.assert_allclose(out, (xn - xn.mean(1, keepdims=True)) / np.sqrt(xn.var(1, keepdims=True) + 1e-5), rtol=1e-4, atol=1e-5)

def test_matmul_is_one_kernel():
  (an, bn), (a, b) = inputs((6, 5), (5, 7))
  n, out = kernels_run(a @ b)
  assert n == 1
  np.testing.assert_allclose(out, an @ bn, rtol=1e-5, atol=1e-5)

def test_a_matmul_under_a_long_epilogue_is_its_own_kernel():
  """Past LONG_EPILOGUE elementwise ops after it (a gelu), a CPU matmul is realized and the ops run as a loop of their own;
  a bias and a relu stay in the matmul's kernel."""
  (an, bn, cn), (a, b, c) = inputs((6, 5), (5, 7), (7,))
  n, out = kernels_run((a @ b + c).relu())
  assert n == 1
  np.testing.assert_allclose(out, np.maximum(an @ bn + cn, 0), rtol=1e-5, atol=1e-5)
  n, out = kernels_run((a @ b).gelu(approximate="none"))
  assert n == 2
  erf = np.vectorize(math.erf)
  np.testing.assert_allclose(out, 0.5 * (an @ bn) * (1 + erf((an @ bn) / math.sqrt(2))), rtol=1e-5, atol=1e-5)

def test_a_large_padded_conv2d_pads_its_input_once_first():
  """Past PAD_REALIZE_MIN padded elements the padded input is a kernel of its own, so the conv reads it ungated."""
  (xn, wn), (x, w) = inputs((2, 8, 64, 64), (4, 8, 3, 3))
  n, out = kernels_run(x.conv2d(w, padding=1))
  assert n == 2
  xp = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
  expect = sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + 64, j:j + 64], wn[:, :, i, j]) for i in range(3) for j in range(3))
  np.testing.assert_allclose(out, expect, rtol=1e-4, atol=1e-4)

def test_conv2d_is_one_kernel():
  (xn, wn), (x, w) = inputs((1, 3, 8, 8), (4, 3, 3, 3))
  n, out = kernels_run(x.conv2d(w, padding=1))
  assert n == 1
  expect = np.zeros((1, 4, 8, 8), np.float32)
  xp = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
  for i in range(8):
    for j in range(8): expect[0, :, i, j] = np.einsum("chw,ochw->o", xp[0, :, i:i + 3, j:j + 3], wn)
  np.testing.assert_allclose(out, expect, rtol=1e-4, atol=1e-4)

def test_a_matmul_reads_a_transcendental_input_from_memory():
  (xn, wn), (x, w) = inputs((16, 32), (32, 8))
  n, out = kernels_run(x.exp() @ w)
  assert n == 2  # exp(x) once into a buffer, then the matmul: fused, each exp would be redone for each of the 8 columns
  np.testing.assert_allclose(out, np.exp(xn) @ wn, rtol=1e-4)
  n, out = kernels_run(x.relu() @ w)
  assert n == 1  # a cheap input stays fused
  np.testing.assert_allclose(out, np.maximum(xn, 0) @ wn, rtol=1e-4, atol=1e-5)

def test_a_factor_the_same_along_a_sum_is_applied_to_the_sum():
  # sum(x * w * 2) over the axes along which w is broadcast is sum(x) * w * 2: the sums of a BatchNorm's backward that
  # differ only by per-channel factors are then one reduction, computed once for both outputs
  (xn, wn), (x, w) = inputs((4, 3, 5, 5), (3,))
  scaled, plain = (x * w.reshape(1, 3, 1, 1) * 2).sum((0, 2, 3)), x.sum((0, 2, 3))
  before = R.stats["kernels_run"]
  Tensor.realize(scaled, plain)
  assert R.stats["kernels_run"] - before == 1
  np.testing.assert_allclose(scaled.numpy(), (xn * wn.reshape(1, 3, 1, 1) * 2).sum((0, 2, 3)), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(plain.numpy(), xn.sum((0, 2, 3)), rtol=1e-5, atol=1e-5)
  # what the rule must leave alone still computes right: a factor that varies along the sum, and a max (not a sum)
  _, out = kernels_run((x * x).sum((0, 2, 3)))
  np.testing.assert_allclose(out, (xn * xn).sum((0, 2, 3)), rtol=1e-5)
  _, out = kernels_run((x * w.reshape(1, 3, 1, 1)).max((0, 2, 3)))
  np.testing.assert_allclose(out, (xn * wn.reshape(1, 3, 1, 1)).max((0, 2, 3)), rtol=1e-6)

def test_a_half_sum_keeps_its_factor_inside():
  # moving the factor out makes the sum 100 x 1000, past float16's 65504: right only because a float16 sum adds in float32
  x, w = Tensor.full((100,), 1000.0, dtype="float16"), Tensor([0.001], dtype="float16")
  np.testing.assert_allclose((x * w.expand(100)).sum().numpy().astype(np.float32), 100.0, rtol=1e-2)

def test_a_sum_of_a_long_product_schedules():
  # looking for factors to move out of a sum walks the product with a stack, not recursion: 3000 chained factors
  (xn,), (x,) = inputs((4, 3))
  t = x
  for _ in range(3000): t = t * 1.0001
  np.testing.assert_allclose(t.sum(0).numpy(), xn.sum(0) * 1.0001 ** 3000, rtol=1e-3)

def _reduces(t: Tensor) -> int:
  """REDUCEs in the kernels of t's schedule, as rangeify makes them (before the optimizer)."""
  from tinyspec.engine.callify import callify
  from tinyspec.engine.rangeify import rangeify
  from tinyspec.uop.ops import Ops
  return sum(u.op is Ops.REDUCE for item in rangeify(callify(t.uop)).items if item.ast.op is Ops.SINK for u in item.ast.toposort())

def test_a_gather_reads_one_element_per_output_not_the_whole_table():
  # seed 001's gather is a one-hot mask summed over the table's axis; rangeify reads the one element the mask keeps, so an
  # embedding lookup costs its output's size, not that times the vocabulary (and the sum is not split into blocks first)
  n = 5000  # longer than SUM_BLOCK: a float sum that long is otherwise a tree of blocks
  table = rng.standard_normal((n, 3), dtype=np.float32)
  table[7] = -0.0  # a one-hot sum adds 0 to it (+0.0); the read keeps its sign, as PyTorch's gather
  idx = rng.integers(0, n, (4, 6))
  idx[0, :3] = (7, n - 1, 0)
  t, i = Tensor(table).realize(), Tensor(idx.astype(np.int32)).realize()
  cases = [(t[i], table[idx]), (t.gather(0, i[:3, :3]), np.take_along_axis(table, idx[:3, :3], 0)),
           (t[i, i % 3], table[idx, idx % 3]), (t.T[:, i[0]], table.T[:, idx[0]]), ((t > 0)[i], (table > 0)[idx]),
           (Tensor(table.astype(np.int32))[i], table.astype(np.int32)[idx]), (t[i - n], table[idx - n])]
  for got, want in cases:
    assert _reduces(got) == 0
    out = got.numpy()
    assert out.dtype == want.dtype and np.array_equal(out, want) and np.array_equal(np.signbit(out), np.signbit(want))
  # an index outside the table picks nothing, so the sum is 0 (documented for gather): the read is skipped, not made
  bad = Tensor(np.array([[-1], [n], [3]], np.int32))
  assert _reduces(t.gather(0, bad)) == 0
  assert np.array_equal(t.gather(0, bad).numpy(), np.array([[0], [0], [table[3, 0]]], np.float32))
  # a mask that is not one-hot along the sum (data compared with an arange of classes) stays a sum, split into a tree of
  # blocks as every long float sum is
  labels = Tensor(rng.integers(0, 3, n).astype(np.int32))
  per_class = (labels.reshape(1, n) == Tensor.arange(3, dtype="int32").reshape(3, 1)).where(t[:, 0].reshape(1, n), 0.0).sum(1)
  assert _reduces(per_class) >= 2
  want = [table[:, 0][labels.numpy() == k].sum() for k in range(3)]
  np.testing.assert_allclose(per_class.numpy(), want, rtol=1e-4, atol=1e-4)
