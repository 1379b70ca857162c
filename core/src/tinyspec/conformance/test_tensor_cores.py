"""Tensor cores on the device under test: every entry of its renderer's `tensor_cores` computes matmuls (sizes that need
padding among them), a batched matmul and a convolution through WMMA, checked against numpy. A device that declares no
tensor cores but runs kernels in the interpreter (PYTHON) runs every table the installed plugins declare, so each table's
lowering is exercised here whatever GPU this machine lacks. `run_tensor_core_cases` serves plugins' own tests too."""
from __future__ import annotations

import numpy as np
import pytest

from tinyspec import Device, Tensor, dtypes
from tinyspec.conformance.support import check, data, tensor
from tinyspec.conformance.test_opts import conv3x3
from tinyspec.conformance.test_vectors import compiled
from tinyspec.engine import optimize as O
from tinyspec.engine import tensorcore
from tinyspec.renderer import TensorCore
from tinyspec.uop import Ops


def _tc_opts(tc: TensorCore):
  def opts(kernel, renderer): return [O.Opt(O.OptOps.TC, 0, tc)] if tensorcore.matches(kernel, tc) else None
  return opts

def _operands(tc: TensorCore, dev: str, *shapes: tuple[int, ...]) -> tuple[list[np.ndarray], list[Tensor]]:
  """Test data in tc's input dtype (small integers for int8), as numpy arrays and Tensors on dev."""
  xs = [data(tc.dtype_in, s, seed=i, lo=-3, hi=3) for i, s in enumerate(shapes)]
  return xs, [tensor(x, tc.dtype_in, dev) for x in xs]

def _product(tc: TensorCore, a: Tensor, b: Tensor) -> Tensor:
  """a @ b summed in tc's output dtype: float32 from 16-bit floats, int32 from int8; a 16-bit sum as its own reduction."""
  if tc.dtype_out == dtypes.float32: return a.float() @ b.float()
  if tc.dtype_out == dtypes.int32: return a.cast(dtypes.int32) @ b.cast(dtypes.int32)
  return (a.unsqueeze(-1) * b.unsqueeze(-3))._reduce(Ops.ADD, (a.ndim - 1,), False)  # a float16 sum, as the instruction adds

def _tolerance(tc: TensorCore) -> dict:
  # a 16-bit result rounds each of its sums; tf32 (NVIDIA's float32 inputs) keeps 10 bits of the inputs' mantissas
  if tc.dtype_out.itemsize < 4: return {"rtol": 1e-2, "atol": 0.5}
  return {"rtol": 1e-5, "atol": 1e-4} if tc.dtype_in.itemsize < 4 else {"rtol": 2e-3, "atol": 5e-2}

MATMULS = [(32, 64, 32), (40, 56, 24), (16, 16, 16)]  # (m, k, n): aligned, padded on every axis, one instruction's worth

def run_tensor_core_cases(dev: str, tc: TensorCore) -> None:
  """Matmuls, a batched matmul and (for float inputs) a convolution on `dev`, each through WMMA with `tc` where it
  matches, checked against numpy; fails if a WMMA of `tc` was never used."""
  used = []
  with compiled(_tc_opts(tc)) as kernels:
    for m, k, n in MATMULS:
      (a, b), (ta, tb) = _operands(tc, dev, (m, k), (k, n))
      check(_product(tc, ta, tb).cast(dtypes.float32).numpy(), a.astype(np.float64) @ b.astype(np.float64), **_tolerance(tc))
    (a, b), (ta, tb) = _operands(tc, dev, (3, 24, 40), (3, 40, 16))
    check(_product(tc, ta, tb).cast(dtypes.float32).numpy(), np.matmul(a.astype(np.float64), b.astype(np.float64)), **_tolerance(tc))
    if dtypes.is_float(tc.dtype_in) and tc.dtype_out == dtypes.float32:
      (x, w), (tx, tw) = _operands(tc, dev, (2, 16, 16, 16), (32, 16, 3, 3))
      check(tx.float().conv2d(tw.float(), padding=1).numpy(), conv3x3(x.astype(np.float64), w.astype(np.float64)), **_tolerance(tc))
  used = [k for k in kernels if any(u.op is Ops.WMMA and u.arg == tc for u in k.linear.src)]
  assert len(used) >= len(MATMULS) + 1, f"{tc!r} was used by {len(used)} kernels, not every matmul's"

def _tables(dev: str) -> list[TensorCore]:
  """The device's own tensor cores; on an interpreter-run device without any, every available device's."""
  if own := list(Device[dev].renderer.tensor_cores): return own
  if Device[dev].renderer.device != "PYTHON": return []
  names = [row.name for row in Device.listing() if row.status == "available"]
  return list(dict.fromkeys(tc for name in names for tc in Device[name].renderer.tensor_cores))

def test_tensor_cores(dev):
  tables = _tables(dev)
  if not tables: pytest.skip(f"device {dev} declares no tensor cores (and no installed plugin does, for the interpreter)")
  renderer = Device[dev].renderer
  saved = renderer.tensor_cores
  for tc in tables:
    if not {tc.dtype_in, tc.dtype_out} <= renderer.supported_dtypes: continue
    renderer.tensor_cores = saved or (tc,)  # the interpreter runs a table it was lent for the time of its cases
    try: run_tensor_core_cases(dev, tc)
    finally: renderer.tensor_cores = saved

def test_hand_coded_opts_use_tensor_cores(dev):
  renderer = Device[dev].renderer
  tc = next((t for t in renderer.tensor_cores if t.dtype_in == dtypes.float16 and t.dtype_out == dtypes.float32), None)
  if tc is None: pytest.skip(f"device {dev} has no float16 -> float32 tensor core")
  (a, b), (ta, tb) = _operands(tc, dev, (64, 64), (64, 64))
  with compiled() as kernels: got = (ta @ tb).numpy()  # a half matmul sums in float32
  check(got.astype(np.float32), (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16).astype(np.float32), rtol=2e-3, atol=2e-2)
  assert any(u.op is Ops.WMMA for k in kernels for u in k.linear.src), [k.source for k in kernels]
