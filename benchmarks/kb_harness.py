"""KernelBench-conformant timing and correctness of leirc's ModelNew (issue #35; a benchmark, not a test).

What KernelBench reports is the wall time of ``ModelNew(*inputs)`` against ``Model(*inputs)``.
This harness measures exactly that, for every module of the suites:

* **Both sides are modules**: the reference ``Model`` and the ``ModelNew`` that
  ``leirc build MODEL.py`` writes (``<stem>_leirc.py``, loading the kernel library beside it),
  both built as KernelBench builds them (``torch.manual_seed(42)`` then the constructor on
  ``get_init_inputs()``), called on the **same inputs** (3 sets from ``get_inputs()`` under seeds
  100-102, rotating), each call **allocating its own outputs** (Model by itself, ModelNew with
  ``torch.empty``), under ``torch.no_grad``.
* **Interleaved rounds** (``--rounds``, default 20) after ``--warmup`` calls per side; in each
  round every side is timed once as a block of calls lasting >= ``--min-block-ms``, the order
  rotating from round to round, each after an untimed ``--pause-ms`` pause (default 50) so the
  thread pool the previous side left spinning is idle. Reported: the **median** per-call ms per side, the spread (the
  interquartile range over the median), min and max. ``--l2-flush MB`` rewrites a buffer that
  large before every call and times each call alone (cold caches, KernelBench's GPU protocol).
* **2 threads on both sides** (``--threads``): ``torch.set_num_threads`` and ``TVM_NUM_THREADS``
  for the timing process; the counts the runtimes report are recorded.
* **The load average** (1 min) is recorded before and after each row; above 1.5 the row is
  flagged and a warning printed: the figure is then not trustworthy.
* **Correctness both ways**: KernelBench's own check (``torch.allclose(atol=rtol=1e-2)`` on 5
  seeded inputs, trial seeds derived from 42 as KernelBench's ``eval`` derives them), next to
  leirc's stricter verification from the build (its ``report.json``).
* ``--overhead``: two more sides, the bare kernel called in the same process on pre-made DLPack
  views with pre-allocated outputs (no module, no allocation), and the same allocating fresh
  ``torch.empty`` outputs every call: ModelNew's own per-call overhead is its median minus the
  second (goal <= 20 us); the second minus the first is what fresh outputs cost (their first
  touch: page faults for large ones, which Model pays as well).
* ``--compile``: torch.compile of the reference as another side.

Suites: ``--suite workloads`` (``benchmarks/workloads/*.py``, the default), ``--suite stdlib``
(every ``stdlib/*.leir`` that has a PyTorch version in ``benchmarks/search_matrix/torch_eager.py``:
Model wraps that function, ModelNew the kernel built at the same ``-O`` level; inputs are
``leirc.interp.random_inputs``), and ``--model PATH`` (any KernelBench-format file, repeatable).
Each module is built (``leirc build MODEL.py -O LEVEL -o OUT/<stem>``) and timed in subprocesses
of its own, so a crash fails only its row. ``--prebuilt`` reuses the builds already in ``--out``.

Run it on a quiet machine (nothing else running; the load average says whether it was)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        .venv/bin/python benchmarks/kb_harness.py --suite workloads --suite stdlib -O 2 --overhead \\
        --out /work/bench_out/kb --json /work/bench_out/kb.json --md /work/bench_out/kb.md

Output: a markdown table and a JSON document (rows, summary: fast_0/fast_1 over all rows,
geomean speedup over the KernelBench-correct rows, thread counts, versions, host, load).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

#: the driver's timing seeds (never the verification seeds)
TIMING_SEEDS = (100, 101, 102)
LOAD_WARN = 1.5


# ---------------------------------------------------------------------------
# rows


def workload_rows(pattern: str = os.path.join(HERE, "workloads", "*.py")) -> list:
    return [{"name": os.path.splitext(os.path.basename(p))[0], "kind": "model", "path": os.path.abspath(p)}
            for p in sorted(glob.glob(pattern))]


def stdlib_rows() -> list:
    from search_matrix.torch_eager import eager_table

    table = eager_table()
    rows = []
    for p in sorted(glob.glob(os.path.join(ROOT, "stdlib", "*.leir"))):
        name = os.path.splitext(os.path.basename(p))[0]
        if name in table:
            rows.append({"name": f"stdlib/{name}", "kind": "stdlib", "path": p})
    return rows


# ---------------------------------------------------------------------------
# the timing child (one module, a clean process)


def _stdlib_sides(path: str, opt: str):
    """(Model, ModelNew, get_inputs(seed), leirc verification) for a stdlib kernel."""
    import torch

    from leirc.driver import BuildOptions, new_build, run_pipeline
    from leirc.interp import random_inputs
    from leirc.lower.device import Library, TorchCall
    from search_matrix.torch_eager import eager_table

    name = os.path.splitext(os.path.basename(path))[0]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    b = run_pipeline(new_build(text, file=path, options=BuildOptions(opt=opt)), until="verify")
    j = b.jobs[0]
    k = j.current.kernel
    fn = eager_table()[name]
    in_names = [p.name for p in k.inputs]
    out_names = [p.name for p in k.outputs]

    class Model(torch.nn.Module):
        def forward(self, *xs):
            res = fn(**dict(zip(in_names, xs)))
            outs = [res[n] for n in out_names]
            return outs[0] if len(outs) == 1 else tuple(outs)

    call = TorchCall(Library.from_built(j.built), in_names, {})

    class ModelNew(torch.nn.Module):
        _leirc = call

        def forward(self, *xs):
            outs = self._leirc(self, list(xs))
            return outs[0] if len(outs) == 1 else tuple(outs)

    def get_inputs(seed):
        # torch's own allocations, like KernelBench's torch.rand inputs (NumPy's are not at
        # TVM's 64-byte alignment, which would make ModelNew copy them)
        feed = random_inputs(k, seed, "uniform")
        return [torch.from_numpy(feed[n]).clone() for n in in_names]

    v = j.verification
    verified = None if v is None else bool(v.equal)
    summary = None if v is None else (v.summary() if hasattr(v, "summary") else str(v))
    return Model(), ModelNew(), get_inputs, {"verified": verified, "verify_summary": summary,
                                             "leirc_verify": "interpreter" if v is not None else "not run (-O0)"}


def _model_sides(path: str, wrapper: str, report: str):
    """(Model, ModelNew, get_inputs(seed), leirc verification) for a KernelBench file, built."""
    import importlib.util

    import torch

    from leirc.frontend import load_model

    ref = load_model(path)  # torch.manual_seed(42), then Model(*get_init_inputs())
    spec = importlib.util.spec_from_file_location("_kb_harness_solution", wrapper)
    sol = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sol
    spec.loader.exec_module(sol)
    torch.manual_seed(42)
    new = sol.ModelNew(*ref.init_inputs)
    info = {"verified": None, "verify_summary": None, "leirc_verify": "PyTorch module"}
    if os.path.isfile(report):
        with open(report) as f:
            rep = json.load(f)
        info.update(verified=rep.get("verified"), verify_summary=rep.get("verify_summary"),
                    optimizer=rep.get("optimizer"), steps=rep.get("steps"))
    return ref.model, new, ref.get_inputs, info


def bare_kernel(new, sets, fresh_outputs: bool = False):
    """The kernel alone, in this process: its arguments made once per input set (DLPack
    views, outputs allocated beforehand), then only the kernel function is called, rotating
    over the sets. With ``fresh_outputs`` each call also allocates its outputs with
    ``torch.empty`` (and their first touch, page faults included, lands in the kernel), as
    ModelNew and Model do: ModelNew's time minus this one is its call overhead proper, this
    one minus the plain kernel the cost of fresh outputs."""
    import torch

    if getattr(new, "_leirc", None) is None:  # the generated ModelNew binds on its first call
        with torch.no_grad():
            new(*sets[0])
    call = new._leirc
    root = getattr(new, "ref", new)
    prepared = [call.arguments(root, [x for x in xs if isinstance(x, torch.Tensor)]) for xs in sets]
    fn = call.library.function
    view = call.library.view
    n_out = len(prepared[0][1])
    shapes = [(tuple(y.shape), y.dtype) for y in prepared[0][1]]
    state = {"k": 0}

    def bare(*_inputs):
        args = prepared[state["k"] % len(prepared)][0]
        state["k"] += 1
        if fresh_outputs:
            outs = [torch.empty(sh, dtype=dt) for sh, dt in shapes]
            args = args[:len(args) - n_out] + [view(y) for y in outs]
        fn(*args)

    return bare


def child(args) -> int:
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    import torch

    from leirc.frontend import bench

    torch.set_num_threads(args.threads)
    row = {"name": args.name, "kind": args.kind, "path": args.path, "opt": args.opt}
    try:
        if args.kind == "stdlib":
            ref, new, get_inputs, info = _stdlib_sides(args.path, args.opt)
        else:
            ref, new, get_inputs, info = _model_sides(args.path, args.wrapper, args.report)
        row.update(info)
        row["kb_check"] = bench.kb_correctness(ref, new, get_inputs, trials=args.kb_trials, tol=args.kb_tol)
        sets = [list(get_inputs(s)) for s in TIMING_SEEDS]
        sides = {"eager": ref, "leirc": new}
        if args.compile:
            bench.private_inductor_cache()
            c = torch.compile(ref)
            with torch.no_grad():
                c(*sets[0])
            sides["compile"] = c
        if args.overhead:
            sides["kernel"] = bare_kernel(new, sets)
            sides["kernel_alloc"] = bare_kernel(new, sets, fresh_outputs=True)
        mt = bench.time_modules(sides, sets, rounds=args.rounds, warmup=args.warmup, min_block_ms=args.min_block_ms,
                                l2_flush_mb=args.l2_flush, pause_ms=args.pause_ms, threads=args.threads)
        from leirc.lower.device import tvm_threads

        mt.threads_tvm = tvm_threads()
        row["timing"] = mt.as_dict()
        if mt.ok:
            row["eager_ms"] = mt.sides["eager"].median_ms
            row["leirc_ms"] = mt.sides["leirc"].median_ms
            row["speedup_eager"] = mt.speedup("eager", "leirc")
            if "compile" in mt.sides:
                row["compile_ms"] = mt.sides["compile"].median_ms
                row["speedup_compile"] = mt.speedup("compile", "leirc")
            if "kernel" in mt.sides:
                row["kernel_ms"] = mt.sides["kernel"].median_ms
                row["kernel_alloc_ms"] = mt.sides["kernel_alloc"].median_ms
                # ModelNew minus the kernel with fresh outputs: the wrapper's own per-call cost
                row["overhead_us"] = (mt.sides["leirc"].median_ms - mt.sides["kernel_alloc"].median_ms) * 1000.0
                row["fresh_output_us"] = (mt.sides["kernel_alloc"].median_ms - mt.sides["kernel"].median_ms) * 1000.0
        else:
            row["error"] = f"timing: {mt.error}"
    except Exception as e:  # noqa: BLE001 - one row fails, the run goes on
        row["error"] = f"{type(e).__name__}: {e}"
    with open(args.json_out, "w") as f:
        json.dump(row, f, indent=1)
    return 0


# ---------------------------------------------------------------------------
# the parent


def _build(row: dict, out: str, opt: str, threads: int, timeout: float, prebuilt: bool) -> dict:
    """``leirc build MODEL.py -O opt -o out/<stem>`` in a subprocess (the user's path)."""
    d = os.path.join(out, row["name"])
    stem = os.path.splitext(os.path.basename(row["path"]))[0]
    wrapper, report = os.path.join(d, f"{stem}_leirc.py"), os.path.join(d, f"{stem}.report.json")
    info = {"wrapper": wrapper, "report": report}
    if prebuilt and os.path.isfile(wrapper):
        return info
    cmd = [sys.executable, "-m", "leirc", "build", row["path"], "-O", opt, "-o", d, "--threads", str(threads)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        info["error"] = f"build: timed out after {timeout:.0f} s"
        return info
    info["build_s"] = time.perf_counter() - t0
    if p.returncode != 0 or not os.path.isfile(wrapper):
        last = [ln for ln in p.stderr.strip().splitlines() if ln.strip()][-3:]
        info["error"] = f"build (exit {p.returncode}): " + " / ".join(last)
    return info


def run_row(row: dict, args) -> dict:
    from leirc.frontend.bench import load_average

    load_before = load_average()
    info = {}
    if row["kind"] == "model":
        info = _build(row, args.out, args.opt, args.threads, args.timeout, args.prebuilt)
        if "error" in info:
            return dict(row, **info, opt=args.opt)
    out = os.path.join(args.out, f".{row['name'].replace('/', '_')}.row.json")
    os.makedirs(args.out, exist_ok=True)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--name", row["name"], "--kind", row["kind"],
           "--path", row["path"], "-O", args.opt, "--json-out", out, "--threads", str(args.threads),
           "--rounds", str(args.rounds), "--warmup", str(args.warmup), "--min-block-ms", str(args.min_block_ms),
           "--l2-flush", str(args.l2_flush), "--pause-ms", str(args.pause_ms), "--kb-trials", str(args.kb_trials),
           "--kb-tol", str(args.kb_tol)]
    if row["kind"] == "model":
        cmd += ["--wrapper", info["wrapper"], "--report", info["report"]]
    cmd += ["--compile"] * args.compile + ["--overhead"] * args.overhead
    env = dict(os.environ, TVM_NUM_THREADS=str(args.threads))
    # TVM's pool threads spin ~0.1-0.5 s after each parallel region by default (300,000 spins):
    # with the sides interleaved in one process, eager's OpenMP threads then run beside spinning
    # TVM threads and read several times slower (a 256^3 eager GEMM read 1.6 ms instead of ~0.2),
    # which KernelBench's separate loops do not see. leirc's workers use the same setting.
    env.setdefault("TVM_THREAD_POOL_SPIN_COUNT", "10000")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return dict(row, opt=args.opt, error=f"timing: timed out after {args.timeout:.0f} s")
    if not os.path.isfile(out):
        last = [ln for ln in p.stderr.strip().splitlines() if ln.strip()][-3:]
        return dict(row, opt=args.opt, error=f"timing process died (exit {p.returncode}): " + " / ".join(last))
    with open(out) as f:
        res = json.load(f)
    os.unlink(out)
    res.update({k: v for k, v in info.items() if k in ("build_s",)})
    res["load_before_row"] = load_before
    return res


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(rows: list) -> dict:
    n = len(rows)
    correct = [r for r in rows if (r.get("kb_check") or {}).get("ok")]
    strict = [r for r in correct if r.get("verified") is not False]
    fast1 = [r for r in correct if (r.get("speedup_eager") or 0) > 1.0]
    loads = [x for r in rows for x in ((r.get("timing") or {}).get("load_before"),
                                        (r.get("timing") or {}).get("load_after")) if x is not None]
    big = [r for r in correct if r.get("kernel_ms") and r["kernel_ms"] >= 1.0 and r.get("leirc_ms")]
    return {
        "rows": n,
        "fast_0": len(correct) / n if n else None,
        "fast_1": len(fast1) / n if n else None,
        "kb_correct": len(correct),
        "leirc_verified_too": len(strict),
        "geomean_speedup_eager": _geomean([r.get("speedup_eager") for r in correct]),
        "geomean_speedup_compile": _geomean([r.get("speedup_compile") for r in correct]),
        "max_overhead_over_kernel_above_1ms": max((r["leirc_ms"] / r["kernel_ms"] - 1.0 for r in big), default=None),
        "max_overhead_us": max((r["overhead_us"] for r in rows if r.get("overhead_us") is not None), default=None),
        "max_load": max(loads) if loads else None,
        "load_warning": bool(loads) and max(loads) > LOAD_WARN,
    }


def _ms(x):
    return "n/a" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")


def _x(x):
    return "n/a" if x is None else f"{x:.3g}×"


def markdown(rows: list, summary: dict, meta: dict) -> str:
    lines = ["| module | KB check (allclose 1e-2) | leirc verified | eager ms | ModelNew ms | spread eager / new "
             "| speedup vs eager | torch.compile ms | bare kernel ms | + fresh outputs µs | ModelNew overhead µs | load |",
             "|---|:-:|:-:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    notes = []
    for r in rows:
        kb = r.get("kb_check") or {}
        kbs = "n/a" if not kb else (f"✓ {kb['passed']}/{kb['trials']}" if kb.get("ok")
                                     else f"✗ {kb.get('passed', 0)}/{kb.get('trials', 0)}")
        ver = {True: "✓", False: "✗", None: "–"}[r.get("verified")]
        sides = (r.get("timing") or {}).get("sides") or {}
        spread = " / ".join(f"{100 * sides[k]['spread']:.0f}%" for k in ("eager", "leirc") if k in sides) or "n/a"
        t = r.get("timing") or {}
        load = max([x for x in (t.get("load_before"), t.get("load_after")) if x is not None], default=None)
        ov, fo = r.get("overhead_us"), r.get("fresh_output_us")
        lines.append(f"| {r['name']} | {kbs} | {ver} | {_ms(r.get('eager_ms'))} | {_ms(r.get('leirc_ms'))} | {spread} "
                     f"| {_x(r.get('speedup_eager'))} | {_ms(r.get('compile_ms'))} | {_ms(r.get('kernel_ms'))} "
                     f"| {'n/a' if fo is None else f'{fo:.1f}'} | {'n/a' if ov is None else f'{ov:.1f}'} | "
                     f"{'n/a' if load is None else f'{load:.2f}' + (' ⚠' if load > LOAD_WARN else '')} |")
        why = r.get("error") or kb.get("error")
        if why:
            notes.append(f"* `{r['name']}`: {why}")
    s = summary
    out = ["\n".join(lines), ""]
    out.append(f"**Summary** ({s['rows']} modules, -O{meta.get('opt')}): KernelBench-correct {s['kb_correct']} "
               f"(fast_0 = {s['fast_0'] or 0:.2f}; {s['leirc_verified_too']} of them also pass leirc's verification); "
               f"fast_1 = {s['fast_1'] or 0:.2f}; geomean speedup over the correct ones: vs eager "
               f"{_x(s['geomean_speedup_eager'])}, vs torch.compile {_x(s['geomean_speedup_compile'])}.")
    if s.get("max_overhead_over_kernel_above_1ms") is not None:
        out.append(f"Largest ModelNew time over the bare kernel on modules whose kernel takes >= 1 ms: "
                   f"+{100 * s['max_overhead_over_kernel_above_1ms']:.1f} % (target: within 5 %).")
    if s.get("max_overhead_us") is not None:
        out.append(f"Largest per-call overhead of ModelNew over the kernel with fresh outputs: "
                   f"{s['max_overhead_us']:.1f} µs (target: <= 20 µs).")
    out.append("")
    out.append(f"Command: `{meta.get('command')}`. Threads: PyTorch {meta.get('threads')}, TVM {meta.get('threads')} "
               f"(`TVM_NUM_THREADS`). {meta.get('rounds')} interleaved rounds, warm-up {meta.get('warmup')}, "
               f"blocks >= {meta.get('min_block_ms')} ms after a {meta.get('pause_ms')} ms pause, "
               f"L2 flush {meta.get('l2_flush') or 'off'}. "
               f"Versions: {meta.get('versions')}. Host: {meta.get('host')}.")
    if s.get("load_warning"):
        out.append(f"\n**Warning**: the load average reached {s['max_load']:.2f} (> {LOAD_WARN}) during the run: "
                   "other work shared the CPU and the timings are not reliable. Re-run on a quiet machine.")
    if notes:
        out += ["", "Failures and notes:"] + notes
    return "\n".join(out)


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "apache-tvm", "apache-tvm-ffi", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", action="append", choices=["workloads", "stdlib"], default=[],
                    help="module suites to run (default: workloads unless --model is given)")
    ap.add_argument("--model", action="append", default=[], help="a KernelBench-format file (repeatable)")
    ap.add_argument("--only", action="append", default=[], help="keep rows whose name contains this")
    ap.add_argument("-O", dest="opt", default="2", choices=["0", "1", "2", "search"], help="leirc level (default 2)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "kb_harness"), help="where the builds go")
    ap.add_argument("--prebuilt", action="store_true", help="reuse the builds already in --out")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--min-block-ms", type=float, default=20.0)
    ap.add_argument("--pause-ms", type=float, default=50.0,
                    help="untimed pause before each measurement (lets the other side's thread pool go idle)")
    ap.add_argument("--l2-flush", type=float, default=0.0, metavar="MB", help="rewrite MB of memory before each call")
    ap.add_argument("--kb-trials", type=int, default=5)
    ap.add_argument("--kb-tol", type=float, default=1e-2)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile of the reference")
    ap.add_argument("--overhead", action="store_true", help="also time the bare kernel: ModelNew's per-call overhead")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per build and per timing process")
    ap.add_argument("--json", help="write the rows and the summary here")
    ap.add_argument("--md", help="write the markdown table here")
    # the timing child
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--name", help=argparse.SUPPRESS)
    ap.add_argument("--kind", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--wrapper", help=argparse.SUPPRESS)
    ap.add_argument("--report", default="", help=argparse.SUPPRESS)
    ap.add_argument("--json-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)

    rows = [{"name": os.path.splitext(os.path.basename(p))[0], "kind": "model", "path": os.path.abspath(p)}
            for p in args.model]
    suites = args.suite or ([] if args.model else ["workloads"])
    if "workloads" in suites:
        rows += workload_rows()
    if "stdlib" in suites:
        rows += stdlib_rows()
    if args.only:
        rows = [r for r in rows if any(o in r["name"] for o in args.only)]
    if not rows:
        print("kb_harness: no module to run", file=sys.stderr)
        return 2
    from leirc.frontend.bench import load_average

    meta = {"command": " ".join([os.path.relpath(__file__, ROOT)] + list(argv if argv is not None else sys.argv[1:])),
            "opt": args.opt, "threads": args.threads, "rounds": args.rounds, "warmup": args.warmup,
            "min_block_ms": args.min_block_ms, "pause_ms": args.pause_ms, "l2_flush": args.l2_flush,
            "versions": _versions(),
            "host": f"{platform.machine()} {platform.processor() or ''} ({os.cpu_count()} CPUs)".strip(),
            "load_start": load_average(), "kb_tol": args.kb_tol, "kb_trials": args.kb_trials}
    t0 = time.perf_counter()
    results = []
    for r in rows:
        res = run_row(r, args)
        results.append(res)
        t = res.get("timing") or {}
        print(f"{res['name']}: eager {_ms(res.get('eager_ms'))} ms, ModelNew {_ms(res.get('leirc_ms'))} ms, "
              f"{_x(res.get('speedup_eager'))}, KB check {'ok' if (res.get('kb_check') or {}).get('ok') else 'FAIL'}"
              + (f", overhead {res['overhead_us']:.1f} us" if res.get("overhead_us") is not None else "")
              + (f"  [{res['error']}]" if res.get("error") else "")
              + (f"  WARNING: {t['warning']}" if t.get("warning") else ""), file=sys.stderr, flush=True)
        summary = summarize(results)
        meta["wall_s"] = time.perf_counter() - t0
        meta["load_end"] = load_average()
        if args.json:  # rewritten after every row, so a long run can be watched and is never lost
            with open(args.json, "w") as f:
                json.dump({"meta": meta, "summary": summary, "rows": results}, f, indent=1)
    md = markdown(results, summarize(results), meta)
    if args.md:
        with open(args.md, "w") as f:
            f.write(md + "\n")
    print(md)
    if summarize(results)["load_warning"]:
        print(f"kb_harness: warning: load average above {LOAD_WARN} during the run; timings are not reliable",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
