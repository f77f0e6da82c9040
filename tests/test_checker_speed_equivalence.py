"""The checker's output is pinned: every diagnostic (code, severity, message, span, notes, in
order) and the facts of :class:`CheckResult` that strategies, lowering and the interpreter
read (tensor table, per-statement kind/op/identity/operand/reduce vars/carried loops/private
tensors) for every ``.leir`` of stdlib/, examples/, tests/golden/ (and ../shared/compat when
present), plus mutated variants of each file (a line dropped, an extent or an operator
changed), so that error paths are pinned too, not only clean programs.

The golden ``tests/golden/checker_diagnostics.json`` was generated with the checker *before*
its speed work (issue #14 item 2); a faster checker must produce exactly the same. The
variants are chosen by a fixed rule (no randomness), so the inputs are the same every run.

Regenerate only when a checker change is *meant* to change output:

    python tests/test_checker_speed_equivalence.py --write
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from leirc.lang import ast as A  # noqa: E402
from leirc.lang.checker import check_module  # noqa: E402
from leirc.lang.parser import parse  # noqa: E402
from leirc.lang.printer import print_expr  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "checker_diagnostics.json"
SOURCE_DIRS = ("stdlib", "examples", "tests/golden")
COMPAT = ROOT.parent / "shared" / "compat"
#: at most this many drop-a-line variants per file (evenly spaced over its lines)
DROPS_PER_FILE = 6


def source_files(root: Path = ROOT) -> list[tuple[str, Path]]:
    out = []
    for d in SOURCE_DIRS:
        for f in sorted((root / d).rglob("*.leir")):
            out.append((f.relative_to(root).as_posix(), f))
    if COMPAT.is_dir():  # the shared compatibility corpus, where this checkout has one
        out.extend(("compat/" + f.relative_to(COMPAT).as_posix(), f) for f in sorted(COMPAT.rglob("*.leir")))
    return out


def variants(text: str) -> list[tuple[str, str]]:
    """The file itself and deterministic mutations of it."""
    out = [("orig", text)]
    lines = text.split("\n")
    body = [i for i, l in enumerate(lines) if l.strip() and not l.lstrip().startswith(("#", "//", "\\kernel"))]
    if body:
        step = max(1, len(body) // DROPS_PER_FILE)
        for i in body[::step][:DROPS_PER_FILE]:
            out.append((f"drop{i + 1}", "\n".join(lines[:i] + lines[i + 1:])))
    # the first loop extent shrunk and grown: shape, coverage and bounds errors
    m = re.search(r"\^\{(\d+)\}_\{", text)
    if m:
        n = int(m.group(1))
        for label, new in (("extent-1", max(1, n - 1)), ("extent+1", n + 1), ("extent0", 0), ("extentbig", 4096)):
            out.append((label, text[: m.start(1)] + str(new) + text[m.end(1):]))
    # the first loop made parallel / bound: dependence and binding rules
    m = re.search(r"\bL\^\{", text)
    if m:
        out.append(("kindP", text[: m.start()] + "P" + text[m.start() + 1:]))
        out.append(("kindB", text[: m.start()] + "B" + text[m.start() + 1:]))
    # first '+' -> '*' and first dtype f32 -> i32: statement kinds, types, literals
    m = re.search(r" \+ ", text)
    if m:
        out.append(("plus2mul", text[: m.start()] + " * " + text[m.end():]))
    m = re.search(r"f32,g\}", text)
    if m:
        out.append(("f32toi32", text[: m.start()] + "i32,g}" + text[m.end():]))
    return out


def _span(s):
    return None if s is None else [s.line, s.col, s.end_line, s.end_col]


def _expr(e):
    return None if e is None else print_expr(e)


def snapshot(text: str):
    """The checker's output for ``text``, as JSON-able data; None if it does not parse."""
    pr = parse(text, "<input>")
    if pr.module is None or any(d.is_error for d in pr.diagnostics):
        return None
    out = []
    for r in check_module(pr.module):
        tensors = {
            name: [t.dtype, t.scope, t.role, t.rank, None if t.shape is None else list(t.shape), _span(t.span),
                   t.written, t.read, t.private, [l.var for l in t.alloc_loops]]
            for name, t in r.tensors.items()
        }
        stmts = [
            [s.order, _span(s.stmt.span), [l.var for l in s.loops], s.kind, s.op,
             None if s.identity is None else repr(s.identity), _expr(s.operand), list(s.reduce_vars),
             None if s.init_loop is None else s.init_loop.var, sorted(s.carried), sorted(s.private.items())]
            for s in r.stmts
        ]
        out.append({
            "kernel": r.kernel.name,
            "ok": r.ok,
            "diagnostics": [[d.code, d.severity, d.message, _span(d.span), list(d.notes)] for d in r.diagnostics],
            "tensors": sorted(tensors.items()),
            "tensor_order": list(r.tensors),
            "stmts": stmts,
        })
    return out


def inline_cases() -> list[tuple[str, str]]:
    """The one-code-per-row snippets of the diagnostics tests (every checker code has one)
    and the parametrized integer-semantics programs, read from those test modules."""
    out = []
    for name in ("test_diagnostics", "test_checker_int_semantics"):
        path = ROOT / "tests" / f"{name}.py"
        if not path.exists():
            continue
        spec = importlib.util.spec_from_file_location(f"_h10_{name}", path)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Exception:  # someone else's module in flux: its cases are simply not compared
            continue
        for code, (src, _line) in sorted(getattr(mod, "CASES", {}).items()):
            if isinstance(src, str):
                out.append((f"{name}:{code}", src))
        make = getattr(mod, "K", None)
        for fname, fn in sorted(vars(mod).items()):
            for mark in getattr(fn, "pytestmark", ()):
                if mark.name == "parametrize" and mark.args[0] == "body, sig" and make is not None:
                    for k, (body, sig) in enumerate(mark.args[1]):
                        out.append((f"{name}:{fname}[{k}]", make(body, sig)))
    return out


def _key(label: str, text: str) -> str:
    # keyed by content too: an input someone edits gets a new key and is not compared
    return f"{label}@{hashlib.sha256(text.encode('utf-8', 'replace')).hexdigest()[:12]}"


def compute(root: Path = ROOT) -> dict:
    result = {}
    inputs = [(f"{rel}#{label}", t) for rel, path in source_files(root)
              for label, t in variants(path.read_text(encoding="utf-8", errors="replace"))]
    for label, t in inputs + inline_cases():
        snap = snapshot(t)
        if snap is not None:
            result[_key(label, t)] = snap
    return result


def _load_golden() -> dict:
    if not GOLDEN.exists():
        pytest.fail(f"{GOLDEN} is missing; generate it with: python {Path(__file__).name} --write")
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@A.deep_recursion()
def _compute_all():
    return compute()


def test_golden_covers_error_paths():
    golden = _load_golden()
    codes = {d[0] for snap in golden.values() for k in snap for d in k["diagnostics"]}
    # the variants must exercise more than clean programs, or the pin proves little
    assert len(codes) >= 10, sorted(codes)
    assert any(code.startswith("E") for code in codes) and any(code.startswith("W") for code in codes)


@pytest.mark.slow  # about 5 s of CPU: ~1300 inputs through parser and checker
def test_checker_output_matches_golden():
    golden = _load_golden()
    fresh = _compute_all()
    # inputs added since the golden was written are not compared; a vanished input is a
    # changed corpus, not a checker change, and is reported only if nothing is left
    common = sorted(set(golden) & set(fresh))
    assert len(common) >= len(golden) // 2, "the corpus changed too much; regenerate the golden"
    mismatched = [k for k in common if json.loads(json.dumps(fresh[k])) != golden[k]]
    if mismatched:
        k = mismatched[0]
        f = json.loads(json.dumps(fresh[k]))
        g = golden[k]
        detail = next((f"{i}: fresh={a}\n golden={b}" for i, (a, b) in enumerate(zip(f, g)) if a != b), "kernel count")
        pytest.fail(f"{len(mismatched)} of {len(common)} inputs differ; first {k}:\n{detail}")


#: the node fields the checker's fast child table (``_EXPR_CHILDREN``) knows per class
EXPR_FIELDS = {
    "Var": {"name"}, "Const": {"value"}, "BinOp": {"op", "lhs", "rhs"}, "Neg": {"operand"},
    "Access": {"name", "dtype", "scope", "indices"}, "Call": {"func", "args"}, "Compare": {"ops", "operands"},
}


def test_fast_child_table_knows_every_ast_field():
    import dataclasses

    from leirc.lang import checker

    assert {c.__name__ for c in checker._EXPR_CHILDREN} == set(EXPR_FIELDS)
    for cls in checker._EXPR_CHILDREN:
        fields = {f.name for f in dataclasses.fields(cls)} - set(A.TRIVIA_FIELDS)
        assert fields == EXPR_FIELDS[cls.__name__], f"{cls.__name__} changed: update _EXPR_CHILDREN in checker.py"


def test_shared_node_list_is_the_walk():
    from leirc.lang import checker

    for rel, path in source_files()[:40]:
        pr = parse(path.read_text(encoding="utf-8"), rel)
        if pr.module is None:
            continue
        for k in pr.module.kernels:
            nodes = checker._Nodes(k)
            assert nodes.order == list(A.walk(k)) and all(a is b for a, b in zip(nodes.order, A.walk(k)))
            for n in nodes.order:
                assert [id(x) for x in nodes.walk(n)] == [id(x) for x in A.walk(n)], rel
                assert [id(x) for x in nodes.children(n)] == [id(x) for x in A.children(n)], rel


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        data = _compute_all()
        from leirc.io import write_atomic

        # one input per line: a change shows up in a diff as the inputs it touches
        lines = [json.dumps(k) + ": " + json.dumps(v, separators=(",", ":")) for k, v in sorted(data.items())]
        write_atomic(GOLDEN, "{\n" + ",\n".join(lines) + "\n}\n")
        print(f"wrote {GOLDEN} ({len(data)} inputs)")
    else:
        sys.exit(f"usage: python {sys.argv[0]} --write")
