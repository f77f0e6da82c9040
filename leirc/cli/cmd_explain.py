"""``leirc explain CODE``: what a diagnostic code means, a program that triggers it, and the
fix (:mod:`leirc.lang.explain`, keyed by the one code table). ``--list`` lists every code with
its title; ``--json`` gives the same as a document (``schemas/explain.json``)."""

from __future__ import annotations

from .common import CliError, json_document, print_json


def register(sub) -> None:
    p = sub.add_parser("explain", help="explain a diagnostic code (E012, W001...): meaning, example, fix",
                       description="Explain a diagnostic code that leirc reports (`error[E030]`): what it means, a "
                                   "program that triggers it and how to fix it. Exit 0, or 2 for an unknown code.")
    p.add_argument("codes", nargs="*", metavar="CODE", help="codes such as E030, w001 or 30")
    p.add_argument("--list", action="store_true", help="list every code with its title")
    p.add_argument("--json", action="store_true", help="print the explanations as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..lang.diagnostics import CODES
    from ..lang.explain import explanation

    if args.list or not args.codes:
        if not args.list:
            raise CliError("give a code to explain (e.g. `leirc explain E030`), or --list for all of them")
        codes = sorted(CODES)
    else:
        codes = []
        for c in args.codes:
            e = explanation(c)
            if e is None:
                raise CliError(f"{c}: no such diagnostic code (`leirc explain --list` lists them)")
            codes.append(e.code)
    found = [explanation(c) for c in codes]
    if args.json:
        print_json(json_document("explain", True, codes=[
            {"code": e.code, "title": e.title, "severity": "error" if e.code.startswith("E") else "warning",
             "meaning": e.meaning, "fix": e.fix, "reported_by": e.reported_by,
             "example": None if e.example is None else
             e.example.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")} for e in found]))
    elif args.list:
        for e in found:
            print(f"{e.code}  {e.title}")
    else:
        print("\n\n".join(e.render() for e in found))
    return 0
