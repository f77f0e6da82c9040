"""Integer rewrites are honest (issue #30, item 4).

Signed integer overflow is an error in LEIR (docs/language.md §8), so regrouping a signed
sum is exact only where no partial result can leave the type; unsigned sums wrap and
regroup freely. The SymPy strategies prove identities over the reals, which integer floor
division and modulo are not: they are not offered there.
"""

from __future__ import annotations

import pytest

from leirc.lang.checker import check_text
from leirc.strategies.base import NotApplicable, Step, all_strategies, enumerate_sites, plan_step


def _result(src: str):
    cf = check_text(src, "<test>")
    assert not [d for d in cf.diagnostics if d.is_error], [d.message for d in cf.diagnostics]
    return cf.results[0]


def _sum(dt: str, acc: str, n: int = 64) -> str:
    return (f"\\kernel k(A: {dt}[4, {n}]) -> (C: {acc}[4]) {{ L^{{4}}_{{i=0}} L^{{{n}}}_{{j=0}} "
            f"[ C^{{{acc},g}}_{{i}} = C^{{{acc},g}}_{{i}} + {acc}(A^{{{dt},g}}_{{i,j}}); ]; }}")


REASSOCIATING = [Step.make("vectorized_partial_sums", stmt="N0.S0", lanes=4),
                 Step.make("reduction_factorization", loop="N0.j", split=32)]


@pytest.mark.parametrize("step", REASSOCIATING, ids=lambda s: s.name)
@pytest.mark.parametrize("dt", ["i8", "i16", "i32"])
def test_signed_sum_that_may_overflow_is_not_regrouped(step, dt):
    """64 i8 terms can leave i8 in one grouping and not in another (the lanes' partial sums
    overflow where the serial sum does not, or the reverse)."""
    r = _result(_sum(dt, dt))
    with pytest.raises(NotApplicable, match="may overflow"):
        plan_step(r.kernel, step, result=r)
    assert step.name not in {s.strategy for s in enumerate_sites(r.kernel, result=r)}


@pytest.mark.parametrize("step", REASSOCIATING, ids=lambda s: s.name)
@pytest.mark.parametrize("dt,acc", [("i8", "i32"), ("i16", "i64"), ("u8", "u8"), ("u32", "u32")])
def test_sum_that_cannot_overflow_or_wraps_is_regrouped(step, dt, acc):
    r = _result(_sum(dt, acc))
    plan_step(r.kernel, step, result=r)  # i8 terms into i32: |partial| <= 64*128; unsigned wraps


def test_loop_reorder_of_a_signed_reduction_that_may_overflow_is_refused():
    src = (r"\kernel k(A: i32[4, 8, 8]) -> (C: i32[4]) { L^{4}_{i=0} L^{8}_{j=0} L^{8}_{k=0} "
           r"[ C^{i32,g}_{i} = C^{i32,g}_{i} + A^{i32,g}_{i,j,k}; ]; }")
    r = _result(src)
    with pytest.raises(NotApplicable, match="may overflow"):
        plan_step(r.kernel, Step.make("loop_reorder", loop="N0.i", order="i,k,j"), result=r)
    orders = [o for s in enumerate_sites(r.kernel, ["loop_reorder"], result=r) for o in s.domains["order"]]
    assert "i,k,j" not in orders and "j,i,k" in orders  # (j,i,k keeps the order of each sum)


MATH = [s.name for s in all_strategies() if s.level == "math"]


def test_algebra_not_offered_on_integer_floor_division():
    """``(A*A - 1) // (A - 1)`` was "cancelled" to ``A + 1``: true over the reals, false at
    A = 1, where LEIR's integer division by zero gives 0."""
    r = _result(r"\kernel k(A: i32[8]) -> (C: i32[8]) { L^{8}_{i=0} [ "
                r"C^{i32,g}_{i} = (A^{i32,g}_{i}*A^{i32,g}_{i} - 1) // (A^{i32,g}_{i} - 1); ]; }")
    assert not [s.strategy for s in enumerate_sites(r.kernel, result=r) if s.strategy in MATH]
    with pytest.raises(NotApplicable, match="integer floor division or modulo"):
        plan_step(r.kernel, Step.make("cancellation", stmt="N0.S0"), result=r)


def test_algebra_not_offered_on_integer_modulo():
    r = _result(r"\kernel k(A: i32[8]) -> (C: i32[8]) { L^{8}_{i=0} [ "
                r"C^{i32,g}_{i} = A^{i32,g}_{i}%4 + A^{i32,g}_{i}%4 * 2; ]; }")
    assert not [s.strategy for s in enumerate_sites(r.kernel, result=r) if s.strategy in MATH]


def test_algebra_still_offered_on_float_statements():
    r = _result(r"\kernel k(B: f32[8]) -> (D: f32[8]) { L^{8}_{i=0} [ "
                r"D^{f32,g}_{i} = (B^{f32,g}_{i}*B^{f32,g}_{i} - 1.0) / (B^{f32,g}_{i} - 1.0); ]; }")
    assert {s.strategy for s in enumerate_sites(r.kernel, result=r)} & set(MATH)
