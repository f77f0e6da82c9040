"""operator_fission: docstring, golden, every precondition, trace, numerics."""

import pytest

from leirc.strategies import NotApplicable, apply_step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_graph_helpers import assert_equivalent, run, stdlib, step

NAME = "operator_fission"


def fission(k, nest, at):
    return apply_step(k, step(NAME, nest=nest, at=at))


def fused(kernel, *nests):
    return run(stdlib(kernel), *[step("operator_fusion", nest=n, local="false") for n in nests])


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul_gelu_softmax(update_golden):
    # bias add, GELU and row max fused into one nest, then the row max split off again
    k = fused("matmul_gelu_softmax", 1, 1)
    assert len(k.body) == 4
    check_golden(NAME, "matmul_gelu_softmax_three_fused_at2", fission(k, 1, 2), update_golden)


def test_inverse_of_fusion():
    k = fused("sdpa", 1)
    assert fission(k, 1, 1) == stdlib("sdpa")


def test_anti_dependence_on_a_later_element_is_kept():
    # C[i] reads D[i+1] before iteration i+1 overwrites it; after fission all reads still come first
    k = kernel_of("\\kernel k(A:f32[9])->(C:f32[8]){L^{9}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i+1};D^{f32,g}_{i+1}=0.0;];}")
    assert_equivalent(k, fission(k, 1, 1), bitwise=True)


def test_online_recurrences_split_when_legal():
    # F reads D at the same and the previous iteration: both are complete before F's nest runs
    k = kernel_of("\\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{a=0}[D^{f32,g}_{i,a}=max(if_then_else(a-1<0,-inf,"
                  "D^{f32,g}_{i,a-1}),A^{f32,g}_{i,a});C^{f32,g}_{i,a}=exp(A^{f32,g}_{i,a}-D^{f32,g}_{i,a})+"
                  "if_then_else(a-1<0,0.0,D^{f32,g}_{i,a-1});];}")
    new = fission(k, 0, 1)
    assert len(new.body) == 2
    assert_equivalent(k, new, bitwise=True)


# -- negatives ---------------------------------------------------------------------

RUNMAX = ("\\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[M^{f32,g}_{i}=max(M^{f32,g}_{i},A^{f32,g}_{i,j});"
          "C^{f32,g}_{i,j}=A^{f32,g}_{i,j}-M^{f32,g}_{i};];}")


def test_rejects_unknown_nest():
    with pytest.raises(NotApplicable, match="no nest 3"):
        fission(kernel_of(RUNMAX), 3, 1)


def test_rejects_single_statement():
    with pytest.raises(NotApplicable, match="single statement"):
        fission(stdlib("relu"), 0, 1)


def test_rejects_bad_split_point():
    with pytest.raises(NotApplicable, match="at=2 must be between 1 and 1"):
        fission(kernel_of(RUNMAX), 0, 2)


def test_rejects_imperfect_nest():
    k = kernel_of("\\kernel k(A:f32[8,4])->(C:f32[8,4]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i,0};L^{4}_{j=0}"
                  "[C^{f32,g}_{i,j}=D^{f32,g}_{i};];];}")
    with pytest.raises(NotApplicable, match="not a perfect loop nest"):
        fission(k, 0, 1)


def test_rejects_running_value_read_in_the_same_iteration():
    # C reads the running maximum; after fission it would read the final maximum
    with pytest.raises(NotApplicable, match="'M' is accessed by both parts"):
        fission(kernel_of(RUNMAX), 0, 1)


def test_rejects_reading_what_an_earlier_iteration_overwrote():
    # C[i] reads D[i-1] after iteration i-1 zeroed it; after fission it would read A[i-1]
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};];"
                  "L^{8}_{i=0}[C^{f32,g}_{i}=if_then_else(1<=i,D^{f32,g}_{i-1},0.0);D^{f32,g}_{i}=0.0;];}")
    with pytest.raises(NotApplicable, match="'D' is accessed by both parts"):
        fission(k, 1, 1)


# -- traces and numerics ------------------------------------------------------------


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("matmul_gelu_softmax"), [step("operator_fusion", nest=1, local="false"),
                                                               step("operator_fusion", nest=1, local="false"),
                                                               step(NAME, nest=1, at=1)])


@pytest.mark.parametrize("kernel,prep", [
    ("layernorm", step("expression_splitting", stmt="N4.S0", expr=3)),
    ("gemv", step("expression_splitting", stmt="N0.S0", expr=1)),
    ("mse_loss", step("expression_splitting", stmt="N0.S0", expr=2)),
])
def test_numerics(kernel, prep):
    nest = int(prep.kwargs["stmt"][1])
    split = run(stdlib(kernel), prep)
    fusedk = run(split, step("operator_fusion", nest=nest, local="false"))
    after = fission(fusedk, nest, 1)
    assert after == split  # exact inverse of the fusion
    assert_equivalent(stdlib(kernel), after)
