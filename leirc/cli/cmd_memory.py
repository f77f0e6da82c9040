"""``leirc memory show|export|import|reset``: the search's HTAM memory (directions,
strategies, transitions, winning traces), kept in SQLite across kernels and runs."""

from __future__ import annotations

import json
import sys

from ..io import write_atomic
from .common import add_target_argument, read_input, usage_error


def register(sub) -> None:
    p = sub.add_parser("memory", help="show, export, import or reset the search's HTAM memory",
                       description="The HTAM memory of -O search: optimization directions with priors and "
                                   "statistics, strategies with evidence, transitions between directions, and "
                                   "winning traces for schedule reuse.")
    p.add_argument("action", choices=("show", "export", "import", "reset"))
    p.add_argument("file", nargs="?", metavar="FILE.json", help="export: output file ('-' or none: stdout); "
                                                                "import: input file")
    p.add_argument("--memory", default=None, metavar="DB",
                   help="memory file (default: ~/.cache/leirc/memory.sqlite)")
    add_target_argument(p, kinds=("llvm", "cuda"), default="llvm")
    p.add_argument("--json", action="store_true", help="show: as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..search.memory import Memory, default_path

    path = args.memory or default_path()
    if args.action == "import" and not args.file:
        return usage_error("leirc memory import needs a FILE.json")
    warnings = []
    try:
        mem = Memory(path, target=args.target, warn=warnings.append)
    except Exception as e:  # noqa: BLE001 - an unusable path is a usage error with its reason
        return usage_error(f"cannot open the memory {path}: {e}")
    for w in warnings:
        print(f"leirc: {w}", file=sys.stderr)
    try:
        if args.action == "show":
            print(json.dumps(mem.export(), indent=2) if args.json else mem.show())
        elif args.action == "export":
            text = json.dumps(mem.export(), indent=2) + "\n"
            if args.file and args.file != "-":
                write_atomic(args.file, text)
            else:
                sys.stdout.write(text)
        elif args.action == "import":
            data, err = read_input(args.file)
            if err:
                return usage_error(err)
            try:
                n = mem.import_(json.loads(data))
            except (ValueError, KeyError, TypeError) as e:
                return usage_error(f"{args.file}: not a memory export: {e}")
            print(f"imported {n} record(s) into {path}", file=sys.stderr)
        else:
            mem.reset()
            print(f"reset the {args.target} memory in {path}", file=sys.stderr)
    finally:
        mem.close()
    return 0
