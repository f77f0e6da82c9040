"""A/B: the -O2 program of stdlib kernels built with and without the FMA fence
(``leirc.lower.tir.FENCE_PRODUCTS``: products feeding ``+``/``-`` are fenced so LLVM cannot
contract ``a*b + c`` into one rounding -- LEIR's semantics rounds twice).

Same process, same inputs, interleaved rounds (A B B A ...), TVM's own timer, 2 threads::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 python benchmarks/ab_fence.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from leirc.interp import random_inputs  # noqa: E402
from leirc.lang.load import load_kernel  # noqa: E402
from leirc.lower import build, tir  # noqa: E402
from leirc.lower._tvm import tvm as _tvm  # noqa: E402
from leirc.measure import load_average, paired_from_medians  # noqa: E402
from leirc.opt import o2  # noqa: E402


def timer(built, feeds, number):
    tvm = _tvm()
    dev = tvm.cpu(0)
    rt = built.jit()
    k = built.signature
    args = [tvm.runtime.tensor(np.ascontiguousarray(feeds[p.name]), dev) for p in k.inputs]
    outs = [tvm.runtime.tensor(np.zeros(tuple(p.shape), np.float32), dev) for p in k.outputs]
    f = rt.time_evaluator(built.symbol, dev, number=number, repeat=1)
    return lambda: f(*args, *outs).mean * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="matmul_square,matmul_standard,gemm_bias_relu,conv2d,batched_matmul")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args(argv)
    print(f"load average at start {load_average()}; TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')}")
    print("| kernel | fenced ms | contracted ms | fenced / contracted | spread |")
    print("|---|--:|--:|--:|--:|")
    for name in args.kernels.split(","):
        r = load_kernel(open(os.path.join(ROOT, "stdlib", f"{name}.leir")).read())
        res = o2.optimize(r.kernel, "llvm", r)
        feeds = random_inputs(res.kernel, 0, "uniform")
        tir.FENCE_PRODUCTS = True
        fenced = build(res.result, "llvm")
        tir.FENCE_PRODUCTS = False
        contracted = build(res.result, "llvm")
        tir.FENCE_PRODUCTS = True
        probe = timer(fenced, feeds, 1)
        probe()
        once = probe()
        number = max(1, int(50.0 / max(once, 1e-3)))
        ta, tb = timer(contracted, feeds, number), timer(fenced, feeds, number)
        ta(), tb()
        a_med, b_med = [], []
        for r_ in range(args.rounds):
            order = ((ta, a_med), (tb, b_med)) if r_ % 2 == 0 else ((tb, b_med), (ta, a_med))
            for fn, acc in order:
                acc.append(fn())
        p = paired_from_medians(a_med, b_med)
        print(f"| {name} | {statistics.median(b_med):.4g} | {statistics.median(a_med):.4g} | "
              f"{p.ratio:.3f} | ±{100 * p.spread:.1f}% |", flush=True)
    print(f"load average at end {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
