""""Suggest optimization" through an LLM endpoint, end to end: a real ``python -m leirc_lsp``
over stdio asks the scripted OpenAI-compatible HTTP server (``tests/llm_server.py``) over
real HTTP; the answer is applied through the engine before it is offered, labelled with its
source; a cancelled request answers at once. Skipped until the LLM layer (``leirc.llm``,
``leirc.search.llm_proposers.llm_suggest``) and the scripted server exist."""

from __future__ import annotations

import asyncio
import json

import pytest
from lsprotocol import types as T

from test_lsp_support import make_client_fixture, open_doc

llm_server = pytest.importorskip("llm_server")
pytest.importorskip("leirc.llm")
_proposers = pytest.importorskip("leirc.search.llm_proposers")
if not hasattr(_proposers, "llm_suggest"):
    pytest.skip("leirc.search.llm_proposers.llm_suggest is not there yet", allow_module_level=True)

pytestmark = pytest.mark.asyncio(loop_scope="module")

client = make_client_fixture(init_options={"memory": "none", "codeActionBudgetMs": 0})

KERNEL = r"""\kernel k(A: f32[64, 32]) -> (B: f32[64, 32]) {
  L^{64}_{i=0} L^{32}_{j=0} [ B^{f32,g}_{i,j} = A^{f32,g}_{i,j} * 2.0; ];
}
"""

ANSWER = json.dumps({"strategy": "loop_parallelization", "args": {"loop": "N0.i"},
                     "rationale": "the rows are independent: run them on all cores"})


@pytest.fixture(scope="module")
def scripted():
    with llm_server.ScriptedLLMServer() as srv:
        yield srv


def _configure(client, url, **extra):
    client.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"leirc": {
        "llmBaseUrl": url, "llmModel": "scripted-model", "llmCache": "none", **extra}}))


async def _suggest(client, uri):
    return await client.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.suggest",
                                                                               arguments=[uri, "k"]))


async def test_llm_suggestions_come_over_http_and_are_legal_steps(client, scripted):
    scripted.set_default(llm_server.ok(ANSWER))
    _configure(client, scripted.url)
    uri = "file:///ws/llm.leir"
    open_doc(client, uri, KERNEL)
    res = await _suggest(client, uri)
    assert res["source"] == "llm:scripted-model", res
    assert res["suggestions"], res
    top = res["suggestions"][0]
    assert top["step"] == {"strategy": "loop_parallelization", "args": {"loop": "N0.i"}}
    assert top["title"] == "Parallelize loop i" and top["source"] == "llm:scripted-model"
    assert top["rationale"]
    chats = [r for r in scripted.requests if r["path"].endswith("/chat/completions")]
    assert chats and all(r["json"]["model"] == "scripted-model" for r in chats)
    # no key configured: the placeholder local servers ignore, never something else
    assert all(r["headers"].get("Authorization") == "Bearer unused" for r in chats)


async def test_an_llm_answer_that_is_not_a_legal_step_is_not_offered(client, scripted):
    scripted.set_default(llm_server.ok(json.dumps({"strategy": "loop_parallelization", "args": {"loop": "N5.q"}})))
    _configure(client, scripted.url)
    uri = "file:///ws/illegal.leir"
    open_doc(client, uri, KERNEL.replace("* 2.0", "* 3.0"))
    res = await _suggest(client, uri)
    # nothing the model said applies: the offline ranking answers and says why
    assert all(s["step"]["args"].get("loop") != "N5.q" for s in res["suggestions"])
    assert res["source"] == "cost model" and "ranked offline" in res.get("note", "")


async def test_a_cancelled_llm_suggestion_answers_at_once(client, scripted):
    scripted.set_default(llm_server.slow(ANSWER, 30.0))
    _configure(client, scripted.url)
    uri = "file:///ws/cancel.leir"
    open_doc(client, uri, KERNEL.replace("* 2.0", "* 4.0"))
    task = asyncio.ensure_future(_suggest(client, uri))
    token = None
    for _ in range(2000):
        token = next((t for t in client.progress_reports if str(t).startswith("leirc-suggest")
                      and str(t).endswith("-k") and len(client.progress_reports[t]) == 1), None)
        if token is not None:
            break
        await asyncio.sleep(0.01)
    assert token is not None
    client.protocol.notify(T.WINDOW_WORK_DONE_PROGRESS_CANCEL, T.WorkDoneProgressCancelParams(token=token))
    res = await asyncio.wait_for(task, 25.0)  # long before the scripted answer (30 s)
    assert res["cancelled"] and res["suggestions"] == []
    end = client.progress_reports[token][-1]
    assert isinstance(end, T.WorkDoneProgressEnd) and end.message == "cancelled"
