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

from dataclasses import replace

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
