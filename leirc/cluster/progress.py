"""The live progress line of a batch (jobs done/failed/retried, per node) and its summary."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Optional, TextIO


class Progress:
    """Counts outcomes; on a terminal, redraws one line on stderr at most every 0.2 s."""

    def __init__(self, total: int, *, where: str = "", stream: Optional[TextIO] = None, live: Optional[bool] = None,
                 what: str = "jobs"):
        self.total = total
        self.where = where
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.done = 0
        self.failed = 0
        self.per_node: Counter = Counter()
        self.retried = 0
        self.t0 = time.perf_counter()
        self._last = 0.0
        self._width = 0

    def add(self, outcome) -> None:
        self.done += 1
        if not outcome.ok:
            self.failed += 1
        self.per_node[outcome.node or "?"] += 1
        self.draw()

    def line(self) -> str:
        nodes = ", ".join(f"{n}: {c}" for n, c in sorted(self.per_node.items()))
        return (f"{self.done}/{self.total} {self.what} done, {self.failed} failed, {self.retried} retried"
                f"{' on ' + self.where if self.where else ''}{' | ' + nodes if nodes else ''}")

    def draw(self, retried: Optional[int] = None, force: bool = False) -> None:
        if retried is not None:
            self.retried = retried
        if not self.live:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        text = self.line()
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def finish(self) -> None:
        if self.live and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0

    def summary(self) -> dict:
        return {"jobs": self.total, "done": self.done, "failed": self.failed, "retried": self.retried,
                "per_node": dict(sorted(self.per_node.items())), "where": self.where,
                "seconds": round(time.perf_counter() - self.t0, 2)}


__all__ = ["Progress"]
