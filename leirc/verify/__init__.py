"""Verifier: a candidate kernel against the reference interpreter (see :mod:`.core`)."""

from .compare import TOLERANCES, OutputComparison, bitwise_equal, compare_output, tolerances
from .core import RunResult, VerifyReport, interp_runner, verify

__all__ = ["verify", "VerifyReport", "RunResult", "interp_runner", "compare_output", "OutputComparison",
           "bitwise_equal", "tolerances", "TOLERANCES"]
