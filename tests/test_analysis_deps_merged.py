"""The merged dependence analysis against the three tests it replaces.

Before :mod:`leirc.analysis`, the checker (E040 and the kind-changing strategies), the
loop strategies (``_free_vars``: reorder, tiling) and the graph strategies
(``_may_reverse``, ``_injective``: fusion, fission, reduction splitting) each had their
own test; tests/analysis_legacy.py keeps verbatim copies. Here:

* on every stdlib kernel and on random legal strategy sequences applied to them, the
  merged test accepts at least what each old test accepted (no lost optimization);
* on small random programs, where brute force decides the truth, the merged answers are
  exactly the truth, and whatever an old test accepted that brute force confirms, the
  merged test accepts too;
* ``loop_reorder`` and ``loop_tiling`` never accept a reordering that brute force shows
  reverses a dependence.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

import analysis_legacy as legacy
import pytest
from conftest import STDLIB, require_compat
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_deps_bruteforce import PROFILE, VARS, access_pairs, brute_pair, eval_index, instances, programs, render

from leirc.analysis import deps
from leirc.lang import ast as A
from leirc.lang.checker import check_kernel, check_text
from leirc.lang.parser import parse, parse_record
from leirc.strategies import NotApplicable, Step, apply_step, enumerate_sites
from leirc.strategies import graph as G
from leirc.strategies import loops as L
from leirc.strategies.rewrite import nest_chain

STDLIB_FILES = sorted(STDLIB.glob("*.leir"))
SMALL = ["relu", "softmax", "layernorm", "rmsnorm", "sum_reduce_dim1", "gemm_bias_relu", "gemv", "mse_loss"]
STRUCTURAL = {"loop_split", "loop_tiling", "loop_reorder", "loop_fusion", "loop_parallelization", "loop_vectorization",
              "loop_binding", "loop_unrolling", "operator_fusion", "operator_fission", "compute_inline",
              "cache_read_write", "tensor_split_to_decouple_operators", "reduction_factorization"}


def _kernel(path) -> A.Kernel:
    return parse(path.read_text(encoding="utf-8")).module.kernels[0]


# ---------------------------------------------------------------------------
# the merged test accepts at least what each old one accepted


def _compare_on(kernel: A.Kernel, counts: dict, res=None) -> None:
    res = res or check_kernel(kernel)
    loops = [n for n in A.walk(kernel) if isinstance(n, A.Loop)]
    for lp in loops:
        inside = [si for si in res.stmts if any(l is lp for l in si.loops)]
        for wsi, w, rsi, r in access_pairs(inside):
            old = legacy.independent(lp, wsi, w, rsi, r)
            new = deps.loop_independent(lp, wsi, w, rsi, r)
            counts["carried"] += 1
            counts["carried_gained"] += new and not old
            assert new or not old, ("E040 test lost", lp.var, str(w), str(r))
        chain = nest_chain(lp)
        if len(chain) >= 2:
            seg = {l.var for l in chain}
            for wsi, w, rsi, r in access_pairs(inside):
                outer = {l.var for l in wsi.loops[:[id(x) for x in wsi.loops].index(id(lp))]}
                old = legacy.free_vars(seg, outer, wsi, w, rsi, r)
                new = L._free_vars(seg, outer, wsi, w, rsi, r)  # noqa: SLF001 (the function under test)
                counts["free"] += 1
                if old is None:
                    assert new is None, ("reorder test lost a 'never touch'", str(w), str(r))
                else:
                    assert new is None or new <= old, ("reorder test lost", str(w), str(r), old, new)
                    counts["free_gained"] += new is None or new < old
    for item in kernel.body:
        perfect = G._perfect(item)  # noqa: SLF001
        if perfect is None or not perfect[0]:
            continue
        nest, stmts = perfect
        accs = [a for st_ in stmts for a in G._stmt_accesses(st_)]  # noqa: SLF001
        for (f, wf), (g, wg) in itertools.product(accs, accs):
            if f.name != g.name or not (wf or wg):
                continue
            old = legacy.may_reverse(f, g, nest)
            new = G._may_reverse(f, g, nest)  # noqa: SLF001
            counts["reverse"] += 1
            counts["reverse_gained"] += old and not new
            assert old or not new, ("fusion/fission test lost", str(f), str(g))
        for st_ in stmts:
            if legacy.injective_acc(st_.target, nest):
                assert G._injective(st_.target, nest)  # noqa: SLF001


@pytest.mark.parametrize("path", STDLIB_FILES, ids=[p.stem for p in STDLIB_FILES])
def test_stdlib_merged_accepts_what_the_old_tests_accepted(path):
    counts = defaultdict(int)
    _compare_on(_kernel(path), counts)


def _compat_kernels():
    compat = require_compat()
    recs = [json.loads(x) for x in (compat / "steptp_emitted_level1.jsonl").read_text().splitlines() if x.strip()]
    base = {r["model"]: r for r in recs}
    out = [(r["model"], parse_record(r)) for r in recs]
    for line in (compat / "steptp_strategy_outputs.jsonl").read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            out += [(f"{rec['model']}/{rec['strategy']}/{i}", parse_record(base[rec["model"]], text))
                    for i, text in enumerate([rec["original"], *rec["transformed"]])]
    return out


def test_compat_merged_accepts_what_the_old_tests_accepted():
    """The Step-TP corpus (level-1 programs and the reference's strategy outputs), where
    bound loops over mixed-radix subscripts such as ``E_{c*768+tx}`` are common."""
    counts = defaultdict(int)
    n = 0
    for name, pr in _compat_kernels():
        if not pr.ok:
            continue
        res = check_kernel(pr.module.kernels[0])
        if any(d.is_error and d.code != "E040" for d in res.diagnostics):
            continue  # names/shapes broken: the dependence facts are incomplete
        _compare_on(pr.module.kernels[0], counts, res)
        n += 1
    assert n > 100 and counts["carried"] > 500, (n, dict(counts))


def _walk(kernel, draw_index, length):
    for _ in range(length):
        steps = [s for site in enumerate_sites(kernel) if site.strategy in STRUCTURAL for s in site.steps(limit=3)]
        if not steps:
            break
        try:
            kernel = apply_step(kernel, steps[draw_index(len(steps))])
        except NotApplicable:
            continue
    return kernel


@settings(max_examples=10, **PROFILE)
@given(st.sampled_from(SMALL), st.integers(1, 4), st.data())
def test_random_sequences_merged_accepts_what_the_old_tests_accepted(name, length, data):
    kernel = _walk(_kernel(STDLIB / f"{name}.leir"), lambda n: data.draw(st.integers(0, n - 1)), length)
    _compare_on(kernel, defaultdict(int))


# ---------------------------------------------------------------------------
# small programs: exact against brute force, and never worse than an old test that was right


def _touching(si1, a1, si2, a2):
    """Every (instance of a1, instance of a2) touching one element."""
    by_elem = defaultdict(list)
    for env in instances(si2):
        by_elem[tuple(eval_index(i, env) for i in a2.indices)].append(env)
    for env in instances(si1):
        for env2 in by_elem.get(tuple(eval_index(i, env) for i in a1.indices), ()):
            yield env, env2


@settings(max_examples=100, **PROFILE)
@given(programs(perfect=True, min_depth=2))
def test_small_programs_free_vars_and_reverse_are_exact(prog):
    res = check_text(render(prog, "LLL")).results[0]
    nest_item = res.kernel.body[2]
    chain = nest_chain(nest_item)
    head = chain[0]
    seg = {l.var for l in chain}
    inside = [si for si in res.stmts if any(l is head for l in si.loops)]
    for wsi, w, rsi, r in access_pairs(inside):
        pairs = list(_touching(wsi, w, rsi, r))
        truth = None if not pairs else frozenset(v for e1, e2 in pairs for v in seg if e1[v] != e2[v])
        new = L._free_vars(seg, set(), wsi, w, rsi, r)  # noqa: SLF001
        old = legacy.free_vars(seg, set(), wsi, w, rsi, r)
        assert new == truth, (str(w), str(r), new, truth)
        old_right = truth is None or (old is not None and truth <= old)
        if old_right:
            assert new is None or (old is not None and new <= old)
        # fusion/fission: may the second access run at a lexicographically earlier iteration?
        order = [l.var for l in chain]
        rev = any(tuple(e2[v] for v in order) < tuple(e1[v] for v in order) for e1, e2 in pairs)
        assert G._may_reverse(w, r, chain) == rev, (str(w), str(r))  # noqa: SLF001


def _reorder_is_legal(res, chain, order_new) -> bool:
    """Brute force: no two instances touching one element (one a write) run in the
    opposite order after the permutation, except a pure reduction's accumulator across
    its reduction loops (reassociated on purpose)."""
    old_order = [l.var for l in chain]
    inside = [si for si in res.stmts if any(l is chain[0] for l in si.loops)]
    for wsi, w, rsi, r in access_pairs(inside):
        for e1, e2 in _touching(wsi, w, rsi, r):
            a, b = tuple(e1[v] for v in old_order), tuple(e2[v] for v in old_order)
            c, d = tuple(e1[v] for v in order_new), tuple(e2[v] for v in order_new)
            if (a < b) != (c < d) or (a > b) != (c > d):
                differ = {v for v in old_order if e1[v] != e2[v]}
                if wsi is rsi and wsi.kind == "reduce" and wsi.operand is not None and differ <= set(wsi.reduce_vars):
                    continue
                return False
    return True


@settings(max_examples=80, **PROFILE)
@given(programs(perfect=True, min_depth=2))
def test_loop_reorder_never_accepts_an_illegal_order(prog):
    src = render(prog, "LLL")
    res = check_text(src).results[0]
    kernel = res.kernel
    chain = nest_chain(kernel.body[2])
    names = [l.var for l in chain]
    for perm in itertools.permutations(names):
        if list(perm) == names:
            continue
        step = Step.make("loop_reorder", loop=f"N2.{names[0]}", order=",".join(perm))
        try:
            apply_step(kernel, step)
        except NotApplicable:
            continue
        assert _reorder_is_legal(res, chain, list(perm)), (src, perm)


def _tiled_key(env, lp, inner, fo, fi):
    i, j = env[lp.var] - lp.start, env[inner.var] - inner.start
    return (i // fo, j // fi, i % fo, j % fi)


@settings(max_examples=80, **PROFILE)
@given(programs(perfect=True, min_depth=2), st.sampled_from([2, 4]), st.sampled_from([2, 4]))
def test_loop_tiling_never_accepts_an_illegal_tiling(prog, fo, fi):
    src = render(prog, "LLL")
    res = check_text(src).results[0]
    chain = nest_chain(res.kernel.body[2])
    lp, inner = chain[0], chain[1]
    if lp.start or inner.start or lp.extent % fo or inner.extent % fi or lp.extent <= fo or inner.extent <= fi:
        return
    step = Step.make("loop_tiling", loop=f"N2.{lp.var}", factor_outer=fo, factor_inner=fi)
    try:
        apply_step(res.kernel, step)
    except NotApplicable:
        return
    inside = [si for si in res.stmts if any(l is lp for l in si.loops)]
    for wsi, w, rsi, r in access_pairs(inside):
        for e1, e2 in _touching(wsi, w, rsi, r):
            a, b = (e1[lp.var], e1[inner.var]), (e2[lp.var], e2[inner.var])
            c, d = _tiled_key(e1, lp, inner, fo, fi), _tiled_key(e2, lp, inner, fo, fi)
            if (a < b) != (c < d):
                differ = {v for v in (lp.var, inner.var) if e1[v] != e2[v]}
                reduction = wsi is rsi and wsi.kind == "reduce" and wsi.operand is not None
                assert reduction and differ <= set(wsi.reduce_vars), (src, fo, fi, str(w), str(r))


def test_vars_cover_the_generated_nests():
    assert VARS == ("i", "j", "k") and callable(brute_pair)
