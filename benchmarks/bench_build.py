"""Build and -O0 run time of every stdlib kernel, with PyTorch eager and the reference
interpreter for scale (a benchmark, not a test).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 .venv/bin/python benchmarks/bench_build.py

Columns:

* **build ms**: ``leirc.lower.build`` (lower + ``tvm.compile`` for llvm) plus the first
  function lookup, which is where LLVM generates machine code; median of 5 builds, in this
  process (TVM already imported).
* **-O0 ms**: the direct lowering run with ``leirc.lower.runner.time_kernel`` (worker
  process, ``TVM_NUM_THREADS`` threads -- 2 unless set --, 3 rotating input sets, 1
  warm-up, median of ``--repeat`` measurements of >= 50 ms). A probe run first measures
  one call; kernels whose call takes longer than ``--skip-above`` seconds (20) are not
  timed (shown as ``> 20 s``).
* **torch ms**: the same computation in PyTorch eager (``torch.set_num_threads`` = the
  same thread count), median of perf_counter loops after warm-up.
* **interp ms**: ``leirc.interp.run`` (NumPy oracle), median of 3 runs (if present).

Options: ``--only SUBSTR`` (repeatable), ``--repeat N`` (default 5), ``--json FILE``.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402


def _threads() -> int:
    env = os.environ.get("TVM_NUM_THREADS")
    return int(env) if env and env.isdigit() else 2


# ---------------------------------------------------------------------------
# PyTorch eager versions (inputs in declared order -> outputs in declared order)


def torch_impls():
    import torch
    import torch.nn.functional as F

    def softmax(x):
        return torch.softmax(x, 1)

    def groupnorm(x, w, b):
        return F.group_norm(x, 8, w, b, eps=1e-5)

    def layernorm(x, w, b):
        return F.layer_norm(x, x.shape[1:], w, b, eps=1e-5)

    return {
        "batched_matmul": lambda A, B: torch.bmm(A, B),
        "conv2d": lambda X, W: F.conv2d(X, W, padding=1),
        "conv2d_strided_dilated": lambda X, W: F.conv2d(X, W, stride=2, padding=2, dilation=2),
        "conv_transpose2d": lambda X, W: F.conv_transpose2d(X, W),
        "cumsum": lambda X: torch.cumsum(X, 1),
        "depthwise_conv2d": lambda X, W: F.conv2d(X, W, groups=X.shape[1]),
        "gelu": lambda X: F.gelu(X),
        "gemm_bias_relu": lambda X, W, Bias: torch.relu(X @ W.T + Bias),
        "gemv": lambda A, X: torch.mv(A, X),
        "groupnorm": groupnorm,
        "layernorm": layernorm,
        "log_softmax": lambda X: torch.log_softmax(X, 1),
        "matmul_gelu_softmax": lambda X, W, Bias: torch.softmax(F.gelu(X @ W.T + Bias), 1),
        "matmul_irregular": lambda A, B: A @ B,
        "matmul_square": lambda A, B: A @ B,
        "matmul_standard": lambda A, B: A @ B,
        "matmul_transposed_b": lambda A, B: A @ B.T,
        "matmul_upper_triangular": lambda A, B: torch.triu(torch.triu(A) @ torch.triu(B)),
        "max_reduce_dim1": lambda X: X.max(1).values,
        "maxpool2d": lambda X: F.max_pool2d(X, 4, stride=1, padding=1),
        "mean_reduce_dim1": lambda X: X.mean(1),
        "mse_loss": lambda A, B: F.mse_loss(A, B),
        "pointwise_conv2d": lambda X, W: F.conv2d(X, W),
        "relu": lambda X: torch.relu(X),
        "rmsnorm": lambda X: X / torch.sqrt((X ** 2).mean(1, keepdim=True) + 1e-5),
        "sdpa": lambda Q, K, V: F.scaled_dot_product_attention(Q, K, V),
        "softmax": softmax,
        "sum_reduce_dim1": lambda X: X.sum(1, keepdim=True),
    }


def time_torch(fn, input_sets, threads: int, repeat: int = 10, min_ms: float = 50.0) -> float:
    import torch

    torch.set_num_threads(threads)
    sets = [[torch.from_numpy(a) for a in s] for s in input_sets]
    with torch.no_grad():
        for s in sets:
            fn(*s)
        t0 = time.perf_counter()
        fn(*sets[0])
        per = max(time.perf_counter() - t0, 1e-7)
        number = max(1, math.ceil(min_ms / 1000 / per))
        runs = []
        k = 0
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                fn(*sets[k % len(sets)])
                k += 1
            runs.append((time.perf_counter() - t0) / number * 1000)
    return statistics.median(runs)


# ---------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[], help="run kernels whose name contains SUBSTR")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-above", type=float, default=20.0, help="do not time kernels slower than this (s/call)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    threads = _threads()

    from leirc.lang.checker import check_text
    from leirc.lower import build
    from leirc.lower.runner import run_kernel, time_kernel, zero_outputs

    try:
        import leirc.interp as interp
    except ImportError:  # pragma: no cover
        interp = None
    impls = torch_impls()

    paths = sorted((REPO / "stdlib").glob("*.leir"))
    if args.only:
        paths = [p for p in paths if any(s in p.stem for s in args.only)]
    rows = []
    for path in paths:
        src = path.read_text(encoding="utf-8")
        r = check_text(src, str(path)).results[0]
        k = r.kernel
        row = {"kernel": k.name}
        # build time
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            b = build(r, "llvm")
            b.jit()[b.symbol]
            ts.append((time.perf_counter() - t0) * 1000)
        row["build_ms"] = statistics.median(ts)
        # inputs
        sets = []
        for s in range(3):
            rng = np.random.default_rng(s)
            sets.append({p.name: rng.random(tuple(p.shape), dtype=np.float32) for p in k.inputs})
        # probe, then time
        probe = run_kernel(src, sets[0], zero_outputs(k), kernel=k.name, threads=threads,
                           timeout=max(120.0, args.skip_above * 4), file=str(path))
        row["probe_s"] = probe.run_s
        if not probe.ok:
            row["o0_ms"] = None
            row["note"] = f"{probe.error_kind}: {probe.error}"
        elif probe.run_s > args.skip_above:
            row["o0_ms"] = None
            row["note"] = f"> {args.skip_above:g} s per call, not timed"
        else:
            tr = time_kernel(src, sets, kernel=k.name, threads=threads, warmup=1, repeat=args.repeat,
                             min_repeat_ms=50, timeout=600, file=str(path))
            row["o0_ms"] = tr.median_ms if tr.ok else None
            row["o0_std_ms"] = tr.std_ms
            row["threads"] = tr.threads
            if not tr.ok:
                row["note"] = f"{tr.error_kind}: {tr.error}"
        # torch eager
        fn = impls.get(path.stem)
        row["torch_ms"] = None
        if fn is not None:
            row["torch_ms"] = time_torch(fn, [[s[p.name] for p in k.inputs] for s in sets], threads)
        # interpreter
        row["interp_ms"] = None
        if interp is not None:
            its = []
            for _ in range(3):
                t0 = time.perf_counter()
                interp.run(r, sets[0])
                its.append((time.perf_counter() - t0) * 1000)
                if its[-1] > 20000:
                    break
            row["interp_ms"] = statistics.median(its)
        rows.append(row)
        print(f"{k.name}: {row}", file=sys.stderr, flush=True)

    def _ratio(x):
        if not x:
            return "–"
        return f"{x:.0f}x" if x >= 10 else f"{x:.2g}x"

    def fmt(v, digits=2):
        if v is None:
            return "–"
        return f"{v:.{digits}f}" if v < 100 else f"{v:.0f}"

    print(f"\nthreads: TVM_NUM_THREADS={threads}, torch.set_num_threads({threads}); "
          f"cpu: {os.cpu_count()} logical\n")
    print("| kernel | build ms (median of 5) | -O0 run ms | torch eager ms | -O0 / torch | interp ms |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        o0 = row.get("o0_ms")
        ratio = (o0 / row["torch_ms"]) if (o0 and row.get("torch_ms")) else None
        o0_text = fmt(o0) if o0 is not None else (row.get("note", "–").split("\n")[0])
        print(f"| {row['kernel']} | {fmt(row['build_ms'], 0)} | {o0_text} | {fmt(row['torch_ms'], 3)} | "
              f"{_ratio(ratio)} | {fmt(row['interp_ms'], 1)} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": threads, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
