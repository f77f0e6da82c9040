"""powsimp and expand_powsimp (combining and splitting powers and exponentials)."""

from leirc.lang.printer import print_expr
from leirc.strategies import Step
from leirc.strategies.rewrite import find_stmt
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, stdlib_text
from test_math_helpers import apply, assert_symbolic_identity, assert_verified, assert_verified_only_where_it_does_not_overflow, kernel, not_applicable, small, stdlib

SMALL = {"256": "4", "24576": "64"}


def value(k, ref):
    return print_expr(find_stmt(k, ref)[0].value)


def test_docstring_examples():
    check_docstring_example("powsimp")
    check_docstring_example("expand_powsimp")


def test_expand_powsimp_softmax_is_the_reference_factorization(update_golden):
    # Step-TP's "factorization" record on softmax is this rewrite
    k = stdlib("softmax")
    new = apply(k, "expand_powsimp", stmt="N1.S0")
    assert value(new, "N1.S0") == "Rsum^{f32,g}_{i}+exp(X^{f32,g}_{i,j})*exp(-Rmax^{f32,g}_{i})"
    check_golden("expand_powsimp", "softmax_sum", new, update_golden)
    assert_symbolic_identity(k, new)
    ks = small("softmax", SMALL)
    assert_verified_only_where_it_does_not_overflow(ks, apply(ks, "expand_powsimp", stmt="N1.S0"))


def test_powsimp_inverts(update_golden):
    k = stdlib("softmax")
    split = apply(k, "expand_powsimp", stmt="N2.S0")
    back = apply(split, "powsimp", stmt="N2.S0")
    assert back == k
    check_golden("powsimp", "softmax_normalize", back, update_golden)
    assert_symbolic_identity(split, back)
    ks = apply(small("softmax", SMALL), "expand_powsimp", stmt="N2.S0")
    assert_verified(ks, apply(ks, "powsimp", stmt="N2.S0"))


def test_powers_need_positivity():
    k = kernel(r"""\kernel k(X: f32[8], Y: f32[8]) -> (Z: f32[8]) {
      L^{8}_{i=0} [ Z^{f32,g}_{i} = X^{f32,g}_{i}**0.5*Y^{f32,g}_{i}**0.5; ];
    }""")
    # sqrt(x)*sqrt(y) = sqrt(x*y) needs x, y >= 0: inputs have no known sign
    not_applicable(k, "powsimp", "does not change", stmt="N0.S0")
    pos = kernel(r"""\kernel k(X: f32[8], Y: f32[8]) -> (Z: f32[8]) {
      L^{8}_{i=0} [ Z^{f32,g}_{i} = exp(X^{f32,g}_{i})**2*exp(Y^{f32,g}_{i})**2; ];
    }""")
    new = apply(pos, "powsimp", stmt="N0.S0")
    assert value(new, "N0.S0") == "exp(2*X^{f32,g}_{i}+2*Y^{f32,g}_{i})"
    assert_symbolic_identity(pos, new)


def test_negatives():
    not_applicable(stdlib("relu"), "powsimp", "does not change", stmt="N0.S0")
    not_applicable(stdlib("relu"), "expand_powsimp", "does not change", stmt="N0.S0")
    not_applicable(stdlib("softmax"), "expand_powsimp", "is not a|no statement", stmt="N7.S0")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("softmax"), [Step.make("expand_powsimp", stmt="N2.S0"),
                                                   Step.make("powsimp", stmt="N2.S0")])
