"""Timing on TVM's RPC tracker: a tracker and a server started here on 127.0.0.1 (free ports),
a search whose candidates are verified locally and timed on the server, and a clean
shutdown (no server worker left behind)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("tornado", reason="TVM's RPC tracker needs tornado (pip install tornado)")

from rpc_tracker import TrackerFailed, tracker_with_server  # noqa: E402 - after the skip

from leirc.lang.checker import check_text  # noqa: E402
from leirc.lower.rpc import RemoteTimer, parse_address  # noqa: E402
from leirc.search.core import SearchOptions  # noqa: E402
from leirc.search.evaluate import CONFIRM_ROUNDS, PAIR_ROUNDS  # noqa: E402
from leirc.search.optimizer import SearchOptimizer  # noqa: E402

ROWSUM = r"""\kernel rowsum(A: f32[64, 512]) -> (Y: f32[64]) {
  L^{64}_{i=0} L^{512}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}"""
KEY = "leirc-test"


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    try:
        with tracker_with_server(tmp_path_factory.mktemp("rpc"), KEY) as t:
            yield t
    except TrackerFailed as e:
        pytest.fail(str(e))


def _loads(log) -> int:
    return open(log).read().count("load_module")


def test_parse_address():
    assert parse_address("127.0.0.1:9190") == ("127.0.0.1", 9190)
    for bad in ("9190", "host:", ":1", "h:0", "h:70000", "h:x"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_address(bad)
    with pytest.raises(ValueError, match="--key"):
        SearchOptions(rpc="127.0.0.1:9190")


@pytest.mark.slow
def test_search_times_its_candidates_on_the_rpc_server(tracker, tmp_path):
    before = _loads(tracker["server_log"])
    opts = SearchOptions(algo="greedy", budget=2, branch=2, proposers=("menu",), memory=None,
                         rpc=tracker["address"], rpc_key=KEY, threads=2,
                         strategies=("loop_parallelization", "loop_split", "loop_vectorization"))
    opt = SearchOptimizer(opts, out_dir=str(tmp_path / "out"), progress=False)
    opt.optimize(check_text(ROWSUM).results[0], "llvm")
    res = opt.last
    assert res.timed_on == f"rpc://{tracker['address']}/{KEY}"
    timed = [n for n in res.nodes if n.evaluation is not None and n.ok]
    assert res.root in timed and len(timed) >= 2
    for n in timed:
        assert n.evaluation.verify.equal and n.evaluation.timing.ok and n.ms > 0
    # every timing job loaded its kernels on the server: one per evaluated kernel, two per
    # interleaved comparison (the screen calls for some, a noisy one gets a second job, the
    # confirmation one for a win)
    jobs = sum(n.pair.rounds // PAIR_ROUNDS for n in res.nodes if n.pair is not None)
    jobs += res.confirmation.rounds // CONFIRM_ROUNDS if res.confirmation is not None else 0
    assert _loads(tracker["server_log"]) - before == len(timed) + 2 * jobs
    for n in res.nodes:
        if n.pair is not None:
            assert n.pair.on == res.timed_on


@pytest.mark.slow
def test_remote_timer_reports_failures_as_results(tracker):
    sets = [{"A": __import__("numpy").ones((64, 512), "float32")}]
    t = RemoteTimer(tracker["address"], KEY, timeout=120)
    good, bad = t.time([ROWSUM, ROWSUM.replace("A^{f32,g}_{i,j}", "B^{f32,g}_{i,j}")], sets, repeat=2)
    assert not good.ok and good.error_kind == "build"  # one job: the whole request fails to build
    [good] = t.time([ROWSUM], sets, repeat=3)
    assert good.ok and len(good.runs) == 3 and good.median_ms > 0
    nowhere = RemoteTimer(tracker["address"], "no-such-key", timeout=15)
    [lost] = nowhere.time([ROWSUM], sets, repeat=1)
    assert not lost.ok and lost.error_kind in ("rpc", "timeout") and "rpc://" in lost.error


def _cli_has_rpc() -> bool:
    import argparse

    from leirc.search.optimizer import add_search_arguments

    p = argparse.ArgumentParser()
    add_search_arguments(p)
    return any("--rpc" in a.option_strings for a in p._actions)


@pytest.mark.slow
@pytest.mark.skipif(not _cli_has_rpc(), reason="leirc build has no --rpc/--key flags yet (leirc/search/optimizer.py)")
def test_leirc_build_search_with_rpc(tracker, tmp_path):
    import json

    src = tmp_path / "rowsum.leir"
    src.write_text(ROWSUM)
    before = _loads(tracker["server_log"])
    out = subprocess.run([sys.executable, "-m", "leirc.cli.main", "build", str(src), "-O", "search", "--budget", "2",
                          "--algo", "greedy", "--proposer", "menu", "--memory", "none", "--eval-cache", "none",
                          "--rpc", tracker["address"], "--key", KEY, "-o", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.load(open(tmp_path / "out" / "rowsum.search.json"))
    assert summary["timed_on"] == f"rpc://{tracker['address']}/{KEY}"
    # the root and every correct candidate were timed there (the candidates list has the root)
    assert _loads(tracker["server_log"]) - before >= sum(1 for c in summary["candidates"] if c["ok"]) >= 2
    bad = subprocess.run([sys.executable, "-m", "leirc.cli.main", "build", str(src), "-O", "search", "--rpc",
                          "nowhere"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_evaluator_runs_verifies_and_times_on_the_remote_device(tracker):
    """Evaluator(remote=...): one RemoteSession per candidate, the outputs come back from the
    server and are verified here (a wrong candidate is a mismatch), the timing is the server's."""
    from leirc.engine.evaluate import Evaluator
    from leirc.lower.rpc import RemoteDevice

    dev = RemoteDevice(tracker["address"], KEY)
    before = _loads(tracker["server_log"])
    with Evaluator("llvm", remote=dev, threads=2, repeat=3, min_repeat_ms=5) as ev:
        good = ev.evaluate(ROWSUM)
        assert good.ok and good.verify.equal and good.timing.ok and good.timing.median_ms > 0, good.error
        wrong = ev.evaluate(ROWSUM.replace("+ A^{f32,g}_{i,j}", "+ 2.0*A^{f32,g}_{i,j}"), reference=ROWSUM)
        assert not wrong.ok and wrong.error_kind == "mismatch"
        bad = ev.evaluate(ROWSUM.replace("L^{512}", "L^{513}"))
        assert not bad.ok and bad.error_kind == "illegal"
    assert _loads(tracker["server_log"]) - before == 2  # one load per session that built
    with Evaluator("llvm", remote=RemoteDevice(tracker["address"], "no-such-key"), timeout=60) as ev:
        lost = ev.evaluate(ROWSUM)
        assert not lost.ok and lost.error_kind == "rpc" and "no server for key 'no-such-key'" in lost.error
        assert "lsp-test" not in lost.error and KEY in lost.error  # it lists the keys the tracker has
    with pytest.raises(ValueError, match="HOST:PORT"):
        RemoteDevice("nowhere", KEY)
