"""Packaging: the heavy parts are optional extras, and a core install works without them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_heavy_dependencies_are_extras():
    core = " ".join(_project()["dependencies"])
    extras = _project()["optional-dependencies"]
    for heavy in ("torch", "pygls", "openai"):
        assert heavy not in core, f"{heavy} must not be a core dependency"
    assert any(d.startswith("torch==") for d in extras["torch"])
    assert any(d.startswith("pygls") for d in extras["lsp"])
    assert any(d.startswith("openai") for d in extras["llm"])
    assert "torch" in extras["all"][0] and "lsp" in extras["all"][0] and "llm" in extras["all"][0]


def test_readme_and_ci_install_everything():
    for f in ("README.md", ".ci/run"):
        assert '-e ".[all,dev]"' in (ROOT / f).read_text(), f


# Runs in a fresh interpreter in which the optional packages cannot be imported, as after
# `pip install leirc` without extras.
_BLOCKED = textwrap.dedent('''
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "pygls", "openai", "lsprotocol"):
                raise ImportError(f"blocked for the test: {name}")
            return None

    sys.meta_path.insert(0, Block())
    import importlib.util
    _orig = importlib.util.find_spec
    importlib.util.find_spec = lambda n, *a: None if n.split(".")[0] in ("torch", "pygls", "openai") else _orig(n, *a)
    from leirc.cli.main import main
    sys.exit(main(sys.argv[1:]))
''')


def _core_cli(*argv, cwd=ROOT):
    return subprocess.run([sys.executable, "-c", _BLOCKED, *argv], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)


def test_core_commands_work_without_the_extras():
    r = _core_cli("check", "stdlib/softmax.leir", "stdlib/layernorm.leir")
    assert r.returncode == 0, r.stderr
    r = _core_cli("strategies", "stdlib/relu.leir")
    assert r.returncode == 0, r.stderr
    assert "loop_split" in r.stdout


def test_pytorch_commands_say_which_extra_they_need(tmp_path):
    model = tmp_path / "m.py"
    model.write_text("class Model: pass\n")
    for argv in (("import", str(model)), ("build", str(model), "-o", str(tmp_path))):
        r = _core_cli(*argv)
        assert r.returncode == 2, r.stderr
        assert "leirc[torch]" in r.stderr and "Traceback" not in r.stderr
