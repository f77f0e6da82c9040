"""Proof helpers: identity of two SymPy values, singularities a rewrite would add,
non-zero-ness, and the deep application of a SymPy transform that must not look inside
functions it does not understand."""

from __future__ import annotations

import sympy as sp

#: functions a polynomial/rational transform must treat as atoms (their arguments are
#: still transformed, recursively)
OPAQUE_HARD = (sp.Piecewise, sp.Max, sp.Min, sp.floor, sp.ceiling, sp.Mod, sp.Abs, sp.erf, sp.tanh)
#: ... plus exp and log, for transforms that must not split exponentials (factorization)
OPAQUE_ALL = OPAQUE_HARD + (sp.exp, sp.log)

_ASSUMPTIONS = ("positive", "negative", "nonnegative", "nonpositive", "nonzero", "real", "integer", "finite")


def _opaque_types(extra: tuple) -> tuple:
    from .bridge import CastBase, sigmoid

    return extra + (sigmoid, CastBase)


def deep_apply(e, fn, opaque: tuple = OPAQUE_HARD):
    """``fn(e)`` where every application of a function in ``opaque`` is replaced by a
    dummy symbol with the same assumptions; the arguments of those applications are
    transformed first (so the transform also reaches inside them)."""
    opaque = _opaque_types(opaque)
    reps: dict = {}

    def walk(x):
        if x.is_Atom:
            return x
        if isinstance(x, opaque):
            if isinstance(x, sp.Piecewise):
                y = sp.Piecewise(*[(deep_apply(v, fn, opaque), c) for v, c in x.args])
            else:
                y = x.func(*[deep_apply(a, fn, opaque) if not isinstance(a, sp.logic.boolalg.Boolean) else a
                             for a in x.args])
            if y.is_Atom:
                return y
            kw = {}
            for k in _ASSUMPTIONS:
                try:
                    if getattr(y, f"is_{k}") is True:
                        kw[k] = True
                except Exception:  # pragma: no cover
                    pass
            d = sp.Dummy("f", **kw)
            reps[d] = y
            return d
        if isinstance(x, sp.logic.boolalg.Boolean):
            return x
        return x.func(*[walk(a) for a in x.args])

    core = walk(e)
    out = fn(core)
    return out.xreplace(reps)


def prove_equal(old, new, max_ops: int = 400) -> bool:
    """True if SymPy shows ``new - old == 0`` (under the symbols' assumptions)."""
    if old == new:
        return True
    try:
        d = new - old
    except TypeError:
        return False
    if d == 0:
        return True
    attempts = [sp.expand, sp.cancel, lambda x: sp.powsimp(sp.expand(x)), sp.simplify]
    for f in attempts:
        try:
            if f is sp.simplify and sp.count_ops(d) > max_ops:
                break
            r = f(d)
            if r == 0:
                return True
        except Exception:  # SymPy raises PolynomialError & co. on exotic input
            continue
    try:
        if sp.simplify(sp.piecewise_fold(d)) == 0:
            return True
    except Exception:
        pass
    return False


def _singular_bases(e) -> list:
    """Expressions that must not be zero for ``e`` to be defined: bases of negative or
    possibly-negative powers."""
    out = []
    for x in sp.preorder_traversal(e):
        if x.is_Pow:
            ex = x.exp
            if ex.is_nonnegative:
                continue
            if ex.is_Number and ex > 0:
                continue
            out.append(x.base)
    return out


def _log_args(e) -> list:
    return [x.args[0] for x in sp.preorder_traversal(e) if isinstance(x, sp.log)]


def is_nonzero(x) -> bool:
    try:
        return bool(x.is_nonzero) or bool(x.is_positive) or bool(x.is_negative)
    except Exception:  # pragma: no cover
        return False


def _covered(b, olds) -> bool:
    if is_nonzero(b):
        return True
    for o in olds:
        if b == o or b == -o:
            return True
        try:
            q = sp.cancel(o / b)
            if sp.fraction(q)[1].is_Number:
                return True  # b divides o: o != 0 implies b != 0
            r = sp.cancel(b / o)
            if is_nonzero(r):
                return True  # b = o * (non-zero)
        except Exception:
            continue
    return False


def new_singularities(old, new) -> list:
    """Denominators (and log arguments) of ``new`` that may vanish (resp. be <= 0) where
    ``old`` is defined. Empty if the rewrite adds no singularity."""
    olds = _singular_bases(old)
    bad = [b for b in _singular_bases(new) if not _covered(b, olds)]
    old_logs = _log_args(old)
    for a in _log_args(new):
        try:
            if a.is_positive or a in old_logs:
                continue
        except Exception:  # pragma: no cover
            pass
        bad.append(a)
    seen, out = set(), []
    for b in bad:
        if b not in seen:
            seen.add(b)
            out.append(b)
    return out
