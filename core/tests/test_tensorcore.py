"""The TC opt and WMMA on the PYTHON device, with small made-up tensor cores: layouts are checked when declared, a matmul,
a batched matmul and a convolution become WMMA (padded where sizes do not divide), and bad TC opts are refused by name.
The plugins' real tables are checked against their manuals in the plugins' own tests, and run by the conformance suite."""
import numpy as np
import pytest
from tinyspec import Device, Tensor, dtypes
from tinyspec.conformance.test_opts import conv3x3
from tinyspec.engine import kernels, tensorcore
from tinyspec.engine import realize as R
from tinyspec.engine.callify import callify
from tinyspec.engine.optimize import Opt, OptError, OptOps, apply_opts, axes, optimize
from tinyspec.engine.rangeify import rangeify
from tinyspec.renderer import TensorCore
from tinyspec.uop.ops import AxisType, Ops

rng = np.random.default_rng(0)
# 8 lanes of a 4x4x4 product, each with 2 values of A, B and C; lanes 4-7 of B hold what lanes 0-3 hold (as RDNA3's do)
TOY = TensorCore((4, 4, 4), 8, (2, 2, 2), dtypes.float16, dtypes.float32, "toy",
                 ("k1 m0 m1 | k0", "n0 k0 k1 | n1", "n1 m0 m1 | n0"))
REPLICATED = TensorCore((4, 4, 4), 8, (2, 4, 2), dtypes.float16, dtypes.float32, "replicated",
                        ("k1 m0 m1 | k0", "n0 n1 - | k0 k1", "n1 m0 m1 | n0"))

def kernel_of(t: Tensor):
  return rangeify(callify(t.uop)).items[-1].ast

def halves(*shape): return rng.standard_normal(shape, dtype=np.float32).astype(np.float16)

@pytest.fixture
def with_tc(monkeypatch):
  """use(tc): the PYTHON device declares tensor core tc, and its kernels compile afresh with a TC opt where one matches."""
  def use(tc: TensorCore) -> None:
    monkeypatch.setattr(Device["PYTHON"].renderer, "tensor_cores", (tc,), raising=False)
    def opts(kernel, renderer): return optimize(kernel, renderer, [Opt(OptOps.TC, 0, tc)] if tensorcore.matches(kernel, tc) else [])
    monkeypatch.setattr(kernels, "optimize", opts)
  saved = (dict(R._kernels), dict(R._schedules))
  R._kernels.clear(); R._schedules.clear()
  yield use
  R._kernels.clear(); R._schedules.clear(); R._kernels.update(saved[0]); R._schedules.update(saved[1])

def wmma_kernels() -> list:
  return [k for k in R._kernels.values() if any(u.op is Ops.WMMA for u in k.linear.src)]

def test_coords_follow_the_layout():
  # lane 5 = 0b101: k1 from lane bit 0, m1 from lane bit 2; element 1 adds k0
  assert [TOY.coords("A", 5, e) for e in range(2)] == [(2, 2), (2, 3)]
  assert REPLICATED.coords("B", 1, 3) == REPLICATED.coords("B", 5, 3) == (3, 1)

@pytest.mark.parametrize("layout, message", [
  (("k1 m0 | k0", "n0 k0 k1 | n1", "n1 m0 m1 | n0"), "needs 3 lane bits | 1 element bits"),
  (("k1 m0 m0 | k0", "n0 k0 k1 | n1", "n1 m0 m1 | n0"), "must name each bit of k0 k1 m0 m1 once"),
  (("k1 m0 m1 | x0", "n0 k0 k1 | n1", "n1 m0 m1 | n0"), "layout token 'x0'"),
  (("k1 m0 m1 k0", "n0 k0 k1 | n1", "n1 m0 m1 | n0"), "is not '<lane bits> | <element bits>'"),
])
def test_bad_layouts_are_refused_when_declared(layout, message):
  with pytest.raises(ValueError, match=message): TensorCore((4, 4, 4), 8, (2, 2, 2), dtypes.float16, dtypes.float32, "bad", layout)

@pytest.mark.parametrize("tc", [TOY, REPLICATED], ids=lambda t: t.name)
@pytest.mark.parametrize("m, k, n", [(8, 12, 16), (7, 6, 5), (4, 4, 4)])
def test_matmul_runs_as_wmma(with_tc, tc, m, k, n):
  with_tc(tc)
  a, b = halves(m, k), halves(k, n)
  got = (Tensor(a, device="PYTHON").float() @ Tensor(b, device="PYTHON").float()).numpy()
  np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-5)
  [kern] = wmma_kernels()
  assert any(u.op is Ops.RANGE and u.axis_type is AxisType.WARP for u in kern.linear.src)

def test_half_matmul_batched_and_conv(with_tc):
  with_tc(TOY)
  a, b = halves(3, 8, 12), halves(3, 12, 4)
  got = (Tensor(a, device="PYTHON") @ Tensor(b, device="PYTHON")).numpy()  # a half sum accumulates in float32
  np.testing.assert_allclose(got.astype(np.float32), np.matmul(a.astype(np.float32), b.astype(np.float32)), rtol=2e-3, atol=2e-2)
  x, w = halves(2, 4, 6, 6), halves(8, 4, 3, 3)
  got = Tensor(x, device="PYTHON").float().conv2d(Tensor(w, device="PYTHON").float(), padding=1).numpy()
  np.testing.assert_allclose(got, conv3x3(x.astype(np.float32), w.astype(np.float32)), rtol=1e-4, atol=1e-4)
  assert len(wmma_kernels()) == 2

def test_no_tc_where_nothing_matches():
  a, b = Tensor(halves(8, 8), device="PYTHON"), Tensor(halves(8, 8), device="PYTHON")
  assert tensorcore.matches(kernel_of(a.float() @ b.float()), TOY)
  assert not tensorcore.matches(kernel_of((a.float() + b.float()).sum(1)), TOY)      # a sum, not of products
  assert not tensorcore.matches(kernel_of(a.float().max(1)), TOY)
  f32 = Tensor(halves(8, 8).astype(np.float32), device="PYTHON")
  assert not tensorcore.matches(kernel_of(f32 @ f32), TOY)                          # float32 inputs, not float16

@pytest.mark.parametrize("opts, message", [
  ([Opt(OptOps.TC, 0, TOY)], "TC: no reduction of this kernel is a sum of products in float16 -> float32"),
  ([Opt(OptOps.SPLIT, 0, (2, AxisType.UPCAST, False)), Opt(OptOps.TC, 0, TOY)], "TC: must come before other opts"),
  ([Opt(OptOps.NOLOCALS, None), Opt(OptOps.TC, 0, TOY)], "TC: its WARP axis is a workgroup's lanes, and NOLOCALS came before"),
])
def test_bad_tc_opts_are_refused(opts, message):
  f32 = Tensor(halves(8, 8).astype(np.float32), device="PYTHON")
  with pytest.raises(OptError, match=message): apply_opts(kernel_of(f32 @ f32), opts)

def test_tc_choice_and_nolocals_after():
  a, b = Tensor(halves(8, 8), device="PYTHON"), Tensor(halves(8, 8), device="PYTHON")
  kernel = kernel_of(a.float() @ b.float())
  with pytest.raises(OptError, match=r"TC: choice 9 out of range: the kernel's reductions match toy in 2 ways"):
    apply_opts(kernel, [Opt(OptOps.TC, 9, TOY)])
  with pytest.raises(OptError, match="NOLOCALS: the kernel already has WARP axes"):
    apply_opts(kernel, [Opt(OptOps.TC, 1, TOY), Opt(OptOps.NOLOCALS, None)])
  # the axes TC leaves can be split further: here the outer output axis, by 2
  out = apply_opts(kernel, [Opt(OptOps.TC, 0, TOY), Opt(OptOps.SPLIT, 0, (2, AxisType.UPCAST, False))])
  assert [r.axis_type for r in axes(out)].count(AxisType.UPCAST) == 2

def test_the_emulation_places_lanes_as_the_layout_says():
  # a lane-swapped copy of TOY's C layout gives each lane another lane's results: emulating one with the other is wrong
  from tinyspec.interpreter.wmma import run_wmma
  swapped = TensorCore(TOY.dims, 8, TOY.elements, TOY.dtype_in, TOY.dtype_out, "swapped", (*TOY.layout[:2], "m0 n1 m1 | n0"))
  a = rng.standard_normal((2, 8)).astype(np.float16)
  b = rng.standard_normal((2, 8)).astype(np.float16)
  c = np.zeros((2, 8), np.float32)
  d, e = run_wmma(TOY, a, b, c, 0), run_wmma(swapped, a, b, c, 0)
  assert not np.allclose(d, e)
  # and TOY's own result is A @ B with A and B assembled from the lanes by its layout
  mat = lambda op, frag, shape: np.array([[frag[e, l] for l in range(8) for e in range(2) if TOY.coords(op, l, e) == (i, j)][0]  # noqa: E731
                                          for i in range(shape[0]) for j in range(shape[1])], np.float32).reshape(shape)
  want = mat("A", a, (4, 4)) @ mat("B", b, (4, 4))
  np.testing.assert_allclose(np.array([[want[TOY.coords("C", l, e)] for l in range(8)] for e in range(2)]), d, rtol=1e-6)

def test_a_tc_opt_needs_the_renderers_own_tensor_core():
  a = Tensor(halves(8, 8), device="PYTHON")
  with pytest.raises(OptError, match=r"TC: <PythonRenderer for PYTHON> has no tensor core TensorCore\(toy, float16 -> float32\)"):
    optimize(kernel_of(a.float() @ a.float()), Device["PYTHON"].renderer, [Opt(OptOps.TC, 0, TOY)])
