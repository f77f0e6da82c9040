"""loop_split: one loop -> outer serial loop x inner loop of `factor` iterations."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "loop_split"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_gemv_reduction(update_golden):
    check_golden(NAME, "gemv_k1024", apply(stdlib("gemv"), NAME, loop="N0.k", factor=1024), update_golden)


def test_divisor_domain_is_small_and_prefers_powers_of_two():
    from leirc.strategies import enumerate_sites

    sites = enumerate_sites(stdlib("relu"), ["loop_split"])
    j = next(s for s in sites if s.fixed["loop"] == "N0.j")
    assert j.domains["factor"] == [2, 4, 8, 16, 32, 64, 128, 256]


def test_rejects_nonzero_start():
    src = r"\kernel k(A:f32[9])->(C:f32[8]){L^{8}_{j=1}[C^{f32,g}_{j-1}=A^{f32,g}_{j}*2;];}"
    not_applicable(kernel_of(src), NAME, "starts at 1", loop="N0.j", factor=2)


def test_rejects_factor_out_of_range():
    not_applicable(stdlib("gemv"), NAME, "factor 128 must be between 2 and 127", loop="N0.m", factor=128)


def test_rejects_non_dividing_factor():
    not_applicable(stdlib("gemv"), NAME, "factor 3 does not divide extent 128", loop="N0.m", factor=3)


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("gemv"), [step(NAME, loop="N0.k", factor=1024), step(NAME, loop="N0.k", factor=32)])


@pytest.mark.parametrize("kernel,loop,factor", [("gemv", "N0.m", 16), ("layernorm", "N4.w", 8), ("max_reduce_dim1", "N0.r", 64)])
def test_numeric_equivalence(kernel, loop, factor):
    before = stdlib(kernel)
    assert_equivalent(before, apply(before, NAME, loop=loop, factor=factor), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
