"""The tuner benchmark (issue #31, deliverable 5): ``--algo evolve`` against -O1, -O2, MetaSchedule
at equal trials, PyTorch eager and torch.compile, per kernel, in ONE interleaved run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OPENBLAS_NUM_THREADS TVM_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        .venv/bin/python benchmarks/tuner_bench.py --out work/tuner --json tuner.json --md tuner.md
    .venv/bin/python benchmarks/tuner_bench.py --only relu --trials 2,4 --seeds 1 --ms-trials 0 \\
        --no-compile --rounds 1 --out /tmp/tb      # a smoke run (minutes, numbers meaningless)

Kernels (default): the ten of BENCHMARKS §10b (stdlib) and ten workload-suite modules
(:data:`WORKLOADS`: held out from everything the search's defaults were set on). Per kernel, in
this order:

1. ``--seeds`` searches ``-O search --algo evolve`` at the largest trial count (``--trials``,
   default 16,32,64,256) through the driver's passes, as ``leirc build -O search`` runs them.
   A search is deterministic given its seed and its measurements and evaluates its candidates in
   rounds, so the search at N trials is the first N evaluations of the one at 256: the program
   *at N* is the best accepted candidate among them (the final confirmation of a budget-N search
   is not replayed). Each seed has its own cache directory shared by all kernels (evaluation cache and
   the learned model's records), so the model warm-starts from the kernels before this one and
   never from this kernel's other seeds: its held-out Spearman on this kernel is on a kernel it was
   not trained on;
2. -O1, -O2 (``leirc build -O1/-O2``) and -O0;
3. MetaSchedule tunes the TE version of the kernel (stdlib kernels with one in
   ``peers/te_kernels.py``/``search_matrix/ms_tune.py``) for ``--ms-trials`` (default the largest
   trial count) in a worker process; the database truncated to its first N records gives
   MetaSchedule *at N trials*, compiled and checked against -O0's outputs. ``--ms-wallclock``
   adds MetaSchedule at the wall-clock the median search took;
4. every distinct program and PyTorch eager / torch.compile are timed in ``--rounds``
   interleaved rounds (the order reversed every other round), 2 threads; medians over rounds.

Reported per kernel: every column's time, search at N trials as median and spread (min, max)
over seeds, speedups against -O1, -O2 and MetaSchedule at equal trials, evaluations to 90 % of
the final speedup (median over seeds), the model's held-out Spearman per seed, the load average
before and after. The best-so-far against trials (the search's own measurements, median over
seeds, per kernel) is a plot (``--plot``, needs matplotlib). Peaks: sgemm GFLOP/s (torch, 2 threads)
and copy GB/s (numpy) measured once at the start, so memory-bound and compute-bound kernels
can be read as a fraction of them.

Nothing here is run by the tests beyond a smoke run; timings on a loaded machine mean nothing:
run it on a quiet one and record the load average.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

import search_bench as SB  # noqa: E402 - the matrix's kernels, inputs, eager versions and interleaved timing
from search_matrix import metrics  # noqa: E402

#: BENCHMARKS §10b's ten kernels
STDLIB = ("matmul_square", "gemm_bias_relu", "batched_matmul", "gemv", "conv2d", "pointwise_conv2d",
          "depthwise_conv2d", "softmax", "layernorm", "maxpool2d")
#: ten workload-suite modules, none used to set the search's or -O2's defaults
WORKLOADS = ("l1_012_diag_matmul", "l1_026_gelu", "l1_035_groupnorm", "l1_036_rmsnorm", "l1_043_maxpool3d",
             "l1_067_conv1d_strided_dilated", "l1_072_conv_grouped", "l1_082_depthwise_conv2d",
             "l2_033_gemm_scale_batchnorm", "l3_004_lenet5")

log = SB.log
load_text = SB.load_text


# ---------------------------------------------------------------------------
# peaks


def peaks() -> dict:
    """sgemm GFLOP/s (torch, 2 threads, 1024^3) and copy GB/s (numpy, 256 MiB read + written)."""
    import numpy as np

    out = {}
    try:
        import torch

        torch.set_num_threads(2)
        a, b = torch.rand(1024, 1024), torch.rand(1024, 1024)
        torch.mm(a, b)
        best = math.inf
        for _ in range(10):
            t0 = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - t0)
        out["sgemm_gflops"] = 2 * 1024 ** 3 / best / 1e9
    except Exception as e:  # noqa: BLE001 - a peak we cannot measure is a note, not a failure
        out["sgemm_error"] = f"{type(e).__name__}: {e}"[:200]
    src = np.ones(1 << 26, dtype=np.float32)
    dst = np.empty_like(src)
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    out["copy_gbs"] = 2 * src.nbytes / best / 1e9
    return out


# ---------------------------------------------------------------------------
# the searches


def run_evolve(case: dict, seed: int, budget: int, checkpoints: list, out_dir: str, cache_dir: str,
               verbose: bool) -> dict:
    """One ``-O search --algo evolve`` of ``case`` at ``budget`` through the driver; the program
    (per job) at each checkpoint, the best-so-far history and the model's statistics."""
    from leirc import driver
    from leirc.search.core import SearchOptions
    from leirc.search.optimizer import SearchOptimizer

    opts = SearchOptions(algo="evolve", budget=budget, seed=seed, cache_dir=cache_dir, memory=None)
    rec = SB.Recording(SearchOptimizer(opts, out_dir=out_dir, log=(lambda m: log(f"    {m}")) if verbose else None,
                                       progress=False))
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    try:
        driver.run_pipeline(driver.new_build(case["path"], options=driver.BuildOptions(opt="search", search=rec)),
                            until="verify")
    except Exception as e:  # noqa: BLE001 - one failed search is a row, not a dead benchmark
        return {"seed": seed, "error": f"{type(e).__name__}: {e}"[:400], "load": list(load0)}
    results = rec.results
    at = {}
    for n in checkpoints:
        texts = []
        for r in results:
            ok = [x for x in r.nodes if x.index is not None and x.index <= n and x.accepted and x.rel is not None
                  and x.rel < 1.0]
            best = min(ok, key=lambda x: (x.rel, x.id)) if ok else r.root
            texts.append(best.text())
        at[n] = texts
    hist = results[0].history if len(results) == 1 else SB._joint_history(results)
    return {"seed": seed, "at": at, "history": [list(h) for h in hist],
            "evals_to_90": metrics.evals_to_fraction(hist, 0.9),
            "evaluations": sum(r.evaluations for r in results), "search_s": time.perf_counter() - t0,
            "model": [r.model for r in results], "speedup": metrics.geomean([r.speedup for r in results]),
            "load": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in os.getloadavg()]}


# ---------------------------------------------------------------------------
# MetaSchedule at equal trials

_MS_WORKER = r"""
import sys
sys.path.insert(0, {bench!r})
import tvm
from tvm.s_tir import meta_schedule as ms
from search_matrix.ms_tune import prim_func
from peers.metaschedule import builder, target
try:
    import xgboost  # noqa: F401
    cost = "xgb"
except ImportError:
    cost = "random"
print("cost_model", cost, flush=True)
func, _ = prim_func({kernel!r})
ms.tune_tir(tvm.IRModule({{"main": func}}), target({threads}), work_dir={work!r}, max_trials_global={trials},
            num_trials_per_iter=16, cost_model=cost, database="json", seed=0, builder=builder(),
            runner=ms.runner.LocalRunner(timeout_sec=60.0, evaluator_config=ms.runner.EvaluatorConfig(
                number=3, repeat=3, min_repeat_ms=100)))
"""


def ms_equal_trials(case: dict, trials: int, checkpoints: list, texts0: list, feeds: list, refs: list,
                    work: str, threads: int = 2) -> tuple[dict, dict]:
    """({N: call(k)}, summary): MetaSchedule tuned for ``trials`` trials, loaded at each
    checkpoint from its database's first N records and checked against -O0."""
    try:
        from search_matrix import ms_tune
    except Exception as e:  # noqa: BLE001
        return {}, {"error": f"cannot import MetaSchedule: {e}"}
    if trials <= 0:
        return {}, {"skipped": "--ms-trials 0"}
    if case["kind"] != "leir" or len(texts0) != 1 or not ms_tune.has_prim_func(case["name"]):
        return {}, {"error": "no block-structured (TE) version of this kernel"}
    wd = Path(work)
    wd.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(wd / "worker.log", "w") as out:
        rc = subprocess.run([sys.executable, "-c", _MS_WORKER.format(bench=str(BENCH), kernel=case["name"],
                                                                     threads=threads, work=str(wd), trials=trials)],
                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, TVM_NUM_THREADS=str(threads)), start_new_session=True).returncode
    summary = {"trials": trials, "wall_s": time.perf_counter() - t0, "rc": rc,
               "cost_model": next((ln.split()[1] for ln in (wd / "worker.log").read_text(errors="replace").splitlines()
                                   if ln.startswith("cost_model ")), None)}
    recs = (wd / "database_tuning_record.json")
    lines = [ln for ln in recs.read_text(errors="replace").splitlines() if ln.strip()] if recs.exists() else []
    summary["records"] = len(lines)
    calls, checked = {}, {}
    for n in checkpoints:
        sub = wd / f"at{n}"
        sub.mkdir(exist_ok=True)
        shutil.copy(wd / "database_workload.json", sub / "database_workload.json")
        (sub / "database_tuning_record.json").write_text("".join(x + "\n" for x in lines[:n]))
        call, note = _ms_load(case, str(sub), texts0, feeds, refs, ms_tune, threads)
        checked[n] = note
        if call is not None:
            calls[n] = call
    summary["checked"] = checked
    return calls, summary


def _ms_load(case, work, texts0, feeds, refs, ms_tune, threads):
    import numpy as np
    import tvm

    from leirc.engine.program import Program

    try:
        fn, _trace, best = ms_tune.load(case["name"], work, threads)
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {e}"[:200]
    k = Program.from_text(texts0[0]).kernel
    dev = tvm.cpu()
    tsets = [[tvm.runtime.tensor(np.ascontiguousarray(s[p.name]), dev) for p in k.inputs]
             + [tvm.runtime.tensor(np.zeros(tuple(p.shape), "float32"), dev) for p in k.outputs] for s in feeds[0]]
    fn(*tsets[0])
    outs = {p.name: tsets[0][len(k.inputs) + i].numpy() for i, p in enumerate(k.outputs)}
    if not all(SB.close_enough(outs[n], v) for n, v in refs[0].items()):
        return None, "DIFFERS from -O0"
    return (lambda i: fn(*tsets[i])), f"equal to -O0 (best during tuning {best:.4g} ms)"


# ---------------------------------------------------------------------------
# one kernel


def measure(case: dict, args, out_dir: str) -> dict:
    load0 = os.getloadavg()
    name = case["name"]
    work = os.path.join(out_dir, name)
    os.makedirs(work, exist_ok=True)
    top = max(args.trials)
    searches = []
    for seed in args.seed_list:
        log(f"  evolve seed {seed}, {top} trials ({load_text()})")
        s = run_evolve(case, seed, top, args.trials, os.path.join(work, f"seed{seed}"),
                       os.path.join(out_dir, f"cache-seed{seed}"), args.verbose)
        searches.append(s)
        log("  " + (s.get("error") or f"x{s['speedup']:.3g} in {s['evaluations']} evaluations, {s['search_s']:.0f} s, "
                                     f"90 % at {s['evals_to_90']}, model {s['model']}"))
    b0 = SB.level_build(case, "0")
    texts0 = [j.text() for j in b0.jobs]
    feeds, torch_sets, model = SB.input_sets(case, b0)
    refs = SB.reference_outputs(texts0, feeds)
    variants = {"O0": ("leirc", texts0, feeds), "O1": ("leirc", SB.level_texts(case, "1"), feeds),
                "O2": ("leirc", SB.level_texts(case, "2"), feeds)}
    # one column per distinct program: seeds and trial counts that end on one program share it
    by_text: dict = {}
    columns: dict = {}
    for s in searches:
        for n, texts in (s.get("at") or {}).items():
            key = "\n".join(texts)
            col = by_text.setdefault(key, f"search#{len(by_text)}")
            columns[(s["seed"], n)] = col
            variants.setdefault(col, ("leirc", texts, feeds))
    n_sets = len(SB.TIMING_SEEDS)
    notes = {}
    call, notes["eager"] = SB.eager_callable(case, texts0, feeds, refs, torch_sets, model, False)
    if call is not None:
        variants["eager"] = ("py", call, n_sets)
    if args.compile:
        call, notes["compile"] = SB.eager_callable(case, texts0, feeds, refs, torch_sets, model, True)
        if call is not None:
            variants["compile"] = ("py", call, n_sets)
    ms_trials = args.ms_trials if args.ms_trials is not None else top
    ms_calls, ms_summary = ms_equal_trials(case, ms_trials, [n for n in args.trials if n <= ms_trials], texts0,
                                           feeds, refs, os.path.join(work, "metaschedule"))
    for n, c in ms_calls.items():
        variants[f"ms@{n}"] = ("py", c, n_sets)
    if args.ms_wallclock:
        secs = statistics.median([s["search_s"] for s in searches if "search_s" in s] or [0.0])
        call, summary = SB.metaschedule(case, secs, texts0, feeds, refs, os.path.join(work, "metaschedule-wall"))
        ms_summary["wallclock"] = summary
        if call is not None:
            variants["ms@wall"] = ("py", call, n_sets)
    log(f"  timing {len(variants)} variants, {args.rounds} interleaved rounds ({load_text()})")
    times = SB.time_interleaved(variants, args.rounds)
    row = {"kernel": name, "path": os.path.relpath(case["path"], REPO), "kind": case["kind"],
           "ms_by_column": {c: v for c, v in times.items() if v is not None}, "notes": notes, "metaschedule": ms_summary,
           "load": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in os.getloadavg()]}
    row["search_at"] = {}
    for n in args.trials:
        per_seed = [times.get(columns.get((s["seed"], n))) for s in searches if "at" in s]
        per_seed = [t for t in per_seed if t is not None]
        if per_seed:
            row["search_at"][n] = {"median_ms": statistics.median(per_seed), "min_ms": min(per_seed),
                                   "max_ms": max(per_seed), "seeds": len(per_seed)}
    row["searches"] = [{k: v for k, v in s.items() if k != "at"} | {"columns": {n: columns.get((s["seed"], n))
                                                                               for n in args.trials}}
                       for s in searches]
    row["evals_to_90_median"] = statistics.median([s["evals_to_90"] for s in searches if s.get("evals_to_90")] or [0])
    row["heldout_spearman"] = [m.get("heldout_spearman") for s in searches for m in (s.get("model") or []) if m]
    return row


def ratios(row: dict, trials: list) -> dict:
    """Per trial count: search (median over seeds) against -O1, -O2, MetaSchedule at N, eager."""
    t = row["ms_by_column"]
    out = {}
    for n in trials:
        s = row["search_at"].get(n) or row["search_at"].get(str(n))
        if not s:
            continue
        med = s["median_ms"]
        out[n] = {c: (t[c] / med if t.get(c) else None) for c in ("O1", "O2", "eager", "compile")}
        out[n]["ms"] = t[f"ms@{n}"] / med if t.get(f"ms@{n}") else None
    return out


def markdown(doc: dict) -> str:
    trials = doc["trials"]
    ref = 64 if 64 in trials else max(trials)  # the headline trial count
    head = ["kernel", "-O1", "-O2"] + [f"search@{n} (min–max)" for n in trials] + \
        [f"MS@{n}" for n in trials] + ["eager", "compile", f"×-O2@{ref}", f"×MS@{ref}", "90 % at", "Spearman", "load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    f = lambda x: "–" if x is None else f"{x:.4g}"  # noqa: E731
    for row in doc["rows"]:
        t = row.get("ms_by_column", {})
        sa = row.get("search_at", {})
        r = ratios(row, trials).get(ref, {}) if row.get("search_at") else {}
        cells = [row["kernel"], f(t.get("O1")), f(t.get("O2"))]
        for n in trials:
            s = sa.get(n) or sa.get(str(n))
            cells.append(f"{f(s['median_ms'])} ({f(s['min_ms'])}–{f(s['max_ms'])})" if s else "–")
        cells += [f(t.get(f"ms@{n}")) for n in trials]
        cells += [f(t.get("eager")), f(t.get("compile")), f(r.get("O2")), f(r.get("ms")),
                  str(row.get("evals_to_90_median", "–")),
                  ", ".join(f(x) for x in row.get("heldout_spearman") or []) or "–",
                  f"{row['load'][0]:.1f}–{row['load_after'][0]:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    g = doc.get("geomean") or {}
    if g:
        lines.append("")
        lines.append("Geomeans (search median over seeds against the column): " +
                     "; ".join(f"@{n}: " + ", ".join(f"×{c} {f(v)}" for c, v in g[n].items() if v) for n in g))
    return "\n".join(lines) + "\n"


def geomeans(doc: dict) -> dict:
    out = {}
    for n in doc["trials"]:
        cols = {}
        for c in ("O1", "O2", "ms", "eager", "compile"):
            vals = [ratios(r, doc["trials"]).get(n, {}).get(c) for r in doc["rows"] if r.get("search_at")]
            cols[c] = metrics.geomean([v for v in vals if v])
        out[n] = cols
    return out


def plot(doc: dict, path: str) -> None:
    """Best-so-far speedup over -O0 against trials, median over seeds, one line per kernel."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no matplotlib: no plot")
        return
    fig, ax = plt.subplots(figsize=(9, 6))
    top = max(doc["trials"])
    for row in doc["rows"]:
        curves = []
        for s in row.get("searches", []):
            h = dict((int(e), sp) for e, sp in s.get("history") or [])
            if not h:
                continue
            best, c = 1.0, []
            for i in range(1, top + 1):
                best = h.get(i, best)
                c.append(best)
            curves.append(c)
        if curves:
            ax.plot(range(1, top + 1), [statistics.median(v) for v in zip(*curves)], label=row["kernel"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("trials (evaluations)")
    ax.set_ylabel("best speedup over -O0 so far (median over seeds)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    log(f"plot: {path}")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[], help="a stdlib kernel or workload module (repeatable)")
    ap.add_argument("--trials", default="16,32,64,256", help="trial counts (comma-separated; the largest is searched)")
    ap.add_argument("--seeds", type=int, default=5, help="search seeds per kernel (0, 1, ...)")
    ap.add_argument("--ms-trials", type=int, default=None, help="MetaSchedule trials (default: the largest; 0 skips)")
    ap.add_argument("--ms-wallclock", action="store_true", help="also MetaSchedule at the median search's wall-clock")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    ap.add_argument("--out", default=None, help="working directory (default: a temporary one)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--md", metavar="FILE")
    ap.add_argument("--plot", metavar="PNG", default=None, help="best-so-far plot (default: OUT/best_so_far.png)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    args.trials = sorted({int(x) for x in args.trials.split(",") if x.strip()})
    args.seed_list = list(range(args.seeds))
    return args


def write(doc: dict, args) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1, default=str) + "\n")
    if args.md:
        Path(args.md).write_text(markdown(doc))


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TVM_NUM_THREADS", "2")
    stray = sorted(k for k in os.environ if k.startswith("OPENBLAS_"))
    if stray:
        log(f"warning: {' '.join(stray)} set; the benchmark's command unsets them (env -u ...)")
    names = args.only or list(STDLIB) + list(WORKLOADS)
    cases = SB.find_cases([], names)
    out_dir = args.out or tempfile.mkdtemp(prefix="leirc-tuner-bench-")
    os.makedirs(out_dir, exist_ok=True)
    doc = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "trials": args.trials,
           "seeds": args.seed_list, "rounds": args.rounds,
           "command": " ".join(["benchmarks/tuner_bench.py"] + list(sys.argv[1:] if argv is None else argv)),
           "cpu_count": os.cpu_count(), "threads": 2, "openblas_env": stray, "load_start": list(os.getloadavg()),
           "peaks": peaks(), "rows": []}
    log(f"{len(cases)} kernel(s), trials {args.trials}, seeds {args.seed_list}; peaks {doc['peaks']}; out {out_dir} "
        f"({load_text()})")
    for case in cases:
        log(f"{case['name']} ({load_text()})")
        try:
            row = measure(case, args, out_dir)
        except Exception as e:  # noqa: BLE001 - one kernel's failure is a row, not a dead benchmark
            row = {"kernel": case["name"], "error": f"{type(e).__name__}: {e}"[:400], "ms_by_column": {},
                   "load": list(os.getloadavg()), "load_after": list(os.getloadavg())}
            log(f"  failed: {row['error']}")
        doc["rows"].append(row)
        doc["geomean"] = geomeans(doc)
        write(doc, args)
    doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    doc["load_end"] = list(os.getloadavg())
    write(doc, args)
    plot(doc, args.plot or os.path.join(out_dir, "best_so_far.png"))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
