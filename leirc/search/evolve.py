"""``--algo evolve``: evolutionary search over the design space, ranked by the learned model.

MetaSchedule's search strategy on LEIR's space (:mod:`leirc.search.space`):

1. **Baselines first.** -O1, -O2 and -O2's other register tiles (``--tile-variants``) are the
   first measured batch, so the search's result is never slower than either pipeline wherever
   it verifies (the best is the fastest accepted candidate, and both are candidates).
2. **Each round** draws a pool: every one-knob change of the :data:`LOCAL` fastest measured
   points, and :data:`POOL` draws of mutations of the fastest measured points (the population,
   :data:`POPULATION`), crossovers of two of them, and fresh samples; each point
   runs its pipeline (a trace of checked steps) and points that give a program already measured
   or already in the pool are dropped (many knobs do nothing on a given kernel).
3. **The model ranks the pool** (:class:`leirc.search.learned.CostModel`; before it has data,
   the analytical model's estimate), and a batch of ``--branch`` candidates is measured:
   the best-ranked, and with probability :data:`EPSILON` each slot a random pool member instead
   (ε-greedy: the model learns where it is wrong only from what it did not pick).
4. The measurements train the model again (warm-started from earlier searches on the same
   target), and its predictions of the batch *before* it was measured give the held-out
   Spearman correlation reported in the summary (``model``).

Every candidate is a node of the search with its whole trace as its steps, evaluated like any
other (built once, verified against the original, timed, compared with the input beyond the
noise), so resuming, the store, the report and the final confirmation work unchanged. The
search's seeded RNG draws every choice; the model trains deterministically (one thread).
"""

from __future__ import annotations

import math
import os
from types import SimpleNamespace
from typing import Optional

from .directions import direction_of
from .learned import CostModel, features, group_of, target_fingerprint
from .proposers import Proposal
from .space import LEVEL_KNOBS, Space, point_to_json

#: points drawn per round (realized, deduplicated, ranked by the model)
POOL = 48
#: the fastest measured points that mutations and crossovers start from
POPULATION = 8
#: probability that a slot of the measured batch goes to a random pool member
EPSILON = 0.25
#: share of the pool from mutation, then crossover; the rest are fresh samples
MUTATE, CROSS = 0.5, 0.25
#: the best measured points whose one-knob neighbours all join the pool
LOCAL = 2
#: draws per mutation until one gives a program not seen yet
RETRIES = 4
#: rounds in a row that find no new program before the search says the space is exhausted
STALE_ROUNDS = 3


def model_dir(options) -> Optional[str]:
    """Where the model's records and booster live: ``CACHE_DIR/tuner``, else next to the search
    state, else nowhere (this process only)."""
    if options.cache_dir:
        return os.path.join(options.cache_dir, "tuner")
    if options.state:
        return os.path.join(os.path.dirname(os.path.abspath(options.state)) or ".", "tuner")
    return None


class Evolution:
    """The state of one evolutionary search on a :class:`leirc.search.core.Search`."""

    def __init__(self, search, model: Optional[CostModel] = None):
        self.search = search
        o = search.options
        self.space = Space(o.target)
        self.root = search.root
        self.group = group_of(self.root.program)
        self.batch = max(2, int(o.branch))
        if model is None:
            store = search.store
            warm = store.get("tuner_warm_until") if store is not None else None
            model = CostModel(target_fingerprint(o.target), model_dir(o), seed=o.seed, warm_until=warm)
            if store is not None and warm is None and model.warm_until is not None:
                store.put(tuner_warm_until=model.warm_until)
        self.model = model
        self.points: dict[str, dict] = {}  # fingerprint -> the point that gave it (first found)
        self.measured: list = []  # nodes, in order
        self.tried: set = set()  # (knob, value) pairs of the points picked so far
        self.local: set = set()  # this round's pool members that are one-knob neighbours of the best

    # -- candidates ------------------------------------------------------------------------
    def _fresh(self, points: list, pool: dict) -> int:
        """Realize ``points`` into ``pool`` (fingerprint -> (point, Realized)), dropping programs
        already seen by the search or in the pool; returns how many were new."""
        added = 0
        for pt in points:
            r = self.space.realize(self.root.program, pt)
            if not r.steps or r.fingerprint in self.search.by_fp or r.fingerprint in pool:
                continue
            pool[r.fingerprint] = (r.point, r)
            added += 1
        return added

    def baselines(self) -> list:
        """-O1, -O2 and -O2's register-tile variants, as (source, point)."""
        out = [("o1", self.space.o1_point()), ("o2", self.space.o2_point())]
        if self.space.target == "llvm":
            from ..opt.o2 import tile_variants

            for t in tile_variants(self.space.target)[1:self.search.options.tile_variants]:
                out.append(("o2", self.space.o2_point(t)))
        return out

    def parents(self) -> list[dict]:
        """The population: points of the fastest correct measured candidates."""
        ok = [n for n in self.measured if n.ok]
        ok.sort(key=lambda n: (self._rel(n), n.id))
        return [self.points[n.fingerprint] for n in ok[:POPULATION] if n.fingerprint in self.points]

    def gate(self) -> Optional[float]:
        """The screen timing of the best accepted candidate so far: a candidate is re-timed next
        to the input (the interleaved protocol, ~12 timings) only when its own screen timing could
        beat it, not every time it beats the input (which nearly every -O1/-O2 point does).
        None before a candidate was accepted (the pipelines are always re-timed)."""
        ok = [n for n in self.measured if n.accepted and n.ms]
        return min(ok, key=lambda n: (self._rel(n), n.id)).ms if ok else None

    def _rel(self, n) -> float:
        if n.rel is not None:
            return n.rel
        return n.ms / self.root.ms if n.ms and self.root.ms else math.inf

    def pool(self) -> dict:
        rng, space = self.search.rng, self.space
        parents = self.parents()
        pool: dict = {}
        for parent in parents[:LOCAL]:  # every one-knob change of the best points
            self._fresh(space.neighbors(parent), pool)
        self.local = set(pool)
        for _ in range(POOL):
            r = rng.random()
            if parents and r < MUTATE:
                # a knob that does nothing on this kernel gives the parent's program again: redraw
                # (most knobs do nothing on a given kernel, so blind mutations are mostly wasted)
                parent = rng.choice(parents)
                for _ in range(RETRIES):
                    if self._fresh([space.mutate(parent, rng)], pool):
                        break
            elif len(parents) >= 2 and r < MUTATE + CROSS:
                a, b = rng.sample(range(len(parents)), 2)
                self._fresh([space.crossover(parents[a], parents[b], rng)], pool)
            else:
                self._fresh([space.sample(rng)], pool)
        return pool

    def novelty(self, point: dict) -> int:
        """Knob values of ``point`` (among those its level reads) that no measured point had:
        what a measurement of it would teach the model that it cannot know yet."""
        used = ("level",) + tuple(k for k in LEVEL_KNOBS[point["level"]] if k in self.space.knobs)
        return sum(1 for k in used if (k, point[k]) not in self.tried)

    def pick(self, pool: dict, n: int) -> list:
        """``n`` pool members: the best by model score (ties: the more novel first), and with
        probability EPSILON a slot goes to a random novel neighbour of the best points instead
        (or a random pool member when none is novel). Returns [(fingerprint, score, x)]."""
        fps = list(pool)
        X = [features(SimpleNamespace(result=pool[fp][1].result), pool[fp][0], self.search.options.target,
                      threads=self.search.options.threads) for fp in fps]
        scores = self.model.predict(X)
        nov = [self.novelty(pool[fp][0]) for fp in fps]
        ranked = sorted(range(len(fps)), key=lambda i: (-round(float(scores[i]), 9), -nov[i], fps[i]))
        chosen: list[int] = []
        rng = self.search.rng
        for _ in range(min(n, len(fps))):
            left = [i for i in ranked if i not in chosen]
            if rng.random() < EPSILON and len(left) > 1:
                explore = [i for i in left if fps[i] in self.local and nov[i] > 0] or left
                chosen.append(rng.choice(explore))
            else:
                chosen.append(left[0])
            self._note(pool[fps[chosen[-1]]][0])
            nov = [self.novelty(pool[fp][0]) for fp in fps]
        return [(fps[i], float(scores[i]), X[i]) for i in chosen]

    def _note(self, point: dict) -> None:
        self.tried.update(point.items())

    # -- measuring -------------------------------------------------------------------------
    def measure(self, picks: list, pool: dict, sources: Optional[dict] = None) -> int:
        """Evaluate the picked candidates through the search; returns how many ran."""
        nodes, meta = [], []
        for fp, score, x in picks:
            point, r = pool[fp]
            src = (sources or {}).get(fp, "evolve")
            why = ("the fixed -O1 pipeline" if src == "o1" else "the fixed -O2 pipeline" if src == "o2"
                   else "design-space point " + ", ".join(f"{k}={v}" for k, v in point_to_json(point).items()))
            prop = Proposal(r.steps[0], score, why, direction_of(r.steps[-1].name), source=src, then=tuple(r.steps[1:]))
            node = self.search.add_candidate(r.steps, prop)
            if node is None:
                continue
            node.gate_ms = self.gate()
            self.points.setdefault(node.fingerprint, point)
            nodes.append(node)
            meta.append((score, x))
        done = self.search.evaluate(nodes)
        for node, (score, x) in zip(nodes, meta):
            if node not in done:
                continue
            self.measured.append(node)
            self.model.record_heldout(self.group, score, node.ms if node.ok else None)
            if node.ok:
                self.model.add(self.group, node.fingerprint, x, node.ms)
        if done:
            self.model.fit()
        return len(done)

    def run(self) -> None:
        s = self.search
        pool: dict = {}
        sources = {}
        for src, pt in self.baselines():
            before = set(pool)
            self._fresh([pt], pool)
            for fp in set(pool) - before:
                sources[fp] = src
        picks = []
        for fp in pool:
            self._note(pool[fp][0])
            x = features(SimpleNamespace(result=pool[fp][1].result), pool[fp][0], s.options.target,
                         threads=s.options.threads)
            picks.append((fp, float(self.model.predict([x])[0]), x))
        self.measure(picks, pool, sources)
        s.checkpoint([s.root] + self.measured)
        stale = 0
        while not s.exhausted():
            pool = self.pool()
            if not pool:
                stale += 1
                if stale >= STALE_ROUNDS:
                    s.stopped = f"design space exhausted: {STALE_ROUNDS} rounds found no new program"
                    return
                continue
            stale = 0
            if not self.measure(self.pick(pool, self.batch), pool):
                return
            s.checkpoint([s.root] + self.measured)

    def stats(self) -> dict:
        return self.model.stats() | {"measured": len(self.measured), "batch": self.batch, "pool": POOL,
                                     "epsilon": EPSILON}


def evolve(search) -> None:
    """The ``evolve`` algorithm (module docstring) on ``search``; the model's statistics go to
    ``search.model_stats`` (the summary's ``model``)."""
    ev = Evolution(search)
    try:
        ev.run()
    finally:
        search.model_stats = ev.stats()
        ev.model.close()


__all__ = ["EPSILON", "Evolution", "POOL", "POPULATION", "evolve", "model_dir"]
