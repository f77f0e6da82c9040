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
from .rewrite import find_loop, find_stmt, iter_loops, iter_stmts


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
