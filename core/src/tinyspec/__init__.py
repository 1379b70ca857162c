"""tinyspec: a readable tensor compiler. One IR, the UOp, carries a program from Tensor code to device code; devices are plugins."""
from tinyspec.dtype import DType, dtypes
from tinyspec.uop import Ops, UOp

__version__ = "0.1.0"
__all__ = ["DType", "dtypes", "Ops", "UOp", "__version__"]
