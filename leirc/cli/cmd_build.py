"""``leirc build KERNEL.leir | MODEL.py``: compile through TVM (LLVM for the CPU, CUDA C source).

A client of :mod:`leirc.driver` (the same passes for both kinds of input): flags become
:class:`leirc.driver.BuildOptions`, the driver runs, and this module writes the results.
Per kernel into ``OUTDIR``, named ``<name>`` = the kernel's name when the file is named
after it (``softmax.leir`` defining ``softmax``, or standard input), else
``<file stem>.<kernel>`` (so two files that both define a kernel ``softmax`` do not overwrite
each other's outputs): ``<name>.tir.py`` (TVMScript of the lowered PrimFunc),
``<name>.cu`` (``-t cuda``), ``<name>.so`` (``export_library``); with ``-O1`` also the
optimized program ``<name>.O1.leir`` and its replayable ``<name>.trace.json``.
For ``MODEL.py``: ``<stem>.leir`` (the imported kernel), ``<stem>.npz`` (weights),
``<stem>.so``, ``<stem>_leirc.py`` (a KernelBench-style ``ModelNew`` running the built,
possibly optimized, kernel, found relative to itself), ``<stem>.report.json``, and with
``--emit tir`` ``<stem>.tir.py``.

Stage lines are printed as each pass starts (on a terminal; ``--quiet`` silences them), and
the passes' notes as they come.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from .common import (add_target_argument, DEFAULT_THREADS, CliError, Progress, ensure_dir, json_document, positive_int, print_diagnostics,
                     print_json, read_or_fail, write_npz, write_output)

EMIT_KINDS = ("tir", "cuda", "lib")


def register(sub) -> None:
    p = sub.add_parser("build", help="compile a LEIR kernel or a PyTorch model through TVM (llvm or cuda)",
                       description="Lower LEIR kernels (or a KernelBench-format MODEL.py, imported first) to TVM "
                                   "TIR and compile them. Exit 0 on success, 1 if the program has errors, does not "
                                   "build or does not verify, 2 on usage/IO errors.")
    p.add_argument("file", metavar="KERNEL.leir|MODEL.py", help="LEIR file ('-' for standard input) or model file")
    add_target_argument(p, kinds=("llvm", "cuda"), default="llvm", help="llvm (CPU, default) or cuda")
    p.add_argument("-o", "--out-dir", default=".", metavar="OUTDIR", help="output directory (default: .)")
    p.add_argument("--emit", default=None, metavar="KINDS",
                   help="comma-separated outputs among tir, cuda, lib (default: tir,lib for llvm; tir,cuda,lib for cuda)")
    p.add_argument("--arch", default=None, help="CUDA architecture, with -t cuda (default: sm_90)")
    p.add_argument("-O", dest="opt", default="0", metavar="LEVEL",
                   help="optimization level: 0 = direct lowering of what you wrote (default), 1 = heuristic "
                        "strategy pipeline (see docs/ARCHITECTURE.md), search = verified multi-step search "
                        "(docs/search.md); every optimized result is verified against the original")
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
    p.add_argument("--threads", type=positive_int, default=DEFAULT_THREADS, metavar="N",
                   help=f"threads for runs and timing (default: {DEFAULT_THREADS})")
    p.add_argument("-q", "--quiet", action="store_true", help="no stage lines (the passes' notes are still printed)")
    from ..search.optimizer import add_search_arguments  # light: the search itself is imported when it runs

    add_search_arguments(p)
    from .llmflags import add_cache_arguments

    add_cache_arguments(p)
    p.set_defaults(func=run)


#: what each pass is doing, for the stage line printed as it starts
STAGES = {"load": "loading", "check": "checking", "optimize": "optimizing", "lower": "lowering to TVM TIR",
          "build": "compiling", "nvcc": "compiling the CUDA source with nvcc", "verify": "verifying",
          "time": "timing"}


def run(args) -> int:
    from ..driver import (OPTIMIZERS, PASS_ALIASES, PASS_NAMES, BuildOptions, ModelImportError, PipelineError,
                          UsageError, new_build)

    opt = str(args.opt)
    if opt not in OPTIMIZERS:
        if not opt.isdigit():
            raise CliError(f"-O{opt}: optimization level must be a number or 'search'")
        raise CliError(f"-O{opt} is not available: choose " + " or ".join(f"-O{k}" for k in OPTIMIZERS))
    is_py = args.file.endswith(".py")
    if is_py and args.target == "cuda":
        raise CliError("a PyTorch model (.py) is built for -t llvm only (its verification runs the kernel here)")
    if args.arch is not None and args.target != "cuda":
        raise CliError(f"--arch {args.arch} applies to -t cuda only")
    if is_py and args.kernel is not None:
        raise CliError("--kernel does not apply to a MODEL.py: importing a model makes one kernel")
    emit = args.emit.split(",") if args.emit else (["tir", "cuda", "lib"] if args.target == "cuda" else ["tir", "lib"])
    emit = [e.strip() for e in emit if e.strip()]
    bad = [e for e in emit if e not in EMIT_KINDS]
    if bad:
        raise CliError(f"--emit: unknown output kind(s) {', '.join(bad)} (choose from {', '.join(EMIT_KINDS)})")
    if "cuda" in emit and args.target != "cuda":
        raise CliError("--emit cuda needs -t cuda")
    if is_py and "lib" not in emit:
        raise CliError("a MODEL.py build always writes the library (its ModelNew wrapper loads it): keep 'lib' in --emit")
    print_after = []
    if args.print_after:
        print_after = [p.strip() for p in args.print_after.split(",") if p.strip()]
        unknown = [p for p in print_after if p not in PASS_NAMES and p not in PASS_ALIASES]
        if unknown:
            raise CliError(f"--print-after: unknown pass {', '.join(unknown)} (passes: {', '.join(PASS_NAMES)})")
    # the output directory is checked before any work: a typo must not cost a 40 s build
    ensure_dir(args.out_dir)

    search, search_errors = None, ()
    if opt == "search":
        from ..search.core import SearchError
        from ..search.optimizer import search_options_from_args
        from ..search.store import ConfigMismatch
        from .llmflags import apply_cache_arguments
        from .searchlog import CliSearch

        search_errors = (SearchError, ConfigMismatch)
        try:
            o = search_options_from_args(args, target=args.target, threads=args.threads)
            o = dataclasses.replace(o, llm=apply_cache_arguments(args, o.llm))
            search = CliSearch(o,
                               out_dir=args.out_dir, quiet=args.quiet, json_mode=bool(args.json),
                               stem=lambda kernel: output_stem(args.file, kernel))
        except ValueError as e:
            raise CliError(str(e)) from None
    options = BuildOptions(target=args.target, cuda_arch=args.arch or "sm_90", kernel=args.kernel, opt=opt,
                           verify=args.verify, time=args.time, torch_compile=args.torch_compile, threads=args.threads,
                           search=search)
    progress = Progress(args.quiet)

    if args.file == "-":
        data = sys.stdin.buffer.read()
        _refuse_empty(data, "<stdin>")
        b = new_build(data, file="<stdin>", options=options, log=progress.note)
    else:
        if not os.path.isfile(args.file):
            raise CliError(f"{args.file}: " + ("is a directory" if os.path.isdir(args.file) else "no such file"),
                           kind="io")
        if not is_py:
            _refuse_empty(read_or_fail(args.file), args.file)
        try:
            b = new_build(args.file, options=options, log=progress.note)
        except OSError as e:
            raise CliError(f"{args.file}: {e.strerror or e}", kind="io") from None
    try:
        b = _run_passes(b, print_after, progress)
    except UsageError as e:
        raise CliError(str(e)) from None
    except ModelImportError as e:
        raise CliError(str(e), 1, kind="import") from None
    except search_errors as e:
        raise CliError(str(e), 1, kind="search") from None
    except PipelineError as e:
        diags = b.diagnostics + e.diagnostics
        written: list[str] = []
        if is_py and b.model is not None:
            diags = _cite_imported_kernel(b, diags, args.out_dir, written)
        print_diagnostics(diags, b.text)
        if is_py and b.model is not None:
            print(f"leirc: the diagnostics above are in the kernel imported from {b.model.path} "
                  f"(written to {written[0]})", file=sys.stderr)
            _write_py_outputs(b, args.out_dir, written, failed=True)
        if args.json:
            why = str(e) or (diags[0].message if diags else "the build failed")
            print_json(_json(b, search, written, diags, error=CliError(why, 1, kind="build")))
        return 1
    print_diagnostics(b.diagnostics, b.text)
    if args.target == "cuda":
        _warn_single_thread(b)

    written: list[str] = []
    _write_kernel_outputs(b, args, emit, written)
    if is_py:
        _write_py_outputs(b, args.out_dir, written)
    for w in written:
        print(f"wrote {w}", file=sys.stderr)
    # Ctrl-C stopped a search: the best so far is built and written above, and the command
    # still says it was interrupted (130, as every command does), so a script does not take
    # a cut-short search for a finished one
    stopped = search is not None and search.interrupted
    if args.json:
        error = CliError("interrupted (Ctrl-C): the best so far is kept", 130, kind="interrupted") if stopped else None
        print_json(_json(b, search, written, b.diagnostics, error=error))
    if stopped:
        print("leirc: interrupted: the search's best so far is written", file=sys.stderr)
        return 130
    return 0


def _json(b, search, written: list, diagnostics: list, error=None) -> dict:
    """The ``--json`` document of a build (``schemas/build.json``): what was written, and per
    searched kernel the search's summary (as ``OUTDIR/NAME.search.json``)."""
    kernels = [{"name": j.name, "steps": [s.to_json() for s in j.steps], "optimized": bool(j.optimized)}
               for j in getattr(b, "jobs", None) or [] if getattr(j, "current", None) is not None]
    searches = [r.to_json() for r in search.results] if search is not None else []
    written = list(written) + ([f for files in search.outputs.values() for f in files.values()] if search else [])
    return json_document("build", error is None, error=error, diagnostics=diagnostics, outputs=written,
                         kernels=kernels, searches=searches)


def _cite_imported_kernel(b, diags: list, out_dir: str, written: list) -> list:
    """A MODEL.py build's diagnostics point into the LEIR the import generated, under a
    derived name (``model.leir`` beside the model) that no file has: the kernel is written to
    ``OUTDIR/<stem>.leir`` and the diagnostics name that file, so every line and caret they
    cite can be opened."""
    stem = os.path.splitext(os.path.basename(b.model.path))[0]
    path = os.path.join(out_dir, stem + ".leir")
    write_output(path, _nl(b.model.imported.text))
    written.append(path)
    return [d.with_file(path) if d.file == b.file else d for d in diags]


def _refuse_empty(data: bytes, name: str) -> None:
    """A file with no kernel (empty, or only comments) would "build" nothing and say so with
    exit 0; parsing is cheap next to the passes, so it is refused up front."""
    from ..lang.parser import parse

    pr = parse(data, name)
    if pr.module is not None and all(not k.declared and not k.body for k in pr.module.kernels):
        raise CliError(f"{name}: no kernel in the file (an empty file, or only comments)", 1)


def _run_passes(b, print_after: list, progress: Progress):
    """The driver's pipeline with a stage line as each pass that has work starts, a bar over
    the passes, and ``--print-after`` after each."""
    from ..driver import PASSES, run_pipeline

    # a search draws its own progress line (evaluations/budget, best, ETA): a second bar over
    # the passes under it would only show a meaningless ETA
    passes = Progress(quiet=True) if b.options.opt == "search" else progress
    with passes.bar(total=len(PASSES), desc="build") as bar:
        def on_pass(name, b):
            if _stage_runs(name, b):
                progress.stage(STAGES.get(name, name))

        return run_pipeline(b, print_after=print_after, on_pass=on_pass,
                            after_pass=lambda name, b: bar.update(1, desc=name))


def _stage_runs(name: str, b) -> bool:
    """Whether pass ``name`` has work to do (no stage line for a pass that only returns)."""
    o = b.options
    if name == "optimize":
        return o.opt != "0"
    if name == "nvcc":
        return o.target == "cuda"
    if name == "verify":
        return o.verify is True or (o.verify is None and (b.kind == "py" or o.opt != "0"))
    if name == "time":
        return o.time
    return True


def _warn_single_thread(b) -> None:
    """A CUDA kernel with no B loop is launched as one block of one thread: correct, and
    slower than the CPU. The lowering warns (W051) when B loops are serialized; a kernel
    that never had one gets the same warning here."""
    from ..lang import ast as A

    if any(d.code == "W051" for d in b.diagnostics):
        return
    for j in b.jobs:
        k = j.current.kernel
        if not any(isinstance(n, A.Loop) and n.kind == "B" for n in A.walk(k)):
            line = f"{b.file}:{k.span.line}:{k.span.col}" if k.span else b.file
            print(f"{line}: warning[W051]: on CUDA kernel '{j.name}' runs on a single thread: it has no B loop "
                  "(bind a loop to a GPU axis with loop_binding, or build with -O1)", file=sys.stderr)


def output_name(file: str, kernel: str) -> str:
    """The stem of a kernel's outputs (see the module docstring)."""
    if file in ("-", "<stdin>"):
        return kernel
    stem = os.path.splitext(os.path.basename(file))[0]
    return kernel if stem == kernel else f"{stem}.{kernel}"


def output_stem(file: str, kernel: str) -> str:
    """The stem of a built kernel's files: a ``MODEL.py``'s stem (its one kernel), else
    :func:`output_name`."""
    if file.endswith(".py"):
        return os.path.splitext(os.path.basename(file))[0]
    return output_name(file, kernel)


def _write_kernel_outputs(b, args, emit, written: list) -> None:
    from ..lang.canonical import fingerprint

    for j in b.jobs:
        base = os.path.join(args.out_dir, output_stem(args.file, j.name))
        if "tir" in emit:
            write_output(base + ".tir.py", _nl(j.built.tir_text))
            written.append(base + ".tir.py")
        if "cuda" in emit and j.built.cuda_source is not None:
            write_output(base + ".cu", _nl(j.built.cuda_source))
            written.append(base + ".cu")
        if "lib" in emit:
            _export_library(j.built, base + ".so")
            written.append(base + ".so")
        # an optimizing build always writes its program and trace, also when no step paid
        # off: a script's next command (verify, bench) must find them
        if j.optimized or b.options.opt != "0":
            from ..strategies import trace_to_json

            level = b.options.optimizer().name
            path = base + ".trace.json"
            # a search's trace says which steps are proven and which only tested, and on what
            meta = {}
            if j.searched is not None:
                from ..search.report import trace_meta

                meta["search"] = trace_meta(j.searched)
            write_output(path, _nl(trace_to_json(j.steps, kernel=j.name, pipeline=level, target=args.target,
                                                 fingerprint=fingerprint(j.original.kernel), **meta)))
            written.append(path)
            if "tir" in emit or b.kind == "py":
                path = base + f".{level.lstrip('-')}.leir"
                write_output(path, _nl(j.text()))
                written.append(path)


def _export_library(built, path: str) -> None:
    """``export_library`` into a temporary name beside ``path``, then renamed over it (the
    linker writes the file itself, so it cannot go through the byte writer)."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".leirc-", suffix=".so", dir=directory)
        os.close(fd)
    except OSError as e:
        raise CliError(f"{path}: {e.strerror or e}", kind="io") from None
    try:
        built.export_library(tmp)
        os.chmod(tmp, 0o755 & ~_umask())
        os.replace(tmp, os.path.realpath(path))
    except OSError as e:
        raise CliError(f"{path}: {e.strerror or e}", kind="io") from None
    except Exception as e:  # noqa: BLE001 - the host C compiler failed: its last line says why
        msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise CliError(f"cannot export {path}: {msg}", kind="build") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_py_outputs(b, out_dir: str, written: list, failed: bool = False) -> None:
    """The imported kernel, its weights, the ModelNew wrapper (running the built kernel) and
    the report; on a failed build only the report (so a benchmark row says why)."""
    from ..driver import model_report
    from ..frontend.wrapper import modelnew_source

    ensure_dir(out_dir)
    stem = os.path.splitext(os.path.basename(b.model.path))[0]
    base = os.path.join(out_dir, stem)
    imp = b.model.imported
    if not failed:
        write_output(base + ".leir", _nl(imp.text))
        write_npz(base + ".npz", imp.weights)
        j = b.jobs[0]
        built = dataclasses.replace(imp, text=j.text()) if j.optimized else imp
        write_output(base + "_leirc.py", modelnew_source(b.model.path, built, b.options.target, wrapper_dir=out_dir,
                                                         library=stem + ".so"))
        written += [base + ".leir", base + ".npz", base + "_leirc.py"]
    write_output(base + ".report.json", json.dumps(model_report(b), indent=2) + "\n")
    written.append(base + ".report.json")
    if not failed and b.jobs[0].timing:
        t = b.jobs[0].timing
        if "eager" in t and "leirc" in t:
            rest = f", {t['compile'] / t['leirc']:.3g}x vs torch.compile" if "compile" in t else ""
            print(f"leirc: speedup of leirc {b.options.optimizer().name}: {t['eager'] / t['leirc']:.3g}x vs eager{rest}",
                  file=sys.stderr)


def _nl(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
