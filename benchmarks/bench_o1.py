"""-O1 against -O0 and PyTorch eager on every stdlib kernel (a benchmark, not a test).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 .venv/bin/python benchmarks/bench_o1.py

Same protocol as bench_build.py: kernels run in the worker process with TVM_NUM_THREADS
threads (2 unless set), 3 rotating input sets, median of --repeat measurements of >= 50 ms;
PyTorch eager with the same thread count. Kernels whose -O0 call takes longer than
--skip-above seconds are timed at -O1 only.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import numpy as np  # noqa: E402

from bench_build import _threads, time_torch, torch_impls  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-above", type=float, default=5.0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    threads = _threads()

    from leirc.lang import ast as A
    from leirc.lang.checker import check_text
    from leirc.lang.printer import PRETTY, print_module
    from leirc.lower.runner import run_kernel, time_kernel, zero_outputs
    from leirc.opt.o1 import optimize

    impls = torch_impls()
    paths = sorted((REPO / "stdlib").glob("*.leir"))
    if args.only:
        paths = [p for p in paths if any(s in p.stem for s in args.only)]
    rows = []
    for path in paths:
        src = path.read_text(encoding="utf-8")
        k = check_text(src, str(path)).results[0].kernel
        opt = optimize(k, "llvm")
        osrc = print_module(A.Module((opt.kernel,)), PRETTY)
        sets = []
        for s in range(3):
            rng = np.random.default_rng(s)
            sets.append({p.name: rng.random(tuple(p.shape), dtype=np.float32) for p in k.inputs})
        row = {"kernel": k.name, "steps": len(opt.steps)}
        for label, text in (("o0", src), ("o1", osrc)):
            probe = run_kernel(text, sets[0], zero_outputs(k), kernel=k.name, threads=threads, timeout=300)
            if not probe.ok:
                row[label] = None
                row[label + "_note"] = f"{probe.error_kind}: {probe.error}"
                continue
            if probe.run_s > args.skip_above:
                row[label] = None
                row[label + "_note"] = f"> {args.skip_above:g} s"
                continue
            tr = time_kernel(text, sets, kernel=k.name, threads=threads, warmup=1, repeat=args.repeat,
                             min_repeat_ms=50, timeout=600)
            row[label] = tr.median_ms if tr.ok else None
        fn = impls.get(path.stem)
        row["torch"] = time_torch(fn, [[s[p.name] for p in k.inputs] for s in sets], threads) if fn else None
        rows.append(row)
        print(row, file=sys.stderr, flush=True)

    def f(v):
        return "–" if v is None else (f"{v:.2f}" if v < 100 else f"{v:.0f}")

    def ratio(a, b):
        return "–" if not a or not b else f"{a / b:.2f}x"

    print(f"\nthreads: TVM_NUM_THREADS={threads}, torch.set_num_threads({threads})\n")
    print("| kernel | -O1 steps | -O0 ms | -O1 ms | torch eager ms | -O1 speedup vs -O0 | -O1 speedup vs eager |")
    print("|---|---|---|---|---|---|---|")
    sp0, spt = [], []
    for r in rows:
        o0 = r.get("o0") if r.get("o0") is not None else None
        o0_txt = f(o0) if o0 is not None else r.get("o0_note", "–")
        print(f"| {r['kernel']} | {r['steps']} | {o0_txt} | {f(r.get('o1'))} | {f(r['torch'])} | "
              f"{ratio(o0, r.get('o1'))} | {ratio(r['torch'], r.get('o1'))} |")
        if o0 and r.get("o1"):
            sp0.append(o0 / r["o1"])
        if r["torch"] and r.get("o1"):
            spt.append(r["torch"] / r["o1"])
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")  # noqa: E731
    print(f"\ngeomean -O1 speedup vs -O0: {gm(sp0):.2f}x over {len(sp0)} kernels; "
          f"vs PyTorch eager: {gm(spt):.2f}x over {len(spt)} kernels "
          f"(faster than eager on {sum(1 for x in spt if x > 1)})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
