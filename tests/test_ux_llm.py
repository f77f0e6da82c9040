"""The LLM client re-asks after a bad answer (issue #34), and says when an answer came from the
prompt cache; a run can bypass the cache. Against the scripted OpenAI-compatible server of
``llm_server.py`` over real HTTP, with the real ``openai`` client (no mocks)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from leirc.llm import LLMClient, LLMConfig, LLMError, config_from
from leirc.llm.reask import answer_check
from llm_server import llm_server, ok, rate_limited  # noqa: F401

MESSAGES = [{"role": "system", "content": "you optimize LEIR kernels"},
            {"role": "user", "content": "propose one step for kernel matmul"}]
GOOD = '{"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 4}, "rationale": "a vector tile"}'
PROSE = "I would split the loop i by four so the inner loop vectorizes."
BROKEN = '{"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 4'


def make(server, *, log=None, **kw) -> LLMClient:
    kw.setdefault("models", ("m",))
    kw.setdefault("timeout", 5.0)
    return LLMClient(LLMConfig(base_url=server.url, **kw), log=log, backoff_base=0.01, backoff_cap=0.04,
                     retry_after_cap=0.05)


def test_bad_answers_are_re_asked_with_the_reason(llm_server):
    llm_server.push(ok(PROSE), ok(BROKEN), ok(GOOD))
    lines = []
    with make(llm_server, log=lines.append) as client:
        c = client.chat(MESSAGES, purpose="steptp", check=answer_check("steptp"))
        usage = client.usage.to_json()
    assert c.text == GOOD and c.reasks == 2 and c.refusals == ("no_json", "malformed_json")
    assert usage["reasks"] == 2 and usage["refusals"] == {"malformed_json": 1, "no_json": 1}
    assert usage["by_purpose"]["steptp"]["refused"] == 2 and usage["calls"] == 3
    first, second, third = (r["json"]["messages"] for r in llm_server.chat_requests)
    assert first == MESSAGES
    # the model sees its own answer and why it was refused
    assert second[:2] == MESSAGES and second[2] == {"role": "assistant", "content": PROSE}
    assert second[3]["role"] == "user" and "no_json" in second[3]["content"]
    assert third[:4] == second and third[4]["content"] == BROKEN and "malformed_json" in third[5]["content"]
    assert sum("answer refused" in ln and "re-asking" in ln for ln in lines) == 2


def test_the_re_ask_budget_is_bounded(llm_server):
    llm_server.set_default(ok(PROSE))
    with make(llm_server, reasks=1) as client:
        c = client.chat(MESSAGES, purpose="steptp", check=answer_check("steptp"))
    # one question and one re-ask; the last bad answer goes back to the caller, which refuses it
    assert len(llm_server.chat_requests) == 2 and c.text == PROSE and c.refusals == ("no_json",)
    with make(llm_server, reasks=0) as client:
        n = len(llm_server.chat_requests)
        assert client.chat(MESSAGES, purpose="steptp", check=answer_check("steptp")).reasks == 0
        assert len(llm_server.chat_requests) == n + 1
    with make(llm_server) as client:  # without a check the client never judges an answer
        n = len(llm_server.chat_requests)
        assert client.chat(MESSAGES, purpose="steptp").text == PROSE
        assert len(llm_server.chat_requests) == n + 1


def test_a_rate_limit_is_retried_then_a_prose_answer_re_asked(llm_server):
    llm_server.push(rate_limited(retry_after=0.01), ok(PROSE), rate_limited(retry_after=0.01), ok(GOOD))
    with make(llm_server) as client:
        c = client.chat(MESSAGES, purpose="steptp", check=answer_check("steptp"))
        u = client.usage.to_json()
    assert c.text == GOOD and c.refusals == ("no_json",) and u["retries"] == 2 and u["reasks"] == 1


def test_chat_many_re_asks_each_request_by_its_purpose(llm_server):
    plan = '{"plan": "tile i and vectorize", "option": 1}'
    llm_server.push(ok(PROSE), ok(plan))
    with make(llm_server, concurrency=1) as client:
        (c,) = client.chat_many([(MESSAGES, None, "autocomp_plan")], check_for=answer_check)
    assert c.text == plan and c.refusals == ("no_json",)


def test_the_cache_says_so_and_refresh_bypasses_it(llm_server, tmp_path):
    cache = str(tmp_path / "llm.sqlite")
    llm_server.push(ok(GOOD))
    with make(llm_server, cache=cache) as client:
        assert not client.chat(MESSAGES, purpose="steptp").cached
    lines = []
    with make(llm_server, cache=cache, log=lines.append) as client:
        c = client.chat(MESSAGES, purpose="steptp")
    assert c.cached and c.text == GOOD and len(llm_server.chat_requests) == 1
    assert any("answer from the cache" in ln and cache in ln for ln in lines), lines
    llm_server.push(ok(GOOD.replace("4", "8")))
    with make(llm_server, cache=cache, cache_mode="refresh") as client:
        c = client.chat(MESSAGES, purpose="steptp")
    assert not c.cached and '"factor": 8' in c.text and len(llm_server.chat_requests) == 2
    with make(llm_server, cache=cache) as client:  # the refreshed answer is what the cache holds now
        assert '"factor": 8' in client.chat(MESSAGES, purpose="steptp").text


def test_reasks_and_cache_mode_from_a_config_file(tmp_path):
    f = tmp_path / "llm.json"
    f.write_text(json.dumps({"base_url": "http://127.0.0.1:9/v1", "models": ["m"], "reasks": 3,
                             "cache_mode": "refresh"}))
    c = config_from({}, str(f))
    assert (c.reasks, c.cache_mode) == (3, "refresh")
    assert config_from({"reasks": "0"}, str(f)).reasks == 0  # a command-line string
    for bad, what in [({"reasks": -1}, "reasks must be an integer >= 0"),
                      ({"cache_mode": "sometimes"}, "cache_mode must be one of use, refresh"),
                      ({"offline": True, "cache": str(tmp_path / "c.sqlite")}, "cannot refresh")]:
        with pytest.raises(LLMError, match=what):
            config_from(bad, str(f))


RELU = "\\kernel relu(X: f32[64, 64]) -> (Y: f32[64, 64]) {\n  L^{64}_{i=0} L^{64}_{j=0} [\n" \
       "    Y^{f32,g}_{i,j} = max(X^{f32,g}_{i,j}, 0.0);\n  ];\n}\n"


def test_suggest_says_an_answer_came_from_the_cache_and_can_refresh_it(llm_server, tmp_path, capsys):
    from leirc.cli.main import main

    (tmp_path / "relu.leir").write_text(RELU)
    answer = '{"answers": [{"strategy": "loop_parallelization", "args": {"loop": "N0.i"}, "rationale": "rows"}]}'
    llm_server.set_default(ok(answer))
    base = ["suggest", str(tmp_path / "relu.leir"), "--memory", "none", "--llm-base-url", llm_server.url,
            "--llm-model", "m", "--llm-cache", str(tmp_path / "llm.sqlite")]
    assert main(base) == 0
    first = capsys.readouterr()
    assert "loop_parallelization" in first.out and "answer from the cache" not in first.err
    assert len(llm_server.chat_requests) == 1
    assert main(base) == 0  # the same prompt: answered by the cache, and said so
    assert "answer from the cache" in capsys.readouterr().err and len(llm_server.chat_requests) == 1
    assert main(base + ["--llm-refresh-cache"]) == 0  # asks the endpoint again
    assert "answer from the cache" not in capsys.readouterr().err and len(llm_server.chat_requests) == 2
    assert main(base + ["--llm-refresh-cache", "--llm-offline"]) == 2
    assert "choose one" in capsys.readouterr().err
