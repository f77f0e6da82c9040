"""HTAM memory: a hierarchical transition graph of optimization experience, in SQLite.

* **global nodes** = the directions of :mod:`leirc.search.directions` with a static prior
  per target and running statistics (tries, successes, failures, summed log-gain);
* **local nodes** = strategies under their direction with positive and negative evidence;
* **transition edges** direction -> direction with the gains and failures of a step of the
  second direction taken after the first;
* **winning traces** with a kernel signature, for schedule reuse (:mod:`leirc.search.reuse`).

The next direction is chosen from the recent prefix of directions ``p_1..p_m``:
``score(g) = prior(g) + utility(g) + sum_j w_j * U(p_j -> g)`` with attention-like weights
``w_j`` (softmax over ``-decay * age_j + log(1 + evidence_j)``: recent and well-supported
transitions weigh more), then a softmax policy with a temperature (high = explore).

Every evaluation updates the memory (:meth:`Memory.record`). On disk, updates are
increments inside one ``BEGIN IMMEDIATE`` transaction, so concurrent searches add up
instead of overwriting each other; a process keeps its own view (the snapshot it loaded plus
its own updates), so a search stays deterministic while another one writes.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from typing import Iterable, Optional

from .db import Warn, open_db, transaction
from .directions import DIRECTIONS, direction_of, priors

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS directions (target TEXT NOT NULL, name TEXT NOT NULL, tries INTEGER NOT NULL DEFAULT 0,
  successes INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0, gain REAL NOT NULL DEFAULT 0,
  PRIMARY KEY (target, name));
CREATE TABLE IF NOT EXISTS local (target TEXT NOT NULL, strategy TEXT NOT NULL, direction TEXT NOT NULL,
  tries INTEGER NOT NULL DEFAULT 0, positive INTEGER NOT NULL DEFAULT 0, negative INTEGER NOT NULL DEFAULT 0,
  gain REAL NOT NULL DEFAULT 0, PRIMARY KEY (target, strategy));
CREATE TABLE IF NOT EXISTS edges (target TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL,
  tries INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0, gain REAL NOT NULL DEFAULT 0,
  PRIMARY KEY (target, src, dst));
CREATE TABLE IF NOT EXISTS traces (id INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL, kernel TEXT NOT NULL,
  structure TEXT NOT NULL, signature TEXT NOT NULL, fingerprint TEXT NOT NULL, speedup REAL NOT NULL,
  steps TEXT NOT NULL, created REAL NOT NULL, UNIQUE (target, fingerprint, steps));
"""

START = "<start>"  # the source of the first edge of a trajectory
FAIL_PENALTY = 0.15  # a failed step counts as this much lost log-gain
POSITION_DECAY = 0.7
#: weight of the cost model's log-predicted gain in a direction's score (:meth:`Memory.direction_scores`)
MODEL_WEIGHT = 1.0
MEMORY_FILE = "memory.sqlite"


def default_path() -> str:
    """``$XDG_CACHE_HOME/leirc/memory.sqlite`` (``~/.cache`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "leirc", MEMORY_FILE)


@dataclass
class Stat:
    tries: int = 0
    good: int = 0
    bad: int = 0
    gain: float = 0.0

    def utility(self) -> float:
        """Mean log-gain, failures penalized, shrunk toward 0 with little evidence."""
        return (self.gain - FAIL_PENALTY * self.bad) / (self.tries + 2)

    def to_json(self) -> dict:
        return {"tries": self.tries, "good": self.good, "bad": self.bad, "gain": round(self.gain, 6)}


class Memory:
    """The HTAM memory of one target. ``path=None`` keeps it in this process only."""

    def __init__(self, path: Optional[str] = None, *, target: str = "llvm", warn: Optional[Warn] = None):
        from ..target import target_of

        self.path = path
        self.target_spec = target
        #: rows are kept per target fingerprint ("llvm:3d4c95f05a27b9b5"): what helped on one
        #: machine or instruction set is not silently reused on another (``import`` is the
        #: explicit way to carry it over)
        t = target_of(target)
        self.kind = t.kind
        self.target = f"{t.kind}:{t.fingerprint}"
        self.priors = priors(self.kind)
        self.directions: dict[str, Stat] = {d: Stat() for d in DIRECTIONS}
        self.local: dict[str, tuple[str, Stat]] = {}
        self.edges: dict[tuple[str, str], Stat] = {}
        self.db = open_db(path, SCHEMA, warn=warn, what="memory database") if path else None
        if self.db is not None:
            self._load()

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    # -- persistence -----------------------------------------------------------------
    def _load(self) -> None:
        t = self.target
        for name, tries, good, bad, gain in self.db.execute(
                "SELECT name, tries, successes, failures, gain FROM directions WHERE target = ?", (t,)):
            self.directions[name] = Stat(tries, good, bad, gain)
        for strat, d, tries, good, bad, gain in self.db.execute(
                "SELECT strategy, direction, tries, positive, negative, gain FROM local WHERE target = ?", (t,)):
            self.local[strat] = (d, Stat(tries, good, bad, gain))
        for src, dst, tries, bad, gain in self.db.execute(
                "SELECT src, dst, tries, failures, gain FROM edges WHERE target = ?", (t,)):
            self.edges[(src, dst)] = Stat(tries, tries - bad, bad, gain)

    def snapshot(self) -> dict:
        """The in-process view as JSON (a search stores it to resume deterministically)."""
        return {"target": self.target,
                "directions": {k: v.to_json() for k, v in self.directions.items()},
                "local": {k: {"direction": d, **s.to_json()} for k, (d, s) in self.local.items()},
                "edges": [{"src": a, "dst": b, **s.to_json()} for (a, b), s in sorted(self.edges.items())]}

    def restore(self, snap: dict) -> None:
        """Replace the in-process view by a :meth:`snapshot` (the file is not touched)."""
        self.directions = {d: Stat() for d in DIRECTIONS}
        for k, v in snap.get("directions", {}).items():
            self.directions[k] = Stat(v["tries"], v["good"], v["bad"], v["gain"])
        self.local = {k: (v["direction"], Stat(v["tries"], v["good"], v["bad"], v["gain"]))
                      for k, v in snap.get("local", {}).items()}
        self.edges = {(e["src"], e["dst"]): Stat(e["tries"], e["good"], e["bad"], e["gain"])
                      for e in snap.get("edges", [])}

    # -- learning --------------------------------------------------------------------
    def record(self, prefix: Iterable[str], strategy: str, gain: Optional[float], *, persist: bool = True) -> None:
        """One evaluated step of ``strategy`` after the directions ``prefix`` (oldest first).
        ``gain`` = log(parent time / child time); None for a failed candidate (illegal,
        crash, mismatch...). ``persist=False`` updates only this process's view (a resumed
        search replaying evaluations that are already counted on disk)."""
        direction = direction_of(strategy)
        prefix = list(prefix)
        src = prefix[-1] if prefix else START
        ok = gain is not None
        g = float(gain) if ok else 0.0
        good = 1 if ok and g > 0 else 0
        bad = 0 if ok and g >= 0 else 1
        for st in (self.directions.setdefault(direction, Stat()), self.local.setdefault(strategy, (direction, Stat()))[1],
                   self.edges.setdefault((src, direction), Stat())):
            st.tries += 1
            st.good += good
            st.bad += bad
            st.gain += g
        if not persist or self.db is None:
            return
        t = self.target
        with transaction(self.db) as c:
            c.execute("INSERT INTO directions (target, name, tries, successes, failures, gain) VALUES (?, ?, 1, ?, ?, ?) "
                      "ON CONFLICT (target, name) DO UPDATE SET tries = tries + 1, successes = successes + excluded.successes, "
                      "failures = failures + excluded.failures, gain = gain + excluded.gain", (t, direction, good, bad, g))
            c.execute("INSERT INTO local (target, strategy, direction, tries, positive, negative, gain) VALUES (?, ?, ?, 1, ?, ?, ?) "
                      "ON CONFLICT (target, strategy) DO UPDATE SET tries = tries + 1, positive = positive + excluded.positive, "
                      "negative = negative + excluded.negative, gain = gain + excluded.gain",
                      (t, strategy, direction, good, bad, g))
            c.execute("INSERT INTO edges (target, src, dst, tries, failures, gain) VALUES (?, ?, ?, 1, ?, ?) "
                      "ON CONFLICT (target, src, dst) DO UPDATE SET tries = tries + 1, failures = failures + excluded.failures, "
                      "gain = gain + excluded.gain", (t, src, direction, bad, g))

    # -- choosing --------------------------------------------------------------------
    def direction_scores(self, prefix: Iterable[str], allowed: Optional[Iterable[str]] = None,
                         evidence: Optional[dict] = None) -> dict[str, float]:
        """Prefix-aware, position-weighted score of each candidate direction, plus ``evidence``
        (direction -> log of the best speedup the cost model predicts for one of its steps on
        this program): a cold memory then starts where the model sees the most, and the
        measured utilities take over as they accumulate."""
        prefix = [START] + list(prefix)
        recent = prefix[-4:]
        cands = list(allowed) if allowed is not None else list(DIRECTIONS)
        out = {}
        for g in cands:
            logits, utils = [], []
            for age, src in enumerate(reversed(recent)):
                e = self.edges.get((src, g))
                n = e.tries if e else 0
                logits.append(-POSITION_DECAY * age + math.log1p(n))
                utils.append(e.utility() if e else 0.0)
            mx = max(logits)
            ws = [math.exp(x - mx) for x in logits]
            z = sum(ws)
            transition = sum(w * u for w, u in zip(ws, utils)) / z
            out[g] = self.priors.get(g, 0.0) + self.directions.get(g, Stat()).utility() + 4.0 * transition
            if evidence:
                out[g] += MODEL_WEIGHT * evidence.get(g, 0.0)
        return out

    def policy(self, prefix: Iterable[str], temperature: float = 0.5,
               allowed: Optional[Iterable[str]] = None, evidence: Optional[dict] = None) -> dict[str, float]:
        """Softmax over :meth:`direction_scores` (temperature > 0)."""
        scores = self.direction_scores(prefix, allowed, evidence)
        if not scores:
            return {}
        t = max(1e-3, float(temperature))
        mx = max(scores.values())
        ws = {g: math.exp((s - mx) / t) for g, s in scores.items()}
        z = sum(ws.values())
        return {g: w / z for g, w in ws.items()}

    def choose_direction(self, prefix, rng, temperature: float = 0.5, allowed=None, evidence=None) -> Optional[str]:
        pol = self.policy(prefix, temperature, allowed, evidence)
        if not pol:
            return None
        names = sorted(pol)  # a fixed order: the same draw picks the same direction
        return rng.choices(names, weights=[pol[n] for n in names], k=1)[0]

    def strategy_score(self, strategy: str) -> float:
        """Local evidence of a strategy: its utility (positive vs negative outcomes)."""
        got = self.local.get(strategy)
        return got[1].utility() if got else 0.0

    # -- traces (schedule reuse) ------------------------------------------------------
    def add_trace(self, kernel: str, structure: str, signature: dict, fingerprint: str, speedup: float,
                  steps: list) -> None:
        if self.db is None:
            self._traces = getattr(self, "_traces", [])
            self._traces.append({"kernel": kernel, "structure": structure, "signature": signature,
                                 "fingerprint": fingerprint, "speedup": speedup, "steps": steps})
            return
        with transaction(self.db) as c:
            c.execute("INSERT OR IGNORE INTO traces (target, kernel, structure, signature, fingerprint, speedup, steps, "
                      "created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      (self.target, kernel, structure, json.dumps(signature, sort_keys=True), fingerprint,
                       float(speedup), json.dumps(steps, sort_keys=True), time.time()))

    def traces(self, structure: Optional[str] = None) -> list[dict]:
        if self.db is None:
            return [t for t in getattr(self, "_traces", []) if structure is None or t["structure"] == structure]
        q = "SELECT kernel, structure, signature, fingerprint, speedup, steps FROM traces WHERE target = ?"
        args: tuple = (self.target,)
        if structure is not None:
            q += " AND structure = ?"
            args += (structure,)
        rows = self.db.execute(q + " ORDER BY speedup DESC, id", args).fetchall()
        return [{"kernel": k, "structure": s, "signature": json.loads(sig), "fingerprint": fp, "speedup": sp,
                 "steps": json.loads(st)} for k, s, sig, fp, sp, st in rows]

    # -- export / import / reset / show -----------------------------------------------------
    def export(self) -> dict:
        return {"version": 1, "memory": self.snapshot(), "traces": self.traces()}

    def import_(self, data: dict) -> int:
        """Add the statistics and traces of an export (increments, like :meth:`record`)."""
        if not isinstance(data, dict) or data.get("version") != 1 or "memory" not in data:
            raise ValueError("not a leirc memory export (expected {\"version\": 1, \"memory\": ...})")
        snap = data["memory"]
        target = self.target  # an explicit import: the rows join this target's memory
        n = 0
        if self.db is None:
            raise ValueError("import needs a memory file")
        with transaction(self.db) as c:
            for name, s in snap.get("directions", {}).items():
                c.execute("INSERT INTO directions (target, name, tries, successes, failures, gain) VALUES (?, ?, ?, ?, ?, ?) "
                          "ON CONFLICT (target, name) DO UPDATE SET tries = tries + excluded.tries, successes = "
                          "successes + excluded.successes, failures = failures + excluded.failures, gain = gain + excluded.gain",
                          (target, name, int(s["tries"]), int(s["good"]), int(s["bad"]), float(s["gain"])))
                n += 1
            for strat, s in snap.get("local", {}).items():
                c.execute("INSERT INTO local (target, strategy, direction, tries, positive, negative, gain) VALUES "
                          "(?, ?, ?, ?, ?, ?, ?) ON CONFLICT (target, strategy) DO UPDATE SET tries = tries + excluded.tries, "
                          "positive = positive + excluded.positive, negative = negative + excluded.negative, "
                          "gain = gain + excluded.gain",
                          (target, strat, s["direction"], int(s["tries"]), int(s["good"]), int(s["bad"]), float(s["gain"])))
                n += 1
            for e in snap.get("edges", []):
                c.execute("INSERT INTO edges (target, src, dst, tries, failures, gain) VALUES (?, ?, ?, ?, ?, ?) "
                          "ON CONFLICT (target, src, dst) DO UPDATE SET tries = tries + excluded.tries, "
                          "failures = failures + excluded.failures, gain = gain + excluded.gain",
                          (target, e["src"], e["dst"], int(e["tries"]), int(e["bad"]), float(e["gain"])))
                n += 1
            for t in data.get("traces", []):
                c.execute("INSERT OR IGNORE INTO traces (target, kernel, structure, signature, fingerprint, speedup, "
                          "steps, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (target, t["kernel"], t["structure"], json.dumps(t["signature"], sort_keys=True),
                           t["fingerprint"], float(t["speedup"]), json.dumps(t["steps"], sort_keys=True), time.time()))
                n += 1
        self.close()  # reload the view from the file
        self.__init__(self.path, target=self.target_spec)
        return n

    def reset(self) -> None:
        if self.db is not None:
            with transaction(self.db) as c:
                for table in ("directions", "local", "edges", "traces"):
                    c.execute(f"DELETE FROM {table} WHERE target = ?", (self.target,))
        self.directions = {d: Stat() for d in DIRECTIONS}
        self.local, self.edges = {}, {}
        self._traces = []

    def show(self) -> str:
        lines = [f"HTAM memory ({self.target}){': ' + self.path if self.path else ''}",
                 f"{'direction':14} {'prior':>6} {'tries':>6} {'good':>5} {'bad':>5} {'utility':>8}"]
        for d in DIRECTIONS:
            s = self.directions.get(d, Stat())
            lines.append(f"{d:14} {self.priors.get(d, 0):6.2f} {s.tries:6d} {s.good:5d} {s.bad:5d} {s.utility():8.3f}")
        if self.local:
            lines.append("")
            lines.append(f"{'strategy':40} {'direction':14} {'tries':>6} {'+':>4} {'-':>4} {'utility':>8}")
            for k, (d, s) in sorted(self.local.items(), key=lambda kv: -kv[1][1].utility()):
                lines.append(f"{k:40} {d:14} {s.tries:6d} {s.good:4d} {s.bad:4d} {s.utility():8.3f}")
        if self.edges:
            lines.append("")
            lines.append("transitions (src -> dst: tries, failures, utility)")
            for (a, b), s in sorted(self.edges.items(), key=lambda kv: -kv[1].utility())[:20]:
                lines.append(f"  {a} -> {b}: {s.tries}, {s.bad}, {s.utility():.3f}")
        tr = self.traces()
        lines.append("")
        lines.append(f"{len(tr)} winning trace(s)")
        for t in tr[:10]:
            lines.append(f"  {t['kernel']}: x{t['speedup']:.3g}, {len(t['steps'])} step(s) [{t['structure'][:60]}]")
        return "\n".join(lines)
