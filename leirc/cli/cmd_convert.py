"""``leirc convert RECORDS.jsonl``: write self-contained ``.leir`` files from Step-TP
records (a bare body plus a signature kept outside the text).

A record is converted only if the program it makes checks (a converted file that does not
check would only move the error). Step-TP records list constants by name only; a constant
the body reads with subscripts (a causal mask, a weight) gets the shape its accesses imply
when every subscript is a loop index or an integer, else the record is refused with a
message saying which constant lacks a shape. Two records of the same model would write one
file: the second is written as ``<model>-<line>.leir`` and a warning says so.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from ..lang import ast as A
from ..lang.checker import check_module
from ..lang.parser import parse, parse_body, signature_from_record
from ..lang.printer import COMPACT, PRETTY, print_module
from .common import CliError, Progress, ensure_dir, print_diagnostics, write_output


def register(sub) -> None:
    p = sub.add_parser("convert", help="convert Step-TP records (JSONL) to self-contained .leir files",
                       description="Each JSONL record needs 'IR' (or --field), 'inputs' [names, shapes, dtypes], "
                                   "'outputs' [names, shapes] and optionally 'params', 'constants', 'model'. "
                                   "Records whose program does not check are reported and not written.")
    p.add_argument("records", metavar="RECORDS.jsonl")
    p.add_argument("-o", "--out-dir", metavar="DIR", help="write one <model>.leir per record (default: print to stdout)")
    p.add_argument("--field", default="IR", help="record field holding the program (default: IR)")
    p.add_argument("--compact", action="store_true", help="one-line layout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _accessed_shapes(module: A.Module, names: set) -> dict:
    """name -> (shape, or a reason why none could be inferred) for the tensors ``names``
    the body reads with subscripts: the extent of each subscript that is a loop index (its
    start + extent) or an integer literal (its value + 1), the maximum over all accesses."""
    shapes: dict = {}
    bad: dict = {}

    def visit(node, bounds: dict) -> None:
        if isinstance(node, A.Loop):
            bounds = {**bounds, node.var: node.start + node.extent}
        if isinstance(node, A.Access) and node.name in names and node.indices:
            dims = []
            for ix in node.indices:
                if isinstance(ix, A.Var) and ix.name in bounds:
                    dims.append(bounds[ix.name])
                elif isinstance(ix, A.Const) and ix.is_int:
                    dims.append(ix.value + 1)
                else:
                    bad.setdefault(node.name, "a subscript is neither a loop index nor an integer")
                    return
            old = shapes.get(node.name)
            if old is not None and len(old) != len(dims):
                bad.setdefault(node.name, f"accessed with {len(old)} and with {len(dims)} subscripts")
            elif old is None:
                shapes[node.name] = dims
            else:
                shapes[node.name] = [max(a, b) for a, b in zip(old, dims)]
        for c in A.children(node):
            visit(c, bounds)

    visit(module, {})
    return {n: bad[n] if n in bad else shapes[n] for n in set(shapes) | set(bad)}


def _signature(rec: dict, program: str, file: str):
    """(inputs, outputs) with constant shapes inferred from the accesses; a ValueError
    naming a constant whose shape cannot be inferred."""
    ins, outs = signature_from_record(rec)
    first = parse(program, file)
    if first.module is None:
        return ins, outs
    seen: dict[str, str] = {}
    for n in A.walk(first.module):
        if isinstance(n, A.Access) and n.name not in seen:
            seen[n.name] = n.dtype
    # as parse_record: output dtypes the record omits, and parameter/constant dtypes, come
    # from the program's own accesses
    if len(rec["outputs"]) <= 2:
        outs = [(n, seen.get(n, d), s) for n, d, s in outs]
    runtime = set(rec["inputs"][0])
    ins = [(n, seen.get(n, d) if n not in runtime else d, s) for n, d, s in ins]
    constants = {n for group in rec.get("constants", [[]]) for n in group}
    scalar = {n for n, _, s in ins if n in constants and not list(s)}
    inferred = _accessed_shapes(first.module, scalar)
    for n, shape in inferred.items():
        if isinstance(shape, str):
            raise ValueError(f"constant '{n}' is read with subscripts but the record gives no shape for it "
                             f"and none can be inferred ({shape})")
    return [(n, d, inferred.get(n, s)) for n, d, s in ins], outs


def _unique_path(out: Path, name: str, line: int, written: set) -> Path:
    path = out / f"{name}.leir"
    if path not in written:
        return path
    return out / f"{name}-{line}.leir"


def run(args) -> int:
    try:
        lines = Path(args.records).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise CliError(f"{args.records}: not UTF-8 text (expected JSON lines)", 2, kind="io") from None
    except OSError as e:
        raise CliError(f"{args.records}: {e.strerror or e}", 2, kind="io") from None
    status = 0
    layout = COMPACT if args.compact else PRETTY
    out = Path(args.out_dir) if args.out_dir else None
    if out is not None:
        ensure_dir(str(out))
    written: set = set()
    converted = 0
    progress = Progress(args.quiet)
    with progress.bar(total=len(lines), desc="convert") as bar:
        for n, line in enumerate(lines, 1):
            bar.update(1)
            one = _convert_one(args, n, line, out, layout, written)
            status = max(status, one)
            converted += one == 0 and bool(line.strip())
    if out is not None:
        print(f"converted {converted} record(s) into {os.path.normpath(str(out))}", file=sys.stderr)
    return status


def _convert_one(args, n: int, line: str, out, layout, written: set) -> int:
    """0 when the record on line ``n`` was converted (or the line is blank), else 1."""
    if not line.strip():
        return 0
    where = f"{args.records}:{n}"
    try:
        rec = json.loads(line)
        program = rec[args.field]
    except (ValueError, KeyError, TypeError) as e:
        print(f"{where}: error: bad record: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if not isinstance(program, str):
        print(f"{where}: error: field '{args.field}' is not a string", file=sys.stderr)
        return 1
    try:
        ins, outs = _signature(rec, program, where)
        model = rec.get("model", "main")
        pr = parse_body(program, ins, outs, name=_kernel_name(model if isinstance(model, str) else "main"),
                        file=where)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        print(f"{where}: error: bad signature in record: {e}", file=sys.stderr)
        return 1
    if not pr.ok:
        print_diagnostics(pr.diagnostics, pr.source)
        return 1
    errors = [d.with_file(where) for r in check_module(pr.module) for d in r.diagnostics if d.is_error]
    if errors:
        print_diagnostics(errors, pr.source)
        print(f"{where}: error: the record's program does not check; not converted", file=sys.stderr)
        return 1
    k = pr.module.kernels[0]
    text = f"% converted from {Path(args.records).name} line {n}\n" + print_module(pr.module, layout)
    if out is not None:
        path = _unique_path(out, k.name, n, written)
        if path.name != f"{k.name}.leir":
            print(f"{where}: warning: {out / (k.name + '.leir')} was written by an earlier record; "
                  f"writing {path.name} instead", file=sys.stderr)
        write_output(str(path), text)
        written.add(out / f"{k.name}.leir")
        written.add(path)
    else:
        sys.stdout.write(text + "\n")
    return 0


def _kernel_name(model: str) -> str:
    """As the parser names a record's kernel (``parse_record``)."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", model).strip("_") or "main"
    if not name[0].isalpha():
        name = "k_" + name
    return re.sub(r"_+", "_", name)
