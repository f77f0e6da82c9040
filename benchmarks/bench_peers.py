"""leirc -O0/-O1/-O2 side by side with PyTorch eager, torch.compile, NumPy and TVM MetaSchedule
(issue #12, deliverable 4; a benchmark, not a test).

Tune the MetaSchedule baselines first (a separate phase; one subdirectory per kernel, its
tuning wall-clock in ``tuning.json`` next to the records), then time everything in one run::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        .venv/bin/python benchmarks/bench_peers.py --ms-tune-only --ms-trials 64 --ms-db /work/bench_out/msdb
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        .venv/bin/python benchmarks/bench_peers.py --suite stdlib --suite workloads --ms-db /work/bench_out/msdb \\
        --md /work/bench_out/peers.md --json /work/bench_out/peers.json --resume

**Rows.** ``--suite stdlib`` (the default: every ``stdlib/*.leir``, plus the ``gemm512`` row,
a 512³ f32 GEMM, the issue's first target) and ``--suite workloads`` (every
``benchmarks/workloads/*.py``); ``--only NAME`` keeps the rows of that name (a stdlib stem, a
workload stem such as ``l1_019_relu`` or its tail ``relu``... ``gemm512``).

**Columns.** leirc -O0, -O1, -O2 go through the driver (``new_build`` + ``BuildOptions(opt=)``,
``run_pipeline`` until ``verify``: the optimized ``.leir`` kernel is verified against the
interpreter running the original, a ``MODEL.py`` at every level against the PyTorch module);
a level that fails to build or verify records its error and is not timed. Each verified
variant is then built once in its own sandboxed :class:`KernelSession` and timed there.
PyTorch eager is the module (workloads) or ``search_matrix/torch_eager.py`` (stdlib, every
kernel has one, checked against -O0's outputs first); torch.compile is ``torch.compile`` of
the same (``--no-compile`` skips it); NumPy is ``peers/numpy_kernels.py`` where NumPy has a
direct call; MetaSchedule is the best schedule of a TE version of the same computation
(``peers/te_kernels.py``), on the ten kernels of ``MS_DEFAULT`` unless ``--ms-kernel``
says otherwise, loaded from ``--ms-db`` (tuned in this run only when it has no database there
and ``--ms-trials`` > 0), checked against -O0's outputs before timing.

**Timing.** One protocol for every column: a measurement is the median of 3 timings of
>= 50 ms each over 3 rotating input sets (the driver's timing seeds 100-102; a module's own
``get_inputs(seed)``), after one warm-up. ``--rounds`` rounds time every column once, round r
starting at column r mod n (a rotating order), with a 0.3 s pause between columns (a spinning
TVM or OpenMP thread pool would otherwise bias the column after it); the table is the median
over rounds. An -O0 call slower than ``--skip-o0-above`` seconds is timed once (its probe
call) and not per round, so one naive kernel cannot take an hour. 2 threads on every side
(``torch.set_num_threads``, ``TVM_NUM_THREADS`` for leirc's workers and MetaSchedule's runtime,
``num-cores`` in MetaSchedule's target).

**Peaks.** Measured at the start with the same threads, the fastest of 5 timings of >= 200 ms:
sgemm (the best of torch ``mm`` and NumPy ``@`` at 512³, 1024³ and 2048³) and copy bandwidth (a 256 MB float32 copy, read + write bytes,
the better of NumPy ``copyto`` and torch ``copy_``). Measure them on a quiet machine: the
peaks are not re-measured on ``--resume``, and a depressed copy bandwidth shows up as
memory-bound rows above 100 %. A row's FLOPs are ``leirc.search.cost.estimate(program).ops`` of its -O0
program (arithmetic operations, subscripts excluded; 2·MNK for a GEMM; but the cost model weighs a
division 4 and a libm call by its cost, so for softmax, sdpa and the norms the "GFLOP/s" counts
weighted operations and overstates the FLOP rate). A memory-bound row whose data fits in cache
can exceed the DRAM copy bandwidth (> 100 %). Its bytes are the
declared inputs plus outputs (summed over a module's kernels), not the estimate's ``.bytes``:
that one models cache re-fetches of the naive nest (a count of traffic, not a minimum), so
it would flatter a memory-bound kernel's "% of bandwidth". A row is compute-bound when
FLOPs/bytes exceeds the machine balance (peak GFLOP/s over GB/s), and "-O2 % peak" is its
GFLOP/s against the sgemm peak or its GB/s against the copy bandwidth accordingly.

**Output.** The markdown table (``--md``) and the JSON (``--json``) are rewritten after
every row; ``--resume`` skips the rows the JSON has. Ratios are speedups (the other column's
time over -O2's: > 1 means -O2 is faster); geomeans at the end. A row that fails anywhere
records the error and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
for _p in (str(REPO), str(BENCH)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

GEMM512 = r"""\kernel gemm512(A: f32[512, 512], B: f32[512, 512]) -> (C: f32[512, 512]) {
  L^{512}_{i=0} L^{512}_{j=0} L^{512}_{k=0} [
    C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j};
  ];
}
"""

COLUMNS = ["o0", "o1", "o2", "eager", "compile", "numpy", "ms"]
LEVELS = {"o0": "0", "o1": "1", "o2": "2"}
PAUSE_S = 0.3
#: the eager function of an extra row (it has the signature of that stdlib kernel's)
EAGER_AS = {"gemm512": "matmul_square"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def loadavg() -> list:
    return [round(x, 2) for x in os.getloadavg()]


# ---------------------------------------------------------------------------
# rows


def find_rows(suites: list[str], only: list[str]) -> list[dict]:
    """[{name, path, kind, text}] in a stable order: the stdlib (+ gemm512), then the workloads."""
    rows = []
    for s in suites or ["stdlib"]:
        if s == "stdlib":
            rows.append({"name": "gemm512", "path": None, "kind": "leir", "text": GEMM512})
            rows += [{"name": p.stem, "path": str(p), "kind": "leir"} for p in sorted((REPO / "stdlib").glob("*.leir"))]
        elif s == "workloads":
            rows += [{"name": p.stem, "path": str(p), "kind": "py"}
                     for p in sorted((BENCH / "workloads").glob("*.py"))]
        else:
            raise SystemExit(f"bench_peers: unknown suite '{s}' (stdlib, workloads)")
    if only:
        def hit(r):
            return any(o == r["name"] or (r["kind"] == "py" and r["name"].split("_", 2)[-1] == o) for o in only)
        rows = [r for r in rows if hit(r)]
        if not rows:
            raise SystemExit(f"bench_peers: no row named {only} in suites {suites or ['stdlib']}")
    return rows


def new_build(row: dict, level: str, threads: int):
    from leirc import driver

    opts = driver.BuildOptions(opt=level, threads=threads, timeout=900.0)
    if row.get("text") is not None:
        return driver.new_build(row["text"], file=f"{row['name']}.leir", options=opts)
    return driver.new_build(row["path"], options=opts)


def build_level(row: dict, level: str, threads: int):
    """(build, texts, verification summary, error): the driver until ``verify``."""
    from leirc import driver

    b = new_build(row, level, threads)
    try:
        b = driver.run_pipeline(b, until="verify")
    except driver.ModelImportError as e:
        return b, None, None, f"import: {e}"
    except driver.PipelineError as e:
        return b, None, None, f"{e.pass_name}: " + "; ".join(f"{d.code} {d.message}" for d in e.diagnostics[:2])
    vs = [driver.verify_summary(j.verification) if j.verification is not None else "not verified (the original)"
          for j in b.jobs]
    return b, [j.text() for j in b.jobs], vs, None


def work_and_bytes(texts0: list[str]) -> tuple[float, float]:
    """(FLOPs, minimal bytes) of the -O0 program(s): see the module docstring."""
    from leirc.engine.program import Program
    from leirc.search.cost import DTYPE_BYTES, estimate

    ops = nbytes = 0.0
    for t in texts0:
        p = Program.from_text(t)
        ops += estimate(p).ops
        for par in list(p.kernel.inputs) + list(p.kernel.outputs):
            nbytes += math.prod(int(d) for d in par.shape) * DTYPE_BYTES.get(par.dtype, 4)
    return ops, nbytes


# ---------------------------------------------------------------------------
# timers: column -> a function returning one measurement in ms


def time_py(call, n_sets: int) -> float:
    from leirc.frontend.bench import time_callable

    st = time_callable(call, n_sets, warmup=1, repeat=3, min_repeat_ms=50.0)
    if not st.ok:
        raise RuntimeError(st.error)
    return st.median_ms


def leirc_timer(texts: list[str], feeds: list, threads: int, skip_above_s: float, sessions: list, is_o0: bool):
    """(timer, note) for one level: one sandboxed session per kernel, built once."""
    from leirc.engine.program import Program
    from leirc.lower.session import KernelSession

    ss = []
    probe_ms = 0.0
    for t, sets in zip(texts, feeds):
        s = KernelSession(t, kernel=Program.from_text(t).kernel.name, target="llvm", threads=threads, timeout=900.0)
        sessions.append(s)
        ss.append((s, sets))
        pr = s.time(sets[:1], warmup=0, repeat=1, min_repeat_ms=0)
        if not pr.ok:
            return None, f"{pr.error_kind}: {pr.error}"[:200]
        probe_ms += pr.median_ms
    if is_o0 and probe_ms > skip_above_s * 1e3:
        return (lambda v=probe_ms: v), f"{probe_ms / 1e3:.1f} s per call: timed once (the probe), not per round"

    def timer():
        total = 0.0
        for s, sets in ss:
            tr = s.time(sets, warmup=1, repeat=3, min_repeat_ms=50.0)
            if not tr.ok:
                raise RuntimeError(f"{tr.error_kind}: {tr.error}"[:200])
            total += tr.median_ms
        return total
    return timer, None


def numpy_timer(name: str, feeds: list, refs: list):
    from peers.numpy_kernels import numpy_fn
    from search_bench import close_enough

    f = numpy_fn(name)
    if f is None or len(feeds) != 1:
        return None, None
    sets = feeds[0]
    got = f(**sets[0])
    if not all(n in got and close_enough(got[n], v) for n, v in refs[0].items()):
        return None, "NumPy version does not match -O0"
    return (lambda: time_py(lambda k: f(**sets[k]), len(sets))), "peers/numpy_kernels.py (checked against -O0)"


def ms_timer(name: str, args, feeds: list, refs: list, texts0: list[str], threads: int):
    """(timer, info dict) of the MetaSchedule column, or (None, info with the reason)."""
    import numpy as np

    from peers import metaschedule as msb
    from search_bench import close_enough

    info = {}
    db = args.ms_db or os.path.join(tempfile.gettempdir(), "leirc_bench_peers_msdb")
    if not msb.has_db(name, db):
        if args.ms_trials <= 0:
            return None, {"error": f"not tuned in {db} (run --ms-tune-only, or pass --ms-trials N)"}
        log(f"  metaschedule: tuning {name} for {args.ms_trials} trials into {db}/{name}")
        msb.tune(name, db, args.ms_trials, threads, log=lambda m: log(f"  {m}"))
    s = msb.summary_of(name, db) or {}
    info.update(db=f"{db}/{name}", trials=s.get("trials"), tuning_wall_s=s.get("tuning_wall_s"),
                best_during_tuning_ms=s.get("best_during_tuning_ms"))
    if not s.get("ok"):
        info["error"] = s.get("error") or "no valid schedule recorded"
        return None, info
    import tvm

    from leirc.engine.program import Program

    try:
        fn, _trace = msb.load(name, db, threads)
    except Exception as e:  # noqa: BLE001 - the row goes on without this column
        info["error"] = f"load: {type(e).__name__}: {e}"[:200]
        return None, info
    k = Program.from_text(texts0[0]).kernel
    dev = tvm.cpu()
    tsets = [[tvm.runtime.tensor(np.ascontiguousarray(s_[p.name]), dev) for p in k.inputs]
             + [tvm.runtime.tensor(np.zeros(tuple(p.shape), "float32"), dev) for p in k.outputs] for s_ in feeds[0]]
    fn(*tsets[0])
    outs = {p.name: tsets[0][len(k.inputs) + i].numpy() for i, p in enumerate(k.outputs)}
    if not all(close_enough(outs[n], v) for n, v in refs[0].items()):
        info["error"] = "the MetaSchedule kernel's outputs differ from -O0's"
        return None, info
    info["checked"] = "equal to -O0"
    return (lambda: time_py(lambda i: fn(*tsets[i]), len(tsets))), info


# ---------------------------------------------------------------------------
# one row


def measure(row: dict, args, threads: int, peaks: dict) -> dict:
    import torch

    from search_bench import eager_callable, input_sets, reference_outputs

    t_row = time.perf_counter()
    out = {"kernel": row["name"], "kind": row["kind"], "path": row["path"] and os.path.relpath(row["path"], REPO),
           "rounds": args.rounds,
           "load_start": loadavg(), "ms": {}, "notes": {}, "errors": {}, "verify": {}, "steps": {}}
    texts, b0 = {}, None
    for col, level in LEVELS.items():
        t0 = time.perf_counter()
        b, tx, vs, err = build_level(row, level, threads)
        log(f"  {col}: {'error: ' + err if err else 'built and verified'} ({time.perf_counter() - t0:.0f} s)")
        if col == "o0":
            b0 = b
        if err:
            out["errors"][col] = err[:400]
            continue
        texts[col] = tx
        out["verify"][col] = vs
        out["steps"][col] = sum(len(j.steps) for j in b.jobs)
    if "o0" not in texts:
        out["errors"]["row"] = "-O0 did not build: no reference, no inputs"
        return finish(out, t_row, peaks)
    ops, nbytes = work_and_bytes(texts["o0"])
    out.update(gflop=ops / 1e9, mbytes=nbytes / 1e6)
    case = {"name": EAGER_AS.get(row["name"], row["name"]), "path": row["path"], "kind": row["kind"]}
    feeds, torch_sets, model = input_sets(case, b0)
    refs = reference_outputs(texts["o0"], feeds)
    timers, sessions = {}, []
    try:
        for col in LEVELS:
            if col in texts:
                t, note = leirc_timer(texts[col], feeds, threads, args.skip_o0_above, sessions, col == "o0")
                if t is None:
                    out["errors"][col] = note
                else:
                    timers[col] = t
                    if note:
                        out["notes"][col] = note
        n_sets = len(feeds[0])
        for col, compile_ in (("eager", False), ("compile", True)):
            if compile_ and args.no_compile:
                continue
            t0 = time.perf_counter()
            call, note = eager_callable(case, texts["o0"], feeds, refs, torch_sets, model, compile_)
            torch.set_num_threads(threads)  # eager_callable sets 2
            out["notes"][col] = note
            if call is not None:
                timers[col] = (lambda c=call, n=(len(torch_sets) if torch_sets else n_sets): time_py(c, n))
                if compile_:
                    out["notes"]["compile_first_call_s"] = round(time.perf_counter() - t0, 1)
        if row["kind"] == "leir":
            t, note = numpy_timer(row["name"], feeds, refs)
            if t is not None:
                timers["numpy"] = t
            if note:
                out["notes"]["numpy"] = note
        if row["kind"] == "leir" and row["name"] in args.ms_kernels:
            t, info = ms_timer(row["name"], args, feeds, refs, texts["o0"], threads)
            out["metaschedule"] = info
            if t is not None:
                timers["ms"] = t
        log(f"  timing {list(timers)}: {args.rounds} rotating rounds (load {loadavg()})")
        out["ms"] = interleave(timers, args.rounds, out["errors"])
    finally:
        for s in sessions:
            s.close()
    return finish(out, t_row, peaks)


def interleave(timers: dict, rounds: int, errors: dict) -> dict:
    """Round r times every column once, starting at column r mod n; median over rounds."""
    cols = list(timers)
    samples = {c: [] for c in cols}
    for r in range(rounds):
        k = r % max(len(cols), 1)
        for c in cols[k:] + cols[:k]:
            if c in errors:
                continue
            try:
                samples[c].append(timers[c]())
            except Exception as e:  # noqa: BLE001 - one column's failure must not end the row
                errors[c] = f"timing: {type(e).__name__}: {e}"[:300]
            time.sleep(PAUSE_S)
    return {c: statistics.median(v) for c, v in samples.items() if v}


def finish(out: dict, t_row: float, peaks: dict) -> dict:
    t = out["ms"]
    o2 = t.get("o2")
    if out.get("gflop") and out.get("mbytes"):
        ai = out["gflop"] * 1e9 / (out["mbytes"] * 1e6)
        out["flop_per_byte"] = ai
        out["bound"] = "compute" if ai > peaks["balance"] else "memory"
        if o2:
            if out["bound"] == "compute":
                out["o2_gflops"] = out["gflop"] / (o2 * 1e-3)
                out["o2_pct_peak"] = 100 * out["o2_gflops"] / peaks["sgemm_gflops"]
            else:
                out["o2_gbs"] = out["mbytes"] * 1e6 / (o2 * 1e-3) / 1e9
                out["o2_pct_peak"] = 100 * out["o2_gbs"] / peaks["copy_gbs"]
    out["speedup"] = {f"o2_vs_{c}": t[c] / o2 for c in ("o0", "o1", "eager", "compile", "ms") if o2 and t.get(c)}
    if t.get("eager") and t.get("compile"):
        out["speedup"]["compile_vs_eager"] = t["eager"] / t["compile"]
    out["load_end"] = loadavg()
    out["wall_s"] = round(time.perf_counter() - t_row, 1)
    return out


# ---------------------------------------------------------------------------
# peaks


def best_ms(call) -> float:
    """A peak is the best the machine did: the fastest of 5 timings of >= 200 ms (a median
    would count a burst of load on the machine against the peak)."""
    from leirc.frontend.bench import time_callable

    return time_callable(call, 1, warmup=1, repeat=5, min_repeat_ms=200.0).min_ms


def measure_peaks(threads: int) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    # the best of two BLAS libraries over three sizes: torch's MKL at 2048^3 alone reached 170
    # GFLOP/s on an AMD host where NumPy's OpenBLAS did 187 at 1024^3 and leirc's own 512^3
    # GEMM 331, so one library at one size is not "the machine's peak"
    sgemm = {}
    for n in (512, 1024, 2048):
        a, b = torch.rand(n, n), torch.rand(n, n)
        an, bn = a.numpy(), b.numpy()
        flop = 2 * n ** 3 / 1e9
        sgemm[f"torch_{n}"] = flop / (best_ms(lambda k, a=a, b=b: torch.mm(a, b)) * 1e-3)
        sgemm[f"numpy_{n}"] = flop / (best_ms(lambda k, an=an, bn=bn: an @ bn) * 1e-3)
    sg = max(sgemm.values())
    n = 256 * 2 ** 20 // 4
    src, dst = np.random.default_rng(0).random(n, dtype=np.float32), np.empty(n, np.float32)
    gb = 2 * n * 4 / 1e9  # read + write
    bw_np = gb / (best_ms(lambda k: np.copyto(dst, src)) * 1e-3)
    ts, td = torch.from_numpy(src), torch.from_numpy(dst)
    bw_t = gb / (best_ms(lambda k: td.copy_(ts)) * 1e-3)
    bw = max(bw_np, bw_t)
    return {"sgemm_gflops": sg, "sgemm_by_library_and_size": sgemm, "copy_gbs": bw, "copy_gbs_numpy": bw_np,
            "copy_gbs_torch": bw_t, "balance": sg / bw, "threads": threads}


# ---------------------------------------------------------------------------
# output


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def geomeans(rows: list) -> dict:
    out = {}
    for key in ("o2_vs_eager", "o2_vs_o1", "o2_vs_o0", "o2_vs_ms", "o2_vs_compile", "compile_vs_eager"):
        xs = [r["speedup"][key] for r in rows if r.get("speedup", {}).get(key)]
        out[key] = {"geomean": geomean(xs), "rows": len(xs)}
    return out


def fmt(v) -> str:
    if v is None:
        return "–"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def fx(v) -> str:
    return "–" if v is None else f"{v:.2f}×"


def markdown(meta: dict, rows: list) -> str:
    p = meta["peaks"]
    lines = [f"Threads {meta['threads']}; sgemm peak {p['sgemm_gflops']:.1f} GFLOP/s (best of torch mm and NumPy @ at 512³–2048³); copy bandwidth "
             f"{p['copy_gbs']:.1f} GB/s (256 MB, read+write; NumPy {p['copy_gbs_numpy']:.1f}, torch "
             f"{p['copy_gbs_torch']:.1f}); machine balance {p['balance']:.1f} FLOP/byte. Times in ms (median over "
             f"{meta['rounds']} rotating rounds); ratios are speedups of -O2 (other / -O2). Load average at the start "
             f"{meta['load_start'][0]}, at the end {meta.get('load_end', ['?'])[0]} ({os.cpu_count()} CPUs). "
             f"Command: `{meta['command']}`.",
             "",
             "| kernel | -O0 | -O1 | -O2 | eager | compile | NumPy | MS (tune s) | bound | -O2 % peak | -O2/eager "
             "| -O2/MS | load |",
             "|---|--:|--:|--:|--:|--:|--:|--:|:-:|--:|--:|--:|--:|"]
    foot = []
    for r in rows:
        t, sp = r.get("ms", {}), r.get("speedup", {})
        msi = r.get("metaschedule") or {}
        ms = fmt(t.get("ms"))
        if msi.get("tuning_wall_s") is not None:
            ms += f" ({msi['tuning_wall_s']:.0f})"
        cells = [fmt(t.get(c)) + ("*" if c in r.get("errors", {}) and c not in t else "")
                 for c in ("o0", "o1", "o2", "eager", "compile", "numpy")]
        ls, le = r.get("load_start") or [None], r.get("load_end") or [None]
        lines.append(f"| {r['kernel']} | " + " | ".join(cells) + f" | {ms} | {r.get('bound', '–')} | "
                     f"{fmt(r.get('o2_pct_peak'))} | {fx(sp.get('o2_vs_eager'))} | {fx(sp.get('o2_vs_ms'))} | "
                     f"{ls[0]}→{le[0]} |")
        for c, e in r.get("errors", {}).items():
            foot.append(f"* `{r['kernel']}` {c}: {e}")
        if msi.get("error"):
            foot.append(f"* `{r['kernel']}` MetaSchedule: {msi['error']}")
        for c in ("o0",):
            if r.get("notes", {}).get(c):
                foot.append(f"* `{r['kernel']}` {c}: {r['notes'][c]}")
    g = geomeans(rows)
    names = {"o2_vs_eager": "-O2 vs eager", "o2_vs_o1": "-O2 vs -O1", "o2_vs_o0": "-O2 vs -O0",
             "o2_vs_ms": "-O2 vs MetaSchedule", "o2_vs_compile": "-O2 vs torch.compile",
             "compile_vs_eager": "torch.compile vs eager"}
    lines += ["", "Geomeans: " + "; ".join(f"{names[k]} {fx(v['geomean'])} ({v['rows']} rows)" for k, v in g.items())
              + "."]
    if foot:
        lines += ["", "Errors and notes (* = the column failed):"] + foot
    return "\n".join(lines) + "\n"


def write(args, meta: dict, rows: list) -> None:
    from leirc.io import write_atomic

    if args.json:
        write_atomic(args.json, json.dumps({"meta": meta, "rows": rows, "geomeans": geomeans(rows)}, indent=1))
    if args.md:
        write_atomic(args.md, markdown(meta, rows))


# ---------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", action="append", default=[], choices=["stdlib", "workloads"],
                    help="rows: stdlib (default; with gemm512) and/or workloads (repeatable)")
    ap.add_argument("--only", action="append", default=[], help="keep only the rows of this name (repeatable)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--ms-db", metavar="DIR", help="MetaSchedule databases, one subdirectory per kernel")
    ap.add_argument("--ms-trials", type=int, default=0,
                    help="tune a MetaSchedule kernel with no database in --ms-db for this many trials (0: do not)")
    ap.add_argument("--ms-tune-only", action="store_true", help="tune the MetaSchedule kernels into --ms-db and exit")
    ap.add_argument("--ms-kernel", action="append", default=[],
                    help="the kernels with a MetaSchedule column (default: peers/te_kernels.py MS_DEFAULT)")
    ap.add_argument("--skip-o0-above", type=float, default=3.0,
                    help="an -O0 call slower than this (s) is timed once, not per round")
    ap.add_argument("--md", metavar="FILE")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--resume", action="store_true", help="skip the rows already in --json")
    args = ap.parse_args(argv)
    threads = args.threads
    os.environ["TVM_NUM_THREADS"] = str(threads)  # before tvm is imported, here and in every worker
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))

    from peers.te_kernels import MS_DEFAULT, TE_KERNELS

    args.ms_kernels = args.ms_kernel or MS_DEFAULT
    bad = [k for k in args.ms_kernels if k not in TE_KERNELS]
    if bad:
        raise SystemExit(f"bench_peers: no TE version of {bad} in peers/te_kernels.py")
    if args.ms_tune_only:
        from peers import metaschedule as msb

        if not args.ms_db or args.ms_trials <= 0:
            raise SystemExit("bench_peers: --ms-tune-only needs --ms-db DIR and --ms-trials N > 0")
        todo = [k for k in args.ms_kernels if not args.only or k in args.only]
        log(f"tuning {todo} ({args.ms_trials} trials each) into {args.ms_db}; load {loadavg()}")
        for k in todo:
            if msb.has_db(k, args.ms_db):
                log(f"{k}: database exists, skipped")
                continue
            msb.tune(k, args.ms_db, args.ms_trials, threads, log=log)
        log(f"done; load {loadavg()}")
        return 0

    import torch

    torch.set_num_threads(threads)
    rows_todo = find_rows(args.suite, args.only)
    rows, meta = [], None
    if args.resume and args.json and os.path.exists(args.json):
        saved = json.loads(Path(args.json).read_text())
        rows, meta = saved["rows"], saved["meta"]
        done = {r["kernel"] for r in rows}
        rows_todo = [r for r in rows_todo if r["name"] not in done]
        log(f"resume: {len(done)} rows in {args.json}, {len(rows_todo)} to go")
    if meta is None:
        if os.getloadavg()[0] > (os.cpu_count() or 1) * 0.5:
            log(f"warning: load average {loadavg()} on {os.cpu_count()} CPUs: with 2 threads per side, contended "
                "cores slow PyTorch's parallel regions the most (torch.relu of 64x4096 at load 8: 2 ms with 2 "
                "threads, 0.07 ms with 1); these numbers are not a benchmark")
        peaks = measure_peaks(threads)
        log(f"peaks: {json.dumps(peaks)}")
        from leirc.target import target_of

        # the target these numbers belong to: results of another host are not mixed in
        meta = {"target": target_of("llvm").to_json(), "threads": threads, "rounds": args.rounds, "peaks": peaks,
                "load_start": loadavg(),
                "started": time.strftime("%Y-%m-%d %H:%M:%S"), "torch": torch.__version__,
                "command": " ".join(["benchmarks/bench_peers.py"] + (argv if argv is not None else sys.argv[1:]))}
    t_start = time.perf_counter()
    for i, row in enumerate(rows_todo):
        log(f"[{i + 1}/{len(rows_todo)}] {row['name']} (load {loadavg()})")
        try:
            r = measure(row, args, threads, meta["peaks"])
        except Exception as e:  # noqa: BLE001 - a row's failure is recorded, never a dead run
            r = {"kernel": row["name"], "kind": row["kind"], "ms": {}, "speedup": {},
                 "errors": {"row": f"{type(e).__name__}: {e}"[:400]}, "load_end": loadavg()}
        rows.append(r)
        meta["load_end"] = loadavg()
        write(args, meta, rows)
        el = time.perf_counter() - t_start
        left = len(rows_todo) - i - 1
        log(f"  {row['name']}: " + ", ".join(f"{c} {v:.4g} ms" for c, v in r["ms"].items())
            + (f"; errors {list(r['errors'])}" if r.get("errors") else "")
            + f"; row {r.get('wall_s', 0):.0f} s; ETA {el / (i + 1) * left / 60:.0f} min for {left} rows"
            + f" (~{time.strftime('%H:%M', time.localtime(time.time() + el / (i + 1) * left))})")
    print(markdown(meta, rows), end="")
    write(args, meta, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
