"""The optimize stage: SPLIT opts keep results exact, the hand-coded heuristic picks register tiles, bad opts are refused."""
import numpy as np
import pytest
from tinyspec import Device, Tensor, dtypes
from tinyspec.engine import realize as R
from tinyspec.engine.callify import callify
from tinyspec.engine.optimize import Opt, OptError, OptOps, apply_opts, axes, hand_coded, optimize
from tinyspec.engine.rangeify import rangeify
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import AxisType, Ops

rng = np.random.default_rng(0)
U, R_, L = AxisType.UPCAST, AxisType.UNROLL, AxisType.LOOP

class SIMD16(Renderer):
  """A renderer's limits as the heuristic sees them on an AVX-512 host."""
  device, vector_widths, max_upcast = "TEST", (1, 4, 8, 16), 256

def kernel_of(t: Tensor):
  """The last kernel of t's schedule, as rangeify makes it."""
  return rangeify(callify(t.uop)).items[-1].ast

def types(kernel) -> list[tuple[int, AxisType]]: return [(r.src[0].arg[0], r.arg[1]) for r in axes(kernel)]

def mats(m, k, n):
  an, bn = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
  return an, bn, Tensor(an, device="PYTHON"), Tensor(bn, device="PYTHON")

@pytest.fixture
def upcasting(monkeypatch):
  """The PYTHON device optimizing as an AVX-512 CPU does, so upcast kernels run (and are bounds-checked) in the interpreter."""
  r = Device["PYTHON"].renderer
  monkeypatch.setattr(r, "max_upcast", 256, raising=False)
  monkeypatch.setattr(r, "vector_widths", (1, 4, 8, 16), raising=False)
  saved = (dict(R._kernels), dict(R._schedules))
  R._kernels.clear(); R._schedules.clear()
  yield
  R._kernels.clear(); R._schedules.clear(); R._kernels.update(saved[0]); R._schedules.update(saved[1])

def test_split_renumbers_axes_in_place():
  _, _, a, b = mats(4, 6, 32)
  k = apply_opts(kernel_of(a @ b), [Opt(OptOps.SPLIT, 1, (8, U, False))])
  assert types(k) == [(4, L), (4, L), (8, U), (6, AxisType.REDUCE)]  # j=32 became (4 loop, 8 upcast) where j was
  k = apply_opts(kernel_of(a @ b), [Opt(OptOps.SPLIT, 0, (2, L, True))])
  assert types(k) == [(2, L), (2, L), (32, L), (6, AxisType.REDUCE)]

def test_describe_axes_names_each_axis_by_size_and_letter():
  from tinyspec.engine.optimize import describe_axes
  _, _, a, b = mats(4, 6, 32)
  assert describe_axes(apply_opts(kernel_of(a @ b), [Opt(OptOps.SPLIT, 1, (8, U, False))])) == "4L 4L 8u 6R"

@pytest.mark.parametrize("opts", [
  [Opt(OptOps.SPLIT, 1, (8, U, False))],                                         # columns in registers
  [Opt(OptOps.SPLIT, 1, (16, U, False)), Opt(OptOps.SPLIT, 0, (4, U, False))],  # a 4x16 register tile
  [Opt(OptOps.SPLIT, 2, (3, R_, False))],                                        # the reduction unrolled by 3
  [Opt(OptOps.SPLIT, 0, (2, L, True)), Opt(OptOps.SPLIT, 3, (2, R_, False))],   # an outer split and an unroll
])
def test_split_opts_keep_matmul_exact(opts, upcasting, monkeypatch):
  an, bn, a, b = mats(12, 6, 32)
  monkeypatch.setattr("tinyspec.engine.kernels.optimize", lambda k, r: apply_opts(k, opts))
  np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-5, atol=1e-5)

def test_linear_weight_gradient_is_one_long_sum():
  """nn.Linear on (batch, time, features) multiplies (batch * time, features) rows, as PyTorch: the weight's gradient sums
  over all 32 rows in one reduction, not over 4 then 8 (a short inner loop, restarted per batch row)."""
  x, w = Tensor.empty(4, 8, 16, device="PYTHON"), Tensor.empty(32, 16, device="PYTHON")
  g = x.linear(w).square().sum().gradient(w)[0]
  assert [size for size, kind in types(kernel_of(g)) if kind is AxisType.REDUCE] == [32]

def test_hand_coded_tiles_a_matmul():
  *_, a, b = mats(64, 48, 128)
  # j (contiguous in the output and in b) by two of the widest vectors (a plain sum of products), then i, over which b's
  # vector loads do not vary, with what the copies left
  assert hand_coded(kernel_of(a @ b), SIMD16()) == [Opt(OptOps.SPLIT, 1, (32, U, False)), Opt(OptOps.SPLIT, 0, (8, U, False))]
  assert hand_coded(kernel_of(a @ b), Renderer()) == [Opt(OptOps.SPLIT, 1, (8, U, False)), Opt(OptOps.SPLIT, 0, (4, U, False))]
  # with an epilogue past the sums (a relu), one vector and half the copies
  assert hand_coded(kernel_of((a @ b).relu()), SIMD16()) == [Opt(OptOps.SPLIT, 1, (16, U, False)), Opt(OptOps.SPLIT, 0, (8, U, False))]

def test_hand_coded_tiles_a_convolution_by_channels_not_batch():
  x, w = Tensor.empty(2, 8, 10, 16, device="PYTHON"), Tensor.empty(16, 8, 3, 3, device="PYTHON")
  opts = hand_coded(kernel_of(x.conv2d(w, padding=1)), SIMD16())
  # output axes (batch, channel, y, x): x by 16, then channels (the input's x vector is shared by every channel copy); then
  # the 3x3 window (axes 7 and 6 once the tile has split x, all of it, and channels) unrolled, innermost first
  assert opts == [Opt(OptOps.SPLIT, 3, (16, U, False)), Opt(OptOps.SPLIT, 1, (8, U, False)),
                  Opt(OptOps.SPLIT, 7, (3, R_, False)), Opt(OptOps.SPLIT, 6, (3, R_, False))]

def test_hand_coded_tiles_a_convolutions_input_gradient(upcasting):
  # the input gradient multiplies each output gradient pixel by each 3x3 weight window, then folds the windows back. The
  # product's contiguous output axis is the window's 3, which no vector divides: its x (along which the output gradient
  # is read) takes the first place, then the input channels, which that vector load does not depend on (0.57 -> 0.12 ms
  # in examples/cnn.py's step). The fold reuses no load and sums short windows: its images are independent copies
  # (0.56 -> 0.07 ms)
  xn, wn = rng.standard_normal((2, 8, 8, 8), dtype=np.float32), rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
  yn = rng.standard_normal((2, 16, 8, 8), dtype=np.float32)
  x, w, y = Tensor(xn, device="PYTHON", requires_grad=True), Tensor(wn, device="PYTHON"), Tensor(yn, device="PYTHON")
  (g,) = (x.conv2d(w, padding=1) * y).sum().gradient(x)
  product, fold = (it.ast for it in rangeify(callify(g.uop)).items)
  assert types(product) == [(2, L), (8, L), (8, L), (8, L), (3, L), (3, L), (16, AxisType.REDUCE)]
  assert hand_coded(product, SIMD16()) == [Opt(OptOps.SPLIT, 3, (8, U, False)), Opt(OptOps.SPLIT, 1, (8, U, False))]
  assert types(fold)[-2:] == [(4, AxisType.REDUCE)] * 2
  assert hand_coded(fold, SIMD16()) == [Opt(OptOps.SPLIT, 0, (2, U, False))]
  # a short sum of a long expression gets no copies (each would need registers for it): its window is unrolled
  long = Tensor.empty(4, 8, 8, 8, device="PYTHON").exp().log().sin().cos().sqrt()
  for _ in range(6): long = long * 1.5 + 0.5
  pool = kernel_of(long.avg_pool2d(2))
  assert [o.arg[1] for o in hand_coded(pool, SIMD16())] == [R_, R_]
  # x's gradient: pixel (p, q) gets y at (p + 1 - a, q + 1 - b) times weight (a, b), summed over the output channels
  ypad = np.pad(yn, ((0, 0), (0, 0), (1, 1), (1, 1)))
  want = sum(np.einsum("nopq,oi->nipq", ypad[:, :, 2 - a:10 - a, 2 - b:10 - b], wn[:, :, a, b]) for a in range(3) for b in range(3))
  np.testing.assert_allclose(g.numpy(), want, rtol=1e-4, atol=1e-4)


def test_hand_coded_copies_a_sum_over_merged_axes(upcasting):
  # BatchNorm's statistics sum each channel over images x pixels, 8192 values: rangeify's blocks of 1024 merge 4 images'
  # 256 pixels into one reduce axis, indexed by a division. Its channels become copies and the reduction is unrolled by 4,
  # so 4 neighbours share that division and a vector load (0.053 -> 0.024 ms in examples/cnn.py's step)
  xn = rng.standard_normal((32, 8, 16, 16), dtype=np.float32)
  s = Tensor(xn, device="PYTHON").sum((0, 2, 3))
  stats = kernel_of(s)
  assert types(stats) == [(8, L), (8, AxisType.REDUCE), (1024, AxisType.REDUCE)]
  assert hand_coded(stats, SIMD16()) == [Opt(OptOps.SPLIT, 2, (4, R_, False)), Opt(OptOps.SPLIT, 0, (8, U, False))]
  np.testing.assert_allclose(s.numpy(), xn.sum((0, 2, 3), dtype=np.float64), rtol=1e-5)
  # a reduction along unmerged axes is left to the device compiler's loop vectorizer
  assert hand_coded(kernel_of(Tensor.empty(8, 2048, device="PYTHON").sum(1)), SIMD16()) == []

def test_hand_coded_vectors_an_elementwise_axis_its_loads_divide(upcasting):
  # repeat_interleave reads x at column // 2 (a max pool's backward reads its window's maximum so): the innermost axis is
  # upcast by the widest vector, each copy's division by a constant folds away (examples/cnn.py's pool backward 0.107 ->
  # 0.027 ms). Elementwise kernels that divide nothing are left to the device compiler's loop vectorizer
  xn = rng.standard_normal((2, 3, 8, 8), dtype=np.float32)
  out = Tensor(xn, device="PYTHON").repeat_interleave(2, dim=3)
  assert hand_coded(kernel_of(out), SIMD16()) == [Opt(OptOps.SPLIT, 3, (16, U, False))]
  np.testing.assert_array_equal(out.numpy(), np.repeat(xn, 2, axis=3))
  assert hand_coded(kernel_of(Tensor.empty(2, 3, 8, 8, device="PYTHON") + 1), SIMD16()) == []

def test_hand_coded_copies_a_convolutions_weight_gradient_window_whole(upcasting):
  # the weight gradient sums output gradient times input window over images, rows and columns: its contiguous output axis
  # is the window's 3 and every input is read along a reduced axis, so no output axis can take the window's place. The
  # window is copied whole (3 copies), then the output channels, which the input's load does not depend on (0.35 ->
  # 0.25 ms in examples/cnn.py's step); a window longer than ODD_WINDOW keeps its place
  xn, yn = rng.standard_normal((4, 8, 8, 8), dtype=np.float32), rng.standard_normal((4, 16, 8, 8), dtype=np.float32)
  x, y = Tensor(xn, device="PYTHON"), Tensor(yn, device="PYTHON")
  w = Tensor(rng.standard_normal((16, 8, 3, 3), dtype=np.float32), device="PYTHON", requires_grad=True)
  (g,) = (x.conv2d(w, padding=1) * y).sum().gradient(w)
  product = kernel_of(g)
  assert types(product) == [(16, L), (8, L), (3, L), (3, L), (4, AxisType.REDUCE), (8, AxisType.REDUCE), (8, AxisType.REDUCE)]
  assert hand_coded(product, SIMD16()) == [Opt(OptOps.SPLIT, 3, (3, U, False)), Opt(OptOps.SPLIT, 0, (16, U, False))]
  w9 = Tensor.empty(16, 8, 9, 9, device="PYTHON").requires_grad_()
  (g9,) = (x.conv2d(w9, padding=4) * y).sum().gradient(w9)
  assert hand_coded(kernel_of(g9), SIMD16()) == [Opt(OptOps.SPLIT, 0, (16, U, False))]
  # w's gradient: window (a, b) of channel o, i sums y at (p, q) times x at (p + a - 1, q + b - 1)
  xpad = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
  want = np.stack([np.einsum("nopq,nipq->oi", yn, xpad[:, :, a:a + 8, b:b + 8]) for a in range(3) for b in range(3)], -1).reshape(16, 8, 3, 3)
  np.testing.assert_allclose(g.numpy(), want, rtol=1e-4, atol=1e-4)

def test_hand_coded_leaves_elementwise_and_tiny_kernels_alone():
  a = Tensor.empty(64, 64, device="PYTHON")
  assert hand_coded(kernel_of(a * 2 + 1), SIMD16()) == []
  assert hand_coded(kernel_of(a.sum()), SIMD16()) == []  # no output axis to reuse a load over
  assert hand_coded(kernel_of(a @ a), Renderer.__new__(type("Scalar", (Renderer,), {"max_upcast": 1}))) == []

def test_hand_coded_vectorizes_a_column_sum_along_its_columns(upcasting):
  # a sum down the columns steps through memory, so its loop cannot be vectorized: the columns, contiguous in the loads
  # and the store, are copied by a vector instead. A row sum reads along memory: the device compiler's loop it stays
  an = rng.standard_normal((64, 48), dtype=np.float32)
  a = Tensor(an, device="PYTHON")
  assert hand_coded(kernel_of(a.sum(0)), SIMD16()) == [Opt(OptOps.SPLIT, 0, (16, U, False))]
  assert hand_coded(kernel_of(a.sum(1)), SIMD16()) == []
  np.testing.assert_allclose(a.sum(0).numpy(), an.sum(0), rtol=1e-5, atol=1e-5)

def test_hand_coded_leaves_a_row_reduction_read_by_every_column_to_loops():
  # softmax's backward, p * (d - sum(d * p)) per row: the row sum runs once per row whatever the columns do, so copying
  # columns reuses no load; left a loop, the device compiler vectorizes it (attention's dS 1.2 -> 0.4 ms on a CPU)
  p, d = Tensor.empty(64, 64, device="PYTHON"), Tensor.empty(64, 64, device="PYTHON")
  k = kernel_of(p * (d - (d * p).sum(-1, keepdim=True)))
  assert sum(u.op is Ops.REDUCE for u in k.toposort()) == 1 and hand_coded(k, SIMD16()) == []
  # the row sum reads a weight every row shares, but copies of rows alone would store each row element by element
  w = Tensor.empty(64, device="PYTHON")
  assert hand_coded(kernel_of(d * (d * w).sum(-1, keepdim=True)), SIMD16()) == []

def test_attention_gradients_are_three_tiled_matmuls(upcasting):
  # attention's dq, dk and dv share only reductions realized apart (the softmax's row sums), so they are not grouped into
  # one kernel: each is a matmul of its own with its own register tile; the gradients stay those of numpy's attention
  qn, kn, vn = (rng.standard_normal((2, 64, 16), dtype=np.float32) for _ in range(3))
  q, k, v = (Tensor(x, device="PYTHON", requires_grad=True) for x in (qn, kn, vn))
  grads = (q.scaled_dot_product_attention(k, v) ** 2).sum().gradient(q, k, v)
  items = rangeify(callify(*(g.uop for g in grads))).items
  assert all(sum(u.op is Ops.STORE for u in it.ast.toposort()) == 1 for it in items)
  last = [it.ast for it in items[-3:]]
  assert all(sum(u.op is Ops.REDUCE for u in kern.toposort()) == 1 for kern in last)
  assert all((opts := hand_coded(kern, SIMD16())) and all(o.arg[1] is U for o in opts) for kern in last)
  p = np.exp(s := qn @ kn.transpose(0, 2, 1) / 4) / np.exp(s).sum(-1, keepdims=True)
  g = 2 * (p @ vn)
  dp = g @ vn.transpose(0, 2, 1)
  ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / 4
  for got, want in zip(grads, (ds @ kn, ds.transpose(0, 2, 1) @ qn, p.transpose(0, 2, 1) @ g)):
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("shape", [(64, 48, 128), (5, 7, 3), (3, 0, 4), (0, 3, 5), (16, 1, 16)])
def test_upcast_matmuls_match_numpy(shape, upcasting):
  an, bn, a, b = mats(*shape)
  np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-4, atol=1e-4)

def test_upcast_conv_and_reductions_match_numpy(upcasting):
  xn, wn = rng.standard_normal((2, 8, 10, 16), dtype=np.float32), rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
  got = Tensor(xn, device="PYTHON").conv2d(Tensor(wn, device="PYTHON"), padding=1).numpy()
  pad = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
  want = sum(np.einsum("nchw,oc->nohw", pad[:, :, i:i + 10, j:j + 16], wn[:, :, i, j]) for i in range(3) for j in range(3))
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
  yn = rng.standard_normal((32, 16, 24), dtype=np.float32)
  y = Tensor(yn, device="PYTHON")
  np.testing.assert_allclose(y.sum(axis=1).numpy(), yn.sum(1), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(y.max(axis=(0, 2)).numpy(), yn.max((0, 2)))
  # the conv kernel stores a 16x8 tile per iteration: expand copied its UPCAST ranges out, 8 vector stores of 16 pixels
  def stores(k): return [u.src[1].shape for u in k.linear.src if u.op is Ops.STORE and u.src[0].src[0].op is Ops.PARAM]
  assert max((stores(k) for k in R._kernels.values()), key=len) == [(16,)] * 8

@pytest.mark.parametrize("opt, message", [
  (Opt(OptOps.SPLIT, 7, (2, U, False)), "axis 7 out of range for a kernel with 3 axes"),
  (Opt(OptOps.SPLIT, 1, (5, U, False)), "factor 5 does not divide axis 1 of size 32"),
  (Opt(OptOps.SPLIT, 1, (2, R_, False)), "UNROLL axis cannot be split from LOOP axis 1"),
  (Opt(OptOps.SPLIT, 2, (2, U, False)), "UPCAST axis cannot be split from REDUCE axis 2"),
  (Opt(OptOps.SPLIT, 1, (2, U, True)), "SPLIT: a UPCAST axis is the inner part of a split, not the outer"),
  (Opt(OptOps.PADTO, 0, 4), "PADTO: axis 0 of size 4 is already a multiple of 4"),
  (Opt(OptOps.PADTO, 2, 16), "PADTO: padding axis 2 from 6 to 16 would more than double its work"),
  (Opt(OptOps.SWAP, 0, 2), "SWAP: axis 0 is LOOP and axis 2 is REDUCE: only axes of one type swap"),
  (Opt(OptOps.SWAP, 1, 1), "SWAP: axis 1 with itself"),
  (Opt(OptOps.TC, 0, None), "TC: the arg must be a TensorCore of the renderer, got None"),
])
def test_bad_opts_are_refused_by_name(opt, message):
  *_, a, b = mats(4, 6, 32)
  with pytest.raises(OptError, match=message): apply_opts(kernel_of(a @ b), [opt])

@pytest.mark.parametrize("opts, message", [
  ([Opt(OptOps.SPLIT, 1, (8, U, False)), Opt(OptOps.PADTO, 2, 16)], "PADTO: axis 2 is UPCAST: pad an axis before splitting it"),
  ([Opt(OptOps.NOLOCALS, None), Opt(OptOps.SPLIT, 1, (8, L, False))], None),  # a LOOP split is fine after NOLOCALS
  ([Opt(OptOps.NOLOCALS, None), Opt(OptOps.NOLOCALS, None)], "NOLOCALS: given twice"),
])
def test_opt_sequences_are_checked_as_a_whole(opts, message):
  *_, a, b = mats(4, 6, 32)
  if message is None: apply_opts(kernel_of(a @ b), opts)
  else:
    with pytest.raises(OptError, match=message): apply_opts(kernel_of(a @ b), opts)

def test_padto_refuses_a_kernel_dividing_by_a_loaded_integer():
  x, y = Tensor(np.arange(1, 8, dtype=np.int32), device="PYTHON"), Tensor(np.arange(1, 8, dtype=np.int32)[::-1].copy(), device="PYTHON")
  with pytest.raises(OptError, match="divides by a loaded integer"): apply_opts(kernel_of(x // y), [Opt(OptOps.PADTO, 0, 4)])

def run_with(opts, monkeypatch):
  """Kernels on the PYTHON device get exactly `opts` (through the pipeline's optimize, so GPU lowering still follows)."""
  from tinyspec.engine.optimize import optimize
  monkeypatch.setattr("tinyspec.engine.kernels.optimize", lambda k, r: optimize(k, r, opts))

@pytest.mark.parametrize("opts", [
  [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.SPLIT, 1, (4, U, False))],                         # 7 output columns padded to 8, upcast 4
  [Opt(OptOps.PADTO, 2, 4), Opt(OptOps.SPLIT, 2, (4, R_, False))],                        # the reduction of 5 padded to 8, unrolled 4
  [Opt(OptOps.PADTO, 0, 8), Opt(OptOps.PADTO, 1, 8), Opt(OptOps.PADTO, 2, 8)],            # every axis padded
  [Opt(OptOps.SWAP, 0, 1), Opt(OptOps.PADTO, 0, 4), Opt(OptOps.SPLIT, 0, (2, L, True))],  # columns outermost, padded, split
])
def test_padto_and_swap_keep_matmul_exact(opts, upcasting, monkeypatch):
  an, bn, a, b = mats(6, 5, 7)
  run_with(opts, monkeypatch)
  np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-5, atol=1e-5)

def test_padto_over_a_reduction_adds_the_identity(upcasting, monkeypatch):
  """The padded part of a max adds -inf (0 would win over these all-negative rows), of a product 1, of a sum 0."""
  xn = -1 - rng.random((6, 7), dtype=np.float32)
  x = Tensor(xn, device="PYTHON")
  run_with([Opt(OptOps.PADTO, 1, 4), Opt(OptOps.SPLIT, 1, (4, R_, False))], monkeypatch)
  np.testing.assert_array_equal(x.max(axis=1).numpy(), xn.max(1))
  np.testing.assert_allclose(x.prod(axis=1).numpy(), xn.prod(1), rtol=1e-6)
  np.testing.assert_allclose(x.sum(axis=1).numpy(), xn.sum(1), rtol=1e-6)

def test_swap_changes_the_loop_order():
  *_, a, b = mats(4, 6, 32)
  k = kernel_of(a @ b)
  def loop_order(kernel):
    from tinyspec.engine.linearize import linearize
    return [u.size for u in linearize(kernel).src if u.op is Ops.RANGE]
  assert loop_order(apply_opts(k, [])) == [4, 32, 6]
  swapped = apply_opts(k, [Opt(OptOps.SWAP, 0, 1)])
  assert loop_order(swapped) == [32, 4, 6] and types(swapped) == [(32, L), (4, L), (6, AxisType.REDUCE)]

def test_noopt_gives_kernels_no_opts(upcasting, monkeypatch):
  an, bn, a, b = mats(16, 8, 32)
  monkeypatch.setenv("NOOPT", "1")
  np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-5, atol=1e-5)
  assert all(u.axis_type is not U for k in R._kernels.values() for u in k.linear.src if u.op is Ops.RANGE)
  assert max(sum(u.op is Ops.STORE and u.src[0].src[0].op is Ops.PARAM for u in k.linear.src) for k in R._kernels.values()) == 1

# ---- GPU lowering, run by the interpreter with a GPU's grid limits ----

@pytest.fixture
def gpu(monkeypatch):
  """The PYTHON device lowering kernels as for a GPU: a grid limit makes output axes GLOBAL, then SPECIAL gidx/lidx."""
  monkeypatch.setattr(Device["PYTHON"].renderer, "global_max", (2**31 - 1, 65535, 65535), raising=False)
  saved = (dict(R._kernels), dict(R._schedules))
  R._kernels.clear(); R._schedules.clear()
  yield
  R._kernels.clear(); R._schedules.clear(); R._kernels.update(saved[0]); R._schedules.update(saved[1])

def specials(t: Tensor) -> list[dict[str, int]]:
  """Realize t; per kernel compiled, its SPECIAL names and sizes."""
  t.realize()
  return [{u.arg: u.src[0].arg[0] for u in k.linear.src if u.op is Ops.SPECIAL} for k in R._kernels.values()]

def test_gpu_elementwise_is_a_grid_of_workgroups(gpu):
  xn = rng.standard_normal((6, 256), dtype=np.float32)
  y = Tensor(xn, device="PYTHON") * 2 + 1
  assert specials(y) == [{"gidx0": 4, "gidx1": 6, "lidx0": 64}]  # the inner axis split into 4 workgroups of 64 lanes
  k = next(iter(R._kernels.values()))
  assert not any(u.op is Ops.RANGE for u in k.linear.src) and (k.global_size, k.local_size) == ((4, 6, 1), (64, 1, 1))
  np.testing.assert_allclose(y.numpy(), xn * 2 + 1)

def test_gpu_pads_an_axis_without_a_power_of_two_factor_for_its_workgroups(gpu):
  xn = rng.standard_normal((3, 201), dtype=np.float32)
  y = Tensor(xn, device="PYTHON") * 2 + 1
  assert specials(y) == [{"gidx0": 13, "gidx1": 3, "lidx0": 16}]  # 201 padded to 208: 13 workgroups of 16, the last 7 lanes idle
  np.testing.assert_allclose(y.numpy(), xn * 2 + 1)

def test_gpu_rows_without_reuse_are_group_reduced_even_when_many(gpu):
  # 4096 rows of 256: no input is shared between outputs, so no register tile; a workgroup's lanes read each row together
  xn = rng.standard_normal((4096, 256), dtype=np.float32)
  y = Tensor(xn, device="PYTHON").sum(axis=1)
  assert specials(y) == [{"gidx0": 4096, "lidx0": 256}]
  np.testing.assert_allclose(y.numpy(), xn.sum(1), rtol=1e-5, atol=1e-4)

def test_gpu_merges_axes_past_three_and_over_limits(gpu, monkeypatch):
  xn = rng.standard_normal((2, 3, 5, 7, 9), dtype=np.float32)
  y = Tensor(xn, device="PYTHON").permute(4, 3, 2, 1, 0) + 1
  # output (9, 7, 5, 3, 2): lanes take the 2, and of the four axes left the outermost (9) joins dimension 0
  assert specials(y) == [{"gidx0": 9 * 3, "gidx1": 5, "gidx2": 7, "lidx0": 2}]
  np.testing.assert_allclose(y.numpy(), xn.transpose(4, 3, 2, 1, 0) + 1)
  R._kernels.clear(); R._schedules.clear()
  monkeypatch.setattr(Device["PYTHON"].renderer, "global_max", (2**31 - 1, 4, 4), raising=False)
  zn = rng.standard_normal((9, 7), dtype=np.float32)
  z = Tensor(zn, device="PYTHON") - 1
  assert specials(z) == [{"gidx0": 63}]  # 9 is over dimension 1's limit of 4: merged into dimension 0
  np.testing.assert_allclose(z.numpy(), zn - 1)

def test_gpu_grid_over_the_limit_is_refused(gpu, monkeypatch):
  monkeypatch.setattr(Device["PYTHON"].renderer, "global_max", (8, 8, 8), raising=False)
  with pytest.raises(OptError, match="grid size 9 exceeds the device's limit 8"): (Tensor.ones(9, device="PYTHON") + 1).realize()

def test_gpu_long_reduction_is_a_group_reduce_through_local_memory(gpu):
  xn = rng.standard_normal((3, 4096), dtype=np.float32)
  s = Tensor(xn, device="PYTHON").sum(axis=1)
  assert specials(s) == [{"gidx0": 3, "lidx0": 256}]
  k = next(iter(R._kernels.values()))
  ops = {u.op for u in k.linear.src}
  assert Ops.BARRIER in ops and Ops.IF in ops  # partials meet in LOCAL memory; lane 0 alone writes the result
  assert any(u.op is Ops.BUFFER and u.arg[3].name == "LOCAL" for u in k.linear.src)
  np.testing.assert_allclose(s.numpy(), xn.sum(1), rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(Tensor(xn, device="PYTHON").max().numpy(), xn.max())

def test_gpu_long_sum_into_a_small_output_is_spread_over_workgroups(gpu):
  """2**18 + 5 floats summed: 256 workgroups' partial sums (a kernel), then their sum (a second), exact for ones."""
  n = 2**18 + 5
  assert specials(Tensor.ones(n, device="PYTHON").sum()) == [{"gidx0": 256, "lidx0": 256}, {"lidx0": 256}]
  assert Tensor.ones(n, device="PYTHON").sum().item() == n
  xn = rng.standard_normal(n, dtype=np.float32)
  np.testing.assert_allclose(Tensor(xn, device="PYTHON").sum().item(), xn.astype(np.float64).sum(), rtol=1e-6)

def test_gpu_group_reduce_takes_at_most_the_renderers_group_lanes(gpu, monkeypatch):
  monkeypatch.setattr(Device["PYTHON"].renderer, "group_lanes", 16, raising=False)
  xn = rng.standard_normal((3, 4096), dtype=np.float32)
  s = Tensor(xn, device="PYTHON").sum(axis=1)
  assert specials(s) == [{"gidx0": 3, "lidx0": 16}]
  np.testing.assert_allclose(s.numpy(), xn.sum(1), rtol=1e-5, atol=1e-4)

def test_gpu_matmul_softmax_and_empty_outputs(gpu):
  an, bn, a, b = mats(16, 24, 128)
  np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-4, atol=1e-4)
  e = np.exp(an - an.max(1, keepdims=True))
  np.testing.assert_allclose(a.softmax(1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
  assert (Tensor.empty(0, 4, device="PYTHON") + 1).numpy().shape == (0, 4)  # an empty grid is not launched

class TwoCores(SIMD16):
  """SIMD16 with two threads, splitting kernels of 4096 innermost iterations or more."""
  threads, split_min_work = 2, 4096

def test_hand_coded_splits_the_outermost_output_axis_over_threads():
  *_, a, b = mats(64, 48, 128)
  # the THREAD part first (rows 0-31 and 32-63), then the register tile on what is left of the rows and on the columns
  assert hand_coded(kernel_of(a @ b), TwoCores()) == [Opt(OptOps.SPLIT, 0, (2, AxisType.THREAD, True)),
                                                     Opt(OptOps.SPLIT, 2, (32, U, False)), Opt(OptOps.SPLIT, 1, (8, U, False))]
  x = Tensor.empty(63, 100, device="PYTHON")[:, :80]
  assert hand_coded(kernel_of(x * 2), TwoCores()) == [Opt(OptOps.SPLIT, 1, (2, AxisType.THREAD, True))]  # 63 rows do not halve
  assert hand_coded(kernel_of(x[:4, :4] * 2), TwoCores()) == []  # 16 iterations: not worth a thread
  with pytest.raises(OptError, match="one THREAD axis at most"):
    apply_opts(kernel_of(x * 2), [Opt(OptOps.SPLIT, 1, (2, AxisType.THREAD, True)), Opt(OptOps.SPLIT, 0, (3, AxisType.THREAD, True))])

def test_a_long_sum_on_threads_is_two_kernels():
  x = Tensor.empty(1 << 20, device="PYTHON")
  one, two = rangeify(callify(x.sum().uop)).items, rangeify(callify(x.sum().uop), threads=2).items
  assert len(one) == 1 and len(two) == 2
  # the first kernel's 256 partial sums are an output axis, which the optimizer splits over the threads
  assert [r.size for r in axes(two[0].ast)] == [256, 4, 1024]
  assert hand_coded(two[0].ast, TwoCores())[0] == Opt(OptOps.SPLIT, 0, (2, AxisType.THREAD, True))
  # other reductions spread too where 256 divides their length (nothing pads a max or a product); an int sum is exact
  i = Tensor.empty(1 << 20, dtype=dtypes.int32, device="PYTHON")
  assert [len(rangeify(callify(t.uop), threads=2).items) for t in (i.max(), i.sum(), x.prod(), Tensor.empty(3 + (1 << 20)).max())] == [2, 2, 2, 1]

def test_gpu_refuses_partials_past_the_shared_memory(gpu, monkeypatch):
  monkeypatch.setattr(Device["PYTHON"].renderer, "shared_max", 512, raising=False)
  k = rangeify(callify(Tensor(np.ones((4, 1024), np.float32), device="PYTHON").sum(1).uop), gpu=True).items[-1].ast
  group = [Opt(OptOps.SPLIT, 1, (64, AxisType.GROUP_REDUCE, False))]
  optimize(k, Device["PYTHON"].renderer, group)  # 64 float32 partials: 256 bytes
  with pytest.raises(OptError, match="LOCAL memory \\(1024 bytes"):
    optimize(k, Device["PYTHON"].renderer, [Opt(OptOps.SPLIT, 1, (256, AxisType.GROUP_REDUCE, False))])
