"""The ``leirc simplify`` pipeline: a fixed, documented sequence of local expression
simplifications, each proven by SymPy before it is kept.

The pipeline runs on every statement's *rewritable expression* -- the operand ``e`` of a
reduction or update ``X = X op e`` (so the accumulation and its initialization never
change), the whole right-hand side otherwise -- and repeats these passes, in this order,
until nothing changes (at most :data:`MAX_ROUNDS` rounds):

``fold``
    Constant folding: an operation whose operands are all literals is evaluated (integers
    exactly with Python semantics for ``//`` and ``%``; anything with a float in binary64,
    which is what a weak literal expression computes in for f64 and, after the final
    rounding, for f32 targets); intrinsics of literals too (``exp(0)`` -> ``1.0``) unless the
    result is not finite. Unit laws: ``x+0``, ``0+x``, ``x-0``, ``x*1``, ``1*x``, ``x/1``,
    ``x**1``, ``--x`` -> ``x`` and ``0-x`` -> ``-x`` (only when dropping the literal keeps the
    integer/float kind of the expression); ``if_then_else`` with a literal condition or two
    equal branches -> the branch.
``cancel``
    Inverse pairs in one sum or one product: ``x + z - z`` -> ``x`` (and any order, e.g.
    ``z + x - z``), ``x/z*z`` and ``x*z/z`` -> ``x`` *only* when ``z`` is provably non-zero
    (from the sign facts of :mod:`leirc.algebra.signs`: an ``exp``, a positive literal, a
    sum of exponentials...); otherwise ``x/z*z`` stays, because it is NaN where ``z = 0``.
``combine``
    Common sub-expressions inside one expression: ``k`` equal non-leaf terms of a sum
    become ``k*t`` and ``k`` equal non-leaf factors of a product ``t**k``, so ``t`` is
    computed once. (Equal sub-expressions in other positions would need a temporary
    statement: that is the ``common_subexpression_elimination`` strategy, not this pass.)

Every changed statement is checked: SymPy must prove ``simplify(new - old) == 0`` (with
the same sign facts), and the kernel must still check; otherwise the statement is left
as it was and the reason is reported. Numerics: ``exact-in-reals`` (folding rounds once
in binary64; removing ``+z-z`` removes a rounding step and an overflow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional

from ..lang import ast as A
from ..lang.checker import CheckResult, check_kernel
from ..lang.printer import print_expr
from ..lang.types import expr_type, is_float

PASSES = ("fold", "cancel", "combine")
MAX_ROUNDS = 8


@dataclass
class StmtChange:
    stmt: str
    before: str
    after: str
    passes: dict = field(default_factory=dict)  # pass name -> number of rewrites

    def to_json(self) -> dict:
        return {"stmt": self.stmt, "before": self.before, "after": self.after, "passes": self.passes}


@dataclass
class KernelReport:
    kernel: str
    changes: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (stmt, reason)
    nodes_before: int = 0
    nodes_after: int = 0

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "statements_changed": len(self.changes), "nodes_before": self.nodes_before,
                "nodes_after": self.nodes_after, "changes": [c.to_json() for c in self.changes],
                "skipped": [{"stmt": s, "reason": r} for s, r in self.skipped]}


# ---------------------------------------------------------------------------
# helpers


def _is_lit(e) -> bool:
    return isinstance(e, A.Const) or (isinstance(e, A.Neg) and isinstance(e.operand, A.Const))


def _lit_value(e):
    return e.value if isinstance(e, A.Const) else -e.operand.value


def _lit(v) -> Optional[A.Expr]:
    """A literal for a Python int/float, or None (NaN, int beyond 64 bits)."""
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, int):
        if abs(v) > 2**63 - 1:
            return None
        return A.Neg(A.Const(-v)) if v < 0 else A.Const(v)
    if math.isnan(v):
        return None
    if v < 0 or (v == 0 and math.copysign(1.0, v) < 0):
        return A.Neg(A.Const(-v)) if v != 0 else A.Const(0.0)
    return A.Const(float(v))


def _is_leaf(e) -> bool:
    return isinstance(e, (A.Const, A.Var, A.Access)) or (isinstance(e, A.Neg) and _is_leaf(e.operand))


def _kind(e) -> str:
    t = expr_type(e)
    return "float" if t is not None and is_float(t) else "int"


def count_nodes(e) -> int:
    return sum(1 for _ in A.walk(e))


_FUNCS = {
    "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "abs": abs, "erf": math.erf, "tanh": math.tanh,
    "floor": math.floor, "ceil": math.ceil,
    "rsqrt": lambda x: 1.0 / math.sqrt(x), "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
}


def _fold_node(e: A.Expr, counter: dict) -> A.Expr:
    """One bottom-up folding step at ``e`` (children already folded)."""

    def hit(x):
        counter["fold"] = counter.get("fold", 0) + 1
        return x

    if isinstance(e, A.Neg):
        if isinstance(e.operand, A.Neg):
            return hit(e.operand.operand)
        return e
    if isinstance(e, A.BinOp) and e.op in ("+", "-", "*", "/", "//", "%", "**"):
        a, b = e.lhs, e.rhs
        if _is_lit(a) and _is_lit(b):
            x, y = _lit_value(a), _lit_value(b)
            if any(isinstance(v, float) and math.isinf(v) for v in (x, y)):
                return e
            try:
                if e.op == "+":
                    v = x + y
                elif e.op == "-":
                    v = x - y
                elif e.op == "*":
                    v = x * y
                elif e.op == "/":
                    v = float(x) / float(y) if not (isinstance(x, int) and isinstance(y, int)) else x / y
                elif e.op == "//":
                    v = x // y
                elif e.op == "%":
                    v = x % y
                else:
                    if isinstance(x, int) and isinstance(y, int) and y < 0:
                        return e
                    v = x ** y
            except (ZeroDivisionError, OverflowError, ValueError):
                return e
            if isinstance(v, float) and not math.isfinite(v):
                return e
            if isinstance(v, complex):
                return e
            lit = _lit(v)
            return hit(lit) if lit is not None else e
        # unit laws (only when the integer/float kind is kept)
        def keeps(x, lit):
            return isinstance(_lit_value(lit), int) or _kind(x) == "float"

        if e.op == "+" and _is_lit(b) and _lit_value(b) == 0 and keeps(a, b):
            return hit(a)
        if e.op == "+" and _is_lit(a) and _lit_value(a) == 0 and keeps(b, a):
            return hit(b)
        if e.op == "-" and _is_lit(b) and _lit_value(b) == 0 and keeps(a, b):
            return hit(a)
        if e.op == "-" and _is_lit(a) and _lit_value(a) == 0 and keeps(b, a):
            return hit(A.Neg(b))
        if e.op == "*" and _is_lit(b) and _lit_value(b) == 1 and keeps(a, b):
            return hit(a)
        if e.op == "*" and _is_lit(a) and _lit_value(a) == 1 and keeps(b, a):
            return hit(b)
        if e.op == "/" and _is_lit(b) and _lit_value(b) == 1 and _kind(a) == "float":
            return hit(a)
        if e.op == "**" and _is_lit(b) and _lit_value(b) == 1 and keeps(a, b):
            return hit(a)
        return e
    if isinstance(e, A.Call):
        if e.func == "if_then_else":
            c, a, b = e.args
            if a == b and _kind(a) == _kind(b):
                return hit(a)
            cv = _const_condition(c)
            if cv is not None:
                return hit(a if cv else b)
            return e
        if e.func in _FUNCS and len(e.args) == 1 and _is_lit(e.args[0]):
            x = _lit_value(e.args[0])
            if isinstance(x, float) and math.isinf(x):
                return e
            try:
                v = _FUNCS[e.func](x)
            except (ValueError, OverflowError, ZeroDivisionError):
                return e
            if e.func in ("abs", "floor", "ceil") and isinstance(x, int):
                v = int(v)
            elif e.func not in ("abs", "floor", "ceil"):
                v = float(v)
            elif isinstance(x, float):
                v = float(v)
            if isinstance(v, float) and not math.isfinite(v):
                return e
            lit = _lit(v)
            return hit(lit) if lit is not None else e
        if e.func in ("max", "min") and all(_is_lit(a) for a in e.args):
            vals = [_lit_value(a) for a in e.args]
            if any(isinstance(v, float) and math.isnan(v) for v in vals):
                return e
            v = max(vals) if e.func == "max" else min(vals)
            if any(isinstance(x, float) for x in vals):
                v = float(v)
            lit = _lit(v)
            return hit(lit) if lit is not None else e
    return e


def _const_condition(c) -> Optional[bool]:
    if isinstance(c, A.Compare) and all(_is_lit(o) for o in c.operands):
        vals = [_lit_value(o) for o in c.operands]
        ops = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
               ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
        return all(ops[op](x, y) for op, x, y in zip(c.ops, vals, vals[1:]))
    return None


def fold(e: A.Expr, counter: dict) -> A.Expr:
    # subscripts are left alone: they are what the checker's bounds proof reads
    def fn(x):
        if isinstance(x, A.Access):
            return x
        return _fold_node(x, counter)

    return _map_values(e, fn)


def _map_values(e: A.Expr, fn):
    """Bottom-up map over the value positions of ``e`` (not into subscripts)."""
    if isinstance(e, A.BinOp):
        return fn(replace(e, lhs=_map_values(e.lhs, fn), rhs=_map_values(e.rhs, fn)))
    if isinstance(e, A.Neg):
        return fn(replace(e, operand=_map_values(e.operand, fn)))
    if isinstance(e, A.Call):
        return fn(replace(e, args=tuple(_map_values(a, fn) for a in e.args)))
    if isinstance(e, A.Compare):
        return fn(replace(e, operands=tuple(_map_values(o, fn) for o in e.operands)))
    return fn(e)


# -- sums and products as flat lists ------------------------------------------------


def _flat_sum(e, sign=1, out=None):
    out = [] if out is None else out
    if isinstance(e, A.BinOp) and e.op in ("+", "-"):
        _flat_sum(e.lhs, sign, out)
        _flat_sum(e.rhs, sign if e.op == "+" else -sign, out)
    elif isinstance(e, A.Neg):
        _flat_sum(e.operand, -sign, out)
    else:
        out.append((sign, e))
    return out


def _build_sum(terms) -> A.Expr:
    if not terms:
        return A.Const(0)
    order = sorted(range(len(terms)), key=lambda i: terms[i][0] < 0)  # first positive term first
    first = order[0]
    s0, t0 = terms[first]
    out = t0 if s0 > 0 else A.Neg(t0)
    for i in range(len(terms)):
        if i == first:
            continue
        s, t = terms[i]
        out = A.BinOp("+" if s > 0 else "-", out, t)
    return out


def _flat_prod(e, inv=False, out=None):
    out = [] if out is None else out
    if isinstance(e, A.BinOp) and e.op in ("*", "/"):
        _flat_prod(e.lhs, inv, out)
        _flat_prod(e.rhs, inv if e.op == "*" else not inv, out)
    else:
        out.append((inv, e))
    return out


def _build_prod(factors) -> A.Expr:
    if not factors:
        return A.Const(1)
    nums = [f for inv, f in factors if not inv]
    dens = [f for inv, f in factors if inv]
    out = nums[0] if nums else A.Const(1)
    for f in nums[1:]:
        out = A.BinOp("*", out, f)
    for f in dens:
        out = A.BinOp("/", out, f)
    return out


def cancel(e: A.Expr, counter: dict, nonzero) -> A.Expr:
    def fn(x):
        if isinstance(x, A.BinOp) and x.op in ("+", "-"):
            terms = _flat_sum(x)
            changed = True
            hits = 0
            while changed:
                changed = False
                for i in range(len(terms)):
                    for j in range(i + 1, len(terms)):
                        if terms[i][0] == -terms[j][0] and terms[i][1] == terms[j][1]:
                            del terms[j], terms[i]
                            hits += 1
                            changed = True
                            break
                    if changed:
                        break
            if hits:
                counter["cancel"] = counter.get("cancel", 0) + hits
                if not terms:
                    return A.Const(0.0) if _kind(x) == "float" else A.Const(0)
                return _build_sum(terms)
            return x
        if isinstance(x, A.BinOp) and x.op in ("*", "/"):
            fs = _flat_prod(x)
            hits = 0
            changed = True
            while changed:
                changed = False
                for i in range(len(fs)):
                    for j in range(i + 1, len(fs)):
                        if fs[i][0] != fs[j][0] and fs[i][1] == fs[j][1] and nonzero(fs[i][1]):
                            del fs[j], fs[i]
                            hits += 1
                            changed = True
                            break
                    if changed:
                        break
            if hits:
                counter["cancel"] = counter.get("cancel", 0) + hits
                if not fs:
                    return A.Const(1.0) if _kind(x) == "float" else A.Const(1)
                return _build_prod(fs)
            return x
        return x

    return _map_values(e, fn)


def combine(e: A.Expr, counter: dict) -> A.Expr:
    def fn(x):
        if isinstance(x, A.BinOp) and x.op in ("+", "-"):
            terms = _flat_sum(x)
            out, hits, used = [], 0, [False] * len(terms)
            for i, (s, t) in enumerate(terms):
                if used[i]:
                    continue
                k = 1
                if not _is_leaf(t):
                    for j in range(i + 1, len(terms)):
                        if not used[j] and terms[j][0] == s and terms[j][1] == t:
                            used[j] = True
                            k += 1
                out.append((s, t if k == 1 else A.BinOp("*", A.Const(k), t)))
                hits += k - 1
            if hits:
                counter["combine"] = counter.get("combine", 0) + hits
                return _build_sum(out)
            return x
        if isinstance(x, A.BinOp) and x.op in ("*", "/"):
            fs = _flat_prod(x)
            out, hits, used = [], 0, [False] * len(fs)
            for i, (inv, f) in enumerate(fs):
                if used[i]:
                    continue
                k = 1
                if not _is_leaf(f):
                    for j in range(i + 1, len(fs)):
                        if not used[j] and fs[j][0] == inv and fs[j][1] == f:
                            used[j] = True
                            k += 1
                out.append((inv, f if k == 1 else A.BinOp("**", f, A.Const(k))))
                hits += k - 1
            if hits:
                counter["combine"] = counter.get("combine", 0) + hits
                return _build_prod(out)
            return x
        return x

    return _map_values(e, fn)


# ---------------------------------------------------------------------------


def simplify_expr(e: A.Expr, nonzero=lambda z: False) -> tuple[A.Expr, dict]:
    """Run the passes to a fixpoint; (new expression, {pass: rewrites})."""
    counter: dict = {}
    for _ in range(MAX_ROUNDS):
        before = e
        e = fold(e, counter)
        e = cancel(e, counter, nonzero)
        e = combine(e, counter)
        if e == before:
            break
    return e, counter


def simplify_kernel(kernel: A.Kernel, result: Optional[CheckResult] = None) -> tuple[A.Kernel, KernelReport]:
    """Simplify every statement of a checked kernel (see the module docstring)."""
    from ..algebra.bridge import Bridge, NotRepresentable
    from ..algebra.prove import is_nonzero, prove_equal
    from ..algebra.signs import tensor_signs
    from ..strategies.math_expr import accumulation
    from ..strategies.rewrite import find_stmt, iter_stmts, replace_at

    res = result if result is not None else check_kernel(kernel)
    rep = KernelReport(kernel.name)
    if not res.ok:
        raise ValueError(f"kernel {kernel.name} has errors")
    signs = tensor_signs(res)
    new_kernel = kernel
    for ref, st, path in list(iter_stmts(kernel)):
        info = res.info(st)
        rep.nodes_before += count_nodes(st.value)
        acc = accumulation(st) if info.kind in ("reduce", "update") else None
        if acc is not None:
            target, rebuild = acc
            rebuild_stmt = (lambda n, st=st, rb=rebuild: replace(st, value=rb(n)))
        else:
            target = st.value
            rebuild_stmt = (lambda n, st=st: replace(st, value=n))
        ranges = {l.var: (l.start, l.start + l.extent - 1) for l in info.loops}
        bridge = Bridge(signs, ranges)

        def nonzero(z, bridge=bridge):
            try:
                return is_nonzero(bridge.to_sympy(z))
            except (NotRepresentable, TypeError, ValueError):
                return False

        new, counter = simplify_expr(target, nonzero)
        if new == target:
            rep.nodes_after += count_nodes(st.value)
            continue
        try:
            ok = prove_equal(bridge.to_sympy(target), bridge.to_sympy(new))
        except (NotRepresentable, TypeError, ValueError) as e:
            ok, why = False, str(e)
        else:
            why = "SymPy could not prove the result equal"
        new_stmt = rebuild_stmt(new)
        if ok:
            cand = replace_at(new_kernel, find_stmt(new_kernel, ref)[1], new_stmt)
            cres = check_kernel(cand)
            if cres.ok and (info.kind != "reduce" or cres.info(find_stmt(cand, ref)[0]).kind == "reduce"):
                new_kernel = cand
                rep.changes.append(StmtChange(ref, print_expr(st.value), print_expr(new_stmt.value), counter))
                rep.nodes_after += count_nodes(new_stmt.value)
                continue
            why = "the result does not check"
        rep.skipped.append((ref, why))
        rep.nodes_after += count_nodes(st.value)
    return new_kernel, rep
