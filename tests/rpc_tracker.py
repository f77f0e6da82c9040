"""A TVM RPC tracker and one server registered with it, on 127.0.0.1 at free ports, for the
tests that time on RPC (``test_rpc.py``, ``test_dataset_rpc.py``). Real processes: the
tracker and the server are ``tvm.exec`` entry points, stopped with their process groups
and checked to leave nothing behind."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil

# one poller that imports TVM once (a query_rpc_tracker per poll would import it every time)
_POLL = ("import sys, time\nfrom tvm import rpc\n"
         "while True:\n"
         "    try:\n"
         "        q = rpc.connect_tracker('127.0.0.1', int(sys.argv[1])).summary()['queue_info']\n"
         "        if q.get(sys.argv[2], {}).get('free', 0) >= 1:\n"
         "            break\n"
         "    except Exception:\n"
         "        pass\n"
         "    time.sleep(0.3)\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args, log: Path) -> subprocess.Popen:
    # its own session: the server's forked workers are stopped with the group
    return subprocess.Popen([sys.executable, "-m", *args], stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(p: subprocess.Popen) -> list[int]:
    """Stop ``p``'s process group; returns the pids of its descendants that outlived it."""
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


class TrackerFailed(RuntimeError):
    pass


@contextlib.contextmanager
def tracker_with_server(directory: Path, key: str, register_timeout: float = 120.0):
    """Start a tracker and a server under ``key``; yields ``{"address", "server_log"}`` once
    the server has registered (the server retries the tracker every 5 s)."""
    tport, sport = free_port(), free_port()
    tr = _start(["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(tport), "--port-end",
                 str(tport + 1)], directory / "tracker.log")
    sv = _start(["tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(sport), "--port-end", str(sport + 1),
                 "--tracker", f"127.0.0.1:{tport}", "--key", key], directory / "server.log")
    try:
        try:
            subprocess.run([sys.executable, "-c", _POLL, str(tport), key], timeout=register_timeout, check=True,
                           capture_output=True)
        except subprocess.TimeoutExpired:
            raise TrackerFailed(f"the server never registered with the tracker (tracker alive: {tr.poll() is None}, "
                                f"server alive: {sv.poll() is None})") from None
        yield {"address": f"127.0.0.1:{tport}", "server_log": directory / "server.log"}
    finally:
        left = _stop(sv) + _stop(tr)
        assert not left, f"processes left behind by the RPC server: {left}"
