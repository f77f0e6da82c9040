"""The scripted OpenAI-compatible server, exercised with the real ``openai`` client over HTTP."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

openai = pytest.importorskip("openai")

from llm_server import (ScriptedLLMServer, echo_auth, hang, huge, llm_server, ok, rate_limited, raw,  # noqa: F401
                        server_error, slow)

MESSAGES = [{"role": "system", "content": "you optimize kernels"}, {"role": "user", "content": "tile it"}]


def client_for(server, **kw) -> "openai.OpenAI":
    return openai.OpenAI(base_url=server.url, api_key=kw.pop("api_key", "k-test"), max_retries=0,
                         timeout=kw.pop("timeout", 5.0), **kw)


def test_a_plain_answer_with_usage_and_the_request_recorded(llm_server):
    llm_server.push(ok("hello there", prompt_tokens=11, completion_tokens=3))
    c = client_for(llm_server, api_key="k-recorded")
    r = c.chat.completions.create(model="m1", messages=MESSAGES, temperature=0, seed=7)
    assert r.choices[0].message.content == "hello there"
    assert r.choices[0].finish_reason == "stop"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (11, 3, 14)
    assert r.model == "m1"
    (req,) = llm_server.chat_requests
    assert req["json"]["messages"] == MESSAGES and req["json"]["seed"] == 7
    assert req["headers"]["Authorization"] == "Bearer k-recorded"


def test_streaming_assembles_to_the_same_text_and_reports_usage_last(llm_server):
    text = "a" * 100 + " then " + "b" * 100  # several SSE chunks
    llm_server.push(ok(text, completion_tokens=9))
    c = client_for(llm_server)
    chunks = list(c.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                            stream_options={"include_usage": True}))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == text
    assert len([ch for ch in chunks if ch.choices and ch.choices[0].delta.content]) > 2
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 9


def test_streaming_without_include_usage_sends_no_usage_chunk(llm_server):
    llm_server.push(ok("short"))
    chunks = list(client_for(llm_server).chat.completions.create(model="m", messages=MESSAGES, stream=True))
    assert all(ch.choices for ch in chunks) and all(ch.usage is None for ch in chunks)


def test_the_queue_is_fifo_then_the_responder_then_the_default(llm_server):
    c = client_for(llm_server)
    llm_server.push(ok("first"), ok("second"))
    llm_server.responder = lambda req: ok("echo " + req["messages"][-1]["content"])
    answers = [c.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content for _ in range(3)]
    assert answers == ["first", "second", "echo tile it"]
    llm_server.responder = None
    with pytest.raises(openai.InternalServerError, match="no scripted reply"):
        c.chat.completions.create(model="m", messages=MESSAGES)
    llm_server.set_default(ok("fallback"))
    assert c.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "fallback"


def test_error_statuses_and_retry_after_reach_the_client(llm_server):
    c = client_for(llm_server)
    llm_server.push(rate_limited(retry_after=3), server_error(503))
    with pytest.raises(openai.RateLimitError) as e:
        c.chat.completions.create(model="m", messages=MESSAGES)
    assert e.value.status_code == 429 and e.value.response.headers["retry-after"] == "3"
    with pytest.raises(openai.InternalServerError) as e:
        c.chat.completions.create(model="m", messages=MESSAGES)
    assert e.value.status_code == 503


def test_a_dropped_connection_and_a_hang_are_connection_errors_and_timeouts(llm_server):
    c = client_for(llm_server, timeout=0.3)
    llm_server.push(ok("never sent", drop=True), hang(2.0))
    with pytest.raises(openai.APIConnectionError) as e:
        c.chat.completions.create(model="m", messages=MESSAGES)
    assert not isinstance(e.value, openai.APITimeoutError)
    with pytest.raises(openai.APITimeoutError):
        c.chat.completions.create(model="m", messages=MESSAGES)


def test_a_slow_answer_arrives_when_the_timeout_allows(llm_server):
    llm_server.push(slow("late", 0.3))
    assert client_for(llm_server, timeout=3).chat.completions.create(
        model="m", messages=MESSAGES).choices[0].message.content == "late"


def test_chunk_delay_spaces_the_stream_out(llm_server):
    llm_server.push(ok("y" * 200, chunk_delay=0.05))
    seen = []
    for ch in client_for(llm_server).chat.completions.create(model="m", messages=MESSAGES, stream=True):
        seen.append((time.monotonic(), ch))
    assert "".join(ch.choices[0].delta.content or "" for _, ch in seen) == "y" * 200
    assert seen[-1][0] - seen[0][0] >= 0.05 * (len(seen) - 1)


def test_a_raw_malformed_body_is_sent_verbatim(llm_server):
    llm_server.push(raw(b'{"choices": [ not json'))
    with pytest.raises(json.JSONDecodeError):
        client_for(llm_server).chat.completions.create(model="m", messages=MESSAGES)


def test_huge_answers_have_the_requested_length(llm_server):
    llm_server.push(huge(100_000))
    text = client_for(llm_server).chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content
    assert len(text) == 100_000 and text.startswith("0123456789abc")


def test_echo_auth_leaks_the_authorization_header_into_the_error_body(llm_server):
    llm_server.push(echo_auth(500))
    with pytest.raises(openai.InternalServerError) as e:
        client_for(llm_server, api_key="k-leaky-123").chat.completions.create(model="m", messages=MESSAGES)
    assert "Bearer k-leaky-123" in str(e.value)  # the leak the client layer must redact


def test_models_lists_the_models_asked_for(llm_server):
    c = client_for(llm_server)
    assert [m.id for m in c.models.list()] == ["scripted"]
    llm_server.push(ok("x"), ok("y"))
    c.chat.completions.create(model="b-model", messages=MESSAGES)
    c.chat.completions.create(model="a-model", messages=MESSAGES)
    assert [m.id for m in c.models.list()] == ["a-model", "b-model"]


def test_concurrent_requests_are_counted_in_flight(llm_server):
    import concurrent.futures as cf

    llm_server.set_default(slow("ok", 0.3))
    c = client_for(llm_server)
    with cf.ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda _: c.chat.completions.create(model="m", messages=MESSAGES), range(3)))
    assert llm_server.max_in_flight == 3


def test_unknown_routes_are_404_and_stop_is_idempotent():
    s = ScriptedLLMServer([ok("scripted at construction")]).start()
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(s.url + "/nope", timeout=5)
        assert e.value.code == 404
        assert client_for(s).chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content \
            == "scripted at construction"
    finally:
        s.stop()
        s.stop()
    with pytest.raises(openai.APIConnectionError):
        client_for(s, timeout=1).chat.completions.create(model="m", messages=MESSAGES)
