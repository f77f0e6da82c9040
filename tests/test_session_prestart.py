"""Workers started before they are needed (``WorkerPool.warm``, as ``leirc verify`` does first
thing): adopted by the next session and built once, replaced when they died before their
build began, stopped with the command on Ctrl-C, and started without ml_dtypes unless the
kernel has bf16 arrays.

Real worker processes throughout; builds are counted by the workers themselves
(``LEIRC_WORKER_BUILD_LOG``), and what a worker imported is read from its memory map.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from leirc.engine.evaluate import Evaluator
from leirc.lower.session import KernelSession, WorkerPool, needs_ml_dtypes
from leirc.verify import verify

REPO = Path(__file__).resolve().parents[1]

ROWSUM = r"""\kernel rowsum(A: f32[16, 8]) -> (Y: f32[16]) {
  L^{16}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}"""

HALVE_BF16 = r"""\kernel halve(A: bf16[8]) -> (Y: bf16[8]) {
  L^{8}_{i=0} [ Y^{bf16,g}_{i} = A^{bf16,g}_{i}*0.5; ];
}"""

# large enough that the command is still busy when it is interrupted, whatever the load
BIG = r"""\kernel big(X: f32[2048, 4096]) -> (Y: f32[2048, 4096]) {
  L^{2048}_{i=0} L^{4096}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j})*0.5; ];
}"""


@pytest.fixture
def build_log(tmp_path, monkeypatch):
    path = tmp_path / "builds.log"
    monkeypatch.setenv("LEIRC_WORKER_BUILD_LOG", str(path))
    monkeypatch.setenv("LEIRC_TMPDIR", str(tmp_path))

    def count() -> int:
        return len(path.read_text().splitlines()) if path.exists() else 0

    return count


def _rowsum_run(s: KernelSession):
    a = np.arange(128, dtype=np.float32).reshape(16, 8)
    r = s.run({"A": a}, {"Y": np.zeros(16, np.float32)})
    assert r.ok, r.error
    assert np.array_equal(r.outputs["Y"], a.sum(axis=1, dtype=np.float32))
    return r


def _group_gone(pgid: int, within: float = 30.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _maps(pid: int) -> str:
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
        return f.read()


def test_a_warmed_worker_is_adopted_and_builds_once(build_log):
    with WorkerPool(0) as pool:
        pool.warm()
        [spare] = pool.spare_pids()
        with KernelSession(ROWSUM, pool=pool) as s:
            assert s.worker_pid == spare
            _rowsum_run(s)
            _rowsum_run(s)  # the second run reuses the build
            assert s.builds == 1
        assert pool.spare_pids() == [] and pool.started == 1  # a pool of size 0 does not refill
    assert build_log() == 1


def test_the_evaluator_takes_its_worker_from_the_callers_pool_and_leaves_the_pool_open(build_log):
    with WorkerPool(0) as pool:
        pool.warm()
        [spare] = pool.spare_pids()
        with Evaluator("llvm", time=False, pool=pool, seeds=(0,), dists=("uniform",)) as ev:
            e = ev.evaluate(ROWSUM)
            assert e.ok, e.error
            assert ev.stats["builds"] == 1
        assert pool.started == 1 and not _alive(spare)  # the session that adopted it stopped it
        pool.warm()  # still the caller's pool, and still usable
        assert len(pool.spare_pids()) == 1
    assert build_log() == 1


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_spare_that_died_before_the_take_is_replaced(build_log):
    with WorkerPool(0) as pool:
        pool.warm()
        [spare] = pool.spare_pids()
        os.killpg(spare, signal.SIGKILL)
        end = time.monotonic() + 30
        while _alive(spare) and time.monotonic() < end:  # dead, not yet reaped by the pool
            time.sleep(0.02)
        assert not _alive(spare)
        with KernelSession(ROWSUM, pool=pool) as s:
            _rowsum_run(s)
            assert s.worker_pid != spare and s.builds == 1
    assert build_log() == 1


def test_a_worker_killed_while_it_imports_after_the_take_is_replaced(build_log):
    with WorkerPool(0) as pool:
        pool.warm()
        with KernelSession(ROWSUM, pool=pool) as s:
            adopted = s.worker_pid
            # it started a moment ago and is still importing TVM: its build has not begun,
            # so its death says nothing about this kernel
            os.killpg(adopted, signal.SIGKILL)
            _rowsum_run(s)
            assert s.worker_pid != adopted and s.builds == 1
            assert s.build_failure is None
    assert build_log() == 1


def test_workers_import_ml_dtypes_only_for_bf16_kernels(build_log):
    assert needs_ml_dtypes(HALVE_BF16) and needs_ml_dtypes(HALVE_BF16.encode())
    assert not needs_ml_dtypes(ROWSUM) and not needs_ml_dtypes(ROWSUM.encode())
    with KernelSession(ROWSUM) as s:
        _rowsum_run(s)
        assert "_ml_dtypes_ext" not in _maps(s.worker_pid)
    with WorkerPool(0) as pool:
        pool.warm(ml_dtypes=False)  # what `leirc verify` warms for a text without bf16
        [spare] = pool.spare_pids()
        with KernelSession(HALVE_BF16, pool=pool) as s:
            assert s.worker_pid != spare  # not handed to a bf16 kernel: stopped, a fresh one started
            assert not _alive(spare)
            rep = verify(HALVE_BF16, runner=s.runner, seeds=(0,), dists=("uniform", "signed"))
            assert rep.equal, rep.failures
            assert "_ml_dtypes_ext" in _maps(s.worker_pid)
    assert build_log() == 2


def _children(pid: int) -> list:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", encoding="ascii") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def test_ctrl_c_while_the_prestarted_worker_imports_leaves_no_process(tmp_path):
    k = tmp_path / "big.leir"
    k.write_text(BIG)
    env = {**os.environ, "LEIRC_TMPDIR": str(tmp_path)}
    p = subprocess.Popen([sys.executable, "-m", "leirc.cli.main", "verify", str(k)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        worker = None
        end = time.monotonic() + 120
        while worker is None and time.monotonic() < end and p.poll() is None:
            worker = next(iter(_children(p.pid)), None)
            time.sleep(0.01)
        assert worker is not None, "the command started no worker"
        # the worker was started before the command parsed its file: it is importing TVM
        assert os.getpgid(worker) == worker  # its own process group, which must end with it
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130 and "leirc: interrupted" in err.decode(), err.decode()
    assert "Traceback" not in err.decode()
    assert _group_gone(worker), "the worker's process group outlived the command"
    assert [n for n in os.listdir(tmp_path) if n.startswith("leirc-")] == []


@pytest.mark.slow
def test_the_prestarted_verify_reports_what_a_plain_session_reports(tmp_path):
    """``leirc verify`` (worker warmed before parsing, zero-copy runs, the repeated run
    queued early) gives the report of a session started the plain way, field for field."""
    softmax = (REPO / "stdlib" / "softmax.leir").read_text()
    p = subprocess.run([sys.executable, "-m", "leirc.cli.main", "verify", str(REPO / "stdlib" / "softmax.leir"),
                        "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr
    cli = json.loads(p.stdout)
    with KernelSession(softmax, threads=2) as s:  # what the CLI's Evaluator starts
        plain = verify(softmax, runner=s.runner, coverage=True).to_json()
    for doc in (cli, plain):
        doc.pop("seconds")
    assert {k: cli[k] for k in plain} == plain
