"""apart and together (partial fractions and a common denominator)."""

from leirc.lang.printer import print_expr
from leirc.strategies import Step
from leirc.strategies.rewrite import find_stmt
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip
from test_math_helpers import apply, assert_symbolic_identity, assert_verified, kernel, not_applicable, stdlib

# LayerNorm's output statement with the normalization inlined (the reference's apart output)
LN = r"""\kernel ln(A: f32[4, 32], D: f32[32], E: f32[32], G: f32[4], I: f32[4]) -> (C: f32[4, 32]) {
  L^{4}_{tx=0} L^{32}_{a=0} [
    C^{f32,g}_{tx,a} = D^{f32,g}_{a}*((A^{f32,g}_{tx,a} - G^{f32,g}_{tx})/sqrt(I^{f32,g}_{tx}*I^{f32,g}_{tx} + 1e-05)) + E^{f32,g}_{a};
  ];
}
"""
TOGETHER = ("(D^{f32,g}_{a}*(A^{f32,g}_{tx,a}-G^{f32,g}_{tx})+E^{f32,g}_{a}*sqrt(I^{f32,g}_{tx}**2+1e-05))"
            "/sqrt(I^{f32,g}_{tx}**2+1e-05)")


def value(k):
    return print_expr(find_stmt(k, "N0.S0")[0].value)


def test_docstring_examples():
    check_docstring_example("apart")
    check_docstring_example("together")


def test_together_layernorm(update_golden):
    k = kernel(LN)
    new = apply(k, "together", stmt="N0.S0")
    assert value(new) == TOGETHER
    check_golden("together", "layernorm_output", new, update_golden)
    assert_symbolic_identity(k, new)
    assert_verified(k, new)


def test_apart_inverts_together(update_golden):
    k = kernel(LN)
    t = apply(k, "together", stmt="N0.S0")
    back = apply(t, "apart", stmt="N0.S0", on="D^{f32,g}_{a}")
    assert "/sqrt(" in value(back) and value(back).endswith("+E^{f32,g}_{a}")
    check_golden("apart", "layernorm_output", back, update_golden)
    assert_symbolic_identity(t, back)
    assert_verified(t, back)


def test_apart_univariate_without_on():
    k = kernel(r"""\kernel k(X: f32[8]) -> (Y: f32[8]) {
      L^{8}_{i=0} [ Y^{f32,g}_{i} = 1/((X^{f32,g}_{i}+1)*(X^{f32,g}_{i}+2)); ];
    }""")
    new = apply(k, "apart", stmt="N0.S0")
    assert value(new) == "1/(X^{f32,g}_{i}+1)-1/(X^{f32,g}_{i}+2)"
    assert_symbolic_identity(k, new)


def test_apart_negatives():
    t = apply(kernel(LN), "together", stmt="N0.S0")
    not_applicable(t, "apart", "several variables; give 'on'", stmt="N0.S0")
    not_applicable(t, "apart", "does not occur", stmt="N0.S0", on="E^{f32,g}_{0}")
    not_applicable(stdlib("mse_loss"), "apart", "needs a fraction", stmt="N0.S0", on="A^{f32,g}_{i,j}")
    # exponentials are atoms: apart never splits exp(X - Rmax)
    not_applicable(stdlib("softmax"), "apart", "does not change", stmt="N2.S0", on="Rsum^{f32,g}_{i}")


def test_together_negatives():
    not_applicable(stdlib("relu"), "together", "does not change", stmt="N0.S0")
    not_applicable(kernel(LN), "together", "no statement", stmt="N1.S0")


def test_trace_roundtrip():
    check_trace_roundtrip(LN, [Step.make("together", stmt="N0.S0"),
                               Step.make("apart", stmt="N0.S0", on="D^{f32,g}_{a}")])
