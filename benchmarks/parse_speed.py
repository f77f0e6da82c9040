#!/usr/bin/env python3
"""Parser speed: parse time and parse+print time of the largest program in stdlib/ (or, if
stdlib/ has no .leir file, of the longest Step-TP program in ../shared/compat).

    python benchmarks/parse_speed.py                  # 200 timed runs after 20 warm-up runs
    python benchmarks/parse_speed.py --runs 500 --file stdlib/sdpa.leir

Reports the median (and min / p90) wall time and the median process CPU time per run,
in milliseconds. The grammar and the
LALR tables are built once, during warm-up, as in a long-running process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leirc.lang.parser import parse  # noqa: E402
from leirc.lang.printer import print_module  # noqa: E402

COMPAT = ROOT.parent / "shared" / "compat"
STDLIB = ROOT / "stdlib"


def pick_program(path: str | None) -> tuple[str, str]:
    if path:
        p = Path(path)
        return str(p), p.read_text(encoding="utf-8")
    files = sorted(STDLIB.rglob("*.leir")) if STDLIB.is_dir() else []
    if files:
        p = max(files, key=lambda f: (f.stat().st_size, f.name))
        return str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")
    best = ("", "")
    for name, fields in (("steptp_emitted_level1.jsonl", ("IR",)), ("steptp_strategy_outputs.jsonl", ("original", "transformed"))):
        f = COMPAT / name
        if not f.is_file():
            continue
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            rec = json.loads(line)
            for fld in fields:
                v = rec.get(fld)
                for t in (v if isinstance(v, list) else [v]):
                    if isinstance(t, str) and len(t) > len(best[1]):
                        best = (f"{name} line {i + 1} ({rec.get('model', '?')})", t)
    if not best[1]:
        sys.exit("parse_speed: no program found (stdlib/ is empty and ../shared/compat is absent)")
    return best


def timed(fn, runs: int) -> tuple[list[float], list[float]]:
    """Wall-clock and process CPU milliseconds per run (CPU time is the robust number on a
    shared machine, where wall time includes waiting for a core)."""
    wall, cpu = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return wall, cpu


def summary(t: tuple[list[float], list[float]]) -> str:
    wall, cpu = sorted(t[0]), sorted(t[1])
    p90 = wall[min(len(wall) - 1, int(0.9 * len(wall)))]
    return (f"median {statistics.median(wall):.3f} ms wall (min {wall[0]:.3f}, p90 {p90:.3f}); "
            f"median {statistics.median(cpu):.3f} ms CPU")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--file", help="time this file instead of the largest stdlib program")
    args = ap.parse_args(argv)

    name, text = pick_program(args.file)
    res = parse(text)
    if not res.ok:
        print(f"parse_speed: {name} does not parse cleanly: {res.diagnostics[:3]}", file=sys.stderr)
        return 1

    def p():
        return parse(text)

    def pc():
        print_module(parse(text).module, "compact")

    def pr():
        print_module(parse(text).module, "pretty")

    for _ in range(args.warmup):
        pc()
        pr()
    t_parse = timed(p, args.runs)
    t_compact = timed(pc, args.runs)
    t_pretty = timed(pr, args.runs)
    m = res.module
    nodes = sum(1 for k in m.kernels for _ in __import__("leirc.lang.ast", fromlist=["walk"]).walk(k))
    print(f"parse_speed: {name}: {len(text)} chars, {text.count(chr(10)) + 1} lines, {len(m.kernels)} kernel(s), "
          f"{nodes} AST nodes; {args.runs} runs after {args.warmup} warm-up runs; python {sys.version.split()[0]}")
    print(f"parse:                  {summary(t_parse)}")
    print(f"parse + print compact:  {summary(t_compact)}")
    print(f"parse + print pretty:   {summary(t_pretty)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
