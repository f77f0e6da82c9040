"""Strategy preconditions are checked conditions, and numerics classes are honest (issue 9, item 4).

* A value ``z`` introduced by ``additive_split``, ``multiplicative_split``,
  ``exponential_split`` or ``expand_cancellation`` must be provably finite; a ``-inf``
  padded tensor (max pooling) and anything read from it is rejected (the interpreter would
  give NaN where the original is finite).
* A rewrite that can overflow or lose range at ordinary magnitudes is ``approximate``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "strategies"))

from leirc.lang.checker import check_kernel  # noqa: E402
from leirc.lang.parser import parse  # noqa: E402
from leirc.strategies import Step, get  # noqa: E402
from leirc.strategies.base import NotApplicable, apply_step  # noqa: E402


def kernel(src: str):
    r = parse(src)
    assert r.ok, r.diagnostics
    k = r.module.kernels[0]
    assert check_kernel(k).ok, check_kernel(k).diagnostics
    return k


def apply(k, name, **args):
    return apply_step(k, Step.make(name, **args))


def not_applicable(k, name, match, **args):
    with pytest.raises(NotApplicable, match=match):
        apply(k, name, **args)


# 1-D max pooling with -inf padding, then a statement that uses both the pool and the padded row
POOL = kernel(r"""\kernel k(A: f32[8]) -> (C: f32[8], D: f32[8]) {
  L^{10}_{i=0} [ P^{f32,g}_{i} = if_then_else(1 <= i < 9, A^{f32,g}_{i-1}, -inf); ];
  L^{8}_{i=0} L^{3}_{r=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, P^{f32,g}_{i+r}); ];
  L^{8}_{i=0} [ C^{f32,g}_{i} = M^{f32,g}_{i} + A^{f32,g}_{i}; ];
  L^{8}_{i=0} [ D^{f32,g}_{i} = exp(A^{f32,g}_{i} - M^{f32,g}_{i}) + (A^{f32,g}_{i} + 1.0)/(A^{f32,g}_{i}*A^{f32,g}_{i} + 1.0); ];
}
""")


def test_additive_split_rejects_minus_inf_padding():
    # old code: accepted (tensors were finite real symbols), the interpreter then gives NaN
    not_applicable(POOL, "additive_split", "finite.*'P' may hold an infinity", stmt="N2.S0", z="P^{f32,g}_{i+1}")


def test_additive_split_rejects_a_value_read_from_the_padding():
    not_applicable(POOL, "additive_split", "finite", stmt="N2.S0", z="2.0*P^{f32,g}_{i}")


def test_additive_split_rejects_division_by_a_maybe_zero_value():
    not_applicable(POOL, "additive_split", "finite", stmt="N2.S0", z="1.0/A^{f32,g}_{i}")


def test_additive_split_accepts_inputs_literals_and_finite_intermediates():
    apply(POOL, "additive_split", stmt="N2.S0", z="A^{f32,g}_{i}")
    apply(POOL, "additive_split", stmt="N2.S0", z="2.5")
    apply(POOL, "additive_split", stmt="N2.S0", z="exp(A^{f32,g}_{i})")
    # a padded tensor guarded away from its -inf elements is fine ...
    fin = kernel(r"""\kernel k(A: f32[8]) -> (C: f32[8]) {
      L^{8}_{i=0} [ T^{f32,g}_{i} = exp(A^{f32,g}_{i}); ];
      L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i} * 2.0; ];
      L^{8}_{i=0} [ C^{f32,g}_{i} = C^{f32,g}_{i} + T^{f32,g}_{i}; ];
    }""")
    apply(fin, "additive_split", stmt="N1.S0", z="T^{f32,g}_{i}")


def test_multiplicative_split_rejects_exp_of_the_padding():
    # exp(P) is positive (so "non-zero" held before) but exp(+inf) is not finite
    not_applicable(POOL, "multiplicative_split", "finite", stmt="N2.S0", z="exp(P^{f32,g}_{i})")


def test_exponential_split_rejects_the_padding():
    not_applicable(POOL, "exponential_split", "finite", stmt="N3.S0", z="P^{f32,g}_{i}")
    apply(POOL, "exponential_split", stmt="N3.S0", z="A^{f32,g}_{i}*0.5")


def test_expand_cancellation_rejects_exp_of_the_padding():
    at = "(A^{f32,g}_{i}+1.0)/(A^{f32,g}_{i}*A^{f32,g}_{i}+1.0)"
    not_applicable(POOL, "expand_cancellation", "finite", stmt="N3.S0", z="exp(P^{f32,g}_{i})", at=at)


def test_finite_tensors_analysis():
    from leirc.algebra.signs import tensor_finite

    fin = tensor_finite(check_kernel(POOL))
    assert "P" not in fin  # -inf literal in a branch
    assert "M" not in fin  # conservatively: a max over values that may be -inf
    assert "A" in fin


def test_finite_tensors_divisions_and_logs():
    from leirc.algebra.signs import tensor_finite

    k = kernel(r"""\kernel k(X: f32[2, 4]) -> (Y: f32[2, 4], Z: f32[2, 4], W: f32[2, 4]) {
      L^{2}_{i=0} L^{4}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, X^{f32,g}_{i,j}); ];
      L^{2}_{i=0} L^{4}_{j=0} [ E^{f32,g}_{i} = E^{f32,g}_{i} + exp(X^{f32,g}_{i,j} - M^{f32,g}_{i}); ];
      L^{2}_{i=0} L^{4}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - M^{f32,g}_{i})/E^{f32,g}_{i}; ];
      L^{2}_{i=0} L^{4}_{j=0} [ Z^{f32,g}_{i,j} = log(X^{f32,g}_{i,j}); ];
      L^{2}_{i=0} L^{4}_{j=0} [ W^{f32,g}_{i,j} = X^{f32,g}_{i,j}/X^{f32,g}_{i,0}; ];
    }""")
    fin = tensor_finite(check_kernel(k))
    assert {"X", "M", "E", "Y"} <= fin  # E is a positive sum, so exp(...)/E is finite
    assert "Z" not in fin  # log of a value that may be <= 0
    assert "W" not in fin  # division by a value that may be 0


# -- numerics classes ------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "expand_powsimp", "exponential_split", "multiplicative_split", "additive_split", "together",
    "logsimp", "expand_factorization", "apart", "expand_cancellation", "cancellation",
])
def test_range_losing_rewrites_are_approximate(name):
    assert get(name).numerics == "approximate"


@pytest.mark.parametrize("name", ["factorization", "powsimp", "expand_log", "collect", "expand_collect",
                                  "online_softmax", "flashattention_wo_tiling"])
def test_regroupings_stay_exact_in_reals(name):
    assert get(name).numerics == "exact-in-reals"


def test_cancellation_numerics_per_application():
    from leirc.strategies.base import Context, parse_args

    s = get("cancellation")
    poly = kernel(r"""\kernel k(X: f32[8]) -> (Y: f32[8]) {
      L^{8}_{i=0} [ Y^{f32,g}_{i} = (X^{f32,g}_{i}**2 - 1)/(X^{f32,g}_{i} + 1); ]; }""")
    ctx = Context(poly)
    args = parse_args(s, {"stmt": "N0.S0"})
    s.check(ctx, args)
    assert s.numerics_for(ctx, args) == "exact-in-reals"
    th = kernel(r"""\kernel k(X: f32[8]) -> (Y: f32[8]) {
      L^{8}_{i=0} [ Y^{f32,g}_{i} = (exp(X^{f32,g}_{i}) - exp(-X^{f32,g}_{i}))/(exp(X^{f32,g}_{i}) + exp(-X^{f32,g}_{i})); ]; }""")
    ctx = Context(th)
    args = parse_args(s, {"stmt": "N0.S0"})
    s.check(ctx, args)
    assert s.numerics_for(ctx, args) == "approximate"  # exp(2*x) overflows at x > 44 in f32


def test_expand_powsimp_softmax_overflows_where_the_original_does_not():
    """Why expand_powsimp is approximate: at logits of 100 the split softmax is NaN."""
    import numpy as np

    from leirc.interp import run

    sm = kernel(r"""\kernel k(X: f32[2, 4]) -> (Y: f32[2, 4]) {
      L^{2}_{i=0} L^{4}_{j=0} [ M^{f32,g}_{i} = max(M^{f32,g}_{i}, X^{f32,g}_{i,j}); ];
      L^{2}_{i=0} L^{4}_{j=0} [ E^{f32,g}_{i} = E^{f32,g}_{i} + exp(X^{f32,g}_{i,j} - M^{f32,g}_{i}); ];
      L^{2}_{i=0} L^{4}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - M^{f32,g}_{i})/E^{f32,g}_{i}; ];
    }""")
    split = apply(sm, "expand_powsimp", stmt="N2.S0")
    x = {"X": np.array([[100.0, 99.0, 98.0, 97.0], [1.0, 2.0, 3.0, 4.0]], dtype=np.float32)}
    with np.errstate(all="ignore"):
        ref = run(check_kernel(sm), x)["Y"]
        new = run(check_kernel(split), x)["Y"]
    assert np.isfinite(ref).all()
    assert not np.isfinite(new[0]).all()  # exp(100) = inf in f32: inf*0 or inf/E
    assert np.allclose(new[1], ref[1], rtol=1e-5)
