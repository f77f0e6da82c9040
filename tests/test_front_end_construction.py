"""The front end's fast paths for building trees and for the garbage collector: the fast
constructors give ordinary frozen nodes, the collector pause restores what it found, and a
parse + check leaves no reference cycles behind (so pausing the collector defers nothing
that only it could free)."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
from pathlib import Path

import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_module, check_text
from leirc.lang.parser import parse

ROOT = Path(__file__).resolve().parents[1]

SPAN = A.Span(1, 2, 3, 4, 5, 6)
#: one instance of every node class, built with the dataclass's own __init__
SAMPLES = [
    SPAN,
    A.Const(3, span=SPAN),
    A.Const(2.5),
    A.Var("i", span=SPAN),
    A.Access("X", "f32", "g", (A.Var("i"),), span=SPAN),
    A.BinOp("+", A.Var("i"), A.Const(1), span=SPAN),
    A.Neg(A.Var("i"), span=SPAN),
    A.Compare(("<",), (A.Var("i"), A.Const(4)), span=SPAN),
    A.Call("exp", (A.Var("i"),), span=SPAN),
    A.Assign(A.Access("Y", "f32", "g", ()), A.Const(1.0), span=SPAN, comments=(A.Comment("leading", "c"),)),
    A.Align("X", 0, 4, 1, span=SPAN),
    A.Loop("L", 4, "i", 0, (), span=SPAN),
    A.Region("pipe", (), span=SPAN),
    A.Alloc("T", "f32", "l", (4,), span=SPAN),
    A.Param("X", "f32", (4,), span=SPAN),
    A.Kernel("k", (), (), (), False, span=SPAN),
    A.Module((), span=SPAN),
]


@pytest.mark.parametrize("node", SAMPLES, ids=lambda n: type(n).__name__)
def test_fast_constructor_builds_the_same_frozen_node(node):
    cls = type(node)
    values = [getattr(node, f.name) for f in dataclasses.fields(cls)]
    built = A.fast_constructor(cls)(*values)
    assert type(built) is cls
    assert built == node and hash(built) == hash(node) and repr(built) == repr(node)
    # every field, trivia included, is the very object passed in
    assert all(getattr(built, f.name) is v for f, v in zip(dataclasses.fields(cls), values))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, dataclasses.fields(cls)[0].name, None)
    assert pickle.loads(pickle.dumps(built)) == node
    assert copy.deepcopy(built) == node
    first = dataclasses.fields(cls)[0].name
    assert dataclasses.replace(built, **{first: getattr(node, first)}) == node


def test_fast_constructor_refuses_what_it_cannot_build():
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        x: int

    with pytest.raises(TypeError):
        A.fast_constructor(NoSlots)


def test_fast_parser_nodes_are_ordinary_nodes():
    text = (ROOT / "stdlib" / "sdpa.leir").read_text(encoding="utf-8")
    fast = parse(text, parser="fast").module
    lark = parse(text, parser="lark").module
    assert fast == lark
    for a, b in zip(A.walk(fast), A.walk(lark)):
        assert type(a) is type(b)
        assert a.span == b.span and type(a.span) is A.Span
        assert getattr(a, "comments", ()) == getattr(b, "comments", ())


def test_collector_paused_restores_the_collector():
    assert gc.isenabled()
    with A.collector_paused():
        assert not gc.isenabled()
        with A.collector_paused():  # nested: the outer scope decides
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()

    @A.collector_paused()
    def fails():
        assert not gc.isenabled()
        raise ValueError("boom")

    with pytest.raises(ValueError):
        fails()
    assert gc.isenabled()


def test_collector_paused_leaves_a_disabled_collector_disabled():
    gc.disable()
    try:
        with A.collector_paused():
            pass
        assert not gc.isenabled()
        parse("\\kernel k(X: f32[4]) -> (Y: f32[4]) { L^{4}_{i=0}[Y^{f32,g}_{i} = X^{f32,g}_{i};]; }")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_front_end_calls_run_with_the_collector_paused(monkeypatch):
    from leirc.lang import checker as C
    from leirc.lang import parser as P

    seen = []

    def watching(real):
        def inner(*args, **kwargs):
            seen.append((real.__name__, gc.isenabled()))
            return real(*args, **kwargs)

        return inner

    monkeypatch.setattr(P, "parse_fast", watching(P.parse_fast))
    monkeypatch.setattr(C._Checker, "run", watching(C._Checker.run))
    text = "\\kernel k(X: f32[4]) -> (Y: f32[4]) { L^{4}_{i=0}[Y^{f32,g}_{i} = X^{f32,g}_{i};]; }"
    assert check_text(text).ok
    assert check_module(parse(text).module)[0].ok
    assert seen == [("parse_fast", False), ("run", False)] * 2
    assert gc.isenabled()


def test_parse_and_check_leave_no_cycles():
    """Everything a parse + check allocates is freed by reference counting: the collector,
    paused during them, has nothing to find afterwards."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "stdlib").rglob("*.leir")))
    check_module(parse(text).module)  # warm: first-use caches are not garbage
    gc.collect()
    gc.disable()
    try:
        results = check_module(parse(text).module)
        assert results and all(r.ok for r in results)
        del results
        assert gc.collect() == 0
    finally:
        gc.enable()
