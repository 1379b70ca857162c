"""Stage 1, callify: the Tensor graph becomes one stateless function.

Every concrete BUFFER in the graphs to realize is replaced by PARAM(k), k its position among the arguments, and the
values are packed into a TUPLE: FUNCTION(TUPLE(v_0, v_1, ...), buf_0, buf_1, ...). The TUPLE body no longer names any
buffer, so the same computation on other data of the same shapes gives the very same (hash-consed) body: the key of the
schedule cache.

The graphs reaching callify hold no calls: realize first resolves each GETTUPLE(FUNCTION) that @function made, running
it as a CALL of its own or inlining it (`inline`: PARAM k becomes argument k); the helpers for that are below."""
from __future__ import annotations

from collections.abc import Callable

from tinyspec.uop.ops import Ops
from tinyspec.uop.rewrite import graph_substitute
from tinyspec.uop.spec import verify_between_stages
from tinyspec.uop.uop import UOp


def param_for(buf: UOp, k: int) -> UOp:
  """PARAM k standing for `buf`: the same shape, dtype and device."""
  return UOp(Ops.PARAM, (buf.src[0],), (k, buf.arg[1], buf.arg[2]))

def callify(*values: UOp, nodes: list[UOp] | None = None) -> UOp:
  """FUNCTION(TUPLE(values with buffers as PARAMs), buffers...): buffers numbered in the order a walk of the values meets them.
  `nodes` is `UOp.sink(*values).toposort()` where the caller has it already (this runs on every realize)."""
  if nodes is None: nodes = UOp.sink(*values).toposort()
  verify_between_stages(nodes[-1], "tensor")
  new: dict[UOp, UOp] = {}
  buffers: list[UOp] = []
  for u in nodes:
    if u.op is Ops.BUFFER: new[u] = param_for(u, len(buffers)); buffers.append(u)
    else: new[u] = u.replace(src=tuple(new[s] for s in u.src)) if u.src else u
  return UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, tuple(new[v] for v in values)), *buffers))

# ---- calls: the FUNCTIONs @function makes ----
# A FUNCTION's body speaks of its own PARAMs. PARAMs are hash-consed, so PARAM 0 of a nested function's body is the very
# node PARAM 0 of the body around it: a walk of the caller's graph must not enter bodies, and PARAMs are substituted
# only in a body whose own calls were resolved first.

def outside_bodies(*roots: UOp) -> list[UOp]:
  """The nodes reachable from `roots` without entering a FUNCTION or CALL body (src[0]), sources first: the caller's graph."""
  seen: dict[UOp, None] = {}
  stack = [(r, False) for r in reversed(roots)]
  while stack:
    n, expanded = stack.pop()
    if n in seen: continue
    if expanded: seen[n] = None; continue
    stack.append((n, True))
    stack.extend((s, False) for s in reversed(n.src[1:] if n.op in (Ops.FUNCTION, Ops.CALL) else n.src) if s not in seen)
  return list(seen)

def resolve_calls(roots: tuple[UOp, ...], resolve: Callable[[UOp, UOp, int], UOp]) -> tuple[UOp, ...]:
  """`roots` with each GETTUPLE(FUNCTION) of the caller's graph replaced by resolve(fn, fn_now, i): `fn` the FUNCTION as
  it is, `fn_now` the same with the calls in its arguments already resolved, `i` the element read."""
  new: dict[UOp, UOp] = {}
  for n in outside_bodies(*roots):
    if n.op is Ops.FUNCTION: new[n] = n.replace(src=(n.src[0], *(new[s] for s in n.src[1:])))
    elif n.op is Ops.GETTUPLE and n.src[0].op is Ops.FUNCTION: new[n] = resolve(n.src[0], new[n.src[0]], n.arg)
    else: new[n] = n.replace(src=tuple(new[s] for s in n.src))
  return tuple(new[r] for r in roots)

def inline(fn: UOp, i: int) -> UOp:
  """Element i of FUNCTION `fn` resolved by substitution: its body's element with PARAM k replaced by argument k."""
  elem = inline_calls(fn.src[0].src[i])  # now free of calls, so every PARAM in it is fn's own
  return graph_substitute(elem, {p: fn.src[1 + p.arg[0]] for p in elem.toposort() if p.op is Ops.PARAM and isinstance(p.arg[0], int)})

def inline_calls(root: UOp) -> UOp:
  """`root` with every call in it (at its own level and, through them, nested ones) inlined: no FUNCTION is left."""
  return resolve_calls((root,), lambda fn, now, i: inline(now, i))[0]
