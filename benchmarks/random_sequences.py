"""Longer run of the random strategy-sequence property (tests/strategies/test_random_sequences.py).

    .venv/bin/python benchmarks/random_sequences.py [--n 300] [--seed 0]

Draws a stdlib kernel and 1-6 random legal steps, applies them, and verifies the result
against the original with the interpreter (2 seeds); prints counts and any failure.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "strategies"))

from test_random_sequences import KERNELS, _kernel, random_walk  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from leirc.lang import ast as A
    from leirc.lang.printer import PRETTY, print_module
    from leirc.verify import verify

    rng = random.Random(args.seed)
    t0 = time.time()
    counts = {"sequences": 0, "steps": 0, "verified": 0, "failed": 0}
    used: dict[str, int] = {}
    for i in range(args.n):
        name = rng.choice(KERNELS)
        original = _kernel(name)
        new, steps = random_walk(original, lambda n: rng.randrange(n), rng.randint(1, 6))
        counts["sequences"] += 1
        counts["steps"] += len(steps)
        for s in steps:
            used[s.name] = used.get(s.name, 0) + 1
        if not steps:
            continue
        rep = verify(print_module(A.Module((new,)), PRETTY), print_module(A.Module((original,)), PRETTY),
                     seeds=(0, 1), dists=("signed", "normal"), target="interp")
        if rep.equal:
            counts["verified"] += 1
        else:
            counts["failed"] += 1
            print(f"FAIL {name}: {[str(s) for s in steps]}: {rep.failures[:2]}", flush=True)
    print(f"{counts} in {time.time() - t0:.0f} s; strategies used: {dict(sorted(used.items()))}")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
