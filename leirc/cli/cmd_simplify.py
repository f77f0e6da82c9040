"""``leirc simplify KERNEL.leir``: run the canonical simplification pipeline
(:mod:`leirc.opt.simplify`) and print the result (``--json``: what changed)."""

from __future__ import annotations

import sys

from ..lang import ast as A
from ..lang.printer import COMPACT, PRETTY, print_module
from .cmd_fmt import leading_comments
from .common import CliError, json_document, load_checked, print_json, write_output

_HELP = """Simplify every statement of every kernel with a fixed pipeline of local rewrites,
repeated to a fixpoint: fold (constant folding, unit laws x+0 x*1 x/1 x**1 --x, if_then_else
with a literal condition or equal branches), cancel (x+z-z -> x in any order; x/z*z and x*z/z
-> x only when z is provably non-zero), combine (equal non-leaf terms of one sum -> k*t,
equal non-leaf factors of one product -> t**k). Reductions keep their form: only the operand
of X = X op e changes. Every change is proven by SymPy and re-checked, else left out (and
reported with --json). Numerics: exact in the reals."""


def register(sub) -> None:
    p = sub.add_parser("simplify", help="simplify expressions (constant folding, x+z-z, x/z*z, repeated terms)",
                       description=_HELP)
    p.add_argument("file", metavar="KERNEL.leir")
    p.add_argument("--kernel", help="only this kernel (files with several kernels)")
    p.add_argument("--json", action="store_true", help="print what changed (per statement, with node counts) as JSON "
                                                       "instead of the program")
    p.add_argument("--compact", action="store_true", help="one-line Step-TP layout")
    p.add_argument("-o", "--output", metavar="OUT.leir", help="write the simplified program here")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..opt.simplify import PASSES, simplify_kernel

    cf, _ = load_checked(args.file)
    names = [r.kernel.name for r in cf.results]
    if args.kernel is not None and args.kernel not in names:
        raise CliError(f"no kernel '{args.kernel}' (kernels: {', '.join(names)})", 2)
    kernels, reports = [], []
    for r in cf.results:
        if args.kernel is not None and r.kernel.name != args.kernel:
            kernels.append(r.kernel)
            continue
        k, rep = simplify_kernel(r.kernel, r)
        kernels.append(k)
        reports.append(rep)
    mod = A.Module(tuple(kernels))
    text = print_module(mod, COMPACT if args.compact else PRETTY)
    if not args.compact:
        text = leading_comments(cf.parse.source) + text
    if args.output:
        write_output(args.output, text)
    if args.json:
        print_json(json_document(
            "simplify", True, file=args.file, passes=list(PASSES), kernels=[r.to_json() for r in reports],
            statements_changed=sum(len(r.changes) for r in reports),
            nodes_before=sum(r.nodes_before for r in reports), nodes_after=sum(r.nodes_after for r in reports)))
    elif not args.output:
        sys.stdout.write(text)
    for r in reports:
        for ref, why in r.skipped:
            print(f"{args.file}: note: {r.kernel} {ref} left unchanged: {why}", file=sys.stderr)
    return 0
