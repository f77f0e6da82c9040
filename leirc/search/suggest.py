"""``suggest(program)``: ranked next steps without evaluating anything (the language
server's "Suggest optimization"), from the cost model and the HTAM memory.

To stay interactive (well under 200 ms on a stdlib kernel once the strategies are
imported) it does not apply every step of the menu: sites of the schedule, memory and graph
strategies (``include_math=True`` adds the SymPy-based algebraic ones) are pre-ranked by the
direction's score (the target's prior, plus the memory's evidence after ``history``, the
directions of the steps that produced the program), the ends of each site's parameter grid
are applied through the engine (so a suggestion is always legal) up to ``max_apply`` steps,
and those are scored by ``log(predicted speedup)`` plus the memory's utility of the strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..strategies import NotApplicable, Step, StrategyBug, all_strategies, enumerate_sites
from . import cost as C
from .directions import direction_of, priors


@dataclass(frozen=True)
class Suggestion:
    step: Step
    score: float
    rationale: str
    direction: str = ""
    predicted: float = 1.0  # predicted speedup of this one step (cost model)


def _names(target: str, include_math: bool) -> list[str]:
    skip = {"loop_parallelization"} if str(target).startswith("cuda") else {"loop_binding"}
    return [s.name for s in all_strategies()
            if s.name not in skip and s.numerics != "approximate" and (include_math or s.level != "math")]


def suggest(program, *, k: int = 5, target: str = "llvm", memory=None, threads: Optional[int] = None,
            history: tuple = (), include_math: bool = False, max_apply: int = 24) -> list[Suggestion]:
    """The ``k`` best-looking next steps for ``program`` (a :class:`leirc.engine.Program`)."""
    dir_scores = memory.direction_scores(history) if memory is not None else priors(target)
    sites = enumerate_sites(program.kernel, _names(target, include_math), program.result)
    ranked = sorted(sites, key=lambda s: (-dir_scores.get(direction_of(s.strategy), 0.0)
                                          - (memory.strategy_score(s.strategy) if memory is not None else 0.0),
                                          s.strategy, str(sorted(s.fixed.items()))))
    steps: list[Step] = []
    for site in ranked:
        doms = {key: ([v[0], v[-1]] if len(v) > 1 else list(v)) for key, v in site.domains.items()}
        from ..strategies.base import Site

        for st in Site(site.strategy, site.fixed, doms).steps(limit=2):
            if st not in steps:
                steps.append(st)
        if len(steps) >= max_apply:
            break
    base = C.estimate(program, target, threads=threads)
    out = []
    for st in steps[:max_apply]:
        try:
            rw = program.apply(st)
        except (NotApplicable, StrategyBug):
            continue
        if rw.program.fingerprint == program.fingerprint:
            continue
        est = C.estimate(rw.program, target, threads=threads)
        pred = base.seconds / est.seconds if est.seconds > 0 else 1.0
        d = direction_of(st.name)
        score = math.log(max(pred, 1e-9)) + 0.05 * dir_scores.get(d, 0.0)
        why = f"cost model: {C.explain(base, est)}"
        if memory is not None:
            local = memory.strategy_score(st.name)
            score += local
            why += f"; memory: {d} {dir_scores.get(d, 0.0):+.2f}, {st.name} {local:+.3f}"
        out.append(Suggestion(st, score, why, d, pred))
    out.sort(key=lambda x: (-x.score, str(x.step)))
    return out[:k]
