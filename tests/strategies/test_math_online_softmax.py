"""normal_loop_summation_on_exp_to_prefix_summation_on_exp and online_softmax."""

import numpy as np
import pytest

from leirc.lang.checker import check_kernel
from leirc.strategies import NotApplicable, Step, apply_step
from leirc.strategies.rewrite import find_stmt
from strategy_harness import check_docstring_example, check_golden, check_trace_roundtrip, stdlib_text
from test_math_helpers import apply, assert_close_once, assert_verified, kernel, not_applicable, small, stdlib, text

SUM = "normal_loop_summation_on_exp_to_prefix_summation_on_exp"
ONLINE = "online_softmax"
SMALL = {"256": "4", "24576": "64"}


def test_docstring_examples():
    check_docstring_example(SUM)
    check_docstring_example(ONLINE)


def test_golden_softmax(update_golden):
    new = apply(stdlib("softmax"), ONLINE, stmt="N0.S0")
    check_golden(ONLINE, "softmax", new, update_golden)
    # on a softmax both strategies give the same program
    assert apply(stdlib("softmax"), SUM, stmt="N0.S0") == new
    check_golden(SUM, "log_softmax", apply(stdlib("log_softmax"), SUM, stmt="N0.S0"), update_golden)


def test_stdlib_softmax_verifies_in_fp32():
    k = stdlib("softmax")
    assert_close_once(k, apply(k, ONLINE, stmt="N0.S0"))


def test_small_softmax_all_distributions():
    k = small("softmax", SMALL)
    assert_verified(k, apply(k, ONLINE, stmt="N0.S0"))
    k = small("log_softmax", SMALL)
    assert_verified(k, apply(k, SUM, stmt="N0.S0"))


def test_rows_starting_with_minus_inf():
    """Masked scores: the guard keeps the stream exact where exp(-inf - -inf) would be NaN."""
    from leirc.interp import run_source

    k = small("softmax", SMALL)
    new = apply(k, ONLINE, stmt="N0.S0")
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    x[1, :10] = -np.inf  # a masked prefix
    x[2, 5:] = -np.inf   # a masked suffix
    want = run_source(text(k), {"X": x})["Y"]
    got = run_source(text(new), {"X": x})["Y"]
    assert np.all(np.isfinite(got)) and np.allclose(got, want, rtol=1e-5, atol=1e-7)


def test_invariant_symbolic():
    """E = T*exp(-M) with T = sum of exp(x_k) is preserved by the streaming update, for
    any new max m2 (not only max(M, x)): E*exp(M - m2) + exp(x - m2) = (T + exp(x))*exp(-m2)."""
    import sympy as sp

    T, m1, m2, x = sp.symbols("T m1 m2 x", real=True)
    E = T * sp.exp(-m1)
    assert sp.simplify(E * sp.exp(m1 - m2) + sp.exp(x - m2) - (T + sp.exp(x)) * sp.exp(-m2)) == 0


def test_updates_carry_the_reduction_loop():
    new = apply(stdlib("softmax"), ONLINE, stmt="N0.S0")
    res = check_kernel(new)
    e_upd, _ = find_stmt(new, "N1.S1")
    info = res.info(e_upd)
    assert e_upd.target.name == "Rsum" and info.kind == "update" and info.carried == frozenset({"j"})
    with pytest.raises(NotApplicable, match="carries a dependence"):
        apply_step(new, Step.make("loop_parallelization", loop="N1.j"))
    apply_step(new, Step.make("loop_parallelization", loop="N1.i"))


def test_negatives():
    not_applicable(stdlib("softmax"), ONLINE, "not a max reduction", stmt="N1.S0")
    not_applicable(stdlib("layernorm"), ONLINE, "not a max reduction", stmt="N0.S0")
    # log_softmax: a max and a sum, but no exp(x - M)/E normalization
    not_applicable(stdlib("log_softmax"), ONLINE, "no normalization", stmt="N0.S0")
    not_applicable(stdlib("max_reduce_dim1"), SUM, "no later sum", stmt="N0.S0")
    other_x = kernel(stdlib_text("softmax").replace("exp(X^{f32,g}_{i,j} - Rmax^{f32,g}_{i});\n  ];\n  L^{256}",
                                                    "exp(2.0*X^{f32,g}_{i,j} - Rmax^{f32,g}_{i});\n  ];\n  L^{256}"))
    not_applicable(other_x, SUM, "no later sum", stmt="N0.S0")
    between = kernel(r"""\kernel k(A: f32[4, 8]) -> (E: f32[4]) {
      L^{4}_{i=0} L^{8}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,j}); ];
      L^{4}_{i=0} [ M^{f32,g}_{i} = M^{f32,g}_{i} + 1.0; ];
      L^{4}_{i=0} L^{8}_{j=0} [ E^{f32,g}_{i} = E^{f32,g}_{i} + exp(A^{f32,g}_{i,j} - M^{f32,g}_{i}); ];
    }""")
    not_applicable(between, SUM, "between the max and the sum write M", stmt="N0.S0")
    bound = kernel(r"""\kernel k(A: f32[4, 8]) -> (E: f32[4]) {
      L^{4}_{i=0} B^{8}_{tx=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, A^{f32,g}_{i,tx}); ];
      L^{4}_{i=0} B^{8}_{tx=0} [ E^{f32,g}_{i} = E^{f32,g}_{i} + exp(A^{f32,g}_{i,tx} - M^{f32,g}_{i}); ];
    }""")
    not_applicable(bound, SUM, "serial loop", stmt="N0.S0")


def test_trace_roundtrip():
    check_trace_roundtrip(stdlib_text("softmax"), [Step.make(ONLINE, stmt="N0.S0"),
                                                   Step.make("loop_parallelization", loop="N1.i")])
    check_trace_roundtrip(stdlib_text("log_softmax"), [Step.make(SUM, stmt="N0.S0")])
