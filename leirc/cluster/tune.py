"""``leirc tune``: many kernels through ``-O search`` at once, on local processes or a cluster.

The driver (this process) loads every input (``.leir`` files, every kernel in them, and
KernelBench-format ``.py`` modules through the importer), turns each kernel into one job
keyed by (its program fingerprint, the search's configuration, the target fingerprint), and
hands the jobs to an :class:`~leirc.cluster.Executor`. A job runs one whole search
(:class:`leirc.search.SearchOptimizer` with no files, an in-process HTAM memory and the
node's own evaluation cache) and returns its result row; the driver alone writes
``OUT/tune.sqlite`` (WAL, one transaction per kernel), the best programs and the table.
A search builds, verifies and times its candidates in one evaluator, so the whole job runs
where timing is allowed (a node of the requested target fingerprint).

Resume: a killed driver is rerun with ``--resume``; kernels already in the database are not
submitted again, and a row is written once (a key already present is never replaced).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from .. import __version__
from ..io import write_atomic
from .executor import ClusterError, Task, job_key, open_executor
from .hostid import target_fingerprint
from .progress import Progress

DB_NAME = "tune.sqlite"
TABLE = "results.md"
#: the columns of the results table, in order
COLUMNS = ("kernel", "o2_ms", "best_ms", "speedup", "steps", "verified")


class TuneError(Exception):
    """Bad input or an output directory of another tuning run; one line for the user."""


@dataclass(frozen=True)
class TuneOptions:
    """What decides a tuning run's results (recorded; ``--resume`` must use the same)."""

    budget: int = 8
    algo: str = "beam"
    seed: int = 0
    proposers: Optional[tuple] = None  # None: the search's defaults
    target: str = "llvm"
    threads: int = 2
    strategies: Optional[tuple] = None
    time_limit: Optional[float] = None  # seconds per kernel

    def to_json(self) -> dict:
        d = asdict(self)
        d["proposers"] = None if self.proposers is None else list(self.proposers)
        d["strategies"] = None if self.strategies is None else list(self.strategies)
        d["leirc"] = __version__
        return d


@dataclass
class Kernel:
    name: str  # unique in the run: file stem, and ::kernel for a file with several
    source: str  # the input path
    text: str  # the checked kernel, pretty-printed
    fingerprint: str


@dataclass
class Loaded:
    kernels: list = field(default_factory=list)
    problems: list = field(default_factory=list)  # one line each: file:line:col: error[CODE]: message


def _diag_line(d, path: str) -> str:
    j = d.to_json()
    return f"{j.get('file') or path}:{j['line']}:{j['col']}: error[{j['code']}]: {j['message']}"


def load_inputs(paths, log: Callable[[str], None] = lambda m: None) -> Loaded:
    """Every kernel of ``paths`` (files or directories of ``.leir``/``.py``), checked; files
    that fail are problems, not exceptions."""
    from ..driver import ModelImportError, PipelineError, UsageError, new_build, run_pipeline
    from ..lang.canonical import fingerprint
    from ..lang.printer import PRETTY, print_kernel

    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in sorted(os.walk(p)):
                files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith((".leir", ".py")))
        elif os.path.isfile(p):
            files.append(p)
        else:
            raise TuneError(f"{p}: no such file or directory")
    out = Loaded()
    for f in files:
        try:
            b = run_pipeline(new_build(f), until="check")
        except PipelineError as e:
            lines = [_diag_line(d, f) for d in e.diagnostics if d.is_error]
            out.problems.extend(lines or [f"{f}: {e}"])
            continue
        except (ModelImportError, UsageError, OSError) as e:
            out.problems.append(f"{f}: {e}")
            continue
        stem = os.path.splitext(os.path.basename(f))[0]
        for j in b.jobs:
            name = stem if len(b.jobs) == 1 or j.name == stem else f"{stem}::{j.name}"
            k = j.original.kernel
            out.kernels.append(Kernel(name, f, print_kernel(k, PRETTY), fingerprint(k)))
        log(f"loaded {f}: {len(b.jobs)} kernel(s)")
    names = [k.name for k in out.kernels]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TuneError(f"two inputs give the kernel name {dup[0]}: tune them in separate runs or rename one")
    return out


def tune_task(kernel: Kernel, opts: TuneOptions, cache_dir: Optional[str]) -> dict:
    """One kernel's search (runs where the executor places it); returns its result row.
    Writes nothing shared: a search killed with its node simply runs again elsewhere."""
    from ..engine.program import Program
    from ..search.core import SearchOptions
    from ..search.optimizer import SearchOptimizer, default_dir

    prog = Program.from_text(kernel.text)
    if not getattr(prog, "ok", False):
        raise RuntimeError(f"{kernel.name}: the loaded kernel does not check here")
    kw = {}
    if opts.proposers is not None:
        kw["proposers"] = opts.proposers
    so = SearchOptions(algo=opts.algo, budget=opts.budget, time_limit=opts.time_limit, seed=opts.seed,
                       target=opts.target, threads=opts.threads, strategies=opts.strategies, memory=None, state=None,
                       cache_dir=cache_dir if cache_dir is not None else os.path.join(default_dir(), "cluster"), **kw)
    t0 = time.perf_counter()
    res = SearchOptimizer(so, progress=False).optimize(prog.result, opts.target).result
    from ..lang.printer import PRETTY, print_kernel

    o2 = [n.ms for n in res.nodes if n.evaluation is not None and n.parent is not None and n.ok and n.ms
          and getattr(n.proposal, "source", None) == "o2"]
    o2_ms, o2_from = (min(o2), "search") if o2 else (_o2_ms(prog, kernel.text, opts, so.cache_dir), "separate")
    best_ms = res.best_ms
    best = res.best

    return {"kernel": kernel.name, "source": kernel.source, "fingerprint": kernel.fingerprint,
            "o0_ms": res.root_ms, "o2_ms": o2_ms, "o2_timed": o2_from if o2_ms else None, "best_ms": best_ms,
            "speedup": round(o2_ms / best_ms, 4) if o2_ms and best_ms else None,
            "speedup_vs_o0": round(res.speedup, 4), "steps": [s.to_json() for s in best.steps],
            "verified": bool(best.evaluation is not None and best.evaluation.ok),
            "best_fingerprint": best.fingerprint, "best_leir": print_kernel(best.program.kernel, PRETTY),
            "evaluations": res.evaluations, "stopped": res.stopped,
            "candidates": [{"fingerprint": n.fingerprint, "ok": n.ok,
                            "error_kind": n.evaluation.error_kind if n.evaluation is not None else None,
                            "source": getattr(n.proposal, "source", None)}
                           for n in res.nodes if n.evaluation is not None],
            "seconds": round(time.perf_counter() - t0, 3)}


def _o2_ms(prog, text: str, opts: TuneOptions, cache_dir: str) -> Optional[float]:
    """-O2's time when the search did not evaluate it (not among the proposers, or the budget
    ran out first): built, verified against the input and timed in an evaluator of its own."""
    from ..driver import O2
    from ..engine.evaluate import Evaluator
    from ..lang.printer import PRETTY, print_kernel

    try:
        o2 = print_kernel(O2().optimize(prog.result, opts.target).kernel, PRETTY)
    except Exception:  # noqa: BLE001 - -O2 does not apply: the column says "-"
        return None
    ev = Evaluator(opts.target, threads=opts.threads, cache_dir=cache_dir)
    try:
        e = ev.evaluate(o2, reference=text)
    finally:
        ev.close()
    return e.timing.median_ms if e.ok and e.timing is not None and e.timing.ok else None


class ResultsDB:
    """``OUT/tune.sqlite``: one row per kernel job, written by the driver only (WAL; one
    transaction per row; a key already present is kept, never replaced)."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, DB_NAME)
        try:
            with self._connect() as c:
                c.execute("PRAGMA journal_mode=WAL")
                c.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                c.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, kernel TEXT NOT NULL, "
                          "ok INTEGER NOT NULL, node TEXT, target_fingerprint TEXT, attempts INTEGER, "
                          "record TEXT NOT NULL)")
        except sqlite3.DatabaseError as e:
            raise TuneError(f"{self.path}: {e}") from None

    def _connect(self) -> sqlite3.Connection:
        c = sqlite3.connect(self.path, timeout=60.0)
        c.execute("PRAGMA synchronous=FULL")
        return c

    def options(self) -> Optional[dict]:
        c = self._connect()
        try:
            row = c.execute("SELECT value FROM meta WHERE key = 'options'").fetchone()
            return json.loads(row[0]) if row else None
        finally:
            c.close()

    def claim(self, options: dict, resume: bool) -> None:
        """Record ``options`` for a new run, or check them against the recorded run's. A
        directory whose run stored nothing yet (it failed to start) is taken over."""
        have = self.options()
        if have is None or not self.keys():
            c = self._connect()
            try:
                with c:
                    c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('options', ?)",
                              (json.dumps(options, sort_keys=True),))
            finally:
                c.close()
            return
        if not resume:
            raise TuneError(f"{os.path.dirname(self.path) or '.'} holds a tuning run already: pass --resume to "
                            "continue it, or use another -o directory")
        if have != json.loads(json.dumps(options, sort_keys=True)):
            diff = sorted(k for k in set(have) | set(options) if have.get(k) != options.get(k))
            raise TuneError(f"--resume: {os.path.dirname(self.path) or '.'} was tuned with other options "
                            f"({', '.join(diff)})")

    def keys(self) -> set:
        c = self._connect()
        try:
            return {k for (k,) in c.execute("SELECT key FROM results")}
        finally:
            c.close()

    def put(self, key: str, record: dict) -> bool:
        """Store ``record`` under ``key`` unless the key is there; True when written."""
        c = self._connect()
        try:
            with c:
                cur = c.execute("INSERT OR IGNORE INTO results (key, kernel, ok, node, target_fingerprint, attempts, "
                                "record) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                (key, record["kernel"], int(record.get("ok", False)), record.get("node"),
                                 record.get("target_fingerprint"), record.get("attempts"),
                                 json.dumps(record, sort_keys=True)))
                return cur.rowcount == 1
        finally:
            c.close()

    def records(self) -> list:
        c = self._connect()
        try:
            return [json.loads(r) for (r,) in c.execute("SELECT record FROM results ORDER BY kernel, key")]
        finally:
            c.close()


def _fmt(v, kind: str) -> str:
    if v is None:
        return "-"
    if kind == "ms":
        return f"{v:.4g}"
    if kind == "x":
        return f"{v:.3g}x"
    return str(v)


def table(records: list) -> str:
    """The results table (Markdown): kernel, -O2 time, best time, speedup over -O2, steps,
    verified."""
    lines = ["| kernel | -O2 ms | best ms | speedup vs -O2 | steps | verified |", "|---|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: r["kernel"]):
        if not r.get("ok"):
            lines.append(f"| {r['kernel']} | - | - | - | - | failed: {(r.get('error') or '')[:80]} |")
            continue
        lines.append(f"| {r['kernel']} | {_fmt(r['o2_ms'], 'ms')} | {_fmt(r['best_ms'], 'ms')} | "
                     f"{_fmt(r['speedup'], 'x')} | {len(r['steps'])} | {'yes' if r['verified'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def tune(paths, out_dir: str, opts: TuneOptions, *, workers: int = 1, cluster: Optional[str] = None,
         resume: bool = False, executor=None, progress: Optional[bool] = None,
         log: Callable[[str], None] = lambda m: None) -> dict:
    """Tune every kernel of ``paths``; returns the summary (``interrupted`` after Ctrl-C)."""
    loaded = load_inputs(paths, log)
    if not loaded.kernels and not loaded.problems:
        raise TuneError(f"no kernels in {', '.join(map(str, paths))} (.leir files or KernelBench-format .py modules)")
    db = ResultsDB(out_dir)
    db.claim(opts.to_json(), resume)
    fp = target_fingerprint(opts.target)
    config = {k: v for k, v in opts.to_json().items() if k != "leirc"}
    keyed = {job_key(k.fingerprint, {"tune": config, "kernel": k.name}, fp): k for k in loaded.kernels}
    have = db.keys()
    todo = {key: k for key, k in keyed.items() if key not in have}
    log(f"{len(keyed)} kernel(s); {len(keyed) - len(todo)} already tuned, {len(todo)} to run")
    t0 = time.perf_counter()
    interrupted = False
    written = 0
    run_info: dict = {}
    if todo:
        own = executor is None
        ex = executor or open_executor(cluster, workers=workers, target=opts.target)
        cache_dir = os.path.abspath(os.path.join(out_dir, "evalcache")) if cluster is None else None
        bar = Progress(len(todo), where=ex.where, live=progress, what="kernels")
        try:
            for key, k in todo.items():
                ex.submit(Task(key, tune_task, (k, opts, cache_dir), times=True, cpus=opts.threads, label=k.name))
            for out in ex.as_completed():
                k = keyed[out.key]
                rec = dict(out.value) if out.ok else {"kernel": k.name, "source": k.source,
                                                      "fingerprint": k.fingerprint, "error": out.error}
                rec.update(ok=out.ok, node=out.node, target_fingerprint=out.fingerprint, attempts=out.attempts)
                if db.put(out.key, rec):
                    written += 1
                    if out.ok and rec.get("best_leir"):
                        safe = k.name.replace("::", ".").replace(os.sep, "_")
                        write_atomic(os.path.join(out_dir, f"{safe}.best.leir"), rec["best_leir"])
                bar.retried = ex.retries
                bar.add(out)
                if not bar.live:
                    log(f"tuned {k.name} on {out.node or '?'}" + ("" if out.ok else f": failed: {out.error}"))
        except KeyboardInterrupt:
            interrupted = True
            ex.cancel()
        finally:
            bar.retried = ex.retries
            bar.finish()
            if own:
                ex.close()
        run_info = bar.summary()
    records = [r for r in db.records() if r["kernel"] in {k.name for k in keyed.values()}]
    write_atomic(os.path.join(out_dir, TABLE), table(records))
    left = len(keyed) - len(db.keys() & set(keyed))
    summary = {"kernels": len(keyed), "tuned": len(keyed) - left, "written_this_run": written, "left": left,
               "failed": sum(1 for r in records if not r.get("ok")), "problems": loaded.problems,
               "database": db.path, "table": os.path.join(out_dir, TABLE), "seconds": round(time.perf_counter() - t0, 2),
               "complete": left == 0}
    if run_info:
        summary["executor"] = run_info
    if interrupted:
        summary["interrupted"] = True
    summary["results"] = [{c: (len(r["steps"]) if c == "steps" and r.get("ok") else r.get(c)) for c in COLUMNS}
                          for r in records]
    return summary


__all__ = ["TuneOptions", "TuneError", "Kernel", "Loaded", "load_inputs", "tune_task", "tune", "ResultsDB", "table",
           "COLUMNS", "DB_NAME", "TABLE"]
