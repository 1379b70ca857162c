"""Operand packing, a schedule pass for CPU-like devices (a renderer with `pack_width`), between rangeify and optimize.

A matmul-shaped kernel reads its second operand (B of A @ B) along the reduction with a large stride: each step of k lands
on a new cache line and, for power-of-two row lengths, in the same few cache sets, so the register tile the optimizer
builds waits on memory (CPU matmul 2048: 110 GFLOP/s against numpy's 258). Packing copies that operand first, in a kernel
of its own, into panels of `pack_width` columns stored one after another, `[j // W][k][j % W]`, and the matmul reads the
copy, contiguously (320 GFLOP/s measured with B packed by hand).

A transposed B (x @ w.T, nn.Linear's layout) is contiguous along k instead; the register tile's vectors run along the
output's contiguous axis j, across w's rows, and gather element by element (1024x64 @ (256x64).T: 29 GFLOP/s against 210
for the plain layout). The same panels make them contiguous.

An operand is packed when the kernel reduces, stores one output, and reads the operand (ungated) at an index that is
exactly affine in its ranges, along an output axis j of a multiple of W, with no dependence on another output axis of
at least PACK_MIN_REUSE (so the copy is read that many times over), and either stride 1 along j and a stride of at least
PACK_MIN_STRIDE along a reduce axis (a wide B), or stride 1 along a reduce axis with j the output's contiguous axis (a
transposed B). The copy may not be larger than the operand (no duplication, as a convolution's windows would give).
Everything else is left as rangeify made it.
"""
from __future__ import annotations

import math

from tinyspec.dtype import DType
from tinyspec.engine.rangeify import Schedule, ScheduleItem
from tinyspec.uop.ops import AxisType, Ops
from tinyspec.uop.rewrite import graph_rewrite
from tinyspec.uop.spec import verify_between_stages
from tinyspec.uop.symbolic import sym
from tinyspec.uop.uop import UOp

PACK_MIN_STRIDE = 1024  # elements a reduce step jumps in the operand; below it a second kernel costs more than it saves
# (matmul 512 on Zen 5: 213 GFLOP/s unpacked, 185 packed)
PACK_MIN_REUSE = 64    # how many times over the packed copy must be read to pay for writing it

def affine(idx: UOp) -> tuple[int, dict[UOp, int]] | None:
  """idx as (offset, {range: stride}) when it is exactly a constant plus constant multiples of RANGEs, else None."""
  offset, strides, todo = 0, {}, [(idx, 1)]  # (a term, what it is multiplied by)
  while todo:
    u, scale = todo.pop()
    if u.op is Ops.ADD: todo.extend((s, scale) for s in u.src)
    elif u.op is Ops.CONST: offset += u.arg[0] * scale
    elif u.op is Ops.RANGE: strides[u] = strides.get(u, 0) + scale
    elif u.op is Ops.MUL and u.src[1].op is Ops.CONST: todo.append((u.src[0], scale * u.src[1].arg[0]))
    else: return None
  return offset, strides

def _packable(kernel: UOp, width: int) -> tuple[UOp, int, dict[UOp, int], UOp] | None:
  """(the LOAD to pack, its offset and strides, the output axis j its panels run along) for the first operand worth packing
  (module docstring): a wide B, stride 1 along j; or a transposed B, stride 1 along a reduce axis, j the output's contiguous axis."""
  nodes = kernel.toposort()
  stores = [u for u in nodes if u.op is Ops.STORE]
  if len(stores) != 1 or not any(u.op is Ops.REDUCE for u in nodes) or (out := affine(stores[0].src[0].src[1])) is None: return None
  outputs = set(out[1])
  out_contiguous = next((r for r, s in out[1].items() if s == 1), None)
  for ld in (u for u in nodes if u.op is Ops.LOAD and len(u.src) == 1 and u.src[0].src[0].op is Ops.PARAM):
    if (lin := affine(ld.src[0].src[1])) is None or any(r.size is None for r in lin[1]): continue
    offset, strides = lin
    reduce_strides = [s for r, s in strides.items() if r.axis_type is AxisType.REDUCE]
    if not reduce_strides or not any(r not in strides and (r.size or 0) >= PACK_MIN_REUSE for r in outputs): continue
    if (j := next((r for r, s in strides.items() if s == 1 and r in outputs), None)) is not None:
      if max(reduce_strides) < PACK_MIN_STRIDE: continue
    elif 1 in reduce_strides and out_contiguous in strides: j = out_contiguous
    else: continue
    if j.size % width: continue
    if math.prod(r.size for r in strides) > ld.src[0].src[0].shape[0]: continue  # the copy would duplicate elements
    return ld, offset, strides, j
  return None

def _layout(strides: dict[UOp, int], j: UOp, width: int) -> list[tuple[UOp | None, int]]:
  """The packed copy's dimensions, outermost first, as (range, size): the other output axes, j's panels (range None
  stands for j // width), the reduce axes, then j % width (range j). Within each group, by the operand's stride."""
  by_stride = sorted((r for r in strides if r is not j), key=lambda r: -strides[r])
  outer = [(r, r.size) for r in by_stride if r.axis_type is not AxisType.REDUCE]
  inner = [(r, r.size) for r in by_stride if r.axis_type is AxisType.REDUCE]
  return [*outer, (None, j.size // width), *inner, (j, width)]

def _packed_index(dims: list[tuple[UOp | None, int]], value: dict[UOp | None, UOp]) -> UOp:
  """The row-major index into the packed copy of the element whose dimensions take `value`."""
  idx = UOp.const(0)
  for d, size in dims: idx = idx * size + value[d]
  return idx

def _pack_kernel(dims: list[tuple[UOp | None, int]], offset: int, strides: dict[UOp, int], j: UOp, width: int, dtype: DType,
                 src_size: int) -> UOp:
  """A kernel copying the operand (PARAM 1) into its packed layout (PARAM 0)."""
  rngs = [UOp.range(size, i) for i, (_, size) in enumerate(dims)]
  at = {d: r for (d, _), r in zip(dims, rngs)}
  jval = at[None] * width + at[j]
  src_idx = UOp.const(offset) + sum((UOp.const(s) * (jval if r is j else at[r]) for r, s in strides.items()), UOp.const(0))
  total = math.prod(size for _, size in dims)
  dst = UOp(Ops.PARAM, (UOp.vec((total,)),), (0, dtype)).index(_packed_index(dims, at))
  src = UOp(Ops.PARAM, (UOp.vec((src_size,)),), (1, dtype)).index(src_idx)
  ast = UOp.sink(UOp(Ops.END, (UOp(Ops.STORE, (dst, UOp(Ops.LOAD, (src,)))), *reversed(rngs))))
  return graph_rewrite(ast, sym)

def _renumber_params(ast: UOp, bufs: tuple[int, ...]) -> ScheduleItem:
  """The kernel with the PARAMs it still reads numbered 0.. in order, and their schedule buffers."""
  used = sorted((u for u in ast.toposort() if u.op is Ops.PARAM and isinstance(u.arg[0], int)), key=lambda u: u.arg[0])
  ast = ast.substitute({p: p.replace(arg=(k, *p.arg[1:])) for k, p in enumerate(used) if p.arg[0] != k})
  return ScheduleItem(ast, tuple(bufs[p.arg[0]] for p in used))

def pack_operands(sched: Schedule, target) -> Schedule:
  """`sched` with each packable operand (module docstring) copied by a kernel of its own first. `target(item)` is
  (pack width, device) for the device that runs `item`; a width below 2 packs nothing."""
  out = Schedule(sched.n_args, [], list(sched.buffers), sched.outputs)
  for item in sched.items:
    width, device = (0, None) if item.ast.op is Ops.COPY else target(item)
    if width < 2 or (found := _packable(item.ast, width)) is None:
      out.items.append(item); continue
    ld, offset, strides, j = found
    param = ld.src[0].src[0]
    dims = _layout(strides, j, width)
    total = math.prod(size for _, size in dims)
    out.buffers.append((total, ld.dtype, device))
    packed_id = sched.n_args + len(out.buffers) - 1
    pack = _pack_kernel(dims, offset, strides, j, width, ld.dtype, param.shape[0])
    verify_between_stages(pack, "kernel")
    out.items.append(ScheduleItem(pack, (packed_id, item.bufs[param.arg[0]])))
    new_param = UOp(Ops.PARAM, (UOp.vec((total,)),), (len(item.bufs), ld.dtype))
    value = {r: r for r in strides} | {None: j // width, j: j % width}
    ast = graph_rewrite(item.ast.substitute({ld: UOp(Ops.LOAD, (new_param.index(_packed_index(dims, value)),))}), sym)
    item = _renumber_params(ast, (*item.bufs, packed_id))  # the operand may have no other reader left
    verify_between_stages(item.ast, "kernel")
    out.items.append(item)
  return out
