"""Strategies listed for a site always apply (issue #30, item 8).

Property: every listed site of every strategy, on every stdlib kernel (reduced sizes,
``leirc.interp.shrink``) and on seeded random programs with private tiles (``\\alloc``),
gives steps that plan and re-check (``plan_step``): a listed step that raises
``NotApplicable`` or ``StrategyBug`` is a listing bug. Two steps per site (the first and
the last of its argument domains) keep it fast.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from leirc.interp.shrink import shrink
from leirc.lang import ast as A
from leirc.lang.checker import check_text
from leirc.lang.load import load_kernel
from leirc.strategies.base import NotApplicable, StrategyBug, Step, enumerate_sites, plan_step

STDLIB = sorted((Path(__file__).resolve().parent.parent / "stdlib").glob("*.leir"))


def _failures(result) -> list[str]:
    out = []
    for site in enumerate_sites(result.kernel, result=result):
        steps = site.steps()
        pick = steps if len(steps) <= 2 else [steps[0], steps[-1]]
        for st in pick:
            try:
                plan_step(result.kernel, st, result=result)
            except (NotApplicable, StrategyBug) as e:
                out.append(f"{st.name} {dict(st.args)}: {type(e).__name__}: {str(e)[:200]}")
    return out


@pytest.mark.parametrize("path", STDLIB, ids=[p.stem for p in STDLIB])
def test_listed_sites_apply_on_stdlib(path):
    small, _ = shrink(load_kernel(path.read_text()).kernel)
    assert not _failures(small)


def random_private_program(seed: int) -> str:
    """A kernel whose nest allocates a tile per iteration of its outer loops, fills it (an
    assignment or a reduction, over a loop of any kind) and reads it into the output."""
    r = random.Random(seed)
    n, m = r.choice([4, 6, 8]), r.choice([2, 4, 8])
    ko = r.choice(["P", "L", "U", "V"])
    kf = r.choice(["L", "U", "V"])
    kc = r.choice(["L", "U", "V"])
    scope = r.choice(["l", "l", "s", "g"])
    reduce = r.random() < 0.5
    t = f"T^{{f32,{scope}}}"
    if reduce:
        fill = f"L^{{3}}_{{r=0}} {kf}^{{{m}}}_{{j=0}} [ {t}_{{j}} = {t}_{{j}} + A^{{f32,g}}_{{i,j}} * B^{{f32,g}}_{{r,j}}; ];"
    else:
        fill = f"{kf}^{{{m}}}_{{j=0}} [ {t}_{{j}} = A^{{f32,g}}_{{i,j}} * 2.0 + B^{{f32,g}}_{{0,j}}; ];"
    use = r.choice([f"{t}_{{j}} + 1.0", f"exp({t}_{{j}})", f"{t}_{{j}} * {t}_{{{m - 1}-j}}"])
    return (f"\\kernel k(A: f32[{n}, {m}], B: f32[3, {m}]) -> (C: f32[{n}, {m}]) {{\n"
            f"  {ko}^{{{n}}}_{{i=0}} [\n    \\alloc T^{{f32,{scope}}}[{m}];\n    {fill}\n"
            f"    {kc}^{{{m}}}_{{j=0}} [ C^{{f32,g}}_{{i,j}} = {use}; ];\n  ];\n}}\n")


@pytest.mark.parametrize("seed", range(12))
def test_listed_sites_apply_on_programs_with_private_tiles(seed):
    src = random_private_program(seed)
    cf = check_text(src, "<rand>")
    assert not [d for d in cf.diagnostics if d.is_error], src
    failures = _failures(cf.results[0])
    assert not failures, src + "\n".join(failures)


def test_storage_scope_of_a_private_tile_moves_its_alloc():
    """set_storage_scope on an \\alloc tensor used to rename the accesses only (E014 against
    the \\alloc's scope: an internal error)."""
    src = random_private_program(0).replace("f32,s}", "f32,l}").replace("f32,g}[", "f32,l}[")
    src = src.replace("T^{f32,g}", "T^{f32,l}").replace("T^{f32,s}", "T^{f32,l}")
    r = check_text(src, "<t>").results[0]
    rw = plan_step(r.kernel, Step.make("set_storage_scope", tensor="T", scope="g"), result=r)
    allocs = [n for n in A.walk(rw.kernel) if isinstance(n, A.Alloc)]
    assert [a.scope for a in allocs] == ["g"]


def test_storage_layout_not_listed_for_private_tiles():
    r = check_text(random_private_program(1), "<t>").results[0]
    names = {s.fixed.get("tensor") for s in enumerate_sites(r.kernel, ["set_storage_layout"], result=r)}
    assert "T" not in names
    with pytest.raises(NotApplicable, match="private tensor"):
        plan_step(r.kernel, Step.make("set_storage_layout", tensor="T", kind="flatten"), result=r)
