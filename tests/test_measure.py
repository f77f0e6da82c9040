"""The measurement module and the Candidate door: one build serves verification, timing and
an interleaved comparison; interleaving alternates the order; a busy machine is said."""

from __future__ import annotations

import numpy as np
import pytest

from leirc.measure import Paired, busy_warning, interleave, spread_of

RELU = r"""
\kernel relu(X: f32[64, 128]) -> (Y: f32[64, 128]) {
  L^{64}_{i=0} L^{128}_{j=0} [
    Y^{f32,g}_{i,j} = max(X^{f32,g}_{i,j}, 0.0);
  ];
}
"""

RELU_V = RELU.replace("L^{128}_{j=0}", "V^{32}_{jv=0}").replace("L^{64}_{i=0}", "L^{64}_{i=0} L^{4}_{jo=0}") \
    .replace("_{i,j}", "_{i,jo*32+jv}")


def test_interleave_alternates_the_order_and_takes_the_ratio_of_round_medians():
    calls = []

    def timer(name, ms):
        def one():
            calls.append(name)
            return [ms, ms * 1.01]
        return one

    p = interleave(timer("a", 2.0), timer("b", 1.0), rounds=4)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert p.rounds == 4 and p.ratio == pytest.approx(0.5) and p.speedup == pytest.approx(2.0)
    assert p.quotient_is_consistent() and not p.within_noise()
    assert Paired.from_json(p.to_json()) == p
    assert interleave(timer("a", 1.0), lambda: None, rounds=3) is None


def test_spread_and_busy_warning():
    med, sp = spread_of([1.0, 1.0, 1.0, 1.0])
    assert med == 1.0 and sp == 0.0
    med, sp = spread_of([1.0, 2.0, 1.0, 2.0, 1.5])
    assert med == 1.5 and sp > 0.1
    assert busy_warning(0.3) is None
    w = busy_warning(3.2)
    assert w is not None and "3.20" in w


def test_a_candidate_is_built_once_for_verify_time_and_paired(tmp_path):
    from leirc.engine.evaluate import Evaluator
    from leirc.engine.program import Program

    with Evaluator("llvm", seeds=(0,), dists=("uniform",), time=True, repeat=2, warmup=1, min_repeat_ms=1.0,
                   prestart=False) as ev:
        with ev.open(Program.from_text(RELU)) as a, ev.open(RELU_V) as b:
            va = a.verify()
            vb = b.verify(numerics="bitwise")
            assert va.ok and vb.ok and va.target == ev.target_fingerprint
            ta = a.time()
            assert ta.ok and ta.median_ms > 0
            p = a.paired(b, rounds=2)
            assert p is not None and p.rounds == 2 and p.ratio > 0
        assert ev.stats["builds"] == 2 and ev.stats["sessions"] == 2
        with pytest.raises(ValueError):
            ev.open("\\kernel broken(")
    # a wrong candidate against the right reference is a mismatch, from the same door
    wrong = RELU.replace("0.0);", "0.5);")
    with Evaluator("llvm", seeds=(0,), dists=("uniform",), time=False, prestart=False) as ev:
        from leirc.engine.oracles import InterpreterOracle

        with ev.open(wrong) as c:
            bad = c.verify(InterpreterOracle(RELU))
    assert not bad.ok and bad.error_kind == "mismatch"
    assert np.isfinite(bad.verify.max_abs_err)
