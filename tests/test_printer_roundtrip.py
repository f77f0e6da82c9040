"""Property tests: the canonical printer and the parser are inverse to each other.

For random well-formed trees (tests/strategies_ast.py):

* ``parse(print(m)).module == m`` in both layouts, for whole modules, single declared
  kernels, bare kernel bodies and single expressions; also type-strictly (``Const(1)`` vs
  ``Const(1.0)``, which dataclass equality does not distinguish);
* ``print(parse(print(m))) == print(m)`` (formatting is idempotent);
* the two layouts describe the same tree, and compact bodies contain no whitespace;
* every span of the re-parsed tree points at the text it came from.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies_ast as S
from leirc.lang import ast as A
from leirc.lang.parser import parse
from leirc.lang.printer import COMPACT, PRETTY, format_const, print_body, print_expr, print_kernel, print_module

LAYOUTS = [COMPACT, PRETTY]
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _parse_ok(text: str) -> A.Module:
    res = parse(text)
    assert res.diagnostics == [], f"printed text does not re-parse cleanly:\n{text}\n{res.diagnostics}"
    assert res.module is not None
    assert S.ill_typed_parts(res.module) == []
    return res.module


def _line_col(src: str, offset: int) -> tuple[int, int]:
    return src.count("\n", 0, offset) + 1, offset - (src.rfind("\n", 0, offset) + 1) + 1


def _check_spans(src: str, m2: A.Module) -> None:
    """Every span of a tree parsed from ``src`` has consistent line/col/offsets and covers
    the text of its node."""
    for n in A.walk(m2):
        sp = n.span
        if sp is None:
            # an empty bare file has no position
            assert isinstance(n, (A.Module, A.Kernel)) and not src.strip(), n
            continue
        assert sp.line >= 1 and sp.col >= 1
        assert (sp.line, sp.col) == _line_col(src, sp.start), (type(n).__name__, sp)
        assert (sp.end_line, sp.end_col) == _line_col(src, sp.end), (type(n).__name__, sp)
        text = src[sp.start:sp.end]
        if isinstance(n, A.Var):
            assert text == n.name
        elif isinstance(n, A.Const):
            assert text == format_const(n.value)
        elif isinstance(n, (A.Access, A.Align, A.Param)):
            assert text.startswith(n.name), (text, n)
        elif isinstance(n, A.Assign):
            assert text.startswith(n.target.name), (text, n)
        elif isinstance(n, A.Call):
            assert text.startswith(n.func + "(") and text.endswith(")"), text
        elif isinstance(n, A.Loop):
            assert text.startswith(n.kind) and text.endswith(";"), text
        elif isinstance(n, A.Region):
            assert text.startswith("[^{" + n.tag + "}") and text.endswith("]^{" + n.tag + "};"), text
        elif isinstance(n, A.Kernel) and n.declared:
            assert text.startswith("\\kernel " + n.name) and text.endswith("}"), text


@pytest.mark.parametrize("layout", LAYOUTS)
@PROPERTY
@given(m=S.modules)
def test_module_roundtrip(m, layout):
    """parse(print(m)) == m (also type-strictly), print(parse(print(m))) == print(m), and
    the spans of the re-parsed tree point at the printed text."""
    text = print_module(m, layout)
    m2 = _parse_ok(text)
    assert m2 == m, text
    assert S.typed(m2) == S.typed(m), text
    assert print_module(m2, layout) == text  # idempotent formatting
    _check_spans(text, m2)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=S.modules)
def test_layouts_agree(m):
    assert _parse_ok(print_module(m, COMPACT)) == _parse_ok(print_module(m, PRETTY))


@pytest.mark.parametrize("layout", LAYOUTS)
@PROPERTY
@given(k=S.declared_kernel())
def test_kernel_roundtrip(k, layout):
    text = print_kernel(k, layout)
    m2 = _parse_ok(text)
    assert m2.kernels == (k,), text
    assert S.typed(m2.kernels[0]) == S.typed(k)
    assert print_kernel(m2.kernels[0], layout) == text


@pytest.mark.parametrize("layout", LAYOUTS)
@PROPERTY
@given(k=S.declared_kernel())
def test_kernel_body_roundtrip(k, layout):
    """The Step-TP body of a kernel (no signature) parses back to the same items."""
    text = print_body(k, layout)
    if layout == COMPACT:
        assert not any(c.isspace() for c in text), text
    m2 = _parse_ok(text)
    (k2,) = m2.kernels
    assert not k2.declared and k2.name == "main" and k2.inputs == () and k2.outputs == ()
    assert k2.body == k.body, text
    assert S.typed(k2.body) == S.typed(k.body)
    assert print_body(k2, layout) == text


@pytest.mark.parametrize("layout", LAYOUTS)
@PROPERTY
@given(e=S.exprs)
def test_expr_roundtrip(e, layout):
    text = "A^{f32,g}=" + print_expr(e, layout) + ";"
    (stmt,) = _parse_ok(text).kernels[0].body
    assert stmt.value == e, text
    assert S.typed(stmt.value) == S.typed(e)
    _check_spans(text, _parse_ok(text))


# ---------------------------------------------------------------------------
# targeted examples the strategies might reach only rarely


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "e",
    [
        A.Neg(A.Const(math.inf)),
        A.Const(5e-324),
        A.Const(1.7976931348623157e308),
        A.Const(2**63 - 1),
        A.Const(1e-05),
        A.Const(0.0),
        A.BinOp("**", A.BinOp("**", A.Var("a"), A.Var("b")), A.Var("c")),
        A.BinOp("**", A.Var("a"), A.BinOp("**", A.Var("b"), A.Var("c"))),
        A.BinOp("**", A.Neg(A.Var("a")), A.Neg(A.Var("b"))),
        A.Neg(A.BinOp("**", A.Var("a"), A.Var("b"))),
        A.Neg(A.Neg(A.Const(1))),
        A.BinOp("-", A.Var("a"), A.Neg(A.Var("b"))),
        A.BinOp("-", A.Var("a"), A.BinOp("-", A.Var("b"), A.Var("c"))),
        A.BinOp("%", A.Var("a"), A.BinOp("%", A.Var("b"), A.Var("c"))),
        A.BinOp("//", A.BinOp("*", A.Var("a"), A.Var("b")), A.Var("c")),
        A.BinOp("&", A.Var("a"), A.BinOp("&", A.Var("b"), A.Var("c"))),
        A.BinOp("&", A.BinOp("|", A.Var("a"), A.Var("b")), A.Var("c")),
        A.Compare(("<",), (A.Compare(("<",), (A.Var("a"), A.Var("b"))), A.Var("c"))),
        A.Compare(("<=", "<", "!="), (A.Const(1), A.Var("c"), A.Const(129), A.Neg(A.Const(100)))),
        A.Neg(A.Compare(("==",), (A.Var("a"), A.Var("b")))),
        A.Call("max", (A.Var("a"), A.Var("b"), A.Var("c"), A.Var("d"))),
        A.Call("if_then_else", (A.Compare(("<",), (A.BinOp("-", A.Var("a"), A.Const(1)), A.Const(0))),
                                A.Neg(A.Const(math.inf)), A.Access("D", "f32", "g", (A.Var("tx"),)))),
        A.Call("f32", (A.Var("a"),)),
        A.Access("H", "i64", "g", (A.Access("C", "i64", "g", (A.Var("tx"),)),)),
        A.Var("L"), A.Var("align"), A.Var("infx"), A.Var("if_then_else"), A.Var("f32"),
    ],
    ids=repr,
)
def test_tricky_expr_roundtrip(e, layout):
    text = "A^{f32,g}=" + print_expr(e, layout) + ";"
    (stmt,) = _parse_ok(text).kernels[0].body
    assert S.typed(stmt.value) == S.typed(e), text


@pytest.mark.parametrize("layout", LAYOUTS)
def test_empty_and_region_bodies_roundtrip(layout):
    s = A.Assign(A.Access("A", "f32", "g", (A.Var("i"),)), A.Const(1))
    cases = [
        A.Module((A.Kernel("main", (), (), (), declared=False),)),
        A.Module((A.Kernel("main", (), (), (A.Loop("L", 4, "i", 0, ()),), declared=False),)),
        A.Module((A.Kernel("main", (), (), (A.Region("ap_0", ()),), declared=False),)),
        A.Module((A.Kernel("main", (), (), (A.Loop("B", 4, "tx", 0, (A.Region("ap_0", (s,)),)),), declared=False),)),
        A.Module((A.Kernel("main", (), (), (A.Loop("B", 4, "tx", 0, (A.Loop("L", 2, "i", -3, (A.Region("t", (s, s)),)),)),),
                           declared=False),)),
        A.Module((A.Kernel("main", (), (), (A.Loop("L", 4, "i", 0, (A.Region("a", (s,)), A.Region("b", ()))),), declared=False),)),
        A.Module((A.Kernel("k", (), (), (), declared=True),)),
        A.Module((A.Kernel("k", (A.Param("x", "f32", ()),), (A.Param("y", "bool", (0, 1)),), (s,), declared=True),
                  A.Kernel("k2", (), (), (A.Align("D", -1, 4, 5),), declared=True))),
    ]
    for m in cases:
        text = print_module(m, layout)
        m2 = _parse_ok(text)
        assert m2 == m, text
        assert print_module(m2, layout) == text


@given(data=st.data())
@settings(max_examples=50, deadline=None)
def test_step_tp_chain_and_bracketed_nests_are_the_same_tree(data):
    """``L..L..[S;];`` and ``L..[L..[S;];];`` parse to the same Loop nest; the printer emits the chain."""
    k1, k2 = data.draw(S.loop_kind), data.draw(S.loop_kind)
    n1, n2 = data.draw(st.integers(1, 99)), data.draw(st.integers(1, 99))
    s = "A^{f32,g}_{i,j}=1;"
    chain = f"{k1}^{{{n1}}}_{{i=0}}{k2}^{{{n2}}}_{{j=0}}[{s}];"
    nested = f"{k1}^{{{n1}}}_{{i=0}}[{k2}^{{{n2}}}_{{j=0}}[{s}];];"
    assert _parse_ok(chain) == _parse_ok(nested)
    assert print_module(_parse_ok(nested), COMPACT) == chain + "\n"
