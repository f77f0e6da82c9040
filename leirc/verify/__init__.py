"""Verifier: a candidate kernel against the reference interpreter (see :mod:`.core`)."""

from .bound import ErrorBound, Unsupported, lazy_bounds, try_bound
from .compare import LAMBDA, TOLERANCES, OutputComparison, bitwise_equal, compare_output, tolerances
from .core import DEFAULT_DISTS, DEFAULT_PROBES, MIN_SAMPLES, PROVEN_NUMERICS, VERIFY_PROTOCOL, evidence, uses_literal, RunResult, VerifyReport, interp_runner, verify

__all__ = ["verify", "VerifyReport", "RunResult", "interp_runner", "compare_output", "OutputComparison",
           "bitwise_equal", "tolerances", "TOLERANCES", "LAMBDA", "ErrorBound", "Unsupported", "DEFAULT_DISTS",
           "DEFAULT_PROBES", "MIN_SAMPLES", "try_bound", "lazy_bounds", "VERIFY_PROTOCOL", "PROVEN_NUMERICS", "evidence", "uses_literal"]
