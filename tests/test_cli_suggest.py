"""``leirc suggest``: ranked, legal next steps with rationales, offline (cost model +
memory); the LLM path is tested against the scripted server in ``test_llm_search.py``."""

from __future__ import annotations

import json

from leirc.cli import schemas
from leirc.cli.main import main
from leirc.engine.program import Program
from leirc.strategies import Step

MATMUL = "stdlib/matmul_square.leir"


def _suggest(capsys, *argv):
    rc = main(["suggest", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_json_suggestions_are_ranked_legal_steps(capsys, tmp_path):
    rc, out, _ = _suggest(capsys, MATMUL, "--json", "--memory", "none", "-k", "4")
    assert rc == 0
    doc = json.loads(out)
    assert not schemas.validate(doc, "suggest")
    rows = doc["suggestions"]
    assert 1 <= len(rows) <= 4 and [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    assert doc["source"] == "cost model"
    base = Program.from_text(open(MATMUL).read())
    for r in rows:
        step = Step.from_json(r["step"])
        child = base.apply(step).program  # every suggestion applies: legal by construction
        assert child.fingerprint != base.fingerprint
        assert r["rationale"].startswith("cost model")
        assert r["apply"].startswith(f"leirc apply {MATMUL} {step.name}")


def test_text_output_prints_an_apply_command_that_works(capsys, tmp_path):
    rc, out, _ = _suggest(capsys, MATMUL, "--memory", "none", "-k", "1")
    assert rc == 0
    cmd = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("leirc apply")][0]
    import shlex

    assert main(shlex.split(cmd)[1:]) == 0
    assert "applied" in capsys.readouterr().err


def test_an_llm_flag_without_an_endpoint_is_a_usage_error(capsys):
    rc, _, err = _suggest(capsys, MATMUL, "--llm-model", "m")
    assert rc == 2
    assert "base_url" in err or "base-url" in err or "endpoint" in err


def test_a_missing_file_is_an_io_error(capsys):
    rc, _, err = _suggest(capsys, "no/such.leir")
    assert rc == 2 and "no such file" in err
