"""The LLM client layer against the scripted server over real HTTP (no mocks).

Configuration and the prompt cache are tested here too: they exist for the client."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import pytest

pytest.importorskip("openai")

from leirc.llm import Completion, LLMClient, LLMConfig, LLMError, config_from, load_config
from leirc.llm.cache import PromptCache, cache_key
from llm_server import (Reply, ScriptedLLMServer, echo_auth, hang, huge, llm_server, ok, rate_limited,  # noqa: F401
                        raw, server_error, slow)
from same_instant import run_together

MESSAGES = [{"role": "system", "content": "you optimize LEIR kernels"},
            {"role": "user", "content": "propose one step for kernel matmul"}]
REPO = Path(__file__).resolve().parents[1]


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def make(server_or_url, *, log=None, retry_after_cap=30.0, **kw) -> LLMClient:
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.url
    kw.setdefault("models", ("m",))
    kw.setdefault("timeout", 5.0)
    # fast backoff: the tests check retry counts and the waits computed, not real-world pacing
    return LLMClient(LLMConfig(base_url=url, **kw), log=log, backoff_base=0.01, backoff_cap=0.04,
                     retry_after_cap=retry_after_cap)


# -- answers ----------------------------------------------------------------------------------

def test_a_good_answer_with_its_usage_and_what_was_sent(llm_server):
    llm_server.push(ok('{"strategy": "loop_tiling"}', prompt_tokens=120, completion_tokens=9))
    with make(llm_server, models=("qwen",), temperature=0.2, max_tokens=64, seed=11) as client:
        c = client.chat(MESSAGES, purpose="steptp")
    assert isinstance(c, Completion)
    assert (c.text, c.model, c.prompt_tokens, c.completion_tokens) == ('{"strategy": "loop_tiling"}', "qwen", 120, 9)
    assert (c.cached, c.attempts, c.truncated, c.estimated) == (False, 1, False, False)
    (req,) = llm_server.chat_requests
    sent = req["json"]
    assert (sent["model"], sent["messages"], sent["temperature"], sent["max_tokens"], sent["seed"]) == \
        ("qwen", MESSAGES, 0.2, 64, 11)
    assert not sent.get("stream")
    assert req["headers"]["Authorization"] == "Bearer unused"  # key_env None: local servers ignore the key
    assert client.usage.to_json()["by_purpose"]["steptp"]["prompt_tokens"] == 120


def test_streaming_on_and_off_give_the_same_text_and_tokens(llm_server):
    text = "Plan: tile i by 32.\n" + "".join(f"step {i}; " for i in range(40))
    llm_server.push(ok(text, completion_tokens=77), ok(text, completion_tokens=77))
    with make(llm_server, stream=False) as plain, make(llm_server, stream=True) as streamed:
        a, b = plain.chat(MESSAGES), streamed.chat(MESSAGES)
    assert a.text == b.text == text
    assert a.completion_tokens == b.completion_tokens == 77 and not b.estimated
    stream_req = llm_server.chat_requests[1]["json"]
    assert stream_req["stream"] is True and stream_req["stream_options"] == {"include_usage": True}


def test_missing_usage_is_estimated_and_flagged(llm_server):
    llm_server.push(ok("x" * 41, include_usage=False))
    with make(llm_server) as client:
        c = client.chat(MESSAGES)
    assert c.estimated and c.completion_tokens == 11  # ceil(41 / 4)
    assert client.usage.estimated_calls == 1


# -- retries -----------------------------------------------------------------------------------

def test_429_with_retry_after_is_honoured_then_succeeds(llm_server):
    llm_server.push(rate_limited(retry_after=1), ok("after the wait"))
    lines = []
    with make(llm_server, log=lines.append) as client:
        c = client.chat(MESSAGES)
    assert c.text == "after the wait" and c.attempts == 2
    assert client.usage.retries == 1 and client.usage.retry_wait_seconds == 1.0
    first, second = llm_server.chat_requests
    assert second["time"] - first["time"] >= 1.0  # the server really saw the client wait
    assert any("rate_limited" in line and "retrying in 1.00 s" in line for line in lines)


def test_a_long_retry_after_is_capped(llm_server):
    llm_server.push(rate_limited(retry_after=3600), ok("done"))
    with make(llm_server, retry_after_cap=0.2) as client:
        assert client.chat(MESSAGES).text == "done"
    assert client.usage.retry_wait_seconds == 0.2


def test_500_500_then_ok(llm_server):
    llm_server.push(server_error(500), server_error(502), ok("third time"))
    with make(llm_server, max_retries=4) as client:
        c = client.chat(MESSAGES)
    assert (c.text, c.attempts) == ("third time", 3)
    assert client.usage.retries == 2 and len(llm_server.chat_requests) == 3


def test_a_500_forever_gives_up_after_max_retries_plus_one_attempts(llm_server):
    llm_server.set_default(server_error(500, "overloaded"))
    with make(llm_server, max_retries=3) as client:
        with pytest.raises(LLMError) as e:
            client.chat(MESSAGES)
    assert e.value.kind == "server" and e.value.status == 500 and e.value.attempts == 4
    assert "overloaded" in str(e.value) and "gave up after 4 attempts" in str(e.value)
    assert len(llm_server.chat_requests) == 4
    assert client.usage.to_json()["failed_calls"] == 1 and client.usage.retries == 3


def test_backoff_jitter_is_seeded(llm_server):
    waits = []
    for _ in range(2):
        llm_server.push(server_error(500), server_error(500), ok("x"))
        with make(llm_server, seed=5) as client:
            client.chat(MESSAGES)
        waits.append(client.usage.retry_wait_seconds)
    assert waits[0] == waits[1] and 0 < waits[0] <= 0.01 + 0.02


def test_a_slow_answer_beyond_the_timeout_is_retried_then_a_timeout(llm_server):
    llm_server.set_default(slow("too late", 1.5))
    with make(llm_server, timeout=0.25, max_retries=1) as client:
        with pytest.raises(LLMError) as e:
            client.chat(MESSAGES)
    assert e.value.kind == "timeout" and e.value.attempts == 2
    assert len(llm_server.chat_requests) == 2


def test_a_slow_answer_within_the_timeout_arrives(llm_server):
    llm_server.push(slow("worth the wait", 0.2))
    with make(llm_server, timeout=3) as client:
        assert client.chat(MESSAGES).text == "worth the wait"


def test_a_dropped_connection_is_retried(llm_server):
    llm_server.push(Reply(drop=True), ok("reconnected"))
    with make(llm_server) as client:
        c = client.chat(MESSAGES)
    assert c.text == "reconnected" and c.attempts == 2


def test_dropped_connections_forever_are_a_connection_error(llm_server):
    llm_server.set_default(Reply(drop=True))
    with make(llm_server, max_retries=2) as client:
        with pytest.raises(LLMError) as e:
            client.chat(MESSAGES)
    assert e.value.kind == "connection" and e.value.attempts == 3


def test_a_hang_mid_stream_is_a_timeout(llm_server):
    llm_server.set_default(hang(2.0))
    with make(llm_server, stream=True, timeout=0.25, max_retries=0) as client:
        with pytest.raises(LLMError) as e:
            client.chat(MESSAGES)
    assert e.value.kind == "timeout"


def test_a_stream_that_trickles_past_the_timeout_is_a_timeout(llm_server):
    # every gap (0.1 s) is within the timeout, the whole answer (~1.2 s) is not
    llm_server.set_default(ok("x" * 640, chunk_delay=0.1))
    with make(llm_server, stream=True, timeout=0.5, max_retries=0) as client:
        with pytest.raises(LLMError) as e:
            client.chat(MESSAGES)
    assert e.value.kind == "timeout"


def test_nobody_listening_is_a_connection_error():
    s = ScriptedLLMServer().start()
    url = s.url
    s.stop()
    with make(url, max_retries=1) as client:
        with pytest.raises(LLMError) as e:
            client.chat(MESSAGES)
    assert e.value.kind == "connection" and url in str(e.value)


@pytest.mark.parametrize("reply", [raw(b'{"choices": [ {not json'), raw(b"{}"), raw(b'{"choices": []}'),
                                   raw(b"<html>502 proxy</html>", content_type="text/html")],
                         ids=["malformed", "empty_object", "no_choices", "html"])
def test_a_malformed_body_is_a_bad_response_and_not_retried(llm_server, reply):
    llm_server.push(reply)
    with make(llm_server) as client:
        with pytest.raises(LLMError) as e:
            client.chat(MESSAGES)
    assert e.value.kind == "bad_response"
    assert len(llm_server.chat_requests) == 1


def test_a_malformed_stream_is_a_bad_response(llm_server):
    llm_server.push(raw(b"data: {not json\n\n", content_type="text/event-stream"))
    with make(llm_server, stream=True) as client:
        with pytest.raises(LLMError) as e:
            client.chat(MESSAGES)
    assert e.value.kind == "bad_response"


@pytest.mark.parametrize("status,kind", [(400, "bad_request"), (404, "bad_request"), (401, "auth"), (403, "auth")])
def test_client_errors_are_not_retried(llm_server, status, kind):
    llm_server.set_default(server_error(status, "nope"))
    with make(llm_server) as client:
        with pytest.raises(LLMError) as e:
            client.chat(MESSAGES)
    assert e.value.kind == kind and e.value.status == status and e.value.attempts == 1
    assert len(llm_server.chat_requests) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_a_huge_answer_is_cut_at_max_response_chars(llm_server, stream):
    full = huge(300_000)
    llm_server.push(full)
    with make(llm_server, stream=stream, max_response_chars=1000) as client:
        c = client.chat(MESSAGES)
    assert c.truncated and len(c.text) == 1000 and c.text == full.text[:1000]


# -- concurrency ---------------------------------------------------------------------------------

def test_chat_many_respects_the_concurrency_limit_and_keeps_order(llm_server):
    llm_server.responder = lambda req: ok("echo " + req["messages"][-1]["content"], delay=0.15)
    with make(llm_server, concurrency=2) as client:
        results = client.chat_many([(user(f"q{i}"), None, "batch") for i in range(6)])
    assert [r.text for r in results] == [f"echo q{i}" for i in range(6)]
    assert llm_server.max_in_flight == 2
    assert client.usage.to_json()["by_purpose"]["batch"]["calls"] == 6


def test_chat_many_returns_errors_in_place(llm_server):
    llm_server.responder = lambda req: (server_error(500) if req["messages"][-1]["content"] == "bad"
                                        else ok("fine"))
    with make(llm_server, max_retries=0, concurrency=3) as client:
        results = client.chat_many([(user("good"), None, ""), (user("bad"), None, ""), (user("good2"), None, "")])
    assert isinstance(results[0], Completion) and isinstance(results[2], Completion)
    assert isinstance(results[1], LLMError) and results[1].kind == "server"


def test_direct_chat_calls_from_many_threads_share_the_limit(llm_server):
    import concurrent.futures as cf

    # 0.4 s per answer: under a loaded test run (-n 2) three threads still overlap at the server
    llm_server.set_default(slow("ok", 0.4))
    with make(llm_server, concurrency=3) as client:
        with cf.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: client.chat(user(f"t{i}")), range(8)))
    assert llm_server.max_in_flight == 3


# -- the cache and offline replay -------------------------------------------------------------------

def test_a_cache_hit_after_the_first_call(llm_server, tmp_path):
    db = str(tmp_path / "llm.sqlite")
    llm_server.push(ok("cached answer", prompt_tokens=50, completion_tokens=4))
    with make(llm_server, cache=db) as client:
        first, second = client.chat(MESSAGES, purpose="p"), client.chat(MESSAGES, purpose="p")
        assert client.chat(MESSAGES, model="m").cached  # the explicit model is the same key
    assert not first.cached and second.cached and second.attempts == 0
    assert (second.text, second.prompt_tokens, second.completion_tokens) == ("cached answer", 50, 4)
    assert len(llm_server.chat_requests) == 1
    u = client.usage.to_json()
    assert (u["calls"], u["cached_calls"], u["prompt_tokens"]) == (3, 2, 150)
    # a new client (a later run) finds it on disk
    with make(llm_server, cache=db) as again:
        assert again.chat(MESSAGES).cached
    assert len(llm_server.chat_requests) == 1


def test_the_cache_key_covers_model_messages_and_sampling(llm_server, tmp_path):
    db = str(tmp_path / "llm.sqlite")
    llm_server.set_default(ok("a"))
    for kw in ({}, {"temperature": 0.5}, {"max_tokens": 10}, {"seed": 1}):
        with make(llm_server, cache=db, **kw) as client:
            client.chat(MESSAGES)
    with make(llm_server, cache=db, models=("other",)) as client:
        client.chat(MESSAGES)
        client.chat(user("another prompt"), model="m")
    assert len(llm_server.chat_requests) == 6
    k = cache_key("m", MESSAGES, 0, 2048, 0)
    assert k == cache_key("m", json.loads(json.dumps(MESSAGES)), 0.0, 2048, 0) and len(k) == 64


def test_offline_replays_from_the_cache_with_the_server_gone(tmp_path):
    db = str(tmp_path / "llm.sqlite")
    with ScriptedLLMServer([ok("recorded", prompt_tokens=7, completion_tokens=2)]) as s, \
            make(s, cache=db) as client:
        client.chat(MESSAGES)
        url = s.url
    with make(url, cache=db, offline=True) as replay:
        c = replay.chat(MESSAGES)
        assert (c.text, c.cached, c.prompt_tokens) == ("recorded", True, 7)
        with pytest.raises(LLMError) as e:
            replay.chat(user("never asked"))
    assert e.value.kind == "cache_miss" and db in str(e.value)
    assert replay.usage.to_json()["failed_calls"] == 1


def test_offline_needs_neither_the_key_nor_the_openai_package(tmp_path, monkeypatch):
    db = str(tmp_path / "llm.sqlite")
    cache = PromptCache(db)
    cache.put(cache_key("m", MESSAGES, 0.0, 2048, 0), model="m", messages=MESSAGES, temperature=0.0, max_tokens=2048,
              seed=0, text="from disk", prompt_tokens=3, completion_tokens=1, truncated=False, estimated=False)
    cache.close()
    monkeypatch.delenv("LEIRC_TEST_KEY_OFFLINE", raising=False)
    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` now raises ImportError
    with LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1", models=("m",), cache=db, offline=True,
                             key_env="LEIRC_TEST_KEY_OFFLINE")) as client:
        assert client.chat(MESSAGES).text == "from disk"
        with pytest.raises(LLMError) as e:
            client.chat(user("not recorded"))
    assert e.value.kind == "cache_miss"


def test_offline_without_a_cache_file_is_a_config_error(tmp_path):
    with pytest.raises(LLMError) as e:
        LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1", models=("m",), cache=str(tmp_path / "none.sqlite"),
                            offline=True))
    assert e.value.kind == "config" and "none.sqlite does not exist" in str(e.value)
    assert not (tmp_path / "none.sqlite").exists()


def test_an_unopenable_cache_is_a_config_error_and_is_left_alone(tmp_path):
    (tmp_path / "adir").mkdir()
    with pytest.raises(LLMError) as e:
        LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1", models=("m",), cache=str(tmp_path / "adir")))
    assert e.value.kind == "config" and "cannot open the LLM cache" in str(e.value)
    assert (tmp_path / "adir").is_dir() and not list(tmp_path.glob("*.corrupt*"))


def test_a_missing_openai_package_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(LLMError) as e:
        LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1", models=("m",)))
    assert e.value.kind == "missing_package" and "pip install 'leirc[llm]'" in str(e.value)


def test_a_corrupt_cache_is_moved_aside_and_rebuilt(llm_server, tmp_path):
    db = tmp_path / "llm.sqlite"
    db.write_bytes(b"this is not an sqlite database" * 100)
    lines = []
    llm_server.push(ok("fresh"))
    with make(llm_server, cache=str(db), log=lines.append) as client:
        client.chat(MESSAGES)
        assert client.chat(MESSAGES).cached
    assert (tmp_path / "llm.sqlite.corrupt").read_bytes().startswith(b"this is not")
    assert any("warning" in line and "llm.sqlite.corrupt" in line for line in lines)


def test_two_processes_can_share_one_cache(tmp_path):
    db = str(tmp_path / "shared.sqlite")
    writer = textwrap.dedent(f"""
        import sys
        from leirc.llm.cache import PromptCache, cache_key
        c = PromptCache({db!r})
        for i in range(60):
            msgs = [{{"role": "user", "content": sys.argv[1] + str(i)}}]
            c.put(cache_key("m", msgs, 0, 10, 0), model="m", messages=msgs, temperature=0, max_tokens=10, seed=0,
                  text="t" + str(i), prompt_tokens=1, completion_tokens=1, truncated=False, estimated=False)
        c.close()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", writer, tag], cwd=REPO, stderr=subprocess.PIPE)
             for tag in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
    cache = PromptCache(db)
    try:
        assert len(cache) == 120
        hit = cache.get(cache_key("m", [{"role": "user", "content": "b59"}], 0, 10, 0))
        assert hit is not None and hit.text == "t59"
    finally:
        cache.close()


def test_processes_opening_one_new_cache_at_the_same_instant_all_succeed(tmp_path):
    # SQLite answers "locked" at once, without its busy handler, to the second process switching a
    # fresh file to WAL; released together, several openers hit that in most rounds
    rounds, openers = 6, 3
    run_together(tmp_path, """
        import os
        from leirc.llm.cache import PromptCache, cache_key
        c = PromptCache(os.path.join(base, f"fresh-{r}.sqlite"))
        msgs = [{"role": "user", "content": tag}]
        c.put(cache_key("m", msgs, 0, 10, 0), model="m", messages=msgs, temperature=0, max_tokens=10, seed=0,
              text=tag, prompt_tokens=1, completion_tokens=1, truncated=False, estimated=False)
        c.close()
    """, processes=openers, rounds=rounds)
    for r in range(rounds):
        cache = PromptCache(str(tmp_path / f"fresh-{r}.sqlite"))
        try:
            assert len(cache) == openers
        finally:
            cache.close()


# -- ensembles and accounting -------------------------------------------------------------------------

def test_round_robin_ensemble(llm_server):
    llm_server.set_default(ok("x"))
    with make(llm_server, models=("a", "b", "c")) as client:
        assert [client.pick_model() for _ in range(5)] == ["a", "b", "c", "a", "b"]
        client.chat_many([(user(str(i)), None, "") for i in range(3)])
    # picked in request order, whatever order the threads reach the server in
    sent = {r["json"]["messages"][-1]["content"]: r["json"]["model"] for r in llm_server.chat_requests}
    assert sent == {"0": "c", "1": "a", "2": "b"}


def test_weighted_ensemble_is_deterministic_for_a_seed(llm_server):
    def picks(seed):
        with make(llm_server, models=("big", "small"), weights=(3, 1), seed=seed) as client:
            return [client.pick_model() for _ in range(400)]

    a, b, other = picks(7), picks(7), picks(8)
    assert a == b and a != other
    assert a.count("big") > 2 * a.count("small") > 0  # 3:1, with a fixed seed this is not a gamble


def test_usage_by_model_and_purpose(llm_server):
    llm_server.responder = lambda req: (server_error(500) if req["model"] == "flaky"
                                        else ok("x", prompt_tokens=10, completion_tokens=2))
    with make(llm_server, models=("good", "flaky"), max_retries=0) as client:
        client.chat(MESSAGES, model="good", purpose="plan")
        client.chat(MESSAGES, model="good", purpose="implement")
        with pytest.raises(LLMError):
            client.chat(MESSAGES, model="flaky", purpose="plan")
    u = client.usage.to_json()
    assert (u["calls"], u["failed_calls"], u["prompt_tokens"], u["completion_tokens"]) == (3, 1, 20, 4)
    assert u["by_model"]["good"]["calls"] == 2 and u["by_model"]["flaky"]["failed_calls"] == 1
    assert u["by_purpose"]["plan"] == {"calls": 2, "cached_calls": 0, "failed_calls": 1, "prompt_tokens": 10,
                                       "completion_tokens": 2, "estimated_calls": 0}
    json.dumps(u)  # serialisable as it is


# -- the API key ---------------------------------------------------------------------------------

SECRET = "sk-leirc-SECRET-4f1d9c2b7e"


def test_the_api_key_never_appears_anywhere_but_the_request(llm_server, tmp_path, monkeypatch):
    monkeypatch.setenv("LEIRC_TEST_API_KEY", SECRET)
    db = str(tmp_path / "llm.sqlite")
    lines: list[str] = []
    errors: list[LLMError] = []
    llm_server.push(ok("good answer"), echo_auth(500), echo_auth(500), echo_auth(401), rate_limited(0),
                    ok("after 429"))
    cfg = LLMConfig(base_url=llm_server.url, models=("m",), key_env="LEIRC_TEST_API_KEY", cache=db, max_retries=1)
    client = LLMClient(cfg, log=lines.append, backoff_base=0.01, backoff_cap=0.02)
    client.chat(MESSAGES)
    for prompt in ("fails twice", "auth fails"):
        with pytest.raises(LLMError) as e:
            client.chat(user(prompt))
        errors.append(e.value)
    assert [e.kind for e in errors] == ["server", "auth"]
    client.chat(user("rate limited once"))
    texts = [str(e) for e in errors] + [repr(e) for e in errors] + [json.dumps(e.to_json()) for e in errors]
    texts += ["".join(traceback.format_exception(e)) for e in errors]
    texts += lines + [repr(client), repr(cfg), json.dumps(cfg.to_json()), json.dumps(client.usage.to_json())]
    client.close()
    # the echo really carried the key, so the redactor had something to remove
    assert any("Bearer ***" in t for t in texts)
    for t in texts:
        assert SECRET not in t, t
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert SECRET.encode() not in blob and b"Authorization" not in blob
    with sqlite3.connect(db) as conn:  # and the recorded answers are there: the search was cached
        assert conn.execute("SELECT count(*) FROM responses").fetchone()[0] == 2
    assert {r["headers"]["Authorization"] for r in llm_server.chat_requests} == {f"Bearer {SECRET}"}


def test_a_missing_key_variable_is_named_not_guessed(monkeypatch):
    monkeypatch.delenv("LEIRC_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(LLMError) as e:
        LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1", models=("m",), key_env="LEIRC_TEST_NO_SUCH_KEY"))
    assert e.value.kind == "auth" and "LEIRC_TEST_NO_SUCH_KEY" in str(e.value) and "not set" in str(e.value)
    monkeypatch.setenv("LEIRC_TEST_NO_SUCH_KEY", "")
    with pytest.raises(LLMError, match="is empty"):
        LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1", models=("m",), key_env="LEIRC_TEST_NO_SUCH_KEY"))


def test_a_key_pasted_into_key_env_is_refused_without_echoing_it():
    with pytest.raises(LLMError) as e:
        LLMConfig(base_url="http://127.0.0.1:9/v1", models=("m",), key_env="sk-abc-123/xyz")
    assert e.value.kind == "config" and "sk-abc-123" not in str(e.value)


# -- configuration ----------------------------------------------------------------------------------

def test_config_round_trips_through_json():
    c = LLMConfig(base_url="https://api.example.com/v1", models=("a", "b"), weights=(2, 1), key_env="MY_KEY",
                  stream=True, cache="/tmp/x.sqlite", seed=3, mode="autocomp")
    d = c.to_json()
    assert d["models"] == ["a", "b"] and d["weights"] == [2.0, 1.0] and d["key_env"] == "MY_KEY"
    assert LLMConfig.from_json(json.loads(json.dumps(d))) == c
    with pytest.raises(LLMError, match="unknown LLM configuration field"):
        LLMConfig.from_json({**d, "api_key": "x"})


@pytest.mark.parametrize("kw,match", [
    ({"base_url": "ftp://x/v1"}, "http"), ({"base_url": "127.0.0.1:8000"}, "http"),
    ({"models": ()}, "at least one model"), ({"models": ("a", "")}, "non-empty"),
    ({"weights": (1, 2)}, "1 model"), ({"weights": (0,)}, "positive"), ({"timeout": 0}, "timeout"),
    ({"timeout": float("nan")}, "timeout"), ({"max_retries": -1}, "max_retries"), ({"concurrency": 0}, "concurrency"),
    ({"max_tokens": 1.5}, "max_tokens"), ({"temperature": 3}, "temperature"), ({"mode": "beam"}, "mode"),
    ({"stream": "yes"}, "stream"), ({"offline": True}, "cache"), ({"seed": True}, "seed"),
])
def test_config_validation(kw, match):
    base = {"base_url": "http://127.0.0.1:8000/v1", "models": ("m",)}
    with pytest.raises(LLMError, match=match) as e:
        LLMConfig(**{**base, **kw})
    assert e.value.kind == "config"


def test_config_from_a_toml_file_with_cli_overrides(tmp_path):
    f = tmp_path / "llm.toml"
    f.write_text('[llm]\nbase_url = "http://127.0.0.1:8000/v1"\nmodels = ["a", "b"]\nweights = [3, 1]\n'
                 'key_env = "VLLM_KEY"\ntimeout = 30\nmode = "htam"\n')
    c = config_from({"llm_model": "x,y", "llm_weights": "1,1", "llm_timeout": "2.5", "seed": None}, str(f))
    assert (c.models, c.weights, c.timeout, c.key_env, c.mode) == (("x", "y"), (1.0, 1.0), 2.5, "VLLM_KEY", "htam")
    assert config_from({}, str(f)).models == ("a", "b")


def test_config_from_json_and_from_arguments_alone(tmp_path):
    f = tmp_path / "llm.json"
    f.write_text(json.dumps({"base_url": "http://h:1/v1", "model": "solo", "stream": True}))
    assert config_from({}, str(f)).models == ("solo",) and config_from({}, str(f)).stream
    c = config_from({"base_url": "http://h:1/v1", "models": "m", "stream": "false", "concurrency": "2"})
    assert (c.models, c.stream, c.concurrency) == (("m",), False, 2)
    with pytest.raises(LLMError, match="no base_url given"):
        config_from({"models": "m"})
    with pytest.raises(LLMError, match="unknown LLM setting 'llm_colour'"):
        config_from({"base_url": "http://h:1/v1", "models": "m", "llm_colour": "red"})


@pytest.mark.parametrize("name,text,line,column", [
    ("bad.toml", 'base_url = "http://h/v1"\nmodels = ["a",\nmode = 3\n', 3, None),
    ("bad.json", '{\n  "base_url": "http://h/v1",\n  "models": [,]\n}\n', 3, 14),
    ("keys.toml", 'base_url = "http://h/v1"\nmodels = ["a"]\n\ntemprature = 0.5\n', 4, None),
    ("keys.json", '{"base_url": "http://h/v1",\n "models": ["a"],\n "api_key": "oops"}', 3, None),
])
def test_bad_config_files_name_the_file_and_line(tmp_path, name, text, line, column):
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(LLMError) as e:
        load_config(f)
    assert e.value.kind == "config" and e.value.file == str(f) and e.value.line == line
    if column is not None:
        assert e.value.column == column
    assert str(e.value).startswith(f"{f}:{line}")
    assert "Traceback" not in str(e.value)


def test_an_unreadable_config_file_is_a_config_error(tmp_path):
    with pytest.raises(LLMError) as e:
        load_config(tmp_path / "nope.toml")
    assert e.value.kind == "config" and "nope.toml" in str(e.value)


def test_an_invalid_value_in_a_file_names_the_file(tmp_path):
    f = tmp_path / "llm.toml"
    f.write_text('base_url = "http://h/v1"\nmodels = ["a"]\nmode = "beam"\n')
    with pytest.raises(LLMError, match=r"mode must be one of .*llm\.toml"):
        config_from({}, str(f))
