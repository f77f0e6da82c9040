"""The dependence test: may two statement instances touch the same tensor element?

Every client asks the same question in one of two shapes:

* **Loop-carried conflicts** (the checker's E040 for ``P``/``V``/``B`` loops, the kind
  changing strategies, the interpreter's vectorization plan): can two *different*
  iterations of a loop touch the same element with at least one write?
  :func:`find_conflict`, :func:`loop_independent`.
* **Order** (loop reorder, tiling, fusion, fission): for a pair of accesses, which
  direction vectors (per loop: earlier / same / later iteration) admit a common element?
  :func:`direction_vectors`, :func:`dependence`.

Both reduce to :func:`may_touch`: the subscripts of the two accesses become linear
equations over integer variables with finite ranges — one variable per loop index on
each side (a loop shared by both instances with the same value is one variable; a loop
whose two values are ordered is ``x`` and ``x ± d`` with ``d >= 1``), and one auxiliary
variable ``q = e // c`` per floor division or modulo by a positive constant (``e // c`` is
``q`` and ``e % c`` is ``e - c*q`` under ``0 <= e - c*q < c``), so ``(i//2, i%2)`` against
``(i//4, i%4)`` is exactly the question it is, and a pair ``(e//c, e%c)`` with the same
``c`` pins ``e``. The system is decided by interval propagation with a GCD test and
residue rounding per equation (in ``768*c1 - 768*c2 + d == 0`` the difference ``d`` of a
mixed-radix subscript ``c*768+tx`` must be a multiple of 768; a variable with one value is
a constant there, so one-iteration loops with a non-zero start and negative coefficients
need no special case) and a bounded branch-and-split search. The answer is exact whenever the search finishes; when it runs
out of budget, or a subscript is neither affine nor ``//``/``%`` of an affine form
(indirect ``A_{B_{i}}``, products of indices, ``max``, ``if_then_else``), that dimension or
pair is treated as "may touch" — unless both iteration spaces are small (at most
:data:`ENUMERATION_LIMIT` instances per statement) and the subscripts depend on loop
indices only, in which case enumerating the instances gives the exact answer. The test is
sound (it never answers "independent" for two instances that touch the same element) and
conservative otherwise.

Guards (``if_then_else``) are ignored: an access in a branch that is never taken still
counts, which is conservative.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from ..lang import ast as A
from ..lang.facts import StmtInfo

#: relations between the index of a loop at the first and at the second instance
EQ, LT, GT, NE, ANY = "=", "<", ">", "!=", "*"
#: nodes the branch-and-split search may visit per question before answering "may touch"
SEARCH_BUDGET = 600


# ---------------------------------------------------------------------------
# accesses


@dataclass(frozen=True)
class Ref:
    """One access of a statement: the target (``is_write``) or a read."""

    stmt: "StmtInfo"
    access: A.Access
    is_write: bool


def _reads(st: A.Assign) -> Iterable[A.Access]:
    for n in A.walk(st.value):
        if isinstance(n, A.Access):
            yield n
    for i in st.target.indices:
        for n in A.walk(i):
            if isinstance(n, A.Access):
                yield n


def refs_of(si: "StmtInfo") -> list[Ref]:
    """The write and every read (including reads inside subscripts) of one statement."""
    return [Ref(si, si.stmt.target, True)] + [Ref(si, a, False) for a in _reads(si.stmt)]


# ---------------------------------------------------------------------------
# the integer problem


Lin = tuple[dict, int]  # ({var id: coef}, const)


class _Problem:
    """Finite-domain integer variables and linear constraints ``lo <= sum(a*x) + c <= hi``."""

    def __init__(self):
        self.dom: list[tuple[int, int]] = []
        self.cons: list[tuple[tuple, int, int, int]] = []
        self._aux: dict = {}
        self.empty = False

    def var(self, lo: int, hi: int) -> int:
        if lo > hi:
            self.empty = True
        self.dom.append((lo, hi))
        return len(self.dom) - 1

    def constrain(self, form: Lin, lo: int, hi: int) -> None:
        coefs, c = form
        items = tuple((v, a) for v, a in coefs.items() if a)
        if not items:
            if not lo <= c <= hi:
                self.empty = True
            return
        self.cons.append((items, c, lo, hi))

    def bounds(self, form: Lin) -> tuple[int, int]:
        coefs, c = form
        lo = hi = c
        for v, a in coefs.items():
            l, h = self.dom[v]
            if a > 0:
                lo, hi = lo + a * l, hi + a * h
            else:
                lo, hi = lo + a * h, hi + a * l
        return lo, hi

    def floordiv(self, form: Lin, c: int) -> int:
        """The variable ``q = form // c`` (one per distinct form and divisor)."""
        key = (tuple(sorted(form[0].items())), form[1], c)
        q = self._aux.get(key)
        if q is None:
            lo, hi = self.bounds(form)
            q = self.var(lo // c, hi // c)
            rem = dict(form[0])
            rem[q] = rem.get(q, 0) - c
            self.constrain((rem, form[1]), 0, c - 1)
            self._aux[key] = q
        return q

    def lin(self, e: A.Expr, env: dict) -> Optional[Lin]:
        """``e`` as a linear form over the problem's variables (loop indices via ``env``)."""
        if isinstance(e, A.Const):
            return ({}, e.value) if e.is_int else None
        if isinstance(e, A.Var):
            return env.get(e.name)
        if isinstance(e, A.Neg):
            a = self.lin(e.operand, env)
            return None if a is None else _scale(a, -1)
        if isinstance(e, A.BinOp):
            if e.op in ("+", "-"):
                l, r = self.lin(e.lhs, env), self.lin(e.rhs, env)
                if l is None or r is None:
                    return None
                return _add(l, _scale(r, -1) if e.op == "-" else r)
            if e.op == "*":
                l, r = self.lin(e.lhs, env), self.lin(e.rhs, env)
                if l is None or r is None:
                    return None
                if not l[0]:
                    return _scale(r, l[1])
                if not r[0]:
                    return _scale(l, r[1])
                return None  # product of two index terms
            if e.op in ("//", "%") and isinstance(e.rhs, A.Const) and e.rhs.is_int and e.rhs.value > 0:
                l = self.lin(e.lhs, env)
                if l is None:
                    return None
                c = e.rhs.value
                if c == 1:
                    return l if e.op == "//" else ({}, 0)
                q = self.floordiv(l, c)
                if e.op == "//":
                    return ({q: 1}, 0)
                return _add(l, ({q: -c}, 0))
        return None


def _scale(f: Lin, k: int) -> Lin:
    return ({v: a * k for v, a in f[0].items() if a * k}, f[1] * k)


def _add(f: Lin, g: Lin) -> Lin:
    coefs = dict(f[0])
    for v, a in g[0].items():
        coefs[v] = coefs.get(v, 0) + a
    return ({v: a for v, a in coefs.items() if a}, f[1] + g[1])


def _ceil_div(p: int, q: int) -> int:
    return -((-p) // q)


def _propagate(dom: list, cons: list, rounds: int = 40) -> bool:
    """Narrow ``dom`` in place; False if some constraint cannot hold (interval and GCD)."""
    for _ in range(rounds):
        changed = False
        for items, c, lo, hi in cons:
            mn = mx = c
            k, g = c, 0
            for v, a in items:
                l, h = dom[v]
                if a > 0:
                    mn, mx = mn + a * l, mx + a * h
                else:
                    mn, mx = mn + a * h, mx + a * l
                if l == h:
                    k += a * l
                else:
                    g = math.gcd(g, a)
            if mx < lo or mn > hi:
                return False
            if lo == hi and g and (lo - k) % g:
                return False  # no integer solution at all (GCD test over the free variables)
            if mn >= lo and mx <= hi:
                continue
            if lo == hi:
                tightened = _congruences(dom, items, lo - k)
                if tightened is None:
                    return False
                changed |= tightened
            for v, a in items:
                l, h = dom[v]
                if l == h:
                    continue
                if a > 0:
                    rmn, rmx = mn - a * l, mx - a * h
                    nl, nh = _ceil_div(lo - rmx, a), (hi - rmn) // a
                else:
                    rmn, rmx = mn - a * h, mx - a * l
                    nl, nh = _ceil_div(hi - rmn, a), (lo - rmx) // a
                nl, nh = max(l, nl), min(h, nh)
                if nl > nh:
                    return False
                if (nl, nh) != (l, h):
                    dom[v] = (nl, nh)
                    changed = True
        if not changed:
            return True
    return True


def _congruences(dom: list, items: tuple, rhs: int) -> Optional[bool]:
    """Round the bounds of each free variable of ``sum(a*x) == rhs`` (over the free
    variables) to the residue class the other terms leave it: in ``768*c1 - 768*c2 + d == 0``
    ``d`` must be a multiple of 768, so ``d`` in [1, 767] is empty (mixed-radix subscripts
    such as ``c*768+tx``). None if some domain becomes empty, else whether one changed."""
    free = [(v, a) for v, a in items if dom[v][0] != dom[v][1]]
    if len(free) < 2:
        return False
    changed = False
    for idx, (v, a) in enumerate(free):
        g_o = 0
        for jdx, (_, b) in enumerate(free):
            if jdx != idx:
                g_o = math.gcd(g_o, b)
        h = math.gcd(a, g_o)
        m = g_o // h
        if m <= 1 or rhs % h:
            continue
        # a*x == rhs (mod g_o)  <=>  (a/h)*x == rhs/h (mod m)
        x0 = (rhs // h) * pow((a // h) % m, -1, m) % m
        l, hi = dom[v]
        nl, nh = l + (x0 - l) % m, hi - (hi - x0) % m
        if nl > nh:
            return None
        if (nl, nh) != (l, hi):
            dom[v] = (nl, nh)
            changed = True
    return changed


def _open(dom: list, cons: list) -> Optional[list]:
    """Constraints not yet implied by the box ``dom`` (None if the box satisfies all)."""
    out = []
    for items, c, lo, hi in cons:
        mn = mx = c
        for v, a in items:
            l, h = dom[v]
            if a > 0:
                mn, mx = mn + a * l, mx + a * h
            else:
                mn, mx = mn + a * h, mx + a * l
        if not (mn >= lo and mx <= hi):
            out.append(items)
    return out or None


def _solve(p: _Problem, start: list, budget: list) -> Optional[bool]:
    """True if the constraints have an integer solution in the box ``start``, False if
    not, None if the search ran out of ``budget`` (a one-element list, decremented per
    node)."""
    if p.empty:
        return False
    stack = [start]
    while stack:
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        dom = stack.pop()
        if not _propagate(dom, p.cons):
            continue
        open_ = _open(dom, p.cons)
        if open_ is None:
            return True  # every point of the (non-empty) box is a solution
        best = None
        for items in open_:
            for v, _ in items:
                l, h = dom[v]
                if h > l and (best is None or h - l < best[1]):
                    best = (v, h - l)
        if best is None:
            continue  # every variable is fixed and a constraint fails
        v = best[0]
        l, h = dom[v]
        mid = (l + h) // 2
        hi_half = list(dom)
        hi_half[v] = (mid + 1, h)
        dom[v] = (l, mid)
        stack.append(hi_half)
        stack.append(dom)
    return False


def _range(lp: A.Loop) -> tuple[int, int]:
    return (lp.start, lp.start + lp.extent - 1)


class _Pair:
    """"``r1`` under ``loops1`` and ``r2`` under ``loops2`` touch the same element", built
    once for a list of paired loops ``(l1, l2)``: ``l1``'s index at the first instance is
    ``x2 + d`` where ``x2`` is ``l2``'s at the second, so a relation between the two is a
    range of ``d`` (EQ: 0, LT: negative, GT: positive) and every question about this pair
    of accesses reuses one problem. Unpaired loops take independent values."""

    def __init__(self, r1: A.Access, loops1: Sequence[A.Loop], r2: A.Access, loops2: Sequence[A.Loop],
                 pairs: Sequence[tuple[A.Loop, A.Loop]]):
        self.r1, self.loops1, self.r2, self.loops2, self.pairs = r1, tuple(loops1), r2, tuple(loops2), tuple(pairs)
        p = self.problem = _Problem()
        env1: dict = {}
        env2: dict = {}
        self.dvars: list[int] = []
        paired1, paired2 = set(), set()
        for l1, l2 in self.pairs:
            (lo1, hi1), (lo2, hi2) = _range(l1), _range(l2)
            paired1.add(id(l1))
            paired2.add(id(l2))
            x2 = p.var(lo2, hi2)
            d = p.var(lo1 - hi2, hi1 - lo2)
            x1 = ({x2: 1, d: 1}, 0)
            p.constrain(x1, lo1, hi1)
            env1[l1.var] = x1
            env2[l2.var] = ({x2: 1}, 0)
            self.dvars.append(d)
        for loops, env, paired in ((loops1, env1, paired1), (loops2, env2, paired2)):
            for l in loops:
                if id(l) not in paired:
                    env[l.var] = ({p.var(*_range(l)): 1}, 0)
        self.linear = len(r1.indices) == len(r2.indices) and all(_linear_fragment(i) for i in r1.indices + r2.indices)
        if len(r1.indices) == len(r2.indices):
            for i1, i2 in zip(r1.indices, r2.indices):
                f, g = p.lin(i1, env1), p.lin(i2, env2)
                if f is None or g is None:
                    continue  # this dimension says nothing we can use: any element may match
                p.constrain(_add(f, _scale(g, -1)), 0, 0)
        self._enumerated: Optional[dict] = None
        self._enum_tried = False

    def _domains(self, rels: Sequence[str]) -> list:
        """Start domains for one combination of EQ LT GT ANY, or [] if one is empty."""
        dom = list(self.problem.dom)
        for d, rel in zip(self.dvars, rels):
            l, h = dom[d]
            if rel == EQ:
                l, h = max(l, 0), min(h, 0)
            elif rel == LT:
                h = min(h, -1)
            elif rel == GT:
                l = max(l, 1)
            if l > h:
                return []
            dom[d] = (l, h)
        return dom

    def enumerated(self) -> Optional[dict]:
        """{sign vector: distance tuple (None where several)} of every touching pair of
        instances, by enumeration; None unless the subscripts are outside the linear
        fragment, depend on loop indices only and both spaces are small."""
        if not self._enum_tried:
            self._enum_tried = True
            if not self.linear and len(self.r1.indices) == len(self.r2.indices):
                self._enumerated = _enumerate(self.r1, self.loops1, self.r2, self.loops2, self.pairs)
        return self._enumerated

    def feasible(self, rels: Sequence[str], budget: int = SEARCH_BUDGET) -> bool:
        """May the two touch one element with the pairs related by ``rels`` (EQ LT GT NE
        ANY, one per pair)? False only if proven impossible."""
        if self.r1.name != self.r2.name:
            return False
        if self.problem.empty:
            return False
        ex = self.enumerated()
        if ex is not None:
            return any(all(r == ANY or (r == NE and s != EQ) or r == s for r, s in zip(rels, vec)) for vec in ex)
        combos = [[]]
        for rel in rels:
            opts = (LT, GT) if rel == NE else (rel,)
            combos = [c + [o] for c in combos for o in opts]
        for combo in combos:
            dom = self._domains(combo)
            if dom and _solve(self.problem, dom, [budget]) is not False:
                return True
        return False

    def solution_box(self, rels: Sequence[str]) -> Optional[list]:
        """The propagated start box for ``rels`` (EQ LT GT ANY) if *every* point of it is a
        solution, else None: then each remaining pair can take any sign its ``d`` range
        allows, independently of the others, without further search."""
        if self.r1.name != self.r2.name or self.problem.empty or self.enumerated() is not None:
            return None
        dom = self._domains(rels)
        if not dom or not _propagate(dom, self.problem.cons) or _open(dom, self.problem.cons) is not None:
            return None
        return dom

    def signs(self, box: list, k: int) -> list[str]:
        """The signs of pair ``k`` that its ``d`` range in ``box`` allows."""
        l, h = box[self.dvars[k]]
        return [rel for rel, ok in ((GT, h >= 1), (EQ, l <= 0 <= h), (LT, l <= -1)) if ok]

    def distances(self, vector: Sequence[str]) -> tuple:
        """Per pair, ``x2 - x1`` where propagation pins it under the sign ``vector``."""
        ex = self.enumerated()
        if ex is not None:
            return ex.get(tuple(vector), tuple(None for _ in vector))
        dom = self._domains(vector)
        ok = bool(dom) and _propagate(dom, self.problem.cons)
        out = []
        for d, rel in zip(self.dvars, vector):
            l, h = dom[d] if ok else (0, 1)
            out.append(-l if ok and l == h else (0 if rel == EQ else None))
        return tuple(out)


def may_touch(r1: A.Access, loops1: Sequence[A.Loop], r2: A.Access, loops2: Sequence[A.Loop],
              rels: Sequence[tuple[A.Loop, A.Loop, str]] = (), budget: int = SEARCH_BUDGET) -> bool:
    """May ``r1`` (in a statement under ``loops1``, outermost first) and ``r2`` (under
    ``loops2``) touch the same element in two instances whose paired loop indices satisfy
    ``rels``: ``(l1, l2, rel)`` with ``rel`` one of ``=`` ``<`` ``>`` ``!=`` ``*`` comparing
    ``l1``'s index at the first instance with ``l2``'s at the second. Loops not paired take
    independent values. False only if it is proven that they never do."""
    if r1.name != r2.name:
        return False
    rels = [x for x in rels if x[2] != ANY]
    pair = _Pair(r1, loops1, r2, loops2, [(l1, l2) for l1, l2, _ in rels])
    return pair.feasible([rel for _, _, rel in rels], budget)


# ---------------------------------------------------------------------------
# exhaustive fallback for small iteration spaces


#: instances per side up to which a pair with a subscript outside the linear fragment is
#: decided by enumerating both statements' iteration spaces
ENUMERATION_LIMIT = 2048


class _NotEvaluable(Exception):
    """A subscript the enumeration fallback cannot evaluate from loop indices alone."""


def _evaluate(e: A.Expr, env: dict) -> int:
    """Value of an index expression over loop indices (LEIR integer semantics: floor
    ``//`` and ``%``); _NotEvaluable for anything that reads data or is not an integer."""
    if isinstance(e, A.Const):
        if not e.is_int:
            raise _NotEvaluable
        return e.value
    if isinstance(e, A.Var):
        if e.name not in env:
            raise _NotEvaluable
        return env[e.name]
    if isinstance(e, A.Neg):
        return -_evaluate(e.operand, env)
    if isinstance(e, A.BinOp):
        if e.op in ("&", "|"):
            a = bool(_evaluate(e.lhs, env))
            if e.op == "&":
                return int(a and bool(_evaluate(e.rhs, env)))
            return int(a or bool(_evaluate(e.rhs, env)))
        a, b = _evaluate(e.lhs, env), _evaluate(e.rhs, env)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op in ("//", "%") and b != 0:
            return a // b if e.op == "//" else a % b
        raise _NotEvaluable
    if isinstance(e, A.Compare):
        vals = [_evaluate(o, env) for o in e.operands]
        ops = {"<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__, "==": int.__eq__, "!=": int.__ne__}
        return int(all(ops[op](x, y) for op, x, y in zip(e.ops, vals, vals[1:])))
    if isinstance(e, A.Call):
        if e.func == "if_then_else":
            return _evaluate(e.args[1] if _evaluate(e.args[0], env) else e.args[2], env)
        if e.func in ("max", "min"):
            vals = [_evaluate(a, env) for a in e.args]
            return max(vals) if e.func == "max" else min(vals)
        if e.func == "abs":
            return abs(_evaluate(e.args[0], env))
    raise _NotEvaluable


def _linear_fragment(e: A.Expr) -> bool:
    """Does :meth:`_Problem.lin` represent ``e`` (so the solver sees the whole subscript)?"""
    if isinstance(e, A.Const):
        return e.is_int
    if isinstance(e, A.Var):
        return True
    if isinstance(e, A.Neg):
        return _linear_fragment(e.operand)
    if isinstance(e, A.BinOp):
        if e.op in ("+", "-"):
            return _linear_fragment(e.lhs) and _linear_fragment(e.rhs)
        if e.op == "*":
            if not (_linear_fragment(e.lhs) and _linear_fragment(e.rhs)):
                return False
            return not any(isinstance(n, A.Var) for n in A.walk(e.lhs)) or \
                not any(isinstance(n, A.Var) for n in A.walk(e.rhs))
        if e.op in ("//", "%"):
            return isinstance(e.rhs, A.Const) and e.rhs.is_int and e.rhs.value > 0 and _linear_fragment(e.lhs)
    return False


def _instances(loops: Sequence[A.Loop]):
    names = [l.var for l in loops]
    for vals in itertools.product(*(range(l.start, l.start + l.extent) for l in loops)):
        yield dict(zip(names, vals))


def _enumerate(r1: A.Access, loops1, r2: A.Access, loops2, pairs) -> Optional[dict]:
    """Every touching pair of instances by enumeration, summarized as {sign vector over
    ``pairs`` (``<`` when the first instance's index is smaller): per pair the distance
    ``x2 - x1`` if all such instance pairs share it, else None}; None if the spaces are too
    big or a subscript cannot be evaluated from the loop indices."""
    n1, n2 = math.prod(l.extent for l in loops1), math.prod(l.extent for l in loops2)
    if n1 > ENUMERATION_LIMIT or n2 > ENUMERATION_LIMIT:
        return None
    names = [(l1.var, l2.var) for l1, l2 in pairs]
    out: dict = {}
    try:
        second: dict = {}
        for env in _instances(loops2):
            second.setdefault(tuple(_evaluate(i, env) for i in r2.indices), []).append(env)
        for env in _instances(loops1):
            for env2 in second.get(tuple(_evaluate(i, env) for i in r1.indices), ()):
                dist = tuple(env2[b] - env[a] for a, b in names)
                vec = tuple(EQ if x == 0 else LT if x > 0 else GT for x in dist)
                seen = out.get(vec)
                out[vec] = dist if seen is None else tuple(s if s == x else None for s, x in zip(seen, dist))
    except _NotEvaluable:
        return None
    return out


# ---------------------------------------------------------------------------
# loop-carried conflicts


def _mentions(st: A.Assign, var: str) -> bool:
    return any(isinstance(n, A.Var) and n.name == var for n in A.walk(st))


def _carried_rels(lp: A.Loop, loops1: Sequence[A.Loop], loops2: Sequence[A.Loop]) -> Optional[list]:
    """Relations for "different iterations of ``lp``": the loops enclosing ``lp`` hold the
    same value, ``lp`` differs, loops inside ``lp`` are independent. None if ``lp`` does
    not enclose both statements."""
    rels = []
    for l1, l2 in zip(loops1, loops2):
        if l1 is not l2:
            break
        if l1 is lp:
            rels.append((l1, l2, NE))
            return rels
        rels.append((l1, l2, EQ))
    return None


def privatized(si: "StmtInfo", acc: A.Access) -> A.Access:
    """``acc`` as the element it touches in the whole iteration space: a private tensor
    (``\\alloc`` inside loops) has one copy per iteration of the loops around its
    allocation, so those loops' indices are leading subscripts of the element. Other
    accesses are returned unchanged."""
    private = getattr(si, "private", None)
    depth = private.get(acc.name, 0) if private else 0
    if not depth:
        return acc
    outer = tuple(A.Var(l.var, span=acc.span) for l in si.loops[:depth])
    return A.Access(acc.name, acc.dtype, acc.scope, outer + acc.indices, span=acc.span)


def loop_independent(lp: A.Loop, wsi: "StmtInfo", w: A.Access, rsi: "StmtInfo", r: A.Access) -> bool:
    """True if ``w`` (the write of ``wsi``) and ``r`` (an access of ``rsi``) never touch the
    same element in two different iterations of ``lp`` (which encloses both statements)."""
    if wsi is rsi and r is w and wsi.kind == "assign" and not _mentions(wsi.stmt, lp.var):
        return True  # every iteration stores the same value: redundant, not a race
    if w.name != r.name:
        return True
    rels = _carried_rels(lp, wsi.loops, rsi.loops)
    if rels is None:
        return False
    return not may_touch(privatized(wsi, w), wsi.loops, privatized(rsi, r), rsi.loops, rels)


def carried_conflict(lp: A.Loop, stmts: Sequence["StmtInfo"]) -> Optional[tuple[Ref, Ref]]:
    """The first (write, access) pair of the statements inside ``lp`` that may touch the
    same element in two different iterations of ``lp``; None if the iterations are
    independent."""
    all_refs = [ref for si in stmts for ref in refs_of(si)]
    for wsi in stmts:
        w = wsi.stmt.target
        for ref in all_refs:
            if ref.access.name != w.name:
                continue
            if not loop_independent(lp, wsi, w, ref.stmt, ref.access):
                return (Ref(wsi, w, True), ref)
    return None


def find_conflict(lp: A.Loop, stmts: Sequence["StmtInfo"]) -> Optional[tuple["StmtInfo", str]]:
    """First pair of accesses inside loop ``lp`` that may touch the same element in two
    different iterations of ``lp`` with at least one write, as (StmtInfo of the writer,
    message); None if the iterations of ``lp`` are independent."""
    c = carried_conflict(lp, stmts)
    if c is None:
        return None
    w, r = c
    name = w.access.name
    if w.stmt is r.stmt and r.access is w.access:
        return (w.stmt, f"different iterations write the same element of '{name}'")
    return (w.stmt, f"'{name}' is written in one iteration and {'written' if r.is_write else 'read'} in another")


def only_self_conflicts(lp: A.Loop, stmts: Sequence["StmtInfo"], red: "StmtInfo") -> bool:
    """True if the only cross-iteration conflicts in ``lp`` are the reduction ``red``'s own
    accumulator accesses (so the loop is a legal cross-thread reduction)."""
    others = [si for si in stmts if si is not red]
    x = red.stmt.target.name
    for si in others:
        names = {si.stmt.target.name} | {a.name for a in _reads(si.stmt)}
        if x in names:
            return False
    return find_conflict(lp, others) is None


# ---------------------------------------------------------------------------
# direction vectors and distances


@dataclass(frozen=True)
class Dependence:
    """Possible relations between the instance of ``src`` and that of ``dst`` touching the
    same element. ``vectors``: every direction vector over ``loops`` that may occur, one of
    ``<`` (src's index smaller), ``=``, ``>`` per loop; empty if they never touch.
    ``distance``: per loop, ``dst index - src index`` where it is the same in every case,
    else None (unknown or several)."""

    src: A.Access
    dst: A.Access
    loops: tuple[tuple[A.Loop, A.Loop], ...]
    vectors: frozenset
    distance: tuple[Optional[int], ...]


def direction_vectors(r1: A.Access, loops1: Sequence[A.Loop], r2: A.Access, loops2: Sequence[A.Loop],
                      pairs: Sequence[tuple[A.Loop, A.Loop]], fixed: Sequence[tuple[A.Loop, A.Loop, str]] = ()
                      ) -> frozenset:
    """Every direction vector (a tuple of ``<`` ``=`` ``>``, one per pair of ``pairs``) under
    which ``r1`` and ``r2`` may touch the same element, given the relations ``fixed`` on
    other loops. Vectors are refined one loop at a time, so infeasible prefixes are cut
    early; a question the search cannot settle keeps its vector (sound)."""
    return _memo(r1, loops1, r2, loops2, pairs, fixed, False).vectors


#: identity-keyed memo of :func:`dependence` (AST nodes are immutable, so the same objects
#: give the same answer); strategies ask the same pairs once per candidate rewrite
_MEMO: dict = {}
_MEMO_LIMIT = 4096


def dependence(r1: A.Access, loops1: Sequence[A.Loop], r2: A.Access, loops2: Sequence[A.Loop],
               pairs: Sequence[tuple[A.Loop, A.Loop]], fixed: Sequence[tuple[A.Loop, A.Loop, str]] = ()) -> Dependence:
    """The :class:`Dependence` of ``r1`` (first instance) and ``r2`` (second) over ``pairs``."""
    return _memo(r1, loops1, r2, loops2, pairs, fixed, True)


def _memo(r1, loops1, r2, loops2, pairs, fixed, with_distances: bool) -> Dependence:
    pairs, fixed = tuple(pairs), tuple(fixed)
    objs = (r1, r2, tuple(loops1), tuple(loops2), pairs, fixed)
    key = (id(r1), id(r2), tuple(map(id, loops1)), tuple(map(id, loops2)),
           tuple((id(a), id(b)) for a, b in pairs), tuple((id(a), id(b), rel) for a, b, rel in fixed), with_distances)
    hit = _MEMO.get(key)
    if hit is not None and _same_objects(hit[0], objs):
        return hit[1]
    dep = _dependence(r1, loops1, r2, loops2, pairs, fixed, with_distances)
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[key] = (objs, dep)  # holding the objects keeps their ids from being reused
    return dep


def _same_objects(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_objects(x, y) for x, y in zip(a, b))
    return a is b or (isinstance(a, str) and a == b)


def _dependence(r1, loops1, r2, loops2, pairs, fixed, with_distances: bool) -> Dependence:
    out: set = set()
    dists: list = []
    if r1.name == r2.name:
        fixed = [x for x in fixed if x[2] != ANY]
        pair = _Pair(r1, loops1, r2, loops2, [(a, b) for a, b, _ in fixed] + list(pairs))
        head = [rel for _, _, rel in fixed]
        stack = [()]
        while stack:
            prefix = stack.pop()
            rest = [ANY] * (len(pairs) - len(prefix))
            box = pair.solution_box(head + list(prefix) + rest) if rest and NE not in head else None
            if box is not None:
                # every point of the box touches: all sign combinations it allows occur
                options = [pair.signs(box, len(head) + k) for k in range(len(prefix), len(pairs))]
                for tail in itertools.product(*options):
                    vec = prefix + tail
                    out.add(vec)
                    if with_distances:
                        dists.append(pair.distances(head + list(vec))[len(head):])
                continue
            if not pair.feasible(head + list(prefix) + rest):
                continue
            if len(prefix) == len(pairs):
                out.add(prefix)
                if not with_distances:
                    continue
                if NE not in head:
                    dists.append(pair.distances(head + list(prefix))[len(head):])
                else:
                    dists.append(tuple(0 if rel == EQ else None for rel in prefix))
                continue
            for rel in (GT, EQ, LT):
                stack.append(prefix + (rel,))
    distance = []
    for k in range(len(pairs)):
        vals = {d[k] for d in dists}
        distance.append(vals.pop() if len(vals) == 1 else None)
    return Dependence(r1, r2, pairs, frozenset(out), tuple(distance))
