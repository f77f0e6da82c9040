"""``leirc lsp`` starts the same server: the command replaces itself with
``python -m leirc_lsp`` and the editor's ``--stdio`` is accepted."""

from __future__ import annotations

import sys

import pytest
import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

pytestmark = pytest.mark.asyncio(loop_scope="module")

# through the command module, as `leirc lsp --stdio` runs it once "lsp" is in COMMANDS
LAUNCH = ("import argparse, sys; from leirc.cli import cmd_lsp; ap = argparse.ArgumentParser(); "
          "cmd_lsp.register(ap.add_subparsers()); a = ap.parse_args(['lsp', '--stdio']); sys.exit(a.func(a))")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-c", LAUNCH]), scope="module")
async def client(lsp_client: LanguageClient):
    result = await lsp_client.initialize_session(T.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri="file:///ws"))
    lsp_client.init_result = result
    yield
    await lsp_client.shutdown_session()


async def test_leirc_lsp_serves_over_stdio(client):
    caps = client.init_result.capabilities
    assert caps.hover_provider and caps.rename_provider and caps.code_action_provider.resolve_provider
    assert client.init_result.server_info.name == "leirc-lsp"
    uri = "file:///ws/k.leir"
    text = "\\kernel k(A: f32[4]) -> (B: f32[4]) {\n  L^{4}_{i=0} [ B^{f32,g}_{i} = A^{f32,g}_{i}; ];\n}\n"
    client.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
        uri=uri, language_id="leir", version=1, text=text)))
    h = await client.text_document_hover_async(T.HoverParams(text_document=T.TextDocumentIdentifier(uri=uri),
                                                             position=T.Position(line=1, character=32)))
    assert "input" in h.contents.value


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "leirc_lsp"]), scope="module")
async def configured(lsp_client: LanguageClient):
    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri="file:///ws",
        initialization_options={"target": "cuda", "threads": "many", "verifyOnSave": False,
                                "llmBaseUrl": "http://127.0.0.1:9/v1", "llmApiKeyEnv": "LEIRC_TEST_KEY"}))
    yield
    await lsp_client.shutdown_session()


async def _verify_lens(c, uri):
    lenses = await c.text_document_code_lens_async(T.CodeLensParams(text_document=T.TextDocumentIdentifier(uri=uri)))
    return [lens.command.title for lens in lenses if lens.command.command == "leirc.verifyKernel"]


async def test_settings_from_initialization_options_and_configuration(configured):
    uri = "file:///ws/s.leir"
    text = "\\kernel k(A: f32[4]) -> (B: f32[4]) {\n  L^{4}_{i=0} [ B^{f32,g}_{i} = A^{f32,g}_{i}; ];\n}\n"
    configured.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
        uri=uri, language_id="leir", version=1, text=text)))
    assert await _verify_lens(configured, uri) == ["▶ Verify and time (cuda)"]
    # a setting of the wrong type is reported and ignored, the others are taken
    assert any("threads must be a positive integer" in m.message for m in configured.log_messages)
    configured.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"leirc": {"target": "llvm"}}))
    assert await _verify_lens(configured, uri) == ["▶ Verify and time (llvm)"]


def _no_progress_capabilities():
    caps = client_capabilities("visual-studio-code")
    caps.window.work_done_progress = False
    return caps


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "leirc_lsp"]), scope="module")
async def no_progress(lsp_client: LanguageClient):
    await lsp_client.initialize_session(T.InitializeParams(capabilities=_no_progress_capabilities(),
                                                           root_uri="file:///ws",
                                                           initialization_options={"memory": "none"}))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")
async def test_no_progress_is_sent_to_a_client_without_the_capability(no_progress):
    uri = "file:///ws/p.leir"
    text = "\\kernel k(A: f32[64]) -> (B: f32[64]) {\n  L^{64}_{i=0} [ B^{f32,g}_{i} = A^{f32,g}_{i}; ];\n}\n"
    no_progress.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
        uri=uri, language_id="leir", version=1, text=text)))
    res = await no_progress.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.suggest",
                                                                                  arguments=[uri, "k"]))
    from leirc.ide import suggestions
    from leirc.ide.document import Document

    # the search's ranking (cost model, no memory), as computed in this process
    expect = [s.title for s in suggestions.suggest(Document(text), "k", 5).suggestions]
    assert expect and [s["title"] for s in res["suggestions"]] == expect
    assert {s["source"] for s in res["suggestions"]} == {"cost model"}
    assert not no_progress.progress_reports


async def test_the_server_process_never_imports_tvm():
    import subprocess

    probe = ("import sys; import leirc_lsp.server; from leirc.ide.document import Document; "
             "from leirc.ide import assists, features, suggestions; d = Document(open('stdlib/softmax.leir').read()); "
             "assists.assists_at(d, 5, 3); suggestions.suggest(d, 'softmax', 2); features.hover(d, 5, 5); "
             "features.semantic_tokens(d); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tvm'))")
    from conftest import REPO

    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
