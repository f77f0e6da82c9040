"""Two LEIR programs of the same kernel signature, timed against each other (a benchmark, not a test).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 \\
        .venv/bin/python benchmarks/ab_leir.py NEW.leir OLD.leir --rounds 10 [--sessions 2]

Each program is built in ``--sessions`` worker sessions of its own (as the driver runs them), so a
bias of one process's memory placement shows up as a spread between sessions rather than as a
difference between the programs (identical programs in four sessions read 0.563-0.625 ms on a
16 MiB reduction, BENCHMARKS.md §9f). Every round times every session once, in a rotating order;
a timing is the median of 3 runs of >= 50 ms over 3 input sets (normal(0, 1), seeds 0-2, shared
by both programs). Prints the median and minimum of each program and their ratios (old / new:
above 1 means NEW is faster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("new")
    ap.add_argument("old")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--sessions", type=int, default=2, help="worker sessions per program")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    import numpy as np

    from leirc.lang.checker import check_text
    from leirc.lower.session import KernelSession

    texts = {"new": Path(args.new).read_text(encoding="utf-8"), "old": Path(args.old).read_text(encoding="utf-8")}
    kernels = {lab: check_text(t).results[0].kernel for lab, t in texts.items()}
    sig = {lab: [(p.name, tuple(p.shape)) for p in k.inputs] for lab, k in kernels.items()}
    if sig["new"] != sig["old"]:
        raise SystemExit(f"ab_leir: the programs take different inputs: {sig['new']} vs {sig['old']}")
    sets = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        sets.append({p.name: rng.standard_normal(tuple(p.shape), dtype=np.float32) for p in kernels["new"].inputs})
    labels = [lab for _ in range(args.sessions) for lab in ("new", "old")]
    sessions = [KernelSession(texts[lab], threads=args.threads, timeout=600) for lab in labels]
    samples: list[list[float]] = [[] for _ in sessions]
    order = list(range(len(sessions)))
    for rnd in range(args.rounds):
        r = rnd % len(order)
        for i in order[r:] + order[:r]:
            t = sessions[i].time(sets, warmup=1, repeat=3, min_repeat_ms=50)
            if not t.ok:
                raise SystemExit(f"ab_leir: {labels[i]} failed: {t.error_kind}: {t.error}")
            samples[i].append(t.median_ms)
    for s in sessions:
        s.close()
    by = {lab: [x for l, s in zip(labels, samples) if l == lab for x in s] for lab in ("new", "old")}
    for lab in ("new", "old"):
        per = ", ".join(f"{statistics.median(s):.4g}" for l, s in zip(labels, samples) if l == lab)
        print(f"{lab}: median {statistics.median(by[lab]):.4g} ms, min {min(by[lab]):.4g} ms (per session: {per})")
    print(f"old / new: {statistics.median(by['old']) / statistics.median(by['new']):.3f}x by the median, "
          f"{min(by['old']) / min(by['new']):.3f}x by the minimum ({len(by['new'])} timings each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
