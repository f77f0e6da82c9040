"""Comments as trivia, flat operator chains, per-kernel recovery and syntax hints
(issue 10 item 6, issue 9 item 6: the 161-term sum that E003 rejected)."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from conftest import STDLIB
from leirc.cli.main import main
from leirc.interp import random_inputs, run
from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.parser import MAX_CHAIN, MAX_DEPTH, parse
from leirc.lang.printer import COMPACT, PRETTY, print_module

COMMENTED = r"""% file header
% second line

\kernel k(A: f32[8, 4]) -> (C: f32[8, 4]) {   % head of kernel
  % before the nest
  L^{8}_{i=0} L^{4}_{j=0} [  % head of j
    % before S
    C^{f32,g}_{i,j} = A^{f32,g}_{i,j} * 2 +   % inside S
      1;  % after S
    % inner of j
  ];  % after nest
  L^{8}_{i=0} [
    % before inner loop

    % after a blank line
    L^{4}_{j=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j}+1; ];
  ];
  % inner of kernel
} % after kernel

% between kernels
\kernel k2(A: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i}; ]; % one-line
}
% tail
"""

COMMENT_RE = re.compile(r"(?<!\S)%[^\n]*")


def texts(src: str) -> list[str]:
    return [m.group(0).rstrip() for m in COMMENT_RE.finditer(src)]


def module(src: str) -> A.Module:
    res = parse(src)
    assert res.ok, res.diagnostics
    return res.module


# ---------------------------------------------------------------------------
# flat chains are not nesting (issue 9: a 161-term sum was rejected with E003)


def _sum_kernel(n: int, op: str = "+") -> str:
    terms = f" {op} ".join(["A^{f32,g}_{i}"] * n)
    return "\\kernel k(A: f32[4]) -> (Y: f32[4]) { L^{4}_{i=0}[Y^{f32,g}_{i} = " + terms + "; ]; }"


def test_161_term_sum_is_not_deep_nesting():
    res = parse(_sum_kernel(161))
    assert res.ok and res.diagnostics == []


@pytest.mark.parametrize("op", ["+", "-", "*", "&", "|"])
def test_long_flat_chains_are_accepted(op):
    text = "A^{f32,g}=" + op.join(["a"] * 600) + ";"
    res = parse(text)
    assert res.ok, res.diagnostics
    assert print_module(res.module, COMPACT).count(op) == 599 + text.count(op) - 599


def _sum_checked(n: int):
    res = parse(_sum_kernel(n))
    assert res.ok, res.diagnostics
    cr = check_kernel(res.module.kernels[0])
    assert cr.ok, cr.diagnostics
    return res.module, cr


def _interp_matches_left_fold(m, cr, n):
    x = random_inputs(m.kernels[0], seed=0)
    y = run(cr, x)["Y"]
    want = np.zeros(4, dtype=np.float32)
    for _ in range(n):  # left to right, in f32, as the program says
        want = (want + x["A"]).astype(np.float32)
    assert np.array_equal(y, want)


def test_2000_term_sum_through_parse_print_check():
    m, _ = _sum_checked(2000)
    for layout in (COMPACT, PRETTY):
        again = parse(print_module(m, layout)).module
        assert again == m and hash(again) == hash(m)
    assert A.strip_spans(m) == m


def test_long_sum_through_interp():
    m, cr = _sum_checked(300)
    _interp_matches_left_fold(m, cr, 300)


@pytest.mark.slow
def test_2000_term_sum_through_interp():
    # ~1 min today: the interpreter types every subexpression on its own (quadratic)
    m, cr = _sum_checked(2000)
    _interp_matches_left_fold(m, cr, 2000)


def test_chain_and_real_nesting_bounds_remain():
    assert [d.code for d in parse(_sum_kernel(MAX_CHAIN + 1)).diagnostics] == ["E003"]
    assert parse(_sum_kernel(MAX_CHAIN)).ok
    # parentheses are real nesting, also around chains
    deep = "A^{f32,g}=" + "(" * (MAX_DEPTH + 5) + "a+b" + ")" * (MAX_DEPTH + 5) + ";"
    assert [d.code for d in parse(deep).diagnostics] == ["E003"]
    assert parse("A^{f32,g}=" + "(" * 100 + "a+b" + ")" * 100 + ";").ok
    # a chain at the head of a chain, in parentheses, many times: the height is bounded
    nested = "A^{f32,g}=" + "(" * 60 + "a" + ("+a" * 200 + ")") * 60 + ";"
    res = parse(nested)
    assert [d.code for d in res.diagnostics] == ["E003"] and "counting the operands" in res.diagnostics[0].message


def test_mixed_precedence_chain_prints_with_parentheses_where_needed():
    m = module("A^{f32,g}=a-(b-c)+d*e*(f+g)-h/i/j;")
    assert print_module(m, COMPACT) == "A^{f32,g}=a-(b-c)+d*e*(f+g)-h/i/j;\n"


# ---------------------------------------------------------------------------
# comments are trivia


def test_comments_do_not_change_the_program():
    plain = re.sub(r"(?<!\S)%[^\n]*", "", COMMENTED)
    assert module(COMMENTED) == module(plain)
    assert hash(module(COMMENTED)) == hash(module(plain))


def test_comments_attach_to_the_nearest_item():
    m = module(COMMENTED)
    k, k2 = m.kernels
    assert A.comments_at(k, "leading") == ("% file header", "% second line", "")
    assert A.comments_at(k, "head") == ("% head of kernel",)
    assert A.comments_at(k, "inner") == ("% inner of kernel",)
    assert A.comments_at(k, "trailing") == ("% after kernel",)
    nest = k.body[0]
    assert A.comments_at(nest, "leading") == ("% before the nest",)
    assert A.comments_at(nest, "trailing") == ("% after nest",)
    j = nest.body[0]
    assert A.comments_at(j, "head") == ("% head of j",) and A.comments_at(j, "inner") == ("% inner of j",)
    (s,) = j.body
    assert A.comments_at(s, "leading") == ("% before S", "% inside S")
    assert A.comments_at(s, "trailing") == ("% after S",)
    inner = k.body[1].body[0]
    assert A.comments_at(inner, "leading") == ("% before inner loop", "", "% after a blank line")
    assert A.comments_at(k2, "leading") == ("% between kernels",)
    assert A.comments_at(k2.body[0], "trailing") == ("% one-line",)
    assert A.comments_at(m, "inner") == ("% tail",)


def test_pretty_print_keeps_every_comment_and_is_stable():
    m = module(COMMENTED)
    out = print_module(m, PRETTY)
    assert texts(out) == texts(COMMENTED)
    again = module(out)
    assert again == m
    assert print_module(again, PRETTY) == out
    assert A.all_comments(again) == A.all_comments(m)
    assert "% head of j" in out.splitlines()[5] and out.splitlines()[5].startswith("  L^{8}_{i=0} L^{4}_{j=0} [")


def test_compact_layout_never_prints_comments():
    m = module(COMMENTED)
    assert "%" not in print_module(m, COMPACT)
    assert module(print_module(m, COMPACT)) == m


def test_comment_between_chained_headers_breaks_the_chain():
    src = "\\kernel k(A: f32[4,4]) -> (C: f32[4,4]) {\n  L^{4}_{i=0}  % rows\n  L^{4}_{j=0} [\n    C^{f32,g}_{i,j} = A^{f32,g}_{i,j};\n  ];\n}\n"
    m = module(src)
    out = print_module(m, PRETTY)
    assert "% rows" in out and module(out) == m and print_module(module(out), PRETTY) == out


def test_comments_in_bare_bodies_and_regions():
    src = "% top\nB^{4}_{tx=0} [^{ap}  % region head\n  % in region\n  C^{f32,g}_{tx} = 1;\n]^{ap}; % after\n% end\n"
    m = module(src)
    out = print_module(m, PRETTY)
    assert texts(out) == texts(src)
    assert module(out) == m and print_module(module(out), PRETTY) == out


def test_a_file_of_only_comments():
    m = module("% just a note\n\n% and another\n")
    assert texts(print_module(m, PRETTY)) == ["% just a note", "% and another"]


def test_modulo_is_not_a_comment():
    m = module("A^{f32,g}=a%b; % real comment\n")
    assert A.all_comments(m) == [A.Comment("trailing", "% real comment")]
    assert print_module(m, PRETTY) == "A^{f32,g} = a%b; % real comment\n"


@pytest.mark.parametrize("path", sorted(STDLIB.glob("*.leir"))[:8], ids=lambda p: p.stem)
def test_stdlib_with_comments_everywhere_round_trips(path):
    # a comment after every line and on a line of its own before every line
    lines = path.read_text().splitlines()
    src = "\n".join(f"% c{i}\n{ln}  % t{i}" if ln.strip() else ln for i, ln in enumerate(lines)) + "\n"
    m = module(src)
    assert m == module(path.read_text())
    out = print_module(m, PRETTY)
    assert sorted(texts(out)) == sorted(texts(src))
    assert module(out) == m and print_module(module(out), PRETTY) == out


def _cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def test_fmt_keeps_every_comment(tmp_path):
    f = tmp_path / "c.leir"
    f.write_text(COMMENTED)
    rc, out, _ = _cli("fmt", str(f))
    assert rc == 0 and texts(out) == texts(COMMENTED)
    assert main(["fmt", "-i", str(f)]) == 0
    assert f.read_text() == out
    assert _cli("fmt", "--check", str(f))[0] == 0
    rc, out, err = _cli("fmt", "--compact", str(f))
    assert rc == 0 and "drops 12 comment(s) inside kernels" in err
    assert texts(out) == ["% file header", "% second line", "% after kernel", "% between kernels", "% tail"]


# ---------------------------------------------------------------------------
# recovery per kernel

BROKEN = r"""% a
\kernel good1(A: f32[4]) -> (Y: f32[4]) {
  L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i}; ];  % t1
}
\kernel bad(A: f32[4]) -> (Y: f32[4]) {
  L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i} ];
}
% unclosed next
\kernel unclosed(A: f32[4]) -> (Y: f32[4]) {
  L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i}*2; ];
\kernel good2(A: f32[4]) -> (Y: f32[4]) {   % \kernel in a comment is not a header
  L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{i}*3; ];
}
"""


def test_one_broken_kernel_leaves_the_others():
    res = parse(BROKEN, "b.leir")
    assert res.module is None and not res.ok  # callers that test `module is None` still see a failure
    assert [(d.code, d.span.line) for d in res.diagnostics] == [("E001", 6), ("E001", 11)]
    assert all(d.file == "b.leir" for d in res.diagnostics)
    assert "'\\\\kernel'" in res.diagnostics[1].message
    assert [k.name for k in res.partial.kernels] == ["good1", "good2"]
    assert A.comments_at(res.partial.kernels[0].body[0], "trailing") == ("% t1",)
    good2 = res.partial.kernel("good2")
    assert good2.span.line == 11 and check_kernel(good2).ok


def test_partial_is_the_module_when_there_is_no_error():
    res = parse(COMMENTED)
    assert res.partial is res.module


def test_check_reports_the_good_kernels_of_a_broken_file(tmp_path):
    f = tmp_path / "b.leir"
    f.write_text(BROKEN.replace("A^{f32,g}_{i}*3", "A^{f32,g}_{i+1}*3"))
    rc, _, err = _cli("check", str(f))
    assert rc == 1
    assert f"{f}:6:" in err and f"{f}:11:" in err and "error[E030]" in err  # E030 from good2: out of bounds


# ---------------------------------------------------------------------------
# friendlier syntax messages


@pytest.mark.parametrize("text, hint", [
    ("L^{4}_{i=0}[A^{f32,g}_{i}=A^{f32,g}_{i}+1\nB^{f32,g}_{i}=2;];", "is a ';' missing?"),
    ("\\kernel k()->(){L^{4}_{i=0}[L^{4}_{j=0}[A^{f32,g}_{i}=exp(A^{f32,g}_{i}) ];];}", "is a ';' missing?"),
    ("\\kernel k()->(){\n  L^{4}_{i=0}[A^{f32,g}_{i}=1;\n}", "is a ']' missing?"),
    ("L^{N}_{i=0}[A^{f32,g}=1;];", "malformed loop header"),
    ("L^{4}_{i}[A^{f32,g}=1;];", "malformed loop header"),
    ("L^{4}_{i=0}[A^{f32,g}=1;]", "closed by '];'"),
])
def test_common_mistakes_get_a_hint(text, hint):
    (d,) = parse(text).diagnostics
    assert d.code == "E001" and any(hint in n for n in d.notes), d.notes


def test_unknown_dtype_hint():
    (d,) = parse("\\kernel k(A: float32[4]) -> () {}").diagnostics
    assert d.code == "E004" and d.notes == ("LEIR spells this dtype 'f32'",)
    (d,) = parse("\\kernel k(A: f3[4]) -> () {}").diagnostics
    assert d.notes == ("did you mean 'f32'?",) or d.notes == ("did you mean 'f16'?",)
