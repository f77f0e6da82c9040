"""exponential_split, multiplicative_split and additive_split: introduce a value z."""

from leirc.lang.printer import print_expr
from leirc.strategies import Step
from leirc.strategies.rewrite import find_stmt
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, stdlib_text
from test_math_helpers import apply, assert_symbolic_identity, assert_verified, assert_verified_only_where_it_does_not_overflow, kernel, not_applicable, small, stdlib

SMALL = {"256": "4", "24576": "64"}
PREV = "if_then_else(j-1<0,0,X^{f32,g}_{i,j-1})"  # the reference's favourite z: the previous element


def value(k, ref):
    return print_expr(find_stmt(k, ref)[0].value)


def test_docstring_examples():
    for name in ("exponential_split", "multiplicative_split", "additive_split"):
        check_docstring_example(name)


def test_exponential_split_softmax_sum(update_golden):
    k = stdlib("softmax")
    new = apply(k, "exponential_split", stmt="N1.S0", z=PREV)
    assert value(new, "N1.S0") == (f"Rsum^{{f32,g}}_{{i}}+exp(X^{{f32,g}}_{{i,j}}-{PREV})"
                                   f"*exp({PREV}-Rmax^{{f32,g}}_{{i}})")
    check_golden("exponential_split", "softmax_prev", new, update_golden)
    assert_symbolic_identity(k, new)
    ks = small("softmax", SMALL)
    assert_verified_only_where_it_does_not_overflow(ks, apply(ks, "exponential_split", stmt="N1.S0", z=PREV))


def test_exponential_split_plain_exp_and_at():
    k = kernel(r"""\kernel k(A: f32[4, 8]) -> (Y: f32[4, 8]) {
      L^{4}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i,j} = exp(A^{f32,g}_{i,j}) + exp(-A^{f32,g}_{i,j}); ];
    }""")
    z = "if_then_else(j-1<0,0,A^{f32,g}_{i,j-1})"
    new = apply(k, "exponential_split", stmt="N0.S0", z=z, at="exp(-A^{f32,g}_{i,j})")
    assert value(new, "N0.S0") == f"exp(A^{{f32,g}}_{{i,j}})+exp(-A^{{f32,g}}_{{i,j}}-{z})*exp({z})"
    assert_symbolic_identity(k, new)
    assert_verified_only_where_it_does_not_overflow(k, new)


def test_exponential_split_negatives():
    k = stdlib("softmax")
    # the reference's degenerate split exp(A-D)*exp(D-D)
    not_applicable(k, "exponential_split", "exp\\(0\\)", stmt="N1.S0", z="Rmax^{f32,g}_{i}")
    not_applicable(k, "exponential_split", "finite", stmt="N1.S0", z="-inf")
    not_applicable(k, "exponential_split", "no exp", stmt="N0.S0", z="X^{f32,g}_{i,j}")
    not_applicable(k, "exponential_split", "not an exp", stmt="N1.S0", z="X^{f32,g}_{i,0}", at="X^{f32,g}_{i,j}")
    # z must be readable there: an unguarded previous element is out of bounds at j = 0
    not_applicable(k, "exponential_split", "E030", stmt="N1.S0", z="X^{f32,g}_{i,j-1}")
    # z may not read the accumulator (the reduction would stop being one)
    not_applicable(k, "exponential_split", "does not check", stmt="N1.S0", z="Rsum^{f32,g}_{i}")


def test_multiplicative_split_needs_nonzero(update_golden):
    k = stdlib("softmax")
    # Rsum is a sum of exponentials: provably positive
    new = apply(k, "multiplicative_split", stmt="N2.S0", z="Rsum^{f32,g}_{i}", at="exp(X^{f32,g}_{i,j}-Rmax^{f32,g}_{i})")
    assert value(new, "N2.S0") == ("exp(X^{f32,g}_{i,j}-Rmax^{f32,g}_{i})/Rsum^{f32,g}_{i}*Rsum^{f32,g}_{i}"
                                   "/Rsum^{f32,g}_{i}")
    check_golden("multiplicative_split", "softmax_rsum", new, update_golden)
    assert_symbolic_identity(k, new)
    ks = small("softmax", SMALL)
    assert_verified(ks, apply(ks, "multiplicative_split", stmt="N2.S0", z="Rsum^{f32,g}_{i}"))
    # an exponential is non-zero, a positive literal too
    apply(k, "multiplicative_split", stmt="N2.S0", z="exp(X^{f32,g}_{i,j})")
    apply(k, "multiplicative_split", stmt="N2.S0", z="3.0")


def test_multiplicative_split_negatives():
    k = stdlib("layernorm")
    # the reference divided by the previous partial sum and by the mean: both may be 0
    not_applicable(k, "multiplicative_split", "non-zero", stmt="N3.S0", z="Mean^{f32,g}_{n}", at="Sq^{f32,g}_{n}")
    not_applicable(k, "multiplicative_split", "non-zero", stmt="N1.S0", z="if_then_else(n-1<0,1,Sum^{f32,g}_{n-1})")
    not_applicable(k, "multiplicative_split", "non-zero", stmt="N1.S0", z="0")
    not_applicable(k, "multiplicative_split", "missing argument 'z'", stmt="N1.S0")


def test_additive_split_keeps_the_reduction(update_golden):
    k = stdlib("layernorm")
    new = apply(k, "additive_split", stmt="N0.S0", z="Bias^{f32,g}_{c,h,w}")
    assert value(new, "N0.S0") == "Sum^{f32,g}_{n}+(X^{f32,g}_{n,c,h,w}+Bias^{f32,g}_{c,h,w}-Bias^{f32,g}_{c,h,w})"
    check_golden("additive_split", "layernorm_sum", new, update_golden)
    assert_symbolic_identity(k, new)
    ks = small("layernorm", {"64": "8"})
    assert_verified(ks, apply(ks, "additive_split", stmt="N0.S0", z="Bias^{f32,g}_{c,h,w}"))
    # and inside a sub-expression
    sub = apply(k, "additive_split", stmt="N4.S0", z="Mean^{f32,g}_{n}", at="W^{f32,g}_{c,h,w}")
    assert "(W^{f32,g}_{c,h,w}+Mean^{f32,g}_{n}-Mean^{f32,g}_{n})" in value(sub, "N4.S0")


def test_additive_split_negatives():
    k = stdlib("layernorm")
    not_applicable(k, "additive_split", "finite", stmt="N0.S0", z="inf")
    not_applicable(k, "additive_split", "E012", stmt="N1.S0", z="X^{f32,g}_{n,c,0,0}")
    not_applicable(k, "additive_split", "does not occur", stmt="N0.S0", z="Bias^{f32,g}_{c,h,w}", at="W^{f32,g}_{c,h,w}")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("softmax"), [
        Step.make("exponential_split", stmt="N1.S0", z=PREV),
        Step.make("multiplicative_split", stmt="N2.S0", z="Rsum^{f32,g}_{i}"),
        Step.make("additive_split", stmt="N0.S0", z="X^{f32,g}_{i,0}")])
