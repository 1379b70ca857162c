"""The optimize stage: SPLIT opts keep results exact, the hand-coded heuristic picks register tiles, bad opts are refused."""
import numpy as np
import pytest
from tinyspec import Device, Tensor
from tinyspec.engine import realize as R
from tinyspec.engine.callify import callify
from tinyspec.engine.optimize import Opt, OptError, OptOps, apply_opts, axes, hand_coded
from tinyspec.engine.rangeify import rangeify
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import AxisType, Ops

rng = np.random.default_rng(0)
U, R_, L = AxisType.UPCAST, AxisType.UNROLL, AxisType.LOOP

class SIMD16(Renderer):
  """A renderer's limits as the heuristic sees them on an AVX-512 host."""
  device, vector_widths, max_upcast = "TEST", (1, 4, 8, 16), 128

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
  monkeypatch.setattr(r, "max_upcast", 128, raising=False)
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

@pytest.mark.parametrize("opts", [
  [Opt(OptOps.SPLIT, 1, (8, U, False))],                                         # columns in registers
  [Opt(OptOps.SPLIT, 1, (16, U, False)), Opt(OptOps.SPLIT, 0, (4, U, False))],  # a 4x16 register tile
  [Opt(OptOps.SPLIT, 2, (3, R_, False))],                                        # the reduction unrolled by 3
  [Opt(OptOps.SPLIT, 0, (2, L, True)), Opt(OptOps.SPLIT, 3, (2, R_, False))],   # an outer split and an unroll
])
def test_split_opts_keep_matmul_exact(opts, upcasting, monkeypatch):
  an, bn, a, b = mats(12, 6, 32)
  monkeypatch.setattr("tinyspec.engine.realize.optimize", lambda k, r: apply_opts(k, opts))
  np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-5, atol=1e-5)

def test_hand_coded_tiles_a_matmul():
  *_, a, b = mats(64, 48, 128)
  # j (contiguous in the output and in b) by the widest vector, then i, over which b's vector loads do not vary
  assert hand_coded(kernel_of(a @ b), SIMD16()) == [Opt(OptOps.SPLIT, 1, (16, U, False)), Opt(OptOps.SPLIT, 0, (8, U, False))]
  assert hand_coded(kernel_of(a @ b), Renderer()) == [Opt(OptOps.SPLIT, 1, (4, U, False)), Opt(OptOps.SPLIT, 0, (8, U, False))]

def test_hand_coded_tiles_a_convolution_by_channels_not_batch():
  x, w = Tensor.empty(2, 8, 10, 16, device="PYTHON"), Tensor.empty(16, 8, 3, 3, device="PYTHON")
  opts = hand_coded(kernel_of(x.conv2d(w, padding=1)), SIMD16())
  # output axes (batch, channel, y, x): x by 16, then channels (the input's x vector is shared by every channel copy)
  assert opts == [Opt(OptOps.SPLIT, 3, (16, U, False)), Opt(OptOps.SPLIT, 1, (8, U, False))]

def test_hand_coded_leaves_elementwise_and_tiny_kernels_alone():
  a = Tensor.empty(64, 64, device="PYTHON")
  assert hand_coded(kernel_of(a * 2 + 1), SIMD16()) == []
  assert hand_coded(kernel_of(a.sum()), SIMD16()) == []  # no output axis to reuse a load over
  assert hand_coded(kernel_of(a @ a), Renderer.__new__(type("Scalar", (Renderer,), {"max_upcast": 1}))) == []

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
  # the conv kernel stores a 16x8 tile per iteration: expand copied its UPCAST ranges out
  assert max(sum(u.op is Ops.STORE and u.src[0].src[0].op is Ops.PARAM for u in k.linear.src) for k in R._kernels.values()) == 128

@pytest.mark.parametrize("opt, message", [
  (Opt(OptOps.SPLIT, 7, (2, U, False)), "axis 7 out of range for a kernel with 3 axes"),
  (Opt(OptOps.SPLIT, 1, (5, U, False)), "factor 5 does not divide axis 1 of size 32"),
  (Opt(OptOps.SPLIT, 1, (2, R_, False)), "UNROLL axis cannot be split from LOOP axis 1"),
  (Opt(OptOps.SPLIT, 2, (2, U, False)), "UPCAST axis cannot be split from REDUCE axis 2"),
  (Opt(OptOps.PADTO, 0, 4), "PADTO is not supported yet"),
])
def test_bad_opts_are_refused_by_name(opt, message):
  *_, a, b = mats(4, 6, 32)
  with pytest.raises(OptError, match=message): apply_opts(kernel_of(a @ b), [opt])

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

def test_gpu_matmul_softmax_and_empty_outputs(gpu):
  an, bn, a, b = mats(16, 24, 128)
  np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-4, atol=1e-4)
  e = np.exp(an - an.max(1, keepdims=True))
  np.testing.assert_allclose(a.softmax(1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
  assert (Tensor.empty(0, 4, device="PYTHON") + 1).numpy().shape == (0, 4)  # an empty grid is not launched
