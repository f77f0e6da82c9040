"""`--algo evolve` with real builds, verification and timing (sandboxed workers): -O1 and -O2
are built and verified first, every candidate is verified before it is timed, the summary JSON
carries the model's statistics, the model's records land in the cache directory, and the trace
replays. No timing is asserted (the machine may be loaded)."""

from __future__ import annotations

import json
import os

import pytest

from leirc.engine.program import Program
from leirc.lang.checker import check_text
from leirc.search.core import SearchOptions
from leirc.search.optimizer import SearchOptimizer
from leirc.strategies import trace_from_json

ROWSUM = r"""\kernel rowsum(A: f32[128, 512]) -> (Y: f32[128]) {
  L^{128}_{i=0} L^{512}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}"""


@pytest.mark.slow
def test_evolve_verifies_every_candidate_and_reports_its_model(tmp_path):
    opts = SearchOptions(algo="evolve", budget=3, branch=2, tile_variants=1, memory=str(tmp_path / "m.sqlite"),
                         cache_dir=str(tmp_path / "cache"))
    opt = SearchOptimizer(opts, out_dir=str(tmp_path / "out"), progress=False)
    opt.optimize(check_text(ROWSUM).results[0], "llvm")
    res = opt.last
    evaluated = [n for n in res.nodes if n.evaluation is not None and n is not res.root]
    assert 1 <= len(evaluated) <= 3
    sources = [getattr(n.proposal, "source", None) for n in evaluated]
    assert sources[:2] == ["o1", "o2"] or sources[:1] == ["o1"]  # the pipelines first (-O2 may equal -O1 here)
    assert all(n.evaluation.verify is not None and n.evaluation.verify.equal for n in evaluated if n.ok)
    summary = json.load(open(opt.outputs["rowsum"]["json"]))
    assert summary["algo"] == "evolve" and summary["model"]["records"] == sum(1 for n in evaluated if n.ok)
    assert os.path.exists(os.path.join(tmp_path, "cache", "tuner", "tuner.sqlite"))
    p = Program.from_text(ROWSUM)
    for st in trace_from_json(open(opt.outputs["rowsum"]["trace"]).read()):
        p = p.apply(st).program
    assert p.fingerprint == res.best.fingerprint
