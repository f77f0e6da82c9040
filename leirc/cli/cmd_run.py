"""``leirc run KERNEL.leir``: build and run a kernel once in a sandboxed worker
(a :class:`leirc.lower.session.KernelSession`).

Inputs come from ``--inputs in.npz`` (one array per kernel input, by name; repeatable, so an
imported model's saved weights ``model.npz`` combine with a file of runtime inputs); every
input no file gives is drawn at random with ``--seed`` (floats uniform in [0, 1); integer
index tensors within the extents they index) and the command says which. Outputs start as
zeros; ``--out`` writes them to an ``.npz``. A short summary (shape, dtype, min/max/mean)
of each output is printed.
"""

from __future__ import annotations

import sys

from .common import (add_target_argument, DEFAULT_THREADS, CliError, check_or_fail, json_document, non_negative_int, positive_float,
                     positive_int, print_diagnostics, print_json, read_or_fail, require_runnable, write_npz)


def register(sub) -> None:
    p = sub.add_parser("run", help="build and run a kernel in a sandboxed worker process",
                       description="Build and run a LEIR kernel once in a worker process. Exit 0 on success, 1 if the "
                                   "program has errors or the kernel fails (build, crash, timeout, memory), 2 on usage/IO errors.")
    p.add_argument("file", metavar="KERNEL.leir", help="LEIR file ('-' for standard input)")
    p.add_argument("--inputs", metavar="IN.npz", action="append", default=[],
                   help="input arrays by name (repeatable: e.g. an imported model's weights plus runtime inputs); "
                        "inputs no file gives are drawn at random (see --seed)")
    p.add_argument("--out", metavar="OUT.npz", help="write the outputs here")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed for random inputs (default 0)")
    p.add_argument("--kernel", metavar="NAME", help="the kernel to run (required if the file has several)")
    add_target_argument(p, kinds=("llvm", "cuda"), default="llvm", help="llvm (this CPU, default) or cuda (needs a GPU)")
    p.add_argument("--threads", type=positive_int, default=DEFAULT_THREADS, metavar="N",
                   help=f"TVM worker threads (default {DEFAULT_THREADS})")
    p.add_argument("--timeout", type=positive_float, default=120.0, help="seconds before the worker is killed (default 120)")
    p.add_argument("--memory-limit", type=positive_int, default=8192, metavar="MB",
                   help="worker address-space limit (default 8192)")
    p.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    p.set_defaults(func=run)


def load_kernel(path: str, kernel: str | None):
    """(CheckResult, source text, file name, 0); a :class:`CliError` when the file cannot be
    read, has errors, has no kernel or ``kernel`` does not pick one."""
    data = read_or_fail(path)
    name = "<stdin>" if path == "-" else path
    cf = check_or_fail(data, name)
    src = cf.parse.source
    print_diagnostics(cf.diagnostics, src)  # warnings
    results = cf.results
    if kernel is not None:
        results = [r for r in results if r.kernel.name == kernel]
        if not results:
            names = ", ".join(r.kernel.name for r in cf.results)
            raise CliError(f"{name}: no kernel named '{kernel}' (kernels: {names})", 2)
    elif len(results) != 1:
        names = ", ".join(r.kernel.name for r in results)
        raise CliError(f"{name} defines several kernels ({names}); choose one with --kernel", 2)
    return results[0], src, name, 0


def random_inputs(kernel, seed: int) -> dict:
    try:
        from ..interp import random_inputs as interp_random  # the interpreter's generator, if present
    except ImportError:  # pragma: no cover
        interp_random = None
    if interp_random is not None:
        return interp_random(kernel, seed)
    from ..lower.device import make_inputs

    return make_inputs(kernel, seed)


def load_npz_inputs(path: str, kernel):
    """(the arrays of ``path`` that are inputs of ``kernel``, error message)."""
    import zipfile

    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        return None, f"{path}: no such file"
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        return None, f"{path}: cannot read inputs: {e}"
    if not isinstance(arrays, dict):
        return None, f"{path}: not an .npz file of named arrays"
    names = {p.name for p in kernel.inputs}
    unknown = sorted(set(arrays) - names)
    if unknown:
        return None, (f"{path}: array(s) {', '.join(unknown)} are not inputs of kernel '{kernel.name}' "
                      f"(inputs: {', '.join(p.name for p in kernel.inputs)})")
    for p in kernel.inputs:
        if p.name in arrays:
            want = tuple(int(d) for d in p.shape) if all(isinstance(d, int) for d in p.shape) else None
            if want is not None and tuple(arrays[p.name].shape) != want:
                return None, f"{path}: input {p.name} has shape {list(arrays[p.name].shape)}, the kernel declares {list(want)}"
    return arrays, None


def gather_inputs(paths: list, kernel, seed: int) -> tuple[dict, list]:
    """(every input of ``kernel``, the names drawn at random): files first, in order (a
    later file may not redefine an earlier one's array), the rest from ``seed``."""
    given: dict = {}
    for path in paths:
        arrays, err = load_npz_inputs(path, kernel)
        if err:
            raise CliError(err, 2, kind="io")
        twice = sorted(set(arrays) & set(given))
        if twice:
            raise CliError(f"{path}: input(s) {', '.join(twice)} already given by an earlier --inputs file", 2)
        given.update(arrays)
    drawn = [p.name for p in kernel.inputs if p.name not in given]
    if drawn:
        rnd = random_inputs(kernel, seed)
        given.update({n: rnd[n] for n in drawn})
    return {p.name: given[p.name] for p in kernel.inputs}, drawn


def run(args) -> int:
    from ..lower.device import KernelSession, zero_outputs

    require_runnable(args.target)
    res, src, name, _ = load_kernel(args.file, args.kernel)
    kernel = res.kernel
    # inputs are read before the worker starts: a bad file must not cost a build
    inputs, drawn = gather_inputs(args.inputs, kernel, args.seed)
    if drawn and args.inputs:
        print(f"leirc: note: input(s) {', '.join(drawn)} drawn at random (seed {args.seed}): no --inputs file gives "
              "them", file=sys.stderr)
    with KernelSession(src, kernel=kernel.name, target=args.target, threads=args.threads, timeout=args.timeout,
                       memory_limit_mb=args.memory_limit, file=name) as session:
        rr = session.run(inputs, zero_outputs(kernel))
    if not rr.ok:
        raise CliError(f"kernel '{kernel.name}' failed on {args.target} ({rr.error_kind}): {rr.error}", 1,
                       kind=rr.error_kind or "runtime")
    for d in rr.diagnostics:
        print(f"{d['file']}:{d['line']}:{d['col']}: {d['severity']}[{d['code']}]: {d['message']}", file=sys.stderr)
    if args.out:
        write_npz(args.out, rr.outputs)
    summary = {p.name: _summary(p, rr.outputs[p.name]) for p in kernel.outputs}
    if args.json:
        print_json(json_document("run", True, kernel=kernel.name, target=args.target, threads=rr.threads,
                                 build_s=rr.build_s, run_ms=rr.run_s * 1000, inputs_drawn=drawn, outputs=summary,
                                 out=args.out))
    else:
        print(f"kernel {kernel.name}: ran on {args.target} with {rr.threads} thread(s) "
              f"(build {rr.build_s:.2f} s, run {rr.run_s * 1000:.3f} ms)")
        for p in kernel.outputs:
            a = rr.outputs[p.name]
            print(f"  {p.name}: {p.dtype}{list(a.shape)}  {_stats(a)}")
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _summary(p, a) -> dict:
    import numpy as np

    finite = None
    if a.size:
        x = a.astype(np.float64) if a.dtype != np.bool_ else a.astype(np.int64)
        ok = x[np.isfinite(x)]
        finite = {"min": float(ok.min()), "max": float(ok.max()), "mean": float(ok.mean())} if ok.size else None
    return {"dtype": p.dtype, "shape": list(a.shape), "stats": finite,
            "nan": int(np.isnan(a).sum()) if a.dtype.kind == "f" else 0}


def _stats(a) -> str:
    import numpy as np

    if a.size == 0:
        return "(empty)"
    x = a.astype(np.float64) if a.dtype != np.bool_ else a.astype(np.int64)
    return f"min {np.nanmin(x):.6g}  max {np.nanmax(x):.6g}  mean {np.nanmean(x):.6g}" + \
        (f"  nan {int(np.isnan(x).sum())}" if np.isnan(x).any() else "")
