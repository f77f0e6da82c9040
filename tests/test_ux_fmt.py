"""``leirc fmt --diff`` (issue #34): a unified diff of what formatting would change, exit 1
when anything would (the --check semantics), nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from leirc.cli.main import main

UGLY = "% scale\n\\kernel s(A: f32[8]) -> (C: f32[8]) { L^{8}_{i=0}[C^{f32,g}_{i} = A^{f32,g}_{i}*2.0;]; }"


def test_diff_shows_the_change_and_exits_1_without_writing(tmp_path, capsys):
    f = tmp_path / "s.leir"
    f.write_text(UGLY)
    assert main(["fmt", "--diff", str(f)]) == 1
    out = capsys.readouterr().out
    assert f.read_text() == UGLY  # nothing written
    lines = out.splitlines()
    assert lines[0] == f"--- {f}" and lines[1] == f"+++ {f}" and lines[2].startswith("@@ ")
    assert "\\ No newline at end of file" in lines  # the original's missing final newline, as diff says it
    # the diff's + side is exactly what `leirc fmt` prints, its - side the file as it is
    assert main(["fmt", str(f)]) == 0
    formatted = capsys.readouterr().out
    plus = [ln[1:] for ln in lines[3:] if ln.startswith("+")]
    minus = [ln[1:] for ln in lines[3:] if ln.startswith("-")]
    context = [ln[1:] for ln in lines[3:] if ln.startswith(" ")]
    assert context == ["% scale"]
    assert "\n".join(context + plus) + "\n" == formatted
    assert "\n".join(context + minus) == UGLY


def test_a_formatted_file_has_no_diff(tmp_path, capsys):
    f = tmp_path / "s.leir"
    f.write_text(UGLY)
    assert main(["fmt", "-i", str(f)]) == 0
    capsys.readouterr()
    assert main(["fmt", "--diff", str(f)]) == 0
    assert capsys.readouterr().out == ""


def test_diff_of_several_files_and_bad_input(tmp_path, capsys):
    good, ugly, broken = tmp_path / "good.leir", tmp_path / "ugly.leir", tmp_path / "broken.leir"
    ugly.write_text(UGLY)
    good.write_text(UGLY)
    main(["fmt", "-i", str(good)])
    broken.write_text("\\kernel s(A: f32[8]) -> (C: f32[8]) { L^{8}_{i=0}[C^{f32,g}_{i} = ;]; }\n")
    capsys.readouterr()
    assert main(["fmt", "--diff", str(good), str(ugly), str(broken)]) == 1
    cap = capsys.readouterr()
    assert f"--- {ugly}" in cap.out and str(good) not in cap.out and "error[E001]" in cap.err
    with pytest.raises(SystemExit) as e:  # --diff writes nothing: it cannot go with -i
        main(["fmt", "--diff", "-i", str(ugly)])
    assert e.value.code == 2


def test_diff_applies_as_a_patch(tmp_path):
    """What a reviewer does with it: ``leirc fmt --diff f | patch -p0`` formats f."""
    patch = subprocess.run(["sh", "-c", "command -v patch"], capture_output=True, text=True).stdout.strip()
    f = tmp_path / "s.leir"
    f.write_text(UGLY)
    d = subprocess.run([sys.executable, "-m", "leirc.cli.main", "fmt", "--diff", "s.leir"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert d.returncode == 1 and d.stdout.startswith("--- s.leir\n+++ s.leir\n")
    if patch:  # the exact bytes `patch` needs are pinned above either way
        subprocess.run([patch, "-p0", "-s"], input=d.stdout, cwd=tmp_path, text=True, check=True, timeout=60)
        assert subprocess.run([sys.executable, "-m", "leirc.cli.main", "fmt", "--check", "s.leir"], cwd=tmp_path,
                              timeout=120).returncode == 0
