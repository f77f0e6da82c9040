"""tensor_split_to_decouple_operators: docstring, golden, both forms, every precondition,
per-application numerics class, trace, numerics."""

import pytest

from leirc.strategies import NotApplicable, apply_step, get
from leirc.strategies.base import Context
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_graph_helpers import assert_equivalent, stdlib, step

NAME = "tensor_split_to_decouple_operators"


def tsplit(k, loop, at):
    return apply_step(k, step(NAME, loop=loop, at=at))


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_spatial_split_of_a_reduction(update_golden):
    # the second piece accumulates into a fresh tensor, copied into Acc afterwards
    check_golden(NAME, "gemm_bias_relu_N0j_256", tsplit(stdlib("gemm_bias_relu"), "N0.j", 256), update_golden)


def test_golden_reduction_split(update_golden):
    check_golden(NAME, "gemm_bias_relu_N0k_256", tsplit(stdlib("gemm_bias_relu"), "N0.k", 256), update_golden)


def test_golden_scan_split(update_golden):
    check_golden(NAME, "cumsum_N0j_1000", tsplit(stdlib("cumsum"), "N0.j", 1000), update_golden)


def test_golden_update_reduction_split(update_golden):
    # an in-place update (no identity initialization) combines as X = X op (P1 op P2)
    k = kernel_of("\\kernel k(A:f32[8,4])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i,0};];"
                  "L^{8}_{i=0}L^{4}_{k=0}[C^{f32,g}_{i}=max(C^{f32,g}_{i},A^{f32,g}_{i,k});];}")
    new = tsplit(k, "N1.k", 1)
    check_golden(NAME, "update_max_N1k_1", new, update_golden)
    assert_equivalent(k, new, bitwise=True)


@pytest.mark.parametrize("loop,expected", [("N0.i", "bitwise"), ("N0.j", "bitwise"), ("N0.k", "exact-in-reals")])
def test_numerics_class_per_application(loop, expected):
    k = stdlib("gemm_bias_relu")
    assert get(NAME).numerics_for(Context(k), {"loop": loop, "at": 32}) == expected


# -- negatives ---------------------------------------------------------------------

def test_rejects_unknown_loop():
    with pytest.raises(NotApplicable, match=r"no loop 'N0.q' \(loops: N0.i, N0.j\)"):
        tsplit(stdlib("relu"), "N0.q", 2)


def test_rejects_bad_split_point():
    with pytest.raises(NotApplicable, match="at=256 must be between 1 and 255"):
        tsplit(stdlib("relu"), "N0.i", 256)


def test_rejects_imperfect_nest():
    k = kernel_of("\\kernel k(A:f32[8,4])->(C:f32[8,4]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i,0};L^{4}_{j=0}"
                  "[C^{f32,g}_{i,j}=D^{f32,g}_{i};];];}")
    with pytest.raises(NotApplicable, match="not a perfect loop nest"):
        tsplit(k, "N0.j", 2)


def test_rejects_several_statements():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i};C^{f32,g}_{i}=D^{f32,g}_{i};];}")
    with pytest.raises(NotApplicable, match="has 2 statements"):
        tsplit(k, "N0.i", 4)


def test_rejects_dependence_carried_by_an_enclosing_loop():
    k = kernel_of("\\kernel k(A:f32[4,8])->(C:f32[8]){L^{4}_{k=0}L^{8}_{i=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{k,i};];}")
    with pytest.raises(NotApplicable, match="loop 'k' encloses 'i' and carries a dependence"):
        tsplit(k, "N0.i", 4)


def test_rejects_reduction_loop_of_a_scan():
    k = kernel_of("\\kernel k(A:f32[8,4])->(C:f32[8]){L^{8}_{i=0}L^{4}_{k=0}[C^{f32,g}_{i}="
                  "if_then_else(1<=i,C^{f32,g}_{i-1},0.0)+A^{f32,g}_{i,k};];}")
    with pytest.raises(NotApplicable, match="not a reduction loop of a reduction or update"):
        tsplit(k, "N0.k", 2)


def test_rejects_chained_reduction():
    k = kernel_of("\\kernel k(A:f32[8,4],B:f32[8,4])->(C:f32[8]){L^{8}_{i=0}L^{4}_{k=0}[C^{f32,g}_{i}="
                  "C^{f32,g}_{i}+A^{f32,g}_{i,k}-B^{f32,g}_{i,k};];}")
    with pytest.raises(NotApplicable, match="not of the form X = X op e"):
        tsplit(k, "N0.k", 2)


def test_rejects_non_injective_target():
    k = kernel_of("\\kernel k(A:f32[8,4])->(C:f32[4]){L^{8}_{i=0}L^{4}_{k=0}[C^{f32,g}_{i//2}="
                  "C^{f32,g}_{i//2}+A^{f32,g}_{i,k};];}")
    with pytest.raises(NotApplicable, match="does not determine the element uniquely"):
        tsplit(k, "N0.k", 2)


# -- traces and numerics ------------------------------------------------------------


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("mse_loss"), [step(NAME, loop="N0.j", at=512), step(NAME, loop="N0.i", at=1024)])


@pytest.mark.parametrize("kernel,loop,at,bitwise", [
    ("mse_loss", "N0.j", 1536, False), ("mean_reduce_dim1", "N0.r", 256, False), ("sum_reduce_dim1", "N0.j", 100, True),
    ("cumsum", "N0.j", 1000, True),
])
def test_numerics(kernel, loop, at, bitwise):
    k = stdlib(kernel)
    new = tsplit(k, loop, at)
    # bitwise is asserted only where no reduction is re-associated or re-vectorized by the interpreter
    assert_equivalent(k, new, bitwise=bitwise and kernel == "cumsum")
