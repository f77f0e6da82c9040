"""``leirc run KERNEL.leir``: build and run a kernel once in a sandboxed worker
(a :class:`leirc.lower.session.KernelSession`).

Inputs come from ``--inputs in.npz`` (one array per kernel input, by name) or are drawn at
random with ``--seed`` (floats uniform in [0, 1); integer index tensors within the extents
they index). Outputs start as zeros; ``--out`` writes them to an ``.npz``. A short
summary (shape, dtype, min/max/mean) of each output is printed.
"""

from __future__ import annotations

import os
import sys

from .common import print_diagnostics, read_input, usage_error


def register(sub) -> None:
    p = sub.add_parser("run", help="build and run a kernel in a sandboxed worker process",
                       description="Build and run a LEIR kernel once in a worker process. Exit 0 on success, 1 if the "
                                   "program has errors or the kernel fails (build, crash, timeout, memory), 2 on usage/IO errors.")
    p.add_argument("file", metavar="KERNEL.leir", help="LEIR file ('-' for standard input)")
    p.add_argument("--inputs", metavar="IN.npz", help="input arrays by name (default: random, see --seed)")
    p.add_argument("--out", metavar="OUT.npz", help="write the outputs here")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    p.add_argument("--kernel", metavar="NAME", help="the kernel to run (required if the file has several)")
    p.add_argument("-t", "--target", choices=("llvm",), default="llvm", help="target (llvm; running CUDA needs a GPU)")
    p.add_argument("--threads", type=int, default=None, help="TVM worker threads (TVM_NUM_THREADS)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before the worker is killed (default 120)")
    p.add_argument("--memory-limit", type=int, default=8192, metavar="MB", help="worker address-space limit (default 8192)")
    p.set_defaults(func=run)


def load_kernel(path: str, kernel: str | None):
    """(CheckResult, source text, file name, exit code) -- exit code non-zero on failure."""
    from ..lang.checker import check_text

    data, err = read_input(path)
    if err:
        return None, None, None, usage_error(err)
    name = "<stdin>" if path == "-" else path
    cf = check_text(data, name)
    src = cf.parse.source
    print_diagnostics(cf.diagnostics, src)
    if not cf.ok:
        return None, src, name, 1
    results = cf.results
    if kernel is not None:
        results = [r for r in results if r.kernel.name == kernel]
        if not results:
            names = ", ".join(r.kernel.name for r in cf.results)
            return None, src, name, usage_error(f"{name}: no kernel named '{kernel}' (kernels: {names})")
    elif len(results) != 1:
        names = ", ".join(r.kernel.name for r in results)
        return None, src, name, usage_error(f"{name} defines several kernels ({names}); choose one with --kernel")
    return results[0], src, name, 0


def random_inputs(kernel, seed: int) -> dict:
    try:
        from ..interp import random_inputs as interp_random  # the interpreter's generator, if present
    except ImportError:  # pragma: no cover
        interp_random = None
    if interp_random is not None:
        return interp_random(kernel, seed)
    from ..lower.runner import make_inputs

    return make_inputs(kernel, seed)


def load_npz_inputs(path: str, kernel):
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        return None, f"{path}: cannot read inputs: {e}"
    missing = [p.name for p in kernel.inputs if p.name not in arrays]
    if missing:
        return None, f"{path}: missing input(s) {', '.join(missing)}"
    return {p.name: arrays[p.name] for p in kernel.inputs}, None


def run(args) -> int:
    import numpy as np

    from ..lower.runner import zero_outputs
    from ..lower.session import KernelSession

    res, src, name, code = load_kernel(args.file, args.kernel)
    if res is None:
        return code
    kernel = res.kernel
    # the worker imports TVM and builds while the inputs are read or drawn here
    with KernelSession(src, kernel=kernel.name, target=args.target, threads=args.threads, timeout=args.timeout,
                       memory_limit_mb=args.memory_limit, file=name) as session:
        if args.inputs:
            inputs, err = load_npz_inputs(args.inputs, kernel)
            if err:
                return usage_error(err)
        else:
            inputs = random_inputs(kernel, args.seed)
        rr = session.run(inputs, zero_outputs(kernel))
    if not rr.ok:
        print(f"leirc: error: kernel '{kernel.name}' failed ({rr.error_kind}): {rr.error}", file=sys.stderr)
        return 1
    for d in rr.diagnostics:
        print(f"{d['file']}:{d['line']}:{d['col']}: {d['severity']}[{d['code']}]: {d['message']}", file=sys.stderr)
    if args.out:
        tmp = args.out + ".tmp.npz"
        try:
            np.savez(tmp, **rr.outputs)
            os.replace(tmp, args.out)
        except OSError as e:
            return usage_error(f"{args.out}: {e.strerror or e}")
    print(f"kernel {kernel.name}: ran on {args.target} with {rr.threads} thread(s) "
          f"(build {rr.build_s:.2f} s, run {rr.run_s * 1000:.3f} ms)")
    for p in kernel.outputs:
        a = rr.outputs[p.name]
        print(f"  {p.name}: {p.dtype}{list(a.shape)}  {_stats(a)}")
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _stats(a) -> str:
    import numpy as np

    if a.size == 0:
        return "(empty)"
    x = a.astype(np.float64) if a.dtype != np.bool_ else a.astype(np.int64)
    return f"min {np.nanmin(x):.6g}  max {np.nanmax(x):.6g}  mean {np.nanmean(x):.6g}" + \
        (f"  nan {int(np.isnan(x).sum())}" if np.isnan(x).any() else "")
