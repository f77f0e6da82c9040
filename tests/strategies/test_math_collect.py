"""collect and expand_collect."""

from leirc.lang.printer import print_expr
from leirc.strategies import Step
from leirc.strategies.rewrite import find_stmt
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, stdlib_text
from test_math_helpers import apply, assert_symbolic_identity, assert_verified, not_applicable, small, stdlib


def value(k, ref):
    return print_expr(find_stmt(k, ref)[0].value)


def test_docstring_examples():
    check_docstring_example("collect")
    check_docstring_example("expand_collect")


def test_expand_collect_layernorm_then_collect(update_golden):
    k = stdlib("layernorm")
    ex = apply(k, "expand_collect", stmt="N4.S0", on="W^{f32,g}_{c,h,w}")
    check_golden("expand_collect", "layernorm", ex, update_golden)
    assert_symbolic_identity(k, ex)
    col = apply(ex, "collect", stmt="N4.S0", on="Rstd^{f32,g}_{n}")
    check_golden("collect", "layernorm", col, update_golden)
    assert value(col, "N4.S0").count("Rstd^{f32,g}_{n}") == 1
    assert_symbolic_identity(ex, col)
    ks = small("layernorm", {"64": "8"})
    ex_s = apply(ks, "expand_collect", stmt="N4.S0", on="W^{f32,g}_{c,h,w}")
    assert_verified(ks, ex_s)
    assert_verified(ex_s, apply(ex_s, "collect", stmt="N4.S0", on="Rstd^{f32,g}_{n}"))


def test_negatives():
    k = stdlib("layernorm")
    not_applicable(k, "collect", "does not change", stmt="N4.S0", on="W^{f32,g}_{c,h,w}")
    not_applicable(k, "collect", "does not occur", stmt="N4.S0", on="Sum^{f32,g}_{n}")
    not_applicable(k, "collect", "missing argument 'on'", stmt="N4.S0")
    not_applicable(k, "expand_collect", "does not change", stmt="N1.S0", on="Sum^{f32,g}_{n}")
    not_applicable(k, "expand_collect", "cannot parse", stmt="N4.S0", on="W^{f32,g}_{")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("layernorm"), [Step.make("expand_collect", stmt="N4.S0", on="W^{f32,g}_{c,h,w}"),
                                                     Step.make("collect", stmt="N4.S0", on="Rstd^{f32,g}_{n}")])
