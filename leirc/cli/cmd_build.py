"""``leirc build KERNEL.leir | MODEL.py``: compile through TVM (LLVM for the CPU, CUDA C source).

A client of :mod:`leirc.driver` (the same passes for both kinds of input): flags become
:class:`leirc.driver.BuildOptions`, the driver runs, and this module writes the results.
Per kernel into ``OUTDIR``: ``<kernel>.tir.py`` (TVMScript of the lowered PrimFunc),
``<kernel>.cu`` (``-t cuda``), ``<kernel>.so`` (``export_library``); with ``-O1`` also the
optimized program ``<kernel>.O1.leir`` and its replayable ``<kernel>.trace.json``.
For ``MODEL.py``: ``<stem>.leir`` (the imported kernel), ``<stem>.npz`` (weights),
``<stem>.so``, ``<stem>_leirc.py`` (a KernelBench-style ``ModelNew`` running the built,
possibly optimized, kernel) and ``<stem>.report.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from .common import print_diagnostics, usage_error

EMIT_KINDS = ("tir", "cuda", "lib")


def register(sub) -> None:
    p = sub.add_parser("build", help="compile a LEIR kernel or a PyTorch model through TVM (llvm or cuda)",
                       description="Lower LEIR kernels (or a KernelBench-format MODEL.py, imported first) to TVM "
                                   "TIR and compile them. Exit 0 on success, 1 if the program has errors, does not "
                                   "build or does not verify, 2 on usage/IO errors.")
    p.add_argument("file", metavar="KERNEL.leir|MODEL.py", help="LEIR file ('-' for standard input) or model file")
    p.add_argument("-t", "--target", choices=("llvm", "cuda"), default="llvm", help="llvm (CPU, default) or cuda")
    p.add_argument("-o", "--out-dir", default=".", metavar="OUTDIR", help="output directory (default: .)")
    p.add_argument("--emit", default=None, metavar="KINDS",
                   help="comma-separated outputs among tir, cuda, lib (default: tir,lib for llvm; tir,cuda,lib for cuda)")
    p.add_argument("--arch", default="sm_90", help="CUDA architecture (default: sm_90)")
    p.add_argument("-O", dest="opt", default="0", metavar="LEVEL",
                   help="optimization level: 0 = direct lowering of what you wrote (default), 1 = heuristic "
                        "strategy pipeline (see docs/ARCHITECTURE.md), verified against the original")
    p.add_argument("--print-after", default=None, metavar="PASS",
                   help="print the program after PASS (comma-separated; load, check, optimize, lower, build, nvcc, "
                        "verify, time; 'parse' is an alias of load)")
    p.add_argument("--kernel", default=None, metavar="NAME", help="build only this kernel of the file")
    v = p.add_mutually_exclusive_group()
    v.add_argument("--verify", dest="verify", action="store_true", default=None,
                   help="verify even at -O0 (default: verify optimized kernels and PyTorch models)")
    v.add_argument("--no-verify", dest="verify", action="store_false", help="skip the verify pass")
    p.add_argument("--time", action="store_true",
                   help="time the built kernel (for MODEL.py side by side with PyTorch eager)")
    p.add_argument("--torch-compile", action="store_true", help="with --time on MODEL.py: also time torch.compile")
    p.add_argument("--threads", type=int, default=2, metavar="N", help="threads for runs and timing (default: 2)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..driver import (OPTIMIZERS, PASS_ALIASES, PASS_NAMES, BuildOptions, ModelImportError, PipelineError, UsageError, new_build,
                          run_pipeline)

    opt = str(args.opt)
    if opt not in OPTIMIZERS:
        if not opt.isdigit():
            return usage_error(f"-O{opt}: optimization level must be a number")
        return usage_error(f"-O{opt} is not available: choose " + " or ".join(f"-O{k}" for k in OPTIMIZERS))
    if args.threads < 1:
        return usage_error(f"--threads {args.threads}: must be at least 1")
    is_py = args.file.endswith(".py")
    if is_py and args.target != "llvm":
        return usage_error("a PyTorch model (.py) is built for -t llvm only (its verification runs the kernel here)")
    emit = args.emit.split(",") if args.emit else (["tir", "lib"] if args.target == "llvm" else ["tir", "cuda", "lib"])
    emit = [e.strip() for e in emit if e.strip()]
    bad = [e for e in emit if e not in EMIT_KINDS]
    if bad:
        return usage_error(f"--emit: unknown output kind(s) {', '.join(bad)} (choose from {', '.join(EMIT_KINDS)})")
    if "cuda" in emit and args.target != "cuda":
        return usage_error("--emit cuda needs -t cuda")
    print_after = []
    if args.print_after:
        print_after = [p.strip() for p in args.print_after.split(",") if p.strip()]
        unknown = [p for p in print_after if p not in PASS_NAMES and p not in PASS_ALIASES]
        if unknown:
            return usage_error(f"--print-after: unknown pass {', '.join(unknown)} (passes: {', '.join(PASS_NAMES)})")

    options = BuildOptions(target=args.target, cuda_arch=args.arch, kernel=args.kernel, opt=opt, verify=args.verify,
                           time=args.time, torch_compile=args.torch_compile, threads=args.threads)

    def log(msg):
        print(f"leirc: {msg}", file=sys.stderr, flush=True)

    if args.file == "-":
        b = new_build(sys.stdin.buffer.read(), file="<stdin>", options=options, log=log)
    else:
        if not os.path.isfile(args.file):
            return usage_error(f"{args.file}: " + ("is a directory" if os.path.isdir(args.file) else "no such file"))
        try:
            b = new_build(args.file, options=options, log=log)
        except OSError as e:
            return usage_error(f"{args.file}: {e.strerror or e}")
    try:
        b = run_pipeline(b, print_after=print_after)
    except UsageError as e:
        return usage_error(str(e))
    except ModelImportError as e:
        print(f"leirc: error: {e}", file=sys.stderr)
        return 1
    except PipelineError as e:
        print_diagnostics(b.diagnostics + e.diagnostics, b.text)
        if is_py and b.model is not None:
            _write_py_outputs(b, args.out_dir, [], failed=True)
        return 1
    print_diagnostics(b.diagnostics, b.text)

    try:
        os.makedirs(args.out_dir, exist_ok=True)
    except OSError as e:
        return usage_error(f"{args.out_dir}: {e.strerror or e}")
    written: list[str] = []
    try:
        rc = _write_kernel_outputs(b, args, emit, written)
        if rc:
            return rc
        if is_py:
            _write_py_outputs(b, args.out_dir, written)
    except OSError as e:
        return usage_error(f"cannot write output: {e.strerror or e}")
    for w in written:
        print(f"wrote {w}", file=sys.stderr)
    return 0


def _write_kernel_outputs(b, args, emit, written: list) -> int:
    from ..io import write_atomic

    stem = os.path.splitext(os.path.basename(args.file))[0] if b.kind == "py" else None
    for j in b.jobs:
        base = os.path.join(args.out_dir, stem or j.name)
        if "tir" in emit and b.kind != "py":
            write_atomic(base + ".tir.py", _nl(j.built.tir_text))
            written.append(base + ".tir.py")
        if "cuda" in emit and j.built.cuda_source is not None:
            write_atomic(base + ".cu", _nl(j.built.cuda_source))
            written.append(base + ".cu")
        if "lib" in emit:
            tmp = base + ".tmp.so"
            try:
                j.built.export_library(tmp)
            except OSError:
                raise
            except Exception as e:  # noqa: BLE001 - the host C compiler failed
                msg = str(e).strip().splitlines()[-1] if str(e).strip() else e
                return usage_error(f"cannot export {base}.so: {msg}")
            os.replace(tmp, base + ".so")
            written.append(base + ".so")
        if j.optimized:
            from ..strategies import trace_to_json

            level = b.options.optimizer().name
            path = base + ".trace.json"
            write_atomic(path, _nl(trace_to_json(j.steps, kernel=j.name, pipeline=level, target=args.target)))
            written.append(path)
            if "tir" in emit or b.kind == "py":
                path = base + f".{level.lstrip('-')}.leir"
                write_atomic(path, _nl(j.text()))
                written.append(path)
    return 0


def _write_py_outputs(b, out_dir: str, written: list, failed: bool = False) -> None:
    """The imported kernel, its weights, the ModelNew wrapper (running the built kernel) and
    the report; on a failed build only the report (so a benchmark row says why)."""
    from ..driver import model_report
    from ..frontend.wrapper import modelnew_source
    from ..io import save_npz, write_atomic

    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(b.model.path))[0]
    base = os.path.join(out_dir, stem)
    imp = b.model.imported
    if not failed:
        write_atomic(base + ".leir", _nl(imp.text))
        save_npz(base + ".npz", imp.weights)
        j = b.jobs[0]
        built = dataclasses.replace(imp, text=j.text()) if j.optimized else imp
        write_atomic(base + "_leirc.py", modelnew_source(b.model.path, built, b.options.target))
        written += [base + ".leir", base + ".npz", base + "_leirc.py"]
    write_atomic(base + ".report.json", json.dumps(model_report(b), indent=2) + "\n")
    written.append(base + ".report.json")
    if not failed and b.jobs[0].timing:
        t = b.jobs[0].timing
        if "eager" in t and "leirc" in t:
            rest = f", {t['compile'] / t['leirc']:.3g}x vs torch.compile" if "compile" in t else ""
            print(f"leirc: speedup of leirc {b.options.optimizer().name}: {t['eager'] / t['leirc']:.3g}x vs eager{rest}",
                  file=sys.stderr)


def _nl(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
