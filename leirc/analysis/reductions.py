"""Recognizing accumulations ``X = X op e`` (the one reduction-form recognizer)."""

from __future__ import annotations

from typing import Optional

from ..lang import ast as A


def reduction_form(st: A.Assign, accesses=None) -> Optional[tuple[str, Optional[A.Expr], bool]]:
    """(op, operand, commuted) if ``st`` accumulates into its target.

    Recognized: ``X = X op e`` and ``X = e op X`` (op in + *), ``max/min(X, e)`` in either
    order, and left-deep chains with X as the leftmost leaf, ``X + a - b + c`` (sum) or
    ``X * a / b`` (product), as the Step-TP reference emits them after algebraic rewrites.
    For chains ``operand`` is None: the statement is evaluated literally, with X holding
    the running value. ``accesses``: a function giving the accesses under an expression,
    for a caller that has them at hand (the checker keeps them per node); by default the
    tree is walked."""
    x, v = st.target, st.value

    def is_x(e):
        return isinstance(e, A.Access) and e.name == x.name and e.indices == x.indices

    if accesses is None:
        def free_of_x(e):
            return not any(isinstance(n, A.Access) and n.name == x.name for n in A.walk(e))
    else:
        def free_of_x(e):
            return not any(n.name == x.name for n in accesses(e))

    if isinstance(v, A.BinOp) and v.op in ("+", "-", "*"):
        if is_x(v.lhs) and free_of_x(v.rhs):
            return (v.op, v.rhs, False)
        if v.op in ("+", "*") and is_x(v.rhs) and free_of_x(v.lhs):
            return (v.op, v.lhs, True)
    if isinstance(v, A.Call) and v.func in ("max", "min") and len(v.args) == 2:
        a, b = v.args
        if is_x(a) and free_of_x(b):
            return (v.func, b, False)
        if is_x(b) and free_of_x(a):
            return (v.func, a, False)
    # left-deep chains
    for family, op, first_ops in ((("+", "-"), "+", ("+", "-")), (("*", "/"), "*", ("*",))):
        node, rests, last_op = v, [], None
        while isinstance(node, A.BinOp) and node.op in family:
            rests.append(node.rhs)
            last_op = node.op
            node = node.lhs
        # the operation applied to X itself decides the identity: X/e has none
        if rests and last_op in first_ops and is_x(node) and all(free_of_x(r) for r in rests):
            return (op, None, False)
    return None
