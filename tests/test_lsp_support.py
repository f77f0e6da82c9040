"""Shared pieces of the language-server tests (tests/test_lsp_*.py; no tests of its own):
the client fixture factory (a real ``python -m leirc_lsp`` over stdio, VS Code's
capabilities), the decode fix for lsprotocol 2025.0.0 and small helpers."""

from __future__ import annotations

import asyncio
import sys
from typing import Union

import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

SERVER = [sys.executable, "-m", "leirc_lsp"]


def make_client_fixture(scope: str = "module", env: dict | None = None, capabilities=None, init_options=None):
    @pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=env), scope=scope)
    async def client(lsp_client: LanguageClient):
        lsp_client.init_result = await lsp_client.initialize_session(T.InitializeParams(
            capabilities=capabilities if capabilities is not None else client_capabilities("visual-studio-code"),
            root_uri="file:///ws", initialization_options=init_options))
        conv = lsp_client.protocol._converter
        # lsprotocol 2025.0.0 decodes every CodeAction with a command as a Command
        # (../shared/notes/editor.md §3.2): tell them apart by the command's type

        def cmd_or_action(obj, _):
            return conv.structure(obj, T.Command if isinstance(obj.get("command"), str) else T.CodeAction)

        conv.register_structure_hook(Union[T.Command, T.CodeAction], cmd_or_action)
        lsp_client.applied_edits = []
        lsp_client.diagnostic_versions = {}

        def on_diagnostics(params: T.PublishDiagnosticsParams):
            # the default handler keeps no versions; tests wait for a given version
            lsp_client.diagnostics[params.uri] = params.diagnostics
            lsp_client.diagnostic_versions[params.uri] = params.version

        lsp_client.protocol.fm.features[T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = on_diagnostics

        @lsp_client.feature(T.WORKSPACE_APPLY_EDIT)
        def apply_edit(params):
            lsp_client.applied_edits.append(params)
            return T.ApplyWorkspaceEditResult(applied=True)

        @lsp_client.feature(T.WORKSPACE_CODE_LENS_REFRESH)
        def refresh(params):
            return None

        yield
        await lsp_client.shutdown_session()

    return client


def open_doc(client, uri: str, text: str, version: int = 1):
    client.text_document_did_open(T.DidOpenTextDocumentParams(
        text_document=T.TextDocumentItem(uri=uri, language_id="leir", version=version, text=text)))


def change_doc(client, uri: str, text: str, version: int):
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[T.TextDocumentContentChangeWholeDocument(text=text)]))


async def diagnostics_for(client, uri: str, version: int, timeout: float = 60.0):
    """Wait until the server published diagnostics for ``version`` of ``uri``."""
    async def wait():
        while client.diagnostic_versions.get(uri) != version:
            await asyncio.sleep(0.005)
        return client.diagnostics[uri]

    return await asyncio.wait_for(wait(), timeout)


def pos(text: str, needle: str, nth: int = 0, delta: int = 0) -> T.Position:
    """The LSP position of the ``nth`` occurrence of ``needle`` (plus ``delta`` columns)."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    i += delta
    line = text.count("\n", 0, i)
    col = i - (text.rfind("\n", 0, i) + 1)
    prefix = text[text.rfind("\n", 0, i) + 1:i]
    return T.Position(line=line, character=len(prefix.encode("utf-16-le")) // 2 if prefix else col)


def tdi(uri: str) -> T.TextDocumentIdentifier:
    return T.TextDocumentIdentifier(uri=uri)
