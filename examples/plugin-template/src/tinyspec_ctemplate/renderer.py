"""The renderer: a LINEAR program (see docs/pipeline.md in the tinyspec repository) becomes one C99 function.

    void E_4(float* data0, float* data1) {            <- one pointer per buffer PARAM, in slot order
      for (int64_t ridx2 = 0; ridx2 < 4; ridx2++) {   <- RANGE ... END is a for loop
        float v4 = data1[ridx2];                      <- LOAD(INDEX(PARAM 1, RANGE))
        float v5 = (float)(v4 * v4);                  <- MUL
        data0[ridx2] = v5;                            <- STORE
      }
    }

Core's `CStyleRenderer` does the work for every C-family language (OpenCL, CUDA, Metal ...): this file only says how C99
differs, in the hooks that class documents. Start here when your device compiles some C dialect: change the type names,
the qualifiers, the math function names, and whatever else your compiler spells differently.

This module imports no compiler and touches nothing on the machine: kernels can be rendered anywhere.
"""
from __future__ import annotations

from tinyspec.dtype import DType, dtypes
from tinyspec.renderer.cstyle import CStyleRenderer
from tinyspec.uop import Ops

# C's name for each dtype; index (the dtype of loop counters and addresses) is 64-bit. bfloat16 has no C type: unsupported.
CTYPES: dict[DType, str] = {
  dtypes.bool: "_Bool", dtypes.int8: "int8_t", dtypes.uint8: "uint8_t", dtypes.int16: "int16_t", dtypes.uint16: "uint16_t",
  dtypes.int32: "int32_t", dtypes.uint32: "uint32_t", dtypes.int64: "int64_t", dtypes.uint64: "uint64_t", dtypes.index: "int64_t",
  dtypes.float16: "_Float16", dtypes.float32: "float", dtypes.float64: "double",
}

class CRenderer(CStyleRenderer):
  """Renders kernels as C99 for the host's C compiler. A plain sequential target: no workgroups, no shared memory.

  `native` lists the decomposed ops C's math library does well; every other decomposed op (SUB, DIV, POW ...) reaches
  `render` already rewritten into primitives by the core. `float16=False` (a compiler without _Float16) drops float16 from
  the dtypes this device claims, which the conformance suite reads to skip those tests."""
  device = "CC"
  native = frozenset({Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN})
  type_map = CTYPES
  prelude = "#include <math.h>\n#include <stdint.h>\n"
  math_suffix = {dtypes.float32: "f"}  # sqrtf for float (and half, computed in float), sqrt for double
  wrap_signed = False  # the compiler runs with -fwrapv (runtime.py): signed overflow wraps already
  supported_dtypes = frozenset(CTYPES) - {dtypes.index}

  def __init__(self, float16: bool = True):
    if not float16: self.supported_dtypes = type(self).supported_dtypes - {dtypes.float16}
