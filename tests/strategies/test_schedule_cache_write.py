"""cache_write: accumulate a reduction in a private tile per iteration of a loop.

Naive stdlib matmul -> tiling -> reorder -> cache_write -> unroll/vectorize reaches a
register-blocked GEMM whose accumulator is allocated inside the nest (issue #12)."""

import pytest

from leirc.lang import ast as A
from leirc.strategies import Step
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of
from test_loop_helpers import apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "cache_write"

#: naive matmul -> register-blocked GEMM (8 x 32 tile, 16-lane vectors)
BLOCKING = [
    step("loop_tiling", loop="N0.i", factor_outer=8, factor_inner=32),
    step("loop_reorder", loop="N0.i", order="k,i,j"),
    step(NAME, stmt="N0.S0", loop="N0.jo"),
    step("loop_parallelization", loop="N0.io"),
    step("loop_unrolling", loop="N0.i"),
    step("loop_split", loop="N0.j", factor=16),
    step("loop_unrolling", loop="N0.joa"),
    step("loop_vectorization", loop="N0.j"),
]

SMALL_MM = (r"\kernel k(A:f32[16,8],B:f32[8,32])->(C:f32[16,32]){L^{16}_{i=0}L^{32}_{j=0}L^{8}_{k=0}"
            r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}")
SMALL_BLOCKING = [
    step("loop_tiling", loop="N0.i", factor_outer=4, factor_inner=16),
    step("loop_reorder", loop="N0.i", order="k,i,j"),
    step(NAME, stmt="N0.S0", loop="N0.jo"),
    step("loop_parallelization", loop="N0.io"),
    step("loop_unrolling", loop="N0.i"),
    step("loop_vectorization", loop="N0.j"),
]


def run(kernel, steps):
    for s in steps:
        kernel = apply(kernel, s.name, **s.kwargs)
    return kernel


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_register_blocked_matmul(update_golden):
    check_golden(NAME, "matmul_standard_8x32", run(stdlib("matmul_standard"), BLOCKING), update_golden)


def test_tile_is_private_to_the_tile_loop():
    k = run(stdlib("matmul_standard"), BLOCKING[:3])
    jo = k.body[0].body[0]
    assert jo.var == "jo" and isinstance(jo.body[0], A.Alloc)
    al = jo.body[0]
    assert (al.scope, al.shape, al.dtype) == ("l", (8, 32), "f32")
    # accumulation, then one write-back nest over the tile's spatial loops
    assert [type(x).__name__ for x in jo.body] == ["Alloc", "Loop", "Loop"]
    back = jo.body[2]
    assert [back.var, back.body[0].var] == ["i", "j"]
    assert back.body[0].body[0].value == A.Access(al.name, "f32", "l", (A.Var("i"), A.Var("j")))


def test_created_tile_role():
    from leirc.lang.parser import parse
    from leirc.lang.printer import print_kernel
    from leirc.strategies.base import plan_step

    k = run(kernel_of(SMALL_MM), SMALL_BLOCKING[:2])
    rw = plan_step(k, Step.make(NAME, stmt="N0.S0", loop="N0.jo", scope="s"))
    tile = rw.created["tile"]
    assert any(isinstance(n, A.Alloc) and n.name == tile and n.scope == "s" for n in A.walk(rw.kernel))
    assert parse(print_kernel(rw.kernel)).ok


def test_rejects_reduction_across_the_loop():
    # the tile loop k is a reduction loop: one of its iterations computes partial sums only
    src = (r"\kernel k(A:f32[4,8],B:f32[8,4])->(C:f32[4,4]){L^{8}_{k=0}L^{4}_{i=0}L^{4}_{j=0}"
           r"[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}")
    not_applicable(kernel_of(src), NAME, "reduced across loop 'k'", stmt="N0.S0", loop="N0.k")
    # the innermost spatial loop of i,j,k: no reduction loop inside it either
    not_applicable(kernel_of(SMALL_MM), NAME, "reduced across loop 'k'", stmt="N0.S0", loop="N0.k")


def test_rejects_non_reductions():
    src = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}"
    not_applicable(kernel_of(src), NAME, "not a reduction", stmt="N0.S0", loop="N0.i")
    upd = (r"\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}[C^{f32,g}_{i}=1.0;];"
           r"L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}")
    not_applicable(kernel_of(upd), NAME, "update, not a reduction", stmt="N1.S0", loop="N1.i")


def test_rejects_other_statements_under_the_loop():
    src = (r"\kernel k(A:f32[4,8])->(C:f32[4],D:f32[4,8]){L^{4}_{i=0}[L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];"
           r"L^{8}_{j=0}[D^{f32,g}_{i,j}=A^{f32,g}_{i,j};];];}")
    not_applicable(kernel_of(src), NAME, "only statement under loop 'i'", stmt="N0.S0", loop="N0.i")


def test_rejects_non_affine_target_and_unknown_loop():
    src = (r"\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i*i//4}=C^{f32,g}_{i*i//4}+A^{f32,g}_{i,j};];"
           r"L^{4}_{i=0}[C^{f32,g}_{i}=C^{f32,g}_{i};];}")
    k = kernel_of(src)
    not_applicable(k, NAME, "not affine", stmt="N0.S0", loop="N0.i")
    not_applicable(kernel_of(SMALL_MM), NAME, r"no loop 'N0\.q'", stmt="N0.S0", loop="N0.q")
    not_applicable(kernel_of(SMALL_MM), NAME, "must be one of l, s", stmt="N0.S0", loop="N0.i", scope="g")


def test_trace_roundtrip():
    check_trace_roundtrip(SMALL_MM, SMALL_BLOCKING)


def test_numeric_equivalence_bitwise():
    before = kernel_of(SMALL_MM)
    after = run(before, SMALL_BLOCKING[:3])
    assert_equivalent(before, after, "bitwise")


def test_numeric_equivalence_of_the_whole_blocking():
    # tiling and reordering reassociate nothing here (k keeps its order per element)
    before = kernel_of(SMALL_MM)
    assert_equivalent(before, run(before, SMALL_BLOCKING), "exact-in-reals")


def test_register_blocked_gemm_lowers_with_the_tile_inside_the_nest():
    from leirc.lang.checker import check_kernel
    from leirc.lower import lower

    k = run(kernel_of(SMALL_MM), SMALL_BLOCKING)
    text = lower(check_kernel(k)).script()
    lines = text.splitlines()
    alloc = next(i for i, l in enumerate(lines) if "T.alloc" in l)
    assert "local" in lines[alloc] and "(4, 16)" in lines[alloc], lines[alloc]
    assert any("T.parallel" in l for l in lines[:alloc]) and any("for jo" in l for l in lines[:alloc])


@pytest.mark.parametrize("kernel", ["matmul_standard", "batched_matmul", "layernorm", "conv2d"])
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
