"""The symbolic simplifier for index arithmetic, as rewrite tables. `sym` is the whole simplifier; `simplify(u)` runs it.

Rules that reassociate or collect terms apply to integers only: with floats they would change rounding (and x*0 is not 0 for nan).
IDIV and MOD are floor division and floor modulo (see docs/spec.md), which makes (q*c + r)//c == q + r//c exact for any ints."""
from __future__ import annotations

import collections
import math

from tinyspec.dtype import FLOATS, INTS, dtypes
from tinyspec.uop.ops import GroupOp, Ops
from tinyspec.uop.rewrite import PatternMatcher, UPat, graph_rewrite
from tinyspec.uop.uop import UOp, exec_alu

INT = INTS + (dtypes.index,)
INTB = INT + (dtypes.bool,)
x, y = UPat.var("x", INT), UPat.var("y", INT)
c1, c2 = UPat.cvar("c1", INT), UPat.cvar("c2", INT)
anyx = UPat.var("x")
ix, ic1, ic2, ik = UPat.var("x", dtypes.index), UPat.cvar("c1", dtypes.index), UPat.cvar("c2", dtypes.index), UPat.cvar("k", dtypes.index)

def fold(op: Ops, c1: UOp, c2: UOp) -> UOp:
  """The constant that `op` on two constants makes, in their dtype."""
  return UOp(Ops.CONST, (), (exec_alu(op, dt := c1.arg[1], (c1.arg[0], c2.arg[0])), dt))  # exec_alu's result is already in dt

def _refold(op: Ops, x: UOp, c1: UOp, c2: UOp) -> UOp:
  """op(op(x, c1), c2) as op(x, c1 op c2), built directly rather than through UOp's operators: the hot rule of long chains."""
  return UOp(op, (x, fold(op, c1, c2)))

def _fold_node(u: UOp) -> UOp:
  """An ALU node on constants as the constant it computes, in the node's dtype (bool for comparisons)."""
  return UOp(Ops.CONST, (), (exec_alu(u.op, u.dtype, tuple([s.arg[0] for s in u.src])), u.dtype))

DECIDABLE = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.MAX, Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.CAST, Ops.WHERE})

def _decided(u: UOp) -> UOp | None:
  """An integer or bool node whose interval is one point is that constant."""
  if u.dtype not in INTB: return None
  lo, hi = u.min_max
  return UOp.const(lo, u.dtype) if lo == hi else None

def _term(u: UOp) -> tuple[UOp, int]:
  """A summand as (base, coefficient): x*3 is (x, 3), x is (x, 1)."""
  return (u.src[0], u.src[1].arg[0]) if u.op is Ops.MUL and u.src[1].op is Ops.CONST else (u, 1)

def _times(base: UOp, k: int) -> UOp: return base * k if k != 1 else base
def _plus1(c: UOp) -> UOp: return UOp.const(c.arg[0] + 1, c.dtype)

def _is_minus_zero(c: UOp) -> bool: return c.arg[0] == 0 and math.copysign(1.0, c.arg[0]) < 0
def _exact_reciprocal(c: UOp) -> float | None:
  """1/c for a constant c = +-2**e, |e| <= 14: exact in every float format (float16's normals reach 2**-14), so a
  division by c is a multiplication by it, rounded once just the same."""
  m, e = math.frexp(c.arg[0]) if math.isfinite(c.arg[0]) else (0, 0)
  return 1 / c.arg[0] if abs(m) == 0.5 and abs(e - 1) <= 14 else None
def _divides(d: UOp, k: UOp) -> bool: return d.arg[0] > 0 and k.arg[0] % d.arg[0] == 0
def _fits(n: UOp, y: UOp, c: UOp, m: UOp) -> bool:
  """For n = x*c + y: whether 0 <= y < c always, c divides m > 0 and n cannot wrap; then n divided by m is x divided by
  m/c (a reshape of rows of c elements)."""
  return 0 <= y.vmin and y.vmax < c.arg[0] and m.arg[0] > 0 and _divides(c, m) and _no_wrap(n)

def _unsplit(x: UOp, c1: UOp, c2: UOp, c3: UOp) -> UOp | None:
  """(x // c) * (c*k) + (x % c) * k is x * k: a flat index split into two axes and joined again."""
  return x * c3 if c1.arg[0] > 0 and c2.arg[0] == c1.arg[0] * c3.arg[0] else None

def operands(u: UOp, op: Ops) -> list[UOp]:
  """The operands of a tree of `op` nodes, left to right: (a + b) + c is [a, b, c] for ADD. An explicit stack, not
  recursion: a chain may be thousands long."""
  leaves, stack = [], [u]
  while stack:
    if (n := stack.pop()).op is op: stack.extend(reversed(n.src))
    else: leaves.append(n)
  return leaves

def sum_terms(u: UOp) -> list[UOp]:
  """The summands of a tree of ADDs, right to left: (a + b) + c is [c, b, a]. The index rules rebuild sums from them in
  this order, so it fixes the shape of every simplified index (and so each kernel's code)."""
  return operands(u, Ops.ADD)[::-1]

def _no_wrap(u: UOp) -> bool:
  """True when u's interval shows it cannot have wrapped around (always for index arithmetic, which is 64-bit)."""
  return u.dtype == dtypes.index or u.vmin > u.dtype.min or u.vmax < u.dtype.max

def _split_coefficients(num: UOp, d: int) -> tuple[list[UOp], list[UOp]]:
  """The terms of num as (multiples of d, divided by d; the rest): a term k*x whose coefficient d divides goes whole to
  the first list, one with k > d is split as (k // d)*d*x + (k % d)*x (a conv's (y + 59*ky) % 58 is then (y + ky) % 58)."""
  quo, rest = [], []
  for t in sum_terms(num):
    base, k = _term(t)
    if base.op is Ops.CONST: k, base = base.arg[0], UOp.const(1, t.dtype)
    if k % d == 0: quo.append(_times(base, k // d))
    elif k > d and base.op is not Ops.CONST: quo.append(_times(base, k // d)); rest.append(_times(base, k % d))
    else: rest.append(t)
  return quo, rest

def _div_split(num: UOp, c: UOp) -> UOp | None:
  """(q*c + r) // c -> q + r // c: pull out every multiple of c (exact for floor division)."""
  d = c.arg[0]
  if d <= 0 or not _no_wrap(num): return None
  quo, rest = _split_coefficients(num, d)
  if not quo: return None
  return _sum(quo) + (_sum(rest) // c if rest else 0)

def _mod_split(num: UOp, c: UOp) -> UOp | None:
  """(q*c + r) % c -> r % c: drop every multiple of c."""
  d = c.arg[0]
  if d <= 0 or not _no_wrap(num): return None
  quo, rest = _split_coefficients(num, d)
  return (_sum(rest) % c if rest else UOp.const(0, num.dtype)) if quo else None

def _grouped(num: UOp, c: UOp) -> tuple[UOp, UOp, int] | None:
  """num as x*k + y with 0 <= y < k and k dividing c > 0: the terms whose coefficients are multiples of k make x*k, the
  rest y. The largest such k among the coefficients; None if there is none. A flattened index, (r*1152 + j) with
  j = c*72 + i*9 + ky*3 + kx < 1152, then divides by 73728 as r // 64 though its terms come in any order."""
  d = c.arg[0]
  if d <= 0 or not _no_wrap(num): return None
  terms = [_term(t) for t in sum_terms(num)]
  for k in sorted({k for _, k in terms if k > 1 and d % k == 0}, reverse=True):
    rest = [_times(b, kk) for b, kk in terms if kk % k]
    if not rest or len(rest) == len(terms): continue
    y = _sum(rest)
    if 0 <= y.vmin and y.vmax < k: return _sum([_times(b, kk // k) for b, kk in terms if kk % k == 0]), y, k
  return None

def _div_grouped(num: UOp, c: UOp) -> UOp | None:
  """(x*k + y) // c -> x // (c/k) for 0 <= y < k, k | c (see _grouped)."""
  return None if (g := _grouped(num, c)) is None else g[0] // (c.arg[0] // g[2])

def _mod_grouped(num: UOp, c: UOp) -> UOp | None:
  """(x*k + y) % c -> (x % (c/k))*k + y for 0 <= y < k, k | c (see _grouped)."""
  return None if (g := _grouped(num, c)) is None else (g[0] % (c.arg[0] // g[2])) * g[2] + g[1]

def _sum(terms: list[UOp]) -> UOp:
  out = terms[0]
  for t in terms[1:]: out = out + t
  return out

def _div_div(x: UOp, c1: UOp, c2: UOp) -> UOp | None:
  """x // a // b -> x // (a*b) for a, b > 0, unless a*b is past x's dtype (int8: x // 100 // 100 is not x // 16)."""
  return x // (c1.arg[0] * c2.arg[0]) if 0 < c1.arg[0] and 0 < c2.arg[0] and c1.arg[0] * c2.arg[0] <= x.dtype.max else None

def _lt_shift(x: UOp, c1: UOp, c2: UOp) -> UOp | None:
  """x + c1 < c2 -> x < c2 - c1, unless c2 - c1 would wrap."""
  lo, hi, k = x.dtype.min, x.dtype.max, c2.arg[0] - c1.arg[0]
  return x < k if lo <= k <= hi and lo <= x.vmin + c1.arg[0] and x.vmax + c1.arg[0] <= hi else None

# constant folding: an ALU op on constants is a constant
pm_fold_consts = PatternMatcher([
  (UPat(GroupOp.ALU - {Ops.CAST, Ops.WHERE}, src=UPat(Ops.CONST), name="u"), lambda u: _fold_node(u)),  # op(c, ...) -> c'
  (UPat(Ops.CAST, src=(UPat(Ops.CONST, name="c"),), name="u"), lambda u, c: UOp.const(c.arg[0], u.dtype)),   # cast(c) -> c'
])

# identities: nodes that equal one of their sources or a constant, whatever the values
pm_identities = PatternMatcher([
  (x + 0, lambda x: x),                                                                  # x + 0 -> x (ints)
  (UPat.var("f", FLOATS) + UPat.cvar("z"), lambda f, z: f if _is_minus_zero(z) else None),   # f + -0.0 -> f (f + 0.0 is not: -0.0 + 0.0 is +0.0)
  (anyx * 1, lambda x: x),                                                               # x * 1 -> x
  (UPat(Ops.DIV, src=(anyx, UPat.cvar("c"))), lambda x, c: None if (r := _exact_reciprocal(c)) is None else x * r),  # x / 4 -> x * 0.25
  (x * 0, lambda x: UOp.const(0, x.dtype)),                                              # x * 0 -> 0
  (x // 1, lambda x: x),                                                                 # x // 1 -> x
  (x // -1, lambda x: -x),                                                               # x // -1 -> -x
  (x % 1, lambda x: UOp.const(0, x.dtype)),                                              # x % 1 -> 0
  (x // x, lambda x: UOp.const(1, x.dtype) if x.vmin > 0 or x.vmax < 0 else None),       # x // x -> 1 where x is never 0
  (x % x, lambda x: UOp.const(0, x.dtype) if x.vmin > 0 or x.vmax < 0 else None),        # x % x -> 0 where x is never 0
  (x.maximum(x), lambda x: x),                                                           # max(x, x) -> x
  (UPat.var("x", INTB) & UPat.var("x"), lambda x: x),                                    # x & x -> x
  (UPat.var("x", INTB) | UPat.var("x"), lambda x: x),                                    # x | x -> x
  (UPat.var("x", INTB) ^ UPat.var("x"), lambda x: UOp.const(0, x.dtype)),                # x ^ x -> 0
  (UPat.var("x", dtypes.bool) & True, lambda x: x),                                      # x & True -> x
  (UPat.var("x", dtypes.bool) & False, lambda x: UOp.const(False, dtypes.bool)),         # x & False -> False
  (UPat.var("x", dtypes.bool) | False, lambda x: x),                                     # x | False -> x
  (UPat.var("x", dtypes.bool) | True, lambda x: UOp.const(True, dtypes.bool)),           # x | True -> True
  (UPat.var("x", dtypes.bool).ne(False), lambda x: x),                                   # x != False -> x
  (UPat.var("x", dtypes.bool).ne(True).ne(True), lambda x: x),                           # not not x -> x
  (UPat.var("x", INTB) < UPat.var("x"), lambda x: UOp.const(False, dtypes.bool)),        # x < x -> False
  (UPat.var("x", INTB).ne(UPat.var("x")), lambda x: UOp.const(False, dtypes.bool)),      # x != x -> False (not for floats: nan)
  (UPat.var("c").where(UPat.var("a"), UPat.var("a")), lambda c, a: a),                   # where(c, a, a) -> a
  (UPat.const(True).where(UPat.var("a"), UPat.var("b")), lambda a, b: a),                # where(True, a, b) -> a
  (UPat.const(False).where(UPat.var("a"), UPat.var("b")), lambda a, b: b),               # where(False, a, b) -> b
])

# decided by intervals: a comparison, max or division whose operands' ranges fix the answer
pm_decide_by_range = PatternMatcher([
  (UPat(DECIDABLE, name="u"), _decided),                                                 # [lo, lo] -> lo (ADD, MUL: left to folding)
  (x.maximum(y), lambda x, y: x if x.vmin >= y.vmax else None),                          # max(x, y) -> x when x >= y always
  (x % c1, lambda x, c1: x if 0 <= x.vmin and x.vmax < c1.arg[0] else None),             # x % c -> x when 0 <= x < c
])

# collecting like terms and moving constants outward (integers only)
pm_collect_terms = PatternMatcher([
  (UPat(Ops.ADD, src=(UPat(Ops.CONST, name="c"), UPat.var("x"))), lambda c, x: x + c if x.op is not Ops.CONST else None),  # c + x -> x + c
  (UPat(Ops.MUL, src=(UPat(Ops.CONST, name="c"), UPat.var("x"))), lambda c, x: x * c if x.op is not Ops.CONST else None),  # c * x -> x * c
  (UPat(Ops.ADD, src=(x + c1, c2)), lambda x, c1, c2: _refold(Ops.ADD, x, c1, c2)),     # (x + c1) + c2 -> x + (c1 + c2)
  (UPat(Ops.MUL, src=(x * c1, c2)), lambda x, c1, c2: _refold(Ops.MUL, x, c1, c2)),     # (x * c1) * c2 -> x * (c1 * c2)
  (UPat(Ops.ADD, src=(x + c1, y)), lambda x, c1, y: (x + y) + c1 if y.op is not Ops.CONST else None),  # (x + c) + y -> (x + y) + c
  (UPat(Ops.MUL, src=(x + c1, c2)), lambda x, c1, c2: x * c2 + fold(Ops.MUL, c1, c2)),   # (x + c1) * c2 -> x*c2 + c1*c2
  (x + x, lambda x: x * 2),                                                              # x + x -> x*2
  (x * c1 + x * c2, lambda x, c1, c2: x * fold(Ops.ADD, c1, c2)),                        # x*a + x*b -> x*(a+b)
  (x * c1 + x, lambda x, c1: x * _plus1(c1)),                                            # x*a + x -> x*(a+1)
  # the same one step into a chain of sums, so like terms meet even when other terms stand between them
  ((y + x) + x, lambda y, x: y + x * 2),                                                 # (y + x) + x -> y + x*2
  ((y + x * c1) + x * c2, lambda y, x, c1, c2: y + x * fold(Ops.ADD, c1, c2)),           # (y + x*a) + x*b -> y + x*(a+b)
  ((y + x * c1) + x, lambda y, x, c1: y + x * _plus1(c1)),                               # (y + x*a) + x -> y + x*(a+1)
  ((y + x) + x * c1, lambda y, x, c1: y + x * _plus1(c1)),                               # (y + x) + x*a -> y + x*(a+1)
])

# division and modulo folding (floor semantics, positive constant divisors)
pm_div_mod = PatternMatcher([
  ((x * c1).named("n") // c2, lambda x, c1, c2, n: x * (c1.arg[0] // c2.arg[0]) if _divides(c2, c1) and _no_wrap(n) else None),  # (x*4)//2 -> x*2
  ((x * c1).named("n") % c2, lambda x, c1, c2, n: UOp.const(0, x.dtype) if _divides(c2, c1) and _no_wrap(n) else None),  # (x*4)%2 -> 0
  ((x // c1) // c2, _div_div),                                                                                      # x//a//b -> x//(a*b)
  ((x % c1) % c2, lambda x, c1, c2: x % c2 if _divides(c2, c1) else None),                                             # x%6%3 -> x%3
  (UPat(Ops.IDIV, src=(UPat(Ops.ADD, name="n"), c1)), lambda n, c1: _div_split(n, c1)),  # (q*c + r)//c -> q + r//c
  (UPat(Ops.MOD, src=(UPat(Ops.ADD, name="n"), c1)), lambda n, c1: _mod_split(n, c1)),   # (q*c + r)%c -> r%c
  (UPat(Ops.IDIV, src=(UPat(Ops.ADD, name="n"), c1)), lambda n, c1: _div_grouped(n, c1)),  # (x*k + y)//(m*k) -> x//m, 0 <= y < k
  (UPat(Ops.MOD, src=(UPat(Ops.ADD, name="n"), c1)), lambda n, c1: _mod_grouped(n, c1)),   # (x*k + y)%(m*k) -> (x%m)*k + y
  (x + c1 < c2, _lt_shift),                                                              # x + c1 < c2 -> x < c2 - c1
  ((x * c1 + y).named("n") // c2, lambda x, y, c1, c2, n: x // (c2.arg[0] // c1.arg[0]) if _fits(n, y, c1, c2) else None),  # (80i+j)//5120 -> i//64
  ((x * c1 + y).named("n") % c2, lambda x, y, c1, c2, n: (x % (c2.arg[0] // c1.arg[0])) * c1 + y if _fits(n, y, c1, c2) else None),  # -> (i%64)*80+j
  ((x // c1) * c2 + (x % c1) * UPat.cvar("c3", INT), _unsplit),                                                  # (i//64)*5120 + (i%64)*80 -> i*80
  ((ix // ic1) * ic1 + ix % ic1, lambda x, c1: x if c1.arg[0] > 0 else None),                                     # (x//c)*c + x%c -> x
])

def _is_bit(y: UOp) -> bool: return y.vmin >= 0 and y.vmax <= 1

def _bit_times(y: UOp, c: UOp) -> UOp | None:
  """where(y >= 1, c, 0) for y in {0, 1}, as (y * c) in index arithmetic cast to c's dtype (with a wide enough dtype)."""
  if not _is_bit(y) or not (c.dtype.min <= min(0, c.arg[0]) and max(0, c.arg[0]) <= c.dtype.max): return None
  return (y * c.arg[0]).cast(c.dtype) if y.dtype == dtypes.index else y.cast(c.dtype) * c

def _cast_sum(a: UOp, b: UOp, dt) -> UOp | None:
  """cast(a) + cast(b) as cast(a + b) for index a and b whose sum fits dt (so the index rules can combine the terms)."""
  return (a + b).cast(dt) if dt.min <= a.vmin + b.vmin and a.vmax + b.vmax <= dt.max else None

def _digit_merge(x: UOp, c1: UOp, c2: UOp, k: UOp) -> UOp | None:
  """(x // (k*c)) * (k*c) + ((x // c) % k) * c is (x // c) * c: the quotient by c written as its last base-k digit and the rest."""
  return (x // c1) * c1 if c1.arg[0] > 0 and k.arg[0] > 0 and c2.arg[0] == k.arg[0] * c1.arg[0] else None

# binary digits put back together: arange counts in binary (Tensor._iota, a broadcast sum of padded constants 0 or 2**k),
# which rangeify lowers to one where((i // 2**k) % 2 >= 1, 2**k, 0) per digit; summed, they are i itself again (a causal
# mask's cols - rows is then j - i: 35 integer ops an element fewer)
idx_a, idx_b = UPat.var("a", dtypes.index), UPat.var("b", dtypes.index)
pm_binary_digits = PatternMatcher([
  ((y < 1).ne(True).where(UPat.cvar("c", INT), 0), _bit_times),                                                    # where(y>=1, c, 0) -> y*c
  (UPat(Ops.CAST, INT, (idx_a,), name="ca") + UPat(Ops.CAST, INT, (idx_b,), name="cb"),
   lambda a, b, ca, cb: _cast_sum(a, b, ca.dtype) if ca.dtype == cb.dtype else None),                              # cast(a)+cast(b) -> cast(a+b)
  ((ix // ic2) * ic2 + ((ix // ic1) % ik) * ic1, _digit_merge),                                                  # (x//2c)*2c + (x//c%2)*c -> (x//c)*c
])

sym = pm_fold_consts + pm_identities + pm_decide_by_range + pm_collect_terms + pm_div_mod + pm_binary_digits

def _sum_key(u: UOp) -> frozenset:
  """u's summands as a multiset, so a + b and b + a (which simplification may leave in either order) compare equal."""
  return frozenset(collections.Counter(sum_terms(u)).items())

def bounds_given(valid: UOp) -> dict[frozenset, tuple[int, int]]:
  """The narrower interval that each integer expression compared with a constant in `valid` has wherever `valid` holds,
  keyed by its summands (`_sum_key`): x < c bounds x by c - 1 from above, not (x < c) by c from below. Expressions it
  does not narrow are left out."""
  bounds: dict[frozenset, tuple[int, int]] = {}
  for clause in operands(valid, Ops.AND):  # the gate's clauses: a bool AND's operands are bools
    at_least = clause.op is Ops.CMPNE and clause.src[1].op is Ops.CONST and clause.src[1].arg[0] is True
    cmp = clause.src[0] if at_least else clause
    if cmp.op is not Ops.CMPLT or cmp.src[1].op is not Ops.CONST or cmp.src[0].dtype not in INT: continue
    x, c = cmp.src[0], cmp.src[1].arg[0]
    lo, hi = bounds.get(key := _sum_key(x), x.min_max)
    bounds[key] = (max(lo, c), hi) if at_least else (lo, min(hi, c - 1))
  return bounds

def _index_given_valid(buf: UOp, idx: UOp, alt: UOp, valid: UOp) -> UOp | None:
  """A gated load's index simplified with the bounds its gate puts on its parts: each narrowed part stands in as a
  variable of the narrower interval while `sym` runs, then is put back. The index is only used where the gate holds; an
  index that reads memory (a gather's, `one_hot_reads`) is left as it is, since those reads run whether or not the gate
  holds, and their own gates must stay."""
  if not (bounds := bounds_given(valid)): return None
  nodes = idx.toposort()
  if any(u.op is Ops.LOAD for u in nodes): return None
  narrowed = [(u, b) for u in nodes if u.dtype == dtypes.index and u.op is not Ops.CONST
              and (b := bounds.get(_sum_key(u))) and b != u.min_max and b[0] <= b[1]]
  if not narrowed: return None
  stand_ins = {u: UOp.variable(f"<where valid {i}>", lo, hi) for i, (u, (lo, hi)) in enumerate(narrowed)}
  new = graph_rewrite(idx.substitute(stand_ins), sym).substitute({v: u for u, v in stand_ins.items()})
  return None if new is idx else UOp(Ops.LOAD, (buf.index(new), alt, valid))

# index arithmetic under a load's gate: a padded window's x*33 + y with the gate x < 33 never reaches the next row of 1089,
# so (x*33 + y) // 1089 is 0 there (the fold of a conv's input gradient: 5 divisions and modulos an element, from 11)
pm_index_given_valid = PatternMatcher([
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat.var("buf"), UPat.var("idx", dtypes.index))), UPat.var("alt"), UPat.var("valid", dtypes.bool))),
   _index_given_valid),                                                                  # load(buf[idx], alt, valid) -> load(buf[idx | valid], ...)
])

def simplify(u: UOp) -> UOp:
  """u with every rule of `sym` applied to a fixed point."""
  return graph_rewrite(u, sym)
