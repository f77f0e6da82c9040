"""Every output of every command goes through one writer: special files are written in
place (``/dev/null`` survives), symlinks survive, and every OS error is ``leirc: error:
PATH: reason`` with exit 2 — never a traceback, never a half-written file."""

from __future__ import annotations

import json
import os
import stat

import pytest

from leirc.cli.main import main

GOOD = "\\kernel scale(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [\n    C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;\n  ];\n}\n"
RECORD = {"IR": "L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;];", "inputs": [["A"], [[8]], ["torch.float32"]],
          "outputs": [["C"], [[8]]], "model": "scale"}
SPLIT = ["loop_split", "--at", "N0.i", "--arg", "factor=2"]


@pytest.fixture
def d(tmp_path):
    (tmp_path / "k.leir").write_text(GOOD)
    (tmp_path / "afile").write_text("keep me\n")
    (tmp_path / "r.jsonl").write_text(json.dumps(RECORD) + "\n")
    return tmp_path


def fails_cleanly(capsys, argv, path_in_message):
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    line = [ln for ln in err.splitlines() if ln.startswith("leirc: error: ")]
    assert line and str(path_in_message) in line[-1], err
    return line[-1]


def test_dev_null_survives_every_writer(d, capsys):
    if not os.access("/dev/null", os.W_OK):
        pytest.skip("no writable /dev/null")
    for argv in (["apply", d / "k.leir", *SPLIT, "-o", "/dev/null"], ["simplify", d / "k.leir", "-o", "/dev/null"],
                 ["apply", d / "k.leir", *SPLIT, "--save-trace", "/dev/null"],
                 ["run", d / "k.leir", "--threads", "1", "--out", "/dev/null"]):
        assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode), argv
    capsys.readouterr()


def test_a_symlinked_output_keeps_its_link(d, capsys):
    target = d / "real.leir"
    target.write_text("old\n")
    link = d / "link.leir"
    link.symlink_to(target)
    assert main(["apply", str(d / "k.leir"), *SPLIT, "-o", str(link)]) == 0
    assert link.is_symlink() and "L^{2}" in target.read_text()
    fmt_link = d / "fmt-link.leir"
    fmt_link.symlink_to(d / "k.leir")
    (d / "k.leir").write_text(GOOD.replace("  L^", "L^"))
    assert main(["fmt", "-i", str(fmt_link)]) == 0
    assert fmt_link.is_symlink() and (d / "k.leir").read_text() == GOOD  # the target is formatted
    capsys.readouterr()


@pytest.mark.parametrize("which", ["apply", "simplify", "save-trace", "import", "run"])
def test_a_path_under_a_file(d, capsys, which):
    out = d / "afile" / "x.leir"
    argv = {"apply": ["apply", d / "k.leir", *SPLIT, "-o", out],
            "simplify": ["simplify", d / "k.leir", "-o", out],
            "save-trace": ["apply", d / "k.leir", *SPLIT, "--save-trace", out],
            "import": None,
            "run": ["run", d / "k.leir", "--threads", "1", "--out", d / "afile" / "o.npz"]}[which]
    if argv is None:
        pytest.importorskip("torch")
        model = d / "m.py"
        model.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                         "        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn(4)]\n\n\n"
                         "def get_init_inputs():\n    return []\n")
        argv = ["import", model, "-o", out]
    msg = fails_cleanly(capsys, argv, d / "afile")
    assert "Not a directory" in msg
    assert (d / "afile").read_text() == "keep me\n"


def test_an_unwritable_directory(d, capsys):
    ro = d / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):
            # root writes anywhere: a read-only directory cannot fail here, /proc can
            target = "/proc/leirc-no-such-dir/x.leir"
        else:
            target = str(ro / "x.leir")
        fails_cleanly(capsys, ["apply", d / "k.leir", *SPLIT, "-o", target], target)
        fails_cleanly(capsys, ["simplify", d / "k.leir", "-o", target], target)
    finally:
        os.chmod(ro, 0o700)


def test_convert_into_an_existing_file_or_proc(d, capsys):
    msg = fails_cleanly(capsys, ["convert", d / "r.jsonl", "-o", d / "afile"], d / "afile")
    assert "not a directory" in msg
    assert (d / "afile").read_text() == "keep me\n"
    fails_cleanly(capsys, ["convert", d / "r.jsonl", "-o", "/proc/x"], "/proc/x")


def test_build_into_an_existing_file(d, capsys):
    fails_cleanly(capsys, ["build", d / "k.leir", "-o", d / "afile"], d / "afile")
    pytest.importorskip("torch")
    model = d / "m.py"
    model.write_text("x = 1\n")  # refused before the model is even imported
    fails_cleanly(capsys, ["build", model, "-o", d / "afile"], d / "afile")
    assert (d / "afile").read_text() == "keep me\n"


def test_run_out_is_atomic_and_readable(d, capsys):
    import numpy as np

    out = d / "o.npz"
    assert main(["run", str(d / "k.leir"), "--threads", "1", "--out", str(out)]) == 0
    with np.load(out) as z:
        assert z["C"].shape == (8,)
    assert sorted(p.name for p in d.iterdir() if p.name.startswith(".leirc-") or "tmp" in p.name) == []
    capsys.readouterr()


def test_fmt_in_place_reports_an_unwritable_file_and_formats_the_others(d, capsys):
    ugly = GOOD.replace("  L^", "L^")
    (d / "a.leir").write_text(ugly)
    ro = d / "ro"
    ro.mkdir()
    (ro / "b.leir").write_text(ugly)
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: a read-only directory is writable, so the rename cannot fail here")
        rc = main(["fmt", "-i", str(ro / "b.leir"), str(d / "a.leir")])
    finally:
        os.chmod(ro, 0o700)
    err = capsys.readouterr().err
    assert rc == 2 and f"leirc: error: {ro / 'b.leir'}: Permission denied" in err and "Traceback" not in err
    assert (d / "a.leir").read_text() == GOOD and (ro / "b.leir").read_text() == ugly
