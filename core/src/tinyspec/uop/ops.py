"""The op set of seed 001, its groups, and each op's src and arg as the spec gives them. Docs and tests read this table."""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Ops(enum.Enum):
  """Every op a UOp can carry. The table OPS below says what each one's src and arg are."""
  # source
  PARAM = enum.auto(); BUFFER = enum.auto(); BUFFER_VIEW = enum.auto(); CONST = enum.auto(); BINARY = enum.auto()
  # movement
  PERMUTE = enum.auto(); FLIP = enum.auto(); RESHAPE = enum.auto(); EXPAND = enum.auto(); PAD = enum.auto(); SHRINK = enum.auto()
  INDEX = enum.auto(); STACK = enum.auto(); BITCAST = enum.auto(); REPLICATED = enum.auto()
  # reduce
  REDUCE = enum.auto()
  # call
  FUNCTION = enum.auto(); CALL = enum.auto(); TUPLE = enum.auto(); GETTUPLE = enum.auto()
  # load, copy, store
  LOAD = enum.auto(); COPY = enum.auto(); STORE = enum.auto()
  # ordering
  RANGE = enum.auto(); END = enum.auto(); AFTER = enum.auto(); GROUP = enum.auto(); SINK = enum.auto(); LINEAR = enum.auto()
  # elementwise
  RECIP = enum.auto(); TRUNC = enum.auto(); CAST = enum.auto()
  ADD = enum.auto(); MUL = enum.auto(); MAX = enum.auto(); MOD = enum.auto(); IDIV = enum.auto(); CMPLT = enum.auto(); CMPNE = enum.auto()
  XOR = enum.auto(); OR = enum.auto(); AND = enum.auto(); SHR = enum.auto(); SHL = enum.auto()
  WHERE = enum.auto()
  # decomposed elementwise
  NEG = enum.auto(); SUB = enum.auto(); DIV = enum.auto(); CMPGT = enum.auto(); CMPGE = enum.auto(); CMPLE = enum.auto(); CMPEQ = enum.auto()
  NOT = enum.auto(); EXP2 = enum.auto(); LOG2 = enum.auto(); SIN = enum.auto(); SQRT = enum.auto(); POW = enum.auto(); MULACC = enum.auto()
  THREEFRY = enum.auto()
  # marker
  CONTIGUOUS = enum.auto(); CONTIGUOUSBACKWARD = enum.auto(); DETACH = enum.auto()
  # codegen
  BARRIER = enum.auto(); INS = enum.auto(); SPECIAL = enum.auto(); IF = enum.auto(); ENDIF = enum.auto(); WMMA = enum.auto(); CUSTOM = enum.auto()
  ATOMICADD = enum.auto(); CUSTOMFUNCTION = enum.auto(); PROGRAM = enum.auto(); SOURCE = enum.auto()

  __hash__ = object.__hash__  # members are singletons; identity hashing keeps op-indexed lookups fast
  def __repr__(self): return f"Ops.{self.name}"
  def __lt__(self, other: Ops): return self.value < other.value


@dataclass(frozen=True)
class OpInfo:
  """One row of the spec's op tables. `nsrc` is (min, max) sources, max None for any number."""
  group: str
  nsrc: tuple[int, int | None]
  src: str
  arg: str
  semantics: str

ANY = None
OPS: dict[Ops, OpInfo] = {
  Ops.PARAM: OpInfo("source", (1, 3), "(s,) or (s, min, max)", "(slot, dtype, device?, addrspace?)", "Placeholder with shape s, substituted in FUNCTION; with min/max a bounded variable."),
  Ops.BUFFER: OpInfo("source", (1, 1), "(s,)", "(slot, dtype, device, addrspace)", "Concrete buffer slot with shape s; an n-tuple device makes one buffer across n devices."),
  Ops.BUFFER_VIEW: OpInfo("source", (1, 1), "(buf,)", "(size, dtype, offset)", "Zero-copy typed (size,) slice of buf starting at offset elements (seed 002)."),
  Ops.CONST: OpInfo("source", (0, 0), "()", "(value, dtype)", "A scalar constant with shape (). Vector constants are STACKs of CONSTs."),
  Ops.BINARY: OpInfo("source", (0, 0), "()", "bytes", "Raw binary data: uint8 with shape (len(data),). Also a compiled kernel's machine code in PROGRAM."),
  Ops.PERMUTE: OpInfo("movement", (1, 1), "(T,)", "axis order π", "Reorder axes; (1, 0) is transpose."),
  Ops.FLIP: OpInfo("movement", (1, 1), "(T,)", "bools f", "Reverse along flagged axes."),
  Ops.RESHAPE: OpInfo("movement", (2, 2), "(T, s')", "—", "Reinterpret in row-major order; prod(s) == prod(s')."),
  Ops.EXPAND: OpInfo("movement", (2, 2), "(T, s')", "—", "Broadcast size-1 axes; each s_k is 1 or s'_k."),
  Ops.PAD: OpInfo("movement", (3, 3), "(T, o, s')", "—", "Place T at offset o_k in an invalid-filled output of shape s'."),
  Ops.SHRINK: OpInfo("movement", (3, 3), "(T, o, s')", "—", "Keep s'_k elements starting at offset o_k per axis. Inverse of PAD."),
  Ops.INDEX: OpInfo("movement", (1, ANY), "(T, i_0, i_1, ...)", "—", "Index from the left: a ()-shaped i removes its dim, a (k,)-shaped one makes it k."),
  Ops.STACK: OpInfo("movement", (0, ANY), "(T_0, T_1, ...)", "—", "Join along a new leading axis; all shapes match. Also spells shapes: a (k,) vector of index scalars."),
  Ops.BITCAST: OpInfo("movement", (1, 1), "(T,)", "dtype", "Reinterpret storage as the target dtype; preserves total bytes."),
  Ops.REPLICATED: OpInfo("movement", (1, 1), "(T,)", "axes", "Mark T as replicated along axes, collapsing them to 1 (seed 002)."),
  Ops.REDUCE: OpInfo("reduce", (1, ANY), "(T, r_0, r_1, ...)", "(op, axes)", "Reduce T along axes or ranges; op is ADD, MAX or MUL."),
  Ops.FUNCTION: OpInfo("call", (1, ANY), "(body, a_0, a_1, ...)", "—", "Substitute each PARAM k in the TUPLE body with a_k. Gradient-able."),
  Ops.CALL: OpInfo("call", (1, ANY), "(body, a_0, a_1, ...)", "—", "Opaque invocation of a compiled kernel or custom function."),
  Ops.TUPLE: OpInfo("call", (0, ANY), "(v_0, v_1, ...)", "—", "Pack values; required as FUNCTION body to return a value."),
  Ops.GETTUPLE: OpInfo("call", (1, 1), "(T,)", "idx", "Extract element idx from a TUPLE."),
  Ops.LOAD: OpInfo("load", (1, 3), "(buf, alt?, gate?)", "(device, addrspace)", "Read (pull) from buf into a new anonymous buffer; alt where gate is false."),
  Ops.COPY: OpInfo("load", (1, 1), "(T,)", "device", "Copy to the target device; to an n-tuple device it shards on axis 0."),
  Ops.STORE: OpInfo("store", (2, 3), "(buf, val, gate?)", "—", "Write (push) val into buf, where gate is true if given. The only op with side effects."),
  Ops.RANGE: OpInfo("ordering", (1, 1), "(bound,)", "(id, AxisType)", "Iterator from 0 to bound."),
  Ops.END: OpInfo("ordering", (2, ANY), "(body, range, ...)", "—", "Close RANGE loops (innermost first)."),
  Ops.AFTER: OpInfo("ordering", (1, ANY), "(buf, deps...)", "—", "Passthrough of buf; deps execute first. STORE then AFTER is an assign."),
  Ops.GROUP: OpInfo("ordering", (0, ANY), "(u_0, u_1, ...)", "—", "Void no-op that merges several STOREs into one node, unordered."),
  Ops.SINK: OpInfo("ordering", (0, ANY), "(s_0, s_1, ...)", "kernel info?", "Collect side effects into a single root node."),
  Ops.LINEAR: OpInfo("ordering", (0, ANY), "(uops...)", "—", "Linearized (toposorted) instruction sequence."),
  Ops.RECIP: OpInfo("unary", (1, 1), "(T,)", "—", "1/x"),
  Ops.TRUNC: OpInfo("unary", (1, 1), "(T,)", "—", "trunc(x): round toward zero."),
  Ops.CAST: OpInfo("unary", (1, 1), "(T,)", "dtype", "Convert to the target dtype."),
  Ops.ADD: OpInfo("binary", (2, 2), "(A, B)", "—", "a + b"),
  Ops.MUL: OpInfo("binary", (2, 2), "(A, B)", "—", "a * b"),
  Ops.MAX: OpInfo("binary", (2, 2), "(A, B)", "—", "max(a, b)"),
  Ops.MOD: OpInfo("binary", (2, 2), "(A, B)", "—", "a mod b, floored: the result has b's sign (Python's %)."),
  Ops.IDIV: OpInfo("binary", (2, 2), "(A, B)", "—", "floor(a / b) on integers (Python's //)."),
  Ops.CMPLT: OpInfo("binary", (2, 2), "(A, B)", "—", "[a < b]"),
  Ops.CMPNE: OpInfo("binary", (2, 2), "(A, B)", "—", "[a != b]"),
  Ops.XOR: OpInfo("binary", (2, 2), "(A, B)", "—", "a ^ b"),
  Ops.OR: OpInfo("binary", (2, 2), "(A, B)", "—", "a | b"),
  Ops.AND: OpInfo("binary", (2, 2), "(A, B)", "—", "a & b"),
  Ops.SHR: OpInfo("binary", (2, 2), "(A, B)", "—", "a >> b"),
  Ops.SHL: OpInfo("binary", (2, 2), "(A, B)", "—", "a << b"),
  Ops.WHERE: OpInfo("ternary", (3, 3), "(P, A, B)", "—", "A where P != 0, else B."),
  Ops.NEG: OpInfo("decomposed", (1, 1), "(A,)", "—", "-x = MUL(A, -1)"),
  Ops.SUB: OpInfo("decomposed", (2, 2), "(A, B)", "—", "a - b = ADD(A, NEG(B))"),
  Ops.DIV: OpInfo("decomposed", (2, 2), "(A, B)", "—", "a / b = MUL(A, RECIP(B)), both scaled by a power of two where 1/b would overflow or be subnormal"),
  Ops.CMPGT: OpInfo("decomposed", (2, 2), "(A, B)", "—", "[a > b] = CMPLT(B, A)"),
  Ops.CMPGE: OpInfo("decomposed", (2, 2), "(A, B)", "—", "[a >= b] = CMPNE(CMPLT(A, B), 1)"),
  Ops.CMPLE: OpInfo("decomposed", (2, 2), "(A, B)", "—", "[a <= b] = CMPNE(CMPLT(B, A), 1)"),
  Ops.CMPEQ: OpInfo("decomposed", (2, 2), "(A, B)", "—", "[a == b] = CMPNE(CMPNE(A, B), 1)"),
  Ops.NOT: OpInfo("decomposed", (1, 1), "(A,)", "—", "not a = CMPNE(A, 1)"),
  Ops.EXP2: OpInfo("decomposed", (1, 1), "(A,)", "—", "2^x: polynomial approximation with MUL, ADD"),
  Ops.LOG2: OpInfo("decomposed", (1, 1), "(A,)", "—", "log2(x): exponent extraction and polynomial approximation"),
  Ops.SIN: OpInfo("decomposed", (1, 1), "(A,)", "—", "sin(x): argument reduction and polynomial approximation"),
  Ops.SQRT: OpInfo("decomposed", (1, 1), "(A,)", "—", "sqrt(x) = EXP2(0.5 * LOG2(A))"),
  Ops.POW: OpInfo("decomposed", (2, 2), "(A, B)", "—", "a^b = EXP2(LOG2(A) * B)"),
  Ops.MULACC: OpInfo("decomposed", (3, 3), "(A, B, C)", "—", "a * b + c = ADD(MUL(A, B), C)"),
  Ops.THREEFRY: OpInfo("decomposed", (2, 2), "(X, KEY)", "—", "Threefry 2x32 PRNG: 5 rounds of add-rotate-xor."),
  Ops.CONTIGUOUS: OpInfo("marker", (1, 1), "(T,)", "—", "Force a contiguous memory layout."),
  Ops.CONTIGUOUSBACKWARD: OpInfo("marker", (1, 1), "(T,)", "—", "Force contiguous in the backward pass."),
  Ops.DETACH: OpInfo("marker", (1, 1), "(T,)", "—", "Stops gradient propagation."),
  Ops.BARRIER: OpInfo("codegen", (0, ANY), "(deps...)", "—", "Synchronize threads within a workgroup."),
  Ops.INS: OpInfo("codegen", (0, ANY), "(operands...)", "instruction", "A single machine instruction (e.g. AMD ISA)."),
  Ops.SPECIAL: OpInfo("codegen", (1, 1), "(bound,)", "name", "GPU thread/workgroup index, e.g. gidx0, lidx1."),
  Ops.IF: OpInfo("codegen", (1, 2), "(gate, deps?)", "—", "Begin a conditional block."),
  Ops.ENDIF: OpInfo("codegen", (1, 1), "(if,)", "—", "End a conditional block."),
  Ops.WMMA: OpInfo("codegen", (3, 3), "(A, B, acc)", "config", "Warp matrix multiply-accumulate (tensor cores)."),
  Ops.CUSTOM: OpInfo("codegen", (0, ANY), "(args...)", "fmt", "Inject a custom code string into the generated source."),
  Ops.ATOMICADD: OpInfo("codegen", (2, 2), "(idx, val)", "—", "Atomic read-modify-write buf[idx] += val."),
  Ops.CUSTOMFUNCTION: OpInfo("codegen", (0, ANY), "(meta...)", "name", "Opaque device function (e.g. HW decode), invoked through CALL."),
  Ops.PROGRAM: OpInfo("codegen", (3, 3), "(linear, source, binary)", "—", "Compiled kernel: instructions, source and machine code."),
  Ops.SOURCE: OpInfo("codegen", (0, 0), "()", "str", "Human-readable rendered source code."),
}
assert set(OPS) == set(Ops), f"ops without a spec row: {set(Ops) - set(OPS)}"

def _group(*names: str) -> frozenset[Ops]: return frozenset(op for op, info in OPS.items() if info.group in names)

class GroupOp:
  """Named sets of ops, derived from the OPS table (never listed twice)."""
  Source = _group("source")
  Movement = _group("movement")
  Reduce = _group("reduce")
  Call = _group("call")
  Load = _group("load")
  Store = _group("store")
  Ordering = _group("ordering")
  Unary = _group("unary")
  Binary = _group("binary")
  Ternary = _group("ternary")
  ALU = Unary | Binary | Ternary
  Decomposed = _group("decomposed")
  Elementwise = ALU | Decomposed
  Marker = _group("marker")
  Codegen = _group("codegen")
  Comparison = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPGT, Ops.CMPGE, Ops.CMPLE, Ops.CMPEQ})
  Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.XOR, Ops.OR, Ops.AND, Ops.CMPEQ})
  Associative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.XOR, Ops.OR, Ops.AND})
  # ops whose shape is defined by broadcasting their sources
  Broadcasting = (Binary | Ternary | Decomposed) - {Ops.NEG, Ops.NOT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT}
  # movement ops whose shape arguments are index vectors in src
  ShapeInSrc = frozenset({Ops.RESHAPE, Ops.EXPAND, Ops.PAD, Ops.SHRINK})


class AxisType(enum.Enum):
  """What a RANGE becomes after optimization; the letter is what kernel names and listings show."""
  GLOBAL = "g"; LOCAL = "l"; WARP = "w"; THREAD = "t"; LOOP = "L"; REDUCE = "R"; GROUP_REDUCE = "G"; UPCAST = "u"; UNROLL = "r"
  def __repr__(self): return f"AxisType.{self.name}"
  @property
  def letter(self) -> str: return self.value
