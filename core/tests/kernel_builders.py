"""The hand-kernel builders the tests share: the ones shipped with the conformance suite."""
from tinyspec.conformance.builders import ZERO, after, barrier, end, f32, i32, load, local, lower, param, special, store

__all__ = ["ZERO", "after", "barrier", "end", "f32", "i32", "load", "local", "lower", "param", "special", "store"]
