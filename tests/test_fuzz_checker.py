"""Fuzz the checker (not only the parser): structurally mutated programs that still parse
must produce diagnostics, never an exception. Mutations act on the token stream of stdlib
and compat programs so that most mutants parse and reach the checker."""

from __future__ import annotations

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import COMPAT, STDLIB
from leirc.lang.checker import check_text
from leirc.lang.diagnostics import CODES
from leirc.lang.printer import print_module

TOKEN = re.compile(r"\\kernel|[LPVUB]\^\{\d+\}_\{[a-z]+=\d+\}|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*|\d+\.\d*(?:e-?\d+)?|\d+|->|\^\{|_\{|\*\*|//|[<>=!]=|\S")


def _corpus() -> list[str]:
    from leirc.lang.parser import parse

    # canonical compact text: no comments, so token-level mutation cannot comment code out
    progs = [print_module(parse(p.read_text()).module, "compact") for p in sorted(STDLIB.glob("*.leir"))]
    f = COMPAT / "steptp_emitted_level1.jsonl"
    if f.exists():
        from leirc.lang.parser import parse_record

        for line in f.read_text().splitlines()[:40]:
            pr = parse_record(json.loads(line))
            if pr.ok:
                progs.append(print_module(pr.module, "compact"))
    return progs


CORPUS = _corpus()
OPS = ["+", "-", "*", "/", "//", "%", "**", "<", "<=", "==", "&", "|"]
HEADER = re.compile(r"([LPVUB])\^\{(\d+)\}_\{([a-z]+)=(\d+)\}")


def _same_class(tok: str, toks: list[str], draw) -> str:
    """A replacement of the same lexical class, so that most mutants still parse and the
    checker (not the parser) sees them."""
    m = HEADER.fullmatch(tok)
    if m:
        kind = draw(st.sampled_from("LPVUB"))
        ext = draw(st.sampled_from([0, 1, 2, 7, 64, 128, 2048, int(m.group(2)), int(m.group(2)) + 1]))
        var = draw(st.sampled_from([m.group(3), "tx", "bx", "i", "q"]))
        start = draw(st.sampled_from([0, 0, 1]))
        return f"{kind}^{{{ext}}}_{{{var}={start}}}"
    if tok.isdigit():
        return str(draw(st.sampled_from([0, 1, 2, 3, 8, 255, 256, 4096, int(tok) + 1, max(0, int(tok) - 1)])))
    if tok in OPS:
        return draw(st.sampled_from(OPS))
    if re.fullmatch(r"[a-z][a-z0-9]*", tok):
        pool = sorted({t for t in toks if re.fullmatch(r"[a-z][a-z0-9]*", t)} | {"q", "f64", "i64", "bool", "l", "s", "exp", "max"})
        return draw(st.sampled_from(pool))
    if re.fullmatch(r"[A-Z][A-Za-z0-9]*", tok):
        pool = sorted({t for t in toks if re.fullmatch(r"[A-Z][A-Za-z0-9]*", t)} | {"Tnew"})
        return draw(st.sampled_from(pool))
    return tok


@st.composite
def mutants(draw):
    src = draw(st.sampled_from(CORPUS))
    toks = TOKEN.findall(src)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(toks) - 1))
        op = draw(st.sampled_from(["same_class"] * 8 + ["delete", "duplicate"]))
        if op == "same_class":
            toks[i] = _same_class(toks[i], toks, draw)
        elif op == "delete":
            del toks[i]
        else:
            toks.insert(i, toks[i])
    return " ".join(toks)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutants())
def test_checker_never_raises(src):
    cf = check_text(src, "fuzz.leir")
    for d in cf.diagnostics:
        assert d.code in CODES
        assert d.span is None or (d.span.line >= 1 and d.span.col >= 1)
    if cf.ok:
        # a program that checks must print and re-check identically
        again = check_text(print_module(cf.parse.module, "pretty"))
        assert again.ok, [(d.code, d.message) for d in again.diagnostics]
