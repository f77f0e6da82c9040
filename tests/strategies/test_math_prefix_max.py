"""normal_loop_max_to_prefix_max: a max reduction as a running-max scan."""

import pytest

from leirc.lang.checker import check_kernel
from leirc.strategies import NotApplicable, Step, apply_step
from leirc.strategies.rewrite import find_stmt
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, stdlib_text
from test_math_helpers import apply, assert_verified, kernel, not_applicable, small, stdlib

NAME = "normal_loop_max_to_prefix_max"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_softmax_matches_the_reference_shape(update_golden):
    new = apply(stdlib("softmax"), NAME, stmt="N0.S0")
    check_golden(NAME, "softmax", new, update_golden)
    check_golden(NAME, "max_reduce_dim1", apply(stdlib("max_reduce_dim1"), NAME, stmt="N0.S0"), update_golden)


def test_bitwise():
    k = small("softmax", {"256": "4", "24576": "64"})
    assert_verified(k, apply(k, NAME, stmt="N0.S0"), bitwise=True)


def test_scan_carries_the_loop():
    new = apply(stdlib("softmax"), NAME, stmt="N0.S0")
    res = check_kernel(new)
    st, _ = find_stmt(new, "N0.S0")
    info = res.info(st)
    assert info.kind == "scan" and info.carried == frozenset({"j"})
    with pytest.raises(NotApplicable, match="carries a dependence"):
        apply_step(new, Step.make("loop_parallelization", loop="N0.j"))
    apply_step(new, Step.make("loop_parallelization", loop="N0.i"))  # rows stay independent


def test_negatives():
    not_applicable(stdlib("softmax"), NAME, "not a max reduction", stmt="N1.S0")
    not_applicable(stdlib("softmax"), NAME, "no statement", stmt="N5.S0")
    two = kernel(r"""\kernel k(A: f32[4, 8, 2]) -> (M: f32[4]) {
      L^{4}_{i=0} L^{8}_{j=0} L^{2}_{c=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,j,c}); ];
    }""")
    not_applicable(two, NAME, "exactly one", stmt="N0.S0")
    start = kernel(r"""\kernel k(A: f32[4, 8]) -> (M: f32[4]) {
      L^{4}_{i=0} L^{7}_{j=1} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,j}); ];
    }""")
    not_applicable(start, NAME, "starts at 1", stmt="N0.S0")
    bound = kernel(r"""\kernel k(A: f32[4, 8]) -> (M: f32[4]) {
      L^{4}_{i=0} B^{8}_{tx=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,tx}); ];
    }""")
    not_applicable(bound, NAME, "serial loop", stmt="N0.S0")
    shared = kernel(r"""\kernel k(A: f32[4, 8]) -> (M: f32[4], S: f32[4]) {
      L^{4}_{i=0} L^{8}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,j}); S^{f32,g}_{i} = S^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
    }""")
    not_applicable(shared, NAME, "only statement", stmt="N0.S0")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("softmax"), [Step.make(NAME, stmt="N0.S0")])
