"""The Evaluator: one session per candidate, cached reference outputs, content-addressed cache."""

from __future__ import annotations

import json

import numpy as np
import pytest

import leirc.lower.session as session_mod
from leirc.engine import CachedReference, Evaluation, Evaluator
from leirc.lang.canonical import fingerprint
from leirc.lang.checker import check_text
from leirc.verify import verify

ROWSUM = r"""\kernel rowsum(A: f32[16, 8]) -> (Y: f32[16]) {
  L^{16}_{i=0} L^{8}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}"""
# the same computation with the loops interchanged: a legal candidate of ROWSUM
ROWSUM_JI = r"""\kernel rowsum(A: f32[16, 8]) -> (Y: f32[16]) {
  L^{8}_{j=0} L^{16}_{i=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}"""
WRONG = ROWSUM.replace("A^{f32,g}_{i,j};", "A^{f32,g}_{i,j}*1.01;")


def _evaluator(**kw):
    kw.setdefault("seeds", (0, 1))
    kw.setdefault("dists", ("uniform", "normal"))
    kw.setdefault("repeat", 3)
    kw.setdefault("warmup", 1)
    kw.setdefault("min_repeat_ms", 2.0)
    kw.setdefault("threads", 1)
    return Evaluator(**kw)


class _NoSpawn:
    def __init__(self, *a, **k):
        raise AssertionError("a worker was spawned for a cached evaluation")


def test_correct_candidate_is_verified_and_timed():
    ev = _evaluator()
    e = ev.evaluate(ROWSUM_JI, reference=ROWSUM)
    assert isinstance(e, Evaluation)
    assert e.ok and e.error_kind is None and e.error is None, e.error
    assert e.fingerprint == fingerprint(check_text(ROWSUM_JI).results[0].kernel)
    assert e.verify is not None and e.verify.equal and e.verify.runs == 4
    assert e.timing is not None and e.timing.ok and len(e.timing.runs) == 3 and e.timing.threads == 1
    assert e.build_s is not None and e.build_s >= 0 and e.seconds > 0
    assert ev.stats["sessions"] == 1 and ev.stats["builds"] == 1
    d = e.to_json()
    assert json.loads(json.dumps(d)) == d
    assert Evaluation.from_json(d) == e


def test_cache_hit_returns_the_same_evaluation_without_spawning(tmp_path, monkeypatch):
    ev = _evaluator(cache_dir=str(tmp_path / "cache"))
    first = ev.evaluate(ROWSUM_JI, reference=ROWSUM)
    assert first.ok and not first.cached
    monkeypatch.setattr(session_mod.subprocess, "Popen", _NoSpawn)
    again = ev.evaluate(ROWSUM_JI, reference=ROWSUM)
    assert again == first and again.cached
    # a new evaluator (a new process, say) finds it on disk
    ev2 = _evaluator(cache_dir=str(tmp_path / "cache"))
    disk = ev2.evaluate(ROWSUM_JI, reference=ROWSUM)
    assert disk == first and disk.cached
    assert ev2.stats["disk_hits"] == 1 and ev2.stats["sessions"] == 0
    # renaming a loop index gives the same canonical program: the same entry
    renamed = ROWSUM_JI.replace("_{j=0}", "_{jj=0}").replace("_{i,j}", "_{i,jj}")
    assert ev2.evaluate(renamed, reference=ROWSUM) == first
    # another configuration is another key: it must not be served from the cache
    ev3 = _evaluator(cache_dir=str(tmp_path / "cache"), seeds=(5,))
    with pytest.raises(AssertionError, match="spawned"):
        ev3.evaluate(ROWSUM_JI, reference=ROWSUM)


def test_reference_outputs_are_computed_once_for_many_candidates(monkeypatch):
    computed = []
    real = CachedReference._reference_run

    def counting(self, inputs):
        computed.append(self.kernel.name)
        return real(self, inputs)

    monkeypatch.setattr(CachedReference, "_reference_run", counting)
    ev = _evaluator(time=False)
    assert ev.evaluate(ROWSUM_JI, reference=ROWSUM).ok
    assert len(computed) == 4  # 2 seeds x 2 distributions
    e = ev.evaluate(WRONG, reference=ROWSUM)
    assert not e.ok and e.error_kind == "mismatch" and "mismatch" in e.error
    assert len(computed) == 4  # the second candidate reused every reference run
    ref = ev.reference(check_text(ROWSUM).results[0])
    assert ref.misses == 4 and ref.hits >= 4 and ref.cached_runs == 4


def test_cached_reference_matches_plain_verify():
    ref = CachedReference(check_text(ROWSUM).results[0])
    plain = verify(ROWSUM_JI, ROWSUM, target="interp", seeds=(0, 1), dists=("uniform", "signed"))
    cached = verify(ROWSUM_JI, ROWSUM, target="interp", seeds=(0, 1), dists=("uniform", "signed"),
                    reference_cache=ref)
    again = verify(ROWSUM_JI, ROWSUM, target="interp", seeds=(0, 1), dists=("uniform", "signed"),
                   reference_cache=ref)
    for r in (cached, again):
        assert r.equal == plain.equal and r.runs == plain.runs
        assert r.max_abs_err == plain.max_abs_err and r.norm_rel_err == plain.norm_rel_err
    inputs, outs, _ = ref.run(0, "uniform")
    assert not inputs["A"].flags.writeable and not outs["Y"].flags.writeable
    np.testing.assert_allclose(outs["Y"], inputs["A"].sum(axis=1), rtol=1e-5)
    bad = verify(WRONG, ROWSUM, target="interp", seeds=(0,), dists=("uniform",), reference_cache=ref)
    assert not bad.equal


def test_illegal_candidates_are_reported_without_a_session(monkeypatch):
    monkeypatch.setattr(session_mod.subprocess, "Popen", _NoSpawn)
    ev = _evaluator()
    e = ev.evaluate("\\kernel broken(")
    assert not e.ok and e.error_kind == "illegal" and "error[" in e.error
    writes_input = ROWSUM.replace("Y^{f32,g}_{i} = Y^{f32,g}_{i} +", "A^{f32,g}_{i,j} = Y^{f32,g}_{i} +")
    e = ev.evaluate(writes_input)
    assert not e.ok and e.error_kind == "illegal" and "E0" in e.error
    with pytest.raises(ValueError):
        ev.evaluate(ROWSUM, reference="\\kernel nope(")


def test_a_crashing_candidate_is_classified(monkeypatch):
    monkeypatch.setenv("LEIRC_WORKER_TEST_HOOK", "segfault")
    e = _evaluator().evaluate(ROWSUM)
    assert not e.ok and e.error_kind == "crash" and "SIGSEGV" in e.error
    assert e.timing is None and e.verify is not None and not e.verify.equal


def test_timeouts_are_not_cached(monkeypatch, tmp_path):
    ev = _evaluator(cache_dir=str(tmp_path), timeout=4, build_timeout=300, time=False)
    monkeypatch.setenv("LEIRC_WORKER_TEST_HOOK", "hang")
    e = ev.evaluate(ROWSUM)
    assert not e.ok and e.error_kind == "timeout"
    monkeypatch.delenv("LEIRC_WORKER_TEST_HOOK")
    e = ev.evaluate(ROWSUM)
    assert e.ok and not e.cached, e.error
    assert len(ev.cache) == 1


def test_the_oracle_is_recorded_and_reference_and_oracle_exclude_each_other(monkeypatch):
    from leirc.engine.oracles import InterpreterOracle

    monkeypatch.setattr(session_mod.subprocess, "Popen", _NoSpawn)
    with Evaluator("llvm", time=False, prestart=False) as ev:
        e = ev.evaluate("\\kernel broken(A: f32[4]) -> (Y: f32[4]) { Y = ; }")
        assert e.error_kind == "illegal" and e.oracle == "interpreter"
        assert Evaluation.from_json(e.to_json()).oracle == "interpreter"
        with pytest.raises(ValueError, match="either reference= .* or oracle="):
            ev.evaluate(ROWSUM, reference=ROWSUM, oracle=InterpreterOracle())
