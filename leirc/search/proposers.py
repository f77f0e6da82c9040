"""Proposers: where the next steps of a search come from.

A :class:`Proposer` looks at a search node (a :class:`leirc.engine.Program` with the path
that reached it) and returns ranked candidate steps with a prior score and a rationale; it
is told every evaluation through :meth:`Proposer.observe`. The offline proposers:

* :class:`MenuProposer` -- every applicable step (sites from
  :func:`leirc.strategies.enumerate_sites`, parameter grids from the sites' argument
  domains), each applied through the engine (``Program.apply -> Rewrite``) and ranked by
  the predicted speedup of :mod:`leirc.search.cost`; Autocomp's *menu dropout* keeps each
  menu option with probability ``keep`` (drawn from the search's seeded RNG);
* :class:`HTAMProposer` -- picks a direction with the HTAM memory's softmax policy over the
  recent directions, then ranks that direction's steps by local evidence plus the model;
* :class:`ReuseProposer` -- continues the adapted replay of traces that won on kernels of
  the same structure (:mod:`leirc.search.reuse`), ahead of everything else;
* :class:`CombinedProposer` -- several of them, interleaved by rank, duplicates dropped.

Proposals never include an undo of the node's own last step (``split`` after ``fuse``...)
nor a step that leaves the program unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Protocol

from ..strategies import NotApplicable, Step, StrategyBug, all_strategies, enumerate_sites
from . import cost as C
from .directions import direction_of, priors, undoes
from .reuse import replay_adapted, similar_traces


@dataclass(frozen=True)
class Proposal:
    step: Step
    prior: float  # predicted speedup over the node (cost model), or a proposer's own score
    rationale: str
    direction: str
    source: str = "menu"
    then: tuple = ()  # further steps applied before evaluating (an enabler and its payoff)
    #: a baseline candidate (a fixed pipeline at the root): evaluated besides the ``k``
    #: proposals an expansion asks for, never instead of one of them
    extra: bool = False

    @property
    def steps(self) -> tuple:
        return (self.step,) + tuple(self.then)


class Proposer(Protocol):
    name: str

    def propose(self, node, k: int, rng) -> list[Proposal]: ...

    def observe(self, node, step: Step, evaluation) -> None: ...


@dataclass
class MenuItem:
    step: Step
    program: object  # the child Program
    numerics: str
    estimate: C.CostEstimate
    prior: float
    direction: str
    option: tuple  # the menu option (strategy, fixed arguments) the step belongs to
    then: tuple = ()


#: steps whose value is what they make possible: a split or reorder buys nothing by itself,
#: vectorizing or parallelizing the loop it created does (the gate "beats its parent" would
#: reject the enabler alone, so the pair is one menu item)
ENABLERS = ("loop_split", "loop_reorder", "loop_tiling", "loop_fusion")
PAYOFFS = ("loop_vectorization", "loop_parallelization", "loop_unrolling")


def _spread(values: list, limit: int) -> list:
    """At most ``limit`` values, evenly spread over the list (ends included), in order."""
    if len(values) <= limit:
        return list(values)
    if limit <= 1:
        return [values[len(values) // 2]]
    idx = sorted({round(i * (len(values) - 1) / (limit - 1)) for i in range(limit)})
    return [values[i] for i in idx]


class MenuProposer:
    """The offline default: the applicable steps ranked by the analytical cost model."""

    name = "menu"

    def __init__(self, target: str = "llvm", *, threads: Optional[int] = None, keep: float = 1.0,
                 grid: int = 4, allow_approximate: bool = False, strategies=None, exclude=(),
                 min_prior: float = 0.98):
        self.target = target
        self.min_prior = float(min_prior)  # steps the model expects to slow the program down are left out
        self.threads = threads
        self.keep = float(keep)
        self.grid = max(1, int(grid))
        names = set(strategies) if strategies is not None else {s.name for s in all_strategies()}
        if not allow_approximate:
            names = {n for n in names if _numerics(n) != "approximate"}
        # P loops inside a CUDA kernel and B loops on a CPU buy nothing
        names -= {"loop_parallelization"} if str(target).startswith("cuda") else {"loop_binding"}
        self.names = sorted(names - set(exclude))
        self._menus: dict = {}
        self._estimates: dict = {}
        self.failures: list[str] = []  # strategy bugs met while building menus

    def estimate(self, program) -> C.CostEstimate:
        fp = program.fingerprint
        got = self._estimates.get(fp)
        if got is None:
            got = self._estimates[fp] = C.estimate(program, self.target, threads=self.threads)
        return got

    def site_steps(self, site) -> list[Step]:
        """The parameter grid of one site: each free argument's domain thinned to ``grid``
        values (ends kept: the smallest and largest tile or vector width)."""
        doms = {k: _spread(list(v), self.grid) for k, v in site.domains.items()}
        from ..strategies.base import Site

        return Site(site.strategy, site.fixed, doms, site.description).steps()

    def menu(self, program) -> list[MenuItem]:
        """Every applicable step of ``program`` with its child and prior (cached)."""
        got = self._menus.get(program.fingerprint)
        if got is not None and got[0] == program.kernel:
            return got[1]
        base = self.estimate(program)
        items: list[MenuItem] = []
        for site in enumerate_sites(program.kernel, self.names, program.result):
            option = (site.strategy, tuple(sorted((k, str(v)) for k, v in site.fixed.items())))
            for st in self.site_steps(site):
                try:
                    rw = program.apply(st)
                except NotApplicable:
                    continue
                except StrategyBug as e:  # a bug in leirc, not in the search: skip the step, say so
                    self.failures.append(str(e).splitlines()[0])
                    continue
                child = rw.program
                if child.fingerprint == program.fingerprint:
                    continue
                est = self.estimate(child)
                prior = base.seconds / est.seconds if est.seconds > 0 else 1.0
                item = MenuItem(st, child, rw.numerics, est, prior, direction_of(st.name), option)
                items.append(item)
                if st.name in ENABLERS:
                    items.extend(self._payoffs(program, base, item, rw))
        # an enabler alone that the model sees no gain in is left to its pairs
        items = [m for m in items if m.prior >= self.min_prior
                 and not (m.step.name in ENABLERS and not m.then and m.prior < 1.02)]
        pri = priors(self.target)
        items.sort(key=lambda m: (-round(m.prior, 3), -pri.get(m.direction, 0.0), str(m.step)))
        self._menus[program.fingerprint] = (program.kernel, items)
        return items

    def _alone(self, program, base, name: str, loop) -> float:
        """Predicted speedup of a payoff step applied without its enabler (1 if illegal)."""
        try:
            est = self.estimate(program.apply(Step.make(name, loop=loop)).program)
        except (NotApplicable, StrategyBug):
            return 1.0
        return base.seconds / est.seconds if est.seconds > 0 else 1.0

    def _payoffs(self, program, base, item: MenuItem, rw) -> list[MenuItem]:
        """Enabler + payoff pairs on the loops the enabler created (or reordered), kept when
        the pair beats the payoff without the enabler."""
        child = item.program
        loops = [r for r in rw.created.values() if isinstance(r, str) and "." in r]
        if item.step.name == "loop_reorder":
            loops = [ref for ref, _ in child.loops() if ref.startswith(f"N{rw.produced[0][0]}.")] if rw.produced else []
        out = []
        for ref in loops:
            for name in PAYOFFS:
                if name not in self.names:
                    continue
                st2 = Step.make(name, loop=ref)
                try:
                    rw2 = child.apply(st2)
                except (NotApplicable, StrategyBug):
                    continue
                est = self.estimate(rw2.program)
                prior = base.seconds / est.seconds if est.seconds > 0 else 1.0
                alone = self._alone(program, base, name, item.step.kwargs.get("loop"))
                if prior > max(item.prior, alone) * 1.02:
                    numerics = rw2.numerics if rw2.numerics != "bitwise" else item.numerics
                    out.append(MenuItem(item.step, rw2.program, numerics, est, prior, direction_of(name),
                                        item.option, (st2,)))
        return out

    def rationale(self, node_program, item: MenuItem) -> str:
        return f"cost model: {C.explain(self.estimate(node_program), item.estimate)}"

    def allowed(self, node, item: MenuItem) -> bool:
        last = node.steps[-1].name if node.steps else None
        return not undoes(last, item.step.name)

    def propose(self, node, k: int, rng) -> list[Proposal]:
        items = [m for m in self.menu(node.program) if self.allowed(node, m)]
        if self.keep < 1.0:
            options = sorted({m.option for m in items})
            kept = {o for o in options if rng.random() < self.keep}  # one draw per option, fixed order
            items = [m for m in items if m.option in kept]
        items = diverse(items, per_option=2)
        return [Proposal(m.step, m.prior, self.rationale(node.program, m), m.direction, self.name, m.then)
                for m in items[:k]]

    def observe(self, node, step, evaluation) -> None:
        """The model is analytical: measurements do not change it."""


def diverse(items: list, per_option: int = 2) -> list:
    """The ranked items with at most ``per_option`` of one menu option (strategy and place)
    ahead of the others: eight tile sizes of one split must not fill a beam."""
    head, tail, count = [], [], {}
    for m in items:
        n = count.get(m.option, 0)
        count[m.option] = n + 1
        (head if n < per_option else tail).append(m)
    return head + tail


def _numerics(name: str) -> str:
    from ..strategies import get

    try:
        return get(name).numerics
    except KeyError:
        return "approximate"


def model_evidence(by_direction: dict) -> dict:
    """Direction -> log of the best predicted speedup among its menu items (0 for none above 1)."""
    return {d: max(0.0, max(math.log(max(m.prior, 1e-9)) for m in items)) for d, items in by_direction.items() if items}


class HTAMProposer:
    """Direction from the HTAM memory's policy, then that direction's strategies by their
    local evidence plus the model's prior."""

    name = "htam"

    def __init__(self, memory, menu: MenuProposer, *, temperature: float = 0.5):
        self.memory = memory
        self.menu = menu
        self.temperature = float(temperature)

    def propose(self, node, k: int, rng) -> list[Proposal]:
        items = [m for m in self.menu.menu(node.program) if self.menu.allowed(node, m)]
        by_dir: dict[str, list[MenuItem]] = {}
        for m in items:
            by_dir.setdefault(m.direction, []).append(m)
        prefix = list(node.directions)
        out: list[Proposal] = []
        remaining = dict(by_dir)
        evidence = model_evidence(by_dir)
        # half the slots per direction drawn: a beam of one direction's variants left the model's
        # best step of another direction out (gemv: HTAM found menu's two-step answer 4x later)
        per_direction = max(1, (k + 1) // 2)
        while remaining and len(out) < k:
            allowed = sorted(remaining)
            pol = self.memory.policy(prefix, self.temperature, allowed=allowed, evidence=evidence)
            d = self.memory.choose_direction(prefix, rng, self.temperature, allowed=allowed, evidence=evidence)
            ranked = sorted(remaining.pop(d), key=lambda m: (-(math.log(max(m.prior, 1e-9))
                                                               + self.memory.strategy_score(m.step.name)), str(m.step)))
            after = prefix[-1] if prefix else "the start"
            for m in ranked[:min(per_direction, k - len(out))]:
                why = (f"HTAM: direction {d} (p={pol.get(d, 0):.2f} after {after}), evidence for {m.step.name} "
                       f"{self.memory.strategy_score(m.step.name):+.3f}; {self.menu.rationale(node.program, m)}")
                out.append(Proposal(m.step, m.prior, why, m.direction, self.name, m.then))
        return out[:k]

    def observe(self, node, step, evaluation) -> None:
        """The search records every evaluation in the memory itself (once, whichever
        proposer made the step)."""


class ReuseProposer:
    """Steps of the adapted replays of similar kernels' winning traces."""

    name = "reuse"

    def __init__(self, memory, *, traces: int = 2):
        self.memory = memory
        self.traces = int(traces)
        self._plans: Optional[list] = None  # [(trace, adapted steps)] for the root

    def plans(self, root) -> list:
        if self._plans is None:
            self._plans = []
            for t in similar_traces(self.memory, root, self.traces):
                _, steps = replay_adapted(root, t["steps"])
                if steps:
                    self._plans.append((t, steps))
        return self._plans

    def propose(self, node, k: int, rng) -> list[Proposal]:
        root = node.root_program
        out = []
        path = list(node.steps)
        for t, steps in self.plans(root):
            if len(path) < len(steps) and steps[:len(path)] == path:
                st = steps[len(path)]
                gain = t["speedup"] ** (1.0 / len(steps))
                why = (f"reuse: step {len(path) + 1}/{len(steps)} of the trace that reached x{t['speedup']:.3g} on "
                       f"'{t['kernel']}' (same structure)")
                if all(p.step != st for p in out):
                    out.append(Proposal(st, gain, why, direction_of(st.name), self.name))
        return out[:k]

    def observe(self, node, step, evaluation) -> None:
        """Traces are stored when a search ends (the winner), not per evaluation."""


class PipelineProposer:
    """A fixed pipeline (``-O1`` or ``-O2``), proposed once at the root as one multi-step
    candidate: the search starts from the heuristic baseline's result (and keeps it only if it
    verifies and beats the input), so it does not have to rediscover it step by step; with
    ``-O2`` in the candidates the search ends no slower than ``-O2`` wherever ``-O2`` verifies
    and wins. ``level``: 1 or 2; the proposer's name is ``o1`` or ``o2``. ``variants``: at
    -O2 on the CPU, that many register tiles (:func:`leirc.opt.o2.tile_variants`, the
    target's default first) each give a candidate, the ones that give a program already
    proposed dropped: -O2's knobs, tuned by measuring. Pipeline candidates are *extra*: they
    do not take the places of the other proposers' steps at the root."""

    def __init__(self, target: str = "llvm", menu: Optional[MenuProposer] = None, level: int = 1,
                 variants: int = 1):
        if level not in (1, 2):
            raise ValueError(f"no -O{level} pipeline")
        self.level = level
        self.name = f"o{level}"
        self.target = "cuda" if str(target).startswith("cuda") else "llvm"
        self.menu = menu
        self.variants = max(1, int(variants))
        self._pipelines: Optional[list] = None  # [(what, steps)]

    def pipelines(self, program) -> list:
        """[(description, steps)]: the pipeline's step lists for ``program``, one per knob
        setting that gives a different program."""
        if self._pipelines is not None:
            return self._pipelines
        from ..lang.canonical import fingerprint

        if self.level == 1:
            from ..opt.o1 import optimize as o1

            runs = [("", lambda: o1(program.kernel, self.target, program.result))]
        else:
            from ..opt.o2 import optimize as o2, tile_variants

            tiles = tile_variants(self.target)[:self.variants] if self.target == "llvm" else [None]
            runs = [(f" with a {t.mr}x{t.nr} register tile{', rows outside' if t.outer == 'i' else ''}"
                     if t is not None and self.variants > 1 else "",
                     lambda t=t: o2(program.kernel, self.target, program.result, tiles=t)) for t in tiles]
        out, seen = [], set()
        for what, run in runs:
            try:
                res = run()
            except NotApplicable:
                continue
            fp = fingerprint(res.kernel)
            if res.steps and fp not in seen:
                seen.add(fp)
                out.append((what, list(res.steps)))
        self._pipelines = out
        return out

    def propose(self, node, k: int, rng) -> list[Proposal]:
        if node.steps:
            return []
        out = []
        base = self.menu.estimate(node.program) if self.menu is not None else None
        for what, steps in self.pipelines(node.program):
            prior, why = 1.0, ""
            if self.menu is not None:
                try:
                    from ..engine.program import replay

                    est = self.menu.estimate(replay(node.program, steps))
                    prior = base.seconds / est.seconds if est.seconds > 0 else 1.0
                    why = f"; cost model: {C.explain(base, est)}"
                except NotApplicable:
                    continue
            first, *rest = steps
            out.append(Proposal(first, prior, f"the -O{self.level} pipeline{what} ({len(steps)} steps) as one "
                                              f"candidate{why}", direction_of(first.name), self.name, tuple(rest),
                                extra=True))
        return out

    def observe(self, node, step, evaluation) -> None:
        """Proposed once; nothing to learn."""


class CombinedProposer:
    """Several proposers' ranked lists interleaved (first proposer first), duplicates
    dropped."""

    def __init__(self, proposers: list):
        self.proposers = list(proposers)
        self.name = ",".join(p.name for p in self.proposers)

    def propose(self, node, k: int, rng) -> list[Proposal]:
        """The extra (baseline) proposals first, all of them, then up to ``k`` others."""
        lists = [p.propose(node, k, rng) for p in self.proposers]
        extra, out, seen = [], [], set()
        for rank in range(max((len(x) for x in lists), default=0)):
            for lst in lists:
                if rank < len(lst) and lst[rank].steps not in seen:
                    seen.add(lst[rank].steps)
                    (extra if lst[rank].extra else out).append(lst[rank])
        return extra + out[:k]

    def observe(self, node, step, evaluation) -> None:
        for p in self.proposers:
            p.observe(node, step, evaluation)
