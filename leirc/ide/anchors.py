"""Source anchors of strategy applications: the one place that maps a step's arguments
to the program node (and so the source span) it is about.

A step's anchor is the node named by its first argument of a node-naming kind, in the
order the strategy declares its arguments: ``loop`` (a loop reference ``N0.i``),
``loops`` (the first loop of a list), ``stmt`` (a statement reference ``N0.S1``),
``nest`` (a top-level item index). A strategy whose arguments name only a ``tensor`` is
anchored at the first statement that writes it. Editors offer a step as a code action
when the cursor is inside its anchor.
"""

from __future__ import annotations

from typing import Optional

from ..lang import ast as A
from ..strategies.base import Step, get
from ..strategies.rewrite import find_loop, find_stmt, iter_stmts

#: argument kinds that name a program node, in the order they are tried per argument
NODE_KINDS = ("loop", "loops", "stmt", "nest")


def anchor_node(kernel: A.Kernel, step: Step):
    """The node ``step`` is anchored at in ``kernel``, or ``None`` (unknown strategy,
    missing or dangling reference)."""
    try:
        strategy = get(step.name)
    except KeyError:
        return None
    kwargs = step.kwargs
    tensor_arg: Optional[str] = None
    for arg in strategy.args:
        if arg.name not in kwargs:
            continue
        value = kwargs[arg.name]
        if arg.kind in NODE_KINDS:
            node = _resolve(kernel, arg.kind, value)
            if node is not None:
                return node
        elif arg.kind == "tensor" and tensor_arg is None and isinstance(value, str):
            tensor_arg = value
    if tensor_arg is not None:
        for _, st, _ in iter_stmts(kernel):
            if st.target.name == tensor_arg:
                return st
    return None


def anchor_span(kernel: A.Kernel, step: Step) -> Optional[A.Span]:
    node = anchor_node(kernel, step)
    return node.span if node is not None else None


def _resolve(kernel: A.Kernel, kind: str, value):
    try:
        if kind == "loop":
            return find_loop(kernel, str(value))[0]
        if kind == "loops":
            refs = value if isinstance(value, (list, tuple)) else [v for v in str(value).split(",") if v.strip()]
            return find_loop(kernel, str(refs[0]).strip())[0] if refs else None
        if kind == "stmt":
            return find_stmt(kernel, str(value))[0]
        if kind == "nest":
            i = int(value)
            return kernel.body[i] if 0 <= i < len(kernel.body) else None
    except (KeyError, ValueError, TypeError, IndexError):
        return None
    return None


def contains(span: Optional[A.Span], line: int, col: int) -> bool:
    """``(line, col)`` (1-based, as in spans) lies in ``span``; the end column counts,
    so a cursor just after the last character still selects the node."""
    if span is None:
        return False
    if (line, col) < (span.line, span.col):
        return False
    return (line, col) <= (span.end_line, span.end_col)
