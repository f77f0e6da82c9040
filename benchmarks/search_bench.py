"""The search benchmark matrix (issue #13, deliverable 7): -O0, -O2, the search per proposer set,
PyTorch eager, torch.compile and MetaSchedule at the search's wall-clock, per kernel, in one run.

    .venv/bin/python benchmarks/search_bench.py --suite stdlib --budget 64 \\
        --json out/search_matrix.json --md out/search_matrix.md                 # the matrix
    .venv/bin/python benchmarks/search_bench.py --only relu --only gemv --budget 4 --ms-seconds 30
    .venv/bin/python benchmarks/search_bench.py --suite stdlib --budget 64 --holdout --no-matrix   # warm memory

Per kernel (a stdlib ``.leir``, a workload-suite module ``benchmarks/workloads/*.py``, or
``--only NAME``), in this order:

1. each proposer set (``--proposer``, repeatable; default ``menu``, ``htam``,
   ``menu,htam,reuse``) runs ``-O search`` through the driver's passes, as ``leirc build
   KERNEL -O search`` does (load, check, optimize = the search, lower, build, verify), with a
   fresh HTAM memory and no evaluation cache, so every set pays the same price; its
   per-evaluation trajectory gives *evaluations to 90 %* (the first evaluation whose
   best-so-far speedup is >= 0.9 x the final one) and, against menu's, the issue's HTAM target
   (evaluations HTAM needs to reach menu's final speedup, over menu's own);
2. -O2 (``leirc build -O 2``), the -O0 program;
3. MetaSchedule tunes the same computation for the wall-clock the ``--ms-match`` search took
   (``--ms-seconds`` overrides; 0 skips) in a worker that is stopped at the deadline; the best
   schedule recorded so far is compiled and checked against leirc's -O0 outputs
   (``search_matrix/ms_tune.py``);
4. every variant is timed in ``--rounds`` interleaved rounds (leirc variants in their own
   sandboxed worker sessions, PyTorch and MetaSchedule in this process, the same input sets,
   2 threads everywhere); the tables report medians over rounds, so a burst of load hits
   every column alike. The eager function of a stdlib kernel is ``search_matrix/torch_eager.py``
   (checked against -O0's outputs); for a workload module it is the module.

``--holdout``: the kernels, sorted by name, are split even/odd; ``menu,htam,reuse`` runs on
the first half with one memory file (training), then on each held-out kernel twice, with a
copy of the trained memory (warm) and with a fresh one (cold), in alternating order.

The JSON (``--json``) and markdown (``--md``) are rewritten after every row, so a killed run
keeps what it measured. The load average is printed with every row: on a shared machine it
says how far to trust the row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from search_matrix import metrics  # noqa: E402

DEFAULT_SETS = ("menu", "htam", "menu,htam,reuse")
HOLDOUT_SET = "menu,htam,reuse"
#: the seeds of the timing inputs (the driver's time pass uses the same)
TIMING_SEEDS = (100, 101, 102)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_text() -> str:
    a = os.getloadavg()
    return f"load {a[0]:.2f} {a[1]:.2f} {a[2]:.2f}"


# ---------------------------------------------------------------------------
# the kernels


def find_cases(suite: list[str], only: list[str]) -> list[dict]:
    """[{name, path, kind}] in a stable order."""
    std = sorted((REPO / "stdlib").glob("*.leir"))
    wl = sorted((BENCH / "workloads").glob("*.py"))
    out = []
    if only:
        for name in only:
            p = Path(name)
            hit = (p if p.exists() else None) or next((q for q in std if q.stem == name), None) or \
                next((q for q in wl if q.stem == name or q.stem.split("_", 2)[-1] == name), None)
            if hit is None:
                raise SystemExit(f"search_bench: no stdlib kernel or workload module named '{name}'")
            out.append(hit)
    for s in suite:
        out.extend(std if s == "stdlib" else wl)
    seen, cases = set(), []
    for p in out:
        if p.resolve() in seen:
            continue
        seen.add(p.resolve())
        cases.append({"name": p.stem, "path": str(p), "kind": "py" if p.suffix == ".py" else "leir"})
    return cases


# ---------------------------------------------------------------------------
# the searches


class Recording:
    """The driver's optimizer for ``-O search`` that keeps every kernel's SearchResult."""

    name = "-Osearch"

    def __init__(self, inner):
        self.inner = inner
        self.results = []

    def optimize(self, result, target):
        got = self.inner.optimize(result, target)
        self.results.append(self.inner.last)
        return got


def run_search(case: dict, props: str, args, out_dir: str, memory: str) -> dict:
    """One ``-O search`` of ``case`` through the driver (until verify); its summary row."""
    from leirc import driver
    from leirc.search.core import SearchOptions
    from leirc.search.optimizer import SearchOptimizer

    opts = SearchOptions(algo=args.algo, budget=args.budget, proposers=tuple(props.split(",")), seed=args.seed,
                         workers=args.workers, memory=memory, cache_dir=None)
    rec = Recording(SearchOptimizer(opts, out_dir=out_dir, log=lambda m: log(f"    {m}") if args.verbose else None,
                                    progress=False))
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    try:
        b = driver.run_pipeline(driver.new_build(case["path"], options=driver.BuildOptions(opt="search", search=rec)),
                                until="verify")
    except Exception as e:  # noqa: BLE001 - one failed search is a row, not a dead matrix
        return {"proposers": props, "error": f"{type(e).__name__}: {e}"[:400], "load": list(load0)}
    wall = time.perf_counter() - t0
    results = rec.results
    hist = results[0].history if len(results) == 1 else _joint_history(results)
    sp = [r.speedup for r in results]
    row = {"proposers": props, "texts": [j.text() for j in b.jobs],
           "speedup": sp[0] if len(sp) == 1 else metrics.geomean(sp),
           "spread": results[0].speedup_spread if len(results) == 1 else None,
           "root_ms": sum(r.root_ms or 0 for r in results), "best_ms": sum(r.best_ms or 0 for r in results),
           "evaluations": sum(r.evaluations for r in results), "history": [list(h) for h in hist],
           "evals_to_90": metrics.evals_to_fraction(hist, 0.9),
           "per_evaluation": [{"kernel": r.root.program.kernel.name, "index": n.index, "step": " -> ".join(
               str(s) for s in n.steps), "ok": n.ok, "ms": n.ms, "accepted": n.accepted, "rel": n.rel}
               for r in results for n in sorted((n for n in r.nodes if n.index is not None), key=lambda n: n.index)],
           "steps": [str(s) for r in results for s in r.steps], "search_s": sum(r.seconds for r in results),
           "pipeline_s": wall, "stopped": [r.stopped for r in results],
           "verified": all(bool(j.verification and j.verification.equal) for j in b.jobs if j.steps),
           "load": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in os.getloadavg()]}
    return row


def _joint_history(results) -> list:
    """Several kernels of one module searched one after the other: evaluations add up, the
    speedup is the geomean of each kernel's best so far."""
    out, done, best = [], 0, [1.0] * len(results)
    for i, r in enumerate(results):
        for e, s in r.history:
            best[i] = s
            out.append((done + e, metrics.geomean(best)))
        done += r.evaluations
    return out


# ---------------------------------------------------------------------------
# the other columns


def level_build(case: dict, level: str):
    from leirc import driver

    return driver.run_pipeline(driver.new_build(case["path"], options=driver.BuildOptions(opt=level)),
                               until="optimize")


def level_texts(case: dict, level: str) -> list[str]:
    return [j.text() for j in level_build(case, level).jobs]


def input_sets(case: dict, b0):
    """(per job: [name -> array] per timing seed, torch sets, the module) for the -O0 build
    ``b0``."""
    kernels = [j.current.kernel for j in b0.jobs]
    if case["kind"] == "py":
        from leirc.frontend import load_model
        from leirc.frontend.verify import leir_inputs

        model = load_model(case["path"])
        weights = b0.model.imported.weights
        sets = [model.get_inputs(s) for s in TIMING_SEEDS]
        return [[leir_inputs(k, s, weights) for s in sets] for k in kernels], sets, model.model
    from leirc.interp import random_inputs

    return [[random_inputs(k, s, "uniform") for s in TIMING_SEEDS] for k in kernels], None, None


def reference_outputs(texts0: list[str], feeds: list) -> list[dict]:
    """leirc -O0's outputs on the first timing set, per job (the stdlib is trusted code: built
    in this process)."""
    from leirc.engine.program import Program
    from leirc.lower import build

    outs = []
    for t, f in zip(texts0, feeds):
        p = Program.from_text(t)
        outs.append(build(p.result, "llvm").run(f[0]))
    return outs


def close_enough(got, want) -> bool:
    import numpy as np

    got, want = np.asarray(got, dtype="float64"), np.asarray(want, dtype="float64")
    if got.shape != want.shape:
        got = got.reshape(want.shape) if got.size == want.size else got
    if got.shape != want.shape:
        return False
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    return bool(np.allclose(got, want, rtol=2e-3, atol=2e-4 * scale, equal_nan=True))


def eager_callable(case: dict, texts0: list[str], feeds: list, refs: list, torch_sets, model, compile_: bool):
    """(call(k), note) for the eager / torch.compile column, or (None, why)."""
    import torch

    torch.set_num_threads(2)
    if case["kind"] == "py":
        fn = model
        if compile_:
            from leirc.frontend.bench import private_inductor_cache

            private_inductor_cache()
            fn = torch.compile(model)
        sets = torch_sets

        def call(k):
            with torch.no_grad():
                return fn(*sets[k])
        try:
            call(0)
        except Exception as e:  # noqa: BLE001
            return None, f"{type(e).__name__}: {e}"[:200]
        return call, "the module"
    from leirc.engine.program import Program
    from search_matrix.torch_eager import eager

    if len(texts0) != 1:
        return None, "no eager version"
    f = eager(case["name"])
    if f is None:
        return None, "no eager version"
    if compile_:
        from leirc.frontend.bench import private_inductor_cache

        private_inductor_cache()
        f = torch.compile(f)
    k = Program.from_text(texts0[0]).kernel
    tsets = [{p.name: torch.from_numpy(s[p.name]) for p in k.inputs} for s in feeds[0]]
    try:
        with torch.no_grad():
            got = f(**tsets[0])
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {e}"[:200]
    bad = [n for n, v in refs[0].items() if n in got and not close_enough(got[n].numpy(), v)]
    if bad or not all(n in got for n in refs[0]):
        return None, f"eager version does not match -O0 ({', '.join(bad) or 'outputs'})"

    def call_std(k_):
        with torch.no_grad():
            return f(**tsets[k_])
    return call_std, "search_matrix/torch_eager.py (checked against -O0)"


def metaschedule(case: dict, seconds: float, texts0: list[str], feeds: list, refs: list, work: str):
    """(call(k) or None, summary dict)."""
    if seconds <= 0:
        return None, None
    try:
        from search_matrix import ms_tune
    except Exception as e:  # noqa: BLE001
        return None, {"error": f"cannot import MetaSchedule: {e}"}
    if case["kind"] != "leir" or len(texts0) != 1 or not ms_tune.has_prim_func(case["name"]):
        return None, {"error": "no block-structured (TE) version of this kernel: -O0's TIR has no blocks to schedule"}
    import numpy as np
    import tvm

    summary = ms_tune.tune(case["name"], work, seconds, log=log)
    _, summary["source"] = ms_tune.prim_func(case["name"])
    try:
        fn, trace, best = ms_tune.load(case["name"], work)
    except Exception as e:  # noqa: BLE001
        summary["error"] = f"{type(e).__name__}: {e}"[:200]
        return None, summary
    summary["best_during_tuning_ms"] = best
    Path(work, "best_trace.py").write_text(trace + "\n")
    from leirc.engine.program import Program

    k = Program.from_text(texts0[0]).kernel
    dev = tvm.cpu()
    tsets = [[tvm.runtime.tensor(np.ascontiguousarray(s[p.name]), dev) for p in k.inputs]
             + [tvm.runtime.tensor(np.zeros(tuple(p.shape), "float32"), dev) for p in k.outputs] for s in feeds[0]]
    fn(*tsets[0])
    outs = {p.name: tsets[0][len(k.inputs) + i].numpy() for i, p in enumerate(k.outputs)}
    ok = all(close_enough(outs[n], v) for n, v in refs[0].items())
    summary["checked"] = "equal to -O0" if ok else "DIFFERS from -O0"
    if not ok:
        return None, summary
    return (lambda i: fn(*tsets[i])), summary


def time_interleaved(variants: dict, rounds: int) -> dict:
    """variants: column -> ("leirc", [texts], [per job sets]) | ("py", call(k), n_sets). Returns
    column -> median over rounds (ms), each round timing every column in turn."""
    from leirc.engine.program import Program
    from leirc.frontend.bench import time_callable
    from leirc.lower.session import KernelSession

    sessions, per = {}, {c: [] for c in variants}
    try:
        for col, v in variants.items():
            if v[0] == "leirc":
                sessions[col] = [KernelSession(t, kernel=Program.from_text(t).kernel.name, target="llvm", threads=2,
                                               timeout=600.0) for t in v[1]]
        for r in range(rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for col in order:
                v = variants[col]
                if v[0] == "leirc":
                    total = 0.0
                    for s, sets in zip(sessions[col], v[2]):
                        tr = s.time(sets, warmup=1, repeat=3, min_repeat_ms=50.0)
                        if not tr.ok:
                            total = None
                            log(f"    {col}: timing failed: {tr.error_kind}: {tr.error}")
                            break
                        total += tr.median_ms
                    if total is not None:
                        per[col].append(total)
                else:
                    st = time_callable(v[1], v[2], warmup=1, repeat=3, min_repeat_ms=50.0)
                    if st.ok:
                        per[col].append(st.median_ms)
    finally:
        for ss in sessions.values():
            for s in ss:
                s.close()
    return {c: (statistics.median(v) if v else None) for c, v in per.items()}


# ---------------------------------------------------------------------------
# one kernel


def measure(case: dict, args, out_dir: str) -> dict:
    load0 = os.getloadavg()
    name = case["name"]
    work = os.path.join(out_dir, name)
    os.makedirs(work, exist_ok=True)
    searches = []
    for props in args.sets:
        tag = props.replace(",", "+")
        log(f"  search {tag} ({load_text()})")
        searches.append(run_search(case, props, args, os.path.join(work, tag),
                                   os.path.join(work, f"memory.{tag}.sqlite")))
        s = searches[-1]
        log(f"  search {tag}: " + (s.get("error") or f"x{s['speedup']:.3g} in {s['evaluations']} evaluations, "
                                   f"{s['search_s']:.0f} s, 90 % at {s['evals_to_90']}"))
    b0 = level_build(case, "0")
    texts0 = [j.text() for j in b0.jobs]
    texts2 = level_texts(case, "2")
    feeds, torch_sets, model = input_sets(case, b0)
    refs = reference_outputs(texts0, feeds)
    variants = {"O0": ("leirc", texts0, feeds), "O2": ("leirc", texts2, feeds)}
    for s in searches:
        if "texts" in s:
            variants[f"search:{s['proposers']}"] = ("leirc", s["texts"], feeds)
    n_sets = len(TIMING_SEEDS)
    notes = {}
    call, notes["eager"] = eager_callable(case, texts0, feeds, refs, torch_sets, model, False)
    if call is not None:
        variants["eager"] = ("py", call, n_sets)
    if args.compile:
        call, notes["compile"] = eager_callable(case, texts0, feeds, refs, torch_sets, model, True)
        if call is not None:
            variants["compile"] = ("py", call, n_sets)
    match = next((s for s in searches if s["proposers"] == args.ms_match and "search_s" in s),
                 next((s for s in searches if "search_s" in s), None))
    ms_seconds = args.ms_seconds if args.ms_seconds is not None else (match["search_s"] if match else 0.0)
    call, ms_summary = metaschedule(case, ms_seconds, texts0, feeds, refs, os.path.join(work, "metaschedule"))
    if ms_summary is not None:
        ms_summary["matched"] = (f"--ms-seconds {args.ms_seconds:g}" if args.ms_seconds is not None
                                 else f"search {match['proposers']}" if match else None)
    if call is not None:
        variants["ms"] = ("py", call, n_sets)
    log(f"  timing {len(variants)} variants, {args.rounds} interleaved rounds ({load_text()})")
    times = time_interleaved(variants, args.rounds)
    for s in searches:
        s.pop("texts", None)
    row = {"kernel": name, "path": os.path.relpath(case["path"], REPO), "kind": case["kind"],
           "ms_by_column": {c: v for c, v in times.items() if v is not None}, "notes": notes, "ms": ms_summary,
           "searches": searches, "load": [round(x, 2) for x in load0],
           "load_after": [round(x, 2) for x in os.getloadavg()]}
    menu = next((s for s in searches if s["proposers"] == "menu" and "history" in s), None)
    htam = next((s for s in searches if s["proposers"] == "htam" and "history" in s), None)
    if menu and htam:
        row["htam_vs_menu"] = metrics.htam_vs_menu(menu["history"], htam["history"])
    return row


def print_row(row: dict) -> None:
    t = row["ms_by_column"]
    sp = metrics.speedups(row)
    parts = [f"{c} {v:.4g} ms" + (f" (x{sp[c]['vs_eager']:.3g} vs eager)" if sp.get(c, {}).get("vs_eager") and
                                    c != "eager" else "") for c, v in t.items()]
    print(f"{row['kernel']}: " + ", ".join(parts) + f"  [load {row['load'][0]:.1f}-{row['load_after'][0]:.1f}]",
          flush=True)


# ---------------------------------------------------------------------------
# held-out memory


def holdout(cases: list[dict], args, out_dir: str, doc: dict) -> None:
    by_name = {c["name"]: c for c in cases}
    train, test = metrics.holdout_split(by_name)
    hold = doc["holdout"] = {"set": HOLDOUT_SET, "train": train, "test": test, "rows": [], "training": []}
    work = os.path.join(out_dir, "holdout")
    os.makedirs(work, exist_ok=True)
    trained = os.path.join(work, "memory.trained.sqlite")
    for name in train:
        log(f"holdout: training on {name} ({load_text()})")
        s = run_search(by_name[name], HOLDOUT_SET, args, os.path.join(work, "train", name), trained)
        s.pop("texts", None)
        hold["training"].append({"kernel": name, **{k: s.get(k) for k in ("speedup", "evaluations", "evals_to_90",
                                                                           "search_s", "error", "load")}})
        metrics.write(doc, args.json, args.md)
    for i, name in enumerate(test):
        load0 = os.getloadavg()
        got = {}
        for kind in (("warm", "cold") if i % 2 == 0 else ("cold", "warm")):
            mem = os.path.join(work, f"memory.{name}.{kind}.sqlite")
            if kind == "warm":
                _copy_db(trained, mem)
            log(f"holdout: {name} {kind} ({load_text()})")
            s = run_search(by_name[name], HOLDOUT_SET, args, os.path.join(work, kind, name), mem)
            s.pop("texts", None)
            got[kind] = {k: s.get(k) for k in ("speedup", "spread", "evaluations", "evals_to_90", "search_s", "steps",
                                               "error", "history")}
        row = {"kernel": name, **got, "load": [round(x, 2) for x in load0],
               "load_after": [round(x, 2) for x in os.getloadavg()]}
        hold["rows"].append(row)
        w, c = got["warm"], got["cold"]
        print(f"holdout {name}: warm x{w.get('speedup') or 0:.3g} (90 % at {w.get('evals_to_90')}), cold "
              f"x{c.get('speedup') or 0:.3g} (90 % at {c.get('evals_to_90')})  [load {row['load'][0]:.1f}-"
              f"{row['load_after'][0]:.1f}]", flush=True)
        metrics.write(doc, args.json, args.md)


def _copy_db(src: str, dst: str) -> None:
    """A consistent copy of an SQLite file (its WAL included)."""
    import sqlite3

    if not os.path.exists(src):
        return
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


# ---------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", action="append", default=[], choices=("stdlib", "workloads"),
                    help="kernels: the stdlib, the workload suite (repeatable)")
    ap.add_argument("--only", action="append", default=[],
                    help="a stdlib kernel or workload module by name, or a path (repeatable)")
    ap.add_argument("--budget", type=int, default=64, help="evaluations per search (the issue: 64)")
    ap.add_argument("--algo", default="beam")
    ap.add_argument("--proposer", action="append", default=[],
                    help=f"a proposer set (repeatable; default {' '.join(DEFAULT_SETS)})")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds of the final table")
    ap.add_argument("--ms-seconds", type=float, default=None,
                    help="MetaSchedule's tuning wall-clock (default: what the --ms-match search took; 0 skips)")
    ap.add_argument("--ms-match", default="menu,htam,reuse", help="the search whose wall-clock MetaSchedule gets")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    ap.add_argument("--holdout", action="store_true", help="also measure held-out warm memory")
    ap.add_argument("--no-matrix", dest="matrix", action="store_false", help="only the held-out measurement")
    ap.add_argument("--out", default=None, help="working directory (reports, memories); default: a temporary one")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--md", metavar="FILE")
    ap.add_argument("--verbose", action="store_true", help="the searches' logs")
    args = ap.parse_args(argv)
    args.sets = args.proposer or list(DEFAULT_SETS)
    if not args.suite and not args.only:
        args.suite = ["stdlib"]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TVM_NUM_THREADS", "2")
    cases = find_cases(args.suite, args.only)
    out_dir = args.out or tempfile.mkdtemp(prefix="leirc-search-matrix-")
    os.makedirs(out_dir, exist_ok=True)
    doc = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "budget": args.budget,
           "algo": args.algo, "sets": args.sets, "seed": args.seed, "rounds": args.rounds,
           "command": " ".join(["benchmarks/search_bench.py"] + list(sys.argv[1:] if argv is None else argv)),
           "cpu_count": os.cpu_count(), "rows": []}
    log(f"{len(cases)} kernel(s), budget {args.budget}, sets {' '.join(args.sets)}; out {out_dir} ({load_text()})")
    if args.matrix:
        for case in cases:
            log(f"{case['name']} ({load_text()})")
            try:
                row = measure(case, args, out_dir)
            except Exception as e:  # noqa: BLE001 - one kernel's failure is a row, not a dead matrix
                row = {"kernel": case["name"], "error": f"{type(e).__name__}: {e}"[:400], "ms_by_column": {},
                       "searches": [], "load": list(os.getloadavg()), "load_after": list(os.getloadavg())}
                log(f"  failed: {row['error']}")
            doc["rows"].append(row)
            print_row(row)
            metrics.write(doc, args.json, args.md)
        doc["geomean"] = metrics.geomean_rows(doc["rows"])
    if args.holdout:
        holdout(cases, args, out_dir, doc)
    doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    metrics.write(doc, args.json, args.md)
    print(metrics.markdown(doc))
    log(f"reports, memories and MetaSchedule databases: {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
