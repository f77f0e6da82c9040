"""Operator-level (loop schedule) strategies.

Registered: ``loop_binding``, ``loop_fusion``, ``loop_parallelization``, ``loop_peel``, ``loop_reorder``,
``loop_split``, ``loop_tiling``, ``loop_unrolling``, ``loop_vectorization``,
``precompute_indices``, ``reduction_factorization``.

Rewrites that change the order of iterations (``loop_reorder``, ``loop_tiling``) share one
dependence argument (:func:`_order_violation`): for every pair of accesses to one tensor in
the loops' body, at least one a write, the shared analysis (:mod:`leirc.analysis.deps`)
gives the direction vectors (per loop: earlier, same or later iteration) under which the
two touch the same element (exact for affine and ``//``/``%`` subscripts, conservative for
the rest). A rewrite is legal iff it keeps the relative order of every such pair,
except the accumulator of a pure reduction across its reduction loops, which is
reassociated (exact in reals for ``+ - *``, bitwise for ``max``/``min``). Kind changes
(``P``/``V``/``B``) use the checker's own race test, so a listed site always checks.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Callable

from ..lang import ast as A
from ..analysis.deps import EQ, GT, LT, direction_vectors, find_conflict, only_self_conflicts, refs_of
from ..lang.checker import BLOCK_LIMITS, MAX_THREADS_PER_BLOCK, MAX_VECTOR_LANES, THREAD_LIMITS, StmtInfo, binding_axis
from .common import all_serial as _all_serial, check_candidate as _check_candidate, divisors as _divisors
from .common import identity_const as _identity_const, loop_arg as _loop_arg, loops_under as _loops_under
from .common import rebuild_chain as _rebuild_chain, recheck_candidate as _recheck_candidate, stmt_arg as _stmt_arg
from .common import reassociation_overflow
from .base import Arg, Context, NotApplicable, Rewrite, Site, Strategy, strategy
from .rewrite import (Path, add, carried, fresh_index, fresh_tensor, get_at, iter_loops, iter_stmts, map_expr, mul, nest_chain,
                      ref_at, refs_at, rename_tensor, replace_at, stmt_ref, substitute, var)


@strategy("loop_split", level="operator", numerics="bitwise", creates=("outer", "inner"),
          args=[Arg("loop", "loop", "loop to split, e.g. N0.a"),
                Arg("factor", "int", "inner extent; must divide the loop extent")])
class LoopSplit(Strategy):
    """Split one loop into an outer serial loop and an inner loop of ``factor`` iterations.

    The inner loop keeps the index name and kind (so a bound ``tx`` stays bound); the outer
    loop gets a fresh name and is serial. Factors that do not divide the extent are rejected
    (no guarded tails), so the iteration space is unchanged and the rewrite is bitwise.

    Before: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}
    Args: loop=N0.i factor=4
    After: \\kernel k(A:f32[8])->(C:f32[8]){L^{2}_{io=0}L^{4}_{i=0}[C^{f32,g}_{io*4+i}=A^{f32,g}_{io*4+i}*2;];}
    """

    def sites(self, ctx):
        out = []
        for ref, lp, _ in ctx.loops():
            if lp.start == 0 and lp.extent >= 4:
                ds = _divisors(lp.extent, limit=8)
                if ds:
                    out.append(Site(self.name, {"loop": ref}, {"factor": ds}, f"split {lp.var} ({lp.extent})"))
        return out

    def plan(self, ctx, args):
        lp, path = _loop_arg(self, ctx, args["loop"])
        f = args["factor"]
        if lp.start != 0:
            raise self.na(f"loop '{lp.var}' starts at {lp.start}; only loops starting at 0 are split", lp)
        if f <= 1 or f >= lp.extent:
            raise self.na(f"factor {f} must be between 2 and {lp.extent - 1}", lp)
        if lp.extent % f:
            raise self.na(f"factor {f} does not divide extent {lp.extent} (guarded tails are not generated)", lp)
        outer = fresh_index(ctx.kernel, lp.var + "o")
        body = tuple(substitute(b, {lp.var: add(mul(var(outer), A.Const(f)), var(lp.var))}) for b in lp.body)
        inner = replace(lp, extent=f, body=body, span=None)
        new = replace_at(ctx.kernel, path, A.Loop("L", lp.extent // f, outer, 0, (inner,)))
        refs = refs_at(new, [path, path + (0,)])
        moved = {}
        for j, b in enumerate(lp.body):
            moved.update(carried(b, path + (j,), path + (0, j)))
        return Rewrite(new, self.numerics, {"outer": refs[path], "inner": refs[path + (0,)]}, moved=moved)


#: vector widths whose remainder ``loop_peel`` offers to peel off (``n - n % f``)
PEEL_FACTORS = (4, 8, 16, 32)


@strategy("loop_peel", level="operator", numerics="bitwise", creates=("head", "tail"),
          args=[Arg("loop", "loop", "serial or parallel loop to split in two, e.g. N0.j"),
                Arg("at", "int", "iterations of the first part (between 1 and the extent - 1)")])
class LoopPeel(Strategy):
    """Split a loop's iteration space in two: ``K^{n}_{i=s}`` becomes ``K^{at}_{i=s}`` followed
    by ``K^{n-at}_{i=s+at}``, both with the same body, index name and kind.

    This is how a vector or register tile reaches an extent it does not divide: peeling
    ``741 % 32`` iterations off ``j`` leaves a head of 736 that tiles by 32 and a tail of 5 for
    scalar code. Iterations run in the same order (a parallel loop has no dependence between
    iterations, so its two halves may run one after the other), so the rewrite is bitwise.
    A reduction into ``X`` that the loop indexes (``C_{i,j} += ...`` under ``j``) is, in the
    tail, a second statement into ``X``, which docs/language.md §6 reads as an update without
    the identity initialization; an initialization nest between head and tail therefore sets
    the tail's elements to the identity first (the same operations on the same values; the
    tail stays a copy of the head, so a perfect nest stays perfect). That needs the
    reduction's outermost reduction loop to be inside the peeled one (``L_k L_j [C_j += ...]``
    peeled at ``j`` would initialize the tail's elements at ``k``'s entry, between the two
    halves) and the target subscript to use only loops outside it. A reduction over the
    peeled loop itself just continues in the tail, as an update of the head's partial result.

    Before: \\kernel k(A:f32[6])->(C:f32[6]){L^{6}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}
    Args: loop=N0.i at=4
    After: \\kernel k(A:f32[6])->(C:f32[6]){L^{4}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];L^{2}_{i=4}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}
    """

    def sites(self, ctx):
        out = []
        for ref, lp, _ in ctx.loops():
            ats = sorted({lp.extent - lp.extent % f for f in PEEL_FACTORS if lp.extent > f and lp.extent % f})
            if lp.kind not in ("L", "P") or not ats:
                continue
            try:
                self._inits(ctx, lp)
            except NotApplicable:
                continue
            out.append(Site(self.name, {"loop": ref}, {"at": ats}, f"peel {lp.var} ({lp.extent})"))
        return out

    def _inits(self, ctx, lp: A.Loop) -> list:
        """For every reduction under ``lp`` that ``lp`` indexes, the loops from ``lp`` down to
        its outermost reduction loop (excluded) and the identity store (see the docstring)."""
        out = []
        for si in _inside(ctx, lp):
            if si.kind != "reduce" or lp.var in si.reduce_vars:
                continue
            st = si.stmt
            top = next(n for n, l in enumerate(si.loops) if l is lp)
            first = next((n for n, l in enumerate(si.loops) if l is si.init_loop), len(si.loops))
            if first < top:
                raise self.na(f"'{st.target.name}' is reduced over loop '{si.loops[first].var}' outside "
                              f"'{lp.var}': the tail's elements are initialized at its entry, before the head runs", lp)
            outside = {l.var for l in si.loops[:first]}
            used = {n.name for i in st.target.indices for n in A.walk(i) if isinstance(n, A.Var)}
            if not used <= outside:
                inner = sorted(used - outside)
                raise self.na(f"'{st.target.name}' is indexed by {', '.join(inner)} inside its reduction loop "
                              f"'{si.loops[first].var}': a store outside it cannot initialize the tail's elements", lp)
            dtype = ctx.result.tensors[st.target.name].dtype
            out.append((si.loops[top:first], A.Assign(replace(st.target, span=None), _identity_const(si.identity, dtype))))
        return out

    def plan(self, ctx, args):
        lp, path = _loop_arg(self, ctx, args["loop"])
        at = args["at"]
        if lp.kind not in ("L", "P"):
            raise self.na(f"loop '{lp.var}' is {A.LOOP_KIND_NAMES[lp.kind]}; only serial and parallel loops are peeled", lp)
        if not 1 <= at < lp.extent:
            raise self.na(f"'at' must be between 1 and {lp.extent - 1} (the loop has {lp.extent} iterations)", lp)
        head = replace(lp, extent=at, span=None)
        # fresh nodes: the checker's facts are keyed by node identity, and one statement object
        # in both halves would get one (the tail's) kind
        tail = replace(copy.deepcopy(lp), extent=lp.extent - at, start=lp.start + at, span=None)
        inits = []
        for loops, store in self._inits(ctx, lp):
            nest = _rebuild_chain([replace(l, span=None) for l in loops], (store,))
            inits.append(replace(nest, extent=tail.extent, start=tail.start))  # the tail's part of lp only
        new = replace_at(ctx.kernel, path, [head, *inits, tail])
        _recheck_candidate(self, ctx, new, lp)
        tail_path = path[:-1] + (path[-1] + 1 + len(inits),)
        refs = refs_at(new, [path, tail_path])
        return Rewrite(new, self.numerics, {"head": refs[path], "tail": refs[tail_path]},
                       moved=carried(lp, path, path))


class _KindChange(Strategy):
    """Shared implementation of the strategies that change a loop's kind."""

    to_kind = "L"
    max_extent = None

    def _candidate(self, ctx, lp, path):
        return replace_at(ctx.kernel, path, replace(lp, kind=self.to_kind))

    def _admissible(self, ctx, lp, path) -> bool:
        """Cheap test used by :meth:`sites`; subclasses replace the full re-check by the
        checker rule that actually applies to their kind."""
        return ctx.passes(self._candidate(ctx, lp, path))

    def _precheck(self, ctx, lp) -> None:
        """Extra structural preconditions (raise NotApplicable)."""

    def sites(self, ctx):
        out = []
        for ref, lp, path in ctx.loops():
            if lp.kind != "L" or lp.extent < 2:
                continue
            if self.max_extent and lp.extent > self.max_extent:
                continue
            try:
                self._precheck(ctx, lp)
            except NotApplicable:
                continue
            if self._admissible(ctx, lp, path):
                out.append(Site(self.name, {"loop": ref}, {}, f"{lp.var} ({lp.extent}) -> {self.to_kind}"))
        return out

    def plan(self, ctx, args):
        lp, path = _loop_arg(self, ctx, args["loop"])
        if lp.kind != "L":
            raise self.na(f"loop '{lp.var}' is already {A.LOOP_KIND_NAMES[lp.kind]}", lp)
        if self.max_extent and lp.extent > self.max_extent:
            raise self.na(f"loop '{lp.var}' has {lp.extent} iterations; at most {self.max_extent} allowed", lp)
        self._precheck(ctx, lp)
        new = self._candidate(ctx, lp, path)
        ctx.recheck(self.name, new, lp)
        return Rewrite(new, self.numerics, moved=carried(lp, path, path))


def _races_free(ctx, lp) -> bool:
    """The checker's E040 test for a P or V loop (no cross-iteration conflict)."""
    return lp.extent == 1 or find_conflict(lp, _inside(ctx, lp)) is None


@strategy("loop_parallelization", level="operator", numerics="bitwise",
          args=[Arg("loop", "loop", "serial loop to run in parallel")])
class LoopParallelization(_KindChange):
    """Run a serial loop's iterations in parallel (``L`` -> ``P``).

    Legal only if no dependence is carried by the loop (no reduction, scan or update
    across its iterations), as decided by the checker's dependence test.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}
    Args: loop=N0.i
    After: \\kernel k(A:f32[4,8])->(C:f32[4]){P^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}
    """

    to_kind = "P"

    def _admissible(self, ctx, lp, path):
        return _races_free(ctx, lp)


# ---------------------------------------------------------------------------
# shared helpers: statements inside a loop, dependence pairs, chains


def _inside(ctx: Context, lp: A.Loop) -> list[StmtInfo]:
    """Checker facts of the statements nested in ``lp`` (by identity)."""
    return [si for si in ctx.result.stmts if any(l is lp for l in si.loops)]


def _access_pairs(stmts: list[StmtInfo]):
    """(writer, written access, other statement, other access, other is a write) for every
    pair of accesses to the same tensor with at least one write (a write is also paired
    with itself: two iterations may store to the same element)."""
    for wsi in stmts:
        w = wsi.stmt.target
        for rsi in stmts:
            for ref in refs_of(rsi):
                if ref.access.name == w.name:
                    yield wsi, w, rsi, ref.access, ref.is_write


def _injective(terms: dict, ranges: dict) -> bool:
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


def _segment_vectors(seg: set, outer: set, wsi: StmtInfo, w: A.Access, rsi: StmtInfo, r: A.Access):
    """(segment loop variables, direction vectors over them) of ``w`` at one instance and
    ``r`` at another touching the same element (:func:`leirc.analysis.deps.direction_vectors`).
    Loops enclosing the segment (``outer``) hold the same value in both instances; loops
    below it are independent."""
    pairs, fixed, names = [], [], []
    for l1, l2 in zip(wsi.loops, rsi.loops):
        if l1 is not l2:
            break
        if l1.var in outer:
            fixed.append((l1, l2, EQ))
        elif l1.var in seg:
            pairs.append((l1, l2))
            names.append(l1.var)
    return names, direction_vectors(w, wsi.loops, r, rsi.loops, pairs, fixed)


def _free_vars(seg: set, outer: set, wsi: StmtInfo, w: A.Access, rsi: StmtInfo, r: A.Access):
    """Segment loop variables whose values may differ between two iterations in which
    ``w`` and ``r`` touch the same element; None if they provably never do. Decided by the
    shared dependence analysis (exact for affine and ``//``/``%`` subscripts, conservative
    for the rest)."""
    names, vectors = _segment_vectors(seg, outer, wsi, w, rsi, r)
    if not vectors:
        return None
    free = {v for vec in vectors for v, rel in zip(names, vec) if rel != EQ}
    return frozenset(free | {v for v in seg if v not in names})


def _order_violation(s: Strategy, ctx: Context, head: A.Loop, seg: list[str], changes: Callable,
                     reverses: Callable | None = None):
    """Dependence check for a rewrite that reorders the iterations of the loops ``seg``
    (``head`` is the outermost of them). For every pair of accesses to one tensor (one a
    write) and every direction vector under which they touch the same element,
    ``reverses(vec)`` ({var: '<' '=' '>'}) says whether the rewrite may run the second
    instance first; by default ``changes(F)`` is asked whether the rewrite may swap two
    iterations that differ exactly in the loops ``F``. Returns the set of reduction
    operators whose accumulation order changes (re-association); raises NotApplicable for
    any other dependence whose direction could be reversed."""
    segset = set(seg)
    ops: set[str] = set()
    stmts = _inside(ctx, head)
    for wsi, w, rsi, r, r_is_write in _access_pairs(stmts):
        outer = {l.var for l in wsi.loops[:next((k for k, l in enumerate(wsi.loops) if l is head), 0)]}
        names, vectors = _segment_vectors(segset, outer, wsi, w, rsi, r)
        for vec in sorted(vectors):
            rel = dict(zip(names, vec))
            F = frozenset(v for v in seg if rel.get(v, "*") != EQ)
            if not (reverses(rel) if reverses is not None else changes(F)):
                continue
            if wsi is rsi and wsi.kind == "reduce" and wsi.operand is not None and F <= set(wsi.reduce_vars):
                why = reassociation_overflow(wsi, wsi.stmt.target)
                if why:
                    raise s.na(why, head)
                ops.add(wsi.op)
                continue
            loops = ", ".join(v for v in seg if v in F)
            other = "written" if r_is_write else "read"
            raise s.na(f"'{w.name}' is written by {stmt_ref(ctx.kernel, wsi.stmt)} and {other} by {stmt_ref(ctx.kernel, rsi.stmt)} "
                       f"in iterations that differ in loops {loops}; the new order would reverse that dependence", head)
    return ops


def _first_difference(rel: dict, order: list[str]):
    """The relation of the outermost loop (in ``order``) whose index differs, else None."""
    return next((rel[v] for v in order if rel.get(v, EQ) != EQ), None)


def _reassoc_numerics(ops: set) -> str:
    return "exact-in-reals" if ops & {"+", "-", "*"} else "bitwise"


def _is_chain_head(kernel: A.Kernel, path) -> bool:
    if len(path) == 1:
        return True
    parent = get_at(kernel, path[:-1])
    return not (isinstance(parent, A.Loop) and len(parent.body) == 1)


# ---------------------------------------------------------------------------
# loop_reorder


@strategy("loop_reorder", level="operator", numerics="bitwise",
          args=[Arg("loop", "loop", "outermost loop of the perfectly nested loops to permute, e.g. N0.i"),
                Arg("order", "loops", "new order of the first loops of that chain, outermost first, by index name, e.g. i,k,j")])
class LoopReorder(Strategy):
    """Permute the loops of a perfect chain (each loop's body is the next loop).

    ``order`` names the index variables of the first ``len(order)`` loops of the chain that
    starts at ``loop``, outermost first; loops keep their kinds and extents. The rewrite only
    changes the order in which iterations run, so it is legal iff no dependence between two
    iterations is reversed. For every pair of accesses to one tensor (at least one a write)
    in the chain's body, the loops in which the two iterations may differ are computed from
    the subscripts (an injective subscript such as ``i`` or ``io*4+i`` pins its loops); a
    pair that differs in one loop only, or whose loops keep their relative order, is
    preserved. The one exception allowed is the accumulator of a pure reduction
    (``X = X op e``) across its reduction loops: reordering those reassociates the
    accumulation, which is exact in real arithmetic for ``+``/``*`` (reported by
    :meth:`numerics_for`) and bitwise for ``max``/``min``. Everything else is bitwise.

    Before: \\kernel k(A:f32[4,8],B:f32[8,2])->(C:f32[4,2]){L^{4}_{i=0}L^{2}_{j=0}L^{8}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}
    Args: loop=N0.i order=i,k,j
    After: \\kernel k(A:f32[4,8],B:f32[8,2])->(C:f32[4,2]){L^{4}_{i=0}L^{8}_{k=0}L^{2}_{j=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}
    """

    def sites(self, ctx):
        out = []
        for ref, lp, path in ctx.loops():
            if not _is_chain_head(ctx.kernel, path):
                continue
            chain = nest_chain(lp)
            if len(chain) < 2:
                continue
            names = [l.var for l in chain]
            site = self.site(ctx, {"loop": ref}, f"permute {','.join(names)}",
                             lambda path=path, lp=lp, chain=chain: {"order": self._orders(ctx, path, lp, chain)})
            if site is not None:
                out.append(site)
        return out

    def _orders(self, ctx, path, lp, chain) -> list[str]:
        """The legal swaps of two loops of ``chain``, as orders."""
        names = [l.var for l in chain]
        orders = []
        for a in range(len(names)):
            for b in range(a + 1, len(names)):
                new = list(names)
                new[a], new[b] = new[b], new[a]
                try:
                    self._legal(ctx, chain, new)
                    if not _all_serial(chain):
                        _check_candidate(self, self._rewrite(ctx, path, chain, new), lp)
                except NotApplicable:
                    continue
                orders.append(",".join(new))
        return orders

    def _segment(self, ctx, args):
        lp, path = _loop_arg(self, ctx, args["loop"])
        chain = nest_chain(lp)
        order = list(args["order"])
        if len(order) < 2:
            raise self.na("'order' must name at least two loops", lp)
        if len(order) > len(chain):
            raise self.na(f"'order' names {len(order)} loops but the perfect chain at '{lp.var}' has only {len(chain)} "
                          f"({','.join(l.var for l in chain)})", lp)
        seg = chain[:len(order)]
        names = [l.var for l in seg]
        if sorted(order) != sorted(names):
            raise self.na(f"'order' {','.join(order)} is not a permutation of the chain loops {','.join(names)}", lp)
        if order == names:
            raise self.na(f"'order' {','.join(order)} is the current order", lp)
        return lp, path, seg, order

    def _legal(self, ctx, seg, order):
        old = {v: i for i, v in enumerate(l.var for l in seg)}
        new = {v: i for i, v in enumerate(order)}

        def changes(F):
            return len(F) >= 2 and sorted(F, key=old.get) != sorted(F, key=new.get)

        def reverses(rel):
            # the outermost differing loop decides which instance runs first
            if any(v not in rel for v in old):
                return changes(frozenset(v for v in old if rel.get(v, "*") != EQ))
            return _first_difference(rel, list(old)) != _first_difference(rel, order)

        return _order_violation(self, ctx, seg[0], [l.var for l in seg], changes, reverses)

    def _rewrite(self, ctx, path, seg, order):
        by = {l.var: l for l in seg}
        return replace_at(ctx.kernel, path, _rebuild_chain([by[v] for v in order], seg[-1].body))

    def plan(self, ctx, args):
        lp, path, seg, order = self._segment(ctx, args)
        ops = self._legal(ctx, seg, order)
        new = self._rewrite(ctx, path, seg, order)
        if not _all_serial(seg):
            _recheck_candidate(self, ctx, new, lp)
        depth = {v: k for k, v in enumerate(order)}
        moved = {path + (0,) * k: path + (0,) * depth[l.var] for k, l in enumerate(seg)}
        below = path + (0,) * (len(seg) - 1)
        for j, b in enumerate(seg[-1].body):
            moved.update(carried(b, below + (j,), below + (j,)))
        return Rewrite(new, _reassoc_numerics(ops), moved=moved)


# ---------------------------------------------------------------------------
# loop_tiling


@strategy("loop_tiling", level="operator", numerics="bitwise", creates=("outer_tile", "inner_tile", "outer_point", "inner_point"),
          args=[Arg("loop", "loop", "outer loop of two directly nested loops, e.g. N0.i"),
                Arg("factor_outer", "int", "tile size (inner extent) of `loop`; must divide its extent"),
                Arg("factor_inner", "int", "tile size of the loop directly inside `loop`; must divide its extent")])
class LoopTiling(Strategy):
    """Tile two directly nested loops: split both and hoist both outer parts.

    ``L^{N}_{i} L^{M}_{j}`` becomes ``L^{N/fo}_{io} L^{M/fi}_{jo} K^{fo}_{i} K^{fi}_{j}`` with
    ``i -> io*fo+i`` and ``j -> jo*fi+j`` in the body: the outer (tile) loops are fresh and
    serial, the inner (point) loops keep name and kind, as in ``loop_split``. Factors must
    divide the extents (no guarded tails are generated) and lie strictly between 1 and the
    extent. Iterations that differ in both ``i`` and ``j`` may change order, so any
    dependence between such iterations is rejected, except the accumulator of a pure
    reduction over both loops, which is reassociated (exact in reals for ``+``/``*``,
    bitwise for ``max``/``min``; see :meth:`numerics_for`). Otherwise bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}
    Args: loop=N0.i factor_outer=2 factor_inner=4
    After: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{2}_{io=0}L^{2}_{jo=0}L^{2}_{i=0}L^{4}_{j=0}[C^{f32,g}_{io*2+i,jo*4+j}=A^{f32,g}_{io*2+i,jo*4+j}*2;];}
    """

    def sites(self, ctx):
        out = []
        for ref, lp, path in ctx.loops():
            if len(lp.body) != 1 or not isinstance(lp.body[0], A.Loop):
                continue
            inner = lp.body[0]
            if lp.start or inner.start:
                continue
            d1, d2 = _divisors(lp.extent, limit=4), _divisors(inner.extent, limit=4)
            if not d1 or not d2:
                continue
            try:
                self._legal(ctx, lp, inner)
                if not _all_serial((lp, inner)):
                    _check_candidate(self, self._rewrite(ctx, lp, inner, path, d1[0], d2[0]), lp)
            except NotApplicable:
                continue
            out.append(Site(self.name, {"loop": ref}, {"factor_outer": d1, "factor_inner": d2},
                            f"tile {lp.var} ({lp.extent}) x {inner.var} ({inner.extent})"))
        return out

    def _pair(self, ctx, args):
        lp, path = _loop_arg(self, ctx, args["loop"])
        if len(lp.body) != 1 or not isinstance(lp.body[0], A.Loop):
            raise self.na(f"loop '{lp.var}' does not directly contain exactly one loop", lp)
        inner = lp.body[0]
        for l, f, name in ((lp, args["factor_outer"], "factor_outer"), (inner, args["factor_inner"], "factor_inner")):
            if l.start != 0:
                raise self.na(f"loop '{l.var}' starts at {l.start}; only loops starting at 0 are tiled", l)
            if f <= 1 or f >= l.extent:
                raise self.na(f"{name} {f} must be between 2 and {l.extent - 1} (extent of '{l.var}')", l)
            if l.extent % f:
                raise self.na(f"{name} {f} does not divide extent {l.extent} of '{l.var}' (guarded tails are not generated)", l)
        return lp, inner, path

    def _legal(self, ctx, lp, inner):
        pair = {lp.var, inner.var}

        def reverses(rel):
            # only instances ordered one way in the outer loop and the other way in the inner
            # loop can land in tiles that run in the opposite order
            a, b = rel.get(lp.var, "*"), rel.get(inner.var, "*")
            if "*" in (a, b):
                return True
            return {a, b} == {LT, GT}

        return _order_violation(self, ctx, lp, [lp.var, inner.var], lambda F: pair <= F, reverses)

    def _rewrite(self, ctx, lp, inner, path, f1, f2):
        o1 = fresh_index(ctx.kernel, lp.var + "o")
        o2 = fresh_index(ctx.kernel, inner.var + "o", {o1})
        sub = {lp.var: add(mul(var(o1), A.Const(f1)), var(lp.var)),
               inner.var: add(mul(var(o2), A.Const(f2)), var(inner.var))}
        body = tuple(substitute(b, sub) for b in inner.body)
        loops = [A.Loop("L", lp.extent // f1, o1, 0, ()), A.Loop("L", inner.extent // f2, o2, 0, ()),
                 replace(lp, extent=f1, span=None), replace(inner, extent=f2, span=None)]
        return replace_at(ctx.kernel, path, _rebuild_chain(loops, body))

    def plan(self, ctx, args):
        lp, inner, path = self._pair(ctx, args)
        ops = self._legal(ctx, lp, inner)
        new = self._rewrite(ctx, lp, inner, path, args["factor_outer"], args["factor_inner"])
        if not _all_serial((lp, inner)):
            _recheck_candidate(self, ctx, new, lp)
        chain = [path + (0,) * k for k in range(4)]
        refs = refs_at(new, chain)
        moved = {}
        for j, b in enumerate(inner.body):
            moved.update(carried(b, path + (0, j), chain[-1] + (j,)))
        roles = ("outer_tile", "inner_tile", "outer_point", "inner_point")
        return Rewrite(new, _reassoc_numerics(ops), {r: refs[p] for r, p in zip(roles, chain)}, moved=moved)


# ---------------------------------------------------------------------------
# loop_fusion


def _fuse_expr(e, outer: str, inner: str, m: int):
    """Rewrite ``outer*m+inner`` to ``inner`` (the fused index); every other use of
    ``outer`` becomes ``inner//m`` and of ``inner`` becomes ``inner%m``."""
    tmp = "\0fused"  # never a parsed name: keeps folded uses apart from the substitution

    def pattern(x):
        if isinstance(x, A.BinOp) and x.op == "+" and x.rhs == A.Var(inner):
            l = x.lhs
            if isinstance(l, A.BinOp) and l.op == "*" and (
                    (l.lhs == A.Var(outer) and l.rhs == A.Const(m)) or (l.rhs == A.Var(outer) and l.lhs == A.Const(m))):
                return A.Var(tmp)
        return x

    e = map_expr(e, pattern)
    e = substitute(e, {outer: A.BinOp("//", A.Var(tmp), A.Const(m)), inner: A.BinOp("%", A.Var(tmp), A.Const(m))})
    return substitute(e, {tmp: A.Var(inner)})


@strategy("loop_fusion", level="operator", numerics="bitwise", creates=("fused",),
          args=[Arg("loop", "loop", "outer serial loop whose body is exactly one loop, e.g. N0.io")])
class LoopFusion(Strategy):
    """Fuse two directly nested loops into one (the inverse of ``loop_split``).

    ``L^{N}_{o} K^{M}_{i}`` (nothing else in the outer body) becomes ``K^{N*M}_{i}`` with
    ``o -> i//M`` and ``i -> i%M``; the split pattern ``o*M+i`` is folded back to ``i``, so
    ``loop_split`` followed by ``loop_fusion`` restores the program. The fused loop keeps the
    inner loop's name and kind; the outer loop must be serial (its kind would be lost) and
    both must start at 0. A reduction inside may not be reduced over one of the two loops
    and indexed by the other: the fused index would appear in its target, turning the
    reduction loop into a spatial one and moving its identity initialization. Iterations
    run in exactly the same order, so the rewrite is bitwise; for a non-serial inner loop
    the checker decides whether the longer loop is legal (thread, vector-lane and race
    limits).

    Before: \\kernel k(A:f32[8])->(C:f32[8]){L^{2}_{io=0}L^{4}_{i=0}[C^{f32,g}_{io*4+i}=A^{f32,g}_{io*4+i}*2;];}
    Args: loop=N0.io
    After: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2;];}
    """

    def sites(self, ctx):
        out = []
        for ref, lp, path in ctx.loops():
            if len(lp.body) != 1 or not isinstance(lp.body[0], A.Loop):
                continue
            inner = lp.body[0]
            try:
                self._pair(ctx, {"loop": ref})
            except NotApplicable:
                continue
            if inner.kind != "L" or any(isinstance(n, A.Call) and n.func == "if_then_else" for n in A.walk(inner)):
                try:
                    _check_candidate(self, self._rewrite(ctx, lp, inner, path), lp)
                except NotApplicable:
                    continue
            out.append(Site(self.name, {"loop": ref}, {}, f"fuse {lp.var} ({lp.extent}) and {inner.var} ({inner.extent})"))
        return out

    def _pair(self, ctx, args):
        lp, path = _loop_arg(self, ctx, args["loop"])
        if len(lp.body) != 1 or not isinstance(lp.body[0], A.Loop):
            raise self.na(f"the body of loop '{lp.var}' is not exactly one loop (other items sit between the loops)", lp)
        inner = lp.body[0]
        if lp.kind != "L":
            raise self.na(f"outer loop '{lp.var}' is {A.LOOP_KIND_NAMES[lp.kind]}; only a serial outer loop is fused", lp)
        for l in (lp, inner):
            if l.start != 0:
                raise self.na(f"loop '{l.var}' starts at {l.start}; only loops starting at 0 are fused", l)
        for si in _inside(ctx, inner):
            if si.kind == "reduce" and (lp.var in si.reduce_vars) != (inner.var in si.reduce_vars):
                red, spat = (lp, inner) if lp.var in si.reduce_vars else (inner, lp)
                raise self.na(f"'{si.stmt.target.name}' is reduced over '{red.var}' but indexed by '{spat.var}'; the fused "
                              f"loop would be both (and move the reduction's initialization)", lp)
        return lp, inner, path

    def _rewrite(self, ctx, lp, inner, path):
        body = tuple(_fuse_expr(b, lp.var, inner.var, inner.extent) for b in inner.body)
        return replace_at(ctx.kernel, path, replace(inner, extent=lp.extent * inner.extent, body=body, span=None))

    def plan(self, ctx, args):
        lp, inner, path = self._pair(ctx, args)
        new = self._rewrite(ctx, lp, inner, path)
        _recheck_candidate(self, ctx, new, lp)
        moved = {path + (0,): path}
        for j, b in enumerate(inner.body):
            moved.update(carried(b, path + (0, j), path + (j,)))
        return Rewrite(new, self.numerics, {"fused": ref_at(new, path)}, moved=moved)


# ---------------------------------------------------------------------------
# loop_unrolling, loop_vectorization


MAX_UNROLL = 64


@strategy("loop_unrolling", level="operator", numerics="bitwise",
          args=[Arg("loop", "loop", f"serial loop of at most {MAX_UNROLL} iterations to unroll")])
class LoopUnrolling(_KindChange):
    """Unroll a serial loop completely (``L`` -> ``U``).

    ``U`` lowers to ``T.unroll``, which unrolls the whole loop, so the extent is limited to
    64 iterations (split a longer loop first and unroll the inner part). Unrolling changes
    neither the iterations nor their order: always legal and bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}
    Args: loop=N0.j
    After: \\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}U^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}
    """

    to_kind = "U"
    max_extent = MAX_UNROLL

    def _admissible(self, ctx, lp, path):
        return True  # the checker has no rule for U loops beyond what L loops satisfy


@strategy("loop_vectorization", level="operator", numerics="bitwise",
          args=[Arg("loop", "loop", f"innermost serial loop of at most {MAX_VECTOR_LANES} iterations without dependences")])
class LoopVectorization(_KindChange):
    """Vectorize an innermost loop (``L`` -> ``V``).

    Only an innermost loop (its body holds statements only) of at most 64 iterations (the
    checker's lane limit; split first) whose iterations are independent (no reduction, scan
    or update carried by it, as decided by the checker's dependence test) is vectorized. The
    lanes compute exactly what the serial iterations computed: bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}
    Args: loop=N0.j
    After: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}V^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}
    """

    to_kind = "V"
    max_extent = MAX_VECTOR_LANES

    def _precheck(self, ctx, lp):
        if any(not isinstance(b, A.Assign) for b in lp.body):
            raise self.na(f"loop '{lp.var}' is not innermost (its body contains loops or regions)", lp)

    def _admissible(self, ctx, lp, path):
        return _races_free(ctx, lp)


# ---------------------------------------------------------------------------
# loop_binding

AXES = ("tx", "ty", "tz", "bx", "by", "bz")


def _thread_depth(items) -> int:
    """Largest product of thread-bound extents along any path through ``items``."""
    best = 1
    for it in items:
        if isinstance(it, (A.Loop, A.Region)):
            f = 1
            if isinstance(it, A.Loop) and it.kind == "B":
                ax = binding_axis(it.var)
                if ax is not None and ax[0] == "thread":
                    f = it.extent
            best = max(best, f * _thread_depth(it.body))
    return best


@strategy("loop_binding", level="operator", numerics="bitwise", creates=("bound",),
          args=[Arg("loop", "loop", "serial loop to bind to a hardware axis"),
                Arg("axis", "choice", "thread (tx, ty, tz) or block (bx, by, bz) axis", choices=AXES)])
class LoopBinding(Strategy):
    """Bind a serial loop to a GPU thread or block axis (``L`` -> ``B``).

    The hardware axis is encoded in the index name, so the loop's index is renamed to the
    axis prefix followed by the old name (``a`` bound to ``bz`` becomes ``bza``) and every use
    in the body is substituted. The checker's rules decide legality: the axis must not be
    bound already on the same path, extents must respect the CUDA limits (threads per block
    included), and the iterations must be independent, except a reduction across the bound
    loop (cross-thread reduction), which the checker allows. Binding a reduction loop
    reassociates a ``+``/``*`` accumulation (exact in reals, see :meth:`numerics_for`);
    everything else is bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];}
    Args: loop=N0.j axis=tx
    After: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}B^{8}_{txj=0}[C^{f32,g}_{i,txj}=A^{f32,g}_{i,txj}*2;];}
    """

    def _reason(self, ctx, lp, path, axis):
        """Why binding ``lp`` to ``axis`` is illegal (the checker's rules), or None."""
        if lp.kind != "L":
            return f"loop '{lp.var}' is {A.LOOP_KIND_NAMES[lp.kind]}, not serial"
        return self._geometry(ctx, lp, path, axis) or self._race(ctx, lp)

    def _geometry(self, ctx, lp, path, axis):
        kind = "thread" if axis[0] == "t" else "block"
        key = (kind, axis[1])
        enclosing = [l for l in _enclosing(ctx.kernel, path) if l.kind == "B"]
        nested = [n for n in _loops_under(lp.body) if n.kind == "B"]
        for l in enclosing + nested:
            if binding_axis(l.var) == key:
                return f"{kind}Idx.{axis[1]} is already bound by loop '{l.var}'"
        limit = (THREAD_LIMITS if kind == "thread" else BLOCK_LIMITS)[axis[1]]
        if lp.extent > limit:
            return f"{kind}Idx.{axis[1]} extent {lp.extent} exceeds the CUDA limit {limit}"
        if kind == "thread":
            threads = lp.extent * _thread_depth(lp.body)
            for l in enclosing:
                ax = binding_axis(l.var)
                if ax is not None and ax[0] == "thread":
                    threads *= l.extent
            if threads > MAX_THREADS_PER_BLOCK:
                return f"{threads} threads per block would exceed the CUDA limit {MAX_THREADS_PER_BLOCK}"
            shared = _locals_from_outside(ctx.kernel, lp)
            if shared:
                # E048: local memory belongs to one thread; a tile allocated around the loop
                # would be shared by the threads the binding creates
                return (f"local tensor '{shared[0]}' is allocated outside loop '{lp.var}': binding it to threads "
                        "would share one thread's local memory")
        return None

    def _race(self, ctx, lp):
        if lp.extent > 1:
            inside = _inside(ctx, lp)
            c = find_conflict(lp, inside)
            if c is not None:
                si, msg = c
                if not (si.kind == "reduce" and lp.var in si.reduce_vars and only_self_conflicts(lp, inside, si)):
                    return f"loop '{lp.var}' carries a dependence: {msg}"
        return None

    def sites(self, ctx):
        out = []
        for ref, lp, path in ctx.loops():
            if lp.kind != "L":
                continue
            if self._race(ctx, lp) is not None:
                continue
            axes = [a for a in AXES if self._geometry(ctx, lp, path, a) is None]
            if axes:
                out.append(Site(self.name, {"loop": ref}, {"axis": axes}, f"bind {lp.var} ({lp.extent})"))
        return out

    def _candidate(self, ctx, lp, path, axis):
        new = fresh_index(ctx.kernel, axis + lp.var)
        body = tuple(substitute(b, {lp.var: A.Var(new)}) for b in lp.body)
        return replace_at(ctx.kernel, path, replace(lp, kind="B", var=new, body=body))

    def plan(self, ctx, args):
        lp, path = _loop_arg(self, ctx, args["loop"])
        why = self._reason(ctx, lp, path, args["axis"])
        if why is not None:
            raise self.na(why, lp)
        ops = {si.op for si in _inside(ctx, lp) if si.kind == "reduce" and lp.var in si.reduce_vars}
        new = self._candidate(ctx, lp, path, args["axis"])
        # the binding is legal by the checker's own rules (above): the engine re-checks once
        return Rewrite(new, _reassoc_numerics(ops), {"bound": ref_at(new, path)}, moved=carried(lp, path, path))


def _locals_from_outside(kernel, lp) -> list[str]:
    """Private ``l`` tensors used under ``lp`` but allocated outside it (sorted)."""
    private = {n.name for n in A.walk(kernel) if isinstance(n, A.Alloc) and n.scope == "l"}
    if not private:
        return []
    inside_allocs = {n.name for b in lp.body for n in A.walk(b) if isinstance(n, A.Alloc)}
    used = {n.name for b in lp.body for n in A.walk(b) if isinstance(n, A.Access) and n.name in private}
    return sorted(used - inside_allocs)


def _enclosing(kernel, path) -> list[A.Loop]:
    out, node = [], kernel
    for i in path[:-1]:
        node = node.body[i]
        if isinstance(node, A.Loop):
            out.append(node)
    return out


# ---------------------------------------------------------------------------
# reduction_factorization


def _combine(op: str, a: A.Expr, b: A.Expr) -> A.Expr:
    if op in ("max", "min"):
        return A.Call(op, (a, b))
    return A.BinOp(op, a, b)


@strategy("reduction_factorization", level="operator", numerics="exact-in-reals", creates=("first:tensor", "second:tensor"),
          args=[Arg("loop", "loop", "reduction loop of a single-statement reduction nest, e.g. N0.k"),
                Arg("split", "int", "iterations [0, split) feed the first partial result, [split, extent) the second")])
class ReductionFactorization(Strategy):
    """Split a reduction into two partial reductions combined afterwards (rfactor).

    The nest must hold a single reduction statement ``X = X op e`` (``op`` one of ``+ *
    max min``; ``X`` not written before, so it starts from the identity) and ``loop`` must be
    one of its reduction loops. The nest is copied twice: the first copy accumulates
    iterations ``[0, split)`` of ``loop`` into a fresh intermediate ``P1``, the second
    iterations ``[split, extent)`` (index shifted by ``split``) into ``P2``; a third nest over
    the remaining spatial loops computes ``X = X op (P1 op P2)``. The partials have ``X``'s
    dtype, scope and subscripts. Sums and products are reassociated (exact in reals); ``max``
    and ``min`` are bitwise (see :meth:`numerics_for`).

    Before: \\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}
    Args: loop=N0.j split=6
    After: \\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}L^{6}_{j=0}[D^{f32,g}_{i}=D^{f32,g}_{i}+A^{f32,g}_{i,j};];L^{4}_{i=0}L^{2}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+A^{f32,g}_{i,j+6};];L^{4}_{i=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+(D^{f32,g}_{i}+E^{f32,g}_{i});];}
    """

    OPS = ("+", "*", "max", "min")

    def _target(self, ctx, lp, path, strict=True):
        item = ctx.kernel.body[path[0]]
        stmts = [n for n in A.walk(item) if isinstance(n, A.Assign)]
        if len(stmts) != 1:
            raise self.na(f"nest N{path[0]} holds {len(stmts)} statements; only a single-statement nest is factorized", lp)
        si = ctx.result.info(stmts[0])
        x = si.stmt.target.name
        if si.kind != "reduce":
            raise self.na(f"'{x}' in N{path[0]} is not a reduction (statement kind: {si.kind})", lp)
        if si.op not in self.OPS or si.operand is None:
            raise self.na(f"the reduction into '{x}' is not X = X op e with op one of + * max min", lp)
        if lp.var not in si.reduce_vars or not any(l is lp for l in si.loops):
            raise self.na(f"loop '{lp.var}' is not a reduction loop of '{x}' (reduction loops: {', '.join(si.reduce_vars)})", lp)
        if lp.start != 0:
            raise self.na(f"loop '{lp.var}' starts at {lp.start}; only loops starting at 0 are factorized", lp)
        why = reassociation_overflow(si, si.stmt.target)
        if why:
            raise self.na(why, lp)
        return si

    def sites(self, ctx):
        out = []
        for ref, lp, path in ctx.loops():
            if lp.extent < 2:
                continue
            try:
                si = self._target(ctx, lp, path)
            except NotApplicable:
                continue
            n = lp.extent
            splits = sorted({p for p in (n // 4, n // 2, 3 * n // 4) if 0 < p < n})
            if not _all_serial(si.loops) or si.stmt.target.scope == "s":
                try:
                    _check_candidate(self, self._rewrite(ctx, lp, path, si, splits[0])[0], lp)
                except NotApplicable:
                    continue
            out.append(Site(self.name, {"loop": ref}, {"split": splits}, f"rfactor {si.stmt.target.name} over {lp.var} ({n})"))
        return out

    def _rewrite(self, ctx, lp, path, si, split):
        item = ctx.kernel.body[path[0]]
        x = si.stmt.target
        p1 = fresh_tensor(ctx.kernel)
        p2 = fresh_tensor(ctx.kernel, {p1})
        sub = path[1:]

        def part(name, extent, shift):
            body = lp.body if shift == 0 else tuple(substitute(b, {lp.var: add(A.Var(lp.var), A.Const(shift))}) for b in lp.body)
            node = replace(lp, extent=extent, body=body)
            nest = _replace_in(item, sub, node) if sub else node
            return rename_tensor(nest, x.name, name)

        acc = lambda name: replace(x, name=name, span=None)  # noqa: E731
        stmt = A.Assign(replace(x, span=None), _combine(si.op, replace(x, span=None), _combine(si.op, acc(p1), acc(p2))))
        spatial = [replace(l, span=None) for l in si.loops if l.var not in si.reduce_vars]
        combine = _rebuild_chain(spatial, (stmt,)) if spatial else stmt
        new_items = [part(p1, split, 0), part(p2, lp.extent - split, split), combine]
        return replace_at(ctx.kernel, (path[0],), new_items), p1, p2

    def plan(self, ctx, args):
        lp, path = _loop_arg(self, ctx, args["loop"])
        si = self._target(ctx, lp, path)
        s = args["split"]
        if not 0 < s < lp.extent:
            raise self.na(f"split {s} must be between 1 and {lp.extent - 1} (extent of '{lp.var}')", lp)
        new, p1, p2 = self._rewrite(ctx, lp, path, si, s)
        if not _all_serial(si.loops) or si.stmt.target.scope == "s":
            _recheck_candidate(self, ctx, new, lp)
        return Rewrite(new, _reassoc_numerics({si.op}), {"first": p1, "second": p2})


def _replace_in(node, sub_path, new):
    """``node`` with the item at the relative ``sub_path`` replaced by ``new``."""
    i = sub_path[0]
    body = list(node.body)
    body[i] = new if len(sub_path) == 1 else _replace_in(body[i], sub_path[1:], new)
    return replace(node, body=tuple(body))


# ---------------------------------------------------------------------------
# precompute_indices


def _composite(e: A.Expr) -> bool:
    return isinstance(e, (A.BinOp, A.Neg, A.Call)) and not any(isinstance(n, A.Access) for n in A.walk(e))


@strategy("precompute_indices", level="operator", numerics="bitwise", creates=("index:tensor",),
          args=[Arg("stmt", "stmt", "statement whose read subscript is materialized, e.g. N1.S0"),
                Arg("tensor", "tensor", "tensor read by the statement (not its target)"),
                Arg("dim", "int", "0-based dimension of that tensor's subscript")])
class PrecomputeIndices(Strategy):
    """Materialize a composite read subscript into an ``i64`` index tensor.

    The subscript ``e`` in dimension ``dim`` of the reads of ``tensor`` in ``stmt`` (an
    arithmetic expression of loop indices such as ``c+128`` or ``i+p``; every read of
    ``tensor`` there must use the same expression in that dimension) is computed once by a
    new nest placed before the statement's nest, over the enclosing loops whose indices
    ``e`` uses (same kinds and extents): ``Ar^{i64,g}_{c} = c+128;``. The reads become
    indirect, ``X_{..., Ar^{i64,g}_{c}, ...}``. Integer index arithmetic is exact, so the
    values read are the same: bitwise. The statement's target is never rewritten (an
    indirect store would make the inferred shape unknown). Indirect subscripts are
    bounds-checked at run time (checker warning W014).

    Before: \\kernel k(A:f32[12])->(C:f32[8]){L^{8}_{c=0}[C^{f32,g}_{c}=A^{f32,g}_{c+4};];}
    Args: stmt=N0.S0 tensor=A dim=0
    After: \\kernel k(A:f32[12])->(C:f32[8]){L^{8}_{c=0}[D^{i64,g}_{c}=c+4;];L^{8}_{c=0}[C^{f32,g}_{c}=A^{f32,g}_{D^{i64,g}_{c}};];}
    """

    def _subscript(self, ctx, st, tensor, dim):
        if st.target.name == tensor:
            raise self.na(f"'{tensor}' is the target of the statement; only read subscripts are precomputed", st)
        reads = [a for a in A.walk(st.value) if isinstance(a, A.Access) and a.name == tensor]
        if not reads:
            raise self.na(f"the statement does not read '{tensor}'", st)
        if not 0 <= dim < len(reads[0].indices):
            raise self.na(f"'{tensor}' has {len(reads[0].indices)} dimension(s); dim {dim} is out of range", st)
        exprs = []
        for a in reads:
            if a.indices[dim] not in exprs:
                exprs.append(a.indices[dim])
        if len(exprs) > 1:
            raise self.na(f"the reads of '{tensor}' use different subscripts in dimension {dim}", st)
        e = exprs[0]
        if not _composite(e):
            raise self.na(f"subscript {dim} of '{tensor}' is not a composite index expression", st)
        return e

    def _rewrite(self, ctx, st, path, tensor, dim, e):
        si = ctx.result.info(st)
        used = {n.name for n in A.walk(e) if isinstance(n, A.Var)}
        loops = [replace(l, span=None) for l in si.loops if l.var in used]
        name = fresh_tensor(ctx.kernel)
        idx = A.Access(name, "i64", "g", tuple(A.Var(l.var) for l in loops))
        init = A.Assign(idx, e)
        nest = _rebuild_chain(loops, (init,)) if loops else init

        def fn(x):
            if isinstance(x, A.Access) and x.name == tensor and len(x.indices) > dim and x.indices[dim] == e:
                ix = list(x.indices)
                ix[dim] = idx
                return replace(x, indices=tuple(ix))
            return x

        new_st = replace(st, value=map_expr(st.value, fn))
        k = replace_at(ctx.kernel, path, new_st)
        return replace_at(k, (path[0],), [nest, k.body[path[0]]]), name

    def sites(self, ctx):
        out = []
        for ref, st, path in ctx.stmts():
            si = ctx.result.info(st)
            seen = set()
            for a in A.walk(st.value):
                if not isinstance(a, A.Access) or a.name == st.target.name:
                    continue
                for d in range(len(a.indices)):
                    if (a.name, d) in seen:
                        continue
                    seen.add((a.name, d))
                    try:
                        e = self._subscript(ctx, st, a.name, d)
                        if not _all_serial(si.loops):
                            _check_candidate(self, self._rewrite(ctx, st, path, a.name, d, e)[0], st)
                    except NotApplicable:
                        continue
                    out.append(Site(self.name, {"stmt": ref, "tensor": a.name, "dim": d}, {},
                                    f"precompute subscript {d} of {a.name} in {ref}"))
        return out

    def plan(self, ctx, args):
        st, path = _stmt_arg(self, ctx, args["stmt"])
        e = self._subscript(ctx, st, args["tensor"], args["dim"])
        new, name = self._rewrite(ctx, st, path, args["tensor"], args["dim"], e)
        if not _all_serial(ctx.result.info(st).loops):
            _recheck_candidate(self, ctx, new, st)
        return Rewrite(new, self.numerics, {"index": name})
