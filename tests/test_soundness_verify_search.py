"""Issue #30, item 2 on the search side: a model-written program is accepted only with
``--allow-approximate``, faces every probe, and the search's outputs label each step
proven or tested, with the runs the best candidate passed.

The model is the scripted OpenAI-compatible server over real HTTP; the search is the real
one (LLVM builds in sandboxed workers)."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("openai")

from leirc.engine.program import Program
from leirc.llm import LLMClient, LLMConfig
from leirc.search.core import Node, Search, SearchOptions
from leirc.search.llm_proposers import StepTPProposer
from leirc.search.memory import Memory
from leirc.search.proposers import MenuProposer
from leirc.search.report import evidence_line, evidence_of, write_outputs
from leirc.strategies import Step
from leirc.verify import verify
from llm_server import llm_server, ok  # noqa: F401

SOFTMAX = ("\\kernel softmax(X: f32[8, 64]) -> (Y: f32[8, 64]) {\n"
           "  L^{8}_{i=0} L^{64}_{j=0} [ Rmax^{f32,g}_{i} = max(Rmax^{f32,g}_{i}, X^{f32,g}_{i,j}); ];\n"
           "  L^{8}_{i=0} L^{64}_{j=0} [ Rsum^{f32,g}_{i} = Rsum^{f32,g}_{i} + exp(X^{f32,g}_{i,j} - "
           "Rmax^{f32,g}_{i}); ];\n"
           "  L^{8}_{i=0} L^{64}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j} - Rmax^{f32,g}_{i})/"
           "Rsum^{f32,g}_{i}; ];\n}\n")
# one pass fewer, and NaN once exp(x) overflows (logits ~ 100): what a model might propose
NO_SHIFT = ("\\kernel softmax(X: f32[8, 64]) -> (Y: f32[8, 64]) {\n"
            "  L^{8}_{i=0} L^{64}_{j=0} [ Rsum^{f32,g}_{i} = Rsum^{f32,g}_{i} + exp(X^{f32,g}_{i,j}); ];\n"
            "  L^{8}_{i=0} L^{64}_{j=0} [ Y^{f32,g}_{i,j} = exp(X^{f32,g}_{i,j})/Rsum^{f32,g}_{i}; ];\n}\n")
PAR = {"strategy": "loop_parallelization", "args": {"loop": "N0.i"}, "rationale": "two cores"}


def proposer(server, allow: bool) -> StepTPProposer:
    c = LLMClient(LLMConfig(base_url=server.url, models=("m",), timeout=5.0, max_retries=0),
                  backoff_base=0.01, backoff_cap=0.02)
    return StepTPProposer(c, MenuProposer("llvm", allow_approximate=allow))


@pytest.fixture
def root():
    p = Program.from_text(SOFTMAX)
    return Node(0, p, None, None, (), (), "bitwise", p)


def test_a_model_program_needs_allow_approximate(llm_server, root):
    answer = json.dumps({"answers": [{"leir": NO_SHIFT, "rationale": "one pass fewer"}, PAR]})
    strict = proposer(llm_server, allow=False)
    llm_server.push(ok(answer))
    got = strict.propose(root, 2, random.Random(0))
    assert [p.step.name for p in got] == ["loop_parallelization"]
    assert strict.stats()["rejected"] == {"approximate_not_allowed": 1}
    loose = proposer(llm_server, allow=True)
    llm_server.push(ok(answer))
    got = loose.propose(root, 2, random.Random(0))
    assert [p.step.name for p in got] == ["program_rewrite", "loop_parallelization"]


def test_a_model_softmax_without_the_max_shift_is_rejected_by_the_probes(root):
    rw = root.program.apply(Step.make("program_rewrite", leir=NO_SHIFT))
    assert rw.numerics == "approximate"
    # before issue #30 an approximate candidate ran the grid only, where it is EQUAL
    assert verify(rw.program.print(), SOFTMAX, target="interp", probes=()).equal
    rep = verify(rw.program.print(), SOFTMAX, target="interp", numerics=rw.numerics)
    assert not rep.equal and rep.evidence == "tested"
    assert any("logits" in f and "NaN/Inf" in f for f in rep.failures), rep.failures


@pytest.mark.slow
def test_a_search_rejects_the_model_program_and_labels_the_steps(llm_server, tmp_path):
    llm_server.responder = lambda req: ok(json.dumps({"answers": [{"leir": NO_SHIFT, "rationale": "one pass"},
                                                                  PAR]}))
    cfg = LLMConfig(base_url=llm_server.url, models=("m",), timeout=5.0, max_retries=0, cache=None)
    # the search's grid is two seeds x (uniform, signed) with no probes: the model's program
    # meets the probes all the same, because it is only tested
    opts = SearchOptions(algo="greedy", budget=2, proposers=("llm",), llm=cfg, branch=2, memory=None,
                         cache_dir=None, threads=1, tile_variants=1, allow_approximate=True)
    res = Search(Program.from_text(SOFTMAX), opts, memory=Memory(None)).run()
    tried = {str(n.step).split("(")[0]: n for n in res.nodes if n.step is not None and n.evaluation is not None}
    model = tried["program_rewrite"]
    assert not model.ok and model.evaluation.error_kind == "mismatch"
    rep = model.evaluation.verify
    assert rep.evidence == "tested" and "logits" in rep.probes
    assert not any(s.name == "program_rewrite" for s in res.steps)
    ev = evidence_of(res)
    if res.best is res.root:  # nothing beat the input beyond the noise: no step to label
        assert ev["label"] == "proven" and ev["steps"] == []
    else:
        assert ev["label"] == "proven" and [s["evidence"] for s in ev["steps"]] == ["proven"]
        assert ev["verified_on"].startswith("seeds ")
        assert evidence_line(res).startswith("  verification: PROVEN")
    paths = write_outputs(res, str(tmp_path), "softmax")
    summary = json.loads(open(paths["json"]).read())
    assert summary["evidence"]["label"] == ev["label"]
    trace = json.loads(open(paths["trace"]).read())["search"]
    assert trace["evidence"] == ev["label"] and len(trace["steps_evidence"]) == len(res.steps)
    html = open(paths["html"]).read()
    assert f"Verification: <b>{ev['label']}</b>" in html
