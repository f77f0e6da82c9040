"""``leirc verify KERNEL.leir [OTHER.leir]``: differential verification against the interpreter.

Exit 0 if the candidate is equal to the reference on every run, 1 if not (or if a program
has errors; the diagnostics are printed as by ``leirc check``), 2 on usage or I/O errors
(bad option values, a file without a kernel to verify).
"""

from __future__ import annotations

import math
import sys

from ..lang.checker import check_text
from .common import (add_target_argument, DEFAULT_THREADS, CliError, Progress, json_document, positive_int, print_diagnostics, print_json,
                     read_input, require_runnable)


def register(sub) -> None:
    p = sub.add_parser(
        "verify", help="check a kernel (compiled, or another program) against the reference interpreter",
        description="Run KERNEL (compiled for the target, or interpreted with -t interp) on random inputs "
                    "(several seeds x distributions, plus probe runs with large, mixed-scale and special values) "
                    "and compare its outputs with the reference interpreter's outputs of OTHER (default: KERNEL "
                    "itself). Exit 0 if equal, 1 if not or on program errors, 2 on usage/IO errors.")
    p.add_argument("kernel_file", metavar="KERNEL.leir", help="candidate program ('-' for standard input)")
    p.add_argument("other", nargs="?", metavar="OTHER.leir", help="reference program with the same signature")
    p.add_argument("--kernel", metavar="NAME", help="kernel to verify when a file defines several")
    p.add_argument("--seeds", default="0,1,2", metavar="LIST",
                   help="comma-separated non-negative input seeds (default 0,1,2)")
    p.add_argument("--dists", default=None, metavar="LIST",
                   help="comma-separated grid distributions: uniform normal signed large small logits mixed zeros "
                        "special range branches (default uniform,normal,signed)")
    p.add_argument("--probes", default=None, metavar="LIST",
                   help="comma-separated probe distributions run once on the first seed, or 'none' (default "
                        "logits,mixed,special,range,branches when --dists is not given, else none)")
    p.add_argument("--domain", action="append", default=[], metavar="NAME=LO,HI",
                   help="draw float input NAME inside the open interval (LO, HI) instead of its inferred domain "
                        "(repeatable; LO/HI may be -inf/inf)")
    p.add_argument("--oracle", default="vectorized", choices=("vectorized", "literal"),
                   help="reference interpreter mode: vectorized (default) or literal (loop by loop, the "
                        "semantics itself; slow, for small kernels)")
    add_target_argument(p, kinds=("llvm", "cuda", "interp"), default="llvm", help="llvm (compile with TVM for the CPU, default), cuda (needs a GPU; `leirc build -t cuda` "
                        "compiles without one), or interp (interpret the candidate)")
    p.add_argument("--threads", type=positive_int, default=DEFAULT_THREADS, metavar="N",
                   help=f"threads of the compiled candidate (default {DEFAULT_THREADS})")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--rtol", default=None, metavar="X",
                   help="elementwise relative tolerance (default by dtype; giving --rtol or --norm-tol replaces the "
                        "arithmetic error bound by the flat rule)")
    p.add_argument("--norm-tol", default=None, metavar="X", help="normwise relative tolerance (default by dtype)")
    p.add_argument("--timeout", default="120", metavar="SECONDS", help="seconds per candidate run (default 120)")
    p.add_argument("--json", action="store_true", help="print the verification report as JSON")
    p.set_defaults(func=run)


def _list(text: str, conv, what: str):
    try:
        items = [conv(x.strip()) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"bad {what} list {text!r}") from None
    if not items:
        raise ValueError(f"empty {what} list")
    return items


def _seed(text: str) -> int:
    v = int(text)  # ValueError for 1.5, x
    if v < 0:
        raise ValueError(text)
    return v


def _number(text, what: str, positive: bool = False):
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise ValueError(f"{what} must be a finite {'positive' if positive else 'non-negative'} number, got {text!r}")
    return v


def _domains(specs) -> dict:
    out = {}
    for spec in specs:
        name, eq, rng = spec.partition("=")
        parts = rng.split(",")
        try:
            if not eq or not name.strip() or len(parts) != 2:
                raise ValueError
            lo, hi = float(parts[0]), float(parts[1])
        except ValueError:
            raise ValueError(f"bad --domain {spec!r} (expected NAME=LO,HI, e.g. X=0,inf)") from None
        if math.isnan(lo) or math.isnan(hi) or not lo < hi:
            raise ValueError(f"bad --domain {spec!r}: need LO < HI")
        out[name.strip()] = (lo, hi)
    return out


#: the error measures of a report: null when no run compared anything (never a 0.0 that
#: reads as "no error")
ERROR_FIELDS = ("max_abs_err", "max_rel_err", "norm_rel_err")


def report_json(rep) -> dict:
    """The fields of ``verify --json`` (``schemas/verify.json``) from a VerifyReport."""
    d = rep.to_json()
    if not rep.runs:
        for k in ERROR_FIELDS:
            d[k] = None
    return d


def _g(x) -> str:
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def run(args) -> int:
    from ..interp.inputs import DISTS

    try:
        try:
            seeds = _list(args.seeds, _seed, "seed")
        except ValueError:
            raise ValueError(f"bad seed list {args.seeds!r}: seeds are non-negative integers") from None
        dists = None if args.dists is None else _list(args.dists, str, "distribution")
        if args.probes is None:
            probes = None
        elif args.probes.strip().lower() == "none":
            probes = []
        else:
            probes = _list(args.probes, str, "probe")
        rtol = _number(args.rtol, "--rtol")
        norm_tol = _number(args.norm_tol, "--norm-tol")
        timeout = _number(args.timeout, "--timeout", positive=True)
        domains = _domains(args.domain)
    except ValueError as e:
        raise CliError(str(e), 2) from None
    bad = [d for d in (dists or []) + (probes or []) if d not in DISTS]
    if bad:
        raise CliError(f"unknown distribution(s) {', '.join(bad)} (expected {', '.join(DISTS)})", 2)
    if args.kernel_file == "-" and args.other == "-":
        raise CliError("only one program can come from standard input", 2)
    texts = []
    for path in [args.kernel_file] + ([args.other] if args.other else []):
        data, err = read_input(path)
        if err:
            raise CliError(err, 2, kind="io")
        texts.append((path, data))
    if args.target == "interp":
        return _verify(args, texts, seeds, dists, probes, rtol, norm_tol, timeout, domains, None)
    # The worker's start (importing TVM) is the longest part of a verification: start it
    # before anything else, so that it runs while this process checks the programs and
    # computes the reference outputs. Programs with errors only cost a worker killed early.
    from ..lower.device import WorkerPool, needs_ml_dtypes

    with WorkerPool(0) as pool:
        pool.warm(threads=args.threads, ml_dtypes=needs_ml_dtypes(texts[0][1]))
        return _verify(args, texts, seeds, dists, probes, rtol, norm_tol, timeout, domains, pool)


def _verify(args, texts, seeds, dists, probes, rtol, norm_tol, timeout, domains, pool) -> int:
    from ..verify import verify

    sources = []
    for path, data in texts:
        name = "<stdin>" if path == "-" else path
        cf = check_text(data, name)
        diags = cf.diagnostics
        if not cf.ok:
            raise CliError(None, 1, kind="diagnostics", diagnostics=diags, source=cf.parse.source)
        print_diagnostics(diags, cf.parse.source)  # warnings
        names = [r.kernel.name for r in cf.results]
        if args.kernel and args.kernel not in names and (path == args.kernel_file or len(names) > 1):
            raise CliError(f"{name}: no kernel named '{args.kernel}' (it defines {', '.join(names) or 'none'})", 2)
        if not args.kernel and len(names) > 1 and path == args.kernel_file:
            raise CliError(f"{name} defines {len(names)} kernels ({', '.join(names)}); choose one with --kernel", 2)
        # an empty file (or one with only comments or an empty kernel) has nothing to
        # compare: verifying it would be a vacuous EQUAL
        chosen = [r for r in cf.results if args.kernel is None or r.kernel.name == args.kernel] or cf.results
        if not chosen or not chosen[0].kernel.outputs:
            raise CliError(f"{name}: no kernel to verify", 2)
        sources.append(cf.parse.source)
    # checked before any build: a machine without the device gets a pointer, not a verdict
    require_runnable(args.target)
    reference = sources[1] if len(sources) > 1 else None
    progress = Progress(args.quiet or args.json)
    what = "interpreting" if args.target == "interp" else f"building for {args.target} and running"
    progress.stage(f"verify: {what} the candidate on seeds {','.join(map(str, seeds))} against the reference "
                   "interpreter")
    if args.target == "interp":
        with progress.bar(total=0, desc="verify") as bar:
            rep = verify(sources[0], reference, kernel=args.kernel, seeds=seeds, dists=dists, probes=probes,
                         domains=domains or None, oracle=args.oracle, target="interp", rtol=rtol,
                         norm_tol=norm_tol, timeout=timeout, coverage=True,
                         progress=lambda done, planned, label: bar.update(1, desc=label, total=planned))
    else:
        # the engine's door: one sandboxed session builds the candidate once for every run
        from ..engine.evaluate import Evaluator

        opts = {"probes": probes, "domains": domains or None, "oracle": args.oracle, "coverage": True}
        with Evaluator(args.target, seeds=seeds, dists=dists, time=False, rtol=rtol, norm_tol=norm_tol,
                       timeout=timeout, pool=pool, verify_options=opts, threads=args.threads) as ev, \
                progress.bar(total=0, desc="verify") as bar:
            def on_run(done, planned, label):
                bar.update(1, desc=label, total=planned)

            ev.progress = on_run
            e = ev.evaluate(sources[0], kernel=args.kernel, reference=reference)
        rep = e.verify
        if rep is None:  # the candidate did not build or run: an error, not a numerical verdict
            raise CliError(f"{args.kernel_file}: {e.error_kind or 'error'} on {args.target}: {e.error}", 1,
                           kind=e.error_kind or "runtime")
    for w in getattr(rep, "warnings", ()):  # a branch never taken: said, not a failure
        print(f"leirc: warning: {w}", file=sys.stderr)
    if args.json:
        print_json(json_document("verify", rep.equal, **report_json(rep)))
        return 130 if rep.interrupted else (0 if rep.equal else 1)
    verdict = "EQUAL" + (" (bitwise identical)" if rep.bitwise else "") if rep.equal else "NOT EQUAL"
    print(f"{rep.candidate or args.kernel_file} vs {rep.reference or 'reference'}: {verdict}")
    probe_txt = f" + {rep.probe_runs} probe run(s): {','.join(rep.probes)}" if rep.probes else ""
    print(f"  {rep.runs} run(s): seeds {','.join(map(str, rep.seeds))} x {','.join(rep.dists)}{probe_txt}; "
          f"{rep.seconds:.1f} s")
    if rep.seeds_skipped:
        print(f"  seeds skipped (each run already checked {rep.min_samples} or more output "
              f"elements of its distribution): {', '.join(rep.seeds_skipped)}")
    print(f"  max abs err {_g(rep.max_abs_err)}, max rel err {_g(rep.max_rel_err)}, "
          f"normwise rel err {_g(rep.norm_rel_err)}; tolerance {rep.tolerance or 'n/a'}; oracle {rep.oracle}")
    for n, d in rep.domains.items():
        print(f"  input {n} drawn in {d}")
    for note in getattr(rep, "probe_notes", ()):
        print(f"  note: {note}")
    cov = getattr(rep, "branch_coverage", ())
    if cov:
        both = sum(1 for c in cov if c["measured"] and c["true"] and c["false"])
        measured = sum(1 for c in cov if c["measured"])
        print(f"  branch coverage: {both} of {measured} measured comparison(s) took both outcomes "
              f"({len(cov) - measured} not measured)")
    for name, p in rep.per_output.items():
        print(f"  output {name}: {'ok' if p['ok'] else 'FAIL'}{', bitwise' if p['bitwise'] else ''}; "
              f"max abs {_g(p['max_abs_err'])}, normwise {_g(p['norm_rel_err'])}")
    if rep.failures:
        print("  failures:")
        for f in rep.failures:
            print(f"    - {f}")
    if rep.interrupted:
        print("leirc: interrupted (the report covers the runs made so far)", file=sys.stderr)
        return 130
    return 0 if rep.equal else 1
