"""``leirc check FILE...``: parse and check, print diagnostics."""

from __future__ import annotations

import json
import sys

from ..ide import analyze
from ..lang.checker import check_kernel
from ..lang.parser import parse_body
from .common import print_diagnostics, read_input


def register(sub) -> None:
    p = sub.add_parser("check", help="check LEIR files and report diagnostics",
                       description="Parse and check LEIR files. Exit 0 if clean (warnings allowed), 1 on errors, 2 on usage/IO errors. "
                                   "A syntax error in one \\kernel does not stop the other kernels of the file from being checked.")
    p.add_argument("files", nargs="+", metavar="FILE", help="LEIR files ('-' for standard input)")
    p.add_argument("--json", action="store_true", help="print diagnostics as a JSON list")
    p.add_argument("--signature", metavar="JSON",
                   help="check a bare Step-TP body against an external signature: a JSON file with "
                        "'inputs' and 'outputs' lists of [name, dtype, shape] (dtype like f32 or torch.float32)")
    p.add_argument("-W", "--warnings-as-errors", action="store_true", help="exit 1 on warnings too")
    p.set_defaults(func=run)


def _load_signature(path: str):
    with open(path, encoding="utf-8") as f:
        sig = json.load(f)
    return [tuple(x) for x in sig["inputs"]], [tuple(x) for x in sig["outputs"]]


def run(args) -> int:
    all_diags = []
    status = 0
    sig = None
    if args.signature:
        try:
            sig = _load_signature(args.signature)
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"leirc: error: cannot read signature {args.signature}: {e}", file=sys.stderr)
            return 2
    for path in args.files:
        data, err = read_input(path)
        if err:
            print(f"leirc: error: {err}", file=sys.stderr)
            status = 2
            continue
        name = "<stdin>" if path == "-" else path
        if sig is not None:
            pr = parse_body(data, sig[0], sig[1], file=name)
            diags = list(pr.diagnostics)
            if pr.module is not None and not any(d.is_error for d in diags):
                diags += [d.with_file(name) for d in check_kernel(pr.module.kernels[0]).diagnostics]
            source = pr.source
        else:
            # one broken kernel does not hide the others' diagnostics
            report = analyze(data, name)
            diags = report.diagnostics
            source = report.parse.source
        all_diags.extend(diags)
        if not args.json:
            print_diagnostics(diags, source)
        if any(d.is_error for d in diags) or (args.warnings_as_errors and diags):
            status = max(status, 1)
    if args.json:
        print(json.dumps([d.to_json() for d in all_diags], indent=2))
    elif status == 0:
        n_warn = sum(1 for d in all_diags if not d.is_error)
        print(f"ok: {len(args.files)} file(s) checked" + (f", {n_warn} warning(s)" if n_warn else ""), file=sys.stderr)
    return status
