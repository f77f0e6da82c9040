"""A learned cost model: LightGBM ranking candidates by features of their programs.

The analytical model (:mod:`leirc.search.cost`) cannot see what decides between schedules of one
kernel: register pressure, which cache a tile fits, parallel granularity. This model learns it
from measurements, MetaSchedule-style: features of a candidate program (:func:`features`),
a ranking objective (LightGBM ``lambdarank``; a group is one kernel on one target, so only the
order of that kernel's candidates is learned, never absolute times across kernels), retrained
after every measured batch of a search (:meth:`CostModel.fit`).

**Features** (:data:`FEATURE_NAMES`), per program: the analytical model's own prediction and its
parts (work, bytes, arithmetic intensity, parallelism, vector lanes, share of memory-bound time),
the loop structure (nests, statements, depth, loops of each kind, unrolled and vector extents),
private and intermediate storage; for the statement the analytical model expects to dominate:
its iterations, depth, innermost extent and kind, unit-stride share of its accesses along the
innermost loop, the bytes the innermost 1..4 loops touch and how many innermost loops fit in L1,
L2 and L3 (the host's sizes, :mod:`leirc.target`), the parallel loop's extent and how often a
parallel region is entered; then the design-space knobs of the point that produced the program
(:mod:`leirc.search.space`; NaN when a program came from elsewhere, which LightGBM handles).

**Data and persistence.** Every measurement is a record (target fingerprint, feature version,
group, program fingerprint, features, median ms) in ``DIR/tuner.sqlite``; a search starts from
every earlier record of the same target fingerprint and feature version (*warm start*: other
kernels' searches, earlier runs of this one), up to a record id fixed when the search first
started, so a resumed search sees the same warm data. The trained booster is written to
``DIR/tuner-<target>-v<version>.lgb`` after each fit (text, LightGBM's own format) for reuse
and inspection. :func:`records_from_state` reads the measurements of any earlier search's state
file (beam, MCTS...) as records, :func:`records_from_dataset` those of ``leirc dataset`` records
(original and transformed program with their times). :data:`FEATURE_VERSION` changes whenever the features change; records of
another version are not used.

**Held-out rank correlation.** Before a batch is measured the current model scores it; once
measured, those scores are compared with the measured order (Spearman, per group, weighted by
pairs): a prediction on data the model had not seen. :meth:`CostModel.stats` reports it.

Deterministic: ``seed``, ``deterministic=True``, ``num_threads=1``; records enter in a fixed
order.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from typing import Optional, Sequence

import numpy as np

from ..lang import ast as A
from . import cost as C
from .space import KNOBS

#: bump when :func:`features` changes: records and boosters of another version are not used
FEATURE_VERSION = 1
#: LightGBM's lambdarank relevance levels (label_gain has 31 entries by default)
LEVELS = 31
#: records a group needs before it takes part in training (a ranking needs pairs)
MIN_GROUP = 2
#: measured candidates before the model replaces the analytical model's ranking
MIN_TRAIN = 4

_KINDS = ("L", "P", "V", "U", "B")
_PROGRAM = ["model_log_s", "log_ops", "log_bytes", "log_intensity", "parallel", "lanes", "memory_share",
            "nests", "stmts", "max_depth"] + [f"loops_{k}" for k in _KINDS] + [
            "unrolled_log", "vector_log", "private_tensors", "private_log_bytes", "intermediates",
            "intermediate_log_bytes",
            "dom_log_iters", "dom_depth", "dom_inner_log_extent", "dom_inner_kind", "dom_unit_share",
            "dom_fp1", "dom_fp2", "dom_fp3", "dom_fp4", "dom_fit_l1", "dom_fit_l2", "dom_fit_l3",
            "dom_par_log_extent", "dom_par_log_entries", "dom_reduce", "dom_carried_inner", "dom_share",
            "dom_ops_per_iter"]
_KNOB_NAMES = [f"knob_{k}" for k in KNOBS]
FEATURE_NAMES: tuple = tuple(_PROGRAM + _KNOB_NAMES)


def _cache_sizes(target: str) -> tuple:
    """(L1, L2, L3) bytes of the host (per core where the OS says so), typical sizes if unknown."""
    sizes = {"L1d": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}
    try:
        from ..target import target_of

        t = target_of(target)
        for lv in sizes:
            got = t.cache(lv)
            if got:
                sizes[lv] = int(got)
    except Exception:  # an unknown spec or host: the typical sizes rank just as well
        pass
    return sizes["L1d"], sizes["L2"], sizes["L3"]


def _log2(x: float) -> float:
    return math.log2(x) if x and x > 0 else 0.0


def _knob_value(v) -> float:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    for vals in KNOBS.values():
        if v in vals:
            return float(vals.index(v))
    return float("nan")


def _footprints(si, tensors: dict) -> list[float]:
    """Bytes the innermost 1, 2, 3, 4 loops of statement ``si`` touch (each access: the
    extents of those loops its subscripts use, bounded by the tensor; registers are free)."""
    st = si.stmt
    accs = [st.target] + [x for x in A.walk(st.value) if isinstance(x, A.Access)]
    out = []
    for depth in (1, 2, 3, 4):
        inner = si.loops[-depth:] if si.loops else ()
        total = 0.0
        for a in accs:
            if a.scope == "l":
                continue
            info = tensors.get(a.name)
            used = {x.name for ix in a.indices for x in A.walk(ix) if isinstance(x, A.Var)}
            elems = math.prod(lp.extent for lp in inner if lp.var in used) if inner else 1
            if info is not None and info.shape:
                elems = min(elems, math.prod(info.shape))
            total += elems * C.DTYPE_BYTES.get(a.dtype, 4)
        out.append(total)
    return out


def features(program, point: Optional[dict] = None, target: str = "llvm", *, threads: Optional[int] = None,
             caches: Optional[tuple] = None) -> np.ndarray:
    """The feature vector of ``program`` (a :class:`leirc.engine.Program`), produced by the
    design-space ``point`` (None: unknown)."""
    result = program.result
    est = C.estimate(program, target, threads=threads)
    l1, l2, l3 = caches or _cache_sizes(target)
    loops = [n for n in A.walk(result.kernel) if isinstance(n, A.Loop)]
    kinds = {k: sum(1 for lp in loops if lp.kind == k) for k in _KINDS}
    depth = max((len(si.loops) for si in result.stmts), default=0)
    priv = [t for t in result.tensors.values() if t.private]
    inter = [t for t in result.tensors.values() if t.role == "intermediate"]

    def nbytes(ts):
        return sum(C.DTYPE_BYTES.get(t.dtype, 4) * math.prod(t.shape or (1,)) for t in ts)

    mem_s = sum(s.seconds for s in est.stmts if s.bound == "memory")
    row = [math.log10(max(est.seconds, 1e-12)), _log2(est.ops), _log2(est.bytes),
           _log2(est.ops / est.bytes) if est.bytes else 0.0, est.parallel, est.lanes,
           mem_s / est.seconds if est.seconds else 0.0,
           float(sum(1 for it in result.kernel.body if isinstance(it, A.Loop))), float(len(result.stmts)),
           float(depth)] + [float(kinds[k]) for k in _KINDS] + [
           _log2(math.prod(lp.extent for lp in loops if lp.kind == "U") if kinds["U"] else 1),
           _log2(sum(lp.extent for lp in loops if lp.kind == "V")),
           float(len(priv)), _log2(nbytes(priv)), float(len(inter)), _log2(nbytes(inter))]
    # the statement the analytical model expects to dominate
    if est.stmts and result.stmts:
        k = max(range(len(est.stmts)), key=lambda i: (est.stmts[i].seconds, -i))
        sc, si = est.stmts[k], result.stmts[k]
        inner = next((lp for lp in reversed(si.loops) if lp.extent > 1), None)
        accs = [si.stmt.target] + [x for x in A.walk(si.stmt.value) if isinstance(x, A.Access)]
        unit = 0
        for a in accs:
            last = a.indices[-1] if a.indices else None
            used_inner = inner is not None and any(
                isinstance(x, A.Var) and x.name == inner.var for ix in a.indices for x in A.walk(ix))
            if not used_inner or (isinstance(last, A.Var) and last.name == inner.var):
                unit += 1
        fps = _footprints(si, result.tensors)
        fit = [float(sum(1 for f in fps if f <= cap)) for cap in (l1, l2, l3)]
        par_ext, entries, seen = 1, 1, False
        for lp in si.loops:
            if lp.kind in ("P", "B"):
                par_ext *= lp.extent
                seen = True
            elif not seen:
                entries *= lp.extent
        row += [_log2(sc.iterations), float(len(si.loops)), _log2(inner.extent if inner else 1),
                float(_KINDS.index(inner.kind)) if inner is not None and inner.kind in _KINDS else -1.0,
                unit / max(1, len(accs))] + [_log2(f) for f in fps] + fit + [
                _log2(par_ext), _log2(entries if seen else 0), float(si.kind == "reduce"),
                float(inner is not None and inner.var in si.carried),
                sc.seconds / est.seconds if est.seconds else 0.0, sc.ops / max(1, sc.iterations)]
    else:
        row += [0.0] * 20
    row += [_knob_value(point[k]) if point is not None and k in point else float("nan") for k in KNOBS]
    assert len(row) == len(FEATURE_NAMES), (len(row), len(FEATURE_NAMES))
    return np.asarray(row, dtype=np.float64)


def spearman(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Spearman's rank correlation (average ranks for ties); None for fewer than 3 values or
    a constant sequence."""
    if len(a) != len(b) or len(a) < 3:
        return None
    ra, rb = _ranks(np.asarray(a, float)), _ranks(np.asarray(b, float))
    if ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(len(x), dtype=float)
    for v in np.unique(x):  # ties share their mean rank
        m = x == v
        if m.sum() > 1:
            r[m] = r[m].mean()
    return r


def _labels(ms: np.ndarray) -> np.ndarray:
    """Relevance per record of one group: the fastest gets the highest level, levels spread
    evenly over the group's order (ties share one)."""
    if len(ms) == 1:
        return np.array([LEVELS - 1])
    r = _ranks(-np.log(ms))  # higher rank = faster
    return np.round(r / (len(ms) - 1) * (LEVELS - 1)).astype(int)


SCHEMA = """
CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL,
  version INTEGER NOT NULL, grp TEXT NOT NULL, fingerprint TEXT NOT NULL, features TEXT NOT NULL,
  ms REAL NOT NULL, source TEXT NOT NULL, created REAL NOT NULL, UNIQUE (target, version, grp, fingerprint));
"""


class CostModel:
    """The learned ranking model of one target (see the module docstring). ``directory``: where
    records and boosters live (None: this process only); ``target_fp``: the target's
    fingerprint (records of other targets are not used)."""

    def __init__(self, target_fp: str, directory: Optional[str] = None, *, seed: int = 0,
                 warm_until: Optional[int] = None, min_train: int = MIN_TRAIN, rounds: int = 60):
        self.target_fp = target_fp
        self.directory = directory
        self.seed = int(seed)
        self.min_train = min_train
        self.rounds = rounds
        self.groups: list[str] = []
        self.fps: list[str] = []
        self.X: list[np.ndarray] = []
        self.ms: list[float] = []
        self._seen: set = set()  # (group, fingerprint) of the records held
        self.booster = None
        self.fits = 0
        self.warm = 0
        self.heldout: list[tuple[str, float, float]] = []  # (group, predicted score, -log ms)
        self._db: Optional[sqlite3.Connection] = None
        self.warm_until = warm_until
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
            self._db = sqlite3.connect(os.path.join(directory, "tuner.sqlite"), timeout=30.0)
            self._db.executescript(SCHEMA)
            if self.warm_until is None:
                row = self._db.execute("SELECT COALESCE(MAX(id), 0) FROM records").fetchone()
                self.warm_until = int(row[0])
            self._load()

    @property
    def model_path(self) -> Optional[str]:
        if self.directory is None:
            return None
        return os.path.join(self.directory, f"tuner-{self.target_fp}-v{FEATURE_VERSION}.lgb")

    def _load(self) -> None:
        rows = self._db.execute(
            "SELECT grp, fingerprint, features, ms FROM records WHERE target = ? AND version = ? AND id <= ? "
            "ORDER BY id", (self.target_fp, FEATURE_VERSION, self.warm_until)).fetchall()
        for grp, fp, feats, ms in rows:
            x = np.asarray(json.loads(feats), dtype=np.float64)
            if x.shape == (len(FEATURE_NAMES),):
                self._append(grp, fp, x, ms)
        self.warm = len(self.ms)
        if self.warm:
            self.fit()

    def _append(self, group: str, fp: str, x: np.ndarray, ms: float) -> bool:
        if (group, fp) in self._seen:
            return False
        self._seen.add((group, fp))
        self.groups.append(group)
        self.fps.append(fp)
        self.X.append(x)
        self.ms.append(float(ms))
        return True

    def add(self, group: str, fingerprint: str, x: np.ndarray, ms: float, source: str = "search") -> None:
        """One measurement (persisted when the model has a directory)."""
        if not (ms and ms > 0 and math.isfinite(ms)):
            return
        if self._append(group, fingerprint, x, ms) and self._db is not None:
            feats = json.dumps([None if not math.isfinite(v) else v for v in x.tolist()])
            with self._db:
                self._db.execute("INSERT OR IGNORE INTO records (target, version, grp, fingerprint, features, ms, "
                                 "source, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                 (self.target_fp, FEATURE_VERSION, group, fingerprint, feats, float(ms), source,
                                  time.time()))

    def import_records(self, records, source: str) -> int:
        """Add ``records`` ((group, fingerprint, features, ms), from :func:`records_from_state` or
        :func:`records_from_dataset`); persisted, so later searches on this target warm-start
        from them. Returns how many were new."""
        before = len(self.ms)
        for group, fp, x, ms in records:
            self.add(group, fp, x, ms, source=source)
        return len(self.ms) - before

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def fit(self) -> bool:
        """Train on every record (groups of at least :data:`MIN_GROUP`); False when there is
        too little to learn from (the analytical model keeps ranking)."""
        order: dict[str, list[int]] = {}
        for i, g in enumerate(self.groups):
            order.setdefault(g, []).append(i)
        groups = [idx for idx in order.values() if len(idx) >= MIN_GROUP]
        n = sum(len(g) for g in groups)
        if n < self.min_train:
            return False
        import lightgbm as lgb

        X = np.stack([np.where(np.isfinite(self.X[i]), self.X[i], np.nan) for g in groups for i in g])
        y = np.concatenate([_labels(np.asarray([self.ms[i] for i in g])) for g in groups])
        params = {"objective": "lambdarank", "metric": "ndcg", "learning_rate": 0.1, "num_leaves": 15,
                  "min_data_in_leaf": 2, "min_data_in_bin": 1, "min_sum_hessian_in_leaf": 1e-6,
                  "feature_fraction": 1.0, "bagging_fraction": 1.0, "lambdarank_truncation_level": 64,
                  "seed": self.seed, "deterministic": True, "num_threads": 1, "force_row_wise": True,
                  "verbosity": -1}
        data = lgb.Dataset(X, label=y, group=[len(g) for g in groups], feature_name=list(FEATURE_NAMES),
                           params={"min_data_in_bin": 1, "verbosity": -1}, free_raw_data=True)
        self.booster = lgb.train(params, data, num_boost_round=self.rounds)
        self.fits += 1
        if self.model_path is not None:
            from ..io import write_atomic

            write_atomic(self.model_path, self.booster.model_to_string())
        return True

    def predict(self, X: Sequence[np.ndarray]) -> np.ndarray:
        """Scores, higher = faster (before any fit: minus the analytical model's log time)."""
        if not len(X):
            return np.zeros(0)
        M = np.stack(list(X))
        if self.booster is None:
            return -M[:, FEATURE_NAMES.index("model_log_s")]
        return np.asarray(self.booster.predict(M, num_threads=1), dtype=float)

    def record_heldout(self, group: str, score: float, ms: Optional[float]) -> None:
        """A prediction made before the measurement ``ms`` was known (failed: not counted)."""
        if self.booster is not None and ms and ms > 0:
            self.heldout.append((group, float(score), -math.log(ms)))

    def heldout_spearman(self) -> Optional[float]:
        """Spearman correlation of held-out predictions with the measured order, averaged over
        groups weighted by their size."""
        by: dict[str, list] = {}
        for g, s, y in self.heldout:
            by.setdefault(g, []).append((s, y))
        num = den = 0.0
        for pairs in by.values():
            r = spearman([p[0] for p in pairs], [p[1] for p in pairs])
            if r is not None:
                num += r * len(pairs)
                den += len(pairs)
        return num / den if den else None

    def stats(self) -> dict:
        r = self.heldout_spearman()
        return {"kind": "lightgbm-lambdarank", "feature_version": FEATURE_VERSION, "target": self.target_fp,
                "records": len(self.ms), "warm_records": self.warm, "fits": self.fits,
                "heldout_spearman": None if r is None else round(r, 4), "heldout_n": len(self.heldout),
                "model_file": self.model_path}

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def group_of(program) -> str:
    """The ranking group of a kernel: its name and the fingerprint of the program searched."""
    return f"{program.kernel.name}:{program.fingerprint[:16]}"


def records_from_state(state_path: str, root, target: str = "llvm") -> list[tuple]:
    """(group, fingerprint, features, ms) of every timed, correct evaluation in the search state
    ``state_path`` (a :class:`leirc.search.store.SearchStore` file) of a search from ``root``:
    each candidate's steps replayed on ``root`` (rows that no longer replay to their
    fingerprint are skipped); the knob features are NaN (the point is not stored). For
    :meth:`CostModel.add` with ``source="state"``: measurements of earlier searches of any
    algorithm warm-start the model."""
    from ..strategies import NotApplicable, Step
    from .store import SearchStore

    store = SearchStore(state_path)
    try:
        rows = store.rows()
    finally:
        store.close()
    group, out = group_of(root), []
    for row in rows:
        ev = row["evaluation"]
        ms = (ev.get("timing") or {}).get("median_ms")
        if not ev.get("ok") or not ms:
            continue
        p = root
        try:
            for st in row["steps"]:
                p = p.apply(Step.from_json(st)).program
        except (NotApplicable, KeyError, ValueError):
            continue
        if p.fingerprint == row["fingerprint"]:
            out.append((group, p.fingerprint, features(p, None, target), float(ms)))
    return out


def records_from_dataset(path: str, target_fp: Optional[str] = None, target: str = "llvm") -> list[tuple]:
    """(group, fingerprint, features, ms) of the programs of a ``leirc dataset`` records file
    (JSONL, docs/dataset.md): each record's original and transformed program with
    ``timing.original_ms`` / ``transformed_ms``, grouped by the original (its transitions rank
    against each other). With ``target_fp``, records timed on another target
    (``node.target_fingerprint`` or ``timing.target_fingerprint``) are left out. Lines that do not
    parse or whose programs do not check are skipped."""
    from ..engine.program import Program

    out, programs = [], {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
                timing = rec.get("timing") or {}
                where = timing.get("target_fingerprint") or (rec.get("node") or {}).get("target_fingerprint")
                if target_fp is not None and where is not None and where != target_fp:
                    continue
                pair = [(rec["original"]["leir"], timing.get("original_ms")),
                        (rec["transformed"]["leir"], timing.get("transformed_ms"))]
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            progs = []
            for text, ms in pair:
                if text not in programs:
                    p = Program.from_text(text)
                    programs[text] = p if getattr(p, "ok", False) else None
                progs.append((programs[text], ms))
            if progs[0][0] is None:
                continue
            group = group_of(progs[0][0])
            for p, ms in progs:
                if p is not None and ms and ms > 0:
                    out.append((group, p.fingerprint, features(p, None, target), float(ms)))
    return out


def target_fingerprint(target: str) -> str:
    """The fingerprint of ``target`` (:attr:`leirc.target.Target.fingerprint`), or of its spec
    string where it cannot be resolved."""
    try:
        from ..target import target_of

        return target_of(target).fingerprint
    except Exception:  # an older or unresolvable spec: the spec names the target
        import hashlib

        return hashlib.sha256(str(target).encode()).hexdigest()[:16]


__all__ = ["CostModel", "FEATURE_NAMES", "FEATURE_VERSION", "features", "group_of", "records_from_dataset", "records_from_state", "spearman",
           "target_fingerprint"]
