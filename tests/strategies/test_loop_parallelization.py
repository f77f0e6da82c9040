"""loop_parallelization: L -> P for loops that carry no dependence.

Its site listing uses the checker's race test on the loop directly instead of re-checking
the whole kernel per candidate; every listed site must still check clean."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "loop_parallelization"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul(update_golden):
    check_golden(NAME, "matmul_standard_j", apply(stdlib("matmul_standard"), NAME, loop="N0.j"), update_golden)


def test_rejects_reduction_loop():
    not_applicable(stdlib("gemv"), NAME, "parallel loop 'k' carries a dependence", loop="N0.k")


def test_rejects_scan_loop():
    not_applicable(stdlib("cumsum"), NAME, "parallel loop 'j' carries a dependence", loop="N0.j")


def test_rejects_non_serial_loop():
    src = r"\kernel k(A:f32[4])->(C:f32[4]){V^{4}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}"
    not_applicable(kernel_of(src), NAME, "'i' is already vectorized", loop="N0.i")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("softmax"), [step(NAME, loop="N0.i"), step(NAME, loop="N2.j")])


@pytest.mark.parametrize("kernel,loop", [("gemv", "N0.m"), ("layernorm", "N4.c"), ("mean_reduce_dim1", "N0.j")])
def test_numeric_equivalence(kernel, loop):
    before = stdlib(kernel)
    assert_equivalent(before, apply(before, NAME, loop=loop), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
