"""``leirc strategies KERNEL.leir``: list where each strategy applies, with argument
domains; ``leirc strategies --list`` prints the registry."""

from __future__ import annotations

import sys
import time

from ..strategies import all_strategies, enumerate_sites
from .common import CliError, json_document, load_checked, print_json, select_or_fail


def register(sub) -> None:
    p = sub.add_parser("strategies", help="list applicable strategies (sites and argument domains)",
                       description="List every site where a registered strategy applies to a kernel, with the "
                                   "domains of its free arguments. Use the printed --at/--arg values with `leirc apply`.")
    p.add_argument("file", nargs="?", metavar="KERNEL.leir")
    p.add_argument("--kernel", help="kernel name (files with several kernels)")
    p.add_argument("--only", metavar="NAMES", help="comma-separated strategy names")
    p.add_argument("--list", action="store_true", help="print the registry (name, level, numerics, arguments)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _registry(as_json: bool) -> int:
    rows = []
    for s in all_strategies():
        rows.append({"name": s.name, "level": s.level, "numerics": s.numerics, "summary": s.summary,
                     "args": [{"name": a.name, "kind": a.kind, "doc": a.doc, **({"choices": list(a.choices)} if a.choices else {})}
                              for a in s.args],
                     # roles `leirc apply` reports as handles ("created: outer=N0.io ...")
                     "creates": [{"role": r.name, "kind": r.kind} for r in s.creates]})
    if as_json:
        print_json(json_document("strategies", True, strategies=rows))
    else:
        for r in rows:
            args = " ".join(f"{a['name']}:{a['kind']}" for a in r["args"])
            creates = " -> " + ", ".join(f"{c['role']}:{c['kind']}" for c in r["creates"]) if r["creates"] else ""
            print(f"{r['name']:45} {r['level']:9} {r['numerics']:15} {args}{creates}")
    return 0


def run(args) -> int:
    if args.list:
        return _registry(args.json)
    if not args.file:
        raise CliError("a KERNEL.leir file is required (or --list)", 2)
    cf, _ = load_checked(args.file)
    res = select_or_fail(cf, args.kernel)
    names = set(n.strip() for n in args.only.split(",") if n.strip()) if args.only else None
    if names:
        known = {s.name for s in all_strategies()}
        unknown = sorted(names - known)
        if unknown:
            raise CliError(f"--only: unknown strategy {', '.join(unknown)} (see `leirc strategies --list`)", 2)
    t0 = time.perf_counter()
    sites = enumerate_sites(res.kernel, names, res)
    dt = time.perf_counter() - t0
    if args.json:
        print_json(json_document("strategies", True, file=args.file, kernel=res.kernel.name,
                                 sites=[s.to_json() for s in sites]))
        return 0
    for s in sites:
        at = " ".join(f"--arg {k}={v}" for k, v in s.fixed.items())
        dom = " ".join(f"{k}∈{{{_domain(v)}}}" for k, v in s.domains.items())
        print(f"{s.strategy:40} {at:40} {dom}   # {s.description}")
    print(f"{len(sites)} site(s) in {dt * 1000:.1f} ms", file=sys.stderr)
    return 0


def _domain(values) -> str:
    """A domain as ``--arg`` takes its values: a value that is itself a list (a loop order
    ``j,i,k``) stays one value, so the values are separated by `` | `` instead of commas."""
    texts = [",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v) for v in values]
    return (" | " if any("," in t for t in texts) else ",").join(texts)
