"""The state of one search in SQLite, so a search killed with ``kill -9`` resumes.

Tables: ``meta`` (the configuration, the seed, the HTAM memory snapshot the search started
from, the RNG state and frontier after the latest batch, the status), ``evaluations``
(every finished evaluation, in order, by candidate fingerprint, with the run that measured
its timing) and ``verdicts`` (whether a child beat its parent, and the interleaved re-timing
that decided it). Every write is one
transaction in WAL mode: a kill between two writes loses at most the evaluation in flight.

Resuming replays the search from its start: the algorithm, the proposers and the RNG are
deterministic given the seed, the memory snapshot and the evaluation results, so serving
the stored evaluations in place of running them reconstructs the frontier and the RNG
exactly, and the search continues where it stopped without repeating a finished
evaluation. The stored RNG state and frontier are checked against the replay.
"""

from __future__ import annotations

import json
import time
from typing import Optional

from .db import Warn, open_db, transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evaluations (seq INTEGER PRIMARY KEY AUTOINCREMENT, fingerprint TEXT NOT NULL UNIQUE,
  parent TEXT, steps TEXT NOT NULL, data TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS verdicts (child TEXT NOT NULL, parent TEXT NOT NULL, data TEXT NOT NULL,
  created REAL NOT NULL, PRIMARY KEY (child, parent));
"""


class ConfigMismatch(Exception):
    """``--resume`` of a state made with other options."""


class SearchStore:
    def __init__(self, path: str, *, warn: Optional[Warn] = None):
        self.path = path
        self.db = open_db(path, SCHEMA, warn=warn, what="search state")

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    # -- meta ------------------------------------------------------------------------
    def get(self, key: str, default=None):
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def put(self, **values) -> None:
        with transaction(self.db) as c:
            for k, v in values.items():
                c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (k, json.dumps(v, sort_keys=True)))

    def start(self, config: dict, *, resume: bool, memory_snapshot: Optional[dict] = None) -> Optional[dict]:
        """Begin (or, with ``resume``, continue) a search with ``config``. Returns the memory
        snapshot to start from (the stored one when resuming)."""
        old = self.get("config")
        if resume and old is not None:
            if old != config:
                diff = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
                raise ConfigMismatch(f"{self.path} holds a search with other options ({', '.join(diff)}); "
                                     "run without --resume to start over")
            self.put(status="running", resumed=self.get("resumed", 0) + 1)
            return self.get("memory_snapshot")
        with transaction(self.db) as c:
            c.execute("DELETE FROM evaluations")
            c.execute("DELETE FROM verdicts")
            c.execute("DELETE FROM meta")
        self.put(config=config, memory_snapshot=memory_snapshot, status="running", started=time.time(), resumed=0)
        return memory_snapshot

    # -- evaluations -----------------------------------------------------------------
    def evaluation(self, fingerprint: str) -> Optional[dict]:
        row = self.db.execute("SELECT data FROM evaluations WHERE fingerprint = ?", (fingerprint,)).fetchone()
        return None if row is None else json.loads(row[0])

    def add_evaluation(self, fingerprint: str, parent: Optional[str], steps: list, data: dict) -> None:
        with transaction(self.db) as c:
            c.execute("INSERT OR IGNORE INTO evaluations (fingerprint, parent, steps, data, created) VALUES (?, ?, ?, ?, ?)",
                      (fingerprint, parent, json.dumps(steps), json.dumps(data), time.time()))

    def pair(self, child: str, parent: str) -> Optional[dict]:
        """The stored verdict of ``child`` against ``parent`` (fingerprints)."""
        row = self.db.execute("SELECT data FROM verdicts WHERE child = ? AND parent = ?", (child, parent)).fetchone()
        return None if row is None else json.loads(row[0])

    def add_pair(self, child: str, parent: str, data: dict) -> None:
        with transaction(self.db) as c:
            c.execute("INSERT OR REPLACE INTO verdicts (child, parent, data, created) VALUES (?, ?, ?, ?)",
                      (child, parent, json.dumps(data), time.time()))

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0])

    def rows(self) -> list[dict]:
        return [{"seq": s, "fingerprint": f, "parent": p, "steps": json.loads(st), "evaluation": json.loads(d)}
                for s, f, p, st, d in self.db.execute(
                    "SELECT seq, fingerprint, parent, steps, data FROM evaluations ORDER BY seq")]

    def checkpoint(self, *, evaluations: int, rng_state, frontier: list) -> None:
        """The RNG state and frontier after ``evaluations`` evaluations."""
        self.put(checkpoint={"evaluations": evaluations, "rng": _rng_json(rng_state), "frontier": frontier})


def _rng_json(state) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def rng_state_from_json(data) -> tuple:
    version, internal, gauss = data
    return (version, tuple(internal), gauss)
