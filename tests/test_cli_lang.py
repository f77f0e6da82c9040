"""End-to-end CLI tests for the language commands: check, fmt, convert, --version/--help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import STDLIB, require_compat
from leirc.cli.main import main

GOOD = "\\kernel k(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;\n  ];\n}\n"
BAD = "\\kernel k(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i+1} + q;\n  ];\n}\n"


def run_cli(*args, stdin: bytes | None = None):
    p = subprocess.run([sys.executable, "-m", "leirc.cli.main", *args], input=stdin, capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_version_and_help():
    rc, out, _ = run_cli("--version")
    assert rc == 0 and out.startswith("leirc ")
    for cmd in ("check", "fmt", "convert"):
        rc, out, _ = run_cli(cmd, "--help")
        assert rc == 0 and "usage: leirc " + cmd in out


def test_check_clean_and_exit_codes(tmp_path):
    good = tmp_path / "good.leir"
    good.write_text(GOOD)
    assert main(["check", str(good)]) == 0
    bad = tmp_path / "bad.leir"
    bad.write_text(BAD)
    rc, out, err = run_cli("check", str(bad))
    assert rc == 1
    assert f"{bad}:3:" in err and "error[E012]" in err and "^" in err
    rc, _, err = run_cli("check", str(tmp_path / "missing.leir"))
    assert rc == 2 and "no such file" in err
    rc, _, err = run_cli("check")
    assert rc == 2


def test_check_json_lists_all_fields(tmp_path):
    bad = tmp_path / "bad.leir"
    bad.write_text(BAD)
    rc, out, _ = run_cli("check", "--json", str(bad))
    assert rc == 1
    doc = json.loads(out)  # the versioned envelope of every --json command (schemas/check.json)
    assert doc["version"] == 1 and doc["command"] == "check" and doc["ok"] is False
    diags = doc["diagnostics"]
    assert diags and {"file", "line", "col", "end_line", "end_col", "severity", "code", "message"} <= set(diags[0])
    assert diags[0]["line"] == 3 and diags[0]["code"] == "E012"


def test_check_never_tracebacks_on_garbage(tmp_path):
    for i, data in enumerate([b"\xff\xfe\x00", b"\\kernel", b"[[[[", b"B^{1}_{tx=0}[" * 3000, bytes(range(256))]):
        f = tmp_path / f"g{i}.leir"
        f.write_bytes(data)
        rc, out, err = run_cli("check", str(f))
        assert rc == 1, (data[:20], err)
        assert "Traceback" not in err and "error[E0" in err


def test_check_bare_body_with_signature(tmp_path):
    body = tmp_path / "body.leir"
    body.write_text("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];")
    sig = tmp_path / "sig.json"
    sig.write_text(json.dumps({"inputs": [["A", "torch.float32", [4, 8]]], "outputs": [["D", "f32", [4]]]}))
    assert main(["check", "--signature", str(sig), str(body)]) == 0
    sig.write_text(json.dumps({"inputs": [["A", "f32", [4, 4]]], "outputs": [["D", "f32", [4]]]}))
    rc, _, err = run_cli("check", "--signature", str(sig), str(body))
    assert rc == 1 and "E030" in err


def test_fmt_layouts_check_and_in_place(tmp_path):
    f = tmp_path / "x.leir"
    f.write_text("% header kept\n\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=\\frac{A^{f32,g}_{i}}{2}\\cdot 3;];}")
    rc, out, _ = run_cli("fmt", "--compact", str(f))
    assert rc == 0 and out.strip().endswith("\\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}/2*3;];}")
    assert run_cli("fmt", "--check", str(f))[0] == 1
    assert main(["fmt", "-i", str(f)]) == 0
    text = f.read_text()
    assert text.startswith("% header kept\n\\kernel k(A: f32[8]) -> (C: f32[8]) {")
    assert run_cli("fmt", "--check", str(f))[0] == 0
    rc, _, err = run_cli("fmt", "--compact", "--pretty", str(f))
    assert rc == 2


def test_fmt_stdin_and_syntax_error():
    rc, out, _ = run_cli("fmt", "-", stdin=GOOD.encode())
    assert rc == 0 and out == GOOD
    rc, _, err = run_cli("fmt", "-", stdin=b"L^{8}_{i=0}[C^{f32,g}_{i}=;];")
    assert rc == 1 and "error[E001]" in err and "expected" in err


def test_stdlib_is_checked_and_formatted():
    files = sorted(str(p) for p in STDLIB.glob("*.leir"))
    assert len(files) >= 20
    assert main(["check", "-W", *files]) == 0
    assert main(["fmt", "--check", *files]) == 0


def test_convert_records(tmp_path):
    compat = require_compat()
    out = tmp_path / "conv"
    assert main(["convert", str(compat / "steptp_emitted_level1.jsonl"), "-o", str(out)]) == 0
    files = sorted(out.glob("*.leir"))
    assert len(files) == 81
    assert main(["check", *map(str, files)]) == 0
    text = (out / "softmax.leir").read_text()
    assert "\\kernel softmax(A: f32[16, 16384]) -> (C: f32[16, 16384])" in text
    rec = tmp_path / "bad.jsonl"
    rec.write_text('{"IR": "B^{4}_{tx=0}[", "inputs": [["A"], [[4]], ["torch.float32"]], "outputs": [["C"], [[4]]]}\nnot json\n')
    rc, _, err = run_cli("convert", str(rec))
    assert rc == 1 and "E001" in err and "bad record" in err
