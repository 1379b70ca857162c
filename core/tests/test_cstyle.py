"""core's C-family renderer (`tinyspec.renderer.cstyle.CStyleRenderer`) through small dialects defined here: the shape of
the source (seed 003's kernels, hoisted declarations, SPECIALs, barriers, constants, helpers), the hooks a dialect
changes, and, where the machine has a C compiler, tinyspec's semantics of the helpers against the reference interpreter."""
import ctypes
import math
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
from tinyspec.conformance.builders import ZERO, after, barrier, f32, i32, load, local, lower, param, seed003_add, special, store
from tinyspec.dtype import dtypes
from tinyspec.engine.expand import expand
from tinyspec.engine.isel import devectorize, isel
from tinyspec.engine.linearize import linearize
from tinyspec.interpreter.run import Interpreter
from tinyspec.renderer.cstyle import CStyleRenderer
from tinyspec.uop import AxisType, Ops, UOp

C99 = {dtypes.bool: "_Bool", dtypes.int8: "int8_t", dtypes.uint8: "uint8_t", dtypes.int16: "int16_t", dtypes.uint16: "uint16_t",
       dtypes.int32: "int32_t", dtypes.uint32: "uint32_t", dtypes.int64: "int64_t", dtypes.uint64: "uint64_t", dtypes.index: "int64_t",
       dtypes.float32: "float", dtypes.float64: "double"}

class C(CStyleRenderer):
  """Plain C99: no workgroups, no vectors."""
  type_map, prelude, math_suffix, vectors = C99, "#include <math.h>\n#include <stdint.h>\n", {dtypes.float32: "f"}, False
  native = frozenset({Ops.SQRT})

class GPU(CStyleRenderer):
  """A made-up GPU dialect, to see each hook's effect."""
  type_map = {**C99, dtypes.index: "long", dtypes.int32: "int"}
  kernel_prefix, buffer_prefix, local_prefix = "kernel ", "global ", "shared "
  has_local = has_shared = True
  barrier = "sync();"
  specials = {"gidx": "group.{xyz}", "lidx": "lane({d})"}
  vector_widths, vector_dtypes = (1, 2, 4), frozenset({dtypes.float32, dtypes.int32})
  def render_bitcast(self, x, src, dst): return f"as<{self.render_dtype(dst)}>({x})"

def test_seed_003_seed003_add():
  src = C().render("E_", lower(seed003_add(1)))
  assert "void E_(int32_t* data0, int32_t* data1, int32_t* data2) {" in src
  a, b = re.search(r"int32_t (v\d+) = data1\[0\];", src), re.search(r"int32_t (v\d+) = data2\[0\];", src)
  add = re.search(rf"int32_t (v\d+) = \(int32_t\)\(\(uint32_t\){a[1]} \+ \(uint32_t\){b[1]}\);", src)  # wraps: added in unsigned
  assert add and f"data0[0] = {add[1]};" in src, src
  src = GPU().render("E_3", lower(seed003_add(3)))
  assert "kernel void E_3(global int* data0, global int* data1, global int* data2) {" in src and "long lidx0 = lane(0); /* 3 */" in src
  assert re.search(r"int v\d+ = data1\[lidx0\];", src) and re.search(r"data0\[lidx0\] = v\d+;", src), src

def test_seed_003_cast():
  l0 = special("lidx0", 2)
  src = GPU().render("E_2", lower(store(param(0, 2, f32), l0, (load(param(1, 2, i32), l0) + load(param(2, 2, i32), l0)).cast(f32))))
  cast = re.search(r"float (v\d+) = \(float\)v\d+;", src)
  assert "kernel void E_2(global float* data0, global int* data1, global int* data2)" in src and cast and f"data0[lidx0] = {cast[1]};" in src

def test_workgroup_kernel_hoists_local_memory_and_renders_barrier():
  g, l = special("gidx1", 3), special("lidx0", 8)
  lb = local(8)
  filled = store(lb, l, load(param(1, 24, f32), g * 8 + l))
  src = GPU().render("rev", lower(store(param(0, 24, f32), g * 8 + l, load(after(lb, barrier(filled)), l * -1 + 7))))
  lines = [x.strip() for x in src[src.index("{") + 1:].splitlines() if x.strip()]
  assert lines[0] == "shared float local0[8];" and "long gidx1 = group.y; /* 3 */" in lines
  at = lines.index("sync();")
  assert lines[at - 1].startswith("local0[lidx0] = ") and re.fullmatch(r"float v\d+ = local0\[v\d+\];", lines[at + 3]), src

def test_what_a_dialect_lacks_is_refused_by_name():
  with pytest.raises(NotImplementedError, match=r"C cannot render SPECIAL 'lidx0' \(it knows none\)"): C().render("k", lower(seed003_add(3)))
  with pytest.raises(NotImplementedError, match="C has no LOCAL memory"):
    C().render("k", lower(store(param(0, 1, f32), ZERO, load(after(local(4), store(local(4), ZERO, UOp.const(1.0, f32))), ZERO))))
  with pytest.raises(NotImplementedError, match=r"C has no type for dtypes.float16"):
    C().render("k", lower(store(param(0, 1, dtypes.float16), ZERO, UOp.const(1.0, dtypes.float16))))
  with pytest.raises(NotImplementedError, match="GPU has no atomic add"): GPU().render_atomic_add("data0[0]", "1", dtypes.int32)

@pytest.mark.parametrize("value,dt,want", [
  (0.1, dtypes.float32, "0.1f"), (0.1, dtypes.float64, "0.1"), (1e-45, dtypes.float32, "1e-45f"), (math.nan, dtypes.float32, "((float)NAN)"),
  (-math.inf, dtypes.float64, "(-(double)INFINITY)"), (-2**63, dtypes.int64, "(-9223372036854775807ll - 1)"),
  (2**64 - 1, dtypes.uint64, "18446744073709551615ull"), (-5, dtypes.int8, "-5"), (True, dtypes.bool, "1")])
def test_constants(value, dt, want): assert C().render_const(value, dt) == want

def test_16_bit_float_constants_are_rounded_once():
  class H(C): type_map = {**C99, dtypes.float16: "half", dtypes.bfloat16: "bf16"}
  assert H().render_const(0.1, dtypes.float16) == "((half)0.099975586f)"  # the exact half nearest 0.1, as a float literal
  assert H().render_const(0.1, dtypes.bfloat16) == "((bf16)0.100097656f)"
  assert H().render_const(-1e-41, dtypes.bfloat16) == "((bf16)-0.0f)" and H().render_const(-3.4e38, dtypes.bfloat16) == "(-(bf16)INFINITY)"
  assert H().render_const(1e39, dtypes.float32) == "((float)INFINITY)" and H().render_const(7e4, dtypes.float16) == "((half)INFINITY)"

def test_helpers_only_where_called():
  src = C().render("k", lower(store(param(0, 4, i32), ZERO, load(param(1, 4, i32), ZERO) // 3)))
  assert "idiv_int32(" in src and "mod_int32" not in src and "f2i_" not in src
  src = C().render("k", lower(store(param(0, 1, i32), ZERO, load(param(1, 1, f32), ZERO).cast(i32))))
  assert "static inline int64_t f2i_float32(float x)" in src and "idiv_" not in src

def test_bitcast_hook_and_shift_by_a_constant():
  x = load(param(1, 1, i32), ZERO)
  src = GPU().render("k", lower(store(param(0, 1, f32), ZERO, UOp(Ops.BITCAST, ((x << 3) + (x << 40),), f32))))
  assert re.search(r"float v\d+ = as<float>\(v\d+\);", src) and re.search(r"int v\d+ = \(int\)\(\(uint32_t\)v\d+ << 3\);", src), src
  assert re.search(r"int v\d+ = 0;", src), src  # shifting by the width or more gives 0, decided when rendering

def test_vectors():
  a = load(param(1, 4, f32), ZERO)
  vec = UOp(Ops.STACK, (a, a, a, a))
  assert GPU().render_dtype(dtypes.float32.vec(4)) == "float4" and GPU().render_vectorize(["a", "b"], dtypes.int32.vec(2)) == "(int2)(a, b)"
  src = GPU().render("k", UOp(Ops.LINEAR, (param(1, 4, f32), ZERO, param(1, 4, f32).index(ZERO), a, vec, vec + vec)))
  assert "float4 v4 = (float4)(v3, v3, v3, v3);" in src and "float4 v5 = (float4)(v4 + v4);" in src, src
  with pytest.raises(NotImplementedError, match="C has no vector type for"): C().render_dtype(dtypes.float32.vec(4))

def test_vector_load_lane_and_store():
  i = UOp.range(2, 0, AxisType.UPCAST)
  # an UPCAST range over consecutive elements: one vector load and one vector store, the copies reading its lanes
  kernel = UOp.sink(UOp(Ops.END, (UOp(Ops.STORE, (param(0, 4, f32).index(i), load(param(1, 4, f32), i) * 2.0)), i)))
  src = GPU().render("k", linearize(isel(devectorize(expand(kernel), GPU()))))
  assert re.search(r"float2 (v\d+) = \*\(\(global float2\*\)\(data1 \+ 0\)\);", src), src
  assert re.search(r"float v\d+ = \(float\)\(v\d+\.x \* 2\.0f\);", src) and ".y * 2.0f" in src, src
  assert re.search(r"\*\(\(global float2\*\)\(data0 \+ 0\)\) = v\d+;", src), src
  # plain C has no vectors: the same kernel is split into single elements by isel
  c_src = C().render("k", linearize(isel(devectorize(expand(kernel), C()))))
  assert "float2" not in c_src and "data1[0]" in c_src and "data1[1]" in c_src and "data0[1] = " in c_src, c_src

def test_hooks_for_memory_access():
  class Tagged(C):
    def render_load(self, buf, idx, space, dt): return f"LD_{space.name}({buf}, {idx})"
    def render_store(self, buf, idx, space, val, dt): return f"ST({buf}, {idx}, {val});"
  src = Tagged().render("k", lower(seed003_add(1)))
  assert "LD_GLOBAL(data1, 0)" in src and re.search(r"ST\(data0, 0, v\d+\);", src), src

# *** semantics: rendered C compiled by the host compiler against the reference interpreter ***

CC = shutil.which(os.environ.get("CC") or "cc")

def run_c(linear: UOp, arrays: list[np.ndarray]) -> list[np.ndarray]:
  with tempfile.TemporaryDirectory() as tmp:
    so = os.path.join(tmp, "k.so")
    subprocess.run([CC, "-std=c99", "-O1", "-shared", "-fPIC", "-x", "c", "-", "-o", so, "-lm"], input=C().render("k", linear), text=True, check=True)
    fn = ctypes.CDLL(so).k
    fn(*(ctypes.c_void_p(a.ctypes.data) for a in arrays))
  return arrays

@pytest.mark.skipif(CC is None, reason="no C compiler ($CC or cc) on this machine")
@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.int64, dtypes.uint32], ids=lambda d: d.name)
def test_integer_semantics_match_the_interpreter(dt):
  """Floor division and modulo (by 0 and -1 too), shifts past the width, wrapping add and mul, over edge values."""
  info = np.iinfo(dt.np)
  v = np.array(sorted(x for x in {info.min, info.min + 1, -7, -1, 0, 1, 3, 7, info.max} if info.min <= x <= info.max), dt.np)
  a, b = np.repeat(v, len(v)), np.tile(v, len(v))
  n = len(a)
  r = UOp.range(n, 0)
  x, y = load(param(0, n, dt), r), load(param(1, n, dt), r)
  outs = [x // y, x % y, x << (y & 7) * 5, x >> (y & 7) * 5, x + y, x * y]
  linear = lower(*(UOp(Ops.END, (store(param(2 + k, n, dt), r, o), r)) for k, o in enumerate(outs)))
  got = run_c(linear, [a.copy(), b.copy(), *(np.zeros(n, dt.np) for _ in outs)])
  want = [a.copy(), b.copy(), *(np.zeros(n, dt.np) for _ in outs)]
  Interpreter(linear)(want)
  for g, w in zip(got[2:], want[2:]): np.testing.assert_array_equal(g, w)

@pytest.mark.skipif(CC is None, reason="no C compiler ($CC or cc) on this machine")
def test_float_to_int_and_nan_max_match_the_interpreter():
  x = np.array([np.nan, np.inf, -np.inf, -2.5, 2.5, 3e9, 1e19, -1e19, 0.0], np.float32)
  r = UOp.range(len(x), 0)
  v = load(param(1, len(x), f32), r)
  linear = lower(UOp(Ops.END, (store(param(0, len(x), dtypes.int64), r, v.cast(dtypes.int64)), r)),  # slot 1 is x
                 UOp(Ops.END, (store(param(2, len(x), f32), r, UOp(Ops.MAX, (v, UOp.const(0.0, f32)))), r)))
  got = run_c(linear, [np.zeros(len(x), np.int64), x.copy(), np.zeros(len(x), np.float32)])
  assert got[0].tolist()[:5] == [0, 0, 0, -2, 2]  # NaN and infinities give 0 (undefined in C)
  np.testing.assert_array_equal(got[2], np.maximum(x, 0))  # NaN wins, as in numpy
