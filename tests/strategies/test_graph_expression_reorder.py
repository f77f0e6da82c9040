"""expression_reorder: docstring, golden, every precondition, trace, numerics.

Stdlib kernels are dependence chains, so independent neighbours appear after a splitting
step, which places the hoisted nest right before its user (possibly after a nest it does
not depend on)."""

import pytest

from leirc.strategies import NotApplicable, apply_step, enumerate_sites
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_graph_helpers import assert_equivalent, run, stdlib, step

NAME = "expression_reorder"


def reorder(k, nest):
    return apply_step(k, step(NAME, nest=nest))


def split_first(kernel, stmt, expr):
    return run(stdlib(kernel), step("expression_splitting", stmt=stmt, expr=expr))


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_layernorm(update_golden):
    # X - Mean hoisted out of the output nest lands after the Rstd nest, which it does not depend on
    k = split_first("layernorm", "N4.S0", 3)
    assert [s.fixed["nest"] for s in enumerate_sites(k, [NAME])] == [3]
    check_golden(NAME, "layernorm_split_then_swap3", reorder(k, 3), update_golden)


def test_swapping_twice_is_the_identity():
    k = split_first("softmax", "N2.S0", 2)
    assert reorder(reorder(k, 1), 1) == k


# -- negatives ---------------------------------------------------------------------

def test_rejects_unknown_nest():
    with pytest.raises(NotApplicable, match="no nest 5"):
        reorder(stdlib("softmax"), 5)


def test_rejects_last_nest():
    with pytest.raises(NotApplicable, match="last nest"):
        reorder(stdlib("softmax"), 2)


def test_rejects_flow_dependence():
    with pytest.raises(NotApplicable, match="nest 1 reads what nest 0 writes: Rmax"):
        reorder(stdlib("softmax"), 0)


def test_rejects_anti_dependence():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i};];L^{8}_{i=0}[D^{f32,g}_{i}=0.0;];}")
    with pytest.raises(NotApplicable, match="nest 1 reads what nest 2 writes: D"):
        reorder(k, 1)


def test_rejects_output_dependence():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];}")
    with pytest.raises(NotApplicable, match="both nests write: C"):
        reorder(k, 0)


def test_rejects_align_annotation():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){D=align(0,4,5);L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i};];}")
    with pytest.raises(NotApplicable, match="align annotations are not moved"):
        reorder(k, 0)


# -- traces and numerics ------------------------------------------------------------


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("layernorm"), [step("expression_splitting", stmt="N4.S0", expr=3), step(NAME, nest=3)])


@pytest.mark.parametrize("kernel,stmt,expr,nest", [
    ("layernorm", "N4.S0", 3, 3), ("log_softmax", "N2.S0", 1, 1), ("sdpa", "N4.S0", 2, 3),
])
def test_numerics(kernel, stmt, expr, nest):
    k = split_first(kernel, stmt, expr)
    new = reorder(k, nest)
    assert new != k
    assert_equivalent(stdlib(kernel), new)
