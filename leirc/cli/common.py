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
