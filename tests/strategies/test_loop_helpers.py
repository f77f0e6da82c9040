"""Helpers shared by the loop- and memory-strategy test modules (tests/strategies/test_loop_*.py,
test_mem_*.py), plus tests of the dependence machinery those strategies share
(leirc.strategies.loops: ``_injective``, ``_free_vars``).

It is named ``test_loop_*`` only to live next to the modules that import it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_module
from leirc.strategies import NotApplicable, Step, apply_step, enumerate_sites, get
from leirc.strategies.base import Context, parse_args
from leirc.strategies.loops import _free_vars, _injective
from strategy_harness import kernel_of, stdlib_text

STDLIB = Path(__file__).resolve().parents[2] / "stdlib"
STDLIB_NAMES = sorted(p.stem for p in STDLIB.glob("*.leir"))


def stdlib(name: str) -> A.Kernel:
    return kernel_of(stdlib_text(name))


def text(kernel: A.Kernel) -> str:
    return print_module(A.Module((kernel,)), "pretty")


def step(name: str, **args) -> Step:
    return Step.make(name, **args)


def apply(kernel: A.Kernel, name: str, **args) -> A.Kernel:
    return apply_step(kernel, Step.make(name, **args))


def numerics(kernel: A.Kernel, name: str, **args) -> str:
    s = get(name)
    return s.numerics_for(Context(kernel), parse_args(s, Step.make(name, **args).kwargs))


def not_applicable(kernel: A.Kernel, name: str, match: str, **args) -> None:
    """The step is rejected with a message matching ``match``."""
    with pytest.raises(NotApplicable, match=match):
        apply_step(kernel, Step.make(name, **args))


def assert_equivalent(before: A.Kernel, after: A.Kernel, numerics_class: str) -> None:
    """Numeric equivalence with the verifier (interpreter target, one seed, normal inputs)
    within the tolerance of the numerics class: every class must pass the verifier's
    tolerance; ``bitwise`` must moreover give bit-identical outputs."""
    try:
        from leirc.verify import verify
    except ImportError:  # pragma: no cover - the verifier is a separate component
        pytest.skip("leirc.verify is not available")
    rep = verify(text(after), text(before), target="interp", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures
    if numerics_class == "bitwise":
        assert rep.bitwise, f"not bitwise: max abs err {rep.max_abs_err}"


def _sample(steps: list, limit: int = 6) -> list:
    """All steps of a small site; first, middle and last of a large one (the argument
    domains are enumerated the same way, so the ends cover the extremes)."""
    if len(steps) <= limit:
        return steps
    return [steps[0], steps[len(steps) // 2], steps[-1]]


def check_all_sites(name: str, kernel_name: str) -> int:
    """Every site the strategy lists on a stdlib kernel applies and the result checks
    clean (apply_step re-checks and raises StrategyBug otherwise): every step of sites
    with up to 6 steps, the first, middle and last step of larger argument domains. The
    listing is deterministic. Returns the number of steps applied."""
    k = stdlib(kernel_name)
    res = check_kernel(k)
    sites = enumerate_sites(k, [name], res)
    again = enumerate_sites(k, [name], res)
    assert [s.to_json() for s in sites] == [s.to_json() for s in again]
    n = 0
    s = get(name)
    ctx = Context(k, res)
    for site in sites:
        assert site.strategy == name
        steps = site.steps()
        assert steps
        for st in _sample(steps):
            apply_step(k, st, result=res)
            n += 1
        assert s.numerics_for(ctx, parse_args(s, steps[0].kwargs)) in ("bitwise", "exact-in-reals", "approximate")
    return n


# ---------------------------------------------------------------------------
# tests of the shared dependence machinery


def test_injective_mixed_radix():
    r = {"io": (0, 3), "i": (0, 3), "j": (0, 7)}
    assert _injective({"io": 4, "i": 1}, r)
    assert _injective({"i": 8, "j": 1}, r)
    assert not _injective({"io": 3, "i": 1}, r)  # io*3+i: 0*3+3 == 1*3+0
    assert not _injective({"i": 1, "j": 1}, r)
    assert _injective({"i": 1}, {"i": (0, 0)})


def _pair(src: str, w_stmt: int = 0, r_stmt: int = 0, read: int | None = None):
    k = kernel_of(src)
    res = check_kernel(k)
    assert res.ok, res.diagnostics
    wsi, rsi = res.stmts[w_stmt], res.stmts[r_stmt]
    w = wsi.stmt.target
    reads = [a for a in A.walk(rsi.stmt.value) if isinstance(a, A.Access) and a.name == w.name]
    r = rsi.stmt.target if read is None else reads[read]
    seg = {l.var for l in wsi.loops}
    return _free_vars(seg, set(), wsi, w, rsi, r)


def test_free_vars_reduction_pins_spatial_loops():
    src = r"\kernel k(A:f32[4,8],B:f32[8,2])->(C:f32[4,2]){L^{4}_{i=0}L^{2}_{j=0}L^{8}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}"
    assert _pair(src) == {"k"}


def test_free_vars_scan_distance_one_loop():
    src = r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=if_then_else(1<=j,C^{f32,g}_{i,j-1},0.0)+A^{f32,g}_{i,j};];}"
    assert _pair(src, read=0) == {"j"}


def test_free_vars_split_subscript_is_injective():
    src = r"\kernel k(A:f32[8])->(C:f32[8]){L^{2}_{io=0}L^{4}_{i=0}[C^{f32,g}_{io*4+i}=A^{f32,g}_{io*4+i}*2;];}"
    assert _pair(src) == frozenset()


def test_free_vars_non_injective_subscript_pins_nothing():
    src = r"\kernel k(A:f32[4,4])->(C:f32[7]){L^{4}_{i=0}L^{4}_{j=0}[C^{f32,g}_{i+j}=A^{f32,g}_{i,j};];}"
    assert _pair(src) == {"i", "j"}


def test_free_vars_disjoint_constants_never_meet():
    src = r"\kernel k(A:f32[4])->(C:f32[2,4]){L^{4}_{i=0}[C^{f32,g}_{0,i}=A^{f32,g}_{i};C^{f32,g}_{1,i}=C^{f32,g}_{0,i}*2;];}"
    k = kernel_of(src)
    res = check_kernel(k)
    s0, s1 = res.stmts
    # C_{0,i} (written by S0) and C_{1,i} (written by S1): different rows, never the same element
    assert _free_vars({"i"}, set(), s1, s1.stmt.target, s0, s0.stmt.target) is None
