"""Import errors as a user reads them (issue #34): every unsupported operator of a model in one
run, paths as the user typed them (relative), and a MODEL.py build's diagnostics citing a file
that exists (the imported kernel, written out) rather than a derived name."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

HEAD = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
TAIL = "\n\ndef get_inputs():\n    return [torch.randn(8, 8)]\n\n\ndef get_init_inputs():\n    return []\n"

THREE_MISSING = HEAD + """    def __init__(self):
        super().__init__()
        self.up = nn.PixelShuffle(2)

    def forward(self, x):
        y = torch.relu(x)
        z = torch.linalg.matrix_power(y, 2)
        w = torch.fft.fft(z).real
        v = self.up(w.reshape(1, 4, 4, 4))
        return v.logdet()
""" + TAIL

DRIFT = HEAD + """    def __init__(self):
        super().__init__()
        self.k = 1.0

    def forward(self, x):
        self.k += 1.0  # state that changes between calls: the traced kernel cannot follow it
        return x * self.k
""" + TAIL


def leirc(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "leirc", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_every_unsupported_operator_at_once_with_relative_paths(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.py").write_text(THREE_MISSING)
    p = leirc("import", "models/m.py", cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines[0] == ("leirc: error: models/m.py:12: `z = torch.linalg.matrix_power(y, 2)`: unsupported "
                        "operation torch.linalg_matrix_power")
    also = [ln for ln in lines[1:] if ln.startswith("  also unsupported: ")]
    assert [re.match(r"  also unsupported: (models/m\.py:\d+):", ln).group(1) for ln in also] == \
        ["models/m.py:13", "models/m.py:14", "models/m.py:15"], lines
    assert "torch.fft_fft" in also[0] and "PixelShuffle" in also[1] and "Tensor.logdet" in also[2]
    assert str(tmp_path) not in p.stderr  # no absolute path for a file below the working directory


@pytest.mark.slow
def test_a_model_build_cites_the_imported_kernel_it_wrote(tmp_path):
    (tmp_path / "drift.py").write_text(DRIFT)
    p = leirc("build", "drift.py", "-o", "out", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    m = re.search(r"^(\S+):(\d+):\d+: error\[E053\]", p.stderr, re.M)
    assert m is not None, p.stderr
    cited, line = m.group(1), int(m.group(2))
    assert cited == "out/drift.leir" and (tmp_path / cited).exists()
    assert (tmp_path / cited).read_text().splitlines()[line - 1].startswith("\\kernel model(")
    assert "the diagnostics above are in the kernel imported from drift.py (written to out/drift.leir)" in p.stderr
