"""Every diagnostic code is triggered by some input, at the right place, and clean
programs produce none. One table row per code; see docs/language.md for the rules."""

from __future__ import annotations

import pytest

from leirc.lang.checker import check_text
from leirc.lang.diagnostics import CODES


def K(body: str, sig: str = "(A: f32[8]) -> (C: f32[8])") -> str:
    return "\\kernel k" + sig + " {\n" + body + "\n}\n"


OK_LOOP = "L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i};];"

CASES = {
    # parser
    "E001": ("\\kernel k(A: f32[8]) -> (C: f32[8]) { L^{8}_{i=0}[C^{f32,g}_{i} = ;]; }", 1),
    "E002": (b"L^{8}_{i=0}[\xff];", 1),
    "E003": ("B^{1}_{tx=0}[C^{f32,g} = " + "(" * 400 + "1" + ")" * 400 + ";];", None),
    "E004": (K("L^{8}_{i=0}[C^{f33,g}_{i} = A^{f32,g}_{i};];"), 2),
    "E005": (K("L^{8}_{i=0}[C^{f32,q}_{i} = A^{f32,g}_{i};];"), 2),
    "E006": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i}*1e999;];"), 2),
    "E007": (K("L^{8}_{i=0}[C^{f32,g}_{i} = cosh(A^{f32,g}_{i});];"), 2),
    "E008": (K("L^{8}_{i=0}[C^{f32,g}_{i} = exp(A^{f32,g}_{i}, 2);];"), 2),
    "E009": (K("L^{8}_{i=0}[^{ap_0} C^{f32,g}_{i} = A^{f32,g}_{i}; ]^{bd_0};"), 2),
    "E010": (K(OK_LOOP, "(A: f32[8], A: f32[8]) -> (C: f32[8])"), 1),
    "E011": (K("L^{8}_{i=0}[C^{c64,g}_{i} = A^{f32,g}_{i};];"), 2),
    # names and types
    "E012": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{q};];"), 2),
    "E013": (K("L^{8}_{i=0}[T^{f32,g}_{i} = A^{f32,g}_{i}; C^{f32,g}_{i} = T^{f64,g}_{i};];"), 2),
    "E014": (K("L^{8}_{i=0}[T^{f32,g}_{i} = A^{f32,g}_{i}; C^{f32,g}_{i} = T^{f32,l}_{i};];"), 2),
    "E015": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f64,g}_{i};];"), 2),
    "E016": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i,i};];"), 2),
    "E017": (K("L^{8}_{i=0}[L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i};];];"), 2),
    "E018": (K("L^{8}_{i=0}[C^{f32,g}_{i} = T^{f32,g}_{i}; T^{f32,g}_{i} = A^{f32,g}_{i};];"), 2),
    "E019": (K("L^{8}_{i=0}[T^{f32,g}_{i} = A^{f32,g}_{i};];"), 1),
    "E020": (K("L^{8}_{i=0}[A^{f32,g}_{i} = 1.0; C^{f32,g}_{i} = A^{f32,g}_{i};];"), 2),
    "E021": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i} + A;];"), 2),
    "E022": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i*0.5};];"), 2),
    "E023": (K("L^{8}_{i=0}[C^{f32,g}_{i} = if_then_else(A^{f32,g}_{i}, 1.0, 0.0);];"), 2),
    "E024": (K("L^{0}_{j=0}[C^{f32,g}_{0} = 1.0;];" + OK_LOOP), 2),
    "E025": (K("L^{8}_{i=0}[C^{u8,g}_{i} = U^{u8,g}_{i} + 300;];", "(U: u8[8]) -> (C: u8[8])"), 2),
    "E026": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{(i*4611686018427387904)//4611686018427387904};];"), 2),
    # bounds and shapes
    "E030": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i+1};];"), 2),
    "E031": (K("L^{8}_{i=0}[T^{f32,g}_{i-1} = A^{f32,g}_{i};];" + OK_LOOP), 2),
    "E032": (K("L^{4}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i};];"), 1),
    # dependences and loop kinds
    "E040": (K("P^{8}_{i=0}[C^{f32,g}_{0} = C^{f32,g}_{0} + A^{f32,g}_{i};];L^{7}_{i=0}[C^{f32,g}_{i+1} = A^{f32,g}_{i};];"), 2),
    "E041": (K("B^{8}_{q=0}[C^{f32,g}_{q} = A^{f32,g}_{q};];"), 2),
    "E042": (K("B^{2}_{tx=0}[B^{4}_{txa=0}[C^{f32,g}_{tx*4+txa} = A^{f32,g}_{tx*4+txa};];];"), 2),
    "E043": (K("B^{2048}_{tx=0}[C^{f32,g}_{tx%8} = A^{f32,g}_{tx%8};];"), 2),
    "E044": (K("V^{128}_{i=0}[C^{f32,g}_{i%8} = A^{f32,g}_{i%8};];"), 2),
    "E045": (K("L^{100000}_{i=0}[T^{f32,s}_{i} = 1.0;];L^{8}_{i=0}[C^{f32,g}_{i} = T^{f32,s}_{i};];"), 2),
    "E046": (K("L^{8}_{i=0}[C^{f32,g}_{i} = C^{f32,g}_{i}/2.0;];"), 2),
    # warnings
    "W001": (K("L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i} = A^{f32,g}_{j} + C^{f32,g}_{i};];"), 2),
    "W002": (K("L^{8}_{i=0}[C^{f32,g}_{i} = 0.0;];L^{8}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i} = C^{f32,g}_{i} + A^{f32,g}_{j};];"), 2),
    "W003": (K("L^{7}_{i=1}[C^{f32,g}_{i} = A^{f32,g}_{i};];L^{1}_{i=0}[C^{f32,g}_{0} = 0.0;];"), 2),
    "W004": (K("L^{8}_{i=0}[C=align(0,4,0); C^{f32,g}_{i} = A^{f32,g}_{i};];"), 2),
    "W005": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,l}_{i};];"), 2),
    "W006": (K("L^{8}_{i=0}[C^{f32,g}_{i} = 1.0;];"), 1),
    "W007": (K("L^{8}_{i=0}[T^{f32,g}_{i} = A^{f32,g}_{i}; C^{f32,g}_{i} = A^{f32,g}_{i};];"), 2),
    "W009": (K("L^{8}_{i=0}[C^{i64,g}_{i} = A^{f32,g}_{i};];", "(A: f32[8]) -> (C: i64[8])"), 2),
    "W014": (K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{J^{i64,g}_{i}};];", "(A: f32[8], J: i64[8]) -> (C: f32[8])"), 2),
    "E047": (K("L^{8}_{i=0}[\\alloc T^{f32,l}[1]; T^{f32,l}_{0} = A^{f32,g}_{i};];\nL^{8}_{i=0}[C^{f32,g}_{i} = T^{f32,l}_{0};];"), 3),
    "E048": (K("L^{8}_{i=0}[\\alloc T^{f32,l}[0]; C^{f32,g}_{i} = A^{f32,g}_{i};];"), 2),
    "E049": (K("L^{8}_{i=0}[\\alloc T^{f32,l}[2]; T^{f32,l}_{0} = A^{f32,g}_{i}; C^{f32,g}_{i} = T^{f32,l}_{1};];"), 2),
    "W049": (K("L^{8}_{i=0}[\\alloc T^{f32,l}[2]; T^{f32,l}_{0} = A^{f32,g}_{i}; "
               "C^{f32,g}_{i} = if_then_else(A^{f32,g}_{i} > 0.0, T^{f32,l}_{1}, T^{f32,l}_{0});];"), 2),
}


#: codes emitted after checking, by the lowering and build (tests/test_lower*.py trigger them)
BACKEND_CODES = {c for c in CODES if c[1:3] == "05"}
#: codes emitted by the CLI about whole files (W008: no kernel; tests/test_cli_fuzz.py, test_cli_items.py)
CLI_CODES = {"W008"}


def test_every_code_has_a_case():
    assert sorted(CASES) == sorted(set(CODES) - BACKEND_CODES - CLI_CODES), "add a triggering case for each code in CODES"


@pytest.mark.parametrize("code", sorted(CASES))
def test_code_is_triggered(code):
    src, line = CASES[code]
    cf = check_text(src, "t.leir")
    codes = [d.code for d in cf.diagnostics]
    assert code in codes, f"{code} not reported; got {[(d.code, d.message) for d in cf.diagnostics]}"
    d = next(d for d in cf.diagnostics if d.code == code)
    assert d.severity == ("error" if code.startswith("E") else "warning")
    assert d.file == "t.leir"
    if line is not None:
        assert d.span is not None and d.span.line == line, (code, d.span)
    j = d.to_json()
    assert set(j) >= {"file", "line", "col", "end_line", "end_col", "severity", "code", "message"}
    if code.startswith("E"):
        assert not cf.ok
    else:
        assert not any(x.is_error for x in cf.diagnostics), [(x.code, x.message) for x in cf.diagnostics]


def test_clean_program_has_no_diagnostics():
    cf = check_text(K(OK_LOOP))
    assert cf.ok and cf.diagnostics == []


def test_checker_collects_several_errors():
    src = K("L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{q} + A^{f32,g}_{r};];")
    codes = [d.code for d in check_text(src).diagnostics]
    assert codes.count("E012") == 2


def test_guarded_access_is_in_bounds():
    src = K("L^{8}_{i=0}[C^{f32,g}_{i} = if_then_else(i-1<0, 0.0, A^{f32,g}_{i-1});];")
    assert check_text(src).ok
    bad = K("L^{8}_{i=0}[C^{f32,g}_{i} = if_then_else(i-1<0, A^{f32,g}_{i-1}, 0.0);];")
    assert [d.code for d in check_text(bad).diagnostics] == ["E030"]


def test_padding_guard_with_chained_comparison():
    src = K("L^{10}_{i=0}[T^{f32,g}_{i} = if_then_else(1<=i<9, A^{f32,g}_{i-1}, 0.0);];"
            "L^{8}_{i=0}[C^{f32,g}_{i} = T^{f32,g}_{i} + T^{f32,g}_{i+2};];")
    cf = check_text(src)
    assert cf.ok, cf.diagnostics
    assert cf.results[0].tensors["T"].shape == (10,)


def test_cross_thread_reduction_is_allowed_on_bound_loops_only():
    red = "{kind}^{{8}}_{{{v}=0}}[S^{{f32,g}} = S^{{f32,g}} + A^{{f32,g}}_{{{v}}};];L^{{8}}_{{i=0}}[C^{{f32,g}}_{{i}} = S^{{f32,g}};];"
    assert check_text(K(red.format(kind="B", v="tx"))).ok
    assert "E040" in [d.code for d in check_text(K(red.format(kind="P", v="i"))).diagnostics]


def test_tiled_and_mixed_radix_subscripts_are_independent():
    tiled = K("P^{2}_{io=0}L^{4}_{i=0}[C^{f32,g}_{io*4+i} = A^{f32,g}_{io*4+i};];")
    assert check_text(tiled).ok
    inner_parallel = K("L^{2}_{io=0}P^{4}_{i=0}[C^{f32,g}_{io*4+i} = A^{f32,g}_{io*4+i};];")
    assert check_text(inner_parallel).ok
    divmod_ = K("P^{8}_{i=0}[T^{f32,g}_{i//4,i%4} = A^{f32,g}_{i};];L^{8}_{i=0}[C^{f32,g}_{i} = T^{f32,g}_{i//4,i%4};];")
    assert check_text(divmod_).ok


def test_statement_kinds():
    src = K("L^{8}_{i=0}[C^{f32,g}_{i} = 0.0;];"  # assign
            "L^{8}_{i=0}L^{8}_{j=0}[S^{f32,g}_{i} = max(S^{f32,g}_{i}, A^{f32,g}_{j});];"  # reduce
            "L^{8}_{i=0}[C^{f32,g}_{i} = C^{f32,g}_{i} + S^{f32,g}_{i};];"  # update
            "L^{8}_{i=0}[P^{f32,g}_{i} = if_then_else(i<1, 0.0, P^{f32,g}_{i-1}) + A^{f32,g}_{i};];"  # scan
            "L^{8}_{i=0}[C^{f32,g}_{i} = C^{f32,g}_{i} + P^{f32,g}_{i};];")
    cf = check_text(src)
    assert cf.ok, cf.diagnostics
    kinds = [(s.kind, s.op) for s in cf.results[0].stmts]
    assert kinds == [("assign", None), ("reduce", "max"), ("update", None), ("scan", None), ("update", None)]
    red = cf.results[0].stmts[1]
    assert red.identity == float("-inf") and red.reduce_vars == ("j",) and red.init_loop.var == "j"
    assert cf.results[0].stmts[3].carried == frozenset({"i"})


def test_types_of_literals_follow_the_tensor():
    from leirc.lang.types import expr_type, promote
    from leirc.lang.parser import parse

    e = parse(K("L^{8}_{i=0}[C^{f32,g}_{i} = 0.5*A^{f32,g}_{i} + i;];")).module.kernels[0].body[0].body[0].value
    assert expr_type(e) == "f32"
    assert promote("i32", "f32") == "f32" and promote("int_lit", "i64") == "i64" and promote("f16", "bf16") == "f32"
