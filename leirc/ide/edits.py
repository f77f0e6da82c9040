"""Minimal text edits for a strategy application.

The new kernel is diffed against the old one item by item (top-level nests and
statements) with the AST's structural equality, which ignores spans and comments. Only
the text of items that changed is replaced; everything else — the user's comments,
spacing and spelling (``\\frac``, ``\\cdot``, ``L_{i=0}^{4}``) — stays byte for byte. The
comments right above a replaced item and after it on its last line are outside the
replaced text, so they stay too; comments inside it survive where the strategy kept the
nodes that carry them.

Positions are 1-based lines and columns with an exclusive end, like
:class:`leirc.lang.ast.Span`.
"""

from __future__ import annotations

import bisect
import difflib
from dataclasses import dataclass, replace
from typing import Optional

from ..lang import ast as A
from ..lang.parser import parse
from ..lang.printer import COMPACT, PRETTY, print_item, print_items, print_kernel
from ..strategies.base import NotApplicable, Step, apply_step


@dataclass(frozen=True)
class TextEdit:
    """Replace the text from (start_line, start_col) to (end_line, end_col) (exclusive)."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int
    new_text: str


class _Text:
    """Offset <-> (line, col) for one source text."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.starts.append(i + 1)

    def pos(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.starts, offset) - 1
        return i + 1, offset - self.starts[i] + 1

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col - 1

    def line_start(self, offset: int) -> int:
        return self.starts[bisect.bisect_right(self.starts, offset) - 1]

    def line_end(self, offset: int) -> int:
        j = self.text.find("\n", offset)
        return len(self.text) if j < 0 else j

    def edit(self, start: int, end: int, new_text: str) -> TextEdit:
        return TextEdit(*self.pos(start), *self.pos(end), new_text)


def select_kernel(module: A.Module, name: Optional[str]) -> A.Kernel:
    if name is None:
        if len(module.kernels) != 1:
            raise NotApplicable("ide", f"the file has {len(module.kernels)} kernels; name one")
        return module.kernels[0]
    for k in module.kernels:
        if k.name == name:
            return k
    raise NotApplicable("ide", f"no kernel named '{name}' (or it does not parse)")


def parsed_kernel(text: str, name: Optional[str]) -> A.Kernel:
    """The kernel ``name`` of ``text``; kernels that parse are usable even when another
    kernel of the file has a syntax error."""
    pr = parse(text)
    module = pr.module if pr.module is not None else pr.partial
    if module is None:
        raise NotApplicable("ide", "the file does not parse; fix the syntax errors first")
    return select_kernel(module, name)


def item_range(t: _Text, item) -> tuple[int, int]:
    """Source offsets of a top-level item, its closing ';' included (a statement's span
    stops before it)."""
    start, end = item.span.start, item.span.end
    if isinstance(item, (A.Assign, A.Align)):
        j = end
        while j < len(t.text) and t.text[j] in " \t\r\n":
            j += 1
        if j < len(t.text) and t.text[j] == ";":
            end = j + 1
    return start, end


def apply_edits(text: str, step: Step, kernel: Optional[str] = None) -> list[TextEdit]:
    """The edits that turn ``text`` into the program after ``step`` (applied to the kernel
    ``kernel``, or the file's only kernel). Raises :class:`NotApplicable`."""
    old = parsed_kernel(text, kernel)
    new = apply_step(old, step)
    return kernel_edits(text, old, new)


def kernel_edits(text: str, old: A.Kernel, new: A.Kernel) -> list[TextEdit]:
    """Minimal edits from kernel ``old`` (parsed from ``text``, with spans) to ``new``."""
    t = _Text(text)
    edits = _item_edits(t, old, new)
    if edits is not None and "\r\n" in text:  # keep the file's line endings
        edits = [TextEdit(e.start_line, e.start_col, e.end_line, e.end_col, e.new_text.replace("\n", "\r\n"))
                 for e in edits]
    if edits is None or not _reproduces(text, edits, old, new):
        # a layout the item-wise edit cannot express (an empty body, items without spans):
        # replace the whole kernel, which is always right
        return [_whole_kernel(t, old, new)]
    return edits


def _whole_kernel(t: _Text, old: A.Kernel, new: A.Kernel) -> TextEdit:
    if old.declared and old.span is not None:
        return t.edit(old.span.start, old.span.end, print_kernel(new, PRETTY))
    from ..lang.printer import print_body

    return t.edit(0, len(t.text), print_body(new, PRETTY))


def _reproduces(text: str, edits: list[TextEdit], old: A.Kernel, new: A.Kernel) -> bool:
    out = apply_to_text(text, edits)
    pr = parse(out)
    module = pr.module if pr.module is not None else pr.partial
    if module is None:
        return False
    for k in module.kernels:
        if k.name == old.name and k.declared == old.declared:
            return k == new
    return False


def _item_edits(t: _Text, old: A.Kernel, new: A.Kernel) -> list[TextEdit] | None:
    a, b = list(old.body), list(new.body)
    if not a or any(it.span is None for it in a):
        return None
    ranges = [item_range(t, it) for it in a]
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    edits: list[TextEdit] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        if op == "replace":
            s, e = ranges[i1][0], ranges[i2 - 1][1]
            edits.append(t.edit(s, e, _render(t, b[j1:j2], s, e, tuple(a[i1:i2]))))
        elif op == "delete":
            s, e = ranges[i1][0], ranges[i2 - 1][1]
            lost = _lost_comments([], list(a[i1:i2]))
            if lost:  # the comments inside the deleted items stay, on their own lines
                ind = _indent_at(t, s)
                edits.append(t.edit(s, e, ("\n" + ind).join(lost)))
            else:
                edits.append(_deletion(t, s, e))
        elif op == "insert":
            edits.append(_insertion(t, ranges, i1, b[j1:j2]))
    return edits


def _compact_at(t: _Text, s: int, e: int) -> bool:
    """The replaced text sits inside a one-line (Step-TP) layout."""
    before = t.text[t.line_start(s):s]
    return before.strip() != "" and "\n" not in t.text[s:e]


def _indent_at(t: _Text, s: int) -> str:
    before = t.text[t.line_start(s):s]
    return before if before.strip() == "" else " " * len(before)


def _without_outer(items: list, first, last) -> list:
    """``items`` without the comments that stay in the text around the replaced range:
    the leading comments of the first replaced item ``first`` and the trailing comment
    of the last, ``last``. A strategy that keeps a node (``dataclasses.replace``) keeps
    its comments tuple, so the same tuple object marks the same comments however deep
    the node moved (tiling turns the old outer loop into an inner one)."""
    lead = first.comments if first is not None and first.comments else None
    trail = last.comments if last is not None and last.comments else None
    if lead is None and trail is None:
        return items

    # one trimmed tuple per original, so copies still share it (the printer prints a
    # shared tuple once)
    trimmed: dict[int, tuple] = {}

    def fix(it):
        drop = ("leading",) * (it.comments is lead) + ("trailing",) * (it.comments is trail)
        if drop:
            key = id(it.comments)
            if key not in trimmed:
                trimmed[key] = A.drop_comments(it, *drop).comments
            it = replace(it, comments=trimmed[key])
        if isinstance(it, (A.Loop, A.Region)):
            body = tuple(fix(x) for x in it.body)
            if any(x is not y for x, y in zip(body, it.body)):
                it = replace(it, body=body)
        return it

    return [fix(it) for it in items]


def _lost_comments(items: list, old_items: list) -> list[str]:
    """Texts of the comments inside the replaced text (on ``old_items``, but not the
    leading comments of the first or the trailing comment of the last, which lie
    outside it) that no new item carries. Compared by identity: a node a strategy kept
    keeps its very Comment objects."""
    if not old_items:
        return []
    outer = {id(c) for c in old_items[0].comments if c.where == "leading"}
    outer |= {id(c) for c in old_items[-1].comments if c.where == "trailing"}
    kept = {id(c) for it in items for c in A.all_comments(it)}
    return [c.text for it in old_items for c in A.all_comments(it) if id(c) not in outer and id(c) not in kept]


def _render(t: _Text, items: list, s: int, e: int, old_items: tuple = ()) -> str:
    if _compact_at(t, s, e):
        return print_items(items, COMPACT)
    ind = _indent_at(t, s)
    first, last = (old_items[0], old_items[-1]) if old_items else (None, None)
    items = _without_outer(items, first, last)
    body = print_items(items, PRETTY)
    lost = _lost_comments(items, list(old_items))
    if lost:
        # comments in the replaced text on nodes the strategy rebuilt: keep them, above
        body = "\n".join(lost) + "\n" + body
    lines = body.split("\n")
    return "\n".join([lines[0]] + [(ind + ln) if ln else ln for ln in lines[1:]])


def _deletion(t: _Text, s: int, e: int) -> TextEdit:
    ls, le = t.line_start(s), t.line_end(e)
    before, after = t.text[ls:s], t.text[e:le]
    if before.strip() == "" and after.strip() == "":
        return t.edit(ls, min(le + 1, len(t.text)), "")  # whole lines
    if before.strip() == "" and after.lstrip().startswith("%"):
        # keep the trailing comment (now on its own line, above the next item)
        return t.edit(s, e + (len(after) - len(after.lstrip())), "")
    return t.edit(s, e, "")


def _insertion(t: _Text, ranges: list, i1: int, items: list) -> TextEdit:
    if i1 < len(ranges):
        s = ranges[i1][0]
        if _compact_at(t, s, s):
            return t.edit(s, s, "".join(print_item(it, COMPACT) for it in items))
        ind = _indent_at(t, s)
        return t.edit(s, s, _render(t, items, s, s) + "\n" + ind)
    e = ranges[-1][1]
    s = ranges[-1][0]
    if _compact_at(t, s, e):
        return t.edit(e, e, "".join(print_item(it, COMPACT) for it in items))
    le = t.line_end(e)  # after the last item's trailing comment
    ind = _indent_at(t, s)
    return t.edit(le, le, "\n" + ind + _render(t, items, s, s))


def apply_to_text(text: str, edits: list[TextEdit]) -> str:
    """``text`` with non-overlapping ``edits`` applied."""
    t = _Text(text)
    spans = sorted(((t.offset(e.start_line, e.start_col), t.offset(e.end_line, e.end_col), e.new_text) for e in edits),
                   key=lambda x: (x[0], x[1]))
    out, last = [], 0
    for s, e, new in spans:
        if s < last:
            raise ValueError("overlapping edits")
        out.append(text[last:s])
        out.append(new)
        last = e
    out.append(text[last:])
    return "".join(out)


def apply_text(text: str, step: Step, kernel: Optional[str] = None) -> str:
    """``text`` after ``step``: :func:`apply_edits` applied."""
    return apply_to_text(text, apply_edits(text, step, kernel))
