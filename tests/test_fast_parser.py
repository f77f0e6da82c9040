"""The fast parser (leirc.lang.fastparse) against the Lark reference (grammar/leir.lark).

For every input both parsers must give the same ParseResult: the same AST node types and
fields, the same spans on every node (line, column, end, offsets), the same comments in
the same places, the same diagnostics (code, message, span, notes) and the same recovery.
The fast parser may hand an input to Lark only when Lark rejects it (a syntax or depth
error): that is checked too, so a fast parser that quietly fell back everywhere would fail.

Inputs: every .leir file of stdlib/, examples/ and tests/ (goldens), the compat corpus
(skipped when ../shared/compat is absent), seeded mutations of all of these (the mutator of
benchmarks/fuzz_parser.py plus tokens chosen where a context-free tokenizer could part
from Lark's contextual lexer), and hand-written cases for each of those places.
"""

from __future__ import annotations

import importlib.util
import json
import random
from dataclasses import fields
from pathlib import Path

import pytest

from leirc.lang import ast as A
from leirc.lang import fastparse
from leirc.lang.fastparse import MAX_CHAIN, MAX_DEPTH, parse_fast, tokenize
from leirc.lang.parser import parse
from leirc.lang.printer import print_module

ROOT = Path(__file__).resolve().parents[1]
COMPAT = ROOT.parent / "shared" / "compat"


# ---------------------------------------------------------------------------
# comparison


def first_difference(a, b) -> str | None:
    """Where two values differ, comparing what dataclass equality skips too (spans,
    comments) and the exact types (``1`` is not ``1.0``); None when they are the same."""
    stack = [(a, b, "")]
    while stack:
        x, y, path = stack.pop()
        if type(x) is not type(y):
            return f"{path}: {type(x).__name__} {x!r:.120} != {type(y).__name__} {y!r:.120}"
        if isinstance(x, (tuple, list)):
            if len(x) != len(y):
                return f"{path}: {len(x)} items != {len(y)} items"
            stack.extend((u, v, f"{path}[{i}]") for i, (u, v) in enumerate(zip(x, y)))
        elif hasattr(x, "__dataclass_fields__"):
            stack.extend((getattr(x, f.name), getattr(y, f.name), f"{path}.{f.name}") for f in fields(x))
        elif isinstance(x, A.Comment):
            if (x.where, x.text) != (y.where, y.text):
                return f"{path}: {x!r} != {y!r}"
        elif x != y:
            return f"{path}: {x!r:.200} != {y!r:.200}"
    return None


def _result(res):
    return (res.module, res.partial, res.source,
            [(d.code, d.message, d.span, tuple(d.notes), d.file, d.severity) for d in res.diagnostics])


def differs(text: str | bytes, deep: bool = False) -> str | None:
    """None when the fast and the Lark parser agree on ``text`` (see the module docstring).
    ``deep``: the text nests so deeply that the fast parser may hand it to Lark."""
    lark = parse(text, "f.leir", parser="lark")
    fast = parse(text, "f.leir", parser="fast")
    diff = first_difference(_result(fast), _result(lark))
    if diff is not None:
        return "results differ at " + diff
    if isinstance(text, str) and "\x00" not in text and not text.startswith("\ufeff"):
        raw = parse_fast(text)
        if lark.module is not None and raw is None and not deep:
            return "the fast parser handed a text Lark accepts to Lark"
        if lark.module is None and raw is not None:
            return f"the fast parser accepted a text Lark rejects ({lark.diagnostics[0].code} {lark.diagnostics[0].message})"
    return None


def check_all(named_texts) -> None:
    problems = []
    for name, text in named_texts:
        d = differs(text)
        if d is not None:
            problems.append(f"{name}: {d}\n    input: {text!r:.300}")
    assert not problems, f"{len(problems)} input(s):\n" + "\n".join(problems[:10])


# ---------------------------------------------------------------------------
# the corpus


def _files(*dirs: str) -> list[tuple[str, str]]:
    out = []
    for d in dirs:
        for p in sorted((ROOT / d).rglob("*.leir")):
            out.append((str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")))
    return out


def _compat() -> list[tuple[str, str]]:
    out = []
    for name in ("steptp_emitted_level1.jsonl", "steptp_strategy_outputs.jsonl"):
        f = COMPAT / name
        if not f.is_file():
            continue
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            rec = json.loads(line)
            for fld in ("IR", "original", "transformed"):
                v = rec.get(fld)
                for j, t in enumerate(v if isinstance(v, list) else [v]):
                    if isinstance(t, str) and t.strip():
                        out.append((f"{name}:{i + 1}:{fld}[{j}]", t))
    return out


def test_stdlib_and_examples_agree():
    files = _files("stdlib", "examples")
    assert len(files) >= 20
    check_all(files)


def test_golden_files_agree():
    files = _files("tests")
    assert files
    check_all(files)


def test_compat_corpus_agrees():
    progs = _compat()
    if not progs:
        pytest.skip(f"compat corpus not found at {COMPAT} (it lives in ../shared next to the repository)")
    check_all(progs)


def test_stdlib_concatenated_agrees_and_reprints_the_same():
    # one 300-line file of 28 kernels with comments: the size the language server meets
    text = "\n".join(t for _, t in _files("stdlib"))
    assert differs(text) is None
    fast, lark = parse(text, parser="fast"), parse(text, parser="lark")
    assert fast.ok and len(fast.module.kernels) >= 20
    assert A.all_comments(fast.module), "stdlib kernels carry comments"
    for layout in ("compact", "pretty"):
        assert print_module(fast.module, layout) == print_module(lark.module, layout)


# ---------------------------------------------------------------------------
# hand-written cases: every construct, every parser diagnostic, and each place where a
# context-free tokenizer could read the text differently from Lark's contextual lexer

K = "\\kernel k(A: f32[8]) -> (C: f32[8]) {{\n  {}\n}}\n"


def _deep_parens(n: int) -> str:
    return "C^{f32,g} = " + "(" * n + "1" + ")" * n + ";"


def _deep_neg(n: int) -> str:
    return "C^{f32,g} = " + "-" * n + "1;"


def _deep_pow(n: int) -> str:
    return "C^{f32,g} = " + "**".join(["2"] * (n + 1)) + ";"


def _deep_calls(n: int) -> str:
    return "C^{f32,g} = " + "exp(" * n + "1" + ")" * n + ";"


def _deep_subscripts(n: int) -> str:
    e = "i"
    for _ in range(n):
        e = f"A^{{i64,g}}_{{{e}}}"
    return f"L^{{4}}_{{i=0}}[C^{{f32,g}}_{{i}} = {e};];"


def _deep_loops(n: int) -> str:
    return "".join(f"L^{{2}}_{{i{k}=0}}[" for k in range(n)) + "C^{f32,g} = 1;" + "];" * n


def _deep_chain(n: int) -> str:
    return "L^{4}_{i=0}[C^{f32,g}_{i} = " + "+".join(["i"] * n) + ";];"


def _mixed_levels(n: int) -> str:
    # every precedence level in every parenthesis: the AST is deeper than the nesting
    e = "i"
    for _ in range(n):
        e = f"(i | i & i < i + i * {e})"
    return f"L^{{4}}_{{i=0}}[C^{{bool,g}}_{{i}} = {e};];"


def _nested_chains(n: int) -> str:
    e = "i"
    for _ in range(n):
        e = "(" + e + "+" + "+".join(["i"] * 30) + ")"
    return f"L^{{4}}_{{i=0}}[C^{{f32,g}}_{{i}} = {e};];"


CASES = {
    # constructs
    "empty": "",
    "blank": " \n\t\n",
    "comments only": "% one\n\n% two\n",
    "bare statement": "C^{f32,g} = 1;",
    "chain headers": "L^{4}_{i=0} P^{8}_{j=0} [C^{f32,g}_{i,j} = 1;];",
    "bracketed nest": "L^{4}_{i=0}[L^{8}_{j=0}[C^{f32,g}_{i,j} = 1;];];",
    "header other order": "L_{i=0}^{4}[C^{f32,g}_{i} = 1;];",
    "header spaces and newline": "L ^{ 4 } \n _{ i = - 3 }[C^{f32,g}_{i+3} = 1;];",
    "header minus zero": "L^{4}_{i=-0}[C^{f32,g}_{i} = 1;];",
    "blocks": "[C^{f32,g} = 1;]; [[D^{f32,g} = 2;];];",
    "region": "B^{4}_{tx=0}[^{ap_0}L^{2}_{a=0}[C^{f32,l}_{a} = 1;];]^{ap_0};",
    "region as block": "[^{db}C^{f32,g} = 1;]^{db};",
    "align": "C^{f32,g} = 1; D = align(0, -4, 5);",
    "alloc": K.format("\\alloc T^{f32,l}[4, 2]; \\alloc S^{f32,g}; L^{8}_{i=0}[T^{f32,l}_{0,0} = 1; C^{f32,g}_{i} = T^{f32,l}_{0,0};];"),
    "sub before sup": "L^{4}_{i=0}[C_{i}^{f32,g} = A_{i}^{f32,g} + A^{f32,g}_{};];",
    "params and shapes": "\\kernel k(A: f32[8, 4], s: f32, t: i64[]) -> (C: f32[8]) {}\n\\kernel k2() -> () {}",
    "kernel name after keyword": "\\kernelfoo() -> () {}",
    "numbers": "C^{f64,g} = 1 + 1.5 + 1. + .5 + 1e5 + 2.5E+3 + 1.0e-5 + 007;",
    "operators": "L^{4}_{i=0}[C^{f32,g}_{i} = i*2/3//4%5 - -i + i**2**-3 * (i);];",
    "mod without space, comment after space": "L^{4}_{i=0}[C^{f32,g}_{i} = i%2 %comment\n;];",
    "percent at line start": "%c\nC^{f32,g} = 1;%not a comment? no: after ';' it is modulo\n",
    "compare chains and logic": "L^{4}_{i=0}[C^{bool,g}_{i} = 1 <= i < 3 & i != 2 | i == 0 && i >= 0 || i > 1;];",
    "latex": ("L^{4}_{i=0}[C^{f32,g}_{i} = \\exp(i) \\cdot \\sqrt{i} \\times \\frac{1}{2} + \\max(i, 1) - \\ln{i}"
              " + \\left( i \\right) + \\tanh(\\dfrac{i}{\\tfrac{1}{2}});];"),
    "latex comparisons": "L^{4}_{i=0}[C^{bool,g}_{i} = i \\le 1 \\land i \\geq 0 \\lor i \\neq 2 \\wedge i \\lt 3 \\vee i \\gt 0 \\leq 1 \\ge 0 \\ne 5;];",
    "le then a name": "L^{4}_{i=0}[C^{bool,g}_{i} = i \\lex;];",
    "le before ft(": "L^{4}_{i=0}[C^{bool,g}_{i} = i \\left(i);];",
    "inf spellings": "C^{f32,g} = inf + -inf + \\infty + max(inf, 1);",
    "tensor named inf": "L^{4}_{i=0}[inf_{i}^{f32,g} = inf_{i}^{f32,g} + inf;];",
    "inf then superscript": "C^{f32,g} = inf^{f32,g};",
    "inf as a name": "L^{4}_{inf=0}[C^{f32,g}_{inf} = 1;];",
    "names like keywords": "L^{4}_{i=0}[align^{f32,g}_{i} = align^{f32,g}_{i} + infty + alignx + inf1 + L + B;];",
    "align spelled wrong": "D = alignx(0, 4, 5);",
    "header text in an expression": "C^{f32,g} = L^{4}_{i=0};",
    "tensor named like a loop kind": "L^{4}_{i=0}[L^{f32,g}_{i} = B^{f32,g}_{i} + V_{i}^{f32,g};];",
    "casts and intrinsics": "L^{4}_{i=0}[C^{f32,g}_{i} = f32(i) + if_then_else(i < 2, 1, 0) + select(1, 2, 3) + min(1, 2, 3);];",
    "CRLF": "% c\r\nL^{4}_{i=0}[\r\n  C^{f32,g}_{i} = 1; % t\r\n];\r\n",
    "BOM": "\ufeffC^{f32,g} = 1;",
    "tabs and form feeds": "\tC^{f32,g}\f=\t1;\n",
    "unicode digits": "L^{\u0664}_{i=0}[C^{f32,g}_{i} = \u0663;];",
    "comment with unicode": "C^{f32,g} = 1; % \u00e9\u2003\U0001F600\n",
    "comments everywhere": K.format("% lead\n  L^{8}_{i=0} [ % head\n    % before\n    C^{f32,g}_{i} = A^{f32,g}_{i}; % trail\n\n    % inner\n  ];"),
    # parser diagnostics
    "E004 E011 E005": "L^{4}_{i=0}[C^{float,g}_{i} = A^{c64,q}_{i} + A^{f33,g}_{i};];",
    "E006 literals": "C^{f32,g} = 123456789012345678901234567890 + 1e999;",
    "E006 extents": "L^{99999999999}_{i=0}L^{3000000000}_{j=0}[C^{f32,g} = 1;];",
    "E006 dimension": "\\kernel k(A: f32[99999999999]) -> (C: f32[8]) {}",
    "E007 E008": "C^{f32,g} = nope(1) + exp(1, 2) + max(1) + f32(1, 2) + \\exp{1};",
    "E009": "[^{ap_0}C^{f32,g} = 1;]^{bd_0};",
    "E010": "\\kernel k(A: f32[8], A: f32[8]) -> (A: f32[8]) {}",
    "diagnostics in order": K.format("L^{99999999999}_{i=0}[C^{f3,g}_{nope(i)} = A^{f32,x}_{1e999}; [^{a}C^{f32,g} = 1;]^{b};];"),
    # syntax errors (Lark's messages; the fast parser must reject)
    "E001 missing semicolon": "L^{4}_{i=0}[C^{f32,g}_{i} = 1];",
    "E001 unclosed": "L^{4}_{i=0}[C^{f32,g}_{i} = 1;",
    "E001 bad header": "L^{N}_{i=0}[C^{f32,g} = 1;];",
    "E001 stray character": "C^{f32,g} = 1 @ 2;",
    "E001 nbsp": "C^{f32,g} =\u00a01;",
    "E001 vertical tab": "C^{f32,g} =\x0b1;",
    "E001 empty call": "C^{f32,g} = exp();",
    "E001 mixed kernels and items": "C^{f32,g} = 1;\n\\kernel k() -> () {}",
    "E001 arrow in expression": "C^{f32,g} = 1->2;",
    "E001 double equals target": "C^{f32,g} == 1;",
    "E001 int shape float": "\\kernel k(A: f32[8.5]) -> () {}",
    "E001 scalar without sup": "C = 1;",
    "E001 trailing comma": "\\kernel k(A: f32[8],) -> () {}",
    "E001 percent after name in shape": "\\kernel k(A: f32[8%]) -> () {}",
    "E002 bytes": b"C^{f32,g} = 1;\xff",
    "E001 NUL": "C^{f32,g} = 1;\x00",
    "recovery": K.format("C^{f32,g}_{0} = A^{f32,g}_{0};") + "\\kernel bad() -> () {\n  C^{f32,g} = ;\n}\n" + K.format("C^{f32,g}_{1} = 1;"),
    "recovery runs into next kernel": "\\kernel a() -> () {\n  L^{4}_{i=0}[\n}\n\\kernel b() -> () {}\n",
    # nesting around the limits (the fast parser measures or hands to Lark)
    **{f"parens {n}": _deep_parens(n) for n in (10, 18, 19, 39, 40, 41, 60, 150, 151, 400)},
    **{f"negations {n}": _deep_neg(n) for n in (18, 40, 41, 150, 151)},
    **{f"powers {n}": _deep_pow(n) for n in (18, 40, 41, 149, 150, 151)},
    **{f"calls {n}": _deep_calls(n) for n in (18, 40, 41, 80)},
    **{f"subscripts {n}": _deep_subscripts(n) for n in (18, 30, 40, 41, 75, 76)},
    **{f"loops {n}": _deep_loops(n) for n in (18, 40, 41, 148, 149, 150)},
    **{f"mixed levels {n}": _mixed_levels(n) for n in (3, 18, 19, 21, 22, 25, 30)},
    **{f"nested chains {n}": _nested_chains(n) for n in (2, 18, 19, 40)},
    **{f"chain {n}": _deep_chain(n) for n in (24, 25, MAX_CHAIN, MAX_CHAIN + 1)},
}


DEEP = ("parens", "negations", "powers", "calls", "subscripts", "loops", "mixed levels", "nested chains", "chain")


def test_deep_cases_below_the_lark_limit_stay_fast():
    # the hand-over to Lark is for nesting past the fast parser's own limit, where
    # the Lark parse tree itself may be too deep; below it the fast parser measures
    for text in (_deep_parens(39), _deep_subscripts(30), _mixed_levels(21), _nested_chains(19), _deep_loops(39),
                 _deep_chain(MAX_CHAIN)):
        assert parse(text, parser="lark").module is not None
        assert parse_fast(text) is not None


@pytest.mark.parametrize("name", list(CASES))
def test_case_agrees(name):
    d = differs(CASES[name], deep=name.startswith(DEEP))
    assert d is None, d


def test_cases_cover_what_they_claim():
    # the cases above would prove little if the interesting ones did not reach the
    # outcomes they are named for
    def codes(name):
        return [d.code for d in parse(CASES[name]).diagnostics]

    assert parse(CASES["le before ft("]).ok is False and "E007" in codes("le before ft(")  # parsed: \le ft(i)
    assert parse(CASES["kernel name after keyword"]).module.kernels[0].name == "foo"
    assert parse(CASES["tensor named inf"]).ok
    assert codes("inf then superscript") == ["E001"]
    assert codes("E004 E011 E005") == ["E004", "E011", "E005", "E004"]
    assert codes(f"parens {MAX_DEPTH + 1}") == ["E003"] and codes("parens 150") == ["E003"]
    assert parse(CASES["parens 60"]).ok
    assert codes(f"chain {MAX_CHAIN + 1}") == ["E003"] and parse(CASES[f"chain {MAX_CHAIN}"]).ok
    assert codes("mixed levels 30") == ["E003"] and parse(CASES["mixed levels 18"]).ok
    assert codes("recovery") == ["E001"] and len(parse(CASES["recovery"]).partial.kernels) == 2
    for name in CASES:
        if name.startswith("E001") and name != "E001 NUL":
            assert codes(name)[:1] == ["E001"], name


# ---------------------------------------------------------------------------
# seeded mutations


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("fuzz_parser", ROOT / "benchmarks" / "fuzz_parser.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: tokens placed where the fast tokenizer's context-free choice could differ from Lark's
TRICKY = [
    "inf", "inf_{i}", "inf^{f32,g}", "align", "align(0,4,5)", "\\left(", "\\right)", "\\le", "\\lex", "\\leq",
    "\\kernel", "\\kernelk", "\\alloc", "\\alloc T^{f32,l}[4];", "L^{4}_{i=0}", "L_{j=0}^{2}", "L", "B", "%", " %",
    "%x", "1.", ".5", "1e5", "1e", "\u0663", "\u00a0", "\x0b", "\\frac{1}{2}", "\\sqrt{2}", "**", "*", "//", "->",
    "==", "=", "^{", "_{", "}", "];", "[^{t}", "]^{t};", "-", "--", ",", "(", ")", "\r\n", "\t",
]


def _mutants(seed: int, n: int, corpus: list[str]):
    fuzz = _fuzz_module()
    rng = random.Random(seed)
    for k in range(n):
        text = rng.choice(corpus)
        if rng.random() < 0.5:
            text = fuzz.mutate(rng, text)
        else:
            for _ in range(rng.randint(1, 3)):
                pos = rng.randint(0, len(text))
                text = text[:pos] + rng.choice(TRICKY) + text[pos:]
        yield f"mutant {k} (seed {seed})", text


def _mutation_corpus() -> list[str]:
    progs = [t for _, t in _files("stdlib", "examples")]
    progs += [CASES[n] for n in CASES if isinstance(CASES[n], str) and not n.startswith(DEEP)]
    progs += [t for _, t in _compat()][::3]
    return progs


def test_mutants_agree():
    check_all(_mutants(0, 700, _mutation_corpus()))


@pytest.mark.slow
def test_more_mutants_agree():
    check_all(_mutants(1, 4000, _mutation_corpus()))


# ---------------------------------------------------------------------------
# choosing the parser


def test_lark_on_request(monkeypatch):
    text = "L^{4}_{i=0}[C^{f32,g}_{i} = 1;];"
    calls = []
    real = fastparse.parse_fast

    def counting(t):
        calls.append(t)
        return real(t)

    monkeypatch.setattr("leirc.lang.parser.parse_fast", counting)
    assert parse(text).ok and len(calls) == 1
    assert parse(text, parser="lark").ok and len(calls) == 1
    monkeypatch.setenv("LEIRC_PARSER", "lark")
    assert parse(text).ok and len(calls) == 1
    assert parse(text, parser="fast").ok and len(calls) == 2
    monkeypatch.setenv("LEIRC_PARSER", "fast")
    assert parse(text).ok and len(calls) == 3


def test_unknown_parser_is_a_clear_error(monkeypatch):
    with pytest.raises(ValueError, match="unknown parser 'yacc'.*fast, lark"):
        parse("C^{f32,g} = 1;", parser="yacc")
    monkeypatch.setenv("LEIRC_PARSER", "bison")
    with pytest.raises(ValueError, match="LEIRC_PARSER"):
        parse("C^{f32,g} = 1;")


def test_tokens_carry_lark_positions():
    toks, comments = tokenize("% c\nL ^{4}\n_{i=0} [ x ];\n")
    header = toks[0]
    assert header[:2] == ("HEADER", "L ^{4}\n_{i=0}")
    assert (header[4], header[5], header[6], header[7]) == (2, 1, 3, 7)
    assert toks[1][4:6] == (3, 8)
    assert comments == [(0, 1, "% c")]
    assert toks[-1][0] == "EOF"
    assert tokenize("x @") is None


def _random_nest(rng: random.Random, depth: int, mixed: float) -> str:
    """An expression nested ``depth`` levels deep, each level one of the constructs that
    nest (with the operators of every precedence level between some of them), so the
    AST and the Lark parse tree reach their limits in different orders."""
    e = rng.choice(["i", "1", "2.5", "inf", "A^{f32,g}_{i}"])
    for _ in range(depth):
        r = 5 if rng.random() < mixed else rng.randrange(11)
        if r == 0:
            e = f"({e})"
        elif r == 1:
            e = f"-{e}"
        elif r == 2:
            e = f"2**{e}"
        elif r == 3:
            e = f"exp({e})"
        elif r == 4:
            e = f"A^{{f32,g}}_{{{e}}}"
        elif r == 5:
            e = f"(i | i & i < i + i * {e})"
        elif r == 6:
            e = f"\\frac{{{e}}}{{2}}"
        elif r == 7:
            e = f"\\sqrt{{{e}}}"
        elif r == 8:
            e = "(" + "+".join([e] + ["i"] * rng.randint(1, 40)) + ")"
        elif r == 9:
            e = f"max(i, {e}) < {e if len(e) < 200 else 'i'}"
        else:
            e = f"\\left({e}\\right) - i"
    loops = rng.randint(0, 12)
    head = "".join(f"L^{{2}}_{{v{k}=0}}" for k in range(loops))
    return f"{head}[C^{{f32,g}} = {e};];" if loops else f"C^{{f32,g}} = {e};"


@pytest.mark.slow
def test_random_deep_nesting_agrees():
    # around both limits (the AST's MAX_DEPTH and the Lark parse tree's), the fast
    # parser must either measure exactly or hand the text to Lark, never accept what
    # Lark rejects with E003
    rng = random.Random(14)
    texts = []
    for k in range(60):
        depth, mixed = rng.randint(10, 120), rng.choice([0.0, 0.0, 0.5, 0.9])
        texts.append((f"#{k} depth {depth} mixed {mixed}", _random_nest(rng, depth, mixed)))
    outcomes = set()
    problems = []
    for name, text in texts:
        d = differs(text, deep=True)
        if d is not None:
            problems.append(f"{name}: {d}\n    input: {text!r:.300}")
        outcomes.add(parse(text).module is not None)
    assert not problems, "\n".join(problems[:5])
    assert outcomes == {True, False}, "the random nests should reach both sides of the limits"
