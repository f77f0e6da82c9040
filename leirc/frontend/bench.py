"""Timing PyTorch (eager and torch.compile) with the leirc CPU protocol.

``shared/notes/benchmarking.md`` §4.2: fixed thread count (``torch.set_num_threads``),
several pre-generated input sets rotated across calls (no call can reuse a previous
result), ``warmup`` calls, then ``repeat`` measurements, each a ``perf_counter`` loop of
``number`` calls with ``number`` chosen so a measurement lasts at least ``min_repeat_ms``;
the median per-call time is reported. The same parameters drive
:func:`leirc.lower.device.time_kernel` on the LEIR side (the *kernel-only* figure: pre-made
inputs and outputs, no module around the kernel).

The KernelBench-conformant figure (issue #35) is :func:`time_modules`: the reference
``Model(*inputs)`` and ``ModelNew(*inputs)`` (and torch.compile) timed as modules on the
same inputs, each call allocating its outputs, in interleaved rounds, with the median, the
spread and the load average; :func:`kb_correctness` is KernelBench's own check
(``allclose(atol=rtol=1e-2)`` on several seeded inputs). ``benchmarks/kb_harness.py`` and
``leirc build MODEL.py --time`` use both.
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


# ---------------------------------------------------------------------------
# KernelBench-conformant timing and correctness (issue #35)

#: KernelBench's own correctness check: allclose(atol=rtol=KB_TOL) on KB_TRIALS seeded inputs
#: (1e-2 is the fp32 tolerance of KernelBench v0/v0.1; newer versions use 1e-4 for fp32)
KB_TOL = 1e-2
KB_TRIALS = 5
KB_SEED = 42
#: rounds of the interleaved module timing, and the shortest timed block of calls
ROUNDS = 20
MIN_BLOCK_MS = 20.0
#: untimed pause before each module measurement (a thread pool left spinning goes idle)
PAUSE_MS = 50.0
#: a 1-minute load average above this on the timing machine makes the figure suspect
LOAD_WARN = 1.5


@dataclass
class SideStats:
    """One side (a module) of an interleaved timing: ms per call, one entry per round."""

    median_ms: float
    min_ms: float
    max_ms: float
    p25_ms: float
    p75_ms: float
    runs: list
    number: int  # calls per timed block

    @property
    def spread(self) -> float:
        """The interquartile range over the median (0.05 = ±2.5 % around the median)."""
        return (self.p75_ms - self.p25_ms) / self.median_ms if self.median_ms else 0.0

    def as_dict(self) -> dict:
        return {"median_ms": self.median_ms, "min_ms": self.min_ms, "max_ms": self.max_ms, "p25_ms": self.p25_ms,
                "p75_ms": self.p75_ms, "spread": self.spread, "number": self.number, "runs": list(self.runs)}


@dataclass
class ModuleTiming:
    """Modules timed the KernelBench way: each side ``module(*inputs)`` on the same input
    sets, allocating its own outputs every call, in interleaved rounds."""

    ok: bool
    sides: dict = field(default_factory=dict)  # name -> SideStats
    rounds: int = 0
    warmup: int = 0
    pause_ms: float = 0.0
    threads_torch: Optional[int] = None
    threads_tvm: Optional[int] = None
    l2_flush_mb: float = 0.0
    load_before: Optional[float] = None
    load_after: Optional[float] = None
    error: Optional[str] = None

    @property
    def load(self) -> Optional[float]:
        vals = [x for x in (self.load_before, self.load_after) if x is not None]
        return max(vals) if vals else None

    @property
    def warning(self) -> Optional[str]:
        if self.load is not None and self.load > LOAD_WARN:
            return (f"load average {self.load:.2f} > {LOAD_WARN} while timing: other work shared the CPU, "
                    "the figures are not reliable")
        return None

    def speedup(self, base: str, other: str) -> Optional[float]:
        a, b = self.sides.get(base), self.sides.get(other)
        return a.median_ms / b.median_ms if a and b and b.median_ms > 0 else None

    def as_dict(self) -> dict:
        return {"ok": self.ok, "sides": {k: v.as_dict() for k, v in self.sides.items()}, "rounds": self.rounds,
                "warmup": self.warmup, "pause_ms": self.pause_ms, "threads_torch": self.threads_torch,
                "threads_tvm": self.threads_tvm,
                "l2_flush_mb": self.l2_flush_mb, "load_before": self.load_before, "load_after": self.load_after,
                "warning": self.warning, "error": self.error}


def load_average() -> Optional[float]:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):  # not every platform has it
        return None


def _quantile(xs: list, q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def time_modules(sides: dict, input_sets: Sequence[Sequence], *, rounds: int = ROUNDS, warmup: int = WARMUP,
                 min_block_ms: float = MIN_BLOCK_MS, l2_flush_mb: float = 0.0, pause_ms: float = 0.0,
                 threads: Optional[int] = None) -> ModuleTiming:
    """Time each module of ``sides`` (name -> module) as KernelBench does, ``module(*inputs)``
    under ``torch.no_grad``, every call allocating its outputs: ``warmup`` calls per side,
    then ``rounds`` rounds; in each round every side is timed once, the order rotating from
    round to round (so no side always runs right after another), one measurement being a
    block of calls over the rotating input sets lasting at least ``min_block_ms`` (the
    same block size all rounds). With ``l2_flush_mb`` > 0 a buffer that large is rewritten
    before every call and each call is timed alone (cold caches, KernelBench's GPU protocol);
    the flush is outside the timed interval. ``pause_ms``: an untimed sleep before each
    measurement, so the thread pool one side leaves spinning (OpenMP's, TVM's) has gone
    idle before the next side runs. The load average is recorded before and after."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    names = list(sides)
    n_sets = len(input_sets)
    if not names or not n_sets:
        raise ValueError("time_modules needs at least one module and one input set")
    res = ModuleTiming(False, rounds=rounds, warmup=warmup, pause_ms=pause_ms, threads_torch=torch.get_num_threads(),
                       l2_flush_mb=l2_flush_mb, load_before=load_average())
    flush_buf = torch.empty(int(l2_flush_mb * (1 << 20)) // 4, dtype=torch.int32) if l2_flush_mb > 0 else None
    counter = {n: 0 for n in names}

    def one(name):
        k = counter[name]
        counter[name] = k + 1
        return sides[name](*input_sets[k % n_sets])

    try:
        with torch.no_grad():
            number = {}
            for n in names:
                for _ in range(max(warmup, 1)):
                    one(n)
                t0 = time.perf_counter()
                one(n)
                dt = time.perf_counter() - t0
                number[n] = 1 if flush_buf is not None else max(1, math.ceil(min_block_ms / 1000.0 / max(dt, 1e-9)))
            runs = {n: [] for n in names}
            for r in range(rounds):
                for i in range(len(names)):
                    n = names[(r + i) % len(names)]
                    if pause_ms > 0:
                        time.sleep(pause_ms / 1000.0)
                    if flush_buf is not None:
                        flush_buf.fill_(r + i)
                    t0 = time.perf_counter()
                    for _ in range(number[n]):
                        one(n)
                    runs[n].append((time.perf_counter() - t0) * 1000.0 / number[n])
    except Exception as e:  # noqa: BLE001 - the user's module (or the kernel) failed
        res.error = f"{type(e).__name__}: {e}"
        res.load_after = load_average()
        return res
    for n in names:
        xs = runs[n]
        res.sides[n] = SideStats(statistics.median(xs), min(xs), max(xs), _quantile(xs, 0.25), _quantile(xs, 0.75),
                                 xs, number[n])
    res.load_after = load_average()
    res.ok = True
    return res


def kb_trial_seeds(trials: int = KB_TRIALS, seed: int = KB_SEED) -> list:
    """The per-trial input seeds KernelBench's ``run_and_check_correctness`` derives from its seed."""
    import torch

    torch.manual_seed(seed)
    return [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(trials)]


def kb_correctness(ref, new, get_inputs: Callable[[int], Sequence], *, trials: int = KB_TRIALS,
                   tol: float = KB_TOL, seed: int = KB_SEED) -> dict:
    """KernelBench's correctness check: for each trial seed, fresh ``get_inputs(seed)``, the
    same shape and ``torch.allclose(new, ref, atol=tol, rtol=tol)`` on every output; all
    trials must pass. An exception in either module fails the check with its message."""
    import torch

    out = {"ok": False, "trials": trials, "passed": 0, "tol": tol, "max_abs_diff": 0.0, "mean_abs_diff": 0.0,
           "error": None}
    diffs = []
    for s in kb_trial_seeds(trials, seed):
        try:
            inputs = list(get_inputs(s))
            with torch.no_grad():
                a, b = ref(*inputs), new(*inputs)
        except Exception as e:  # noqa: BLE001 - the user's module, or the kernel, failed
            out["error"] = f"seed {s}: {type(e).__name__}: {e}"
            return out
        a = list(a) if isinstance(a, (tuple, list)) else [a]
        b = list(b) if isinstance(b, (tuple, list)) else [b]
        if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
            out["error"] = (f"seed {s}: output shape mismatch: {[tuple(x.shape) for x in a]} (reference) vs "
                            f"{[tuple(y.shape) for y in b]}")
            return out
        good = True
        for x, y in zip(a, b):
            d = (x.double() - y.double()).abs()
            if d.numel():
                diffs.append(float(d.mean()))
                out["max_abs_diff"] = max(out["max_abs_diff"], float(d.max()))
            good = good and bool(torch.allclose(y.to(x.dtype), x, atol=tol, rtol=tol))
        if not good:
            out["error"] = f"seed {s}: not allclose(atol=rtol={tol:g})"
            break
        out["passed"] += 1
    out["mean_abs_diff"] = statistics.mean(diffs) if diffs else 0.0
    out["ok"] = out["passed"] == trials
    return out
