"""``leirc check FILE...``: parse and check, print diagnostics."""

from __future__ import annotations

import json
import sys

from ..ide import analyze
from ..lang.checker import check_kernel
from ..lang.diagnostics import WARNING, Diagnostic
from ..lang.parser import parse_body
from .common import CliError, json_document, print_diagnostics, print_json, read_input

#: an empty file (or one with only comments) is almost always a wrong path or a bare
#: Step-TP body given without --signature, never a program someone meant to check
NO_KERNEL = "W008"


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
    if not isinstance(sig, dict):
        raise ValueError("expected an object with 'inputs' and 'outputs'")
    return [tuple(x) for x in sig["inputs"]], [tuple(x) for x in sig["outputs"]]


def _no_kernel(name: str) -> Diagnostic:
    return Diagnostic(NO_KERNEL, "the file defines no kernel (a bare Step-TP body needs --signature SIG.json)",
                      None, WARNING, name)


def run(args) -> int:
    all_diags = []
    status = 0
    sig = None
    if args.signature:
        try:
            sig = _load_signature(args.signature)
        except OSError as e:
            raise CliError(f"{args.signature}: {e.strerror or e}", 2, kind="io") from None
        except (ValueError, KeyError, TypeError) as e:
            raise CliError(f"cannot read signature {args.signature}: {e}", 2) from None
    errors = []
    for path in args.files:
        data, err = read_input(path)
        if err:
            print(f"leirc: error: {err}", file=sys.stderr)
            errors.append(err)
            status = 2
            continue
        name = "<stdin>" if path == "-" else path
        bare = False
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
            module = report.parse.module if report.parse.module is not None else report.parse.partial
            # the parser reads an empty file as an empty bare Step-TP body
            if not diags and (module is None or all(not k.declared and not k.body for k in module.kernels)):
                diags = [_no_kernel(name)]
            # a body without its header reads every input as an undefined tensor
            bare = (module is not None and any(d.is_error and d.code != "E001" for d in diags)
                    and not any(k.declared for k in module.kernels))
        all_diags.extend(diags)
        if not args.json:
            print_diagnostics(diags, source)
        if sig is None and bare:
            print(f"{name}: note: this is a bare Step-TP body (no \\kernel header), so its inputs are not declared: "
                  "check it with --signature SIG.json, or convert its record with `leirc convert`", file=sys.stderr)
        if any(d.is_error for d in diags) or (args.warnings_as_errors and diags):
            status = max(status, 1)
    if args.json:
        err = CliError("; ".join(errors), 2, kind="io") if errors else None
        print_json(json_document("check", status == 0, error=err, diagnostics=all_diags, files=list(args.files)))
    elif status == 0:
        n_warn = sum(1 for d in all_diags if not d.is_error)
        print(f"ok: {len(args.files)} file(s) checked" + (f", {n_warn} warning(s)" if n_warn else ""), file=sys.stderr)
    return status
