"""How ``leirc build -O search`` shows a running search: its log lines, short, under one
progress line; and the results it keeps for the ``--json`` document and the exit status.

The search logs one line per evaluation, ``[N] step1 -> step2 -> ...: 1.2 ms (x1.5)``. Below an
-O2 candidate (16-17 steps) every descendant's line repeated all of them; :class:`StepLog`
writes each sequence once and afterwards names the already-logged ancestor it extends:
``[9] #3 + loop_unroll(...) (depth 17): ...``, so the new step is what one reads.

On a terminal (and without ``-q``) the search's own progress line (evaluations done/budget,
best so far, elapsed<ETA) stays at the bottom: log lines are written above it through tqdm
rather than over it. In a pipe or with ``-q`` there is no progress line.
"""

from __future__ import annotations

import re
import sys
from typing import Callable, Optional

from ..search.optimizer import SearchOptimizer

_EVAL = re.compile(r"^\[(?P<n>\d+)\] (?P<steps>.+?): (?P<what>(?:\S+ ms \(x[^)]*\)|failed: \S+)(?: \(replayed\))?)$")
_CONFIRM = re.compile(r"^(?P<head>\[confirm\] the best )\((?P<steps>.+?)\)(?P<tail> does not beat .*)$")

#: a step list up to this long is printed whole
SHORT = 2


class StepLog:
    """Rewrites the search's log lines so that no line repeats a step list already shown."""

    def __init__(self) -> None:
        self.seen: dict[tuple, int] = {}

    def __call__(self, line: str) -> str:
        m = _EVAL.match(line)
        if m is not None and m["steps"] != "root":
            steps = tuple(m["steps"].split(" -> "))
            n = int(m["n"])
            short = self._short(steps)
            self.seen.setdefault(steps, n)
            return f"[{n}] {short}: {m['what']}"
        m = _CONFIRM.match(line)
        if m is not None:
            return f"{m['head']}({self._short(tuple(m['steps'].split(' -> ')))}){m['tail']}"
        return line

    def _short(self, steps: tuple) -> str:
        if len(steps) <= SHORT:
            return " -> ".join(steps)
        if steps in self.seen:
            return f"#{self.seen[steps]} (depth {len(steps)})"
        for cut in range(len(steps) - 1, 0, -1):
            j = self.seen.get(steps[:cut])
            if j is not None:
                return f"#{j} {_added(steps[cut:])} (depth {len(steps)})"
        return f"{steps[0]} -> ... -> {steps[-1]} ({len(steps)} steps)"


def _added(new: tuple) -> str:
    if len(new) <= SHORT:
        return "+ " + " -> ".join(new)
    return f"+{len(new)} steps (... -> {new[-1]})"


class LogWriter:
    """The search's log callback: shortened lines on stderr, above a live progress bar."""

    def __init__(self, live: bool, stream=None) -> None:
        self.live = live
        self.stream = stream or sys.stderr
        self.short = StepLog()

    def __call__(self, msg: str) -> None:
        line = self.short(msg)
        if self.live:
            from tqdm import tqdm

            tqdm.write(line, file=self.stream)  # clears the bar, writes, redraws it below
        else:
            print(line, file=self.stream, flush=True)


def is_interrupted(result) -> bool:
    """Whether a search ended by Ctrl-C (it keeps the best so far and returns normally)."""
    return "interrupted" in (getattr(result, "stopped", "") or "")


class CliSearch(SearchOptimizer):
    """The driver's ``-O search`` for ``leirc build``: keeps every kernel's
    :class:`~leirc.search.core.SearchResult` (the ``--json`` document lists them; a search
    stopped by Ctrl-C makes the command exit 130 once the best is written)."""

    def __init__(self, options, *, out_dir: Optional[str], quiet: bool, json_mode: bool,
                 stem: Optional[Callable[[str], str]] = None, stream=None):
        stream = stream or sys.stderr
        isatty = getattr(stream, "isatty", None)
        live = not quiet and bool(isatty and isatty())
        log = (lambda m: None) if json_mode else LogWriter(live, stream)
        super().__init__(options, out_dir=out_dir, log=log, progress=live and not json_mode, json_out=None,
                         outputs=("json", "html"), stem=stem)
        self.results: list = []

    def optimize(self, result, target):
        out = super().optimize(result, target)
        self.results.append(out.result)
        return out

    @property
    def interrupted(self) -> bool:
        return any(is_interrupted(r) for r in self.results)
