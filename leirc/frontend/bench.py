"""Timing PyTorch (eager and torch.compile) with the leirc CPU protocol.

``shared/notes/benchmarking.md`` §4.2: fixed thread count (``torch.set_num_threads``),
several pre-generated input sets rotated across calls (no call can reuse a previous
result), ``warmup`` calls, then ``repeat`` measurements, each a ``perf_counter`` loop of
``number`` calls with ``number`` chosen so a measurement lasts at least ``min_repeat_ms``;
the median per-call time is reported. The same parameters drive
:func:`leirc.lower.runner.time_kernel` on the LEIR side.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

WARMUP = 3
REPEAT = 10
MIN_REPEAT_MS = 50.0


@dataclass
class TimeStats:
    ok: bool
    median_ms: Optional[float] = None
    min_ms: Optional[float] = None
    max_ms: Optional[float] = None
    runs: list = field(default_factory=list)
    number: Optional[int] = None
    threads: Optional[int] = None
    error: Optional[str] = None
    setup_s: Optional[float] = None  # torch.compile: time of the first (compiling) call


def time_callable(call: Callable[[int], Any], n_sets: int, *, warmup: int = WARMUP, repeat: int = REPEAT,
                  min_repeat_ms: float = MIN_REPEAT_MS) -> TimeStats:
    """Median ms per call of ``call(k)`` (k = input set index, rotating)."""
    k = 0
    for _ in range(max(warmup, 1)):
        call(k % n_sets)
        k += 1
    t0 = time.perf_counter()
    call(k % n_sets)
    k += 1
    one = time.perf_counter() - t0
    number = max(1, math.ceil((min_repeat_ms / 1000.0) / max(one, 1e-9)))
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            call(k % n_sets)
            k += 1
        runs.append((time.perf_counter() - t0) * 1000.0 / number)
    return TimeStats(True, statistics.median(runs), min(runs), max(runs), runs, number)


def set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def private_inductor_cache() -> str:
    """Point torch.compile's cache at a private temporary directory (unless already set)."""
    d = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not d:
        d = tempfile.mkdtemp(prefix="leirc-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = d
    return d


def time_torch(model, input_sets: Sequence[Sequence], *, compile: bool = False, threads: Optional[int] = None,
               **kw) -> TimeStats:
    """Time ``model(*inputs)`` (eager, or ``torch.compile(model)``) under ``torch.no_grad``."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    fn = model
    setup = None
    if compile:
        private_inductor_cache()
        try:
            fn = torch.compile(model)
            t0 = time.perf_counter()
            with torch.no_grad():
                fn(*input_sets[0])
            setup = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - inductor may be unavailable (no compiler, ...)
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            return TimeStats(False, error=f"torch.compile failed: {type(e).__name__}: {msg[:200]}")

    def call(k):
        with torch.no_grad():
            return fn(*input_sets[k])

    try:
        st = time_callable(call, len(input_sets), **kw)
    except Exception as e:  # noqa: BLE001
        return TimeStats(False, error=f"{type(e).__name__}: {e}")
    st.threads = torch.get_num_threads()
    st.setup_s = setup
    return st
