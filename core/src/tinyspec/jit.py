"""TinyJit: capture the kernels a Python function of Tensors runs, then replay them with no Python work but the launches.

    @TinyJit
    def step(x, y): ...          # a function of Tensors returning Tensors (or lists, tuples, dicts of them)

  call 1: runs the function as Python (compiling whatever it needs);
  call 2: runs it again while recording every kernel and copy it runs, on which buffers (`engine.realize.capture`);
  call 3+: replays the recording: each input's buffer takes the place the capture's input had, every other buffer
           (weights, optimizer state, intermediates, the outputs) is the one the capture used, and the outputs come back
           as new Tensors over the capture's output buffers.

What a user should know (tinygrad's semantics):
  - The outputs of one call are overwritten by the next: copy (`.numpy()`, `.contiguous().realize()`) what must be kept.
  - Everything that is not an input Tensor is fixed at capture: Python numbers and flags, numpy data turned into Tensors
    inside the function, random numbers drawn there. Tensors read from outside (weights) are read from their buffers on
    every replay, so in-place updates (`assign`, the optimizers) are seen.
  - Every call must pass Tensors of the capture's shapes, dtypes and devices, and the same other arguments; anything else
    raises a ValueError naming the difference (`jit.reset()` forgets the capture, so the next two calls capture anew).
  - Symbolic shapes: an input whose shape has a bound variable (`UOp.variable("n", 1, 64).bind(k)`), or a bound variable
    passed as an argument, may take another value on each call: the replay runs the same kernels with the new values.
  - The function's Python side effects (prints, counters) happen on the first two calls only.

A device may launch a whole capture as one unit (`Runtime.graph`: the CPU device calls its kernels from one prepared
list of addresses); otherwise the replay calls each kernel's Program in turn."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tinyspec.device import Buffer, Device
from tinyspec.device.runtime import Launch
from tinyspec.engine import realize as engine
from tinyspec.function import _map
from tinyspec.tensor import Tensor
from tinyspec.uop.ops import Ops
from tinyspec.uop.properties import bound_values, vec_values
from tinyspec.uop.uop import UOp

R = TypeVar("R")


def _others(args: tuple, kwargs: dict) -> Any:
  """The arguments with each Tensor replaced by a marker and each bound variable by its variable: what must be the same on
  every call."""
  return _unbound_args(_map((args, tuple(sorted(kwargs.items()))), lambda t: Tensor))

def _unbound_args(x: Any) -> Any:
  if isinstance(x, UOp): return x.unbind()
  if isinstance(x, (tuple, list)) and not hasattr(x, "_fields"): return type(x)(_unbound_args(v) for v in x)
  return x

def _symbolic(vec: UOp) -> bool: return any(s.op is not Ops.CONST for s in vec.src)

def _describe(t: Tensor) -> tuple:
  """A realized input's shape (as its shape vector, its variables unbound), dtype and device: read off its BUFFER, as a
  replay does on every call."""
  u = t.uop
  if u.op is not Ops.BUFFER: return (t.shape, t.dtype, t.device)
  vec = u.src[0]
  return (vec.substitute({v: v.unbind() for v in vec.toposort() if v.bound_value is not None}) if _symbolic(vec) else vec, u.arg[1], u.arg[2])

def _values(inputs: list[Tensor], args: tuple, kwargs: dict) -> dict[str, int]:
  """The values, by name, of the variables bound in the inputs' shapes and in the other arguments."""
  nodes = [n for t in inputs if _symbolic(vec := t.uop.src[0]) for n in vec.toposort()]
  stack = [*args, *kwargs.values()]
  while stack:
    if isinstance(x := stack.pop(), UOp): nodes.append(x)
    elif isinstance(x, (tuple, list)): stack.extend(x)
    elif isinstance(x, dict): stack.extend(x.values())
  return {v.arg[0]: value for v, value in bound_values(nodes).items()}


class CapturedJit:
  """A recording, ready to replay: segments run in order, each a run of consecutive launches on one device (that device's
  graph where it offers one, else the launches one by one) or a copy between devices."""
  def __init__(self, steps: list[Launch | tuple[Buffer | int, Buffer | int]], devices: list[str | None]):
    self.steps = steps  # holds every Buffer the launches use (`Launch.keep`): a device graph may keep only their addresses
    self.segments: list[Callable[[list[Buffer], list[Any]], None]] = []
    self.kernels = sum(isinstance(s, Launch) for s in steps)
    i = 0
    while i < len(steps):
      if not isinstance(step := steps[i], Launch): self.segments.append(functools.partial(_copy, *step)); i += 1; continue
      j = i
      while j < len(steps) and isinstance(steps[j], Launch) and devices[j] == devices[i]: j += 1
      group: list[Launch] = steps[i:j]  # type: ignore[assignment]
      # a launch taking variables gets their values on each replay: such a run is launched one by one
      graph = None if any(launch.variables for launch in group) else Device[devices[i]].graph(group)
      self.segments.append(functools.partial(_run_graph, graph) if graph else functools.partial(_launch_each, group))
      i = j

  def __call__(self, buffers: list[Buffer], values: dict[str, int]) -> None:
    handles = [b.handle for b in buffers]
    for segment in self.segments: segment(buffers, handles, values)
    engine.stats["kernels_run"] += self.kernels

def _run_graph(graph: Callable[[list[Any]], None], buffers: list[Buffer], handles: list[Any], values: dict[str, int]) -> None: graph(handles)

def _launch_each(launches: list[Launch], buffers: list[Buffer], handles: list[Any], values: dict[str, int]) -> None:
  for launch in launches:
    args = launch.handles
    for position, slot in launch.inputs: args[position] = handles[slot]
    vals = tuple(values[name] for name in launch.variables) if launch.variables else ()
    launch.program(*args, global_size=launch.global_size, local_size=launch.local_size, vals=vals)

def _copy(dest: Buffer | int, src: Buffer | int, buffers: list[Buffer], handles: list[Any], values: dict[str, int]) -> None:
  """A recorded copy; an int is an input slot."""
  dest, src = (buffers[b] if isinstance(b, int) else b for b in (dest, src))
  dest.copyin(src.numpy())


class TinyJit(Generic[R]):
  """Decorate a function of Tensors: the first call runs it, the second captures its kernels, later calls replay them (see
  the module docstring)."""
  def __init__(self, fn: Callable[..., R]):
    self.fn = fn
    functools.update_wrapper(self, fn)  # type: ignore[arg-type]
    self.reset()

  def reset(self) -> None:
    """Forget the capture: the next call runs the function, the one after captures again."""
    self.calls, self.captured, self.signature, self.quick, self.values = 0, None, None, None, {}

  def __get__(self, obj, objtype=None):  # a decorated method binds its instance like a function would
    return self if obj is None else functools.partial(self.__call__, obj)

  def __call__(self, *args, **kwargs) -> R:
    if self.quick is not None and not kwargs and (out := self.quick(args)) is not None: return out
    plain = not kwargs and all(type(a) is Tensor for a in args)  # the usual call, kept quick: Tensors only
    inputs = list(args) if plain else _listed((args, kwargs))
    if pending := [t for t in inputs if t.uop.op is not Ops.BUFFER]: Tensor.realize(*pending)
    signature = (tuple(_describe(t) for t in inputs), None if plain else _others(args, kwargs))
    if self.captured is not None:
      if signature != self.signature: self._check(signature)
      return self._replay(inputs, {**self.values, **_values(inputs, args, kwargs)} if self.values else self.values)
    if len({id(t) for t in inputs}) < len(inputs):
      raise ValueError(f"TinyJit({self.__name__}): the same Tensor is passed twice; pass each input once")
    if any(isinstance(t.device, tuple) for t in inputs):
      raise ValueError(f"TinyJit({self.__name__}): an input is spread over several devices ({[t.device for t in inputs]}); not supported")
    self.calls += 1
    if self.calls == 1:
      self.signature = signature
      return self._realized(self.fn(*args, **kwargs))
    self._check(signature)
    with engine.capture() as recording:
      out = self._realized(self.fn(*args, **kwargs))
    self._record(recording, inputs, out)
    return out

  def _realized(self, out: Any) -> Any:
    if found := _listed(out): Tensor.realize(*found)
    return out

  def _check(self, signature: tuple) -> None:
    if signature == self.signature: return
    (want, want_other), (got, got_other) = self.signature, signature
    if len(want) != len(got): why = f"{len(got)} input Tensors, the capture had {len(want)}"
    elif want != got:
      k = next(i for i, (a, b) in enumerate(zip(want, got)) if a != b)
      (ws, wd, wdev), (gs, gd, gdev) = want[k], got[k]
      why = f"input Tensor {k} has shape {_shape(gs)}, dtype {gd.name}, device {gdev}; the capture had {_shape(ws)}, {wd.name}, {wdev}"
    else: why = f"the other arguments differ from the capture's: {got_other!r}, captured with {want_other!r}"
    raise ValueError(f"TinyJit({self.__name__}): {why}. A captured function replays the same kernels on the same shapes; call "
                     f"{self.__name__}.reset() to capture anew")

  def _record(self, recording: list[tuple[Any, list[Buffer], dict[str, int]]], inputs: list[Tensor], out: Any) -> None:
    slot = {id(engine.buffer_of(t.uop)): k for k, t in enumerate(inputs)}
    steps: list[Launch | tuple] = []
    devices: list[str | None] = []
    # the variables' values at capture; a replay takes new ones from its inputs' shapes and arguments (the rest stay fixed)
    self.values = {name: v for _, _, var_vals in recording for name, v in var_vals.items()}
    for schedule_steps, bufs, _ in recording:
      for step in schedule_steps:
        if isinstance(step, engine.CopyStep):
          steps.append(tuple(slot.get(id(bufs[i]), bufs[i]) for i in step.buffers)); devices.append(None)
        elif not step.empty:
          k, used = step.kernel, [bufs[i] for i in step.buffers]
          holes = tuple((p, slot[id(b)]) for p, b in enumerate(used) if id(b) in slot)
          steps.append(Launch(k.program, [b.handle for b in used], holes, k.global_size, k.local_size, tuple(used), k.variables))
          devices.append(step.device)
    self.outputs = [(slot.get(id(engine.buffer_of(t.uop))), t.uop, t.device) for t in _listed(out)]
    self.structure = out
    self.captured = CapturedJit(steps, devices)
    if self.signature[1] is None and type(out) is Tensor and not self.values: self.quick = self._quick_replay()

  def _quick_replay(self) -> Callable[[tuple], Any]:
    """The replay of a capture called with Tensors only and returning one Tensor, in one function: it returns None for a call
    that is not exactly like the capture's (then the general path checks it and says what differs)."""
    wanted, run, get, buffer_op = self.signature[0], self.captured, engine.buffer_of, Ops.BUFFER
    (slot, uop, device), = self.outputs
    def quick(args: tuple) -> Any:
      if len(args) != len(wanted): return None
      bufs = []
      for t, want in zip(args, wanted):
        if type(t) is not Tensor or (u := t.uop).op is not buffer_op or (u.src[0], u.arg[1], u.arg[2]) != want: return None
        bufs.append(get(u))
      run(bufs, {})
      return args[slot] if slot is not None else Tensor._from_uop(uop, device)
    return quick

  def _replay(self, inputs: list[Tensor], values: dict[str, int]) -> R:
    self.captured([engine.buffer_of(t.uop) for t in inputs], values)
    results = [inputs[k] if k is not None else Tensor._from_uop(_rebound(u, values), device) for k, u, device in self.outputs]
    if type(self.structure) is Tensor: return results[0]  # type: ignore[return-value]
    each = iter(results)
    return _map(self.structure, lambda t: next(each))

def _rebound(u: UOp, values: dict[str, int]) -> UOp:
  """An output BUFFER with the variables in its shape bound to this call's values (the same buffer, read at the new shape)."""
  vec = u.src[0]
  if not values or not _symbolic(vec): return u
  bound = vec.substitute({v: v.unbind().bind(values[v.arg[0]]) for v in vec.toposort() if v.bound_value is not None})
  return engine.buffer_uop(vec_values(bound), engine.buffer_of(u))

def _shape(described: UOp | tuple) -> tuple:
  """The shape `_describe` gave: a BUFFER's shape vector, or a shape as it is."""
  return vec_values(described) if isinstance(described, UOp) else described

def _listed(out: Any) -> list[Tensor]:
  found: list[Tensor] = []
  _map(out, found.append)
  return found
