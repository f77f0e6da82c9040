"""set_storage_layout: re-index an intermediate everywhere (transpose, flatten or split a dimension)."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "set_storage_layout"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_sdpa_transposed_scores(update_golden):
    check_golden(NAME, "sdpa_P_transposed", apply(stdlib("sdpa"), NAME, tensor="P", kind="transpose", perm="0,1,3,2"), update_golden)


def test_golden_conv2d_flat_padding(update_golden):
    check_golden(NAME, "conv2d_Pd_flat", apply(stdlib("conv2d"), NAME, tensor="Pd", kind="flatten"), update_golden)


def test_rejects_unknown_tensor():
    not_applicable(stdlib("softmax"), NAME, "no tensor 'Q'", tensor="Q", kind="flatten")


def test_rejects_parameters():
    not_applicable(stdlib("softmax"), NAME, "'X' is a kernel input", tensor="X", kind="flatten")


def test_rejects_rank_one():
    not_applicable(stdlib("softmax"), NAME, "a flatten needs rank >= 2; the tensor has rank 1", tensor="Rmax", kind="flatten")
    not_applicable(stdlib("mse_loss"), NAME, "'Tot' is a scalar", tensor="Tot", kind="split", dim=0, factor=2)


def test_rejects_bad_permutations():
    k = stdlib("sdpa")
    not_applicable(k, NAME, "not a permutation", tensor="S", kind="transpose", perm="0,1,2")
    not_applicable(k, NAME, "identity permutation", tensor="S", kind="transpose", perm="0,1,2,3")
    not_applicable(k, NAME, "'perm' does not apply to kind=flatten", tensor="S", kind="flatten", perm="1,0")


def test_rejects_bad_split():
    k = stdlib("softmax")
    not_applicable(k, NAME, "'dim' must name one of the 1 dimension", tensor="Rmax", kind="split", dim=1, factor=2)
    not_applicable(k, NAME, "'factor' 3 must divide the extent 256", tensor="Rmax", kind="split", dim=0, factor=3)
    not_applicable(k, NAME, "'factor' does not apply to kind=flatten", tensor="Rmax", kind="flatten", factor=2)


def test_golden_softmax_split_row_max(update_golden):
    check_golden(NAME, "softmax_Rmax_split8", apply(stdlib("softmax"), NAME, tensor="Rmax", kind="split", dim=0, factor=8), update_golden)


def test_rejects_flatten_that_would_not_check():
    # D is written as a row and a column: its inferred shape [5,10] is a bounding box, but
    # flattened writes only reach element 40, so the read of D_{4,9} (element 49) leaves it
    src = (r"\kernel k(A:f32[10],B:f32[5])->(C:f32[1]){L^{10}_{j=0}[D^{f32,g}_{0,j}=A^{f32,g}_{j};];"
           r"L^{5}_{i=0}[D^{f32,g}_{i,0}=B^{f32,g}_{i};];L^{1}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{4,9};];}")
    not_applicable(kernel_of(src), NAME, "E030", tensor="D", kind="flatten")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("sdpa"), [step(NAME, tensor="S", kind="transpose", perm="0,1,3,2"),
                                                step(NAME, tensor="Sc", kind="flatten")])


@pytest.mark.parametrize("kernel,tensor,kind,perm", [
    ("mean_reduce_dim1", "Sum", "transpose", "1,0"),
    ("groupnorm", "Mean", "flatten", ""),
    ("maxpool2d", "Pd", "flatten", ""),
    ("rmsnorm", "Rms", "transpose", "2,1,0"),
    ("layernorm", "Mean", "split", "0:4"),
])
def test_numeric_equivalence(kernel, tensor, kind, perm):
    before = stdlib(kernel)
    args = dict(tensor=tensor, kind=kind)
    if kind == "transpose":
        args["perm"] = perm
    elif kind == "split":
        args["dim"], args["factor"] = map(int, perm.split(":"))
    assert_equivalent(before, apply(before, NAME, **args), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
