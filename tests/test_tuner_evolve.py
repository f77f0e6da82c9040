"""`--algo evolve` (leirc.search.evolve) with an injected, synthetic cost: it finds a schedule
that lies outside -O2's defaults by construction within a small budget, always measures -O1 and
-O2 (so it never ends slower than either), reports the model's held-out rank correlation, is
deterministic, resumes without measuring again, and its traces replay.

The evaluator here has the interface of the search's evaluator (``evaluate_batch``) and times a
candidate by a function of its program, so the tests do not depend on the machine's speed; real
builds, verification and timing of search candidates are tested in test_search_real.py."""

from __future__ import annotations

from leirc.engine.evaluate import Evaluation
from leirc.engine.program import Program
from leirc.lang import ast as A
from leirc.lower.runner import TimingResult
from leirc.opt.o2 import default_tiles
from leirc.search.constants import ALGORITHMS
from leirc.search.core import ALGORITHM_TABLE, Search, SearchOptions
from leirc.search.learned import records_from_state
from leirc.search.store import SearchStore

MATMUL = r"""\kernel mm(A: f32[128, 96], B: f32[96, 64]) -> (C: f32[128, 64]) {
  L^{128}_{i=0} L^{64}_{j=0} L^{96}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
}"""
LANES = default_tiles("llvm").lanes


def tile_of(p: Program):
    return next((t.shape for t in p.result.tensors.values() if t.private and t.shape and len(t.shape) == 2), None)


def outside_defaults_ms(p: Program) -> float:
    """Fastest with a 16-row tile one vector wide (-O2's default is 8 or 4 rows, two vectors),
    then any register tile; parallel and vector loops help everywhere."""
    loops = [n.kind for n in A.walk(p.kernel) if isinstance(n, A.Loop)]
    ms = 10.0 + 3.0 * ("P" not in loops) + 2.0 * ("V" not in loops)
    tile = tile_of(p)
    if tile is not None:
        ms -= 5.0 - 0.4 * abs(tile[0] - 16) / 4 - 1.0 * (tile[1] != LANES)
    return ms


def blocking_hurts_ms(p: Program) -> float:
    """-O2's register tile is slow here and -O1's order fast (as on the depthwise convolutions
    where -O2 was 3-13x slower than -O1)."""
    loops = [n.kind for n in A.walk(p.kernel) if isinstance(n, A.Loop)]
    return 10.0 - 4.0 * ("P" in loops) - 2.0 * ("V" in loops) + 8.0 * (tile_of(p) is not None)


class Synthetic:
    """An evaluator-like object: ``evaluate_batch`` times a candidate by ``cost(program)``."""

    workers = 1

    def __init__(self, cost):
        self.cost = cost
        self.calls: list[str] = []

    def evaluate_batch(self, items):
        out = []
        for text, _numerics in items:
            p = Program.from_text(text)
            self.calls.append(p.fingerprint)
            ms = self.cost(p)
            out.append(Evaluation(p.fingerprint, True, None, None,
                                  TimingResult(True, median_ms=ms, std_ms=0.0, runs=[ms] * 5), 0.0, 0.0))
        return out

    def close(self):
        pass


def run(cost, budget=20, **kw):
    ev = Synthetic(cost)
    opts = SearchOptions(algo="evolve", budget=budget, proposers=("menu",), seed=kw.pop("seed", 0), **kw)
    res = Search(Program.from_text(MATMUL), opts, evaluator=ev, progress=False).run()
    return res, ev


def pipeline_node(res, source):
    return next(n for n in res.nodes if n.evaluation is not None and getattr(n.proposal, "source", None) == source)


def test_evolve_finds_a_schedule_outside_o2s_defaults():
    res, ev = run(outside_defaults_ms, budget=24)
    assert res.evaluations <= 24 and len(set(ev.calls)) == len(ev.calls)  # nothing measured twice
    o1, o2 = pipeline_node(res, "o1"), pipeline_node(res, "o2")
    assert tile_of(o2.program) != (16, LANES)  # -O2's default is not the answer
    assert tile_of(res.best.program) == (16, LANES)
    assert res.best.ms < o2.ms and res.best.ms <= o1.ms
    # the trace of the found point replays to it
    p = res.root.program
    for st in res.steps:
        p = p.apply(st).program
    assert p.fingerprint == res.best.fingerprint
    model = res.to_json()["model"]
    assert model["kind"] == "lightgbm-lambdarank" and model["records"] == sum(1 for n in res.nodes if n.ok) - 1
    assert model["heldout_n"] > 0 and model["heldout_spearman"] is not None


def test_evolve_never_ends_slower_than_o1_when_blocking_hurts():
    res, _ = run(blocking_hurts_ms, budget=8)
    o1, o2 = pipeline_node(res, "o1"), pipeline_node(res, "o2")
    assert o1.ms < o2.ms
    assert res.best.ms <= o1.ms and tile_of(res.best.program) is None


def test_evolve_is_deterministic_and_resumes_without_measuring_again(tmp_path):
    a, _ = run(outside_defaults_ms, budget=8, seed=3)
    b, _ = run(outside_defaults_ms, budget=8, seed=3)
    trail = lambda r: [n.fingerprint for n in r.nodes if n.evaluation is not None]  # noqa: E731
    assert trail(a) == trail(b)
    state = str(tmp_path / "s.sqlite")
    store = SearchStore(state)
    opts = SearchOptions(algo="evolve", budget=8, proposers=("menu",), seed=3, state=state)
    store.start(opts.config(), resume=False)
    first = Search(Program.from_text(MATMUL), opts, evaluator=Synthetic(outside_defaults_ms), store=store,
                   progress=False).run()
    store.close()
    # the model's records went next to the state; a resume sees the same warm data and replays
    assert (tmp_path / "tuner" / "tuner.sqlite").exists()
    store = SearchStore(state)
    store.start(opts.config(), resume=True)
    ev = Synthetic(outside_defaults_ms)
    again = Search(Program.from_text(MATMUL), opts, evaluator=ev, store=store, progress=False).run()
    store.close()
    assert again.fresh == 0 and ev.calls == [] and trail(again) == trail(first)
    assert again.best.fingerprint == first.best.fingerprint
    # the state's measurements are records for another model's warm start (any algorithm's state)
    recs = records_from_state(state, Program.from_text(MATMUL))
    assert sorted(r[1] for r in recs) == sorted(n.fingerprint for n in first.nodes if n.ok)
    assert all(r[3] == outside_defaults_ms(Program.from_text(MATMUL)) or r[3] > 0 for r in recs)


def test_the_algorithm_table_is_the_clis_list():
    assert tuple(ALGORITHM_TABLE) == ALGORITHMS


class Pairing(Synthetic):
    """A Synthetic evaluator that also re-times two programs side by side (no noise)."""

    def __init__(self, cost):
        super().__init__(cost)
        self.pairs = 0

    def paired(self, text_a, text_b, rounds):
        from leirc.measure import Paired

        self.pairs += 1
        a, b = self.cost(Program.from_text(text_a)), self.cost(Program.from_text(text_b))
        return Paired(b / a, 0.0, (b / a,) * rounds, a, b, rounds)


def test_only_candidates_that_could_beat_the_best_are_re_timed():
    ev = Pairing(outside_defaults_ms)
    opts = SearchOptions(algo="evolve", budget=16, proposers=("menu",), seed=0)
    res = Search(Program.from_text(MATMUL), opts, evaluator=ev, progress=False).run()
    judged = [n for n in res.nodes if n.evaluation is not None and n.parent is not None]
    # every candidate beats the input (-O0), but only those within min_gain of the best so far are re-timed
    assert all(n.ms < res.root.ms for n in judged if n.ok)
    assert sum(n.pair is not None for n in judged) < len(judged)
    assert ev.pairs == sum(n.pair is not None for n in judged) + (res.confirmation is not None)
    assert tile_of(res.best.program) is not None and res.best.ms <= min(n.ms for n in judged if n.ok)
