"""Inline verification through the server: the lens after "Verify", verification of a
strategy edit against the previous version, and a kernel whose run crashes (the server
stays up and says so). Builds run in worker processes (TVM, llvm)."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types as T

from test_lsp_support import make_client_fixture, open_doc, tdi

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

ROWSUM = r"""\kernel rowsum(A: f32[16, 8]) -> (Y: f32[16]) {
  L^{16}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}
"""

client = make_client_fixture()
crashing = make_client_fixture(env={"LEIRC_WORKER_TEST_HOOK": "segfault"})


async def lens_titles(c, uri: str, timeout: float = 300.0) -> list[str]:
    """The verify lenses once no evaluation is running."""
    async def wait():
        while True:
            lenses = await c.text_document_code_lens_async(T.CodeLensParams(text_document=tdi(uri)))
            titles = [lens.command.title for lens in lenses if lens.command.command == "leirc.verifyKernel"]
            if titles and not any(t.startswith(("⏳", "▶")) for t in titles):
                return titles
            await asyncio.sleep(0.2)

    return await asyncio.wait_for(wait(), timeout)


async def test_verify_lens_and_rewrite_verification(client):
    uri = "file:///ws/rowsum.leir"
    open_doc(client, uri, ROWSUM)
    lenses = await client.text_document_code_lens_async(T.CodeLensParams(text_document=tdi(uri)))
    assert any(lens.command.title.startswith("▶ Verify") for lens in lenses)
    res = await client.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.verifyKernel",
                                                                              arguments=[uri, "rowsum"]))
    assert res["started"]
    # the server keeps answering while the build runs
    h = await client.text_document_hover_async(T.HoverParams(text_document=tdi(uri),
                                                             position=T.Position(line=1, character=30)))
    assert h is not None
    (title,) = await lens_titles(client, uri)
    assert title.startswith("✓ equal") and " ms llvm" in title, title
    info = [d for d in client.diagnostics[uri] if d.code == "verify"]
    assert info and info[0].severity == T.DiagnosticSeverity.Information

    # a strategy edit, then its verification against the version before it
    res = await client.workspace_execute_command_async(T.ExecuteCommandParams(
        command="leirc.applyStep", arguments=[uri, "rowsum", {"strategy": "loop_parallelization",
                                                              "args": {"loop": "N0.i"}}]))
    assert res["applied"] and client.applied_edits
    (edit,) = client.applied_edits[-1].edit.changes[uri]
    new = ROWSUM.replace("L^{16}_{i=0}", "P^{16}_{i=0}")
    assert edit.new_text.startswith("P^{16}_{i=0}")
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[T.TextDocumentContentChangeWholeDocument(text=new)]))
    (title,) = await lens_titles(client, uri)
    assert title.startswith("✓ equal") and "vs before" in title, title


async def test_a_crashing_kernel_is_reported_and_the_server_survives(crashing):
    uri = "file:///ws/crash.leir"
    open_doc(crashing, uri, ROWSUM)
    await crashing.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.verifyKernel",
                                                                         arguments=[uri, "rowsum"]))
    (title,) = await lens_titles(crashing, uri)
    assert title.startswith("✗ crash"), title
    # still serving
    syms = await crashing.text_document_document_symbol_async(T.DocumentSymbolParams(text_document=tdi(uri)))
    assert [s.name for s in syms] == ["rowsum"]
