"""Evaluating a batch of candidates for the search, on the engine's :class:`Evaluator`.

``workers=1``: one :class:`~leirc.engine.Evaluator` evaluates the candidates in turn
(verify, then time in the same session; its worker pool starts the next worker while the
current candidate runs).

``workers>1``: builds and verification of a batch run in parallel, timing one at a time with
nothing else running, in two phases per chunk of the batch:

1. each of ``workers`` threads verifies candidates with its own verify-only Evaluator (each
   candidate in its own sandboxed worker process: the builds and kernel runs overlap; the
   interpreter's reference outputs are shared, computed before the batch);
2. the candidates that verified are timed one by one, each in a fresh sandboxed session
   (:func:`leirc.lower.runner.time_kernel`) on the same inputs the Evaluator times on.

Phase 2 builds each correct candidate a second time: the Evaluator has no way yet to keep a
verified session open for later timing (``Evaluator.evaluate_batch`` would remove that
build; see docs/search.md). Both paths cache by the Evaluator's content key.

A candidate that crashes, hangs or runs out of memory is a failed :class:`Evaluation`; an
unexpected error of the evaluator itself is one too (``error_kind="runtime"``), never an
exception out of the search.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Optional

from ..engine.evaluate import DEFAULT_DISTS, Evaluation, Evaluator

#: the verification grid of a search candidate (the driver's .leir verify pass uses the same)
SEARCH_SEEDS = (0, 1)
SEARCH_DISTS = ("uniform", "signed")


class CandidateEvaluator:
    """Evaluate candidate texts against one reference text."""

    def __init__(self, reference: str, *, target: str = "llvm", threads: int = 2, workers: int = 1,
                 cache_dir: Optional[str] = None, timeout: float = 120.0, seeds=SEARCH_SEEDS, dists=SEARCH_DISTS,
                 warmup: int = 2, repeat: int = 5, min_repeat_ms: float = 20.0, chunk: Optional[int] = None):
        self.reference = reference
        self.target = target
        self.threads = threads
        self.workers = max(1, int(workers))
        self.chunk = chunk or max(2, 2 * self.workers)
        self.timing = dict(warmup=warmup, repeat=repeat, min_repeat_ms=min_repeat_ms)
        common = dict(seeds=seeds, dists=dists, cache_dir=cache_dir, threads=threads, timeout=timeout)
        self.main = Evaluator(target, time=True, **common, **self.timing)
        self._verifiers: list[Evaluator] = []
        if self.workers > 1:
            self._verifiers = [Evaluator(target, time=False, prestart=False, **common) for _ in range(self.workers)]
        self._lock = threading.Lock()
        self.stats = {"evaluated": 0, "parallel_batches": 0, "timing_builds": 0}

    def close(self) -> None:
        self.main.close()
        for v in self._verifiers:
            v.close()

    def evaluate(self, text: str, numerics: Optional[str] = None) -> Evaluation:
        self.stats["evaluated"] += 1
        try:
            return self.main.evaluate(text, reference=self.reference, numerics=numerics)
        except Exception as e:  # noqa: BLE001 - an evaluator failure is this candidate's failure, not the search's
            return _failed(text, f"evaluator error: {type(e).__name__}: {e}")

    def evaluate_batch(self, items: list[tuple[str, Optional[str]]]) -> list[Evaluation]:
        """``items`` = [(text, numerics)]; the evaluations in the same order."""
        if self.workers <= 1 or len(items) <= 1:
            return [self.evaluate(t, n) for t, n in items]
        out: list[Evaluation] = []
        for i in range(0, len(items), self.chunk):
            out.extend(self._parallel(items[i:i + self.chunk]))
        return out

    # -- the parallel path ------------------------------------------------------------
    def _cached(self, text: str, numerics) -> Optional[Evaluation]:
        """An evaluation of the timed configuration already in the on-disk cache."""
        from ..lang.checker import check_text

        if self.main.cache is None:
            return None
        cf = check_text(text)
        if not cf.ok or len(cf.results) != 1:
            return None
        key = self.main.key(cf.results[0].kernel, self._ref_result().kernel, numerics)
        d = self.main.cache.get(key)
        return None if d is None else Evaluation.from_json(d, cached=True)

    def _ref_result(self):
        from ..lang.checker import check_text

        return check_text(self.reference).results[0]

    def _parallel(self, items) -> list[Evaluation]:
        self.stats["parallel_batches"] += 1
        results: list[Optional[Evaluation]] = [None] * len(items)
        todo = []
        for i, (t, n) in enumerate(items):
            hit = self._cached(t, n)
            if hit is not None:
                results[i] = hit
            else:
                todo.append(i)
        if not todo:
            return results  # type: ignore[return-value]
        # the reference outputs once, before the threads share them
        self._warm_reference()
        free = list(self._verifiers)

        def verify_one(i):
            with self._lock:
                ev = free.pop()
            try:
                t, n = items[i]
                return i, ev.evaluate(t, reference=self.reference, numerics=n)
            except Exception as e:  # noqa: BLE001 - see evaluate()
                return i, _failed(items[i][0], f"evaluator error: {type(e).__name__}: {e}")
            finally:
                with self._lock:
                    free.append(ev)

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            verified = dict(pool.map(verify_one, todo))
        for i in todo:  # phase 2: one at a time, nothing else running
            self.stats["evaluated"] += 1
            v = verified[i]
            results[i] = v if not v.ok else self._time(items[i], v)
        return results  # type: ignore[return-value]

    def _warm_reference(self) -> None:
        """Each verifier's reference outputs, computed here in turn (the interpreter is not
        shared between threads)."""
        ref = self._ref_result()
        for ev in self._verifiers:
            cached = ev.reference(ref)
            for seed in ev.seeds:
                for dist in (ev.dists or DEFAULT_DISTS):
                    cached.run(seed, dist)

    def _time(self, item, verified: Evaluation) -> Evaluation:
        from ..lang.checker import check_text
        from ..lower.runner import time_kernel

        text, numerics = item
        ref = self._ref_result()
        cached = self.main.reference(ref)
        first = self.main.dists[0] if self.main.dists else DEFAULT_DISTS[0]
        sets = [cached.run(seed, first)[0] for seed in self.main.seeds]
        self.stats["timing_builds"] += 1
        tr = time_kernel(text, sets, target=self.target, threads=self.threads, timeout=self.main.timeout,
                         **self.timing)
        if not tr.ok:
            return replace(verified, ok=False, error_kind=tr.error_kind or "runtime", timing=tr, error=tr.error)
        ev = replace(verified, timing=tr, seconds=verified.seconds + (tr.build_s or 0.0))
        if self.main.cache is not None:
            cand = check_text(text).results[0]
            self.main.cache.put(self.main.key(cand.kernel, ref.kernel, numerics), ev.fingerprint, ev.to_json())
        return ev


def _failed(text: str, message: str) -> Evaluation:
    import hashlib

    return Evaluation(hashlib.sha256(text.encode()).hexdigest(), False, "runtime", None, None, None, 0.0, message)
