"""set_storage_scope: move an intermediate to global, shared or local memory."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "set_storage_scope"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_softmax(update_golden):
    check_golden(NAME, "softmax_Rmax_shared", apply(stdlib("softmax"), NAME, tensor="Rmax", scope="s"), update_golden)


def test_back_to_global():
    k = apply(apply(stdlib("softmax"), NAME, tensor="Rsum", scope="l"), NAME, tensor="Rsum", scope="g")
    from leirc.lang.printer import print_kernel
    assert print_kernel(k) == print_kernel(stdlib("softmax"))


def test_rejects_unknown_tensor():
    not_applicable(stdlib("softmax"), NAME, "no tensor 'Q'", tensor="Q", scope="l")


def test_rejects_parameters():
    not_applicable(stdlib("softmax"), NAME, "'X' is a kernel input", tensor="X", scope="s")
    not_applicable(stdlib("softmax"), NAME, "'Y' is a kernel output", tensor="Y", scope="l")


def test_rejects_same_scope():
    not_applicable(stdlib("softmax"), NAME, "already in scope 'g'", tensor="Rmax", scope="g")


def test_rejects_shared_above_capacity():
    not_applicable(stdlib("gemm_bias_relu"), NAME, "needs 524288 bytes per block", tensor="Acc", scope="s")


def test_shared_capacity_counts_one_block():
    # bound to blocks over i, one block holds one row of Acc: 4 KiB
    k = apply(stdlib("gemm_bias_relu"), "loop_binding", loop="N0.i", axis="bx")
    k = apply(k, "loop_binding", loop="N1.i", axis="bx")
    apply(k, NAME, tensor="Acc", scope="s")


def test_rejects_bad_scope():
    not_applicable(stdlib("softmax"), NAME, "must be one of g, s, l", tensor="Rmax", scope="r")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("layernorm"), [step(NAME, tensor="Mean", scope="s"), step(NAME, tensor="Rstd", scope="l")])


@pytest.mark.parametrize("kernel,tensor,scope", [
    ("layernorm", "Mean", "s"),
    ("mean_reduce_dim1", "Sum", "l"),
    ("mse_loss", "Rsum", "s"),
])
def test_numeric_equivalence(kernel, tensor, scope):
    before = stdlib(kernel)
    assert_equivalent(before, apply(before, NAME, tensor=tensor, scope=scope), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
