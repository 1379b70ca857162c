"""Accuracy of the transcendentals in ulps: the largest error of each function, per float dtype and device, over a fixed
random sweep of its domain, as a markdown table (the one docs/spec.md keeps).

The reference is numpy at the very same inputs: for float16 and float32 computed in float64 and rounded to the dtype
(so the correctly rounded value, give or take numpy's own float64 error), for float64 numpy's float64 functions (within
an ulp of the true value themselves). An error is |got - want| / ulp(want), ulp(w) the dtype's spacing at |w|;
matching infinities, matching nans and matching zeros count 0, a nan or infinity where numpy has none counts inf.

The sweeps, per dtype (x16 / x32 / x64 where they differ; random signs where it says +-):
  sin, cos, tan   +-x for x log-uniform in [2**-20, H] and uniform in [0, 10], and the floats nearest k pi/2 for k
                  log-uniform up to H / (pi/2): H = 65504 / 1e9 / 1e9
  exp             uniform over [ln(smallest subnormal), ln(largest float)]: overflow and the subnormal results included
  exp2            the same in base 2
  log, log2, sqrt log-uniform over [smallest subnormal, largest float]
  pow             a = 2**u, u uniform in [-20, 20] (float16: [-6, 6]), b = y / u with y uniform in [-E, E] (E = 14 / 125
                  / 1000: results across the normal range); a in [0.5, 2] with b in [-8, 8]; and negative a with integral b

Run: python bench/ulp.py [--devices PYTHON,CPU] [--n 100000] [--seed 0]
"""
from __future__ import annotations

import argparse
import math

import numpy as np

FLOATS = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
TRIG_MAX = {"float16": 65504.0, "float32": 1e9, "float64": 1e9}
POW_E = {"float16": 14.0, "float32": 125.0, "float64": 1000.0}

def _signs(rng: np.random.Generator, x: np.ndarray) -> np.ndarray: return np.where(rng.random(x.size) < 0.5, -x, x)

def _loguniform(rng: np.random.Generator, lo: float, hi: float, n: int) -> np.ndarray: return np.exp(rng.uniform(math.log(lo), math.log(hi), n))

def trig(rng: np.random.Generator, dt: str, n: int) -> tuple[np.ndarray, ...]:
  hi = TRIG_MAX[dt]
  near = np.round(_loguniform(rng, 1, hi / (math.pi / 2), n // 4)) * (math.pi / 2)  # the floats nearest k pi/2: hard to reduce
  x = np.concatenate([_loguniform(rng, 2.0 ** -20, hi, n // 2), rng.uniform(0, 10, n // 4), near]).astype(FLOATS[dt])
  return (_signs(rng, x),)

def exp_args(base: float):
  def gen(rng: np.random.Generator, dt: str, n: int) -> tuple[np.ndarray, ...]:
    fi = np.finfo(FLOATS[dt])
    lo, hi = math.log(float(fi.smallest_subnormal), base), math.log(float(fi.max), base)
    return (rng.uniform(lo * 1.01, hi * 1.01, n).astype(FLOATS[dt]),)
  return gen

def positive(rng: np.random.Generator, dt: str, n: int) -> tuple[np.ndarray, ...]:
  fi = np.finfo(FLOATS[dt])
  return (_loguniform(rng, float(fi.smallest_subnormal), float(fi.max), n).astype(FLOATS[dt]),)

def pow_args(rng: np.random.Generator, dt: str, n: int) -> tuple[np.ndarray, ...]:
  npdt, span = FLOATS[dt], 6 if dt == "float16" else 20
  u = rng.uniform(-span, span, n // 2)
  a = np.exp2(u).astype(npdt)
  with np.errstate(over="ignore"): b = (rng.uniform(-POW_E[dt], POW_E[dt], n // 2) / u).astype(npdt)  # u near 0: b = +-inf
  a2, b2 = rng.uniform(0.5, 2, n // 4).astype(npdt), rng.uniform(-8, 8, n // 4).astype(npdt)
  a3 = -np.exp2(rng.uniform(-span / 4, span / 4, n // 4)).astype(npdt)
  b3 = np.round(rng.uniform(-POW_E[dt], POW_E[dt], n // 4) / np.maximum(np.abs(np.log2(-a3.astype(np.float64))), 1)).astype(npdt)
  return np.concatenate([a, a2, a3]), np.concatenate([b, b2, b3])

# name: (sweep, tinyspec's call on Tensors, numpy's function)
FUNCTIONS = {
  "sin": (trig, lambda x: x.sin(), np.sin), "cos": (trig, lambda x: x.cos(), np.cos), "tan": (trig, lambda x: x.tan(), np.tan),
  "exp": (exp_args(math.e), lambda x: x.exp(), np.exp), "exp2": (exp_args(2), lambda x: x.exp2(), np.exp2),
  "log": (positive, lambda x: x.log(), np.log), "log2": (positive, lambda x: x.log2(), np.log2),
  "sqrt": (positive, lambda x: x.sqrt(), np.sqrt), "pow": (pow_args, lambda a, b: a ** b, np.power),
}

def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """|got - want| in ulps of want (see the module docstring for the special values)."""
  g, w = got.astype(np.float64), want.astype(np.float64)
  with np.errstate(all="ignore"): err = np.abs(g - w) / np.spacing(np.abs(want)).astype(np.float64)
  same = (g == w) | (np.isnan(g) & np.isnan(w))
  return np.where(same, 0.0, np.where(np.isfinite(g) & np.isfinite(w), err, np.inf))

def measure(name: str, dt: str, device: str, n: int, seed: int) -> float:
  from tinyspec import Tensor
  gen, ours, ref = FUNCTIONS[name]
  args = gen(np.random.default_rng(seed), dt, n)
  got = ours(*(Tensor(a, device=device) for a in args)).numpy()
  with np.errstate(all="ignore"):
    want = ref(*args) if dt == "float64" else ref(*(a.astype(np.float64) for a in args)).astype(FLOATS[dt])
  return float(ulps(got, want).max())

def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--devices", default="PYTHON,CPU")
  ap.add_argument("--functions", default=",".join(FUNCTIONS))
  ap.add_argument("--n", type=int, default=100_000, help="points per function and dtype")
  ap.add_argument("--seed", type=int, default=0)
  args = ap.parse_args()
  from tinyspec.device import Device
  devices, names = args.devices.split(","), args.functions.split(",")
  cols = [(dt, dev) for dt in FLOATS for dev in devices]
  supported = {dev: {d.name for d in Device[dev].renderer.dtypes} for dev in devices}
  print(f"max error in ulps over {args.n} points per function and dtype (seed {args.seed}); '-': dtype not on the device\n")
  print("| function | " + " | ".join(f"{dt} {dev}" for dt, dev in cols) + " |")
  print("| --- |" + " --- |" * len(cols))
  for name in names:
    cells = [f"{measure(name, dt, dev, args.n, args.seed):g}" if dt in supported[dev] else "-" for dt, dev in cols]
    print(f"| {name} | " + " | ".join(cells) + " |", flush=True)

if __name__ == "__main__": main()
