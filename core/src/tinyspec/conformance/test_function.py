"""@function on the device: seed 001's five steps (inputs found once each, a trace on PARAMs, a TUPLE body, one FUNCTION,
GETTUPLE results), the same numbers as the undecorated function, reuse across calls, inlining, and gradients through it."""
import numpy as np

from tinyspec import Ops, Tensor, dtypes, function
from tinyspec.conformance.support import check, data
from tinyspec.engine import realize as R


def mlp(x, w, b): return (x @ w + b).relu().softmax(axis=-1)

def np_mlp(x, w, b):
  h = np.maximum(x.astype(np.float64) @ w + b, 0)
  e = np.exp(h - h.max(-1, keepdims=True))
  return (e / e.sum(-1, keepdims=True)).astype(np.float32)

def arrays(seed: int = 0): return [data(dtypes.float32, s, seed=seed + k) for k, s in enumerate(((4, 6), (6, 5), (5,)))]

def test_five_steps(dev):
  x, w, b = (Tensor(a, device=dev) for a in arrays())
  seen = []
  @function
  def f(a, pair):
    seen.append((a.uop.op, pair[0].uop.op))  # step 2: runs on placeholders
    return a @ pair[0] + pair[1], (a * 2).sum()
  before = R.stats["kernels_run"]
  out, total = f(x, (w, b))
  assert R.stats["kernels_run"] == before and seen == [(Ops.PARAM, Ops.PARAM)]  # nothing ran yet
  fn = out.uop.src[0]
  assert out.uop.op is Ops.GETTUPLE and total.uop.src[0] is fn and fn.op is Ops.FUNCTION  # step 5
  assert fn.src[0].op is Ops.TUPLE and len(fn.src[0].src) == 2  # step 4
  assert fn.src[1:] == (x.uop, w.uop, b.uop)  # step 1: each input once, in the order met
  params = sorted((u for u in fn.src[0].toposort() if u.op is Ops.PARAM), key=lambda p: p.arg[0])
  assert [p.arg[0] for p in params] == [0, 1, 2] and [p.shape for p in params] == [x.shape, w.shape, b.shape]  # step 3
  assert not [u for u in fn.src[0].toposort() if u.op is Ops.BUFFER]
  xn, wn, bn = arrays()
  check(out, xn @ wn + bn, rtol=1e-5, atol=1e-5)
  check(total, np.array((xn * 2).sum(), np.float32), rtol=1e-5, atol=1e-5)

def test_same_numbers_as_undecorated(dev):
  a = arrays(3)
  x, w, b = (Tensor(v, device=dev) for v in a)
  check(function(mlp)(x, w, b), np_mlp(*a), rtol=1e-5, atol=1e-7)
  check(function(mlp, inline=True)(x, w, b), np_mlp(*a), rtol=1e-5, atol=1e-7)

def test_second_call_on_new_data_compiles_nothing(dev):
  f = function(mlp)
  check(f(*(Tensor(v, device=dev) for v in arrays(10))), np_mlp(*arrays(10)), rtol=1e-5, atol=1e-7)
  before = R.stats["kernels_compiled"], R.stats["schedules_built"]
  for seed in (20, 30):
    check(f(*(Tensor(v, device=dev) for v in arrays(seed))), np_mlp(*arrays(seed)), rtol=1e-5, atol=1e-7)
  assert (R.stats["kernels_compiled"], R.stats["schedules_built"]) == before

def test_lazy_arguments_and_results_used_after(dev):
  xn, yn = data(dtypes.float32, (3, 4), seed=1), data(dtypes.float32, (3, 4), seed=2)
  f = function(lambda a, b: (a * b, a - b))
  p, m = f(Tensor(xn, device=dev) + 1, Tensor(yn, device=dev).exp())
  a, b = xn + 1, np.exp(yn.astype(np.float64))
  check(p.sum(1) + m.max(1), ((a * b).sum(1) + (a - b).max(1)).astype(np.float32), rtol=1e-5, atol=1e-5)

def test_gradient_through_a_function(dev):
  a = arrays(40)
  plain = [Tensor(v, device=dev, requires_grad=True) for v in a]
  traced = [Tensor(v, device=dev, requires_grad=True) for v in a]
  (mlp(*plain) * Tensor(np.arange(5, dtype=np.float32), device=dev)).sum().backward()
  (function(mlp)(*traced) * Tensor(np.arange(5, dtype=np.float32), device=dev)).sum().backward()
  for p, t in zip(plain, traced):
    assert t.grad is not None
    check(t.grad, p.grad.numpy(), rtol=1e-5, atol=1e-6)
