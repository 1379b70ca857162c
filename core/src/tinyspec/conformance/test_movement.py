"""Movement ops: reshape permute expand pad shrink flip transpose flatten unflatten squeeze unsqueeze repeat split chunk
cat stack, alone, chained, and fused with compute on both sides."""
import numpy as np
import pytest

from tinyspec import Tensor, dtypes
from tinyspec.conformance.support import check, data

X = data(dtypes.float32, (2, 3, 4), seed=1)

CASES = {
  "reshape": (lambda t: t.reshape(6, 4), lambda x: x.reshape(6, 4)),
  "reshape_infer": (lambda t: t.reshape(-1, 2), lambda x: x.reshape(-1, 2)),
  "permute": (lambda t: t.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1)),
  "permute_neg": (lambda t: t.permute(-1, -3, -2), lambda x: x.transpose(2, 0, 1)),
  "transpose": (lambda t: t.transpose(0, 2), lambda x: x.swapaxes(0, 2)),
  "expand": (lambda t: t.reshape(2, 1, 3, 4).expand(2, 5, 3, 4), lambda x: np.broadcast_to(x.reshape(2, 1, 3, 4), (2, 5, 3, 4))),
  "flip": (lambda t: t.flip(1), lambda x: x[:, ::-1]),
  "flip_all": (lambda t: t.flip((0, 1, 2)), lambda x: x[::-1, ::-1, ::-1]),
  "shrink": (lambda t: t.shrink(((0, 1), (1, 3), None)), lambda x: x[0:1, 1:3, :]),
  "pad": (lambda t: t.pad((1, 2)), lambda x: np.pad(x, ((0, 0), (0, 0), (1, 2)))),
  "pad_two_axes": (lambda t: t.pad((0, 1, 2, 0)), lambda x: np.pad(x, ((0, 0), (2, 0), (0, 1)))),
  "pad_value": (lambda t: t.pad(((1, 0), (0, 0), (2, 2)), value=-7.5), lambda x: np.pad(x, ((1, 0), (0, 0), (2, 2)), constant_values=-7.5)),
  "pad_negative": (lambda t: t.pad((-1, 2, 1, -1)), lambda x: np.pad(x, ((0, 0), (1, 0), (0, 2)))[:, :3, 1:]),
  "flatten": (lambda t: t.flatten(), lambda x: x.reshape(-1)),
  "flatten_range": (lambda t: t.flatten(1), lambda x: x.reshape(2, 12)),
  "unflatten": (lambda t: t.unflatten(2, (2, 2)), lambda x: x.reshape(2, 3, 2, 2)),
  "unsqueeze": (lambda t: t.unsqueeze(1), lambda x: x[:, None]),
  "unsqueeze_neg": (lambda t: t.unsqueeze(-1), lambda x: x[..., None]),
  "squeeze": (lambda t: t.reshape(2, 1, 3, 1, 4).squeeze(), lambda x: x),
  "squeeze_dim": (lambda t: t.reshape(2, 1, 3, 1, 4).squeeze(1), lambda x: x.reshape(2, 3, 1, 4)),
  "repeat": (lambda t: t.repeat(2, 1, 3), lambda x: np.tile(x, (2, 1, 3))),
  "repeat_new_axis": (lambda t: t.repeat(2, 1, 1, 1), lambda x: np.tile(x, (2, 1, 1, 1))),
  "T": (lambda t: t.reshape(6, 4).T, lambda x: x.reshape(6, 4).T),
  "chain": (lambda t: t.permute(1, 0, 2).reshape(3, 8).flip(0).pad(((1, 1), (0, 0))).shrink(((1, 4), (2, 7))),
            lambda x: np.pad(x.transpose(1, 0, 2).reshape(3, 8)[::-1], ((1, 1), (0, 0)))[1:4, 2:7]),
}

@pytest.mark.parametrize("case", CASES)
def test_movement(dev, case):
  f, ref = CASES[case]
  want = np.ascontiguousarray(ref(X))
  check(f(Tensor(X, device=dev)), want)
  check(f(Tensor(X, device=dev) * 2 + 1).exp2(), np.exp2(ref(X * 2 + 1)), rtol=1e-5)  # fused with compute before and after
  check(f(Tensor(X, device=dev).contiguous()).contiguous() * 1, want)

def test_movement_keeps_ints_and_bools(dev):
  x = data(dtypes.int8, (3, 4), lo=-100, hi=100)
  check(Tensor(x, device=dev).T.flip(0).pad((1, 1), value=5), np.pad(x.T[::-1], ((0, 0), (1, 1)), constant_values=5))
  b = x > 0
  check(Tensor(b, device=dev).permute(1, 0).pad((0, 2)), np.pad(b.T, ((0, 0), (0, 2))))

def test_split_chunk(dev):
  x = data(dtypes.float32, (7, 4))
  t = Tensor(x, device=dev)
  for got, want in zip(t.split(3), np.split(x, [3, 6])): check(got, want)
  for got, want in zip(t.split([1, 4, 2]), np.split(x, [1, 5])): check(got, want)
  for got, want in zip(t.chunk(2, dim=1), np.split(x, 2, axis=1)): check(got, want)
  assert [c.shape for c in t.chunk(3)] == [(3, 4), (3, 4), (1, 4)]

def test_cat_stack(dev):
  a, b, c = data(dtypes.float32, (2, 3), seed=1), data(dtypes.float32, (4, 3), seed=2), data(dtypes.float32, (2, 3), seed=3)
  A, B, C = (Tensor(v, device=dev) for v in (a, b, c))
  check(A.cat(B, C), np.concatenate([a, b, c]))
  check(Tensor.cat(A, C, dim=1), np.concatenate([a, c], 1))
  check(Tensor.cat(A * 2, (C + 1).exp(), dim=-1), np.concatenate([a * 2, np.exp(c + 1)], -1), rtol=1e-6)
  check(Tensor.stack(A, C), np.stack([a, c]))
  check(Tensor.stack(A, C, A, dim=2), np.stack([a, c, a], 2))
  check(Tensor.stack(Tensor(1.0, device=dev), Tensor(2.0, device=dev)), np.array([1.0, 2.0], np.float32))

def test_reshape_errors(dev):
  t = Tensor.ones(2, 3, device=dev)
  with pytest.raises((RuntimeError, ValueError)): t.reshape(4, 2)
  with pytest.raises((RuntimeError, ValueError, IndexError)): t.permute(0, 0)
