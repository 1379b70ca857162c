"""BEAM search on the PYTHON device: it starts from the heuristic, keeps results, caches winners on disk so a second run
searches nothing, survives workers that crash or hang, and never uses a candidate whose output differs."""
import time

import numpy as np
import pytest
from tinyspec import Device, Tensor
from tinyspec.engine import optimize as O
from tinyspec.engine import realize as R
from tinyspec.engine import search as S
from tinyspec.engine.callify import callify
from tinyspec.engine.rangeify import rangeify

rng = np.random.default_rng(0)

def kernel_of(t: Tensor):
  return rangeify(callify(t.uop)).items[-1].ast

def matmul_kernel():
  return kernel_of(Tensor(rng.standard_normal((12, 10), dtype=np.float32)) @ Tensor(rng.standard_normal((10, 8), dtype=np.float32)))

@pytest.fixture
def beam(monkeypatch, tmp_path):
  """BEAM=2 with a short budget and a compile cache of its own; kernels compiled afresh (and forgotten after)."""
  monkeypatch.setenv("BEAM", "2")
  monkeypatch.setenv("BEAM_BUDGET", "3")
  monkeypatch.setenv("TINYSPEC_CACHE_DIR", str(tmp_path / "cache"))
  saved = (dict(R._kernels), dict(R._schedules))
  R._kernels.clear(); R._schedules.clear()
  yield
  R._kernels.clear(); R._schedules.clear(); R._kernels.update(saved[0]); R._schedules.update(saved[1])

def test_beam_must_be_a_width(monkeypatch):
  monkeypatch.setenv("BEAM", "fast")
  with pytest.raises(ValueError, match="BEAM must be a whole number"): S.beam_width()

def test_search_starts_from_the_heuristic_and_its_prefixes():
  k, r = matmul_kernel(), Device["PYTHON"].renderer
  starts = S.seeds(k, r)
  assert list(starts[0]) == O.heuristic_opts(k, r) and starts[-1] == ()
  assert all(starts[i][:len(starts[i + 1])] == starts[i + 1] for i in range(len(starts) - 1))

def test_actions_apply_or_are_refused_by_name():
  k, r = matmul_kernel(), Device["PYTHON"].renderer
  acts = S.actions(k, r)
  assert any(a.op is O.OptOps.SPLIT and a.arg[1] is O.AxisType.UNROLL for a in acts)
  applied = 0
  for a in acts:
    try: O.apply_opts(k, [a]); applied += 1
    except O.OptError: pass
  assert applied > 0

def test_beam_keeps_results_and_a_second_run_searches_nothing(beam):
  a, b = rng.standard_normal((12, 10), dtype=np.float32), rng.standard_normal((10, 8), dtype=np.float32)
  x = rng.standard_normal((5, 9), dtype=np.float32)
  def run():
    return (Tensor(a) @ Tensor(b)).numpy(), Tensor(x).softmax(-1).numpy()
  before = dict(S.stats)
  mm, sm = run()
  np.testing.assert_allclose(mm, a @ b, rtol=1e-5, atol=1e-5)
  e = np.exp(x - x.max(-1, keepdims=True))
  np.testing.assert_allclose(sm, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
  searched = S.stats["searched"] - before["searched"]
  assert searched >= 2  # the matmul and softmax's kernels
  R._kernels.clear(); R._schedules.clear()  # a new process would start with these empty: only the disk cache is left
  mm2, sm2 = run()
  assert S.stats["searched"] - before["searched"] == searched
  assert S.stats["cache_hits"] - before["cache_hits"] == searched
  np.testing.assert_array_equal(mm2, mm); np.testing.assert_array_equal(sm2, sm)

def test_a_cached_winner_that_no_longer_applies_is_searched_again(beam):
  k = matmul_kernel()
  r = Device["PYTHON"].renderer
  key = S.cache_key(k, "PYTHON", 2)
  S.cache_write(key, b'[["SPLIT", 99, [2, "UNROLL", false]]]')
  assert S._cached(key, k, r) is None
  S.cache_write(key, b"not json")
  assert S._cached(key, k, r) is None
  S.cache_write(key, b'[["SWAP", 0, 1]]')
  assert S._cached(key, k, r) == [O.Opt(O.OptOps.SWAP, 0, 1)]

def test_a_crashing_or_hanging_worker_is_dropped_and_restarted():
  w = S.Worker("PYTHON")
  try:
    with pytest.raises(S.CandidateFailed, match="died"): w.call("exit", 3)
    t0 = time.perf_counter()
    with pytest.raises(S.CandidateFailed, match="no answer"): w.call("sleep", 30, timeout=0.5)
    assert time.perf_counter() - t0 < 10
    with pytest.raises(S.CandidateFailed, match="AttributeError"): w.call("no_such_request")
    assert w.call("sleep", 0) is None  # a fresh process answers
  finally: w.stop()

class FakeWorker:
  """Answers `output` with the arrays given per kernel name."""
  def __init__(self, outputs): self.outputs = outputs
  def call(self, fn, name, *args, timeout=None): return self.outputs[name]

def test_a_candidate_whose_output_differs_is_not_used():
  want = [np.arange(6, dtype=np.float32)]
  wrong, right, plain = S.Candidate((O.Opt(O.OptOps.SWAP, 0, 1),), "wrong", time=1.0), S.Candidate((), "right", time=2.0), S.Candidate((), "plain")
  plain.binary = b"x"
  w = FakeWorker({"plain": want, "wrong": [want[0] + 1], "right": [want[0] + 1e-6]})
  info: dict = {}
  with pytest.warns(RuntimeWarning, match="different result"): chosen = S._verified([wrong, right], plain, w, [0], info)
  assert chosen is right and info["best"] == 2.0
