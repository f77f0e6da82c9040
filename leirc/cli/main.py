"""``leirc`` command line.

Every subcommand lives in its own module ``leirc/cli/cmd_<name>.py`` exposing
``register(subparsers)``; the module sets ``func`` on its parser. Exit codes: 0 success,
1 the input has errors (diagnostics, failed verification), 2 usage or I/O error.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__

#: subcommand modules, in the order ``leirc --help`` lists them
COMMANDS = [
    "check",
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
]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors exit 2 with a one-line message
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="leirc", description="LEIR compiler: check, format, build, run, verify and optimize LEIR kernels.")
    ap.add_argument("--version", action="version", version=f"leirc {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f".cmd_{name}", __package__)
        except ModuleNotFoundError as e:
            if e.name and e.name.endswith(f"cmd_{name}"):
                continue  # command not available in this build
            raise
        mod.register(sub)
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if not getattr(args, "func", None):
        ap.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # pragma: no cover
        return 130
    except BrokenPipeError:  # pragma: no cover - e.g. `leirc fmt x | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
