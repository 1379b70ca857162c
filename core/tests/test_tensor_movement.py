"""Tensor movement and indexing against numpy: the movement ops, what is built from them, basic and advanced indexing,
gather, scatter and one_hot. Every result's graph is checked by the verifier (tensor stage) before it is realized."""
import numpy as np
import pytest
from tinyspec import Ops, Tensor, dtypes
from tinyspec.uop.spec import verify

N = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5


def check(t: Tensor, want, dtype=None):
  """t's graph is well-formed, and its value equals want exactly, with want's shape (and `dtype`, if given)."""
  verify(t.uop, "tensor")
  want = np.asarray(want)
  got = t.numpy()
  assert got.shape == want.shape == t.shape, (got.shape, want.shape, t.shape)
  if dtype is not None: assert t.dtype == dtype, (t.dtype, dtype)
  np.testing.assert_array_equal(got, want)

def ops_in(t: Tensor) -> set:
  return {u.op for u in t.uop.toposort()}


# ---- the movement ops ----

def test_reshape():
  t = Tensor(N)
  check(t.reshape(6, 4), N.reshape(6, 4))
  check(t.reshape((4, -1)), N.reshape(4, -1))
  check(t.reshape([-1]), N.reshape(-1))
  check(t.reshape(2, 1, 3, 4), N.reshape(2, 1, 3, 4))
  assert t.reshape(2, 3, 4) is t
  check(Tensor(5.0).reshape(1, 1), np.full((1, 1), 5.0, np.float32))
  check(Tensor([3]).reshape(()), np.int32(3))
  check(Tensor.zeros(0, 3).reshape(3, 0, 5), np.zeros((3, 0, 5), np.float32))
  with pytest.raises(RuntimeError, match=r"\(2, 3, 4\).*24 elements.*\(5, 5\)"): t.reshape(5, 5)
  with pytest.raises(RuntimeError, match="only one dimension can be -1"): t.reshape(-1, -1)
  with pytest.raises(RuntimeError, match="cannot become"): t.reshape(-1, 5)
  with pytest.raises(RuntimeError, match="cannot become"): Tensor.zeros(0).reshape(-1, 0)
  with pytest.raises(RuntimeError, match="negative"): t.reshape(-2, -12)

def test_expand():
  t = Tensor(np.array([[1], [2]], np.int32))
  check(t.expand(2, 3), np.broadcast_to([[1], [2]], (2, 3)))
  check(t.expand((4, 2, 3)), np.broadcast_to([[1], [2]], (4, 2, 3)))
  check(t.expand(-1, 5), np.broadcast_to([[1], [2]], (2, 5)))
  check(Tensor(1.5).expand(2, 2), np.full((2, 2), 1.5, np.float32))
  check(t.expand(2, 0), np.zeros((2, 0), np.int32))
  with pytest.raises(RuntimeError, match=r"\(3, 3\): dimension 0 of size 2"): t.expand(3, 3)
  with pytest.raises(RuntimeError, match="fewer dimensions"): t.expand(2)
  with pytest.raises(RuntimeError, match="cannot become -1"): t.expand(-1, 2, 3)

def test_permute_transpose_T():
  t = Tensor(N)
  check(t.permute(2, 0, 1), N.transpose(2, 0, 1))
  check(t.permute((-1, 1, 0)), N.transpose(2, 1, 0))
  check(t.transpose(0, 2), N.swapaxes(0, 2))
  check(t.transpose(-1, -2), N.swapaxes(-1, -2))
  check(Tensor(N[0]).transpose(), N[0].T)
  check(t.T, N.T)
  check(Tensor(N[0]).T, N[0].T)
  assert t.permute(0, 1, 2) is t and Tensor(2.0).permute(()).shape == ()
  with pytest.raises(RuntimeError, match="not a permutation"): t.permute(0, 0, 1)
  with pytest.raises(RuntimeError, match="not a permutation"): t.permute(0, 1)
  with pytest.raises(IndexError, match="out of range"): t.permute(0, 1, 3)

def test_flip():
  t = Tensor(N)
  check(t.flip(0), np.flip(N, 0))
  check(t.flip((0, 2)), np.flip(N, (0, 2)))
  check(t.flip(-1), np.flip(N, -1))
  check(t.flip(1, 2), np.flip(N, (1, 2)))
  with pytest.raises(RuntimeError, match="more than once"): t.flip((1, -2))
  with pytest.raises(IndexError, match="out of range"): t.flip(3)

def test_shrink():
  t = Tensor(N)
  check(t.shrink(((1, 2), None, (1, 3))), N[1:2, :, 1:3])
  check(t.shrink(((0, 0), None, None)), N[0:0])
  assert t.shrink((None, None, None)) is t
  with pytest.raises(IndexError, match=r"bounds \(2, 5\) of axis 2"): t.shrink((None, None, (2, 5)))
  with pytest.raises(ValueError, match="per axis"): t.shrink(((0, 1),))

@pytest.mark.parametrize("pad, np_pad", [
  ((1, 2), ((0, 0), (0, 0), (1, 2))), ((1, 0, 0, 2), ((0, 0), (0, 2), (1, 0))), ((0, 0, 0, 0, 2, 1), ((2, 1), (0, 0), (0, 0))),
  (((1, 1), None, (0, 3)), ((1, 1), (0, 0), (0, 3))), ((), ((0, 0),) * 3),
])
def test_pad(pad, np_pad):
  check(Tensor(N).pad(pad), np.pad(N, np_pad))
  check(Tensor(N).pad(pad, value=-1.5), np.pad(N, np_pad, constant_values=-1.5))

def test_pad_details():
  t = Tensor(N)
  check(t.pad((-1, 2)), np.pad(N[:, :, 1:], ((0, 0), (0, 0), (0, 2))))  # negative amounts cut
  check(t.pad((1, -2, -1, -1)), np.pad(N[:, 1:2, :2], ((0, 0), (0, 0), (1, 0))))
  check(t.pad((-4, 0)), N[:, :, 4:])
  i = Tensor(np.array([[1, 2]], np.int8))
  check(i.pad((1, 1), value=7), np.array([[7, 1, 2, 7]], np.int8), dtypes.int8)
  check(Tensor([True]).pad((1, 0), value=True), [True, True], dtypes.bool)
  check(Tensor([1.0]).pad((1, 1), value=float("inf")), [np.inf, 1, np.inf])
  assert Ops.WHERE not in ops_in(t.pad((1, 1))) and Ops.WHERE in ops_in(t.pad((1, 1), value=2))
  check(Tensor.zeros(0, 2).pad(((1, 1), None)), np.zeros((2, 2), np.float32))
  check(t.pad((1, 1), mode="reflect"), np.pad(N, ((0, 0), (0, 0), (1, 1)), mode="reflect"))
  with pytest.raises(NotImplementedError, match="mode must be one of"): t.pad((1, 1), mode="edge")
  with pytest.raises(ValueError, match="even length"): t.pad((1, 1, 1))
  with pytest.raises(ValueError, match="even length"): t.pad((0,) * 8)
  with pytest.raises(ValueError, match="per axis"): t.pad(((1, 1), None))
  with pytest.raises(RuntimeError, match="cuts more"): t.pad((-3, -2))


# ---- built from them ----

def test_flatten_unflatten_squeeze_unsqueeze():
  t = Tensor(N)
  check(t.flatten(), N.reshape(-1))
  check(t.flatten(1), N.reshape(2, 12))
  check(t.flatten(0, 1), N.reshape(6, 4))
  check(t.flatten(-2, -1), N.reshape(2, 12))
  check(Tensor(3.0).flatten(), np.array([3.0], np.float32))
  check(t.unflatten(2, (2, 2)), N.reshape(2, 3, 2, 2))
  check(t.unflatten(-1, (-1, 1)), N.reshape(2, 3, 4, 1))
  s = Tensor(np.zeros((1, 3, 1, 2), np.int32))
  check(s.squeeze(), np.zeros((3, 2), np.int32))
  check(s.squeeze(0), np.zeros((3, 1, 2), np.int32))
  check(s.squeeze(1), np.zeros((1, 3, 1, 2), np.int32))  # not size 1: kept, as PyTorch
  check(s.squeeze((0, -2)), np.zeros((3, 2), np.int32))
  check(Tensor(1).squeeze(0), np.int32(1))
  check(t.unsqueeze(0), N[None])
  check(t.unsqueeze(-1), N[..., None])
  check(t.unsqueeze(2), N[:, :, None])
  check(Tensor(2).unsqueeze(0), np.array([2], np.int32))
  with pytest.raises(RuntimeError, match="comes after"): t.flatten(2, 1)
  with pytest.raises(RuntimeError, match="do not multiply"): t.unflatten(1, (2, 2))
  with pytest.raises(IndexError, match="out of range"): t.unsqueeze(4)
  with pytest.raises(IndexError, match="out of range"): t.squeeze(3)

def test_repeat():
  a = np.array([[1, 2], [3, 4]], np.int32)
  check(Tensor(a).repeat(2, 3), np.tile(a, (2, 3)))
  check(Tensor(a).repeat((1, 1)), a)
  check(Tensor(a).repeat(2, 1, 2), np.tile(a, (2, 1, 2)))
  check(Tensor(a).repeat(0, 2), np.tile(a, (0, 2)))
  check(Tensor(1.5).repeat(3), np.full(3, 1.5, np.float32))
  with pytest.raises(RuntimeError, match="fewer entries"): Tensor(a).repeat(2)

def test_split_chunk():
  t = Tensor(N)
  for got, want in zip(t.split(2, dim=2), np.split(N, 2, axis=2)): check(got, want)
  parts = t.split(3, -1)
  assert [p.shape for p in parts] == [(2, 3, 3), (2, 3, 1)]
  check(parts[1], N[:, :, 3:])
  parts = t.split([1, 0, 2], dim=1)
  assert [p.shape for p in parts] == [(2, 1, 4), (2, 0, 4), (2, 2, 4)]
  check(parts[2], N[:, 1:])
  assert [p.shape for p in t.chunk(3, 2)] == [(2, 3, 2), (2, 3, 2)]  # at most 3 pieces, as PyTorch
  assert [p.shape for p in t.chunk(2, 1)] == [(2, 2, 4), (2, 1, 4)]
  assert [p.shape for p in t.chunk(5)] == [(1, 3, 4), (1, 3, 4)]
  with pytest.raises(RuntimeError, match="add up"): t.split([1, 1], dim=1)
  with pytest.raises(ValueError, match="positive"): t.split(0)
  with pytest.raises(ValueError, match="positive"): t.chunk(0)

def test_cat():
  a, b, c = N, N[:, :2] * 2, N[:, :1] + 100
  check(Tensor(a).cat(Tensor(b), Tensor(c), dim=1), np.concatenate([a, b, c], 1))
  check(Tensor.cat([Tensor(a), Tensor(a)], dim=-1), np.concatenate([a, a], -1))
  check(Tensor(a).cat([Tensor(a)]), np.concatenate([a, a]))
  check(Tensor(a).cat(dim=2), a)
  check(Tensor([1, 2]).cat(Tensor([0.5])), np.array([1, 2, 0.5], np.float32), dtypes.float32)  # dtypes promote
  check(Tensor([True]).cat(Tensor([False, True])), [True, False, True], dtypes.bool)
  check(Tensor(np.array([1, 2], np.uint8)).cat(Tensor(np.array([255], np.uint8))), np.array([1, 2, 255], np.uint8))
  check(Tensor.zeros(0, 2).cat(Tensor.ones(1, 2)), np.ones((1, 2), np.float32))
  check(Tensor([-np.inf, np.nan]).cat(Tensor([np.inf])), [-np.inf, np.nan, np.inf])
  assert Ops.REDUCE not in ops_in(Tensor(a).cat(Tensor(b), dim=1))
  with pytest.raises(RuntimeError, match=r"shapes .* must match except in dimension 0"): Tensor(a).cat(Tensor(b))
  with pytest.raises(RuntimeError, match="zero-dimensional"): Tensor(1).cat(Tensor(2))
  with pytest.raises(RuntimeError, match="different devices"): Tensor([1]).cat(Tensor([2], device="PYTHON:1"))
  with pytest.raises(ValueError, match="at least one"): Tensor.cat([])
  # a sequence and more tensors beside it is ambiguous: an error, not a guess (it used to be read as one list)
  with pytest.raises(ValueError, match="one sequence or as separate arguments"): Tensor.cat([Tensor(a), Tensor(a)], Tensor(a))

def test_stack():
  a, b = N[0], N[1]
  check(Tensor(a).stack(Tensor(b)), np.stack([a, b]))
  check(Tensor.stack([Tensor(a), Tensor(b), Tensor(a)], dim=2), np.stack([a, b, a], 2))
  check(Tensor.stack([Tensor(a), Tensor(b)], dim=-1), np.stack([a, b], -1))
  check(Tensor(1).stack(Tensor(2), Tensor(3)), np.array([1, 2, 3], np.int32))
  with pytest.raises(RuntimeError, match="same shape"): Tensor(a).stack(Tensor(a[:1]))
  with pytest.raises(ValueError, match="not both"): Tensor.stack((Tensor([1, 2]), Tensor([3, 4])), Tensor([5, 6]))
  with pytest.raises(IndexError, match="out of range"): Tensor(a).stack(Tensor(b), dim=3)


# ---- indexing ----

@pytest.mark.parametrize("idx", [
  0, -1, 1, (1, 2), (1, 2, 3), (-1, -2, -4), slice(None), slice(1, None), (slice(None), slice(0, 2)), (Ellipsis, 1), (0, Ellipsis, 2),
  (slice(None), slice(None, None, 2)), (Ellipsis, slice(None, None, -1)), (Ellipsis, slice(3, 0, -2)), (Ellipsis, slice(None, None, 3)),
  (slice(None), slice(None, None, -2)), (Ellipsis, slice(-1, -5, -3)), (Ellipsis, slice(5, 1, -1)), (Ellipsis, slice(10, 20)),
  (slice(-100, 100), 1), (Ellipsis, slice(2, 2)), (Ellipsis, slice(0, 4, -1)), None, (None, 0), (0, None, slice(None), None),
  (Ellipsis, None), (None, Ellipsis, None), (slice(None, None, -1), 1, slice(1, 4, 2)), Ellipsis, (),
])
def test_basic_indexing(idx):
  check(Tensor(N)[idx], N[idx])

def test_basic_indexing_is_movement_only():
  t = Tensor(N)[1, ::-2, 1:4:2]
  assert ops_in(t) <= {Ops.BUFFER, Ops.STACK, Ops.CONST, Ops.SHRINK, Ops.FLIP, Ops.PAD, Ops.RESHAPE}
  check(Tensor(5)[()], np.int32(5))
  check(Tensor(5)[None], np.array([5], np.int32))
  check(Tensor(5)[...], np.int32(5))
  check(Tensor.zeros(0, 3)[:, 1], np.zeros((0,), np.float32))
  check(Tensor.arange(10)[7], np.int32(7))

@pytest.mark.parametrize("idx", [
  [1, 0, 1], ([1, 0],), (0, [2, 1, 1]), (Ellipsis, [3, -1, 0]), ([[0, 1], [1, 0]],), ([1, 0], [2, 1]), ([1, 0], slice(None), [3, 0]),
  (slice(None), [0, 2], [1, 3]), (slice(None), [[0], [2]], [1, 3]), ([0, 1], [[0], [2]], slice(1, 3)), (slice(None), [-3, 2], slice(None, None, -1)),
  ([1], None, [0, 2]), ([], slice(None)), (slice(None), []),
])
def test_advanced_indexing(idx):
  check(Tensor(N)[idx], N[idx])
  check(Tensor(N.astype(np.int8))[idx], N.astype(np.int8)[idx])

def test_advanced_indexing_with_tensors():
  t = Tensor(N)
  i = Tensor([1, 0, 1])
  check(t[i], N[[1, 0, 1]])
  check(t[:, Tensor([[2, -1]])], N[:, [[2, -1]]])
  check(t[Tensor(1)], N[1])  # a 0-d index tensor selects like an int
  check(t[Tensor(np.array([0, 1], np.int64)), :, Tensor(np.array([3, 0], np.uint8))], N[[0, 1], :, [3, 0]])
  check(t[Tensor([5, 1])], np.stack([np.zeros((3, 4), np.float32), N[1]]))  # out-of-range values in a Tensor give 0
  assert Ops.REDUCE in ops_in(t[i])  # a one-hot gather, lazy
  b = Tensor([True, False, True])
  check(b[Tensor([2, 2, 1])], [True, True, False], dtypes.bool)
  inf = np.array([np.inf, np.nan, -1.0], np.float32)
  check(Tensor(inf)[[2, 0, 1]], inf[[2, 0, 1]])  # WHERE, not a multiply by the mask: inf and nan elsewhere stay out

def test_ints_select_before_advanced_indexing():
  # PyTorch applies ints as selects first, so the index dims stay where the list was; numpy counts the int as an advanced
  # index separated from the list by a slice and moves the index dims to the front
  M = np.arange(120, dtype=np.int32).reshape(2, 3, 4, 5)
  got = Tensor(M)[:, [0, 2], :, 1]
  check(got, M[:, :, :, 1][:, [0, 2], :])

def test_bool_mask_indexing():
  t = Tensor(N)
  m = N > 0
  check(t[Tensor(m)], N[m])
  check(t[1, Tensor(m[1])], N[1, m[1]])
  check(t[:, N[0, :, 0] > -8], N[:, N[0, :, 0] > -8])
  check(t[[True, False]], N[[True, False]])
  check(t[..., Tensor(np.array([True, False, True, False]))], N[..., [True, False, True, False]])
  with pytest.raises(IndexError, match="does not match"): t[Tensor([True, False, True])]

@pytest.mark.parametrize("idx", [
  1, (0, slice(1, 3)), (Ellipsis, slice(None, None, -2)), (slice(None), slice(2, 0, -1), slice(None, None, 3)), (None, 1, 2),
  [1, 0], (0, [2, 0], 1), ([1, 0], slice(None), [3, 3]), N > 0, N[:, 0, 0] > 0, (slice(None), N[0, :, 0] > -4),
])
@pytest.mark.parametrize("realized", [False, True], ids=["lazy", "realized"])
def test_setitem(idx, realized):
  for value in (np.float32(-1), np.arange(np.zeros(N.shape)[idx].size, dtype=np.float32).reshape(N[idx].shape) + 100):
    want, t = N.copy(), Tensor(N).realize() if realized else Tensor(N)
    want[idx] = value
    t[Tensor(idx) if isinstance(idx, np.ndarray) else idx] = value if value.ndim == 0 else Tensor(value)
    check(t, want)

def test_setitem_writes_the_buffer():
  """On a realized tensor the write lands in the buffer: other tensors viewing it see it, and a slice of it writes there."""
  t = Tensor(N).realize()
  flat = t.reshape(24)
  t[0, 1] = 0.0
  row = t[1]
  row[2, ::2] = Tensor([5.0, 6.0])
  want = N.copy(); want[0, 1] = 0; want[1, 2, ::2] = [5, 6]
  check(t, want)
  check(flat, want.reshape(24))
  m = Tensor(N) > 0
  t[m] = 1.0  # a whole-shape mask with one value: a WHERE, the mask never read back
  assert m.uop.op is not Ops.BUFFER
  want[N > 0] = 1
  check(t, want)

def test_setitem_and_in_place_on_a_sharded_tensor():
  """Over several devices the shards take the updated value (a slice is not written in place there)."""
  t = Tensor(N).shard(("PYTHON:0", "PYTHON:1"), 0).realize()
  t[1, 0] = 100.0
  t[:, 2, ::2] = Tensor([5.0, 6.0])
  t.add_(1)
  want = N.copy(); want[1, 0] = 100; want[:, 2, ::2] = [5, 6]
  check(t, want + 1)
  assert t.device == ("PYTHON:0", "PYTHON:1")

def test_setitem_errors_change_nothing():
  t = Tensor(N).realize()
  with pytest.raises(ValueError, match=r"value of shape \(3,\) does not broadcast to the indexed shape \(4,\)"): t[0, 0] = Tensor([1.0, 2.0, 3.0])
  with pytest.raises(IndexError, match="out of bounds"): t[5] = 1.0
  with pytest.raises(ValueError, match="repeats or pads"): Tensor(N).realize().expand(2, 2, 3, 4)[0, 0] = 1.0
  check(t, N)

def test_indexing_errors():
  t = Tensor(N)
  with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2"): t[2]
  with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 2 with size 4"): t[0, 0, -5]
  with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"): t[:, [0, 3]]
  with pytest.raises(IndexError, match="too many indices"): t[0, 0, 0, 0]
  with pytest.raises(IndexError, match="too many indices"): Tensor(1)[0]
  with pytest.raises(IndexError, match="single ellipsis"): t[..., 0, ...]
  with pytest.raises(IndexError, match="integer or bool"): t[Tensor([0.0])]
  with pytest.raises(IndexError, match="integer or bool"): t[[0.5]]
  with pytest.raises(IndexError, match="valid indices"): t["a"]
  with pytest.raises(IndexError, match="valid indices"): t[1.0]
  with pytest.raises(IndexError, match="broadcast"): t[[0, 1], [0, 1, 2]]
  with pytest.raises(RuntimeError, match="PYTHON:1"): t[Tensor([0], device="PYTHON:1")]

def test_gather():
  x = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5
  idx = np.array([[0, 3, 1], [2, 2, 0]], np.int32)
  check(Tensor(x).gather(1, Tensor(idx)), np.take_along_axis(x[:2], idx, 1))
  idx0 = np.array([[2, 0, 1, 1], [0, 0, 2, 1]], np.int32)
  check(Tensor(x).gather(0, Tensor(idx0)), np.take_along_axis(x, idx0, 0))
  check(Tensor(x).gather(-1, Tensor(idx[:, :1])), np.take_along_axis(x[:2], idx[:, :1], 1))
  b = np.array([[True, False], [False, True]])
  check(Tensor(b).gather(1, Tensor([[1, 1], [0, 1]])), np.take_along_axis(b, np.array([[1, 1], [0, 1]]), 1), dtypes.bool)
  i3 = np.array([[[1], [0]], [[2], [2]]], np.int64)
  x3 = np.arange(2 * 2 * 3, dtype=np.int32).reshape(2, 2, 3)
  check(Tensor(x3).gather(2, Tensor(i3)), np.take_along_axis(x3, i3, 2), dtypes.int32)
  with pytest.raises(RuntimeError, match="dimensions"): Tensor(x).gather(0, Tensor([0]))
  with pytest.raises(RuntimeError, match="larger"): Tensor(x).gather(0, Tensor(np.zeros((1, 5), np.int32)))
  with pytest.raises(RuntimeError, match="integer"): Tensor(x).gather(0, Tensor([[0.0]]))
  with pytest.raises(IndexError, match="out of range"): Tensor(x).gather(2, Tensor(idx))

def test_scatter():
  x = np.zeros((3, 5), np.float32)
  idx = np.array([[0, 1, 2, 0], [2, 0, 0, 1]], np.int64)
  src = np.arange(1, 11, dtype=np.float32).reshape(2, 5)
  want = x.copy()
  for i in range(2):
    for j in range(4): want[idx[i, j], j] = src[i, j]
  check(Tensor(x).scatter(0, Tensor(idx), Tensor(src)), want)
  want = x.copy() + 1
  for i in range(2):
    for j in range(4): want[i, idx[i, j]] = 7.5
  check(Tensor(x + 1).scatter(1, Tensor(idx), 7.5), want)
  add, mul = x.copy() + 2, x.copy() + 2
  for i in range(2):
    for j in range(4): add[i, idx[i, j]] += src[i, j]; mul[i, idx[i, j]] *= src[i, j]
  check(Tensor(x + 2).scatter(1, Tensor(idx), Tensor(src), reduce="add"), add)
  check(Tensor(x + 2).scatter(1, Tensor(idx), Tensor(src), reduce="multiply"), mul)
  dup = np.array([[1, 1, 1]], np.int32)  # repeated positions: the last write wins
  check(Tensor(np.zeros((1, 3), np.int32)).scatter(1, Tensor(dup), Tensor([[4, 5, 6]])), [[0, 6, 0]], dtypes.int32)
  check(Tensor([[False, False]]).scatter(1, Tensor([[1]]), True), [[False, True]], dtypes.bool)
  check(Tensor(x).scatter(0, Tensor(np.zeros((0, 5), np.int32)), 1.0), x)
  with pytest.raises(ValueError, match="reduce"): Tensor(x).scatter(0, Tensor(idx), 1.0, reduce="max")
  with pytest.raises(RuntimeError, match="larger than src"): Tensor(x).scatter(0, Tensor(idx), Tensor(src[:, :2]))
  with pytest.raises(RuntimeError, match="dimensions"): Tensor(x).scatter(0, Tensor([0]), 1.0)

def test_one_hot():
  y = np.array([[0, 3], [2, 1]], np.int32)
  check(Tensor(y).one_hot(4), np.eye(4, dtype=np.int32)[y], dtypes.int32)
  check(Tensor(y).one_hot(), np.eye(4, dtype=np.int32)[y])
  check(Tensor([5]).one_hot(3), [[0, 0, 0]])
  with pytest.raises(TypeError, match="integer"): Tensor([1.0]).one_hot(2)
  with pytest.raises(RuntimeError, match="empty"): Tensor(np.zeros(0, np.int32)).one_hot()

def test_rearrange_as_einops():
  x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
  t = Tensor(x)
  check(t.rearrange("b c h w -> b h w c"), x.transpose(0, 2, 3, 1))
  check(t.rearrange("b c h w -> (b c) (h w)"), x.reshape(6, 20))
  check(t.rearrange("b c (h1 h2) w -> b h1 c h2 w", h1=2), x.reshape(2, 3, 2, 2, 5).transpose(0, 2, 1, 3, 4))
  check(t.rearrange("b ... w -> w (b ...)"), x.transpose(3, 0, 1, 2).reshape(5, 24))
  check(t.rearrange("b c h w -> b 1 c h w ()"), x[:, None, :, :, :, None])
  check(Tensor(x[:, :1]).rearrange("b 1 h w -> b h w"), x[:, 0])
  for bad, why in (("b c h -> b c h", "names 3 axes"), ("b c h w -> b c h h", "once on each side"), ("b c h w", "exactly one '->'"),
                   ("(b ...) -> b ...", "cannot be split"), ("b c (h1 h2) w -> b c h1 h2 w", "cannot split")):
    with pytest.raises(ValueError, match=why): t.rearrange(bad)
  with pytest.raises(ValueError, match=r"sizes given for \['z'\]"): t.rearrange("b c h w -> b c h w", z=2)
  with pytest.raises(TypeError, match="must be a str"): t.rearrange(3)

def test_pad_to_and_shrink_to():
  check(Tensor(N).pad_to(3, None, 6), np.pad(N, ((0, 1), (0, 0), (0, 2))))
  check(Tensor(N).pad_to((3, 3, 4), value=7.0), np.pad(N, ((0, 1), (0, 0), (0, 0)), constant_values=7.0))
  check(Tensor(N).shrink_to(1, None, 2), N[:1, :, :2])
  with pytest.raises(ValueError, match="smaller"): Tensor(N).pad_to(1, 3, 4)
  with pytest.raises(ValueError, match="one size"): Tensor(N).shrink_to(1, 2)
