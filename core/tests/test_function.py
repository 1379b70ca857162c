"""@function (seed 001): the five steps of the trace, the structures it takes and returns, numbers against the undecorated
function and numpy, gradients through a FUNCTION, kernel reuse across calls, inlining, and the errors."""
from collections import namedtuple

import numpy as np
import pytest
from tinyspec import Ops, Tensor, function
from tinyspec.engine import realize as R

rng = np.random.default_rng(0)
def data(*shape) -> np.ndarray: return rng.standard_normal(shape, dtype=np.float32)
def T(arr, **kw) -> Tensor: return Tensor(arr, **kw)

def call_of(t: Tensor):
  """The FUNCTION a GETTUPLE Tensor reads."""
  assert t.uop.op is Ops.GETTUPLE and t.uop.src[0].op is Ops.FUNCTION
  return t.uop.src[0]

def mlp(x, w, b): return (x @ w + b).relu().softmax(axis=-1)

# ---- the five steps ----

def test_inputs_are_found_everywhere_and_deduplicated_by_identity():
  x, y, z = T(data(3)), T(data(3)), T(data(3))
  @function
  def f(a, pair, opts, c=None): return a + pair[0] * pair[1][0] + opts["k"] + c
  out = f(x, (y, [x]), {"k": z}, c=y)
  fn = call_of(out)
  assert fn.src[1:] == (x.uop, y.uop, z.uop)  # in the order the walk meets them, each once
  np.testing.assert_allclose(out.numpy(), x.numpy() + y.numpy() * x.numpy() + z.numpy() + y.numpy(), rtol=1e-6)
  assert len(call_of(function(lambda a, b: a * b)(x, x)).src) == 2  # f(x, x): one argument
  # identity, not equality: another Tensor over the same UOp is another input
  assert len(call_of(function(lambda a, b: a * b)(x, Tensor(x))).src) == 3

def test_trace_runs_on_placeholders_and_body_holds_only_params():
  x, w = T(data(2, 4)), T(data(4, 3))
  seen = []
  @function
  def f(a, b):
    seen.append((a.uop.op, b.uop.op))
    return a @ b
  before = R.stats["kernels_run"]
  out = f(x, w)
  assert seen == [(Ops.PARAM, Ops.PARAM)] and R.stats["kernels_run"] == before  # nothing ran
  fn = call_of(out)
  body = fn.src[0].toposort()
  assert not [u for u in body if u.op is Ops.BUFFER]
  params = sorted((u for u in body if u.op is Ops.PARAM), key=lambda p: p.arg[0])
  for k, (p, arg) in enumerate(zip(params, (x, w))):  # PARAM k: the argument's shape vector and (k, dtype, device)
    assert p.arg == (k, arg.dtype, arg.device) and p.src[0] is arg.uop.src[0] and p.shape == arg.shape
  assert fn.src[1:] == (x.uop, w.uop)

def test_single_return_is_wrapped_in_a_tuple():
  out = function(lambda a: a * 2)(T(data(5)))
  fn = call_of(out)
  assert fn.src[0].op is Ops.TUPLE and len(fn.src[0].src) == 1 and out.uop.arg == 0
  assert out.shape == (5,) and out.dtype == fn.src[0].src[0].dtype

def test_one_gettuple_per_output():
  x = T(data(4))
  a, b, c = function(lambda t: (t + 1, t * 2, t.sum()))(x)
  assert {call_of(t) for t in (a, b, c)} == {call_of(a)} and [t.uop.arg for t in (a, b, c)] == [0, 1, 2]
  assert len(call_of(a).src[0].src) == 3 and c.shape == ()
  xn = x.numpy()
  for t, want in zip((a, b, c), (xn + 1, xn * 2, xn.sum())): np.testing.assert_allclose(t.numpy(), want, rtol=1e-5)

# ---- structures ----

def test_nested_returns_keep_their_structure():
  x, y = T(data(2, 3)), T(data(2, 3))
  Pair = namedtuple("Pair", "lo hi")
  @function
  def f(a, b): return {"sum": a + b, "parts": (a.max(), [b.min(), "tag", 7]), "pair": Pair(a - b, None)}
  out = f(x, y)
  assert set(out) == {"sum", "parts", "pair"} and isinstance(out["parts"], tuple) and isinstance(out["parts"][1], list)
  assert out["parts"][1][1:] == ["tag", 7] and isinstance(out["pair"], Pair) and out["pair"].hi is None  # non-Tensors as they are
  assert len({call_of(t) for t in (out["sum"], out["parts"][0], out["parts"][1][0], out["pair"].lo)}) == 1
  xn, yn = x.numpy(), y.numpy()
  np.testing.assert_allclose(out["sum"].numpy(), xn + yn, rtol=1e-6)
  np.testing.assert_allclose(out["parts"][0].numpy(), xn.max())
  np.testing.assert_allclose(out["parts"][1][0].numpy(), yn.min())
  np.testing.assert_allclose(out["pair"].lo.numpy(), xn - yn, rtol=1e-6)

def test_keyword_arguments():
  x, y = T(data(3, 3)), T(data(3, 3))
  @function
  def f(a, *, scale, bias=None): return a * scale if bias is None else a * scale + bias
  np.testing.assert_allclose(f(x, scale=3.0, bias=y).numpy(), x.numpy() * 3 + y.numpy(), rtol=1e-6)
  np.testing.assert_allclose(f(a=x, scale=0.5).numpy(), x.numpy() * 0.5, rtol=1e-6)
  assert len(call_of(f(a=x, scale=0.5, bias=y)).src) == 3

def test_constants_are_baked_into_the_trace():
  x = T(data(6))
  @function
  def f(a, k, mode): return a * k if mode == "mul" else a + k
  b2, b3, b2again = (call_of(f(x, k, "mul")).src[0] for k in (2.0, 3.0, 2.0))
  assert b2 is b2again and b2 is not b3 and len(call_of(f(x, 2.0, "mul")).src) == 2  # a constant is no argument
  np.testing.assert_allclose(f(x, 3.0, "mul").numpy(), x.numpy() * 3, rtol=1e-6)
  np.testing.assert_allclose(f(x, 3.0, "add").numpy(), x.numpy() + 3, rtol=1e-6)

def test_captured_tensors_become_arguments():
  w = T(data(4, 4))
  lazy = T(data(4)) * 2  # an unrealized computation read from outside: traced into the body
  @function
  def f(a): return a @ w + lazy
  x = T(data(3, 4))
  out = f(x)
  fn = call_of(out)
  assert not [u for u in fn.src[0].toposort() if u.op is Ops.BUFFER]
  assert fn.src[1] is x.uop and w.uop in fn.src[2:]
  np.testing.assert_allclose(out.numpy(), x.numpy() @ w.numpy() + lazy.numpy(), rtol=1e-5, atol=1e-6)

def test_a_method_with_weights_on_self():
  class Layer:
    def __init__(self): self.w, self.b = T(data(5, 3)), T(data(3))
    @function
    def __call__(self, x): return mlp(x, self.w, self.b)
  layer, x = Layer(), T(data(2, 5))
  np.testing.assert_allclose(layer(x).numpy(), mlp(x, layer.w, layer.b).numpy(), rtol=1e-5, atol=1e-7)

# ---- numbers ----

def test_same_numbers_as_the_undecorated_function():
  xn, wn, bn = data(4, 6), data(6, 5), data(5)
  x, w, b = T(xn), T(wn), T(bn)
  got, want = function(mlp)(x, w, b).numpy(), mlp(x, w, b).numpy()
  h = np.maximum(xn @ wn + bn, 0)
  e = np.exp(h - h.max(-1, keepdims=True))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)

def test_lazy_arguments_and_use_of_the_results():
  x, y = T(data(3, 4)), T(data(3, 4))
  f = function(lambda a, b: (a * b, a - b))
  p, m = f(x + 1, y.exp())  # arguments not realized yet: computed before the call
  out = (p.sum(axis=1) + m.max(axis=1)).numpy()  # results used in a graph after the call
  xn, yn = x.numpy() + 1, np.exp(y.numpy())
  np.testing.assert_allclose(out, (xn * yn).sum(1) + (xn - yn).max(1), rtol=1e-5)

def test_returning_an_input_and_an_unused_argument():
  x, y = T(data(4)), T(data(4))
  a, b = function(lambda u, v: (u, u * 2))(x, y.exp())
  before = R.stats["kernels_run"]
  assert a.numpy().tolist() == x.numpy().tolist() and a.uop is x.uop  # the input itself comes back
  assert R.stats["kernels_run"] == before + 1  # the call ran one kernel (u * 2): y.exp() was never computed
  np.testing.assert_allclose(b.numpy(), x.numpy() * 2)
  assert R.stats["kernels_run"] == before + 1  # and b was computed by that same run

def test_nested_functions():
  @function
  def g(a): return a * 3
  @function
  def f(a): return g(a * 2) + a  # g's PARAM 0 is the same node as f's: the inner body must not see f's argument
  x = T(data(5))
  out = f(x)
  inner = [u for u in call_of(out).src[0].toposort() if u.op is Ops.FUNCTION]
  assert len(inner) == 1 and inner[0].src[1] is not x.uop  # g's argument is a*2 over f's PARAM
  np.testing.assert_allclose(out.numpy(), x.numpy() * 2 * 3 + x.numpy(), rtol=1e-6)
  np.testing.assert_allclose(f(g(x)).numpy(), x.numpy() * 3 * 7, rtol=1e-5)

def test_random_inside_a_function_draws_anew_per_call():
  @function
  def noisy(a): return a + Tensor.rand(*a.shape)
  x = T(np.zeros(8, np.float32))
  first = noisy(x).numpy()
  before = dict(R.stats)
  second = noisy(x).numpy()
  assert (first != second).any() and ((0 <= second) & (second < 1)).all()
  assert R.stats["kernels_compiled"] == before["kernels_compiled"]

def test_values_on_several_devices_are_inlined():
  x = T(data(4, 3))
  sharded = x.shard(("PYTHON:0", "PYTHON:1"), axis=0)
  out = function(lambda a: (a * 2).sum(axis=1))(sharded)
  np.testing.assert_allclose(out.numpy(), (x.numpy() * 2).sum(1), rtol=1e-5)

def test_calls_of_unusual_shape():
  x = T(np.arange(3, dtype=np.float32))
  np.testing.assert_equal(function(lambda a: Tensor.ones(3) * 2)(x).numpy(), [2, 2, 2])  # a result that uses no input
  np.testing.assert_equal(function(lambda: Tensor([1.0, 2.0]) * 2)().numpy(), [2, 4])      # no Tensor argument at all
  np.testing.assert_equal(function(lambda a, c: a * c)(x, Tensor(2.0)).numpy(), [0, 2, 4])  # a constant-only input
  gt, inc = function(lambda a: (a > 1, a.int() + 1))(x)                                      # other dtypes
  assert gt.dtype.name == "bool" and gt.numpy().tolist() == [False, False, True] and inc.numpy().tolist() == [1, 2, 3]
  y = T(np.ones(3, np.float32), device="PYTHON:1")
  np.testing.assert_equal(function(lambda a, b: a + b.to(a.device))(x, y).numpy(), [1, 2, 3])  # inputs on two devices

# ---- gradients ----

def test_gradients_through_a_function():
  xn, wn, bn = data(3, 4), data(4, 2), data(2)
  grads = []
  for f in (mlp, function(mlp)):
    x, w, b = (T(v, requires_grad=True) for v in (xn, wn, bn))
    ((f(x, w, b) * T(np.arange(6, dtype=np.float32).reshape(3, 2))).sum()).backward()
    grads.append([t.grad.numpy() for t in (x, w, b)])
  for got, want in zip(*grads): np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
  # and against finite differences of the loss in x
  def loss(v): return float((mlp(T(v), T(wn), T(bn)) * T(np.arange(6, dtype=np.float32).reshape(3, 2))).sum().numpy())
  eps, i = 1e-2, (1, 2)
  up, down = xn.copy(), xn.copy(); up[i] += eps; down[i] -= eps
  np.testing.assert_allclose(grads[1][0][i], (loss(up) - loss(down)) / (2 * eps), rtol=5e-2, atol=1e-3)

def test_gradients_through_nested_functions():
  @function
  def g(a): return a * 3
  @function
  def f(a): return g(a * 2) * a  # g's body has PARAM 0, the same node as f's: substituting f's argument must not reach it
  xn = np.arange(1, 5, dtype=np.float32)
  x = T(xn, requires_grad=True)
  f(x).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), 12 * xn, rtol=1e-6)

# ---- reuse ----

def test_a_second_call_on_new_data_compiles_nothing():
  f = function(mlp)
  f(T(data(3, 8)), T(data(8, 4)), T(data(4))).numpy()
  before = dict(R.stats)
  xn, wn, bn = data(3, 8), data(8, 4), data(4)
  out = f(T(xn), T(wn), T(bn)).numpy()
  assert R.stats["kernels_compiled"] == before["kernels_compiled"] and R.stats["schedules_built"] == before["schedules_built"]
  assert R.stats["kernels_run"] > before["kernels_run"]
  np.testing.assert_allclose(out, mlp(T(xn), T(wn), T(bn)).numpy(), rtol=1e-5, atol=1e-7)
  mid = dict(R.stats)
  f(T(data(5, 8)), T(data(8, 4)), T(data(4))).numpy()  # a new shape: a new body, lowered and compiled
  assert R.stats["schedules_built"] > mid["schedules_built"] and R.stats["kernels_compiled"] > mid["kernels_compiled"]

def test_outputs_realized_one_at_a_time_run_the_call_once():
  a, b = function(lambda t: ((t * 2).contiguous() + 1, t.sum()))(T(data(16)))
  before = R.stats["kernels_run"]
  a.numpy()
  ran = R.stats["kernels_run"] - before
  b.numpy()
  assert ran >= 2 and R.stats["kernels_run"] - before == ran

def test_inline_fuses_with_the_caller():
  x = T(data(32))
  def counted(f):
    before = R.stats["kernels_run"]
    out = f(x).sum().numpy()
    return R.stats["kernels_run"] - before, out
  n_call, v_call = counted(function(lambda a: a * 2 + 1))
  n_inline, v_inline = counted(function(inline=True)(lambda a: a * 2 + 1))
  assert (n_call, n_inline) == (2, 1)  # the CALL writes its result; inlined, the elementwise work fuses into the sum
  np.testing.assert_allclose(v_call, v_inline, rtol=1e-6)
  np.testing.assert_allclose(v_inline, (x.numpy() * 2 + 1).sum(), rtol=1e-5)

def test_debug_names_the_call(monkeypatch, capsys):
  @function
  def scaled(a): return a * 4
  monkeypatch.setenv("DEBUG", "1")
  scaled(T(data(3))).numpy()
  assert "call test_debug_names_the_call.<locals>.scaled" in capsys.readouterr().out

# ---- errors ----

def test_function_needs_a_callable():
  with pytest.raises(TypeError, match="@function needs a callable"): function(3)

@pytest.mark.parametrize("ret", [None, 3, "x", (1, "a"), [], {"k": 2.0}])
def test_a_function_must_return_a_tensor(ret):
  with pytest.raises(TypeError, match=r"@function .*must return a Tensor.*it returned " + type(ret).__name__):
    function(lambda a: ret)(T(data(2)))

@pytest.mark.parametrize("peek", [lambda a: a.numpy(), lambda a: a.sum().item(), lambda a: bool(a.sum() > 0), lambda a: a.realize()])
def test_nothing_is_realized_while_tracing(peek):
  @function
  def f(a):
    peek(a)
    return a
  with pytest.raises(RuntimeError, match="inputs of a @function being traced"): f(T(data(3)))
