"""Reference-interpreter speed and memory on the standard library (a benchmark, not a test).

Each kernel runs in its own subprocess (so peak RSS is per kernel): random normal inputs,
one warm-up run, then the median of ``--repeat`` timed runs of ``leirc.interp.run``.
Peak RSS is the subprocess's ``ru_maxrss`` (includes Python + NumPy, ~60 MB). With
``--verify`` it also measures ``leirc verify -t interp`` (interpreter against itself, one
seed x one distribution) under ``/usr/bin/time``-like accounting.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_interp.py

Options: ``--only SUBSTR`` (repeatable), ``--repeat N`` (default 3), ``--json FILE``,
``--verify``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STDLIB = REPO / "stdlib"

_CHILD = r"""
import json, math, resource, statistics, sys, time
from leirc.interp import check_source, random_inputs, run
path, repeat = sys.argv[1], int(sys.argv[2])
r = check_source(open(path).read())
ins = random_inputs(r.kernel, 0, "normal")
iters = sum(math.prod(l.extent for l in si.loops) for si in r.stmts)
t0 = time.perf_counter(); run(r, ins); first = time.perf_counter() - t0
ts = []
for _ in range(repeat):
    t0 = time.perf_counter(); run(r, ins); ts.append(time.perf_counter() - t0)
print(json.dumps({"iterations": iters, "first_s": first, "median_s": statistics.median(ts),
                  "min_s": min(ts), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

_VERIFY = r"""
import json, resource, sys, time
from leirc.verify import verify
t0 = time.perf_counter()
rep = verify(open(sys.argv[1]).read(), target="interp", seeds=(0,), dists=("normal",))
print(json.dumps({"equal": rep.equal, "verify_s": time.perf_counter() - t0,
                  "verify_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[], help="only kernels whose name contains this")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--verify", action="store_true", help="also time leirc verify -t interp (one run)")
    args = ap.parse_args()
    files = sorted(STDLIB.glob("*.leir"))
    if args.only:
        files = [f for f in files if any(s in f.stem for s in args.only)]
    rows = []
    env = dict(os.environ)
    print(f"numpy interpreter, {os.cpu_count()} CPUs; OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', '(unset)')}")
    hdr = f"{'kernel':28s} {'iterations':>11s} {'first s':>8s} {'median s':>9s} {'peak RSS MB':>12s}"
    if args.verify:
        hdr += f" {'verify s':>9s} {'verify RSS MB':>14s}"
    print(hdr)
    for f in files:
        p = subprocess.run([sys.executable, "-c", _CHILD, str(f), str(args.repeat)], capture_output=True, text=True,
                           cwd=REPO, env=env)
        if p.returncode != 0:
            print(f"{f.stem:28s} FAILED: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
            rows.append({"kernel": f.stem, "error": p.stderr[-2000:]})
            continue
        row = {"kernel": f.stem, **json.loads(p.stdout.strip().splitlines()[-1])}
        line = (f"{f.stem:28s} {row['iterations']:11.3g} {row['first_s']:8.3f} {row['median_s']:9.3f} "
                f"{row['peak_rss_mb']:12.0f}")
        if args.verify:
            q = subprocess.run([sys.executable, "-c", _VERIFY, str(f)], capture_output=True, text=True, cwd=REPO, env=env)
            if q.returncode == 0:
                row.update(json.loads(q.stdout.strip().splitlines()[-1]))
                line += f" {row['verify_s']:9.2f} {row['verify_peak_rss_mb']:14.0f}"
            else:
                line += "   verify FAILED"
        print(line, flush=True)
        rows.append(row)
    ok = [r for r in rows if "median_s" in r]
    if ok:
        total = sum(r["median_s"] for r in ok)
        gm = math.exp(sum(math.log(max(r["median_s"], 1e-6)) for r in ok) / len(ok))
        print(f"{len(ok)} kernels: total {total:.2f} s, geometric mean {gm:.3f} s, "
              f"max peak RSS {max(r['peak_rss_mb'] for r in ok):.0f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
