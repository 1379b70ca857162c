"""The IR: the Ops table, UOp, its derived properties, the verifier, the rewrite engine and the symbolic simplifier."""
from tinyspec.uop.ops import OPS, AxisType, GroupOp, OpInfo, Ops
from tinyspec.uop.properties import SpecViolation
from tinyspec.uop.rewrite import PatternMatcher, UPat, graph_rewrite, graph_substitute
from tinyspec.uop.spec import Violation, check, verify, verify_between_stages
from tinyspec.uop.uop import UOp, exec_alu

__all__ = ["OPS", "AxisType", "GroupOp", "OpInfo", "Ops", "SpecViolation", "PatternMatcher", "UPat", "graph_rewrite", "graph_substitute",
           "UOp", "exec_alu", "Violation", "check", "verify", "verify_between_stages"]
