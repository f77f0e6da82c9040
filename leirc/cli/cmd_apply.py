"""``leirc apply KERNEL.leir STRATEGY --at SITE [--arg k=v ...]`` and
``leirc apply KERNEL.leir --trace trace.json``: apply strategies, print the result."""

from __future__ import annotations

import sys

from ..lang import ast as A
from ..lang.printer import COMPACT, PRETTY, print_module
from ..strategies import NotApplicable, Step, StrategyBug, get, trace_from_json, trace_to_json
from ..strategies.base import NUMERICS, parse_args, plan_step
from ..io import write_atomic
from .common import load_checked, select_kernel


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
    p.add_argument("-t", "--target", default="llvm", help="verification target (llvm or interp)")
    p.add_argument("-o", "--output", metavar="OUT.leir")
    p.add_argument("--compact", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    cf, status = load_checked(args.file)
    if cf is None:
        return status
    res, err = select_kernel(cf, args.kernel)
    if err:
        print(f"leirc: error: {err}", file=sys.stderr)
        return 2
    if args.trace:
        try:
            with open(args.trace, encoding="utf-8") as f:
                steps = trace_from_json(f.read())
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"leirc: error: cannot read trace {args.trace}: {e}", file=sys.stderr)
            return 2
    else:
        if not args.strategy:
            print("leirc apply: error: give a STRATEGY or --trace", file=sys.stderr)
            return 2
        try:
            s = get(args.strategy)
        except KeyError as e:
            print(f"leirc: error: {e.args[0]}", file=sys.stderr)
            return 2
        kv = {}
        if args.at is not None:
            if not s.args:
                print(f"leirc: error: {s.name} takes no arguments", file=sys.stderr)
                return 2
            kv[s.args[0].name] = args.at
        for item in args.arg:
            if "=" not in item:
                print(f"leirc: error: --arg expects K=V, got {item!r}", file=sys.stderr)
                return 2
            k, v = item.split("=", 1)
            kv[k] = v
        try:
            steps = [Step.make(s.name, **parse_args(s, kv))]  # typed values, so traces hold 8 not "8"
        except NotApplicable as e:
            print(f"leirc: error: {e}", file=sys.stderr)
            return 2
    kernel = res.kernel
    numerics = "bitwise"
    try:
        for st in steps:
            strat = get(st.name)
            rw = plan_step(kernel, st)
            kernel = rw.kernel
            numerics = max(numerics, rw.numerics, key=NUMERICS.index)
            # the one-line rationale lets a reader follow a derivation step by step; the
            # numerics are those of this application (a tiling of a reduction reassociates)
            print(f"applied {st} [{strat.level}, {rw.numerics}]: {strat.summary}", file=sys.stderr)
            if rw.created:
                # handles let the next --arg name what this step created without guessing
                print("  created: " + " ".join(f"{k}={v}" for k, v in rw.created.items()), file=sys.stderr)
    except NotApplicable as e:
        print(f"{args.file}: error: {e}", file=sys.stderr)
        for sp in e.spans:
            print(f"  at {args.file}:{sp.line}:{sp.col}", file=sys.stderr)
        return 1
    except KeyError as e:
        print(f"leirc: error: {e.args[0]}", file=sys.stderr)
        return 2
    except StrategyBug as e:  # pragma: no cover - a leirc bug, reported plainly
        print(f"leirc: internal error: {e}", file=sys.stderr)
        return 1
    mod = A.Module(tuple(kernel if r.kernel is res.kernel else r.kernel for r in cf.results))
    text = print_module(mod, COMPACT if args.compact else PRETTY)
    status = 0
    if args.verify:
        before = print_module(A.Module((res.kernel,)), PRETTY)
        after = print_module(A.Module((kernel,)), PRETTY)
        if args.target == "interp":
            from ..verify import verify  # lazy: pulls in the interpreter

            rep = verify(after, before, target="interp", numerics=numerics)
        else:
            # the engine's door: one sandboxed session, the reference computed once
            from ..engine.evaluate import Evaluator

            with Evaluator(args.target, time=False, prestart=False) as ev:
                e = ev.evaluate(after, reference=before, numerics=numerics)
            rep = e.verify
            if rep is None:
                print(f"verify: NOT equal ({e.error_kind}): {e.error}", file=sys.stderr)
                return 1
        print(f"verify: {'equal' if rep.equal else 'NOT equal'}, bitwise={rep.bitwise}, "
              f"max_abs_err={rep.max_abs_err:.3g}, norm_rel_err={rep.norm_rel_err:.3g}", file=sys.stderr)
        for f in rep.failures:
            print(f"  {f}", file=sys.stderr)
        if not rep.equal:
            status = 1
    if args.save_trace:
        write_atomic(args.save_trace, trace_to_json(steps, kernel=res.kernel.name))
    if args.output:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return status
