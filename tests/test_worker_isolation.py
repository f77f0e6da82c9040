"""A worker started from a folder that shadows standard modules imports none of them: leirc
run from a cloned repository holding ``random.py`` must not execute it in its workers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SHADOWS = ("random", "typing", "types", "copy", "inspect", "logging", "queue", "signal", "select", "numbers",
           "json", "tempfile", "struct")

KERNEL = r"""\kernel twice(X: f32[8]) -> (Y: f32[8]) {
  L^{8}_{i=0} [ Y^{f32,g}_{i} = X^{f32,g}_{i} * 2.0; ];
}
"""


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P needs 3.11")
def test_workers_started_from_a_shadowing_folder_import_nothing_from_it(tmp_path):
    marker = tmp_path / "IMPORTED"
    for name in SHADOWS:
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name}\\n')\n"
                                             "raise ImportError('shadowed')\n")
    (tmp_path / "k.leir").write_text(KERNEL)
    # the CLI itself runs from an installed entry point; its workers are what must stay clean
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    leirc = os.path.join(os.path.dirname(sys.executable), "leirc")
    p = subprocess.run([leirc, "verify", "k.leir"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env)
    assert not marker.exists(), marker.read_text()
    assert p.returncode == 0, p.stderr[-2000:]
