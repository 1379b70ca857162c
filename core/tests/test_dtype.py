"""dtypes: sizes, ranges, numpy mapping, vector and pointer types, interning, and the promotion lattice."""
import copy
import dataclasses
import itertools
import math
import pickle

import numpy as np
import pytest
from tinyspec.dtype import (
  AddrSpace,
  DType,
  PtrDType,
  bf16_from_bits,
  bf16_round,
  bf16_to_bits,
  dtype_range,
  dtypes,
  finite_max,
  least_upper_dtype,
  to_dtype,
)

# name: (itemsize, min, max, numpy dtype or None)
TABLE = {
  "bool": (1, False, True, np.bool_),
  "int8": (1, -128, 127, np.int8),
  "uint8": (1, 0, 255, np.uint8),
  "int16": (2, -32768, 32767, np.int16),
  "uint16": (2, 0, 65535, np.uint16),
  "int32": (4, -2**31, 2**31 - 1, np.int32),
  "uint32": (4, 0, 2**32 - 1, np.uint32),
  "int64": (8, -2**63, 2**63 - 1, np.int64),
  "uint64": (8, 0, 2**64 - 1, np.uint64),
  "float16": (2, -math.inf, math.inf, np.float16),
  "bfloat16": (2, -math.inf, math.inf, None),
  "float32": (4, -math.inf, math.inf, np.float32),
  "float64": (8, -math.inf, math.inf, np.float64),
  "index": (8, -2**63, 2**63 - 1, np.int64),
}
SCALARS = [getattr(dtypes, n) for n in TABLE if n != "index"]  # the dtypes that take part in promotion

@pytest.mark.parametrize("name", TABLE)
def test_itemsize_range_numpy(name):
  dt = getattr(dtypes, name)
  size, lo, hi, npdt = TABLE[name]
  assert (dt.itemsize, dt.nbytes, dt.count, dt.name) == (size, size, 1, name)
  assert (dt.min, dt.max) == (lo, hi) == dtype_range(dt)
  assert type(dt.min) is type(lo) and type(dt.max) is type(hi)
  assert dt.np == (None if npdt is None else np.dtype(npdt))
  if npdt is not None and np.issubdtype(npdt, np.integer): assert (np.iinfo(npdt).min, np.iinfo(npdt).max) == (lo, hi)
  if npdt is not None: assert np.dtype(npdt).itemsize == size
  if npdt is not None and name != "index": assert dtypes.from_np(npdt) is dt and dtypes.from_np(np.dtype(npdt).name) is dt
  assert dtypes.from_name(name) is dt and to_dtype(name) is dt and to_dtype(dt) is dt

def test_void_has_no_range():
  assert (dtypes.void.itemsize, dtypes.void.np) == (0, None)
  with pytest.raises(ValueError, match="void has no value range"): dtype_range(dtypes.void)

def test_from_np_index_maps_to_int64():
  assert dtypes.from_np(np.int64) is dtypes.int64  # index is never what numpy data means
  with pytest.raises(TypeError, match="complex64"): dtypes.from_np(np.complex64)

def test_finite_max():
  assert finite_max(dtypes.float16) == float(np.finfo(np.float16).max) == 65504.0
  assert finite_max(dtypes.float32) == float(np.finfo(np.float32).max)
  assert finite_max(dtypes.float64) == float(np.finfo(np.float64).max)
  assert finite_max(dtypes.bfloat16) == (2 - 2**-7) * 2.0**127

def test_kinds():
  assert [dt.name for dt in SCALARS if dtypes.is_float(dt)] == ["float16", "bfloat16", "float32", "float64"]
  assert [dt.name for dt in SCALARS if dtypes.is_unsigned(dt)] == ["uint8", "uint16", "uint32", "uint64"]
  assert [dt.name for dt in SCALARS if dtypes.is_int(dt)] == ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
  assert dtypes.is_int(dtypes.index) and not dtypes.is_unsigned(dtypes.index)
  assert dtypes.is_bool(dtypes.bool) and not dtypes.is_int(dtypes.bool) and not dtypes.is_float(dtypes.bool)
  assert dtypes.is_float(dtypes.float32.vec(4)) and dtypes.is_unsigned(dtypes.uint8.vec(2)) and dtypes.is_bool(dtypes.bool.vec(3))

def test_aliases_and_names():
  assert (dtypes.half, dtypes.float, dtypes.double) == (dtypes.float16, dtypes.float32, dtypes.float64)
  assert (dtypes.char, dtypes.uchar, dtypes.short, dtypes.ushort) == (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16)
  assert (dtypes.int, dtypes.uint, dtypes.long, dtypes.ulong) == (dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
  assert dtypes.from_name("half") is dtypes.float16 and to_dtype(np.float32) is dtypes.float32
  for bad in ("float128", "vec", "is_float"):
    with pytest.raises(ValueError, match="unknown dtype name"): dtypes.from_name(bad)
  with pytest.raises(AttributeError, match="unknown dtype name ''"): dtypes.from_name("")  # what getattr(dtypes, "") raises

def test_from_py():
  assert dtypes.from_py(True) is dtypes.bool and dtypes.from_py(np.bool_(False)) is dtypes.bool  # bool before int: bool is an int in Python
  assert dtypes.from_py(3) is dtypes.default_int is dtypes.int32 and dtypes.from_py(np.int16(3)) is dtypes.int32
  assert dtypes.from_py(3.0) is dtypes.default_float is dtypes.float32
  with pytest.raises(TypeError, match="no dtype for Python value 'x'"): dtypes.from_py("x")

def test_repr():
  assert repr(dtypes.float32) == "dtypes.float32"
  assert repr(dtypes.int8.vec(4)) == "dtypes.int8.vec(4)"
  assert repr(dtypes.float16.ptr(8, AddrSpace.LOCAL)) == "dtypes.float16.ptr(8, AddrSpace.LOCAL)"

# ---- vec, ptr, interning ----

def test_vec():
  v = dtypes.float32.vec(4)
  assert (v.count, v.itemsize, v.nbytes, v.name) == (4, 4, 16, "float32")
  assert v is dtypes.float32.vec(4) and v is not dtypes.float32 and v is not dtypes.float32.vec(2)
  assert v.scalar() is dtypes.float32 and dtypes.float32.vec(1) is dtypes.float32
  assert (v.min, v.max) == (-math.inf, math.inf) and dtypes.uint8.vec(3).max == 255
  with pytest.raises(ValueError, match="vec of a vector dtype"): v.vec(2)
  with pytest.raises(ValueError, match="vec width must be >= 1, got 0"): dtypes.int8.vec(0)

def test_ptr():
  p = dtypes.float32.ptr(16, AddrSpace.LOCAL)
  assert isinstance(p, PtrDType) and (p.base, p.size, p.addrspace) == (dtypes.float32, 16, AddrSpace.LOCAL)
  assert p is dtypes.float32.ptr(16, AddrSpace.LOCAL)
  assert p is not dtypes.float32.ptr(16) and p is not dtypes.float32.ptr(8, AddrSpace.LOCAL) and p != dtypes.float32
  d = dtypes.int32.ptr()
  assert (d.size, d.addrspace, d.base) == (-1, AddrSpace.GLOBAL, dtypes.int32)
  vp = dtypes.float32.vec(4).ptr()
  assert vp.base is dtypes.float32.vec(4) and vp.count == 4 and vp is not d
  assert p.scalar() is p
  with pytest.raises(ValueError, match="vec of a pointer dtype"): p.vec(2)

OTHERS = [dtypes.index, dtypes.void, dtypes.float32.vec(4), dtypes.int8.ptr(8, AddrSpace.REG), dtypes.half.vec(2).ptr()]
@pytest.mark.parametrize("dt", SCALARS + OTHERS, ids=repr)
def test_pickle_and_copy_keep_identity(dt):
  assert pickle.loads(pickle.dumps(dt)) is dt
  assert copy.copy(dt) is dt and copy.deepcopy(dt) is dt

def test_interning_by_any_spelling():
  # positional, keyword and dataclasses.replace all land on the one interned object
  assert DType(11, 4, "float32", "f") is dtypes.float32
  assert DType(priority=11, itemsize=4, name="float32", fmt="f") is dtypes.float32
  assert DType(11, 4, "float32", "f", 1) is dtypes.float32
  assert dataclasses.replace(dtypes.int8, count=3) is dtypes.int8.vec(3)
  assert dataclasses.replace(dtypes.float32.ptr(16), addrspace=AddrSpace.LOCAL) is dtypes.float32.ptr(16, AddrSpace.LOCAL)
  with pytest.raises(dataclasses.FrozenInstanceError): dtypes.float32.itemsize = 8  # type: ignore[misc]

def test_order():
  assert sorted([dtypes.float64, dtypes.bool, dtypes.uint8, dtypes.int8, dtypes.float16]) == \
    [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.float16, dtypes.float64]
  assert dtypes.float16 < dtypes.bfloat16 < dtypes.float32

# ---- promotion ----

# what the lattice gives for every pair; rows a PyTorch user can check with torch.promote_types agree with it (see test below)
EXPECTED_PROMOTION = {
  ("bool", "int8"): "int8", ("bool", "uint8"): "uint8", ("bool", "float16"): "float16", ("bool", "uint64"): "uint64",
  ("int8", "uint8"): "int16", ("int8", "int16"): "int16", ("int8", "uint16"): "int32", ("int8", "uint32"): "int64", ("int8", "uint64"): "float16",
  ("uint8", "int16"): "int16", ("uint8", "uint16"): "uint16", ("int16", "uint16"): "int32", ("int32", "uint16"): "int32",
  ("int32", "uint32"): "int64", ("int64", "uint32"): "int64", ("uint32", "uint64"): "uint64",
  ("int64", "uint64"): "float16",  # no integer type holds both: the lattice goes up to the smallest float
  ("int32", "float16"): "float16", ("int64", "float32"): "float32", ("uint64", "bfloat16"): "bfloat16", ("int8", "bfloat16"): "bfloat16",
  ("float16", "bfloat16"): "float32", ("float16", "float32"): "float32", ("bfloat16", "float64"): "float64", ("float32", "float64"): "float64",
  ("int64", "int64"): "int64", ("bool", "bool"): "bool",
}

@pytest.mark.parametrize("a,b", EXPECTED_PROMOTION, ids="+".join)
def test_promotion_table(a, b):
  want = getattr(dtypes, EXPECTED_PROMOTION[(a, b)])
  assert least_upper_dtype(getattr(dtypes, a), getattr(dtypes, b)) is want
  assert least_upper_dtype(getattr(dtypes, b), getattr(dtypes, a)) is want

def _ambiguous(*dts):
  # a signed int with uint64 has two minimal common ancestors, float16 and bfloat16; the tie goes to float16
  names = {dt.name for dt in dts}
  return "uint64" in names and "bfloat16" in names and names & {"int8", "int16", "int32", "int64"}

def test_promotion_is_commutative_idempotent_and_an_upper_bound():
  for a, b in itertools.product(SCALARS, repeat=2):
    ab = least_upper_dtype(a, b)
    assert least_upper_dtype(a, a) is a and least_upper_dtype(b, a) is ab
    assert least_upper_dtype(a, ab) is ab and least_upper_dtype(b, ab) is ab

def test_promotion_is_associative_except_at_the_float16_bfloat16_tie():
  L = least_upper_dtype
  for a, b, c in itertools.product(SCALARS, repeat=3):
    if not _ambiguous(a, b, c): assert L(L(a, b), c) is L(a, L(b, c)) is L(a, b, c), (a, b, c)
  # the one family where folding pairwise depends on the order: int64+uint64 picks float16, which then meets bfloat16 in float32
  assert L(L(dtypes.int64, dtypes.uint64), dtypes.bfloat16) is dtypes.float32
  assert L(dtypes.int64, L(dtypes.uint64, dtypes.bfloat16)) is dtypes.bfloat16 is L(dtypes.int64, dtypes.uint64, dtypes.bfloat16)

def test_promotion_holds_every_value_where_it_can():
  # within ints the result holds every value of both sides; a float result is reached only when no int can
  for a, b in itertools.product(SCALARS, repeat=2):
    ab = least_upper_dtype(a, b)
    if dtypes.is_int(ab): assert ab.min <= min(a.min, b.min) and ab.max >= max(a.max, b.max)

def test_promotion_of_vectors_uses_scalars_and_rejects_index():
  assert least_upper_dtype(dtypes.float32.vec(4), dtypes.int8) is dtypes.float32
  with pytest.raises(TypeError, match="dtypes.index takes no part in type promotion"): least_upper_dtype(dtypes.index, dtypes.int32)
  with pytest.raises(TypeError, match="void"): least_upper_dtype(dtypes.void, dtypes.int32)

def test_promotion_matches_torch():
  torch = pytest.importorskip("torch")
  checked = 0
  for a, b in itertools.combinations_with_replacement(SCALARS, 2):
    try: want = torch.promote_types(getattr(torch, a.name), getattr(torch, b.name))
    except RuntimeError: continue  # torch refuses to promote uint16/32/64 with other types
    assert getattr(torch, least_upper_dtype(a, b).name) == want, (a, b)
    checked += 1
  assert checked >= 60

# ---- bfloat16 rounding and bits ----

# (value, its bfloat16): ties go to the even neighbour, subnormals are 2**-133 apart, past the largest bfloat16 is infinity
BF16_CASES = [(1 + 2**-8, 1.0), (1 + 3 * 2**-8, 1 + 2**-6), (1 + 2**-8 + 2**-23, 1 + 2**-7), (-1 - 2**-8, -1.0), (257.0, 256.0),
              (2.0**-133, 2.0**-133), (2.0**-134, 0.0), (-2.0**-134, -0.0), (3 * 2.0**-134, 2.0**-132), (2.0**-126 - 2.0**-134, 2.0**-126),
              ((2 - 2**-7) * 2.0**127, (2 - 2**-7) * 2.0**127), ((2 - 2**-8) * 2.0**127, math.inf), (-3.4e38, -math.inf), (math.inf, math.inf)]

@pytest.mark.parametrize("x, want", BF16_CASES)
def test_bf16_round_by_hand(x, want):
  got = bf16_round(np.float32(x))
  assert got.dtype == np.float32 and got == want and math.copysign(1, got) == math.copysign(1, want)

def test_bf16_round_keeps_nan_and_rounds_a_double_once():
  assert np.isnan(bf16_round(math.nan)) and np.isnan(bf16_round(np.array(0x7F800001, np.uint32).view(np.float32)))  # a nan, however small its payload
  # 1 + 2**-8 + 2**-30 is just above a tie: rounded once it goes up; through float32 it lands on the tie and goes down
  assert bf16_round(1 + 2**-8 + 2**-30) == 1 + 2**-7 and bf16_round(np.float32(1 + 2**-8 + 2**-30)) == 1.0

def test_bf16_round_matches_torch():
  torch = pytest.importorskip("torch")
  g = np.random.default_rng(0)
  x = np.concatenate([g.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),  # every exponent, subnormals too
                      (g.standard_normal(50_000) * 100).astype(np.float32), np.arange(-2000, 2000, dtype=np.float32)])
  want = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
  got = bf16_to_bits(bf16_round(x))
  nan = np.isnan(x)
  np.testing.assert_array_equal(got[~nan], want[~nan])
  assert np.isnan(bf16_from_bits(got[nan])).all()

def test_bf16_bits_round_trip():
  bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
  vals = bf16_from_bits(bits)
  np.testing.assert_array_equal(vals.view(np.uint32), bits.astype(np.uint32) << 16)  # the widening is exact: every bit kept
  np.testing.assert_array_equal(bf16_to_bits(vals), bits)
  np.testing.assert_array_equal(bf16_round(vals[~np.isnan(vals)]), vals[~np.isnan(vals)])  # every bfloat16 is its own rounding
  assert bf16_from_bits(bits.view(np.int16)).dtype == np.float32 and bf16_to_bits(np.float32(-2.0)) == 0xC000
