"""Wall time of the ``leirc verify`` command (process start included), several trees
interleaved in one run.

Each round runs ``python -m leirc.cli.main verify KERNEL --json`` once per tree, the
order of the trees alternating from round to round, so that a change of the machine's load
hits every tree alike. A tree is a directory holding a ``leirc`` package (e.g. a ``git
archive`` of an older commit); it goes first on ``PYTHONPATH``, for the command and for
the workers it starts. The verification reports of all trees must agree (everything but
the timings); the script says so, or prints the first difference and exits 1.

Printed: every run's wall seconds and CPU seconds (the command and its workers: user +
system) with the load average before it, then per tree the median, the minimum, the
median's ratio to the first tree's and the median CPU time. On a loaded machine the CPU
time is the steadier measure of the work done; the wall time of a quiet machine is what
the target is about. Run from the project root::

    .venv/bin/python benchmarks/verify_latency.py [--runs 5] [--tree before=/tmp/old] [--tree after=.]
        [--kernel stdlib/softmax.leir] [-- EXTRA VERIFY ARGS]

Without ``--tree`` the current tree is timed alone. ``--breakdown`` additionally runs the
current tree's verification once in this process and prints a timeline: when the worker
was spawned, imported TVM, built, and when each candidate run, reference run and error
bound ran (wall seconds from the command's start; the worker reports its own clock).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: report fields that measure time, not the verdict
TIMING_FIELDS = ("seconds",)


def load() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def cpu_of_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(tree: str, kernel: str, extra: list) -> tuple[float, float, dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree] + ([os.environ["PYTHONPATH"]]
                                                              if os.environ.get("PYTHONPATH") else [])))
    cmd = [sys.executable, "-m", "leirc.cli.main", "verify", kernel, "--json", *extra]
    c0, t0 = cpu_of_children(), time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tree)
    dt = time.perf_counter() - t0
    # the command waits for its workers, so their CPU time is in its own children's
    cpu = cpu_of_children() - c0
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        sys.exit(f"{tree}: no JSON from leirc verify (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return dt, cpu, doc


def verdict(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in TIMING_FIELDS}


def breakdown(kernel: str, extra: list) -> None:
    """One in-process run of the current tree with a timeline (see the module docstring)."""
    sys.path.insert(0, ROOT)
    t0 = time.time()
    marks: list = []

    def mark(what: str, at: float | None = None) -> None:
        marks.append(((time.time() if at is None else at) - t0, what))

    import importlib  # noqa: PLC0415

    cli = importlib.import_module("leirc.cli.main")  # the package re-exports ``main``, the function
    import leirc.interp as interp  # noqa: PLC0415
    import leirc.lower.session as session  # noqa: PLC0415
    import leirc.verify.bound as bound  # noqa: PLC0415

    mark("leirc.cli imported")

    def timed(cls, name: str, label: str):
        orig = getattr(cls, name)

        def wrapper(*a, **k):
            t = time.time()
            try:
                return orig(*a, **k)
            finally:
                mark(f"{label} ({time.time() - t:.2f} s)", t)

        setattr(cls, name, wrapper)

    orig_worker = session._Worker.__init__

    def spawn(self, *a, **k):
        mark("worker spawned")
        orig_worker(self, *a, **k)

    session._Worker.__init__ = spawn
    orig_ensure = session.KernelSession._ensure

    def ensure(self, *a, **k):
        r = orig_ensure(self, *a, **k)
        if self._ready is not None and not getattr(self, "_marked", False):
            self._marked = True
            for what, at in sorted(self._ready.get("stamps", {}).items(), key=lambda x: x[1]):
                mark(f"worker: {what}", at)
            mark("worker: built, ready", self._ready["ready_at"])
        return r

    session.KernelSession._ensure = ensure
    timed(session.KernelSession, "_run", "candidate run (parent's wait)")
    timed(interp.Interpreter, "run", "interpreter run")
    timed(bound.ErrorBound, "run", "error bound run")
    try:
        cli.main(["verify", kernel, "-q", *extra])
    finally:
        mark("done")
        for t, what in sorted(marks):
            print(f"  {t:7.3f} s  {what}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--kernel", default="stdlib/softmax.leir", help="path relative to each tree")
    ap.add_argument("--breakdown", action="store_true", help="also print the current tree's timeline")
    ap.add_argument("extra", nargs="*", help="further leirc verify arguments (after --)")
    a = ap.parse_args(argv)
    trees = []
    for spec in a.tree or [f"current={ROOT}"]:
        label, eq, d = spec.partition("=")
        if not eq or not os.path.isdir(os.path.join(d, "leirc")):
            ap.error(f"bad --tree {spec!r} (LABEL=DIR, DIR holding a leirc package)")
        trees.append((label, os.path.abspath(d)))
    times: dict = {label: [] for label, _ in trees}
    cpus: dict = {label: [] for label, _ in trees}
    first_doc = None
    print(f"leirc verify {a.kernel} {' '.join(a.extra)} (wall s, process start included); load before: {load()}")
    for r in range(a.runs):
        order = trees if r % 2 == 0 else trees[::-1]
        for label, d in order:
            before = load()
            dt, cpu, doc = run_once(d, a.kernel, a.extra)
            times[label].append(dt)
            cpus[label].append(cpu)
            print(f"  round {r + 1} {label:>10}: {dt:6.2f} s, CPU {cpu:5.2f} s   (load {before})", flush=True)
            if first_doc is None:
                first_doc = (label, verdict(doc))
            elif verdict(doc) != first_doc[1]:
                mine = verdict(doc)
                diff = [k for k in sorted(set(mine) | set(first_doc[1])) if mine.get(k) != first_doc[1].get(k)]
                print(f"REPORTS DIFFER: {label} vs {first_doc[0]} in {diff}: "
                      f"{ {k: mine.get(k) for k in diff} } vs { {k: first_doc[1].get(k) for k in diff} }")
                return 1
    print(f"load after: {load()}")
    base = statistics.median(times[trees[0][0]])
    for label, _ in trees:
        med = statistics.median(times[label])
        print(f"{label:>10}: median {med:.2f} s, min {min(times[label]):.2f} s, "
              f"runs {', '.join(f'{t:.2f}' for t in times[label])}; median / {trees[0][0]}'s: {med / base:.2f}; "
              f"CPU (command and workers) median {statistics.median(cpus[label]):.2f} s")
    print(f"reports identical across trees (all fields but {', '.join(TIMING_FIELDS)}): verdict "
          f"{'EQUAL' if first_doc[1].get('ok') else 'NOT EQUAL'}")
    if a.breakdown:
        print("timeline of one in-process run (current tree):")
        breakdown(a.kernel, a.extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
