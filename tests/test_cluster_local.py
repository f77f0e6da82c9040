"""The cluster layer without a cluster: the local executor's retries and idempotence, the
target fingerprint, the progress line, a cluster flag without Ray, and a prompt Ctrl-C of
``leirc dataset gen`` that says what it saved."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leirc.cluster import LocalExecutor, Outcome, Progress, Task, job_key, open_executor, target_fingerprint
from leirc.cluster.hostid import RESOURCE_PREFIX, node_resources, timer_resource
from leirc.cluster.tune import TuneError, table
from leirc.dataset.store import Store

ROOT = Path(__file__).resolve().parent.parent


def _die_once(marker: str) -> str:
    if not os.path.exists(marker):
        Path(marker).write_text("died")
        os.kill(os.getpid(), signal.SIGKILL)
    return "second try"


def _always_die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _raise(msg: str) -> None:
    raise ValueError(msg)


def test_a_dead_worker_is_retried_and_a_raising_job_is_a_result(tmp_path):
    ex = LocalExecutor(1, max_attempts=2)
    try:
        ex.submit(Task("a", _die_once, (str(tmp_path / "marker"),), label="die once"))
        ex.submit(Task("a", _always_die))  # the same key again: ignored
        ex.submit(Task("b", _raise, ("bad input",)))
        got = {o.key: o for o in ex.as_completed()}
    finally:
        ex.close()
    assert set(got) == {"a", "b"}
    assert got["a"].ok and got["a"].value == "second try" and got["a"].attempts == 2
    assert not got["b"].ok and got["b"].error == "ValueError: bad input"
    assert ex.retries >= 1
    assert got["a"].fingerprint == target_fingerprint("llvm") and got["a"].node


def test_a_job_that_always_kills_its_worker_fails_after_its_attempts():
    ex = LocalExecutor(1, max_attempts=2)
    try:
        ex.submit(Task("x", _always_die, label="poison"))
        (out,) = list(ex.as_completed())
    finally:
        ex.close()
    assert not out.ok and out.attempts == 2 and "died on it 2 times" in out.error


def test_in_process_executor_and_job_keys():
    ex = open_executor(None, workers=0)
    ex.submit(Task("k", target_fingerprint, ("llvm",)))
    (out,) = list(ex.as_completed())
    assert out.ok and out.value == target_fingerprint("llvm") and out.attempts == 1
    k = job_key("fp", {"name": "loop_split", "args": {"factor": 4}}, "t")
    assert k == job_key("fp", {"args": {"factor": 4}, "name": "loop_split"}, "t")  # key order does not matter
    assert k != job_key("fp", {"name": "loop_split", "args": {"factor": 8}}, "t") != job_key("fp2", None, "t")


def test_target_fingerprint_and_its_resource():
    fp = target_fingerprint("llvm")
    assert len(fp) == 16 and int(fp, 16) >= 0
    assert target_fingerprint("cuda") != fp
    assert node_resources("llvm") == {timer_resource(fp): 1} and timer_resource(fp).startswith(RESOURCE_PREFIX)
    out = subprocess.run([sys.executable, "-m", "leirc.cluster", "resources"], capture_output=True, text=True,
                         cwd=str(ROOT), timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == '{"%s": 1}' % timer_resource(fp)


def test_progress_line_counts_per_node():
    buf = io.StringIO()
    p = Progress(3, where="ray x (2 nodes)", stream=buf, live=True, what="units")
    p.add(Outcome("a", True, node="n1"))
    p.retried = 1
    p.add(Outcome("b", False, error="x", node="n2"))
    p.draw(force=True)
    p.finish()
    assert "2/3 units done, 1 failed, 1 retried on ray x (2 nodes) | n1: 1, n2: 1" in buf.getvalue()
    assert p.summary()["per_node"] == {"n1": 1, "n2": 1}


def test_results_table_has_the_promised_columns():
    rows = [{"kernel": "k", "ok": True, "o2_ms": 2.0, "best_ms": 1.0, "speedup": 2.0, "steps": [{}], "verified": True},
            {"kernel": "bad", "ok": False, "error": "SearchError: x"}]
    t = table(rows)
    assert t.splitlines()[0] == "| kernel | -O2 ms | best ms | speedup vs -O2 | steps | verified |"
    assert "| k | 2 | 1 | 2x | 1 | yes |" in t and "| bad | - | - | - | - | failed: SearchError: x |" in t


NO_RAY = ("import sys; sys.modules['ray'] = None; from leirc.cli.main import main; "
          "sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("argv", [
    ["tune", "stdlib/relu.leir", "--cluster", "local", "-o", "{out}"],
    ["dataset", "gen", "--sources", "stdlib/relu.leir", "--out", "{out}", "--cluster", "auto"],
])
def test_a_cluster_flag_without_ray_names_the_extra(tmp_path, argv):
    argv = [a.replace("{out}", str(tmp_path / "o")) for a in argv]
    r = subprocess.run([sys.executable, "-c", NO_RAY, *argv], capture_output=True, text=True, cwd=str(ROOT),
                       timeout=120)
    assert r.returncode == 2, r.stderr
    assert "pip install 'leirc[cluster]'" in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_tune_usage_errors_are_one_line(tmp_path, capsys):
    from leirc.cli import cmd_tune

    for bad, msg in ((["--budget", "0"], "--budget"), (["--proposer", "nope"], "--proposer"),
                     (["--cluster", "not an address"], "--cluster expects")):
        assert cmd_tune.main([str(ROOT / "stdlib" / "relu.leir"), "-o", str(tmp_path / "o"), *bad]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1 and "Traceback" not in err
    assert cmd_tune.main([str(tmp_path / "missing.leir"), "-o", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(TuneError):
        from leirc.cluster.tune import load_inputs

        load_inputs([str(tmp_path / "missing")])


def test_a_broken_input_is_reported_with_its_position(tmp_path, capsys):
    from leirc.cli import cmd_tune

    bad = tmp_path / "bad.leir"
    bad.write_text("\\kernel k(X: f32[4]) -> (Y: f32[4]) {\n  L^{4}_{i=0} [ Y^{f32,g}_{i} = Z^{f32,g}_{i}; ];\n}\n")
    assert cmd_tune.main([str(bad), "-o", str(tmp_path / "o"), "--workers", "0", "-q"]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and "error[E" in err and "Traceback" not in err


def _workers_under(d: Path) -> list:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "leirc.lower.worker" in cmd and str(d) in cmd:
                pids.append(int(entry))
    return pids


def test_ctrl_c_stops_dataset_gen_within_seconds_and_says_what_was_saved(tmp_path):
    out = tmp_path / "ds"
    shm = tmp_path / "sessions"
    shm.mkdir()
    cmd = [sys.executable, "-m", "leirc.cli.cmd_dataset", "gen", "--sources", "stdlib/relu.leir", "stdlib/gemv.leir",
           "--out", str(out), "--workers", "1", "--shapes", "1", "--per-strategy", "1", "--strategies",
           "loop_split,loop_reorder", "--repeat", "1", "--no-compare-compiled"]
    p = subprocess.Popen(cmd, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=dict(os.environ, LEIRC_TMPDIR=str(shm)))
    try:
        deadline = time.monotonic() + 120
        while not _workers_under(shm) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # a kernel worker exists: a unit is being evaluated
        assert p.poll() is None, "the run ended before it could be interrupted"
        t0 = time.monotonic()
        os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        _, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    assert took < 10, f"took {took:.1f} s to stop"
    assert "interrupted:" in err and "saved by this run" in err and "rerun to resume" in err
    assert "Traceback" not in err
    import re

    said = re.search(r"interrupted: (\d+) record\(s\) saved by this run, (\d+) verified and (\d+) rejected", err)
    assert said, err
    store = Store(str(out), create=False)
    assert int(said.group(1)) == len(store) == int(said.group(2)) + int(said.group(3))
    deadline = time.monotonic() + 30
    while _workers_under(shm) and time.monotonic() < deadline:  # the kernel workers go with their owner
        time.sleep(0.2)
    assert _workers_under(shm) == []


def test_tune_json_documents_follow_the_envelope(tmp_path, capsys):
    from leirc.cli import schemas
    from leirc.cli.main import main

    bad = tmp_path / "bad.leir"
    bad.write_text("\\kernel k(X: f32[4]) -> (Y: f32[4]) {\n  L^{4}_{i=0} [ Y^{f32,g}_{i} = Z^{f32,g}_{i}; ];\n}\n")
    for argv, status in (([str(bad), "-o", str(tmp_path / "o"), "--workers", "0"], 1),
                         ([str(bad), "-o", str(tmp_path / "p"), "--budget", "0"], 2)):
        assert main(["tune", *argv, "--json"]) == status
        doc = json.loads(capsys.readouterr().out)
        assert schemas.validate(doc, "tune") == [] and doc["command"] == "tune" and not doc["ok"]
    assert doc["error"]["kind"] == "usage"


def test_dataset_resume_needs_a_dataset_and_bad_addresses_are_refused(tmp_path, capsys):
    from leirc.cli import cmd_dataset

    src = str(ROOT / "stdlib" / "relu.leir")
    assert cmd_dataset.main(["gen", "--sources", src, "--out", str(tmp_path / "none"), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "holds no dataset to continue" in err and err.count("\n") == 1
    assert cmd_dataset.main(["gen", "--sources", src, "--out", str(tmp_path / "x"), "--cluster", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert "--cluster expects local, auto, ray://HOST:PORT or HOST:PORT" in err and err.count("\n") == 1


def test_an_address_nothing_listens_on_fails_at_once(tmp_path, capsys):
    pytest.importorskip("ray", reason="the address is dialled only once Ray is there")
    from leirc.cli import cmd_tune

    t0 = time.monotonic()
    assert cmd_tune.main([str(ROOT / "stdlib" / "relu.leir"), "-o", str(tmp_path / "o"), "-q",
                          "--cluster", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in err and err.count("\n") == 1
    assert time.monotonic() - t0 < 30  # Ray alone retries a dead GCS for minutes
    # the run never started: the directory is not "a tuning run already"
    assert cmd_tune.main([str(ROOT / "stdlib" / "relu.leir"), "-o", str(tmp_path / "o"), "-q",
                          "--cluster", "127.0.0.1:1"]) == 2
    assert "holds a tuning run" not in capsys.readouterr().err
