"""``leirc build -O search`` as a user sees it (issue #34): a ``--json`` envelope like every
other command's, Ctrl-C that keeps the best and exits 130, a progress line (done/budget, best,
ETA) on a terminal only, and log lines that name each step list once.

Real CLI runs (subprocesses; the terminal is a real pseudo-terminal), small kernels, tiny
budgets, no evaluation cache and no shared memory so every run evaluates for real."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import sqlite3
import subprocess
import struct
import sys
import termios
import time
from pathlib import Path

import pytest

from leirc.cli import schemas
from leirc.cli.searchlog import StepLog

REPO = Path(__file__).resolve().parents[1]


def run_on_terminal(argv, cwd, timeout=600.0) -> str:
    """Run with stderr on a pseudo-terminal 120 columns wide (tqdm draws nothing on a terminal
    of width 0, which a fresh pty reports); what the terminal showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    try:
        p = subprocess.Popen([sys.executable, "-m", "leirc.cli.main", *argv], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=slave, cwd=cwd, env={**os.environ, "TERM": "xterm"})
        os.close(slave)
        chunks = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
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

SCALE = "\\kernel scale(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;\n  ];\n}\n"
MATMUL = r"""\kernel mm(A: f32[64, 64], B: f32[64, 64]) -> (C: f32[64, 64]) {
  L^{64}_{i=0} L^{64}_{j=0} L^{64}_{k=0} [
    C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j};
  ];
}
"""
ISOLATED = ["--memory", "none", "--eval-cache", "none"]


def leirc(*argv, cwd, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "leirc.cli.main", *argv], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def test_step_log_names_each_step_list_once():
    log = StepLog()
    o2 = [f"s{i}(x={i})" for i in range(16)]
    assert log("[1] root: 1 ms (x1)") == "[1] root: 1 ms (x1)"
    assert log("[2] a(): 0.9 ms (x1.1)") == "[2] a(): 0.9 ms (x1.1)"
    first = log(f"[3] {' -> '.join(o2)}: 0.5 ms (x2)")
    assert first == "[3] s0(x=0) -> ... -> s15(x=15) (16 steps): 0.5 ms (x2)"
    child = log(f"[4] {' -> '.join(o2 + ['u(f=4)'])}: 0.4 ms (x2.5)")
    assert child == "[4] #3 + u(f=4) (depth 17): 0.4 ms (x2.5)"
    grandchild = log(f"[5] {' -> '.join(o2 + ['u(f=4)', 'v()', 'w()', 'z()'])}: failed: build")
    assert grandchild == "[5] #4 +3 steps (... -> z()) (depth 20): failed: build"
    assert log("[6] a() -> b(): 1 ms (x1) (replayed)") == "[6] a() -> b(): 1 ms (x1) (replayed)"
    assert log("[7] a() -> b() -> c(): 1 ms (x1)") == "[7] #6 + c() (depth 3): 1 ms (x1)"
    confirm = log(f"[confirm] the best ({' -> '.join(o2)}) does not beat the input beyond the noise")
    assert confirm == "[confirm] the best (#3 (depth 16)) does not beat the input beyond the noise"
    assert log("  re-timed next to its parent (5 rounds): x1.2") == "  re-timed next to its parent (5 rounds): x1.2"


@pytest.mark.slow
def test_search_json_is_the_envelope(tmp_path):
    (tmp_path / "scale.leir").write_text(SCALE)
    p = leirc("build", "scale.leir", "-O", "search", "--budget", "2", "--algo", "greedy", *ISOLATED, "-o", "out",
              "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # one document, nothing else on stdout
    assert schemas.validate(doc, "build") == []
    assert doc["command"] == "build" and doc["ok"] and doc["error"] is None and doc["version"] == 1
    (s,) = doc["searches"]
    assert s["kernel"] == "scale" and 1 <= s["evaluations"] <= 2 and "budget" in s["stopped"]
    assert os.path.join("out", "scale.Osearch.leir") in doc["outputs"]
    assert os.path.join("out", "scale.search.json") in doc["outputs"]
    # a failure is the same envelope on stdout, with the reason
    p = leirc("build", "scale.leir", "-O", "search", "--budget", "0", "-o", "out", "--json", cwd=tmp_path)
    assert p.returncode == 2
    doc = json.loads(p.stdout)
    assert schemas.validate(doc, "build") == [] and not doc["ok"] and "--budget" in doc["error"]["message"]


def _rows(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as c:
            return int(c.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_ctrl_c_keeps_the_best_and_exits_130(tmp_path):
    (tmp_path / "mm.leir").write_text(MATMUL)
    state = tmp_path / "out" / "mm.search.sqlite"
    # every kernel run sleeps a little, so the search is surely still running at the SIGINT
    env = {**os.environ, "LEIRC_WORKER_TEST_HOOK": "sleep:0.5"}
    p = subprocess.Popen([sys.executable, "-m", "leirc.cli.main", "build", "mm.leir", "-O", "search", "--budget", "50",
                          "--algo", "greedy", *ISOLATED, "-o", "out", "--json"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # a pytest started in the background ignores SIGINT, and a child would inherit that
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while _rows(state) < 1 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()[1][-2000:]
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=400)
    assert p.returncode == 130, err[-2000:]
    assert "leirc: interrupted" in err and "Traceback" not in err
    doc = json.loads(out)
    assert schemas.validate(doc, "build") == []
    assert doc["error"]["kind"] == "interrupted" and "interrupted" in doc["searches"][0]["stopped"]
    assert (tmp_path / "out" / "mm.Osearch.leir").exists() and (tmp_path / "out" / "mm.so").exists()


@pytest.mark.slow
def test_progress_line_on_a_terminal_only_and_short_log_lines(tmp_path):
    (tmp_path / "mm.leir").write_text(MATMUL)
    args = ["build", "mm.leir", "-O", "search", "--budget", "4", "--algo", "greedy", *ISOLATED, "-o", "out"]
    shown = run_on_terminal(args, tmp_path, timeout=600)
    # tqdm's line: "search mm: 50%|... | 2/4 [00:10<00:10, 5.0s/eval, best x1.2]"
    assert "search mm" in shown and "/4 [" in shown and "best x" in shown, shown
    assert "<" in shown.split("/4 [", 1)[1].split("]", 1)[0], shown  # elapsed<remaining: the ETA
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "\n", shown.replace("\r", "\n"))
    evals = [ln for ln in plain.splitlines() if re.match(r"\[\d+\] ", ln)]
    assert evals, shown
    assert all(ln.count(" -> ") <= 2 for ln in evals), evals
    (tmp_path / "scale.leir").write_text(SCALE)
    small = ["build", "scale.leir", "-O", "search", "--budget", "1", *ISOLATED, "-o", "small"]
    quiet = run_on_terminal(small + ["-q"], tmp_path, timeout=600)
    assert "search scale: 1 evaluations" in quiet and "/1 [" not in quiet, quiet
    piped = leirc(*small, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert "search scale: 1 evaluations" in piped.stderr and "/1 [" not in piped.stderr
    assert "\x1b[" not in piped.stderr and "\r" not in piped.stderr
