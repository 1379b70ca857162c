"""What a device's code generator declares and does: the `Renderer` base every plugin's renderer subclasses.

The pipeline reads a renderer's class attributes to decide what to build (which ops to decompose, how big a workgroup may
be, whether shared memory or tensor cores exist), then hands the finished LINEAR program to `render` for source text.
"""
from __future__ import annotations

from dataclasses import dataclass

from tinyspec.dtype import ALL, DType, dtypes
from tinyspec.uop.ops import GroupOp, Ops
from tinyspec.uop.uop import UOp

STORABLE = frozenset(ALL) - {dtypes.index, dtypes.void}

@dataclass(frozen=True)
class TensorCore:
  """One matrix instruction of a device: D(MxN) = A(MxK) @ B(KxN) + C, computed together by `threads` threads, each holding
  `elements` = (of A, of B, of C/D) values in registers. The optimizer's TC opt (a later issue) reads these tables."""
  dims: tuple[int, int, int]
  """(M, N, K)."""
  threads: int
  elements: tuple[int, int, int]
  dtype_in: DType
  dtype_out: DType
  name: str = ""
  """The instruction, e.g. "mma.sync.m16n8k16" or "v_wmma_f32_16x16x16_f16"."""

  def __post_init__(self):
    m, n, k = self.dims
    # every value of A, B and C is held by exactly one thread
    if any(e * self.threads != size for e, size in zip(self.elements, (m * k, k * n, m * n))):
      raise ValueError(f"TensorCore {self.name or self.dims}: {self.threads} threads x elements {self.elements} do not cover "
                       f"A {m}x{k}, B {k}x{n}, C {m}x{n}")

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
