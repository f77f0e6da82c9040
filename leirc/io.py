"""Writing files without losing anything: one atomic writer for every command.

A command that is killed half-way must leave either the old file or the new one, never a
truncated mix, so every writer stages the bytes in a temporary file in the target's
directory and renames it over the target (``os.replace`` is atomic on POSIX within one
file system). Special files (``/dev/null``, FIFOs, character devices) are written in place:
renaming over them would replace the device node with a regular file. A symlink is
resolved first, so its target is updated and the link survives. An existing file keeps its
permission bits, and its owner and group where this process may set them (root editing
another user's file).
"""

from __future__ import annotations

import contextlib
import io as _stdio
import os
import sqlite3
import stat
import tempfile
import time
from typing import Callable, TypeVar

_T = TypeVar("_T")


def write_atomic(path: str, data: bytes | str, *, mode: int | None = None) -> None:
    """Write ``data`` (str is UTF-8 encoded) to ``path`` atomically.

    ``mode``: permission bits of a newly created file (default 0644 less the umask is what
    ``open`` gives; an existing regular file keeps its own bits)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        # a device, FIFO or socket: the caller asked to write *to* it, not to replace it
        with open(target, "wb") as f:
            f.write(data)
        return
    directory = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(prefix=".leirc-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if st is not None:
            if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                # only root (or a member giving to its own group) may; otherwise the file
                # becomes the writer's, as with any editor that saves by renaming
                with contextlib.suppress(PermissionError):
                    os.chown(tmp, st.st_uid, st.st_gid)
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, (0o644 if mode is None else mode) & ~umask)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):  # the failure may have come before mkstemp's file
            os.unlink(tmp)
        raise


def save_npz(path: str, arrays: dict) -> None:
    """``np.savez`` through :func:`write_atomic` (no pickles)."""
    import numpy as np

    buf = _stdio.BytesIO()
    np.savez(buf, **arrays)
    write_atomic(path, buf.getvalue())


def load_npz(path: str) -> dict:
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def sqlite_busy(error: BaseException) -> bool:
    """Whether ``error`` says another connection holds the database (worth waiting for), as
    opposed to a file that is damaged or not a database at all."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error) or "busy" in str(error)


def open_sqlite_when_free(connect: Callable[[], _T], timeout_s: float) -> _T:
    """Call ``connect`` until it does not fail with a busy database, for up to ``timeout_s``.

    Switching a new file to WAL needs the database to itself, and SQLite answers "locked" at
    once there instead of calling its busy handler, so processes that open one fresh database
    together would otherwise fail (or, worse, take the lock for damage). ``connect`` must
    close what it opened before raising."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            return connect()
        except sqlite3.OperationalError as e:
            if not sqlite_busy(e) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def python_module(module: str, *args: str) -> list:
    """The command line that runs ``python -m module args`` in a child process without the
    current directory on its import path (``-P``, Python 3.11+): a worker started from a folder
    holding ``random.py`` or ``typing.py`` must not import them (a cloned repository would run
    its code in leirc's workers)."""
    import sys

    return [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", module, *args]

