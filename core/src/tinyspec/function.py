"""@function: a Python function on Tensors captured as one FUNCTION node (seed 001, "The @function Decorator").

Calling a decorated function `f(*args, **kwargs)`:
  1. finds every Tensor in the arguments (through lists, tuples and dicts, nested), each one once (by identity: f(x, x)
     has one input);
  2. runs the Python function on placeholder Tensors, one per input, whose values are PARAMs: nothing is computed;
  3. so input k is PARAM(k) in the traced graph, with the input's shape, dtype and device (as callify's PARAMs);
  4. wraps the results in a TUPLE (a single result too) and builds FUNCTION(TUPLE(results), x_0, x_1, ...) over the
     inputs' UOps;
  5. returns GETTUPLE(FUNCTION, i) Tensors in the structure the function returned (a Tensor, lists, tuples and dicts of
     them, nested); whatever else it returned comes back as it is.

The body names no buffer, only PARAMs, so calling `f` again on other data of the same shapes, dtypes and devices traces
to the very same (hash-consed) body. When an output is realized the call is lowered to an opaque CALL: its arguments are
realized, the body runs as a schedule of its own, cached on the body, so a repeated call lowers and compiles nothing,
and its result buffers take the place of the GETTUPLEs (engine/realize.py). `@function(inline=True)` resolves the call
by substitution instead (PARAM k becomes argument k), so the body fuses with the graph around it; calls inside another
function's body, and calls on values spread over several devices, are always inlined.

What is traced, and so fixed per call:
  - Arguments that are not Tensors (numbers, strings, flags) are constants baked into the trace: another Python value
    gives another body (and compiles once more for it). The function runs again, as Python, on every call.
  - Tensors the function reads from outside (globals, closures, attributes of `self`) are captured: their buffers become
    further arguments after the inputs, so the body still names none; a captured unrealized computation is traced into
    the body as it stands.
  - Nothing may be realized inside the function (`.numpy()`, `.item()`, `bool(t)`): the placeholders hold no data, and
    realize says so."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, overload

from tinyspec.engine import realize as engine
from tinyspec.tensor import Tensor
from tinyspec.uop.ops import Ops
from tinyspec.uop.rewrite import graph_substitute
from tinyspec.uop.uop import UOp

F = TypeVar("F", bound=Callable[..., Any])


def _map(x: Any, f: Callable[[Tensor], Any]) -> Any:
  """`x` with each Tensor in it (through lists, tuples, named tuples and dicts, nested) replaced by f(tensor), in walk order."""
  if isinstance(x, Tensor): return f(x)
  if isinstance(x, dict): return type(x)((k, _map(v, f)) for k, v in x.items())
  if isinstance(x, tuple): return type(x)(*(_map(v, f) for v in x)) if hasattr(x, "_fields") else type(x)(_map(v, f) for v in x)
  if isinstance(x, list): return type(x)(_map(v, f) for v in x)
  return x

def _param(t: Tensor, k: int) -> UOp:
  """PARAM k standing for `t`: its shape vector as source, arg (k, dtype, device)."""
  return UOp(Ops.PARAM, (UOp.vec(t.shape),), (k, t.dtype, t.device))


def _trace(fn: Callable[..., Any], args: tuple, kwargs: dict, inline: bool = False) -> Any:
  """Run `fn(*args, **kwargs)` as a FUNCTION (the five steps in the module docstring) and return its GETTUPLE Tensors."""
  name = getattr(fn, "__qualname__", type(fn).__name__)
  inputs: dict[int, tuple[Tensor, Tensor]] = {}  # id(input) -> (input, its placeholder)
  def placeholder(t: Tensor) -> Tensor:
    if id(t) not in inputs:
      inputs[id(t)] = (t, Tensor._from_uop(_param(t, len(inputs)), t.device))
    return inputs[id(t)][1]
  targs, tkwargs = _map(args, placeholder), _map(kwargs, placeholder)
  out = fn(*targs, **tkwargs)
  results: list[Tensor] = []
  _map(out, results.append)
  if not results:
    raise TypeError(f"@function {name}: it must return a Tensor, or lists/tuples/dicts holding Tensors; it returned {type(out).__name__} "
                    f"with no Tensor in it")
  # Tensors read from outside the arguments bring their buffers in: those become arguments too, so the body names none
  values = tuple(r.uop for r in results)
  captured = [u for u in UOp.sink(*values).toposort() if u.op is Ops.BUFFER]
  n = len(inputs)
  body = graph_substitute(UOp(Ops.TUPLE, values), {b: UOp(Ops.PARAM, (b.src[0],), (n + j, b.dtype, b.device)) for j, b in enumerate(captured)})
  call = UOp(Ops.FUNCTION, (body, *(t.uop for t, _ in inputs.values()), *captured), tag=engine.INLINE if inline else None)
  engine.call_names[call] = name
  outputs = iter(Tensor._from_uop(UOp(Ops.GETTUPLE, (call,), i), r.device) for i, r in enumerate(results))
  return _map(out, lambda t: next(outputs))


@overload
def function(fn: F, *, inline: bool = False) -> F: ...
@overload
def function(fn: None = None, *, inline: bool = False) -> Callable[[F], F]: ...
def function(fn: Callable[..., Any] | None = None, *, inline: bool = False) -> Any:
  """Decorator: each call of the function becomes one FUNCTION node, with GETTUPLE Tensors as its results (see the module
  docstring). `@function` or `@function(inline=True)`; the latter resolves calls by substitution instead of a CALL."""
  if fn is None: return lambda f: function(f, inline=inline)
  if not callable(fn): raise TypeError(f"@function needs a callable, got {type(fn).__name__}")
  @functools.wraps(fn)
  def wrapper(*args, **kwargs): return _trace(fn, args, kwargs, inline)
  return wrapper
