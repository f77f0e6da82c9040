"""The search benchmark matrix's machinery (``benchmarks/search_bench.py``,
``benchmarks/search_matrix/``): what needs no timing is tested exactly (evaluations to 90 %,
HTAM against menu, the held-out split, the outputs); one tiny real run goes end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from search_matrix import metrics  # noqa: E402

# a recorded trajectory: (evaluations so far, best speedup so far)
TRAJ = [(1, 1.0), (2, 1.0), (3, 1.6), (4, 1.6), (5, 1.9), (6, 2.0), (7, 2.0), (8, 2.1)]


def test_evals_to_90_percent_of_the_final_speedup():
    assert metrics.evals_to_fraction(TRAJ, 0.9) == 5  # 1.9 >= 0.9 x 2.1 = 1.89
    assert metrics.evals_to_fraction(TRAJ, 1.0) == 8
    assert metrics.evals_to_fraction(TRAJ, 0.5) == 3  # 1.6 >= 1.05, the earlier 1.0 does not count
    # a run that found nothing has no "90 % of its gain"
    assert metrics.evals_to_fraction([(1, 1.0), (2, 1.0)]) is None
    assert metrics.evals_to_fraction([]) is None


def test_htam_against_menu_is_the_issues_target_computed_as_it_reads():
    menu = [(1, 1.0), (2, 1.2), (3, 1.2), (4, 1.5), (5, 1.5), (6, 1.5), (7, 1.5), (8, 1.8)]
    htam = [(1, 1.3), (2, 1.3), (3, 1.9), (4, 1.9)]
    h = metrics.htam_vs_menu(menu, htam)
    assert h["menu_final"] == 1.8 and h["menu_evals"] == 8 and h["htam_evals"] == 3
    assert h["ratio"] == pytest.approx(3 / 8) and h["met"] is True
    slow = metrics.htam_vs_menu(menu, [(e, 1.7) for e in range(1, 9)])
    assert slow["htam_evals"] is None and slow["ratio"] is None and slow["met"] is False
    late = metrics.htam_vs_menu(menu, [(e, 1.0 if e < 6 else 1.8) for e in range(1, 9)])
    assert late["ratio"] == pytest.approx(6 / 8) and late["met"] is False
    assert metrics.htam_vs_menu([(1, 1.0)], htam)["met"] is None  # menu found nothing: no target


def test_holdout_split_is_sorted_even_odd_and_order_free():
    names = ["softmax", "gemv", "relu", "conv2d", "layernorm"]
    train, test = metrics.holdout_split(names)
    assert train == ["conv2d", "layernorm", "softmax"] and test == ["gemv", "relu"]
    assert metrics.holdout_split(reversed(names)) == (train, test)
    assert not set(train) & set(test) and sorted(train + test) == sorted(names)


def test_geomean_and_speedups():
    assert metrics.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert metrics.geomean([None, 4.0, 0.0]) == pytest.approx(4.0) and metrics.geomean([]) is None
    rows = [{"ms_by_column": {"O0": 8.0, "eager": 4.0, "search:menu": 2.0}},
            {"ms_by_column": {"O0": 9.0, "eager": 3.0, "search:menu": 1.0}}]
    assert metrics.speedups(rows[0])["search:menu"] == {"vs_eager": 2.0, "vs_O0": 4.0}
    g = metrics.geomean_rows(rows)
    assert g["search:menu"]["vs_eager"] == pytest.approx(6 ** 0.5) and g["search:menu"]["kernels"] == 2
    assert g["O0"]["vs_O0"] == pytest.approx(1.0)


def _doc(rows):
    return {"started": "now", "budget": 4, "command": "x", "rows": rows,
            "holdout": {"train": ["a"], "test": ["b"], "rows": [
                {"kernel": "b", "warm": {"speedup": 1.5, "evals_to_90": 2}, "cold": {"speedup": 1.2, "evals_to_90": 4},
                 "load": [1.0, 1, 1], "load_after": [1.5, 1, 1]}]}}


def test_outputs_are_written_atomically_and_read_back(tmp_path):
    row = {"kernel": "relu", "ms_by_column": {"O0": 4.0, "eager": 2.0, "search:menu": 2.5},
           "searches": [{"proposers": "menu", "speedup": 1.6, "spread": 0.02, "evaluations": 4, "evals_to_90": 2,
                         "search_s": 10.0, "steps": ["loop_parallelization(loop=N0.i)"]}],
           "ms": {"wall_s": 10.0, "trials": 16, "source": "te", "checked": "equal to -O0"},
           "htam_vs_menu": {"menu_final": 1.6, "menu_evals": 2, "htam_evals": 1, "ratio": 0.5, "met": True},
           "load": [1.0, 1, 1], "load_after": [2.0, 1, 1]}
    j, m = tmp_path / "m.json", tmp_path / "m.md"
    metrics.write(_doc([row]), str(j), str(m))
    back = json.loads(j.read_text())
    assert back["rows"][0]["ms_by_column"]["search:menu"] == 2.5
    md = m.read_text()
    assert "| relu |" in md and "loop_parallelization(loop=N0.i)" in md and "x1.6 ± 2 %" in md
    assert "x0.8" in md  # search:menu against eager, in the geomean row
    assert "Held-out memory" in md and "| b | x1.5 | 2 | x1.2 | 4 |" in md
    # a second write replaces the first (no stray temporary files)
    metrics.write(_doc([row, dict(row, kernel="gemv")]), str(j), str(m))
    assert [r["kernel"] for r in json.loads(j.read_text())["rows"]] == ["relu", "gemv"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.md"]


def test_kernels_are_found_by_suite_and_name():
    import search_bench

    std = search_bench.find_cases(["stdlib"], [])
    assert [c["name"] for c in std] == sorted(c["name"] for c in std) and all(c["kind"] == "leir" for c in std)
    wl = search_bench.find_cases([], ["relu", "l1_019_relu", "gemv"])
    assert [(c["name"], c["kind"]) for c in wl] == [("relu", "leir"), ("l1_019_relu", "py"), ("gemv", "leir")]
    with pytest.raises(SystemExit):
        search_bench.find_cases([], ["no_such_kernel"])


def test_a_multi_kernel_trajectory_adds_evaluations_and_geomeans_speedups():
    import search_bench

    class R:
        def __init__(self, history, evaluations):
            self.history, self.evaluations = history, evaluations

    joint = search_bench._joint_history([R([(1, 1.0), (2, 4.0)], 2), R([(1, 1.0), (2, 1.0), (3, 4.0)], 3)])
    assert [e for e, _ in joint] == [1, 2, 3, 4, 5]
    assert joint[1][1] == pytest.approx(2.0) and joint[-1][1] == pytest.approx(4.0)


@pytest.mark.slow
def test_a_tiny_matrix_runs_end_to_end(tmp_path):
    import search_bench

    j, m = tmp_path / "m.json", tmp_path / "m.md"
    rc = search_bench.main(["--only", "relu", "--budget", "2", "--ms-seconds", "0", "--no-compile", "--proposer",
                            "menu", "--rounds", "1", "--json", str(j), "--md", str(m), "--out", str(tmp_path / "w")])
    assert rc == 0
    doc = json.loads(j.read_text())
    row = doc["rows"][0]
    assert row["kernel"] == "relu" and "error" not in row, row
    assert {"O0", "O2", "eager", "search:menu"} <= set(row["ms_by_column"])
    s = row["searches"][0]
    assert s["evaluations"] == 2 and len(s["history"]) == 2 and len(s["per_evaluation"]) == 3  # the root too
    assert [p["index"] for p in s["per_evaluation"]] == [0, 1, 2]
    assert row["notes"]["eager"].startswith("search_matrix/torch_eager.py")
    assert "| relu |" in m.read_text()
