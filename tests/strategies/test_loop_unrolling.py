"""loop_unrolling: L -> U for loops of at most 64 iterations."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "loop_unrolling"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_conv2d_kernel_window(update_golden):
    k = apply(apply(stdlib("conv2d"), NAME, loop="N1.q"), NAME, loop="N1.p")
    check_golden(NAME, "conv2d_pq", k, update_golden)


def test_unrolls_reduction_and_spatial_loops():
    k = apply(stdlib("layernorm"), NAME, loop="N0.c")
    assert k.body[0].body[0].kind == "U"


def test_rejects_unknown_loop():
    not_applicable(stdlib("relu"), NAME, r"no loop 'N3\.i'", loop="N3.i")


def test_rejects_long_loop():
    not_applicable(stdlib("relu"), NAME, "has 256 iterations; at most 64 allowed", loop="N0.i")


def test_rejects_non_serial_loop():
    src = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){P^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}"
    not_applicable(kernel_of(src), NAME, "'i' is already parallel", loop="N0.i")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("layernorm"), [step(NAME, loop="N4.c"), step(NAME, loop="N4.h")])


@pytest.mark.parametrize("kernel,loop", [
    ("layernorm", "N4.w"),
    ("mean_reduce_dim1", "N0.n"),
    ("max_reduce_dim1", "N0.n"),
    ("groupnorm", "N1.r"),
])
def test_numeric_equivalence(kernel, loop):
    before = stdlib(kernel)
    assert_equivalent(before, apply(before, NAME, loop=loop), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
