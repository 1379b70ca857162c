"""Tensor nn ops (matmul, linear, conv2d, conv_transpose2d, pooling, normalization) against direct numpy definitions."""
import math

import numpy as np
import pytest
from tinyspec import Tensor, dtypes

rng = np.random.default_rng(0)

def randn(*shape, dtype=np.float32): return rng.standard_normal(shape).astype(dtype)
def pair(v): return (v, v) if isinstance(v, int) else tuple(v)

# ---- numpy references, written from the definitions (loops over output positions: small shapes only) ----
def conv_ref(x, w, b=None, stride=1, pads=((0, 0), (0, 0)), dil=1, groups=1):
  """x (N, C, H, W), w (O, C/groups, kh, kw); pads ((top, bottom), (left, right))."""
  (sh, sw), (dh, dw) = pair(stride), pair(dil)
  x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), *pads))
  n, c, h, wd = x.shape
  o, cg, kh, kw = w.shape
  oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
  out, rc = np.zeros((n, o, oh, ow)), o // groups
  for oc in range(o):
    g = oc // rc
    for i in range(oh):
      for j in range(ow):
        patch = x[:, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]
        out[:, oc, i, j] = (patch * w[oc]).sum((1, 2, 3))
  return out if b is None else out + b.reshape(1, -1, 1, 1)

def conv_transpose_ref(x, w, b=None, stride=1, pad=0, outpad=0, groups=1, dil=1):
  """Each input element scatters its kernel-weighted values into the output (the definition), then the padding is cut."""
  s, p, op, d = pair(stride), pair(pad), pair(outpad), pair(dil)
  n, c, h, wd = x.shape
  _, rc, kh, kw = w.shape
  cg = c // groups
  full = np.zeros((n, rc * groups, (h - 1) * s[0] + d[0] * (kh - 1) + 1 + op[0], (wd - 1) * s[1] + d[1] * (kw - 1) + 1 + op[1]))
  for ci in range(c):
    g = ci // cg
    for i in range(h):
      for j in range(wd):
        for a in range(kh):
          for bb in range(kw):
            full[:, g * rc:(g + 1) * rc, i * s[0] + a * d[0], j * s[1] + bb * d[1]] += x[:, ci, i, j][:, None] * w[ci, :, a, bb][None]
  ho, wo = full.shape[2] - 2 * p[0], full.shape[3] - 2 * p[1]
  out = full[:, :, p[0]:p[0] + ho, p[1]:p[1] + wo]
  return out if b is None else out + b.reshape(1, -1, 1, 1)

def pool_ref(x, k, s=None, p=0, d=1, ceil=False, mode="max", include_pad=True):
  """PyTorch's pooling: output size (with ceil_mode's rule that no window starts in the right padding), max over the valid
  elements, avg divided by the window clipped to the padded input (count_include_pad) or to the input."""
  k = pair(k)
  s, p, d = (k if s is None else pair(s)), pair(p), pair(d)
  h, w = x.shape[-2:]
  def osize(i, kk, ss, pp, dd):
    span = i + 2 * pp - dd * (kk - 1) - 1
    o = (-(-span // ss) if ceil else span // ss) + 1
    return o - 1 if ceil and (o - 1) * ss >= i + pp else o
  oh, ow = osize(h, k[0], s[0], p[0], d[0]), osize(w, k[1], s[1], p[1], d[1])
  out = np.zeros(x.shape[:-2] + (oh, ow))
  for i in range(oh):
    for j in range(ow):
      hs, ws = i * s[0] - p[0], j * s[1] - p[1]
      if mode == "max":
        vals = [x[..., hs + a * d[0], ws + b * d[1]] for a in range(k[0]) for b in range(k[1])
                if 0 <= hs + a * d[0] < h and 0 <= ws + b * d[1] < w]
        out[..., i, j] = np.max(np.stack(vals, -1), -1)
      else:
        he, we = min(hs + k[0], h + p[0]), min(ws + k[1], w + p[1])
        size = (he - hs) * (we - ws)
        hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
        out[..., i, j] = x[..., hs:he, ws:we].sum((-1, -2)) / (size if include_pad else (he - hs) * (we - ws))
  return out

# ---- matmul ----
@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                                   ((2, 3), (5, 3, 4)), ((2, 1, 2, 3), (4, 3, 2)), ((3,), (2, 3, 4)), ((2, 2, 3), (3,)), ((1, 3), (3, 1))])
def test_matmul_shapes(sa, sb):
  a, b = randn(*sa), randn(*sb)
  out = Tensor(a) @ Tensor(b)
  assert out.shape == (a @ b).shape and out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5, atol=1e-5)

def test_matmul_dot_rmatmul_and_dtypes():
  a, b = randn(2, 3), randn(3, 2)
  np.testing.assert_allclose(Tensor(a).dot(Tensor(b)).numpy(), a @ b, rtol=1e-5)
  np.testing.assert_allclose(Tensor(a).matmul(Tensor(b), reverse=True).numpy(), b @ a, rtol=1e-5)
  np.testing.assert_allclose((b @ Tensor(a)).numpy(), b @ a, rtol=1e-5)  # numpy on the left defers to __rmatmul__
  i, j = rng.integers(-9, 9, (3, 4)).astype(np.int32), rng.integers(-9, 9, (4, 2)).astype(np.int32)
  out = Tensor(i) @ Tensor(j)
  assert out.dtype == dtypes.int32  # as torch: an int matmul keeps its dtype (a sum alone would widen to int64)
  np.testing.assert_array_equal(out.numpy(), i @ j)
  mixed = Tensor(i) @ Tensor(j.astype(np.float32))
  assert mixed.dtype == dtypes.float32
  h = (Tensor(a.astype(np.float16)) @ Tensor(b.astype(np.float16)))
  assert h.dtype == dtypes.float16
  np.testing.assert_allclose(h.numpy().astype(np.float32), a @ b, atol=2e-2)
  bo = Tensor([[True, False], [False, False]]) @ Tensor([[True, False], [True, True]])
  assert bo.dtype == dtypes.bool and bo.tolist() == [[True, False], [False, False]]

def test_matmul_zero_size():
  np.testing.assert_array_equal((Tensor.ones(2, 0) @ Tensor.ones(0, 3)).numpy(), np.zeros((2, 3)))
  assert (Tensor.ones(0, 4) @ Tensor.ones(4, 3)).shape == (0, 3)
  assert (Tensor.ones(0) @ Tensor.ones(0)).item() == 0.0

def test_matmul_errors():
  with pytest.raises(RuntimeError, match=r"\(2, 3\) and \(4, 5\)"): Tensor.ones(2, 3) @ Tensor.ones(4, 5)
  with pytest.raises(RuntimeError, match=r"\(3,\) and \(4,\)"): Tensor.ones(3) @ Tensor.ones(4)
  with pytest.raises(RuntimeError, match="at least 1D"): Tensor(2.0) @ Tensor.ones(2)
  with pytest.raises(RuntimeError, match="batch dimensions"): Tensor.ones(2, 2, 3) @ Tensor.ones(3, 3, 4)

def test_linear():
  x, w, b = randn(4, 3), randn(5, 3), randn(5)
  np.testing.assert_allclose(Tensor(x).linear(Tensor(w), Tensor(b)).numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(Tensor(x).linear(Tensor(w)).numpy(), x @ w.T, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(Tensor(x[0]).linear(Tensor(w), Tensor(b)).numpy(), x[0] @ w.T + b, rtol=1e-5, atol=1e-6)
  with pytest.raises(RuntimeError, match="cannot be multiplied"): Tensor(x).linear(Tensor(w.T))

# ---- conv2d ----
CONV_CASES = [dict(), dict(stride=2), dict(padding=1), dict(dilation=2), dict(groups=2), dict(padding=(1, 2)),
              dict(stride=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2), groups=2), dict(padding="same", dilation=(2, 1)), dict(padding="valid")]

@pytest.mark.parametrize("kw", CONV_CASES)
def test_conv2d(kw):
  x, groups = randn(2, 4, 7, 6), kw.get("groups", 1)
  w, b = randn(6, 4 // groups, 3, 2), randn(6)
  p = kw.get("padding", 0)
  if p == "same":
    d = pair(kw.get("dilation", 1))
    pads = tuple((d[i] * (k - 1) // 2, d[i] * (k - 1) - d[i] * (k - 1) // 2) for i, k in enumerate((3, 2)))
  elif p == "valid": pads = ((0, 0), (0, 0))
  elif isinstance(p, int): pads = ((p, p), (p, p))
  elif len(p) == 2: pads = ((p[0], p[0]), (p[1], p[1]))
  else: pads = ((p[2], p[3]), (p[0], p[1]))  # F.pad order: (left, right, top, bottom)
  ref = conv_ref(x, w, b, kw.get("stride", 1), pads, kw.get("dilation", 1), groups)
  out = Tensor(x).conv2d(Tensor(w), Tensor(b), **kw)
  assert out.shape == ref.shape
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)

def test_conv2d_variants():
  x, w = randn(3, 5, 5), randn(2, 3, 2, 2)
  out = Tensor(x).conv2d(Tensor(w))  # unbatched
  assert out.shape == (2, 4, 4)
  np.testing.assert_allclose(out.numpy(), conv_ref(x[None], w)[0], rtol=1e-4, atol=1e-5)
  x1, w1 = randn(2, 3, 9), randn(4, 3, 3)  # one spatial axis: conv1d
  ref = conv_ref(x1[:, :, None, :], w1[:, :, None, :], stride=(1, 2))[:, :, 0]
  np.testing.assert_allclose(Tensor(x1).conv2d(Tensor(w1), stride=2).numpy(), ref, rtol=1e-4, atol=1e-5)
  xi, wi = rng.integers(-3, 3, (1, 2, 4, 4)).astype(np.int32), rng.integers(-3, 3, (2, 2, 2, 2)).astype(np.int32)
  oi = Tensor(xi).conv2d(Tensor(wi))
  assert oi.dtype == dtypes.int32
  np.testing.assert_array_equal(oi.numpy(), conv_ref(xi, wi).astype(np.int32))
  oh = Tensor(x.astype(np.float16)).conv2d(Tensor(w.astype(np.float16)))
  assert oh.dtype == dtypes.float16
  np.testing.assert_allclose(oh.numpy().astype(np.float32), conv_ref(x[None], w)[0], atol=3e-2)
  assert Tensor.ones(0, 3, 5, 5).conv2d(Tensor(w)).shape == (0, 2, 4, 4)

def test_conv2d_errors():
  x = Tensor.ones(1, 2, 5, 5)
  with pytest.raises(RuntimeError, match=r"expected input\[1, 2, 5, 5\] to have 3 channels, but got 2"): x.conv2d(Tensor.ones(4, 3, 3, 3))
  with pytest.raises(RuntimeError, match="divisible by 3"): x.conv2d(Tensor.ones(4, 1, 3, 3), groups=3)
  with pytest.raises(RuntimeError, match="larger than the"): x.conv2d(Tensor.ones(1, 2, 6, 6))
  with pytest.raises(RuntimeError, match="4-d"): Tensor.ones(5, 5).conv2d(Tensor.ones(1, 2, 3, 3))
  with pytest.raises(ValueError, match="padding"): x.conv2d(Tensor.ones(1, 2, 3, 3), padding=(1, 1, 1))
  with pytest.raises(ValueError, match="strided"): x.conv2d(Tensor.ones(1, 2, 3, 3), stride=2, padding="same")

# ---- conv_transpose2d ----
@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(padding=1), dict(stride=2, output_padding=1), dict(dilation=2),
                                dict(groups=2), dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 1), groups=2, dilation=(1, 2))])
def test_conv_transpose2d(kw):
  g = kw.get("groups", 1)
  x, w, b = randn(2, 4, 4, 3), randn(4, 3, 3, 2), randn(3 * g)
  ref = conv_transpose_ref(x, w, b, kw.get("stride", 1), kw.get("padding", 0), kw.get("output_padding", 0), g, kw.get("dilation", 1))
  out = Tensor(x).conv_transpose2d(Tensor(w), Tensor(b), **kw)
  assert out.shape == ref.shape
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)

def test_conv_transpose2d_errors():
  x = Tensor.ones(1, 4, 4, 3)
  with pytest.raises(RuntimeError, match="expected input.* to have 3 channels, but got 4"): x.conv_transpose2d(Tensor.ones(3, 2, 2, 2))
  with pytest.raises(RuntimeError, match="output padding must be smaller"): x.conv_transpose2d(Tensor.ones(4, 2, 2, 2), output_padding=1)
  with pytest.raises(RuntimeError, match="too small"): x.conv_transpose2d(Tensor.ones(4, 2, 2, 2), padding=3)

# ---- pooling ----
POOL_CASES = [dict(k=2), dict(k=3, s=2), dict(k=3, s=2, p=1), dict(k=(3, 2), s=(2, 3), p=(1, 1)), dict(k=3, s=2, ceil=True),
              dict(k=2, s=2, p=1, ceil=True), dict(k=(3, 3), s=(2, 2), p=(1, 0), ceil=True), dict(k=2, s=1)]

@pytest.mark.parametrize("kw", POOL_CASES)
def test_max_pool2d(kw):
  x = randn(2, 3, 7, 6)
  ref = pool_ref(x, kw["k"], kw.get("s"), kw.get("p", 0), 1, kw.get("ceil", False))
  out = Tensor(x).max_pool2d(kw["k"], kw.get("s"), kw.get("p", 0), ceil_mode=kw.get("ceil", False))
  assert out.shape == ref.shape
  np.testing.assert_array_equal(out.numpy(), ref.astype(np.float32))

@pytest.mark.parametrize("kw", POOL_CASES)
@pytest.mark.parametrize("include_pad", [True, False])
def test_avg_pool2d(kw, include_pad):
  x = randn(2, 3, 7, 6)
  ref = pool_ref(x, kw["k"], kw.get("s"), kw.get("p", 0), 1, kw.get("ceil", False), "avg", include_pad)
  out = Tensor(x).avg_pool2d(kw["k"], kw.get("s"), kw.get("p", 0), ceil_mode=kw.get("ceil", False), count_include_pad=include_pad)
  assert out.shape == ref.shape
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)

def test_pool_variants_and_dtypes():
  x = randn(1, 2, 8, 7)
  np.testing.assert_array_equal(Tensor(x).max_pool2d(3, 1, 1, dilation=2).numpy(), pool_ref(x, 3, 1, 1, 2).astype(np.float32))
  np.testing.assert_allclose(Tensor(x).avg_pool2d(2, divisor_override=3).numpy(), pool_ref(x, 2, mode="avg") * 4 / 3, rtol=1e-5)
  np.testing.assert_array_equal(Tensor(x[0]).max_pool2d(2).numpy(), pool_ref(x[0], 2).astype(np.float32))  # unbatched (C, H, W)
  xi = (rng.integers(0, 200, (1, 1, 4, 4)) - 2 ** 31).astype(np.int32)  # near the int32 min: the padding must not win
  mi = Tensor(xi).max_pool2d(3, 2, 1)
  assert mi.dtype == dtypes.int32
  np.testing.assert_array_equal(mi.numpy(), pool_ref(xi.astype(np.int64), 3, 2, 1).astype(np.int64))
  ai = Tensor(np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)).avg_pool2d(2)
  assert ai.dtype == dtypes.float32 and ai.tolist() == [[[[2.5, 4.5], [10.5, 12.5]]]]
  h = Tensor(x.astype(np.float16)).max_pool2d(2)
  assert h.dtype == dtypes.float16
  np.testing.assert_array_equal(h.numpy(), pool_ref(x.astype(np.float16), 2).astype(np.float16))
  with pytest.raises(RuntimeError, match="pad should be at most half"): Tensor(x).max_pool2d(2, padding=2)
  with pytest.raises(RuntimeError, match="does not fit"): Tensor(x).avg_pool2d(9)

# ---- normalization ----
def test_layernorm():
  x = randn(2, 3, 4)
  for axis in (-1, (1, 2), 1):
    m, v = x.mean(axis, keepdims=True), x.var(axis, keepdims=True)
    np.testing.assert_allclose(Tensor(x).layernorm(axis).numpy(), (x - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-5)
  w, b = randn(3, 4), randn(3, 4)
  m, v = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
  ref = (x - m) / np.sqrt(v + 1e-3) * w + b
  np.testing.assert_allclose(Tensor(x).layer_norm((3, 4), Tensor(w), Tensor(b), eps=1e-3).numpy(), ref, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(Tensor(x).layer_norm(4).numpy(), Tensor(x).layernorm().numpy(), rtol=1e-6)
  assert Tensor([[1, 2, 3]]).layernorm().dtype == dtypes.float32
  with pytest.raises(RuntimeError, match=r"normalized_shape=\[3\], expected input with shape \[\*, 3\], but got input of size\[2, 3, 4\]"):
    Tensor(x).layer_norm(3)

def test_batchnorm():
  x, w, b, mean, var = randn(2, 3, 4, 4), randn(3), randn(3), randn(3), np.abs(randn(3)) + 0.5
  sh = (1, 3, 1, 1)
  ref = (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-5) * w.reshape(sh) + b.reshape(sh)
  out = Tensor(x).batch_norm(Tensor(mean), Tensor(var), Tensor(w), Tensor(b))
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)
  invstd = 1 / np.sqrt(var + 1e-5)
  np.testing.assert_allclose(Tensor(x).batchnorm(Tensor(w), Tensor(b), Tensor(mean), Tensor(invstd)).numpy(), ref, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(Tensor(x).batchnorm(None, None, Tensor(mean), Tensor(invstd)).numpy(),
                             (x - mean.reshape(sh)) * invstd.reshape(sh), rtol=1e-4, atol=1e-5)
  bm, bv = x.mean((0, 2, 3)), x.var((0, 2, 3))  # training: the batch's own statistics, biased variance
  ref_t = (x - bm.reshape(sh)) / np.sqrt(bv.reshape(sh) + 1e-5)
  np.testing.assert_allclose(Tensor(x).batch_norm(None, None, training=True).numpy(), ref_t, rtol=1e-4, atol=1e-4)
  x2 = randn(5, 3)  # (N, C)
  np.testing.assert_allclose(Tensor(x2).batch_norm(Tensor(mean), Tensor(var)).numpy(), (x2 - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
  with pytest.raises(RuntimeError, match="running_mean must have shape"): Tensor(x).batch_norm(Tensor.ones(4), Tensor.ones(3))
  with pytest.raises(ValueError, match="more than 1 value per channel"): Tensor.ones(1, 3).batch_norm(None, None, training=True)
  with pytest.raises(RuntimeError, match="needed when not training"): Tensor(x).batch_norm(None, None)

def test_nn_ops_stay_lazy():
  x, w = Tensor(randn(1, 2, 5, 5)).realize(), Tensor(randn(3, 2, 3, 3)).realize()
  for out in (x.conv2d(w, padding=1), x.reshape(10, 5) @ w.reshape(6, 9)[:, :5].T, x.max_pool2d(2), x.avg_pool2d(3, 1, 1, count_include_pad=False),
              x.conv_transpose2d(w.permute(1, 0, 2, 3), stride=2), x.layernorm()):
    assert out.uop.op.name != "BUFFER" and not any(u.op.name == "CONTIGUOUS" for u in out.uop.toposort())

def test_nan_and_inf_propagate():
  x = np.array([[[[1.0, math.nan], [2.0, 3.0]]]], np.float32)
  assert np.isnan(Tensor(x).max_pool2d(2).item())
  assert math.isinf((Tensor([math.inf, 1.0]) @ Tensor([1.0, 1.0])).item())
