"""``leirc convert RECORDS.jsonl``: write self-contained ``.leir`` files from Step-TP
records (a bare body plus a signature kept outside the text)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..lang.parser import parse_record
from ..lang.printer import PRETTY, COMPACT, print_module
from ..io import write_atomic
from .common import print_diagnostics


def register(sub) -> None:
    p = sub.add_parser("convert", help="convert Step-TP records (JSONL) to self-contained .leir files",
                       description="Each JSONL record needs 'IR' (or --field), 'inputs' [names, shapes, dtypes], "
                                   "'outputs' [names, shapes] and optionally 'params', 'constants', 'model'.")
    p.add_argument("records", metavar="RECORDS.jsonl")
    p.add_argument("-o", "--out-dir", metavar="DIR", help="write one <model>.leir per record (default: print to stdout)")
    p.add_argument("--field", default="IR", help="record field holding the program (default: IR)")
    p.add_argument("--compact", action="store_true", help="one-line layout")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        lines = Path(args.records).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        print(f"leirc: error: {args.records}: {e.strerror or e}", file=sys.stderr)
        return 2
    status = 0
    layout = COMPACT if args.compact else PRETTY
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            program = rec[args.field]
        except (ValueError, KeyError, TypeError) as e:
            print(f"{args.records}:{n}: error: bad record: {e}", file=sys.stderr)
            status = max(status, 1)
            continue
        if not isinstance(program, str):
            print(f"{args.records}:{n}: error: field '{args.field}' is not a string", file=sys.stderr)
            status = max(status, 1)
            continue
        try:
            pr = parse_record(rec, program, file=f"{args.records}:{n}")
        except (KeyError, TypeError, ValueError) as e:
            print(f"{args.records}:{n}: error: bad signature in record: {e}", file=sys.stderr)
            status = max(status, 1)
            continue
        if not pr.ok:
            print_diagnostics(pr.diagnostics, pr.source)
            status = max(status, 1)
            continue
        k = pr.module.kernels[0]
        text = f"% converted from {Path(args.records).name} line {n}\n" + print_module(pr.module, layout)
        if args.out_dir:
            out = Path(args.out_dir)
            out.mkdir(parents=True, exist_ok=True)
            write_atomic(str(out / f"{k.name}.leir"), text)
        else:
            sys.stdout.write(text + "\n")
    return status
