"""Parse + check time of the largest stdlib file (a benchmark, not a test).

    .venv/bin/python benchmarks/check_speed.py [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from leirc.lang.checker import check_module
from leirc.lang.parser import parse

STDLIB = Path(__file__).resolve().parents[1] / "stdlib"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    files = sorted(STDLIB.glob("*.leir"), key=lambda p: p.stat().st_size, reverse=True)
    print("| file | bytes | parse ms (median) | parse+check ms (median) | p90 parse+check ms |")
    print("|---|---|---|---|---|")
    for path in files[:3]:
        text = path.read_text()
        for _ in range(20):  # warm-up: grammar tables, caches
            check_module(parse(text).module)
        tp, tc = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            m = parse(text).module
            t1 = time.perf_counter()
            check_module(m)
            t2 = time.perf_counter()
            tp.append((t1 - t0) * 1e3)
            tc.append((t2 - t0) * 1e3)
        tc_sorted = sorted(tc)
        print(f"| {path.name} | {len(text)} | {statistics.median(tp):.2f} | {statistics.median(tc):.2f} | "
              f"{tc_sorted[int(0.9 * len(tc)) - 1]:.2f} |")


if __name__ == "__main__":
    main()
