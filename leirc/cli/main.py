"""``leirc`` command line.

Every subcommand lives in its own module ``leirc/cli/cmd_<name>.py`` exposing
``register(subparsers)``; the module sets ``func`` on its parser. Exit codes: 0 success,
1 the input has errors (diagnostics, failed verification), 2 usage, I/O or environment
error (a missing GPU), 3 an internal error (a leirc bug: reported in one line, never as a
traceback), 130 interrupted.

A command reports a failure by raising :class:`leirc.cli.common.CliError`; :func:`main`
prints it (in ``--json`` mode as the command's JSON document, see ``schemas/``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
from typing import Optional

from .. import __version__
from .common import CliError, json_document, print_diagnostics, print_json

#: subcommand modules, in the order ``leirc --help`` lists them
COMMANDS = [
    "check",
    "explain",
    "fmt",
    "convert",
    "import",
    "build",
    "run",
    "verify",
    "bench",
    "strategies",
    "apply",
    "simplify",
    "memory",
    "suggest",
    "dataset",
    "tune",
    "lsp",
    "target",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors exit 2 with a one-line message
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``only`` (the command being run: importing every
    command's module would pull the IDE layer, numpy and the engine into ``leirc verify``'s
    start, before its worker could start importing TVM)."""
    ap = _Parser(prog="leirc", description="LEIR compiler: check, format, build, run, verify and optimize LEIR kernels.")
    ap.add_argument("--version", action="version", version=f"leirc {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in ([only] if only in COMMANDS else COMMANDS):
        try:
            mod = importlib.import_module(f".cmd_{name}", __package__)
        except ModuleNotFoundError as e:
            if e.name and e.name.endswith(f"cmd_{name}"):
                continue  # command not available in this build
            raise
        mod.register(sub)
    ap.subcommands = sub.choices  # name -> its parser (usage errors are reported by the command's own)
    return ap


def main(argv=None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        # building the parser imports the command's module (and the language, the engine...):
        # a Ctrl-C there is an interruption like any other, not a traceback
        ap = build_parser(words[0] if words else None)
    except KeyboardInterrupt:
        return interrupted()
    args, extra = ap.parse_known_args(argv)
    if extra:
        # `leirc build --bogus k.leir`: the command's usage (its options), not the top level's
        sub = getattr(ap, "subcommands", {}).get(getattr(args, "command", None) or "", ap)
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        ap.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        return report(args, e)
    except KeyboardInterrupt:
        # partial results were printed as they came; the sessions' directories are removed
        # by their ``with`` blocks on the way out
        return interrupted()
    except BrokenPipeError:  # pragma: no cover - e.g. `leirc fmt x | head`
        with_devnull_stdout()
        return 0
    except OSError as e:  # a file operation no command anticipated: still the user's path and reason
        where = f"{e.filename}: " if e.filename else ""
        return report(args, CliError(f"{where}{e.strerror or e}", 2, kind="io"))
    except Exception as e:  # noqa: BLE001 - a leirc bug: one line with where it happened, not a traceback
        frames = traceback.extract_tb(e.__traceback__)
        at = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
        return report(args, CliError(f"internal error: {type(e).__name__}: {e}{at}; please report it", 3,
                                     kind="internal"))


def interrupted() -> int:
    """Report a handled Ctrl-C; the status is 130.

    CPython remembers a KeyboardInterrupt that left an ``exec``/``eval`` of a string (every
    dataclass created during an import the Ctrl-C interrupted is one) even when the program
    caught it later, and ``python -m`` then ends by killing itself with SIGINT instead of
    returning our status. Evaluating a string successfully clears that memory (CPython's
    ``run_eval_code_obj`` resets it first thing)."""
    print("leirc: interrupted", file=sys.stderr)
    exec("pass")  # noqa: S102 - a constant string: only its side effect on the interpreter matters
    return 130


def report(args, e: CliError) -> int:
    """Print a command's failure: diagnostics and ``leirc: error: ...`` on stderr, and in
    ``--json`` mode the command's JSON document on stdout (so a script always gets one)."""
    if e.diagnostics:
        print_diagnostics(e.diagnostics, e.source)
    if e.message:
        print(f"leirc: error: {e.message}", file=sys.stderr)
    if getattr(args, "json", False) is True:
        print_json(json_document(args.command, False, error=e))
    return e.status


def with_devnull_stdout() -> None:
    # the reader went away: later writes (and the interpreter's final flush) must not raise
    with contextlib.suppress(OSError, ValueError):  # stdout is not a file descriptor (captured)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
