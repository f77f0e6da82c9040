"""Speed of the streaming math rewrites against the unfused originals (CPU, TVM LLVM).

Kernels are the stdlib development sizes: ``softmax`` (X [256, 24576]) and ``sdpa``
(Q, K, V [2, 4, 128, 256]). Variants:

* softmax: the three-pass original; ``online_softmax`` (max and normalizer in one
  streaming pass, then the division); ``normal_loop_max_to_prefix_max`` (for reference:
  a running-max scan array);
* sdpa: the six-nest original; ``flashattention_wo_tiling`` (one nest per row: scores,
  online softmax and P.V with running rescale); ``online_softmax`` followed by
  ``normal_matmul_to_prefix_matmul_based_on_online_softmax`` (the same fusion in two
  steps, without moving the score producers).

Each variant is timed serial as written and with its outermost row loops parallelized
(``loop_parallelization`` on every nest whose outer loop allows it), so the fused and the
unfused programs get the same parallelism. Timing uses ``leirc.lower.runner.time_kernel``
(worker process, fixed threads, warm-ups, median of ``--repeat`` measurements); with
``--verify`` each variant is first checked against the original with the verifier
(compiled LLVM target against the interpreter; one seed).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 .venv/bin/python benchmarks/bench_math.py

Options: ``--only SUBSTR`` (kernel or variant, repeatable), ``--repeat N``, ``--verify``,
``--json FILE``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from leirc.lang import ast as A  # noqa: E402
from leirc.lang.parser import parse  # noqa: E402
from leirc.lang.printer import print_module  # noqa: E402
from leirc.strategies import NotApplicable, Step, apply_step  # noqa: E402

S = Step.make

VARIANTS = {
    "softmax": [
        ("original", []),
        ("online_softmax", [S("online_softmax", stmt="N0.S0")]),
        ("prefix_max", [S("normal_loop_max_to_prefix_max", stmt="N0.S0")]),
    ],
    "sdpa": [
        ("original", []),
        ("flashattention_wo_tiling", [S("flashattention_wo_tiling", stmt="N2.S0")]),
        ("online_softmax+prefix_matmul", [S("online_softmax", stmt="N2.S0"),
                                          S("normal_matmul_to_prefix_matmul_based_on_online_softmax", stmt="N5.S0")]),
    ],
}


def load(name: str) -> A.Kernel:
    with open(os.path.join(ROOT, "stdlib", f"{name}.leir"), encoding="utf-8") as f:
        r = parse(f.read(), name)
    assert r.ok, r.diagnostics
    return r.module.kernels[0]


def parallelize_rows(k: A.Kernel) -> A.Kernel:
    """``loop_parallelization`` on the outermost loop of every nest where it is legal."""
    for i in range(len(k.body)):
        it = k.body[i]
        if isinstance(it, A.Loop) and it.kind == "L":
            try:
                k = apply_step(k, S("loop_parallelization", loop=f"N{i}.{it.var}"))
            except NotApplicable:
                pass
    return k


def text(k: A.Kernel) -> str:
    return print_module(A.Module((k,)), "pretty")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)

    from leirc.lower.runner import make_inputs, time_kernel

    threads = int(os.environ.get("TVM_NUM_THREADS", "0")) or None
    rows = []
    for kname, variants in VARIANTS.items():
        base = load(kname)
        inputs = [make_inputs(base, seed=s) for s in range(3)]
        base_ms = {}
        for vname, steps in variants:
            if args.only and not any(o in kname or o in vname for o in args.only):
                continue
            k = base
            for st in steps:
                k = apply_step(k, st)
            for par in (False, True):
                kk = parallelize_rows(k) if par else k
                label = vname + (" +P rows" if par else "")
                verdict = ""
                if args.verify:
                    from leirc.verify import verify

                    rep = verify(text(kk), text(base), target="llvm", seeds=(0,), dists=("normal",))
                    verdict = "equal" if rep.equal else "NOT equal"
                t0 = time.perf_counter()
                res = time_kernel(text(kk), inputs, threads=threads, repeat=args.repeat)
                wall = time.perf_counter() - t0
                row = {"kernel": kname, "variant": label, "ok": res.ok, "median_ms": res.median_ms,
                       "min_ms": res.min_ms, "std_ms": res.std_ms, "threads": res.threads, "build_s": res.build_s,
                       "verify": verdict, "error": res.error, "wall_s": round(wall, 1)}
                if res.ok and vname == "original":
                    base_ms[par] = res.median_ms
                ref = base_ms.get(par)
                row["speedup"] = (ref / res.median_ms) if (res.ok and ref) else None
                rows.append(row)
                print(f"  {kname:8} {label:36} {'ok' if res.ok else 'FAILED'} "
                      f"{res.median_ms if res.ok else res.error}", file=sys.stderr, flush=True)
    print("| kernel | variant | median ms | min ms | speedup vs original (same parallelism) |"
          + (" verify |" if args.verify else ""))
    print("|---|---|---:|---:|---:|" + ("---|" if args.verify else ""))
    for r in rows:
        ms = f"{r['median_ms']:.2f}" if r["ok"] else f"failed: {r['error']}"
        mn = f"{r['min_ms']:.2f}" if r["ok"] else ""
        sp = f"{r['speedup']:.2f}×" if r["speedup"] else ""
        print(f"| {r['kernel']} | {r['variant']} | {ms} | {mn} | {sp} |" + (f" {r['verify']} |" if args.verify else ""))
    thr = rows[0]["threads"] if rows else threads
    print(f"\nthreads={thr}, repeat={args.repeat}, inputs: 3 rotating uniform sets; "
          "speedup = original median / variant median, serial vs serial and P vs P")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
