"""Every ``--json`` document validates against its schema (``leirc/cli/schemas``), on success
and on every kind of failure: a script always gets one document on stdout, with the same
envelope (``version``, ``command``, ``ok``, ``error``, ``diagnostics``)."""

from __future__ import annotations

import json

import pytest

from leirc.cli import schemas
from leirc.cli.main import main

GOOD = "\\kernel scale(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;\n  ];\n}\n"
WRONG = GOOD.replace("*2.0", "*2.5")
SYNTAX = "\\kernel scale(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = ;\n  ];\n}\n"
UNDEFINED = GOOD.replace("A^{f32,g}_{i}*2.0", "B^{f32,g}_{i}")


@pytest.fixture
def files(tmp_path):
    for name, text in [("good", GOOD), ("wrong", WRONG), ("syntax", SYNTAX), ("undefined", UNDEFINED), ("empty", "")]:
        (tmp_path / f"{name}.leir").write_text(text)
    return tmp_path


def run_json(capsys, argv, status):
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc == status, out
    doc = json.loads(out)  # exactly one document, nothing else on stdout
    errors = schemas.validate(doc, argv[0])
    assert not errors, errors
    assert doc["version"] == 1 and doc["command"] == argv[0]
    return doc


def test_every_schema_is_valid_for_the_validator():
    assert set(schemas.commands()) >= {"bench", "check", "run", "simplify", "strategies", "verify"}
    for name in schemas.commands():
        schemas.validate({}, name)  # raises on a keyword the validator does not implement


def test_the_validator_rejects_what_the_schema_forbids():
    doc = {"version": 1, "command": "verify", "ok": True, "error": None, "diagnostics": []}
    assert any("missing required field 'equal'" in e for e in schemas.validate(doc, "verify"))
    bad = dict(doc, version=2, ok="yes", error={"kind": "io"})
    errs = schemas.validate(bad, "verify")
    assert any("$.version" in e for e in errs) and any("$.ok" in e for e in errs)
    assert any("$.error" in e for e in errs)
    with pytest.raises(ValueError, match="not supported"):
        schemas.validate({}, {"patternProperties": {}})


def test_check(files, capsys):
    doc = run_json(capsys, ["check", str(files / "good.leir"), "--json"], 0)
    assert doc["ok"] and doc["diagnostics"] == [] and doc["error"] is None
    doc = run_json(capsys, ["check", str(files / "undefined.leir"), "--json"], 1)
    assert not doc["ok"] and doc["diagnostics"][0]["code"] == "E018"
    doc = run_json(capsys, ["check", str(files / "missing.leir"), "--json"], 2)
    assert doc["error"]["kind"] == "io" and "no such file" in doc["error"]["message"]
    doc = run_json(capsys, ["check", str(files / "empty.leir"), "--json"], 0)
    assert [d["code"] for d in doc["diagnostics"]] == ["W008"]


def test_verify_every_path_has_one_schema(files, capsys):
    base = ["-t", "interp", "--seeds", "0", "--dists", "uniform", "--probes", "none", "--json"]
    doc = run_json(capsys, ["verify", str(files / "good.leir")] + base, 0)
    assert doc["ok"] and doc["equal"] and doc["target"] == "interp" and doc["runs"] == 1
    doc = run_json(capsys, ["verify", str(files / "wrong.leir"), str(files / "good.leir")] + base, 1)
    assert not doc["ok"] and doc["error"] is None and doc["equal"] is False and doc["max_abs_err"] > 0
    doc = run_json(capsys, ["verify", str(files / "syntax.leir")] + base, 1)
    assert doc["error"]["kind"] == "diagnostics" and doc["diagnostics"][0]["code"] == "E001"
    assert "equal" not in doc  # no fake report with made-up error measures
    doc = run_json(capsys, ["verify", str(files / "empty.leir")] + base, 2)
    assert "no kernel to verify" in doc["error"]["message"]
    doc = run_json(capsys, ["verify", str(files / "good.leir"), "-t", "interp", "--dists", "cauchy", "--json"], 2)
    assert "unknown distribution" in doc["error"]["message"]


def test_strategies_sites_registry_and_errors(files, capsys):
    doc = run_json(capsys, ["strategies", str(files / "good.leir"), "--json"], 0)
    assert doc["kernel"] == "scale" and any(s["strategy"] == "loop_split" for s in doc["sites"])
    doc = run_json(capsys, ["strategies", "--list", "--json"], 0)
    assert any(s["name"] == "loop_split" for s in doc["strategies"])
    doc = run_json(capsys, ["strategies", str(files / "syntax.leir"), "--json"], 1)
    assert doc["diagnostics"] and not doc["ok"]
    doc = run_json(capsys, ["strategies", str(files / "empty.leir"), "--json"], 1)
    assert "no kernel" in doc["error"]["message"]


def test_simplify_ok_and_parse_error(files, capsys):
    doc = run_json(capsys, ["simplify", str(files / "good.leir"), "--json"], 0)
    assert doc["statements_changed"] == 0 and doc["passes"]
    doc = run_json(capsys, ["simplify", str(files / "syntax.leir"), "--json"], 1)
    assert doc["error"]["kind"] == "diagnostics"


def test_bench_and_run_errors_before_any_build(files, capsys):
    doc = run_json(capsys, ["bench", str(files / "syntax.leir"), "--json"], 1)
    assert doc["diagnostics"][0]["code"] == "E001"
    doc = run_json(capsys, ["bench", str(files / "missing.leir"), "--json"], 2)
    assert doc["error"]["kind"] == "io"
    doc = run_json(capsys, ["run", str(files / "undefined.leir"), "--json"], 1)
    assert doc["diagnostics"][0]["code"] == "E018"


def test_bench_and_run_results(files, capsys):
    doc = run_json(capsys, ["bench", str(files / "good.leir"), "--repeat", "2", "--sets", "1", "--warmup", "0",
                            "--min-repeat-ms", "1", "--threads", "1", "--json"], 0)
    assert doc["ok"] and len(doc["runs_ms"]) == 2 and doc["threads"] == 1 and doc["target"] == "llvm"
    doc = run_json(capsys, ["run", str(files / "good.leir"), "--threads", "1", "--json"], 0)
    c = doc["outputs"]["C"]
    assert c["shape"] == [8] and c["dtype"] == "f32" and 0 <= c["stats"]["min"] <= c["stats"]["max"] <= 2.0
