"""Helpers shared by the subcommands: reading inputs, writing outputs, printing
diagnostics, the ``--json`` envelope and progress lines.

Failures a user can fix are :class:`CliError` values raised anywhere below a command's
``run``; :func:`leirc.cli.main.main` prints them as ``leirc: error: PATH: reason`` (or as the
command's JSON document in ``--json`` mode) and exits with their status, so no command needs
its own ``try`` around every write.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Optional

from ..lang.diagnostics import Diagnostic, render

#: version of every ``--json`` document (``leirc/cli/schemas/*.json``); bumped on an incompatible change
JSON_VERSION = 1

#: the one thread count of every command that runs kernels (run, bench, build, verify): a
#: measurement taken by one command must be comparable with another's
DEFAULT_THREADS = 2


class CliError(Exception):
    """A failure the user can act on: ``message`` is printed after ``leirc: error:`` and the
    command exits with ``status`` (2 usage/IO, 1 the input has errors). ``diagnostics`` are
    printed (or put in the JSON document) first."""

    def __init__(self, message: Optional[str], status: int = 2, *, kind: str = "usage",
                 diagnostics: tuple = (), source: Optional[str] = None):
        super().__init__(message or "")
        self.message = message
        self.status = status
        self.kind = kind
        self.diagnostics = list(diagnostics)
        self.source = source


def os_reason(e: OSError) -> str:
    """``strerror`` in lower case as the C library says it (``Permission denied``)."""
    return e.strerror or str(e)


def io_error(path: str, e: OSError) -> CliError:
    return CliError(f"{path}: {os_reason(e)}", 2, kind="io")


def write_output(path: str, data: bytes | str) -> None:
    """The one writer of every output file (``-o``, ``-i``, ``--out``, wrapper and report
    files): :func:`leirc.io.write_atomic`, with every OS error turned into a
    :class:`CliError` naming the path."""
    from ..io import write_atomic

    try:
        write_atomic(path, data)
    except OSError as e:
        raise io_error(path, e) from None


def write_npz(path: str, arrays: dict) -> None:
    from ..io import save_npz

    try:
        save_npz(path, arrays)
    except OSError as e:
        raise io_error(path, e) from None


def ensure_dir(path: str) -> None:
    """Create an output directory (and its parents); an existing file there is an error."""
    if os.path.isdir(path):
        if not os.access(path, os.W_OK | os.X_OK):
            raise CliError(f"{path}: Permission denied", 2, kind="io")
        return
    if os.path.exists(path):
        raise CliError(f"{path}: exists and is not a directory", 2, kind="io")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise io_error(path, e) from None


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


def json_document(command: str, ok: bool, *, error: Optional[CliError] = None, diagnostics=(), **fields) -> dict:
    """The envelope every ``--json`` document shares (``schemas/envelope.json``): ``version``,
    ``command``, ``ok``, ``error`` (null, or kind and message), ``diagnostics`` (as ``leirc
    check --json``), then the command's own fields."""
    diags = list(diagnostics) + (error.diagnostics if error is not None else [])
    err = None
    if error is not None:
        err = {"kind": error.kind, "message": error.message or (diags[0].message if diags else "failed")}
    return {"version": JSON_VERSION, "command": command, "ok": bool(ok), "error": err,
            "diagnostics": [d.to_json() for d in diags], **fields}


def print_json(doc: dict) -> None:
    print(json.dumps(doc, indent=2, allow_nan=False))


def read_or_fail(path: str) -> bytes:
    data, err = read_input(path)
    if err:
        raise CliError(err, 2, kind="io")
    return data


def check_or_fail(data: bytes, name: str, *, need_kernel: bool = True):
    """The checked file, or a :class:`CliError` (status 1) carrying its diagnostics. A file
    with no kernel at all is an error for commands that need one (it would otherwise
    "verify" or "run" vacuously)."""
    from ..lang.checker import check_text

    cf = check_text(data, name)
    if not cf.ok:
        raise CliError(None, 1, kind="diagnostics", diagnostics=cf.diagnostics, source=cf.parse.source)
    # the parser reads an empty file as an empty bare Step-TP body
    if need_kernel and all(not r.kernel.declared and not r.kernel.body for r in cf.results):
        raise CliError(f"{name}: no kernel in the file (an empty file, or only comments)", 1, kind="diagnostics")
    return cf


def load_checked(path: str):
    """Read and check a LEIR file for a command that needs a clean program: the checked
    file, or a :class:`CliError` (2 for I/O errors, 1 when the program has errors)."""
    data = read_or_fail(path)
    return check_or_fail(data, "<stdin>" if path == "-" else path), None


def select_or_fail(cf, name: Optional[str]):
    res, err = select_kernel(cf, name)
    if err:
        raise CliError(err, 2)
    return res


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


def target_kind(spec: str) -> str:
    """``llvm``, ``cuda`` or ``interp`` of a ``-t`` value (``llvm -mcpu=...`` is ``llvm``)."""
    return str(spec).split()[0] if spec else "llvm"


def add_target_argument(p, *, kinds=("llvm", "cuda"), default: str = "llvm", help: Optional[str] = None) -> None:
    """The one ``-t/--target`` option of every command that builds: ``llvm`` (this CPU, with
    the instruction-set features the OS grants: ``leirc target``), ``llvm -mcpu=NAME
    -mattr=+f,-g`` (another CPU, or features added/removed), ``cuda``, and ``interp`` where
    the command can interpret instead of building. The value stays a spec string (what
    workers receive); :func:`target_kind` gives its kind."""
    def spec(text: str) -> str:
        text = " ".join(str(text).split())
        kind = target_kind(text)
        if kind == "interp" and "interp" in kinds and text == "interp":
            return text
        if kind not in kinds:
            raise argparse.ArgumentTypeError(f"invalid choice: '{text}' (choose from {', '.join(kinds)}, or "
                                             "'llvm -mcpu=NAME -mattr=+f,-g')")
        from ..target import Target, TargetError

        try:
            t = Target.parse(text)
        except TargetError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if t.kind == "cuda" and t.arch != "sm_90":
            raise argparse.ArgumentTypeError("give the CUDA architecture with --arch, not in -t")
        return "cuda" if t.kind == "cuda" else ("llvm" if text in ("llvm", "host") else text)

    p.add_argument("-t", "--target", type=spec, default=default, metavar="TARGET",
                   help=help or f"{' | '.join(kinds)} (default {default}); 'llvm -mcpu=NAME -mattr=+f,-g' builds for "
                                "another CPU or instruction set (see `leirc target`)")


def require_runnable(target: str) -> None:
    """Refuse, before any work, a run on a target whose device this machine lacks (an
    environment problem is not a numerical verdict)."""
    target = target_kind(target)
    if target in ("llvm", "interp"):
        return
    from ..lower.device import device_available

    ok, why = device_available(target)
    if not ok:
        raise CliError(f"-t {target}: {why}; to compile for {target} without running, use "
                       f"`leirc build -t {target}` (it writes the source and library)", 2, kind="environment")


class Progress:
    """Stage lines and progress bars on stderr, as each stage runs.

    Quiet when stderr is not a terminal (logs, CI, pipes) or with ``--quiet``; notes that
    carry results (``note``) are printed in every mode. Bars are tqdm's; a bar left open by
    Ctrl-C is closed so the ``interrupted`` line starts on a fresh line."""

    def __init__(self, quiet: bool = False, stream=None):
        self.stream = stream or sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.live = not quiet and bool(isatty and isatty())
        self._bar = None

    def stage(self, msg: str) -> None:
        if self.live:
            self._write(f"leirc: {msg} ...")

    def note(self, msg: str) -> None:
        self._write(f"leirc: {msg}")

    def _write(self, line: str) -> None:
        if self._bar is not None:
            self._bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def bar(self, total: int, desc: str):
        """A context manager with ``update(n)``; a no-op object when not live."""
        if not self.live:
            return _NoBar()
        from tqdm import tqdm

        self._bar = tqdm(total=total, desc=desc, file=self.stream, leave=False, dynamic_ncols=True)
        return _Bar(self)


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int = 1, desc: Optional[str] = None, total: Optional[int] = None) -> None:
        pass


class _Bar(_NoBar):
    def __init__(self, owner: Progress):
        self.owner = owner

    def __exit__(self, *exc):
        bar, self.owner._bar = self.owner._bar, None
        if bar is not None:
            bar.close()
        return False

    def update(self, n: int = 1, desc: Optional[str] = None, total: Optional[int] = None) -> None:
        bar = self.owner._bar
        if bar is not None:
            if total is not None and total != bar.total:
                bar.total = total  # a plan known only once the work started (verify's runs)
            if desc:
                bar.set_description_str(desc, refresh=False)
            bar.update(n)


# -- argparse types: bad values are usage errors (exit 2) before any work ---------------

def _number(text: str, conv, what: str):
    try:
        v = conv(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if isinstance(v, float) and not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return v


def positive_int(text: str) -> int:
    v = _number(text, int, "a positive integer")
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return v


def non_negative_int(text: str) -> int:
    v = _number(text, int, "a non-negative integer")
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return v


def positive_float(text: str) -> float:
    v = _number(text, float, "a positive number")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return v


def non_negative_float(text: str) -> float:
    v = _number(text, float, "a non-negative number")
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative number")
    return v
