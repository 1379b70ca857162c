"""The rewrite engine: UPat patterns, PatternMatcher tables indexed by op, and graph_rewrite to a fixed point without recursion."""
from __future__ import annotations

import contextlib
import gc
import inspect
import itertools
import operator
from collections.abc import Callable
from typing import Any

from tinyspec.dtype import DType
from tinyspec.uop.ops import OPS, Ops
from tinyspec.uop.properties import DTYPE_RULES
from tinyspec.uop.uop import UOp

_ANY = object()  # "match any arg"


class UPat:
  """A pattern over UOps. Every field left out matches anything.

  op: an Op or a set of Ops.  dtype: a DType or a set of them.  arg: the exact arg (for CONST patterns: the value).
  src: a tuple matches the sources in order; a list matches them in any order (commutative ops); a single UPat matches every source.
  name: capture the node under this name (a name used twice must capture the same node).  allow_any_len: a src tuple is a prefix."""
  __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len", "_match")

  def __init__(self, op: Ops | set[Ops] | frozenset[Ops] | tuple[Ops, ...] | None = None, dtype: DType | tuple[DType, ...] | None = None,
               src: UPat | tuple[UPat, ...] | list[UPat] | None = None, arg: Any = _ANY, name: str | None = None, allow_any_len: bool = False):
    self.op = None if op is None else frozenset((op,)) if isinstance(op, Ops) else frozenset(op)
    self.dtype = None if dtype is None else frozenset((dtype,)) if isinstance(dtype, DType) else frozenset(dtype)
    self.src, self.arg, self.name, self.allow_any_len = src, arg, name, allow_any_len
    self._match: Callable[[UOp], dict[str, UOp] | None] | None = None

  def match(self, u: UOp) -> dict[str, UOp] | None:
    """The captures if u matches (the first source order that does, for commutative patterns), else None."""
    if self._match is None: self._match = _compile_match(self)
    return self._match(u)

  @staticmethod
  def var(name: str | None = None, dtype: DType | tuple[DType, ...] | None = None) -> UPat:
    """Any node, captured as `name`."""
    return UPat(dtype=dtype, name=name)
  @staticmethod
  def cvar(name: str | None = None, dtype: DType | tuple[DType, ...] | None = None) -> UPat:
    """Any constant, captured as `name`."""
    return UPat(Ops.CONST, dtype, name=name)
  @staticmethod
  def const(value: Any, dtype: DType | tuple[DType, ...] | None = None, name: str | None = None) -> UPat:
    """The constant `value` (compared with ==, so 1 matches 1.0 and True)."""
    return UPat(Ops.CONST, dtype, arg=value, name=name)

  def named(self, name: str) -> UPat: return UPat(self.op, self.dtype, self.src, self.arg, name, self.allow_any_len)
  # pattern-building sugar mirroring UOp's operators; commutative ops match their sources in any order
  def _bin(self, op: Ops, x: UPat | Any, commutative: bool) -> UPat:
    x = x if isinstance(x, UPat) else UPat.const(x)
    return UPat(op, src=[self, x] if commutative else (self, x))
  def __add__(self, x): return self._bin(Ops.ADD, x, True)
  def __radd__(self, x): return self._bin(Ops.ADD, x, True)
  def __mul__(self, x): return self._bin(Ops.MUL, x, True)
  def __rmul__(self, x): return self._bin(Ops.MUL, x, True)
  def __floordiv__(self, x): return self._bin(Ops.IDIV, x, False)
  def __mod__(self, x): return self._bin(Ops.MOD, x, False)
  def __lt__(self, x): return self._bin(Ops.CMPLT, x, False)
  def __and__(self, x): return self._bin(Ops.AND, x, True)
  def __or__(self, x): return self._bin(Ops.OR, x, True)
  def __xor__(self, x): return self._bin(Ops.XOR, x, True)
  def ne(self, x): return self._bin(Ops.CMPNE, x, True)
  def maximum(self, x): return self._bin(Ops.MAX, x, True)
  def where(self, a: UPat | Any, b: UPat | Any):
    return UPat(Ops.WHERE, src=(self, *(v if isinstance(v, UPat) else UPat.const(v) for v in (a, b))))
  def cast(self, dtype: DType | None = None): return UPat(Ops.CAST, src=(self,), **({} if dtype is None else {"arg": dtype}))

  def __repr__(self):
    parts = [f"op={'|'.join(sorted(o.name for o in self.op))}" if self.op else "", f"name={self.name!r}" if self.name else "",
             f"arg={self.arg!r}" if self.arg is not _ANY else "", f"src={self.src!r}" if self.src is not None else ""]
    return f"UPat({', '.join(p for p in parts if p)})"


class _Codegen:
  """Compiles patterns to straight-line Python: one `if` per check, a `for` over the source orders of each commutative
  pattern (so a failed order, or a rewrite function returning None, backtracks into the next), and the call at the leaf."""
  def __init__(self):
    self.lines: list[str] = []
    self.env: dict[str, Any] = {}
    self.nvars = 0
  def ref(self, obj: Any) -> str:
    name = f"k{len(self.env)}"
    self.env[name] = obj
    return name
  def var(self) -> str:
    self.nvars += 1
    return f"v{self.nvars}"
  def emit(self, depth: int, line: str): self.lines.append("  " * depth + line)

  def static_conds(self, p: UPat, node: str, check_op: bool = True) -> list[str]:
    """Checks of p's own op, arg and dtype: they need no captures, so they run before any source loop."""
    conds = []
    if p.op is not None and check_op:
      conds.append(f"{node}.op is {self.ref(next(iter(p.op)))}" if len(p.op) == 1 else f"{node}.op in {self.ref(p.op)}")
    if p.arg is not _ANY: conds.append(f"{node}.arg[0] == {self.ref(p.arg)}" if p.op == {Ops.CONST} else f"{node}.arg == {self.ref(p.arg)}")
    if p.dtype is not None: conds.append(f"{node}.dtype in {self.ref(p.dtype)}")
    return conds
  def check(self, depth: int, conds: list[str], fail: str | None) -> int:
    """Emit a guard. With a fail statement: `if not conds: fail`. With None (a rule's top level): the rest nests under
    `if conds:`, and falling out of it reaches the next rule. Returns the depth the rest is written at."""
    if not conds: return depth
    if fail is None:
      self.emit(depth, f"if {' and '.join(conds)}:")
      return depth + 1
    self.emit(depth, f"if not ({' and '.join(conds)}): {fail}")
    return depth

  def pat(self, p: UPat, node: str, bound: dict[str, str], depth: int, fail: str | None, rest: Callable[[dict[str, str], int, str | None], None],
          static_done: bool = False, check_op: bool = True):
    """Emit checks of p against the local `node`, then `rest` with the captures so far; on a failed check run `fail`.
    Every level checks all its sources' static conditions first, so a mismatch is found before any nested loop runs."""
    conds = [] if static_done else self.static_conds(p, node, check_op)
    if p.name is not None and p.name in bound: conds.append(f"{node} is {bound[p.name]}")
    depth = self.check(depth, conds, fail)
    if p.name is not None and p.name not in bound: bound = {**bound, p.name: node}
    if p.src is None: return rest(bound, depth, fail)
    if isinstance(p.src, UPat):  # every source matches one capture-free pattern, compiled as a matcher of its own
      if _names(p.src): raise ValueError(f"a repeated source pattern cannot capture names: {p.src}")
      s = self.var()
      self.emit(depth, f"for {s} in {node}.src:")
      if p.src.src is None: self.check(depth + 1, self.static_conds(p.src, s), "break")  # a flat element is checked inline
      else: self.emit(depth + 1, f"if {self.ref(_compile_match(p.src))}({s}) is None: break")
      self.emit(depth, "else:")
      rest(bound, depth + 1, fail)
      if fail is not None: self.emit(depth, fail)
      return
    n, srcs = len(p.src), list(p.src)
    if n == 0: return rest(bound, self.check(depth, [f"not {node}.src"], fail), fail)
    if not (p.op is not None and all(_FIXED_ARITY.get(op) == n for op in p.op)):  # arity the op table already guarantees needs no check
      depth = self.check(depth, [f"len({node}.src) {'>=' if p.allow_any_len else '=='} {n}"], fail)
    names = [self.var() for _ in srcs]
    def chain(i: int, bound: dict[str, str], depth: int, fail: str | None):
      if i == n: return rest(bound, depth, fail)
      self.pat(srcs[i], names[i], bound, depth, fail, lambda b, d, f: chain(i + 1, b, d, f), static_done=True)
    shallow = [c for q, name in zip(srcs, names) for c in self.static_conds(q, name)]
    if isinstance(p.src, tuple) or n == 1:
      self.emit(depth, f"{', '.join(names)}, = {node}.src[:{n}]")
      return chain(0, bound, self.check(depth, shallow, fail), fail)
    orders = ", ".join("(" + "".join(f"{node}.src[{i}], " for i in perm) + ")" for perm in itertools.permutations(range(n)))
    self.emit(depth, f"for {', '.join(names)}, in ({orders}):")
    chain(0, bound, self.check(depth + 1, shallow, "continue"), "continue")
    if fail is not None: self.emit(depth, fail)

_FIXED_ARITY = {op: info.nsrc[0] for op, info in OPS.items() if info.nsrc[0] == info.nsrc[1]}

def _names(p: UPat) -> set[str]:
  srcs = () if p.src is None else (p.src,) if isinstance(p.src, UPat) else p.src
  return ({p.name} if p.name else set()).union(*(_names(s) for s in srcs))

def _build(g: _Codegen, name: str):
  exec(compile("\n".join(g.lines), f"<{name}>", "exec"), g.env)  # noqa: S102 -- code generated from patterns, no user text
  return g.env["fn"]

def _compile_match(p: UPat) -> Callable[[UOp], dict[str, UOp] | None]:
  """The pattern as a function from a node to its captures, or None."""
  g = _Codegen()
  g.emit(0, "def fn(u):")
  g.pat(p, "u", {}, 1, "return None", lambda bound, depth, fail: g.emit(depth, "return {" + ", ".join(f"{k!r}: {v}" for k, v in bound.items()) + "}"))
  g.emit(1, "return None")
  return _build(g, f"UPat {p!r:.200}")

def _compile_rules(op: Ops, rules: list[tuple[UPat, Callable]]) -> Callable[[UOp, Any], UOp | None]:
  """All rules for one op as a single function (u, ctx) -> replacement or None. Each rule is a nest of `if`s that falls through
  to the next rule; commutative sources loop over their orders, so a failed order or a None from the rewrite function backtracks."""
  g = _Codegen()
  g.emit(0, "def fn(u, ctx):")
  if any(_needed_src_ops(p) for p, _ in rules):
    n = _FIXED_ARITY.get(op)  # with a fixed arity the set is spelled out; otherwise built from the sources
    ops = "{" + "".join(f"u.src[{i}].op, " for i in range(n)) + "}" if n else f"set(map({g.ref(operator.attrgetter('op'))}, u.src))"
    g.emit(1, f"src_ops = {ops}")
  for p, rewrite_fn in rules:
    params = list(inspect.signature(rewrite_fn).parameters)
    wants_ctx = bool(params) and params[0] == "ctx"
    if missing := set(params[wants_ctx:]) - _names(p): raise ValueError(f"rewrite function wants {sorted(missing)}, which {p} does not capture")
    def leaf(bound: dict[str, str], depth: int, fail: str, fn=rewrite_fn, params=params[wants_ctx:], wants_ctx=wants_ctx):
      args = [f"{g.ref(_built)}(u)" if bound[k] == "u" else bound[k] for k in params]  # a captured root must be a real node
      g.emit(depth, f"r = {g.ref(fn)}({', '.join((['ctx'] if wants_ctx else []) + args)})")
      g.emit(depth, "if r is not None and r is not u: return r")
      if fail is not None: g.emit(depth, fail)
    depth = g.check(1, [f"{g.ref(needed)} <= src_ops"] if (needed := _needed_src_ops(p)) else [], None)  # cheap early reject
    g.pat(p, "u", {}, depth, None, leaf, check_op=False)  # the table is indexed by op: the root's op already matched
  g.emit(1, "return None")
  return _build(g, f"rules for {op.name}")


def _needed_src_ops(p: UPat) -> frozenset[Ops]:
  """Ops that must appear among a node's sources for p to match (from source patterns that name exactly one op)."""
  srcs = p.src if isinstance(p.src, (tuple, list)) else ()
  return frozenset(next(iter(q.op)) for q in srcs if q.op is not None and len(q.op) == 1)


class PatternMatcher:
  """An ordered table of (pattern, rewrite function), indexed by each pattern's op. Compose tables with `+`.

  A rewrite function takes the captured names as arguments (and `ctx` first if it names it), and returns the replacement
  UOp, or None to pass. For commutative patterns every source order is tried until the function returns a node."""
  def __init__(self, rules: list[tuple[UPat, Callable]]):
    self.rules = list(rules)
    ops = set(Ops) if any(p.op is None for p, _ in self.rules) else {op for p, _ in self.rules for op in p.op}
    # per op, one compiled function holding the rules that can match it, in table order (rules without an op apply to all)
    self.by_op: dict[Ops, Callable[[UOp, Any], UOp | None]] = {
      op: _compile_rules(op, [(p, fn) for p, fn in self.rules if p.op is None or op in p.op]) for op in sorted(ops)}

  def __add__(self, other: PatternMatcher) -> PatternMatcher: return PatternMatcher(self.rules + other.rules)
  def __len__(self): return len(self.rules)

  def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
    """The first rule's replacement for u, or None when no rule changes it."""
    return None if (fn := self.by_op.get(u.op)) is None else fn(u, ctx)


class _Rebuilt:
  """A node's op, new sources, arg and tag, not yet built: it has what compiled rules read (op, src, arg, tag, dtype)."""
  __slots__ = ("op", "src", "arg", "tag")
  def __init__(self, op: Ops, src: tuple[UOp, ...], arg: Any, tag: Any): self.op, self.src, self.arg, self.tag = op, src, arg, tag
  @property
  def dtype(self) -> DType: return DTYPE_RULES[self.op](self)  # few rules check the root's dtype: derived only when asked

def _built(u: UOp | _Rebuilt) -> UOp: return u if type(u) is UOp else UOp(u.op, u.src, u.arg, u.tag)

@contextlib.contextmanager
def _gc_paused():
  """Rewriting allocates many short-lived nodes but makes no reference cycles, so the cyclic collector would only cost time."""
  was_enabled = gc.isenabled()
  gc.disable()
  try: yield
  finally:
    if was_enabled: gc.enable()

def graph_rewrite(root: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False) -> UOp:
  """Rewrite the graph under `root` with `pm` until no rule applies anywhere, and return the new root.

  Default: a node's sources are rewritten first, then the node (so rules see simplified sources).
  bottom_up=True: a node is rewritten first, with its original sources, then its sources are visited (rules that must
  see the node before its sources change). Either way every result is rewritten again until it is a fixed point.
  Each distinct node is visited once; an explicit stack replaces recursion, so 100k-deep chains are fine."""
  done: dict[UOp, UOp] = {}
  # stack entries: (node, stage, link). stage 0: visit; 1: sources are done, rebuild and rewrite; 2: node's result is link's
  stack: list[tuple[UOp, int, Any]] = [(root, 0, None)]
  rewrite, by_op, push, pop, finished = pm.rewrite, pm.by_op, stack.append, stack.pop, done.__getitem__
  with _gc_paused():
    while stack:
      n, stage, link = pop()
      if stage == 2:  # always taken: a result may contain n itself (a rule that wraps its node), which finished n meanwhile
        done[n] = done[link]
        continue
      if n in done and (stage == 0 or link is n): continue  # a bottom-up result (link is not n) still has to finish n
      if stage == 0:
        link = n
        if bottom_up:
          while (r := rewrite(link, ctx)) is not None:
            if r in done: link = done[r]; break
            link = r
        waiting = False  # visit the unfinished sources first, then come back
        for s in link.src:
          if s in done: continue
          if not s.src and s.op not in by_op: done[s] = s  # a leaf no rule can change (a constant, mostly) is finished at once
          else:
            if not waiting: push((n, 1, link)); waiting = True
            push((s, 0, None))
        if not waiting: stage = 1  # every source is finished (always so for leaves): go on to stage 1 without a round trip
      if stage == 1:
        new_src, fn = tuple(map(finished, link.src)), by_op.get(link.op)
        if new_src == link.src:  # tuple == compares UOps by identity
          new = link
          r = None if bottom_up or fn is None else fn(new, ctx)
        else:  # the rules see the rebuilt node before it is built: most rebuilt nodes are rewritten at once, so building them is waste
          r = None if fn is None else fn(_Rebuilt(link.op, new_src, link.arg, link.tag), ctx)
          if r is None: new = UOp(link.op, new_src, link.arg, link.tag)
        while r is not None and r not in done:
          for s in r.src:  # a result built from finished nodes is rewritten here, without a round trip on the stack
            if s in done:
              if done[s] is not s: break
            elif s.src or rewrite(s, ctx) is not None: break
            else: done[s] = s  # a new leaf (a folded constant) that no rule changes is finished here
          else:
            new, r = r, rewrite(r, ctx)
            continue
          break
        if r is None: done[n] = done[new] = new
        elif r in done: done[n] = done[r]
        else: push((n, 2, r)); push((r, 0, None))
  return done[root]


def graph_substitute(root: UOp, mapping: dict[UOp, UOp]) -> UOp:
  """`root` with each node in `mapping` replaced (no pattern matching, no fixed point)."""
  new: dict[UOp, UOp] = {}
  for n in root.toposort():
    new[n] = mapping[n] if n in mapping else n.replace(src=tuple(new[s] for s in n.src))
  return new[root]
