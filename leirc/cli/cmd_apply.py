"""``leirc apply KERNEL.leir STRATEGY --at SITE [--arg k=v ...]`` and
``leirc apply KERNEL.leir --trace trace.json``: apply strategies, print the result."""

from __future__ import annotations

import json
import sys

from ..lang import ast as A
from ..lang.canonical import fingerprint
from ..lang.printer import COMPACT, PRETTY, print_module
from ..strategies import NotApplicable, Step, StrategyBug, get, trace_from_json, trace_to_json
from ..strategies.base import NUMERICS, parse_args, plan_step
from .common import add_target_argument, DEFAULT_THREADS, positive_int, CliError, load_checked, require_runnable, select_or_fail, write_output


def register(sub) -> None:
    p = sub.add_parser("apply", help="apply a strategy (or replay a trace) and print the new program",
                       description="Apply one strategy at a site, or replay a JSON trace of steps. The result is "
                                   "re-checked; with --verify it is also verified numerically against the input.")
    p.add_argument("file", metavar="KERNEL.leir")
    p.add_argument("strategy", nargs="?", help="strategy name (see `leirc strategies --list`)")
    p.add_argument("--at", metavar="SITE", help="value of the strategy's first argument, e.g. a loop N0.a")
    p.add_argument("--arg", action="append", default=[], metavar="K=V", help="further arguments")
    p.add_argument("--trace", metavar="TRACE.json", help="replay the steps of a trace instead")
    p.add_argument("--save-trace", metavar="TRACE.json", help="write the applied steps as a trace")
    p.add_argument("--kernel", help="kernel name (files with several kernels)")
    p.add_argument("--verify", action="store_true", help="verify the result against the input program")
    add_target_argument(p, kinds=("llvm", "cuda", "interp"), default="llvm", help="where --verify runs the result: llvm (compiled for this CPU, default), cuda (needs a GPU) "
                        "or interp (the reference interpreter)")
    p.add_argument("--threads", type=positive_int, default=DEFAULT_THREADS, metavar="N",
                   help=f"threads of the compiled run (default {DEFAULT_THREADS})")
    p.add_argument("-o", "--output", metavar="OUT.leir")
    p.add_argument("--compact", action="store_true")
    p.set_defaults(func=run)


def _read_trace(path: str) -> tuple[list, dict]:
    """(steps, the trace's metadata: kernel name and fingerprint it was recorded on)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text (expected a JSON trace)", 2, kind="io") from None
    except OSError as e:
        raise CliError(f"{path}: {e.strerror or e}", 2, kind="io") from None
    try:
        steps = trace_from_json(text)
        meta = json.loads(text)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CliError(f"cannot read trace {path}: {type(e).__name__}: {e}", 2) from None
    return steps, (meta if isinstance(meta, dict) else {})


def _one_step(args) -> list:
    if not args.strategy:
        raise CliError("give a STRATEGY or --trace", 2)
    try:
        s = get(args.strategy)
    except KeyError as e:
        raise CliError(e.args[0], 2) from None
    kv = {}
    if args.at is not None:
        if not s.args:
            raise CliError(f"{s.name} takes no arguments", 2)
        kv[s.args[0].name] = args.at
    for item in args.arg:
        if "=" not in item:
            raise CliError(f"--arg expects K=V, got {item!r}", 2)
        k, v = item.split("=", 1)
        kv[k] = v
    try:
        return [Step.make(s.name, **parse_args(s, kv))]  # typed values, so traces hold 8 not "8"
    except NotApplicable as e:
        raise CliError(str(e), 2) from None


def run(args) -> int:
    if args.target == "cuda" and args.verify:
        require_runnable("cuda")
    cf, _ = load_checked(args.file)
    res = select_or_fail(cf, args.kernel)
    if args.trace:
        steps, meta = _read_trace(args.trace)
        recorded, fp = meta.get("kernel"), meta.get("fingerprint")
        # a trace names loops (N0.a) by position: replayed on another kernel it may apply
        # somewhere else entirely, or fail half-way
        if recorded is not None and recorded != res.kernel.name:
            print(f"{args.file}: warning: the trace {args.trace} was recorded on kernel '{recorded}', replaying it "
                  f"on '{res.kernel.name}'", file=sys.stderr)
        elif fp is not None and fp != fingerprint(res.kernel):
            print(f"{args.file}: warning: the trace {args.trace} was recorded on a different version of kernel "
                  f"'{res.kernel.name}' (fingerprint {str(fp)[:12]} vs {fingerprint(res.kernel)[:12]})",
                  file=sys.stderr)
    else:
        steps = _one_step(args)
    kernel = res.kernel
    numerics = "bitwise"
    for n, st in enumerate(steps, 1):
        where = f"step {n}/{len(steps)} ({st})" if len(steps) > 1 else f"{st}"
        try:
            strat = get(st.name)
            rw = plan_step(kernel, st)
        except NotApplicable as e:
            print(f"{args.file}: error: {where}: {e}", file=sys.stderr)
            for sp in e.spans:
                print(f"  at {args.file}:{sp.line}:{sp.col}", file=sys.stderr)
            raise CliError(None, 1, kind="not-applicable") from None
        except KeyError as e:
            raise CliError(f"{where}: {e.args[0]}", 2) from None
        except StrategyBug as e:  # a leirc bug, reported plainly
            raise CliError(f"internal error in {where}: {e}", 3, kind="internal") from None
        kernel = rw.kernel
        numerics = max(numerics, rw.numerics, key=NUMERICS.index)
        # the one-line rationale lets a reader follow a derivation step by step; the
        # numerics are those of this application (a tiling of a reduction reassociates)
        print(f"applied {st} [{strat.level}, {rw.numerics}]: {strat.summary}", file=sys.stderr)
        if rw.created:
            # handles let the next --arg name what this step created without guessing
            print("  created: " + " ".join(f"{k}={v}" for k, v in rw.created.items()), file=sys.stderr)
    text = _result_text(cf, res, kernel, args.compact)
    status = 0
    if args.verify:
        rep = None
        before = print_module(A.Module((res.kernel,)), PRETTY)
        after = print_module(A.Module((kernel,)), PRETTY)
        if numerics == "bitwise" and args.target != "interp":
            # every step claims bit-identical results: test exactly that, against the
            # original's build (the interpreter rounds differently from any build)
            from .bitwise import compare_builds

            cmp = compare_builds(before, after, kernel=kernel.name, target=args.target, threads=args.threads)
            print(cmp.line(args.target), file=sys.stderr)
            if not cmp.identical:
                status = 1
        elif args.target == "interp":
            from ..verify import verify  # lazy: pulls in the interpreter

            rep = verify(after, before, target="interp", numerics=numerics)
        else:
            # the engine's door: one sandboxed session, the reference computed once
            from ..engine.evaluate import Evaluator

            with Evaluator(args.target, time=False, prestart=False, threads=args.threads) as ev:
                e = ev.evaluate(after, reference=before, numerics=numerics)
            rep = e.verify
            if rep is None:
                print(f"verify on {args.target}: NOT equal ({e.error_kind}): {e.error}", file=sys.stderr)
                return 1
        if rep is not None:
            print(f"verify on {args.target}: {'equal' if rep.equal else 'NOT equal'}, bitwise={rep.bitwise}, "
                  f"max_abs_err={_g(rep.max_abs_err)}, norm_rel_err={_g(rep.norm_rel_err)}", file=sys.stderr)
            for f in rep.failures:
                print(f"  {f}", file=sys.stderr)
            if not rep.equal:
                status = 1
    if args.save_trace:
        write_output(args.save_trace, trace_to_json(steps, kernel=res.kernel.name, fingerprint=fingerprint(res.kernel)))
    if args.output:
        write_output(args.output, text)
    else:
        sys.stdout.write(text)
    return status


def _result_text(cf, res, kernel, compact: bool) -> str:
    """The file after the steps. By default only the items the steps changed are rewritten
    (the editor's minimal edits, :func:`leirc.ide.edits.kernel_edits`): the other kernels,
    comments, spacing and spellings (``\\cdot``, ``\\frac``) stay byte for byte. ``--compact``
    reprints the whole file in the one-line layout, as asked."""
    if not compact and cf.parse.source is not None:
        from ..ide.edits import apply_to_text, kernel_edits

        source = cf.parse.source
        return apply_to_text(source, kernel_edits(source, res.kernel, kernel))
    mod = A.Module(tuple(kernel if r.kernel is res.kernel else r.kernel for r in cf.results))
    return print_module(mod, COMPACT if compact else PRETTY)


def _g(x) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) else str(x)
