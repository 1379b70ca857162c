"""Linear algebra and nn ops: matmul (every rank combination, batched, broadcast, ints), dot and linear, conv2d (stride,
padding, dilation, groups, bias) and conv_transpose2d, max and avg pooling, layernorm and batchnorm, against direct numpy
implementations."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import TOL, check, data, np_dtype, read, tensor

MATMUL = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((7,), (7,)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
          ((3, 1, 2, 4), (2, 4, 3)), ((1, 1), (1, 1)), ((17, 33), (33, 9)), ((5, 64), (64, 1))]

@pytest.mark.parametrize("sa,sb", MATMUL, ids=[f"{a}@{b}" for a, b in MATMUL])
def test_matmul_float32(dev, sa, sb):
  a, b = data(dtypes.float32, sa, seed=1), data(dtypes.float32, sb, seed=2)
  check(Tensor(a, device=dev) @ Tensor(b, device=dev), (a.astype(np.float64) @ b).astype(np.float32), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int64, dtypes.float16, dtypes.bfloat16, dtypes.float64], ids=lambda d: d.name)
def test_matmul_dtypes(dev, caps, dt):
  caps.require_dtype(dt)
  a, b = data(dt, (6, 10), seed=1, lo=-5, hi=5), data(dt, (10, 3), seed=2, lo=-5, hi=5)
  got = tensor(a, dt, dev) @ tensor(b, dt, dev)
  assert got.dtype == dt
  want = a.astype(np.float64) @ b.astype(np.float64)
  rtol, atol = TOL.get(dt, (0, 0))
  check(read(got), want.astype(np_dtype(dt)), rtol=rtol * 10, atol=atol * 40)

def test_dot_linear(dev):
  x, w, b = data(dtypes.float32, (4, 6), seed=1), data(dtypes.float32, (3, 6), seed=2), data(dtypes.float32, (3,), seed=3)
  check(Tensor(x, device=dev).dot(Tensor(w.T.copy(), device=dev)), x @ w.T, rtol=1e-5, atol=1e-5)
  check(Tensor(x, device=dev).linear(Tensor(w, device=dev), Tensor(b, device=dev)), x @ w.T + b, rtol=1e-5, atol=1e-5)

def test_matmul_fused_with_elementwise(dev):
  a, b = data(dtypes.float32, (8, 16), seed=1), data(dtypes.float32, (16, 4), seed=2)
  got = ((Tensor(a, device=dev) * 2).relu() @ Tensor(b, device=dev).exp()).sigmoid()
  check(got, 1 / (1 + np.exp(-(np.maximum(a * 2, 0) @ np.exp(b)))), rtol=1e-5, atol=1e-6)

def test_matmul_shape_mismatch_raises(dev):
  with pytest.raises((RuntimeError, ValueError), match=r"4.*5|5.*4"): Tensor.ones(3, 4, device=dev) @ Tensor.ones(5, 2, device=dev)

def pair(v): return (v, v) if isinstance(v, int) else tuple(v)

def np_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
  (s0, s1), (p0, p1), (d0, d1) = pair(stride), pair(padding), pair(dilation)
  x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p0, p0), (p1, p1)))
  n, c, h, wd = x.shape
  o, cg, kh, kw = w.shape
  oh, ow = (h - d0 * (kh - 1) - 1) // s0 + 1, (wd - d1 * (kw - 1) - 1) // s1 + 1
  out = np.zeros((n, groups, o // groups, oh, ow))
  for i in range(kh):
    for j in range(kw):
      patch = x[:, :, i * d0:i * d0 + s0 * (oh - 1) + 1:s0, j * d1:j * d1 + s1 * (ow - 1) + 1:s1].reshape(n, groups, cg, oh, ow)
      out += np.einsum("ngchw,goc->ngohw", patch, w[:, :, i, j].reshape(groups, o // groups, cg))
  out = out.reshape(n, o, oh, ow)
  return out if b is None else out + b.reshape(1, -1, 1, 1)

CONVS = {"plain": {}, "stride": {"stride": 2}, "padding": {"padding": 1}, "stride_pad_rect": {"stride": (2, 1), "padding": (0, 2)},
         "dilation": {"dilation": 2, "padding": 2}, "groups": {"groups": 2}, "depthwise": {"groups": 4, "padding": 1}}

@pytest.mark.parametrize("case", CONVS)
def test_conv2d(dev, case):
  kw = CONVS[case]
  g = kw.get("groups", 1)
  cout = 4 if g == 4 else 6
  x, w, b = data(dtypes.float32, (2, 4, 9, 8), seed=1), data(dtypes.float32, (cout, 4 // g, 3, 3), seed=2), data(dtypes.float32, (cout,), seed=3)
  got = Tensor(x, device=dev).conv2d(Tensor(w, device=dev), Tensor(b, device=dev), **kw)
  check(got, np_conv2d(x, w, b, **kw).astype(np.float32), rtol=1e-5, atol=1e-4)

def test_conv2d_1x1_and_no_bias(dev):
  x, w = data(dtypes.float32, (1, 3, 5, 5), seed=1), data(dtypes.float32, (2, 3, 1, 1), seed=2)
  check(Tensor(x, device=dev).conv2d(Tensor(w, device=dev)), np_conv2d(x, w).astype(np.float32), rtol=1e-5, atol=1e-5)

def np_conv_transpose2d(x, w, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
  (s0, s1), (p0, p1), (op0, op1), (d0, d1) = pair(stride), pair(padding), pair(output_padding), pair(dilation)
  n, c, h, wd = x.shape
  _, og, kh, kw = w.shape
  full = np.zeros((n, groups, og, (h - 1) * s0 + d0 * (kh - 1) + 1 + op0, (wd - 1) * s1 + d1 * (kw - 1) + 1 + op1))
  xg = x.astype(np.float64).reshape(n, groups, c // groups, h, wd)
  for i in range(kh):
    for j in range(kw):
      full[..., i * d0:i * d0 + s0 * (h - 1) + 1:s0, j * d1:j * d1 + s1 * (wd - 1) + 1:s1] += \
        np.einsum("ngchw,gco->ngohw", xg, w[:, :, i, j].reshape(groups, c // groups, og))
  return full.reshape(n, groups * og, *full.shape[3:])[..., p0:full.shape[3] - p0, p1:full.shape[4] - p1]

TCONVS = {"plain": {}, "stride": {"stride": 2}, "stride_pad_outpad": {"stride": 2, "padding": 1, "output_padding": 1},
          "groups": {"groups": 2}, "dilation": {"dilation": 2}}

@pytest.mark.parametrize("case", TCONVS)
def test_conv_transpose2d(dev, case):
  kw = TCONVS[case]
  x, w = data(dtypes.float32, (2, 4, 5, 4), seed=1), data(dtypes.float32, (4, 3, 3, 3), seed=2)
  check(Tensor(x, device=dev).conv_transpose2d(Tensor(w, device=dev), **kw), np_conv_transpose2d(x, w, **kw).astype(np.float32), rtol=1e-5, atol=1e-4)

def np_pool(x, k, s, p, fill, f):
  x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
  oh, ow = (x.shape[2] - k) // s + 1, (x.shape[3] - k) // s + 1
  return np.stack([np.stack([f(x[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3)) for j in range(ow)], -1) for i in range(oh)], -2)

POOLS = [(2, None, 0), (3, 1, 0), (3, 2, 1), (2, 1, 1)]

@pytest.mark.parametrize("k,s,p", POOLS, ids=[f"k{k}s{s}p{p}" for k, s, p in POOLS])
def test_pooling(dev, k, s, p):
  x = data(dtypes.float32, (2, 3, 7, 6), seed=1)
  t = Tensor(x, device=dev)
  check(t.max_pool2d(k, s, p), np_pool(x, k, s or k, p, -np.inf, np.max))
  check(t.avg_pool2d(k, s, p), np_pool(x, k, s or k, p, 0, np.mean).astype(np.float32), rtol=1e-5, atol=1e-6)

def test_max_pool_ints(dev):
  x = data(dtypes.int32, (1, 2, 4, 4), lo=-100, hi=100)
  check(Tensor(x, device=dev).max_pool2d(2), np_pool(x, 2, 2, 0, 0, np.max))

def test_layernorm(dev):
  x, w, b = data(dtypes.float32, (3, 4, 10), seed=1), data(dtypes.float32, (10,), seed=2), data(dtypes.float32, (10,), seed=3)
  x64 = x.astype(np.float64)
  norm = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
  check(Tensor(x, device=dev).layernorm(), norm.astype(np.float32), rtol=1e-4, atol=1e-5)
  check(Tensor(x, device=dev).layer_norm(10, Tensor(w, device=dev), Tensor(b, device=dev)), (norm * w + b).astype(np.float32), rtol=1e-4, atol=1e-5)
  norm2 = (x64 - x64.mean((1, 2), keepdims=True)) / np.sqrt(x64.var((1, 2), keepdims=True) + 1e-5)
  check(Tensor(x, device=dev).layer_norm((4, 10)), norm2.astype(np.float32), rtol=1e-4, atol=1e-5)

def test_batchnorm(dev):
  x = data(dtypes.float32, (4, 3, 5, 5), seed=1)
  mean, var, w, b = (data(dtypes.float32, (3,), seed=s, lo=0.5, hi=2) for s in (2, 3, 4, 5))
  r = (1, 3, 1, 1)
  got = Tensor(x, device=dev).batch_norm(*(Tensor(v, device=dev) for v in (mean, var, w, b)))
  check(got, ((x - mean.reshape(r)) / np.sqrt(var.reshape(r) + 1e-5) * w.reshape(r) + b.reshape(r)).astype(np.float32), rtol=1e-5, atol=1e-5)
  got = Tensor(x, device=dev).batch_norm(None, None, training=True)
  m, v = x.astype(np.float64).mean((0, 2, 3), keepdims=True), x.astype(np.float64).var((0, 2, 3), keepdims=True)
  check(got, ((x - m) / np.sqrt(v + 1e-5)).astype(np.float32), rtol=1e-4, atol=1e-5)
