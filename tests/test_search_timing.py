"""Trustworthy speedups: a child that only *looks* faster in its one timing is re-timed next to
its parent before it is accepted, the final best is confirmed against the root by an
interleaved re-timing (whose ratio is the reported speedup), verdicts replay on resume,
and timings of another process are measured again before a new child is compared with them.

The timings are scripted (``ScriptedEvaluator``): what is tested is the search's decisions
given what the machine measured; ``test_search_real.py`` runs the same paths on real
builds."""

from __future__ import annotations

import pytest

from leirc.engine.evaluate import Evaluation
from leirc.engine.program import Program
from leirc.lower.runner import TimingResult
from leirc.search.core import Search, SearchOptions
from leirc.search.evaluate import CONFIRM_ROUNDS, PAIR_ROUNDS, Paired, paired_from_rounds
from leirc.search.store import SearchStore

MATMUL = r"""\kernel mm(A: f32[128, 96], B: f32[96, 64]) -> (C: f32[128, 64]) {
  L^{128}_{i=0} L^{64}_{j=0} L^{96}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
}"""
STRATEGIES = ("loop_parallelization", "loop_reorder", "loop_split", "loop_vectorization", "loop_unrolling")


def fp(text: str) -> str:
    return Program.from_text(text).fingerprint


class ScriptedEvaluator:
    """``screen(text) -> ms`` is the one timing of an evaluation; ``truth(text) -> ms`` what an
    interleaved re-timing finds (with ``jitter``: relative noise per round, alternating
    sign)."""

    workers = 1

    def __init__(self, screen, truth, jitter=0.0):
        self.screen, self.truth, self.jitter = screen, truth, jitter
        self.evaluated: list[str] = []
        self.pairs: list[tuple[str, str, int]] = []
        self.retimed: list[str] = []

    def evaluate_batch(self, items):
        out = []
        for text, _ in items:
            self.evaluated.append(fp(text))
            ms = self.screen(text)
            out.append(Evaluation(fp(text), True, None, None, TimingResult(True, median_ms=ms, std_ms=0.0,
                                                                          runs=[ms] * 5), 0.0, 0.0))
        return out

    def paired(self, a, b, rounds):
        self.pairs.append((fp(a), fp(b), rounds))
        ta, tb = self.truth(a), self.truth(b)
        a_runs = [[ta * (1 + (self.jitter if r % 2 else -self.jitter))] * 3 for r in range(rounds)]
        b_runs = [[tb * (1 + (-self.jitter if r % 2 else self.jitter))] * 3 for r in range(rounds)]
        return paired_from_rounds(a_runs, b_runs)

    def retime(self, text):
        self.retimed.append(fp(text))
        ms = self.truth(text)
        return TimingResult(True, median_ms=ms, std_ms=0.0, runs=[ms] * 5)

    def close(self):
        pass


def run(ev, **kw):
    store = kw.pop("store", None)
    opts = SearchOptions(**{"algo": "greedy", "budget": 4, "branch": 2, "proposers": ("menu",),
                            "strategies": STRATEGIES, "grid": 2, "patience": 4, **kw})
    return Search(Program.from_text(MATMUL), opts, evaluator=ev, store=store, progress=False).run()


def is_root(text):
    return fp(text) == fp(MATMUL)


def test_paired_ratio_and_spread():
    p = paired_from_rounds([[2.0, 2.1], [2.0], [2.2], [2.0]], [[1.0], [1.0], [1.1], [3.0]])
    assert p.ratios == pytest.approx((0.5 / 1.025, 0.5, 0.5, 1.5))
    assert p.ratio == pytest.approx(0.5) and p.rounds == 4
    # the printed speedup is the quotient of the two printed times (#29), not 1 / the median ratio
    assert p.a_ms == pytest.approx(2.025) and p.b_ms == pytest.approx(1.05)
    assert p.speedup == pytest.approx(2.025 / 1.05) and p.quotient_is_consistent()
    assert 0 < p.spread < 0.1  # one disturbed round does not make the comparison noise
    assert p.beats(0.03) and not paired_from_rounds([[1.0]] * 4, [[0.99]] * 4).beats(0.03)
    back = Paired.from_json(p.to_json())
    assert back == p and back.merged(back).rounds == 8 and back.merged(back).ratio == pytest.approx(p.ratio)


def test_a_child_that_only_looks_faster_is_not_accepted():
    # the one timing of every child says x2 (the root's timing was disturbed); interleaved
    # with the root, they are all as fast as the root
    ev = ScriptedEvaluator(screen=lambda t: 2.0 if is_root(t) else 1.0, truth=lambda t: 1.0)
    res = run(ev)
    assert ev.pairs and all(a == fp(MATMUL) for a, _, _ in ev.pairs)
    assert res.best is res.root and res.speedup == 1.0 and res.confirmation is None
    judged = [n for n in res.nodes if n.accepted is not None]
    assert judged and not any(n.accepted for n in judged)


def test_the_reported_speedup_is_the_confirmed_interleaved_ratio():
    # parallel children are really 2.5x faster; their one timing said 10x
    par = lambda t: "P^" in t  # noqa: E731
    ev = ScriptedEvaluator(screen=lambda t: 0.1 if par(t) else 1.0, truth=lambda t: 0.4 if par(t) else 1.0,
                           jitter=0.01)
    res = run(ev)
    assert res.best is not res.root and "P^" in res.best.text()
    assert res.confirmation is not None and res.confirmation.rounds == CONFIRM_ROUNDS
    assert (res.confirmation and ev.pairs[-1][:2] == (fp(MATMUL), res.best.fingerprint))
    assert res.speedup == pytest.approx(2.5, rel=0.03) and res.speedup_spread is not None
    assert res.root_ms == pytest.approx(1.0, rel=0.02) and res.best_ms == pytest.approx(0.4, rel=0.02)
    d = res.to_json()
    assert d["confirmation"]["rounds"] == CONFIRM_ROUNDS and d["speedup"] == pytest.approx(res.speedup)
    assert any(c["paired"] for c in d["candidates"])
    assert "interleaved" in "\n".join(res.table())


def test_a_best_that_the_confirmation_does_not_bear_out_is_not_reported():
    # accepted against its parent, but the root timed next to the best is as fast
    calls = {"n": 0}

    def truth(t):
        return 1.0

    ev = ScriptedEvaluator(screen=lambda t: 1.0 if is_root(t) else 0.5, truth=truth)
    orig = ev.paired

    def paired(a, b, rounds):  # the first comparisons see a gain, the confirmation none
        calls["n"] += 1
        if rounds == CONFIRM_ROUNDS:
            return orig(a, b, rounds)
        return paired_from_rounds([[1.0]] * rounds, [[0.5]] * rounds)

    ev.paired = paired
    res = run(ev, budget=2)
    assert res.candidate is not None and res.candidate is not res.root
    assert res.best is res.root and res.speedup == 1.0
    assert res.confirmation is not None and res.confirmation.ratio == pytest.approx(1.0)
    assert "not confirmed" in "\n".join(res.table())


def test_a_noisy_gain_gets_more_rounds_before_the_verdict():
    ev = ScriptedEvaluator(screen=lambda t: 1.0 if is_root(t) else 0.8, truth=lambda t: 1.0 if is_root(t) else 0.9,
                           jitter=0.08)
    res = run(ev, budget=1)
    first = [p for p in ev.pairs if p[2] == PAIR_ROUNDS]
    assert len(first) == 2  # the rounds within the noise, then as many more
    child = next(n for n in res.nodes if n.pair is not None)
    assert child.pair.rounds == 2 * PAIR_ROUNDS


def test_resume_replays_verdicts_and_retimes_a_replayed_parent_before_a_new_child(tmp_path):
    path = str(tmp_path / "s.sqlite")
    par = lambda t: "P^" in t  # noqa: E731
    screen = lambda t: 0.4 if par(t) else 1.0  # noqa: E731
    opts = dict(algo="greedy", budget=2, branch=2, proposers=("menu",), strategies=STRATEGIES, grid=2, patience=4)
    config = SearchOptions(**opts).config()
    st = SearchStore(path)
    st.start(config, resume=False)
    ev1 = ScriptedEvaluator(screen, truth=screen)
    first = run(ev1, store=st, budget=2)
    assert ev1.pairs
    st2 = SearchStore(path)
    st2.start(config, resume=True)
    ev2 = ScriptedEvaluator(screen, truth=screen)
    again = run(ev2, store=st2, budget=4)
    assert not set(ev2.evaluated) & set(ev1.evaluated)
    replayed_pairs = [(a, b) for a, b, r in ev1.pairs if r == PAIR_ROUNDS]
    # verdicts came from the state (the final confirmation is measured again: it ends this run)
    assert not [p for p in ev2.pairs if (p[0], p[1]) in replayed_pairs and p[2] == PAIR_ROUNDS]
    fresh_children = [n for n in again.nodes if n.evaluation is not None and not n.replayed and n.base]
    assert fresh_children and any(n.base.replayed for n in fresh_children)
    # their parents, timed by the first process, were timed again before the comparison
    assert {n.base.fingerprint for n in fresh_children if n.base.replayed} <= set(ev2.retimed)
    assert [n.accepted for n in again.nodes[:len(first.nodes)] if n.evaluation is not None][:3] == \
        [n.accepted for n in first.nodes if n.evaluation is not None][:3]
