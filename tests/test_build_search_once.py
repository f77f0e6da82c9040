"""``leirc build K.leir -O search``: the winner is built once and verified once (the driver
reuses the search's own verification of it), and every speedup the summary prints is the
quotient of the two times it is printed with (#29)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from leirc.lang.canonical import fingerprint
from leirc.lang.load import load_kernel

ROWSUM = r"""\kernel rowsum(A: f32[256, 1024]) -> (Y: f32[256]) {
  L^{256}_{i=0} L^{1024}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}"""


@pytest.mark.slow
def test_the_search_winner_is_built_once_verified_once_and_its_ratios_are_quotients(tmp_path):
    src = tmp_path / "rowsum.leir"
    src.write_text(ROWSUM)
    log = tmp_path / "builds.log"
    env = dict(os.environ, LEIRC_WORKER_BUILD_LOG=str(log))
    out = subprocess.run([sys.executable, "-m", "leirc", "build", str(src), "-O", "search", "--budget", "4",
                          "--algo", "greedy", "--proposer", "o1,o2", "--memory", "none", "--eval-cache", "none",
                          "--time", "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    best_text = (tmp_path / "out" / "rowsum.Osearch.leir").read_text()
    best = fingerprint(load_kernel(best_text).kernel)
    root = fingerprint(load_kernel(ROWSUM).kernel)
    assert best != root, "the search kept the input: nothing to count\n" + out.stderr[-3000:]
    builds = [ln.split() for ln in log.read_text().splitlines()]
    assert sum(1 for b in builds if b[2] == best) == 1, builds  # the search's build served everything
    # verified once: the driver says it reused the search's verification, and did not run its own
    assert "by the search, in the winner's own build" in out.stderr
    # --time prints the search's own interleaved confirmation (one measurement), not a third build
    timed = next(ln for ln in out.stderr.splitlines() if ln.startswith("leirc: time rowsum"))
    assert "interleaved confirmation" in timed, timed
    # the trace says what the steps' guarantee is (proven: legal by construction) and what they passed
    trace = json.load(open(tmp_path / "out" / "rowsum.trace.json"))
    assert trace["search"]["evidence"] in ("proven", "tested") and len(trace["search"]["steps_evidence"]) == \
        len(trace["steps"]) and "seeds" in trace["search"]["verified_on"]
    summary = json.load(open(tmp_path / "out" / "rowsum.search.json"))
    assert summary["speedup"] == pytest.approx(summary["root_ms"] / summary["best_ms"], rel=1e-9)
    conf = summary.get("confirmation")
    if conf is not None:
        assert summary["root_ms"] == conf["a_ms"] and summary["best_ms"] == conf["b_ms"]
