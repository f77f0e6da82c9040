"""``-O search``: the search as a driver :class:`~leirc.driver.Optimizer`, and its CLI
arguments.

    >>> opt = SearchOptimizer(SearchOptions(algo="beam", budget=32), out_dir="out")
    >>> opt.optimize(check_result, "llvm")      # -> Optimized(kernel, steps, log)

``add_search_arguments(parser)`` adds the flags of ``leirc build ... -O search``;
``search_options_from_args(ns)`` turns the parsed namespace into :class:`SearchOptions`.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from .constants import ALGORITHMS, DEFAULT_PROPOSERS, LLM_MODES, PROPOSERS

# the search machinery (engine, evaluator, verifier) is imported when a search runs, not when
# the CLI adds its flags

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(ms|s|m|min|h)?\s*")


def parse_duration(text: str) -> float:
    """``60``, ``60s``, ``2m``, ``1.5h`` -> seconds. Raises ValueError."""
    m = _DURATION.fullmatch(str(text))
    if not m:
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 2m, 1h)")
    unit = {"ms": 1e-3, None: 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}[m.group(2)]
    return float(m.group(1)) * unit


def default_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "leirc")


def add_search_arguments(p) -> None:
    """The flags of ``-O search`` (an argument group of ``p``)."""
    g = p.add_argument_group("search (-O search)")
    g.add_argument("--algo", choices=ALGORITHMS, default="beam", help="search algorithm (default: beam)")
    g.add_argument("--budget", type=int, default=None, metavar="N",
                   help="candidate evaluations (default: 32 unless --time-budget is given)")
    g.add_argument("--time-budget", default=None, metavar="DURATION",
                   help="wall-clock budget for evaluations, e.g. 60s, 5m")
    g.add_argument("--proposer", default=None, metavar="LIST",
                   help=f"comma-separated proposers among {', '.join(PROPOSERS)} (default: {','.join(DEFAULT_PROPOSERS)}"
                        ", plus llm when an endpoint is given; o1 = the -O1 pipeline as one first candidate; llm = "
                        "a model on an OpenAI-compatible endpoint, see --llm-*)")
    g.add_argument("--seed", type=int, default=0, help="seed of the search's random choices (recorded; default 0)")
    g.add_argument("--resume", action="store_true", help="continue the search recorded in the state file")
    g.add_argument("--search-state", default=None, metavar="FILE",
                   help="search state (SQLite; default: OUTDIR/NAME.search.sqlite, NAME as the build's other outputs)")
    g.add_argument("--memory", default=None, metavar="FILE",
                   help="HTAM memory (SQLite; default: ~/.cache/leirc/memory.sqlite; 'none': this run only)")
    g.add_argument("--eval-cache", default=None, metavar="DIR",
                   help="evaluation cache directory (default: ~/.cache/leirc; 'none': no disk cache)")
    g.add_argument("--workers", type=int, default=1, metavar="N", help="parallel builds (default 1)")
    g.add_argument("--rpc", default=None, metavar="HOST:PORT",
                   help="time the candidates on a server that TVM's RPC tracker at HOST:PORT hands out for --key "
                        "(verification stays local)")
    g.add_argument("--key", default=None, metavar="KEY", help="the device key of the RPC servers (with --rpc)")
    g.add_argument("--beam-width", type=int, default=4, metavar="K")
    g.add_argument("--branch", type=int, default=4, metavar="K", help="children proposed per expansion")
    g.add_argument("--dropout", type=float, default=1.0, metavar="P",
                   help="menu dropout: probability of keeping each menu option (default 1 = no dropout)")
    g.add_argument("--temperature", type=float, default=0.5, help="HTAM policy temperature (higher explores more)")
    g.add_argument("--tile-variants", type=int, default=3, metavar="N",
                   help="-O2 candidates at the root, one per register tile (default 3; 1: the target's default only)")
    g.add_argument("--strategies", default=None, metavar="NAMES",
                   help="comma-separated strategies the menu may use (default: all that fit the target)")
    g.add_argument("--allow-approximate", action="store_true",
                   help="also propose rewrites that are not equal in the reals (verified within tolerance)")
    g.add_argument("--json", action="store_true", help="print the search summary as JSON on standard output")
    add_llm_arguments(p)


def add_llm_arguments(p) -> None:
    """The flags that name an OpenAI-compatible endpoint (``-O search --proposer llm``,
    ``leirc suggest``). Values given here override those of ``--llm-config FILE``."""
    g = p.add_argument_group("LLM proposer (an OpenAI-compatible endpoint: vLLM, Ollama, llama.cpp, a hosted API)")
    g.add_argument("--llm-config", default=None, metavar="FILE",
                   help="TOML or JSON file with the fields below (base_url, models, weights, key_env, mode, ...)")
    g.add_argument("--llm-base-url", default=None, metavar="URL", help="e.g. http://localhost:8000/v1")
    g.add_argument("--llm-model", default=None, metavar="M[,M2]",
                   help="model name; several (comma-separated) share the work as an ensemble")
    g.add_argument("--llm-weights", default=None, metavar="W[,W2]",
                   help="ensemble weights, one per model (default: round-robin)")
    g.add_argument("--llm-key-env", default=None, metavar="VAR",
                   help="name of the environment variable that holds the API key (the key itself is never "
                        "logged, traced or cached)")
    g.add_argument("--llm-mode", default=None, choices=LLM_MODES,
                   help="steptp = Step-TP single step (default); autocomp = plan then implement; htam = the memory "
                        "picks the direction, the model ranks the strategies inside it")
    g.add_argument("--llm-cache", default=None, metavar="FILE",
                   help="prompt->response cache (SQLite; default ~/.cache/leirc/llm.sqlite; 'none': no cache)")
    g.add_argument("--llm-offline", action="store_true",
                   help="answer only from the cache (replays a recorded search without the endpoint)")
    g.add_argument("--llm-timeout", type=float, default=None, metavar="S", help="seconds per request (default 60)")
    g.add_argument("--llm-concurrency", type=int, default=None, metavar="N", help="requests in flight (default 4)")
    g.add_argument("--llm-stream", action="store_true", help="use streaming responses")


#: the --llm-* flags and the LLMConfig fields they set
_LLM_FLAGS = {"llm_base_url": "base_url", "llm_model": "models", "llm_weights": "weights", "llm_key_env": "key_env",
              "llm_mode": "mode", "llm_timeout": "timeout", "llm_concurrency": "concurrency"}


def llm_config_from_args(ns, *, seed: int = 0):
    """The :class:`leirc.llm.LLMConfig` the flags (and ``--llm-config``) describe, or None
    when they name no endpoint. Raises ValueError with a message for bad values."""
    given = {field: getattr(ns, flag) for flag, field in _LLM_FLAGS.items() if getattr(ns, flag, None) is not None}
    if getattr(ns, "llm_stream", False):
        given["stream"] = True
    if getattr(ns, "llm_offline", False):
        given["offline"] = True
    file = getattr(ns, "llm_config", None)
    if not given and not file:
        return None
    cache = getattr(ns, "llm_cache", None)
    given["cache"] = None if (cache or "").lower() == "none" else (cache or os.path.join(default_dir(), "llm.sqlite"))
    given.setdefault("seed", seed)
    from ..llm import LLMError, config_from

    try:
        config = config_from(given, file)
    except LLMError as e:
        raise ValueError(str(e)) from None
    # refused before any work: a search must not evaluate its root and then find it cannot ask
    if config.key_env and not config.offline and not os.environ.get(config.key_env):
        raise ValueError(f"the environment variable {config.key_env} (--llm-key-env) is not set: export it with "
                         "the API key")
    return config

def search_options_from_args(ns, *, target: Optional[str] = None, threads: Optional[int] = None):
    """:class:`SearchOptions` from a namespace parsed with :func:`add_search_arguments`.
    Raises ValueError with a message for bad values."""
    from .core import SearchOptions

    tl = parse_duration(ns.time_budget) if getattr(ns, "time_budget", None) else None
    budget = ns.budget if ns.budget is not None else (None if tl is not None else 32)
    if budget is not None and budget < 1:
        raise ValueError("--budget must be at least 1")
    mem = ns.memory
    memory = None if (mem or "").lower() == "none" else (mem or os.path.join(default_dir(), "memory.sqlite"))
    cache = ns.eval_cache
    cache_dir = None if (cache or "").lower() == "none" else (cache or default_dir())
    llm = llm_config_from_args(ns, seed=ns.seed)
    if ns.proposer is None:
        proposers = DEFAULT_PROPOSERS + (("llm",) if llm is not None else ())
    else:
        proposers = tuple(p.strip() for p in ns.proposer.split(",") if p.strip())
    if "llm" in proposers and llm is None:
        raise ValueError("--proposer llm needs an endpoint: --llm-base-url URL --llm-model M (or --llm-config FILE)")
    if llm is not None and "llm" not in proposers:
        raise ValueError("--llm-* options name an endpoint but --proposer does not include llm")
    return SearchOptions(algo=ns.algo, budget=budget, time_limit=tl,
                         proposers=proposers, seed=ns.seed, llm=llm,
                         target=target or getattr(ns, "target", "llvm") or "llvm",
                         threads=threads or getattr(ns, "threads", 2) or 2, workers=ns.workers,
                         beam_width=ns.beam_width, branch=ns.branch, keep=ns.dropout, temperature=ns.temperature,
                         tile_variants=ns.tile_variants,
                         allow_approximate=ns.allow_approximate, memory=memory,
                         strategies=tuple(x.strip() for x in ns.strategies.split(",") if x.strip())
                         if getattr(ns, "strategies", None) else None, state=ns.search_state,
                         resume=ns.resume, cache_dir=cache_dir, rpc=getattr(ns, "rpc", None),
                         rpc_key=getattr(ns, "key", None))


@dataclass
class SearchOptimized:
    """What the driver's ``optimize`` pass reads (the fields of ``leirc.driver.Optimized``;
    the search sits below the driver and does not import it)."""

    kernel: object
    steps: list = field(default_factory=list)
    log: list = field(default_factory=list)
    result: object = None  # the SearchResult


class SearchOptimizer:
    """The driver's ``-O search``. ``out_dir``: where the best LEIR, the trace, the JSON
    summary and the HTML report go (and the default state file)."""

    name = "-Osearch"  # leirc build names its outputs after it (KERNEL.Osearch.leir)

    def __init__(self, options=None, *, out_dir: Optional[str] = None,
                 log: Optional[Callable[[str], None]] = None, progress: Optional[bool] = None,
                 json_out=None, outputs=("leir", "trace", "json", "html"),
                 stem: Optional[Callable[[str], str]] = None):
        if options is None:
            from .core import SearchOptions

            options = SearchOptions()
        self.options = options
        self.out_dir = out_dir
        self.log = log or (lambda msg: None)
        self.progress = progress
        self.json_out = json_out
        self.output_kinds = tuple(outputs)
        #: kernel name -> the stem of its files in out_dir (leirc build: the same stem as the
        #: build's other outputs, ``MODEL`` for MODEL.py, ``FILE.KERNEL`` in a multi-kernel file)
        self.stem = stem or (lambda kernel: kernel)
        self.last = None  # the SearchResult of the latest kernel
        self.outputs: dict = {}

    def optimize(self, result, target: str) -> SearchOptimized:
        from ..engine.program import Program
        from .core import Search
        from .memory import Memory
        from .store import SearchStore

        o = self.options if self.options.target == target else replace(self.options, target=target)
        program = Program(result.kernel, result)
        name = result.kernel.name
        lines: list[str] = []

        def log(msg: str) -> None:
            lines.append(msg)
            self.log(msg)

        stem = self.stem(name)
        state = o.state or (os.path.join(self.out_dir, f"{stem}.search.sqlite") if self.out_dir else None)
        memory = Memory(o.memory, target=o.target, warn=log)
        store = SearchStore(state, warn=log) if state else None
        try:
            start_snapshot = store.start(o.config() | {"root": program.fingerprint}, resume=o.resume,
                                         memory_snapshot=memory.snapshot()) if store else None
            if start_snapshot is not None and o.resume:
                memory.restore(start_snapshot)
            res = Search(program, o, memory=memory, store=store, log=log, progress=self.progress).run()
        finally:
            memory.close()
            if store is not None:
                store.close()
        self.last = res
        for w in res.warnings:
            log(f"warning: {w}")
        log(f"search {name}: {res.evaluations} evaluations ({res.fresh} new) in {res.seconds:.1f} s, {res.stopped}")
        for line in res.table():  # the input, -O1 when proposed, the best: re-timed side by side
            log(line)
        from .report import evidence_line, evidence_of

        if res.best is not res.root:
            log(evidence_line(res))  # proven (legal by construction) or tested (verification only)
        if self.out_dir:
            from .report import write_outputs

            self.outputs[name] = write_outputs(res, self.out_dir, stem, self.output_kinds)
            if "html" in self.outputs[name]:
                log(f"  report: {self.outputs[name]['html']}")
        if self.json_out is not None:
            import json

            d = res.to_json()
            d["evidence"] = evidence_of(res)
            print(json.dumps(d, indent=2, default=str), file=self.json_out)
        return SearchOptimized(res.best.program.kernel, list(res.steps), lines, res)


def optimizer_from_args(ns, *, target: str = "llvm", threads: int = 2, out_dir: Optional[str] = None,
                        stem: Optional[Callable[[str], str]] = None) -> SearchOptimizer:
    """What ``leirc build -O search`` builds from its parsed arguments (``stem``: kernel name ->
    the stem of its output files)."""
    # leirc build writes the optimized program and its trace itself: the search adds the
    # summary JSON and the report
    return SearchOptimizer(search_options_from_args(ns, target=target, threads=threads), out_dir=out_dir,
                           log=lambda m: print(m, file=sys.stderr) if not getattr(ns, "json", False) else None,
                           json_out=sys.stdout if getattr(ns, "json", False) else None, outputs=("json", "html"),
                           stem=stem)


__all__ = ["SearchOptimizer", "SearchOptimized", "add_search_arguments", "add_llm_arguments", "llm_config_from_args", "search_options_from_args", "parse_duration",
           "optimizer_from_args"]
