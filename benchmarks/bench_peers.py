"""leirc -O0/-O1/-O2 side by side with PyTorch eager, NumPy and TVM MetaSchedule (a benchmark, not a test).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        .venv/bin/python benchmarks/bench_peers.py --ms-trials 64

One run, interleaved: every variant of a kernel is built once (leirc variants each in their
own sandboxed worker session, as the driver runs them), then ``--rounds`` rounds time each
variant in turn (a leirc measurement is the median of 3 timings of >= 50 ms over 3 rotating
input sets; PyTorch and NumPy the same protocol in this process), and the table reports the
median over rounds, so a burst of load on the machine hits every column alike. 2 threads on
every side. MetaSchedule tunes the same computation (a TE ``compute`` with the same shapes)
for ``--ms-trials`` trials (random cost model, seed 0; 0 skips it); its tuning wall-clock is
reported. GFLOP/s are against a measured sgemm peak (PyTorch ``mm`` 2048³, same threads).
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
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

GEMM512 = r"""\kernel gemm512(A: f32[512, 512], B: f32[512, 512]) -> (C: f32[512, 512]) {
  L^{512}_{i=0} L^{512}_{j=0} L^{512}_{k=0} [
    C^{f32,g}_{i,j} = C^{f32,g}_{i,j} + A^{f32,g}_{i,k}*B^{f32,g}_{k,j};
  ];
}
"""


def _threads() -> int:
    env = os.environ.get("TVM_NUM_THREADS")
    return int(env) if env and env.isdigit() else 2


# ---------------------------------------------------------------------------
# the kernels: (name, source, flops, torch fn, numpy fn, te builder)


def _kernels():
    import torch
    import torch.nn.functional as F

    def te_matmul(shape_a, shape_b, batch=False):
        def build():
            from tvm import te

            A = te.placeholder(shape_a, "float32", name="A")
            B = te.placeholder(shape_b, "float32", name="B")
            if batch:
                n, m, kk = shape_a
                k = te.reduce_axis((0, kk), name="k")
                C = te.compute((n, m, shape_b[2]), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), name="C")
            else:
                m, kk = shape_a
                k = te.reduce_axis((0, kk), name="k")
                C = te.compute((m, shape_b[1]), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
            return te.create_prim_func([A, B, C])
        return build

    def te_pointwise():
        from tvm import te

        X = te.placeholder((4, 64, 64, 64), "float32", name="X")
        W = te.placeholder((128, 64, 1, 1), "float32", name="W")
        c = te.reduce_axis((0, 64), name="c")
        C = te.compute((4, 128, 64, 64), lambda n, o, h, w: te.sum(X[n, c, h, w] * W[o, c, 0, 0], axis=c), name="C")
        return te.create_prim_func([X, W, C])

    std = lambda n: (REPO / "stdlib" / f"{n}.leir").read_text(encoding="utf-8")  # noqa: E731
    return [
        ("gemm512", GEMM512, 2 * 512**3, lambda a, b: a @ b, lambda a, b: a @ b,
         te_matmul((512, 512), (512, 512))),
        ("matmul_standard", std("matmul_standard"), 2 * 256 * 1024 * 512, lambda a, b: a @ b, lambda a, b: a @ b,
         te_matmul((256, 1024), (1024, 512))),
        ("batched_matmul", std("batched_matmul"), 2 * 8 * 128 * 256 * 512, torch.bmm, np.matmul,
         te_matmul((8, 128, 256), (8, 256, 512), batch=True)),
        ("pointwise_conv2d", std("pointwise_conv2d"), 2 * 4 * 128 * 64 * 64 * 64, lambda x, w: F.conv2d(x, w), None,
         te_pointwise),
        ("gemv", std("gemv"), 2 * 128 * 65536, lambda a, x: a @ x, lambda a, x: a @ x, None),
    ]


# ---------------------------------------------------------------------------
# timing


def _time_py(fn, sets, min_ms: float = 50.0, repeat: int = 3) -> float:
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


def _sgemm_peak(threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    a, b = torch.rand(2048, 2048), torch.rand(2048, 2048)
    ms = _time_py(torch.mm, [(a, b)], min_ms=200)
    return 2 * 2048**3 / (ms * 1e-3) / 1e9


def _metaschedule(build_te, trials: int, threads: int, sets, out_shapes, log, db_dir=None):
    """(timer, tuning wall s) of the best MetaSchedule schedule, or (None, note). ``db_dir``:
    a work directory of an earlier tuning of the same computation, reused instead of tuning."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    cpu = tvm.target.codegen.llvm_get_system_cpu()
    target = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": threads})
    mod = tvm.IRModule({"main": build_te()})
    wd = db_dir or tempfile.mkdtemp(prefix="leirc_ms_")
    t0 = time.perf_counter()
    try:
        if db_dir:
            db = ms.database.JSONDatabase(work_dir=db_dir)
            log(f"metaschedule: reusing the tuning records in {db_dir}")
        else:
            db = ms.tune_tir(mod, target, work_dir=wd, max_trials_global=trials, num_trials_per_iter=32,
                             cost_model="random", database="json", seed=0,
                             builder=ms.builder.LocalBuilder(timeout_sec=120.0))
        sch = compile_tir(db, mod, target)
    except Exception as e:  # noqa: BLE001 - report, do not abort the table
        return None, f"tuning failed: {type(e).__name__}: {e}"[:200]
    wall = time.perf_counter() - t0
    if sch is None:
        return None, f"no valid schedule in {trials} trials ({wall:.0f} s)"
    rt = tvm.compile(sch.mod, target=target).jit()
    dev = tvm.cpu()
    tsets = [[tvm.runtime.tensor(a, dev) for a in s] + [tvm.runtime.tensor(np.zeros(sh, "float32"), dev) for sh in out_shapes]
             for s in sets]

    def run(*arrs):
        rt["main"](*arrs)

    log(f"metaschedule: {'loaded' if db_dir else f'tuned {trials} trials'} in {wall:.0f} s")
    return (lambda: _time_py(run, tsets)), (None if db_dir else wall)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ms-trials", type=int, default=0, help="MetaSchedule trials (0: skip)")
    ap.add_argument("--ms-kernel", action="append", default=[],
                    help="kernels MetaSchedule tunes (default: gemm512 only; 'all' for every kernel with a TE version)")
    ap.add_argument("--ms-db", metavar="DIR", help="reuse the MetaSchedule work directory of an earlier run")
    ap.add_argument("--skip-o0-above", type=float, default=3.0, help="seconds per call above which -O0 is not timed")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    threads = _threads()
    os.environ.setdefault("TVM_NUM_THREADS", str(threads))

    import torch

    from leirc.lang import ast as A
    from leirc.lang.checker import check_text
    from leirc.lang.printer import PRETTY, print_module
    from leirc.lower.session import KernelSession
    from leirc.opt import o1, o2

    torch.set_num_threads(threads)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    peak = _sgemm_peak(threads)
    log(f"sgemm peak (torch.mm 2048^3, {threads} threads): {peak:.1f} GFLOP/s; load average {os.getloadavg()}")
    rows = []
    for name, src, flops, tfn, nfn, te_build in _kernels():
        if args.only and not any(s in name for s in args.only):
            continue
        k = check_text(src).results[0].kernel
        variants = {"o0": src}
        t = time.perf_counter()
        variants["o1"] = print_module(A.Module((o1.optimize(k).kernel,)), PRETTY)
        r2 = o2.optimize(k)
        variants["o2"] = print_module(A.Module((r2.kernel,)), PRETTY)
        log(f"{name}: optimized in {time.perf_counter() - t:.1f} s; -O2 {len(r2.steps)} steps")
        sets_np = []
        for s in range(3):
            rng = np.random.default_rng(s)
            sets_np.append([rng.random(tuple(p.shape), dtype=np.float32) for p in k.inputs])
        sets = [{p.name: a for p, a in zip(k.inputs, s)} for s in sets_np]
        timers = {}
        sessions = []
        notes = {}
        for label, text in variants.items():
            sess = KernelSession(text, threads=threads, timeout=600)
            sessions.append(sess)
            probe = sess.time(sets[:1], warmup=0, repeat=1, min_repeat_ms=0)
            if not probe.ok:
                notes[label] = f"{probe.error_kind}: {probe.error}"[:120]
                continue
            if label == "o0" and probe.median_ms > args.skip_o0_above * 1e3:
                notes[label] = f"{probe.median_ms / 1e3:.1f} s per call (timed once)"
                timers[label] = (lambda v=probe.median_ms: v)
                continue
            timers[label] = (lambda s=sess: s.time(sets, warmup=1, repeat=3, min_repeat_ms=50).median_ms)
        tsets = [[torch.from_numpy(a) for a in s] for s in sets_np]
        timers["torch"] = lambda: _time_py(lambda *x: tfn(*x), tsets)
        if nfn is not None:
            timers["numpy"] = lambda: _time_py(nfn, sets_np)
        ms_wall = None
        ms_for = args.ms_kernel or ["gemm512"]
        if args.ms_trials and te_build is not None and ("all" in ms_for or name in ms_for):
            timer, ms_wall = _metaschedule(te_build, args.ms_trials, threads, sets_np,
                                           [list(p.shape) for p in k.outputs], log, args.ms_db)
            if timer is None:
                notes["ms"] = ms_wall
                ms_wall = None
            else:
                timers["ms"] = timer
                if ms_wall is None:
                    notes["ms"] = f"schedule reused from {args.ms_db}"
        samples = {lab: [] for lab in timers}
        for _ in range(args.rounds):
            for lab, fn in timers.items():  # interleaved: one sample of every variant per round
                samples[lab].append(fn())
        for s in sessions:
            s.close()
        row = {"kernel": name, "gflop": flops / 1e9, "ms_tuning_s": ms_wall, "notes": notes}
        for lab, v in samples.items():
            row[lab] = statistics.median(v) if v else None
        rows.append(row)
        log(json.dumps(row))

    cols = ["o0", "o1", "o2", "torch", "numpy", "ms"]

    def f(v):
        return "–" if v is None else (f"{v:.3f}" if v < 10 else f"{v:.1f}")

    print(f"threads {threads}; sgemm peak {peak:.1f} GFLOP/s; load average at the end {os.getloadavg()}")
    print("| kernel | " + " | ".join(f"{c} ms" for c in cols) + " | -O2 GFLOP/s | -O2 % peak | -O2 vs eager | -O2 vs MS |")
    print("|---" * (len(cols) + 5) + "|")
    for r in rows:
        o2ms = r.get("o2")
        gf = r["gflop"] / (o2ms * 1e-3) if o2ms else None
        vs_t = r["torch"] / o2ms if o2ms and r.get("torch") else None
        vs_ms = r["ms"] / o2ms if o2ms and r.get("ms") else None
        print(f"| {r['kernel']} | " + " | ".join(f(r.get(c)) for c in cols)
              + f" | {f(gf)} | {f(100 * gf / peak) if gf else '–'} | {f(vs_t)}× | {f(vs_ms)}× |")
    for r in rows:
        if r["notes"] or r["ms_tuning_s"]:
            print(f"{r['kernel']}: {r['notes']} MetaSchedule tuning {r['ms_tuning_s'] and round(r['ms_tuning_s'])} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"peak_gflops": peak, "threads": threads, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
