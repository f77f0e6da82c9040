"""-O search against -O0 and -O1 on stdlib kernels, for one or more proposer sets (a benchmark,
not a test).

    .venv/bin/python benchmarks/search_bench.py --only softmax --budget 32 [--algo beam] [--proposer menu,htam]
    .venv/bin/python benchmarks/search_bench.py --budget 16 --proposer menu --proposer htam \\
        --proposer menu,htam,reuse,o1 --json out/search_matrix.json          # the matrix

Each (kernel, proposer set) goes through the driver's passes with ``-O search`` (load, check,
optimize = the search, lower, build, verify against the original), what ``leirc build
KERNEL.leir -O search`` runs. The speedup over -O0 is the search's own confirmation: the best
and the input timed again side by side (interleaved rounds), with its spread. -O1's kernel is
timed the same way, interleaved with the search's best in one evaluator (same protocol: 2
threads, seeds 0 and 1), so "vs -O1" compares two timings taken together, never numbers
from different moments. Each proposer set starts from a fresh HTAM memory unless ``--memory``
is given (to measure warm memory, pass the same file twice). The load average is printed with
every row: on a shared machine it says how far to trust the row.
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
    ap.add_argument("--proposer", action="append", default=[],
                    help="a proposer set, e.g. menu,htam (repeatable: one search per set; default menu,htam,reuse,o1)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory", default=None)
    ap.add_argument("--rpc", default=None, metavar="HOST:PORT")
    ap.add_argument("--key", default=None)
    ap.add_argument("--out", default=None, help="output directory (reports); default: a temporary one")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)

    from leirc import driver
    from leirc.engine.program import Program
    from leirc.lang.printer import PRETTY
    from leirc.opt.o1 import optimize as o1
    from leirc.search.core import SearchOptions
    from leirc.search.evaluate import CONFIRM_ROUNDS, CandidateEvaluator
    from leirc.search.optimizer import SearchOptimizer

    out_dir = args.out or tempfile.mkdtemp(prefix="leirc-search-bench-")
    stems = args.only or ["relu", "gemv", "softmax", "matmul_standard"]
    sets = args.proposer or ["menu,htam,reuse,o1"]
    rows = []
    for props in sets:
        memory = args.memory or os.path.join(out_dir, f"memory.{props.replace(',', '+')}.sqlite")
        for stem in stems:
            path = str(REPO / "stdlib" / f"{stem}.leir")
            load0 = os.getloadavg()
            opts = SearchOptions(algo=args.algo, budget=args.budget, proposers=tuple(props.split(",")),
                                 seed=args.seed, workers=args.workers, memory=memory, rpc=args.rpc, rpc_key=args.key,
                                 cache_dir=os.path.join(out_dir, "cache"))
            opt = SearchOptimizer(opts, out_dir=os.path.join(out_dir, props.replace(",", "+")),
                                  log=lambda m: print(m, file=sys.stderr), progress=False)
            driver.OPTIMIZERS["search"] = lambda opt=opt: opt
            t0 = time.perf_counter()
            b = driver.run_pipeline(driver.new_build(path, options=driver.BuildOptions(opt="search")), until="verify")
            wall = time.perf_counter() - t0
            res = opt.last
            prog = Program.from_text(open(path).read())
            root_text = prog.print(PRETTY)
            o1_text = Program.from_kernel(o1(prog.kernel).kernel).print(PRETTY)
            best_text = res.best.program.print(PRETTY)
            vs_o1 = None
            if best_text != o1_text:
                ev = CandidateEvaluator(root_text, cache_dir=os.path.join(out_dir, "cache"))
                try:
                    e1, eb = ev.evaluate_batch([(o1_text, None), (best_text, None)])
                    vs_o1 = ev.paired(o1_text, best_text, CONFIRM_ROUNDS) if e1.ok and eb.ok else None
                finally:
                    ev.close()
            row = {"kernel": stem, "proposers": props, "O0_ms": res.root_ms, "search_ms": res.best_ms,
                   "speedup_vs_O0": res.speedup, "spread": res.speedup_spread,
                   "O1_ms": vs_o1.a_ms if vs_o1 else (res.best_ms if best_text == o1_text else None),
                   "speedup_vs_O1": vs_o1.speedup if vs_o1 else (1.0 if best_text == o1_text else None),
                   "steps": [str(s) for s in res.steps], "evaluations": res.evaluations,
                   "search_s": round(res.seconds, 1), "pipeline_s": round(wall, 1),
                   "verified": bool(b.jobs[0].verification and b.jobs[0].verification.equal) if res.steps else None,
                   "stopped": res.stopped, "timed_on": res.timed_on, "load": [round(x, 2) for x in load0],
                   "load_after": [round(x, 2) for x in os.getloadavg()],
                   "report": opt.outputs.get(res.root.program.kernel.name, {}).get("html")}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"\n{'kernel':16} {'proposers':20} {'-O0 ms':>9} {'-O1 ms':>9} {'search ms':>10} {'vs -O0':>13} "
          f"{'vs -O1':>7} {'evals':>5} {'s':>6}  load")
    for r in rows:
        o1s = f"{r['O1_ms']:.4g}" if r["O1_ms"] else "-"
        v1 = f"x{r['speedup_vs_O1']:.3g}" if r["speedup_vs_O1"] else "-"
        v0 = f"x{r['speedup_vs_O0']:.3g}" + (f" +-{100 * r['spread']:.2g}%" if r["spread"] is not None else "")
        print(f"{r['kernel']:16} {r['proposers']:20} {r['O0_ms']:9.4g} {o1s:>9} {r['search_ms']:10.4g} {v0:>13} "
              f"{v1:>7} {r['evaluations']:5d} {r['search_s']:6.1f}  {r['load'][0]:.1f}-{r['load_after'][0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
