"""``leirc dataset gen|merge|filter|export|stats``: Step-TP step-level datasets.

``gen`` writes verified one-step records (:mod:`leirc.dataset.generate`) into ``--out``
(``dataset.sqlite``, exported as ``records.jsonl`` and ``rejected.jsonl``); it resumes a run
killed at any point and refuses a directory generated with other options. ``merge`` joins
the shards of ``--shard i/n`` runs; ``filter`` balances strategies; ``export`` writes
chat-template or plain JSONL split by source kernel; ``stats`` prints counts, rates and
token statistics and draws the strategy distribution.

Exit codes: 0 success, 1 the run finished with problems (sources that could not be loaded,
strategy bugs), 2 usage or I/O error. Standalone: ``python -m leirc.cli.cmd_dataset ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def register(sub) -> None:
    p = sub.add_parser("dataset", help="generate, merge, filter, export and describe step-level datasets",
                       description="Step-level (Step-TP) datasets: verified single-strategy steps with grounded "
                                   "reasoning, generated from .leir kernels and KernelBench-format PyTorch modules.")
    add_arguments(p)


def add_arguments(p) -> None:
    ds = p.add_subparsers(dest="dataset_command", metavar="ACTION")

    g = ds.add_parser("gen", help="generate records", description="Generate verified one-step records.")
    g.add_argument("--sources", nargs="+", required=True, metavar="DIR_OR_FILE",
                   help=".leir files, KernelBench-format .py modules, or directories holding them")
    g.add_argument("--out", required=True, metavar="DIR")
    g.add_argument("--seed", type=int, default=0, help="seed of every random choice (shapes, step sampling)")
    g.add_argument("--shapes", type=int, default=2, metavar="N", help="shape instances per kernel (default 2)")
    g.add_argument("--dtypes", metavar="F16,F64",
                   help="instantiate every shape at these floating-point dtypes (default: as written)")
    g.add_argument("--per-strategy", type=int, default=2, metavar="K",
                   help="steps drawn per strategy and instance (default 2)")
    g.add_argument("--strategies", metavar="A,B", help="only these strategies (default: all)")
    g.add_argument("--workers", type=int, default=1, metavar="W",
                   help="generator processes (default 1; 0 runs in this process)")
    g.add_argument("--target", default="llvm", help="evaluation target: llvm (default) or cuda")
    g.add_argument("--shard", default="0/1", metavar="I/N", help="run only shard I of N (units by key hash)")
    g.add_argument("--limit", type=int, metavar="N", help="at most N jobs (in plan order)")
    g.add_argument("--per-unit", type=int, metavar="K",
                   help="at most K strategies per shape instance (the hard ones first; default: all)")
    g.add_argument("--budget", type=float, metavar="SECONDS",
                   help="start no job after SECONDS (the rest stays to do: rerun the command to resume)")
    g.add_argument("--rpc", metavar="HOST:PORT", help="time on a server of TVM's RPC tracker at HOST:PORT "
                                                      "(verification stays here); needs --key")
    g.add_argument("--key", metavar="KEY", help="the RPC device key to ask the tracker for")
    g.add_argument("--max-iterations", type=int, metavar="N",
                   help="largest instance, in statement instances of a literal run (default 65536)")
    g.add_argument("--verify-seeds", default="0,1", metavar="S,S", help="verification input seeds (default 0,1)")
    g.add_argument("--no-time", action="store_true", help="verify only; no timing, no speedups")
    g.add_argument("--repeat", type=int, default=5, help="timing repetitions (default 5)")
    g.add_argument("--tokens", action="store_true",
                   help="count LEIR/TIR/CUDA tokens per record (builds each program for CUDA; slower)")
    g.add_argument("--no-compare-compiled", action="store_true",
                   help="skip comparing each verified candidate's compiled outputs with the compiled original's "
                        "bit for bit (saves one build per record; bitwise_vs_original is then often undecided)")
    g.add_argument("--cluster", metavar="ADDRESS",
                   help="run the units on a Ray cluster: local (one started here), auto (the one this machine "
                        "joined), ray://HOST:PORT or HOST:PORT; needs the extra leirc[cluster] (docs/cluster.md)")
    g.add_argument("--resume", action="store_true",
                   help="continue the run recorded in --out (a rerun always does; the flag says so explicitly)")
    g.add_argument("--plan-only", action="store_true", help="print the plan (units, jobs) and stop")
    g.add_argument("-q", "--quiet", action="store_true")
    g.set_defaults(func=run_gen)

    m = ds.add_parser("merge", help="merge shard directories", description="Merge the shards of one generation.")
    m.add_argument("shards", nargs="+", metavar="SHARD_DIR")
    m.add_argument("--out", required=True, metavar="DIR")
    m.set_defaults(func=run_merge)

    f = ds.add_parser("filter", help="balance strategies (Step-TP filtering)",
                      description="Keep verified records, down-weight easy strategies, cap per strategy/level.")
    f.add_argument("dir", metavar="DIR")
    f.add_argument("--out", required=True, metavar="FILE.jsonl")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--cap", type=int, default=250, help="records per strategy (default 250; 0 = no cap)")
    f.add_argument("--easy-keep", type=float, default=0.5, help="probability of keeping an easy step (default 0.5)")
    f.add_argument("--level-cap", type=int, help="records per level")
    f.set_defaults(func=run_filter)

    e = ds.add_parser("export", help="chat or plain JSONL, split by source kernel",
                      description="Export train/validation/test JSONL (splits by source kernel).")
    e.add_argument("input", metavar="DIR_OR_FILE.jsonl", help="a dataset directory or a filtered JSONL file")
    e.add_argument("--out", required=True, metavar="DIR")
    e.add_argument("--format", choices=("chat", "plain"), default="chat")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--splits", default="0.8,0.1,0.1", metavar="TR,VA,TE")
    e.set_defaults(func=run_export)

    t = ds.add_parser("trajectory", help="multi-step records from saved traces",
                      description="Replay traces (leirc apply/build --save-trace) on their source; verify and "
                                  "time every state against the root.")
    t.add_argument("source", metavar="KERNEL.leir")
    t.add_argument("traces", nargs="+", metavar="TRACE.json")
    t.add_argument("--out", required=True, metavar="FILE.jsonl")
    t.add_argument("--kernel", help="kernel name (files with several kernels)")
    t.add_argument("--target", default="llvm")
    t.add_argument("--oracle", choices=("vectorized", "literal"), default="vectorized")
    t.add_argument("--no-time", action="store_true")
    t.set_defaults(func=run_trajectory)

    s = ds.add_parser("stats", help="counts, rates, tokens and a PNG of the strategy distribution")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("--json", action="store_true", help="print the statistics as JSON")
    s.add_argument("--plot", metavar="FILE.png", help="where to draw the distribution (default DIR/strategies.png)")
    s.add_argument("--no-plot", action="store_true")
    s.add_argument("--tokens", type=int, default=0, metavar="N",
                   help="count tokens for up to N records that lack them (builds each for CUDA)")
    s.set_defaults(func=run_stats)
    p.set_defaults(func=lambda args: _no_action(p))


def _no_action(p) -> int:
    p.print_help(sys.stderr)
    return 2


def _err(msg: str) -> int:
    print(f"leirc dataset: error: {msg}", file=sys.stderr)
    return 2


def _shard(text: str):
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        return None
    return (i, n) if 0 <= i < n else None


def run_gen(args) -> int:
    from ..dataset.generate import GenOptions, generate, plan
    from ..dataset.shapes import MAX_ITERATIONS
    from ..dataset.store import StoreError
    from ..strategies import get

    shard = _shard(args.shard)
    if shard is None:
        return _err(f"--shard expects I/N with 0 <= I < N, got {args.shard!r}")
    if args.shapes < 1 or args.per_strategy < 1 or args.repeat < 1:
        return _err("--shapes, --per-strategy and --repeat must be at least 1")
    if args.limit is not None and args.limit < 1:
        return _err("--limit must be at least 1")
    if args.per_unit is not None and args.per_unit < 1:
        return _err("--per-unit must be at least 1")
    if args.budget is not None and args.budget <= 0:
        return _err("--budget must be a positive number of seconds")
    if args.target not in ("llvm", "cuda"):
        return _err(f"--target must be llvm or cuda (the evaluator runs compiled kernels), got {args.target!r}")
    strategies = None
    if args.strategies:
        strategies = tuple(sorted(s.strip() for s in args.strategies.split(",") if s.strip()))
        for s in strategies:
            try:
                get(s)
            except KeyError as e:
                return _err(e.args[0])
    try:
        vseeds = tuple(int(x) for x in args.verify_seeds.split(","))
    except ValueError:
        return _err(f"--verify-seeds expects integers separated by commas, got {args.verify_seeds!r}")
    dtypes: tuple = ()
    if args.dtypes:
        from ..dataset.shapes import FLOAT_DTYPES

        dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
        bad = [d for d in dtypes if d not in FLOAT_DTYPES]
        if bad or not dtypes:
            return _err(f"--dtypes expects floating-point dtypes ({', '.join(FLOAT_DTYPES)}), got {args.dtypes!r}")
    try:
        opts = GenOptions(seed=args.seed, shapes=args.shapes, dtypes=dtypes, per_strategy=args.per_strategy,
                          target=args.target, strategies=strategies, max_iterations=args.max_iterations or MAX_ITERATIONS,
                          verify_seeds=vseeds, time=not args.no_time, repeat=args.repeat, tokens=args.tokens,
                          compare_compiled=not args.no_compare_compiled, shard=shard, limit=args.limit,
                          per_unit=args.per_unit, rpc=args.rpc, rpc_key=args.key)
    except ValueError as e:
        return _err(str(e))
    if args.key is not None and args.rpc is None:
        return _err("--key needs the tracker that hands the device out (--rpc HOST:PORT)")
    if args.cluster:
        from ..cluster import ClusterError, ray_available
        from ..cluster.executor import check_address

        try:
            check_address(args.cluster)
        except ClusterError as e:
            return _err(str(e))
        if not ray_available():
            return _err("--cluster needs Ray: install the extra with pip install 'leirc[cluster]'")
    if args.resume and not os.path.isfile(os.path.join(args.out, "dataset.sqlite")):
        return _err(f"--resume: {args.out} holds no dataset to continue")
    log = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    if args.plan_only:
        p = plan(args.sources, opts, log)
        print(json.dumps(p.to_json(), indent=2, sort_keys=True))
        return 1 if p.problems else 0
    from ..cluster import ClusterError

    try:
        summary = generate(args.sources, args.out, opts, workers=args.workers, budget_s=args.budget, log=log,
                           cluster=args.cluster, progress=None if not args.quiet else False)
    except (StoreError, ClusterError) as e:
        return _err(str(e))
    print(json.dumps(summary, indent=2, sort_keys=True))
    ex = summary.get("executor")
    if ex and not args.quiet:
        print(f"leirc dataset: {ex['done']} of {ex['jobs']} task(s) on {ex['where']} in {ex['seconds']} s: "
              f"{ex['failed']} failed, {ex['retried']} retried; per node: "
              + ", ".join(f"{n} {c}" for n, c in ex["per_node"].items()), file=sys.stderr)
    if summary.get("interrupted"):
        print(f"leirc dataset: interrupted: {summary['saved_this_run']} record(s) saved by this run, "
              f"{summary['records']} verified and {summary['rejected']} rejected in "
              f"{os.path.join(args.out, 'dataset.sqlite')}; {summary['jobs_left']} job(s) left: rerun to resume",
              file=sys.stderr)
        # a KeyboardInterrupt caught after it left an exec'd string makes ``python -m`` end
        # by SIGINT instead of this status; a successful exec clears it (see cli.main.interrupted)
        exec("pass")  # noqa: S102
        return 130
    for p in summary["problems"]:
        print(f"leirc dataset: {p}", file=sys.stderr)
    if not summary["complete"]:
        print(f"leirc dataset: stopped by --budget with {summary['jobs_left']} job(s) to do; rerun to resume",
              file=sys.stderr)
    bad = summary["status"].get("strategy_bug", 0) + summary["status"].get("error", 0)
    return 1 if summary["problems"] or bad else 0


def run_merge(args) -> int:
    from ..dataset.merge import merge
    from ..dataset.store import StoreError

    try:
        res = merge(args.out, args.shards)
    except StoreError as e:
        return _err(str(e))
    print(json.dumps(res, indent=2, sort_keys=True))
    if not res["complete"]:
        print(f"leirc dataset: warning: shards {res['shards']} do not cover every shard", file=sys.stderr)
    return 0


def _records_of(path: str):
    """Verified and rejected records of a dataset directory or a JSONL file."""
    from ..dataset.store import REJECTED, RECORDS, Store, StoreError, read_jsonl

    if not os.path.exists(path):
        raise StoreError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        try:
            st = Store(path, create=False)
        except StoreError:
            if os.path.isfile(os.path.join(path, RECORDS)):
                rej = os.path.join(path, REJECTED)
                return read_jsonl(os.path.join(path, RECORDS)), (read_jsonl(rej) if os.path.isfile(rej) else [])
            raise
        return list(st.records("ok")), list(st.records("!ok"))
    return read_jsonl(path), []


def run_filter(args) -> int:
    from ..dataset.filtering import filter_records
    from ..dataset.store import StoreError, jsonl
    from ..io import write_atomic

    if not 0.0 <= args.easy_keep <= 1.0:
        return _err("--easy-keep must be between 0 and 1")
    try:
        ok, rejected = _records_of(args.dir)
    except (StoreError, OSError) as e:
        return _err(str(e))
    kept, report = filter_records(ok + rejected, seed=args.seed, cap=args.cap or None, easy_keep=args.easy_keep,
                                  level_cap=args.level_cap)
    write_atomic(args.out, jsonl(kept))
    write_atomic(os.path.splitext(args.out)[0] + ".report.json", json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


def run_export(args) -> int:
    from ..dataset.export import export
    from ..dataset.store import StoreError

    try:
        fractions = tuple(float(x) for x in args.splits.split(","))
    except ValueError:
        return _err(f"--splits expects three fractions, got {args.splits!r}")
    try:
        ok, _ = _records_of(args.input)
        res = export(ok, args.out, fmt=args.format, seed=args.seed, fractions=fractions)
    except (StoreError, OSError) as e:
        return _err(str(e))
    except ValueError as e:
        return _err(str(e))
    print(json.dumps(res, indent=2, sort_keys=True))
    return 0


def run_trajectory(args) -> int:
    from ..dataset.store import jsonl
    from ..dataset.trajectory import trajectory_record
    from ..engine.evaluate import Evaluator
    from ..io import write_atomic
    from ..strategies import trace_from_json

    if args.target not in ("llvm", "cuda"):
        return _err(f"--target must be llvm or cuda, got {args.target!r}")
    try:
        with open(args.source, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        return _err(f"cannot read {args.source}: {e}")
    traces = []
    for path in args.traces:
        try:
            with open(path, encoding="utf-8") as f:
                traces.append(trace_from_json(f.read()))
        except (OSError, ValueError, KeyError, TypeError) as e:
            return _err(f"cannot read trace {path}: {e}")
    out = []
    with Evaluator(args.target, seeds=(0, 1), time=not args.no_time, threads=1, warmup=1, repeat=5,
                   min_repeat_ms=5.0, verify_options={"oracle": args.oracle}) as ev:
        for path, steps in zip(args.traces, traces):
            try:
                rec = trajectory_record(os.path.basename(args.source), text, steps, ev, kernel=args.kernel,
                                        target=args.target)
            except ValueError as e:
                return _err(str(e))
            rec["trace"] = os.path.basename(path)
            out.append(rec)
            print(f"{path}: {rec['verified_steps']}/{rec['requested_steps']} steps verified"
                  + (f"; stopped: {rec['stopped']}" if rec["stopped"] else ""), file=sys.stderr)
    write_atomic(args.out, jsonl(out))
    return 0 if all(r["stopped"] is None for r in out) else 1


def run_stats(args) -> int:
    from ..dataset import stats as ST
    from ..dataset.store import StoreError

    try:
        ok, rejected = _records_of(args.dir)
    except (StoreError, OSError) as e:
        return _err(str(e))
    if args.tokens:
        ST.fill_tokens(ok, args.tokens)
    plan_path = os.path.join(args.dir, "plan.json") if os.path.isdir(args.dir) else None
    plan = None
    if plan_path and os.path.isfile(plan_path):
        with open(plan_path, encoding="utf-8") as f:
            plan = json.load(f)
    s = ST.compute(ok, rejected, plan)
    if not args.no_plot and s["records"]:
        where = args.plot or (os.path.join(args.dir, "strategies.png") if os.path.isdir(args.dir)
                              else os.path.splitext(args.dir)[0] + ".png")
        try:
            s["plot"] = ST.plot(s, where)
        except ImportError:
            print("leirc dataset: warning: no plot: matplotlib is not installed (pip install 'leirc[dataset]')",
                  file=sys.stderr)
        except OSError as e:
            return _err(f"cannot write the plot {where}: {e}")
    print(json.dumps(s, indent=2, sort_keys=True) if args.json else ST.render_text(s))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="leirc dataset")
    add_arguments(ap)
    args = ap.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
