"""Printing the IR: the numbered listing of a linear program, the tree with back-references, Graphviz DOT."""
import re

from tinyspec.dtype import dtypes
from tinyspec.uop import AxisType, Ops, UOp
from tinyspec.viz import render_listing, render_tree, to_dot


def kernel():
  """out[i] = a[i] + 1.0 for i in 0..3, as a SINK of one STORE inside a RANGE loop."""
  out = UOp(Ops.PARAM, (UOp.vec((4,)),), (0, dtypes.float32.ptr(4)))
  a = UOp(Ops.PARAM, (UOp.vec((4,)),), (1, dtypes.float32.ptr(4)))
  i = UOp.range(4, 0, AxisType.GLOBAL)
  val = UOp(Ops.LOAD, (a.index(i),)) + UOp.const(1.0, dtypes.float32)
  return UOp.sink(UOp(Ops.END, (UOp(Ops.STORE, (out.index(i), val)), i)))

LINE = re.compile(r"^ *(\d+) (\w+) +([^\[]+?) +\[([\d, -]*)\] *(.*)$")  # dtypes may hold spaces: ptr(4, AddrSpace.GLOBAL)

def parse_listing(text):
  rows = []
  for line in text.splitlines():
    m = LINE.match(line)
    assert m, line
    idx, op, dt, srcs, arg = m.groups()
    rows.append((int(idx), op, dt, [int(s) if s != "--" else None for s in srcs.split(", ")] if srcs else [], arg))
  return rows

def test_listing_of_linear_program():
  prog = UOp(Ops.LINEAR, tuple(kernel().toposort()))
  text = render_listing(prog)
  rows = parse_listing(text)
  assert [r[0] for r in rows] == list(range(len(prog.src)))
  assert [r[1] for r in rows] == [u.op.name for u in prog.src]
  assert [r[2] for r in rows] == [str(u.dtype) for u in prog.src]
  for (_, _, _, srcs, _), u in zip(rows, prog.src):
    assert [prog.src[s] for s in srcs] == list(u.src)  # source indices point at the sources
  for line in text.splitlines(): assert line == line.rstrip()
  by_op = {r[1]: r for r in rows}
  assert by_op["RANGE"][4] == "(0, AxisType.GLOBAL)" and by_op["LOAD"][4] == "" and by_op["SINK"][4] == ""
  assert [r[4] for r in rows if r[1] == "CONST"] == ["4", "1.0"]  # a CONST shows its value only

def test_listing_exact_format():
  x = UOp(Ops.PARAM, (UOp.vec(()),), ("x", dtypes.int32))
  one = UOp.const(1, dtypes.int32)
  prog = UOp(Ops.LINEAR, (x.src[0], x, one, x + one))
  assert render_listing(prog).splitlines() == [
    "   0 STACK        dtypes.index             []",
    "   1 PARAM        dtypes.int32             [0]                  ('x', dtypes.int32)",
    "   2 CONST        dtypes.int32             []                   1",
    "   3 ADD          dtypes.int32             [1, 2]",
  ]

def test_listing_of_list_graph_and_missing_sources():
  x = UOp.variable("x", 0, 9, dtypes.int32)
  e = x * 2
  assert render_listing(e) == render_listing(e.toposort()) == render_listing(UOp(Ops.LINEAR, tuple(e.toposort())))
  rows = parse_listing(render_listing([e]))  # a source outside the program prints as --
  assert rows == [(0, "MUL", "dtypes.int32", [None, None], "")]
  assert render_listing([]) == ""

def test_tree_back_references():
  x = UOp.variable("x", 0, 9, dtypes.int32)
  a = x + 1
  root = a * a
  lines = render_tree(root).splitlines()
  assert lines[0] == "<0> MUL dtypes.int32"
  assert lines[1] == "  <1> ADD dtypes.int32"
  assert lines[2] == "    <2> PARAM dtypes.int32 arg=('x', dtypes.int32)"
  assert lines[3] == "      <3> STACK dtypes.index shape=(0,)"
  assert lines[-1] == "  <1> ADD"  # the second use of `a` is a back-reference, not its subtree again
  assert len(lines) == 8  # MUL ADD PARAM STACK CONST(0) CONST(9) CONST(1), then <1> again
  ids = [int(m.group(1)) for line in lines if (m := re.match(r"\s*<(\d+)> \w+ ", line))]
  assert ids == list(range(len(set(ids))))  # first appearances are numbered in order

def test_tree_shows_shape_arg_tag_and_truncates():
  b = UOp.buffer((2, 3), dtypes.float32, "CPU", 0).replace(tag="t0")
  first = render_tree(b).splitlines()[0]
  assert first == "<0> BUFFER dtypes.float32 shape=(2, 3) arg=(0, dtypes.float32, 'CPU', AddrSpace.GLOBAL) tag='t0'"
  c = UOp.const(0, dtypes.int32)
  for _ in range(30): c = c + UOp.const(1, dtypes.int32)
  text = render_tree(c, max_lines=5)
  assert len(text.splitlines()) == 6 and text.splitlines()[-1] == "  ..."
  assert len(render_tree(c).splitlines()) == 32 + 29  # 30 ADDs and 2 CONSTs, then the shared CONST(1) as a back-reference 29 times

def test_tree_deep_chain_does_not_recurse():
  c = UOp.const(0, dtypes.int32)
  for _ in range(3000): c = c + c
  assert len(render_tree(c).splitlines()) == 2 * 3000 + 1

def test_repr_is_a_short_tree():
  c = UOp.const(0, dtypes.int32)
  for _ in range(50): c = c + UOp.const(1, dtypes.int32)
  r = repr(c)
  assert r.startswith("<0> ADD dtypes.int32") and r.endswith("...") and len(r.splitlines()) == 13

NODE = re.compile(r'^  n(\d+) \[label="([^"]*)"\];$')
EDGE = re.compile(r'^  n(\d+) -> n(\d+) \[label="(\d+)"\];$')

def check_dot(text, root):
  lines = text.splitlines()
  assert lines[0] == "digraph uops {" and lines[-1] == "}"
  nodes, edges = {}, []
  for line in lines[1:-1]:
    if m := NODE.match(line): nodes[int(m.group(1))] = m.group(2)
    elif m := EDGE.match(line): edges.append(tuple(map(int, m.groups())))
    else: assert line.startswith("  node ["), line
  order = root.toposort()
  assert sorted(nodes) == list(range(len(order)))  # one node line per UOp
  assert len(edges) == sum(len(u.src) for u in order)
  pos = {u: i for i, u in enumerate(order)}
  assert sorted(edges) == sorted((pos[s], pos[u], i) for u in order for i, s in enumerate(u.src))
  for i, u in enumerate(order): assert nodes[i].split("\\n")[:2] == [u.op.name, str(u.dtype)]
  return nodes

def test_dot():
  k = kernel()
  text = to_dot(k)
  assert text.startswith("digraph")
  check_dot(text, k)
  x = UOp.variable("x", 0, 9, dtypes.int32)
  check_dot(to_dot(x * x), x * x)  # a source used twice gives two edges

def test_dot_quotes_in_args_stay_valid():
  u = UOp(Ops.CUSTOM, (UOp.const(1, dtypes.int32),), 'printf("%d", {0})')
  nodes = check_dot(to_dot(u), u)
  assert "printf('%d', {0})" in nodes[1]
