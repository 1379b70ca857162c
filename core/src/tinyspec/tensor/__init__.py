"""The Tensor front end: lazy arrays whose values are UOp tensor graphs, realized by the engine on demand."""
from tinyspec.tensor.tensor import Tensor

__all__ = ["Tensor"]
