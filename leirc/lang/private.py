"""Private tensors (``\\alloc``) as their expansion over the loops around the allocation.

A private tensor allocated inside loops ``l1 .. ln`` has a fresh copy in every iteration
of them (docs/language.md, "Private tensors"). That is the same program as one tensor
with ``l1 .. ln`` as extra leading dimensions, each access subscripted by those loops'
indices first: every iteration touches only its own slice, and a slice nobody wrote is
still uninitialized. :func:`expand_private` builds that program; the interpreter runs it
(so its literal and vectorized modes need no notion of allocation), and the lowering
does the opposite: it places one small buffer inside the loop.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Optional

from . import ast as A
from .facts import CheckResult


def has_private(result: CheckResult) -> bool:
    return any(t.private for t in result.tensors.values())


def expand_private(result: CheckResult) -> A.Kernel:
    """The kernel of ``result`` with every private tensor expanded into one
    kernel-level tensor (scope ``g``; the interpreter has no memory hierarchy)."""
    privs = {n: t for n, t in result.tensors.items() if t.private}
    if not privs:
        return result.kernel
    lead = {n: tuple(_index(l) for l in t.alloc_loops) for n, t in privs.items()}

    def acc(a: A.Access) -> A.Access:
        idx = tuple(expr(i) for i in a.indices)
        if a.name in lead:
            return replace(a, scope="g", indices=lead[a.name] + idx)
        return replace(a, indices=idx) if idx != a.indices else a

    def expr(e):
        if isinstance(e, A.Access):
            return acc(e)
        if isinstance(e, A.BinOp):
            # iterative on the left spine: a long sum is deep
            spine = []
            node = e
            while isinstance(node, A.BinOp):
                spine.append(node)
                node = node.lhs
            out = expr(node)
            for n in reversed(spine):
                out = replace(n, lhs=out, rhs=expr(n.rhs))
            return out
        if isinstance(e, A.Neg):
            return replace(e, operand=expr(e.operand))
        if isinstance(e, A.Compare):
            return replace(e, operands=tuple(expr(o) for o in e.operands))
        if isinstance(e, A.Call):
            return replace(e, args=tuple(expr(x) for x in e.args))
        return e

    def items(body):
        out = []
        for it in body:
            if isinstance(it, A.Alloc):
                continue
            if isinstance(it, (A.Loop, A.Region)):
                out.append(replace(it, body=items(it.body)))
            elif isinstance(it, A.Assign):
                out.append(replace(it, target=acc(it.target), value=expr(it.value)))
            else:
                out.append(it)
        return tuple(out)

    decls = tuple(A.Alloc(n, t.dtype, "g", tuple(l.extent for l in t.alloc_loops) + tuple(t.shape), span=t.span)
                  for n, t in privs.items())
    return replace(result.kernel, body=decls + items(result.kernel.body))


def _index(lp: A.Loop) -> A.Expr:
    v = A.Var(lp.var, span=lp.span)
    if lp.start == 0:
        return v
    return A.BinOp("-", v, A.Const(lp.start), span=lp.span) if lp.start > 0 else \
        A.BinOp("+", v, A.Const(-lp.start), span=lp.span)


# ---------------------------------------------------------------------------
# write before read, per element (E049 / W049)

#: statement instances simulated per private tensor before the checker falls back to the
#: structural argument (a statement that writes the whole tile)
UNINIT_BUDGET = 4096


class _Unknown(Exception):
    """A subscript the simulation cannot evaluate (it reads tensor data)."""


def uninitialized_reads(tensors: dict, stmts: list) -> list[tuple]:
    """Reads of private tensor elements that no earlier statement instance of the same
    execution of the ``\\alloc`` wrote (docs/language.md §3.1: the storage is fresh and
    uninitialized per execution).

    Returns ``(severity, tensor, access, message)`` tuples: ``"error"`` where an
    unconditional read provably sees a never-written element, ``"warning"`` where a read
    under an ``if_then_else`` branch may, or where the checker cannot decide. Decided by
    simulating one execution of the allocating body (every execution when a subscript of
    the tile depends on the loops around the ``\\alloc``) up to :data:`UNINIT_BUDGET`
    statement instances; beyond that, a read is proven only when an earlier top-level item
    of the body writes every element of the tile."""
    out = []
    by_alloc = {}
    for si in stmts:
        for name in si.private:
            by_alloc.setdefault(name, []).append(si)
    for name, users in by_alloc.items():
        t = tensors.get(name)
        if t is None or t.alloc is None or not t.alloc_loops:
            continue  # a top-level \alloc is an intermediate like the others
        body = _body_after(t.alloc_loops[-1].body, t.alloc)
        if body is None:
            continue
        res = _simulate(t, body, users)
        if res is None:
            res = _structural(t, body, {id(si.stmt): si for si in users})
        out.extend(res)
    return out


def _body_after(items, al):
    for k, it in enumerate(items):
        if it is al:
            return items[k + 1:]
        if isinstance(it, A.Region):
            sub = _body_after(it.body, al)
            if sub is not None:
                return sub
    return None


def _tile_reads(e: A.Expr, name: str, guarded: bool, out: list) -> None:
    """(access, guarded) for every read of ``name`` in ``e``; a read inside a branch of
    ``if_then_else`` is guarded (it may not execute)."""
    if isinstance(e, A.Access):
        if e.name == name:
            out.append((e, guarded))
        for i in e.indices:
            _tile_reads(i, name, guarded, out)
    elif isinstance(e, A.BinOp):
        _tile_reads(e.lhs, name, guarded, out)
        _tile_reads(e.rhs, name, guarded, out)
    elif isinstance(e, A.Neg):
        _tile_reads(e.operand, name, guarded, out)
    elif isinstance(e, A.Compare):
        for o in e.operands:
            _tile_reads(o, name, guarded, out)
    elif isinstance(e, A.Call):
        if e.func == "if_then_else" and len(e.args) == 3:
            _tile_reads(e.args[0], name, guarded, out)
            _tile_reads(e.args[1], name, True, out)
            _tile_reads(e.args[2], name, True, out)
        else:
            for a in e.args:
                _tile_reads(a, name, guarded, out)


def _ival(e: A.Expr, env: dict) -> int:
    if isinstance(e, A.Const):
        if not e.is_int:
            raise _Unknown()
        return e.value
    if isinstance(e, A.Var):
        if e.name not in env:
            raise _Unknown()
        return env[e.name]
    if isinstance(e, A.Neg):
        return -_ival(e.operand, env)
    if isinstance(e, A.BinOp):
        a, b = _ival(e.lhs, env), _ival(e.rhs, env)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op in ("//", "%"):
            if b == 0:
                return 0
            return a // b if e.op == "//" else a % b
        raise _Unknown()
    if isinstance(e, A.Call) and e.func in ("max", "min"):
        vals = [_ival(x, env) for x in e.args]
        return max(vals) if e.func == "max" else min(vals)
    raise _Unknown()


def _simulate(t, body, users) -> Optional[list]:
    """Findings of the literal simulation, or None when it is over budget or a tile
    subscript cannot be evaluated."""
    name = t.alloc.name
    info = {id(si.stmt): si for si in users}
    outer = list(t.alloc_loops)
    outer_vars = {l.var for l in outer}
    mentions_outer = False
    for si in users:
        accs = [a for a, _ in _reads_of(si.stmt, name)] + ([si.stmt.target] if si.stmt.target.name == name else [])
        for a in accs:
            if any(isinstance(n, A.Var) and n.name in outer_vars for i in a.indices for n in A.walk(i)):
                mentions_outer = True
    inner = _instances(body)
    if inner is None:
        return None
    runs = math.prod(l.extent for l in outer) if mentions_outer else 1
    if inner * runs > UNINIT_BUDGET:
        return None
    found: dict = {}
    try:
        for env0 in _outer_envs(outer, mentions_outer):
            written: set = set()
            _run(body, dict(env0), name, info, written, found)
    except _Unknown:
        return None
    out = []
    for (acc_id, _), (acc, guarded, elem, env) in found.items():
        where = ", ".join(f"{k}={v}" for k, v in env.items())
        el = ",".join(str(x) for x in elem)
        if guarded:
            out.append(("warning", name, acc, f"'{name}_{{{el}}}' may be read (in an if_then_else branch, at {where}) "
                        f"before this execution of its \\alloc writes it; a private tile is uninitialized"))
        else:
            out.append(("error", name, acc, f"'{name}_{{{el}}}' is read (at {where}) before this execution of its "
                        f"\\alloc writes it: a private tile is fresh and uninitialized in every iteration of the "
                        f"loops around the \\alloc"))
    return out


def _reads_of(st: A.Assign, name: str) -> list:
    out: list = []
    _tile_reads(st.value, name, False, out)
    for i in st.target.indices:
        _tile_reads(i, name, False, out)
    return out


def _instances(items) -> Optional[int]:
    n = 0
    for it in items:
        if isinstance(it, A.Loop):
            k = _instances(it.body)
            n += it.extent * (k or 0)
        elif isinstance(it, A.Region):
            n += _instances(it.body) or 0
        elif isinstance(it, A.Assign):
            n += 1
    return n


def _outer_envs(outer, all_values: bool):
    if not all_values:
        yield {l.var: l.start for l in outer}
        return
    import itertools

    for vals in itertools.product(*[range(l.start, l.start + l.extent) for l in outer]):
        yield dict(zip((l.var for l in outer), vals))


def _run(items, env: dict, name: str, info: dict, written: set, found: dict) -> None:
    for it in items:
        if isinstance(it, A.Loop):
            for v in range(it.start, it.start + it.extent):
                env[it.var] = v
                _run(it.body, env, name, info, written, found)
            env.pop(it.var, None)
        elif isinstance(it, A.Region):
            _run(it.body, env, name, info, written, found)
        elif isinstance(it, A.Assign):
            si = info.get(id(it))
            if si is None:
                continue
            target = tuple(_ival(i, env) for i in it.target.indices) if it.target.name == name else None
            if target is not None and si.kind == "reduce":
                written.add(target)  # the reduction's init nest stores the identity first
            for acc, guarded in _reads_of(it, name):
                elem = tuple(_ival(i, env) for i in acc.indices)
                if elem not in written:
                    key = (id(acc), guarded)
                    if key not in found:
                        found[key] = (acc, guarded, elem, dict(env))
            if target is not None:
                written.add(target)


def _structural(t, body, info: dict) -> list:
    """Over budget: a read is proven when an item executed before it in this execution --
    an earlier sibling at any level of nesting, so earlier in the same iteration -- writes
    the whole tile (:func:`_covers`), or when it is a reduction's read of its own element
    (the init stores the identity first); otherwise one warning for the tensor."""
    name = t.alloc.name
    shape = tuple(t.alloc.shape)

    def walk(items, covered: bool):
        for it in items:
            if isinstance(it, (A.Loop, A.Region)):
                acc = walk(it.body, covered)
                if acc is not None:
                    return acc
            elif isinstance(it, A.Assign) and not covered:
                si = info.get(id(it))
                for acc, _g in _reads_of(it, name):
                    if not (si is not None and si.kind == "reduce" and acc.indices == it.target.indices):
                        return acc
            if not covered and any(st.target.name == name and _covers(st.target, loops, shape)
                                   for st, loops in _assigns_with_loops(it, ())):
                covered = True
        return None

    acc = walk(body, False)
    if acc is None:
        return []
    return [("warning", name, acc, f"cannot prove that every element of '{name}' read here was written before in "
             f"the same execution of its \\alloc (more than {UNINIT_BUDGET} statement instances to follow); a "
             f"never-written element is uninitialized")]


def _assigns(it) -> list:
    return [st for st, _ in _assigns_with_loops(it, ())]


def _assigns_with_loops(it, loops):
    if isinstance(it, A.Assign):
        yield it, loops
    elif isinstance(it, A.Loop):
        for b in it.body:
            yield from _assigns_with_loops(b, loops + (it,))
    elif isinstance(it, A.Region):
        for b in it.body:
            yield from _assigns_with_loops(b, loops)


def _covers(target: A.Access, loops, shape) -> bool:
    """The write ``target`` under ``loops`` stores every element of a tile of ``shape``:
    each subscript is a mixed-radix number of its own loop indices (``jo*16 + j`` with
    ``j < 16``: coefficients 1, e1, e1*e2, ... over loops from 0, no offset) counting at
    least to its extent."""
    from .affine import affine  # noqa: PLC0415 - affine imports nothing from here

    ext = {l.var: (l.start, l.extent) for l in loops}
    if len(target.indices) != len(shape):
        return False
    used: set = set()
    for i, n in zip(target.indices, shape):
        af = affine(i)
        if af is None:
            return False
        coefs = {v: c for v, c in af[0].items() if c}
        if af[1] != 0 or any(v not in ext or v in used or ext[v][0] != 0 for v in coefs):
            return False
        used |= set(coefs)
        reach = 1
        for c, e in sorted((c, ext[v][1]) for v, c in coefs.items()):
            if c != reach:
                return False
            reach *= e
        if reach < n:
            return False
    return True
