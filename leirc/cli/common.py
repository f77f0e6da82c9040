"""Helpers shared by the subcommands: reading inputs, printing diagnostics."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

from ..lang.diagnostics import Diagnostic, render


def read_input(path: str) -> tuple[Optional[bytes], Optional[str]]:
    """(data, error message). ``-`` reads standard input."""
    try:
        if path == "-":
            return sys.stdin.buffer.read(), None
        return Path(path).read_bytes(), None
    except FileNotFoundError:
        return None, f"{path}: no such file"
    except IsADirectoryError:
        return None, f"{path}: is a directory"
    except OSError as e:
        return None, f"{path}: {e.strerror or e}"


def print_diagnostics(diags: list[Diagnostic], source: Optional[str], stream=None) -> None:
    stream = stream or sys.stderr
    for d in diags:
        print(render(d, source), file=stream)


def diagnostics_json(diags: list[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diags], indent=2)


def usage_error(msg: str) -> int:
    print(f"leirc: error: {msg}", file=sys.stderr)
    return 2


def load_checked(path: str):
    """Read and check a LEIR file for a command that needs a clean program.

    Returns ``(CheckedFile, None)`` or ``(None, exit_status)`` after printing the reason:
    2 for I/O errors, 1 when the program has errors (diagnostics printed)."""
    from ..lang.checker import check_text

    data, err = read_input(path)
    if err:
        print(f"leirc: error: {err}", file=sys.stderr)
        return None, 2
    cf = check_text(data, "<stdin>" if path == "-" else path)
    if not cf.ok:
        print_diagnostics(cf.diagnostics, cf.parse.source)
        return None, 1
    return cf, None


def select_kernel(cf, name: Optional[str]):
    """(CheckResult, None) for the kernel ``name`` (or the only kernel), else (None, message)."""
    ks = list(cf.results)
    if name is None:
        if len(ks) != 1:
            return None, f"the file has {len(ks)} kernels; choose one with --kernel ({', '.join(r.kernel.name for r in ks)})"
        return ks[0], None
    for r in ks:
        if r.kernel.name == name:
            return r, None
    return None, f"no kernel named '{name}' ({', '.join(r.kernel.name for r in ks)})"
