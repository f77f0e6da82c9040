"""The learned cost model (leirc.search.learned): it learns a synthetic cost over design-space
points (held-out Spearman rises with measurements), is deterministic, persists its records and
booster per target and feature version, and warm-starts from them."""

from __future__ import annotations

import json
import math
import os
import random
from types import SimpleNamespace

import numpy as np
import pytest

from leirc.engine.program import Program
from leirc.lang import ast as A
from leirc.search import learned as L
from leirc.search.space import Space

MATMUL = r"""\kernel mm(A: f32[128, 96], B: f32[96, 64]) -> (C: f32[128, 64]) {
  L^{128}_{i=0} L^{64}_{j=0} L^{96}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
}"""


def synthetic_ms(result) -> float:
    """A cost the analytical model does not know: a 12-row register tile of 16 lanes is best,
    then any tile, parallel and vector loops help; a function of the program only."""
    loops = [n.kind for n in A.walk(result.kernel) if isinstance(n, A.Loop)]
    tile = next((t.shape for t in result.tensors.values() if t.private and t.shape and len(t.shape) == 2), None)
    ms = 10.0
    if tile is not None:
        ms -= 4.0 - abs(tile[0] - 12) * 0.25 - abs(tile[1] - 16) * 0.05
    ms += 3.0 * ("P" not in loops) + 2.0 * ("V" not in loops) + 0.5 * ("U" not in loops)
    return ms


@pytest.fixture(scope="module")
def points():
    """Distinct programs of the matmul's design space in a seeded order: (point, result, x)."""
    p = Program.from_text(MATMUL)
    space = Space("llvm")
    rng = random.Random(0)
    seen, out = set(), []
    for _ in range(600):
        r = space.realize(p, space.sample(rng))
        if r.fingerprint in seen:
            continue
        seen.add(r.fingerprint)
        out.append((r.fingerprint, r.result, L.features(SimpleNamespace(result=r.result), r.point, "llvm",
                                                        caches=(32 << 10, 1 << 20, 32 << 20))))
        if len(out) == 84:
            break
    assert len(out) == 84
    return out


def _spearman_after(points, n: int, seed: int = 0) -> float:
    m = L.CostModel("test-target", None, seed=seed)
    for fp, res, x in points[:n]:
        m.add("mm", fp, x, synthetic_ms(res))
    assert m.fit()
    held = points[60:]
    pred = m.predict([x for _, _, x in held])
    return L.spearman(pred, [-math.log(synthetic_ms(r)) for _, r, _ in held])


def test_the_model_learns_with_more_measurements(points):
    few, many = _spearman_after(points, 8), _spearman_after(points, 60)
    assert many >= 0.7 and many > few + 0.1, (few, many)
    assert _spearman_after(points, 60) == many  # deterministic (seeded, one thread)


def test_features_have_names_and_see_the_schedule(points):
    assert len(L.FEATURE_NAMES) == len(points[0][2]) and len(set(L.FEATURE_NAMES)) == len(L.FEATURE_NAMES)
    X = np.stack([x for _, _, x in points])
    varying = [L.FEATURE_NAMES[i] for i in range(X.shape[1]) if np.nanstd(X[:, i]) > 0]
    for name in ("model_log_s", "loops_P", "loops_V", "private_tensors", "dom_fp1", "knob_mr"):
        assert name in varying


def test_spearman():
    assert L.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert L.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert L.spearman([1, 2], [1, 2]) is None and L.spearman([1, 1, 1], [1, 2, 3]) is None


def test_records_and_booster_persist_per_target_and_warm_start(tmp_path, points):
    d = str(tmp_path / "tuner")
    m = L.CostModel("target-a", d, seed=0)
    assert m.warm == 0 and not m.trained
    for fp, res, x in points[:20]:
        m.add("mm", fp, x, synthetic_ms(res))
    assert m.fit() and os.path.exists(m.model_path)
    assert f"v{L.FEATURE_VERSION}" in os.path.basename(m.model_path)
    m.close()
    # the same target starts from those records; another target does not see them
    warm = L.CostModel("target-a", d, seed=0)
    assert warm.warm == 20 and warm.trained
    assert L.CostModel("target-b", d, seed=0).warm == 0
    # a search pinned to the records that existed when it started sees the same warm data on resume
    pinned = L.CostModel("target-a", d, seed=0, warm_until=warm.warm_until)
    for fp, res, x in points[20:30]:
        warm.add("mm", fp, x, synthetic_ms(res))
    again = L.CostModel("target-a", d, seed=0, warm_until=pinned.warm_until)
    assert again.warm == pinned.warm == 20 and L.CostModel("target-a", d, seed=0).warm == 30
    # held-out predictions count only once a model was trained
    cold = L.CostModel("target-c", None)
    cold.record_heldout("mm", 1.0, 2.0)
    assert cold.heldout == [] and cold.stats()["heldout_spearman"] is None


def test_dataset_records_become_model_records(tmp_path):
    from leirc.search.space import Space

    p = Program.from_text(MATMUL)
    o2 = Space("llvm").realize(p, Space("llvm").o2_point())
    from leirc.lang.printer import PRETTY, print_kernel

    lines = [json.dumps({"original": {"leir": MATMUL}, "transformed": {"leir": print_kernel(o2.kernel, PRETTY)},
                         "timing": {"original_ms": 4.0, "transformed_ms": 1.0},
                         "node": {"target_fingerprint": "here"}}),
             json.dumps({"original": {"leir": MATMUL}, "transformed": {"leir": MATMUL},
                         "timing": {"original_ms": 4.0, "transformed_ms": 4.0},
                         "node": {"target_fingerprint": "elsewhere"}}),
             "not json"]
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(lines) + "\n")
    recs = L.records_from_dataset(str(path), target_fp="here")
    assert [(r[1], r[3]) for r in recs] == [(p.fingerprint, 4.0), (o2.fingerprint, 1.0)]
    assert len({r[0] for r in recs}) == 1 and len(L.records_from_dataset(str(path))) == 4
    m = L.CostModel("here", str(tmp_path / "tuner"))
    assert m.import_records(recs, source="dataset") == 2 and m.import_records(recs, source="dataset") == 0
    m.close()
    assert L.CostModel("here", str(tmp_path / "tuner")).warm == 2  # persisted: the next search starts from them
