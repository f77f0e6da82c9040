"""Execution plan of the reference interpreter: which loops may run vectorized.

Every loop gets one of three modes, decided statically from the checker's facts:

``vec``
    The iterations of the loop are independent: no element is touched by two different
    iterations with at least one write (the checker's dependence test,
    :func:`leirc.lang.checker._independent`, which is sound and conservative). Running all
    iterations at once, statement by statement (loop distribution + vectorization, and
    interchange with inner loops), then gives the same result as running them in order.
``rvec``
    The only dependences the loop carries are the accumulator accesses ``X = X op e`` of
    reductions (kind ``reduce``, or ``update`` in reduction form) over this loop's index,
    and no other statement inside the loop touches ``X``. The loop runs at once and each
    such statement reduces its operand along the loop's axis with NumPy, then combines
    with X (``X = X op reduce(e)``): exact in real arithmetic (the operators are
    associative and commutative), different in summation order.
``iter``
    Anything else (scans, recurrences, in-place updates that read other iterations,
    accumulators read by other statements, data-dependent subscripts the test cannot
    see through): the loop iterates in order; loops inside it may still be vectorized.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..lang import ast as A
from ..lang.checker import CheckResult, StmtInfo, _independent, _reduction_form, accesses
from ..lang.types import expr_type, promote, resolve

VEC, RVEC, ITER = "vec", "rvec", "iter"


@dataclass
class ReductionForm:
    """``X = X op operand`` as the interpreter evaluates it when the reduction axes run
    vectorized. For left-deep chains (``X + a - b``) the operand is the reassociated
    ``a - b`` (exact in real arithmetic)."""

    op: str
    operand: A.Expr


def reduction_form(si: StmtInfo) -> Optional[ReductionForm]:
    """The vectorizable reduction form of a ``reduce``/``update`` statement, or None."""
    if si.kind not in ("reduce", "update"):
        return None
    st = si.stmt
    form = _reduction_form(st)
    if form is None:
        return None
    op, operand, _commuted = form
    if operand is not None:
        return _typed(ReductionForm(op, operand), st.target.dtype)
    # left-deep chain with X the leftmost leaf: rebuild the rest as one operand
    family = ("+", "-") if op == "+" else ("*", "/")
    rests = []
    node = st.value
    while isinstance(node, A.BinOp) and node.op in family:
        rests.append((node.op, node.rhs))
        node = node.lhs
    rests.reverse()
    if op == "*" and st.target.dtype not in A.FLOAT_DTYPES:
        return None  # X*a/b over integers does not reassociate
    first_op, first = rests[0]
    if first_op == "-":
        acc: A.Expr = A.Neg(first)
    elif first_op == "/":
        acc = A.BinOp("/", A.Const(1.0), first)
    else:
        acc = first
    for o, r in rests[1:]:
        acc = A.BinOp(o, acc, r)
    return _typed(ReductionForm(op, acc), st.target.dtype)


def _typed(form: ReductionForm, xt: str) -> Optional[ReductionForm]:
    """``form`` if reducing it vectorized keeps the literal meaning: the combination type T
    (X's dtype promoted with the operand's) must be a float exactly when X is (an integer X
    accumulating float values truncates at every step, which does not reassociate)."""
    t = expr_type(form.operand)
    if t is None:
        return None
    T = resolve(promote(xt, t), xt)
    if form.op in ("+", "-", "*") and (xt == "bool" or (T in A.FLOAT_DTYPES) != (xt in A.FLOAT_DTYPES)):
        return None
    if form.op in ("max", "min") and T in A.FLOAT_DTYPES and xt not in A.FLOAT_DTYPES:
        return None
    return form


@dataclass
class Plan:
    modes: dict = field(default_factory=dict)  # id(loop) -> mode
    depth: dict = field(default_factory=dict)  # id(loop) -> nesting depth (0 = outermost)
    max_depth: int = 0
    stmts_in: dict = field(default_factory=dict)  # id(loop) -> [StmtInfo]
    inits: dict = field(default_factory=dict)  # id(loop) -> [StmtInfo] whose init_loop it is
    forms: dict = field(default_factory=dict)  # id(stmt) -> ReductionForm | None
    reasons: dict = field(default_factory=dict)  # id(loop) -> why it iterates (debugging)

    def mode(self, lp: A.Loop) -> str:
        return self.modes[id(lp)]


def _all_accesses(si: StmtInfo):
    yield si.stmt.target, True
    for a in accesses(si.stmt.value):
        yield a, False
    for i in si.stmt.target.indices:
        for a in accesses(i):
            yield a, False


def _names(si: StmtInfo) -> set:
    return {a.name for a, _ in _all_accesses(si)}


def loop_mode(lp: A.Loop, stmts: list[StmtInfo], forms: dict) -> tuple[str, str]:
    """(mode, reason) for loop ``lp`` containing ``stmts``."""
    accs = [(si, a) for si in stmts for a, _ in _all_accesses(si)]
    conflicts = []
    for wsi in stmts:
        w = wsi.stmt.target
        for rsi, r in accs:
            if r.name != w.name:
                continue
            if _independent(lp, wsi, w, rsi, r):
                continue
            conflicts.append((wsi, rsi))
    if not conflicts:
        return VEC, ""
    for wsi, rsi in conflicts:
        x = wsi.stmt.target.name
        if wsi is not rsi:
            return ITER, f"'{x}' is written and accessed by different statements in different iterations"
        if forms.get(id(wsi.stmt)) is None or lp.var not in wsi.reduce_vars:
            return ITER, f"'{x}' carries a dependence ({wsi.kind})"
        if any(x in _names(o) for o in stmts if o is not wsi):
            return ITER, f"accumulator '{x}' is used by another statement inside the loop"
    return RVEC, ""


def make_plan(result: CheckResult, vectorize: bool = True) -> Plan:
    """The plan for ``result``; ``vectorize=False`` makes every loop iterate (a slow,
    literal execution used to cross-check the vectorized one)."""
    plan = Plan()
    by_loop: dict = {}
    for si in result.stmts:
        for lp in si.loops:
            by_loop.setdefault(id(lp), []).append(si)
        plan.forms[id(si.stmt)] = reduction_form(si)
        if si.kind == "reduce" and si.init_loop is not None:
            plan.inits.setdefault(id(si.init_loop), []).append(si)

    def visit(items, depth):
        for it in items:
            if isinstance(it, A.Loop):
                plan.depth[id(it)] = depth
                plan.max_depth = max(plan.max_depth, depth + 1)
                stmts = by_loop.get(id(it), [])
                plan.stmts_in[id(it)] = stmts
                if not vectorize:
                    mode, why = ITER, "vectorization disabled"
                else:
                    mode, why = loop_mode(it, stmts, plan.forms) if stmts else (VEC, "")
                plan.modes[id(it)] = mode
                if why:
                    plan.reasons[id(it)] = why
                visit(it.body, depth + 1)
            elif isinstance(it, A.Region):
                visit(it.body, depth)

    visit(result.kernel.body, 0)
    return plan


def describe(result: CheckResult, plan: Optional[Plan] = None) -> str:
    """Human-readable plan (``loop var: mode``), for debugging and tests."""
    plan = plan or make_plan(result)
    out = []

    def visit(items, depth):
        for it in items:
            if isinstance(it, A.Loop):
                m = plan.modes[id(it)]
                why = plan.reasons.get(id(it))
                out.append("  " * depth + f"{it.kind}^{{{it.extent}}}_{{{it.var}}}: {m}" + (f" ({why})" if why else ""))
                visit(it.body, depth + 1)
            elif isinstance(it, A.Region):
                visit(it.body, depth)

    visit(result.kernel.body, 0)
    return "\n".join(out)


__all__ = ["VEC", "RVEC", "ITER", "Plan", "ReductionForm", "make_plan", "reduction_form", "loop_mode", "describe"]
