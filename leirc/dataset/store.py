"""The dataset's persistent state: ``DIR/dataset.sqlite``.

One row per *job* (a source, a shape instance, one strategy step), written by the
generating process alone (workers and cluster nodes hand their records back to it): a job's
record in its own transaction when the job runs in that process, a unit's records in one
transaction when they come back from a worker or a node, so a run killed at any moment (SIGKILL included) keeps every stored record and
a rerun skips exactly those. The database is in WAL mode: readers (``stats``, a test
watching a run) never block the writer. ``status`` is
``ok`` for a verified record and the reason otherwise (``mismatch``, ``noop``,
``duplicate``, ``not_applicable``, ``build``, ``crash``...): rejected jobs stay counted, so
statistics can say what was dropped and why. The ``meta`` table holds the generation
options; a rerun or a merge with other options is refused instead of mixing two datasets.

The JSONL files next to it (``records.jsonl``, ``rejected.jsonl``) are exports of this
table in job order, written atomically at the end of a run (and by ``merge``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Iterable, Iterator, Optional

from ..io import write_atomic

DB_NAME = "dataset.sqlite"
RECORDS = "records.jsonl"
REJECTED = "rejected.jsonl"

#: fields that differ between two runs of the same generation (measurements, wall times, the
#: node that ran the job and its target fingerprint); everything else is a function of the
#: sources and the options
VOLATILE = ("timing", "timings", "node")


class StoreError(Exception):
    """The directory holds another dataset (other options) or an unreadable database."""


class Store:
    def __init__(self, directory: str, *, create: bool = True):
        if create:
            os.makedirs(directory, exist_ok=True)
        elif not os.path.isfile(os.path.join(directory, DB_NAME)):
            raise StoreError(f"{directory}: no {DB_NAME} (not a dataset directory)")
        self.directory = directory
        self.path = os.path.join(directory, DB_NAME)
        try:
            with self._connect() as c:
                c.execute("PRAGMA journal_mode=WAL")
                c.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                c.execute("CREATE TABLE IF NOT EXISTS jobs (key TEXT PRIMARY KEY, ord TEXT NOT NULL, "
                          "unit TEXT NOT NULL, status TEXT NOT NULL, strategy TEXT NOT NULL, level TEXT NOT NULL, "
                          "record TEXT NOT NULL)")
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: {e}") from None

    def _connect(self) -> sqlite3.Connection:
        c = sqlite3.connect(self.path, timeout=120.0)
        c.execute("PRAGMA synchronous=FULL")  # a committed job survives a power cut, not only SIGKILL
        return c

    # -- options ---------------------------------------------------------------------
    def meta(self) -> dict:
        c = self._connect()
        try:
            return {k: json.loads(v) for k, v in c.execute("SELECT key, value FROM meta")}
        finally:
            c.close()

    def claim(self, options: dict) -> None:
        """Record ``options`` for a new dataset, or check that they equal the recorded ones."""
        have = self.meta().get("options")
        if have is None:
            c = self._connect()
            try:
                with c:
                    c.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('options', ?)",
                              (json.dumps(options, sort_keys=True),))
            finally:
                c.close()
            have = self.meta()["options"]
        if have != json.loads(json.dumps(options, sort_keys=True)):
            diff = sorted(k for k in set(have) | set(options) if have.get(k) != options.get(k))
            raise StoreError(f"{self.directory} holds a dataset generated with other options "
                             f"({', '.join(diff)}); use another --out directory")

    # -- jobs ------------------------------------------------------------------------
    def done(self) -> set:
        c = self._connect()
        try:
            return {k for (k,) in c.execute("SELECT key FROM jobs")}
        finally:
            c.close()

    def put(self, record: dict) -> None:
        self.put_many([record])

    def put_many(self, records: list) -> None:
        """Store ``records`` in one transaction (one sync to disk): a unit's records arrive
        together from a worker or a node, and are kept all or none."""
        c = self._connect()
        try:
            with c:
                c.executemany("INSERT OR REPLACE INTO jobs (key, ord, unit, status, strategy, level, record) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?)",
                              [(r["job"], r["order"], r["unit"], r["status"], r["strategy"], r["level"],
                                json.dumps(r, sort_keys=True)) for r in records])
        finally:
            c.close()

    def records(self, status: Optional[str] = None, unit: Optional[str] = None) -> Iterator[dict]:
        """Records in job order; ``status="ok"`` for the dataset, ``"!ok"`` for the rejected."""
        c = self._connect()
        try:
            where, args = [], []
            if status == "!ok":
                where.append("status != 'ok'")
            elif status is not None:
                where.append("status = ?")
                args.append(status)
            if unit is not None:
                where.append("unit = ?")
                args.append(unit)
            q = "SELECT record FROM jobs" + (" WHERE " + " AND ".join(where) if where else "")
            for (r,) in c.execute(q + " ORDER BY ord, key", tuple(args)):
                yield json.loads(r)
        finally:
            c.close()

    def counts(self) -> dict:
        c = self._connect()
        try:
            return {s: n for s, n in c.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status")}
        finally:
            c.close()

    def __len__(self) -> int:
        c = self._connect()
        try:
            return int(c.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        finally:
            c.close()

    # -- exports ---------------------------------------------------------------------
    def export_jsonl(self) -> tuple[int, int]:
        """Write ``records.jsonl`` (verified) and ``rejected.jsonl`` atomically; (n ok, n rejected)."""
        ok = list(self.records("ok"))
        bad = list(self.records("!ok"))
        write_atomic(os.path.join(self.directory, RECORDS), jsonl(ok))
        write_atomic(os.path.join(self.directory, REJECTED), jsonl(bad))
        return len(ok), len(bad)


def jsonl(records: Iterable[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)


def read_jsonl(path: str) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except ValueError as e:
                raise StoreError(f"{path}:{n}: not a JSON record: {e}") from None
    return out


def stable(record: dict) -> dict:
    """``record`` without the fields that change from run to run (:data:`VOLATILE`, and the
    measured effect inside the reasoning): what determinism and merges compare."""
    out = {k: v for k, v in record.items() if k not in VOLATILE}
    if isinstance(out.get("reasoning"), dict):
        rs = dict(out["reasoning"])
        rs.pop("measured", None)
        out["reasoning"] = rs
    return out


__all__ = ["Store", "StoreError", "DB_NAME", "RECORDS", "REJECTED", "VOLATILE", "jsonl", "read_jsonl", "stable"]
