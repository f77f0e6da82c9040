"""benchmarks/tuner_bench.py's bookkeeping, without timing anything: the kernel list resolves,
ratios at equal trials and their geomeans, the markdown table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import search_bench  # noqa: E402
import tuner_bench as TB  # noqa: E402


def test_the_twenty_kernels_resolve():
    cases = search_bench.find_cases([], list(TB.STDLIB) + list(TB.WORKLOADS))
    assert len(cases) == 20 and sum(c["kind"] == "py" for c in cases) == 10


def test_ratios_geomeans_and_table():
    args = TB.parse_args(["--trials", "64,16", "--seeds", "2"])
    assert args.trials == [16, 64] and args.seed_list == [0, 1]
    row = {"kernel": "k", "ms_by_column": {"O1": 4.0, "O2": 3.0, "ms@64": 6.0, "eager": 2.0},
           "search_at": {16: {"median_ms": 3.0, "min_ms": 2.9, "max_ms": 3.3, "seeds": 2},
                         64: {"median_ms": 2.0, "min_ms": 1.9, "max_ms": 2.2, "seeds": 2}},
           "evals_to_90_median": 5, "heldout_spearman": [0.8, None], "load": [1.0], "load_after": [1.2]}
    r = TB.ratios(row, args.trials)
    assert r[64]["O2"] == pytest.approx(1.5) and r[64]["ms"] == pytest.approx(3.0) and r[64]["compile"] is None
    assert r[16]["O1"] == pytest.approx(4.0 / 3.0) and r[16]["ms"] is None
    doc = {"trials": args.trials, "rows": [row, {"kernel": "failed", "error": "x", "ms_by_column": {},
                                                 "load": [1.0], "load_after": [1.0]}]}
    doc["geomean"] = TB.geomeans(doc)
    assert doc["geomean"][64]["O2"] == pytest.approx(1.5)
    md = TB.markdown(doc)
    assert "| k | 4 | 3 | 3 (2.9–3.3) | 2 (1.9–2.2) |" in md and "×-O2@64" in md and "| failed |" in md
