"""``leirc suggest stdlib/layernorm.leir`` offers steps the cost model expects to help, not five
``loop_split(factor=2)`` at x1 (#34's report): the model now reads the target's lanes and cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_layernorm_suggestions_are_varied_and_predicted_to_help():
    p = subprocess.run([sys.executable, "-m", "leirc", "suggest", os.path.join(ROOT, "stdlib", "layernorm.leir"),
                        "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["suggestions"]
    assert len(rows) == 5
    assert len({r["step"]["strategy"] for r in rows}) >= 2
    assert rows[0]["predicted_speedup"] > 1.1
    assert not all(r["text"].startswith("loop_split") for r in rows)
