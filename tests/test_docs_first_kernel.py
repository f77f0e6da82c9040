"""``docs/first-kernel.md`` is run, not just read: every ```bash and ```python block, in
order, in one empty directory, each must succeed (exit 0) with no traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "first-kernel.md"
BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def test_the_page_covers_the_first_hour():
    text = DOC.read_text(encoding="utf-8")
    commands = " ".join(code for kind, code in blocks() if kind == "bash")
    for cmd in ("leirc check", "leirc run", "leirc verify", "leirc bench", "leirc strategies", "leirc apply",
                "leirc build", "-O1", "leirc import", "--inputs"):
        assert cmd in commands, cmd
    assert any(kind == "python" and "load_library" in code for kind, code in blocks())
    for trap in ("` % ` after a space", "L^{N}_{i=0}", "--signature"):
        assert trap in text, trap


@pytest.mark.slow
def test_every_block_runs(tmp_path):
    pytest.importorskip("torch")  # the last section imports a PyTorch model
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    for n, (kind, code) in enumerate(blocks(), 1):
        argv = ["bash", "-euo", "pipefail", "-c", code] if kind == "bash" else [sys.executable, "-c", code]
        p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        out = p.stdout + p.stderr
        assert p.returncode == 0, f"block {n} ({kind}) failed with {p.returncode}:\n{code}\n---\n{out[-3000:]}"
        assert "Traceback" not in out, f"block {n}:\n{out[-3000:]}"
    assert (tmp_path / "build" / "axpy.so").exists() and (tmp_path / "y.npz").exists()
