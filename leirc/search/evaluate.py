"""Evaluating candidates for the search: verified and timed in one build, kept open so that
a candidate can be timed again next to its parent (interleaved), and timed on an RPC
tracker when one is configured.

Every candidate is built once. Its :class:`~leirc.engine.evaluate.Candidate` (one
sandboxed worker, one build, from :meth:`Evaluator.open`) serves the verification against the root (the interpreter's
reference outputs, computed once for the whole search) and then the timing; the session of a
correct candidate stays open (up to ``keep_sessions``, least recently used first out; a
kept softmax session is ~350 MB resident; the search releases a rejected child's) so
that :meth:`CandidateEvaluator.paired` can re-time it against another candidate without
building either again. ``workers>1``: the candidates of a batch are verified in parallel,
each in its own session, then timed one at a time in the same sessions with nothing else
running.

The engine's :class:`~leirc.engine.Evaluator` gives the configuration (seeds,
distributions, tolerances, timing protocol), the content key, the on-disk cache and the
cached reference and the candidates (:meth:`Evaluator.open` -> :class:`Candidate`: verify,
time, paired); what is written here is the search's own policy: which candidates stay open,
verification in parallel, timing one at a time (see docs/search.md).

Timings are trusted only within one run: a verification found in the on-disk cache is
reused, but its timing -- measured by an earlier run, maybe on a busier machine -- is
measured again now (one build, no verification). :meth:`CandidateEvaluator.paired`
measures two candidates alternately, A B B A A B B A ..., in short rounds; the ratio of
each round's medians cancels a load that drifts slowly, and the median ratio with its
spread is what the search compares.

A candidate that crashes, hangs or runs out of memory is a failed :class:`Evaluation`; an
unexpected error of the evaluator itself is one too (``error_kind="runtime"``), never an
exception out of the search.
"""

from __future__ import annotations

import hashlib
import threading
import time as _time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Optional

from ..engine.evaluate import UNCACHED_KINDS, Candidate, Evaluation, Evaluator
from ..engine.oracles import InterpreterOracle, pick_kernel
from ..lang.canonical import fingerprint as kernel_fingerprint
from ..lower.device import TimingResult
# the timing protocol and the paired comparison live in the one measurement module
from ..measure import CONFIRM_ROUNDS, PAIR_ROUNDS, Paired, Protocol, paired_from_rounds

__all__ = ["CandidateEvaluator", "Paired", "paired_from_rounds", "PAIR_ROUNDS", "CONFIRM_ROUNDS", "SEARCH_SEEDS",
           "SEARCH_DISTS"]

#: the verification grid of a search candidate (the driver's .leir verify pass uses the same)
SEARCH_SEEDS = (0, 1)
SEARCH_DISTS = ("uniform", "signed")


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class CandidateEvaluator:
    """Evaluate candidate texts against one reference text (see the module docstring).

    ``remote``: a :class:`leirc.lower.rpc.RemoteTimer`; the timings are then measured on
    the RPC server it reaches (the verification stays here)."""

    def __init__(self, reference: str, *, target: str = "llvm", threads: int = 2, workers: int = 1,
                 cache_dir: Optional[str] = None, timeout: float = 120.0, seeds=SEARCH_SEEDS, dists=SEARCH_DISTS,
                 warmup: int = 2, repeat: int = 5, min_repeat_ms: float = 20.0, chunk: Optional[int] = None,
                 keep_sessions: int = 6, remote=None, pair_repeat: int = 2):
        self.reference = reference
        self.target = target
        self.threads = threads
        self.workers = max(1, int(workers))
        self.chunk = chunk or max(2, 2 * self.workers)
        self.timing = dict(warmup=warmup, repeat=repeat, min_repeat_ms=min_repeat_ms)
        self.pair_timing = dict(warmup=1, repeat=max(1, int(pair_repeat)), min_repeat_ms=min_repeat_ms)
        common = dict(seeds=seeds, dists=dists, cache_dir=cache_dir, threads=threads, timeout=timeout)
        # configuration, content key, disk cache, cached reference and the spare worker
        self.main = Evaluator(target, time=True, **common, **self.timing)
        self._verifiers: list[Evaluator] = []
        if self.workers > 1:
            self._verifiers = [Evaluator(target, time=False, prestart=False, **common) for _ in range(self.workers)]
        self.remote = remote
        self.timed_on = "local" if remote is None else remote.where
        self.keep_sessions = max(2, int(keep_sessions))
        #: open candidates (one build each), least recently used first
        self._sessions: "OrderedDict[str, Candidate]" = OrderedDict()
        self._pinned: set = set()
        self._texts: dict = {}
        self._sets: Optional[list] = None
        self._lock = threading.Lock()
        self.stats = {"evaluated": 0, "parallel_batches": 0, "builds": 0, "verified_from_cache": 0,
                      "timings": 0, "remote_timings": 0, "paired": 0, "rebuilds_for_timing": 0}

    def close(self) -> None:
        for s in list(self._sessions.values()):
            s.close()
        self._sessions.clear()
        self.main.close()
        for v in self._verifiers:
            v.close()
        if self.remote is not None:
            self.remote.close()

    # -- sessions -------------------------------------------------------------------------
    def pin(self, text: str) -> None:
        """Keep this candidate's session open whatever the LRU says (the search's input: the
        final confirmation times it against the best)."""
        self._pinned.add(_text_key(text))

    def release(self, text: str) -> None:
        """The search will not time ``text`` again: stop its worker now."""
        if _text_key(text) not in self._pinned:
            self._drop(text)

    def open_sessions(self) -> int:
        return len(self._sessions)

    def _keep(self, text: str, s: Candidate) -> None:
        k = _text_key(text)
        old = self._sessions.pop(k, None)
        if old is not None and old is not s:
            old.close()
        self._sessions[k] = s
        self._texts[k] = text
        while len(self._sessions) > self.keep_sessions:
            victim = next((x for x in self._sessions if x not in self._pinned), None)
            if victim is None:
                break
            self._sessions.pop(victim).close()

    def _drop(self, text: str) -> None:
        s = self._sessions.pop(_text_key(text), None)
        if s is not None:
            s.close()

    def _session(self, text: str) -> Candidate:
        """The open session of ``text`` (built again when it was closed)."""
        k = _text_key(text)
        s = self._sessions.get(k)
        if s is not None and not s.closed:
            self._sessions.move_to_end(k)
            return s
        self.stats["rebuilds_for_timing"] += 1
        s = self._new_session(text, self.main.pool)
        self._keep(text, s)
        return s

    def _new_session(self, text: str, pool) -> Candidate:
        self.stats["builds"] += 1
        return self.main.open(text, pool=pool)

    def timing_sets(self) -> list:
        """The inputs every candidate is timed on (the reference's, per seed, first distribution)."""
        if self._sets is None:
            ref, problem = pick_kernel(self.reference, None, "reference")
            if ref is None:
                raise ValueError(problem)
            cached = self.main.reference(ref)
            first = self.main.dists[0] if self.main.dists else "uniform"
            self._sets = [cached.run(seed, first)[0] for seed in self.main.seeds]
        return self._sets

    # -- timing ---------------------------------------------------------------------------
    def _time_in(self, text: str, s: Optional[Candidate], **protocol) -> TimingResult:
        self.stats["timings"] += 1
        if self.remote is not None:
            self.stats["remote_timings"] += 1
            return self.remote.time([text], self.timing_sets(), threads=self.threads, **protocol)[0]
        return (s or self._session(text)).time(self.timing_sets(), Protocol(**protocol))

    def retime(self, text: str) -> TimingResult:
        """Time ``text`` again, now (its session is reused when it is still open)."""
        return self._time_in(text, None, **self.timing)

    def paired(self, text_a: str, text_b: str, rounds: int = PAIR_ROUNDS) -> Optional[Paired]:
        """Time ``text_a`` and ``text_b`` alternately (A B B A ...); None if a timing failed."""
        self.stats["paired"] += 1
        rounds = max(1, int(rounds))
        if self.remote is not None:
            self.stats["remote_timings"] += 1
            a_runs, b_runs = self.remote.interleaved(text_a, text_b, self.timing_sets(), rounds=rounds,
                                                     threads=self.threads, **self.pair_timing)
            if a_runs is None:
                return None
            return paired_from_rounds(a_runs, b_runs, self.timed_on)
        sa = self._session(text_a)
        self.pin(text_a)  # the second session's build must not close the first
        try:
            sb = self._session(text_b)
            self.stats["timings"] += 2 * rounds
            return sa.paired(sb, rounds, Protocol(**self.pair_timing), self.timing_sets())
        finally:
            self._pinned.discard(_text_key(text_a))

    # -- evaluation -----------------------------------------------------------------------
    def evaluate(self, text: str, numerics: Optional[str] = None) -> Evaluation:
        return self.evaluate_batch([(text, numerics)])[0]

    def evaluate_batch(self, items: list[tuple[str, Optional[str]]]) -> list[Evaluation]:
        """``items`` = [(text, numerics)]; the evaluations in the same order, every timing
        measured now."""
        out: list[Evaluation] = []
        for i in range(0, len(items), self.chunk if self.workers > 1 else 1):
            part = items[i:i + (self.chunk if self.workers > 1 else 1)]
            verified = self._verify_part(part)
            for (text, numerics), (ev, s, key) in zip(part, verified):  # timing: one at a time
                out.append(self._finish(text, ev, s, key))
        return out

    def _verify_part(self, part) -> list:
        if self.workers <= 1 or len(part) <= 1:
            return [self._verify(t, n, self.main, self.main.pool) for t, n in part]
        self.stats["parallel_batches"] += 1
        self._warm_reference()
        free = list(self._verifiers)

        def one(item):
            with self._lock:
                ev = free.pop()
            try:
                return self._verify(item[0], item[1], ev, None)
            finally:
                with self._lock:
                    free.append(ev)

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(one, part))

    def _warm_reference(self) -> None:
        """Each verifier's reference outputs, computed here in turn (the interpreter is not
        shared between threads)."""
        ref, _ = pick_kernel(self.reference, None, "reference")
        for ev in self._verifiers:
            cached = ev.reference(ref)
            for seed in ev.seeds:
                for dist in (ev.dists or ("uniform",)):
                    cached.run(seed, dist)

    def _verify(self, text: str, numerics, ev: Evaluator, pool) -> tuple:
        """(Evaluation without timing, open session or None, cache key or None)."""
        t0 = _time.perf_counter()
        try:
            cand, problem = pick_kernel(text, None, "candidate")
            if cand is None:
                return Evaluation(_text_key(text), False, "illegal", None, None, None,
                                  round(_time.perf_counter() - t0, 4), problem), None, None
            prepared = InterpreterOracle(self.reference).prepare(ev, cand, None)
            fp = kernel_fingerprint(cand.kernel)
            key = self.main.key(cand.kernel, prepared.reference_kernel, numerics)
            if self.main.cache is not None:
                d = self.main.cache.get(key)
                if d is not None:
                    hit = Evaluation.from_json(d, cached=True)
                    with self._lock:
                        self.stats["verified_from_cache"] += 1
                    return hit, None, key
            with self._lock:
                self.stats["builds"] += 1
            c = ev.open_checked(text, cand, fp, pool=pool)
            keep = False
            try:
                out = c.verify(prepared=prepared, oracle_name="interpreter", numerics=numerics, t0=t0)
                if not out.ok:
                    return out, None, (None if out.error_kind == "oracle" else key)
                keep = True
                return out, c, key
            finally:
                if not keep:
                    c.close()
        except Exception as e:  # noqa: BLE001 - an evaluator failure is this candidate's failure, not the search's
            return _failed(text, f"evaluator error: {type(e).__name__}: {e}"), None, None

    def _finish(self, text: str, ev: Evaluation, s: Optional[Candidate], key: Optional[str]) -> Evaluation:
        """Time a verified candidate now (in its session, or a new build when the
        verification came from the cache) and cache the evaluation."""
        self.stats["evaluated"] += 1
        if not ev.ok:
            if key is not None and not ev.cached and ev.error_kind not in UNCACHED_KINDS and self.main.cache:
                self.main.cache.put(key, ev.fingerprint, ev.to_json())
            return ev
        try:
            if self.remote is not None:
                if s is not None:  # the remote builds its own module; this one served the verification
                    s.close()
                s = None
            elif s is None:
                s = self._new_session(text, self.main.pool)
            if s is not None:
                self._keep(text, s)
            tr = self._time_in(text, s, **self.timing)
        except Exception as e:  # noqa: BLE001 - see _verify
            self._drop(text)
            return replace(ev, ok=False, error_kind="runtime", error=f"evaluator error: {type(e).__name__}: {e}")
        if not tr.ok:
            self._drop(text)
            return replace(ev, ok=False, error_kind=tr.error_kind or "runtime", timing=tr, error=tr.error,
                           cached=False)
        out = replace(ev, timing=tr, cached=False)
        if key is not None and self.main.cache is not None and not ev.cached:
            self.main.cache.put(key, out.fingerprint, out.to_json())
        return out


def _failed(text: str, message: str) -> Evaluation:
    return Evaluation(_text_key(text), False, "runtime", None, None, None, 0.0, message)
