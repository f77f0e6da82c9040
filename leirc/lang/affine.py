"""Integer reasoning over index expressions: affine forms, interval bounds under
path conditions (the guards of ``if_then_else``).

Used by the checker for the static bounds proof and the dependence test, and by later
passes (strategies, lowering) that need the same facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import ast as A

Interval = tuple[int, int]  # inclusive bounds
Affine = tuple[dict, int]  # ({var: coef}, const)


def affine(e: A.Expr) -> Optional[Affine]:
    """``e`` as ``sum(coef*var) + const`` over index variables, or None."""
    if isinstance(e, A.Const):
        return ({}, e.value) if e.is_int else None
    if isinstance(e, A.Var):
        return ({e.name: 1}, 0)
    if isinstance(e, A.Neg):
        a = affine(e.operand)
        if a is None:
            return None
        return ({k: -v for k, v in a[0].items()}, -a[1])
    if isinstance(e, A.BinOp) and e.op in ("+", "-"):
        l, r = affine(e.lhs), affine(e.rhs)
        if l is None or r is None:
            return None
        s = -1 if e.op == "-" else 1
        coefs = dict(l[0])
        for k, v in r[0].items():
            coefs[k] = coefs.get(k, 0) + s * v
        return ({k: v for k, v in coefs.items() if v != 0}, l[1] + s * r[1])
    if isinstance(e, A.BinOp) and e.op == "*":
        l, r = affine(e.lhs), affine(e.rhs)
        if l is None or r is None:
            return None
        if not l[0]:
            l, r = r, l
        if r[0]:
            return None  # product of two variable terms
        c = r[1]
        return ({k: v * c for k, v in l[0].items() if v * c != 0}, l[1] * c)
    return None


def _canon(coefs: dict) -> tuple[tuple, int]:
    """Canonical key of a linear form and the sign applied (first coefficient > 0)."""
    items = tuple(sorted(coefs.items()))
    if not items:
        return (), 1
    sign = 1 if items[0][1] > 0 else -1
    return tuple((k, v * sign) for k, v in items), sign


def _floordiv(a: int, b: int) -> int:
    return a // b


@dataclass

class Facts:
    """What is known about index variables at a program point."""

    ranges: dict = field(default_factory=dict)  # var -> (lo, hi)
    linear: list = field(default_factory=list)  # (canon key, lo, hi) for sum(coef*var)
    exprs: list = field(default_factory=list)  # (expr, lo, hi) structural facts
    # id(node) -> (node, interval, affine form): intervals of a long chain are computed
    # once, bottom-up, not once per sub-expression; the node is kept so its id stays its own
    _memo: dict = field(default_factory=dict, compare=False, repr=False)
    # what the memo was computed from: a copy of ``ranges`` (compared as a dict, which
    # allocates nothing, unlike rebuilding a tuple of its items on every call) and the
    # lengths of the fact lists (they are only ever appended to)
    _memo_ranges: Optional[dict] = field(default=None, compare=False, repr=False)
    _memo_lens: tuple = field(default=(), compare=False, repr=False)
    # (id(cond), truth) -> (cond, Facts): the refined facts of :meth:`assuming_shared`
    _assumed: dict = field(default_factory=dict, compare=False, repr=False)

    def copy(self) -> "Facts":
        return Facts(dict(self.ranges), list(self.linear), list(self.exprs))

    # -- bounds --------------------------------------------------------------
    def interval(self, e: A.Expr) -> Optional[Interval]:
        memo = self._fresh_memo()
        return self._interval_in(e, memo)

    def _interval_in(self, e: A.Expr, memo: dict) -> Optional[Interval]:
        """:meth:`interval` with a memo already known to be fresh."""
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        # post-order over the integer structure, so every node is computed from its
        # children's memoized results (an explicit stack: chains may be thousands deep)
        stack = [(e, False)]
        while stack:
            n, done = stack.pop()
            h = memo.get(id(n))
            if h is not None and h[0] is n:
                continue
            if not done:
                stack.append((n, True))
                stack.extend((c, False) for c in _interval_children(n))
                continue
            af = self._affine_of(n)
            iv = self._interval(n, af)
            grounded = iv is not None and self._grounded(n, af)
            for fe, lo, hi in self.exprs:
                if fe == n:
                    iv = _meet(iv, (lo, hi))
            memo[id(n)] = (n, iv, af, grounded)
        return memo[id(e)][1]

    def grounded_interval(self, e: A.Expr) -> Optional[Interval]:
        """``interval(e)`` if it is derived from the variable ranges (refined by the
        guards) all the way down; None if some part of ``e`` is only bounded by a
        structural guard fact such as ``J[i] < 5``, which bounds one side and leaves the
        other at a sentinel, so the interval says nothing about the value's range."""
        memo = self._fresh_memo()
        iv = self._interval_in(e, memo)
        return iv if memo[id(e)][3] else None

    def _grounded(self, n: A.Expr, af) -> bool:
        if af is not None:
            return True
        if isinstance(n, A.Call) and n.func == "if_then_else":
            t = self.assuming_shared(n.args[0], True)
            f = self.assuming_shared(n.args[0], False)
            return ((t.infeasible() or t.grounded_interval(n.args[1]) is not None)
                    and (f.infeasible() or f.grounded_interval(n.args[2]) is not None))
        kids = _interval_children(n)
        if isinstance(n, A.BinOp) and n.op == "%" and isinstance(n.rhs, A.Const):
            return True  # [0, d-1] whatever the dividend is
        return all(self._memo[id(c)][3] for c in kids)

    def _fresh_memo(self) -> dict:
        lens = (len(self.linear), len(self.exprs))
        if lens != self._memo_lens or self._memo_ranges != self.ranges:
            self._memo = {}
            self._assumed = {}
            self._memo_ranges = dict(self.ranges)
            self._memo_lens = lens
        return self._memo

    def _affine_of(self, n: A.Expr) -> Optional[Affine]:
        """``affine(n)`` from the memoized forms of its operands (computed first)."""
        def sub(c):
            h = self._memo.get(id(c))
            return h[2] if h is not None and h[0] is c else affine(c)

        if isinstance(n, A.Const):
            return ({}, n.value) if n.is_int else None
        if isinstance(n, A.Var):
            return ({n.name: 1}, 0)
        if isinstance(n, A.Neg):
            a = sub(n.operand)
            return None if a is None else ({k: -v for k, v in a[0].items()}, -a[1])
        if isinstance(n, A.BinOp) and n.op in ("+", "-", "*"):
            l, r = sub(n.lhs), sub(n.rhs)
            if l is None or r is None:
                return None
            if n.op == "*":
                if not l[0]:
                    l, r = r, l
                if r[0]:
                    return None
                c = r[1]
                return ({k: v * c for k, v in l[0].items() if v * c != 0}, l[1] * c)
            sg = -1 if n.op == "-" else 1
            coefs = dict(l[0])
            for k, v in r[0].items():
                coefs[k] = coefs.get(k, 0) + sg * v
            return ({k: v for k, v in coefs.items() if v != 0}, l[1] + sg * r[1])
        return None

    def _interval(self, e: A.Expr, af: Optional[Affine] = None) -> Optional[Interval]:
        if af is None:
            af = affine(e)
        if af is not None:
            coefs, const = af
            if any(v not in self.ranges for v in coefs):
                return None
            iv: Optional[Interval] = affine_interval(coefs, const, self.ranges)
            if coefs and self.linear:
                key, sign = _canon(coefs)
                for fk, flo, fhi in self.linear:
                    if fk == key:
                        # e = sign*key_expr + const
                        if sign > 0:
                            iv = _meet(iv, (flo + const, fhi + const))
                        else:
                            iv = _meet(iv, (-fhi + const, -flo + const))
            return iv
        if isinstance(e, A.BinOp):
            l, r = self._interval_in(e.lhs, self._memo), self._interval_in(e.rhs, self._memo)
            if e.op == "//" and isinstance(e.rhs, A.Const) and e.rhs.is_int and e.rhs.value > 0 and l:
                d = e.rhs.value
                return (_floordiv(l[0], d), _floordiv(l[1], d))
            if e.op == "%" and isinstance(e.rhs, A.Const) and e.rhs.is_int and e.rhs.value > 0:
                d = e.rhs.value
                if l and 0 <= l[0] and l[1] < d:
                    return l
                return (0, d - 1)
            if l is None or r is None:
                return None
            if e.op == "+":
                return (l[0] + r[0], l[1] + r[1])
            if e.op == "-":
                return (l[0] - r[1], l[1] - r[0])
            if e.op == "*":
                ps = [l[0] * r[0], l[0] * r[1], l[1] * r[0], l[1] * r[1]]
                return (min(ps), max(ps))
            return None
        if isinstance(e, A.Neg):
            i = self._interval_in(e.operand, self._memo)
            return (-i[1], -i[0]) if i else None
        if isinstance(e, A.Call) and e.func in ("max", "min"):
            ivs = [self._interval_in(a, self._memo) for a in e.args]
            if any(i is None for i in ivs):
                return None
            f = max if e.func == "max" else min
            return (f(i[0] for i in ivs), f(i[1] for i in ivs))
        if isinstance(e, A.Call) and e.func == "if_then_else":
            t = self.assuming_shared(e.args[0], True).interval(e.args[1])
            f = self.assuming_shared(e.args[0], False).interval(e.args[2])
            if t is None or f is None:
                # a branch that is provably never taken does not widen the result
                if t is not None and self.assuming_shared(e.args[0], False).infeasible():
                    return t
                if f is not None and self.assuming_shared(e.args[0], True).infeasible():
                    return f
                return None
            return (min(t[0], f[0]), max(t[1], f[1]))
        return None

    def infeasible(self) -> bool:
        for lo, hi in self.ranges.values():  # a plain loop: called for every node checked
            if lo > hi:
                return True
        return False

    # -- path conditions ------------------------------------------------------
    def assuming(self, cond: A.Expr, truth: bool) -> "Facts":
        """Facts refined by knowing ``cond`` evaluates to ``truth``."""
        f = self.copy()
        f._add(cond, truth)
        return f

    def assuming_shared(self, cond: A.Expr, truth: bool) -> "Facts":
        """:meth:`assuming`, computed once per condition and shared by every caller (with
        its interval memo), for as long as these facts are unchanged. The result must not
        be modified: use :meth:`assuming` for facts to refine further by hand."""
        self._fresh_memo()  # facts changed by hand since: the shared results are stale
        assumed = self._assumed
        hit = assumed.get((id(cond), truth))
        if hit is not None and hit[0] is cond:
            return hit[1]
        f = self.assuming(cond, truth)
        assumed[(id(cond), truth)] = (cond, f)
        return f

    def _add(self, cond: A.Expr, truth: bool) -> None:
        if isinstance(cond, A.BinOp) and cond.op == "&":
            if truth:
                self._add(cond.lhs, True)
                self._add(cond.rhs, True)
            return  # not (a & b) is a disjunction: nothing certain
        if isinstance(cond, A.BinOp) and cond.op == "|":
            if not truth:
                self._add(cond.lhs, False)
                self._add(cond.rhs, False)
            return
        if isinstance(cond, A.Compare):
            pairs = list(zip(cond.operands, cond.ops, cond.operands[1:]))
            if truth:
                for x, op, y in pairs:
                    self._add_cmp(x, op, y)
            elif len(pairs) == 1:
                x, op, y = pairs[0]
                self._add_cmp(x, _NEGATE[op], y)

    def _add_cmp(self, x: A.Expr, op: str, y: A.Expr) -> None:
        if op == "!=":
            return
        # normalize to  lhs - rhs  in [lo, hi]
        ax, ay = affine(x), affine(y)
        big = 1 << 62
        lo, hi = -big, big
        if op == "<":
            hi = -1
        elif op == "<=":
            hi = 0
        elif op == ">":
            lo = 1
        elif op == ">=":
            lo = 0
        elif op == "==":
            lo = hi = 0
        if ax is not None and ay is not None:
            coefs = dict(ax[0])
            for k, v in ay[0].items():
                coefs[k] = coefs.get(k, 0) - v
            coefs = {k: v for k, v in coefs.items() if v != 0}
            const = ax[1] - ay[1]
            # coefs.v + const in [lo, hi]  ->  coefs.v in [lo-const, hi-const]
            lo2, hi2 = lo - const if lo > -big else -big, hi - const if hi < big else big
            if len(coefs) == 1:
                (v, c), = coefs.items()
                r = self.ranges.get(v)
                if r is not None:
                    if c > 0:
                        nlo = -(-lo2 // c) if lo2 > -big else r[0]
                        nhi = hi2 // c if hi2 < big else r[1]
                    else:
                        # c < 0:  c*v <= hi2  <=>  v >= hi2/c ;  c*v >= lo2  <=>  v <= lo2/c
                        nlo = _ceil_div(hi2, c) if hi2 < big else r[0]
                        nhi = lo2 // c if lo2 > -big else r[1]
                    self.ranges[v] = (max(r[0], nlo), min(r[1], nhi))
            elif coefs:
                key, sign = _canon(coefs)
                if sign > 0:
                    self.linear.append((key, lo2, hi2))
                else:
                    self.linear.append((key, -hi2 if hi2 < big else -big, -lo2 if lo2 > -big else big))
            return
        # structural fact: one side constant
        if isinstance(y, A.Const) and y.is_int:
            c = y.value
            self.exprs.append((x, c + lo if lo > -big else -big, c + hi if hi < big else big))
        elif isinstance(x, A.Const) and x.is_int:
            c = x.value
            # c - y in [lo, hi] -> y in [c-hi, c-lo]
            self.exprs.append((y, c - hi if hi < big else -big, c - lo if lo > -big else big))


def _interval_children(n: A.Expr) -> tuple:
    """Operands whose intervals :meth:`Facts._interval` combines (if_then_else branches
    are evaluated under their own facts)."""
    if isinstance(n, A.BinOp):
        return (n.lhs, n.rhs)
    if isinstance(n, A.Neg):
        return (n.operand,)
    if isinstance(n, A.Call) and n.func in ("max", "min"):
        return tuple(n.args)
    return ()


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _meet(a: Optional[Interval], b: Optional[Interval]) -> Optional[Interval]:
    if a is None:
        return b
    if b is None:
        return a
    return (max(a[0], b[0]), min(a[1], b[1]))


def dense_interval(e: A.Expr, ranges: dict) -> Optional[Interval]:
    """If ``e`` takes *every* integer value of an interval as the loop variables range
    (a mixed-radix affine form such as ``g*64+tx`` with tx in [0,64)), that interval."""
    af = affine(e)
    if af is None:
        return None
    coefs, const = af
    if not coefs:
        return (const, const)
    terms = []
    for v, c in coefs.items():
        r = ranges.get(v)
        if r is None:
            return None
        terms.append((abs(c), r[1] - r[0] + 1, c, r))
    terms.sort()
    span_covered = 1
    for absc, ext, c, r in terms:
        if absc != span_covered and ext > 1:
            return None
        span_covered = absc * ext if ext > 1 else span_covered
    lo = const + sum(c * (r[0] if c > 0 else r[1]) for _, _, c, r in terms)
    hi = const + sum(c * (r[1] if c > 0 else r[0]) for _, _, c, r in terms)
    return (lo, hi)


# ---------------------------------------------------------------------------
# exactness: when an interval is not only a bound but is reached


def captures(cond: A.Expr, truth: bool, facts: "Facts") -> bool:
    """True if :meth:`Facts.assuming` records *exactly* the points where ``cond`` evaluates
    to ``truth``: a conjunction (or, for ``truth`` False, the negation of one comparison or
    of a disjunction) of comparisons of one loop variable with constants, which refine the
    variable ranges. Anything else (``!=``, linear facts over several variables, a
    disjunction that must hold) over-approximates the reachable points."""
    if isinstance(cond, A.BinOp) and cond.op in ("&", "|"):
        if (cond.op == "&") != truth:
            return False
        return captures(cond.lhs, truth, facts) and captures(cond.rhs, truth, facts)
    if not isinstance(cond, A.Compare):
        return False
    pairs = list(zip(cond.operands, cond.ops, cond.operands[1:]))
    if not truth:
        if len(pairs) != 1:
            return False
        x, op, y = pairs[0]
        pairs = [(x, _NEGATE[op], y)]
    for x, op, y in pairs:
        if op == "!=":
            return False
        ax, ay = affine(x), affine(y)
        if ax is None or ay is None:
            return False
        coefs = dict(ax[0])
        for k, v in ay[0].items():
            coefs[k] = coefs.get(k, 0) - v
        coefs = {k: v for k, v in coefs.items() if v != 0}
        if len(coefs) != 1 or next(iter(coefs)) not in facts.ranges:
            return False
    return True


def attained(e: A.Expr, facts: "Facts") -> bool:
    """True if both ends of ``facts.interval(e)`` are values that ``e`` really takes at
    some point of the (box-shaped) variable ranges: ``e`` is affine, or built with
    ``+ - *``, unary minus, ``//`` by a positive constant and ``max``/``min`` from attained
    parts that share no variable (interval arithmetic is exact for expressions in which
    every variable occurs once). Linear or structural facts from guards make the set of
    points smaller than the box, so nothing is claimed then."""
    if facts.linear or facts.exprs or facts.infeasible():
        return False
    return _attained_vars(e, facts) is not None


def _attained_vars(e: A.Expr, facts: "Facts") -> Optional[frozenset]:
    af = affine(e)
    if af is not None:
        names = frozenset(af[0])
        return names if all(v in facts.ranges for v in names) else None
    if isinstance(e, A.Neg):
        return _attained_vars(e.operand, facts)
    parts: list = []
    if isinstance(e, A.BinOp) and e.op in ("+", "-", "*"):
        parts = [e.lhs, e.rhs]
    elif isinstance(e, A.BinOp) and e.op == "//" and isinstance(e.rhs, A.Const) and e.rhs.is_int and e.rhs.value > 0:
        parts = [e.lhs]
    elif isinstance(e, A.Call) and e.func in ("max", "min"):
        parts = list(e.args)
    else:
        return None
    seen: frozenset = frozenset()
    for p in parts:
        vs = _attained_vars(p, facts)
        if vs is None or vs & seen:
            return None
        seen |= vs
    return seen


def affine_interval(coefs, const, ranges) -> "Interval":
    """The exact range of ``const + sum(c * v)`` over ``v`` in ``ranges[v]`` (closed intervals):
    each term contributes its low end at the variable's low end when ``c >= 0``, else at its high end."""
    lo = hi = const
    for v, c in coefs.items():
        r = ranges[v]
        if c >= 0:
            lo += c * r[0]
            hi += c * r[1]
        else:
            lo += c * r[1]
            hi += c * r[0]
    return (lo, hi)
