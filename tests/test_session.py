"""KernelSession: one sandboxed worker builds once and serves many requests.

Builds are counted through the worker's ``LEIRC_WORKER_BUILD_LOG`` (one line per build,
written by the worker process itself), so the count is what really happened, not what the
parent believes. Crashes come from a real kernel (an out-of-range data-dependent subscript)
and from the worker's test hook (hang, mutate).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from leirc.lower.runner import RunResult, TimingResult, run_kernel
from leirc.lower.session import KernelSession
from leirc.verify import verify

GATHER = r"""\kernel gather(A: f32[10], C: i64[4]) -> (Y: f32[4]) {
  L^{4}_{i=0} [ Y^{f32,g}_{i} = A^{f32,g}_{C^{i64,g}_{i}}*2.0; ];
}"""

ROWSUM = r"""\kernel rowsum(A: f32[16, 8]) -> (Y: f32[16]) {
  L^{16}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}"""


def _gather_inputs(c):
    return {"A": np.arange(10, dtype=np.float32), "C": np.asarray(c, dtype=np.int64)}


def _y():
    return {"Y": np.zeros(4, np.float32)}


@pytest.fixture
def build_log(tmp_path, monkeypatch):
    path = tmp_path / "builds.log"
    monkeypatch.setenv("LEIRC_WORKER_BUILD_LOG", str(path))
    monkeypatch.setenv("LEIRC_TMPDIR", str(tmp_path))

    def count() -> int:
        return len(path.read_text().splitlines()) if path.exists() else 0

    return count


def _leftovers(d) -> list:
    return [n for n in os.listdir(d) if n.startswith("leirc-")]


def test_verify_through_a_session_builds_once(build_log, tmp_path):
    with KernelSession(ROWSUM) as s:
        rep = verify(ROWSUM, runner=s.runner)
        assert rep.equal, rep.failures
        assert rep.runs == 9
        # nine runs plus the repeated first run, all served by one build in one worker
        assert s.requests >= 10
        assert s.builds == 1
        assert build_log() == 1
        assert s.build_s is not None and s.build_s >= 0
    assert build_log() == 1
    assert _leftovers(tmp_path) == []


def test_one_shot_runner_builds_per_call(build_log):
    # the old cost model, for contrast: run_kernel is a one-request session
    for _ in range(2):
        assert run_kernel(GATHER, _gather_inputs([1, 2, 3, 4]), _y()).ok
    assert build_log() == 2


def test_results_match_run_kernel_and_repeat():
    ins = _gather_inputs([9, 0, 3, 3])
    with KernelSession(GATHER) as s:
        for _ in range(3):
            r = s.run(ins, {"Y": np.full(4, np.nan, np.float32)})
            assert isinstance(r, RunResult) and r.ok, r.error
            assert r.outputs["Y"].tolist() == [18.0, 0.0, 6.0, 6.0]
            np.testing.assert_array_equal(r.inputs_after["A"], ins["A"])
            assert r.threads is not None and r.build_s is not None and r.run_s is not None
        assert s.builds == 1


def test_crash_in_a_request_is_classified_and_the_next_request_rebuilds(build_log):
    with KernelSession(GATHER) as s:
        assert s.run(_gather_inputs([0, 1, 2, 3]), _y()).ok
        pid = s.worker_pid
        bad = s.run(_gather_inputs([1, 2, 3, 10**13]), _y())
        assert not bad.ok and bad.error_kind == "crash"
        assert "SIGSEGV" in bad.error and "gather" in bad.error
        good = s.run(_gather_inputs([0, 0, 0, 1]), _y())
        assert good.ok and good.outputs["Y"].tolist() == [0.0, 0.0, 0.0, 2.0]
        assert s.worker_pid != pid
        assert s.builds == 2 and build_log() == 2


def test_timeout_kills_the_worker_and_the_session_recovers(monkeypatch, build_log):
    monkeypatch.setenv("LEIRC_WORKER_TEST_HOOK", "hang")
    with KernelSession(GATHER, timeout=60) as s:
        assert s.build_failure is None
        pid = s.worker_pid
        t0 = time.monotonic()
        r = s.run(_gather_inputs([1, 2, 3, 4]), _y(), timeout=3)
        assert time.monotonic() - t0 < 30
        assert not r.ok and r.error_kind == "timeout" and "3 s" in r.error and "gather" in r.error
        with pytest.raises(ProcessLookupError):  # the whole group is gone
            os.killpg(pid, 0)
        monkeypatch.delenv("LEIRC_WORKER_TEST_HOOK")
        r = s.run(_gather_inputs([1, 2, 3, 4]), _y())
        assert r.ok and r.outputs["Y"].tolist() == [2.0, 4.0, 6.0, 8.0]
        assert build_log() == 2


def test_build_errors_are_reported_on_every_request_without_rebuilding(build_log):
    bad = GATHER.replace("C^{i64,g}_{i}", "q")
    with KernelSession(bad, file="bad.leir") as s:
        for _ in range(3):
            r = s.run(_gather_inputs([1, 2, 3, 4]), _y())
            assert not r.ok and r.error_kind == "build"
            assert "E012" in r.error and "bad.leir" in r.error
        tr = s.time([_gather_inputs([1, 2, 3, 4])])
        assert not tr.ok and tr.error_kind == "build"
        assert s.builds == 0
    assert build_log() == 0  # the checker rejected it: nothing reached TVM


def test_bad_arrays_are_runtime_errors_and_keep_the_worker():
    with KernelSession(GATHER) as s:
        r = s.run({"A": np.zeros(11, np.float32), "C": np.zeros(4, np.int64)}, _y())
        assert not r.ok and r.error_kind == "runtime" and "shape" in r.error
        r = s.run({"C": np.zeros(4, np.int64)}, _y())
        assert not r.ok and r.error_kind == "runtime" and "missing input 'A'" in r.error
        assert s.run(_gather_inputs([1, 2, 3, 4]), _y()).ok
        assert s.builds == 1


def test_mutation_of_an_input_reaches_the_verifier(monkeypatch):
    monkeypatch.setenv("LEIRC_WORKER_TEST_HOOK", "mutate")
    with KernelSession(ROWSUM) as s:
        a = np.ones((16, 8), np.float32)
        r = s.run({"A": a}, {"Y": np.zeros(16, np.float32)})
        assert r.ok
        assert r.inputs_after["A"][0, 0] == 2.0 and r.inputs_after["A"][0, 1] == 1.0
        assert a[0, 0] == 1.0  # the caller's array is untouched
        rep = verify(ROWSUM, runner=s.runner, seeds=(0,), dists=("uniform",))
        assert not rep.equal
        assert any("inputs mutated" in f and "A" in f for f in rep.failures), rep.failures


def test_unchanged_inputs_come_back_read_only():
    with KernelSession(ROWSUM) as s:
        a = np.ones((16, 8), np.float32)
        r = s.run({"A": a}, {"Y": np.zeros(16, np.float32)})
        assert r.ok and np.shares_memory(r.inputs_after["A"], a)
        assert not r.inputs_after["A"].flags.writeable
        r.outputs["Y"][0] = -1.0  # outputs are the caller's to change
        assert np.allclose(r.outputs["Y"][1:], 8.0)


def test_time_in_a_session_reuses_the_build(build_log):
    sets = [{"A": np.random.default_rng(s).random((16, 8), dtype=np.float32)} for s in range(3)]
    with KernelSession(ROWSUM, threads=1) as s:
        assert s.run(sets[0], {"Y": np.zeros(16, np.float32)}).ok
        tr = s.time(sets, warmup=2, repeat=4, min_repeat_ms=2)
        assert isinstance(tr, TimingResult) and tr.ok, tr.error
        assert len(tr.runs) == 4 and tr.threads == 1 and tr.target == "llvm" and tr.number >= 1
        assert tr.min_ms <= tr.median_ms <= tr.max_ms
        with pytest.raises(ValueError):
            s.time([])
    assert build_log() == 1


def test_runner_refuses_another_program():
    with KernelSession(GATHER) as s:
        run = s.runner
        assert run(GATHER, _gather_inputs([1, 2, 3, 4]), _y(), kernel="gather", target="llvm", timeout=30).ok
        with pytest.raises(ValueError, match="another source"):
            run(ROWSUM, {}, {})
        with pytest.raises(ValueError, match="kernel"):
            run(GATHER, _gather_inputs([1, 2, 3, 4]), _y(), kernel="other")
        with pytest.raises(ValueError, match="builds for"):
            run(GATHER, _gather_inputs([1, 2, 3, 4]), _y(), target="cuda")


def test_close_removes_the_directory_and_is_idempotent(tmp_path, monkeypatch):
    monkeypatch.setenv("LEIRC_TMPDIR", str(tmp_path))
    s = KernelSession(GATHER)
    d, pid = s.directory, s.worker_pid
    assert os.path.isdir(d) and s.run(_gather_inputs([1, 2, 3, 4]), _y()).ok
    s.close()
    s.close()
    assert not os.path.exists(d) and _leftovers(tmp_path) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    with pytest.raises(ValueError, match="closed"):
        s.run(_gather_inputs([1, 2, 3, 4]), _y())


def test_exception_inside_with_cleans_up(tmp_path, monkeypatch):
    monkeypatch.setenv("LEIRC_TMPDIR", str(tmp_path))
    with pytest.raises(RuntimeError):
        with KernelSession(GATHER) as s:
            d = s.directory
            raise RuntimeError("boom")
    assert not os.path.exists(d) and _leftovers(tmp_path) == []


_PARENT = textwrap.dedent("""
    import sys, time
    import numpy as np
    from leirc.lower.session import KernelSession
    src = sys.argv[1]
    s = KernelSession(src)
    ins = {"A": np.arange(10, dtype=np.float32), "C": np.zeros(4, np.int64)}
    if sys.argv[2] == "idle":
        assert s.run(ins, {"Y": np.zeros(4, np.float32)}).ok
        print("READY", s.worker_pid, flush=True)
        time.sleep(600)
    else:
        assert s.build_failure is None
        print("READY", s.worker_pid, flush=True)
        s.run(ins, {"Y": np.zeros(4, np.float32)})  # hangs in the worker (test hook)
""")


@pytest.mark.parametrize("phase", ["idle", "in_request"])
def test_sigterm_of_the_parent_leaves_no_directory_and_no_worker(tmp_path, phase):
    env = dict(os.environ, LEIRC_TMPDIR=str(tmp_path))
    if phase == "in_request":
        env["LEIRC_WORKER_TEST_HOOK"] = "hang"
    p = subprocess.Popen([sys.executable, "-c", _PARENT, GATHER, phase], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert line.startswith("READY"), (line, p.stderr.read() if p.poll() is not None else "")
        worker = int(line.split()[1])
        assert _leftovers(tmp_path)  # the session directory exists while the parent lives
        time.sleep(0.5)  # let the parent block (sleep or waiting for the reply)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc == -signal.SIGTERM  # the default disposition was honoured after cleaning up
    assert _leftovers(tmp_path) == []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the worker outlived its parent")


def test_a_pool_hands_over_started_workers(build_log, tmp_path):
    from leirc.lower.session import WorkerPool

    with WorkerPool(1) as pool:
        with KernelSession(GATHER, pool=pool) as s1:  # empty pool: a fresh worker, and a spare starts
            assert s1.run(_gather_inputs([1, 2, 3, 4]), _y()).ok
        spare = pool.spare_pids()[0]
        with KernelSession(ROWSUM, pool=pool) as s2:
            assert s2.worker_pid == spare
            r = s2.run({"A": np.ones((16, 8), np.float32)}, {"Y": np.zeros(16, np.float32)})
            assert r.ok and np.allclose(r.outputs["Y"], 8.0)
    assert build_log() == 2
    assert _leftovers(tmp_path) == []  # the spare started by the last take is gone too


def test_sigkill_of_the_parent_lets_an_idle_worker_clean_up(tmp_path):
    # no handler runs on SIGKILL; the worker sees its stdin close and removes the directory
    env = dict(os.environ, LEIRC_TMPDIR=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-c", _PARENT, GATHER, "idle"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert line.startswith("READY"), line
        worker = int(line.split()[1])
        p.kill()
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (_leftovers(tmp_path) or _alive(worker)):
        time.sleep(0.1)
    assert _leftovers(tmp_path) == []
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_poison_intermediates_reaches_the_build():
    src = r"""\kernel twostep(A: f32[8]) -> (Y: f32[8]) {
      L^{8}_{i=0} [ T^{f32,g}_{i} = A^{f32,g}_{i}*2.0; ];
      L^{8}_{i=0} [ Y^{f32,g}_{i} = T^{f32,g}_{i} + 1.0; ];
    }"""
    with KernelSession(src, poison_intermediates=True) as s:
        r = s.run({"A": np.arange(8, dtype=np.float32)}, {"Y": np.zeros(8, np.float32)})
        assert r.ok, r.error
        assert r.outputs["Y"].tolist() == [2.0 * k + 1.0 for k in range(8)]


def test_scalar_outputs_keep_their_shape():
    # np.ascontiguousarray turns a 0-d array into shape (1,): every loss kernel (Y: f32[])
    # then failed its shape check in the worker
    import numpy as np

    from leirc.lower.session import KernelSession

    src = r"\kernel total(A: f32[8]) -> (Y: f32[]) { L^{8}_{i=0} [ Y^{f32,g} = Y^{f32,g} + A^{f32,g}_{i}; ]; }"
    a = np.arange(8, dtype=np.float32)
    with KernelSession(src, target="llvm") as s:
        r = s.run({"A": a}, {"Y": np.zeros((), np.float32)})
    assert r.ok, r.error
    assert r.outputs["Y"].shape == () and float(r.outputs["Y"]) == 28.0


def _worker_environ(s: KernelSession) -> dict:
    with open(f"/proc/{s.worker_pid}/environ", "rb") as f:
        items = [kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv]
    return {k.decode(): v.decode() for k, v in items}


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="reads a worker's environment from /proc (Linux)")
def test_workers_pool_threads_sleep_soon_unless_the_user_says_otherwise(monkeypatch):
    from leirc.lower.session import POOL_SPIN_COUNT

    monkeypatch.delenv("TVM_THREAD_POOL_SPIN_COUNT", raising=False)
    with KernelSession(ROWSUM, threads=2) as s:
        assert s.run({"A": np.ones((16, 8), np.float32)}, {"Y": np.zeros(16, np.float32)}).ok
        assert _worker_environ(s)["TVM_THREAD_POOL_SPIN_COUNT"] == str(POOL_SPIN_COUNT)
    monkeypatch.setenv("TVM_THREAD_POOL_SPIN_COUNT", "123")
    with KernelSession(ROWSUM, threads=2) as s:
        assert s.run({"A": np.ones((16, 8), np.float32)}, {"Y": np.zeros(16, np.float32)}).ok
        assert _worker_environ(s)["TVM_THREAD_POOL_SPIN_COUNT"] == "123"


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads thread CPU times from /proc (Linux)")
def test_timing_waits_for_this_process_busy_threads():
    """A thread of the caller that still burns CPU (OpenBLAS spinning after a BLAS call) would
    share the cores with the timed worker: the wait returns only once it has stopped."""
    import threading

    from leirc.lower.session import wait_for_quiet

    finished = threading.Event()

    def spin(seconds=0.25):
        end = time.monotonic() + seconds
        a = np.ones(1 << 16)
        while time.monotonic() < end:
            a.sum()  # releases the GIL: the waiting thread runs meanwhile
        finished.set()

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.03)
    waited = wait_for_quiet(max_wait=5.0)
    assert finished.is_set() and waited < 5.0
    t.join()


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads process CPU times from /proc (Linux)")
def test_timing_waits_for_busy_children_but_not_for_the_timed_worker():
    """A pool's spare worker importing TVM is a child that burns a core for 1-2 s: the timing
    waits for it; the worker being timed (excluded) is not waited for."""
    from leirc.lower.session import wait_for_quiet

    busy = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"
    child = subprocess.Popen([sys.executable, "-c", busy.format(s=0.4)])
    try:
        time.sleep(0.1)
        wait_for_quiet(max_wait=10.0)
        assert child.poll() is not None  # it waited until the busy child was done
    finally:
        child.wait()
    timed = subprocess.Popen([sys.executable, "-c", busy.format(s=5.0)])
    try:
        time.sleep(0.1)
        waited = wait_for_quiet(exclude=(timed.pid,), max_wait=4.0)
        assert waited < 4.0 and timed.poll() is None
    finally:
        timed.kill()
        timed.wait()
