"""``python -m leirc.cluster resources|fingerprint [TARGET]`` and ``overhead``.

``resources [--slots N]`` prints the ``--resources`` JSON that ``ray start`` needs on a node
that may time for TARGET (default llvm): this node's target fingerprint as a Ray custom
resource, N timings at once (default 1).
``fingerprint`` prints the fingerprint itself.

``overhead [--jobs N] [--workers W] [--cluster ADDRESS]`` measures what an executor costs per
job on a trivial job (no build): the start (executor up and the first job back) and the
steady per-job time of N more, for the local process pool and for Ray (``--cluster``,
default ``local``: a one-node Ray started here). These are the inputs of the scaling model in
docs/cluster.md; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from .hostid import node_resources, target_fingerprint


def _measure(make, jobs: int) -> dict:
    from .executor import Task

    t0 = time.perf_counter()
    ex = make()
    try:
        ex.submit(Task("warm", target_fingerprint, ("llvm",)))
        list(ex.as_completed())
        start = time.perf_counter() - t0
        t1 = time.perf_counter()
        for i in range(jobs):
            ex.submit(Task(f"j{i}", target_fingerprint, ("llvm",)))
        n = sum(1 for o in ex.as_completed() if o.ok)
        per = (time.perf_counter() - t1) / max(1, jobs)
    finally:
        ex.close()
    return {"where": ex.where, "start_s": round(start, 3), "per_job_ms": round(1000 * per, 3), "jobs": n}


def overhead(jobs: int, workers: int, cluster: str) -> dict:
    from .executor import LocalExecutor, open_executor

    out = {"local": _measure(lambda: LocalExecutor(workers), jobs)}
    try:
        out["ray"] = _measure(lambda: open_executor(cluster, workers=workers), jobs)
    except Exception as e:  # noqa: BLE001 - no Ray here: the local figure still stands
        out["ray"] = {"error": str(e)}
    return out


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] == "overhead":
        ap = argparse.ArgumentParser(prog="python -m leirc.cluster overhead")
        ap.add_argument("--jobs", type=int, default=200)
        ap.add_argument("--workers", type=int, default=2)
        ap.add_argument("--cluster", default="local")
        ns = ap.parse_args(args[1:])
        print(json.dumps(overhead(ns.jobs, ns.workers, ns.cluster), indent=2))
        return 0
    if args and args[0] in ("resources", "fingerprint"):
        ap = argparse.ArgumentParser(prog=f"python -m leirc.cluster {args[0]}")
        ap.add_argument("target", nargs="?", default="llvm")
        if args[0] == "resources":
            ap.add_argument("--slots", type=int, default=1,
                            help="timings this node runs at once (default 1: each alone on the machine)")
        ns = ap.parse_args(args[1:])
        if args[0] == "fingerprint":
            print(target_fingerprint(ns.target))
        elif ns.slots < 1:
            ap.error("--slots must be at least 1")
        else:
            print(json.dumps(node_resources(ns.target, ns.slots)))
        return 0
    print("usage: python -m leirc.cluster resources [TARGET] [--slots N] | fingerprint [TARGET] | "
          "overhead [--jobs N] [--workers W] [--cluster ADDRESS]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
