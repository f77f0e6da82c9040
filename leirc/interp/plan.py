"""Execution plan of the reference interpreter: which loops may run vectorized.

The meaning of a program is its literal, loop-by-loop execution (``vectorize=False``).
Vectorizing is an optimization, so the condition that allows it is deliberately simple,
written here independently of the checker's dependence analysis (the oracle must not
share the mistakes of the analysis it is used to check). Every loop gets one of three
modes:

``vec``
    For every tensor X written inside the loop (index ``v``), either

    * *distinct*: some "subscript" -- a subscript position, or the value E recovered from
      a pair of positions holding ``E // k`` and ``E % k`` with the same E and literal
      k > 0 -- tells the iterations apart in every access to X inside the loop (writes,
      reads, reads inside subscripts). That holds when it is, in every access, a linear
      form in the loop indices (integer literals, + -, products by literals) with
      ``a*v + g(outer indices) + h(inner indices)``, the same ``a != 0`` and the same g
      everywhere, and either all the h values fit in a window narrower than ``|a|``
      (``v + c``, ``c - v``, ``f*4 + tx`` with tx < 4), or the form is the same
      everywhere and numbers (v, inner indices) in mixed radix (``a*16 + tx``): see
      :func:`_separates` and :func:`_injective`. Then no element of X is touched by two
      iterations; or
    * *invariant*: X is never read inside the loop and every statement inside the loop
      that writes X mentions neither ``v`` nor any tensor written inside the loop: all
      iterations store the same values into the same elements, and doing it once or n
      times leaves the same final state.

    Then any two statement instances from different iterations commute, and running all
    iterations at once, statement by statement (loop distribution + vectorization, and
    interchange with inner loops, in blocks), is a reordering that keeps the order
    within each iteration: the same result as running them in order. Subscripts that
    could reach 2^62 in magnitude are not reasoned about (int64 wraps).
``rvec``
    As ``vec``, except that some written tensors X are neither distinct nor invariant
    but accumulators: X is written by exactly one statement in the loop, which has the
    form ``X = X op e`` (see :func:`reduction_form`) with ``v`` absent from X's
    subscripts, ``e`` free of X, and no other statement inside the loop mentions X. The
    loop runs at once and each such statement reduces its operand along the loop's axis
    with NumPy, then combines with X (``X = X op reduce(e)``): exact in real arithmetic
    (the operators are associative and commutative), different in summation order.
``iter``
    Anything else: the loop iterates in order; loops inside it may still be vectorized.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..lang import ast as A
from ..lang.checker import CheckResult, StmtInfo
from ..lang.types import expr_type, promote, resolve

VEC, RVEC, ITER = "vec", "rvec", "iter"

SIGNED_INTS = ("i8", "i16", "i32", "i64")


@dataclass
class ReductionForm:
    """``X = X op operand`` as the interpreter evaluates it when the reduction axes run
    vectorized. For left-deep chains (``X + a - b``) the operand is the reassociated
    ``a - b`` (exact in real arithmetic)."""

    op: str
    operand: A.Expr


def _reads(e: A.Expr):
    for n in A.walk(e):
        if n.__class__ is A.Access:
            yield n


def _is_target(e: A.Expr, x: A.Access) -> bool:
    return e.__class__ is A.Access and e.name == x.name and e.indices == x.indices


def _free_of(e: A.Expr, name: str) -> bool:
    return not any(a.name == name for a in _reads(e))


def accumulation(st: A.Assign):
    """``(op, operand)`` if ``st`` is ``X = X op e`` / ``X = e op X`` (op + *),
    ``X = X - e``, ``max/min(X, e)`` in either order, with ``e`` free of X; ``(op, None)``
    for a left-deep chain ``X + a - b + ...`` / ``X * a / b * ...`` whose leftmost leaf
    is X, whose first operation is + - (sums) or * (products), and whose other operands
    are free of X. None otherwise (also if X's own subscripts read X)."""
    x, v = st.target, st.value
    if not all(_free_of(i, x.name) for i in x.indices):
        return None
    if v.__class__ is A.BinOp and v.op in ("+", "-", "*"):
        if _is_target(v.lhs, x) and _free_of(v.rhs, x.name):
            return (v.op, v.rhs)
        if v.op in ("+", "*") and _is_target(v.rhs, x) and _free_of(v.lhs, x.name):
            return (v.op, v.lhs)
    if v.__class__ is A.Call and v.func in ("max", "min") and len(v.args) == 2:
        a, b = v.args
        if _is_target(a, x) and _free_of(b, x.name):
            return (v.func, b)
        if _is_target(b, x) and _free_of(a, x.name):
            return (v.func, a)
    for family, op, first_ops in ((("+", "-"), "+", ("+", "-")), (("*", "/"), "*", ("*",))):
        node, rests, last_op = v, [], None
        while node.__class__ is A.BinOp and node.op in family:
            rests.append(node.rhs)
            last_op = node.op
            node = node.lhs
        if len(rests) >= 2 and last_op in first_ops and _is_target(node, x) and all(_free_of(r, x.name) for r in rests):
            return (op, None)
    return None


def reduction_form(si: StmtInfo) -> Optional[ReductionForm]:
    """The vectorizable reduction form of a ``reduce``/``update`` statement, or None."""
    if si.kind not in ("reduce", "update"):
        return None
    st = si.stmt
    form = accumulation(st)
    if form is None:
        return None
    op, operand = form
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
    xt = st.target.dtype
    if op == "*" and xt not in A.FLOAT_DTYPES:
        return None  # X*a/b over integers does not reassociate
    if xt in SIGNED_INTS:
        return None  # (X + a) - b may overflow where X + (a - b) does not
    first_op, first = rests[0]
    if first_op == "-":
        acc: A.Expr = A.Neg(first)
    elif first_op == "/":
        acc = A.BinOp("/", A.Const(1.0), first)
    else:
        acc = first
    for o, r in rests[1:]:
        acc = A.BinOp(o, acc, r)
    return _typed(ReductionForm(op, acc), xt)


def _typed(form: ReductionForm, xt: str) -> Optional[ReductionForm]:
    """``form`` if reducing it vectorized keeps the literal meaning. The combination type
    T (X's dtype promoted with the operand's) must be a float exactly when X is (an
    integer X accumulating float values truncates at every step, which does not
    reassociate); integer accumulations are vectorized only when T is X's own type (each
    literal step then wraps, or for signed types must not overflow, in X's type, which the
    vectorized sum can check exactly), and signed integer products iterate (a literal
    partial product may overflow although the final one does not)."""
    t = expr_type(form.operand)
    if t is None:
        return None
    T = resolve(promote(xt, t), xt)
    if form.op in ("+", "-", "*"):
        if xt == "bool" or (T in A.FLOAT_DTYPES) != (xt in A.FLOAT_DTYPES):
            return None
        if xt not in A.FLOAT_DTYPES and T != xt:
            return None
        if form.op == "*" and xt in SIGNED_INTS:
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
    rvars: dict = field(default_factory=dict)  # id(stmt) -> enclosing loop vars absent from the target
    reasons: dict = field(default_factory=dict)  # id(loop) -> why it iterates (debugging)

    def mode(self, lp: A.Loop) -> str:
        return self.modes[id(lp)]


def _all_accesses(st: A.Assign):
    """Every access of ``st``: the target, then all reads (value and subscripts)."""
    yield st.target
    for i in st.target.indices:
        yield from _reads(i)
    yield from _reads(st.value)


def _mentions_var(st: A.Assign, v: str) -> bool:
    return any(n.__class__ is A.Var and n.name == v for e in (st.target, st.value) for n in A.walk(e))


def linear(e: A.Expr) -> Optional[tuple[dict, int]]:
    """``({var: coef}, const)`` if ``e`` is built only from loop indices, integer literals,
    unary minus, + - and products with an integer literal factor; None otherwise."""
    cls = e.__class__
    if cls is A.Var:
        return {e.name: 1}, 0
    if cls is A.Const:
        return ({}, e.value) if e.is_int else None
    if cls is A.Neg:
        r = linear(e.operand)
        return None if r is None else ({k: -c for k, c in r[0].items()}, -r[1])
    if cls is A.BinOp and e.op in ("+", "-", "*"):
        a, b = linear(e.lhs), linear(e.rhs)
        if a is None or b is None:
            return None
        if e.op == "*":
            if a[0] and b[0]:
                return None
            (k, kc), (t, tc) = (a, b) if not a[0] else (b, a)
            return {u: c * kc for u, c in t.items()}, tc * kc
        sgn = 1 if e.op == "+" else -1
        coefs = dict(a[0])
        for u, c in b[0].items():
            coefs[u] = coefs.get(u, 0) + sgn * c
        return coefs, a[1] + sgn * b[1]
    return None


#: subscripts whose magnitude could reach this are not reasoned about (int64 wraps)
_WRAP = 1 << 62


def _injective(subs: list, v: str, outer: set) -> bool:
    """True if the subscripts ``subs`` are the same linear form ``f`` in every access and,
    with the outer indices fixed, ``f`` is injective in (v, inner indices) over the hull of
    the statements' loop ranges: sorted by magnitude, every coefficient exceeds the largest
    total the smaller terms can vary by (a mixed-radix numbering). If f(p1) = f(p2) with
    p1 != p2, the largest term where they differ would have to be cancelled by the smaller
    ones, which vary by less. So equal subscripts mean the same iteration of v."""
    form = None
    hull: dict = {}
    for e, rng in subs:
        lf = linear(e)
        if lf is None:
            return False
        lf = ({u: c for u, c in lf[0].items() if c != 0}, lf[1])
        if form is None:
            form = lf
        elif lf != form:
            return False
        for u in lf[0]:
            r = rng.get(u)
            if r is None:
                return False
            h = hull.get(u)
            hull[u] = r if h is None else (min(h[0], r[0]), max(h[1], r[1]))
    if form is None or v not in form[0]:
        return False
    coefs, c0 = form
    if abs(c0) + sum(abs(c) * max(abs(hull[u][0]), abs(hull[u][1])) for u, c in coefs.items()) >= _WRAP:
        return False
    span = 0
    for c, u in sorted((abs(c), u) for u, c in coefs.items() if u not in outer):
        if c <= span:
            return False
        span += c * (hull[u][1] - hull[u][0])
    return True


def _separates(subs: list, v: str, outer: set) -> bool:
    """True if the subscripts ``subs`` (one per access: (expression, ranges of the
    statement's loops)) tell the iterations of loop ``v`` apart: each subscript is
    ``a*v + g(outer indices) + h(inner indices, literals)`` with the same ``a != 0`` and the
    same ``g`` everywhere, and the values of all the ``h`` lie in a window narrower than
    ``|a|``. Then equal subscripts in iterations v1 != v2 would need
    ``|a*(v1 - v2)| >= |a|`` to equal a difference of two ``h`` values, which is < |a|."""
    coef = None
    gpart = None
    lo = hi = None
    for e, rng in subs:
        lf = linear(e)
        if lf is None:
            return False
        coefs, c0 = lf
        a = coefs.get(v, 0)
        g = {u: c for u, c in coefs.items() if u in outer and c != 0}
        if a == 0 or (coef is not None and (a != coef or g != gpart)):
            return False
        coef, gpart = a, g
        hlo = hhi = c0
        mag = abs(c0)
        for u, c in coefs.items():
            if u == v or c == 0:
                continue
            r = rng.get(u)
            if r is None:
                return False
            mag += abs(c) * max(abs(r[0]), abs(r[1]))
            if u in outer:
                continue
            hlo += min(c * r[0], c * r[1])
            hhi += max(c * r[0], c * r[1])
        r = rng[v]
        if mag + abs(a) * max(abs(r[0]), abs(r[1])) >= _WRAP:
            return False
        lo = hlo if lo is None else min(lo, hlo)
        hi = hhi if hi is None else max(hi, hhi)
    return coef is not None and hi - lo < abs(coef)


def _subscripts(acc: A.Access) -> dict:
    """The values that determine the element ``acc`` touches, by key: each subscript by
    its position, and for a pair of positions holding ``E // k`` and ``E % k`` (the same E,
    the same literal k > 0) the value E itself, keyed by the positions and k (floor
    division and modulo give ``E = k*(E//k) + E%k``, so equal pairs mean equal E)."""
    out: dict = {d: e for d, e in enumerate(acc.indices)}
    for p, ep in enumerate(acc.indices):
        if not (ep.__class__ is A.BinOp and ep.op == "//" and ep.rhs.__class__ is A.Const and ep.rhs.is_int
                and ep.rhs.value > 0):
            continue
        for q, eq in enumerate(acc.indices):
            if (eq.__class__ is A.BinOp and eq.op == "%" and eq.rhs.__class__ is A.Const and eq.rhs.is_int
                    and eq.rhs.value == ep.rhs.value and eq.lhs == ep.lhs):
                out[(p, q, ep.rhs.value)] = ep.lhs
    return out


def loop_mode(lp: A.Loop, stmts: list[StmtInfo], forms: dict) -> tuple[str, str]:
    """(mode, reason) for loop ``lp`` containing ``stmts`` (see the module docstring)."""
    v = lp.var
    by_name: dict = {}  # tensor -> [(StmtInfo, access, is_write)]
    writers: dict = {}
    for si in stmts:
        first = True
        for a in _all_accesses(si.stmt):
            by_name.setdefault(a.name, []).append((si, a, first))
            first = False
        writers.setdefault(si.stmt.target.name, []).append(si)
    written = set(writers)
    outer: set = set()
    for l in stmts[0].loops:
        if l is lp:
            break
        outer.add(l.var)
    ranges = {id(si): {l.var: (l.start, l.start + l.extent - 1) for l in si.loops} for si in stmts}
    accumulators = []
    for x, ws in writers.items():
        keyed = [_subscripts(a) for _, a, _ in by_name[x]]
        keys = set(keyed[0])
        for k in keyed[1:]:
            keys &= set(k)
        rngs = [ranges[id(si)] for si, _, _ in by_name[x]]
        if any(_separates(subs, v, outer) or _injective(subs, v, outer)
               for subs in ([(k[key], r) for k, r in zip(keyed, rngs)] for key in sorted(keys, key=str))):
            continue
        readers = [a for _, a, w in by_name[x] if not w]
        if not readers and all(not _mentions_var(si.stmt, v) and not any(
                a.name in written for a in _all_accesses(si.stmt) if a is not si.stmt.target) for si in ws):
            continue  # invariant: the same stores in every iteration
        if len(ws) == 1:
            si = ws[0]
            form = forms.get(id(si.stmt))
            target_vars = {n.name for i in si.stmt.target.indices for n in A.walk(i) if n.__class__ is A.Var}
            if form is not None and v not in target_vars and all(s is si for s, _, _ in by_name[x]):
                accumulators.append(x)
                continue
            if form is not None and v not in target_vars:
                return ITER, f"accumulator '{x}' is used by another statement inside the loop"
            return ITER, f"'{x}' may be touched by two iterations ({si.kind})"
        return ITER, f"'{x}' is written by several statements and may be touched by two iterations"
    return (RVEC, "") if accumulators else (VEC, "")


def make_plan(result: CheckResult, vectorize: bool = True) -> Plan:
    """The plan for ``result``; ``vectorize=False`` makes every loop iterate (the literal
    execution that defines the meaning; slow)."""
    plan = Plan()
    by_loop: dict = {}
    for si in result.stmts:
        for lp in si.loops:
            by_loop.setdefault(id(lp), []).append(si)
        plan.forms[id(si.stmt)] = reduction_form(si)
        tv = {n.name for i in si.stmt.target.indices for n in A.walk(i) if n.__class__ is A.Var}
        plan.rvars[id(si.stmt)] = tuple(l.var for l in si.loops if l.var not in tv)
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


__all__ = ["VEC", "RVEC", "ITER", "Plan", "ReductionForm", "make_plan", "reduction_form", "accumulation",
           "loop_mode", "linear", "describe"]
