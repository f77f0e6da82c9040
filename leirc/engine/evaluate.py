"""The Evaluator: one candidate kernel -> one :class:`Evaluation` (status, verification,
timing, build time), built once and cached.

For each candidate :meth:`Evaluator.evaluate`

1. checks the text (errors -> ``error_kind="illegal"``) and computes the fingerprint
   (:func:`leirc.lang.canonical.fingerprint`);
2. looks the evaluation up, by a content key, in memory and in the on-disk cache
   (``cache_dir``: SQLite, one row per key, written in one transaction);
3. otherwise opens one :class:`Candidate` through its device (:mod:`leirc.lower.device`: a
   local :class:`~leirc.lower.device.KernelSession`, one worker, one build;
   with ``prestart`` the worker comes from a :class:`~leirc.lower.device.WorkerPool`
   that started it, TVM imported, during the previous evaluation; ``pool=`` is a pool the
   caller owns, e.g. one it warmed before parsing anything, as ``leirc verify`` does),
   verifies through it against the *oracle* (:mod:`leirc.engine.oracles`): by default the
   interpreter run of the reference (:func:`leirc.verify.verify`, inputs and outputs per
   (seed, dist) from a :class:`~leirc.engine.refcache.CachedReference` kept across
   candidates), or a :class:`~leirc.engine.oracles.TorchOracle` -- the user's PyTorch
   module run in a worker process, its outputs per seed computed once and cached -- and,
   if the candidate is correct and ``time=True``, times it in the same session on the
   oracle's inputs of every seed (the interpreter's: the first distribution's). With
   ``remote=`` (a :class:`~leirc.lower.device.RemoteDevice`: an RPC tracker and a device key)
   the session is a :class:`~leirc.lower.device.RemoteSession` instead: built here, run and
   timed on a server the tracker hands out (a GPU box), its outputs verified here.

The cache key is the SHA-256 of the canonical compact print of the candidate and of the
reference (for the PyTorch oracle: its key -- model file, weights, versions), the target's
fingerprint (:class:`leirc.target.Target`: evaluations from another host or instruction set are
never returned), seeds, distributions, tolerances, timing protocol, thread count and
the leirc version (and the remote device, where there is one). Failures that depend on the
machine's state (``timeout``, ``memory``, ``rpc``: no server, a lost connection) are not cached.

Error kinds: ``None`` (correct), ``"illegal"`` (the candidate does not check), ``"build"``,
``"crash"``, ``"timeout"``, ``"memory"``, ``"runtime"`` (the worker reported an error),
``"mismatch"`` (it ran, and the verifier rejected its results), ``"rpc"`` (the remote device
could not be reached), ``"oracle"`` (the oracle
itself failed -- the PyTorch module hung, crashed or raised: the message says which; not
cached). :attr:`Evaluation.oracle` records which oracle judged (``interpreter``, ``torch``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import time as _time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Optional

from .. import __version__
from ..lower.device import DEFAULT_MEMORY_LIMIT_MB, LocalDevice, TimingResult, WorkerPool, target_name
from ..measure import PAIR_ROUNDS, Paired, Protocol, interleave
from ..verify import VERIFY_PROTOCOL, VerifyReport
from .oracles import InterpreterOracle, OracleError, pick_kernel
from .refcache import CachedReference

ERROR_KINDS = (None, "illegal", "build", "crash", "timeout", "memory", "mismatch", "runtime", "rpc", "oracle")
DEFAULT_DISTS = ("uniform", "normal", "signed")
#: Kinds not written to the caches: a rerun on a quieter machine may succeed.
UNCACHED_KINDS = ("timeout", "memory", "rpc", "oracle")
_FLOAT_KEYS = ("max_abs_err", "max_rel_err", "norm_rel_err")


def _fingerprint(kernel) -> str:
    try:
        from ..lang.canonical import fingerprint
    except ImportError:  # pragma: no cover - canonical.py is part of the tree
        from ..lang.printer import print_kernel

        return hashlib.sha256(print_kernel(kernel).encode()).hexdigest()
    return fingerprint(kernel)


def _key_text(kernel) -> str:
    try:
        from ..lang.canonical import canonical_text
    except ImportError:  # pragma: no cover
        from ..lang.printer import print_kernel

        return print_kernel(kernel)
    return canonical_text(kernel)


def _unclean(x):
    """Inverse of VerifyReport.to_json's float cleaning."""
    if x is None:
        return math.nan
    if x == "inf":
        return math.inf
    if x == "-inf":
        return -math.inf
    return x


def _report_from_json(d: dict) -> VerifyReport:
    names = {f.name for f in fields(VerifyReport)}
    kw = {k: v for k, v in d.items() if k in names}
    for k in _FLOAT_KEYS:
        if k in kw:
            kw[k] = _unclean(kw[k])
    kw["per_output"] = {n: {k: (_unclean(v) if k in _FLOAT_KEYS else v) for k, v in p.items()}
                        for n, p in (kw.get("per_output") or {}).items()}
    return VerifyReport(**kw)


def _timing_from_json(d: dict) -> TimingResult:
    names = {f.name for f in fields(TimingResult)}
    return TimingResult(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class Evaluation:
    fingerprint: str
    ok: bool
    error_kind: Optional[str]
    verify: Optional[VerifyReport]
    timing: Optional[TimingResult]
    build_s: Optional[float]
    seconds: float
    error: Optional[str] = None  # the first failure, as a message
    kernel: str = ""
    startup_s: Optional[float] = None  # worker start-up + build, wall seconds (part of ``seconds``)
    cached: bool = field(default=False, compare=False)  # True when served from a cache
    oracle: str = "interpreter"  # which oracle judged: "interpreter" or "torch"
    target: str = ""  # the fingerprint of the target it was built, run and timed on

    def to_json(self) -> dict:
        return {"fingerprint": self.fingerprint, "kernel": self.kernel, "ok": self.ok, "error_kind": self.error_kind,
                "error": self.error, "verify": None if self.verify is None else self.verify.to_json(),
                "timing": None if self.timing is None else asdict(self.timing), "build_s": self.build_s,
                "startup_s": self.startup_s, "seconds": self.seconds, "oracle": self.oracle, "target": self.target}

    @classmethod
    def from_json(cls, d: dict, *, cached: bool = False) -> "Evaluation":
        return cls(d["fingerprint"], bool(d["ok"]), d.get("error_kind"),
                   None if d.get("verify") is None else _report_from_json(d["verify"]),
                   None if d.get("timing") is None else _timing_from_json(d["timing"]),
                   d.get("build_s"), float(d.get("seconds", 0.0)), d.get("error"), d.get("kernel", ""),
                   d.get("startup_s"), cached, d.get("oracle", "interpreter"), d.get("target", ""))


class EvaluationCache:
    """Evaluations on disk, by content key: ``DIR/evaluations.sqlite``. Every write is one
    transaction, so concurrent evaluators (threads or processes) see whole rows only."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, "evaluations.sqlite")
        with self._connect() as c:
            c.execute("CREATE TABLE IF NOT EXISTS evaluations (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, "
                      "created REAL NOT NULL, data TEXT NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60.0)

    def get(self, key: str) -> Optional[dict]:
        c = self._connect()
        try:
            row = c.execute("SELECT data FROM evaluations WHERE key = ?", (key,)).fetchone()
        finally:
            c.close()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except ValueError:
            return None

    def put(self, key: str, fingerprint: str, data: dict) -> None:
        c = self._connect()
        try:
            with c:
                c.execute("INSERT OR REPLACE INTO evaluations (key, fingerprint, created, data) VALUES (?, ?, ?, ?)",
                          (key, fingerprint, _time.time(), json.dumps(data)))
        finally:
            c.close()

    def __len__(self) -> int:
        c = self._connect()
        try:
            return int(c.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0])
        finally:
            c.close()


class RunRecorder:
    """Wraps a session's runner to remember the first failed run's error kind (the oracle's
    check sees only equal/unequal; the evaluation reports why a run failed)."""

    def __init__(self, runner):
        self.runner = runner
        self.kind: Optional[str] = None
        self.error: Optional[str] = None

    def __call__(self, *args, **kw):
        try:
            r = self.runner(*args, **kw)
        except Exception as e:  # noqa: BLE001 - verify turns it into a failure too
            if self.kind is None:
                self.kind, self.error = "runtime", f"{type(e).__name__}: {e}"
            raise
        if not r.ok and self.kind is None:
            self.kind, self.error = r.error_kind or "runtime", r.error
        return r


class Evaluator:
    """Evaluate candidate kernels for one target (see the module docstring)."""

    def __init__(self, target="llvm", *, seeds=(0, 1, 2), dists=None, time: bool = True,
                 cache_dir: Optional[str] = None, threads: Optional[int] = None, timeout: float = 120.0,
                 memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB, warmup: int = 3, repeat: int = 10, min_repeat_ms: float = 50.0,
                 rtol: Optional[float] = None, norm_tol: Optional[float] = None,
                 poison_intermediates: bool = False, max_references: int = 2,
                 reference_max_bytes: int = 1 << 30, build_timeout: Optional[float] = None,
                 prestart: bool = True, verify_options: Optional[dict] = None,
                 pool: Optional[WorkerPool] = None, remote=None, device=None):
        if target_name(target) == "interp":
            raise ValueError("the Evaluator runs compiled kernels; use leirc.verify.verify(target='interp')")
        self.target = target
        self.target_name = target_name(target)
        #: what evaluations are stored under: timings and verdicts from another machine (or
        #: another instruction set) are never returned for this one
        self.target_fingerprint = target_fingerprint(target)
        #: a leirc.lower.device.RemoteDevice: candidates run and are timed there (None: here)
        self.remote = remote
        #: where sessions are opened: this machine's workers, or the remote device
        self.device = device if device is not None else remote if remote is not None else \
            LocalDevice(target if not isinstance(target, dict) else None)
        if remote is not None:
            prestart = False  # the local worker pool serves local sessions only
        self.seeds = tuple(int(s) for s in seeds)
        # None: the verifier's default grid and its probes, as ``leirc verify`` runs them
        self.dists = tuple(dists) if dists is not None else None
        self.time = bool(time)
        self.threads = threads
        self.timeout = float(timeout)
        self.build_timeout = build_timeout
        self.memory_limit_mb = memory_limit_mb
        self.warmup, self.repeat, self.min_repeat_ms = int(warmup), int(repeat), float(min_repeat_ms)
        self.protocol = Protocol(self.warmup, self.repeat, self.min_repeat_ms)
        self.rtol, self.norm_tol = rtol, norm_tol
        # further leirc.verify.verify options (probes, domains, oracle), part of the cache key
        self.verify_options = dict(verify_options or {})
        #: called after every verification run with (done, planned, label): a client's
        #: progress display, not part of what is evaluated (kept out of the cache key)
        self.progress = None
        self.poison_intermediates = bool(poison_intermediates)
        self.cache = EvaluationCache(cache_dir) if cache_dir else None
        self.max_references = max(1, int(max_references))
        self.reference_max_bytes = int(reference_max_bytes)
        self._memo: dict = {}
        # the next candidate's worker imports TVM while this one is verified; a caller's own
        # pool (e.g. warmed before it parsed anything) replaces that, and stays the caller's
        self._own_pool = pool is None and prestart
        self.pool = pool if pool is not None else (WorkerPool(1) if prestart else None)
        self._refs: "OrderedDict[str, CachedReference]" = OrderedDict()
        self.stats = {"evaluations": 0, "memory_hits": 0, "disk_hits": 0, "sessions": 0, "builds": 0}

    def close(self) -> None:
        """Stop the started spare worker (also done at interpreter exit); a pool given as
        ``pool=`` is left to its owner."""
        if self._own_pool:
            self.pool.close()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- pieces ---------------------------------------------------------------------
    def reference(self, result) -> CachedReference:
        """The cached reference for a checked kernel (LRU over ``max_references``)."""
        fp = _fingerprint(result.kernel)
        ref = self._refs.get(fp)
        if ref is None:
            ref = CachedReference(result, fingerprint=fp, max_bytes=self.reference_max_bytes)
            self._refs[fp] = ref
            while len(self._refs) > self.max_references:
                self._refs.popitem(last=False)
        else:
            self._refs.move_to_end(fp)
        return ref

    def key(self, cand_kernel, ref_kernel, numerics: Optional[str] = None, *, oracle: Optional[str] = None) -> str:
        """The cache key of an evaluation; ``oracle``: the key of an oracle other than the
        interpreter (``ref_kernel`` None then)."""
        spec = {"leirc": __version__, "candidate": _key_text(cand_kernel),
                "reference": None if ref_kernel is None else _key_text(ref_kernel),
                "target": self.target_fingerprint, "seeds": list(self.seeds),
                "dists": None if self.dists is None else list(self.dists),
                "rtol": self.rtol, "norm_tol": self.norm_tol, "poison_intermediates": self.poison_intermediates,
                "time": [self.warmup, self.repeat, self.min_repeat_ms] if self.time else None,
                "threads": self.threads, "verify_options": self.verify_options, "numerics": numerics,
                "verifier": VERIFY_PROTOCOL}
        if self.remote is not None:
            spec["remote"] = self.remote.where
        if oracle is not None:
            spec["oracle"] = oracle
        return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()

    def _lookup(self, key: str) -> Optional[Evaluation]:
        ev = self._memo.get(key)
        if ev is not None:
            self.stats["memory_hits"] += 1
            return ev
        if self.cache is not None:
            d = self.cache.get(key)
            if d is not None:
                self.stats["disk_hits"] += 1
                ev = Evaluation.from_json(d, cached=True)
                self._memo[key] = ev
                return ev
        return None

    def _store(self, key: str, ev: Evaluation) -> None:
        if ev.error_kind in UNCACHED_KINDS:
            return
        self._memo[key] = Evaluation.from_json(ev.to_json(), cached=True)
        if self.cache is not None:
            self.cache.put(key, ev.fingerprint, ev.to_json())

    # -- the entry point ----------------------------------------------------------------
    def evaluate(self, source_text: str, *, kernel: Optional[str] = None, reference: Optional[str] = None,
                 cache: bool = True, numerics: Optional[str] = None, oracle=None) -> Evaluation:
        """Evaluate one candidate (``source_text``, its kernel ``kernel`` or the only one)
        against ``oracle`` (:mod:`leirc.engine.oracles`; default: the interpreter running
        ``reference``, LEIR text, by default the candidate itself). ``cache=False``
        evaluates again even when a cached evaluation exists (and stores the new one).
        ``numerics``: the class of the rewrite that produced the candidate (see
        :func:`leirc.verify.verify`)."""
        t0 = _time.perf_counter()
        self.stats["evaluations"] += 1
        if oracle is None:
            oracle = InterpreterOracle(reference)
        elif reference is not None:
            raise ValueError("give either reference= (the interpreter's program) or oracle=, not both")
        cand, problem = _pick(source_text, kernel, "candidate")
        if cand is None:
            return Evaluation(hashlib.sha256(source_text.encode()).hexdigest(), False, "illegal", None, None, None,
                              round(_time.perf_counter() - t0, 4), problem, kernel or "", oracle=oracle.name)
        prepared = oracle.prepare(self, cand, kernel)
        fp = _fingerprint(cand.kernel)
        key = self.key(cand.kernel, prepared.reference_kernel, numerics, oracle=prepared.key)
        hit = self._lookup(key) if cache else None
        if hit is not None:
            return hit
        ev = self._evaluate(source_text, cand, prepared, oracle.name, fp, t0, numerics)
        self._store(key, ev)
        return ev

    def _evaluate(self, source_text, cand, prepared, oracle_name, fp, t0, numerics=None) -> Evaluation:
        with self.open_checked(source_text, cand, fp) as c:
            ev = c.verify(prepared=prepared, oracle_name=oracle_name, numerics=numerics, t0=t0)
            if not ev.ok or not self.time:
                return ev
            timing = c.time(prepared.timing_sets())
            if not timing.ok:
                return replace(ev, ok=False, error_kind=timing.error_kind or "runtime", timing=timing,
                               error=timing.error, seconds=round(_time.perf_counter() - t0, 4))
            return replace(ev, timing=timing, seconds=round(_time.perf_counter() - t0, 4))

    # -- candidates kept open -------------------------------------------------------------
    def open(self, program, *, kernel: Optional[str] = None, pool=None) -> "Candidate":
        """Build one candidate -- LEIR text or a :class:`leirc.engine.program.Program` --
        in a session of its own (one worker, one build) and keep it open: a
        :class:`Candidate` (a context manager) that verifies, times and is timed against
        others without building again. ``pool``: a :class:`WorkerPool` other than this
        evaluator's (None: its own spare worker). Raises :class:`ValueError` when the text
        does not check (:meth:`evaluate` reports that as ``illegal`` instead)."""
        if isinstance(program, str):
            text = program
            cand, problem = _pick(text, kernel, "candidate")
            if cand is None:
                raise ValueError(problem)
            fp = _fingerprint(cand.kernel)
        else:  # a Program: checked already, its text is the kernel's own print
            from ..lang.printer import print_kernel

            text, cand, fp = print_kernel(program.kernel), program.result, program.fingerprint
        return self.open_checked(text, cand, fp, pool=pool)

    def open_checked(self, text: str, cand, fp: str, *, pool=None) -> "Candidate":
        self.stats["sessions"] += 1
        s = self.device.open(text, kernel=cand.kernel.name, target=self.target, threads=self.threads,
                             timeout=self.timeout, memory_limit_mb=self.memory_limit_mb,
                             poison_intermediates=self.poison_intermediates, build_timeout=self.build_timeout,
                             pool=self.pool if pool is None else pool)
        return Candidate(self, text, cand, s, fp)


class Candidate:
    """One candidate built once, its session open until :meth:`close` (see
    :meth:`Evaluator.open`): :meth:`verify` against an oracle, :meth:`time` with the
    evaluator's :class:`~leirc.measure.Protocol`, :meth:`paired` against another open
    candidate (interleaved rounds, :func:`leirc.measure.interleave`). Builds are counted in
    the evaluator's ``stats["builds"]`` when the candidate closes."""

    def __init__(self, evaluator: Evaluator, text: str, cand, session, fingerprint: str):
        self.evaluator = evaluator
        self.text = text
        self.result = cand
        self.session = session
        self.fingerprint = fingerprint
        self.name = cand.kernel.name
        self._sets: Optional[list] = None
        self._closed = False

    def __enter__(self) -> "Candidate":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.evaluator.stats["builds"] += self.session.builds
            self.session.close()

    @property
    def closed(self) -> bool:
        return self._closed or getattr(self.session, "closed", False)

    @property
    def build_s(self) -> Optional[float]:
        return self.session.build_s if self.session.builds else None

    def verify(self, oracle=None, *, numerics: Optional[str] = None, prepared=None, oracle_name: Optional[str] = None,
               t0: Optional[float] = None) -> Evaluation:
        """Verify this build against ``oracle`` (default: the interpreter running this
        candidate's own text; ``prepared``: an oracle already prepared for it). Returns an
        :class:`Evaluation` without timing; a run that crashed or hung is that failure kind,
        never a mismatch."""
        ev = self.evaluator
        t0 = _time.perf_counter() if t0 is None else t0
        if prepared is None:
            oracle = oracle if oracle is not None else InterpreterOracle(None)
            prepared = oracle.prepare(ev, self.result, self.name)
            oracle_name = oracle.name
        s = self.session

        def done(ok, kind, rep, build_s, error):
            return Evaluation(self.fingerprint, ok, kind, rep, None, build_s, round(_time.perf_counter() - t0, 4),
                              error, self.name, s.startup_s, oracle=oracle_name or "interpreter",
                              target=ev.target_fingerprint)

        rec = RunRecorder(s.runner)
        try:
            rep = prepared.check(rec, self.text, numerics)
        except OracleError as e:
            return done(False, "oracle", None, s.build_s if s.builds else None, str(e))
        self._sets = None
        try:
            self._sets = prepared.timing_sets()
        except Exception:  # noqa: BLE001 - timing inputs are only needed when it verifies
            self._sets = None
        failure = s.build_failure
        if failure is not None and s.builds == 0:
            return done(False, failure[1], rep, None, failure[0])
        if not rep.equal:
            kind = rec.kind or "mismatch"
            err = rec.error if rec.kind else (rep.failures[0] if rep.failures else "verification failed")
            return done(False, kind, rep, s.build_s, err)
        return done(True, None, rep, s.build_s, None)

    def timing_sets(self) -> list:
        """The inputs this candidate is timed on: the last oracle's, else random inputs."""
        if self._sets is None:
            from ..interp import random_inputs

            self._sets = [random_inputs(self.result.kernel, seed, "uniform") for seed in self.evaluator.seeds]
        return self._sets

    def time(self, sets: Optional[list] = None, protocol: Optional[Protocol] = None) -> TimingResult:
        """One timing with ``protocol`` (default: the evaluator's) on ``sets`` (default:
        :meth:`timing_sets`)."""
        p = protocol or self.evaluator.protocol
        return self.session.time(sets if sets is not None else self.timing_sets(), **p.kwargs())

    def paired(self, other: "Candidate", rounds: int = PAIR_ROUNDS, protocol: Optional[Protocol] = None,
               sets: Optional[list] = None) -> Optional[Paired]:
        """This candidate (a) and ``other`` (b) timed alternately on the same inputs:
        ``ratio`` = time(other) / time(self). None when a timing failed."""
        p = protocol or Protocol(warmup=1, repeat=2, min_repeat_ms=self.evaluator.min_repeat_ms)
        sets = sets if sets is not None else self.timing_sets()

        def runs(c):
            def one():
                t = c.session.time(sets, **p.kwargs())
                return list(t.runs) if t.ok else None
            return one

        return interleave(runs(self), runs(other), rounds)


def target_fingerprint(target) -> str:
    """The fingerprint evaluations for ``target`` are keyed and stamped with: a target spec's
    or :class:`leirc.target.Target`'s; a raw TVM target dict's own hash (it names its CPU)."""
    from ..target import Target, target_of

    if isinstance(target, dict) and "leirc_target" not in target:
        return hashlib.sha256(json.dumps(target, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return (Target.from_json(target) if isinstance(target, dict) else target_of(target)).fingerprint


def _pick(text: str, kernel: Optional[str], what: str, prefer: Optional[str] = None):
    return pick_kernel(text, kernel, what, prefer)
