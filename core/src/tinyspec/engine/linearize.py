"""Stage 6, linearize: a kernel graph becomes LINEAR, one instruction after another, with RANGE ... END loops and
IF ... ENDIF blocks.

First the graph is brought into a form where order is explicit (`pm_linear_form`):
  - a REDUCE becomes a register accumulator: STORE the identity, STORE acc <op> value inside the reduce loops, END them,
    then LOAD the result. The AFTERs tie each access to the ranges it must run in, so nothing is hoisted out of its loop;
  - an END of several ranges becomes nested single ENDs, innermost first;
  - a gated STORE becomes IF(gate) / STORE / ENDIF;
  - ENDs closing the same RANGE merge into one (`merge_loops`).
Then every node gets a *scope*, the RANGEs and IFs it runs inside (those it depends on and that are not closed on the
way), and the nodes are emitted: whatever fits the open blocks first (so loop-invariant work lands before its loop),
else the innermost block is closed once nothing left needs it, else the next block is opened (the one that closes
earliest in dependency order). A pure node may run inside a loop it does not depend on (only slower), never inside an IF
it does not depend on; a STORE to memory others see runs in exactly its own loops. So a reduction may land inside an
output loop its value does not depend on; its accumulator's init is therefore emitted just before its reduce loop opens,
inside every loop that loop is, never earlier (where it would run once for all of that output loop's iterations)."""
from __future__ import annotations

from tinyspec.dtype import AddrSpace
from tinyspec.engine.rangeify import reduce_identity
from tinyspec.uop.ops import Ops
from tinyspec.uop.rewrite import PatternMatcher, UPat, graph_rewrite
from tinyspec.uop.spec import accumulation
from tinyspec.uop.uop import UOp

_ZERO = UOp.const(0)

def _side_effect(u: UOp) -> bool:
  """A write to memory others see (a register write is private: redoing it in an outer loop's every iteration is harmless)."""
  if u.op in (Ops.BARRIER, Ops.ATOMICADD): return True
  return u.op is Ops.STORE and u.src[0].src[0].addrspace is not AddrSpace.REG  # STORE(INDEX(buffer, or AFTER of one), ...)


def scopes(root: UOp) -> dict[UOp, frozenset[UOp]]:
  """For each node, the RANGEs and IFs it runs inside."""
  sc: dict[UOp, frozenset[UOp]] = {}
  for u in root.toposort():
    inner = frozenset().union(*(sc[s] for s in u.src))
    if u.op in (Ops.RANGE, Ops.IF): sc[u] = inner | {u}
    elif u.op is Ops.END: sc[u] = inner - set(u.src[1:])
    elif u.op is Ops.ENDIF: sc[u] = inner - {u.src[0]}
    elif u.op is Ops.GROUP: sc[u] = inner - {s.src[0] for s in u.src if s.op is Ops.ENDIF}  # a group holding an ENDIF is past its IF
    else: sc[u] = inner
  return sc

class _Accumulators:
  """ctx of pm_linear_form: numbers the register accumulators after the kernel's own REG/LOCAL buffers."""
  def __init__(self, first: int): self.count = first

def _reduce_to_acc(ctx: _Accumulators, red: UOp) -> UOp:
  rop, val, ranges = red.arg[0], red.src[0], red.src[1:]
  outer = sorted(scopes(val)[val] - set(ranges), key=lambda r: r.arg if r.op is Ops.RANGE else (-1,))
  acc = UOp(Ops.BUFFER, (UOp.vec((1,)),), (ctx.count, red.dtype, None, AddrSpace.REG))
  ctx.count += 1
  init = UOp(Ops.STORE, (UOp(Ops.AFTER, (acc, *outer)).index(_ZERO) if outer else acc.index(_ZERO), reduce_identity(rop, red.dtype)))
  inside = UOp(Ops.AFTER, (acc, init, *ranges)).index(_ZERO)
  update = UOp(Ops.STORE, (inside, UOp(rop, (UOp(Ops.LOAD, (inside,)), val))))
  return UOp(Ops.LOAD, (UOp(Ops.AFTER, (acc, UOp(Ops.END, (update, *ranges)))).index(_ZERO),))

def _nest_end(end: UOp) -> UOp | None:
  if len(end.src) <= 2: return None
  return UOp(Ops.END, (UOp(Ops.END, end.src[:2]), *end.src[2:]))

def _gated_store(st: UOp) -> UOp:
  # the IF depends on the store's index too, so it opens inside every loop the store runs in, not just those of its gate
  # (a gate on an outer axis alone would open the IF outside the inner loops the ENDIF must close within)
  block = UOp(Ops.IF, (st.src[2], st.src[0]))
  return UOp(Ops.GROUP, (UOp(Ops.STORE, (UOp(Ops.AFTER, (st.src[0], block)), st.src[1])), UOp(Ops.ENDIF, (block,))))

pm_linear_form = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), _reduce_to_acc),                        # REDUCE(x, r) -> init acc; acc op= x over r; load acc
  (UPat(Ops.END, name="end"), _nest_end),                                 # END(x, r0, r1) -> END(END(x, r0), r1)
  (UPat(Ops.STORE, src=(UPat(), UPat(), UPat()), name="st"), _gated_store),  # STORE(b, v, g) -> IF(g); STORE(b, v); ENDIF
])


def _read_by_one_another(nodes: list[UOp], ends: list[UOp]) -> bool:
  """Whether the body of one of `ends` reads another of them (`nodes`: the graph in dependency order). One pass, tracking
  which of them each node reads: a walk of every body per pair made a 16x8 register tile's matmul take 12 s here."""
  members, reads = set(ends), {}
  for u in nodes:
    got = frozenset().union(*(reads[s] for s in u.src))
    reads[u] = got | {u} if u in members else got
  return any(reads[e.src[0]] & members for e in ends)

def merge_loops(sink: UOp) -> UOp:
  """One END per RANGE: ENDs closing the same RANGE (the copies expand makes of a reduction in an UPCAST kernel) become one
  END of a GROUP of their bodies, so the copies share a single loop."""
  while True:
    ends: dict[UOp, list[UOp]] = {}
    nodes = sink.toposort()
    for u in nodes:
      if u.op is Ops.END: ends.setdefault(u.src[1], []).append(u)
    # only ENDs whose bodies do not read one another: merging those would make a cycle
    dup = next((es for es in ends.values() if len(es) > 1 and not _read_by_one_another(nodes, es)), None)
    if dup is None: return sink
    merged = UOp(Ops.END, (UOp(Ops.GROUP, tuple(e.src[0] for e in dup)), dup[0].src[1]))
    sink = sink.substitute({e: merged for e in dup})

def linearize(kernel: UOp) -> UOp:
  """The kernel SINK as a LINEAR program (see the module docstring)."""
  taken = [u.arg[0] for u in kernel.toposort() if u.op is Ops.BUFFER and u.arg[3] is not AddrSpace.GLOBAL]
  sink = merge_loops(graph_rewrite(kernel, pm_linear_form, ctx=_Accumulators(1 + max(taken, default=-1))))
  nodes = sink.toposort()[:-1]  # everything but the SINK itself
  order = {u: i for i, u in enumerate(nodes)}
  sc = scopes(sink)
  closer = {c.src[1] if c.op is Ops.END else c.src[0]: c for c in nodes if c.op in (Ops.END, Ops.ENDIF)}
  missing = [u for u in nodes if u.op in (Ops.RANGE, Ops.IF) and u not in closer]
  if missing: raise ValueError(f"linearize: {missing[0].op.name} {missing[0].arg} is never closed (no END/ENDIF for it)")
  needs: dict[UOp, int] = {}   # per open block: nodes still to emit that run inside it
  for u in nodes:
    for b in sc[u]: needs[b] = needs.get(b, 0) + 1
  waiting = {u: len(set(u.src) - {sink}) for u in nodes}
  users: dict[UOp, list[UOp]] = {}
  for u in nodes:
    for s in set(u.src): users.setdefault(s, []).append(u)
  # an accumulator's init waits for its reduce loop to open, and runs right before it: that loop may open inside an output
  # loop the value does not depend on, and each iteration of that output loop must start the sum afresh
  inits: dict[UOp, list[UOp]] = {}  # reduce RANGE -> the inits of the accumulators summed over it
  for u in nodes:
    if (acc := accumulation(u)) is not None:
      for r in acc.ranges: inits.setdefault(r, []).extend(acc.inits)
  deferred = {i for group in inits.values() for i in group}
  ready = sorted((u for u in nodes if waiting[u] == 0), key=order.__getitem__)
  out: list[UOp] = []
  open_: list[UOp] = []

  def emit(u: UOp):
    ready.remove(u); out.append(u)
    for b in sc[u]: needs[b] -= 1
    for v in users.get(u, ()):
      waiting[v] -= 1
      if waiting[v] == 0: ready.append(v); ready.sort(key=order.__getitem__)

  while ready:
    opened = set(open_)
    # a node fits where all it runs in is open; but no IF may be open that it does not depend on (it would become conditional),
    # and a side effect runs exactly in its own loops (in another loop it would repeat)
    fits = next((u for u in ready if u.op not in (Ops.RANGE, Ops.IF, Ops.END, Ops.ENDIF) and u not in deferred and sc[u] <= opened
                 and (sc[u] == opened if _side_effect(u) else all(b in sc[u] for b in open_ if b.op is Ops.IF))), None)
    if fits is not None: emit(fits); continue
    if open_ and needs[open_[-1]] == 0 and closer[open_[-1]] in ready:  # nothing left runs inside the innermost block
      emit(closer[open_.pop()]); continue
    start = [u for u in ready if u.op in (Ops.RANGE, Ops.IF) and sc[closer[u]] <= opened
             and all(i in ready for i in inits.get(u, ()) if i in deferred)]
    if not start: raise ValueError(f"linearize: no valid order; stuck with open blocks {[b.op.name for b in open_]} and "
                                   f"ready {[u.op.name for u in ready]}")
    # the deepest-nested first; among equals the block that closes earliest in dependency order, since later ones may need it
    best = max(start, key=lambda u: (len(sc[closer[u]]), -order[closer[u]]))
    for i in inits.get(best, ()):
      if i in deferred: deferred.remove(i); emit(i)
    emit(best); open_.append(best)
  return UOp(Ops.LINEAR, tuple(out))
