"""An open document, analyzed kernel by kernel, for an editor.

A document is split into *segments* at each ``\\kernel`` keyword (the first segment also
holds whatever precedes the first kernel; a file without ``\\kernel`` is one segment, a
bare body). Each segment is parsed and checked on its own and the result is cached by the
segment's text, so an edit inside one kernel re-parses and re-checks only that kernel: the
others are looked up. A segment is analyzed with the start of its first line blanked, so
its columns are the document's and only lines and offsets are shifted when its results
are placed in the document.

This is the same per-kernel recovery that :func:`leirc.lang.parser.parse` does for a
broken file (one parse per ``\\kernel``), applied to every file: for a document without
NUL characters the diagnostics equal :func:`leirc.ide.diagnostics` of the whole text
(``tests/test_ide_document.py`` checks it differentially).

Positions here are 1-based lines and columns in code points, like
:class:`leirc.lang.ast.Span`; the language server converts them to UTF-16.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Iterator, Optional

from ..lang import ast as A
from ..lang.checker import check_kernel
from ..lang.diagnostics import Diagnostic, error
from ..lang.facts import CheckResult
from ..lang.parser import ParseResult, kernel_starts, parse

_KERNEL_KW = "\\kernel"


def shift_span(span: Optional[A.Span], lines: int, offset: int) -> Optional[A.Span]:
    if span is None or (lines == 0 and offset == 0):
        return span
    return A.Span(span.line + lines, span.col, span.end_line + lines, span.end_col,
                  span.start + offset, span.end + offset)


@dataclass(frozen=True)
class Analysis:
    """One segment's parse and check, in the segment's own coordinates."""

    parse: ParseResult
    kernel: Optional[A.Kernel]  # the segment's kernel, when it parsed
    result: Optional[CheckResult]  # its check, when it parsed without errors
    diagnostics: tuple[Diagnostic, ...]  # spans local to the segment, file not set

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.ok


def analyze_segment(text: str, last: bool = True) -> Analysis:
    """Parse and check one segment (``last``: no kernel follows it in the document)."""
    pr = parse(text)
    module = pr.module if pr.module is not None else pr.partial
    diags = list(pr.diagnostics)
    if module is None and not last and diags and diags[0].message.startswith("unexpected end of input"):
        # the kernel runs into the next one: say so as the whole-file parse does
        # (only its first error: the appended keyword starts a kernel of its own)
        diags = list(parse(text + _KERNEL_KW).diagnostics)[:1]
    if module is None or not module.kernels:
        return Analysis(pr, None, None, tuple(diags))
    kernel = module.kernels[0]
    if any(d.is_error for d in pr.diagnostics):
        return Analysis(pr, kernel, None, tuple(diags))
    result = check_kernel(kernel)
    return Analysis(pr, kernel, result, tuple(diags) + tuple(result.diagnostics))


class AnalysisCache:
    """Segment text -> :class:`Analysis`, least recently used first out. Thread-safe (the
    server analyzes off its event loop)."""

    def __init__(self, capacity: int = 512):
        self.capacity = capacity
        self._items: "OrderedDict[tuple[str, bool], Analysis]" = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, text: str, last: bool) -> Analysis:
        key = (text, last)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return hit
        a = analyze_segment(text, last)
        with self._lock:
            self.misses += 1
            self._items[key] = a
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return a


#: the process-wide cache (documents share kernels: a copy of a file costs nothing)
CACHE = AnalysisCache()


@dataclass(frozen=True)
class Segment:
    """One segment placed in the document."""

    index: int
    text: str  # its text, the part of its first line before it blanked
    offset: int  # document offset of the start of its first line
    line0: int  # lines before it (its first line is document line line0 + 1)
    analysis: Analysis
    pad: int = 0  # blanked characters at its start (text of the segment before)

    @property
    def kernel(self) -> Optional[A.Kernel]:
        return self.analysis.kernel

    @property
    def result(self) -> Optional[CheckResult]:
        return self.analysis.result

    @property
    def end_line(self) -> int:
        """The document line (1-based) of its last character."""
        return self.line0 + self.text.count("\n") + (0 if self.text.endswith("\n") else 1)

    def to_local(self, line: int) -> int:
        return line - self.line0

    def to_doc(self, span: Optional[A.Span]) -> Optional[A.Span]:
        return shift_span(span, self.line0, self.offset)

    def local_span(self, span: Optional[A.Span]) -> Optional[A.Span]:
        return shift_span(span, -self.line0, -self.offset)

    def contains_line(self, line: int) -> bool:
        return self.line0 < line <= max(self.end_line, self.line0 + 1)


def split(text: str) -> list[tuple[int, int, int]]:
    """(line start, start, end) offsets of the segments of ``text``: one per ``\\kernel``
    keyword (outside comments), as the parser's recovery splits a broken file; the first
    also holds what precedes the first kernel. A segment is analyzed as its text with the
    part of its first line before the keyword blanked, so its columns are the document's."""
    starts = kernel_starts(text)[1:]
    bounds = [0] + starts
    ends = starts + [len(text)]
    return [(text.rfind("\n", 0, s) + 1, s, e) for s, e in zip(bounds, ends)]


class Document:
    """A document's text and its per-kernel analysis (computed on construction, from
    ``cache``)."""

    def __init__(self, text: str, file: str = "<input>", cache: Optional[AnalysisCache] = None):
        if text.startswith("\ufeff"):
            text = " " + text[1:]  # as the parser does: a byte-order mark is a space
        self.text = text
        self.file = file
        cache = cache if cache is not None else CACHE
        bounds = split(text)
        segs: list[Segment] = []
        line0 = 0
        for i, (ls, s, e) in enumerate(bounds):
            seg_text = " " * (s - ls) + text[s:e]
            segs.append(Segment(i, seg_text, ls, line0, cache.get(seg_text, i == len(bounds) - 1), s - ls))
            line0 += seg_text.count("\n")
        self.segments = segs
        self._diagnostics: Optional[list[Diagnostic]] = None
        self._line_starts: Optional[list[int]] = None

    # -- positions ---------------------------------------------------------------
    @property
    def line_starts(self) -> list[int]:
        if self._line_starts is None:
            starts = [0]
            i = self.text.find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = self.text.find("\n", i + 1)
            self._line_starts = starts
        return self._line_starts

    def offset_of(self, line: int, col: int) -> int:
        """The offset of 1-based (line, col), clamped to the text."""
        starts = self.line_starts
        if line < 1:
            return 0
        if line > len(starts):
            return len(self.text)
        s = starts[line - 1]
        e = starts[line] - 1 if line < len(starts) else len(self.text)
        return max(s, min(s + col - 1, e))

    def position_of(self, offset: int) -> tuple[int, int]:
        """1-based (line, col) of an offset."""
        import bisect

        offset = max(0, min(offset, len(self.text)))
        i = bisect.bisect_right(self.line_starts, offset) - 1
        return i + 1, offset - self.line_starts[i] + 1

    def span(self, start: int, end: int) -> A.Span:
        """The document span of offsets [start, end)."""
        return A.Span(*self.position_of(start), *self.position_of(end), start, end)

    def segment_at_offset(self, offset: int) -> Segment:
        for seg in reversed(self.segments):
            if seg.offset + seg.pad <= offset:  # the blanked start belongs to the one before
                return seg
        return self.segments[0]

    # -- lookup ------------------------------------------------------------------
    def kernels(self) -> Iterator[tuple[Segment, A.Kernel]]:
        for seg in self.segments:
            if seg.kernel is not None:
                yield seg, seg.kernel

    def segment_at(self, line: int) -> Segment:
        """The segment holding document line ``line`` (1-based; past the end: the last)."""
        for seg in self.segments:
            if seg.contains_line(line):
                return seg
        return self.segments[-1]

    def segment_of(self, kernel_name: Optional[str]) -> Optional[Segment]:
        named = [seg for seg, k in self.kernels() if kernel_name is None or k.name == kernel_name]
        if kernel_name is None and len(named) != 1:
            return None
        return named[0] if named else None

    # -- diagnostics -------------------------------------------------------------
    def diagnostics(self) -> list[Diagnostic]:
        """Every diagnostic of the document, in document coordinates, sorted by position
        (see :func:`leirc.ide.analyze` for which kernels are checked)."""
        if self._diagnostics is None:
            self._diagnostics = self._collect()
        return self._diagnostics

    def _collect(self) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        parse_errors_without_span = False
        any_declared = False
        syntax: list[Diagnostic] = []
        for seg in self.segments:
            for d in seg.analysis.diagnostics:
                moved = replace(d, span=seg.to_doc(d.span), file=self.file)
                out.append(moved)
                if d.is_error and d.span is None:
                    parse_errors_without_span = True
                if d.is_error and seg.result is None:
                    syntax.append(moved)
            if seg.kernel is not None and seg.kernel.declared:
                any_declared = True
        if parse_errors_without_span or (syntax and not any_declared):
            # as for a whole-file parse: nothing but the syntax errors is reported
            out = syntax
        else:
            seen: set[str] = set()
            for seg, k in self.kernels():
                if k.declared and k.name in seen:
                    out.append(error("E010", f"kernel '{k.name}' is defined twice", seg.to_doc(k.span))
                               .with_file(self.file))
                seen.add(k.name)
        return sorted(out, key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0))
