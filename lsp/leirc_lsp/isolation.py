"""Keeping the workspace out of the server's imports.

An editor starts the server in (or with access to) a folder it has just opened: a
``random.py`` or ``typing.py`` there must never be imported by the server or by any
process it starts, or opening a cloned repository would run its code (issue #33). Three
layers, each enough on its own for what it covers:

* the launch: ``leirc lsp`` replaces itself with ``python -P -m leirc_lsp`` (``-I`` before
  Python 3.11, which has no ``-P``) from ``/``; the VS Code extension starts it with
  :data:`BOOT`-like code that drops the script directory from ``sys.path`` before any
  import, from a directory of its own;
* :func:`isolate` at the start of :func:`leirc_lsp.server.main`: the current directory
  and ``''`` leave ``sys.path``, the process moves to a private empty directory (removed
  at exit), so every relative import path and every child's working directory is that
  one;
* ``PYTHONSAFEPATH=1`` in the environment that every child inherits (evaluation
  processes, the listing worker, TVM workers: ``python -m ...`` would otherwise put its
  working directory first on ``sys.path``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

#: code for ``python -c`` that starts the server with nothing of the current directory on
#: ``sys.path`` (``-c`` puts ``''`` first; ``sys`` and ``os`` are already loaded by then)
BOOT = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
        "from leirc_lsp.server import main; sys.exit(main())")

_home: list[str] = []
#: the directory the server was started in, before it moved (relative paths in the settings
#: still mean what they meant there)
launch_dir: list[str] = []


def isolate() -> str:
    """Move this process out of whatever directory it was started in (see the module
    docstring); returns the private directory it now runs in."""
    cwd = _cwd()
    if not launch_dir:
        launch_dir.append(cwd or os.path.expanduser("~"))
    # ``-m`` put the start directory first and ``-c`` put ``''`` there; an editable
    # install's .pth may list the same directory further on, legitimately: only the
    # launch's entry goes
    if sys.path and cwd and sys.path[0] == cwd:
        del sys.path[0]
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    os.environ["PYTHONSAFEPATH"] = "1"
    if not _home:
        home = tempfile.mkdtemp(prefix="leirc-lsp-")
        _home.append(home)
        atexit.register(shutil.rmtree, home, True)
    os.chdir(_home[0])
    return _home[0]


def resolve(path: str) -> str:
    """``path`` from a setting: ``~`` expanded, and relative to where the server was started
    (not to its private directory)."""
    p = os.path.expanduser(path)
    return p if os.path.isabs(p) or not launch_dir else os.path.join(launch_dir[0], p)


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the directory was removed under us: nothing of it can be imported
        return ""
