"""The front end's shortcuts agree with the general computations they skip (issue #14).

* The checker skips the literal/overflow walk of a subscript whose magnitude bound stays in
  int64 (``_small_subscript``), reads the bounds pass's accesses from the shared node list
  where no guard refines the facts (``has_guard``), reuses the structure pass's types, and
  builds its node list recursively up to a depth. Each is compared here with the general
  path (the shortcut switched off) on random programs whose literals, loop ranges and
  subscript constants sit at the edges of the integer types, where the overflow rules fire.
* The tokenizer's regex orders its alternatives for speed; it is compared with the same
  alternatives in Lark's priority order on random character soup.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leirc.lang import ast as A
from leirc.lang import checker as C
from leirc.lang import fastparse as F
from leirc.lang.parser import parse

# ---------------------------------------------------------------------------
# checker: shortcuts on vs off


def _snapshot(module) -> list:
    out = []
    for r in C.check_module(module):
        out.append((
            [(d.code, d.severity, d.message, str(d.span), tuple(d.notes)) for d in r.diagnostics],
            [(t.name, t.dtype, t.scope, t.role, t.shape, t.read, t.written) for t in r.tensors.values()],
            [(s.kind, s.op, s.reduce_vars, sorted(s.carried)) for s in r.stmts],
        ))
    return out


def _general_path(monkeypatch):
    """Switch every shortcut off: the checker then computes as it did before them."""
    monkeypatch.setattr(C._Checker, "_small_subscript", lambda self, idx, facts: False)
    monkeypatch.setattr(C._Nodes, "has_guard", lambda self, n: True)
    monkeypatch.setattr(C, "_RECURSION_DEPTH", -1)  # the explicit-stack node list
    original_init = C._Checker.__init__

    def init(self, kernel):
        original_init(self, kernel)
        self._types_complete = False  # type with types.node_type, as before

    monkeypatch.setattr(C._Checker, "__init__", init)


EDGES = [0, 1, 2, 7, 100, 127, 128, 255, 256, 32767, 32768, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1,
         2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64]
INT_TYPES = ["i8", "i16", "i32", "i64", "u8", "u32", "u64"]
TYPES = INT_TYPES + ["f16", "f32", "bool"]

# the parser rejects integer literals beyond int64, so most are drawn inside it
literal = st.sampled_from([e for e in EDGES if e < 2**63]) | st.integers(0, 2**63 - 1) | st.sampled_from([2**63, 2**64])
index = st.sampled_from(["i", "j"])


@st.composite
def int_expr(draw, depth=0):
    """A subscript-like integer expression over the loop indices i and j, often a
    product of a large literal and an index (the overflow the shortcut must not hide)."""
    if depth > 3 or draw(st.integers(0, 2)) == 0:
        return draw(index) if draw(st.booleans()) else str(draw(literal))
    kind = draw(st.sampled_from(["+", "-", "*", "*", "//", "%", "neg", "max", "ite", "cast", "big"]))
    if kind == "big":
        return f"{draw(st.sampled_from([2**30, 2**31, 2**32, 2**61, 2**62, 2**63 - 1]))} * {draw(index)}"
    a, b = draw(int_expr(depth + 1)), draw(int_expr(depth + 1))
    if kind == "neg":
        return f"-({a})"
    if kind == "max":
        return f"max({a}, {b})"
    if kind == "ite":
        return f"if_then_else({draw(index)} < {draw(literal)}, {a}, {b})"
    if kind == "cast":
        return f"{draw(st.sampled_from(INT_TYPES))}({a})"
    if kind in ("//", "%"):
        # no space before the operator: ' %' would start a comment
        return f"({a}){kind}{draw(st.sampled_from(['1', '3', '64', str(2**40), 'j']))}"
    return f"({a}) {kind} ({b})"


@st.composite
def program(draw):
    # (hypothesis favours the first choices: the large extents come first)
    ei, ej = draw(st.sampled_from([2**31 - 1, 4, 8, 100, 2**20, 1])), draw(st.sampled_from([2**30, 16, 3, 1]))
    si = draw(st.sampled_from([0, 0, 5]))
    out_t = draw(st.sampled_from(TYPES))
    # a subscript: random, or a large literal times an index (plus a little), the shape
    # whose overflow the subscript shortcut must leave to the general path
    big = st.sampled_from([2**62, 2**33 + 1, 2**31, 2**61 - 1, 2**32 - 1]) | literal
    sub = draw(st.builds(lambda lit, v, w: f"{lit} * {v} + {w} - 1", big, index, index) | int_expr())
    val = draw(int_expr())
    lit = draw(literal)
    neg = "-" if draw(st.booleans()) else ""
    rhs = draw(st.sampled_from([f"{val}", f"{neg}{lit} + X^{{{out_t},g}}_{{i}}", f"{neg}{lit}.5 * {val}",
                                f"I^{{i64,g}}_{{{sub}}} + {val}", f"if_then_else({sub} < {lit}, {val}, 0)",
                                # guarded accesses (provable only under the guard), and several
                                # out-of-range accesses, whose errors come in the walk's order
                                f"if_then_else({sub} < 64, I^{{i64,g}}_{{{sub}}}, I^{{i64,g}}_{{i}})",
                                f"X^{{{out_t},g}}_{{{sub}}} + I^{{i64,g}}_{{j - 1}} * X^{{{out_t},g}}_{{i + {lit}}}"]))
    return (f"\\kernel k(X: {out_t}[{max(1, ei)}], I: i64[64]) -> (Y: {out_t}[{ei + si}]) {{\n"
            f"  L^{{{ei}}}_{{i={si}}}L^{{{ej}}}_{{j=0}}[Y^{{{out_t},g}}_{{{sub}}} = {rhs};];\n"
            f"}}\n")


@settings(max_examples=250, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(program())
def test_checker_shortcuts_match_the_general_path(monkeypatch, text):
    pr = parse(text)
    if pr.module is None or any(d.is_error for d in pr.diagnostics):
        return
    fast = _snapshot(pr.module)
    with monkeypatch.context() as m:
        _general_path(m)
        slow = _snapshot(pr.module)
    assert fast == slow, text


def test_shortcuts_are_taken_and_reported_codes_fire():
    """The random programs above reach the overflow rules (so the comparison means
    something), and the shortcut does skip the common subscripts."""
    text = ("\\kernel k(X: i32[8]) -> (Y: i32[8]) {\n"
            "  L^{8}_{i=0}[Y^{i32,g}_{i} = X^{i32,g}_{i} + 3000000000 + i * 4611686018427387904 * 4;];\n"
            "}\n")
    r = C.check_module(parse(text).module)[0]
    assert {d.code for d in r.diagnostics} >= {"E025", "E026"}
    k = parse(text).module.kernels[0]
    ch = C._Checker(k)
    loops = tuple(n for n in ch.nodes.order if isinstance(n, A.Loop))
    facts = ch._facts(loops)
    st_ = next(n for n in ch.nodes.order if isinstance(n, A.Assign))
    assert ch._small_subscript(st_.target.indices[0], facts)
    assert ch._sub_iv[(id(st_.target.indices[0]), id(facts))] == (0, 7)


def test_deep_chain_takes_the_explicit_stack():
    """A long operator chain is deeper than the recursive node-list builder goes: the
    explicit-stack builder takes over and gives the same walk and subtree ends."""
    terms = " + ".join(f"X^{{f32,g}}_{{{k % 4}}}" for k in range(600))
    text = f"\\kernel k(X: f32[4]) -> (Y: f32[4]) {{\n  L^{{4}}_{{i=0}}[Y^{{f32,g}}_{{i}} = {terms};];\n}}\n"
    k = parse(text).module.kernels[0]
    nodes = C._Nodes(k)
    assert [id(n) for n in nodes.order] == [id(n) for n in A.walk(k)]
    deep = max(nodes.order, key=lambda n: nodes.size(n) if isinstance(n, A.BinOp) else 0)
    assert nodes.size(deep) == len(list(A.walk(deep)))
    small = C._Nodes(parse("\\kernel k(X: f32[4]) -> (Y: f32[4]) { L^{4}_{i=0}[Y^{f32,g}_{i} = X^{f32,g}_{i};]; }").module.kernels[0])
    assert small._end == C._Nodes._build_iterative(small.order[0], [], {})


# ---------------------------------------------------------------------------
# tokenizer: speed order vs priority order

#: the token regex with its alternatives in Lark's priority order (as it was written first)
PRIORITY_ORDER = re.compile(
    rf"([ \t\f\r\n]*)((?<!\S)%[^\n]*|{F._HEADER}|{F._BACKSLASH}|{F._NUMBER}|{F._NAME}"
    r"|\*\*|//|->|\^\{|_\{|<=|>=|==|!=|&&|\|\||[-+*/%<>&|()\[\]{};,:=]|[^ \t\f\r\n])")

SOUP = "LPVUBCijkxA_{}^,=-+*/%<>&|!()[];:.0123456789eE \n\t\\\u00a0" + "\\frac\\left(\\le"


@settings(max_examples=2000, deadline=None, derandomize=True)
@given(st.text(alphabet=SOUP, max_size=40))
def test_token_regex_order_does_not_change_tokens(s):
    assert F._TOKEN.findall(s) == PRIORITY_ORDER.findall(s)


@pytest.mark.parametrize("s", ["L^{4}_{i=0}", "L_{i=0}^{4}", "B^{2}_{tx=0}", "Lx+Bt", "a % b", "% c\nx",
                               "x %y", "a**b*c//d/e", "a->b", "a<=b>=c==d!=e", "a&&b||c&d|e", "\\frac{1}{2}",
                               "\\left(x\\right)", ".5e3 1. 2e-3 7", "U_{j=1}^{3}", "P ^ { 8 } _ { k = - 2 }"])
def test_token_regex_on_the_tricky_spellings(s):
    assert F._TOKEN.findall(s) == PRIORITY_ORDER.findall(s)
