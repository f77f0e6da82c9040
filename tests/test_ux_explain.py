"""``leirc explain CODE`` (issue #34): every code of the one table has a meaning, a fix and
(for the checker's codes) an example that ``leirc check`` really reports that code for."""

from __future__ import annotations

import json

import pytest

from leirc.cli import schemas
from leirc.cli.main import main
from leirc.lang.diagnostics import CODES
from leirc.lang.explain import explained_codes, explanation

#: codes the checker cannot report: the build's passes (lower, build, nvcc, verify) and CUDA's lowering
BUILD_CODES = {"E050", "E051", "E052", "E053", "W050", "W051"}


def test_every_code_is_explained():
    assert explained_codes() == sorted(CODES), "add the texts of a new code to leirc/lang/explain.py"
    for code in CODES:
        e = explanation(code)
        assert e.meaning and e.fix and e.title == CODES[code]
        # a code either has an example for `leirc check` or says which command reports it
        assert (e.example is None) == (code in BUILD_CODES) == (e.reported_by is not None), code


@pytest.mark.parametrize("code", sorted(set(CODES) - BUILD_CODES))
def test_the_example_triggers_its_code_through_leirc_check(code, tmp_path, capsys):
    f = tmp_path / "example.leir"
    f.write_bytes(explanation(code).example.encode("utf-8", "surrogateescape"))
    rc = main(["check", str(f), "--json"])
    doc = json.loads(capsys.readouterr().out)
    codes = [d["code"] for d in doc["diagnostics"]]
    assert code in codes, (code, doc["diagnostics"])
    assert rc == (1 if code.startswith("E") else 0)


def test_explain_through_the_cli(capsys):
    assert main(["explain", "e30"]) == 0  # case and missing zeros do not matter
    out = capsys.readouterr().out
    assert out.startswith("E030 (error): access out of bounds") and "Fix:" in out and "A^{f32,g}_{i+1}" in out
    assert main(["explain", "W051"]) == 0
    assert "Reported by: `leirc build -t cuda`" in capsys.readouterr().out
    assert main(["explain", "E002"]) == 0
    assert "\\xff" in capsys.readouterr().out  # the byte that is not UTF-8, shown printable
    assert main(["explain", "E999"]) == 2
    assert "E999: no such diagnostic code" in capsys.readouterr().err
    assert main(["explain", "--list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(CODES)
    assert main(["explain", "E018", "W001", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert schemas.validate(doc, "explain") == [] and [c["code"] for c in doc["codes"]] == ["E018", "W001"]
