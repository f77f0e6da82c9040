"""leirc.ide: diagnostics, code actions anchored at source spans, strategy applications
as minimal text edits (issue 10 item 6). The assists are checked in the style of
rust-analyzer's ``check_assist(before_with_cursor, after)``: ``$0`` marks the cursor."""

from __future__ import annotations

import re

import pytest

from conftest import STDLIB
from leirc import ide
from leirc.lang.parser import parse
from leirc.strategies.base import NotApplicable, Step, apply_step, enumerate_sites

COMMENT_RE = re.compile(r"(?<!\S)%[^\n]*")


def texts(src: str) -> list[str]:
    return sorted(m.group(0).rstrip() for m in COMMENT_RE.finditer(src))


def cursor(before: str) -> tuple[str, int, int]:
    i = before.index("$0")
    text = before[:i] + before[i + 2:]
    return text, text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def check_assist(strategy: str, before: str, after: str, **args) -> None:
    """The action ``strategy`` (with ``args``, a subset of its arguments) is offered at
    the cursor, and applying it turns the text into exactly ``after``."""
    text, line, col = cursor(before)
    actions = ide.code_actions(text, line, col)
    matching = [a for a in actions if a.step.name == strategy
                and all(a.step.kwargs.get(k) == v for k, v in args.items())]
    assert matching, f"{strategy} not offered at {line}:{col}; offered: {sorted({a.step.name for a in actions})}"
    action = matching[0]
    assert ide.anchors.contains(action.span, line, col)
    out = ide.apply_text(text, action.step, action.kernel)
    assert out == after, out
    # the edit is what applying the step to the tree gives
    old = parse(text).module.kernel(action.kernel)
    assert parse(out).module.kernel(action.kernel) == apply_step(old, action.step)


def check_assist_not_applicable(strategy: str, before: str) -> None:
    text, line, col = cursor(before)
    assert all(a.step.name != strategy for a in ide.code_actions(text, line, col))


# ---------------------------------------------------------------------------
# the [engine] issue's check: tiling a commented kernel changes only the tiled nest

TILE = r"""% Scale a matrix, then add one.
\kernel k(A: f32[8, 16]) -> (C: f32[8, 16]) {   % two nests
  % first nest: add one, written with \cdot and a LaTeX fraction
  L_{i=0}^{8} L^{16}_{j=0} [ C^{f32,g}_{i,j} = \frac{A^{f32,g}_{i,j}}{2} \cdot 2 + 1; ]; % compact

  % second nest: the one to tile
  L^{8}_{i=0} L^{16}_{j=0} [
    % scale in place
    C^{f32,g}_{i,j} = C^{f32,g}_{i,j} \cdot 3;  % note the \cdot spelling
  ];  % end of the tiled nest
  % after everything
}
% trailer
"""


def test_tiling_changes_only_the_tiled_nest():
    old = parse(TILE).module.kernels[0]
    nest = old.body[1]
    step = Step.make("loop_tiling", loop="N1.i", factor_outer=2, factor_inner=4)
    (edit,) = ide.apply_edits(TILE, step)
    assert (edit.start_line, edit.start_col, edit.end_line, edit.end_col) == (
        nest.span.line, nest.span.col, nest.span.end_line, nest.span.end_col)
    out = ide.apply_text(TILE, step)
    prefix, suffix = TILE[:nest.span.start], TILE[nest.span.end:]
    assert out.startswith(prefix) and out.endswith(suffix)  # every other byte identical
    assert parse(out).module.kernels[0] == apply_step(old, step)
    assert texts(out) == texts(TILE)  # the comments inside the nest survive too
    assert out[len(prefix):len(out) - len(suffix)] == (
        "L^{4}_{io=0} L^{4}_{jo=0} L^{2}_{i=0} L^{4}_{j=0} [\n"
        "    % scale in place\n"
        "    C^{f32,g}_{io*2+i,jo*4+j} = C^{f32,g}_{io*2+i,jo*4+j}*3; % note the \\cdot spelling\n"
        "  ];")


def test_tiling_a_one_line_nest_rewrites_only_that_line():
    step = Step.make("loop_tiling", loop="N0.i", factor_outer=2, factor_inner=4)
    (edit,) = ide.apply_edits(TILE, step)
    assert edit.start_line == edit.end_line == 4 and edit.start_col == 3
    out = ide.apply_text(TILE, step).splitlines()
    lines = TILE.splitlines()
    assert out[:3] == lines[:3] and out[-9:] == lines[4:]
    assert out[3] == "  L^{4}_{io=0} L^{4}_{jo=0} L^{2}_{i=0} L^{4}_{j=0} ["
    assert out[5] == "  ]; % compact"  # the trailing comment stays where it was


# ---------------------------------------------------------------------------
# one check_assist per kind of anchor (loop, loops, stmt, nest, tensor) and edit shape


def test_assist_loop_parallelization_replaces_one_nest():
    check_assist("loop_parallelization", r"""\kernel k(A: f32[8]) -> (C: f32[8]) {
  % double it
  L^{8}_{i=0} [ $0C^{f32,g}_{i} = A^{f32,g}_{i} \cdot 2; ];  % keep me
}
""", r"""\kernel k(A: f32[8]) -> (C: f32[8]) {
  % double it
  P^{8}_{i=0} [
    C^{f32,g}_{i} = A^{f32,g}_{i}*2;
  ];  % keep me
}
""", loop="N0.i")


def test_assist_loop_reorder_keeps_the_head_comment():
    check_assist("loop_reorder", r"""\kernel k(A: f32[4, 8]) -> (C: f32[4, 8]) {
  L^{4}_{i=0} L^{8}_{j=0} [ % rows, then columns
    C^{f32,g}_{i,j} = A^{f32,g}_{i,j}$0;
  ];
}
""", r"""\kernel k(A: f32[4, 8]) -> (C: f32[4, 8]) {
  L^{8}_{j=0} [ % rows, then columns
    L^{4}_{i=0} [
      C^{f32,g}_{i,j} = A^{f32,g}_{i,j};
    ];
  ];
}
""")


def test_assist_compute_inline_merges_two_nests_and_leaves_the_third():
    check_assist("compute_inline", r"""\kernel k(A: f32[8]) -> (C: f32[8]) {
  % temporary
  $0L^{8}_{i=0} [ T^{f32,g}_{i} = A^{f32,g}_{i} + 1; ];
  % use it
  L^{8}_{i=0} [ C^{f32,g}_{i} = T^{f32,g}_{i} * 2; ];
  % untouched
  L^{8}_{i=0} [ C^{f32,g}_{i} = C^{f32,g}_{i} \cdot 3; ];
}
""", r"""\kernel k(A: f32[8]) -> (C: f32[8]) {
  % temporary
  % use it
  L^{8}_{i=0} [
    C^{f32,g}_{i} = (A^{f32,g}_{i} + 1)*2;
  ];
  % untouched
  L^{8}_{i=0} [ C^{f32,g}_{i} = C^{f32,g}_{i} \cdot 3; ];
}
""", nest=0)


def test_assist_operator_fission_splits_a_nest_and_keeps_statement_comments():
    check_assist("operator_fission", r"""\kernel k(A: f32[8]) -> (C: f32[8], D: f32[8]) {
  L^{8}_{i=0} [$0
    C^{f32,g}_{i} = A^{f32,g}_{i} + 1;  % first
    D^{f32,g}_{i} = A^{f32,g}_{i} * 2;  % second
  ];
}
""", r"""\kernel k(A: f32[8]) -> (C: f32[8], D: f32[8]) {
  L^{8}_{i=0} [
    C^{f32,g}_{i} = A^{f32,g}_{i} + 1; % first
  ];
  L^{8}_{i=0} [
    D^{f32,g}_{i} = A^{f32,g}_{i}*2; % second
  ];
}
""")


def test_assist_expression_splitting_is_anchored_at_the_statement():
    before = r"""\kernel k(A: f32[8], B: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [ C^{f32,g}_{i} = $0A^{f32,g}_{i} * B^{f32,g}_{i} + A^{f32,g}_{i}; ];
}
"""
    check_assist("expression_splitting", before, r"""\kernel k(A: f32[8], B: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [
    D^{f32,g}_{i} = A^{f32,g}_{i}*B^{f32,g}_{i};
  ];
  L^{8}_{i=0} [
    C^{f32,g}_{i} = D^{f32,g}_{i} + A^{f32,g}_{i};
  ];
}
""", stmt="N0.S0")
    # on the loop header, outside the statement, the statement's actions are not offered
    check_assist_not_applicable("expression_splitting", before.replace("$0", "").replace("L^{8}", "$0L^{8}"))


def test_assist_set_storage_scope_is_anchored_at_the_first_writer():
    before = r"""\kernel k(A: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [ $0T^{f32,g}_{i} = A^{f32,g}_{i} + 1; ];
  L^{8}_{i=0} [ C^{f32,g}_{i} = T^{f32,g}_{i} * 2; ];
}
"""
    check_assist("set_storage_scope", before, r"""\kernel k(A: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [
    T^{f32,s}_{i} = A^{f32,g}_{i} + 1;
  ];
  L^{8}_{i=0} [
    C^{f32,g}_{i} = T^{f32,s}_{i}*2;
  ];
}
""", tensor="T", scope="s")


def test_assist_dead_code_elimination_deletes_the_nest_but_not_its_comment():
    check_assist("dead_code_elimination", r"""\kernel k(A: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [ $0U^{f32,g}_{i} = A^{f32,g}_{i} + 1; ];  % unused
  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i} * 2; ];
}
""", r"""\kernel k(A: f32[8]) -> (C: f32[8]) {
  % unused
  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i} * 2; ];
}
""")


def test_assist_on_a_one_line_kernel_stays_on_one_line():
    check_assist("loop_tiling",
                 "\\kernel k(A:f32[4,4])->(C:f32[4,4],D:f32[4]){L^{4}_{i=0}L^{4}_{j=0}[$0C^{f32,g}_{i,j}=A^{f32,g}_{i,j}\\cdot 2;];"
                 "B^{4}_{tx=0}[D^{f32,g}_{tx}=\\frac{A^{f32,g}_{tx,0}}{2};];}\n",
                 "\\kernel k(A:f32[4,4])->(C:f32[4,4],D:f32[4]){L^{2}_{io=0}L^{2}_{jo=0}L^{2}_{i=0}L^{2}_{j=0}"
                 "[C^{f32,g}_{io*2+i,jo*2+j}=A^{f32,g}_{io*2+i,jo*2+j}*2;];"
                 "B^{4}_{tx=0}[D^{f32,g}_{tx}=\\frac{A^{f32,g}_{tx,0}}{2};];}\n",
                 loop="N0.i", factor_outer=2, factor_inner=2)


# ---------------------------------------------------------------------------
# positions, anchors, several kernels, broken files

TWO = r"""\kernel first(A: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i} \cdot 2; ];
}

% second kernel
\kernel second(A: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i} + 1; ];
}
"""


def test_actions_belong_to_the_kernel_under_the_cursor():
    acts = ide.code_actions(TWO, 7, 5)
    assert acts and {a.kernel for a in acts} == {"second"}
    par = next(a for a in acts if a.step.name == "loop_parallelization")
    out = ide.apply_text(TWO, par.step, par.kernel)
    assert out.splitlines()[:6] == TWO.splitlines()[:6]
    assert out.splitlines()[6] == "  P^{8}_{i=0} ["
    with pytest.raises(NotApplicable):
        ide.apply_edits(TWO, par.step)  # two kernels: say which


def test_no_actions_between_items_or_outside_kernels():
    assert ide.code_actions(TILE, 6, 5) == []  # the comment line between the two nests
    assert ide.code_actions(TILE, 13, 1) == []  # the trailer, outside the kernel
    assert ide.code_actions("L^{4}_{i=0}[", 1, 1) == []  # a file that does not parse


def test_innermost_anchor_first():
    text = "\\kernel k(A: f32[8], B: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i} * B^{f32,g}_{i} + 1; ];\n}\n"
    acts = ide.code_actions(text, 2, 20)  # inside the statement
    sizes = [a.span.end - a.span.start for a in acts]
    assert sizes == sorted(sizes)
    assert acts[0].span.col == 17 and {a.step.name for a in acts if a.span.col == 3} >= {"loop_parallelization"}
    assert all(ide.anchors.contains(a.span, 2, 20) for a in acts)


def test_every_site_of_the_stdlib_resolves_to_a_span():
    n = 0
    for path in sorted(STDLIB.glob("*.leir"))[:3]:
        text = path.read_text()
        for k in parse(text).module.kernels:
            for site in enumerate_sites(k):
                for step in site.steps(limit=2):
                    node = ide.anchor_node(k, step)
                    assert node is not None and node.span is not None, step
                    assert text[node.span.start:node.span.end].strip()
                    n += 1
    assert n > 30


def test_anchor_kinds_resolve_in_one_place():
    k = parse(TWO).module.kernel("first")
    loop = k.body[0]
    stmt = loop.body[0]
    assert ide.anchor_node(k, Step.make("loop_parallelization", loop="N0.i")) is loop
    assert ide.anchor_node(k, Step.make("operator_fission", nest=0, at=1)) is loop
    assert ide.anchor_node(k, Step.make("expression_splitting", stmt="N0.S0", expr=1)) is stmt
    assert ide.anchor_node(k, Step.make("set_storage_scope", tensor="C", scope="s")) is stmt
    assert ide.anchor_node(k, Step.make("loop_parallelization", loop="N9.q")) is None
    assert ide.anchor_node(k, Step.make("no_such_strategy")) is None


BROKEN = r"""\kernel bad(A: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i} ];
}
\kernel good(A: f32[8]) -> (C: f32[8]) {
  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i+1}; ];  % reads past the end
}
"""


def test_diagnostics_cover_broken_and_good_kernels():
    ds = ide.diagnostics(BROKEN, "b.leir")
    assert [(d.code, d.span.line) for d in ds] == [("E001", 2), ("E030", 5)]
    assert all(d.file == "b.leir" for d in ds)
    assert ide.diagnostics(TWO) == []


def test_actions_and_edits_in_a_file_with_a_broken_kernel():
    fixed = BROKEN.replace("A^{f32,g}_{i+1}", "A^{f32,g}_{i}")
    acts = ide.code_actions(fixed, 5, 5)
    par = next(a for a in acts if a.step.name == "loop_parallelization")
    assert par.kernel == "good"
    out = ide.apply_text(fixed, par.step, "good")
    assert out.splitlines()[:4] == fixed.splitlines()[:4] and "P^{8}_{i=0} [" in out.splitlines()[4]
    assert out.endswith("];  % reads past the end\n}\n")


def test_edits_are_one_based_and_apply_in_any_order():
    step = Step.make("loop_parallelization", loop="N0.i")
    text = "\\kernel k(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i}; ];\n}\n"
    (e,) = ide.apply_edits(text, step)
    assert (e.start_line, e.start_col, e.end_line, e.end_col) == (2, 3, 2, 50)  # end: after '];'
    assert ide.apply_to_text(text, [e]) == ide.apply_text(text, step)


def test_comments_on_rebuilt_nodes_are_kept_above_the_new_items():
    # fission rebuilds the loop: its head comment has no node to stay on
    check_assist("operator_fission", r"""\kernel k(A: f32[8]) -> (C: f32[8], D: f32[8]) {
  % the nest
  L^{8}_{i=0} [  % head$0
    C^{f32,g}_{i} = A^{f32,g}_{i} + 1;  % first
    D^{f32,g}_{i} = A^{f32,g}_{i} * 2;  % second
  ];  % end
}
""", r"""\kernel k(A: f32[8]) -> (C: f32[8], D: f32[8]) {
  % the nest
  % head
  L^{8}_{i=0} [
    C^{f32,g}_{i} = A^{f32,g}_{i} + 1; % first
  ];
  L^{8}_{i=0} [
    D^{f32,g}_{i} = A^{f32,g}_{i}*2; % second
  ];  % end
}
""")


def _commented(text: str) -> str:
    """``text`` with a comment on its own line before every line and one after it."""
    return "\n".join(f"% c{i}\n{ln}  % t{i}" if ln.strip() else ln for i, ln in enumerate(text.splitlines())) + "\n"


@pytest.mark.parametrize("name", ["softmax", "gemm_bias_relu", "layernorm"])
def test_strategy_edits_never_lose_a_comment(name):
    text = _commented((STDLIB / f"{name}.leir").read_text())
    (k,) = parse(text).module.kernels
    tried = 0
    for site in enumerate_sites(k)[:14]:
        step = site.first_step()
        try:
            want = apply_step(k, step)
        except NotApplicable:
            continue
        edits = ide.apply_edits(text, step)
        out = ide.apply_to_text(text, edits)
        assert parse(out).module.kernels[0] == want, step
        assert texts(out) == texts(text), step
        # minimal: the items of the common prefix and suffix of the old and new bodies
        # are not inside any edit
        p = 0
        while p < min(len(k.body), len(want.body)) and k.body[p] == want.body[p]:
            p += 1
        q = 0
        while q < min(len(k.body), len(want.body)) - p and k.body[-1 - q] == want.body[-1 - q]:
            q += 1
        same = list(k.body[:p]) + list(k.body[len(k.body) - q:])
        for e in edits:
            for it in same:
                assert (e.end_line, e.end_col) <= (it.span.line, it.span.col) or \
                       (it.span.end_line, it.span.end_col) <= (e.start_line, e.start_col), (step, e)
        tried += 1
    assert tried >= 5


def test_crlf_files_keep_their_line_endings():
    text = "\\kernel k(A: f32[8]) -> (C: f32[8]) {\r\n  % c\r\n  L^{8}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i}; ];\r\n}\r\n"
    out = ide.apply_text(text, Step.make("loop_parallelization", loop="N0.i"))
    assert out == "\\kernel k(A: f32[8]) -> (C: f32[8]) {\r\n  % c\r\n  P^{8}_{i=0} [\r\n    C^{f32,g}_{i} = A^{f32,g}_{i};\r\n  ];\r\n}\r\n"


def test_a_step_that_does_not_apply_raises_not_applicable():
    with pytest.raises(NotApplicable):
        ide.apply_edits(TWO, Step.make("loop_tiling", loop="N0.i", factor_outer=3, factor_inner=2), "first")
    with pytest.raises(NotApplicable):
        ide.apply_edits("L^{4}_{i=0}[", Step.make("loop_parallelization", loop="N0.i"))


def test_inline_evaluation_goes_through_the_engine():
    pytest.importorskip("tvm")
    from leirc.ide import evaluate_kernel, summary

    good = r"""\kernel k(A: f32[4, 8]) -> (Y: f32[4, 8]) {
  L^{4}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i,j} = A^{f32,g}_{i,j} * 2.0; ];
}
"""
    ev = evaluate_kernel(good)
    assert ev.ok and ev.verify.equal and summary(ev).startswith("verified")
    # a candidate that differs from its reference is reported, not hidden
    bad = good.replace("* 2.0", "* 2.5")
    ev = evaluate_kernel(bad, reference=good)
    assert not ev.ok and ev.error_kind == "mismatch" and summary(ev).startswith("NOT verified (mismatch)")


# ---------------------------------------------------------------------------
# the language server's engine side: per-kernel documents and editor features (issue 14)

from leirc.ide import assists as ide_assists  # noqa: E402
from leirc.ide import features as F  # noqa: E402
from leirc.strategies import base as S  # noqa: E402
from leirc.ide.document import AnalysisCache, Document  # noqa: E402


def _diag_key(ds):
    return [(d.code, d.message, d.severity, d.span and (d.span.line, d.span.col, d.span.end_line, d.span.end_col,
                                                        d.span.start, d.span.end)) for d in ds]


def _mutants(seed: int, n: int):
    import random

    rng = random.Random(seed)
    files = sorted(STDLIB.glob("*.leir"))
    for _ in range(n):
        text = rng.choice(files).read_text() + "\n" + rng.choice(files).read_text()
        for _ in range(rng.randint(1, 3)):
            p = rng.randrange(len(text))
            text = text[:p] + rng.choice(["", "[", "]", ";", "}", "\\kernel", "\n\\kernel k(", "L^{4}_{i=0}", "é",
                                          "😀", "A^{f32,g}_{i}", " % c"]) + text[p + rng.randint(0, 5):]
        yield text


def test_document_diagnostics_equal_the_whole_file_analysis():
    """Per-kernel analysis is the parser's per-kernel recovery applied to every file: the
    same diagnostics at the same places, for clean, multi-kernel and broken files."""
    texts = [p.read_text() for p in sorted(STDLIB.glob("*.leir"))]
    texts.append("\n".join(texts))
    texts.extend(_mutants(7, 120))
    for text in texts:
        assert _diag_key(Document(text, cache=AnalysisCache()).diagnostics()) == _diag_key(ide.diagnostics(text))


def test_an_edit_reanalyzes_only_the_kernel_it_touches():
    text = "\n".join(p.read_text() for p in sorted(STDLIB.glob("*.leir"))[:8])
    cache = AnalysisCache()
    doc = Document(text, cache=cache)
    n = len(doc.segments)
    assert cache.misses == n >= 8
    seg = doc.segments[3]
    i = seg.offset + seg.text.index("[") + 1
    edited = text[:i] + " " + text[i:]
    doc2 = Document(edited, cache=cache)
    assert cache.misses == n + 1 and cache.hits == n - 1
    assert _diag_key(doc2.diagnostics()) == _diag_key(ide.diagnostics(edited))
    # kernels below the edit moved one column on one line only: their results are shifted
    assert [k.name for _, k in doc2.kernels()] == [k.name for _, k in doc.kernels()]


NAV = r"""\kernel two(X: f32[8]) -> (Y: f32[8]) {
  L^{8}_{i=0} [ T^{f32,l}_{i} = exp(X^{f32,g}_{i}); ];
  L^{8}_{i=0} [ Y^{f32,g}_{i} = max(T^{f32,l}_{i}, 0.0); ];
}
"""


def _at(text: str, needle: str, nth: int = 0, delta: int = 0) -> tuple[int, int]:
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    i += delta
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def test_loop_indices_are_scoped_to_their_loop_and_tensors_to_the_kernel():
    doc = Document(NAV)
    first = F.references(doc, *_at(NAV, "T^{f32,l}_{i}", 0, 12))
    assert [(s.line, s.col) for s in first] == [(2, 10), (2, 28), (2, 48)]  # header, T_{i}, X_{i}
    assert F.definition(doc, *_at(NAV, "T^", 1)) == F.references(doc, *_at(NAV, "T^"))[0]
    edits = F.rename(doc, *_at(NAV, "T^", 1), "Tmp")
    out = ide.apply_to_text(NAV, edits)
    assert out.count("Tmp^{f32,l}") == 2 and ide.diagnostics(out) == []
    with pytest.raises(F.RenameError, match="already exists"):
        F.rename(doc, *_at(NAV, "T^"), "Y")
    with pytest.raises(F.RenameError, match="not a valid"):
        F.rename(doc, *_at(NAV, "T^"), "9x")


def test_hover_inlay_and_signature_on_the_checked_facts():
    doc = Document(NAV)
    assert "f32[8]" in F.hover(doc, *_at(NAV, "T^")).markdown
    assert [h.label for h in F.inlay_hints(doc)] == [": f32[8]"]
    sig = F.signature_help(doc, *_at(NAV, "0.0"))
    assert sig.label == "max(a, b, ...)" and sig.active == 1
    assert F.signature_help(doc, *_at(NAV, "X^{f32,g}_{i}", 0, 12)) is None  # in a subscript, not an argument


def test_assists_are_listed_without_planning_titled_and_resolve_to_minimal_edits(monkeypatch):
    src = (STDLIB / "softmax.leir").read_text()
    doc = Document(src)
    line, col = _at(src, "L^{256}", 1)
    planned = []
    real_plan = ide_assists.plan_step
    monkeypatch.setattr(ide_assists, "plan_step", lambda *a, **kw: planned.append(a[1]) or real_plan(*a, **kw))
    acts = ide_assists.assists_at(doc, line, col)
    assert planned == []  # listing applies nothing: resolving plans
    titles = [a.title for a in acts]
    assert "Parallelize loop i" in titles and all(ide.anchors.contains(a.span, line, col) for a in acts)
    par = next(a for a in acts if a.title == "Parallelize loop i")
    out = ide.apply_to_text(src, ide_assists.resolve(doc, par.kernel, par.step))
    assert planned == [par.step]
    assert out == ide.apply_text(src, par.step)
    # the list equals the strategies' own cursor listing, whatever the order they ran in
    got = ide_assists.focus_at(doc, line, col)
    assert got is not None and got[1].complete
    direct = {st for site in S.sites_at(got[0].kernel, got[1].path, result=got[0].result)
              for st in site.steps(limit=2)}
    assert {a.step for a in acts} <= direct
    # a listed step that does not apply is refused at resolve time, with a reason
    bogus = Step.make("loop_unrolling", loop="N9.zz")
    with pytest.raises(NotApplicable):
        ide_assists.resolve(doc, "softmax", bogus)


def test_focus_sites_are_complete_per_strategy_and_remembered():
    src = (STDLIB / "softmax.leir").read_text() + "\n% a text of its own: a kernel object of its own\n"
    doc = Document(src)
    line, col = _at(src, "L^{256}", 1)
    seg, focus = ide_assists.focus_at(doc, line, col)
    names = ide_assists.strategy_names()
    assert focus.compute(names[:3]) and focus.missing(names[:3]) == []
    assert not focus.complete and set(focus.found) == set(names[:3])
    # stopped before the next strategy: nothing half listed
    assert focus.compute(names, stop=lambda: True) is False and set(focus.found) == set(names[:3])
    assert focus.compute() and focus.complete
    assert ide_assists.focus_at(Document(src), line, col)[1] is focus  # same kernel text: same object
    fast, slow = ide_assists.split_by_cost(names, slow_ms=-1.0)
    assert fast == [] and sorted(slow) == sorted(names)


def test_suggestions_rank_with_the_search_cost_model_and_memory(tmp_path):
    from leirc.ide import suggestions as SG
    from leirc.search.memory import Memory
    from leirc.search.suggest import suggest as search_suggest
    from leirc.engine.program import Program

    src = (STDLIB / "softmax.leir").read_text()
    doc = Document(src)
    r = SG.suggest(doc, "softmax", 3)
    assert r.source == "cost model" and r.suggestions and r.note == ""
    seg = doc.segment_of("softmax")
    expect = search_suggest(Program(seg.kernel, seg.result), k=3)
    assert [s.step for s in r.suggestions] == [e.step for e in expect]
    assert all(s.rationale.startswith("cost model") and s.title for s in r.suggestions)
    # remembered per kernel text (the code-action list shows them without ranking again)
    assert SG.last(Document(src), "softmax") == r.suggestions and SG.last(Document(src + " "), "softmax") == []
    # a memory file read in process: its evidence joins the rationale; the file stays closed
    path = tmp_path / "memory.sqlite"
    m = Memory(str(path))
    m.record([], r.suggestions[0].step.name, 0.5)
    m.close()
    mem = SG.open_memory(str(path))
    assert mem is not None and mem.db is None
    r2 = SG.suggest(doc, "softmax", 3, memory=mem)
    assert r2.source == "cost model + memory" and all("memory:" in s.rationale for s in r2.suggestions)
    assert SG.open_memory(str(tmp_path / "missing.sqlite")) is None and SG.open_memory("none") is None
    with pytest.raises(NotApplicable):
        SG.suggest(doc, "nope")


def test_range_formatting_touches_only_the_kernels_in_the_range():
    ugly = NAV + "\n" + NAV.replace("two", "three").replace("  L^{8}_{i=0} [ T", "  L^{8}_{i=0}   [ T")
    doc = Document(ugly)
    (edit,) = F.format_range(doc, 7, 7)
    assert edit.start_line == 6 and "three" in edit.new_text
    assert F.format_document(Document("\\kernel k(")) is None


def test_utf16_positions_round_trip():
    positions = pytest.importorskip("leirc_lsp.positions")
    text = "% é😀x\nab"
    lines = positions.Lines(text)
    p = lines.to_lsp(1, 5)  # before x: '% ', 'é' (1 unit), '😀' (2 units)
    assert (p.line, p.character) == (0, 5)
    assert lines.from_lsp(p) == (1, 5)


def test_the_listing_worker_warm_up_lists_every_strategy_at_every_item():
    from leirc.ide import assists
    from leirc.strategies import all_strategies, sites_at
    from leirc.strategies.rewrite import iter_items
    from leirc_lsp.server import WARM_UP

    doc = Document(WARM_UP, "<warm-up>")
    seg = doc.segment_of("warm")
    names = [s.name for s in all_strategies()]
    want = sum(len(sites_at(seg.kernel, tuple(p), result=seg.result, strategies=names)) for p, _ in iter_items(seg.kernel))
    assert want > 0 and assists.warm_worker(WARM_UP) == want
    assert assists.warm_worker(WARM_UP.replace("M^{f32,l}_{i}, X", "M^{f32,l}_{i}, Q")) == 0  # does not check: nothing


def test_run_device_from_the_editor_settings():
    from leirc.ide import run_device

    assert run_device("llvm", None, None, local_gpu=False) is None
    here = run_device("llvm", None, None, local_gpu=True)
    assert here == {"label": "GPU (cuda, this machine)", "target": "cuda", "rpc": None}
    assert run_device("cuda", None, None, local_gpu=True) is None  # the verify lens runs there already
    remote = run_device("llvm", "127.0.0.1:9190", "a100", local_gpu=True)
    assert remote == {"label": "GPU (cuda via a100@127.0.0.1:9190)", "target": "cuda",
                      "rpc": {"tracker": "127.0.0.1:9190", "key": "a100"}}
    assert run_device("llvm", "box:9190", "rk3588", "llvm")["label"] == "llvm via rk3588@box:9190"
    with pytest.raises(ValueError, match="rpcKey"):
        run_device("llvm", "127.0.0.1:9190", None)
    with pytest.raises(ValueError, match="HOST:PORT"):
        run_device("llvm", "9190", "a100")
