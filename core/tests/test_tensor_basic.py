"""Tensor basics against numpy: construction, properties, creation, elementwise ops with PyTorch's promotion, and the
basic reductions. Every result's graph is checked by the verifier (tensor stage) before it is realized."""
import math

import numpy as np
import pytest
from tinyspec import Device, Ops, Tensor, UOp, dtypes
from tinyspec.uop.spec import verify


def check(t: Tensor, want, dtype=None, rtol=1e-6, atol=1e-6):
  """t's graph is well-formed, and its value has want's shape and values (and `dtype`, if given)."""
  verify(t.uop, "tensor")
  want = np.asarray(want)
  got = t.numpy()
  assert got.shape == want.shape == t.shape, (got.shape, want.shape, t.shape)
  if dtype is not None: assert t.dtype == dtype, (t.dtype, dtype)
  assert got.dtype == t.dtype.np
  if got.dtype.kind == "f": np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
  else: np.testing.assert_array_equal(got, want)


# ---- construction ----

@pytest.mark.parametrize("data, dtype, shape", [
  (3, dtypes.int32, ()), (2.5, dtypes.float32, ()), (True, dtypes.bool, ()),
  ([1, 2, 3], dtypes.int32, (3,)), ([[1.0, 2], [3, 4]], dtypes.float32, (2, 2)), ([True, False], dtypes.bool, (2,)),
  ([True, 2], dtypes.int32, (2,)), ([], dtypes.float32, (0,)), ([[], []], dtypes.float32, (2, 0)), ((1, 2), dtypes.int32, (2,)),
])
def test_from_python(data, dtype, shape):
  t = Tensor(data)
  assert (t.dtype, t.shape, t.ndim, t.numel()) == (dtype, shape, len(shape), math.prod(shape))
  check(t, np.array(data, dtype.np).reshape(shape))

@pytest.mark.parametrize("npdt", [np.float64, np.float16, np.int64, np.int8, np.uint8, np.bool_, np.uint32])
def test_from_numpy_keeps_dtype(npdt):
  arr = (np.arange(6).reshape(2, 3) % 3).astype(npdt)
  t = Tensor(arr)
  assert t.dtype == dtypes.from_np(npdt) and t.uop.op is Ops.BUFFER
  check(t, arr)
  check(Tensor(arr[:, ::2]), arr[:, ::2])  # non-contiguous views are copied
  assert Tensor(np.float64(1.5)).dtype == dtypes.float64

def test_dtype_and_device_arguments():
  check(Tensor([1.7, -2.7], dtype=dtypes.int32), [1, -2], dtypes.int32)
  check(Tensor([1, 2], dtype="float16"), np.array([1, 2], np.float16), dtypes.float16)
  check(Tensor(np.array([0, 2]), dtype=np.bool_), [False, True], dtypes.bool)
  check(Tensor(3, dtype=dtypes.float32), np.float32(3))
  t = Tensor([1, 2], device="python")
  assert t.device == "PYTHON" and t.uop.device == "PYTHON"
  assert Tensor([1]).device == Device.DEFAULT and Tensor(1.0).device == Device.DEFAULT

def test_from_tensor_and_uop():
  a = Tensor([1, 2, 3])
  b = Tensor(a, dtype=dtypes.float32)
  check(b, [1.0, 2.0, 3.0], dtypes.float32)
  assert Tensor(a).uop is a.uop
  u = UOp.const(2.0, dtypes.float32).reshape((1,)).expand((3,))
  check(Tensor(u), [2.0, 2.0, 2.0], dtypes.float32)
  assert Tensor._from_uop(u).uop is u and Tensor._from_uop(u, "PYTHON:1").device == "PYTHON:1"
  assert a._new(u).device == a.device

def test_construction_errors():
  with pytest.raises(ValueError, match="ragged"): Tensor([[1, 2], [3]])
  with pytest.raises(ValueError, match="ragged"): Tensor([1, [2]])
  with pytest.raises(TypeError, match="str"): Tensor("abc")
  with pytest.raises(TypeError, match="numpy dtype"): Tensor(np.array(["a"]))
  assert Tensor([2 ** 40, -1]).dtype == dtypes.int64 and Tensor([2 ** 40, -1]).numpy().tolist() == [2 ** 40, -1]  # as PyTorch
  with pytest.raises(OverflowError, match=r"integers in \[-1, 18446744073709551616\] fit no tinyspec dtype"): Tensor([2 ** 64, -1])
  check(Tensor([2 ** 40], dtype=dtypes.int64), np.array([2 ** 40]))
  with pytest.raises(ValueError, match="unknown dtype"): Tensor([1], dtype="float7")

def test_properties_and_reading():
  t = Tensor([[1, 2, 3], [4, 5, 6]])
  assert t.size() == (2, 3) and t.size(1) == 3 and t.size(-2) == 2 and len(t) == 2 and t.element_size() == 4
  assert t.tolist() == [[1, 2, 3], [4, 5, 6]] and Tensor(2.5).tolist() == 2.5
  assert [r.tolist() for r in t] == [[1, 2, 3], [4, 5, 6]]
  assert t.data().tolist() == [[1, 2, 3], [4, 5, 6]] and t.data().format == "i" and t.T.data().tolist() == [[1, 4], [2, 5], [3, 6]]
  assert Tensor(2.5).data().shape == () and Tensor(2.5).data().tolist() == 2.5 and Tensor([[True]]).data().format == "?"
  assert Tensor([[7]]).item() == 7 and type(Tensor([1.5]).item()) is float and type(Tensor(True).item()) is bool
  assert bool(Tensor([1])) and not bool(Tensor(0.0)) and int(Tensor(3.7)) == 3 and float(Tensor(2)) == 2.0
  r = repr(t)
  assert "(2, 3)" in r and "int32" in r and "PYTHON" in r
  assert t.requires_grad is None and t.grad is None and Tensor([1.0], requires_grad=True).requires_grad is True
  with pytest.raises(RuntimeError, match="6 elements"): t.item()
  with pytest.raises(RuntimeError, match="ambiguous"): bool(t)
  with pytest.raises(TypeError, match="0-d"): len(Tensor(1))
  with pytest.raises(TypeError, match="bfloat16"): t.bfloat16().data()
  with pytest.raises(IndexError, match="out of range"): t.size(2)

def test_realize_is_lazy_until_asked():
  a = Tensor([1.0, 2.0])
  b = (a + 1) * 2
  assert b.uop.op is Ops.MUL
  c = b + 0
  assert b.realize() is b and b.uop.op is Ops.BUFFER and c.uop.op is not Ops.BUFFER
  x, y = Tensor.ones(2) + 1, Tensor.zeros(3)
  x.realize(y)
  assert x.uop.op is Ops.BUFFER and y.uop.op is Ops.BUFFER and x.uop.device == y.uop.device == Device.DEFAULT
  check(x, [2.0, 2.0])

@pytest.mark.parametrize("f", [lambda a: a.to("PYTHON:1"), lambda a: a.contiguous() + 0])
def test_copy_and_contiguous_of_a_buffer(f):
  check(f(Tensor([1.5, -2.5])), [1.5, -2.5])

def test_device_cast_markers():
  a = Tensor([1.5, -2.5])
  assert a.to(a.device) is a
  b = a.to("PYTHON:1")
  assert b.uop.op is Ops.COPY and b.device == "PYTHON:1" and b.uop.src[0] is a.uop
  z = Tensor.zeros(2).to("PYTHON:1")  # constants have no device: nothing to copy
  assert z.device == "PYTHON:1" and z.uop.op is not Ops.COPY
  assert z.realize().uop.device == "PYTHON:1"
  with pytest.raises(RuntimeError, match="same device"): a + b
  assert a.contiguous().uop.op is Ops.CONTIGUOUS and a.detach().uop.op is Ops.DETACH
  check((a + 1).contiguous() + a.detach(), [4.0, -4.0])
  check(a.int(), [1, -2], dtypes.int32)
  check(a.half(), np.array([1.5, -2.5], np.float16), dtypes.float16)
  check(a.bool(), [True, True], dtypes.bool)
  check(a.long().float().double(), [1.0, -2.0], dtypes.float64)
  assert a.cast(dtypes.float32) is a

def test_bitcast():
  a = Tensor([1.0, -2.0])
  check(a.bitcast(dtypes.int32), np.array([1.0, -2.0], np.float32).view(np.int32), dtypes.int32)
  check(Tensor([1.0], dtype=dtypes.float16).bitcast("uint16"), np.array([1.0], np.float16).view(np.uint16))
  check(Tensor([-1], dtype=dtypes.int8).bitcast(dtypes.uint8), [255])
  with pytest.raises(ValueError, match="itemsizes must match"): a.bitcast(dtypes.float16)


# ---- creation ----

def test_full_zeros_ones_empty():
  check(Tensor.zeros(2, 3), np.zeros((2, 3), np.float32), dtypes.float32)
  check(Tensor.ones((2, 3), dtype=dtypes.int8), np.ones((2, 3), np.int8), dtypes.int8)
  check(Tensor.zeros(()), np.float32(0))
  check(Tensor.zeros(0, 4), np.zeros((0, 4), np.float32))
  check(Tensor.full((2,), 7), [7, 7], dtypes.int32)
  check(Tensor.full((2,), True), [True, True], dtypes.bool)
  check(Tensor.full(3, 0.5, dtype="float16"), np.full(3, 0.5, np.float16), dtypes.float16)
  assert Tensor.full((2,), 1).uop.op is Ops.EXPAND  # lazy: a broadcast CONST, no buffer
  e = Tensor.empty(2, 2, dtype=dtypes.int32)
  assert e.uop.op is Ops.BUFFER and e.shape == (2, 2) and e.dtype == dtypes.int32
  t = Tensor([[1, 2]], dtype=dtypes.int16)
  check(t.zeros_like(), [[0, 0]], dtypes.int16)
  check(t.ones_like(dtype=dtypes.float32), [[1.0, 1.0]], dtypes.float32)
  check(t.full_like(9), [[9, 9]], dtypes.int16)
  assert t.zeros_like(device="PYTHON:2").device == "PYTHON:2"
  with pytest.raises(RuntimeError, match="negative"): Tensor.zeros(-1)
  with pytest.raises(TypeError, match="ints"): Tensor.zeros(2.0)
  with pytest.raises(TypeError, match="ints"): Tensor.zeros((2, 1.0))
  for make in (Tensor.zeros, Tensor.kaiming_uniform):  # a sequence and more sizes: PyTorch's TypeError, tinygrad's ValueError
    with pytest.raises(TypeError, match="one sequence"): make((2, 3), 3)
    with pytest.raises(ValueError, match="one sequence"): make((2, 3), 3)
  with pytest.raises(AttributeError, match="unknown dtype name"): Tensor([1.0, 2.0]).sum(dtype="")

@pytest.mark.parametrize("args", [(10,), (0,), (1,), (2, 9), (2, 9, 3), (9, 2, -2), (-3, 7, 4), (5, 5), (5, 2), (0, 1, 0.1), (1.5, -2.25, -0.25),
                                  (0, 10, 0.3), (-1, 1, 0.2), (100,), (3.0,), (2, 1000, 7)])
def test_arange(args):
  want = np.arange(*args)
  want = want.astype(np.float32 if want.dtype.kind == "f" else np.int32)
  t = Tensor.arange(*args)
  assert Ops.REDUCE not in {u.op for u in t.uop.toposort()}  # counting needs no reduction
  check(t, want, rtol=1e-6)

def test_arange_dtypes_and_errors():
  check(Tensor.arange(4, dtype=dtypes.float16), np.arange(4, dtype=np.float16), dtypes.float16)
  check(Tensor.arange(1, 4, dtype="int64"), np.arange(1, 4), dtypes.int64)
  check(Tensor.arange(0, 3, 0.5, dtype=dtypes.float64), np.arange(0, 3, 0.5), dtypes.float64)
  with pytest.raises(ValueError, match="step"): Tensor.arange(0, 3, 0)

@pytest.mark.parametrize("args", [(0, 1, 5), (-2.5, 7, 11), (3, -3, 4), (1, 1, 3), (0, 1, 1), (0, 1, 0), (0, 100, 100), (2, 3, 2)])
def test_linspace(args):
  t = Tensor.linspace(*args)
  want = np.linspace(*args, dtype=np.float32)
  check(t, want, dtypes.float32, rtol=1e-6, atol=1e-5)
  if args[2] > 1: assert t.numpy()[0] == np.float32(args[0]) and t.numpy()[-1] == np.float32(args[1])  # both ends exact

def test_linspace_int_and_errors():
  check(Tensor.linspace(0, 10, 5, dtype=dtypes.int32), np.linspace(0, 10, 5).astype(np.int32), dtypes.int32)
  with pytest.raises(RuntimeError, match="non-negative"): Tensor.linspace(0, 1, -1)

@pytest.mark.parametrize("n, m", [(3, None), (2, 4), (4, 2), (1, 1), (0, 3), (3, 0)])
def test_eye(n, m):
  check(Tensor.eye(n, m), np.eye(n, m, dtype=np.float32), dtypes.float32)
  check(Tensor.eye(n, m, dtype=dtypes.bool), np.eye(n, m, dtype=np.bool_))


# ---- elementwise: promotion ----

@pytest.mark.parametrize("a, b, want", [
  (dtypes.int32, dtypes.float32, dtypes.float32), (dtypes.int8, dtypes.uint8, dtypes.int16), (dtypes.bool, dtypes.int8, dtypes.int8),
  (dtypes.float16, dtypes.int64, dtypes.float16), (dtypes.float16, dtypes.float32, dtypes.float32), (dtypes.uint8, dtypes.uint8, dtypes.uint8),
  (dtypes.int64, dtypes.int32, dtypes.int64), (dtypes.bool, dtypes.bool, dtypes.bool),
])
def test_tensor_tensor_promotion(a, b, want):
  x, y = Tensor([1, 0], dtype=a), Tensor([1, 1], dtype=b)
  assert (x + y).dtype == want and (y * x).dtype == want and (x < y).dtype == dtypes.bool

@pytest.mark.parametrize("dt, scalar, want", [
  (dtypes.int8, 1, dtypes.int8), (dtypes.int32, 2.5, dtypes.float32), (dtypes.float16, 2.0, dtypes.float16), (dtypes.bool, 1, dtypes.int32),
  (dtypes.bool, 1.0, dtypes.float32), (dtypes.bool, True, dtypes.bool), (dtypes.uint8, True, dtypes.uint8), (dtypes.float64, 1, dtypes.float64),
  (dtypes.int16, np.float32(1), dtypes.float32),
])
def test_scalars_are_weak(dt, scalar, want):
  x = Tensor([1, 0], dtype=dt)
  assert (x + scalar).dtype == want and (scalar + x).dtype == want and (x * scalar).dtype == want

def test_broadcasting():
  a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([10, 20, 30], np.float32)
  check(Tensor(a) + Tensor(b), a + b)
  check(Tensor(b.reshape(3, 1)) * Tensor(a.reshape(2, 1, 3)), b.reshape(3, 1) * a.reshape(2, 1, 3))
  check(Tensor(a) + Tensor(5.0), a + 5)
  check(Tensor.zeros(0, 3) + Tensor(b), np.zeros((0, 3), np.float32))
  out = Tensor(a) + 1
  srcs = out.uop.src
  assert srcs[0].shape == srcs[1].shape == (2, 3) and srcs[1].op is Ops.EXPAND  # shapes made explicit
  with pytest.raises(RuntimeError, match=r"\(2, 3\).*\(2,\).*broadcast"): Tensor(a) + Tensor([1.0, 2.0])
  with pytest.raises(TypeError, match="unsupported operand"): Tensor(a) + "x"
  with pytest.raises(TypeError): Tensor(a) + [1, 2, 3]

# ---- elementwise: arithmetic ----

A = np.array([[-3.5, -1.0, -0.5, 0.0], [0.5, 2.0, 2.5, 7.25]], np.float32)
B = np.array([[2.0, -3.0, 0.25, 1.5], [-2.0, 4.0, 3.0, -0.5]], np.float32)
I = np.array([[-7, -1, 0, 3], [5, 8, 11, -12]], np.int32)
J = np.array([[2, 3, -4, 5], [-3, 8, 4, 7]], np.int32)

@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%"])
def test_binary_float(op):
  f = eval(f"lambda a, b: a {op} b")
  check(f(Tensor(A), Tensor(B)), f(A, B), dtypes.float32, rtol=1e-6, atol=1e-6)
  check(f(Tensor(A), 1.5), f(A, np.float32(1.5)), dtypes.float32)
  check(f(2.0, Tensor(B)), f(np.float32(2.0), B), dtypes.float32)

@pytest.mark.parametrize("op", ["+", "-", "*", "//", "%"])
@pytest.mark.parametrize("npdt", [np.int32, np.int8, np.uint8, np.int64])
def test_binary_int(op, npdt):
  f = eval(f"lambda a, b: a {op} b")
  a, b = I.astype(npdt), J.astype(npdt)
  with np.errstate(all="ignore"):
    check(f(Tensor(a), Tensor(b)), f(a, b), dtypes.from_np(npdt))
    check(f(Tensor(a), 3), f(a, npdt(3)), dtypes.from_np(npdt))
    check(f(7, Tensor(b)), f(npdt(7), b), dtypes.from_np(npdt))

def test_true_division_gives_float():
  check(Tensor(I) / Tensor(J), I / J, dtypes.float32)
  check(Tensor(I) / 2, I / 2, dtypes.float32)
  check(1 / Tensor([2, 4]), [0.5, 0.25], dtypes.float32)
  check(Tensor(A.astype(np.float16)) / 2, A.astype(np.float16) / 2, dtypes.float16)

def test_div_rounding_modes():
  check(Tensor(I).div(Tensor(J), rounding_mode="trunc"), np.trunc(I / J).astype(np.int32), dtypes.int32)
  check(Tensor(I).div(Tensor(J), rounding_mode="floor"), I // J, dtypes.int32)
  check(Tensor(A).div(Tensor(B), rounding_mode="trunc"), np.trunc(A / B))
  with pytest.raises(RuntimeError, match="rounding_mode"): Tensor(A).div(1, rounding_mode="up")

def test_int_division_by_zero_is_zero():
  check(Tensor([5, -5]) // 0, [0, 0])  # PyTorch raises; tinyspec's IDIV/MOD define x//0 = x%0 = 0
  check(Tensor([5, -5]) % 0, [0, 0])

def test_unsigned_wraps():
  u = Tensor(np.array([0, 1, 250], np.uint8))
  check(u - 3, np.array([0, 1, 250], np.uint8) - np.uint8(3), dtypes.uint8)
  check(-u, np.array([0, 255, 6], np.uint8), dtypes.uint8)
  check(u + 10, np.array([10, 11, 4], np.uint8))

def test_bool_arithmetic():
  a, b = Tensor([True, True, False]), Tensor([True, False, False])
  check(a + b, [True, True, False], dtypes.bool)
  check(a * b, [True, False, False], dtypes.bool)
  check(a + 1, [2, 2, 1], dtypes.int32)
  with pytest.raises(RuntimeError, match="bool"): a - b
  with pytest.raises(RuntimeError, match="logical_not"): a.neg()
  with pytest.raises(RuntimeError, match="bool"): a // b

@pytest.mark.parametrize("base, exp", [
  (A, 2), (A, 3), (A, 0), (A, -2), (A, 1), (A, 2.0), (A, 0.5), (A, -1.5), (np.abs(A), B), (A, np.array([2.0, 3.0, -1.0, 0.0], np.float32)),
  (np.array([-2.0, -2.0, -8.0, 0.0, 0.0, 1.0, np.nan], np.float32), np.array([3.0, 2.0, 1 / 3, 0.0, 2.0, np.nan, 0.0], np.float32)),
])
def test_pow_float(base, exp):
  with np.errstate(all="ignore"):
    want = np.power(base, np.float32(exp) if isinstance(exp, (int, float)) else exp)
  e = exp if isinstance(exp, (int, float)) else Tensor(exp)
  check(Tensor(base) ** e, want, dtypes.float32, rtol=2e-6, atol=1e-6)

def test_pow_int_and_reverse():
  check(Tensor(I) ** 2, I ** 2, dtypes.int32)
  check(Tensor(I) ** 3, I ** 3, dtypes.int32)
  check(Tensor([3, -3, 7]) ** Tensor([10, 3, 0]), [59049, -27, 1], dtypes.int32)
  check(Tensor([2, -2, 1, -1]) ** Tensor([-1, -1, -2, -3]), [0, 0, 1, -1], dtypes.int32)  # as PyTorch's integer pow
  check(Tensor([1, 2]) ** 0.5, np.sqrt([1, 2]).astype(np.float32), dtypes.float32)
  check(2 ** Tensor([0.0, 3.0, -1.0, 0.5]), [1, 8, 0.5, math.sqrt(2)], dtypes.float32)
  check(2 ** Tensor([0, 3, 10]), [1, 8, 1024], dtypes.int32)
  check((-2.0) ** Tensor([2.0, 3.0, 0.5]), [4.0, -8.0, np.nan])
  check(Tensor([1.5, -2.0], dtype=dtypes.float16) ** 2, np.array([2.25, 4.0], np.float16), dtypes.float16)
  check(Tensor([1.5, -2.0], dtype=dtypes.float16) ** Tensor([2.5, 3.0], dtype=dtypes.float16), np.array([1.5 ** 2.5, -8.0], np.float16), rtol=1e-3)
  check(Tensor([True, False]) ** 2, [1, 0], dtypes.int32)
  with pytest.raises(RuntimeError, match="negative integer powers"): Tensor([2]) ** -1

@pytest.mark.parametrize("npdt", [np.float32, np.float16, np.int32, np.int8])
def test_neg_abs_sign(npdt):
  a = np.array([-3, -1, 0, 2, 5], npdt)
  check(-Tensor(a), -a, dtypes.from_np(npdt))
  check(Tensor(a).abs(), np.abs(a), dtypes.from_np(npdt))
  check(Tensor(a).sign(), np.sign(a), dtypes.from_np(npdt))

def test_sign_abs_special_values():
  x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)
  check(Tensor(x).sign(), [0.0, 1.0, -1.0, 0.0, 0.0])  # nan's is 0, PyTorch's (numpy's is nan)
  check(Tensor(x).abs(), np.abs(x))
  check(Tensor(np.array([0, 3], np.uint8)).sign(), [0, 1], dtypes.uint8)
  check(Tensor([True, False]).abs(), [True, False], dtypes.bool)

# ---- comparisons and logic ----

@pytest.mark.parametrize("op, name", [("<", "lt"), ("<=", "le"), (">", "gt"), (">=", "ge"), ("==", "eq"), ("!=", "ne")])
def test_comparisons(op, name):
  f = eval(f"lambda a, b: a {op} b")
  x = np.array([1.0, np.nan, 2.0, -np.inf, 3.0], np.float32)
  y = np.array([1.0, 1.0, np.nan, -np.inf, 2.5], np.float32)
  check(f(Tensor(x), Tensor(y)), f(x, y), dtypes.bool)
  check(getattr(Tensor(x), name)(Tensor(y)), f(x, y), dtypes.bool)
  check(f(Tensor(I), Tensor(J)), f(I, J), dtypes.bool)
  check(f(Tensor(I), 2.5), f(I, 2.5), dtypes.bool)  # int vs float scalar compares in float
  check(f(3, Tensor(I)), f(3, I), dtypes.bool)
  check(f(Tensor([True, False]), Tensor([False, False])), f(np.array([True, False]), np.array([False, False])))

def test_eq_with_other_types_and_hash():
  t = Tensor([1, 2])
  assert (t == None) is False and (t != "a") is True  # noqa: E711
  assert len({t, t}) == 1

def test_logical_and_bitwise():
  a, b = np.array([True, False, True]), np.array([True, True, False])
  check(Tensor(a).logical_not(), ~a, dtypes.bool)
  check(Tensor(I).logical_not(), I == 0, dtypes.bool)
  check(Tensor(A).logical_and(Tensor(B)), np.logical_and(A, B))
  check(Tensor(a).logical_or(Tensor(b)), a | b)
  check(Tensor(a).logical_xor(Tensor(b)), a ^ b)
  check(Tensor(a) & Tensor(b), a & b, dtypes.bool)
  check(Tensor(a) | False, a, dtypes.bool)
  check(~Tensor(a), ~a, dtypes.bool)
  for npdt in (np.int32, np.uint8, np.int16):
    x, y = I.astype(npdt), J.astype(npdt)
    check(Tensor(x) & Tensor(y), x & y)
    check(Tensor(x) | 6, x | npdt(6))
    check(12 ^ Tensor(y), npdt(12) ^ y)
    check(~Tensor(x), ~x, dtypes.from_np(npdt))
  s = np.array([1, 2, 3], np.int32)
  check(Tensor(I) << Tensor(np.abs(J) % 4), I << (np.abs(J) % 4))
  check(Tensor(I) >> 1, I >> 1)  # arithmetic for signed
  check(Tensor(np.array([200, 7], np.uint8)) >> 2, np.array([50, 1], np.uint8), dtypes.uint8)
  check(1 << Tensor(s), 1 << s)
  check(Tensor(s).bitwise_and(2), s & 2)

def test_or_true_folds_to_a_constant():
  check(Tensor([True, False]) | True, [True, True], dtypes.bool)
  check(Tensor([True, False]).logical_or(True), [True, True], dtypes.bool)

@pytest.mark.parametrize("f", [lambda x: x & 1, lambda x: x | x, lambda x: x ^ 1, lambda x: x << 1, lambda x: 1 >> x])
def test_bitwise_of_floats_is_an_error(f):  # the exception types PyTorch raises: RuntimeError, but TypeError for ~
  with pytest.raises(RuntimeError, match="float32"): f(Tensor([1.0]))
  with pytest.raises(TypeError, match="float32"): ~Tensor([1.0])

def test_shift_of_bool_is_an_error():
  with pytest.raises(RuntimeError, match="integer tensors"): Tensor([True]) << Tensor([True])
  check(Tensor([True]) << 1, [2], dtypes.int32)  # the int scalar promotes bool to int first, as in PyTorch

def test_maximum_minimum_where_clamp():
  check(Tensor(A).maximum(Tensor(B)), np.maximum(A, B))
  check(Tensor(A).minimum(Tensor(B)), np.minimum(A, B))
  check(Tensor(I).minimum(Tensor(J)), np.minimum(I, J), dtypes.int32)
  check(Tensor(I).maximum(2.5), np.maximum(I, 2.5).astype(np.float32), dtypes.float32)
  lo = np.array([-2 ** 31, 5], np.int32)
  check(Tensor(lo).minimum(Tensor(np.array([7, -2 ** 31], np.int32))), [-2 ** 31, -2 ** 31])  # no overflow at the int minimum
  check(Tensor([True, False]).maximum(Tensor([False, False])), [True, False], dtypes.bool)
  check(Tensor([True, False]).minimum(True), [True, False], dtypes.bool)
  nan = np.array([np.nan, 1.0], np.float32)
  check(Tensor(nan).maximum(0.0), np.maximum(nan, 0))
  check(Tensor(nan).minimum(0.0), np.minimum(nan, 0))
  c = A > 0
  check(Tensor(c).where(Tensor(A), Tensor(B)), np.where(c, A, B))
  check(Tensor.where(Tensor(c), Tensor(A), 0), np.where(c, A, 0))
  check(Tensor(c).where(1, Tensor(I)), np.where(c, 1, I), dtypes.int32)
  check(Tensor(c).where(1.5, Tensor(I)), np.where(c, 1.5, I).astype(np.float32), dtypes.float32)
  check(Tensor(c).where(1, 0), np.where(c, 1, 0), dtypes.int32)
  check(Tensor(c).where(1.0, False), np.where(c, 1.0, 0.0).astype(np.float32), dtypes.float32)
  check(Tensor(I).where(1, 0), np.where(I != 0, 1, 0))  # a non-bool condition means != 0
  check(Tensor([True, False]).reshape(2, 1).where(Tensor([1.0, 2.0, 3.0]), -1.0), np.where([[True], [False]], [1.0, 2.0, 3.0], -1.0))
  check(Tensor(A).clamp(-1, 2), np.clip(A, -1, 2))
  check(Tensor(A).clip(min=0), np.clip(A, 0, None))
  check(Tensor(A).clamp(max=Tensor(B)), np.minimum(A, B))
  check(Tensor(I).clamp(-2, 4), np.clip(I, -2, 4), dtypes.int32)
  check(Tensor(I).clamp(0.5), np.clip(I, 0.5, None).astype(np.float32), dtypes.float32)
  check(Tensor(nan).clamp(0, 0.5), [np.nan, 0.5])
  check(Tensor(A).clamp(2, 1), np.full(A.shape, 1, np.float32))  # min > max gives max, as PyTorch
  with pytest.raises(RuntimeError, match="at least one"): Tensor(A).clamp()
  with pytest.raises(TypeError, match="where"): Tensor(c).where("a", 1)

# ---- unary math ----

X = np.array([-4.0, -1.5, -0.25, 0.0, 0.3, 1.0, 2.5, 9.0], np.float32)
P = np.array([1e-3, 0.25, 1.0, 2.0, 10.0, 1e4], np.float32)

@pytest.mark.parametrize("name, data, ref", [
  ("exp", X, np.exp), ("exp2", X, np.exp2), ("log", P, np.log), ("log2", P, np.log2), ("sin", X, np.sin), ("cos", X, np.cos),
  ("tan", X, np.tan), ("sqrt", P, np.sqrt), ("rsqrt", P, lambda x: 1 / np.sqrt(x)), ("reciprocal", P, lambda x: 1 / x),
  ("trunc", X, np.trunc), ("floor", X, np.floor), ("ceil", X, np.ceil), ("square", X, np.square),
  ("sigmoid", X, lambda x: 1 / (1 + np.exp(-x))), ("tanh", X, np.tanh), ("relu", X, lambda x: np.maximum(x, 0)),
  ("silu", X, lambda x: x / (1 + np.exp(-x))), ("elu", X, lambda x: np.where(x > 0, x, np.exp(x) - 1)),
  ("leaky_relu", X, lambda x: np.where(x < 0, 0.01 * x, x)), ("softplus", X, lambda x: np.log1p(np.exp(x))),
  ("hardtanh", X, lambda x: np.clip(x, -1, 1)),
  ("gelu", X, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),  # the default: tanh
])
def test_unary_float(name, data, ref):
  check(getattr(Tensor(data), name)(), ref(data.astype(np.float64)).astype(np.float32), dtypes.float32, rtol=2e-6, atol=2e-6)
  h = data.astype(np.float16)
  with np.errstate(all="ignore"): want = ref(h.astype(np.float64)).astype(np.float16)
  check(getattr(Tensor(h), name)(), want, dtypes.float16, rtol=2e-3, atol=2e-3)

@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "sigmoid", "tanh", "reciprocal", "exp2", "log2", "gelu", "rsqrt"])
def test_unary_of_int_gives_float(name):
  t = getattr(Tensor([1, 2, 4]), name)()
  assert t.dtype == dtypes.float32
  ref = getattr(Tensor([1.0, 2.0, 4.0]), name)()
  check(t, ref.numpy())

def test_unary_special_values():
  s = np.array([np.inf, -np.inf, np.nan, 0.0, -1.0], np.float32)
  with np.errstate(all="ignore"):
    check(Tensor(s).exp(), np.exp(s))
    check(Tensor(s).log(), np.log(s))
    check(Tensor(s).sqrt(), np.sqrt(s))
  check(Tensor(s).floor(), np.floor(s))
  check(Tensor(s).ceil(), np.ceil(s))
  check(Tensor([-100.0, 100.0]).sigmoid(), [0.0, 1.0])
  check(Tensor([-100.0, 100.0, 30.0]).softplus(), [0.0, 100.0, 30.0])
  check(Tensor(s).isnan(), np.isnan(s), dtypes.bool)
  check(Tensor(s).isinf(), np.isinf(s), dtypes.bool)
  check(Tensor(s).isfinite(), np.isfinite(s), dtypes.bool)
  check(Tensor(I).isnan(), np.zeros(I.shape, bool))
  check(Tensor(I).isinf(), np.zeros(I.shape, bool))

def test_round_half_to_even():
  x = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4, 2.6, -2.6, 1e8 + 1, 2.0 ** 23 + 1, np.inf, -np.inf, np.nan, 0.49999997], np.float32)
  check(Tensor(x).round(), np.round(x))
  with np.errstate(over="ignore"): h = x.astype(np.float16)
  check(Tensor(h).round(), np.round(h))
  check(Tensor(I).round(), I, dtypes.int32)
  check(Tensor(I).floor(), I, dtypes.int32)
  check(Tensor(I).ceil(), I)
  check(Tensor(I).trunc(), I)

def test_lerp_and_activation_arguments():
  check(Tensor(A).lerp(Tensor(B), 0.25), A + (B - A) * 0.25)
  check(Tensor(X).leaky_relu(0.2), np.where(X < 0, 0.2 * X, X))
  check(Tensor(X).elu(2.0), np.where(X > 0, X, 2.0 * (np.exp(X) - 1)))
  check(Tensor(X).softplus(beta=2.0), np.log1p(np.exp(2 * X)) / 2, rtol=1e-5)
  check(Tensor(X).hardtanh(-0.5, 2.0), np.clip(X, -0.5, 2.0))
  check(Tensor(I).relu(), np.maximum(I, 0), dtypes.int32)


# ---- basic reductions ----

R = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5 - 3

@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, (0, 2), (-1, -3), (0, 1, 2), ()])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_reductions(name, axis, keepdim):
  ref = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[name]
  check(getattr(Tensor(R), name)(axis, keepdim), ref(R, axis=axis, keepdims=keepdim), dtypes.float32, rtol=1e-5)

@pytest.mark.parametrize("npdt", [np.int32, np.int8, np.uint8, np.bool_, np.int64, np.uint64])
def test_int_reduction_dtypes(npdt):
  x = (np.arange(12).reshape(3, 4) % 5).astype(npdt)
  acc = np.uint64 if npdt is np.uint64 else np.int64  # PyTorch: sum and prod of bool and ints are int64
  check(Tensor(x).sum(), x.sum(dtype=acc), dtypes.from_np(acc))
  check(Tensor(x).sum(axis=1), x.sum(axis=1, dtype=acc), dtypes.from_np(acc))
  check(Tensor(x).prod(axis=0), x.prod(axis=0, dtype=acc), dtypes.from_np(acc))
  check(Tensor(x).max(axis=1), x.max(axis=1), dtypes.from_np(npdt))
  check(Tensor(x).min(axis=0), x.min(axis=0), dtypes.from_np(npdt))
  check(Tensor(x).min(), x.min(), dtypes.from_np(npdt))

def test_reduction_details():
  h = np.full((3000,), 0.1, np.float16)
  check(Tensor(h).sum(), np.float16(h.astype(np.float32).sum()), dtypes.float16, rtol=1e-3)  # accumulates in float32
  check(Tensor(R).sum(dtype=dtypes.float64), R.sum(dtype=np.float64), dtypes.float64)
  check(Tensor([1, 2]).sum(dtype="int32"), np.int32(3), dtypes.int32)
  ints = np.array([-2 ** 31, 2 ** 31 - 1, 0], np.int32)
  check(Tensor(ints).min(), ints.min())
  check(Tensor(ints).max(), ints.max())
  check(Tensor(np.array([3, 250], np.uint8)).min(), np.uint8(3))
  check(Tensor([True, False]).max(), True, dtypes.bool)
  check(Tensor([True, False]).min(), False, dtypes.bool)
  check(Tensor(np.array([np.nan, 1.0], np.float32)).max(), np.nan)
  check(Tensor(2.5).sum(), np.float32(2.5))
  check(Tensor(2.5).max(0), np.float32(2.5))
  check(Tensor(2.5).sum(-1, keepdim=True), np.float32(2.5))
  check(Tensor.zeros(0, 3).sum(0), np.zeros(3, np.float32))
  check(Tensor.zeros(0, 3).prod(1), np.ones(0, np.float32))
  check(Tensor.zeros(2, 0).sum(), np.float32(0))
  check(Tensor.zeros(2, 0).max(0), np.zeros((0,), np.float32))
  out = Tensor(R).sum(1)
  assert out.uop.op is Ops.RESHAPE and out.uop.src[0].op is Ops.REDUCE and out.uop.src[0].shape == (2, 1, 4)

def test_reduction_errors():
  with pytest.raises(IndexError, match=r"dimension 3 is out of range for a tensor with 3 dimensions"): Tensor(R).sum(3)
  with pytest.raises(IndexError, match="-4"): Tensor(R).max(-4)
  with pytest.raises(IndexError, match="0 dimensions"): Tensor(1.0).sum(1)
  with pytest.raises(RuntimeError, match="more than once"): Tensor(R).sum((0, -3))
  with pytest.raises(RuntimeError, match="empty axis"): Tensor.zeros(0, 3).max(0)
  with pytest.raises(RuntimeError, match="empty axis"): Tensor.zeros(0, 3).min()
  with pytest.raises(TypeError, match="int"): Tensor(R).sum(1.0)

# ---- no silent wrong values (issue 13): big ints, impossible shapes, out-of-range indices ----

def test_ints_past_int32_are_int64_as_pytorch():
  t = Tensor.arange(2**31 + 5)
  assert t.dtype == dtypes.int64 and t.shape == (2**31 + 5,) and t[-3:].numpy().tolist() == [2**31 + 2, 2**31 + 3, 2**31 + 4]
  assert Tensor.arange(-3, 2**31 + 1, 2**30).numpy().tolist() == [-3, 2**30 - 3, 2**31 - 3] and Tensor.arange(10).dtype == dtypes.int32
  assert Tensor.arange(0, -(2**31) - 2, -(2**31) - 1).dtype == dtypes.int64  # 0, -(2**31 + 1)
  f = Tensor.full((2,), 2**40)
  assert f.dtype == dtypes.int64 and f.numpy().tolist() == [2**40] * 2 and Tensor(2**40).item() == 2**40
  assert Tensor.full((1,), 2**63).dtype == dtypes.uint64
  with pytest.raises(OverflowError, match="the integer 36893488147419103232 fits no tinyspec dtype"): Tensor.full((1,), 2**65)

def test_impossible_shapes_name_the_shape_and_bytes():
  with pytest.raises(ValueError, match=r"shape \(4611686018427387904, 4\) has 18446744073709551616 elements: past 2\*\*63"): Tensor.empty(2**62, 4)
  with pytest.raises(ValueError, match=r"shape \(4611686018427387904, 4\) has"): Tensor.ones(2**62, 4)
  with pytest.raises(ValueError, match=r"full: shape \(1152921504606846976, 4\) needs 18446744073709551616 bytes"): Tensor.ones(2**60, 4)
  with pytest.raises(ValueError, match=r"shape \(9223372036854775808, 3\) has 27670116110564327424 elements"): Tensor.ones(1, 3).expand(2**63, 3)

def test_out_of_range_index_values_give_zero_as_documented():
  x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
  idx = Tensor(np.array([[0, 5], [-1, 2]]))
  assert x.gather(1, idx).numpy().tolist() == [[0, 0], [0, 5]]  # 5 and -1 match no position
  assert x.scatter(1, idx, 9.0).numpy().tolist() == [[9, 1, 2], [3, 4, 9]]  # and write nothing
  assert x[:, Tensor(np.array([2, 7]))].numpy().tolist() == [[2, 0], [5, 0]]

def test_sizes_casts_and_likes_as_pytorch():
  t = Tensor.ones(3, 4, dtype="float16")
  assert t.nbytes == 24 and t.is_floating_point() and not Tensor([1, 2]).is_floating_point()
  assert t.bfloat16().dtype == dtypes.bfloat16 and t.short().dtype == dtypes.int16
  e = t.empty_like()
  assert (e.shape, e.dtype) == ((3, 4), dtypes.float16) and t.empty_like(dtype="int32").dtype == dtypes.int32
  a = Tensor([1.0, 2.0, math.nan])
  assert a.allclose(Tensor([1.0, 2.0 + 1e-6, math.nan]), equal_nan=True) is True
  assert a.allclose(Tensor([1.0, 2.0 + 1e-6, math.nan])) is False and Tensor([1.0]).allclose(1.1) is False

def test_in_place_moves_replace_and_sequential():
  """tinygrad's to_, shard_ and replace change the Tensor object itself (every name for it sees the change); sequential
  applies layers in turn."""
  t = Tensor([1.0, 2.0, 3.0])
  same = t
  assert t.to_("PYTHON") is same and same.device == "PYTHON" and same.numpy().tolist() == [1.0, 2.0, 3.0]
  assert t.replace(Tensor([4, 5, 6])) is same and same.dtype == dtypes.int32 and same.numpy().tolist() == [4, 5, 6]
  with pytest.raises(ValueError, match="replace: shape"): t.replace(Tensor([1.0]))
  s = Tensor.arange(8).reshape(4, 2).float()
  s.shard_(("PYTHON:0", "PYTHON:1"))
  assert s.device == ("PYTHON:0", "PYTHON:1") and s.numpy().tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
  assert Tensor([1.0, -2.0]).sequential([lambda x: x * 2, Tensor.relu]).numpy().tolist() == [2.0, 0.0]
