"""The on-disk prompt -> response cache: SQLite, shared safely by threads and processes.

A search that asked a model once can be replayed offline from this file, so its trace is
reproducible without the endpoint. The key is a SHA-256 of the canonical JSON of everything
that decides an answer for a deterministic endpoint (model, messages, temperature,
max_tokens, seed); the base URL is deliberately not part of it, so a cache recorded against
one server replays against none. Nothing secret is stored: no API key, no headers.

SQLite gives the atomic writes (one transaction per ``put``) and cross-process safety (WAL,
``busy_timeout``, and a wait while another process is switching a new file to WAL). A file that is not a readable database is moved aside, with a warning,
and a fresh cache is built in its place: a cache is an optimization, losing it must not stop
a search.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from ..io import open_sqlite_when_free

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    truncated INTEGER NOT NULL,
    estimated INTEGER NOT NULL,
    created REAL NOT NULL
);
"""


def cache_key(model: str, messages: list[dict], temperature: float, max_tokens: int, seed: int) -> str:
    return hashlib.sha256(_request_json(model, messages, temperature, max_tokens, seed).encode("utf-8")).hexdigest()


def _request_json(model, messages, temperature, max_tokens, seed) -> str:
    # temperature as float so 0 and 0.0 are one key
    return json.dumps({"model": model, "messages": messages, "temperature": float(temperature),
                       "max_tokens": int(max_tokens), "seed": int(seed)},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class CacheError(Exception):
    """The cache file cannot be opened (locked for too long, unwritable): a clear message, no traceback."""


class _Corrupt(Exception):
    pass


@dataclass(frozen=True)
class CachedResponse:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    truncated: bool
    estimated: bool
    created: float


class PromptCache:
    def __init__(self, path: str, *, log: Optional[Callable[[str], None]] = None):
        self.path = os.fspath(path)
        self._log = log or (lambda _msg: None)
        self._lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None
        self._open()

    # one connection per cache object, used under a lock: sqlite3 connections are not safe to
    # share between threads unguarded, and the client's worker threads all write here
    def _connect(self) -> sqlite3.Connection:
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                raise sqlite3.DatabaseError(f"cache schema {row[0]}, expected {SCHEMA_VERSION}")
            conn.execute("SELECT count(*) FROM responses").fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

    def _open(self) -> None:
        try:
            self._conn = self._try_connect()
        except _Corrupt as first:
            try:
                # another process may have rebuilt it meanwhile: look again before moving anything
                self._conn = self._try_connect()
                return
            except _Corrupt:
                pass
            aside = self._move_aside()
            self._log(f"warning: the LLM cache {self.path} is not a usable database ({first}); "
                      f"moved it to {aside} and started an empty cache")
            self._conn = self._try_connect()

    def _try_connect(self) -> sqlite3.Connection:
        try:
            return open_sqlite_when_free(self._connect, BUSY_TIMEOUT_MS / 1000)
        except sqlite3.OperationalError as e:
            # locked, unwritable, no such directory: the file may be fine, so leave it alone
            raise CacheError(f"cannot open the LLM cache {self.path}: {e}") from None
        except sqlite3.DatabaseError as e:
            raise _Corrupt(str(e)) from None
        except OSError as e:
            raise CacheError(f"cannot open the LLM cache {self.path}: {e.strerror or e}") from None

    def _move_aside(self) -> str:
        n = 0
        while True:
            aside = f"{self.path}.corrupt" + (f".{n}" if n else "")
            if not os.path.exists(aside):
                break
            n += 1
        for suffix in ("", "-wal", "-shm"):  # stale journals would be replayed into the new file
            try:
                os.replace(self.path + suffix, aside + suffix)
            except FileNotFoundError:
                pass
        return aside

    def get(self, key: str) -> Optional[CachedResponse]:
        with self._lock:
            row = self._db().execute(
                "SELECT text, model, prompt_tokens, completion_tokens, truncated, estimated, created "
                "FROM responses WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        return CachedResponse(row[0], row[1], int(row[2]), int(row[3]), bool(row[4]), bool(row[5]), float(row[6]))

    def put(self, key: str, *, model: str, messages: list[dict], temperature: float, max_tokens: int, seed: int,
            text: str, prompt_tokens: int, completion_tokens: int, truncated: bool, estimated: bool) -> None:
        request = _request_json(model, messages, temperature, max_tokens, seed)
        with self._lock:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?,?,?)",
                           (key, model, request, text, int(prompt_tokens), int(completion_tokens),
                            int(truncated), int(estimated), time.time()))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT count(*) FROM responses").fetchone()[0])

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"the LLM cache {self.path} is closed")
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __repr__(self) -> str:
        return f"PromptCache({self.path!r})"
