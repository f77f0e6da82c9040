"""expression_splitting: docstring, golden, operation addressing, every precondition,
trace, numerics."""

import pytest

from leirc.lang.printer import print_expr
from leirc.strategies import NotApplicable, apply_step
from leirc.strategies.graph import _ops
from leirc.strategies.rewrite import find_stmt
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, kernel_of, stdlib_text
from test_graph_helpers import assert_equivalent, stdlib, step

NAME = "expression_splitting"


def split(k, stmt, expr):
    return apply_step(k, step(NAME, stmt=stmt, expr=expr))


def test_docstring_example():
    check_docstring_example(NAME)


def test_operation_addressing_is_preorder():
    st, _ = find_stmt(stdlib("layernorm"), "N4.S0")
    assert [print_expr(e) for e, _ in _ops(st.value)] == [
        "(X^{f32,g}_{n,c,h,w}-Mean^{f32,g}_{n})*Rstd^{f32,g}_{n}*W^{f32,g}_{c,h,w}+Bias^{f32,g}_{c,h,w}",
        "(X^{f32,g}_{n,c,h,w}-Mean^{f32,g}_{n})*Rstd^{f32,g}_{n}*W^{f32,g}_{c,h,w}",
        "(X^{f32,g}_{n,c,h,w}-Mean^{f32,g}_{n})*Rstd^{f32,g}_{n}",
        "X^{f32,g}_{n,c,h,w}-Mean^{f32,g}_{n}",
    ]


def test_golden_gelu_erf(update_golden):
    check_golden(NAME, "gelu_N0S0_expr3", split(stdlib("gelu"), "N0.S0", 3), update_golden)


def test_golden_layernorm_uses_only_the_loops_it_needs(update_golden):
    # Sq/65536.0 + 1e-05 inside rsqrt(...) uses only n: the new nest has the single loop n
    new = split(stdlib("layernorm"), "N3.S0", 1)
    assert new.body[3].extent == 16 and len(new.body[3].body) == 1 and not hasattr(new.body[3].body[0], "extent")
    check_golden(NAME, "layernorm_N3S0_expr1", new, update_golden)


def test_golden_matmul_product_of_a_reduction(update_golden):
    check_golden(NAME, "gemv_N0S0_expr1", split(stdlib("gemv"), "N0.S0", 1), update_golden)


# -- negatives ---------------------------------------------------------------------

def test_rejects_unknown_statement():
    with pytest.raises(NotApplicable, match=r"no statement 'N9.S0' \(statements: N0.S0\)"):
        split(stdlib("relu"), "N9.S0", 1)


def test_rejects_missing_operation():
    with pytest.raises(NotApplicable, match="expr=6 does not exist"):
        split(stdlib("gelu"), "N0.S0", 6)


def test_rejects_whole_right_hand_side():
    with pytest.raises(NotApplicable, match="whole right-hand side"):
        split(stdlib("gelu"), "N0.S0", 0)


def test_rejects_guarded_sub_expression():
    with pytest.raises(NotApplicable, match="branch of an if_then_else"):
        split(stdlib("matmul_upper_triangular"), "N0.S0", 2)


def test_rejects_boolean_sub_expression():
    with pytest.raises(NotApplicable, match="has type bool"):
        split(stdlib("conv2d"), "N0.S0", 1)


def test_rejects_weak_literal_sub_expression():
    with pytest.raises(NotApplicable, match="has type float_lit"):
        split(stdlib("gelu"), "N0.S0", 5)


def test_rejects_constant_sub_expression():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}+f32(i)*2.0;];}")
    with pytest.raises(NotApplicable, match="reads no tensor"):
        split(k, "N0.S0", 1)


def test_rejects_other_precision():
    k = kernel_of("\\kernel k(A:f32[8])->(C:f64[8]){L^{8}_{i=0}[C^{f64,g}_{i}=exp(A^{f32,g}_{i})+1.0;];}")
    with pytest.raises(NotApplicable, match="has type f32 but the statement stores f64"):
        split(k, "N0.S0", 1)


def test_rejects_value_written_in_the_nest():
    with pytest.raises(NotApplicable, match="reads Y, which nest 0 writes"):
        split(stdlib("cumsum"), "N0.S0", 1)


# -- traces and numerics ------------------------------------------------------------


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("layernorm"), [step(NAME, stmt="N4.S0", expr=3), step(NAME, stmt="N3.S0", expr=1)])


@pytest.mark.parametrize("kernel,stmt,expr", [
    ("layernorm", "N4.S0", 2), ("mse_loss", "N0.S0", 2), ("gemv", "N0.S0", 1),
])
def test_numerics(kernel, stmt, expr):
    k = stdlib(kernel)
    assert_equivalent(k, split(k, stmt, expr))
