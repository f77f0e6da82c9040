"""loop_binding: L -> B, the index renamed with the hardware-axis prefix."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, numerics, stdlib, step

NAME = "loop_binding"
EW = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}"
CUMSUM = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=if_then_else(1<=j,C^{f32,g}_{i,j-1},0.0)+A^{f32,g}_{i,j};];}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul_grid(update_golden):
    k = apply(apply(stdlib("matmul_standard"), NAME, loop="N0.i", axis="bx"), NAME, loop="N0.j", axis="tx")
    check_golden(NAME, "matmul_standard_bx_tx", k, update_golden)


def test_index_used_as_value_is_renamed():
    src = r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*a;];}"
    k = apply(kernel_of(src), NAME, loop="N0.a", axis="bz")
    from leirc.lang.printer import print_kernel
    assert "B^{8}_{bza=0}[C^{f32,g}_{bza}=A^{f32,g}_{bza}*bza;]" in print_kernel(k)


def test_numerics_per_application():
    assert numerics(stdlib("gemv"), NAME, loop="N0.m", axis="tx") == "bitwise"
    # a cross-thread sum is reassociated
    assert numerics(stdlib("gemv"), NAME, loop="N0.k", axis="bx") == "exact-in-reals"
    assert numerics(stdlib("max_reduce_dim1"), NAME, loop="N0.r", axis="tx") == "bitwise"


def test_rejects_non_serial_loop():
    not_applicable(kernel_of(EW.replace("L^{4}_{i=0}", "P^{4}_{i=0}")), NAME, "'i' is parallel, not serial", loop="N0.i", axis="tx")


def test_rejects_axis_bound_twice():
    k = apply(kernel_of(EW), NAME, loop="N0.i", axis="tx")
    not_applicable(k, NAME, r"threadIdx\.x is already bound by loop 'txi'", loop="N0.j", axis="tx")


def test_rejects_extent_above_axis_limit():
    src = r"\kernel k(A:f32[128])->(C:f32[128]){L^{128}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}"
    not_applicable(kernel_of(src), NAME, r"threadIdx\.z extent 128 exceeds the CUDA limit 64", loop="N0.i", axis="tz")


def test_rejects_too_many_threads_per_block():
    k = apply(stdlib("matmul_standard"), NAME, loop="N0.j", axis="tx")
    not_applicable(k, NAME, "131072 threads per block would exceed the CUDA limit 1024", loop="N0.i", axis="ty")


def test_rejects_carried_dependence():
    not_applicable(kernel_of(CUMSUM), NAME, "loop 'j' carries a dependence", loop="N0.j", axis="tx")


def test_rejects_unknown_axis():
    not_applicable(kernel_of(EW), NAME, "must be one of tx, ty, tz, bx, by, bz", loop="N0.i", axis="wx")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("softmax"), [step(NAME, loop="N2.i", axis="bx"), step(NAME, loop="N2.j", axis="by")])


@pytest.mark.parametrize("kernel,loop,axis", [
    ("layernorm", "N4.w", "tx"),
    ("mean_reduce_dim1", "N0.j", "bx"),
    ("max_reduce_dim1", "N0.r", "tx"),  # cross-thread max
    ("mse_loss", "N1.i", "bx"),  # cross-block sum: exact in reals
])
def test_numeric_equivalence(kernel, loop, axis):
    before = stdlib(kernel)
    assert_equivalent(before, apply(before, NAME, loop=loop, axis=axis), numerics(before, NAME, loop=loop, axis=axis))


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)


def test_rejects_threads_sharing_a_local_tile_allocated_around_the_loop():
    # found by the random-sequence property: vectorized partial sums leave a local tile whose
    # combine loop must not become a thread loop (E048: local memory belongs to one thread)
    src = (r"\kernel k(X:f32[8,16])->(C:f32[8]){L^{8}_{n=0}[\alloc A^{f32,l}[4];"
           r"L^{4}_{v=0}[A^{f32,l}_{v}=0.0;];L^{4}_{ro=0}L^{4}_{rv=0}[A^{f32,l}_{rv}=A^{f32,l}_{rv}+X^{f32,g}_{n,ro*4+rv};];"
           r"L^{4}_{r=0}[C^{f32,g}_{n}=C^{f32,g}_{n}+A^{f32,l}_{r};];];}")
    k = kernel_of(src)
    not_applicable(k, NAME, r"local tensor 'A' is allocated outside loop 'r'", loop="N0.r", axis="ty")
    apply(k, NAME, loop="N0.n", axis="tx")  # the loop around the \alloc: each thread has its own tile
