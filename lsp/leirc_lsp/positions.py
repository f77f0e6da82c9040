"""Document spans (1-based lines, columns in code points, end exclusive) <-> LSP positions
(0-based lines, columns in UTF-16 code units). The only module that knows about UTF-16."""

from __future__ import annotations

from typing import Optional

from lsprotocol import types

from leirc.lang.ast import Span


def _utf16_len(s: str) -> int:
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


class Lines:
    """The lines of one text, for conversions."""

    def __init__(self, text: str):
        self.lines = text.split("\n")

    def line(self, i: int) -> str:  # 0-based
        return self.lines[i] if 0 <= i < len(self.lines) else ""

    def to_lsp(self, line: int, col: int) -> types.Position:
        """1-based (line, code-point col) -> LSP position."""
        text = self.line(line - 1)
        return types.Position(line=max(0, line - 1), character=_utf16_len(text[:max(0, col - 1)]))

    def from_lsp(self, pos: types.Position) -> tuple[int, int]:
        """LSP position -> 1-based (line, code-point col), clamped to the line."""
        text = self.line(pos.line)
        units = 0
        for i, ch in enumerate(text):
            if units >= pos.character:
                return pos.line + 1, i + 1
            units += 2 if ord(ch) > 0xFFFF else 1
        return pos.line + 1, len(text) + 1

    def range(self, span: Optional[Span]) -> types.Range:
        if span is None:
            return types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
        return types.Range(start=self.to_lsp(span.line, span.col), end=self.to_lsp(span.end_line, span.end_col))

    def range_of(self, line: int, col: int, end_line: int, end_col: int) -> types.Range:
        return types.Range(start=self.to_lsp(line, col), end=self.to_lsp(end_line, end_col))

    def whole(self) -> types.Range:
        last = len(self.lines)
        return types.Range(start=types.Position(line=0, character=0),
                           end=types.Position(line=last - 1, character=_utf16_len(self.line(last - 1))))
