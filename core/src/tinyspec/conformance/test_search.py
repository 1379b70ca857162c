"""BEAM search on the device under test: kernels searched with a short budget (candidates compiled and timed in worker
processes that open the device by name) give numpy's results, and a second run takes the winners from the disk cache."""
from __future__ import annotations

import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data
from tinyspec.conformance.test_opts import conv3x3
from tinyspec.engine import realize, search

PROGRAMS = {  # name: (input shapes, numpy, Tensor)
  "matmul_33x17x20": ([(33, 17), (17, 20)], lambda a, b: a @ b, lambda a, b: a @ b),
  "softmax_6x300": ([(6, 300)], lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True),
                    lambda x: x.softmax(-1)),
  "conv_3x3": ([(2, 3, 8, 8), (4, 3, 3, 3)], conv3x3, lambda x, w: x.conv2d(w, padding=1)),
}

@pytest.fixture
def beam(monkeypatch, tmp_path):
  monkeypatch.setenv("BEAM", "1")
  monkeypatch.setenv("BEAM_BUDGET", "2")
  monkeypatch.setenv("TINYSPEC_CACHE_DIR", str(tmp_path))
  realize._kernels.clear(); realize._schedules.clear()
  yield
  realize._kernels.clear(); realize._schedules.clear()

@pytest.mark.parametrize("name", list(PROGRAMS))
def test_beam_keeps_results_and_caches_winners(dev, beam, name):
  shapes, np_fn, fn = PROGRAMS[name]
  xs = [data(dtypes.float32, s, seed=i, lo=-2, hi=2) for i, s in enumerate(shapes)]
  before = dict(search.stats)
  got = fn(*(Tensor(x, device=dev) for x in xs)).numpy()
  check(got, np_fn(*xs).astype(np.float32), rtol=1e-4, atol=1e-4)
  searched = search.stats["searched"] - before["searched"]
  assert searched >= 1
  realize._kernels.clear(); realize._schedules.clear()
  again = fn(*(Tensor(x, device=dev) for x in xs)).numpy()
  assert search.stats["searched"] - before["searched"] == searched, "a second run searched again instead of reading the cache"
  check(again, np_fn(*xs).astype(np.float32), rtol=1e-4, atol=1e-4)
