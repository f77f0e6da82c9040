"""Canonical form and fingerprint (leirc.lang.canonical), the Program facade and the
engine's apply/cache (leirc.engine.program)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from leirc.engine.program import E_NO_KERNEL, Invalid, Program, RewriteCache, apply, replay
from leirc.interp import random_inputs, run
from leirc.lang import ast as A
from leirc.lang.canonical import canonical, canonical_text, fingerprint
from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_kernel
from leirc.strategies import NotApplicable, Step, all_strategies
from leirc.strategies import base as B
from leirc.strategies.rewrite import find_loop, iter_loops
from strategy_harness import docstring_example, kernel_of, stdlib_text
from strategy_harness import REPO

STDLIB_NAMES = sorted(p.stem for p in (REPO / "stdlib").glob("*.leir"))

TWO = (r"\kernel k(A:f32[8],B:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];"
       r"L^{8}_{i=0}[D^{f32,g}_{i}=B^{f32,g}_{i}+1;];}")
SUMS = (r"\kernel k(A:f32[4,8],B:f32[4,8])->(C:f32[4],D:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}"
        r"+A^{f32,g}_{i,j};];L^{4}_{i=0}L^{8}_{j=0}[D^{f32,g}_{i}=D^{f32,g}_{i}+B^{f32,g}_{i,j};];}")
RED = (r"\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=0}"
       r"[T^{f32,g}_{i}=T^{f32,g}_{i}+A^{f32,g}_{i,j};];L^{4}_{i=0}[C^{f32,g}_{i}=T^{f32,g}_{i}*2;];}")


def steps(*specs):
    return [Step.make(name, **args) for name, args in specs]


# ---------------------------------------------------------------------------
# canonical / fingerprint


def test_split_in_either_order_gives_one_fingerprint():
    """Splitting nest 0 then nest 1 names the outer loops io, ioa; the other order ioa, io."""
    k = kernel_of(TWO)
    a = B.replay(k, steps(("loop_split", {"loop": "N0.i", "factor": 2}), ("loop_split", {"loop": "N1.i", "factor": 2})))
    b = B.replay(k, steps(("loop_split", {"loop": "N1.i", "factor": 2}), ("loop_split", {"loop": "N0.i", "factor": 2})))
    assert {lp.var for _, lp, p in iter_loops(a) if p[0] == 0} == {"io", "i"}
    assert {lp.var for _, lp, p in iter_loops(b) if p[0] == 0} != {"io", "i"}
    assert a != b
    assert fingerprint(a) == fingerprint(b)
    assert canonical(a) == canonical(b)


def test_fresh_intermediates_in_either_order_give_one_fingerprint():
    """rfactor of either reduction first: the partial sums are D,E / F,G or F,G / D,E."""
    k = kernel_of(SUMS)
    s0 = ("reduction_factorization", {"loop": "N0.j", "split": 4})
    a = B.replay(k, steps(s0, ("reduction_factorization", {"loop": "N3.j", "split": 4})))
    b = B.replay(k, steps(("reduction_factorization", {"loop": "N1.j", "split": 4}), s0))
    assert a != b and fingerprint(a) == fingerprint(b)


def test_renaming_loops_and_intermediates_keeps_the_fingerprint():
    k = kernel_of(RED)
    renamed = kernel_of(RED.replace("_{i", "_{r").replace("{i=", "{r=").replace(",i}", ",r}")
                        .replace("T^", "Acc^").replace("j", "q"))
    assert print_kernel(renamed) != print_kernel(k)
    assert fingerprint(renamed) == fingerprint(k)


@pytest.mark.parametrize("what,old,new", [
    ("extent", "L^{8}_{j=0}", "L^{4}_{j=0}"),
    ("index", "A^{f32,g}_{i,j};", "A^{f32,g}_{i,7-j};"),
    ("constant", "T^{f32,g}_{i}*2", "T^{f32,g}_{i}*3"),
    ("operator", "T^{f32,g}_{i}*2", "T^{f32,g}_{i}+2"),
    ("loop kind", "L^{4}_{i=0}[C", "P^{4}_{i=0}[C"),
    ("scope", "T^{f32,g}", "T^{f32,l}"),
    ("dtype", "f32", "f64"),
    ("parameter name", "A", "X"),
])
def test_semantic_changes_change_the_fingerprint(what, old, new):
    assert old in RED
    changed = kernel_of(RED.replace(old, new))
    assert check_kernel(changed).ok, what
    assert fingerprint(changed) != fingerprint(kernel_of(RED)), what


def test_the_kernel_name_is_part_of_the_fingerprint():
    k = kernel_of(RED)
    assert fingerprint(replace(k, name="other")) != fingerprint(k)


def test_bound_loops_keep_their_axis():
    tx = r"\kernel k(A:f32[8])->(C:f32[8]){B^{8}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];}"
    txj = tx.replace("tx", "txj")
    ty = tx.replace("tx", "ty")
    assert fingerprint(kernel_of(tx)) == fingerprint(kernel_of(txj))
    assert fingerprint(kernel_of(tx)) != fingerprint(kernel_of(ty))
    c = canonical(kernel_of(txj))
    assert c.body[0].var == "txv0"


def test_generated_names_never_capture_a_parameter():
    src = r"\kernel k(v0:f32[4],T0:f32[4])->(C:f32[4]){L^{4}_{i=0}[D^{f32,g}_{i}=v0^{f32,g}_{i}+T0^{f32,g}_{i};];L^{4}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i};];}"
    c = canonical(kernel_of(src))
    assert check_kernel(c).ok
    text = print_kernel(c)
    assert "L^{4}_{v1=0}" in text and "T1^{f32,g}" in text and "v0^{f32,g}" in text and "T0^{f32,g}" in text


@pytest.mark.parametrize("name", STDLIB_NAMES)
def test_canonical_is_idempotent_and_checks_clean_on_the_stdlib(name):
    k = kernel_of(stdlib_text(name))
    c = canonical(k)
    assert canonical(c) == c
    res = check_kernel(c)
    assert res.ok, [d.message for d in res.diagnostics if d.is_error]
    assert sorted(d.code for d in res.diagnostics) == sorted(d.code for d in check_kernel(k).diagnostics)
    assert fingerprint(c) == fingerprint(k) and len(fingerprint(k)) == 64
    assert canonical_text(k) == print_kernel(c)


AFTERS = sorted(s.name for s in all_strategies())


@pytest.mark.parametrize("name", AFTERS)
def test_canonical_interprets_identically(name):
    """The docstring examples (before and after every strategy) are small programs with
    reductions, scans, intermediates, sibling loops and bound loops: the canonical form
    computes bit-identical outputs."""
    before, step, after_text = docstring_example(name)
    for k in (before, kernel_of(after_text)):
        c = canonical(k)
        r0, r1 = check_kernel(k), check_kernel(c)
        assert r1.ok
        ins = random_inputs(k, seed=0, dist="normal")
        out0, out1 = run(r0, ins), run(r1, ins)
        assert out0.keys() == out1.keys()
        for key in out0:
            np.testing.assert_array_equal(out0[key], out1[key])


def test_canonical_works_on_programs_with_errors():
    from leirc.lang.parser import parse

    k = parse(r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{q};];}").module.kernels[0]
    c = canonical(k)
    assert "A^{f32,g}_{q}" in print_kernel(c) and len(fingerprint(k)) == 64


# ---------------------------------------------------------------------------
# Program


def test_from_text_gives_a_program_or_diagnostics():
    p = Program.from_text(RED, file="r.leir")
    assert isinstance(p, Program) and p.ok and p.file == "r.leir" and p.source == RED
    bad = Program.from_text(r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=;];}", file="b.leir")
    assert isinstance(bad, Invalid) and not bad.ok and [d.code for d in bad.diagnostics] == ["E001"]
    assert bad.diagnostics[0].file == "b.leir"
    unchecked = Program.from_text(r"\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{q};];}")
    assert isinstance(unchecked, Invalid) and "E012" in [d.code for d in unchecked.diagnostics]
    assert isinstance(Program.from_text(b"\xff"), Invalid)


def test_from_text_selects_a_kernel():
    two = RED + "\n" + RED.replace(r"\kernel k(", r"\kernel m(")
    many = Program.from_text(two)
    assert isinstance(many, Invalid) and many.diagnostics[0].code == E_NO_KERNEL
    assert "2 kernels" in many.diagnostics[0].message
    assert Program.from_text(two, kernel="m").kernel.name == "m"
    missing = Program.from_text(two, kernel="z")
    assert isinstance(missing, Invalid) and "no kernel named 'z'" in missing.diagnostics[0].message


def test_from_kernel_and_constructor():
    k = kernel_of(RED)
    assert Program.from_kernel(k).kernel is k
    bad = A.Kernel("k", k.inputs, k.outputs, ())
    assert isinstance(Program.from_kernel(bad), Invalid)
    with pytest.raises(ValueError):
        Program(bad)
    with pytest.raises(ValueError):
        Program(k, check_kernel(kernel_of(RED)))  # facts of another tree


def test_addresses_by_ref_and_path():
    p = Program.from_text(RED)
    assert p.loop_at("N0.j") is p.loop_at((0, 0)) and p.loop_at("N0.j").extent == 8
    st = p.stmt_at("N0.S0")
    assert st is p.stmt_at((0, 0, 0)) and st.target.name == "T"
    assert p.item_at("N1") is p.kernel.body[1] and p.item_at(1) is p.kernel.body[1]
    assert p.path_of("N1.S0") == (1, 0) and p.ref_of((1, 0)) == "N1.S0" and p.ref_of((0, 0)) == "N0.j"
    assert [r for r, _ in p.loops()] == ["N0.i", "N0.j", "N1.i"]
    assert [r for r, _ in p.stmts()] == ["N0.S0", "N1.S0"]
    for bad in ("N9", "N0.z", "N0.S7", (5,), True):
        with pytest.raises(KeyError):
            p.path_of(bad)
    with pytest.raises(KeyError):
        p.loop_at("N0.S0")
    with pytest.raises(KeyError):
        p.stmt_at("N0.i")


def test_facts_are_keyed_by_path_not_identity():
    a, b = Program.from_text(RED), Program.from_text(RED)
    assert a.stmt_at("N0.S0") is not b.stmt_at("N0.S0")
    ia, ib = a.info_at("N0.S0"), b.info_at((0, 0, 0))
    assert ia.kind == ib.kind == "reduce" and ia.op == "+" and ia.reduce_vars == ("j",)
    assert ia.stmt is a.stmt_at("N0.S0") and ib.stmt is b.stmt_at("N0.S0")
    assert a.info_at("N1.S0").kind == "assign"
    with pytest.raises(KeyError):
        a.info_at("N0.i")


def test_equality_and_hash_by_fingerprint():
    k = kernel_of(TWO)
    a = Program.from_kernel(B.replay(k, steps(("loop_split", {"loop": "N0.i", "factor": 2}),
                                              ("loop_split", {"loop": "N1.i", "factor": 2}))))
    b = Program.from_kernel(B.replay(k, steps(("loop_split", {"loop": "N1.i", "factor": 2}),
                                              ("loop_split", {"loop": "N0.i", "factor": 2}))))
    assert a.kernel != b.kernel and a == b and len({a, b}) == 1
    assert a != Program.from_kernel(k)
    c = a.canonical()
    assert c == a and c.kernel == canonical(a.kernel) and c.result.ok
    assert Program.from_text(a.print()) == a


# ---------------------------------------------------------------------------
# engine apply


def test_apply_returns_rewrite_with_program_and_handles():
    p = Program.from_text(RED)
    rw = apply(p, Step.make("loop_split", loop="N0.j", factor=4), cache=RewriteCache())
    assert isinstance(rw.program, Program) and rw.program.kernel is rw.kernel
    assert rw.program.result is rw.result  # the engine's one re-check, reused
    assert rw.program.loop_at(rw.created["outer"]).extent == 2
    assert rw.program.loop_at(rw.created["inner"]).extent == 4
    assert rw.touched == ((0,),) and rw.numerics == "bitwise"


def test_apply_caches_by_fingerprint_and_step(monkeypatch):
    cache = RewriteCache()
    p = Program.from_text(RED)
    st = Step.make("loop_split", loop="N0.j", factor=4)
    calls = []
    real = B.plan_step
    monkeypatch.setattr(B, "plan_step", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    first = apply(p, st, cache=cache)
    again = apply(Program.from_text(RED), st, cache=cache)  # re-parsed: an equal tree
    assert again is first and len(calls) == 1 and cache.hits == 1
    with pytest.raises(NotApplicable, match="does not divide"):
        apply(p, Step.make("loop_split", loop="N0.j", factor=3), cache=cache)
    with pytest.raises(NotApplicable, match="does not divide"):
        apply(p, Step.make("loop_split", loop="N0.j", factor=3), cache=cache)
    assert len(calls) == 2 and cache.hits == 2


def test_cache_is_not_fooled_by_alpha_equivalent_spellings():
    """Same fingerprint, other loop names: step N0.j means nothing in the renamed program."""
    cache = RewriteCache()
    p = Program.from_text(RED)
    q = Program.from_text(RED.replace("j", "q"))
    assert p == q
    st = Step.make("loop_split", loop="N0.j", factor=4)
    apply(p, st, cache=cache)
    with pytest.raises(NotApplicable, match="no loop 'N0.j'"):
        apply(q, st, cache=cache)


def test_cache_is_bounded():
    cache = RewriteCache(maxsize=2)
    p = Program.from_text(RED)
    for f in (2, 4, 2, 4):
        apply(p, Step.make("loop_split", loop="N0.j", factor=f), cache=cache)
    apply(p, Step.make("loop_split", loop="N1.i", factor=2), cache=cache)
    assert len(cache) == 2


def test_replay_and_program_apply():
    p = Program.from_text(TWO)
    trace = steps(("loop_split", {"loop": "N0.i", "factor": 2}), ("loop_vectorization", {"loop": "N0.i"}))
    q = replay(p, trace, cache=RewriteCache())
    assert q.kernel == B.replay(p.kernel, trace)
    assert p.apply(trace[0], cache=RewriteCache()).program.loop_at("N0.io").extent == 4


def test_bad_steps_are_not_applicable_not_crashes():
    p = Program.from_text(RED)
    with pytest.raises(NotApplicable, match="unknown strategy 'loop_splt'"):
        apply(p, Step.make("loop_splt", loop="N0.j", factor=4), cache=RewriteCache())
    with pytest.raises(NotApplicable, match="expected an integer"):
        apply(p, Step("loop_split", (("factor", {"a": 1}), ("loop", "N0.j"))), cache=RewriteCache())
    with pytest.raises(NotApplicable, match="expected an integer, got 4.5"):
        apply(p, Step.make("loop_split", loop="N0.j", factor=4.5), cache=RewriteCache())
