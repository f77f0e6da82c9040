"""common_subexpression_elimination: docstring, golden, every precondition, trace, numerics."""

import pytest

from leirc.lang.printer import print_kernel
from leirc.strategies import NotApplicable, apply_step, enumerate_sites
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_graph_helpers import assert_equivalent, stdlib, step

NAME = "common_subexpression_elimination"


def cse(k, stmt, expr):
    return apply_step(k, step(NAME, stmt=stmt, expr=expr))


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_softmax_exp(update_golden):
    check_golden(NAME, "softmax_N1S0_expr1", cse(stdlib("softmax"), "N1.S0", 1), update_golden)


def test_golden_layernorm_difference(update_golden):
    # X - Mean appears in the variance and in the normalization
    check_golden(NAME, "layernorm_N2S0_expr2", cse(stdlib("layernorm"), "N2.S0", 2), update_golden)


def test_sites_name_every_occurrence():
    descr = [s.description for s in enumerate_sites(stdlib("softmax"), [NAME])]
    assert descr == ["compute 'exp(X^{f32,g}_{i,j}-Rmax^{f32,g}_{i})' once for N1.S0, N2.S0",
                     "compute 'X^{f32,g}_{i,j}-Rmax^{f32,g}_{i}' once for N1.S0, N2.S0"]


def test_matches_up_to_loop_renaming_and_within_one_statement():
    k = kernel_of("\\kernel k(A:f32[4,4])->(C:f32[4,4],D:f32[4,4]){L^{4}_{i=0}L^{4}_{j=0}[C^{f32,g}_{i,j}=exp(A^{f32,g}_{i,j})"
                  "*exp(A^{f32,g}_{j,i});];L^{4}_{a=0}L^{4}_{b=0}[D^{f32,g}_{a,b}=exp(A^{f32,g}_{a,b});];}")
    new = cse(k, "N0.S0", 1)
    txt = print_kernel(new)
    assert "C^{f32,g}_{i,j}=E^{f32,g}_{i,j}*E^{f32,g}_{j,i}" in txt and "D^{f32,g}_{a,b}=E^{f32,g}_{a,b}" in txt
    assert_equivalent(k, new, bitwise=True)


def test_stops_where_an_input_changes():
    # exp(S) in nest 2 sees the updated S: it is not the same value and is not replaced
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[S^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{8}_{i=0}[D^{f32,g}_{i}=exp(S^{f32,g}_{i})+exp(S^{f32,g}_{i})*2.0;];L^{8}_{i=0}[S^{f32,g}_{i}=0.0;];"
                  "L^{8}_{i=0}[C^{f32,g}_{i}=exp(S^{f32,g}_{i})+D^{f32,g}_{i};];}")
    new = cse(k, "N1.S0", 1)
    assert print_kernel(new).count("exp(") == 2  # the hoisted one and the one after the overwrite
    assert_equivalent(k, new, bitwise=True)


# -- negatives ---------------------------------------------------------------------

def test_rejects_unknown_statement():
    with pytest.raises(NotApplicable, match="no statement 'N3.S0'"):
        cse(stdlib("softmax"), "N3.S0", 1)


def test_rejects_single_occurrence():
    with pytest.raises(NotApplicable, match="occurs only once"):
        cse(stdlib("gelu"), "N0.S0", 3)


def test_rejects_incompatible_loops():
    # same text, but j runs over 8 in one nest and 4 in the other
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8],D:f32[4]){L^{8}_{j=0}[C^{f32,g}_{j}=exp(A^{f32,g}_{j})+1.0;];"
                  "L^{4}_{j=0}[D^{f32,g}_{j}=exp(A^{f32,g}_{j})+1.0;];}")
    with pytest.raises(NotApplicable, match="occurs only once"):
        cse(k, "N0.S0", 1)


def test_rejects_whole_right_hand_side():
    with pytest.raises(NotApplicable, match="whole right-hand side"):
        cse(stdlib("softmax"), "N2.S0", 0)


def test_rejects_guarded_first_occurrence():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=if_then_else(i<4,exp(A^{f32,g}_{i}),0.0);];"
                  "L^{8}_{i=0}[D^{f32,g}_{i}=exp(A^{f32,g}_{i});];}")
    with pytest.raises(NotApplicable, match="branch of an if_then_else"):
        cse(k, "N0.S0", 1)


def test_rejects_weak_literal():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*sqrt(2.0)+sqrt(2.0);];}")
    with pytest.raises(NotApplicable, match="has type float_lit"):
        cse(k, "N0.S0", 3)


def test_rejects_value_written_in_the_first_nest():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};"
                  "C^{f32,g}_{i}=exp(D^{f32,g}_{i})*exp(D^{f32,g}_{i});];}")
    with pytest.raises(NotApplicable, match="reads D, which nest 0 writes"):
        cse(k, "N0.S1", 1)


# -- traces and numerics ------------------------------------------------------------


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("softmax"), [step(NAME, stmt="N1.S0", expr=2), step(NAME, stmt="N2.S0", expr=1)])


@pytest.mark.parametrize("kernel,stmt,expr", [("sdpa", "N3.S0", 1), ("log_softmax", "N1.S0", 2),
                                              ("layernorm", "N2.S0", 2)])
def test_numerics(kernel, stmt, expr):
    k = stdlib(kernel)
    assert_equivalent(k, cse(k, stmt, expr))
