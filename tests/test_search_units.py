"""The search's parts without building kernels: cost model, proposers, HTAM memory, schedule
reuse, state store, suggest, and the algorithms' bookkeeping (budget, de-duplication, undo
pairs, determinism) driven by a deterministic *model* timing.

The model timing (``ModelEvaluator``) stands in for measurements only here, where what is
tested is the search's control flow; real builds, verification and timing are in
``test_search_real.py``."""

from __future__ import annotations

import json
import math
import os
import random
import sqlite3

import pytest

from leirc.engine.evaluate import Evaluation
from leirc.engine.program import Program
from leirc.lower.runner import TimingResult
from leirc.search import cost as C
from leirc.search.core import ALGORITHMS, Search, SearchOptions
from leirc.search.directions import direction_of, undoes
from leirc.search.memory import Memory
from leirc.search.proposers import HTAMProposer, MenuProposer, model_evidence
from leirc.search.reuse import adapt, portable, replay_adapted, signature
from leirc.search.store import ConfigMismatch, SearchStore
from leirc.search.suggest import suggest
from leirc.strategies import Step
from same_instant import run_together

MATMUL = r"""\kernel mm(A: f32[128, 96], B: f32[96, 64]) -> (C: f32[128, 64]) {
  L^{128}_{i=0} L^{64}_{j=0} L^{96}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
}"""
MATMUL_BIG = MATMUL.replace("128", "256").replace("96", "192")
ROWSUM = r"""\kernel rowsum(A: f32[256, 1024]) -> (Y: f32[256]) {
  L^{256}_{i=0} L^{1024}_{j=0} [ Y^{f32,g}_{i} = Y^{f32,g}_{i} + A^{f32,g}_{i,j}; ];
}"""


def prog(text: str) -> Program:
    p = Program.from_text(text)
    assert p.ok, p
    return p


class ModelEvaluator:
    """Times a candidate by the cost model (deterministic), counts calls."""

    workers = 1

    def __init__(self, fail=lambda text: False):
        self.calls: list[str] = []
        self.fail = fail

    def evaluate_batch(self, items):
        out = []
        for text, _numerics in items:
            p = prog(text)
            self.calls.append(p.fingerprint)
            if self.fail(text):
                out.append(Evaluation(p.fingerprint, False, "crash", None, None, None, 0.0, "worker died"))
                continue
            ms = C.estimate(p).seconds * 1e3
            out.append(Evaluation(p.fingerprint, True, None, None,
                                  TimingResult(True, median_ms=ms, std_ms=0.0, runs=[ms] * 5), 0.0, 0.0))
        return out

    def close(self):
        pass


#: a small menu keeps these tests fast (the whole menu is exercised by the proposer tests)
LOOP_STRATEGIES = ("loop_parallelization", "loop_reorder", "loop_split", "loop_vectorization", "loop_unrolling",
                   "loop_fusion", "loop_tiling")


def run(text=MATMUL, **kw):
    ev = kw.pop("evaluator", None) or ModelEvaluator()
    memory = kw.pop("memory", None)
    store = kw.pop("store", None)
    opts = SearchOptions(**{"budget": 8, "proposers": ("menu",), "strategies": LOOP_STRATEGIES, "grid": 3, **kw})
    res = Search(prog(text), opts, evaluator=ev, memory=memory, store=store, progress=False).run()
    return res, ev


# -- cost model -------------------------------------------------------------------------

def test_cost_model_prefers_unit_stride_parallel_and_vector_code():
    p = prog(MATMUL)
    base = C.estimate(p)
    ikj = p.apply(Step.make("loop_reorder", loop="N0.i", order="i,k,j")).program
    assert C.estimate(ikj).seconds < base.seconds and C.estimate(ikj).lanes > base.lanes
    big = prog(MATMUL.replace("128", "1024").replace("96", "1024").replace("64", "1024"))
    big_ikj = big.apply(Step.make("loop_reorder", loop="N0.i", order="i,k,j")).program
    assert C.estimate(big_ikj).bytes < C.estimate(big).bytes / 4  # B read along rows, not columns
    par = p.apply(Step.make("loop_parallelization", loop="N0.i")).program
    assert C.estimate(par).seconds < base.seconds and C.estimate(par).parallel == 2
    split = ikj.apply(Step.make("loop_split", loop="N0.j", factor=8))
    vec = split.program.apply(Step.make("loop_vectorization", loop=split.created["inner"])).program
    assert C.estimate(vec).lanes > C.estimate(ikj).lanes
    fb = C.measured_feedback(base, 2.0)
    assert fb["gops"] == pytest.approx(base.ops / 2e-3 / 1e9) and 0 < fb["compute_util"]


def test_directions_and_undo_pairs():
    assert direction_of("loop_parallelization") == "parallelism"
    assert direction_of("loop_binding") == "gpu_mapping"
    assert undoes("loop_split", "loop_fusion") and undoes("operator_fission", "operator_fusion")
    assert not undoes("loop_split", "loop_split") and not undoes(None, "loop_fusion")


# -- proposers --------------------------------------------------------------------------

class _N:
    def __init__(self, p, steps=(), directions=()):
        self.program, self.steps, self.directions, self.root_program = p, tuple(steps), tuple(directions), p


def test_menu_proposals_are_legal_ranked_and_never_undo_the_last_step():
    p = prog(MATMUL)
    menu = MenuProposer()
    props = menu.propose(_N(p), 10, random.Random(0))
    assert len(props) == 10
    assert [x.prior for x in props] == sorted((x.prior for x in props), reverse=True)
    for x in props:
        assert p.apply(x.step).program.fingerprint != p.fingerprint
        assert x.rationale.startswith("cost model:")
    assert not any(x.step.name == "loop_binding" for x in menu.menu(p))  # no GPU mapping on a CPU
    split = p.apply(Step.make("loop_split", loop="N0.j", factor=8)).program
    after = menu.propose(_N(split, [Step.make("loop_split", loop="N0.j", factor=8)]), 200, random.Random(0))
    assert after and not any(x.step.name == "loop_fusion" for x in after)


def test_menu_dropout_is_seeded():
    p = prog(MATMUL)
    menu = MenuProposer(keep=0.3)
    a = [str(x.step) for x in menu.propose(_N(p), 50, random.Random(7))]
    b = [str(x.step) for x in menu.propose(_N(p), 50, random.Random(7))]
    c = [str(x.step) for x in menu.propose(_N(p), 50, random.Random(8))]
    full = MenuProposer().propose(_N(p), 500, random.Random(0))
    assert a == b and a != c and len(a) < len(full)


def test_htam_proposer_follows_the_memory():
    p = prog(MATMUL)
    mem = Memory(None)
    for _ in range(6):  # locality paid off after the start, parallelism failed
        mem.record([], "loop_reorder", 1.0)
        mem.record([], "loop_parallelization", None)
    pol = mem.policy([], temperature=0.3)
    assert pol["locality"] > pol["parallelism"]
    props = HTAMProposer(mem, MenuProposer(), temperature=0.05).propose(_N(p), 3, random.Random(0))
    assert props[0].direction == "locality" and "HTAM" in props[0].rationale


def test_a_cold_htam_memory_starts_where_the_model_sees_most():
    p = prog(MATMUL)
    menu = MenuProposer()
    best = menu.propose(_N(p), 1, random.Random(0))[0]
    mem = Memory(None)
    items = menu.menu(p)
    by_dir = {}
    for m in items:
        by_dir.setdefault(m.direction, []).append(m)
    ev = model_evidence(by_dir)
    assert ev[best.direction] == pytest.approx(math.log(best.prior)) and max(ev.values()) == ev[best.direction]
    cold, informed = mem.direction_scores([]), mem.direction_scores([], evidence=ev)
    assert all(informed[d] - cold[d] == pytest.approx(ev.get(d, 0.0)) for d in cold)
    # the model's best step is among a cold HTAM's proposals, next to another direction's
    props = HTAMProposer(mem, menu, temperature=0.05).propose(_N(p), 4, random.Random(0))
    assert props[0].step == best.step
    assert len({q.direction for q in props}) >= 2


# -- memory -----------------------------------------------------------------------------

def test_memory_persists_adds_up_across_processes_and_exports(tmp_path):
    path = str(tmp_path / "m.sqlite")
    a, b = Memory(path), Memory(path)
    a.record(["parallelism"], "loop_reorder", 0.5)
    b.record(["parallelism"], "loop_reorder", -0.1)
    b.record([], "loop_split", None)
    c = Memory(path)
    s = c.local["loop_reorder"][1]
    assert s.tries == 2 and s.good == 1 and s.bad == 1 and s.gain == pytest.approx(0.4)
    assert c.edges[("parallelism", "locality")].tries == 2
    assert c.directions["tiling"].bad == 1
    exported = c.export()
    c.reset()
    assert Memory(path).local == {}
    n = Memory(path).import_(json.loads(json.dumps(exported)))
    assert n > 0 and Memory(path).local["loop_reorder"][1].tries == 2
    with pytest.raises(ValueError):
        Memory(path).import_({"nope": 1})


def test_corrupt_memory_is_moved_aside_and_rebuilt(tmp_path):
    path = tmp_path / "m.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    warnings = []
    m = Memory(str(path), warn=warnings.append)
    m.record([], "loop_reorder", 0.2)
    assert len(warnings) == 1 and "corrupt" in warnings[0]
    assert any(n.startswith("m.sqlite.corrupt-") for n in os.listdir(tmp_path))
    assert Memory(str(path)).local["loop_reorder"][1].tries == 1


def test_processes_opening_one_new_memory_together_wait_instead_of_moving_it_aside(tmp_path):
    # a "locked" answer while another process switches the fresh file to WAL is not damage:
    # moving the file aside then would drop what the other process writes into it
    rounds, openers = 5, 3
    run_together(tmp_path, """
        import os
        from leirc.search.memory import Memory
        warnings = []
        m = Memory(os.path.join(base, f"m-{r}.sqlite"), warn=warnings.append)
        m.record([], "loop_reorder", 0.1)
        m.close()
        assert not warnings, warnings
    """, processes=openers, rounds=rounds)
    assert not [n for n in os.listdir(tmp_path) if ".corrupt" in n]
    for r in range(rounds):
        assert Memory(str(tmp_path / f"m-{r}.sqlite")).local["loop_reorder"][1].tries == openers


def test_store_refuses_to_resume_other_options(tmp_path):
    st = SearchStore(str(tmp_path / "s.sqlite"))
    st.start({"seed": 1}, resume=False)
    st.add_evaluation("f1", None, [], {"ok": True})
    with pytest.raises(ConfigMismatch, match="seed"):
        st.start({"seed": 2}, resume=True)
    assert st.count() == 1
    st.start({"seed": 2}, resume=False)  # without --resume: start over
    assert st.count() == 0


# -- schedule reuse ---------------------------------------------------------------------

def test_trace_replays_adapted_on_a_kernel_of_the_same_structure():
    small, big = prog(MATMUL), prog(MATMUL_BIG)
    assert signature(small)[0] == signature(big)[0]
    steps = [Step.make("loop_reorder", loop="N0.i", order="i,k,j"), Step.make("loop_split", loop="N0.j", factor=32)]
    port = portable(small, steps)
    assert port[0]["perms"] == {"order": [0, 2, 1]}
    renamed = prog(MATMUL_BIG.replace("_{i=0}", "_{r=0}").replace("_{i,", "_{r,"))
    st = adapt(renamed, port[0])
    assert st is not None and st.kwargs["loop"] == "N0.r" and st.kwargs["order"] == "r,k,j"
    final, applied = replay_adapted(renamed, port)
    assert len(applied) == 2 and final.fingerprint != renamed.fingerprint
    odd = prog(MATMUL.replace("64", "48"))  # 32 does not divide 48: the factor moves to a divisor
    _, applied = replay_adapted(odd, port)
    assert 48 % applied[1].kwargs["factor"] == 0


# -- suggest ----------------------------------------------------------------------------

def test_suggest_ranks_legal_steps_and_uses_the_memory():
    p = prog(MATMUL)
    s = suggest(p, k=4)
    assert len(s) == 4 and [x.score for x in s] == sorted((x.score for x in s), reverse=True)
    for x in s:
        p.apply(x.step)
    mem = Memory(None)
    for _ in range(20):
        mem.record([], "loop_parallelization", 2.0)
    s2 = suggest(p, k=4, memory=mem)
    assert s2[0].step.name == "loop_parallelization" and "memory" in s2[0].rationale


# -- algorithms -------------------------------------------------------------------------

@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_algorithm_improves_within_budget_without_duplicates(algo):
    res, ev = run(algo=algo, budget=6, branch=2)
    assert res.evaluations <= 6 and len(ev.calls) == res.evaluations + 1  # + the root
    assert len(set(ev.calls)) == len(ev.calls)  # no program evaluated twice
    assert res.speedup > 1.0 and res.best is not res.root
    # the trajectory replays from the root to the best program
    p = res.root.program
    for st in res.steps:
        p = p.apply(st).program
    assert p.fingerprint == res.best.fingerprint
    for n in res.nodes:
        names = [s.name for s in n.steps]
        assert not any(undoes(a, b) for a, b in zip(names, names[1:]))


def test_same_seed_same_trajectory_other_seed_other_menu():
    a, _ = run(algo="beam", budget=8, keep=0.5, seed=3, proposers=("menu", "htam"))
    b, _ = run(algo="beam", budget=8, keep=0.5, seed=3, proposers=("menu", "htam"))
    c, _ = run(algo="beam", budget=8, keep=0.5, seed=4, proposers=("menu", "htam"))
    trail = lambda r: [str(n.step) for n in r.nodes if n.evaluation is not None]  # noqa: E731
    assert trail(a) == trail(b) and a.steps == b.steps
    assert trail(a) != trail(c)


def test_failed_candidates_do_not_stop_the_search():
    ev = ModelEvaluator(fail=lambda text: "P^" in text)  # every parallel candidate "crashes"
    res, _ = run(algo="greedy", budget=6, evaluator=ev, patience=6)
    kinds = [n.evaluation.error_kind for n in res.nodes if n.evaluation is not None and n is not res.root]
    assert "crash" in kinds and None in kinds and res.evaluations >= 4
    assert res.stopped in ("no untried proposal left", "budget of 6 evaluations spent")
    assert all("loop_parallelization" not in str(s) for s in res.steps)


def test_memory_learns_from_every_evaluation_and_stores_the_winner(tmp_path):
    mem = Memory(str(tmp_path / "m.sqlite"))
    res, _ = run(algo="greedy", budget=5, memory=mem, proposers=("menu", "htam", "reuse"))
    total = sum(s.tries for s in Memory(str(tmp_path / "m.sqlite")).directions.values())
    # one record per step evaluated (an enabler and its payoff, evaluated together, are two; a
    # node's base is not enough: a pair's middle evaluated later becomes its base)
    assert total == sum(len(n.proposal.steps) for n in res.nodes if n.evaluation is not None and n.parent)
    traces = mem.traces(signature(res.root.program)[0])
    assert traces and traces[0]["speedup"] == pytest.approx(res.speedup)
    # a search of a bigger kernel of the same structure replays that trace first
    res2, ev2 = run(MATMUL_BIG, algo="greedy", budget=3, memory=mem, proposers=("menu", "htam", "reuse"))
    first = next(n for n in res2.nodes if n.evaluation is not None and n is not res2.root)
    assert first.proposal.source == "reuse" and first.proposal.rationale.startswith("reuse:")


def test_resume_replays_stored_evaluations(tmp_path):
    path = str(tmp_path / "s.sqlite")
    opts = dict(algo="beam", budget=4, branch=2, proposers=("menu", "htam"))
    store = SearchStore(path)
    config = SearchOptions(**opts, strategies=LOOP_STRATEGIES, grid=3).config()
    store.start(config, resume=False)
    first, ev1 = run(store=store, **opts)
    assert store.count() == 5  # root + 4
    store2 = SearchStore(path)
    store2.start(config, resume=True)
    again, ev2 = run(store=store2, **{**opts, "budget": 7})
    assert ev2.calls and not set(ev2.calls) & set(ev1.calls)  # nothing evaluated twice
    assert again.fresh == 3 and again.evaluations == 7

    def in_order(res):  # a multi-step proposal's middle, proposed alone later, has an early id
        return [str(n.step) for n in sorted((n for n in res.nodes if n.index is not None), key=lambda n: n.index)]

    assert in_order(again)[:5] == in_order(first)[:5]
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 8


def test_the_o1_pipeline_is_the_first_candidate_and_never_a_loss():
    from leirc.opt.o1 import optimize

    res, _ = run(algo="greedy", budget=3, proposers=("menu", "o1"))
    # the first evaluation after the root (nodes are listed in creation order: a multi-step
    # proposal's middle is created before it is evaluated)
    first = min((n for n in res.nodes if n.index is not None and n is not res.root), key=lambda n: n.index)
    assert first.proposal.source == "o1"
    assert list(first.steps) == list(optimize(res.root.program.kernel).steps)
    assert res.best.ms <= first.ms  # the search keeps -O1's result unless it finds better


def test_the_o2_pipeline_is_a_root_candidate_next_to_o1_and_in_the_final_table():
    from leirc.opt.o1 import optimize as o1
    from leirc.opt.o2 import optimize as o2

    root = prog(MATMUL).kernel
    assert list(o2(root).steps) != list(o1(root).steps)  # the GEMM is register-blocked at -O2 only
    res, _ = run(algo="greedy", budget=4, proposers=("menu", "o1", "o2"))
    # each pipeline is one candidate from the root: its whole step list is an evaluated node
    whole = {src: next((n for n in res.nodes if n.index is not None and list(n.steps) == list(f(root).steps)), None)
             for src, f in (("o1", o1), ("o2", o2))}
    assert all(n is not None and n.proposal.source == src for src, n in whole.items()), whole
    table = "\n".join(res.table())
    assert "-O1" in table and "-O2" in table
    for src, n in whole.items():  # a pipeline whose program won says so: its time and the best's are one program's
        line = next(x for x in res.table() if x.strip().startswith(f"-O{src[1]}"))
        assert ("the best's program" in line) == (n.fingerprint == res.best.fingerprint), line
    assert res.best.ms <= min(n.ms for n in whole.values() if n.ok)


def test_a_pipeline_proposer_names_its_level():
    from leirc.search.proposers import PipelineProposer

    assert PipelineProposer(level=2).name == "o2" and PipelineProposer().name == "o1"
    with pytest.raises(ValueError):
        PipelineProposer(level=3)


def test_report_and_outputs_of_a_multi_step_win(tmp_path):
    from leirc.search.report import report_html, write_outputs
    from leirc.strategies import trace_from_json

    res, _ = run(algo="greedy", budget=3, proposers=("menu", "o1"))
    assert len(res.steps) > 1 and any(t["ms"] is None for t in res.trajectory())  # -O1's pipeline, one candidate
    html = report_html(res)
    assert "with the next step" in html and "data:image/png;base64," in html
    paths = write_outputs(res, str(tmp_path), "mm")
    assert trace_from_json(open(paths["trace"]).read()) == res.steps
    assert Program.from_text(open(paths["leir"]).read()).fingerprint == res.best.fingerprint
    assert json.load(open(paths["json"]))["steps"] == [s.to_json() for s in res.steps]


def test_one_disturbed_timing_run_does_not_hide_a_real_speedup():
    class Noisy(ModelEvaluator):
        def evaluate_batch(self, items):
            out = []
            for ev, (text, _n) in zip(super().evaluate_batch(items), items):
                root = prog(text).fingerprint == prog(MATMUL).fingerprint
                runs = [1.0, 1.0, 1.0, 6.0, 1.0] if root else [0.4, 0.41, 0.4, 0.39, 0.4]
                t = TimingResult(True, median_ms=1.0 if root else 0.4, std_ms=2.0 if root else 0.01, runs=runs)
                out.append(Evaluation(ev.fingerprint, True, None, None, t, 0.0, 0.0))
            return out

    res, _ = run(algo="greedy", budget=2, evaluator=Noisy())
    assert res.best is not res.root and res.speedup == pytest.approx(2.5)


@pytest.mark.parametrize("algo", ["beam", "greedy", "bfs", "dfs", "mcts"])
def test_the_o2_candidate_is_expanded_like_any_other_node(algo):
    """-O2 is one proposal of many steps (16 on a GEMM): depth counts proposals, so a search
    goes on from -O2's program instead of stopping at it (counted in steps it was deeper than
    ``max_depth`` and never expanded)."""
    from leirc.opt.o2 import optimize as o2

    root = prog(MATMUL).kernel
    assert len(o2(root).steps) > SearchOptions().max_depth
    res, _ = run(algo=algo, budget=12, proposers=("o2", "menu"), branch=2, max_trials=2)
    whole = next(n for n in res.nodes if n.index is not None and list(n.steps) == list(o2(root).steps))
    assert whole.moves == 1
    kids = [n for n in res.nodes if n.index is not None and n.base is whole]
    assert kids and all(k.moves == 2 for k in kids)


def test_o2_register_tiles_are_extra_root_candidates():
    """-O2's knobs: each of the first ``tile_variants`` register tiles that gives another
    program is one more root candidate (the default tile first), besides the ``branch``
    proposals of the other proposers, not instead of them."""
    from leirc.opt.o2 import optimize as o2, tile_variants

    root = prog(MATMUL).kernel
    res, _ = run(algo="greedy", budget=20, proposers=("menu", "o2"), branch=2, tile_variants=3, patience=0)
    first = [n for n in res.nodes if n.index is not None and n.base is res.root]
    pipes = [n for n in first if n.proposal.source == "o2"]
    assert [list(n.steps) for n in pipes] == [list(o2(root, tiles=t).steps) for t in tile_variants()[:3]]
    assert len({n.fingerprint for n in pipes}) == 3
    assert "register tile" in pipes[1].proposal.rationale
    assert len([n for n in first if n.proposal.source == "menu"]) == 2  # the branch, untouched
    one, _ = run(algo="greedy", budget=20, proposers=("menu", "o2"), branch=2, tile_variants=1, patience=0)
    assert len([n for n in one.nodes if n.index is not None and n.base is one.root
                and n.proposal.source == "o2"]) == 1
