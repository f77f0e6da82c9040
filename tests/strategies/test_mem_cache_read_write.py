"""cache_read_write: stage a read region or a written result through a local/shared buffer."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "cache_read_write"
SHIFT = r"\kernel k(A:f32[12])->(C:f32[8]){L^{8}_{c=0}[C^{f32,g}_{c}=A^{f32,g}_{c+4}+A^{f32,g}_{c};];}"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul_read_cache(update_golden):
    k = apply(stdlib("matmul_standard"), NAME, stmt="N0.S0", tensor="A", mode="read", scope="l")
    check_golden(NAME, "matmul_standard_read_A", k, update_golden)


def test_golden_matmul_write_cache(update_golden):
    k = apply(stdlib("matmul_standard"), NAME, stmt="N0.S0", tensor="C", mode="write", scope="l")
    check_golden(NAME, "matmul_standard_write_C", k, update_golden)


def test_golden_softmax_shared_row_max(update_golden):
    k = apply(stdlib("softmax"), NAME, stmt="N2.S0", tensor="Rmax", mode="read", scope="s")
    check_golden(NAME, "softmax_read_Rmax_shared", k, update_golden)


def test_write_cache_of_scalar_statement():
    k = apply(stdlib("mse_loss"), NAME, stmt="N2.S0", tensor="Loss", mode="write", scope="l")
    assert [type(x).__name__ for x in k.body[-2:]] == ["Assign", "Assign"]


def test_rejects_read_cache_of_target():
    not_applicable(stdlib("gemv"), NAME, "is the statement's target, not a region it reads; use mode=write", stmt="N0.S0", tensor="Y", mode="read", scope="l")


def test_rejects_tensor_not_read():
    not_applicable(stdlib("gemv"), NAME, "does not read 'Z'", stmt="N0.S0", tensor="Z", mode="read", scope="l")


def test_rejects_reads_with_different_subscripts():
    not_applicable(kernel_of(SHIFT), NAME, "use different subscripts", stmt="N0.S0", tensor="A", mode="read", scope="l")


def test_rejects_data_dependent_region():
    src = r"\kernel k(A:f32[8],I:i64[8])->(C:f32[8]){L^{8}_{c=0}[C^{f32,g}_{c}=A^{f32,g}_{I^{i64,g}_{c}};];}"
    not_applicable(kernel_of(src), NAME, "depend on tensor data", stmt="N0.S0", tensor="A", mode="read", scope="l")


def test_rejects_tensor_written_in_the_nest():
    src = r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{c=0}[D^{f32,g}_{c}=A^{f32,g}_{c}*2;C^{f32,g}_{c}=D^{f32,g}_{c}+1;];}"
    not_applicable(kernel_of(src), NAME, "'D' is written inside nest N0", stmt="N0.S1", tensor="D", mode="read", scope="l")


def test_rejects_guarded_region():
    not_applicable(stdlib("conv2d"), NAME, "outside \\[0, 64\\) without its guard", stmt="N0.S0", tensor="X", mode="read", scope="l")


def test_rejects_write_cache_of_other_tensor():
    not_applicable(stdlib("gemv"), NAME, "'A' is not the statement's target", stmt="N0.S0", tensor="A", mode="write", scope="l")


def test_rejects_write_cache_of_update_and_scan():
    not_applicable(stdlib("matmul_gelu_softmax"), NAME, "is an update of 'G'", stmt="N1.S0", tensor="G", mode="write", scope="l")
    not_applicable(stdlib("cumsum"), NAME, "is a scan of 'Y'", stmt="N0.S0", tensor="Y", mode="write", scope="l")


def test_rejects_write_cache_when_nest_uses_target_elsewhere():
    src = r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{c=0}[D^{f32,g}_{c}=A^{f32,g}_{c}*2;C^{f32,g}_{c}=D^{f32,g}_{c}+1;];}"
    not_applicable(kernel_of(src), NAME, "another statement of nest N0 uses 'D'", stmt="N0.S0", tensor="D", mode="write", scope="l")


def test_rejects_shared_cache_above_capacity():
    not_applicable(stdlib("matmul_standard"), NAME, "1048576 bytes exceeds 49152", stmt="N0.S0", tensor="A", mode="read", scope="s")


def test_rejects_bad_mode():
    not_applicable(stdlib("gemv"), NAME, "must be one of read, write", stmt="N0.S0", tensor="A", mode="both", scope="l")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("gemv"), [step(NAME, stmt="N0.S0", tensor="X", mode="read", scope="l"),
                                                step(NAME, stmt="N1.S0", tensor="Y", mode="write", scope="l")])


@pytest.mark.parametrize("kernel,stmt,tensor,mode,scope", [
    ("gemv", "N0.S0", "X", "read", "l"),
    ("layernorm", "N4.S0", "Mean", "read", "s"),
    ("mean_reduce_dim1", "N0.S0", "Sum", "write", "l"),
    ("layernorm", "N4.S0", "W", "read", "l"),
    ("mse_loss", "N2.S0", "Loss", "write", "l"),
    ("max_reduce_dim1", "N0.S0", "X", "read", "l"),
])
def test_numeric_equivalence(kernel, stmt, tensor, mode, scope):
    before = stdlib(kernel)
    assert_equivalent(before, apply(before, NAME, stmt=stmt, tensor=tensor, mode=mode, scope=scope), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
