"""The TC opt: a matmul-shaped reduction computed by one of the device's matrix instructions (a `TensorCore` of its renderer).

A kernel qualifies when a REDUCE sums products, REDUCE(ADD, x * y, ..., k, ...), in the instruction's output dtype, with x
and y of its input dtype (or cast from it): x's index moves with an output axis m that y's does not, y's with an output
axis n that x's does not, and both with the reduce axis k. Any layout does, a convolution's (k one of its reduce axes,
the others left as loops) and a batched matmul's (the batch axes left as they are) too; `matches` lists the (m, n, k)
choices, the opt's axis picks one.

The opt then pads m, n and k to multiples of the instruction's (M, N, K) (PADTO: the padded part masked), and changes
variables: m = m'*M + row, n = n'*N + col, k = k'*K + kk, where (row, col, kk) are what the layout puts in each lane's
registers. A WARP axis w numbers the lanes; each lane's A fragment is a STACK of x at the (row, kk) of its elements, its
B fragment y at the (kk, col) of its own; WMMA(A, B, 0) is their product, summed over k' (and the other reduce axes);
an UPCAST axis u picks which of the lane's C elements a copy of the kernel's store writes, at m = m'*M + row(w, u),
n = n'*N + col(w, u). Expand copies the store once per element; on a GPU the WARP axis becomes lidx0, exactly one warp.
"""
from __future__ import annotations

from dataclasses import dataclass

from tinyspec.engine.rangeify import reduce_identity
from tinyspec.renderer import TensorCore
from tinyspec.uop.ops import AxisType, Ops
from tinyspec.uop.uop import UOp

OUTPUT = (AxisType.LOOP, AxisType.GLOBAL)

@dataclass(frozen=True)
class Match:
  """One way a kernel's reduction is a matmul: REDUCE `red` sums a * b, a moving with output axis m, b with n, both with k."""
  red: UOp
  a: UOp
  b: UOp
  m: UOp
  n: UOp
  k: UOp

def _operand(x: UOp, tc: TensorCore) -> UOp | None:
  """x as a value of the instruction's input dtype: x itself, what it was cast from, or a padded one (a convolution's
  input: WHERE(inside, cast(v), 0) is WHERE(inside, v, 0) cast), where that is exact; None where it is not."""
  while x.op is Ops.CAST and x.dtype is not tc.dtype_in: x = x.src[0]
  if x.dtype is tc.dtype_in: return x
  if x.op is Ops.WHERE and x.src[2].op is Ops.CONST and x.src[2].arg[0] == 0 and (v := _operand(x.src[1], tc)) is not None:
    return x.src[0].where(v, UOp.const(0, tc.dtype_in))
  return None

def _products(red: UOp, tc: TensorCore) -> tuple[UOp, UOp] | None:
  """(x, y) when REDUCE `red` sums x * y as `tc` computes it."""
  if red.arg[0] is not Ops.ADD or red.dtype is not tc.dtype_out: return None
  val, pad = red.src[0], None
  # a padded reduce axis adds the identity outside the range: WHERE(inside, x * y, 0) -> (WHERE(inside, x, 0)) * y
  if val.op is Ops.WHERE and val.src[2].op is Ops.CONST and val.src[2].arg[0] == reduce_identity(Ops.ADD, red.dtype).arg[0]:
    pad, val = val.src[0], val.src[1]
  if val.op is Ops.CAST and val.src[0].op is Ops.MUL: val = val.src[0]  # a product rounded to the inputs' dtype (half * half)
  if val.op is not Ops.MUL or (x := _operand(val.src[0], tc)) is None or (y := _operand(val.src[1], tc)) is None: return None
  return (x if pad is None else pad.where(x, UOp.const(0, x.dtype)), y)

def _growth(r: UOp, size: int) -> float: return -(-r.size // size) * size / r.size  # the work padding r to a multiple adds

def matches(kernel: UOp, tc: TensorCore) -> list[Match]:
  """Every (m, n, k) choice of a reduction of `kernel` the instruction `tc` can compute, the preferred first: the least
  padding (a convolution's k is its channels, not its 3-wide window), then k the innermost reduce axis, n the innermost
  output axis."""
  out = []
  for red in (u for u in kernel.toposort() if u.op is Ops.REDUCE):
    if (xy := _products(red, tc)) is None: continue
    for a, b in (xy, xy[::-1]):
      ra, rb = ({r for r in v.toposort() if r.op is Ops.RANGE and r.size} for v in (a, b))
      ks = sorted((r for r in red.src[1:] if r in ra and r in rb and r.axis_type is AxisType.REDUCE), key=lambda r: -r.axis_id)
      ms, ns = (sorted((r for r in s - t if r.axis_type in OUTPUT), key=lambda r: -r.axis_id) for s, t in ((ra, rb), (rb, ra)))
      out += [Match(red, a, b, m, n, k) for k in ks for n in ns for m in ms]
  mm, nn, kk = tc.dims
  return sorted(out, key=lambda t: (_growth(t.m, mm) * _growth(t.n, nn) * _growth(t.k, kk), -t.k.axis_id, -t.n.axis_id, -t.m.axis_id))

def _place(tc: TensorCore, operand: str, lane: UOp, element: UOp | int) -> dict[str, UOp]:
  """{dim letter: offset} of the value `element` of lane `lane` in `operand` (an expression of both, the layout's bits)."""
  pos: dict[str, UOp] = {}
  for bits, value in zip(tc.bits(operand), (lane, element)):
    for i, b in enumerate(bits):
      if b is None: continue
      bit = (value >> i) & 1 if isinstance(value, int) else (value // (1 << i)) % 2
      pos[b[0]] = pos.get(b[0], UOp.const(0)) + bit * (1 << b[1])
  return pos

def _fragment(x: UOp, tc: TensorCore, operand: str, lane: UOp, base: dict[str, tuple[UOp, UOp]]) -> UOp:
  """The STACK of x at each of the lane's elements of `operand`: each axis r of base[d] = (r, outer) at outer + offset."""
  count = tc.elements["ABC".index(operand)]
  def at(e: int) -> UOp:
    pos = _place(tc, operand, lane, e)
    return x.substitute({r: outer + pos.get(d, UOp.const(0)) for d, (r, outer) in base.items()})
  return UOp(Ops.STACK, tuple(at(e) for e in range(count)))

def lower(kernel: UOp, t: Match, tc: TensorCore, ids: int) -> tuple[UOp, dict[UOp, UOp], dict[UOp, list[UOp]]]:
  """Match `t` (its axes multiples of tc.dims) computed by WMMA, new axes numbered from `ids`: the kernel with its REDUCE
  replaced, the value m and n take everywhere else, and the axes that stand in each old axis' place (WARP and UPCAST last)."""
  (mm, nn, kk), count = tc.dims, tc.elements[2]
  warp = UOp.range(tc.threads, ids, AxisType.WARP)
  def outer(r: UOp, size: int, i: int) -> UOp: return UOp.range(r.size // size, ids + i, r.axis_type) if r.size > size else UOp.const(0)
  m, n, k = outer(t.m, mm, 1), outer(t.n, nn, 2), outer(t.k, kk, 3)
  elem = UOp.range(count, ids + 4, AxisType.UPCAST) if count > 1 else UOp.const(0)
  base = {"m": (t.m, m * mm), "n": (t.n, n * nn), "k": (t.k, k * kk)}
  zeros = UOp(Ops.STACK, tuple(UOp.const(0, tc.dtype_out) for _ in range(count)))
  value = UOp(Ops.WMMA, (_fragment(t.a, tc, "A", warp, base), _fragment(t.b, tc, "B", warp, base), zeros), tc).index(elem)
  rest = tuple(r for r in t.red.src[1:] if r is not t.k) + ((k,) if k.op is Ops.RANGE else ())
  c = _place(tc, "C", warp, elem)
  kernel = kernel.substitute({t.red: UOp(Ops.REDUCE, (value, *rest), t.red.arg) if rest else value})
  ranges = lambda *xs: [x for x in xs if x.op is Ops.RANGE]  # noqa: E731
  return kernel, {t.m: m * mm + c["m"], t.n: n * nn + c["n"]}, {t.m: ranges(m), t.n: ranges(n), t.k: ranges(k), None: ranges(warp, elem)}
