#!/usr/bin/env python3
"""Front-end speed: parse, and parse + check, with the fast parser and with Lark, in
milliseconds per 100 lines.

    python benchmarks/parse_speed.py                  # the stdlib as one file, and its largest file
    python benchmarks/parse_speed.py --runs 200 --file stdlib/sdpa.leir
    python benchmarks/parse_speed.py --runs 60 --compare /tmp/old   # interleaved: another checkout vs this one

Inputs: every stdlib kernel concatenated into one file (about 300 lines, the size the
language server meets) and the largest stdlib file, or ``--file``. For each: the median
over ``--runs`` runs (after warm-up: the grammar and LALR tables are built once, as in a
long-running process) of the process CPU time — the robust number on a shared machine,
where wall time includes waiting for a core — and the median wall time, plus the split of
one parse into its stages (Lark: LALR parse with its lexer, tree -> AST transform; fast:
tokenizer, parser) and the checker. The load average is printed with the numbers; read
them next to it. The target of issue #14 is parse + check <= 5 ms per 100 lines.

``--compare DIR`` times another checkout of leirc (e.g. ``git worktree add /tmp/old HEAD``)
against this one on the same inputs: one worker process per checkout, each importing its
own ``leirc``, called in alternation one measurement at a time, so that both see the same
machine load; the medians of each side's CPU times are printed next to each other.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    # a compare worker imports the checkout it is given, not this one
    sys.path[0] = sys.argv[2]

from leirc.lang import parser as P  # noqa: E402
from leirc.lang.checker import check_module  # noqa: E402
from leirc.lang.fastparse import parse_fast, tokenize  # noqa: E402

STDLIB = ROOT / "stdlib"


def inputs(path: str | None) -> list[tuple[str, str]]:
    if path:
        p = Path(path)
        return [(str(p), p.read_text(encoding="utf-8"))]
    files = sorted(STDLIB.rglob("*.leir"))
    if not files:
        sys.exit("parse_speed: stdlib/ has no .leir file; pass --file")
    largest = max(files, key=lambda f: (f.stat().st_size, f.name))
    return [(f"stdlib/*.leir concatenated ({len(files)} files)", "\n".join(f.read_text(encoding="utf-8") for f in files)),
            (str(largest.relative_to(ROOT)), largest.read_text(encoding="utf-8"))]


def timed(fn, runs: int) -> tuple[float, float]:
    """Median CPU and median wall milliseconds of one call."""
    cpu, wall = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(cpu), statistics.median(wall)


def load() -> str:
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:  # pragma: no cover - no load average on this platform
        return "n/a"


def bench(name: str, text: str, runs: int, warmup: int) -> None:
    lines = text.count("\n") + 1
    per = 100.0 / lines
    res = P.parse(text, parser="lark")
    if not res.ok:
        print(f"parse_speed: {name} does not parse cleanly: {res.diagnostics[:3]}", file=sys.stderr)
        sys.exit(1)
    if parse_fast(text) is None:
        print(f"parse_speed: the fast parser hands {name} to Lark; its numbers would be Lark's", file=sys.stderr)
        sys.exit(1)
    module = res.module
    lark = P._lark()  # the internals, for the split of one parse into its stages
    tree = lark.parse(text)

    def lark_parse():
        return P.parse(text, parser="lark")

    def fast_parse():
        return P.parse(text, parser="fast")

    for _ in range(warmup):
        lark_parse()
        fast_parse()
        check_module(module)
    lark_runs = max(5, runs // 4)  # Lark is the slow one; fewer runs keep the benchmark short
    rows = [
        ("lark: parse", timed(lark_parse, lark_runs)),
        ("lark:   LALR parse + lexer", timed(lambda: lark.parse(text), lark_runs)),
        ("lark:   tree -> AST", timed(lambda: P._Builder([]).transform(tree), lark_runs)),
        ("fast: parse", timed(fast_parse, runs)),
        ("fast:   tokenizer", timed(lambda: tokenize(text), runs)),
        ("fast:   tokenizer + parser", timed(lambda: parse_fast(text), runs)),
        ("check", timed(lambda: check_module(module), max(5, runs // 2))),
    ]
    by = dict(rows)
    rows += [
        ("lark: parse + check", tuple(a + b for a, b in zip(by["lark: parse"], by["check"]))),
        ("fast: parse + check", tuple(a + b for a, b in zip(by["fast: parse"], by["check"]))),
    ]
    print(f"\n{name}: {len(text)} chars, {lines} lines, {len(module.kernels)} kernel(s); "
          f"{runs} runs ({lark_runs} for Lark) after {warmup} warm-up; load average {load()}")
    print(f"  {'':30s} {'ms/100 lines (CPU)':>19s} {'ms/file (CPU)':>14s} {'ms/file (wall)':>15s}")
    for label, (cpu, wall) in rows:
        print(f"  {label:30s} {cpu * per:19.2f} {cpu:14.2f} {wall:15.2f}")
    speedup = by["lark: parse"][0] / by["fast: parse"][0]
    print(f"  fast parse is {speedup:.1f}x Lark's")


#: what a compare worker can time: name -> (function of text and its parsed module)
MEASURES = {
    "fast parse": lambda text, module: P.parse(text, parser="fast"),
    "check": lambda text, module: check_module(module),
    "fast parse + check": lambda text, module: check_module(P.parse(text, parser="fast").module),
}


def worker(root: str) -> int:
    """Serve timings on stdin/stdout: a line ``<measure>\t<file of text>`` is answered with
    the CPU milliseconds of one call (``ready`` first, once imported)."""
    import leirc

    if not str(Path(leirc.__file__).resolve()).startswith(str(Path(root).resolve())):
        print(f"error: imported {leirc.__file__}, not the checkout {root}", flush=True)
        return 1
    texts: dict = {}
    print("ready", flush=True)
    for line in sys.stdin:
        measure, path = line.rstrip("\n").split("\t")
        if path not in texts:
            text = Path(path).read_text(encoding="utf-8")
            texts[path] = (text, P.parse(text, parser="fast").module)
        text, module = texts[path]
        fn = MEASURES[measure]
        c0 = time.process_time()
        fn(text, module)
        print(f"{(time.process_time() - c0) * 1e3:.6f}", flush=True)
    return 0


def compare(other: str, runs: int, warmup: int, path: str | None) -> int:
    import subprocess
    import tempfile

    sides = {"old": str(Path(other).resolve()), "new": str(ROOT)}
    procs = {}
    for side, root in sides.items():
        procs[side] = subprocess.Popen([sys.executable, __file__, "--worker", root], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True, cwd=root)
        ready = procs[side].stdout.readline().strip()
        if ready != "ready":
            sys.exit(f"parse_speed: the {side} worker ({root}) did not start: {ready}")

    def ask(side: str, measure: str, file: str) -> float:
        p = procs[side]
        p.stdin.write(f"{measure}\t{file}\n")
        p.stdin.flush()
        return float(p.stdout.readline())

    print(f"parse_speed --compare: old = {sides['old']}, new = {sides['new']}; {runs} interleaved runs after "
          f"{warmup} warm-up; CPU ms per 100 lines, median; load average {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, text) in enumerate(inputs(path)):
            file = str(Path(tmp) / f"input{k}.leir")  # the workers keep each file's text by path
            Path(file).write_text(text, encoding="utf-8")
            per = 100.0 / (text.count("\n") + 1)
            print(f"\n{name}: {text.count(chr(10)) + 1} lines")
            print(f"  {'':22s} {'old':>8s} {'new':>8s} {'old/new':>8s}")
            for measure in MEASURES:
                samples: dict = {"old": [], "new": []}
                for k in range(warmup + runs):
                    # alternate which side goes first, so neither always follows the other
                    for side in (("old", "new") if k % 2 == 0 else ("new", "old")):
                        ms = ask(side, measure, file)
                        if k >= warmup:
                            samples[side].append(ms)
                old, new = (statistics.median(samples[s]) * per for s in ("old", "new"))
                print(f"  {measure:22s} {old:8.2f} {new:8.2f} {old / new:7.2f}x")
            print(f"  load average after: {load()}")
    for p in procs.values():
        p.stdin.close()
        p.wait()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--file", help="time this file instead of the stdlib")
    ap.add_argument("--compare", metavar="DIR", help="time the leirc checkout in DIR against this one, interleaved")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(args.compare, args.runs, args.warmup, args.file)
    print(f"parse_speed: python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {load()}")
    for name, text in inputs(args.file):
        bench(name, text, args.runs, args.warmup)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(worker(sys.argv[2]))
    sys.exit(main())
