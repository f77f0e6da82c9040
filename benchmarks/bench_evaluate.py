"""Verification cost, old path vs session vs Evaluator, side by side in one run.

For each kernel (the stdlib softmax and two small kernels):

* **old** -- ``verify(src, runner=run_kernel)``: every run is a one-shot worker that
  starts, imports TVM, checks and builds again;
* **session** -- ``verify(src, runner=session.runner)`` in one
  :class:`leirc.lower.session.KernelSession` (the wall time includes starting the session);
* **evaluate** -- :meth:`leirc.engine.Evaluator.evaluate` of the kernel against itself,
  once cold (reference outputs computed) and once more with the reference cached
  (``cache=False``: the evaluation itself is not served from the cache). ``excl. start-up``
  is the warm evaluation minus the worker's start-up and build (``Evaluation.startup_s``);
  ``cached`` is a third call served by the evaluation cache.

Builds are counted by the workers themselves (``LEIRC_WORKER_BUILD_LOG``). Run from the
project root::

    .venv/bin/python benchmarks/bench_evaluate.py [--threads N] [--json]
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

MATMUL = r"""\kernel matmul64(A: f32[64, 48], B: f32[48, 32]) -> (C: f32[64, 32]) {
  L^{64}_{i=0} L^{32}_{j=0} L^{48}_{k=0} [ C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j}; ];
}"""

ROWNORM = r"""\kernel rownorm(X: f32[32, 256]) -> (Y: f32[32, 256]) {
  L^{32}_{i=0} L^{256}_{j=0} [ S^{f32,g}_{i} = S^{f32,g}_{i} + X^{f32,g}_{i,j}*X^{f32,g}_{i,j}; ];
  L^{32}_{i=0} L^{256}_{j=0} [ Y^{f32,g}_{i,j} = X^{f32,g}_{i,j}/sqrt(S^{f32,g}_{i} + 1e-5); ];
}"""


def kernels() -> list:
    with open(os.path.join(ROOT, "stdlib", "softmax.leir"), encoding="utf-8") as f:
        softmax = f.read()
    return [("softmax (stdlib, 256x24576)", softmax), ("matmul 64x48x32", MATMUL), ("rownorm 32x256", ROWNORM)]


class Builds:
    def __init__(self, path: str):
        self.path = path
        self.seen = 0

    def take(self) -> int:
        try:
            with open(self.path, encoding="utf-8") as f:
                n = len(f.read().splitlines())
        except OSError:
            n = 0
        new, self.seen = n - self.seen, n
        return new


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="TVM_NUM_THREADS for the workers")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", default=None, help="run only kernels whose label contains this")
    args = ap.parse_args(argv)
    log = os.path.join(tempfile.mkdtemp(prefix="leirc-bench-"), "builds.log")
    os.environ["LEIRC_WORKER_BUILD_LOG"] = log
    if args.threads is not None:
        os.environ["TVM_NUM_THREADS"] = str(args.threads)

    from leirc.engine import Evaluator
    from leirc.lang.checker import check_text
    from leirc.lower.runner import run_kernel
    from leirc.lower.session import KernelSession
    from leirc.verify import verify

    check_text(MATMUL)  # the parser's one-time set-up is no one's cost below
    builds = Builds(log)
    rows = []
    for label, src in kernels():
        if args.only and args.only not in label:
            continue
        row = {"kernel": label}
        t0 = time.perf_counter()
        rep = verify(src, runner=run_kernel)
        row["old_s"], row["old_builds"], row["old_equal"] = time.perf_counter() - t0, builds.take(), rep.equal
        row["runs"] = rep.runs + rep.probe_runs if hasattr(rep, "probe_runs") else rep.runs
        t0 = time.perf_counter()
        with KernelSession(src) as s:
            rep = verify(src, runner=s.runner)
            row["session_requests"] = s.requests
        row["session_s"], row["session_builds"], row["session_equal"] = (time.perf_counter() - t0, builds.take(),
                                                                         rep.equal)
        with Evaluator(time=False) as ev:
            cold = ev.evaluate(src)
            warm = ev.evaluate(src, cache=False)
            t0 = time.perf_counter()
            hit = ev.evaluate(src)
            row["cached_s"] = time.perf_counter() - t0
        row["eval_cold_s"], row["eval_warm_s"] = cold.seconds, warm.seconds
        row["eval_startup_s"] = warm.startup_s
        row["eval_excl_startup_s"] = warm.seconds - (warm.startup_s or 0.0)
        row["eval_ok"] = cold.ok and warm.ok and hit.cached
        row["eval_builds"] = builds.take()
        rows.append(row)
        print(f"  {label}: old {row['old_s']:.1f} s, session {row['session_s']:.1f} s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"load_avg": os.getloadavg(), "cpus": os.cpu_count(), "rows": rows}, indent=2))
        return 0
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS', '(unset)')}")
    print()
    print("| kernel | runs | old verify s (builds) | session verify s (builds) | speed-up | evaluate cold s | "
          "evaluate warm s | start-up s | warm excl. start-up s | cached s | verdicts |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        same = r["old_equal"] == r["session_equal"] and r["eval_ok"] == r["old_equal"]
        print(f"| {r['kernel']} | {r['runs']} | {r['old_s']:.1f} ({r['old_builds']}) | {r['session_s']:.1f} "
              f"({r['session_builds']}) | {r['old_s'] / r['session_s']:.1f}x | {r['eval_cold_s']:.2f} | "
              f"{r['eval_warm_s']:.2f} | {r['eval_startup_s']:.2f} | {r['eval_excl_startup_s']:.2f} | "
              f"{r['cached_s'] * 1000:.1f} ms | {'same' if same else 'DIFFER'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
