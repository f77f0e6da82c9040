"""``leirc tune PATH... -O search --budget N [--cluster ADDRESS] -o OUT``: tune many kernels.

Every kernel of the inputs (``.leir`` files, directories, KernelBench-format ``.py``
modules) gets one verified ``-O search`` (:mod:`leirc.cluster.tune`), on local worker
processes or a Ray cluster; the results go to ``OUT/tune.sqlite`` (one row per kernel),
``OUT/results.md`` (kernel, -O2 time, best time, speedup over -O2, steps, verified) and
``OUT/KERNEL.best.leir``. A killed run continues with ``--resume``.

Exit codes: 0 every kernel tuned, 1 inputs that did not load or kernels whose search
failed, 2 usage or I/O error (a cluster flag without the ``leirc[cluster]`` extra
included), 130 interrupted (what was saved is reported; ``--resume`` continues).
"""

from __future__ import annotations

import sys

from .common import add_target_argument


def register(sub) -> None:
    p = sub.add_parser("tune", help="tune many kernels with -O search (locally or on a Ray cluster)",
                       description="Run a verified -O search on every kernel of the inputs and write one results "
                                   "database and one table (docs/cluster.md).")
    p.add_argument("paths", nargs="+", metavar="PATH", help=".leir files, KernelBench-format .py modules, or "
                                                             "directories holding them")
    p.add_argument("-O", dest="opt", default="search", choices=("search",), help="the optimizer (search)")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="results directory")
    p.add_argument("--budget", type=int, default=8, metavar="N", help="candidate evaluations per kernel (default 8)")
    p.add_argument("--time-budget", default=None, metavar="DURATION", help="wall-clock budget per kernel, e.g. 60s")
    p.add_argument("--algo", default="beam", help="search algorithm (default beam)")
    p.add_argument("--proposer", default=None, metavar="LIST", help="proposers (default: the search's)")
    p.add_argument("--strategies", default=None, metavar="NAMES", help="strategies the menu may use")
    p.add_argument("--seed", type=int, default=0)
    add_target_argument(p, kinds=("llvm",), default="llvm")
    p.add_argument("--threads", type=int, default=2, help="threads of each timed kernel (default 2)")
    p.add_argument("--workers", type=int, default=1, metavar="W",
                   help="local searches at once (default 1; 0: in this process); with --cluster local, its CPUs")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run the searches on a Ray cluster: local, auto, ray://HOST:PORT or HOST:PORT "
                        "(needs the extra leirc[cluster])")
    p.add_argument("--resume", action="store_true", help="continue the run recorded in OUT")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=run)


def _usage(msg: str):
    from .common import CliError

    return CliError(msg, 2, kind="usage")


def run(args) -> int:
    from ..cluster import ClusterError, ray_available
    from ..cluster.executor import check_address
    from ..cluster.tune import TuneError, TuneOptions, tune
    from ..search.constants import ALGORITHMS, PROPOSERS
    from ..search.optimizer import parse_duration
    from .common import CliError, json_document, print_json

    if args.budget < 1:
        raise _usage("--budget must be at least 1")
    if args.threads < 1:
        raise _usage("--threads must be at least 1")
    if args.algo not in ALGORITHMS:
        raise _usage(f"--algo must be one of {', '.join(ALGORITHMS)}, got {args.algo!r}")
    proposers = None
    if args.proposer:
        proposers = tuple(p.strip() for p in args.proposer.split(",") if p.strip())
        bad = [p for p in proposers if p not in PROPOSERS or p == "llm"]
        if bad or not proposers:
            raise _usage(f"--proposer: unknown or unsupported here: {','.join(bad) or args.proposer!r} "
                         f"(combine {', '.join(p for p in PROPOSERS if p != 'llm')})")
    try:
        limit = parse_duration(args.time_budget) if args.time_budget else None
    except ValueError as e:
        raise _usage(f"--time-budget: {e}") from None
    if args.cluster:
        try:
            check_address(args.cluster)
        except ClusterError as e:
            raise _usage(str(e)) from None
        if not ray_available():
            raise CliError("--cluster needs Ray: install the extra with pip install 'leirc[cluster]'", 2,
                           kind="environment")
    strategies = tuple(sorted(s.strip() for s in args.strategies.split(",") if s.strip())) if args.strategies else None
    opts = TuneOptions(budget=args.budget, algo=args.algo, seed=args.seed, proposers=proposers, target=args.target,
                       threads=args.threads, strategies=strategies, time_limit=limit)
    log = (lambda m: None) if args.quiet or args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    try:
        s = tune(args.paths, args.out, opts, workers=args.workers, cluster=args.cluster, resume=args.resume,
                 progress=False if args.quiet or args.json else None, log=log)
    except TuneError as e:
        raise CliError(str(e), 2, kind="io") from None
    except ClusterError as e:
        raise CliError(str(e), 2, kind="environment") from None
    status = 130 if s.get("interrupted") else (1 if s["problems"] or s["failed"] else 0)
    if args.json:
        print_json(json_document("tune", status == 0, **s))
    else:
        with open(s["table"], encoding="utf-8") as f:
            print(f.read(), end="")
        ex = s.get("executor")
        if ex and not args.quiet:
            print(f"{ex['done']} search(es) on {ex['where']} in {ex['seconds']} s: {ex['failed']} failed, "
                  f"{ex['retried']} retried; per node: "
                  + ", ".join(f"{n} {c}" for n, c in ex["per_node"].items()), file=sys.stderr)
    for p in s["problems"]:
        print(f"leirc: {p}", file=sys.stderr)
    if s.get("interrupted"):
        print(f"leirc tune: interrupted: {s['written_this_run']} kernel(s) saved by this run, {s['tuned']} of "
              f"{s['kernels']} in {s['database']}; rerun with --resume to continue", file=sys.stderr)
        exec("pass")  # noqa: S102 - clears CPython's memory of the caught Ctrl-C (see cli.main.interrupted)
    return status


def main(argv=None) -> int:
    """``python -m leirc.cli.cmd_tune ARGS`` = ``leirc tune ARGS``."""
    from .main import main as leirc_main

    return leirc_main(["tune", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
