"""Operand packing (engine/pack.py): a matmul's B copied into panels before the kernel, on the PYTHON device with a CPU's
pack width; results must not change, and only operands worth packing are packed."""
import numpy as np
import pytest
from tinyspec import Device, Tensor
from tinyspec.engine import realize as R
from tinyspec.engine.pack import affine
from tinyspec.uop.uop import UOp

rng = np.random.default_rng(0)

@pytest.fixture
def packing(monkeypatch):
  """The PYTHON device packing as an AVX-512 CPU does (panels of 16), with empty caches before and after."""
  monkeypatch.setattr(Device["PYTHON"].renderer, "pack_width", 16, raising=False)
  saved = (dict(R._kernels), dict(R._schedules))
  R._kernels.clear(); R._schedules.clear()
  yield
  R._kernels.clear(); R._schedules.clear(); R._kernels.update(saved[0]); R._schedules.update(saved[1])

def kernel_names(t: Tensor) -> list[str]:
  """The kernels realizing t compiles, from empty caches."""
  R._kernels.clear(); R._schedules.clear()
  t.realize()
  return [k.name for k in R._kernels.values()]

def test_affine_reads_an_index_as_offset_and_strides():
  i, k = UOp.range(8, 0), UOp.range(4, 1)
  assert affine((k * 2 + 1) * 1024 + i + 3) == (1027, {k: 2048, i: 1})
  assert affine(i // 2) is None and affine(i * k) is None

def test_matmul_with_a_wide_b_reads_it_packed(packing):
  an, bn = rng.standard_normal((64, 32), dtype=np.float32), rng.standard_normal((32, 1024), dtype=np.float32)
  a, b = Tensor(an, device="PYTHON"), Tensor(bn, device="PYTHON")
  assert kernel_names(a @ b) == ["E_64_32_16", "r_64_1024_32"]  # B as 64 panels of 32 rows of 16, then the matmul
  np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-5, atol=1e-5)

def test_batched_and_self_matmuls_stay_exact(packing):
  an, bn = rng.standard_normal((2, 64, 16), dtype=np.float32), rng.standard_normal((2, 16, 1024), dtype=np.float32)
  np.testing.assert_allclose((Tensor(an, device="PYTHON") @ Tensor(bn, device="PYTHON")).numpy(), an @ bn, rtol=1e-5, atol=1e-5)
  xn = rng.standard_normal((64, 1024), dtype=np.float32)  # both operands from one buffer: B packed, A still read from it
  x = Tensor(xn, device="PYTHON")
  assert kernel_names(x[:, :32] @ x[:32, :]) == ["E_64_32_16", "r_64_1024_32"]
  np.testing.assert_allclose((x[:, :32] @ x[:32, :]).numpy(), xn[:, :32] @ xn[:32, :], rtol=1e-5, atol=1e-5)

def test_matmul_with_a_transposed_b_reads_it_packed(packing):
  # x @ w.T (nn.Linear's layout): k is w's contiguous axis, so the register tile's vectors along the output columns would
  # gather; packed, they are contiguous as for a plain B
  an, wn = rng.standard_normal((64, 32), dtype=np.float32), rng.standard_normal((1024, 32), dtype=np.float32)
  a, w = Tensor(an, device="PYTHON"), Tensor(wn, device="PYTHON")
  assert kernel_names(a @ w.T) == ["E_64_32_16", "r_64_1024_32"]
  np.testing.assert_allclose((a @ w.T).numpy(), an @ wn.T, rtol=1e-5, atol=1e-5)
  # an odd number of whole panels (80 columns, a GPT's vocabulary head): 5 panels of 16
  a80, w80 = Tensor(an, device="PYTHON"), Tensor(wn[:80], device="PYTHON")
  assert kernel_names(a80 @ w80.T)[0] == "E_5_32_16"
  np.testing.assert_allclose((a80 @ w80.T).numpy(), an @ wn[:80].T, rtol=1e-5, atol=1e-5)

def test_a_later_buffer_may_reuse_the_packed_copys_memory(packing):
  # the packed copy is the schedule's last buffer but dies after its matmul; an intermediate made later, of the same size,
  # takes its memory (the memory plan), and must find it allocated
  an, wn = rng.standard_normal((64, 32), dtype=np.float32), rng.standard_normal((64, 32), dtype=np.float32)
  a, w = Tensor(an, device="PYTHON"), Tensor(wn, device="PYTHON")
  out = (((a @ w.T) @ w * 0.01).exp() + 1).sum(0)
  np.testing.assert_allclose(out.numpy(), (np.exp((an @ wn.T) @ wn * 0.01) + 1).sum(0), rtol=1e-4)

@pytest.mark.parametrize("name, make", [
  ("a narrow B", lambda: (rng.standard_normal((64, 32)), rng.standard_normal((32, 512)))),   # k steps 512 elements: no gain
  ("a transposed B, ragged", lambda: (rng.standard_normal((64, 32)), rng.standard_normal((24, 32)).T)),  # columns not whole panels
  ("few rows to reuse B", lambda: (rng.standard_normal((8, 32)), rng.standard_normal((32, 1024)))),
])
def test_operands_not_worth_packing_are_left_alone(packing, name, make):
  an, bn = (x.astype(np.float32) for x in make())
  a, b = Tensor(an, device="PYTHON"), Tensor(np.ascontiguousarray(bn), device="PYTHON")
  if name.startswith("a transposed B"): b = Tensor(np.ascontiguousarray(bn.T), device="PYTHON").T
  names = kernel_names(a @ b)
  assert not any(n.startswith("E") for n in names), names
  np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-5, atol=1e-5)
