"""vectorized_memory_access: a read cache whose copy runs with vector loads (innermost V loop)."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "vectorized_memory_access"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_layernorm(update_golden):
    check_golden(NAME, "layernorm_Y_W", apply(stdlib("layernorm"), NAME, stmt="N4.S0", tensor="W", scope="l"), update_golden)


def test_golden_after_split(update_golden):
    k = apply(stdlib("gemv"), "loop_split", loop="N0.k", factor=32)
    check_golden(NAME, "gemv_split32_X", apply(k, NAME, stmt="N0.S0", tensor="X", scope="l"), update_golden)


def test_rejects_scalar_read():
    not_applicable(stdlib("mse_loss"), NAME, "uses no loop index", stmt="N2.S0", tensor="Tot", scope="l")


def test_rejects_long_innermost_loop():
    not_applicable(stdlib("gemv"), NAME, "has 65536 iterations; at most 64 vector lanes", stmt="N0.S0", tensor="A", scope="l")


def test_rejects_non_serial_innermost_loop():
    src = r"\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}U^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}"
    not_applicable(kernel_of(src), NAME, "copy loop 'j' is unrolled, not serial", stmt="N0.S0", tensor="A", scope="l")


def test_rejects_lanes_storing_one_element():
    src = r"\kernel k(A:f32[4])->(C:f32[8]){L^{8}_{j=0}[C^{f32,g}_{j}=A^{f32,g}_{j//2};];}"
    not_applicable(kernel_of(src), NAME, "would store the same element", stmt="N0.S0", tensor="A", scope="l")


def test_rejects_target_and_guarded_region():
    # the read-cache preconditions apply
    not_applicable(stdlib("layernorm"), NAME, "'Y' is the statement's target", stmt="N4.S0", tensor="Y", scope="l")
    not_applicable(stdlib("maxpool2d"), NAME, "without its guard", stmt="N0.S0", tensor="X", scope="l")


def test_rejects_shared_buffer_above_capacity():
    not_applicable(stdlib("layernorm"), NAME, "bytes exceeds 49152", stmt="N4.S0", tensor="X", scope="s")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("layernorm"), [step(NAME, stmt="N4.S0", tensor="W", scope="l"),
                                                     step(NAME, stmt="N5.S0", tensor="Bias", scope="l")])


@pytest.mark.parametrize("kernel,split,stmt,tensor,scope", [
    ("layernorm", None, "N4.S0", "Bias", "l"),
    ("rmsnorm", None, "N2.S0", "X", "l"),
    ("gemv", ("N0.k", 32), "N0.S0", "X", "l"),
    ("groupnorm", None, "N4.S0", "W", "s"),
])
def test_numeric_equivalence(kernel, split, stmt, tensor, scope):
    before = stdlib(kernel)
    if split:
        before = apply(before, "loop_split", loop=split[0], factor=split[1])
    assert_equivalent(before, apply(before, NAME, stmt=stmt, tensor=tensor, scope=scope), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
