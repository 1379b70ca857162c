"""Stage 1, callify: the Tensor graph becomes one stateless function.

Every concrete BUFFER in the graphs to realize is replaced by PARAM(k), k its position among the arguments, and the
values are packed into a TUPLE: FUNCTION(TUPLE(v_0, v_1, ...), buf_0, buf_1, ...). The TUPLE body no longer names any
buffer, so the same computation on other data of the same shapes gives the very same (hash-consed) body: the key of the
schedule cache."""
from __future__ import annotations

from tinyspec.uop.ops import Ops
from tinyspec.uop.rewrite import graph_substitute
from tinyspec.uop.spec import verify_between_stages
from tinyspec.uop.uop import UOp


def param_for(buf: UOp, k: int) -> UOp:
  """PARAM k standing for `buf`: the same shape, dtype and device."""
  return UOp(Ops.PARAM, (buf.src[0],), (k, buf.arg[1], buf.arg[2]))

def callify(*values: UOp) -> UOp:
  """FUNCTION(TUPLE(values with buffers as PARAMs), buffers...): buffers numbered in the order a walk of the values meets them."""
  verify_between_stages(UOp.sink(*values), "tensor")
  buffers = [u for u in UOp.sink(*values).toposort() if u.op is Ops.BUFFER]
  body = graph_substitute(UOp(Ops.TUPLE, values), {b: param_for(b, k) for k, b in enumerate(buffers)})
  return UOp(Ops.FUNCTION, (body, *buffers))
