"""tinyspec: a readable tensor compiler. One IR, the UOp, carries a program from Tensor code to device code; devices are plugins."""
from tinyspec.device import Device
from tinyspec.dtype import DType, dtypes
from tinyspec.function import function
from tinyspec.jit import TinyJit
from tinyspec.tensor import Tensor
from tinyspec.uop import Ops, UOp

__version__ = "0.1.0"
__all__ = ["DType", "Device", "dtypes", "function", "Ops", "Tensor", "TinyJit", "UOp", "__version__"]
