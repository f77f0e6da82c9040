"""leirc -O1/-O2 on CUDA side by side with PyTorch eager on CUDA, every stdlib kernel (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_gpu.py [--only softmax] [--levels 1,2,2r] [--kt 16] [--json out.json]

Needs a CUDA device visible to both TVM (``tvm.cuda(0).exist``) and PyTorch
(``torch.cuda.is_available()``); without one it says so and exits with status 2, having
measured nothing. Each kernel is optimized for ``cuda`` at each level, built once (sm_XY of
the device), run once and compared with PyTorch's result (max error relative to max |ref|;
TVM compiles CUDA with fast math, so 1e-3 is the bar, reported not asserted), then timed:
leirc with TVM's ``time_evaluator`` (median of ``--repeat`` measurements of >= 20 ms),
PyTorch with CUDA events over the same protocol. Inputs are U[0, 1) float32 (positive, so
``log``/``sqrt`` domains hold), the same arrays for both sides. The table is markdown:
time per call in microseconds and the speedup of each level over eager. Level ``2`` is -O2
as shipped (GEMM block tiles staged in shared memory, ``--kt`` reduction steps at a time);
``2r`` is -O2 without the shared tiles (``GpuTiles(kt=0)``: each thread streams its operands
from global memory into its register tile), so the two columns show what the shared tiles buy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import numpy as np  # noqa: E402


def _device_problem() -> str | None:
    """Why no measurement can run here (None when a CUDA device is usable by both sides)."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return f"torch.cuda.is_available() is False (torch {torch.__version__})"
    import tvm

    if not tvm.cuda(0).exist:
        return "TVM sees no CUDA device (tvm.cuda(0).exist is False)"
    return None


def _arch() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}"


def _time_torch(fn, args, repeat: int, min_ms: float) -> float:
    import torch

    with torch.no_grad():
        fn(*args)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        per = max(start.elapsed_time(end), 1e-3)
        number = max(1, math.ceil(min_ms / per))
        runs = []
        for _ in range(repeat):
            start.record()
            for _ in range(number):
                fn(*args)
            end.record()
            torch.cuda.synchronize()
            runs.append(start.elapsed_time(end) / number * 1000)  # us
    return statistics.median(runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[], help="kernels whose name contains this (repeatable)")
    ap.add_argument("--levels", default="1,2,2r",
                    help="leirc levels to time: 0 (most nests on one thread: slow), 1, 2, 2r (-O2 without shared tiles)")
    ap.add_argument("--kt", type=int, default=None, help="-O2 GEMM reduction steps per shared tile (default GpuTiles.kt)")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--min-ms", type=float, default=20.0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)

    why = _device_problem()
    if why is not None:
        print(f"bench_gpu: no CUDA device: {why}; nothing was measured", file=sys.stderr)
        return 2
    try:  # TVM compiles the CUDA source when the module loads: NVRTC needs cuda-bindings
        import cuda.bindings  # noqa: F401
    except ImportError:
        os.environ.setdefault("TVM_CUDA_COMPILE_MODE", "nvcc")

    import torch

    from bench_build import torch_impls
    from leirc.lang import ast as A
    from leirc.lang.checker import check_text
    from leirc.lang.printer import PRETTY, print_module
    import tvm

    from leirc.lower import build
    from leirc.opt import o1, o2
    from leirc.opt.o2_cuda import GpuTiles

    dev = tvm.cuda(0)
    arch = _arch()
    levels = [x.strip() for x in args.levels.split(",") if x.strip()]
    shipped = GpuTiles() if args.kt is None else GpuTiles(kt=args.kt)
    variants = {"2": shipped, "2r": GpuTiles(kt=0)}
    bad = [l for l in levels if l not in ("0", "1") and l not in variants]
    if bad:
        print(f"bench_gpu: unknown level(s) {', '.join(bad)} (expected 0, 1, 2, 2r)", file=sys.stderr)
        return 2
    impls = torch_impls()
    paths = sorted((REPO / "stdlib").glob("*.leir"))
    if args.only:
        paths = [p for p in paths if any(s in p.stem for s in args.only)]
    print(f"device: {torch.cuda.get_device_name(0)} ({arch}); torch {torch.__version__}", file=sys.stderr)
    rows = []
    for path in paths:
        src = path.read_text(encoding="utf-8")
        k = check_text(src, str(path)).results[0].kernel
        rng = np.random.default_rng(0)
        inputs = {p.name: rng.random(tuple(p.shape), dtype=np.float32) for p in k.inputs}
        fn = impls.get(path.stem)
        row: dict = {"kernel": k.name}
        ref = None
        if fn is not None:
            targs = [torch.from_numpy(inputs[p.name]).cuda() for p in k.inputs]
            with torch.no_grad():
                out = fn(*targs)
            ref = [t.float().cpu().numpy() for t in (out if isinstance(out, (tuple, list)) else (out,))]
            row["torch_us"] = _time_torch(fn, targs, args.repeat, args.min_ms)
        for level in levels:
            if level == "0":
                text = src
            else:
                opt = (o1.optimize(k, "cuda") if level == "1" else o2.optimize(k, "cuda", gpu=variants[level])).kernel
                text = print_module(A.Module((opt,)), PRETTY)
            try:
                b = build(check_text(text, path.name).results[0], "cuda", cuda_arch=arch)
                outs = b.run(inputs)
            except Exception as e:  # noqa: BLE001 - a row says what failed, the table goes on
                row[f"o{level}_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                continue
            if ref is not None:
                errs = []
                for p, r in zip(k.outputs, ref):
                    got = outs[p.name].reshape(r.shape)
                    errs.append(float(np.max(np.abs(got - r)) / max(float(np.max(np.abs(r))), 1e-30)))
                row[f"o{level}_err"] = max(errs)
            rt = b.jit()
            targs = [tvm.runtime.tensor(inputs[p.name], dev) for p in k.inputs]
            touts = [tvm.runtime.tensor(np.zeros(tuple(p.shape), np.float32), dev) for p in k.outputs]
            timer = rt.time_evaluator(b.symbol, dev, number=1, repeat=args.repeat, min_repeat_ms=args.min_ms)
            row[f"o{level}_us"] = timer(*targs, *touts).median * 1e6
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    def fmt(v):
        return "–" if v is None else (f"{v:.1f}" if v < 1000 else f"{v:.0f}")

    names = {"2": f"-O2 (shared, kt={shipped.kt})", "2r": "-O2 (registers only)"}
    head = "| kernel | eager µs | " + " | ".join(f"{names.get(l, '-O' + l)} µs | ×eager" for l in levels) + " | max rel. err |"
    print(head)
    print("|" + "---|" * (2 + 2 * len(levels) + 1))
    speedups = {l: [] for l in levels}
    for r in rows:
        cells = [r["kernel"], fmt(r.get("torch_us"))]
        for l in levels:
            t = r.get(f"o{l}_us")
            cells.append(fmt(t) if t is not None else r.get(f"o{l}_error", "–")[:40])
            if t and r.get("torch_us"):
                speedups[l].append(r["torch_us"] / t)
                cells.append(f"{r['torch_us'] / t:.2f}")
            else:
                cells.append("–")
        errs = [r[f"o{l}_err"] for l in levels if f"o{l}_err" in r]
        cells.append(f"{max(errs):.1e}" if errs else "–")
        print("| " + " | ".join(cells) + " |")
    for l in levels:
        if speedups[l]:
            geo = math.exp(statistics.mean(math.log(x) for x in speedups[l]))
            print(f"\n{names.get(l, '-O' + l)} geomean vs eager: {geo:.2f}x over {len(speedups[l])} kernels")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
