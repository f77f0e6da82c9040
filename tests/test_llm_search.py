"""``leirc build K.leir -O search --proposer llm`` end to end, as a user runs it: the real CLI
in a subprocess, the real ``openai`` client, the scripted OpenAI-compatible server over HTTP.

The search finishes, takes the good answers, refuses every bad one with a counted reason; the
same search replays offline from the prompt cache with the server gone; the trace replays with
no model at all; and the API key is in none of the files, databases or logs it leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")

from llm_server import ScriptedLLMServer, echo_auth, ok  # noqa: E402

# The kernel recomputes each row's sum for every j; the model's rewrite sums each row once:
# about 100x less time, so whether the search accepts it does not hang on the timing noise
# (a rewrite within the noise was accepted in one run and not in the other, and with it
# went the trajectory that the offline replay must repeat).
SMALL = ("\\kernel k(A: f32[64, 128]) -> (C: f32[64, 128]) {\n  L^{64}_{i=0} L^{128}_{j=0} [\n"
         "    L^{128}_{k=0} [\n      S^{f32,g}_{i,j} = S^{f32,g}_{i,j} + A^{f32,g}_{i,k};\n    ];\n"
         "    C^{f32,g}_{i,j} = A^{f32,g}_{i,j}*S^{f32,g}_{i,j};\n  ];\n}\n")
FOLDED = (r"\kernel k(A:f32[64,128])->(C:f32[64,128]){L^{64}_{i=0}[L^{128}_{k=0}[S^{f32,g}_{i}=S^{f32,g}_{i}"
          r"+A^{f32,g}_{i,k};];L^{128}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*S^{f32,g}_{i};];];}")
# parses, checks, keeps the interface: only verification can refuse it
WRONG = FOLDED.replace("*S^{f32,g}_{i};", "*S^{f32,g}_{i}*2;")
KEY = "sk-leirc-test-9f8e7d6c5b4a-DO-NOT-LEAK"
ANSWER = json.dumps({"answers": [
    {"leir": FOLDED, "rationale": "sum each row once"},
    {"strategy": "loop_parallelization", "args": {"loop": "N0.i"}, "rationale": "two cores"},
    {"strategy": "no_such_strategy", "args": {}},
    {"strategy": "loop_split", "args": {"loop": "N0.i", "factor": 7}},
    {"leir": WRONG, "rationale": "a wrong program"},
    {"leir": "\\kernel k(A: f32[64]) -> (C: f32[64]) { }"},
]})


def leirc(*args, env_extra=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "LEIRC_TEST_KEY"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "leirc", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


def build(tmp_path, url, out, *extra):
    # three evaluations are the first expansion's three applicable answers: a second
    # expansion's prompt would carry the first's measured times, which no two runs share, so
    # the offline replay below could not find it in the prompt cache
    return leirc("build", str(tmp_path / "k.leir"), "-O", "search", "--algo", "greedy", "--budget", "3",
                 "--branch", "6", "--proposer", "llm", "--llm-base-url", url, "--llm-model", "coder",
                 "--llm-key-env", "LEIRC_TEST_KEY", "--llm-cache", str(tmp_path / "llm.sqlite"),
                 "--eval-cache", str(tmp_path / "eval"), "--memory", "none", "--threads", "1",
                 "--allow-approximate", "-o", str(out), *extra, env_extra={"LEIRC_TEST_KEY": KEY})


def every_byte(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


@pytest.mark.slow
def test_search_with_the_llm_proposer_applies_good_answers_refuses_bad_ones_and_replays(tmp_path):
    (tmp_path / "k.leir").write_text(SMALL)
    with ScriptedLLMServer() as server:
        server.responder = lambda req: ok(ANSWER)
        first = build(tmp_path, server.url, tmp_path / "out")
        seen_auth = {r["headers"].get("Authorization") for r in server.chat_requests}
        n_calls = len(server.chat_requests)
    assert first.returncode == 0, first.stderr
    assert seen_auth == {f"Bearer {KEY}"} and n_calls >= 1  # the key did reach the endpoint...
    summary = json.loads((tmp_path / "out" / "k.search.json").read_text())
    stats = summary["proposer_stats"]["llm"]
    assert stats["calls"] == n_calls and stats["prompt_tokens"] > 0
    rejected = stats["rejected"]
    for reason in ("unknown_strategy", "not_applicable", "interface_changed"):
        assert rejected.get(reason, 0) >= 1, rejected
    steps = [c["step"] or "" for c in summary["candidates"]]
    assert any(s.startswith("program_rewrite(") for s in steps)
    # the wrong program parses and checks: verification is what refuses it
    failed = [c for c in summary["candidates"] if c["step"] and not c["ok"]]
    assert failed and rejected.get("verify_failed", 0) == len(failed)
    assert summary["speedup"] >= 1.0 and (tmp_path / "out" / "k.Osearch.leir").exists()
    trace = json.loads((tmp_path / "out" / "k.trace.json").read_text())
    assert [s["strategy"] for s in trace["steps"]] == ["program_rewrite"], trace  # the good answer won

    # ...and nowhere else: logs, outputs, the search state, both caches
    leaks = [name for name, blob in [("stdout", first.stdout.encode()), ("stderr", first.stderr.encode()),
                                     ("outputs", every_byte(tmp_path / "out")),
                                     ("llm cache", every_byte(tmp_path).replace(every_byte(tmp_path / "out"), b""))]
             if KEY.encode() in blob]
    assert not leaks

    # offline: the same search from the prompt cache, the endpoint gone
    again = build(tmp_path, "http://127.0.0.1:9/v1", tmp_path / "again", "--llm-offline")
    assert again.returncode == 0, again.stderr
    s2 = json.loads((tmp_path / "again" / "k.search.json").read_text())
    assert s2["proposer_stats"]["llm"]["cached_calls"] == s2["proposer_stats"]["llm"]["calls"] == n_calls
    assert [c["step"] for c in s2["candidates"]] == [c["step"] for c in summary["candidates"]]
    assert s2["best_fingerprint"] == summary["best_fingerprint"]

    # the trace replays with no model at all (an LLM program is a program_rewrite step)
    trace = tmp_path / "out" / "k.trace.json"
    replayed = leirc("apply", str(tmp_path / "k.leir"), "--trace", str(trace), "-o", str(tmp_path / "replayed.leir"))
    assert replayed.returncode == 0, replayed.stderr
    assert (tmp_path / "replayed.leir").read_text() == (tmp_path / "out" / "k.Osearch.leir").read_text()


def test_a_leaky_endpoint_error_does_not_leak_the_key(tmp_path):
    """A server that echoes the request headers into its error body: the search fails over to
    nothing (no proposals), reports the error, and still writes no key anywhere."""
    (tmp_path / "k.leir").write_text(SMALL)
    with ScriptedLLMServer() as server:
        server.set_default(echo_auth())
        res = build(tmp_path, server.url, tmp_path / "out", "--budget", "1")
    text = res.stdout + res.stderr
    assert KEY not in text
    assert KEY.encode() not in every_byte(tmp_path)
    if res.returncode == 0:
        stats = json.loads((tmp_path / "out" / "k.search.json").read_text())["proposer_stats"]["llm"]
        assert any(r.startswith("llm_error:") for r in stats["rejected"]), stats


def test_suggest_with_an_llm_endpoint(tmp_path):
    (tmp_path / "k.leir").write_text(SMALL)
    with ScriptedLLMServer() as server:
        server.responder = lambda req: ok(ANSWER)
        res = leirc("suggest", str(tmp_path / "k.leir"), "--json", "--memory", "none", "--llm-base-url", server.url,
                    "--llm-model", "coder", "--llm-key-env", "LEIRC_TEST_KEY", "--llm-cache", "none",
                    env_extra={"LEIRC_TEST_KEY": KEY})
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    names = [s["step"]["strategy"] for s in doc["suggestions"]]
    assert "loop_parallelization" in names and "no_such_strategy" not in names
    assert all(s["rationale"].startswith("LLM (coder)") for s in doc["suggestions"])
    assert KEY not in res.stdout + res.stderr


def test_a_missing_key_variable_is_a_clear_error(tmp_path):
    (tmp_path / "k.leir").write_text(SMALL)
    res = leirc("build", str(tmp_path / "k.leir"), "-O", "search", "--budget", "1", "--llm-base-url",
                "http://127.0.0.1:9/v1", "--llm-model", "m", "--llm-key-env", "LEIRC_NOT_SET_ANYWHERE",
                "-o", str(tmp_path / "out"))
    assert res.returncode == 2, res.stderr
    assert "LEIRC_NOT_SET_ANYWHERE" in res.stderr and "Traceback" not in res.stderr
