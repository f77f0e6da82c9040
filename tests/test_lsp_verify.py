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


rpc_client = make_client_fixture()


async def device_lens(c, uri: str, timeout: float = 300.0) -> str:
    """The "Run on ..." lens once its run is done."""
    async def wait():
        while True:
            lenses = await c.text_document_code_lens_async(T.CodeLensParams(text_document=tdi(uri)))
            titles = [lens.command.title for lens in lenses if lens.command.command == "leirc.runOnDevice"]
            if titles and not titles[0].startswith(("⏳", "▶")):
                return titles[0]
            await asyncio.sleep(0.2)

    return await asyncio.wait_for(wait(), timeout)


async def test_run_on_a_device_of_an_rpc_tracker(rpc_client, tmp_path_factory):
    """With an RPC tracker configured, each kernel gets a "Run on ..." lens: the kernel is
    built here, run and timed on a server of the tracker (started here on 127.0.0.1; the
    llvm target, as no GPU is reachable), its outputs verified here against the interpreter."""
    pytest.importorskip("tornado", reason="TVM's RPC tracker needs tornado (pip install tornado)")
    from rpc_tracker import tracker_with_server

    uri = "file:///ws/remote.leir"
    open_doc(rpc_client, uri, ROWSUM)
    lenses = await rpc_client.text_document_code_lens_async(T.CodeLensParams(text_document=tdi(uri)))
    assert not [x for x in lenses if x.command.command == "leirc.runOnDevice"]  # no device configured, none here
    res = await rpc_client.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.runOnDevice",
                                                                                  arguments=[uri, "rowsum"]))
    assert not res["started"] and "rpcTracker" in res["error"]
    with tracker_with_server(tmp_path_factory.mktemp("lsp-rpc"), "lsp-test") as t:
        rpc_client.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"leirc": {
            "rpcTracker": t["address"], "rpcKey": "lsp-test", "rpcTarget": "llvm"}}))
        lenses = await rpc_client.text_document_code_lens_async(T.CodeLensParams(text_document=tdi(uri)))
        (run,) = [x for x in lenses if x.command.command == "leirc.runOnDevice"]
        assert run.command.title == f"▶ Run on llvm via lsp-test@{t['address']}"
        loads = open(t["server_log"]).read().count("load_module")
        res = await rpc_client.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.runOnDevice",
                                                                                      arguments=[uri, "rowsum"]))
        assert res["started"]
        title = await device_lens(rpc_client, uri)
        assert title.startswith("llvm via lsp-test@") and "✓ equal" in title and " ms llvm" in title, title
        assert open(t["server_log"]).read().count("load_module") > loads  # it really ran there
        # a key no server has: a clear failure on the lens, the server goes on
        rpc_client.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"leirc": {
            "rpcKey": "nobody"}}))
        res = await rpc_client.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.runOnDevice",
                                                                                      arguments=[uri, "rowsum"]))
        # told apart from a refused connection, before anything is built (issue #33)
        assert res["started"] is False and res["problem"] == "unknown-key", res
        title = await device_lens(rpc_client, uri)
        assert title.startswith("llvm via nobody@") and "✗ rpc" in title and "no device for key 'nobody'" in title, title
        assert "lsp-test" in res["error"]  # the keys it does serve
