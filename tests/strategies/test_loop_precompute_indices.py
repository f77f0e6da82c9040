"""precompute_indices: materialize a composite read subscript into an i64 index tensor."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "precompute_indices"
SHIFT = r"\kernel k(A:f32[12])->(C:f32[8]){L^{8}_{c=0}[C^{f32,g}_{c}=A^{f32,g}_{c+4}+A^{f32,g}_{c};];}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_groupnorm_group_index(update_golden):
    check_golden(NAME, "groupnorm_mean_c8", apply(stdlib("groupnorm"), NAME, stmt="N4.S0", tensor="Mean", dim=1), update_golden)


def test_golden_conv2d_window(update_golden):
    check_golden(NAME, "conv2d_ip", apply(stdlib("conv2d"), NAME, stmt="N1.S0", tensor="Pd", dim=2), update_golden)


def test_rejects_unknown_statement():
    not_applicable(stdlib("relu"), NAME, r"no statement 'N0\.S3'", stmt="N0.S3", tensor="X", dim=0)


def test_rejects_target():
    not_applicable(stdlib("cumsum"), NAME, "'Y' is the target", stmt="N0.S0", tensor="Y", dim=1)


def test_rejects_tensor_not_read():
    not_applicable(stdlib("relu"), NAME, "does not read 'Z'", stmt="N0.S0", tensor="Z", dim=0)


def test_rejects_dimension_out_of_range():
    not_applicable(stdlib("relu"), NAME, "dim 2 is out of range", stmt="N0.S0", tensor="X", dim=2)


def test_rejects_differing_subscripts():
    not_applicable(kernel_of(SHIFT), NAME, "use different subscripts in dimension 0", stmt="N0.S0", tensor="A", dim=0)


def test_rejects_plain_index():
    not_applicable(stdlib("relu"), NAME, "not a composite index expression", stmt="N0.S0", tensor="X", dim=1)


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("conv2d"), [step(NAME, stmt="N1.S0", tensor="Pd", dim=2),
                                                  step(NAME, stmt="N2.S0", tensor="Pd", dim=3)])


@pytest.mark.parametrize("kernel,stmt,tensor,dim", [
    ("groupnorm", "N4.S0", "Mean", 1),
    ("groupnorm", "N0.S0", "X", 1),
    ("maxpool2d", "N0.S0", "X", 2),  # guarded read: the index tensor holds -1 and 128 too
    ("conv2d", "N0.S0", "X", 3),
])
def test_numeric_equivalence(kernel, stmt, tensor, dim):
    before = stdlib(kernel)
    assert_equivalent(before, apply(before, NAME, stmt=stmt, tensor=tensor, dim=dim), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
