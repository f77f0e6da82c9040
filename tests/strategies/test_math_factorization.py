"""factorization and expand_factorization (SymPy factor / expand)."""

from leirc.strategies import Step
from leirc.strategies.rewrite import find_stmt
from leirc.lang.printer import print_expr
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, stdlib_text
from test_math_helpers import apply, assert_symbolic_identity, assert_verified, kernel, not_applicable, stdlib

POLY = r"""\kernel poly(X: f32[4, 8], Y: f32[4, 8], M: f32[4]) -> (Z: f32[4, 8], S: f32[4]) {
  L^{4}_{i=0} L^{8}_{j=0} [
    Z^{f32,g}_{i,j} = X^{f32,g}_{i,j}**2 - Y^{f32,g}_{i,j}**2 + exp(X^{f32,g}_{i,j}*M^{f32,g}_{i} + Y^{f32,g}_{i,j}*M^{f32,g}_{i});
  ];
  L^{4}_{i=0} L^{8}_{j=0} [
    S^{f32,g}_{i} = S^{f32,g}_{i} + X^{f32,g}_{i,j}*M^{f32,g}_{i} - Y^{f32,g}_{i,j}*M^{f32,g}_{i};
  ];
}
"""


def test_docstring_examples():
    check_docstring_example("factorization")
    check_docstring_example("expand_factorization")


def test_factorization_golden_and_proofs(update_golden):
    k = kernel(POLY)
    new = apply(k, "factorization", stmt="N0.S0")
    # the polynomial part is factored and so is the exponent inside exp; exp is not split
    assert print_expr(find_stmt(new, "N0.S0")[0].value).count("exp(") == 1
    check_golden("factorization", "poly", new, update_golden)
    assert_symbolic_identity(k, new)
    assert_verified(k, new)


def test_factorization_sub_expression_only():
    k = kernel(POLY)
    new = apply(k, "factorization", stmt="N0.S0", at="X^{f32,g}_{i,j}*M^{f32,g}_{i}+Y^{f32,g}_{i,j}*M^{f32,g}_{i}")
    v = print_expr(find_stmt(new, "N0.S0")[0].value)
    assert v.startswith("X^{f32,g}_{i,j}**2-Y^{f32,g}_{i,j}**2+exp(M^{f32,g}_{i}*(")


def test_factorization_keeps_the_reduction_form():
    k = kernel(POLY)
    # S = S + X*M - Y*M is a chain: its operand is not one expression, so it is refused
    not_applicable(k, "factorization", "chain", stmt="N1.S0")


def test_factorization_does_not_split_exponentials():
    # the reference's factorization turned exp(A - D) into exp(A)*exp(-D); leirc does not
    not_applicable(stdlib("softmax"), "factorization", "does not change", stmt="N1.S0")


def test_factorization_negatives():
    k = kernel(POLY)
    not_applicable(k, "factorization", "no statement 'N9.S0'", stmt="N9.S0")
    not_applicable(k, "factorization", "does not occur", stmt="N0.S0", at="X^{f32,g}_{i,j}*7")
    not_applicable(k, "factorization", "cannot parse", stmt="N0.S0", at="X^{f32,g}_{i,j}*")
    not_applicable(stdlib("relu"), "factorization", "does not change", stmt="N0.S0")


def test_expand_factorization_layernorm_variance(update_golden):
    k = stdlib("layernorm")
    new = apply(k, "expand_factorization", stmt="N2.S0")
    # only the operand of the reduction Sq = Sq + (X - Mean)**2 is expanded
    st = find_stmt(new, "N2.S0")[0]
    assert print_expr(st.value).startswith("Sq^{f32,g}_{n}+(")
    check_golden("expand_factorization", "layernorm", new, update_golden)
    assert_symbolic_identity(k, new)


def test_expand_factorization_numerics_small():
    k = kernel(POLY)
    f = apply(k, "factorization", stmt="N0.S0")
    back = apply(f, "expand_factorization", stmt="N0.S0")
    assert_verified(k, back)
    assert_symbolic_identity(k, back)
    not_applicable(k, "expand_factorization", "does not change", stmt="N0.S0", at="X^{f32,g}_{i,j}**2")


def test_expand_factorization_negatives():
    not_applicable(stdlib("relu"), "expand_factorization", "does not change", stmt="N0.S0")
    not_applicable(stdlib("softmax"), "expand_factorization", "does not change", stmt="N1.S0")


def test_trace_roundtrip():
    check_trace_roundtrip(POLY, [Step.make("factorization", stmt="N0.S0"),
                                 Step.make("expand_factorization", stmt="N0.S0")])
    check_trace_roundtrip(stdlib_text("layernorm"), [Step.make("expand_factorization", stmt="N2.S0")])
