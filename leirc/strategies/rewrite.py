"""Tree utilities for strategies: stable references to loops and statements, path
based replacement, substitution and fresh names. All functions return new trees."""

from __future__ import annotations

import re
import string
from dataclasses import replace
from typing import Callable, Iterator, Optional

from ..lang import ast as A

Path = tuple[int, ...]  # indices: kernel.body[i0].body[i1]...


# ---------------------------------------------------------------------------
# navigation


def get_at(kernel: A.Kernel, path: Path):
    node = kernel
    for i in path:
        node = node.body[i]
    return node


def parents(kernel: A.Kernel, path: Path) -> list:
    """Nodes from the kernel down to (excluding) the node at ``path``."""
    out = [kernel]
    node = kernel
    for i in path[:-1]:
        node = node.body[i]
        out.append(node)
    return out


def enclosing_loops(kernel: A.Kernel, path: Path) -> list[A.Loop]:
    return [n for n in parents(kernel, path) if isinstance(n, A.Loop)]


def iter_items(kernel: A.Kernel) -> Iterator[tuple[Path, object]]:
    """Every item (loop, region, statement) with its path, pre-order."""
    stack: list[tuple[Path, object]] = [((i,), it) for i, it in reversed(list(enumerate(kernel.body)))]
    while stack:
        path, node = stack.pop()
        yield path, node
        if isinstance(node, (A.Loop, A.Region)):
            for j in reversed(range(len(node.body))):
                stack.append((path + (j,), node.body[j]))


def iter_loops(kernel: A.Kernel) -> Iterator[tuple[str, A.Loop, Path]]:
    counts: dict[tuple[int, str], int] = {}
    for path, node in iter_items(kernel):
        if isinstance(node, A.Loop):
            key = (path[0], node.var)
            n = counts.get(key, 0)
            counts[key] = n + 1
            ref = f"N{path[0]}.{node.var}" + (f"#{n}" if n else "")
            yield ref, node, path


def iter_stmts(kernel: A.Kernel) -> Iterator[tuple[str, A.Assign, Path]]:
    counts: dict[int, int] = {}
    for path, node in iter_items(kernel):
        if isinstance(node, A.Assign):
            n = counts.get(path[0], 0)
            counts[path[0]] = n + 1
            yield f"N{path[0]}.S{n}", node, path


def find_loop(kernel: A.Kernel, ref: str) -> tuple[A.Loop, Path]:
    for r, lp, path in iter_loops(kernel):
        if r == ref:
            return lp, path
    raise KeyError(ref)


def find_stmt(kernel: A.Kernel, ref: str) -> tuple[A.Assign, Path]:
    for r, st, path in iter_stmts(kernel):
        if r == ref:
            return st, path
    raise KeyError(ref)


def loop_ref(kernel: A.Kernel, loop: A.Loop) -> str:
    for r, lp, _ in iter_loops(kernel):
        if lp is loop:
            return r
    raise KeyError("loop not in kernel")


def stmt_ref(kernel: A.Kernel, stmt: A.Assign) -> str:
    for r, st, _ in iter_stmts(kernel):
        if st is stmt:
            return r
    raise KeyError("statement not in kernel")


def nest_chain(loop: A.Loop) -> list[A.Loop]:
    """The loops of a perfect chain starting at ``loop`` (each body a single loop)."""
    out = [loop]
    while len(out[-1].body) == 1 and isinstance(out[-1].body[0], A.Loop):
        out.append(out[-1].body[0])
    return out


def stmts_in(node) -> list[A.Assign]:
    return [n for n in A.walk(node) if isinstance(n, A.Assign)]


# ---------------------------------------------------------------------------
# editing


def replace_at(kernel: A.Kernel, path: Path, new_items) -> A.Kernel:
    """Replace the item at ``path`` by ``new_items`` (one node or a sequence, spliced)."""
    if not isinstance(new_items, (list, tuple)):
        new_items = (new_items,)
    return _replace(kernel, path, tuple(new_items))


def _replace(node, path: Path, new_items: tuple):
    i = path[0]
    body = list(node.body)
    if len(path) == 1:
        body[i : i + 1] = list(new_items)
    else:
        body[i] = _replace(body[i], path[1:], new_items)
    return replace(node, body=tuple(body))


def map_expr(node, fn: Callable):
    """Bottom-up rewrite of every expression node under ``node`` (statements, loops and
    kernels included). ``fn(expr)`` returns a replacement or the same node."""
    if isinstance(node, (A.Const, A.Var)):
        return fn(node)
    if isinstance(node, A.Access):
        new = replace(node, indices=tuple(map_expr(i, fn) for i in node.indices))
        return fn(new)
    if isinstance(node, A.BinOp):
        return fn(replace(node, lhs=map_expr(node.lhs, fn), rhs=map_expr(node.rhs, fn)))
    if isinstance(node, A.Neg):
        return fn(replace(node, operand=map_expr(node.operand, fn)))
    if isinstance(node, A.Compare):
        return fn(replace(node, operands=tuple(map_expr(o, fn) for o in node.operands)))
    if isinstance(node, A.Call):
        return fn(replace(node, args=tuple(map_expr(a, fn) for a in node.args)))
    if isinstance(node, A.Assign):
        tgt = map_expr(node.target, fn)
        return replace(node, target=tgt, value=map_expr(node.value, fn))
    if isinstance(node, (A.Loop, A.Region, A.Kernel)):
        return replace(node, body=tuple(map_expr(b, fn) for b in node.body))
    return node


def substitute(node, mapping: dict):
    """Replace index variables by expressions: ``{"a": expr}``."""

    def fn(e):
        if isinstance(e, A.Var) and e.name in mapping:
            return mapping[e.name]
        return e

    return map_expr(node, fn)


def rename_tensor(node, old: str, new: str, *, scope: Optional[str] = None, dtype: Optional[str] = None):
    def fn(e):
        if isinstance(e, A.Access) and e.name == old:
            return replace(e, name=new, scope=scope or e.scope, dtype=dtype or e.dtype)
        return e

    return map_expr(node, fn)


def reads_of(node, name: str) -> list[A.Access]:
    out = []
    for st in stmts_in(node) if not isinstance(node, A.Assign) else [node]:
        for n in A.walk(st.value):
            if isinstance(n, A.Access) and n.name == name:
                out.append(n)
        for i in st.target.indices:
            for n in A.walk(i):
                if isinstance(n, A.Access) and n.name == name:
                    out.append(n)
    return out


def writes_of(node, name: str) -> list[A.Assign]:
    return [st for st in stmts_in(node) if st.target.name == name]


def tensors_read(node) -> set[str]:
    out = set()
    for st in stmts_in(node):
        for n in A.walk(st.value):
            if isinstance(n, A.Access):
                out.add(n.name)
        for i in st.target.indices:
            for n in A.walk(i):
                if isinstance(n, A.Access):
                    out.add(n.name)
    return out


def tensors_written(node) -> set[str]:
    return {st.target.name for st in stmts_in(node)}


# ---------------------------------------------------------------------------
# names

_SKIP = set("LPVUBT")  # Step-TP keeps loop letters out of tensor names


def used_names(kernel: A.Kernel) -> set[str]:
    names = {p.name for p in kernel.inputs + kernel.outputs}
    for n in A.walk(kernel):
        if isinstance(n, A.Access):
            names.add(n.name)
        elif isinstance(n, A.Loop):
            names.add(n.var)
        elif isinstance(n, A.Var):
            names.add(n.name)
    return names


def fresh_tensor(kernel: A.Kernel, taken: set[str] | None = None) -> str:
    """Next unused tensor name in Step-TP order: A..Z (no loop letters), then Aa, Ab, ..."""
    used = used_names(kernel) | (taken or set())
    for c in string.ascii_uppercase:
        if c not in _SKIP and c not in used:
            return c
    for c in string.ascii_uppercase:
        if c in _SKIP:
            continue
        for d in string.ascii_lowercase:
            if c + d not in used:
                return c + d
    i = 0
    while f"T{i}" in used:
        i += 1
    return f"T{i}"


def fresh_index(kernel: A.Kernel, base: str, taken: set[str] | None = None) -> str:
    """Unused loop index name derived from ``base`` (``a`` -> ``ao``/``ai`` style
    suffixes are chosen by callers; this appends letters until unique)."""
    used = used_names(kernel) | (taken or set())
    if base not in used:
        return base
    for c in string.ascii_lowercase:
        if base + c not in used:
            return base + c
    i = 0
    while f"{base}{i}" in used:
        i += 1
    return f"{base}{i}"


def divisors(n: int, limit: Optional[int] = None) -> list[int]:
    """Proper divisors of n greater than 1 (candidate split/tile factors)."""
    out = [d for d in range(2, n) if n % d == 0]
    if limit is not None:
        # keep powers of two and small ones first: a readable, deterministic subset
        pref = [d for d in out if d & (d - 1) == 0] + [d for d in out if d & (d - 1) != 0]
        out = sorted(pref[:limit])
    return out


def var(name: str) -> A.Var:
    return A.Var(name)


def const(v) -> A.Const:
    return A.Const(v)


def add(a: A.Expr, b: A.Expr) -> A.Expr:
    if isinstance(b, A.Const) and b.value == 0:
        return a
    if isinstance(a, A.Const) and a.value == 0:
        return b
    return A.BinOp("+", a, b)


def mul(a: A.Expr, b: A.Expr) -> A.Expr:
    if isinstance(b, A.Const) and b.value == 1:
        return a
    if isinstance(a, A.Const) and a.value == 1:
        return b
    return A.BinOp("*", a, b)


# ---------------------------------------------------------------------------
# handles: what a rewrite touched and created


def diff_items(old: A.Kernel, new: A.Kernel) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(paths of the old kernel's top-level items that changed or were removed, paths of
    the new kernel's items that replace them): the minimal middle between the longest
    common prefix and suffix of the two bodies (structural equality, spans ignored)."""
    a, b = old.body, new.body
    p = 0
    while p < len(a) and p < len(b) and a[p] == b[p]:
        p += 1
    q = 0
    while q < len(a) - p and q < len(b) - p and a[len(a) - 1 - q] == b[len(b) - 1 - q]:
        q += 1
    return tuple((i,) for i in range(p, len(a) - q)), tuple((i,) for i in range(p, len(b) - q))


def _same_header(x, y) -> bool:
    if isinstance(x, A.Loop) and isinstance(y, A.Loop):
        return (x.kind, x.extent, x.var, x.start) == (y.kind, y.extent, y.var, y.start)
    if isinstance(x, A.Region) and isinstance(y, A.Region):
        return x.tag == y.tag
    return False


def changed_region(old_items: tuple, new_items: tuple, path: Path = ()) -> tuple[Path, tuple, tuple]:
    """Where two item lists differ, as narrowly as possible: common prefix and suffix are
    dropped, and while exactly one item changed and it kept its header (same loop or
    region), the search descends into its body. Returns (path of the body holding the
    change, in the new tree; old items; new items)."""
    while True:
        p = 0
        while p < len(old_items) and p < len(new_items) and old_items[p] == new_items[p]:
            p += 1
        q = 0
        while (q < len(old_items) - p and q < len(new_items) - p
               and old_items[len(old_items) - 1 - q] == new_items[len(new_items) - 1 - q]):
            q += 1
        o, n = old_items[p:len(old_items) - q], new_items[p:len(new_items) - q]
        if len(o) == 1 and len(n) == 1 and _same_header(o[0], n[0]):
            path, old_items, new_items = path + (p,), o[0].body, n[0].body
            continue
        return path + (p,), o, n


def _loops_under(items: tuple, path: Path) -> list[tuple[Path, A.Loop]]:
    out = []
    for j, it in enumerate(items):
        p = path[:-1] + (path[-1] + j,)
        stack = [(p, it)]
        while stack:
            q, node = stack.pop()
            if isinstance(node, A.Loop):
                out.append((q, node))
            if isinstance(node, (A.Loop, A.Region)):
                stack.extend((q + (k,), node.body[k]) for k in reversed(range(len(node.body))))
    return out


def created_loops(old: A.Kernel, new: A.Kernel) -> list[tuple[str, A.Loop, Path]]:
    """Loops of ``new`` that ``old`` lacks, in pre-order: inside the narrowest changed
    region, the loops whose header (kind, extent, index, start) no loop of the old region
    had. A loop that only had its body rewritten keeps its header and is not new."""
    start, o, n = changed_region(old.body, new.body)
    spare: dict = {}
    for _, lp in _loops_under(o, start):
        key = (lp.kind, lp.extent, lp.var, lp.start)
        spare[key] = spare.get(key, 0) + 1
    fresh_paths = []
    for path, lp in _loops_under(n, start):
        key = (lp.kind, lp.extent, lp.var, lp.start)
        if spare.get(key):
            spare[key] -= 1
        else:
            fresh_paths.append(path)
    refs = {path: (ref, lp) for ref, lp, path in iter_loops(new)}
    return [(refs[p][0], refs[p][1], p) for p in fresh_paths]


def created_tensors(old: A.Kernel, new: A.Kernel) -> list[str]:
    """Tensors of ``new`` that ``old`` never mentions, in the order of their first write
    (then of first mention)."""
    before = {p.name for p in old.inputs + old.outputs}
    before |= {n.name for n in A.walk(old) if isinstance(n, (A.Access, A.Align))}
    out: list[str] = []
    for st in stmts_in(new):
        if st.target.name not in before and st.target.name not in out:
            out.append(st.target.name)
    for n in A.walk(new):
        if isinstance(n, A.Access) and n.name not in before and n.name not in out:
            out.append(n.name)
    return out


def resolve_roles(roles, old: A.Kernel, new: A.Kernel) -> dict[str, str]:
    """Map declared roles (objects with ``name`` and ``kind``) to references in ``new``.

    Roles of one kind are matched to the created loops (tensors) in order. When the count
    differs, that kind is left unresolved rather than guessed: a missing handle makes a
    caller skip a step, a wrong one would make it rewrite the wrong loop."""
    out: dict[str, str] = {}
    for kind in ("loop", "tensor"):
        mine = [r for r in roles if r.kind == kind]
        if not mine:
            continue
        refs = [ref for ref, _, _ in created_loops(old, new)] if kind == "loop" else created_tensors(old, new)
        if len(refs) == len(mine):
            out.update({r.name: ref for r, ref in zip(mine, refs)})
    return out


# ---------------------------------------------------------------------------
# references by path, and forwarding a handle across a later rewrite

_LOOP_OR_STMT_REF = re.compile(r"N(\d+)\.(S\d+|[A-Za-z_][A-Za-z0-9_]*(#\d+)?)")


def refs_at(kernel: A.Kernel, paths) -> dict[Path, str]:
    """The references (``N0.io``, ``N0.S1``) of the loops and statements at ``paths``, in
    one walk; paths that hold neither are left out."""
    want = set(paths)
    out: dict[Path, str] = {}
    if not want:
        return out
    for ref, _, path in iter_loops(kernel):
        if path in want:
            out[path] = ref
    if len(out) < len(want):
        for ref, _, path in iter_stmts(kernel):
            if path in want:
                out[path] = ref
    return out


def ref_at(kernel: A.Kernel, path: Path) -> str:
    """The reference of the loop or statement at ``path``; KeyError if there is none."""
    return refs_at(kernel, [tuple(path)])[tuple(path)]


def carried(node, old_root: Path, new_root: Path) -> dict[Path, Path]:
    """old path -> new path of ``node`` and everything under it, for a rewrite that put
    the same shape (headers may change, bodies may be substituted) at ``new_root``."""
    out = {old_root: new_root}
    if isinstance(node, (A.Loop, A.Region)):
        for j, child in enumerate(node.body):
            out.update(carried(child, old_root + (j,), new_root + (j,)))
    return out


def _items_in(items: tuple, first: Path) -> Iterator[tuple[Path, object]]:
    """Every item of the slice ``items`` (the first at path ``first``) and below."""
    for j, it in enumerate(items):
        stack = [(first[:-1] + (first[-1] + j,), it)]
        while stack:
            path, node = stack.pop()
            yield path, node
            if isinstance(node, (A.Loop, A.Region)):
                stack.extend((path + (k,), node.body[k]) for k in range(len(node.body)))


def forward_path(old: A.Kernel, new: A.Kernel, path: Path, moved=None) -> Optional[Path]:
    """Where the item at ``path`` of ``old`` is in ``new`` (see :meth:`Rewrite.forward`)."""
    path = tuple(path)
    if moved and path in moved:
        return moved[path]
    start, o, n = changed_region(old.body, new.body)
    body, p = start[:-1], start[-1]
    k = len(body)
    if path[:k] != body or len(path) == k:
        return path  # another subtree, or an ancestor of the change (its header was kept)
    j = path[k]
    if j < p:
        return path
    if j >= p + len(o):
        return body + (j - len(o) + len(n),) + path[k + 1:]
    node = get_at(old, path)
    old_twins = [q for q, x in _items_in(o, start) if x == node]
    new_twins = [q for q, x in _items_in(n, start) if x == node]
    if len(old_twins) == 1 and len(new_twins) == 1:
        return new_twins[0]
    return None


def forward_handle(old: A.Kernel, new: A.Kernel, handle: str, moved=None) -> Optional[str]:
    """A loop or statement reference, or a tensor name, of ``old`` as it is called in
    ``new`` (None if it is gone or was rebuilt)."""
    if _LOOP_OR_STMT_REF.fullmatch(handle):
        try:
            path = find_stmt(old, handle)[1] if re.fullmatch(r"N\d+\.S\d+", handle) else find_loop(old, handle)[1]
        except KeyError:
            return None
        to = forward_path(old, new, path, moved)
        if to is None:
            return None
        try:
            node = get_at(new, to)
        except (IndexError, AttributeError):
            return None
        if type(node) is not type(get_at(old, path)):
            return None
        return refs_at(new, [to]).get(to)
    mentioned = {p.name for p in new.inputs + new.outputs} | {x.name for x in A.walk(new) if isinstance(x, A.Access)}
    return handle if handle in mentioned else None
