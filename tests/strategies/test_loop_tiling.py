"""loop_tiling: split two directly nested loops and hoist both outer parts."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, numerics, stdlib, step

NAME = "loop_tiling"
EW = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}"
DIAGONAL = (r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=if_then_else(1<=i&j<7,"
            r"C^{f32,g}_{i-1,j+1},0.0)+A^{f32,g}_{i,j};];}")


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul(update_golden):
    k = apply(stdlib("matmul_standard"), NAME, loop="N0.i", factor_outer=32, factor_inner=64)
    check_golden(NAME, "matmul_standard_32x64", k, update_golden)


def test_golden_layernorm_reduction(update_golden):
    k = apply(stdlib("layernorm"), NAME, loop="N0.h", factor_outer=8, factor_inner=16)
    check_golden(NAME, "layernorm_sum_hw", k, update_golden)


def test_numerics_per_application():
    # a spatial and a reduction loop: every accumulation keeps its order
    assert numerics(stdlib("gemv"), NAME, loop="N0.m", factor_outer=2, factor_inner=2) == "bitwise"
    # two reduction loops of a sum: reassociated
    assert numerics(stdlib("layernorm"), NAME, loop="N0.h", factor_outer=8, factor_inner=16) == "exact-in-reals"
    # two reduction loops of a max: exact
    assert numerics(stdlib("maxpool2d"), NAME, loop="N1.p", factor_outer=2, factor_inner=2) == "bitwise"


def test_rejects_loop_without_single_inner_loop():
    not_applicable(kernel_of(EW), NAME, "does not directly contain exactly one loop", loop="N0.j", factor_outer=2, factor_inner=2)


def test_rejects_nonzero_start():
    src = r"\kernel k(A:f32[4,9])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=1}[C^{f32,g}_{i,j-1}=A^{f32,g}_{i,j}*2;];}"
    not_applicable(kernel_of(src), NAME, "'j' starts at 1", loop="N0.i", factor_outer=2, factor_inner=2)


def test_rejects_factor_out_of_range():
    not_applicable(kernel_of(EW), NAME, "factor_outer 4 must be between 2 and 3", loop="N0.i", factor_outer=4, factor_inner=2)
    not_applicable(kernel_of(EW), NAME, "factor_inner 1 must be between 2 and 7", loop="N0.i", factor_outer=2, factor_inner=1)


def test_rejects_non_dividing_factor():
    not_applicable(kernel_of(EW), NAME, "factor_inner 3 does not divide extent 8", loop="N0.i", factor_outer=2, factor_inner=3)


def test_rejects_reversed_dependence():
    not_applicable(kernel_of(DIAGONAL), NAME, "differ in loops i, j", loop="N0.i", factor_outer=2, factor_inner=2)


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("gemv"), [step(NAME, loop="N0.m", factor_outer=16, factor_inner=1024),
                                                step(NAME, loop="N0.mo", factor_outer=2, factor_inner=4)])


@pytest.mark.parametrize("kernel,loop,fo,fi", [
    ("gemv", "N0.m", 16, 1024),
    ("mean_reduce_dim1", "N0.n", 4, 7),
    ("layernorm", "N4.h", 8, 16),
    ("layernorm", "N0.h", 8, 16),  # reduction loops: exact in reals
])
def test_numeric_equivalence(kernel, loop, fo, fi):
    before = stdlib(kernel)
    after = apply(before, NAME, loop=loop, factor_outer=fo, factor_inner=fi)
    assert_equivalent(before, after, numerics(before, NAME, loop=loop, factor_outer=fo, factor_inner=fi))


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
