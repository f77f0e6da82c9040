"""Every fallback visible (issue #33, items 3 and 4): the server says why the model, the
GPU or the tracker is not used, with the setting to change, in a ``leirc/status``
notification; a tracker that is not there is told apart from one without the key, at
once; a verification outcome reads by the criterion that decided and says proven or
tested; errors are kept whole for the hover."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Union

import pytest
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, client_capabilities

from leirc.ide.devices import probe_tracker
from leirc.ide.inline import criterion, guarantee, lens_title, lens_tooltip

from test_lsp_support import open_doc, tdi

KERNEL = "\\kernel k(A: f32[4]) -> (B: f32[4]) {\n  L^{4}_{i=0} [ B^{f32,g}_{i} = A^{f32,g}_{i}; ];\n}\n"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once closed


@pytest.fixture
def listener():
    """A TCP listener on 127.0.0.1 that answers each connection with ``reply`` (None:
    accepts and says nothing)."""
    socks = []

    def start(reply):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        socks.append(srv)

        def serve():
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                socks.append(conn)
                if reply is not None:
                    conn.sendall(reply)

        threading.Thread(target=serve, daemon=True).start()
        return f"127.0.0.1:{srv.getsockname()[1]}"

    yield start
    for s in socks:
        s.close()


def test_tracker_problems_are_told_apart(listener):
    assert probe_tracker("gpu-box", "a100").kind == "bad-address"
    assert probe_tracker("127.0.0.1:9190", "").kind == "bad-address"
    refused = probe_tracker(f"127.0.0.1:{closed_port()}", "a100")
    assert refused.kind == "refused" and "connection refused" in refused.message and "leir.rpc.tracker" in refused.message
    assert probe_tracker(listener(b"HTTP/1.1 400 Bad Request\r\n\r\n"), "a100").kind == "not-a-tracker"
    silent = probe_tracker(listener(None), "a100", timeout=0.5)
    assert silent.kind == "timeout" and "did not answer" in silent.message


def test_a_real_tracker_without_the_key(tmp_path):
    """TVM's own tracker, with no server registered: the key is unknown (not "refused",
    not a minute of retries)."""
    port = closed_port()
    log = open(tmp_path / "tracker.log", "w")
    p = subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
                          "--port-end", str(port + 1)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        probe = probe_tracker(f"127.0.0.1:{port}", "a100")
        for _ in range(600):  # until it listens (it imports TVM first)
            if probe.kind != "refused":
                break
            time.sleep(0.1)
            probe = probe_tracker(f"127.0.0.1:{port}", "a100")
        assert probe.kind == "unknown-key", probe
        assert "no device for key 'a100'" in probe.message and "keys it serves: none" in probe.message
        assert "leir.rpc.key" in probe.message
    finally:
        os.killpg(p.pid, 15)
        p.wait(timeout=30)
        log.close()


# ---------------------------------------------------------------------------
# what an outcome reads as


OK = {"ok": True, "error_kind": None, "bitwise": False, "norm_rel_err": 4.1e-7, "norm_bound": 1e-5,
      "max_abs_err": 2e-6, "max_rel_err": 5.6, "ms": 0.0036, "target": "llvm", "before_ms": None,
      "evidence": "tested", "numerics": None, "tolerance": "arithmetic", "runs": 12,
      "passed_on": "seeds 0,1,2 x uniform, normal, signed; probes logits, mixed, special", "failures": []}


def test_the_lens_shows_the_criterion_not_the_elementwise_maximum():
    title = lens_title(OK)
    assert title.startswith("✓ equal (normwise 4.1e-07 ≤ 1.0e-05)") and "tested" in title and "5.6" not in title
    tip = lens_tooltip(OK)
    assert "normwise 4.1e-07 ≤ 1.0e-05 (arithmetic tolerance)" in tip
    assert "probes logits, mixed, special" in tip and "not the criterion" in tip and "tested:" in tip
    proven = dict(OK, evidence="proven", numerics="bitwise", bitwise=True)
    assert lens_title(proven).startswith("✓ equal (bitwise)") and lens_title(proven).endswith("proven")
    assert "proven: the step is bitwise by construction" in lens_tooltip(proven)
    bad = dict(OK, ok=False, error_kind="mismatch", norm_rel_err=3e-2,
               failures=["output B: normwise relative error 0.03 > 1e-05 (seed 0, uniform)"])
    assert lens_title(bad) == "✗ normwise 3.0e-02 > 1.0e-05"
    assert criterion(dict(bad, failures=["output B: mismatch at (3): 1 vs 2 (|diff| 1 > tol 1e-4); 812 of 4096 "
                                         "elements outside rtol=0.0001 + 4 x the arithmetic error bound"])) \
        .startswith("812 of 4096 elements outside the bound")


def test_errors_are_kept_whole_for_the_hover():
    long = "TVMError: " + "x" * 300 + "\nsecond line: CUDA_ERROR_NO_DEVICE"
    d = {"ok": False, "error_kind": "build", "error": long.splitlines()[0], "detail": long}
    assert len(lens_title(d)) < 120 and lens_title(d).endswith("…")
    assert lens_tooltip(d) == f"build: {long}"


def test_guarantees_name_proven_and_tested():
    assert guarantee("bitwise") == "proven: bitwise"
    assert guarantee("exact-in-reals") == "proven: exact in reals"
    assert guarantee("approximate") == "tested: approximate"
    assert guarantee(None) == ""


# ---------------------------------------------------------------------------
# the server


async def _client(init):
    client = await ClientServerConfig(server_command=[sys.executable, "-m", "leirc_lsp"],
                                      server_env={**os.environ, "LEIRC_TEST_NO_KEY": ""}).start()
    conv = client.protocol._converter

    def cmd_or_action(obj, _):
        return conv.structure(obj, T.Command if isinstance(obj.get("command"), str) else T.CodeAction)

    conv.register_structure_hook(Union[T.Command, T.CodeAction], cmd_or_action)
    client.status = []

    @client.feature("leirc/status")
    def status(params):
        client.status.append(params)

    @client.feature(T.WORKSPACE_CODE_LENS_REFRESH)
    def refresh(params):
        return None

    await client.initialize_session(T.InitializeParams(capabilities=client_capabilities("visual-studio-code"),
                                                       root_uri="file:///ws", initialization_options=init))
    return client


def _fallbacks(client) -> dict:
    last = client.status[-1] if client.status else None
    return {f.what: f for f in (last.fallbacks if last is not None else [])}


@pytest.mark.asyncio(loop_scope="function")
async def test_the_server_says_why_model_gpu_and_tracker_are_not_used():
    port = closed_port()
    client = await _client({"memory": "none", "target": "cuda", "llmBaseUrl": "http://127.0.0.1:9/v1",
                            "llmModel": "m", "llmApiKeyEnv": "LEIRC_TEST_NO_KEY",
                            "rpcTracker": f"127.0.0.1:{port}", "rpcKey": "a100"})
    uri = "file:///ws/f.leir"
    try:
        no_gpu = not os.path.exists("/dev/nvidiactl")
        for _ in range(300):
            got = _fallbacks(client)
            if {"model", "tracker"} <= set(got) and ("gpu" in got) == no_gpu:
                break
            await asyncio.sleep(0.05)
        got = _fallbacks(client)
        assert "LEIRC_TEST_NO_KEY" in got["model"].message and got["model"].setting == "leir.llm.keyEnv"
        assert "ranked offline" in got["model"].message
        assert "connection refused" in got["tracker"].message and got["tracker"].setting == "leir.rpc.tracker"
        if no_gpu:
            assert got["gpu"].setting == "leir.target" and "no NVIDIA GPU" in got["gpu"].message
        # "Run on GPU" against a tracker that is not listening: refused at once, on the lens
        open_doc(client, uri, KERNEL)
        res = await client.workspace_execute_command_async(T.ExecuteCommandParams(
            command="leirc.runOnDevice", arguments=[uri, "k"]))
        assert res["started"] is False and res["problem"] == "refused", res
        lenses = await client.text_document_code_lens_async(T.CodeLensParams(text_document=tdi(uri)))
        dev = next(x.command for x in lenses if x.command.command == "leirc.runOnDevice")
        assert "✗ rpc: no RPC tracker is listening" in dev.title and "connection refused" in dev.tooltip
        # the suggestion falls back and its note says why (and the status keeps saying it)
        sug = await client.workspace_execute_command_async(T.ExecuteCommandParams(command="leirc.suggest",
                                                                                  arguments=[uri, "k"]))
        assert sug["suggestions"] and "LEIRC_TEST_NO_KEY" in sug["note"]
        # fixed settings clear what they fixed
        client.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"leirc": {
            "target": "llvm", "llmBaseUrl": None, "llmModel": None, "rpcTracker": None, "rpcKey": None}}))
        for _ in range(300):
            if not _fallbacks(client):
                break
            await asyncio.sleep(0.05)
        assert _fallbacks(client) == {}
    finally:
        await client.shutdown_session()
        await client.stop()
