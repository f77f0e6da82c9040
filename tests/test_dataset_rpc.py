"""``dataset gen`` timing on TVM's RPC tracker: a tracker and a server started here on
127.0.0.1 (free ports); records are verified locally and timed on the server, the original
and the candidate in one remote session; the device key is part of the dataset's options,
the tracker's address is not."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("tornado", reason="TVM's RPC tracker needs tornado (pip install tornado)")

import psutil  # noqa: E402 - after the skip

from leirc.dataset.generate import GenOptions, generate  # noqa: E402
from leirc.dataset.store import Store  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KEY = "leirc-dataset-test"

pytestmark = pytest.mark.slow  # a tracker, a server that registers with it, real builds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args, log):
    # its own session: the server's forked workers are stopped with the group
    return subprocess.Popen([sys.executable, "-m", *args], stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(p) -> list:
    try:
        kids = psutil.Process(p.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        kids = []
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=20)
    _, alive = psutil.wait_procs(kids, timeout=10)
    return [k.pid for k in alive]


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    d = tmp_path_factory.mktemp("rpc")
    tport, sport = _free_port(), _free_port()
    tr = _start(["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(tport), "--port-end",
                 str(tport + 1)], d / "tracker.log")
    sv = _start(["tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(sport), "--port-end", str(sport + 1),
                 "--tracker", f"127.0.0.1:{tport}", "--key", KEY], d / "server.log")
    try:
        # one poller that imports TVM once (a query_rpc_tracker per poll would import it every time)
        poll = ("import sys, time\nfrom tvm import rpc\n"
                "while True:\n"
                "    try:\n"
                "        q = rpc.connect_tracker('127.0.0.1', int(sys.argv[1])).summary()['queue_info']\n"
                "        if q.get(sys.argv[2], {}).get('free', 0) >= 1:\n"
                "            break\n"
                "    except Exception:\n"
                "        pass\n"
                "    time.sleep(0.3)\n")
        try:
            subprocess.run([sys.executable, "-c", poll, str(tport), KEY], timeout=120, check=True,
                           capture_output=True)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server never registered with the tracker (tracker alive: {tr.poll() is None}, "
                        f"server alive: {sv.poll() is None})")
        yield {"address": f"127.0.0.1:{tport}", "server_log": d / "server.log"}
    finally:
        left = _stop(sv) + _stop(tr)
        assert not left, f"processes left behind by the RPC server: {left}"


def test_records_are_verified_here_and_timed_on_the_rpc_server(tracker, tmp_path):
    opts = GenOptions(seed=0, shapes=1, per_strategy=1, strategies=("loop_split",), repeat=2,
                      compare_compiled=False, rpc=tracker["address"], rpc_key=KEY)
    out = tmp_path / "ds"
    summary = generate([str(ROOT / "stdlib" / "relu.leir")], str(out), opts, workers=0)
    assert summary["status"] == {"ok": summary["records"]} and summary["records"] >= 1 and summary["complete"]
    recs = list(Store(str(out), create=False).records("ok"))
    for r in recs:
        t = r["timing"]
        assert t["on"] == f"rpc://{tracker['address']}/{KEY}" and r["reasoning"]["measured"]["on"] == t["on"]
        assert t["original_ms"] > 0 and t["transformed_ms"] > 0 and not t.get("error")
        assert t["speedup"] == pytest.approx(t["original_ms"] / t["transformed_ms"], rel=1e-3)
        assert r["verification"]["ok"] and r["verification"]["equal"]
    # two kernels uploaded and loaded per timed record
    assert open(tracker["server_log"]).read().count("load_module") >= 2 * len(recs)
    meta = Store(str(out), create=False).meta()["options"]
    assert meta["rpc_key"] == KEY and "rpc" not in meta
    # the same dataset resumed through the tracker at another address is the same dataset
    again = GenOptions(**{**opts.__dict__, "rpc": "127.0.0.1:1"})
    assert generate([str(ROOT / "stdlib" / "relu.leir")], str(out), again, workers=0)["ran"] == {}


def test_rpc_options_are_checked():
    with pytest.raises(ValueError, match="device key"):
        GenOptions(rpc="127.0.0.1:9190")
    with pytest.raises(ValueError, match="HOST:PORT"):
        GenOptions(rpc="nowhere", rpc_key=KEY)
    with pytest.raises(ValueError, match="needs the tracker"):
        generate([str(ROOT / "stdlib" / "relu.leir")], "/nonexistent/never-created", GenOptions(rpc_key=KEY))
    assert "rpc_key" not in GenOptions().to_json()  # old datasets' options are unchanged
