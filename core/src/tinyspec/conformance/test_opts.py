"""The optimizer's opts on the device under test: each kernel of a few programs (matmuls whose sizes need padding, a
convolution, reductions of each kind, softmax, a broadcast elementwise op) gets a seeded random sequence of legal opts
(SPLIT to every target the device has, PADTO, SWAP, NOLOCALS), then runs; its result must match numpy's. An opt that
cannot apply is skipped (OptError) while picking, so every sequence run is one the optimizer accepted. A failure names
the seed and the opts each kernel got; `-m slow` runs TINYSPEC_OPT_CASES (500) more seeds per program."""
from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from tinyspec import Device, Tensor, dtypes
from tinyspec.conformance.support import check, data
from tinyspec.engine import kernels, realize, tensorcore
from tinyspec.engine import optimize as O
from tinyspec.renderer import Renderer
from tinyspec.uop.ops import AxisType
from tinyspec.uop.uop import UOp

DEFAULT_SEEDS, SLOW_SEED = 20, 1000
MAX_COPIES = 32  # UPCAST x UNROLL copies per kernel: more only makes kernels slow to compile
A = AxisType

def conv3x3(x, w):
  """numpy's 3x3 convolution with padding 1 (NCHW, OIHW), in x's and w's dtype."""
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  h, wd = x.shape[2:]
  return sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j]) for i in range(3) for j in range(3))

def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)

# name: (input shapes, numpy version, Tensor version)
PROGRAMS: dict[str, tuple[list[tuple[int, ...]], Callable, Callable]] = {
  "matmul_6x5x7": ([(6, 5), (5, 7)], lambda a, b: a @ b, lambda a, b: a @ b),
  "matmul_16x12x32": ([(16, 12), (12, 32)], lambda a, b: a @ b, lambda a, b: a @ b),
  "conv_3x3": ([(2, 3, 6, 6), (4, 3, 3, 3)], conv3x3, lambda x, w: x.conv2d(w, padding=1)),
  "sum_max_prod": ([(6, 10, 7)], lambda x: x.sum(1) + x.max((0, 2)).sum() + np.prod(x[:, :3, 0] * 0.5 + 1, 1)[:, None],
                   lambda x: x.sum(1) + x.max((0, 2)).sum() + (x[:, :3, 0] * 0.5 + 1).prod(1).unsqueeze(1)),
  "softmax": ([(5, 9)], _softmax, lambda x: x.softmax(-1)),
  "broadcast": ([(6, 1, 7), (1, 5, 7)], lambda a, b: a * b + a, lambda a, b: a * b + a),
}

def _targets(renderer: Renderer) -> list[AxisType]:
  """The SPLIT targets worth trying on this device: THREAD where kernels run on threads, workgroup axes only where it has
  workgroups (and LOCAL memory)."""
  out = [A.UPCAST, A.UNROLL, A.LOOP, A.REDUCE] + ([A.THREAD] if renderer.threads > 1 else [])
  if O.is_gpu(renderer): out += [A.LOCAL] + ([A.GROUP_REDUCE] if renderer.has_shared else [])
  return out

def _candidate(r: random.Random, rngs: list[UOp], targets: list[AxisType]) -> O.Opt:
  """One random opt for a kernel with axes `rngs` (it may well be illegal: apply_opts decides)."""
  axis = r.randrange(len(rngs))
  kind = r.choice([O.OptOps.SPLIT] * 4 + [O.OptOps.PADTO, O.OptOps.SWAP, O.OptOps.NOLOCALS])
  if kind is O.OptOps.PADTO: return O.Opt(kind, axis, r.choice([2, 3, 4, 8]))
  if kind is O.OptOps.SWAP: return O.Opt(kind, axis, r.randrange(len(rngs)))
  if kind is O.OptOps.NOLOCALS: return O.Opt(kind, None)
  size = rngs[axis].size or 1
  factor = r.choice([d for d in range(2, min(size, 8) + 1) if size % d == 0] or [2])
  return O.Opt(kind, axis, (factor, r.choice(targets), r.random() < 0.3))

def _fits(kernel: UOp, renderer: Renderer) -> bool:
  """Whether a kernel's expanded copies and workgroup stay small enough to compile and launch quickly."""
  sizes = lambda kinds: math.prod(x.size for x in O.axes(kernel) if x.axis_type in kinds)  # noqa: E731
  return sizes((A.UPCAST, A.UNROLL)) <= MAX_COPIES and sizes(O.NO_LOCALS) <= min(64, (renderer.local_max or (1,))[0])

def random_opts(kernel: UOp, renderer: Renderer, r: random.Random, tries: int = 12) -> list[O.Opt]:
  """A legal sequence of opts for `kernel` on `renderer`: random candidates, each kept when the optimizer takes it."""
  start = O._retype(kernel, A.LOOP, A.GLOBAL) if O.is_gpu(renderer) else kernel
  opts: list[O.Opt] = []
  if not O.axes(start): return opts
  # half the time, a kernel one of the device's tensor cores matches starts with that TC opt (float32: tf32, Metal's f32)
  if (tcs := [tc for tc in renderer.tensor_cores if tensorcore.matches(start, tc)]) and r.random() < 0.5:
    try:
      O.optimize(kernel, renderer, cand := [O.Opt(O.OptOps.TC, 0, r.choice(tcs))])
      opts += cand
    except O.OptError: pass
  for _ in range(tries):
    cand = _candidate(r, O.axes(O.apply_opts(start, opts)), _targets(renderer))
    try:
      if _fits(O.apply_opts(start, [*opts, cand]), renderer):
        O.optimize(kernel, renderer, [*opts, cand])  # the whole pipeline stage: GPU launch limits included
        opts.append(cand)
    except O.OptError: pass
  return opts

@contextmanager
def opts_per_kernel(seed: int, chosen: list) -> Iterator[None]:
  """Within, every kernel compiled gets random_opts seeded by `seed` and its order; (kernel name, opts) go to `chosen`.
  The in-process caches are emptied before and after, so no kernel compiled here is reused elsewhere."""
  saved, r = kernels.optimize, random.Random(seed)
  def choose(kernel: UOp, renderer: Renderer) -> UOp:
    opts = random_opts(kernel, renderer, r)
    chosen.append(opts)
    return O.optimize(kernel, renderer, opts)
  realize._kernels.clear(); realize._schedules.clear()
  kernels.optimize = choose
  try: yield
  finally:
    kernels.optimize = saved
    realize._kernels.clear(); realize._schedules.clear()

def run_program(dev: str, name: str, seed: int) -> None:
  shapes, np_fn, fn = PROGRAMS[name]
  xs = [data(dtypes.float32, s, seed=seed + i, lo=-2, hi=2) for i, s in enumerate(shapes)]
  chosen: list = []
  with opts_per_kernel(seed, chosen): got = fn(*(Tensor(x, device=dev) for x in xs)).numpy()
  try: check(got, np_fn(*xs).astype(np.float32), rtol=1e-4, atol=1e-4)
  except AssertionError as e: raise AssertionError(f"{name}, seed {seed}, opts per kernel {chosen}: {e}") from None

@pytest.mark.parametrize("seed", range(DEFAULT_SEEDS))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_random_legal_opts_keep_results(dev, name, seed):
  run_program(dev, name, seed)

@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_random_legal_opts_keep_results_slow(request, dev, name):
  """TINYSPEC_OPT_CASES seeds (500 by default) per program; only with -m slow."""
  if "slow" not in (request.config.getoption("markexpr") or "") or "not slow" in request.config.getoption("markexpr"):
    pytest.skip("slow: the opts fuzzer's long run; select it with -m slow")
  failures = []
  for seed in range(SLOW_SEED, SLOW_SEED + int(os.environ.get("TINYSPEC_OPT_CASES", "500"))):
    try: run_program(dev, name, seed)
    except AssertionError as e: failures.append(str(e))
  assert not failures, f"{len(failures)} seeds failed:\n\n" + "\n\n".join(failures[:5])

def test_the_picker_uses_every_opt(dev):
  """Over the default seeds the random sequences include each OptOp and every SPLIT target this device has."""
  seen: set = set()
  renderer = Device[dev].renderer
  for name in PROGRAMS:
    for seed in range(DEFAULT_SEEDS):
      chosen: list = []
      shapes, _, fn = PROGRAMS[name]
      with opts_per_kernel(seed, chosen): fn(*(Tensor(data(dtypes.float32, s, seed=seed), device=dev) for s in shapes)).realize()
      seen |= {(o.op, o.arg[1] if o.op is O.OptOps.SPLIT else None) for opts in chosen for o in opts}
  want = {(O.OptOps.SPLIT, t) for t in _targets(renderer)} | {(op, None) for op in (O.OptOps.PADTO, O.OptOps.SWAP, O.OptOps.NOLOCALS)}
  assert want <= seen, f"never picked: {sorted(str(w) for w in want - seen)}"
