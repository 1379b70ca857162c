"""`tinyspec demo` through the command-line entry, a few steps only (the full run's accuracy is the demo's business, not a test's)."""
import re

import numpy as np
from tinyspec.cli import main
from tinyspec.demo import spirals, train

SUMMARY = [r"loss: (?P<first>[\d.]+) -> (?P<last>[\d.]+) after (?P<steps>\d+) steps",
           r"test accuracy: (?P<acc>[\d.]+)% on 1000 held-out points",
           r"kernels compiled: (?P<kernels>\d+)",
           r"time: [\d.]+ s on (?P<device>\S+) \(first step [\d.]+ s, building and compiling; then [\d.]+ ms/step\)"]

def test_short_demo_summary_and_loss_improves(capsys):
  assert main(["demo", "--steps", "12", "--quiet"]) == 0
  out, err = capsys.readouterr()
  lines = out.splitlines()
  assert len(lines) == len(SUMMARY) and err == "", out + err  # --quiet: only the summary
  m = {k: v for pattern, line in zip(SUMMARY, lines) for k, v in re.fullmatch(pattern, line).groupdict().items()}
  assert int(m["steps"]) == 12 and float(m["last"]) < 0.95 * float(m["first"])
  assert 0 <= float(m["acc"]) <= 100
  assert int(m["kernels"]) >= 0  # kernels are cached per process: an earlier test may have compiled them all already

def test_progress_and_header(capsys):
  assert main(["demo", "--steps", "3", "--seed", "1", "--device", "python"]) == 0
  out, err = capsys.readouterr()
  assert out.splitlines()[0] == "tinyspec demo: an MLP classifying two interleaved spirals, 3 Adam steps on PYTHON (seed 1)"
  assert "3/3" in err and "loss" in err  # tqdm's progress goes to stderr, with the loss

def test_seeded_runs_repeat():
  a, b = train(steps=2, seed=7, device="PYTHON", points=64), train(steps=2, seed=7, device="PYTHON", points=64)
  assert a.losses == b.losses and a.accuracy == b.accuracy

def test_spirals_are_not_linearly_separable():
  x, y = spirals(400, np.random.default_rng(0))
  assert x.shape == (400, 2) and x.dtype == np.float32 and set(y) == {0, 1}
  a = np.c_[x, np.ones(len(x))]
  w = np.linalg.lstsq(a, np.eye(2)[y], rcond=None)[0]
  assert ((a @ w).argmax(1) == y).mean() < 0.7  # the hidden layers have to do the work

def test_bad_arguments(capsys):
  assert main(["demo", "--device", "NOSUCHDEVICE"]) == 1
  assert "unknown device 'NOSUCHDEVICE'" in capsys.readouterr().err
  assert main(["demo", "--steps", "0"]) == 2
