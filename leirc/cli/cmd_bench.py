"""``leirc bench KERNEL.leir``: time a kernel in a sandboxed worker.

Protocol (:meth:`leirc.lower.session.KernelSession.time`, as
:func:`leirc.lower.runner.time_kernel`): ``--sets`` random input sets (seeds
``--seed``, ``--seed``+1, ...) with fresh output buffers each, ``--warmup`` calls, then the
median of ``--repeat`` measurements, each lasting at least ``--min-repeat-ms``. The thread
count is explicit: ``--threads`` (default :data:`leirc.cli.common.DEFAULT_THREADS`, the
same for every command), recorded with the result.
"""

from __future__ import annotations

from .common import (add_target_argument, DEFAULT_THREADS, CliError, Progress, json_document, non_negative_int, positive_float,
                     positive_int, print_json, require_runnable)


def register(sub) -> None:
    p = sub.add_parser("bench", help="time a kernel (median of repeated runs, rotating inputs)",
                       description="Time a LEIR kernel in a worker process. Exit 0 on success, 1 if the program has "
                                   "errors or the kernel fails, 2 on usage/IO errors.")
    p.add_argument("file", metavar="KERNEL.leir", help="LEIR file ('-' for standard input)")
    add_target_argument(p, kinds=("llvm", "cuda"), default="llvm", help="llvm (this CPU, default) or cuda (needs a GPU)")
    p.add_argument("--threads", type=positive_int, default=DEFAULT_THREADS, metavar="N",
                   help=f"TVM threads (default {DEFAULT_THREADS}, as every command)")
    p.add_argument("--repeat", type=positive_int, default=10, help="measurements (default 10)")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="warm-up calls (default 3)")
    p.add_argument("--min-repeat-ms", type=positive_float, default=50.0,
                   help="minimum duration of one measurement (default 50)")
    p.add_argument("--sets", type=positive_int, default=3, help="rotating random input sets (default 3)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the first input set (default 0)")
    p.add_argument("--kernel", metavar="NAME", help="the kernel to time (required if the file has several)")
    p.add_argument("--timeout", type=positive_float, default=600.0,
                   help="seconds before the worker is killed (default 600)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..lower.device import KernelSession
    from .cmd_run import load_kernel, random_inputs

    require_runnable(args.target)
    res, src, name, _ = load_kernel(args.file, args.kernel)
    kernel = res.kernel
    progress = Progress(args.quiet)
    progress.stage(f"building {kernel.name} for {args.target} and timing it ({args.repeat} measurements)")
    # the worker imports TVM and builds while the input sets are drawn here
    with KernelSession(src, kernel=kernel.name, target=args.target, threads=args.threads, timeout=args.timeout,
                       file=name) as session:
        sets = [random_inputs(kernel, args.seed + k) for k in range(args.sets)]
        tr = session.time(sets, warmup=args.warmup, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms)
    if not tr.ok:
        raise CliError(f"kernel '{kernel.name}' failed on {args.target} ({tr.error_kind}): {tr.error}", 1,
                       kind=tr.error_kind or "runtime")
    if args.json:
        print_json(json_document(
            "bench", True, kernel=kernel.name, target=tr.target, threads=tr.threads, median_ms=tr.median_ms,
            min_ms=tr.min_ms, max_ms=tr.max_ms, std_ms=tr.std_ms, runs_ms=list(tr.runs), calls_per_run=tr.number,
            input_sets=args.sets, warmup=args.warmup, min_repeat_ms=args.min_repeat_ms, seed=args.seed))
        return 0
    print(f"{kernel.name}: median {tr.median_ms:.4f} ms  (min {tr.min_ms:.4f}, max {tr.max_ms:.4f}, std {tr.std_ms:.4f}; "
          f"{len(tr.runs)} runs x {tr.number} calls, {args.sets} input sets)  threads {tr.threads}  target {tr.target}")
    return 0
