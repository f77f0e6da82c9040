"""``benchmarks/ab_leir.py`` end to end on two small programs of one kernel (real sessions; no
timing is asserted beyond "a positive number of milliseconds per program")."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import ab_leir  # noqa: E402

ROWS = r"""\kernel k(A: f32[64, 256]) -> (S: f32[64]) {
  L^{64}_{i=0} L^{256}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}
"""
PARALLEL = ROWS.replace("L^{64}_{i=0}", "P^{64}_{i=0}")


def test_two_programs_are_timed_in_their_own_sessions(tmp_path, capsys):
    new, old = tmp_path / "new.leir", tmp_path / "old.leir"
    new.write_text(PARALLEL)
    old.write_text(ROWS)
    assert ab_leir.main([str(new), str(old), "--rounds", "2", "--sessions", "2"]) == 0
    out = capsys.readouterr().out
    for lab in ("new", "old"):
        m = re.search(rf"^{lab}: median ([0-9.e+-]+) ms, min ([0-9.e+-]+) ms \(per session: ([^)]*)\)", out, re.M)
        assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0
        assert len(m.group(3).split(", ")) == 2  # one median per session
    assert re.search(r"old / new: [0-9.]+x by the median, [0-9.]+x by the minimum \(4 timings each\)", out)


def test_programs_with_other_inputs_are_refused(tmp_path):
    new, old = tmp_path / "new.leir", tmp_path / "old.leir"
    new.write_text(ROWS)
    old.write_text(ROWS.replace("64, 256", "32, 256").replace("L^{64}", "L^{32}").replace("f32[64]", "f32[32]"))
    with pytest.raises(SystemExit, match="different inputs"):
        ab_leir.main([str(new), str(old), "--rounds", "1"])
