"""``leirc bench KERNEL.leir``: time a kernel in a sandboxed worker.

Protocol (:meth:`leirc.lower.session.KernelSession.time`, as
:func:`leirc.lower.runner.time_kernel`): ``--sets`` random input sets (seeds
``--seed``, ``--seed``+1, ...) with fresh output buffers each, ``--warmup`` calls, then the
median of ``--repeat`` measurements, each lasting at least ``--min-repeat-ms``. The thread
count is explicit: ``--threads``, else ``TVM_NUM_THREADS``, else the number of CPUs.
"""

from __future__ import annotations

import json
import os
import sys

from .common import usage_error


def register(sub) -> None:
    p = sub.add_parser("bench", help="time a kernel (median of repeated runs, rotating inputs)",
                       description="Time a LEIR kernel in a worker process. Exit 0 on success, 1 if the program has "
                                   "errors or the kernel fails, 2 on usage/IO errors.")
    p.add_argument("file", metavar="KERNEL.leir", help="LEIR file ('-' for standard input)")
    p.add_argument("-t", "--target", choices=("llvm",), default="llvm", help="target (llvm)")
    p.add_argument("--threads", type=int, default=None, help="TVM threads (default: TVM_NUM_THREADS, else CPU count)")
    p.add_argument("--repeat", type=int, default=10, help="measurements (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up calls (default 3)")
    p.add_argument("--min-repeat-ms", type=float, default=50.0, help="minimum duration of one measurement (default 50)")
    p.add_argument("--sets", type=int, default=3, help="rotating random input sets (default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first input set (default 0)")
    p.add_argument("--kernel", metavar="NAME", help="the kernel to time (required if the file has several)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before the worker is killed (default 600)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..lower.session import KernelSession
    from .cmd_run import load_kernel, random_inputs

    if args.repeat < 1 or args.sets < 1 or args.warmup < 0:
        return usage_error("--repeat and --sets must be >= 1, --warmup >= 0")
    res, src, name, code = load_kernel(args.file, args.kernel)
    if res is None:
        return code
    kernel = res.kernel
    threads = args.threads
    if threads is None:
        env = os.environ.get("TVM_NUM_THREADS")
        threads = int(env) if env and env.isdigit() else (os.cpu_count() or 1)
    # the worker imports TVM and builds while the input sets are drawn here
    with KernelSession(src, kernel=kernel.name, target=args.target, threads=threads, timeout=args.timeout,
                       file=name) as session:
        sets = [random_inputs(kernel, args.seed + k) for k in range(args.sets)]
        tr = session.time(sets, warmup=args.warmup, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms)
    if args.json:
        d = {"kernel": kernel.name, "ok": tr.ok, "median_ms": tr.median_ms, "min_ms": tr.min_ms, "max_ms": tr.max_ms,
             "std_ms": tr.std_ms, "runs_ms": tr.runs, "calls_per_run": tr.number, "threads": tr.threads,
             "target": tr.target, "input_sets": args.sets, "error": tr.error, "error_kind": tr.error_kind}
        print(json.dumps(d, indent=2))
        return 0 if tr.ok else 1
    if not tr.ok:
        print(f"leirc: error: kernel '{kernel.name}' failed ({tr.error_kind}): {tr.error}", file=sys.stderr)
        return 1
    print(f"{kernel.name}: median {tr.median_ms:.4f} ms  (min {tr.min_ms:.4f}, max {tr.max_ms:.4f}, std {tr.std_ms:.4f}; "
          f"{len(tr.runs)} runs x {tr.number} calls, {args.sets} input sets)  threads {tr.threads}  target {tr.target}")
    return 0
