"""Helpers shared by the strategy families (loop, memory, graph): argument lookup with a
helpful NotApplicable, divisors, the re-check of a candidate, loop-chain rebuilding and
nest traversal. Public so that a family never reaches into another family's privates."""

from __future__ import annotations

import math
from dataclasses import replace

from ..lang import ast as A
from ..lang.checker import check_kernel
from ..lang.types import is_float
from .base import Context, Strategy
from .rewrite import find_loop, find_stmt, iter_loops, iter_stmts, map_expr


def loop_arg(s: Strategy, ctx: Context, ref: str) -> tuple[A.Loop, tuple]:
    """The loop ``ref`` (e.g. ``N0.i``) and its path; NotApplicable listing the loops."""
    try:
        return find_loop(ctx.kernel, ref)
    except KeyError:
        refs = ", ".join(r for r, _, _ in iter_loops(ctx.kernel))
        raise s.na(f"no loop '{ref}' (loops: {refs})") from None


def stmt_arg(s: Strategy, ctx: Context, ref: str) -> tuple[A.Assign, tuple]:
    """The statement ``ref`` (e.g. ``N0.S1``) and its path; NotApplicable listing them."""
    try:
        return find_stmt(ctx.kernel, ref)
    except KeyError:
        refs = ", ".join(r for r, _, _ in iter_stmts(ctx.kernel))
        raise s.na(f"no statement '{ref}' (statements: {refs})") from None


def divisors(n: int, limit: int | None = None) -> list[int]:
    """Proper divisors of ``n`` other than 1, in O(sqrt(n)) (extents reach 10^5); with
    ``limit``, at most that many, powers of two first."""
    small = [d for d in range(2, math.isqrt(n) + 1) if n % d == 0]
    out = sorted(set(small) | {n // d for d in small} - {n})
    if limit is not None:
        pref = [d for d in out if d & (d - 1) == 0] + [d for d in out if d & (d - 1) != 0]
        out = sorted(pref[:limit])
    return out


def first_error(kernel: A.Kernel):
    """The first error diagnostic of checking ``kernel``, or None."""
    res = check_kernel(kernel)
    return next((d for d in res.diagnostics if d.is_error), None)


def check_candidate(s: Strategy, new: A.Kernel, *nodes) -> None:
    """NotApplicable if the rewritten kernel does not check."""
    d = first_error(new)
    if d is not None:
        raise s.na(f"the result would not check: {d.code} {d.message}", *nodes)


def recheck_candidate(s: Strategy, ctx: Context, new: A.Kernel, *nodes) -> None:
    """NotApplicable if the rewritten kernel does not check (the check is remembered by
    ``ctx``, so the engine's final re-check of the same kernel costs nothing)."""
    ctx.recheck(s.name, new, *nodes, message="the result would not check: {code} {message}")


def rebuild_chain(loops: list[A.Loop], body: tuple) -> A.Loop:
    """Nest ``loops`` (outermost first) around ``body``."""
    node = None
    for lp in reversed(loops):
        node = replace(lp, body=body if node is None else (node,))
    return node


def all_serial(loops) -> bool:
    return all(l.kind == "L" for l in loops)


def loops_under(items) -> list[A.Loop]:
    """Every loop nested in ``items`` (statements and expressions are not visited)."""
    out, stack = [], list(items)
    while stack:
        it = stack.pop()
        if isinstance(it, (A.Loop, A.Region)):
            if isinstance(it, A.Loop):
                out.append(it)
            stack.extend(it.body)
    return out


def stmts_under(items) -> list[A.Assign]:
    """Every assignment nested in ``items``, in program order."""
    out = []
    for it in items:
        if isinstance(it, A.Assign):
            out.append(it)
        elif isinstance(it, (A.Loop, A.Region)):
            out.extend(stmts_under(it.body))
    return out


def identity_const(identity, dtype: str) -> A.Expr:
    """The literal of a reduction's identity (0, 1, -inf, inf) in ``dtype``'s kind; an
    infinity is written ``inf`` / ``-inf`` (a literal is never negative)."""
    if not is_float(dtype):
        return A.Const(int(identity))
    if math.isinf(identity):
        return A.Neg(A.Const(math.inf)) if identity < 0 else A.Const(math.inf)
    return A.Const(float(identity))


def _magnitude(e: A.Expr, ranges: dict) -> float:
    """A bound on ``|e|`` for an integer expression: loop indices by their ranges, tensor
    elements by their dtype's range, casts to an integer type by that type (inf when
    unknown: a float operand, an unknown call)."""
    from ..lang.types import INT_RANGES  # noqa: PLC0415 - a table, kept next to its use

    def rng(t):
        lo, hi = INT_RANGES[t]
        return max(abs(lo), abs(hi))

    if isinstance(e, A.Const):
        return abs(e.value) if e.is_int else math.inf
    if isinstance(e, A.Var):
        r = ranges.get(e.name)
        return max(abs(r[0]), abs(r[1])) if r else math.inf
    if isinstance(e, A.Access):
        return 1 if e.dtype == "bool" else (rng(e.dtype) if e.dtype in INT_RANGES else math.inf)
    if isinstance(e, A.Neg):
        return _magnitude(e.operand, ranges)
    if isinstance(e, A.BinOp):
        a, b = _magnitude(e.lhs, ranges), _magnitude(e.rhs, ranges)
        if e.op in ("+", "-"):
            return a + b
        if e.op == "*":
            return a * b
        if e.op == "//":
            return a
        if e.op == "%":
            return b
        return math.inf
    if isinstance(e, A.Compare):
        return 1
    if isinstance(e, A.Call):
        if e.func in A.CAST_FUNCS and e.func in INT_RANGES:
            return min(rng(e.func), _magnitude(e.args[0], ranges)) if e.func != "bool" else 1
        if e.func in ("max", "min", "abs"):
            return max(_magnitude(x, ranges) for x in e.args)
        if e.func == "if_then_else":
            return max(_magnitude(e.args[1], ranges), _magnitude(e.args[2], ranges))
    return math.inf


def reassociation_overflow(si, self_read: A.Access) -> str:
    """Why regrouping the signed integer reduction ``si`` (``X = X op e``) may overflow
    where the written order does not ('' when it cannot). Signed overflow is an error in
    LEIR (docs/language.md §8), so a rewrite that changes which partial results exist is
    exact only if no partial result can leave the type: every partial result of a sum of
    n terms is bounded by n * max|term|, of a product by max|term|**n."""
    from ..lang.types import INT_RANGES, is_signed_int  # noqa: PLC0415

    x = si.stmt.target
    if not is_signed_int(x.dtype) or si.op not in ("+", "-", "*"):
        return ""
    ranges = {l.var: (l.start, l.start + l.extent - 1) for l in si.loops}
    n = math.prod(l.extent for l in si.loops if l.var in si.reduce_vars)
    term = _magnitude(_without(si.stmt.value, self_read), ranges)
    limit = INT_RANGES[x.dtype][1]
    worst = n * term if si.op in ("+", "-") else (term ** n if term > 1 else term)
    if worst <= limit:
        return ""
    return (f"regrouping the {x.dtype} {'sum' if si.op != '*' else 'product'} into '{x.name}' may overflow where "
            f"the written order does not ({n} terms of magnitude up to {term:g}; signed overflow is an error)")


def _without(e: A.Expr, acc: A.Access) -> A.Expr:
    """``e`` with the reads equal to ``acc`` replaced by 0."""
    return map_expr(e, lambda n: A.Const(0) if isinstance(n, A.Access) and n == acc else n)
