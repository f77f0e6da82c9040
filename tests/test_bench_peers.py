"""``benchmarks/bench_peers.py`` end to end on one small row: the real driver, sessions, PyTorch
and NumPy columns, written to JSON and markdown (no timing is asserted beyond "a positive,
finite number of milliseconds")."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_peers  # noqa: E402


def test_rows_come_from_the_suites_and_only_keeps_names():
    std = bench_peers.find_rows(["stdlib"], [])
    names = [r["name"] for r in std]
    assert names[0] == "gemm512" and "relu" in names and len(names) == 1 + len(list((REPO / "stdlib").glob("*.leir")))
    wl = bench_peers.find_rows(["workloads"], ["relu"])  # a workload's name without its l1_NNN_ prefix
    assert [r["name"] for r in wl] == ["l1_019_relu"] and wl[0]["kind"] == "py"
    both = bench_peers.find_rows(["stdlib", "workloads"], ["relu", "gemv"])
    assert {r["name"] for r in both} == {"relu", "gemv", "l1_019_relu", "l1_004_gemv"}
    with pytest.raises(SystemExit):
        bench_peers.find_rows(["stdlib"], ["no_such_kernel"])


def test_interleave_rotates_the_starting_column(monkeypatch):
    calls = []
    timers = {c: (lambda c=c: calls.append(c) or 1.0) for c in "abc"}
    monkeypatch.setattr(bench_peers, "PAUSE_S", 0.0)
    got = bench_peers.interleave(timers, 3, {})
    assert calls == list("abc" "bca" "cab") and got == {"a": 1.0, "b": 1.0, "c": 1.0}
    errors = {}
    bad = dict(timers, b=lambda: 1 / 0)
    got = bench_peers.interleave(bad, 2, errors)
    assert "b" not in got and "ZeroDivisionError" in errors["b"] and got["a"] == 1.0


def test_work_and_bytes_of_a_gemm():
    ops, nbytes = bench_peers.work_and_bytes([bench_peers.GEMM512])
    assert ops == 2 * 512 ** 3 and nbytes == 3 * 512 * 512 * 4


@pytest.mark.slow
def test_one_row_end_to_end(tmp_path):
    js, md = tmp_path / "p.json", tmp_path / "p.md"
    env = dict(os.environ, TVM_NUM_THREADS="2", OMP_NUM_THREADS="2")
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_peers.py"), "--only", "relu", "--rounds", "1",
                        "--ms-trials", "0", "--no-compile", "--json", str(js), "--md", str(md)],
                       env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    data = json.loads(js.read_text())
    (row,) = data["rows"]
    assert row["kernel"] == "relu" and not row["errors"], row["errors"]
    for col in ("o0", "o1", "o2", "eager", "numpy"):
        assert math.isfinite(row["ms"][col]) and row["ms"][col] > 0, col
    assert row["bound"] == "memory" and row["mbytes"] == pytest.approx(2 * 256 * 24576 * 4 / 1e6)
    assert 0 < row["o2_pct_peak"] and row["speedup"]["o2_vs_eager"] > 0
    assert data["meta"]["peaks"]["sgemm_gflops"] > 0 and data["meta"]["peaks"]["copy_gbs"] > 0
    text = md.read_text()
    assert "| relu |" in text and "Geomeans:" in text
