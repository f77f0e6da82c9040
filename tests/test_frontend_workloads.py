"""Every workload of the suite (benchmarks/workloads/*.py) imports, checks clean and
verifies against the PyTorch module on three input seeds (reference interpreter)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from leirc.frontend import import_model, verify_against_torch  # noqa: E402
from leirc.lang.checker import check_text  # noqa: E402

WORKLOADS = sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "workloads").glob("*.py"))


def test_suite_size():
    assert len(WORKLOADS) >= 30


@pytest.mark.parametrize("path", WORKLOADS, ids=[p.stem for p in WORKLOADS])
def test_workload_imports_checks_and_verifies(path):
    res = import_model(str(path))
    cf = check_text(res.text, path.name)
    errors = [d for d in cf.diagnostics if d.is_error]
    assert not errors, errors
    k = cf.results[0].kernel
    assert k.name == "model"
    # weights: exactly the parameter inputs, keyed by their LEIR names, with matching shapes
    params = {p.name: p for p in k.inputs if p.name in res.weights}
    assert set(params) == set(res.weights)
    for name, arr in res.weights.items():
        assert tuple(arr.shape) == tuple(params[name].shape)
    v = verify_against_torch(str(path), res.text, res.weights, seeds=(0, 1, 2))
    assert v.ok, v.summary()
