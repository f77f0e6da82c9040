"""The three dependence tests leirc had before :mod:`leirc.analysis` (copied verbatim from
commit c5d9205: ``lang/checker.py``, ``strategies/loops.py``, ``strategies/graph.py``),
kept only as the reference the merged analysis is compared with in
tests/test_analysis_deps_merged.py. Not used by leirc itself."""

from __future__ import annotations

import math
from typing import Optional

from leirc.lang import ast as A
from leirc.lang.affine import affine
from leirc.lang.checker import StmtInfo


# ---------------------------------------------------------------------------
# lang/checker.py


def _loop_ranges(loops) -> dict:
    return {l.var: (l.start, l.start + l.extent - 1) for l in loops}


def _virtual_dims(acc: A.Access) -> list:
    """Subscripts of ``acc`` keyed by position, plus reconstructed dimensions: a pair
    ``(X//c, X%c)`` determines X, so it is added as an extra dimension keyed by the pair."""
    dims = [((k,), idx) for k, idx in enumerate(acc.indices)]
    for i, di in enumerate(acc.indices):
        for j, dj in enumerate(acc.indices):
            if (isinstance(di, A.BinOp) and di.op == "//" and isinstance(dj, A.BinOp) and dj.op == "%"
                    and di.lhs == dj.lhs and di.rhs == dj.rhs and isinstance(di.rhs, A.Const)):
                dims.append(((i, j), di.lhs))
    return dims


def independent(lp: A.Loop, wsi: StmtInfo, w: A.Access, rsi: StmtInfo, r: A.Access) -> bool:
    v = lp.var
    if wsi is rsi and r is w and wsi.kind == "assign" and not _mentions(wsi.stmt, v):
        return True  # every iteration stores the same value: redundant, not a race
    if not w.indices:
        return False  # a scalar written in every iteration
    # loops enclosing lp are shared by both iterations; loops inside lp are independent
    outer = []
    for l in wsi.loops:
        if l is lp:
            break
        outer.append(l.var)
    inner_w = _inner_ranges(wsi.loops, lp)
    inner_r = _inner_ranges(rsi.loops, lp)
    rdims = dict(_virtual_dims(r))
    for key, iw in _virtual_dims(w):
        ir = rdims.get(key)
        if ir is None:
            continue
        fw, fr = affine(iw), affine(ir)
        if fw is None or fr is None:
            continue
        cw, cr = fw[0].get(v, 0), fr[0].get(v, 0)
        if cw == 0 or cw != cr:
            continue
        if any(fw[0].get(o, 0) != fr[0].get(o, 0) for o in outer):
            continue
        # equal subscripts need  cw*(v_w - v_r) = const + sum(inner terms)
        const = fr[1] - fw[1]
        lo = hi = 0
        g = 0
        ok = True
        for terms, ranges, sign in ((fr[0], inner_r, 1), (fw[0], inner_w, -1)):
            for var, c in terms.items():
                if var == v or var in outer:
                    continue
                rg = ranges.get(var)
                if rg is None:
                    ok = False
                    break
                c = sign * c
                lo += min(c * rg[0], c * rg[1])
                hi += max(c * rg[0], c * rg[1])
                if rg[1] > rg[0]:
                    g = math.gcd(g, abs(c))
        if not ok:
            continue
        if _no_solution(abs(cw) if cw > 0 else cw, lp.extent, const, lo, hi, g):
            return True
    return False


def _no_solution(c: int, extent: int, const: int, lo: int, hi: int, g: int) -> bool:
    """True if no d in [-(extent-1), extent-1] minus {0} has c*d - const in [lo, hi] and
    divisible by g (g = 0: must equal lo == hi)."""
    if max(abs(lo + const), abs(hi + const)) < abs(c):
        return True
    if extent > 65536:
        return False
    for d in range(1, extent):
        for dd in (d, -d):
            t = c * dd - const
            if lo <= t <= hi and (t % g == 0 if g else t == lo):
                return False
    return True


def _mentions(st: A.Assign, var: str) -> bool:
    return any(isinstance(n, A.Var) and n.name == var for n in A.walk(st))


def _inner_ranges(loops, lp) -> dict:
    out = {}
    seen = False
    for l in loops:
        if seen:
            out[l.var] = (l.start, l.start + l.extent - 1)
        if l is lp:
            seen = True
    return out


# ---------------------------------------------------------------------------
# strategies/loops.py


def _injective_terms(terms: dict, ranges: dict) -> bool:
    """Is ``sum(c*v)`` injective over the box of ``ranges`` (mixed radix: every coefficient
    exceeds the largest value the smaller terms can add up to)?"""
    items = []
    for v, c in terms.items():
        lo, hi = ranges[v]
        if hi > lo:
            items.append((abs(c), hi - lo))
    items.sort()
    reach = 0
    for c, span in items:
        if c <= reach:
            return False
        reach += c * span
    return True


def free_vars(seg: set, outer: set, wsi: StmtInfo, w: A.Access, rsi: StmtInfo, r: A.Access):
    """Segment loop variables whose values may differ between two iterations in which
    ``w`` and ``r`` touch the same element; None if they provably never do.

    A subscript dimension whose affine form is the same on both sides pins its unknown
    variables when it is injective in them (``i``, ``io*4+i``); pinned variables count as
    known in further dimensions (``i``, ``i+j`` pins both). Loops enclosing the segment
    (``outer``) have the same value in both iterations. Non-affine subscripts pin nothing,
    so the answer is conservative."""
    rw, rr = _loop_ranges(wsi.loops), _loop_ranges(rsi.loops)
    dr = dict(_virtual_dims(r))
    forms = []
    for key, iw in _virtual_dims(w):
        ir = dr.get(key)
        if ir is None:
            continue
        fw, fr = affine(iw), affine(ir)
        if fw is not None and fr is not None:
            forms.append((fw, fr))
    pinned: set[str] = set()
    changed = True
    while changed:
        changed = False
        for fw, fr in forms:
            known = outer | pinned
            kw = {v: c for v, c in fw[0].items() if v in known}
            kr = {v: c for v, c in fr[0].items() if v in known}
            uw = {v: c for v, c in fw[0].items() if v not in known}
            ur = {v: c for v, c in fr[0].items() if v not in known}
            if kw != kr or uw != ur or any(rw.get(v) != rr.get(v) for v in uw):
                continue
            d = fr[1] - fw[1]
            if not uw:
                if d != 0:
                    return None  # the dimensions never agree
                continue
            if d == 0 and _injective_terms(uw, rw):
                pinned |= set(uw)
                changed = True
            elif len(uw) == 1 and d % next(iter(uw.values())):
                return None
    return frozenset(v for v in seg if v not in pinned)


# ---------------------------------------------------------------------------
# strategies/graph.py


def _injective_form(coefs: dict, ext: dict) -> bool:
    """Is ``sum(c*v)`` injective over the boxes [0, ext)? (mixed radix, e.g. g*64+tx)"""
    reach = 0
    for c, n in sorted((abs(c), ext[v]) for v, c in coefs.items()):
        if c <= reach:
            return False
        reach += c * (n - 1)
    return True


def _distances(f: A.Access, g: A.Access, loops: list[A.Loop]) -> Optional[dict]:
    """Known iteration distances I - J for ``f`` at I and ``g`` at J touching the same
    element: {var: distance} for the variables the subscripts pin down (others are free);
    None if the two accesses can never touch the same element."""
    ext = {l.var: l.extent for l in loops}
    fixed: dict = {}
    for fi, gi in zip(f.indices, g.indices):
        af, ag = affine(fi), affine(gi)
        if af is None or ag is None or af[0] != ag[0]:
            continue  # no information from this dimension (conservative)
        if any(v not in ext for v in af[0]):
            continue
        k = ag[1] - af[1]  # sum c*(I-J) = k
        coefs = {v: c for v, c in af[0].items() if ext[v] > 1}
        if not coefs:
            if k != 0:
                return None  # different constant coordinates
            continue
        if len(coefs) == 1:
            (v, c), = coefs.items()
            if k % c:
                return None
            d = k // c
            if abs(d) >= ext[v] or fixed.setdefault(v, d) != d:
                return None
        elif k == 0 and _injective_form(coefs, ext):
            for v in coefs:
                if fixed.setdefault(v, 0) != 0:
                    return None
    return fixed


def may_reverse(f: A.Access, g: A.Access, loops: list[A.Loop]) -> bool:
    """Can ``f`` at iteration I and ``g`` at iteration J touch the same element with J
    strictly before I (lexicographic order of ``loops``)? Never misses such a pair."""
    if f.name != g.name or len(f.indices) != len(g.indices):
        return f.name == g.name
    fixed = _distances(f, g, loops)
    if fixed is None:
        return False
    for lp in loops:
        if lp.extent <= 1:
            continue
        d = fixed.get(lp.var)
        if d is None or d > 0:
            return True  # I can be later than J
        if d < 0:
            return False
    return False  # same iteration: program order within the body is kept


def determined_vars(acc: A.Access, loops: list[A.Loop]) -> Optional[set]:
    """Loop variables that the subscripts of ``acc`` determine uniquely; None if a
    subscript is not affine."""
    ext = {l.var: l.extent for l in loops}
    out = set()
    for i in acc.indices:
        af = affine(i)
        if af is None or any(v not in ext for v in af[0]):
            return None
        coefs = {v: c for v, c in af[0].items() if ext[v] > 1}
        if len(coefs) == 1 or (coefs and _injective_form(coefs, ext)):
            out |= set(coefs)
    return out


def injective_acc(acc: A.Access, loops: list[A.Loop]) -> bool:
    """Does every iteration of ``loops`` (extent > 1) touch a different element?"""
    det = determined_vars(acc, loops)
    return det is not None and all(l.var in det for l in loops if l.extent > 1)
