"""Code actions, suggestions and pull diagnostics of the language server end to end (a
real ``python -m leirc_lsp`` over stdio): a listed action is planned only when resolved,
the time-budgeted list converges to the complete one, "Suggest optimization" is the
search's ranking (and falls back to it when an LLM endpoint is configured but unusable),
pull diagnostics report and say "unchanged"."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types as T
from pytest_lsp import client_capabilities

from conftest import STDLIB
from test_lsp_support import change_doc, make_client_fixture, open_doc, pos, tdi

pytestmark = pytest.mark.asyncio(loop_scope="module")

complete = make_client_fixture(init_options={"memory": "none", "codeActionBudgetMs": 0})
budgeted = make_client_fixture(init_options={"memory": "none"})


def _pull_capabilities():
    caps = client_capabilities("visual-studio-code")
    caps.text_document.diagnostic = T.DiagnosticClientCapabilities(dynamic_registration=False)
    return caps


pulling = make_client_fixture(capabilities=_pull_capabilities(), init_options={"memory": "none"})

KERNEL = r"""\kernel k(A: f32[64, 32]) -> (B: f32[64, 32]) {
  L^{64}_{i=0} L^{32}_{j=0} [ B^{f32,g}_{i,j} = A^{f32,g}_{i,j} * 2.0; ];
}
"""


async def _stats(client) -> dict:
    return await client.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.serverStats"))


async def _actions(client, uri, at):
    return await client.text_document_code_action_async(T.CodeActionParams(
        text_document=tdi(uri), range=T.Range(start=at, end=at), context=T.CodeActionContext(diagnostics=[])))


async def test_listing_plans_nothing_resolving_plans_once(complete):
    uri = "file:///ws/plans.leir"
    open_doc(complete, uri, KERNEL)
    before = (await _stats(complete))["plans"]
    acts = await _actions(complete, uri, pos(KERNEL, "L^{64}"))
    titles = [a.title for a in acts]
    # each title ends with the guarantee its numerics class gives (proven / tested)
    assert "Parallelize loop i · proven: bitwise" in titles and all(a.edit is None for a in acts)
    assert (await _stats(complete))["plans"] == before  # nothing applied to list them
    par = next(a for a in acts if a.title == "Parallelize loop i · proven: bitwise")
    assert par.data["numerics"] == "bitwise"
    done = await complete.code_action_resolve_async(par)
    (edit,) = done.edit.changes[uri]
    assert edit.new_text.startswith("P^{64}_{i=0}") and done.disabled is None
    assert (await _stats(complete))["plans"] == before + 1
    # the verify command names the step's strategy (its direction joins the memory's prefix)
    assert done.command.arguments[-1] == "loop_parallelization"
    # an action whose step does not apply to the current text comes back disabled, with a reason
    par.data = dict(par.data, step={"strategy": "loop_unrolling", "args": {"loop": "N7.zz"}})
    refused = await complete.code_action_resolve_async(par)
    assert refused.edit is None and refused.disabled is not None and refused.disabled.reason


async def test_budgeted_lists_converge_to_the_complete_listing(budgeted):
    from leirc.ide import assists
    from leirc.ide.document import Document

    src = (STDLIB / "sdpa.leir").read_text()
    uri = "file:///ws/sdpa.leir"
    open_doc(budgeted, uri, src)
    at = pos(src, "L^{")
    doc = Document(src)
    line, col = doc.position_of(src.index("L^{"))
    expect = sorted(a.title for a in assists.assists_at(doc, line, col))
    assert expect
    got: list = []
    for _ in range(240):  # what is not listed within the budget joins a later list
        got = sorted(a.title.split(" · ")[0] for a in await _actions(budgeted, uri, at))
        if got == expect:
            break
        assert set(got) <= set(expect)
        await asyncio.sleep(0.25)
    assert got == expect


async def test_suggest_is_the_search_ranking_and_its_actions_join_the_list(complete):
    from leirc.ide import suggestions
    from leirc.ide.document import Document

    uri = "file:///ws/sugg.leir"
    open_doc(complete, uri, KERNEL)
    res = await complete.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.suggest",
                                                                                arguments=[uri, "k"]))
    expect = suggestions.suggest(Document(KERNEL), "k", 5).suggestions
    assert [s["title"] for s in res["suggestions"]] == [s.title for s in expect]
    assert res["source"] == "cost model" and not res["cancelled"]
    assert all(s["rationale"].startswith("cost model") and s["label"].startswith("Suggestion: ")
               for s in res["suggestions"])
    assert all("range" in s for s in res["suggestions"] if s["step"]["args"].get("loop"))
    # the last ranking is offered in the code-action list, labelled as suggestions
    acts = await _actions(complete, uri, pos(KERNEL, "B^"))
    sugg = [a.title for a in acts if a.title.startswith("Suggested: ")]
    assert sugg and sugg[0].startswith(f"Suggested: {expect[0].title} — ")


async def test_an_unusable_llm_setting_falls_back_to_the_offline_ranking(complete, tmp_path):
    cfg = tmp_path / "llm.toml"
    cfg.write_text('max_retries = 0\ntimeout = 2.0\n')
    complete.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"leirc": {
        "llmBaseUrl": "http://127.0.0.1:9/v1", "llmModel": "nobody", "llmConfig": str(cfg), "llmCache": "none"}}))
    uri = "file:///ws/nollm.leir"
    open_doc(complete, uri, KERNEL)
    try:
        res = await complete.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.suggest",
                                                                                    arguments=[uri, "k"]))
    finally:
        complete.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"leirc": {
            "llmBaseUrl": None, "llmModel": None, "llmConfig": None, "llmCache": None}}))
    assert res["suggestions"] and res["source"] == "cost model"
    assert "LLM" in res["note"] and "ranked offline" in res["note"]


async def test_pull_diagnostics_report_and_say_unchanged(pulling):
    uri = "file:///ws/pull.leir"
    open_doc(pulling, uri, KERNEL)
    rep = await pulling.text_document_diagnostic_async(T.DocumentDiagnosticParams(text_document=tdi(uri)))
    assert rep.kind == "full" and list(rep.items) == [] and rep.result_id
    broken = KERNEL.replace("A^{f32,g}_{i,j} * 2.0", "Q^{f32,g}_{i,j} * 2.0")
    change_doc(pulling, uri, broken, 2)
    rep2 = await pulling.text_document_diagnostic_async(T.DocumentDiagnosticParams(text_document=tdi(uri),
                                                                                   previous_result_id=rep.result_id))
    assert rep2.kind == "full" and [d.code for d in rep2.items] == ["E018"]
    assert rep2.items[0].range.start == pos(broken, "Q^")
    same = await pulling.text_document_diagnostic_async(T.DocumentDiagnosticParams(
        text_document=tdi(uri), previous_result_id=rep2.result_id))
    assert same.kind == "unchanged" and same.result_id == rep2.result_id
    # pulled, never pushed (both would show every problem twice)
    assert uri not in pulling.diagnostic_versions
    assert (await _stats(pulling))["diagnostics"] == "pull"


async def test_a_pushing_client_is_not_offered_pull(complete, pulling):
    assert (await _stats(complete))["diagnostics"] == "push"
    assert complete.init_result.capabilities.diagnostic_provider is None
    assert pulling.init_result.capabilities.diagnostic_provider is not None


async def test_the_listing_worker_ends_with_a_killed_server():
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    def frame(msg: dict) -> bytes:
        body = json.dumps(msg).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    proc = subprocess.Popen([sys.executable, "-m", "leirc_lsp"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"processId": None, "rootUri": None, "capabilities": {}}}))
        proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        proc.stdin.flush()
        children_file = f"/proc/{proc.pid}/task/{proc.pid}/children"
        workers: list = []
        for _ in range(600):  # the warm-up starts the worker
            if os.path.exists(children_file):
                workers = open(children_file).read().split()
            if workers:
                break
            time.sleep(0.1)
        assert workers, "no listing worker was started"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    def alive(pid: str) -> bool:
        try:
            with open(f"/proc/{pid}/status") as f:
                return "zombie" not in f.read().lower()
        except OSError:
            return False

    for _ in range(300):
        if not any(alive(w) for w in workers):
            break
        time.sleep(0.1)
    else:
        for w in workers:
            os.kill(int(w), signal.SIGKILL)
        raise AssertionError("the listing worker outlived its server")
