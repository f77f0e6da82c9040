"""The server under abuse: 100 edits in a burst (only the last version's diagnostics
count, nothing is lost or stale), and a seeded fuzz run that mutates documents through
didChange and asks every feature at random positions — every request is answered and
the server stays up."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types as T

from conftest import STDLIB
from test_lsp_support import change_doc, diagnostics_for, make_client_fixture, open_doc, tdi

pytestmark = pytest.mark.asyncio(loop_scope="module")

client = make_client_fixture()

SOFTMAX = (STDLIB / "softmax.leir").read_text()


async def test_a_burst_of_100_edits_ends_with_the_last_versions_diagnostics(client):
    uri = "file:///ws/burst.leir"
    open_doc(client, uri, SOFTMAX, 1)
    text = SOFTMAX
    for v in range(2, 102):
        # every other version has an error; the last one (101) is broken
        text = SOFTMAX.replace("Rsum^{f32,g}_{i} + exp", "Rsum^{f32,g}_{i} + exq") if v % 2 else SOFTMAX
        change_doc(client, uri, text + "\n" * (v % 3), v)
    diags = await diagnostics_for(client, uri, 101)
    assert [d.code for d in diags] == ["E007"]
    change_doc(client, uri, SOFTMAX, 102)
    assert list(await diagnostics_for(client, uri, 102)) == []


MUTATIONS = ["", "[", "]", ";", "}", "{", "\\kernel", "L^{4}_{i=0}", "A^{f32,g}_{i}", "é", "😀", "\x00", "%", "\n",
             "max(", ",", "_{", "^{", "= ", "1e9", "\\frac{", "P^{0}_{z=0}"]


def mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 4)):
        p = rng.randrange(len(text) + 1)
        q = min(len(text), p + rng.randint(0, 6))
        text = text[:p] + rng.choice(MUTATIONS) + text[q:]
    return text


async def test_fuzz_every_feature_at_random_positions(client):
    rng = random.Random(20261202)
    sources = [(STDLIB / n).read_text() for n in ("softmax.leir", "matmul_square.leir", "layernorm.leir")]
    uri = "file:///ws/fuzz.leir"
    open_doc(client, uri, sources[0], 1)
    answered = 0
    for v in range(2, 32):
        text = mutate(rng, rng.choice(sources))
        change_doc(client, uri, text, v)
        lines = text.split("\n")
        for _ in range(3):
            line = rng.randrange(len(lines) + 1)
            char = rng.randrange(len(lines[line]) + 2) if line < len(lines) else 0
            p = T.Position(line=line, character=char)
            r = T.Range(start=p, end=p)
            doc = tdi(uri)
            await client.text_document_hover_async(T.HoverParams(text_document=doc, position=p))
            await client.text_document_definition_async(T.DefinitionParams(text_document=doc, position=p))
            await client.text_document_references_async(T.ReferenceParams(
                text_document=doc, position=p, context=T.ReferenceContext(include_declaration=True)))
            await client.text_document_completion_async(T.CompletionParams(text_document=doc, position=p))
            await client.text_document_signature_help_async(T.SignatureHelpParams(text_document=doc, position=p))
            await client.text_document_document_highlight_async(T.DocumentHighlightParams(text_document=doc,
                                                                                          position=p))
            await client.text_document_prepare_rename_async(T.PrepareRenameParams(text_document=doc, position=p))
            await client.text_document_code_action_async(T.CodeActionParams(
                text_document=doc, range=r, context=T.CodeActionContext(diagnostics=[])))
            answered += 8
        await client.text_document_document_symbol_async(T.DocumentSymbolParams(text_document=tdi(uri)))
        await client.text_document_folding_range_async(T.FoldingRangeParams(text_document=tdi(uri)))
        await client.text_document_semantic_tokens_full_async(T.SemanticTokensParams(text_document=tdi(uri)))
        await client.text_document_inlay_hint_async(T.InlayHintParams(
            text_document=tdi(uri), range=T.Range(start=T.Position(line=0, character=0),
                                                  end=T.Position(line=len(lines), character=0))))
        await client.text_document_code_lens_async(T.CodeLensParams(text_document=tdi(uri)))
        await client.text_document_formatting_async(T.DocumentFormattingParams(
            text_document=tdi(uri), options=T.FormattingOptions(tab_size=2, insert_spaces=True)))
        answered += 6
        await diagnostics_for(client, uri, v)
    assert answered == 30 * (3 * 8 + 6)
    # the server logged no handler failure (a guarded handler logs its traceback)
    assert not [m for m in client.log_messages if "failed" in m.message]
