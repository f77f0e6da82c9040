"""Names in a kernel: every occurrence of a tensor or a loop index, for go-to-definition,
references, rename, hover and highlighting.

A tensor is one name per kernel (its parameter, or its first write for an intermediate).
A loop index belongs to the loop that binds it: ``i`` in two sibling nests are two
symbols, so renaming one leaves the other alone. Occurrences are found by walking the
AST generically (items with a ``body`` are containers, every other node's children are
searched for accesses and index uses), so new item kinds get navigation for free.

Offsets and spans are those of the segment the kernel was parsed from
(:class:`leirc.ide.document.Segment`); callers place them in the document.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

from ..lang import ast as A

#: the spellings the grammar accepts for a tensor and for a loop index (grammar/leir.lark)
TENSOR_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)*\Z")
INDEX_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
_HEADER_VAR = re.compile(r"[LPVUB]\s*(?:\^\{\s*\d+\s*\}\s*)?_\{\s*([A-Za-z][A-Za-z0-9]*)\s*=")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Occurrence:
    """One spelling of a name: ``start``/``end`` are segment offsets of the name itself."""

    kind: str  # "tensor" | "index"
    name: str
    start: int
    end: int
    symbol: tuple  # ("tensor", name) or ("index", path of the binding loop)
    definition: bool = False
    write: bool = False


@dataclass
class SymbolIndex:
    kernel: A.Kernel
    occurrences: list[Occurrence]
    loops: dict  # index symbol -> the Loop that binds it

    def at(self, offset: int) -> Optional[Occurrence]:
        """The occurrence whose name covers ``offset`` (its end counts: a cursor right
        after a name is on it)."""
        best = None
        for o in self.occurrences:
            if o.start <= offset <= o.end and (best is None or o.start > best.start):
                best = o
        return best

    def of(self, symbol: tuple) -> list[Occurrence]:
        return sorted((o for o in self.occurrences if o.symbol == symbol), key=lambda o: o.start)

    def definition(self, symbol: tuple) -> Optional[Occurrence]:
        occ = self.of(symbol)
        return next((o for o in occ if o.definition), next((o for o in occ if o.write), occ[0] if occ else None))

    def tensor_names(self) -> set[str]:
        return {o.name for o in self.occurrences if o.kind == "tensor"}


def _name_at(text: str, start: int, name: str) -> Optional[int]:
    """Offset of ``name`` as a whole word at or after ``start`` (within a short window)."""
    m = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])").search(text, start, start + 400)
    return m.start() if m else None


def build_index(kernel: A.Kernel, text: str) -> SymbolIndex:
    """Every tensor and index occurrence of ``kernel`` (parsed from segment ``text``)."""
    occ: list[Occurrence] = []
    loops: dict = {}
    first_write: set[str] = set()

    def tensor(name: str, start: Optional[int], *, definition=False, write=False):
        if start is None:
            return
        occ.append(Occurrence("tensor", name, start, start + len(name), ("tensor", name), definition, write))

    for p in kernel.inputs + kernel.outputs:
        if p.span is not None:
            tensor(p.name, p.span.start, definition=True)
    params = {p.name for p in kernel.inputs + kernel.outputs}

    def expr(e, scope: dict):
        for n in A.walk(e):
            if isinstance(n, A.Access) and n.span is not None:
                tensor(n.name, n.span.start)
            elif isinstance(n, A.Var) and n.span is not None:
                sym = scope.get(n.name)
                if sym is not None:
                    occ.append(Occurrence("index", n.name, n.span.start, n.span.start + len(n.name), sym))

    def items(body, scope: dict, path: tuple):
        for i, it in enumerate(body):
            if isinstance(it, A.Loop):
                sym = ("index", path + (i,))
                loops[sym] = it
                if it.span is not None:
                    m = _HEADER_VAR.match(text, it.span.start)
                    if m:
                        occ.append(Occurrence("index", it.var, m.start(1), m.end(1), sym, definition=True))
                items(it.body, {**scope, it.var: sym}, path + (i,))
                continue
            if isinstance(it, A.Assign):
                t = it.target
                if t.span is not None:
                    # an intermediate is defined by its first write
                    tensor(t.name, t.span.start, definition=t.name not in params and t.name not in first_write,
                           write=True)
                    first_write.add(t.name)
                for sub in t.indices:
                    expr(sub, scope)
                expr(it.value, scope)
                continue
            body_of = getattr(it, "body", None)
            name = getattr(it, "name", None)
            if isinstance(name, str) and it.span is not None:  # align, alloc: they name a tensor
                is_alloc = type(it).__name__ == "Alloc"
                tensor(name, _name_at(text, it.span.start + 1, name), definition=is_alloc)
                if is_alloc:
                    first_write.add(name)
            if isinstance(body_of, tuple):
                items(body_of, scope, path + (i,))
            for child in A.children(it):
                if not isinstance(child, (A.Loop, A.Assign)) and not hasattr(child, "body"):
                    expr(child, scope)

    items(kernel.body, {}, ())
    occ.sort(key=lambda o: o.start)
    return SymbolIndex(kernel, occ, loops)


_INDEXES: "OrderedDict[int, tuple[object, SymbolIndex]]" = OrderedDict()
_LOCK = threading.Lock()


def index_of(kernel: A.Kernel, text: str) -> SymbolIndex:
    """:func:`build_index`, remembered for the last few kernels (by identity: the
    document cache hands out the same kernel object while its text is unchanged)."""
    key = id(kernel)
    with _LOCK:
        hit = _INDEXES.get(key)
        if hit is not None and hit[0] is kernel:
            _INDEXES.move_to_end(key)
            return hit[1]
    idx = build_index(kernel, text)
    with _LOCK:
        _INDEXES[key] = (kernel, idx)
        while len(_INDEXES) > 64:
            _INDEXES.popitem(last=False)
    return idx


def word_at(text: str, offset: int) -> Optional[tuple[int, int, str]]:
    """(start, end, word) of the identifier-like word covering ``offset``."""
    ls = text.rfind("\n", 0, offset) + 1
    le = text.find("\n", offset)
    le = len(text) if le < 0 else le
    for m in _WORD.finditer(text, ls, le):
        if m.start() <= offset <= m.end():
            return m.start(), m.end(), m.group(0)
    return None


def rename_problem(index: SymbolIndex, occ: Occurrence, new: str) -> Optional[str]:
    """Why ``occ``'s symbol cannot be renamed to ``new`` (``None``: it can)."""
    from ..lang.ast import CAST_FUNCS, INTRINSIC_ALIASES, INTRINSICS, SCOPES

    pattern = TENSOR_NAME if occ.kind == "tensor" else INDEX_NAME
    if not pattern.match(new):
        return f"'{new}' is not a valid {'tensor' if occ.kind == 'tensor' else 'loop index'} name"
    if new in INTRINSICS or new in INTRINSIC_ALIASES or new in CAST_FUNCS or new in ("inf", "align") or new in SCOPES:
        return f"'{new}' is a reserved word"
    if occ.kind == "index" and len(new) == 1 and new in "LPVUB":
        return f"'{new}' is a loop kind"
    if new == occ.name:
        return None
    if new in index.tensor_names():
        return f"a tensor named '{new}' already exists"
    if occ.kind == "tensor":
        if any(o.kind == "index" and o.name == new for o in index.occurrences):
            return f"'{new}' is a loop index in this kernel"
        return None
    # an index: no clash with an enclosing or enclosed loop's index
    path = occ.symbol[1]
    for sym, other in index.loops.items():
        p = sym[1]
        related = p[: len(path)] == path or path[: len(p)] == p
        if related and other.var == new:
            return f"'{new}' is already the index of an enclosing or nested loop"
    return None
