"""``leirc fmt FILE...``: print files in canonical form.

``--check`` and ``--diff`` write nothing and exit 1 when a file is not formatted (as
``black --check``/``--diff`` and ``rustfmt --check`` do, so a CI step fails on an unformatted
file); ``--diff`` prints what formatting would change as a unified diff on stdout (``patch -p0``
applies it), ``--check`` only names the files."""

from __future__ import annotations

import sys

from ..lang import ast as A
from ..lang.parser import parse
from ..lang.printer import COMPACT, PRETTY, print_module
from .common import CliError, print_diagnostics, read_input, write_output


def register(sub) -> None:
    p = sub.add_parser("fmt", help="format LEIR files canonically",
                       description="Print LEIR files in canonical form (pretty by default). Every comment is kept: a comment on its "
                                   "own line stays above the item that follows it, a comment after an item stays on that item's "
                                   "last line. The one-line --compact layout keeps only the comments outside kernels (and says "
                                   "how many it dropped).")
    p.add_argument("files", nargs="+", metavar="FILE")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--compact", action="store_true", help="one-line Step-TP layout")
    g.add_argument("--pretty", action="store_true", help="indented multi-line layout (default)")
    m = p.add_mutually_exclusive_group()
    m.add_argument("--check", action="store_true", help="exit 1 if a file is not already formatted; write nothing")
    m.add_argument("--diff", action="store_true",
                   help="print a unified diff of what formatting would change; exit 1 if anything would change "
                        "(as --check); write nothing")
    m.add_argument("-i", "--in-place", action="store_true", help="rewrite the files (atomically)")
    p.set_defaults(func=run)


def leading_comments(source: str) -> str:
    """The comment block at the top of a file (for commands that print a rewritten
    program in a layout without comments)."""
    keep = []
    for line in source.splitlines():
        if line.lstrip().startswith("%"):
            keep.append(line.rstrip())
        elif line.strip() == "":
            if keep:
                keep.append("")
        else:
            break
    while keep and keep[-1] == "":
        keep.pop()
    return "\n".join(keep) + "\n" if keep else ""


def _dropped_by_compact(m: A.Module) -> int:
    """Comments the compact layout cannot keep: those inside kernels."""
    kept = len([t for t in A.comments_at(m, "inner") if t])
    if not (len(m.kernels) == 1 and not m.kernels[0].declared):
        kept += sum(len([t for t in A.comments_at(k, "leading") + A.comments_at(k, "trailing")[:1] if t])
                    for k in m.kernels)
    return len(A.all_comments(m)) - kept


def unified_diff(before: str, after: str, name: str) -> list[str]:
    """``diff -u`` of the file and its formatted text, a missing final newline marked as
    ``diff`` marks it (so the output is a patch that applies)."""
    import difflib

    out = []
    for line in difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                     fromfile=name, tofile=name):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return out


def run(args) -> int:
    layout = COMPACT if args.compact else PRETTY
    status = 0
    for path in args.files:
        data, err = read_input(path)
        if err:
            print(f"leirc: error: {err}", file=sys.stderr)
            status = 2
            continue
        name = "<stdin>" if path == "-" else path
        pr = parse(data, name)
        if pr.module is None or any(d.is_error for d in pr.diagnostics):
            print_diagnostics(pr.diagnostics, pr.source)
            status = max(status, 1)
            continue
        out = print_module(pr.module, layout, comments=True)
        if layout == COMPACT and (lost := _dropped_by_compact(pr.module)):
            print(f"{name}: warning: --compact drops {lost} comment(s) inside kernels", file=sys.stderr)
        if args.diff:
            if out != pr.source:
                sys.stdout.writelines(unified_diff(pr.source, out, name))
                status = max(status, 1)
        elif args.check:
            if out != pr.source:
                print(f"{name}: would reformat", file=sys.stderr)
                status = max(status, 1)
        elif args.in_place and path != "-":
            if out != pr.source:
                try:
                    write_output(path, out)
                except CliError as e:  # the other files are still formatted
                    print(f"leirc: error: {e.message}", file=sys.stderr)
                    status = 2
        else:
            sys.stdout.write(out)
    return status
