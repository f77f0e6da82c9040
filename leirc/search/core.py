"""The search: nodes, budgets, de-duplication, and the algorithms (greedy, beam, BFS, DFS,
MCTS, chain) over verified strategy steps.

A node is a :class:`leirc.engine.Program` reached from the root by checked steps
(``Program.apply -> Rewrite``); its fingerprint is the de-duplication key, so two paths to
one program are one node, and a step that undoes the parent's (an inverse pair, or any step
back to a program already seen) is never evaluated. Every candidate is evaluated against the
*root* program (the oracle is the interpreter running the original): verified, then timed.

Timings taken minutes apart on a shared machine differ by more than most steps gain, so one
timing per candidate only *screens*: a child that looks faster than its parent (by
``min_gain``) is timed again next to the parent, alternately in short rounds
(:meth:`CandidateEvaluator.paired <leirc.search.evaluate.CandidateEvaluator.paired>`), and
it *improves* on its parent when the median ratio of those rounds beats the noise
(``min_gain`` or twice the ratio's spread). A node's speedup estimate is the product of the
paired ratios from the root. At the end the best node is timed against the root the same way;
that ratio is the reported speedup, and a best that does not beat the root beyond the noise
is not reported as a win. Timings from an earlier process (resumed state) are measured again
before a new child is compared with them; verdicts are stored with the evaluations, so a
resumed search replays them instead of measuring again.

One ``random.Random(seed)`` drives every choice (menu dropout, HTAM's policy); the seed is
recorded. With equal timings, the same seed and budget give the same trajectory; resuming a
killed search replays it (see :mod:`leirc.search.store`).
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections import deque
import os
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from ..engine.evaluate import Evaluation, target_fingerprint
from ..engine.program import Program
from ..lang.printer import PRETTY
from ..strategies import NotApplicable, Step
from .constants import ALGORITHMS, DEFAULT_PROPOSERS, PROPOSERS
from .directions import direction_of, undoes
from .evaluate import CONFIRM_ROUNDS, PAIR_ROUNDS, Paired

NUMERICS_ORDER = ("bitwise", "exact-in-reals", "approximate")
#: a candidate twice as fast always counts as faster, however noisy the timings were
MAX_NOISE = 0.5
#: a child the cost model predicts this much faster than its parent is re-timed next to it
#: unless its one timing is more than PROMISING_SLACK slower (see Search._promising)
PROMISING_PRIOR = 1.2
PROMISING_SLACK = 0.3


@dataclass(frozen=True)
class SearchOptions:
    algo: str = "beam"
    budget: Optional[int] = 32  # candidate evaluations (the root's is not counted)
    time_limit: Optional[float] = None  # seconds of new evaluations
    proposers: tuple = DEFAULT_PROPOSERS
    seed: int = 0
    target: str = "llvm"
    threads: int = 2
    workers: int = 1  # parallel builds (see leirc.search.evaluate)
    beam_width: int = 4
    branch: int = 4  # children proposed per expansion
    max_depth: int = 8
    patience: int = 2  # expansions (beam: iterations) without improvement before stopping
    keep: float = 1.0  # menu dropout: probability of keeping each menu option
    grid: int = 4  # values per free argument of a site (tile sizes, vector widths)
    tile_variants: int = 3  # -O2 candidates at the root, one per register tile (leirc.opt.o2.tile_variants)
    temperature: float = 0.5  # HTAM policy
    min_gain: float = 0.03  # relative noise floor for "beats its parent"
    mcts_c: float = 1.414
    max_trials: int = 3
    allow_approximate: bool = False
    strategies: Optional[tuple] = None  # the menu's strategies (None: all that fit the target)
    timeout: float = 120.0
    memory: Optional[str] = None  # HTAM memory file; None: in this process only
    state: Optional[str] = None  # search state file (resume); None: not kept
    resume: bool = False
    cache_dir: Optional[str] = None  # the Evaluator's content-addressed cache
    # the LLM proposers' endpoint and models (a leirc.llm.LLMConfig; it names the API key's
    # environment variable, never holds the key)
    llm: Optional[object] = None
    # time the candidates on an RPC server that TVM's tracker at rpc ("HOST:PORT") hands out
    # for rpc_key (verification stays local); None: time here
    rpc: Optional[str] = None
    rpc_key: Optional[str] = None

    def __post_init__(self):
        if self.algo not in ALGORITHMS:
            raise ValueError(f"unknown search algorithm '{self.algo}' (one of {', '.join(ALGORITHMS)})")
        bad = [p for p in self.proposers if p not in PROPOSERS]
        if bad or not self.proposers:
            raise ValueError(f"unknown proposer '{','.join(bad)}' (combine {', '.join(PROPOSERS)})")
        if self.budget is None and self.time_limit is None:
            raise ValueError("a search needs a budget: evaluations, wall-clock time, or both")
        if self.tile_variants < 1:
            raise ValueError("--tile-variants must be at least 1 (the target's default register tile)")
        if not 0.0 < self.keep <= 1.0:
            raise ValueError("menu dropout: the keep probability must be in (0, 1]")
        if (self.rpc is None) != (self.rpc_key is None):
            raise ValueError("remote timing needs both the tracker (--rpc HOST:PORT) and the device key (--key)")
        if self.rpc is not None:
            from ..lower.device import parse_address

            parse_address(self.rpc)

    def config(self) -> dict:
        """What decides the trajectory (compared on --resume; budgets may grow)."""
        return {k: v for k, v in self.__dict__.items()
                if k not in ("budget", "time_limit", "resume", "state", "memory", "cache_dir", "workers", "llm", "rpc",
                             "rpc_key")} | {
            "proposers": list(self.proposers), "strategies": None if self.strategies is None else list(self.strategies),
            # the models and how they are asked decide the answers; where the endpoint is, how
            # long to wait and whether to replay from the cache do not (an offline resume is the
            # same search)
            "llm": None if self.llm is None else {k: v for k, v in self.llm.to_json().items() if k in LLM_DECIDES},
            # the stored timings were measured on this target: a resume elsewhere starts over
            "target_fingerprint": target_fingerprint(self.target)}


#: the LLMConfig fields that decide a search's trajectory
LLM_DECIDES = ("models", "weights", "mode", "temperature", "max_tokens", "seed")


@dataclass(eq=False)
class Node:
    id: int
    program: Program
    parent: Optional["Node"]
    step: Optional[Step]
    steps: tuple
    directions: tuple
    numerics: str
    root_program: Program
    proposal: object = None
    evaluation: Optional[Evaluation] = None
    replayed: bool = False
    children: list = field(default_factory=list)  # attached (improving) children, for MCTS
    tried: set = field(default_factory=set)
    trials: int = 0
    visits: int = 0
    value: float = 0.0
    closed: bool = False  # MCTS: no further expansion of this node
    # the verdict against ``base``: None until judged; ``pair`` the interleaved re-timing
    # (None when the screen did not call for one, or for evaluators that cannot re-time)
    accepted: Optional[bool] = None
    pair: Optional[Paired] = None
    rel: Optional[float] = None  # estimated time relative to the root (product of the ratios)
    refreshed: bool = False  # a timing from another process measured again in this one

    index: Optional[int] = None  # which evaluation this was (1, 2, ...; the root 0)
    queued: bool = False  # handed out for evaluation (a multi-step proposal's middle is not, until proposed alone)
    #: re-time next to the base only if the screen timing is within min_gain of this (ms; None: always)
    gate_ms: Optional[float] = None

    @property
    def fingerprint(self) -> str:
        return self.program.fingerprint

    @property
    def base(self) -> Optional["Node"]:
        """The nearest evaluated ancestor (the parent, unless the parent is the unevaluated
        middle of a two-step proposal)."""
        n = self.parent
        while n is not None and n.evaluation is None:
            n = n.parent
        return n

    @property
    def depth(self) -> int:
        return len(self.steps)

    @property
    def moves(self) -> int:
        """Proposals from the root to this node: a multi-step proposal (-O2's pipeline of 16
        steps, an enabler and its payoff) is one move. ``max_depth`` bounds moves, not steps:
        counted in steps, the -O2 candidate was already deeper than the limit and was never
        expanded, so no search could improve on -O2."""
        n, k = self, 0
        while n.parent is not None:
            k += n.queued or n.evaluation is not None
            n = n.parent
        return k

    @property
    def ok(self) -> bool:
        return self.evaluation is not None and self.evaluation.ok and self.ms is not None

    @property
    def ms(self) -> Optional[float]:
        e = self.evaluation
        if e is None or not e.ok or e.timing is None or e.timing.median_ms is None:
            return None
        return float(e.timing.median_ms)

    @property
    def spread(self) -> float:
        e = self.evaluation
        t = e.timing if e is not None else None
        if t is None or not t.median_ms:
            return 0.0
        runs = [float(r) for r in (t.runs or ())]
        if len(runs) < 2:
            return 0.0 if t.std_ms is None else float(t.std_ms) / float(t.median_ms)
        # a robust relative standard error of the median: one run disturbed by a neighbour on
        # a shared machine must not make every later comparison "within noise"
        med = float(t.median_ms)
        mad = sorted(abs(r - med) for r in runs)[len(runs) // 2]
        return 1.4826 * mad / med / math.sqrt(len(runs))

    def text(self) -> str:
        return self.program.print(PRETTY)


@dataclass
class SearchResult:
    root: Node
    best: Node
    nodes: list
    history: list  # [(evaluations so far, best speedup so far)]
    evaluations: int  # candidate evaluations, replayed ones included
    fresh: int  # evaluations run by this process
    seconds: float
    stopped: str  # why the search ended
    seed: int
    options: SearchOptions
    warnings: list = field(default_factory=list)
    # per proposer that keeps statistics (the LLM proposers: calls, tokens, rejected answers by reason)
    proposer_stats: dict = field(default_factory=dict)

    # the final interleaved timing of the best against the root (None: not run, e.g. no
    # step beat the root, interrupted, or an evaluator that cannot re-time)
    confirmation: Optional[Paired] = None
    # the best node before the confirmation (the result's best is the root when it failed)
    candidate: Optional["Node"] = None
    timed_on: str = "local"  # where the timings were measured ("local", rpc://HOST:PORT/KEY)
    # the learned cost model of ``--algo evolve`` (records, fits, held-out Spearman); None for the others
    model: Optional[dict] = None

    @property
    def speedup(self) -> float:
        if self.best is self.root:
            return 1.0
        if self.confirmation is not None:
            return self.confirmation.speedup  # root_ms / best_ms: the quotient of the times printed with it
        if self.root.ms and self.best.ms:
            return self.root.ms / self.best.ms
        return 1.0 / self.best.rel if self.best.rel else 1.0

    @property
    def speedup_spread(self) -> Optional[float]:
        """Relative spread of the reported speedup (None when it was not re-measured)."""
        return self.confirmation.spread if self.confirmation is not None and self.best is not self.root else None

    @property
    def root_ms(self) -> Optional[float]:
        """The root's time, from the confirmation when there was one."""
        return self.confirmation.a_ms if self.confirmation is not None else self.root.ms

    @property
    def best_ms(self) -> Optional[float]:
        if self.best is self.root:
            return self.root_ms
        return self.confirmation.b_ms if self.confirmation is not None else self.best.ms

    def table(self) -> list[str]:
        """The final table (input, best, speedup with its spread, steps), one line each."""
        sp = self.speedup_spread
        how = (f" +-{100 * sp:.2g}% (interleaved re-timing, {self.confirmation.rounds} rounds)" if sp is not None
               else "")
        lines = [f"  {'input (-O0)':14} {self.root_ms:.4g} ms"]
        for source in ("o1", "o2"):
            lines.extend(self._pipeline_line(source))
        if self.candidate is not None and self.best is self.root:
            lines.append(f"  {'best found':14} not confirmed against the input "
                         f"(x{self.confirmation.speedup:.3g} +-{100 * self.confirmation.spread:.2g}%): kept the input"
                         if self.confirmation is not None else f"  {'best found':14} not confirmed: kept the input")
        lines.append(f"  {'best':14} {self.best_ms:.4g} ms  x{self.speedup:.3g}{how}  ({len(self.steps)} step(s))")
        return lines

    def _pipeline_line(self, source: str) -> list[str]:
        """The table line of the fixed pipeline ``source`` (``o1``/``o2``) if it was a candidate."""
        label = f"-O{source[1]}"
        n = next((n for n in self.nodes if n.evaluation is not None and n.parent is not None
                  and getattr(n.proposal, "source", None) == source), None)
        if n is None:
            return []
        if not n.ok:
            return [f"  {label:14} failed: {n.evaluation.error_kind}"]
        # the same program as the best is re-timed below: say so, or two times of one program
        # read as two results
        same = ", the best's program" if n.fingerprint == self.best.fingerprint else ""
        if n.pair is not None and n.base is self.root:
            return [f"  {label:14} {n.pair.b_ms:.4g} ms  x{n.pair.speedup:.3g} +-{100 * n.pair.spread:.2g}% "
                    f"(interleaved with the input at {n.pair.a_ms:.4g} ms{same})"]
        return [f"  {label:14} {n.ms:.4g} ms  x{self.root.ms / n.ms:.3g} (one timing"
                f"{'' if n.accepted else ', not beyond the noise of the input'}{same})"]

    @property
    def steps(self) -> list:
        return list(self.best.steps)

    def trajectory(self) -> list[dict]:
        """The winning path, step by step: rationale and measured effect."""
        path = []
        n = self.best
        while n.parent is not None:
            path.append(n)
            n = n.parent
        out = []
        for node in reversed(path):
            p = node.proposal
            out.append({"step": node.step.to_json(), "text": str(node.step), "proposer": getattr(p, "source", None),
                        "direction": direction_of(node.step.name), "rationale": getattr(p, "rationale", ""),
                        "predicted": getattr(p, "prior", None), "ms": node.ms,
                        "effect": (node.base.ms / node.ms) if node.base and node.base.ms and node.ms else None,
                        "speedup": (self.root.ms / node.ms) if self.root.ms and node.ms else None,
                        "numerics": node.numerics, "fingerprint": node.fingerprint})
        return out

    def to_json(self) -> dict:
        return {"kernel": self.root.program.kernel.name, "algo": self.options.algo, "seed": self.seed,
                "proposers": list(self.options.proposers), "target": self.options.target,
                "evaluations": self.evaluations, "fresh_evaluations": self.fresh, "seconds": round(self.seconds, 3),
                "stopped": self.stopped, "root_ms": self.root_ms, "best_ms": self.best_ms, "speedup": self.speedup,
                "speedup_spread": self.speedup_spread,
                "confirmation": None if self.confirmation is None else self.confirmation.to_json(),
                "timed_on": self.timed_on,
                "best_fingerprint": self.best.fingerprint, "steps": [s.to_json() for s in self.best.steps],
                "trajectory": self.trajectory(), "history": [list(h) for h in self.history],
                "warnings": list(self.warnings), "proposer_stats": self.proposer_stats, "model": self.model,
                "candidates": [{"id": n.id, "index": n.index, "parent": n.parent.id if n.parent else None,
                                "step": str(n.step) if n.step else None, "ok": n.ok,
                                "error_kind": n.evaluation.error_kind if n.evaluation else None,
                                "ms": n.ms, "accepted": n.accepted, "rel": n.rel,
                                "paired": None if n.pair is None else n.pair.to_json()}
                               for n in self.nodes if n.evaluation is not None]}


class SearchError(Exception):
    """The search cannot start (the root does not build or verify, bad state file...)."""


def _worse(a: str, b: str) -> str:
    ia = NUMERICS_ORDER.index(a) if a in NUMERICS_ORDER else len(NUMERICS_ORDER)
    ib = NUMERICS_ORDER.index(b) if b in NUMERICS_ORDER else len(NUMERICS_ORDER)
    return a if ia >= ib else b


class Search:
    """One search from ``root`` (a Program). ``evaluator`` has ``evaluate_batch([(text,
    numerics)]) -> [Evaluation]`` (a :class:`~leirc.search.evaluate.CandidateEvaluator`
    by default); ``memory`` is an HTAM :class:`~leirc.search.memory.Memory`; ``store`` a
    :class:`~leirc.search.store.SearchStore`."""

    def __init__(self, root: Program, options: SearchOptions = SearchOptions(), *, evaluator=None, memory=None,
                 store=None, proposer=None, log: Optional[Callable[[str], None]] = None, progress: Optional[bool] = None):
        self.options = options
        self.log = log or (lambda msg: None)
        self.warnings: list[str] = []
        self.rng = random.Random(options.seed)
        self.memory = memory
        if self.memory is None:
            from .memory import Memory

            self.memory = Memory(None, target=options.target)
        self.store = store
        self.root_text = root.print(PRETTY)
        self._own_evaluator = evaluator is None
        if evaluator is None:
            from .evaluate import CandidateEvaluator

            remote = None
            if options.rpc is not None:
                from ..lower.device import RemoteTimer

                remote = RemoteTimer(options.rpc, options.rpc_key, target=options.target, timeout=options.timeout)
            evaluator = CandidateEvaluator(self.root_text, target=options.target, threads=options.threads,
                                           workers=options.workers, cache_dir=options.cache_dir,
                                           timeout=options.timeout, remote=remote)
        self.evaluator = evaluator
        self.timed_on = getattr(evaluator, "timed_on", "local")
        if hasattr(evaluator, "pin"):
            evaluator.pin(self.root_text)  # the final confirmation times the best against it
        self._final: Optional[Node] = None
        self.model_stats: Optional[dict] = None  # set by algorithms with a learned model (evolve)
        self._candidate: Optional[Node] = None
        self._confirmation: Optional[Paired] = None
        # which process measured a stored timing (timings of other runs are re-measured)
        self.run_id = f"{os.getpid()}-{time.time_ns()}"
        self.proposer = proposer if proposer is not None else self._proposer()
        self.nodes: list[Node] = []
        self.by_fp: dict[str, Node] = {}
        self.root = self._node(root, None, None, None, "bitwise")
        self.evaluations = 0
        self.fresh = 0
        self.history: list = []
        self._t0 = time.monotonic()
        self._fresh_s = 0.0
        self.stopped = ""
        show = progress if progress is not None else sys.stderr.isatty()
        self._bar = None
        if show:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=options.budget, desc=f"search {root.kernel.name}", unit="eval", file=sys.stderr,
                                 leave=False)
            except ImportError:  # the progress bar is a nicety
                self._bar = None

    # -- construction -----------------------------------------------------------------
    def _proposer(self):
        from .proposers import CombinedProposer, HTAMProposer, MenuProposer, PipelineProposer, ReuseProposer

        o = self.options
        menu = MenuProposer(o.target, threads=o.threads, keep=o.keep, grid=o.grid,
                            allow_approximate=o.allow_approximate, strategies=o.strategies)
        parts = []
        for name in o.proposers:
            if name == "reuse":
                parts.append(ReuseProposer(self.memory))
            elif name == "htam":
                parts.append(HTAMProposer(self.memory, menu, temperature=o.temperature))
            elif name in ("o1", "o2"):
                parts.append(PipelineProposer(o.target, menu, level=int(name[1]),
                                              variants=o.tile_variants if name == "o2" else 1))
            elif name == "llm":
                from .llm_proposers import build_llm_proposer

                parts.append(build_llm_proposer(o, self.memory, menu, log=self.log))
            else:
                parts.append(menu)
        # reuse first: a replay that won elsewhere is the cheapest good guess
        parts.sort(key=lambda p: {"reuse": 0, "o2": 1, "o1": 1, "llm": 2, "htam": 3, "menu": 4}.get(p.name, 2))
        self._parts = parts
        return parts[0] if len(parts) == 1 else CombinedProposer(parts)

    def _node(self, program, parent, step, proposal, numerics) -> Node:
        n = Node(len(self.nodes), program, parent, step,
                 (parent.steps + (step,)) if parent is not None else (),
                 (parent.directions + (direction_of(step.name),)) if parent is not None else (),
                 numerics, parent.root_program if parent is not None else program, proposal)
        self.nodes.append(n)
        self.by_fp[n.fingerprint] = n
        return n

    # -- budgets -----------------------------------------------------------------------
    def exhausted(self, pending: int = 0) -> bool:
        o = self.options
        if o.budget is not None and self.evaluations + pending >= o.budget:
            self.stopped = self.stopped or f"budget of {o.budget} evaluations spent"
            return True
        if o.time_limit is not None and self._fresh_s >= o.time_limit:
            self.stopped = self.stopped or f"time limit of {o.time_limit:g} s reached"
            return True
        return False

    # -- expansion and evaluation ----------------------------------------------------------
    def expand(self, node: Node, k: int) -> list[Node]:
        """Up to ``k`` new children of ``node`` (never a program already seen). A proposal
        of several steps (an enabler and its payoff) gives unevaluated intermediate nodes;
        its child is compared with ``node``."""
        out: list[Node] = []
        props = self.proposer.propose(node, k + len(node.tried), self.rng)
        taken = 0  # proposals that count against k (a pipeline's baseline candidates do not)
        for p in props:
            if taken >= k and not p.extra:
                continue
            steps = p.steps
            if steps in node.tried:
                continue
            node.tried.add(steps)
            cur, last, numerics = node, (node.step.name if node.step is not None else None), node.numerics
            try:
                for i, st in enumerate(steps):
                    if undoes(last, st.name):
                        raise NotApplicable(st.name, "undoes the previous step")
                    rw = cur.program.apply(st)
                    numerics = _worse(numerics, rw.numerics)
                    fp = rw.program.fingerprint
                    if i + 1 < len(steps):
                        cur = self.by_fp.get(fp) or self._node(rw.program, cur, st, p, numerics)
                    elif fp not in self.by_fp:
                        kid = self._node(rw.program, cur, st, p, numerics)
                        kid.queued = True
                        out.append(kid)
                        taken += not p.extra
                    elif self._unjudged_middle(self.by_fp[fp]):
                        # the middle of an earlier multi-step proposal (-O1's first step, an
                        # enabler) proposed on its own: it was never evaluated, so "seen" must not
                        # hide it (on relu this hid the menu's best step, loop_parallelization)
                        mid = self.by_fp[fp]
                        mid.proposal, mid.queued = p, True
                        out.append(mid)
                        taken += not p.extra
                    last = st.name
            except NotApplicable:
                continue
        return out

    def add_candidate(self, steps, proposal, parent: Optional[Node] = None) -> Optional[Node]:
        """A child of ``parent`` (the root by default) reached by the whole trace ``steps`` at
        once (a design-space point, :mod:`leirc.search.evolve`): each step applied through
        ``Program.apply``, the node's steps the parent's plus all of them. None when the
        program was seen already or a step does not apply."""
        parent = parent or self.root
        cur, numerics = parent.program, parent.numerics
        try:
            for st in steps:
                rw = cur.apply(st)
                numerics = _worse(numerics, rw.numerics)
                cur = rw.program
        except NotApplicable:
            return None
        if not steps or cur.fingerprint in self.by_fp:
            return None
        n = Node(len(self.nodes), cur, parent, steps[-1], parent.steps + tuple(steps),
                 parent.directions + tuple(direction_of(st.name) for st in steps), numerics,
                 parent.root_program, proposal)
        n.queued = True
        self.nodes.append(n)
        self.by_fp[n.fingerprint] = n
        return n

    @staticmethod
    def _unjudged_middle(n: Node) -> bool:
        return n.evaluation is None and not n.queued and n.parent is not None

    def evaluate(self, nodes: list[Node]) -> list[Node]:
        """Evaluate ``nodes`` within the budget; returns those evaluated."""
        done: list[Node] = []
        chunk = max(1, int(getattr(self.evaluator, "workers", 1)))
        for i in range(0, len(nodes), chunk):
            part = []
            for n in nodes[i:i + chunk]:
                if self.exhausted(len(part)):
                    break
                part.append(n)
            if not part:
                break
            self._evaluate(part)
            done.extend(part)
            if len(part) < len(nodes[i:i + chunk]):
                break
        return done

    def _evaluate(self, part: list[Node]) -> None:
        fresh = []
        for n in part:
            d = self.store.evaluation(n.fingerprint) if self.store is not None else None
            if d is not None:
                n.evaluation, n.replayed = Evaluation.from_json(d, cached=True), True
            else:
                fresh.append(n)
        if fresh:
            t0 = time.monotonic()
            evs = self.evaluator.evaluate_batch([(n.text(), n.numerics) for n in fresh])
            self._fresh_s += time.monotonic() - t0
            for n, ev in zip(fresh, evs):
                n.evaluation = ev
                self.fresh += 1
                if self.store is not None:
                    self.store.add_evaluation(n.fingerprint, n.base.fingerprint if n.base else None,
                                              [s.to_json() for s in n.steps], self._stored(ev))
        for n in part:
            self.evaluations += 1
            n.index = self.evaluations
            self._log_evaluation(n)
            base = n.base
            if base is not None:
                self._judge(n)
                ratio = n.pair.ratio if n.pair is not None else ((n.ms / base.ms) if n.ok and base.ms else None)
                gain = -math.log(ratio) if ratio else None
                m = n
                while m is not base:  # each step of a multi-step proposal shares the credit
                    self.memory.record(m.parent.directions, m.step.name, gain, persist=not n.replayed)
                    m = m.parent
                self.proposer.observe(base, n.step, n.evaluation)
            self._report(n)

    def _stored(self, ev: Evaluation) -> dict:
        """An evaluation as the state file keeps it: with which run measured its timing."""
        return ev.to_json() | {"measured": {"run": self.run_id, "at": time.time(), "on": self.timed_on}}

    def _log_evaluation(self, n: Node) -> None:
        e = n.evaluation
        what = f"{n.ms:.4g} ms (x{self.root.ms / n.ms:.3g})" if n.ok and self.root.ms else f"failed: {e.error_kind}"
        self.log(f"[{self.evaluations}] {' -> '.join(str(s) for s in n.steps) or 'root'}: {what}"
                 f"{' (replayed)' if n.replayed else ''}")

    def _report(self, n: Node) -> None:
        best = self.best()
        sp = 1.0 / best.rel if best.rel else 1.0
        self.history.append((self.evaluations, sp))
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix_str(f"best x{sp:.3g}")

    def _judge(self, n: Node) -> None:
        """Decide whether ``n`` improves on its base (see the module docstring); sets
        ``n.accepted``, ``n.pair`` and ``n.rel``, and records the verdict in the store."""
        base = n.base
        if not n.ok or not base.ok:
            n.accepted = False
            return
        pairing = hasattr(self.evaluator, "paired")
        stored = self.store.pair(n.fingerprint, base.fingerprint) if self.store is not None and n.replayed else None
        if stored is not None:
            n.accepted = bool(stored["accepted"])
            n.pair = Paired.from_json(stored["paired"]) if stored.get("paired") else None
        elif not pairing:  # an evaluator that cannot re-time: the two timings' own spreads
            n.accepted = self.improves_single(n, base)
        else:
            if not n.replayed:
                self._refresh(base)
            looks = n.ms < base.ms * (1.0 - self.options.min_gain) or self._promising(n, base)
            # a candidate of a search that compares against the best so far (evolve: every
            # candidate's base is the root) is re-timed only when its screen timing could beat it
            if n.gate_ms is not None and n.ms >= n.gate_ms * (1.0 + self.options.min_gain):
                looks = False
            if looks:
                n.pair = self._paired(base.text(), n.text(), PAIR_ROUNDS)
            n.accepted = n.pair is not None and n.pair.beats(self.options.min_gain, MAX_NOISE)
            if self.store is not None:
                self.store.add_pair(n.fingerprint, base.fingerprint,
                                    {"accepted": n.accepted, "paired": None if n.pair is None else n.pair.to_json(),
                                     "screen": [base.ms, n.ms], "run": self.run_id})
            if n.pair is not None:
                self.log(f"  re-timed next to its parent ({n.pair.rounds} rounds): x{n.pair.speedup:.3g} "
                         f"+-{100 * n.pair.spread:.2g}% -> {'accepted' if n.accepted else 'within the noise'}")
        ratio = n.pair.ratio if n.pair is not None else n.ms / base.ms
        n.rel = base.rel * ratio if base.rel is not None else None
        # only accepted nodes become parents (MCTS expands any child that ran)
        if not n.accepted and self.options.algo != "mcts" and hasattr(self.evaluator, "release"):
            self.evaluator.release(n.text())

    @staticmethod
    def _promising(n: Node, base: Node) -> bool:
        """A step the model expects to pay off clearly deserves a re-timing next to its parent
        even when its one timing did not look faster: on a shared 2-core machine a 2-thread
        kernel's single timing is bimodal (the second core free or not), which once kept every
        search on relu from trying -O1's parallel + vectorize, 1.4-1.8x faster interleaved."""
        prior = getattr(n.proposal, "prior", None)
        return (isinstance(prior, (int, float)) and prior >= PROMISING_PRIOR
                and n.ms < base.ms * (1.0 + PROMISING_SLACK))

    def _paired(self, text_a: str, text_b: str, rounds: int) -> Optional[Paired]:
        """Time a and b alternately; a comparison that looks like a gain but is not yet out of
        the noise gets as many rounds again, once (a busy machine needs more rounds)."""
        t0 = time.monotonic()
        try:
            p = self.evaluator.paired(text_a, text_b, rounds)
            if p is not None and not p.beats(self.options.min_gain, MAX_NOISE) and \
                    p.ratio < 1.0 - self.options.min_gain:
                more = self.evaluator.paired(text_a, text_b, rounds)
                if more is not None:
                    p = p.merged(more)
            return p
        finally:
            self._fresh_s += time.monotonic() - t0

    def _refresh(self, node: Node) -> None:
        """A timing measured by another process is measured again before a new child is
        compared with it."""
        if node.refreshed or not (node.replayed or (node.evaluation is not None and node.evaluation.cached)):
            return
        if not hasattr(self.evaluator, "retime"):
            return
        t0 = time.monotonic()
        tr = self.evaluator.retime(node.text())
        self._fresh_s += time.monotonic() - t0
        node.refreshed = True
        if tr.ok:
            old = node.ms
            node.evaluation = replace(node.evaluation, timing=tr, cached=False)
            self.log(f"  timed again in this run: {old:.4g} -> {node.ms:.4g} ms")

    def improves(self, child: Node, parent: Node) -> bool:
        """The verdict of ``child`` against ``parent`` (its base: judged once, see
        :meth:`_judge`)."""
        if parent is child.base and child.accepted is not None:
            return child.accepted
        return self.improves_single(child, parent)

    def improves_single(self, child: Node, parent: Node) -> bool:
        """Whether one timing of each says ``child`` is faster beyond both timings' spreads."""
        if not child.ok or not parent.ok:
            return False
        noise = min(MAX_NOISE, max(self.options.min_gain, 2.0 * math.hypot(child.spread, parent.spread)))
        return child.ms < parent.ms * (1.0 - noise)

    @staticmethod
    def _rank(n: Node) -> tuple:
        """Order of preference: the estimated time relative to the root."""
        return (n.rel if n.rel is not None else math.inf, n.id)

    def best(self) -> Node:
        """The accepted node with the best speedup estimate (the root when none)."""
        if getattr(self, "_final", None) is not None:
            return self._final
        ok = [n for n in self.nodes if n.accepted and n.rel is not None and n.rel < 1.0]
        if not ok or not self.root.ok:
            return self.root
        return min(ok, key=self._rank)

    def checkpoint(self, frontier) -> None:
        if self.store is not None:
            self.store.checkpoint(evaluations=self.evaluations, rng_state=self.rng.getstate(),
                                  frontier=[n.fingerprint for n in frontier])

    # -- the run -----------------------------------------------------------------------
    def run(self) -> SearchResult:
        try:
            self._evaluate_root()
            try:
                ALGORITHM_TABLE[self.options.algo](self)
                if not self.stopped:
                    self.stopped = "no untried proposal left"
                self._confirm()
            except KeyboardInterrupt:
                self.stopped = "interrupted (Ctrl-C): best so far kept"
        finally:
            if self._bar is not None:
                self._bar.close()
            if self._own_evaluator:
                self.evaluator.close()
            stats = self._proposer_stats()
        res = SearchResult(self.root, self.best(), self.nodes, self.history, self.evaluations, self.fresh,
                           time.monotonic() - self._t0, self.stopped, self.options.seed, self.options, self.warnings,
                           stats, self._confirmation, self._candidate, self.timed_on, self.model_stats)
        if self.store is not None:
            self.store.put(status="done" if "interrupted" not in self.stopped else "interrupted",
                           result={"best": res.best.fingerprint, "speedup": res.speedup,
                                   "speedup_spread": res.speedup_spread,
                                   "confirmation": None if res.confirmation is None else res.confirmation.to_json(),
                                   "steps": [s.to_json() for s in res.steps]})
        self._remember(res)
        return res

    def _proposer_stats(self) -> dict:
        """Statistics of the proposers that keep them (and closes those that hold a client)."""
        out = {}
        for p in getattr(self, "_parts", None) or [self.proposer]:
            if hasattr(p, "stats"):
                out[p.name] = p.stats()
            if hasattr(p, "close"):
                p.close()
        return out

    def _confirm(self) -> None:
        """Time the best against the root, interleaved: that ratio is the reported speedup,
        and a best that does not beat the root beyond its noise is not kept."""
        best = self.best()
        if best is self.root or not hasattr(self.evaluator, "paired"):
            return
        self._candidate = best
        p = self._paired(self.root_text, best.text(), CONFIRM_ROUNDS)
        self._confirmation = p
        if p is not None and p.beats(self.options.min_gain, MAX_NOISE):
            self._final = best
            self.log(f"[confirm] best against the input, {p.rounds} interleaved rounds: x{p.speedup:.3g} "
                     f"+-{100 * p.spread:.2g}% ({p.a_ms:.4g} -> {p.b_ms:.4g} ms)")
        else:
            self._final = self.root
            what = f"x{p.speedup:.3g} +-{100 * p.spread:.2g}%" if p is not None else "timing failed"
            self.log(f"[confirm] the best ({' -> '.join(str(s) for s in best.steps)}) does not beat the input "
                     f"beyond the noise when timed next to it ({what}): keeping the input")

    def _evaluate_root(self) -> None:
        r = self.root
        r.rel, r.index = 1.0, 0
        d = self.store.evaluation(r.fingerprint) if self.store is not None else None
        if d is not None:
            r.evaluation, r.replayed = Evaluation.from_json(d, cached=True), True
        else:
            r.evaluation = self.evaluator.evaluate_batch([(self.root_text, None)])[0]
            if self.store is not None and r.evaluation.ok:
                self.store.add_evaluation(r.fingerprint, None, [], self._stored(r.evaluation))
        if not r.ok:
            e = r.evaluation
            raise SearchError(f"the program to optimize does not build, verify or time ({e.error_kind}): {e.error}")
        self.log(f"[root] {r.program.kernel.name}: {r.ms:.4g} ms")

    def _remember(self, res: SearchResult) -> None:
        """A winning trace goes to the memory for schedule reuse."""
        if res.best is res.root or self.memory is None or res.speedup <= 1.0:
            return
        from .reuse import portable, signature

        structure, sig = signature(self.root.program)
        try:
            steps = portable(self.root.program, res.steps)
        except NotApplicable as e:  # the steps replayed during the search: not expected
            self.warnings.append(f"the winning trace was not stored: {e}")
            return
        self.memory.add_trace(self.root.program.kernel.name, structure, sig, res.best.fingerprint, res.speedup, steps)

    # -- algorithms ----------------------------------------------------------------------
    def _greedy(self, branch: Optional[int] = None, patience: Optional[int] = None) -> None:
        o = self.options
        branch = branch or o.branch
        patience = o.patience if patience is None else patience
        cur, fails = self.root, 0
        while not self.exhausted() and cur.moves < o.max_depth:
            kids = self.expand(cur, branch)
            if not kids:
                return
            self.evaluate(kids)
            better = [c for c in kids if self.improves(c, cur)]
            self.checkpoint([cur] + kids)
            if better:
                cur, fails = min(better, key=self._rank), 0
            else:
                fails += 1
                if fails > patience:
                    self.stopped = f"early stop: {fails} expansions without improvement"
                    return

    def _chain(self) -> None:
        self._greedy(branch=1, patience=max(self.options.patience, 5))

    def _beam(self) -> None:
        o = self.options
        beam, stale = [self.root], 0
        best = self.root.rel
        while not self.exhausted():
            kids = []
            for p in beam:
                if p.moves < o.max_depth:
                    kids.extend(self.expand(p, o.branch))
            if not kids:
                return
            evaluated = self.evaluate(kids)
            accepted = [c for c in evaluated if self.improves(c, c.base)]
            beam = sorted(beam + accepted, key=self._rank)[:o.beam_width]
            self.checkpoint(beam)
            if beam[0].rel < best * (1.0 - o.min_gain):
                best, stale = beam[0].rel, 0
            else:
                stale += 1
                if stale > o.patience:
                    self.stopped = f"early stop: {stale} iterations without improvement"
                    return

    def _tree(self, lifo: bool) -> None:
        o = self.options
        frontier = deque([self.root])
        while frontier and not self.exhausted():
            node = frontier.pop() if lifo else frontier.popleft()
            if node.moves >= o.max_depth or node.trials > o.max_trials:
                continue
            node.trials += 1
            kids = self.expand(node, o.branch)
            if not kids:
                continue
            self.evaluate(kids)
            acc = sorted((c for c in kids if self.improves(c, node)), key=self._rank)
            if lifo:  # the node again after its children, the best child first
                frontier.append(node)
                frontier.extend(reversed(acc))
            else:
                frontier.extend(acc)
                frontier.append(node)
            self.checkpoint(list(frontier))

    def _bfs(self) -> None:
        self._tree(lifo=False)

    def _dfs(self) -> None:
        self._tree(lifo=True)

    def _mcts(self) -> None:
        """Step-TP's MCTS: UCB1 selection, one child per expansion, reward = speedup over the
        root (0 for a failed child), value ``(exp(reward - 1) - 1) * 10`` backed up."""
        o = self.options
        root = self.root
        while not self.exhausted():
            if self._dead(root):
                self.stopped = "the search tree is exhausted"
                return
            node = root
            while node.closed or len(node.children) >= o.branch:
                live = [c for c in node.children if not self._dead(c)]
                if not live:
                    break
                node = max(live, key=lambda c: (self._ucb(node, c), -c.id))
            kids = self.expand(node, 1) if not node.closed else []
            if not kids:
                node.closed = True
                continue
            child = kids[0]
            self.evaluate([child])
            if child.evaluation is None:
                return
            reward = (1.0 / child.rel) if child.ok and child.rel else 0.0
            if reward > 0:
                node.children.append(child)
                child.closed = child.moves >= o.max_depth
                v = (math.exp(reward - 1.0) - 1.0) * 10.0
                n = child
                while n is not None:
                    n.value += v
                    n.visits += 1
                    n = n.parent
            else:
                node.trials += 1
                node.closed = node.closed or node.trials > o.max_trials
            self.checkpoint([root] + root.children)

    def _dead(self, node: Node) -> bool:
        return node.closed and all(self._dead(c) for c in node.children)

    def _ucb(self, parent: Node, c: Node) -> float:
        if c.visits == 0:
            return math.inf
        return c.value / c.visits + self.options.mcts_c * math.sqrt(2.0 * math.log(max(parent.visits, 1)) / c.visits)


def _evolve(search: Search) -> None:
    from .evolve import evolve

    evolve(search)


#: the algorithms by name (``--algo``); each runs on a :class:`Search` until its budget or its
#: own stopping rule. ``constants.ALGORITHMS`` lists the same names for the CLI
ALGORITHM_TABLE: dict[str, Callable[[Search], None]] = {
    "beam": Search._beam, "greedy": Search._greedy, "bfs": Search._bfs, "dfs": Search._dfs,
    "mcts": Search._mcts, "chain": Search._chain, "evolve": _evolve,
}


def search(program: Program, options: SearchOptions = SearchOptions(), **kw) -> SearchResult:
    """Run one search (see :class:`Search`)."""
    return Search(program, options, **kw).run()


__all__ = ["ALGORITHMS", "ALGORITHM_TABLE", "PROPOSERS", "Node", "Search", "SearchError", "SearchOptions", "SearchResult", "search"]
