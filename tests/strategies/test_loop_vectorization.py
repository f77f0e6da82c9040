"""loop_vectorization: L -> V for innermost, dependence-free loops of at most 64 iterations."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "loop_vectorization"
EW = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_layernorm(update_golden):
    check_golden(NAME, "layernorm_w", apply(stdlib("layernorm"), NAME, loop="N4.w"), update_golden)


def test_golden_after_split(update_golden):
    k = apply(stdlib("relu"), "loop_split", loop="N0.j", factor=8)
    check_golden(NAME, "relu_split8", apply(k, NAME, loop="N0.j"), update_golden)


def test_rejects_loop_that_is_not_innermost():
    not_applicable(kernel_of(EW), NAME, "'i' is not innermost", loop="N0.i")


def test_rejects_long_loop():
    not_applicable(stdlib("relu"), NAME, "has 24576 iterations; at most 64 allowed", loop="N0.j")


def test_rejects_reduction_loop():
    not_applicable(stdlib("layernorm"), NAME, "vectorized loop 'w' carries a dependence", loop="N0.w")


def test_rejects_non_serial_loop():
    not_applicable(kernel_of(EW.replace("L^{8}_{j=0}", "U^{8}_{j=0}")), NAME, "'j' is already unrolled", loop="N0.j")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("gelu"), [step("loop_split", loop="N0.j", factor=4), step(NAME, loop="N0.j")])


@pytest.mark.parametrize("kernel,loop,split", [
    ("layernorm", "N4.w", None),
    ("rmsnorm", "N1.w", None),
    ("groupnorm", "N3.r", None),
    ("mean_reduce_dim1", "N1.j", 7),
])
def test_numeric_equivalence(kernel, loop, split):
    before = stdlib(kernel)
    if split:
        before = apply(before, "loop_split", loop=loop, factor=split)
    assert_equivalent(before, apply(before, NAME, loop=loop), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
