"""-O search against -O0 and -O1 on stdlib kernels (a benchmark, not a test).

    .venv/bin/python benchmarks/search_bench.py --only softmax --budget 32 [--algo beam] [--proposer menu,htam]

Each kernel goes through the driver's passes with ``-O search`` (load, check, optimize =
the search, lower, build, verify against the original), exactly what ``leirc build
KERNEL.leir -O search`` runs once the driver registers it; -O1's kernel is timed with the
search's own evaluator (same protocol: 2 threads, seeds 0 and 1, median of 5 runs of >= 20
ms), so the three numbers are comparable. The memory is a fresh file per run unless
``--memory`` is given (to measure warm memory, pass the same file twice).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[], help="stdlib kernel stem (repeatable)")
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--algo", default="beam")
    ap.add_argument("--proposer", default="menu,htam,reuse,o1")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory", default=None)
    ap.add_argument("--out", default=None, help="output directory (reports); default: a temporary one")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)

    from leirc import driver
    from leirc.engine.program import Program
    from leirc.opt.o1 import optimize as o1
    from leirc.search.core import SearchOptions
    from leirc.search.evaluate import CandidateEvaluator
    from leirc.search.optimizer import SearchOptimizer

    out_dir = args.out or tempfile.mkdtemp(prefix="leirc-search-bench-")
    memory = args.memory or os.path.join(out_dir, "memory.sqlite")
    stems = args.only or ["relu", "gemv", "softmax", "matmul_standard"]
    rows = []
    for stem in stems:
        path = str(REPO / "stdlib" / f"{stem}.leir")
        opts = SearchOptions(algo=args.algo, budget=args.budget, proposers=tuple(args.proposer.split(",")),
                             seed=args.seed, workers=args.workers, memory=memory,
                             cache_dir=os.path.join(out_dir, "cache"))
        opt = SearchOptimizer(opts, out_dir=out_dir, log=lambda m: print(m, file=sys.stderr), progress=False)
        driver.OPTIMIZERS["search"] = lambda opt=opt: opt  # what the driver's registration will do
        t0 = time.perf_counter()
        b = driver.run_pipeline(driver.new_build(path, options=driver.BuildOptions(opt="search")), until="verify")
        wall = time.perf_counter() - t0
        res = opt.last
        root_text = Program.from_text(open(path).read()).print()
        prog = Program.from_text(open(path).read())
        o1_text = Program.from_kernel(o1(prog.kernel).kernel).print()
        ev = CandidateEvaluator(root_text, cache_dir=os.path.join(out_dir, "cache"))
        try:
            e1 = ev.evaluate(o1_text)
        finally:
            ev.close()
        o1_ms = e1.timing.median_ms if e1.ok else None
        row = {"kernel": stem, "O0_ms": res.root.ms, "O1_ms": o1_ms, "search_ms": res.best.ms,
               "speedup_vs_O0": res.speedup, "speedup_vs_O1": (o1_ms / res.best.ms) if o1_ms else None,
               "steps": [str(s) for s in res.steps], "evaluations": res.evaluations, "search_s": round(res.seconds, 1),
               "pipeline_s": round(wall, 1), "verified": bool(b.jobs[0].verification and b.jobs[0].verification.equal),
               "stopped": res.stopped, "report": opt.outputs.get(res.root.program.kernel.name, {}).get("html")}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"\n{'kernel':18} {'-O0 ms':>9} {'-O1 ms':>9} {'search ms':>10} {'vs -O0':>7} {'vs -O1':>7} {'evals':>5} {'s':>6}")
    for r in rows:
        o1s = f"{r['O1_ms']:.4g}" if r["O1_ms"] else "-"
        v1 = f"x{r['speedup_vs_O1']:.3g}" if r["speedup_vs_O1"] else "-"
        print(f"{r['kernel']:18} {r['O0_ms']:9.4g} {o1s:>9} {r['search_ms']:10.4g} x{r['speedup_vs_O0']:<6.3g} {v1:>7} "
              f"{r['evaluations']:5d} {r['search_s']:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
