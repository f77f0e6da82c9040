"""SQLite files of the search (state and memory): WAL, one transaction per change, and a
corrupt file moved aside and rebuilt with a warning instead of a dead search."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from typing import Callable, Optional

from ..io import open_sqlite_when_free, sqlite_busy

Warn = Callable[[str], None]
BUSY_TIMEOUT_S = 60.0


def _connect(path: str) -> sqlite3.Connection:
    c = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)  # transactions are explicit
    try:
        c.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if path != ":memory:":
            c.execute("PRAGMA journal_mode = WAL")
        c.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        c.close()
        raise
    return c


def _healthy(c: sqlite3.Connection) -> bool:
    row = c.execute("PRAGMA quick_check").fetchone()
    return row is not None and row[0] == "ok"


def move_aside(path: str) -> str:
    """Rename a damaged database (and its WAL/SHM files) out of the way; returns the new name."""
    aside = f"{path}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.replace(path + suffix, aside + suffix)
    return aside


def _open_checked(path: str, schema: str) -> sqlite3.Connection:
    c = None
    try:
        c = _connect(path)
        if not _healthy(c):
            raise sqlite3.DatabaseError("integrity check failed")
        c.executescript(schema)
        return c
    except BaseException:
        if c is not None:
            with contextlib.suppress(sqlite3.Error):  # closing a broken handle may fail too
                c.close()
        raise


def open_db(path: str, schema: str, *, warn: Optional[Warn] = None, what: str = "database") -> sqlite3.Connection:
    """Open (creating) ``path`` with ``schema`` (CREATE ... IF NOT EXISTS statements). A file
    that is not a healthy SQLite database is moved aside and a fresh one is created; one that
    another process holds is waited for, never taken for damage."""
    if path != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    for attempt in range(2):
        try:
            return open_sqlite_when_free(lambda: _open_checked(path, schema), BUSY_TIMEOUT_S)
        except sqlite3.DatabaseError as e:
            if sqlite_busy(e) or attempt or path == ":memory:":
                raise
            aside = move_aside(path)
            if warn is not None:
                warn(f"warning: the {what} {path} is corrupt ({e}); moved to {aside} and rebuilt")
    raise AssertionError("unreachable")


@contextlib.contextmanager
def transaction(c: sqlite3.Connection):
    """One write transaction (``BEGIN IMMEDIATE``: writers queue instead of failing)."""
    c.execute("BEGIN IMMEDIATE")
    try:
        yield c
    except BaseException:
        c.execute("ROLLBACK")
        raise
    c.execute("COMMIT")
