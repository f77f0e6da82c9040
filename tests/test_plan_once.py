"""Plan once, re-check once: every registered strategy computes its rewrite in one
``plan`` and the engine checks the result exactly once per ``Program.apply``; the handles
a Rewrite reports resolve in the new program, and ``Rewrite.forward`` carries a handle
over a later rewrite (or says it cannot)."""

from __future__ import annotations

import sys

import pytest

from leirc.engine.program import Program, RewriteCache
from leirc.lang.checker import check_kernel as _real_check_kernel
from leirc.strategies import NotApplicable, Step, all_strategies, enumerate_sites
from leirc.strategies.base import Context, Strategy, plan_step
from leirc.strategies.rewrite import find_loop
from strategy_harness import docstring_example, kernel_of, stdlib_text

#: small stdlib kernels that together list a site for most strategies
KERNELS = ["relu", "gemv", "softmax", "matmul_square", "layernorm"]
#: sites tried per strategy and kernel (the first ones listed): bounds the run time
SITES_PER_KERNEL = 3

NAMES = [s.name for s in all_strategies()]


@pytest.fixture(scope="module")
def programs():
    return {name: Program.from_text(stdlib_text(name)) for name in KERNELS}


@pytest.fixture(scope="module")
def sites(programs):
    """strategy name -> [(program, site)], listed before any counting starts."""
    out: dict = {}
    for p in programs.values():
        per: dict = {}
        for site in enumerate_sites(p.kernel, result=p.result):
            per.setdefault(site.strategy, []).append(site)
        for name, listed in per.items():
            out.setdefault(name, []).extend((p, s) for s in listed[:SITES_PER_KERNEL])
    return out


class Counts:
    def __init__(self):
        self.check_kernel = 0
        self.recheck = 0
        self.plan = 0


@pytest.fixture
def counts(monkeypatch):
    """Count check_kernel calls wherever a leirc module bound the function, and calls of
    Context.recheck."""
    c = Counts()

    def counting(kernel):
        c.check_kernel += 1
        return _real_check_kernel(kernel)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("leirc") and getattr(mod, "check_kernel", None) is _real_check_kernel:
            monkeypatch.setattr(mod, "check_kernel", counting)
    real_recheck = Context.recheck

    def recheck(self, *a, **kw):
        c.recheck += 1
        return real_recheck(self, *a, **kw)

    monkeypatch.setattr(Context, "recheck", recheck)
    return c


def _count_plan(monkeypatch, s: Strategy, c: Counts) -> None:
    real = s.plan

    def plan(ctx, args):
        c.plan += 1
        return real(ctx, args)

    monkeypatch.setattr(s, "plan", plan)


def _assert_handles(s: Strategy, rw) -> None:
    """Every handle names something in the new program. A role may be absent where this
    application does not create it (tensor_split_to_decouple_operators on a spatial loop
    makes no partial results); the docstring examples, which create all, are checked for
    the full set in test_rewrite.py."""
    assert set(rw.created) <= {r.name for r in s.creates}, (rw.step, dict(rw.created))
    for r in s.creates:
        if r.name not in rw.created:
            continue
        ref = rw.created[r.name]
        if r.kind == "loop":
            rw.program.loop_at(ref)  # KeyError if the handle names nothing there
        else:
            assert ref in rw.program.result.tensors, (rw.step, r.name, ref)
            assert any(si.stmt.target.name == ref for si in rw.program.result.stmts), (rw.step, ref)


def _apply_counted(monkeypatch, counts: Counts, s: Strategy, program: Program, step: Step):
    counts.check_kernel = counts.recheck = counts.plan = 0
    try:
        rw = program.apply(step, cache=RewriteCache())
    except NotApplicable:
        rw = None
    assert counts.plan == 1, f"{step}: planned {counts.plan} times"
    if rw is not None:
        assert counts.check_kernel == 1, f"{step}: {counts.check_kernel} checks of the result (one re-check expected)"
    else:
        assert counts.check_kernel <= 1, f"{step}: {counts.check_kernel} checks before refusing"
    assert counts.recheck <= 1, f"{step}: the planner re-checked {counts.recheck} candidates"
    return rw


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_is_one_plan(name):
    """The protocol's one entry point: no strategy keeps a separate check/apply pair."""
    cls = type(next(s for s in all_strategies() if s.name == name))
    assert cls.plan is not Strategy.plan, f"{name} has no plan()"
    assert cls.check is Strategy.check and cls.apply is Strategy.apply, f"{name} still defines check/apply"


@pytest.mark.parametrize("name", NAMES)
def test_one_plan_and_one_recheck_per_apply(name, programs, sites, counts, monkeypatch):
    s = next(x for x in all_strategies() if x.name == name)
    _count_plan(monkeypatch, s, counts)
    k, step, _ = docstring_example(name)
    applied = 0
    for program, st in [(Program.from_kernel(k), step)] + [(p, site.first_step()) for p, site in sites.get(name, [])]:
        rw = _apply_counted(monkeypatch, counts, s, program, st)
        if rw is not None:
            _assert_handles(s, rw)
            assert rw.before is program.kernel
            applied += 1
    assert applied >= 1  # the docstring example at least


def test_o1_checks_each_result_once(counts):
    """-O1 hands each step's check result to the next step: the input is checked once,
    then one re-check per applied step."""
    from leirc.opt.o1 import optimize

    res = optimize(kernel_of(stdlib_text("matmul_square")), "llvm")
    assert len(res.steps) == 4
    assert counts.check_kernel == 1 + len(res.steps)


# ---------------------------------------------------------------------------
# Rewrite.forward

NESTS = (r"\kernel k(A:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[T^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];"
         r"L^{8}_{i=0}[C^{f32,g}_{i}=T^{f32,g}_{i}+1.0;];L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}-1.0;];}")


def _plan(text_or_kernel, name, **args):
    k = kernel_of(text_or_kernel) if isinstance(text_or_kernel, str) else text_or_kernel
    return plan_step(k, Step.make(name, **args))


def test_forward_over_a_binding_keeps_the_inner_loop():
    k = kernel_of(r"\kernel k(A:f32[1024])->(C:f32[1024]){L^{1024}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}")
    split = _plan(k, "loop_split", loop="N0.i", factor=256)
    bound = _plan(split.kernel, "loop_binding", loop=split.created["outer"], axis="bx")
    inner = bound.forward(split.created["inner"])
    lp, path = find_loop(bound.kernel, inner)
    assert (lp.var, lp.extent, path) == ("i", 256, (0, 0))
    assert bound.forward(split.created["outer"]) == bound.created["bound"] == "N0.bxio"


def test_forward_shifts_loops_past_a_removed_nest():
    rw = _plan(NESTS, "compute_inline", nest=0)
    assert rw.forward("N2.i") == "N1.i"  # untouched nest after the change
    assert rw.forward("N0.i") is None  # the producer is gone
    assert rw.forward("N1.i") is None  # the reader was rewritten (T inlined)
    assert rw.forward("T") is None and rw.forward("A") == "A"


def test_forward_follows_swapped_nests():
    rw = _plan(NESTS, "expression_reorder", nest=1)
    assert rw.forward("N1.i") == "N2.i" and rw.forward("N2.i") == "N1.i"
    assert rw.forward("N0.i") == "N0.i" and rw.forward("N1.S0") == "N2.S0"


def test_forward_over_reorder_and_split():
    k = kernel_of(stdlib_text("matmul_square"))
    rw = _plan(k, "loop_reorder", loop="N0.i", order="i,k,j")
    for v in "ijk":
        assert find_loop(rw.kernel, rw.forward(f"N0.{v}"))[0].var == v
    split = _plan(rw.kernel, "loop_split", loop="N0.j", factor=16)
    assert split.forward("N0.j") is None  # split in two: the handles name the parts
    assert split.forward("N0.k") == "N0.k"
    assert split.forward("N0.S0") == "N0.S0"


def test_forward_over_fusion_and_tiling():
    k = kernel_of(r"\kernel k(A:f32[8])->(C:f32[8]){L^{2}_{io=0}L^{4}_{i=0}[C^{f32,g}_{io*4+i}=A^{f32,g}_{io*4+i}*2;];}")
    fused = _plan(k, "loop_fusion", loop="N0.io")
    assert fused.forward("N0.io") is None and fused.forward("N0.i") == fused.created["fused"] == "N0.i"
    t = _plan(kernel_of(r"\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}"),
              "loop_tiling", loop="N0.i", factor_outer=2, factor_inner=4)
    assert t.forward("N0.S0") == "N0.S0" and t.forward("N0.i") is None


def test_forward_needs_the_old_kernel():
    from leirc.strategies.base import Rewrite

    with pytest.raises(ValueError, match="planned on"):
        Rewrite(kernel_of(NESTS)).forward("N0.i")


# ---------------------------------------------------------------------------
# sites_at: the sites an editor offers at a cursor, without listing the whole kernel


def _focus_nodes(kernel, path):
    from leirc.strategies.rewrite import get_at

    return [get_at(kernel, path[:k]) for k in range(1, len(path) + 1)]


@pytest.mark.parametrize("name", ["matmul_square", "softmax"])
def test_sites_at_is_the_full_listing_restricted_to_the_cursor(name):
    """At every item, the sites whose anchor (as the editor layer resolves it) is the item
    or encloses it: the same sites, order and domains as the whole-kernel listing."""
    from leirc.ide.anchors import anchor_node
    from leirc.strategies import sites_at
    from leirc.strategies.rewrite import iter_items

    p = Program.from_text(stdlib_text(name))
    full = enumerate_sites(p.kernel, result=p.result)
    anchors = [anchor_node(p.kernel, s.first_step()) for s in full]
    for path, _ in iter_items(p.kernel):
        nodes = _focus_nodes(p.kernel, path)
        want = [(s.strategy, s.fixed, s.domains) for s, a in zip(full, anchors) if any(a is n for n in nodes)]
        got = sites_at(p.kernel, path, result=p.result)
        assert [(s.strategy, s.fixed, s.domains) for s in got if not s.empty] == want, path


def test_sites_at_defers_domains_and_takes_references_and_positions():
    from leirc.strategies import sites_at

    p = Program.from_text(stdlib_text("matmul_square"))
    at = sites_at(p.kernel, "N0.j", result=p.result, strategies=["loop_reorder", "loop_split"])
    assert {s.strategy for s in at} == {"loop_reorder", "loop_split"}
    reorder = next(s for s in at if s.strategy == "loop_reorder")
    assert not reorder.resolved  # the legal orders are computed when asked for
    assert reorder.domains["order"] and reorder.resolved
    st = p.kernel.body[0].body[0].body[0].body[0]
    by_position = sites_at(p.kernel, st.span.line, st.span.col, result=p.result)
    by_path = sites_at(p.kernel, (0, 0, 0, 0), result=p.result)
    assert [(s.strategy, s.fixed) for s in by_position] == [(s.strategy, s.fixed) for s in by_path]
    assert any(s.fixed.get("stmt") == "N0.S0" for s in by_path)
    assert sites_at(p.kernel, (7,), result=p.result) == [] and sites_at(p.kernel, "N0.zz", result=p.result) == []
    assert sites_at(p.kernel, 1, 1, result=p.result) == []  # the kernel header: no item there
