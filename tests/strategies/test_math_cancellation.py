"""cancellation and expand_cancellation (SymPy cancel and its inverse)."""

from leirc.lang.printer import print_expr
from leirc.strategies import Step
from leirc.strategies.rewrite import find_stmt
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip
from test_math_helpers import apply, assert_symbolic_identity, assert_verified, assert_verified_only_where_it_does_not_overflow, kernel, not_applicable, stdlib

# Tanh with D and E inlined (the form of the reference's expand_cancellation output)
TANH = r"""\kernel tanh(A: f32[16, 64]) -> (C: f32[16, 64]) {
  L^{16}_{tx=0} L^{64}_{a=0} [
    C^{f32,g}_{tx,a} = (exp(A^{f32,g}_{tx,a}) - exp(-A^{f32,g}_{tx,a}))/(exp(A^{f32,g}_{tx,a}) + exp(-A^{f32,g}_{tx,a}));
  ];
}
"""
CANCELLED = "(exp(2*A^{f32,g}_{tx,a})-1)/(exp(2*A^{f32,g}_{tx,a})+1)"


def value(k, ref="N0.S0"):
    return print_expr(find_stmt(k, ref)[0].value)


def test_docstring_examples():
    check_docstring_example("cancellation")
    check_docstring_example("expand_cancellation")


def test_cancellation_tanh(update_golden):
    k = kernel(TANH)
    new = apply(k, "cancellation", stmt="N0.S0")
    assert value(new) == CANCELLED
    check_golden("cancellation", "tanh", new, update_golden)
    assert_symbolic_identity(k, new)
    assert_verified_only_where_it_does_not_overflow(k, new)


def test_expand_cancellation_is_the_inverse(update_golden):
    k = kernel(TANH)
    c = apply(k, "cancellation", stmt="N0.S0")
    back = apply(c, "expand_cancellation", stmt="N0.S0", z="exp(-A^{f32,g}_{tx,a})")
    assert back == k
    check_golden("expand_cancellation", "tanh", back, update_golden)
    assert_symbolic_identity(c, back)
    assert_verified_only_where_it_does_not_overflow(c, back)


def test_cancellation_groupnorm_rsqrt():
    k = stdlib("groupnorm")
    new = apply(k, "cancellation", stmt="N3.S0")
    assert_symbolic_identity(k, new)


def test_cancellation_negatives():
    # nothing to cancel: no division
    not_applicable(stdlib("mse_loss"), "cancellation", "needs a fraction", stmt="N0.S0")
    # SymPy would split exp(X - Rmax) into exp(X)/exp(Rmax): that is expand_powsimp, refused here
    not_applicable(stdlib("softmax"), "cancellation", "split exponentials", stmt="N2.S0")
    not_applicable(kernel(TANH), "cancellation", "needs a fraction", stmt="N0.S0", at="exp(A^{f32,g}_{tx,a})")
    done = apply(kernel(TANH), "cancellation", stmt="N0.S0")
    not_applicable(done, "cancellation", "does not change", stmt="N0.S0")
    # a reduction chain is not rewritten
    chain = kernel(r"""\kernel k(A: f32[4, 8]) -> (S: f32[4]) {
      L^{4}_{i=0} L^{8}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + A^{f32,g}_{i,j}/A^{f32,g}_{i,j} - 1; ];
    }""")
    not_applicable(chain, "cancellation", "chain", stmt="N0.S0")


def test_expand_cancellation_negatives():
    c = kernel(TANH.replace("(exp(A^{f32,g}_{tx,a}) - exp(-A^{f32,g}_{tx,a}))/(exp(A^{f32,g}_{tx,a}) + exp(-A^{f32,g}_{tx,a}))",
                            CANCELLED))
    # z must be provably non-zero: an input value may be 0
    not_applicable(c, "expand_cancellation", "finite and non-zero", stmt="N0.S0", z="A^{f32,g}_{tx,a}")
    # and finite
    not_applicable(c, "expand_cancellation", "finite and non-zero", stmt="N0.S0", z="exp(inf)")
    # not a fraction
    not_applicable(stdlib("relu"), "expand_cancellation", "not a fraction", stmt="N0.S0", z="2.0")
    not_applicable(c, "expand_cancellation", "cannot parse", stmt="N0.S0", z="exp(")


def test_trace_roundtrip():
    check_trace_roundtrip(TANH, [Step.make("cancellation", stmt="N0.S0"),
                                 Step.make("expand_cancellation", stmt="N0.S0", z="exp(-A^{f32,g}_{tx,a})")])
