"""Unit tests of leirc.analysis.deps: distances, conservative answers, layering."""

from __future__ import annotations

import ast
from pathlib import Path

from leirc.analysis import deps as D
from leirc.analysis import reduction_form
from leirc.lang import ast as A
from leirc.lang.checker import check_text

i, j, k = A.Var("i"), A.Var("j"), A.Var("k")
LI = A.Loop("L", 8, "i", 0, ())
LJ = A.Loop("L", 4, "j", 0, ())


def T(*idx) -> A.Access:
    return A.Access("T", "f32", "g", tuple(idx))


def c(v: int) -> A.Const:
    return A.Const(v)


def test_distance_and_direction_of_a_scan():
    d = D.dependence(T(i, j), (LI, LJ), T(A.BinOp("-", i, c(1)), j), (LI, LJ), [(LI, LI), (LJ, LJ)])
    assert d.vectors == {("<", "=")} and d.distance == (1, 0)


def test_floor_division_gives_a_direction_but_no_single_distance():
    d = D.dependence(T(i, j), (LI, LJ), T(A.BinOp("//", i, c(2)), j), (LI, LJ), [(LI, LI), (LJ, LJ)])
    assert d.vectors == {("<", "="), ("=", "=")} and d.distance == (None, 0)


def test_divmod_pair_same_divisor_pins_the_index():
    pair = lambda div: (A.BinOp("//", i, c(div)), A.BinOp("%", i, c(div)))  # noqa: E731
    assert not D.may_touch(T(*pair(4)), (LI,), T(*pair(4)), (LI,), [(LI, LI, D.NE)])
    assert D.may_touch(T(*pair(2)), (LI,), T(*pair(4)), (LI,), [(LI, LI, D.NE)])


def test_one_iteration_loop_with_start_is_a_constant():
    lk = A.Loop("L", 1, "k", 3, ())
    # 2*i written, 2*i + 2*j + k read with k == 3: odd, never equal
    w, r = T(A.BinOp("*", c(2), i)), T(A.BinOp("+", A.BinOp("+", A.BinOp("*", c(2), i), A.BinOp("*", c(2), j)), k))
    assert not D.may_touch(w, (LI,), r, (LI, LJ, lk), [(LI, LI, D.NE)])
    lk0 = A.Loop("L", 1, "k", 2, ())
    assert D.may_touch(w, (LI,), r, (LI, LJ, lk0), [(LI, LI, D.NE)])


def test_unanalyzable_subscripts_are_conservative():
    indirect = T(A.Access("B", "i32", "g", (i,)))
    assert D.may_touch(indirect, (LI,), indirect, (LI,), [(LI, LI, D.NE)])
    big = A.Loop("L", 10**5, "i", 0, ())
    product = T(A.BinOp("*", i, i))  # injective on i >= 0 but not linear, too many instances to enumerate
    assert D.may_touch(product, (big,), product, (big,), [(big, big, D.NE)])


def test_small_spaces_outside_the_linear_fragment_are_enumerated_exactly():
    product = T(A.BinOp("*", i, i))
    assert not D.may_touch(product, (LI,), product, (LI,), [(LI, LI, D.NE)])
    clamp = T(A.Call("max", (A.BinOp("-", i, c(2)), c(0))))  # i = 0, 1, 2 all give 0
    assert D.may_touch(clamp, (LI,), clamp, (LI,), [(LI, LI, D.NE)])
    shifted = T(A.Call("max", (i, c(0))))  # the identity on [0, 8)
    assert not D.may_touch(shifted, (LI,), shifted, (LI,), [(LI, LI, D.NE)])
    # i in [4, 8) folds onto [0, 4): written at i=4, read at i=0
    folded = T(A.Call("if_then_else", (A.Compare(("<",), (i, c(4))), i, A.BinOp("-", i, c(4)))))
    assert D.may_touch(folded, (LI,), T(i), (LI,), [(LI, LI, D.NE)])
    shifted_up = T(A.Call("if_then_else", (A.Compare(("<",), (i, c(4))), i, A.BinOp("+", i, c(4)))))
    assert not D.may_touch(shifted_up, (LI,), T(i), (LI,), [(LI, LI, D.NE)])


def test_exhausted_search_budget_answers_may_touch():
    big = A.Loop("L", 10**6, "i", 0, ())
    # 3*i1 == 5*i2 + 1 has solutions; with no search budget the answer must stay "may touch"
    w, r = T(A.BinOp("*", c(3), i)), T(A.BinOp("+", A.BinOp("*", c(5), i), c(1)))
    assert D.may_touch(w, (big,), r, (big,), [(big, big, D.NE)], budget=0)
    assert D.may_touch(w, (big,), r, (big,), [(big, big, D.NE)])
    # 6*i1 == 4*i2 + 1: even == odd, refuted by the GCD test without search
    w, r = T(A.BinOp("*", c(6), i)), T(A.BinOp("+", A.BinOp("*", c(4), i), c(1)))
    assert not D.may_touch(w, (big,), r, (big,), [(big, big, D.NE)], budget=1)


def test_find_conflict_messages_match_the_checker():
    src = ("\\kernel k(A: f32[8]) -> (C: f32[8]) {\n"
           "P^{8}_{i=0}[C^{f32,g}_{0} = A^{f32,g}_{i};];\n}\n")
    ds = [d for d in check_text(src).diagnostics if d.code == "E040"]
    assert ds and "different iterations write the same element of 'C'" in ds[0].message


def test_reduction_form_is_the_checkers():
    st = A.Assign(T(i), A.BinOp("+", T(i), A.Access("A", "f32", "g", (i,))))
    op, operand, commuted = reduction_form(st)
    assert op == "+" and operand == A.Access("A", "f32", "g", (i,)) and not commuted


def test_analysis_sits_below_the_checker_and_the_strategies():
    """leirc.analysis imports only leirc.lang.ast, leirc.lang.affine and the checker's facts
    (leirc.lang.facts) at run time (the checker imports it), never a module's private names."""
    pkg = Path(D.__file__).parent
    for f in pkg.glob("*.py"):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level:
                mod = node.module
                assert mod in ("deps", "reductions", "lang", "lang.ast", "lang.affine", "lang.facts"), (f.name, mod)
                assert not any(a.name.startswith("_") for a in node.names), (f.name, mod)
