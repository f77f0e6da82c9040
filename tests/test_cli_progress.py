"""Progress as it happens, and clean exits: stage lines on a terminal (none in a pipe or with
``--quiet``), an ``interrupted`` line on Ctrl-C, and no temporary directory left behind when
a long command is stopped by SIGTERM (as ``timeout`` does) or SIGINT.

Real subprocesses with a private TMPDIR/LEIRC_TMPDIR; the terminal is a real pseudo-terminal.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOFTMAX = REPO / "examples" / "softmax.leir"
GOOD = "\\kernel scale(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;\n  ];\n}\n"


def private_env(tmp: Path) -> dict:
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp), "LEIRC_TMPDIR": str(tmp)}


def wait_for_session(tmp: Path, proc, limit: float = 240.0) -> None:
    """Until the command has a live worker session (its directory exists)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if any(p.name.startswith("leirc-session-") for p in tmp.iterdir()):
            return
        if proc.poll() is not None:
            pytest.fail(f"the command ended before starting a session: {proc.communicate()}")
        time.sleep(0.05)
    pytest.fail("no session directory appeared")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_verify_leaves_no_temporary_directory(tmp_path, sig):
    tmp = tmp_path / "tmp"
    env = private_env(tmp)
    p = subprocess.Popen([sys.executable, "-m", "leirc.cli.main", "verify", str(SOFTMAX), "--kernel", "softmax"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        wait_for_session(tmp, p)
        p.send_signal(sig)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    left = sorted(x.name for x in tmp.iterdir())
    assert left == [], left
    err = err.decode()
    assert "Traceback" not in err
    if sig == signal.SIGTERM:
        assert p.returncode == -signal.SIGTERM  # re-delivered after the cleanup: `timeout` sees a kill
    else:
        assert p.returncode == 130 and "leirc: interrupted" in err, err


# A command interrupted inside an ``exec`` of a string (as a dataclass creation during a lazy
# import is), run as ``python -m``: CPython remembers that interrupt as unhandled and, unless
# leirc clears it, ends the process by SIGINT (-2) after leirc printed its line and chose 130.
INTERRUPTED_IN_EXEC = """
import argparse, importlib, sys
cli = importlib.import_module("leirc.cli.main")  # the module (leirc.cli.main is also the function's name)

def build_parser(only=None):
    if sys.argv[1] == "while-importing":
        exec("raise KeyboardInterrupt")
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command")
    sub.add_parser("boom").set_defaults(func=lambda args: exec("raise KeyboardInterrupt"))
    return ap

cli.build_parser = build_parser
raise SystemExit(cli.main(["boom"]))
"""


@pytest.mark.parametrize("when", ["while-importing", "while-running"])
def test_an_interrupt_inside_exec_still_exits_130(tmp_path, when):
    (tmp_path / "interrupted_in_exec.py").write_text(INTERRUPTED_IN_EXEC)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    p = subprocess.run([sys.executable, "-m", "interrupted_in_exec", when], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 130, (p.returncode, p.stderr)
    assert "leirc: interrupted" in p.stderr and "Traceback" not in p.stderr, p.stderr


def run_on_terminal(argv, cwd, timeout=240.0) -> str:
    """Run with stderr on a pseudo-terminal; what the terminal showed."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([sys.executable, "-m", "leirc.cli.main", *argv], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=slave, cwd=cwd, env={**os.environ, "TERM": "dumb"})
        os.close(slave)
        chunks = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 4096)
                except OSError:  # the other side closed (Linux reports EIO)
                    break
                if not data:
                    break
                chunks.append(data)
            elif p.poll() is not None:
                break
        p.wait(timeout=60)
        return b"".join(chunks).decode(errors="replace")
    finally:
        os.close(master)


def test_stage_lines_on_a_terminal_only(tmp_path):
    k = tmp_path / "k.leir"
    k.write_text(GOOD)
    shown = run_on_terminal(["verify", str(k), "-t", "interp", "--seeds", "0", "--dists", "uniform"], tmp_path)
    assert "leirc: verify: interpreting the candidate" in shown, shown
    quiet = run_on_terminal(["verify", str(k), "-t", "interp", "--seeds", "0", "--dists", "uniform", "-q"], tmp_path)
    assert "leirc: verify:" not in quiet
    piped = subprocess.run([sys.executable, "-m", "leirc.cli.main", "verify", str(k), "-t", "interp", "--seeds", "0",
                            "--dists", "uniform"], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert piped.returncode == 0 and "leirc: verify:" not in piped.stderr


@pytest.mark.slow
def test_build_prints_each_stage_as_it_starts(tmp_path):
    k = tmp_path / "k.leir"
    k.write_text(GOOD)
    shown = run_on_terminal(["build", str(k), "-O1", "-o", str(tmp_path / "out")], tmp_path)
    order = [shown.find(f"leirc: {s} ...") for s in ("loading", "checking", "optimizing", "lowering to TVM TIR",
                                                      "compiling", "verifying")]
    assert all(i >= 0 for i in order) and order == sorted(order), shown
    # the optimizer's note comes after its stage line and before the next one, as it happens
    note = shown.find("leirc: -O1 scale:")
    assert order[2] < note < order[3], shown


@pytest.mark.slow
def test_a_killed_command_leaves_its_worker_to_clean_up(tmp_path):
    """SIGKILL gives the command no chance to clean up; its worker (in its own process group)
    notices the closed pipes, removes the session directory and exits instead of dying on a
    broken pipe with the directory left behind."""
    tmp = tmp_path / "tmp"
    env = private_env(tmp)
    p = subprocess.Popen([sys.executable, "-m", "leirc.cli.main", "verify", str(SOFTMAX), "--kernel", "softmax"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        wait_for_session(tmp, p)
    finally:
        p.kill()
        p.wait(timeout=60)
    end = time.monotonic() + 180
    while time.monotonic() < end and any(tmp.iterdir()):
        time.sleep(0.2)
    assert sorted(x.name for x in tmp.iterdir()) == []
