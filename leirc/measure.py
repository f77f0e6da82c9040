"""The one measurement module: how leirc times kernels and compares two of them.

* :class:`Protocol` -- warm-up calls, measurements, and the minimum duration of one
  measurement (a measurement repeats the call until it lasts that long). Rotating input sets
  and the quiet-wait (:func:`leirc.lower.session.wait_for_quiet`, before every timing in a
  worker) are applied by whoever runs the calls; the protocol is what they are given.
* :func:`interleave` -- two candidates timed alternately, A B B A A B ..., in short rounds:
  the ratio of each round's medians cancels a load that drifts slowly, and :class:`Paired`
  keeps the median ratio with a robust spread. A ratio leirc prints comes from one such
  measurement, never from two unrelated ones (:meth:`Paired.quotient_is_consistent`).
* :func:`spread_of` -- median and robust relative spread of repeated measurements.
* :func:`load_average` / :func:`busy_warning` -- the machine's load, recorded with results
  and warned about above :data:`BUSY_LOAD` (PyTorch's OpenMP regions slow down far more than
  TVM's pool under load, so a "vs eager" ratio from a busy machine flatters leirc).

Pure Python (no TVM, no NumPy): the lowering's RPC timer, the search, the driver, the
dataset and ``benchmarks/`` all use it.
"""

from __future__ import annotations

import math
import os
import statistics
import time as _time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

__all__ = ["Protocol", "Paired", "paired_from_rounds", "paired_from_medians", "interleave", "spread_of",
           "load_average", "busy_warning", "BUSY_LOAD", "PAIR_ROUNDS", "CONFIRM_ROUNDS"]

#: rounds of an interleaved comparison (each round times both candidates: one warm-up call
#: and a few measurements each; short rounds follow a drifting load more closely)
PAIR_ROUNDS = 6
#: rounds of a final best-against-input confirmation
CONFIRM_ROUNDS = 8
#: a 1-minute load average above this (on top of the run itself) makes timings suspect
BUSY_LOAD = 1.5


@dataclass(frozen=True)
class Protocol:
    """How one timing is taken: ``warmup`` calls, then ``repeat`` measurements each lasting
    at least ``min_repeat_ms`` (the median is the result)."""

    warmup: int = 3
    repeat: int = 10
    min_repeat_ms: float = 50.0

    def kwargs(self) -> dict:
        return {"warmup": self.warmup, "repeat": self.repeat, "min_repeat_ms": self.min_repeat_ms}


def spread_of(runs: Sequence[float]) -> tuple[float, float]:
    """(median, robust relative standard error of the median: 1.4826 MAD / median / sqrt(n))."""
    runs = [float(r) for r in runs]
    if not runs:
        return math.nan, math.nan
    med = statistics.median(runs)
    if len(runs) < 2 or med == 0:
        return med, 0.0
    mad = statistics.median(abs(r - med) for r in runs)
    return med, 1.4826 * mad / med / math.sqrt(len(runs))


@dataclass(frozen=True)
class Paired:
    """Two candidates timed alternately: ``ratio`` = time(b) / time(a), the median over the
    rounds; ``spread`` = a robust relative standard error of that median."""

    ratio: float
    spread: float
    ratios: tuple
    a_ms: float  # median of a's round medians
    b_ms: float
    rounds: int
    on: str = "local"  # where it was measured ("local", or rpc://HOST:PORT/KEY)
    at: float = field(default_factory=_time.time)
    a_rounds: tuple = ()  # each round's median of a (ms)
    b_rounds: tuple = ()
    load: Optional[float] = None  # the 1-minute load average when it was measured

    @property
    def speedup(self) -> float:
        """``a_ms / b_ms``: the quotient of the two times printed next to it, so a screen
        showing both times and this ratio never contradicts itself. (:attr:`ratio`, the
        median of the per-round ratios, is what decisions use: one disturbed round does not
        move it; :meth:`quotient_is_consistent` says whether the two agree.)"""
        return self.a_ms / self.b_ms if self.a_ms and self.b_ms else 1.0 / self.ratio

    def beats(self, min_gain: float, max_noise: float = 0.5) -> bool:
        """b is faster than a beyond the noise of this comparison."""
        noise = min(max_noise, max(min_gain, 2.0 * self.spread))
        return self.ratio < 1.0 - noise

    def within_noise(self) -> bool:
        """The two are indistinguishable: the ratio lies within two spreads of 1."""
        return abs(1.0 - self.ratio) <= 2.0 * self.spread

    def quotient_is_consistent(self, rel: float = 0.25) -> bool:
        """The median ratio and the quotient of the medians tell the same story (a drifting
        load can pull them apart; then neither should be printed as the speedup alone)."""
        if not self.a_ms or not self.b_ms:
            return False
        return abs((self.b_ms / self.a_ms) / self.ratio - 1.0) <= rel

    def merged(self, more: "Paired") -> "Paired":
        """This comparison and ``more`` rounds of it, as one."""
        return paired_from_medians(self.a_rounds + more.a_rounds, self.b_rounds + more.b_rounds, self.on)

    def to_json(self) -> dict:
        return {"ratio": self.ratio, "spread": self.spread, "ratios": list(self.ratios), "a_ms": self.a_ms,
                "b_ms": self.b_ms, "rounds": self.rounds, "on": self.on, "at": self.at,
                "a_rounds": list(self.a_rounds), "b_rounds": list(self.b_rounds), "load": self.load}

    @classmethod
    def from_json(cls, d: dict) -> "Paired":
        return cls(float(d["ratio"]), float(d["spread"]), tuple(float(x) for x in d.get("ratios", ())),
                   float(d["a_ms"]), float(d["b_ms"]), int(d["rounds"]), d.get("on", "local"), float(d.get("at", 0.0)),
                   tuple(float(x) for x in d.get("a_rounds", ())), tuple(float(x) for x in d.get("b_rounds", ())),
                   d.get("load"))


def paired_from_rounds(a_runs: list, b_runs: list, on: str = "local") -> Paired:
    """``a_runs[r]``, ``b_runs[r]``: the measurements (ms) of round ``r``."""
    return paired_from_medians([statistics.median(a) for a in a_runs], [statistics.median(b) for b in b_runs], on)


def paired_from_medians(a_med, b_med, on: str = "local") -> Paired:
    ratios = [b / a for a, b in zip(a_med, b_med)]
    ratio, spread = spread_of(ratios)
    return Paired(ratio, spread, tuple(ratios), statistics.median(a_med), statistics.median(b_med), len(ratios), on,
                  a_rounds=tuple(a_med), b_rounds=tuple(b_med), load=load_average())


def interleave(time_a: Callable[[], Optional[Sequence[float]]], time_b: Callable[[], Optional[Sequence[float]]],
               rounds: int = PAIR_ROUNDS, on: str = "local") -> Optional[Paired]:
    """Time two candidates alternately (A B, then B A, ...): ``time_x()`` takes one round's
    measurements (ms) or returns None when the timing failed (then so does this)."""
    a_runs: list = []
    b_runs: list = []
    for r in range(max(1, int(rounds))):
        order = ((time_a, a_runs), (time_b, b_runs)) if r % 2 == 0 else ((time_b, b_runs), (time_a, a_runs))
        for fn, runs in order:
            got = fn()
            if got is None:
                return None
            runs.append(list(got))
    return paired_from_rounds(a_runs, b_runs, on)


def load_average() -> Optional[float]:
    """The 1-minute load average (None where the OS does not tell)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def busy_warning(load: Optional[float] = None, threshold: float = BUSY_LOAD) -> Optional[str]:
    """A one-line warning when the machine was busy (None when it was quiet or unknown)."""
    load = load_average() if load is None else load
    if load is None or load <= threshold:
        return None
    return (f"the machine was busy (load average {load:.2f} > {threshold:g}): timings, and ratios against PyTorch "
            "most of all, are not trustworthy; rerun on a quiet machine")
