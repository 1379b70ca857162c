"""Reductions over axes that are not plain memory: expanded (a size-1 axis stretched), broadcast by an elementwise op,
permuted and padded, alone and mixed, over one axis, several and all, with and without keepdim. A kernel reading an
expanded input has loops its reduced value does not depend on; the accumulator must still start afresh in each of their
iterations (issue 12: sums over such axes came out doubled)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data

# a step does the same to a numpy array and to a Tensor: (numpy version, Tensor version)
Step = tuple[Callable[[np.ndarray], np.ndarray], Callable[[Tensor], Tensor]]

def expand(*shape: int) -> Step: return lambda x: np.broadcast_to(x, shape), lambda t: t.expand(*shape)
def permute(*order: int) -> Step: return lambda x: x.transpose(order), lambda t: t.permute(*order)
def pad(*pads: tuple[int, int]) -> Step: return lambda x: np.pad(x, pads), lambda t: t.pad(pads)
def times(shape: tuple[int, ...], seed: int) -> Step:
  """Multiplied by a tensor of `shape`, broadcasting both ways (right-aligned, as numpy): the new axes are broadcast ones."""
  y = data(dtypes.float32, shape, seed=seed, lo=0.5, hi=1.5)
  return lambda x: x * y, lambda t: t * Tensor(y, device=t.device)

# name: (source shape, steps); every layout has at least one axis the source does not vary over
LAYOUTS: dict[str, tuple[tuple[int, ...], list[Step]]] = {
  "expand_inner_outer": ((2, 1, 3, 1), [expand(2, 4, 3, 5)]),
  "expand_first": ((1, 4, 3, 1), [expand(3, 4, 3, 5)]),
  "expand_two_by_two": ((2, 1, 2, 1), [expand(2, 2, 2, 2)]),
  "expand_around": ((1, 3, 1, 1), [expand(2, 3, 4, 3)]),
  "expand_alternating": ((1, 3, 1, 4, 1), [expand(2, 3, 2, 4, 2)]),
  "expand_last": ((4, 3, 1), [expand(4, 3, 5)]),
  "expand_permute": ((2, 1, 3, 1), [expand(2, 3, 3, 2), permute(3, 1, 0, 2)]),
  "permute_expand": ((3, 1, 2), [permute(1, 2, 0), expand(4, 2, 3)]),
  "broadcast_both": ((4, 1, 3), [times((1, 5, 1), seed=7)]),
  "broadcast_expand": ((1, 3, 1), [times((4, 1, 1, 1), seed=8), expand(4, 2, 3, 5)]),
  "expand_pad": ((2, 3, 1), [expand(2, 3, 4), pad((1, 0), (0, 1), (2, 1))]),
  "pad_expand": ((1, 3, 1), [pad((0, 0), (1, 1), (0, 0)), expand(2, 5, 3)]),
  "expand_alternating_pad": ((1, 3, 1, 4, 1), [expand(2, 3, 2, 4, 2), pad((0, 0), (1, 0), (0, 0), (0, 1), (1, 0))]),
  "expand_permute_pad": ((3, 1, 2), [expand(3, 4, 2), permute(2, 0, 1), pad((0, 1), (1, 1), (0, 0))]),
  "broadcast_permute_pad": ((2, 1, 3), [times((4, 1), seed=9), permute(1, 2, 0), pad((1, 1), (0, 0), (0, 1))]),
}

def axis_sets(ndim: int) -> list[int | tuple[int, ...] | None]:
  """Each axis alone (the last one negative), the first and last together, all but the first, and all."""
  singles: list[int | tuple[int, ...] | None] = [*range(ndim - 1), -1]
  return singles + [(0, ndim - 1), tuple(range(1, ndim)), None] if ndim > 2 else singles + [None]

def _apply(x, steps: list[Step], which: int):
  """x (a numpy array for which=0, a Tensor for which=1) moved by each step in turn."""
  for step in steps: x = step[which](x)
  return x

def _ndim(name: str) -> int: return _apply(np.zeros(LAYOUTS[name][0], np.float32), LAYOUTS[name][1], 0).ndim

# keepdim alternates, so each layout is reduced both ways
CASES = [(name, axes, (i + j) % 2 == 1) for i, name in enumerate(LAYOUTS) for j, axes in enumerate(axis_sets(_ndim(name)))]

@pytest.mark.parametrize("name, axes, keepdim", CASES, ids=[f"{n}-{a}-{'keep' if k else 'drop'}" for n, a, k in CASES])
def test_reduce_over_layout(dev, name, axes, keepdim):
  shape, steps = LAYOUTS[name]
  x = data(dtypes.float32, shape, seed=2, lo=-2, hi=2)  # signed: a sum counted twice differs from the sum
  p = data(dtypes.float32, shape, seed=1, lo=1.2, hi=2)  # away from 1: a product counted twice differs from the product
  for values, op, tol in ((x, "sum", 1e-5), (x, "max", 0), (p, "prod", 1e-5)):
    want = getattr(np, op)(np.ascontiguousarray(_apply(values, steps, 0)), axis=axes, keepdims=keepdim)
    got = getattr(_apply(Tensor(values, device=dev), steps, 1), op)(axes, keepdim=keepdim)
    check(got, want.astype(np.float32), rtol=tol, atol=tol)
