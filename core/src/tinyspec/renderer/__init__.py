"""What a device's code generator declares and does: the `Renderer` base every plugin's renderer subclasses.

The pipeline reads a renderer's class attributes to decide what to build (which ops to decompose, how big a workgroup may
be, whether shared memory or tensor cores exist), then hands the finished LINEAR program to `render` for source text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tinyspec.dtype import ALL, DType, dtypes
from tinyspec.uop.ops import GroupOp, Ops
from tinyspec.uop.uop import UOp

STORABLE = frozenset(ALL) - {dtypes.index, dtypes.void}

_OPERANDS = (("A", "mk"), ("B", "kn"), ("C", "mn"))  # each operand's rows and columns, as letters of dims (M, N, K)

@dataclass(frozen=True)
class TensorCore:
  """One matrix instruction of a device: D(MxN) = A(MxK) @ B(KxN) + C, computed together by `threads` threads (a warp),
  each holding `elements` = (of A, of B, of C/D) values in registers, placed as `layout` says. The optimizer's TC opt
  (engine/tensorcore.py) builds the WMMA for it, the PYTHON device runs it (interpreter/wmma.py), renderers emit it."""
  dims: tuple[int, int, int]
  """(M, N, K), each a power of two."""
  threads: int
  elements: tuple[int, int, int]
  dtype_in: DType
  dtype_out: DType
  name: str = ""
  """The instruction, e.g. "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" or "v_wmma_f32_16x16x16_f16"."""
  layout: tuple[str, str, str] = ("", "", "")
  """Which value each lane holds, for A, B and C/D, as the vendor's manual places them: "<lane bits> | <element bits>",
  each bit of the lane number (then of the value's place in the lane's registers), lowest first, named by the bit of the
  row or column it gives: "m3" is bit 3 of A's row, "k0" bit 0 of the shared dimension, "-" a lane bit the operand does
  not vary with (two lanes holding the same value). CUDA's m16n8k16 A is "k1 k2 m0 m1 m2 | k0 m3 k3": lane 5 (binary
  00101) holds rows 1 and 9 (m0 from lane bit 2, m3 from element bit 1) of columns 2, 3, 10 and 11 (k1 from lane bit 0,
  k0 and k3 from element bits 0 and 2)."""

  def __post_init__(self):
    where = f"TensorCore {self.name or self.dims}"
    if any(d < 1 or d & (d - 1) for d in (*self.dims, self.threads, *self.elements)):
      raise ValueError(f"{where}: dims {self.dims}, threads {self.threads} and elements {self.elements} must be powers of two")
    for (op, rc), spec, count in zip(_OPERANDS, self.layout, self.elements):
      lane, elem = self.bits(op)
      if len(lane) != self.threads.bit_length() - 1 or len(elem) != count.bit_length() - 1:
        want = f"{self.threads.bit_length() - 1} lane bits | {count.bit_length() - 1} element bits"
        raise ValueError(f"{where}: layout of {op} {spec!r} needs {want}")
      want = sorted((d, b) for d in rc for b in range(self.dims["mnk".index(d)].bit_length() - 1))
      if sorted(x for x in lane + elem if x is not None) != want or None in elem:
        raise ValueError(f"{where}: layout of {op} {spec!r} must name each bit of {' '.join(f'{d}{b}' for d, b in want)} once")

  def bits(self, operand: str) -> tuple[tuple[tuple[str, int] | None, ...], tuple[tuple[str, int] | None, ...]]:
    """The layout of `operand` ("A", "B" or "C") parsed: (lane bits, element bits), each ("m", 3) for m3 or None for "-"."""
    spec = self.layout["ABC".index(operand)]
    if spec.count("|") != 1:
      raise ValueError(f"TensorCore {self.name or self.dims}: layout of {operand} {spec!r} is not '<lane bits> | <element bits>'")
    def parse(tok: str): return None if tok == "-" else (tok[0], int(tok[1:])) if re.fullmatch(r"[mnk]\d+", tok) else tok
    lane, elem = (tuple(parse(t) for t in part.split()) for part in spec.split("|"))
    if bad := [t for t in lane + elem if isinstance(t, str)]:
      raise ValueError(f"TensorCore {self.name or self.dims}: layout token {bad[0]!r} is not m<i>, n<i>, k<i> or -")
    return lane, elem

  def coords(self, operand: str, lane: int, element: int) -> tuple[int, int]:
    """(row, column) of the value `element` of lane `lane` in `operand`: the layout applied to two numbers."""
    pos = {"m": 0, "n": 0, "k": 0}
    for bits, value in zip(self.bits(operand), (lane, element)):
      for i, b in enumerate(bits):
        if b is not None and value >> i & 1: pos[b[0]] += 1 << b[1]
    rows, cols = dict(_OPERANDS)[operand]
    return pos[rows], pos[cols]

  def __repr__(self): return f"TensorCore({self.name or 'x'.join(map(str, self.dims))}, {self.dtype_in.name} -> {self.dtype_out.name})"

class Renderer:
  """Turns a linearized kernel into source code for one device. Subclasses set the class attributes and implement `render`.

      class MyRenderer(Renderer):
        device = "MYDEV"
        native = frozenset({Ops.EXP2, Ops.SQRT})    # rendered directly, not decomposed into primitives
        has_local, has_shared, local_max, shared_max = True, True, (256, 256, 64), 48 * 1024
        def render(self, name, linear): ...

  The defaults describe a plain sequential target: no workgroups, no shared memory, no tensor cores, every storable dtype.
  A renderer must be cheap to build and import nothing heavy; it may be created where its device is unavailable, so that
  kernels can still be rendered (and checked) on any machine."""
  device: str = ""
  """The device whose code this renders, e.g. "CUDA"."""
  native: frozenset[Ops] = frozenset()
  """Ops of `GroupOp.Decomposed` (EXP2, SIN, SQRT, DIV ...) this renderer emits directly; the others are rewritten into
  primitives before rendering. The primitives of `GroupOp.ALU` are always supported."""
  has_local: bool = False
  """Whether kernels run as a grid of workgroups with local (per-workgroup) indices, so LOCAL axes can be used."""
  has_shared: bool = False
  """Whether workgroup-shared memory (AddrSpace.LOCAL buffers) exists."""
  global_max: tuple[int, ...] | None = None
  """The largest grid size per dimension, or None when the grid is unbounded or there is none."""
  local_max: tuple[int, ...] | None = None
  """The largest workgroup size per dimension, or None when `has_local` is False."""
  shared_max: int = 0
  """Bytes of shared memory one workgroup may use."""
  max_upcast: int = 32
  """The largest product of UPCAST and UNROLL axis sizes the optimizer may give one kernel (bounds register pressure)."""
  pack_width: int = 0
  """The panel width (columns) a matmul's reused operand is copied into before the kernel, so the kernel reads it
  contiguously (engine/pack.py); 0 never packs. A CPU sets its widest vector: its register tile's width."""
  group_lanes: int = 256
  """The most lanes a GROUP_REDUCE splits one reduction over. Every lane then reads each partial once, so a device that
  runs a workgroup's lanes one after another (OpenCL on a CPU) wants few."""
  tensor_cores: tuple[TensorCore, ...] = ()
  """The matrix instructions this device has, one entry per shape and dtype combination; empty when there are none."""
  supported_dtypes: frozenset[DType] = STORABLE
  """Scalar dtypes this renderer can load, store and compute in; kernels using others are refused before rendering."""
  threads: int = 1
  """How many threads one kernel may run on at once (its THREAD axis split over them); 1 runs each kernel on one thread.
  A renderer may set it per instance (from the core count, or an environment override)."""
  split_min_work: int = 0
  """With `threads` > 1, the least work (innermost iterations of its loop nest) for which the optimizer splits a kernel
  over a THREAD axis: below it, starting threads would cost more than they save."""
  vector_widths: tuple[int, ...] = (1,)
  """The vector lengths, in elements, the device loads and stores at once (its vector types, or its SIMD widths); (1,)
  for a scalar target. Expand makes an UPCAST or UNROLL range that walks memory contiguously one vector access;
  instruction selection splits it into the widest of these that divides it. The optimizer upcasts by the widest."""
  vector_dtypes: frozenset[DType] = frozenset()
  """The dtypes whose vectors (`vector_widths`) the renderer loads, stores and reads lanes of; others stay scalar."""
  vector_aligned: bool = False
  """Whether a vector access needs an address that is a multiple of its size (CUDA's float4): it is then used only where
  the index provably is one."""

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    # a bad table would otherwise surface much later, deep in the pipeline and far from the plugin that wrote it
    if not isinstance(cls.native, frozenset) or not cls.native <= GroupOp.Decomposed:
      bad = sorted(o.name for o in cls.native - GroupOp.Decomposed) if isinstance(cls.native, frozenset) else cls.native
      raise TypeError(f"{cls.__name__}.native must be a frozenset of GroupOp.Decomposed ops, got {bad!r} outside it")
    for name in ("supported_dtypes", "vector_dtypes"):
      if not isinstance(got := getattr(cls, name), frozenset) or not all(isinstance(d, DType) and d.count == 1 for d in got):
        raise TypeError(f"{cls.__name__}.{name} must be a frozenset of scalar DTypes, got {got!r}")
    if cls.local_max is not None and not cls.has_local: raise TypeError(f"{cls.__name__} sets local_max but has_local is False")
    widths = cls.vector_widths
    if not isinstance(widths, tuple) or not widths or not all(type(n) is int and n >= 1 for n in (cls.threads, *widths)):
      raise TypeError(f"{cls.__name__}: threads must be an int >= 1 and vector_widths a non-empty tuple of them, got {cls.threads!r}, {widths!r}")

  def supports(self, op: Ops) -> bool:
    """Whether `op` can reach `render` as it is: a primitive ALU op, or a decomposed op listed in `native`."""
    return op in GroupOp.ALU or op in self.native

  def render(self, name: str, linear: UOp) -> str:
    """The source text of one kernel called `name` (a valid identifier), from `linear`: an Ops.LINEAR UOp whose sources
    are the kernel's instructions in execution order. Its result is what the device's `Compiler.compile` takes."""
    raise NotImplementedError(f"{type(self).__name__} does not implement render")

  def __repr__(self): return f"<{type(self).__name__} for {self.device or '?'}>"
