"""Large files (issue #33, item 2): formatting and semantic tokens kernel by kernel,
equal to the whole-file computations; a burst of edits runs a bounded number of
analyses; a cancelled request is answered as cancelled. No timings here (see
benchmarks/bench_lsp_large.py)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from lsprotocol import types as T

from leirc.ide import features
from leirc.ide.document import Document
from leirc.lang.parser import parse
from leirc.lang.printer import PRETTY, print_module
from leirc_lsp import tokens
from leirc_lsp.positions import Lines

from test_lsp_support import make_client_fixture, open_doc, tdi

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted((ROOT / "stdlib").glob("*.leir")) + sorted((ROOT / "examples").rglob("*.leir"))


def _variants(text: str, rng: random.Random) -> list[str]:
    """The file, doubled, with comments between kernels (blank lines around them or not),
    trailing comments, and random comment or blank lines."""
    out = [text, text + "\n" + text, "% head\n\n" + text + "\n% tail\n",
           text.replace("\n\\kernel", "\n% between\n\n\\kernel"), text.replace("\n\\kernel", "\n% tight\n\\kernel"),
           text.replace("}\n", "} % after\n")]
    lines = text.split("\n")
    for _ in range(4):
        ls = list(lines)
        ls.insert(rng.randrange(len(ls)), rng.choice(["% r", "", "  % q", "\t"]))
        out.append("\n".join(ls))
    return out


def _whole_format(text: str):
    pr = parse(text)
    if pr.module is None or any(d.is_error for d in pr.diagnostics):
        return None
    return print_module(pr.module, PRETTY, comments=True)


def test_kernel_by_kernel_formatting_equals_the_whole_file_print():
    rng = random.Random(33)
    checked = 0
    for f in CORPUS:
        for text in _variants(f.read_text(), rng):
            assert features.format_document(Document(text)) == _whole_format(text), f
            checked += 1
    assert checked >= 200


def test_formatting_after_a_one_line_edit_prints_one_kernel(monkeypatch):
    text = "\n".join(f.read_text() for f in CORPUS[:6])
    doc = Document(text)
    assert len(doc.segments) > 5
    features.format_document(doc)
    printed = []
    real = features.print_kernel
    monkeypatch.setattr(features, "print_kernel", lambda k, *a, **kw: printed.append(k.name) or real(k, *a, **kw))
    edited = text.replace("[", "[ ", 1)  # inside the first kernel
    out = features.format_document(Document(edited))
    assert out == _whole_format(edited) and len(printed) == 1


def _reference_encoding(doc: Document) -> list[int]:
    """Semantic tokens encoded token by token over the whole text (the old way)."""
    lines = Lines(doc.text)
    types_ = {t: i for i, t in enumerate(features.TOKEN_TYPES)}
    mods = {m: 1 << i for i, m in enumerate(features.TOKEN_MODIFIERS)}
    data, pl, pc = [], 0, 0
    for tok in features.semantic_tokens(doc):
        s, e = lines.to_lsp(tok.line, tok.col), lines.to_lsp(tok.line, tok.col + tok.length)
        dl = s.line - pl
        data += [dl, s.character - pc if dl == 0 else s.character, e.character - s.character, types_[tok.type],
                 sum(mods[m] for m in tok.modifiers)]
        pl, pc = s.line, s.character
    return data


def test_semantic_tokens_stitched_per_kernel_equal_the_whole_encoding():
    rng = random.Random(7)
    for f in CORPUS:
        text = f.read_text()
        for t in [text, text + "\n" + text, "% é𝔸\n" + text, text.replace("\n\\kernel", "\n𝔸 é \\kernel")]:
            i = rng.randrange(len(t))
            for x in (t, t[:i] + rng.choice(["\\kernel ", "%", "(", "\n", "é", "𝔸"]) + t[i:]):
                doc = Document(x)
                assert tokens.encode(doc) == _reference_encoding(doc), f


def test_semantic_tokens_after_an_edit_lex_one_kernel(monkeypatch):
    text = "\n".join(f.read_text() for f in CORPUS[:6])
    tokens.encode(Document(text))
    lexed = []
    real = features._lex_tokens
    monkeypatch.setattr(features, "_lex_tokens", lambda t, r: lexed.append(len(t)) or real(t, r))
    edited = text.replace("[", "[ ", 1)
    doc = Document(edited)
    assert tokens.encode(doc) == _reference_encoding(doc)
    assert len(lexed) == 1


def test_outline_converted_per_kernel_equals_the_whole_conversion():
    from leirc_lsp.server import CONVERTER, lsp_symbol, outline

    rng = random.Random(11)
    for f in CORPUS:
        text = f.read_text()
        for t in (text, text + "\n" + text, "% é𝔸\n" + text, text.replace("\n\\kernel", "\n𝔸 é \\kernel")):
            i = rng.randrange(len(t))
            for x in (t, t[:i] + rng.choice(["\n", " ", "é", "𝔸"]) + t[i:]):
                doc = Document(x)
                lines = Lines(doc.text)
                assert outline(doc) == [CONVERTER.unstructure(lsp_symbol(lines, s)) for s in features.document_symbols(doc)]


def test_inlay_hints_look_only_at_the_kernels_shown():
    text = "\n".join(f.read_text() for f in CORPUS)
    doc = Document(text)
    every = features.inlay_hints(doc)
    assert every
    first, last = every[len(every) // 2].line - 3, every[len(every) // 2].line + 3
    assert features.inlay_hints(doc, first, last) == [h for h in every if first <= h.line <= last]


# ---------------------------------------------------------------------------
# the server

pytestmark_server = pytest.mark.asyncio(loop_scope="module")
client = make_client_fixture(init_options={"memory": "none"})

BIG = "\n".join(f.read_text() for f in CORPUS) * 2


async def _stats(c):
    return await c.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.serverStats", arguments=[]))


@pytestmark_server
async def test_a_burst_of_edits_runs_a_bounded_number_of_analyses(client):
    uri = "file:///ws/burst.leir"
    open_doc(client, uri, BIG)
    await client.text_document_semantic_tokens_full_async(T.SemanticTokensParams(text_document=tdi(uri)))
    before = (await _stats(client))["analyses"]
    text = BIG
    requests = []
    for v in range(2, 42):  # 40 keystrokes, each followed by the requests an editor sends
        text = text.replace("L^{", "L^{ ", 1) if v % 2 else text.replace("L^{ ", "L^{", 1)
        client.text_document_did_change(T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=v),
            content_changes=[T.TextDocumentContentChangeWholeDocument(text=text)]))
        requests.append(client.text_document_semantic_tokens_full_async(T.SemanticTokensParams(text_document=tdi(uri))))
        requests.append(client.text_document_document_symbol_async(T.DocumentSymbolParams(text_document=tdi(uri))))
    answers = await asyncio.gather(*requests)
    assert all(a is not None for a in answers)
    # the last answer is of the last text
    assert list(answers[-2].data) == tokens.encode(Document(text))
    ran = (await _stats(client))["analyses"] - before
    assert ran < 40, f"{ran} analyses for 40 edits: one per version"


@pytestmark_server
async def test_a_cancelled_request_is_answered_as_cancelled(client):
    uri = "file:///ws/cancel.leir"
    # every kernel's text new (nothing cached): the request waits for a long analysis -- long
    # enough (8 copies of the corpus, each spelled apart) that the cancel arrives while it runs
    # also on a quiet machine (with one copy the formatting sometimes finished first)
    # every copy spelled apart, so no kernel's result is cached from another copy
    open_doc(client, uri, "\n".join(BIG.replace("L^{", "L^{" + " " * (k + 1)) for k in range(8)))
    fut = client.protocol.send_request(T.TEXT_DOCUMENT_FORMATTING, T.DocumentFormattingParams(
        text_document=tdi(uri), options=T.FormattingOptions(tab_size=2, insert_spaces=True)), msg_id="cancel-me")
    client.protocol.notify(T.CANCEL_REQUEST, T.CancelParams(id="cancel-me"))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wait_for(asyncio.wrap_future(fut), 60)
    # and the server goes on answering
    syms = await client.text_document_document_symbol_async(T.DocumentSymbolParams(text_document=tdi(uri)))
    assert len(syms) > 10
