"""CLI tests for `leirc import` (and the error path for unsupported operators)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("torch")

from leirc.lang.checker import check_text  # noqa: E402

MODEL = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, 8)

        def forward(self, x):
            return torch.softmax(torch.relu(self.fc(x)), dim=-1)

    N = 16

    def get_inputs():
        return [torch.rand(4, N)]

    def get_init_inputs():
        return [N]
''')

UNSUPPORTED = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            y = x * 2
            return torch.argsort(y, dim=1)

    def get_inputs():
        return [torch.rand(4, 8)]

    def get_init_inputs():
        return []
''')


def run_cli(*args):
    """The real command line, in a subprocess (used once: the end-to-end path)."""
    p = subprocess.run([sys.executable, "-m", "leirc.cli.main", *args], capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def run_main(capsys, *args):
    """The command in-process (fast): exit code, stdout, stderr."""
    from leirc.cli.main import main

    rc = main(list(args))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_import_writes_leir_and_weights(tmp_path):
    src = tmp_path / "model.py"
    src.write_text(MODEL)
    out = tmp_path / "model.leir"
    rc, _, err = run_cli("import", str(src), "-o", str(out), "--verify")
    assert rc == 0, err
    assert "verified against PyTorch on 3 seeds" in err
    text = out.read_text()
    assert text.startswith("% model.py: imported by `leirc import`")
    assert "\\kernel model(X: f32[4, 16], Fc_weight: f32[8, 16], Fc_bias: f32[8]) -> (Y: f32[4, 8])" in text
    assert check_text(text).ok
    with np.load(tmp_path / "model.npz") as z:
        assert sorted(z.files) == ["Fc_bias", "Fc_weight"]
        assert z["Fc_weight"].shape == (8, 16) and z["Fc_weight"].dtype == np.float32
    # the command is clean for `leirc check` as well
    rc, _, err = run_cli("check", str(out))
    assert rc == 0, err


def test_import_to_stdout(tmp_path, capsys):
    src = tmp_path / "m.py"
    src.write_text(MODEL)
    rc, out, err = run_main(capsys, "import", str(src))
    assert rc == 0, err
    assert out.startswith("% m.py: imported") and "\\kernel model(" in out
    assert not (tmp_path / "m.npz").exists()


def test_unsupported_op_is_a_clear_error(tmp_path, capsys):
    src = tmp_path / "bad.py"
    src.write_text(UNSUPPORTED)
    rc, out, err = run_main(capsys, "import", str(src), "-o", str(tmp_path / "bad.leir"))
    assert rc == 1
    assert "Traceback" not in err
    assert "bad.py:8:" in err and "torch.argsort(y, dim=1)" in err
    assert "unsupported operation torch.argsort" in err
    assert not (tmp_path / "bad.leir").exists()


def test_usage_errors(tmp_path, capsys):
    rc, _, err = run_main(capsys, "import", str(tmp_path / "missing.py"))
    assert rc == 2 and "no such file" in err
    notkb = tmp_path / "notkb.py"
    notkb.write_text("x = 1\n")
    rc, _, err = run_main(capsys, "import", str(notkb))
    assert rc == 1 and "not in KernelBench format" in err and "Traceback" not in err
