"""The language server end to end: a real ``python -m leirc_lsp`` over stdio, driven by
pytest-lsp with VS Code's client capabilities (one server for the module)."""

from __future__ import annotations

import pytest
from lsprotocol import types as T

from test_lsp_support import change_doc, diagnostics_for, make_client_fixture, open_doc, pos, tdi

pytestmark = pytest.mark.asyncio(loop_scope="module")

# no user memory (the ranking must not depend on the machine's ~/.cache) and complete
# code-action lists (the time budget is tested on its own in test_lsp_latency.py)
client = make_client_fixture(init_options={"memory": "none", "codeActionBudgetMs": 0})

MATMUL = r"""% a matmul
\kernel matmul(A: f32[64, 32], B: f32[32, 48]) -> (C: f32[64, 48]) {
  L^{64}_{i=0} L^{48}_{j=0} L^{32}_{k=0} [
    C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j};
  ];
}

\kernel two(X: f32[8]) -> (Y: f32[8]) {
  L^{8}_{i=0} [ T^{f32,l}_{i} = exp(X^{f32,g}_{i}); ];
  L^{8}_{i=0} [ Y^{f32,g}_{i} = max(T^{f32,l}_{i}, 0.0); ];
}
"""


async def test_diagnostics_arrive_and_follow_edits(client):
    uri = "file:///ws/diag.leir"
    open_doc(client, uri, MATMUL, 1)
    assert list(await diagnostics_for(client, uri, 1)) == []
    broken = MATMUL.replace("B^{f32,g}_{k,j};", "Q^{f32,g}_{k,j};")
    change_doc(client, uri, broken, 2)
    diags = await diagnostics_for(client, uri, 2)
    assert diags and diags[0].code == "E018" and diags[0].severity == T.DiagnosticSeverity.Error
    assert diags[0].range.start == pos(broken, "Q^")
    # a syntax error in one kernel leaves the other checked
    syntax = MATMUL.replace("L^{8}_{i=0} [ T", "L^{8}_{i=0} [ [ T")
    change_doc(client, uri, syntax.replace("f32[64, 32]", "f32[64, 31]"), 3)
    codes = sorted(d.code for d in await diagnostics_for(client, uri, 3))
    assert "E001" in codes and "E015" in codes or "E030" in codes, codes


async def test_hover_tensor_loop_and_intrinsic(client):
    uri = "file:///ws/hover.leir"
    open_doc(client, uri, MATMUL)
    h = await client.text_document_hover_async(T.HoverParams(text_document=tdi(uri), position=pos(MATMUL, "A^")))
    assert "f32[64, 32]" in h.contents.value and "input" in h.contents.value
    h = await client.text_document_hover_async(T.HoverParams(text_document=tdi(uri), position=pos(MATMUL, "k,j")))
    assert "loop **k**" in h.contents.value and "32 iterations" in h.contents.value
    h = await client.text_document_hover_async(T.HoverParams(text_document=tdi(uri), position=pos(MATMUL, "exp")))
    assert "exp(x)" in h.contents.value
    h = await client.text_document_hover_async(T.HoverParams(text_document=tdi(uri), position=pos(MATMUL, "T^")))
    assert "f32[8]" in h.contents.value and "intermediate" in h.contents.value and "local" in h.contents.value


async def test_definition_references_rename(client):
    uri = "file:///ws/nav.leir"
    open_doc(client, uri, MATMUL)
    d = await client.text_document_definition_async(T.DefinitionParams(text_document=tdi(uri),
                                                                       position=pos(MATMUL, "A^")))
    assert d.range.start == pos(MATMUL, "A: f32")
    d = await client.text_document_definition_async(T.DefinitionParams(text_document=tdi(uri),
                                                                       position=pos(MATMUL, "T^", 1)))
    assert d.range.start == pos(MATMUL, "T^", 0)  # an intermediate: its first write
    refs = await client.text_document_references_async(T.ReferenceParams(
        text_document=tdi(uri), position=pos(MATMUL, "{i=0} [ T", 0, 1),
        context=T.ReferenceContext(include_declaration=True)))
    # the first nest of `two` binds i: its header and its two uses, not the second nest's
    assert len(refs) == 3
    edit = await client.text_document_rename_async(T.RenameParams(text_document=tdi(uri),
                                                                  position=pos(MATMUL, "k,j"), new_name="kk"))
    assert len(edit.changes[uri]) == 3 and all(e.new_text == "kk" for e in edit.changes[uri])
    with pytest.raises(Exception, match="already the index"):
        await client.text_document_rename_async(T.RenameParams(text_document=tdi(uri), position=pos(MATMUL, "k,j"),
                                                               new_name="j"))


async def test_symbols_folding_tokens_inlay(client):
    uri = "file:///ws/outline.leir"
    open_doc(client, uri, MATMUL)
    syms = await client.text_document_document_symbol_async(T.DocumentSymbolParams(text_document=tdi(uri)))
    assert [s.name for s in syms] == ["matmul", "two"]
    assert syms[0].children[0].name == "64×48×32 nest (i, j, k)"
    folds = await client.text_document_folding_range_async(T.FoldingRangeParams(text_document=tdi(uri)))
    assert any(f.start_line == 1 and f.end_line == 5 for f in folds)
    toks = await client.text_document_semantic_tokens_full_async(T.SemanticTokensParams(text_document=tdi(uri)))
    data = list(toks.data)
    assert len(data) % 5 == 0 and len(data) > 50
    hints = await client.text_document_inlay_hint_async(T.InlayHintParams(
        text_document=tdi(uri), range=T.Range(start=T.Position(line=0, character=0), end=T.Position(line=20, character=0))))
    assert [h.label for h in hints] == [": f32[8]"]


async def test_completion_signature_formatting(client):
    uri = "file:///ws/edit.leir"
    text = MATMUL.replace("exp(X^{f32,g}_{i})", "exp(X^{")
    open_doc(client, uri, text)
    c = await client.text_document_completion_async(T.CompletionParams(text_document=tdi(uri),
                                                                       position=pos(text, "exp(X^{", 0, 7)))
    assert "f32" in [i.label for i in c.items]
    c = await client.text_document_completion_async(T.CompletionParams(text_document=tdi(uri),
                                                                       position=pos(MATMUL, "C^{f32,g}_{i,j} =")))
    labels = [i.label for i in c.items]
    assert {"A", "B", "C", "i", "j", "k", "exp"} <= set(labels)
    uri2 = "file:///ws/fmt.leir"
    ugly = MATMUL.replace("L^{8}_{i=0} [ T", "L^{8}_{i=0}   [ T")
    open_doc(client, uri2, ugly)
    s = await client.text_document_signature_help_async(T.SignatureHelpParams(
        text_document=tdi(uri2), position=pos(ugly, "0.0)")))
    assert s.signatures[0].label.startswith("max(") and s.active_parameter == 1
    edits = await client.text_document_formatting_async(T.DocumentFormattingParams(
        text_document=tdi(uri2), options=T.FormattingOptions(tab_size=2, insert_spaces=True)))
    assert len(edits) == 1 and "  L^{8}_{i=0} [\n" in edits[0].new_text
    redits = await client.text_document_range_formatting_async(T.DocumentRangeFormattingParams(
        text_document=tdi(uri2), range=T.Range(start=T.Position(line=8, character=0), end=T.Position(line=8, character=1)),
        options=T.FormattingOptions(tab_size=2, insert_spaces=True)))
    assert len(redits) == 1 and redits[0].range.start.line == 7  # only the kernel `two`


async def test_code_actions_resolve_to_minimal_edits(client):
    uri = "file:///ws/actions.leir"
    open_doc(client, uri, MATMUL)
    acts = await client.text_document_code_action_async(T.CodeActionParams(
        text_document=tdi(uri), range=T.Range(start=pos(MATMUL, "L^{64}"), end=pos(MATMUL, "L^{64}")),
        context=T.CodeActionContext(diagnostics=[], only=[T.CodeActionKind.Refactor])))
    titles = [a.title.split(" · ")[0] for a in acts]
    assert "Parallelize loop i" in titles
    assert any(t.startswith("Apply loop tiling (i, j by") for t in titles)
    assert all(a.edit is None for a in acts)  # computed on resolve
    par = next(a for a in acts if a.title.startswith("Parallelize loop i · "))
    done = await client.code_action_resolve_async(par)
    (edit,) = done.edit.changes[uri]
    assert edit.range.start.line == 2 and edit.new_text.startswith("P^{64}_{i=0} L^{48}_{j=0}")
    assert done.command.command == "leirc.verifyRewrite"
    # nothing is offered on a comment line outside kernels
    none = await client.text_document_code_action_async(T.CodeActionParams(
        text_document=tdi(uri), range=T.Range(start=T.Position(line=0, character=2), end=T.Position(line=0, character=2)),
        context=T.CodeActionContext(diagnostics=[])))
    assert not none


async def test_suggest_command_and_lenses(client):
    uri = "file:///ws/suggest.leir"
    open_doc(client, uri, MATMUL)
    res = await client.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.suggest",
                                                                              arguments=[uri, "two"]))
    assert res["suggestions"] and all(s["rationale"] for s in res["suggestions"])
    assert not res["cancelled"] and res["suggestions"][0]["score"] >= res["suggestions"][-1]["score"]
    # work-done progress (the VS Code capabilities allow it): begun and ended
    (reports,) = [r for t, r in client.progress_reports.items() if str(t).startswith("leirc-suggest")]
    assert isinstance(reports[0], T.WorkDoneProgressBegin) and isinstance(reports[-1], T.WorkDoneProgressEnd)
    lenses = await client.text_document_code_lens_async(T.CodeLensParams(text_document=tdi(uri)))
    assert {lens.command.command for lens in lenses} == {"leirc.verifyKernel", "leirc.suggest"}
    assert sum(lens.command.command == "leirc.verifyKernel" for lens in lenses) == 2


async def test_malformed_and_binary_documents_get_answers(client):
    uri = "file:///ws/bad.leir"
    text = "\\kernel k(A: f32[4]) -> (B: f32[4]) {\x00 L^{4}_{i=0} [ B^{f32,g}_{i} = A^{f32,g}_{i}; ]; }\n\udcff\ufffd é 😀"
    open_doc(client, uri, text)
    diags = await diagnostics_for(client, uri, 1)
    assert diags and diags[0].code == "E001"
    for p in (T.Position(line=0, character=3), T.Position(line=1, character=9), T.Position(line=7, character=0)):
        await client.text_document_hover_async(T.HoverParams(text_document=tdi(uri), position=p))
        await client.text_document_completion_async(T.CompletionParams(text_document=tdi(uri), position=p))
    assert await client.text_document_formatting_async(T.DocumentFormattingParams(
        text_document=tdi(uri), options=T.FormattingOptions(tab_size=2, insert_spaces=True))) is None


async def test_trace_files_complete_and_explain_strategies(client):
    uri = "file:///ws/trace.json"
    text = '{"version": 1, "steps": [{"strategy": "loop_tiling", "args": {"lo'
    open_doc(client, uri, text)
    diags = await diagnostics_for(client, uri, 1)
    assert diags and "not valid JSON" in diags[0].message
    c = await client.text_document_completion_async(T.CompletionParams(text_document=tdi(uri),
                                                                       position=pos(text, '"lo', 1, 3)))
    assert [i.label for i in c.items] == ["loop", "factor_outer", "factor_inner"]
    c = await client.text_document_completion_async(T.CompletionParams(text_document=tdi(uri),
                                                                       position=pos(text, '"steps"')))
    assert "online_softmax" in [i.label for i in c.items]
    h = await client.text_document_hover_async(T.HoverParams(text_document=tdi(uri), position=pos(text, "loop_tiling")))
    assert "Tile two directly nested loops" in h.contents.value
    good = '[{"strategy": "loop_tilling", "args": {}}]'
    change_doc(client, uri, good, 2)
    (d,) = await diagnostics_for(client, uri, 2)
    assert "unknown strategy 'loop_tilling'" in d.message and d.range.start == pos(good, "loop_tilling")


async def test_incremental_changes_in_utf16_ranges(client):
    uri = "file:///ws/incr.leir"
    text = MATMUL.replace("% a matmul", "% a matmul 😀 é")
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    start = pos(text, "B^{f32,g}_{k,j};")
    end = T.Position(line=start.line, character=start.character + 1)
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[T.TextDocumentContentChangePartial(range=T.Range(start=start, end=end), text="Q")]))
    (d,) = await diagnostics_for(client, uri, 2)
    assert d.code == "E018" and d.range.start == start
    # a diagnostic on a non-BMP character spans its two UTF-16 code units
    bad = "\\kernel k(A: f32[4]) -> (B: f32[4]) { 😀 }\n"
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=3),
        content_changes=[T.TextDocumentContentChangeWholeDocument(text=bad)]))
    (d,) = await diagnostics_for(client, uri, 3)
    assert d.code == "E001" and d.range.start == pos(bad, "😀")
    assert d.range.end.character - d.range.start.character == 2
