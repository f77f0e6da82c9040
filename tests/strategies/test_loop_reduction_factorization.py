"""reduction_factorization: split a reduction into two partial reductions (rfactor)."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, numerics, stdlib, step

NAME = "reduction_factorization"
SUM = r"\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul(update_golden):
    check_golden(NAME, "matmul_standard_k", apply(stdlib("matmul_standard"), NAME, loop="N0.k", split=768), update_golden)


def test_golden_softmax_max(update_golden):
    check_golden(NAME, "softmax_rmax", apply(stdlib("softmax"), NAME, loop="N0.j", split=12288), update_golden)


def test_golden_scalar_accumulator(update_golden):
    check_golden(NAME, "mse_loss_total", apply(stdlib("mse_loss"), NAME, loop="N1.i", split=1024), update_golden)


def test_numerics_per_application():
    assert numerics(stdlib("gemv"), NAME, loop="N0.k", split=100) == "exact-in-reals"
    assert numerics(stdlib("max_reduce_dim1"), NAME, loop="N0.r", split=100) == "bitwise"


def test_rejects_multi_statement_nest():
    src = r"\kernel k(A:f32[4,8])->(C:f32[4],D:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};D^{f32,g}_{i,j}=A^{f32,g}_{i,j};];}"
    not_applicable(kernel_of(src), NAME, "holds 2 statements", loop="N0.j", split=4)


def test_rejects_statement_that_is_not_a_reduction():
    not_applicable(stdlib("relu"), NAME, r"'Y' in N0 is not a reduction \(statement kind: assign\)", loop="N0.j", split=4)


def test_rejects_update_of_an_initialized_tensor():
    src = (r"\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}[C^{f32,g}_{i}=1.0;];"
           r"L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}")
    not_applicable(kernel_of(src), NAME, "statement kind: update", loop="N1.j", split=4)


def test_rejects_operator_without_partials():
    src = SUM.replace("C^{f32,g}_{i}+A^{f32,g}_{i,j}", "C^{f32,g}_{i}-A^{f32,g}_{i,j}")
    not_applicable(kernel_of(src), NAME, "op one of \\+ \\* max min", loop="N0.j", split=4)


def test_rejects_spatial_loop():
    not_applicable(kernel_of(SUM), NAME, "'i' is not a reduction loop of 'C' \\(reduction loops: j\\)", loop="N0.i", split=2)


def test_rejects_nonzero_start():
    src = r"\kernel k(A:f32[4,9])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=1}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}"
    not_applicable(kernel_of(src), NAME, "'j' starts at 1", loop="N0.j", split=4)


def test_rejects_split_out_of_range():
    not_applicable(kernel_of(SUM), NAME, "split 8 must be between 1 and 7", loop="N0.j", split=8)
    not_applicable(kernel_of(SUM), NAME, "split 0 must be between 1 and 7", loop="N0.j", split=0)


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("gemv"), [step(NAME, loop="N0.k", split=40000), step(NAME, loop="N1.k", split=5)])


@pytest.mark.parametrize("kernel,loop,split", [
    ("gemv", "N0.k", 40000),
    ("mean_reduce_dim1", "N0.r", 100),
    ("max_reduce_dim1", "N0.r", 300),
    ("layernorm", "N0.c", 5),
    ("mse_loss", "N1.i", 1000),
])
def test_numeric_equivalence(kernel, loop, split):
    before = stdlib(kernel)
    after = apply(before, NAME, loop=loop, split=split)
    assert_equivalent(before, after, numerics(before, NAME, loop=loop, split=split))


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
