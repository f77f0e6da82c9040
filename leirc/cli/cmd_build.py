"""``leirc build KERNEL.leir``: compile through TVM (LLVM for the CPU, CUDA C source).

Runs the pipeline of :mod:`leirc.lower.pipeline` (parse, check, lower, build, nvcc) and
writes, per kernel, ``OUTDIR/<kernel>.tir.py`` (TVMScript of the lowered PrimFunc),
``<kernel>.cu`` (CUDA source, ``-t cuda``) and ``<kernel>.so`` (``export_library``).
With ``-t cuda`` the source is compile-checked with ``nvcc -arch=<arch> -ptx`` when nvcc
is installed; a rejection is an error (E052).
"""

from __future__ import annotations

import os
import sys

from .common import print_diagnostics, read_input, usage_error

EMIT_KINDS = ("tir", "cuda", "lib")


def register(sub) -> None:
    p = sub.add_parser("build", help="compile a LEIR kernel through TVM (llvm or cuda)",
                       description="Lower LEIR kernels to TVM TIR and compile them. Exit 0 on success, 1 if the "
                                   "program has errors or does not build, 2 on usage/IO errors.")
    p.add_argument("file", metavar="KERNEL.leir", help="LEIR file ('-' for standard input)")
    p.add_argument("-t", "--target", choices=("llvm", "cuda"), default="llvm", help="llvm (CPU, default) or cuda")
    p.add_argument("-o", "--out-dir", default=".", metavar="OUTDIR", help="output directory (default: .)")
    p.add_argument("--emit", default=None, metavar="KINDS",
                   help="comma-separated outputs among tir, cuda, lib (default: tir,lib for llvm; tir,cuda,lib for cuda)")
    p.add_argument("--arch", default="sm_90", help="CUDA architecture (default: sm_90)")
    p.add_argument("-O", dest="opt", default="0", metavar="LEVEL",
                   help="optimization level: 0 = direct lowering of what you wrote (default), 1 = heuristic "
                        "strategy pipeline (see docs/ARCHITECTURE.md), verified against the original")
    p.add_argument("--print-after", default=None, metavar="PASS",
                   help="print the program after PASS (comma-separated; parse, check, optimize, lower, build, nvcc, verify)")
    p.add_argument("--kernel", default=None, metavar="NAME", help="build only this kernel of the file")
    p.set_defaults(func=run)


def run(args) -> int:
    # --- PyTorch frontend: a KernelBench-format MODEL.py is imported first (leirc/frontend/cli_build.py) ---
    if args.file.endswith(".py"):
        from ..frontend.cli_build import build_py

        return build_py(args)
    # --- end PyTorch frontend ---
    from ..lower.pipeline import OPT_LEVELS, PASS_NAMES, PipelineError, State, UsageError, run_pipeline

    try:
        level = int(args.opt)
    except ValueError:
        return usage_error(f"-O{args.opt}: optimization level must be a number")
    if level not in OPT_LEVELS:
        return usage_error(f"-O{level} is not available: choose -O0 or -O1")
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
        unknown = [p for p in print_after if p not in PASS_NAMES]
        if unknown:
            return usage_error(f"--print-after: unknown pass {', '.join(unknown)} (passes: {', '.join(PASS_NAMES)})")

    data, err = read_input(args.file)
    if err:
        return usage_error(err)
    name = "<stdin>" if args.file == "-" else args.file
    st = State(data, name, args.target, args.arch, args.kernel, level)
    try:
        st = run_pipeline(st, print_after=print_after)
    except UsageError as e:
        return usage_error(str(e))
    except PipelineError as e:
        print_diagnostics(st.diagnostics + e.diagnostics, st.text)
        return 1
    print_diagnostics(st.diagnostics, st.text)
    for n in st.notes:
        print(f"leirc: note: {n}", file=sys.stderr)

    try:
        os.makedirs(args.out_dir, exist_ok=True)
    except OSError as e:
        return usage_error(f"{args.out_dir}: {e.strerror or e}")
    written = []
    try:
        for kname, b in st.built.items():
            base = os.path.join(args.out_dir, kname)
            if "tir" in emit:
                _write_text(base + ".tir.py", b.tir_text)
                written.append(base + ".tir.py")
            if "cuda" in emit and b.cuda_source is not None:
                _write_text(base + ".cu", b.cuda_source)
                written.append(base + ".cu")
            if "lib" in emit:
                tmp = base + ".tmp.so"
                try:
                    b.export_library(tmp)
                except OSError:
                    raise
                except Exception as e:  # noqa: BLE001 - the host C compiler failed
                    return usage_error(f"cannot export {base}.so: {str(e).strip().splitlines()[-1] if str(e).strip() else e}")
                os.replace(tmp, base + ".so")
                written.append(base + ".so")
    except OSError as e:
        return usage_error(f"cannot write output: {e.strerror or e}")
    if st.traces:
        from ..strategies import trace_to_json

        for kname, steps in st.traces.items():
            path = os.path.join(args.out_dir, kname + ".trace.json")
            _write_text(path, trace_to_json(steps, kernel=kname, pipeline="-O1", target=args.target))
            written.append(path)
            if "tir" in emit:
                from ..lang import ast as A
                from ..lang.printer import PRETTY, print_module

                opt = next(r.kernel for r in st.results if r.kernel.name == kname)
                _write_text(os.path.join(args.out_dir, kname + ".O1.leir"), print_module(A.Module((opt,)), PRETTY))
                written.append(os.path.join(args.out_dir, kname + ".O1.leir"))
    for w in written:
        print(f"wrote {w}", file=sys.stderr)
    return 0


def _write_text(path: str, text: str) -> None:
    """Atomic write (temporary file + rename), mode 0644."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
