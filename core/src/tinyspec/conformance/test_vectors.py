"""Vector code on the device under test. An UPCAST range over consecutive elements becomes one vector load or store
(expand), which instruction selection splits into the widths the renderer declares (`vector_widths`, `vector_dtypes`);
the device must run what comes out, and the optimizer's own choices must use the vectors the device has: a matmul's
register tile everywhere, an elementwise kernel's output on a GPU."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from tinyspec import Device, Tensor, dtypes
from tinyspec.conformance.support import check, data
from tinyspec.engine import kernels, realize
from tinyspec.engine import optimize as O
from tinyspec.engine.isel import vector_width
from tinyspec.renderer import Renderer
from tinyspec.uop import AxisType, Ops, UOp


@contextmanager
def compiled(opts: Callable[[UOp, Renderer], list[O.Opt]] | None = None) -> Iterator[list[realize.CompiledKernel]]:
  """Within, kernels compile afresh (with `opts(kernel, renderer)` where given, else the optimizer's own); the list it
  yields holds them once the block is done. The in-process caches are emptied before and after."""
  saved, out = kernels.optimize, []
  if opts is not None: kernels.optimize = lambda kernel, renderer: O.optimize(kernel, renderer, opts(kernel, renderer))
  realize._kernels.clear(); realize._schedules.clear()
  try: yield out
  finally:
    out.extend(realize._kernels.values())
    kernels.optimize = saved
    realize._kernels.clear(); realize._schedules.clear()

def elementwise_and_matmul(dev: str) -> tuple[realize.CompiledKernel, realize.CompiledKernel]:
  """x + 1 and x @ x for a (64, 64) float32 x on `dev`, checked against numpy; their kernels as compiled, whose `source`
  is what DEBUG=4 shows (for a plugin's tests of its vector code)."""
  x = data(dtypes.float32, (64, 64), seed=5)
  with compiled() as kernels: got = (Tensor(x, device=dev) + 1).numpy(), (Tensor(x, device=dev) @ Tensor(x, device=dev)).numpy()
  check(got[0], x + 1)
  check(got[1], x @ x, rtol=1e-4, atol=1e-4)
  elementwise, matmul = sorted(kernels, key=lambda k: k.name.startswith("r"))  # E_... before r_...
  return elementwise, matmul

def vector_loads(k: realize.CompiledKernel) -> list[int]:
  """The lane counts of a kernel's vector loads."""
  return [u.shape[0] for u in k.linear.src if u.op is Ops.LOAD and u.shape]

def upcast_last(n: int) -> Callable[[UOp, Renderer], list[O.Opt]]:
  """Opts that upcast a kernel's last output axis by n (it is the contiguous one in the kernels below)."""
  def opts(kernel: UOp, renderer: Renderer) -> list[O.Opt]:
    rngs = O.axes(O._retype(kernel, AxisType.LOOP, AxisType.GLOBAL) if O.is_gpu(renderer) else kernel)
    last = max(i for i, r in enumerate(rngs) if r.axis_type in (AxisType.LOOP, AxisType.GLOBAL))
    return [O.Opt(O.OptOps.SPLIT, last, (n, AxisType.UPCAST, False))]
  return opts

@pytest.mark.parametrize("n", [2, 4, 8, 16])
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32, dtypes.float16])
def test_upcast_loads_and_stores_in_the_widths_the_device_has(dev, dt, n):
  renderer = Device[dev].renderer
  if dt not in renderer.supported_dtypes: pytest.skip(f"device {dev} does not support dtype {dt.name}")
  a, b = data(dt, (8, 32), seed=1), data(dt, (8, 32), seed=2)
  with compiled(upcast_last(n)) as kernels: got = (Tensor(a, device=dev) + Tensor(b, device=dev) * 3).numpy()
  check(got, a + b * np.array(3, dt.np), rtol=2e-3 if dt is dtypes.float16 else 1e-6)
  # a vector of n is read in the widest vectors the device has that divide it (the index, a multiple of n, is aligned)
  width = vector_width(renderer, dt, n, UOp.const(0))
  assert [sorted(set(vector_loads(k))) for k in kernels] == [[width] if width > 1 else []], [k.source for k in kernels]

def test_the_optimizer_uses_vectors(dev):
  renderer = Device[dev].renderer
  x, y = data(dtypes.float32, (64, 64), seed=3), data(dtypes.float32, (64, 64), seed=4)
  with compiled() as kernels: got = (Tensor(x, device=dev) @ Tensor(y, device=dev)).numpy()
  check(got, x @ y, rtol=1e-4, atol=1e-4)
  has_vectors = dtypes.float32 in renderer.vector_dtypes and max(renderer.vector_widths) > 1
  # a matmul's register tile reads each row of B's tile as a vector
  assert any(vector_loads(k) for k in kernels) == (has_vectors and renderer.max_upcast > 1), [k.source for k in kernels]
  with compiled() as kernels: got = (Tensor(x, device=dev) * 2 + Tensor(y, device=dev)).numpy()
  check(got, x * 2 + y)
  # a GPU lane reads and writes float4s of an elementwise kernel; a CPU's compiler vectorizes its loop itself
  assert any(vector_loads(k) for k in kernels) == (has_vectors and O.is_gpu(renderer)), [k.source for k in kernels]
