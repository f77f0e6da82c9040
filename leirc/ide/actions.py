"""Diagnostics and code actions for an editor, from program text.

Both work on files with syntax errors: the kernels that parse (``ParseResult.partial``)
are checked and offer actions while a broken kernel elsewhere reports its error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..lang import ast as A
from ..lang.checker import check_kernel
from ..lang.diagnostics import Diagnostic, error
from ..lang.parser import ParseResult, parse
from ..strategies.base import NotApplicable, Step, StrategyBug, apply_step, enumerate_sites, get
from .anchors import anchor_node, contains


@dataclass(frozen=True)
class Action:
    """A strategy application offered at a position: ``step`` applied to ``kernel``;
    ``span`` is the source span of its anchor (see :mod:`leirc.ide.anchors`)."""

    title: str
    step: Step
    span: A.Span
    kernel: str


def _inside(span: Optional[A.Span], outer: Optional[A.Span]) -> bool:
    return span is not None and outer is not None and outer.start <= span.start < max(outer.end, outer.start + 1)


@dataclass
class FileReport:
    """A parsed file and all its diagnostics (sorted by position)."""

    parse: ParseResult
    diagnostics: list[Diagnostic]

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)


def _by_position(ds: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(ds, key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0))


def analyze(text: str | bytes, file: str = "<input>") -> FileReport:
    """Parse and check: syntax errors of broken kernels, parser diagnostics, and the
    checker's findings for each kernel that parsed without errors."""
    pr = parse(text, file)
    out = list(pr.diagnostics)
    module = pr.module if pr.module is not None else pr.partial
    if module is None:
        return FileReport(pr, _by_position(out))
    parse_errors = [d for d in pr.diagnostics if d.is_error]
    if any(d.span is None for d in parse_errors) or (parse_errors and not any(k.declared for k in module.kernels)):
        return FileReport(pr, _by_position(out))
    seen: set[str] = set()
    for k in module.kernels:
        if k.declared and k.name in seen:
            out.append(error("E010", f"kernel '{k.name}' is defined twice", k.span).with_file(file))
        seen.add(k.name)
        # a kernel with a parser error (bad dtype, ...) is not checked: the checker would
        # only repeat it. After recovery, syntax errors belong to the kernels that did not
        # parse (one may point at the next kernel's header), never to these.
        if any(_inside(d.span, k.span) and (pr.module is not None or d.code != "E001") for d in parse_errors):
            continue
        out.extend(d.with_file(file) for d in check_kernel(k).diagnostics)
    return FileReport(pr, _by_position(out))


def diagnostics(text: str | bytes, file: str = "<input>") -> list[Diagnostic]:
    """Every diagnostic of the file (see :func:`analyze`)."""
    return analyze(text, file).diagnostics


def _title(step: Step) -> str:
    args = ", ".join(f"{k}={v}" for k, v in step.kwargs.items())
    return f"{step.name.replace('_', ' ')} ({args})" if args else step.name.replace("_", " ")


def code_actions(text: str | bytes, line: int, col: int, *, per_site: int = 4,
                 only_applicable: bool = True) -> list[Action]:
    """Strategy applications whose anchor contains ``(line, col)`` (1-based).

    Each site contributes up to ``per_site`` concrete steps (its domains in order);
    with ``only_applicable`` a step is offered only if it applies (it is planned once)."""
    pr = parse(text)
    module = pr.module if pr.module is not None else pr.partial
    if module is None:
        return []
    kernel = next((k for k in module.kernels if contains(k.span, line, col)), None)
    if kernel is None and len(module.kernels) == 1 and not module.kernels[0].declared:
        kernel = module.kernels[0]  # a bare body: the whole file is the kernel
    if kernel is None:
        return []
    result = check_kernel(kernel)
    if not result.ok:
        return []
    out: list[Action] = []
    seen: set = set()
    for site in enumerate_sites(kernel, result=result):
        for step in site.steps(limit=per_site):
            if step in seen:
                continue
            node = anchor_node(kernel, step)
            if node is None or not contains(node.span, line, col):
                continue
            if only_applicable:
                try:
                    apply_step(kernel, step, result=result)
                except (NotApplicable, StrategyBug):
                    continue
            seen.add(step)
            out.append(Action(_title(step), step, node.span, kernel.name))
    # innermost anchors first: the node under the cursor is the likeliest target
    out.sort(key=lambda a: (a.span.end - a.span.start, a.step.name))
    return out


def strategy_doc(step: Step) -> str:
    """The one-line summary of the step's strategy (for an action's tooltip)."""
    try:
        return get(step.name).summary
    except KeyError:
        return ""
