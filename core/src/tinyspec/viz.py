"""Printing the IR: a linear program as a numbered listing (seed 003's form), any graph as a tree, and Graphviz DOT."""
from __future__ import annotations

from tinyspec.uop.ops import Ops
from tinyspec.uop.uop import UOp


def _arg(u: UOp) -> str:
  if u.op is Ops.CONST: return repr(u.arg[0])
  return "" if u.arg is None else repr(u.arg)

def render_listing(prog: UOp | list[UOp]) -> str:
  """A linear program, one numbered line per UOp: index, op, dtype, the indices of its sources, arg."""
  uops = list(prog.src) if isinstance(prog, UOp) and prog.op is Ops.LINEAR else prog.toposort() if isinstance(prog, UOp) else prog
  pos = {u: i for i, u in enumerate(uops)}
  lines = []
  for i, u in enumerate(uops):
    srcs = "[" + ", ".join(str(pos[s]) if s in pos else "--" for s in u.src) + "]"
    lines.append(f"{i:4d} {u.op.name:<12s} {str(u.dtype):<24s} {srcs:<20s} {_arg(u)}".rstrip())
  return "\n".join(lines)

_INFIX = {Ops.ADD: "+", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%"}

def render_size(u: UOp) -> str | None:
  """A symbolic size as an expression, a bound variable with its value: `(n=7*4)`; None for anything but variables,
  constants and + * // % max of them."""
  if u.op is Ops.CONST: return str(u.arg[0])
  if u.is_variable: return u.arg[0] if u.bound_value is None else f"{u.arg[0]}={u.bound_value}"
  if u.op not in _INFIX and u.op is not Ops.MAX: return None
  a, b = (render_size(s) for s in u.src)
  if a is None or b is None: return None
  return f"max({a}, {b})" if u.op is Ops.MAX else f"({a}{_INFIX[u.op]}{b})"

def render_tree(root: UOp, max_lines: int | None = None) -> str:
  """The graph under root as an indented tree; a node seen before prints as a back-reference instead of again."""
  lines: list[str] = []
  ids: dict[UOp, int] = {}
  stack: list[tuple[UOp, int]] = [(root, 0)]
  while stack:
    if max_lines is not None and len(lines) >= max_lines:
      lines.append("  ..."); break
    u, depth = stack.pop()
    pad = "  " * depth
    if u in ids:
      lines.append(f"{pad}<{ids[u]}> {u.op.name}"); continue
    ids[u] = len(ids)
    shape = f" shape={u.shape}" if u.shape else ""
    extra = (f" arg={_arg(u)}" if u.arg is not None else "") + (f" tag={u.tag!r}" if u.tag is not None else "")
    lines.append(f"{pad}<{ids[u]}> {u.op.name} {u.dtype}{shape}{extra}")
    stack.extend((s, depth + 1) for s in reversed(u.src))
  return "\n".join(lines)

def to_dot(root: UOp) -> str:
  """The graph under root as Graphviz DOT text: one box per node, an edge from each source to its user, numbered by position."""
  nodes = root.toposort()
  ids = {u: i for i, u in enumerate(nodes)}
  out = ["digraph uops {", "  node [shape=box, fontname=monospace];"]
  for u in nodes:
    label = f"{u.op.name}\\n{u.dtype}" + (f"\\n{_arg(u)}" if u.arg is not None else "")
    out.append(f"  n{ids[u]} [label=\"{label.replace(chr(34), chr(39))}\"];")
    out.extend(f"  n{ids[s]} -> n{ids[u]} [label=\"{i}\"];" for i, s in enumerate(u.src))
  out.append("}")
  return "\n".join(out)
