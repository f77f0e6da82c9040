"""loop_reorder: permute the loops of a perfect chain."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, numerics, stdlib, step

NAME = "loop_reorder"
MATMUL = r"\kernel k(A:f32[4,8],B:f32[8,2])->(C:f32[4,2]){L^{4}_{i=0}L^{2}_{j=0}L^{8}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}"
# a recurrence along the anti-diagonal: iteration (i,j) reads (i-1,j+1)
DIAGONAL = (r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=if_then_else(1<=i&j<7,"
            r"C^{f32,g}_{i-1,j+1},0.0)+A^{f32,g}_{i,j};];}")
CUMSUM_2D = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=if_then_else(1<=j,C^{f32,g}_{i,j-1},0.0)+A^{f32,g}_{i,j};];}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul_ikj(update_golden):
    k = apply(stdlib("matmul_standard"), NAME, loop="N0.i", order="i,k,j")
    check_golden(NAME, "matmul_standard_ikj", k, update_golden)


def test_golden_conv2d_reduction_loops(update_golden):
    k = apply(stdlib("conv2d"), NAME, loop="N1.n", order="n,o,i,j,p,q,c")
    check_golden(NAME, "conv2d_pqc", k, update_golden)


def test_numerics_per_application():
    k = stdlib("conv2d")
    # spatial loops only, or reduction loops keeping their relative order: bitwise
    assert numerics(k, NAME, loop="N1.n", order="o,n,i,j,c,p,q") == "bitwise"
    assert numerics(k, NAME, loop="N1.n", order="n,o,c,i,j,p,q") == "bitwise"
    # reduction loops swapped: the sum is reassociated
    assert numerics(k, NAME, loop="N1.n", order="n,o,i,j,p,q,c") == "exact-in-reals"
    # max is associative and commutative exactly
    assert numerics(stdlib("maxpool2d"), NAME, loop="N1.n", order="n,c,i,j,q,p") == "bitwise"


def test_scan_reordered_across_its_loop_is_legal():
    # iterations that depend on each other differ only in j: any order keeps them ordered
    k = apply(kernel_of(CUMSUM_2D), NAME, loop="N0.i", order="j,i")
    assert [l.var for l in (k.body[0], k.body[0].body[0])] == ["j", "i"]


def test_rejects_unknown_loop():
    not_applicable(kernel_of(MATMUL), NAME, r"no loop 'N0\.z'", loop="N0.z", order="i,j")


def test_rejects_order_of_one_loop():
    not_applicable(kernel_of(MATMUL), NAME, "at least two loops", loop="N0.i", order="i")


def test_rejects_order_longer_than_chain():
    not_applicable(kernel_of(MATMUL), NAME, "perfect chain at 'j' has only 2", loop="N0.j", order="k,j,i")


def test_rejects_non_permutation():
    not_applicable(kernel_of(MATMUL), NAME, "not a permutation", loop="N0.i", order="i,i,k")


def test_rejects_current_order():
    not_applicable(kernel_of(MATMUL), NAME, "is the current order", loop="N0.i", order="i,j,k")


def test_rejects_reversed_dependence():
    not_applicable(kernel_of(DIAGONAL), NAME, "differ in loops i, j; the new order would reverse", loop="N0.i", order="j,i")


def test_rejects_reordering_a_non_reduction_accumulation():
    # C is written first, so the second nest is an in-place update, not a pure reduction
    src = (r"\kernel k(A:f32[4,8,8])->(C:f32[4]){L^{4}_{i=0}[C^{f32,g}_{i}=1.0;];"
           r"L^{4}_{i=0}L^{8}_{j=0}L^{8}_{l=0}[C^{f32,g}_{i}=C^{f32,g}_{i}*A^{f32,g}_{i,j,l};];}")
    not_applicable(kernel_of(src), NAME, "differ in loops j, l", loop="N1.i", order="i,l,j")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("matmul_standard"),
                          [step(NAME, loop="N0.i", order="i,k,j"), step(NAME, loop="N0.i", order="k,i,j")])


@pytest.mark.parametrize("kernel,loop,order", [
    ("gemv", "N0.m", "k,m"),
    ("mean_reduce_dim1", "N0.n", "j,n,r"),
    ("layernorm", "N4.n", "w,h,c,n"),
    ("layernorm", "N0.n", "n,h,c,w"),  # reduction loops swapped: exact in reals
])
def test_numeric_equivalence(kernel, loop, order):
    before = stdlib(kernel)
    after = apply(before, NAME, loop=loop, order=order)
    assert_equivalent(before, after, numerics(before, NAME, loop=loop, order=order))


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
