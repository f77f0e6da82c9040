"""vectorized_partial_sums: one private partial result per vector lane (rfactor by the width)."""

import pytest

from leirc.lang import ast as A
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import apply, assert_equivalent, check_all_sites, not_applicable, numerics, stdlib, step

NAME = "vectorized_partial_sums"

ROWSUM = r"\kernel k(A:f32[4,64])->(C:f32[4]){L^{4}_{i=0}L^{64}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}"
ROWMAX = ROWSUM.replace("C^{f32,g}_{i}+A^{f32,g}_{i,j}", "max(C^{f32,g}_{i},A^{f32,g}_{i,j})")


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_gemv(update_golden):
    k = apply(stdlib("gemv"), NAME, stmt="N0.S0", lanes=16)
    k = apply(k, "loop_vectorization", loop="N0.kv")
    check_golden(NAME, "gemv_16", k, update_golden)


def test_lane_loop_is_dependence_free_and_vectorizes():
    k = apply(kernel_of(ROWSUM), NAME, stmt="N0.S0", lanes=8)
    k = apply(k, "loop_vectorization", loop="N0.jv")
    i = k.body[0]
    assert isinstance(i.body[0], A.Alloc) and i.body[0].shape == (8,)
    assert i.body[1].body[0].kind == "V"
    # the combination is a reduction over the lanes into C
    comb = i.body[2]
    assert comb.var == "jv" and comb.extent == 8 and comb.body[0].target.name == "C"


def test_numerics_classes():
    assert numerics(kernel_of(ROWSUM), NAME, stmt="N0.S0", lanes=4) == "exact-in-reals"
    assert numerics(kernel_of(ROWMAX), NAME, stmt="N0.S0", lanes=4) == "bitwise"


def test_numeric_equivalence_sum():
    before = kernel_of(ROWSUM)
    assert_equivalent(before, apply(before, NAME, stmt="N0.S0", lanes=16), "exact-in-reals")


def test_numeric_equivalence_max_is_bitwise():
    before = kernel_of(ROWMAX)
    assert_equivalent(before, apply(before, NAME, stmt="N0.S0", lanes=8), "bitwise")


def test_numeric_equivalence_softmax():
    before = stdlib("softmax")
    after = apply(apply(before, NAME, stmt="N0.S0", lanes=16), NAME, stmt="N1.S0", lanes=16)
    assert_equivalent(before, after, "exact-in-reals")


def test_rejects():
    k = kernel_of(ROWSUM)
    not_applicable(k, NAME, "divide the 64 iterations", stmt="N0.S0", lanes=6)
    not_applicable(k, NAME, "lie in 2..64", stmt="N0.S0", lanes=1)
    spatial = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}"
    not_applicable(kernel_of(spatial), NAME, "not a reduction", stmt="N0.S0", lanes=4)
    # innermost loop is spatial: j reduces outside i
    inner_spatial = r"\kernel k(A:f32[8,4])->(C:f32[4]){L^{8}_{j=0}L^{4}_{i=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{j,i};];}"
    not_applicable(kernel_of(inner_spatial), NAME, "not one of its reduction loops", stmt="N0.S0", lanes=4)
    # a reduction loop outside a spatial one: the partials would not be per element
    split = (r"\kernel k(A:f32[8,4,8])->(C:f32[4]){L^{8}_{r=0}L^{4}_{i=0}L^{8}_{j=0}"
             r"[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{r,i,j};];}")
    not_applicable(kernel_of(split), NAME, "innermost perfect chain", stmt="N0.S0", lanes=4)
    upd = (r"\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}[C^{f32,g}_{i}=1.0;];"
           r"L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}")
    not_applicable(kernel_of(upd), NAME, "not a reduction", stmt="N1.S0", lanes=4)


def test_whole_chain_of_reduction_loops_and_top_level_sum():
    # two reduction loops (r, j) around the statement: the tile sits outside both
    src = (r"\kernel k(A:f32[4,3,16])->(C:f32[4]){L^{4}_{i=0}L^{3}_{r=0}L^{16}_{j=0}"
           r"[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,r,j};];}")
    before = kernel_of(src)
    after = apply(before, NAME, stmt="N0.S0", lanes=4)
    assert isinstance(after.body[0].body[0], A.Alloc)
    assert_equivalent(before, after, "exact-in-reals")
    total = r"\kernel k(A:f32[64])->(C:f32[]){L^{64}_{j=0}[C^{f32,g}=C^{f32,g}+A^{f32,g}_{j};];}"
    before = kernel_of(total)
    after = apply(before, NAME, stmt="N0.S0", lanes=16)
    assert [type(x).__name__ for x in after.body] == ["Alloc", "Loop", "Loop"]
    assert_equivalent(before, after, "exact-in-reals")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("softmax"), [step(NAME, stmt="N0.S0", lanes=16),
                                                   step(NAME, stmt="N1.S0", lanes=8)])


@pytest.mark.parametrize("kernel", ["gemv", "softmax", "layernorm", "matmul_transposed_b"])
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
