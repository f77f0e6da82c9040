"""``leirc lsp [--stdio | --tcp PORT]``: start the language server.

The server is the separate package ``leirc_lsp`` (``lsp/``, extra ``[lsp]``), which
wraps :mod:`leirc.ide`; leirc itself never imports it. This command replaces the
process with ``python -P -m leirc_lsp`` (same interpreter, same arguments; ``-I`` before
Python 3.11) started from ``/``, so the editor talks to the server directly over the
inherited stdin/stdout and nothing in the folder the editor opened (a ``random.py``, a
``typing.py``) is ever on the server's import path; the server then moves to a private
directory of its own (``leirc_lsp.isolation``).
"""

from __future__ import annotations

import importlib.util
import os
import sys

from .common import CliError


def register(sub) -> None:
    p = sub.add_parser("lsp", help="run the language server (stdio; --tcp PORT)",
                       description="Run the LEIR language server: diagnostics as you type, hover, navigation, rename, "
                                   "strategy code actions, suggestions and inline verification. Talks LSP over stdio "
                                   "unless --tcp is given. Needs the [lsp] extra (pygls).")
    p.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default; editors pass it)")
    p.add_argument("--tcp", type=int, metavar="PORT", help="listen on HOST:PORT instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="address for --tcp (default 127.0.0.1)")
    p.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.set_defaults(func=run)


def run(args) -> int:
    missing = [m for m in ("leirc_lsp", "pygls") if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(f"the language server needs {' and '.join(missing)}: pip install 'leirc[lsp]'", 2,
                       kind="environment")
    # -P: the start directory is not put on sys.path (3.11+); -I also drops it (and the
    # user's site and PYTHON* variables, which 3.10 then has to do without)
    safe = "-P" if sys.version_info >= (3, 11) else "-I"
    argv = [sys.executable, safe, "-m", "leirc_lsp", "--log-level", args.log_level]
    if args.tcp is not None:
        argv += ["--tcp", str(args.tcp), "--host", args.host]
    sys.stdout.flush()
    os.chdir(os.path.abspath(os.sep))
    os.environ["PYTHONSAFEPATH"] = "1"  # and for every process the server starts
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover - execv does not return
