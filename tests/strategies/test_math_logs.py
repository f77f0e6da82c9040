"""logsimp (combines logs) and expand_log (splits them): the plain meaning of the names;
the Step-TP reference has them the other way round."""

from leirc.lang.printer import print_expr
from leirc.strategies import Step, get
from leirc.strategies.rewrite import find_stmt
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip
from test_math_helpers import apply, assert_symbolic_identity, assert_verified, kernel, not_applicable

# log-sum-exp style: E is a sum of exponentials, provably positive
LSE = r"""\kernel lse(A: f32[4, 8]) -> (Y: f32[4, 8]) {
  L^{4}_{i=0} L^{8}_{j=0} [
    E^{f32,g}_{i} = E^{f32,g}_{i} + exp(A^{f32,g}_{i,j});
  ];
  L^{4}_{i=0} L^{8}_{j=0} [
    Y^{f32,g}_{i,j} = log(exp(A^{f32,g}_{i,j})/E^{f32,g}_{i});
  ];
}
"""


def value(k):
    return print_expr(find_stmt(k, "N1.S0")[0].value)


def test_docstring_examples():
    check_docstring_example("logsimp")
    check_docstring_example("expand_log")


def test_names_mean_what_they_say():
    assert "combine" in get("logsimp").summary.lower()
    assert "split" in get("expand_log").summary.lower()
    for name in ("logsimp", "expand_log"):
        assert "reference" in type(get(name)).__doc__


def test_expand_log_splits(update_golden):
    k = kernel(LSE)
    new = apply(k, "expand_log", stmt="N1.S0")
    assert value(new) == "A^{f32,g}_{i,j}-log(E^{f32,g}_{i})"
    check_golden("expand_log", "log_softmax", new, update_golden)
    assert_symbolic_identity(k, new)
    assert_verified(k, new)


def test_logsimp_combines(update_golden):
    k = kernel(LSE)
    split = apply(k, "expand_log", stmt="N1.S0")
    again = kernel(LSE.replace("log(exp(A^{f32,g}_{i,j})/E^{f32,g}_{i})",
                               "log(exp(A^{f32,g}_{i,j})+1)-log(E^{f32,g}_{i})"))
    new = apply(again, "logsimp", stmt="N1.S0")
    assert value(new) == "log((exp(A^{f32,g}_{i,j})+1)/E^{f32,g}_{i})"
    check_golden("logsimp", "log_ratio", new, update_golden)
    assert_symbolic_identity(again, new)
    assert_verified(again, new)
    assert split is not None


def test_logs_need_positivity():
    k = kernel(r"""\kernel k(X: f32[8], Y: f32[8]) -> (Z: f32[8]) {
      L^{8}_{i=0} [ Z^{f32,g}_{i} = log(X^{f32,g}_{i}*Y^{f32,g}_{i}); ];
    }""")
    # X and Y are inputs of unknown sign: log(X*Y) = log(X) + log(Y) is false for X, Y < 0
    not_applicable(k, "expand_log", "does not change", stmt="N0.S0")
    k2 = kernel(r"""\kernel k(X: f32[8], Y: f32[8]) -> (Z: f32[8]) {
      L^{8}_{i=0} [ Z^{f32,g}_{i} = log(X^{f32,g}_{i}) + log(Y^{f32,g}_{i}); ];
    }""")
    not_applicable(k2, "logsimp", "does not change", stmt="N0.S0")


def test_trace_roundtrip():
    check_trace_roundtrip(LSE, [Step.make("expand_log", stmt="N1.S0")])
    ratio = LSE.replace("log(exp(A^{f32,g}_{i,j})/E^{f32,g}_{i})", "log(exp(A^{f32,g}_{i,j})+1)-log(E^{f32,g}_{i})")
    check_trace_roundtrip(ratio, [Step.make("logsimp", stmt="N1.S0"), Step.make("expand_log", stmt="N1.S0")])
