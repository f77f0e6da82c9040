"""-O2 as today against -O2 followed by unroll_and_jam / pack_input, with PyTorch eager as the peer
(a benchmark, not a test).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        .venv/bin/python benchmarks/bench_blocking.py --rounds 5

``--sweep``: every stdlib kernel at -O0, -O1 and -O2 against PyTorch eager, with geomeans
(``--old-o2 DIR`` adds the -O2 of another checkout, e.g. a ``git worktree`` of the commit before a
pipeline change, as column ``o2_old`` in the same interleaved rounds):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        .venv/bin/python benchmarks/bench_blocking.py --sweep --rounds 3 [--old-o2 /tmp/ho_old]

One run, interleaved: every variant of a kernel is built once in its own sandboxed worker
session (as the driver runs them), then ``--rounds`` rounds time each variant in turn (a leirc
measurement is the median of 3 timings of >= 50 ms over 3 rotating input sets; PyTorch the same
protocol in this process); the table reports the median over rounds, so a burst of load hits
every column alike, and the minimum (load only ever adds time; on a shared machine it is the
steadier estimate). 2 threads on every side. Each variant is -O2's program plus checked strategy
steps (printed with ``--show``); a packing copy nest also gets ``loop_parallelization`` of its
outer loop, since -O2's own -O1 pass has already run. Every variant's output on the first input
set is compared with -O2's (the steps are bitwise in LEIR's semantics; the column says whether
the compiled outputs are identical too).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402


def _threads() -> int:
    env = os.environ.get("TVM_NUM_THREADS")
    return int(env) if env and env.isdigit() else 2


def _time_fn(fn, sets, min_ms: float = 50.0, repeat: int = 3) -> float:
    for s in sets:
        fn(*s)
    t0 = time.perf_counter()
    fn(*sets[0])
    per = max(time.perf_counter() - t0, 1e-7)
    number = max(1, math.ceil(min_ms / 1000 / per))
    runs = []
    for r in range(repeat):
        s = sets[r % len(sets)]
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*s)
        runs.append((time.perf_counter() - t0) / number * 1e3)
    return statistics.median(runs)


GEMM512 = r"""\kernel gemm512(A: f32[512, 512], B: f32[512, 512]) -> (C: f32[512, 512]) {
  L^{512}_{i=0} L^{512}_{j=0} L^{512}_{k=0} [
    C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j};
  ];
}
"""


def _pack(stmt_nest: int, tensor: str, dim: int, factor: int, vector: bool = False) -> list:
    """pack_input on the statement of nest ``stmt_nest``, then a parallel outer copy loop (and,
    with ``vector``, a vectorized innermost copy loop: the offset in the block)."""
    return [("pack_input", {"stmt": f"N{stmt_nest}.S0", "tensor": tensor, "dim": dim, "factor": factor}),
            ("loop_parallelization", {"loop": "@copy"})] + (
        [("loop_vectorization", {"loop": "@copy_inner"})] if vector else [])


def _fit(extent: int, want: int, step: int):
    """-O2's register tile fit (leirc.opt.o2): the largest multiple of ``step`` up to ``want``
    dividing ``extent``, below it."""
    for f in range(want - want % step, 0, -step):
        if f < extent and extent % f == 0 and f > 1:
            return f
    return None


def panel_packs(kernel, vector: bool = False) -> list:
    """The packing the proposed -O2 change adds after register blocking (the report's diff):
    for each GEMM-like nest, the input read at ``[..., j]`` without ``i`` in panels of ``nr``
    along ``j`` and the input read at ``i`` without ``j`` in panels of ``mr`` along ``i``."""
    from leirc.lang import ast as A
    from leirc.lang.checker import check_kernel
    from leirc.opt import o2
    from leirc.strategies.rewrite import nest_chain

    res = check_kernel(kernel)
    tiles = o2.default_tiles()
    inputs = {p.name for p in kernel.inputs}
    steps, shift = [], 0
    for idx in range(len(kernel.body)):
        g = o2.gemm_like(kernel, res, idx)
        if g is None:
            continue
        ext = {l.var: l.extent for l in nest_chain(kernel.body[idx])}
        mr, nr = _fit(ext[g.i], tiles.mr, 1), _fit(ext[g.j], tiles.nr, tiles.lanes)
        if mr is None or nr is None:
            continue
        st = nest_chain(kernel.body[idx])[-1].body[0]
        for a in (n for n in A.walk(st.value) if isinstance(n, A.Access) and n.name in inputs):
            names = [i.name if isinstance(i, A.Var) else None for i in a.indices]
            used = {v.name for i in a.indices for v in A.walk(i) if isinstance(v, A.Var)}
            if g.j in names and g.i not in used:
                steps += _pack(idx + shift, a.name, names.index(g.j), nr, vector)
            elif g.i in names and g.j not in used:
                steps += _pack(idx + shift, a.name, names.index(g.i), mr, vector)
            else:
                continue
            shift += 1
    return steps


def _variants():
    """kernel -> (source, flops, torch fn, {label: steps after -O2, or a function of the kernel})."""
    import torch
    import torch.nn.functional as F

    std = lambda n: (REPO / "stdlib" / f"{n}.leir").read_text(encoding="utf-8")  # noqa: E731

    def uaj(loop, f, into="innermost"):
        return [("unroll_and_jam", {"loop": loop, "factor": f, "into": into})]

    panels_v = lambda k: panel_packs(k, vector=True)  # noqa: E731
    mm = {"panels": panel_packs, "panels_v": panels_v}
    mm.update({f"packB{f}": _pack(0, "B", 1, f) for f in (16, 32, 64)})
    mm.update({f"jam_k{f}": uaj("N0.k", f) for f in (2, 4, 8)})
    mm["panels_v+jam_k8"] = lambda k: panels_v(k) + uaj("N2.k", 8)
    pw = {f"jam_o{f}@wo": uaj("N0.o", f, "N0.wo") for f in (2, 4, 8)}
    pw.update({f"jam_o{f}@ho": uaj("N0.o", f, "N0.ho") for f in (2, 4)})
    pw["packW0x16"] = _pack(0, "W", 0, 16)
    return {
        "gemm512": (GEMM512, 2 * 512**3, lambda a, b: a @ b, {"panels": panel_packs, "panels_v": panels_v, "jam_k8": uaj("N0.k", 8)}),
        "matmul_standard": (std("matmul_standard"), 2 * 256 * 1024 * 512, lambda a, b: a @ b, mm),
        "batched_matmul": (std("batched_matmul"), 2 * 8 * 128 * 256 * 512, torch.bmm,
                           {"panels": panel_packs, "panels_v": panels_v, "packB32_v": _pack(0, "B", 2, 32, True)}),
        "pointwise_conv2d": (std("pointwise_conv2d"), 2 * 4 * 128 * 64 * 64 * 64, lambda x, w: F.conv2d(x, w), pw),
    }


def _apply(kernel, steps):
    from leirc.strategies import Step
    from leirc.strategies.base import plan_step

    from leirc.strategies.rewrite import find_loop, loop_ref, nest_chain

    created: dict = {}
    applied = []
    for name, args in steps:
        if "copy" in created:  # the innermost loop of the last copy nest
            created["copy_inner"] = loop_ref(kernel, nest_chain(find_loop(kernel, created["copy"])[0])[-1])
        args = {k: (created[v[1:]] if isinstance(v, str) and v.startswith("@") else v) for k, v in args.items()}
        rw = plan_step(kernel, Step.make(name, **args))
        created = {k: h for k, h in ((k, rw.forward(v)) for k, v in created.items()) if h is not None}
        created.update(rw.created)
        kernel = rw.kernel
        applied.append(str(rw.step))
    return kernel, applied


_OLD_O2 = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from leirc.lang import ast as A
from leirc.lang.checker import check_text
from leirc.lang.printer import PRETTY, print_module
from leirc.opt import o2
out = {}
for name, src in json.loads(sys.stdin.read()).items():
    out[name] = print_module(A.Module((o2.optimize(check_text(src).results[0].kernel).kernel,)), PRETTY)
print(json.dumps(out))
"""


def old_o2_texts(checkout: str, sources: dict) -> dict:
    """-O2 programs of ``sources`` as the leirc in ``checkout`` optimizes them (in a subprocess, so
    the two pipelines never share a module)."""
    import subprocess

    assert (Path(checkout) / "leirc" / "opt" / "o2.py").exists(), f"{checkout} is not a leirc checkout"
    proc = subprocess.run([sys.executable, "-c", _OLD_O2, str(Path(checkout).resolve())], input=json.dumps(sources),
                          capture_output=True, text=True, check=True, cwd=checkout)
    return json.loads(proc.stdout)


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def input_sets(kernel, params: Optional[dict] = None) -> tuple[list, list]:
    """Three input sets (uniform [0, 1), seeds 0-2) as (by LEIR name, the positional arrays of the
    eager call). ``params`` (a workload's own parameters) replace the random arrays of those
    inputs and are left out of the eager call's arguments (the module holds them)."""
    params = params or {}
    sets = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        sets.append({p.name: params[p.name] if p.name in params else rng.random(tuple(p.shape), dtype=np.float32)
                     for p in kernel.inputs})
    return sets, [[st[p.name] for p in kernel.inputs if p.name not in params] for st in sets]


def workload_row(path: Path):
    """(LEIR source, parameters by LEIR name, eager call) of a workload-suite module: the module
    takes its activations in the kernel's input order, its parameters are its own."""
    from leirc.frontend.importer import import_model

    imp = import_model(str(path))
    model = imp.loaded.model.eval()
    return imp.text, dict(imp.weights), lambda *x: model(*x)


def sweep(args) -> int:
    """Every stdlib kernel: -O0/-O1/-O2 (and another checkout's -O2) against PyTorch eager."""
    threads = _threads()
    import torch

    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_build import torch_impls

    from leirc.lang import ast as A
    from leirc.lang.checker import check_text
    from leirc.lang.printer import PRETTY, print_module
    from leirc.lower.session import KernelSession
    from leirc.opt import o1, o2

    torch.set_num_threads(threads)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    start_load = os.getloadavg()
    log(f"threads {threads}; load average at the start {start_load}")
    impls = torch_impls()
    names = sorted(p.stem for p in (REPO / "stdlib").glob("*.leir"))
    names = [n for n in names if not args.only or n in args.only]  # exact names: chunks of a sweep
    sources = {n: (REPO / "stdlib" / f"{n}.leir").read_text(encoding="utf-8") for n in names}
    weights: dict = {}
    for path in sorted((REPO / "benchmarks" / "workloads").glob("*.py")) if args.workloads else []:
        if args.only and path.stem not in args.only:
            continue
        sources[path.stem], weights[path.stem], impls[path.stem] = workload_row(path)
        names.append(path.stem)
    old = old_o2_texts(args.old_o2, sources) if args.old_o2 else {}
    rows = []
    for name in names:
        src = sources[name]
        k = check_text(src).results[0].kernel
        k1 = o1.optimize(k).kernel
        texts = {"o0": src, "o1": print_module(A.Module((k1,)), PRETTY)}
        r2 = o2.optimize(k)
        texts["o2"] = print_module(A.Module((r2.kernel,)), PRETTY)
        if name in old:
            texts["o2_old"] = old[name]
        if args.tiles_b:  # the same pipeline with another register tile / loop order
            mr, nr, lanes, outer = args.tiles_b.split(",")
            kb = o2.optimize(k, tiles=o2.Tiles(mr=int(mr), nr=int(nr), lanes=int(lanes), outer=outer)).kernel
            texts["o2_b"] = print_module(A.Module((kb,)), PRETTY)
        texts = {lab: t for lab, t in texts.items() if lab not in args.skip.split(",")}
        sets, sets_np = input_sets(k, weights.get(name, {}))
        sessions = {lab: KernelSession(t, threads=threads, timeout=600) for lab, t in texts.items()}
        timers, notes = {}, {}
        for lab, sess in sessions.items():
            probe = sess.time(sets[:1], warmup=0, repeat=1, min_repeat_ms=0)
            if not probe.ok:
                notes[lab] = f"{probe.error_kind}: {probe.error}"[:160]
                continue
            if probe.median_ms > args.skip_above * 1e3:  # too slow to repeat: the one probe stands
                notes[lab] = f"{probe.median_ms / 1e3:.1f} s per call (timed once)"
                timers[lab] = (lambda v=probe.median_ms: v)
                continue
            timers[lab] = (lambda s=sess, sets=sets: s.time(sets, warmup=1, repeat=3, min_repeat_ms=50).median_ms)
        tfn = impls.get(name)
        if tfn is not None:
            tsets = [[torch.from_numpy(a) for a in s] for s in sets_np]

            def eager(fn=tfn, tsets=tsets):
                with torch.no_grad():
                    return _time_fn(lambda *x: fn(*x), tsets)
            timers["torch"] = eager
        samples = {lab: [] for lab in timers}
        labels = list(timers)
        for rnd in range(args.rounds):
            # interleaved, one sample of every column per round, and the order rotates: a parallel
            # kernel's thread pool keeps spinning for a while after its run and slows whichever
            # column comes next, so no column may always follow the same one
            for lab in labels[rnd % len(labels):] + labels[:rnd % len(labels)]:
                samples[lab].append(timers[lab]())
                time.sleep(args.pause)
        for s in sessions.values():
            s.close()
        row = {"kernel": name, "o2_steps": len(r2.steps), "o2_is_o1": r2.kernel == k1, "notes": notes, "samples": samples,
               "ms": {lab: statistics.median(v) for lab, v in samples.items() if v}}
        rows.append(row)
        log(f"{name}: {json.dumps({l: round(v, 3) for l, v in row['ms'].items()})} load {os.getloadavg()[0]:.2f}")
    end_load = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": threads, "rounds": args.rounds, "load": [start_load, end_load],
                                               "rows": rows}, indent=1))
    print(sweep_table(rows, threads, args.rounds, [(start_load, end_load)]))
    return 0


def sweep_table(rows: list, threads: int, rounds: int, loads: list) -> str:
    """The sweep's markdown table, geomeans and losers (``loads``: (start, end) load averages of each run)."""
    old = any("o2_old" in row["ms"] for row in rows)
    cols = ["o0", "o1", "o2"] + (["o2_old"] if old else []) + (["o2_b"] if any("o2_b" in r["ms"] for r in rows) else []) + ["torch"]
    f = lambda v: "–" if v is None else (f"{v:.3f}" if v < 10 else f"{v:.1f}")  # noqa: E731
    r = lambda a, b: f"{a / b:.2f}×" if a and b else "–"  # noqa: E731
    la = "; ".join(f"{a[0]:.2f} → {b[0]:.2f}" for a, b in loads)
    out = [f"threads {threads}; 1-min load average at the start → end of each run: {la}; "
           f"{rounds} interleaved rounds, median over rounds", ""]
    extra = " | -O2 vs -O2 old" if old else ""
    out.append("| kernel | -O2 steps | " + " | ".join(f"{c} ms" for c in cols) + " | -O2 vs -O0 | -O2 vs -O1 | -O2 vs eager"
               + extra + " |")
    out.append("|---|--:" + "|--:" * (len(cols) + 3 + bool(old)) + "|")
    for row in rows:
        m = row["ms"]
        steps = f"{row['o2_steps']}" + (" (= -O1)" if row.get("o2_is_o1") else "")
        line = f"| {row['kernel']} | {steps} | " + " | ".join(f(m.get(c)) for c in cols)
        line += f" | {r(m.get('o0'), m.get('o2'))} | {r(m.get('o1'), m.get('o2'))} | {r(m.get('torch'), m.get('o2'))}"
        if old:
            line += f" | {r(m.get('o2_old'), m.get('o2'))}"
        out.append(line + " |")
    out.append("")
    for lab in [c for c in cols if c != "torch"]:
        vs_t = _geomean([row["ms"].get("torch", 0) / row["ms"][lab] for row in rows if row["ms"].get(lab)])
        vs_0 = _geomean([row["ms"].get("o0", 0) / row["ms"][lab] for row in rows if row["ms"].get(lab)])
        out.append(f"geomean {lab}: vs eager {vs_t and round(vs_t, 3)}×, vs -O0 {vs_0 and round(vs_0, 3)}× "
                   f"over {sum(1 for row in rows if row['ms'].get(lab))} kernels")
    worse = [row["kernel"] for row in rows if row["ms"].get("o2") and any(
        row["ms"].get(c) and row["ms"]["o2"] > row["ms"][c] for c in ("o0", "o1"))]
    out.append(f"-O2 slower than -O0 or -O1 (median): {', '.join(worse) or 'none'}")
    lo = lambda row, c: min(row["samples"][c]) if row["samples"].get(c) else None  # noqa: E731
    worse = [row["kernel"] for row in rows if lo(row, "o2") and any(
        lo(row, c) and lo(row, "o2") > lo(row, c) for c in ("o0", "o1"))]
    out.append(f"-O2 slower than -O0 or -O1 (minimum over rounds): {', '.join(worse) or 'none'}")
    if old:
        ab = _geomean([lo(row, "o2_old") / lo(row, "o2") for row in rows if lo(row, "o2") and lo(row, "o2_old")])
        out.append(f"geomean -O2 old / -O2 (minimum over rounds): {ab and round(ab, 3)}×")
    ab = _geomean([lo(row, "o2_b") / lo(row, "o2") for row in rows if lo(row, "o2") and lo(row, "o2_b")])
    if ab:
        out.append(f"geomean -O2 with --tiles-b / -O2 (minimum over rounds): {ab:.3f}×")
    for row in rows:
        for lab, note in row["notes"].items():
            out.append(f"{row['kernel']} {lab}: {note}")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", action="store_true", help="every stdlib kernel at -O0/-O1/-O2 against eager")
    ap.add_argument("--workloads", action="store_true", help="--sweep: also benchmarks/workloads/*.py (with --only: "
                    "those named)")
    ap.add_argument("--old-o2", metavar="CHECKOUT", help="--sweep: also the -O2 of this leirc checkout")
    ap.add_argument("--tiles-b", metavar="MR,NR,LANES,OUTER", help="--sweep: also -O2 with this Tiles (column o2_b)")
    ap.add_argument("--pause", type=float, default=0.05, help="--sweep: seconds between two measurements")
    ap.add_argument("--skip", default="", help="--sweep: columns not measured, e.g. o0,o1")
    ap.add_argument("--skip-above", type=float, default=2.0, help="--sweep: seconds per call above which a "
                    "variant is timed once")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="print one sweep table from these --json files")
    ap.add_argument("--only", action="append", default=[], help="kernels whose name contains this (--sweep: exact)")
    ap.add_argument("--variant", action="append", default=[], help="only these labels (plus o2 and torch)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--show", action="store_true", help="print each variant's program")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    threads = _threads()
    os.environ.setdefault("TVM_NUM_THREADS", str(threads))
    if args.merge:  # one table from the JSON of several sweep runs (chunks of the stdlib)
        runs = [json.loads(Path(f).read_text()) for f in args.merge]
        rows = sorted((r for run in runs for r in run["rows"]), key=lambda r: r["kernel"])
        print(sweep_table(rows, runs[0]["threads"], runs[0]["rounds"], [tuple(run["load"]) for run in runs]))
        return 0
    if args.sweep:
        return sweep(args)

    import torch

    import leirc.strategies.blocking  # noqa: F401  (registers the strategies until families.py lists them)
    from leirc.lang import ast as A
    from leirc.lang.checker import check_text
    from leirc.lang.printer import PRETTY, print_module
    from leirc.lower.session import KernelSession
    from leirc.opt import o2

    torch.set_num_threads(threads)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    log(f"threads {threads}; load average at the start {os.getloadavg()}")
    rows = []
    for name, (src, flops, tfn, extra) in _variants().items():
        if args.only and not any(s in name for s in args.only):
            continue
        k = check_text(src).results[0].kernel
        base = o2.optimize(k).kernel
        texts = {"o2": print_module(A.Module((base,)), PRETTY)}
        for label, steps in extra.items():
            if args.variant and label not in args.variant:
                continue
            new, applied = _apply(base, steps(k) if callable(steps) else steps)
            texts[label] = print_module(A.Module((new,)), PRETTY)
            log(f"{name} {label}: -O2 + {'; '.join(applied)}")
            if args.show:
                log(texts[label])
        sets, sets_np = input_sets(k)
        zeros = {p.name: np.zeros(tuple(p.shape), np.float32) for p in k.outputs}
        timers, sessions, notes, same = {}, [], {}, {}
        ref_out = None
        for label, text in texts.items():
            sess = KernelSession(text, threads=threads, timeout=600)
            sessions.append(sess)
            run = sess.run(sets[0], {n: a.copy() for n, a in zeros.items()})
            if not run.ok:
                notes[label] = f"{run.error_kind}: {run.error}"[:160]
                continue
            out = run.outputs[k.outputs[0].name]
            if ref_out is None:
                ref_out = out
            same[label] = (bool(np.array_equal(out, ref_out)), float(np.max(np.abs(out - ref_out))))
            timers[label] = (lambda s=sess: s.time(sets, warmup=1, repeat=3, min_repeat_ms=50).median_ms)
        tsets = [[torch.from_numpy(a) for a in s] for s in sets_np]
        timers["torch"] = lambda: _time_fn(lambda *x: tfn(*x), tsets)
        samples = {lab: [] for lab in timers}
        for _ in range(args.rounds):
            for lab, fn in timers.items():  # interleaved: one sample of every variant per round
                samples[lab].append(fn())
        for s in sessions:
            s.close()
        med = {lab: statistics.median(v) for lab, v in samples.items() if v}
        rows.append({"kernel": name, "gflop": flops / 1e9, "ms": med, "same_as_o2": same, "notes": notes,
                     "samples": samples})
        log(json.dumps(rows[-1]["ms"]))

    print(f"threads {threads}; load average at the end {os.getloadavg()}")
    # the minimum over rounds as well: on a shared machine load only ever adds time
    print("| kernel | variant | median ms | min ms | GFLOP/s (median) | vs -O2 (median / min) | vs eager (median / min) "
          "| output = -O2's |")
    print("|---|---|--:|--:|--:|--:|--:|---|")
    for r in rows:
        lo = {lab: min(v) for lab, v in r["samples"].items() if v}
        o2ms, tms = r["ms"].get("o2"), r["ms"].get("torch")
        for lab, ms in r["ms"].items():
            gf = r["gflop"] / (ms * 1e-3)
            eq = r["same_as_o2"].get(lab)
            eqs = "–" if eq is None else ("bitwise" if eq[0] else f"max |diff| {eq[1]:.2g}")
            vs_o2 = f"{o2ms / ms:.2f}× / {lo['o2'] / lo[lab]:.2f}×" if o2ms else "–"
            vs_t = f"{tms / ms:.2f}× / {lo['torch'] / lo[lab]:.2f}×" if tms else "–"
            print(f"| {r['kernel']} | {lab} | {ms:.2f} | {lo[lab]:.2f} | {gf:.1f} | {vs_o2} | {vs_t} | {eqs} |")
        for lab, note in r["notes"].items():
            print(f"{r['kernel']} {lab}: {note}")
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": threads, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
