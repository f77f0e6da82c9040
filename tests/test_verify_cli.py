"""``leirc verify`` command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from leirc.cli.main import main

REPO = Path(__file__).resolve().parents[1]

MM = """\\kernel mm(A: f32[8, 16], B: f32[16, 6]) -> (C: f32[8, 6]) {
  L^{8}_{i=0} L^{6}_{j=0} L^{16}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
}
"""
MM_WRONG = MM.replace("B^{f32,g}_{k,j}", "B^{f32,g}_{k,5-j}")
BAD = "\\kernel bad(A: f32[4]) -> (Y: f32[4]) {\n  L^{4}_{i=0} [ Y^{f32,g}_{i} = Q^{f32,g}_{i}; ];\n}\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "mm.leir").write_text(MM)
    (tmp_path / "wrong.leir").write_text(MM_WRONG)
    (tmp_path / "bad.leir").write_text(BAD)
    (tmp_path / "two.leir").write_text(MM + MM.replace("mm(", "mm2("))
    return tmp_path


def test_equal_human_summary(files, capsys):
    assert main(["verify", str(files / "mm.leir"), "-t", "interp"]) == 0
    out = capsys.readouterr().out
    assert "mm (interp) vs mm (interp): EQUAL (bitwise identical)" in out
    assert "9 run(s): seeds 0,1,2 x uniform,normal,signed" in out


def test_not_equal_exit_1_and_json(files, capsys):
    rc = main(["verify", str(files / "wrong.leir"), str(files / "mm.leir"), "-t", "interp", "--seeds", "0,5",
               "--dists", "normal,large", "--json"])
    assert rc == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["equal"] is False and rep["bitwise"] is False
    assert rep["seeds"] == [0, 5] and rep["dists"] == ["normal", "large"]
    # the envelope every --json document starts with (schemas/envelope.json), then the report
    assert list(rep)[:5] == ["version", "command", "ok", "error", "diagnostics"]
    assert list(rep)[5:13] == ["equal", "bitwise", "max_abs_err", "max_rel_err", "norm_rel_err", "seeds", "dists",
                               "failures"]
    assert rep["ok"] is False and rep["error"] is None  # a verdict, not a failure to run
    assert any("mismatch" in f for f in rep["failures"])


def test_json_equal(files, capsys):
    assert main(["verify", str(files / "mm.leir"), "-t", "interp", "--seeds", "1", "--dists", "small", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["equal"] is True and rep["failures"] == [] and rep["runs"] == 1


def test_program_errors_print_diagnostics_exit_1(files, capsys):
    assert main(["verify", str(files / "bad.leir"), "-t", "interp"]) == 1
    err = capsys.readouterr().err
    assert "error[E018]" in err and "bad.leir:2" in err


def test_usage_and_io_errors_exit_2(files, capsys):
    assert main(["verify", str(files / "missing.leir"), "-t", "interp"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["verify", str(files / "mm.leir"), "--dists", "cauchy", "-t", "interp"]) == 2
    assert main(["verify", str(files / "mm.leir"), "--seeds", "a,b", "-t", "interp"]) == 2
    assert main(["verify", str(files / "two.leir"), "-t", "interp"]) == 2
    assert main(["verify", str(files / "two.leir"), "--kernel", "nope", "-t", "interp"]) == 2
    capsys.readouterr()
    assert main(["verify", str(files / "two.leir"), "--kernel", "mm2", "-t", "interp", "--seeds", "0"]) == 0


def test_stdin_and_entry_point(files):
    p = subprocess.run([sys.executable, "-m", "leirc.cli.main", "verify", "-", "-t", "interp", "--seeds", "0",
                        "--dists", "uniform", "--json"], input=MM, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["equal"] is True
