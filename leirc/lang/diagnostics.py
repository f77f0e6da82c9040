"""Diagnostics shared by the parser, the checker, the CLI and (later) the language server.

Every diagnostic has a stable code. ``E0xx`` are errors (the program is rejected),
``W0xx`` warnings (the program has a defined meaning, but something deserves a look).
The table :data:`CODES` is the single list of codes; ``docs/language.md`` documents them
and a test checks that every code is triggered by some input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .ast import Span

ERROR = "error"
WARNING = "warning"
NOTE = "note"

#: code -> short title. Codes are never reused for a different meaning.
CODES: dict[str, str] = {
    # input and syntax
    "E001": "syntax error",
    "E002": "input is not valid UTF-8 text",
    "E003": "nesting too deep",
    "E004": "unknown dtype",
    "E005": "unknown memory scope",
    "E006": "invalid literal",
    "E007": "unknown function",
    "E008": "wrong number of arguments",
    "E009": "mismatched region tags",
    "E010": "duplicate kernel or parameter name",
    "E011": "unsupported dtype",
    # names and types
    "E012": "unknown index name",
    "E013": "conflicting dtype for a tensor",
    "E014": "conflicting memory scope for a tensor",
    "E015": "access dtype differs from the declared signature",
    "E016": "wrong number of subscripts",
    "E017": "loop index shadows an enclosing loop index",
    "E018": "tensor read before it is written",
    "E019": "output never written",
    "E020": "kernel input is written",
    "E021": "index name used as a tensor or tensor name used as an index",
    "E022": "subscript is not an integer expression",
    "E023": "condition is not boolean",
    "E024": "non-positive loop extent",
    "E025": "literal does not fit the type it adopts",
    "E026": "signed integer overflow",
    # bounds and shapes
    "E030": "access out of bounds",
    "E031": "intermediate has an unbounded or negative extent",
    "E032": "output written partially",
    # dependences and loop kinds
    "E040": "dependence carried by a parallel, vectorized or bound loop (data race)",
    "E041": "invalid binding axis name",
    "E042": "axis bound twice in one nest",
    "E043": "launch geometry exceeds CUDA limits",
    "E044": "vectorized loop too long",
    "E045": "shared or local buffer too large",
    "E046": "self-referencing statement is neither a reduction, a scan nor an update",
    "E047": "private tensor used outside its allocation, allocated twice, or a parameter allocated",
    "E048": "invalid private allocation (empty extent; shared memory inside a thread loop; local memory shared by threads)",
    "E049": "private tensor element read before this execution of its allocation writes it",
    # lowering and build (leirc.lower)
    "E050": "lowering to TVM TIR failed",
    "E051": "TVM build failed",
    "E052": "generated CUDA source does not compile with nvcc",
    "E053": "optimized program does not verify against the original",
    # warnings
    "W001": "commuted accumulation: the reference lowering leaves it uninitialized",
    "W002": "accumulation into an already written tensor is an in-place update",
    "W003": "non-zero loop start (the Step-TP reference ignores it)",
    "W004": "annotation has no effect on code generation",
    "W005": "scope written on a kernel parameter is ignored",
    "W006": "unused kernel input",
    "W007": "tensor written but never read",
    "W008": "the file defines no kernel",
    "W009": "implicit narrowing conversion",
    "W014": "data-dependent subscript is bounds-checked at run time",
    "W049": "private tensor element possibly read before it is written (not provable either way)",
    "W050": "shared/local tensor placed in global memory on CUDA",
    "W051": "kernel runs on a single CUDA thread (cross-thread reduction or block-level dependence)",
}


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span | None = None
    severity: str = ERROR
    file: str = "<input>"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def with_file(self, file: str) -> "Diagnostic":
        return Diagnostic(self.code, self.message, self.span, self.severity, file, self.notes)

    def to_json(self) -> dict:
        s = self.span
        return {
            "file": self.file,
            "line": s.line if s else 1,
            "col": s.col if s else 1,
            "end_line": s.end_line if s else 1,
            "end_col": s.end_col if s else 1,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "notes": list(self.notes),
        }


def error(code: str, message: str, span: Span | None, notes=()) -> Diagnostic:
    assert code in CODES and code.startswith("E"), code
    return Diagnostic(code, message, span, ERROR, notes=tuple(notes))


def warning(code: str, message: str, span: Span | None, notes=()) -> Diagnostic:
    assert code in CODES and code.startswith("W"), code
    return Diagnostic(code, message, span, WARNING, notes=tuple(notes))


def render(diag: Diagnostic, source: str | None) -> str:
    """``file:line:col: error[E012]: message`` followed by the source line and a caret."""
    s = diag.span
    line, col = (s.line, s.col) if s else (1, 1)
    out = [f"{diag.file}:{line}:{col}: {diag.severity}[{diag.code}]: {diag.message}"]
    if s is not None and source is not None:
        lines = source.splitlines()
        if 1 <= line <= len(lines):
            text = lines[line - 1]
            # Step-TP programs are one long line: show a window around the column.
            start = 0
            if len(text) > 120:
                start = max(0, col - 1 - 50)
                text = text[start : start + 120]
            width = 1
            if s.end_line == s.line:
                width = max(1, s.end_col - s.col)
            width = min(width, max(1, len(text) - (col - 1 - start)))
            gutter = f"{line:>5} | "
            out.append(gutter + text.expandtabs(1))
            out.append(" " * (len(gutter) + col - 1 - start) + "^" + "~" * (width - 1))
    for n in diag.notes:
        out.append(f"  = note: {n}")
    return "\n".join(out)


def to_json(diags: list[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diags], indent=2)
