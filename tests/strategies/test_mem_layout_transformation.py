"""layout_transformation: copy a tensor into a transposed, flattened or split tensor and read that."""

import pytest

from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_loop_helpers import STDLIB_NAMES, apply, assert_equivalent, check_all_sites, not_applicable, stdlib, step

NAME = "layout_transformation"


def test_docstring_example():
    check_docstring_example(NAME)


def test_golden_matmul_transposed_b(update_golden):
    k = apply(stdlib("matmul_transposed_b"), NAME, stmt="N0.S0", tensor="B", kind="transpose", perm="1,0")
    check_golden(NAME, "matmul_transposed_b_B", k, update_golden)


def test_golden_layernorm_flatten_weight(update_golden):
    k = apply(stdlib("layernorm"), NAME, stmt="N4.S0", tensor="W", kind="flatten")
    check_golden(NAME, "layernorm_flatten_W", k, update_golden)


def test_golden_softmax_split_rows(update_golden):
    k = apply(stdlib("softmax"), NAME, stmt="N0.S0", tensor="X", kind="split", dim=0, factor=4)
    check_golden(NAME, "softmax_split_X", k, update_golden)


def test_rejects_split_of_guarded_read():
    not_applicable(stdlib("maxpool2d"), NAME, "split subscripts would lose the guard", stmt="N0.S0", tensor="X", kind="split",
                   dim=2, factor=2)


def test_rejects_target():
    not_applicable(stdlib("relu"), NAME, "'Y' is the statement's target", stmt="N0.S0", tensor="Y", kind="flatten")


def test_rejects_tensor_not_read():
    not_applicable(stdlib("relu"), NAME, "does not read 'Q'", stmt="N0.S0", tensor="Q", kind="flatten")


def test_rejects_rank_one():
    not_applicable(stdlib("gemv"), NAME, "a flatten needs rank >= 2; the tensor has rank 1", stmt="N0.S0", tensor="X", kind="flatten")
    not_applicable(stdlib("gemv"), NAME, "a transpose needs rank >= 2", stmt="N0.S0", tensor="X", kind="transpose", perm="0")


def test_rejects_scalar():
    not_applicable(stdlib("mse_loss"), NAME, "'Tot' is a scalar", stmt="N2.S0", tensor="Tot", kind="split", dim=0, factor=2)


def test_rejects_tensor_written_in_the_nest():
    src = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[D^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;C^{f32,g}_{i,j}=D^{f32,g}_{i,j}+1;];}"
    not_applicable(kernel_of(src), NAME, "'D' is written inside nest N0", stmt="N0.S1", tensor="D", kind="transpose", perm="1,0")


def test_rejects_bad_permutations():
    k = stdlib("relu")
    not_applicable(k, NAME, "not a permutation", stmt="N0.S0", tensor="X", kind="transpose", perm="0,2")
    not_applicable(k, NAME, "identity permutation", stmt="N0.S0", tensor="X", kind="transpose", perm="0,1")
    not_applicable(k, NAME, "comma-separated dimension numbers", stmt="N0.S0", tensor="X", kind="transpose", perm="a,b")
    not_applicable(k, NAME, "kind=transpose needs 'perm'", stmt="N0.S0", tensor="X", kind="transpose")
    not_applicable(k, NAME, "'perm' does not apply to kind=flatten", stmt="N0.S0", tensor="X", kind="flatten", perm="1,0")


def test_rejects_bad_split():
    k = stdlib("relu")
    not_applicable(k, NAME, "'dim' must name one of the 2 dimension", stmt="N0.S0", tensor="X", kind="split", dim=2, factor=2)
    not_applicable(k, NAME, "'factor' 5 must divide the extent 256", stmt="N0.S0", tensor="X", kind="split", dim=0, factor=5)
    not_applicable(k, NAME, "'factor' 256 must divide", stmt="N0.S0", tensor="X", kind="split", dim=0, factor=256)
    not_applicable(k, NAME, "'dim' does not apply to kind=transpose", stmt="N0.S0", tensor="X", kind="transpose", perm="1,0", dim=1)


def test_rejects_flatten_of_guarded_read():
    not_applicable(stdlib("conv_transpose2d"), NAME, "flattened subscripts would lose the guard", stmt="N0.S0", tensor="X", kind="flatten")


def test_steps_with_every_default_replay():
    # the CLI fills in defaults (perm=none, dim=-1, factor=0) before recording a step
    from leirc.strategies import get
    from leirc.strategies.base import parse_args

    args = parse_args(get(NAME), {"stmt": "N0.S0", "tensor": "X", "kind": "flatten"})
    check_trace_roundtrip(stdlib_text("relu"), [step(NAME, **args)])


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("matmul_standard"), [step(NAME, stmt="N0.S0", tensor="B", kind="transpose", perm="1,0"),
                                                           step(NAME, stmt="N1.S0", tensor="A", kind="flatten")])


@pytest.mark.parametrize("kernel,stmt,tensor,kind,perm", [
    ("layernorm", "N4.S0", "W", "transpose", "2,0,1"),
    ("layernorm", "N4.S0", "Bias", "flatten", ""),
    ("mean_reduce_dim1", "N0.S0", "X", "transpose", "0,2,1"),
    ("groupnorm", "N4.S0", "Mean", "flatten", ""),
    ("mean_reduce_dim1", "N1.S0", "Sum", "split", "1:7"),
    ("maxpool2d", "N0.S0", "X", "transpose", "1,0,3,2"),  # guarded read, transposed copy
])
def test_numeric_equivalence(kernel, stmt, tensor, kind, perm):
    before = stdlib(kernel)
    args = dict(stmt=stmt, tensor=tensor, kind=kind)
    if kind == "transpose":
        args["perm"] = perm
    elif kind == "split":
        args["dim"], args["factor"] = map(int, perm.split(":"))
    assert_equivalent(before, apply(before, NAME, **args), "bitwise")


@pytest.mark.parametrize("kernel", STDLIB_NAMES)
def test_every_site_applies(kernel):
    check_all_sites(NAME, kernel)
