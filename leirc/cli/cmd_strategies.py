"""``leirc strategies KERNEL.leir``: list where each strategy applies, with argument
domains; ``leirc strategies --list`` prints the registry."""

from __future__ import annotations

import json
import sys
import time

from ..strategies import all_strategies, enumerate_sites
from .common import load_checked, select_kernel


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
        print(json.dumps(rows, indent=2))
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
        print("leirc strategies: error: a KERNEL.leir file is required (or --list)", file=sys.stderr)
        return 2
    cf, status = load_checked(args.file)
    if cf is None:
        return status
    res, err = select_kernel(cf, args.kernel)
    if err:
        print(f"leirc: error: {err}", file=sys.stderr)
        return 2
    names = set(args.only.split(",")) if args.only else None
    t0 = time.perf_counter()
    sites = enumerate_sites(res.kernel, names, res)
    dt = time.perf_counter() - t0
    if args.json:
        print(json.dumps([s.to_json() for s in sites], indent=2))
        return 0
    for s in sites:
        at = " ".join(f"--arg {k}={v}" for k, v in s.fixed.items())
        dom = " ".join(f"{k}∈{{{','.join(map(str, v))}}}" for k, v in s.domains.items())
        print(f"{s.strategy:40} {at:40} {dom}   # {s.description}")
    print(f"{len(sites)} site(s) in {dt * 1000:.1f} ms", file=sys.stderr)
    return 0
