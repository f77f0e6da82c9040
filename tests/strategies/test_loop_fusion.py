"""loop_fusion: merge two directly nested loops into one (inverse of loop_split)."""

import pytest

from leirc.lang.printer import print_kernel
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "loop_fusion"
EW = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_split_then_fuse_restores_the_program():
    for kernel, loop, factor in (("relu", "N0.j", 96), ("softmax", "N1.i", 16), ("layernorm", "N4.w", 8)):
        k = stdlib(kernel)
        split = apply(k, "loop_split", loop=loop, factor=factor)
        outer = loop.split(".")[0] + "." + loop.split(".")[1] + "o"
        assert print_kernel(apply(split, NAME, loop=outer)) == print_kernel(k)


def test_golden_layernorm_spatial(update_golden):
    k = apply(stdlib("layernorm"), NAME, loop="N4.h")
    check_golden(NAME, "layernorm_hw", k, update_golden)


def test_golden_conv2d_guarded(update_golden):
    k = apply(stdlib("conv2d"), NAME, loop="N0.h")
    check_golden(NAME, "conv2d_pad_hw", k, update_golden)


def test_rejects_body_that_is_not_one_loop():
    src = r"\kernel k(A:f32[4,8])->(C:f32[4,8],D:f32[4]){L^{4}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i,0};L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];];}"
    not_applicable(kernel_of(src), NAME, "not exactly one loop", loop="N0.i")
    not_applicable(kernel_of(EW), NAME, "not exactly one loop", loop="N0.j")


def test_rejects_non_serial_outer_loop():
    src = EW.replace("L^{4}_{i=0}", "P^{4}_{i=0}")
    not_applicable(kernel_of(src), NAME, "outer loop 'i' is parallel", loop="N0.i")


def test_rejects_nonzero_start():
    src = r"\kernel k(A:f32[4,9])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=1}[C^{f32,g}_{i,j-1}=A^{f32,g}_{i,j}*2;];}"
    not_applicable(kernel_of(src), NAME, "'j' starts at 1", loop="N0.i")


def test_rejects_mixing_spatial_and_reduction_loops():
    not_applicable(stdlib("gemv"), NAME, "'Y' is reduced over 'k' but indexed by 'm'", loop="N0.m")


def test_rejects_result_the_checker_refuses():
    # 4 x 512 threads fused into one threadIdx.x loop of 2048 threads
    src = r"\kernel k(A:f32[4,512])->(C:f32[4,512]){L^{4}_{i=0}B^{512}_{tx=0}[C^{f32,g}_{i,tx}=A^{f32,g}_{i,tx}*2;];}"
    not_applicable(kernel_of(src), NAME, "E043", loop="N0.i")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("relu"), [step("loop_split", loop="N0.j", factor=8), step(NAME, loop="N0.jo")])


@pytest.mark.parametrize("kernel,loop", [
    ("layernorm", "N4.h"),
    ("mean_reduce_dim1", "N1.n"),
    ("max_reduce_dim1", "N0.n"),
    ("conv2d", "N0.h"),
])
def test_numeric_equivalence(kernel, loop):
    before = stdlib(kernel)
    assert_equivalent(before, apply(before, NAME, loop=loop), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
