"""Blocking strategies for CPU kernels (issue #12): unroll-and-jam, packing, padding and masking of inputs.

* ``unroll_and_jam``: unroll an outer loop by a factor and jam the copies into the body of
  a loop inside it (register blocking of a GEMM's ``i``: one loaded ``B`` element feeds
  several accumulators);
* ``pack_input``: copy a tensor into a blocked layout (``B_{k,j}`` -> ``P_{j//jb,k,j%jb}``)
  in a nest hoisted before the hot nest, which then reads the packed copy;
* ``pad_input`` and ``mask_input``: copy an input read under a guard (a convolution's zero
  padding; a triangle ``i <= k``) once, padded or masked, so the hot loop's reads are plain;
* ``distribute_guard``: split a guarded product's guard onto its factors, so that each
  factor is a guarded read ``mask_input`` can hoist (exact in the reals: ``0*y`` is ``-0.0``
  for a negative ``y``).

The others only reorder or copy: the same floating-point operations run on every element in
the same order, so they are bitwise. ``layout_transformation`` already copies an input into a
transposed or split layout, but one kind per application and through a full copy each: the
blocked layout (split one dimension, move the block number first and the offset last) would
take two copies and two hoisted nests. ``pack_input`` is that layout in one copy.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..analysis.deps import EQ, direction_vectors, privatized
from ..lang import ast as A
from ..lang.affine import affine
from ..lang.printer import print_expr
from .base import Arg, Context, NotApplicable, Rewrite, Site, Strategy, StrategyBug, strategy
from .common import divisors, loop_arg, rebuild_chain, stmt_arg, stmts_under
from .rewrite import add, carried, fresh_index, fresh_tensor, loop_ref, map_expr, mul, nest_chain, refs_at, replace_at
from .rewrite import get_at, substitute, var

#: copies of a loop body a jam may create: the bound of ``loop_unrolling`` (a ``U`` loop lowers to
#: full unrolling; more copies only grow the code, they no longer fit a register file anyway)
MAX_JAM = 64
#: ``into`` value meaning "the innermost loop of the chain that is not vectorized"
INNERMOST = "innermost"


def _accesses(st: A.Assign) -> list[tuple[A.Access, bool]]:
    """(access, is_write) of one statement: its target, then every read (subscripts included)."""
    out = [(st.target, True)]
    for e in (st.value,) + tuple(st.target.indices):
        out.extend((n, False) for n in A.walk(e) if isinstance(n, A.Access))
    return out


def _first_difference(rel: dict, order: list[str]):
    return next((rel[v] for v in order if rel.get(v, EQ) != EQ), None)


@strategy("unroll_and_jam", level="operator", numerics="bitwise", creates=("outer", "unrolled"),
          args=[Arg("loop", "loop", "serial or parallel loop to unroll, e.g. N0.i"),
                Arg("factor", "int", f"copies of the body per iteration of the new outer loop (divides the extent, "
                                     f"at most {MAX_JAM})"),
                Arg("into", "loop", "loop of the perfect chain inside `loop` whose body receives the copies "
                                    f"({INNERMOST}: the innermost loop of that chain that is not vectorized)",
                    default=INNERMOST)])
class UnrollAndJam(Strategy):
    """Unroll a loop by ``factor`` and jam the copies into the body of a loop inside it.

    ``loop`` ``K^{N}_{i}`` (serial or parallel, from 0) must head a perfect chain
    ``l1 ... lm`` (each body a single loop) and ``into`` must be one of ``l1 ... lm`` that is
    not a vector loop. The loop becomes ``K^{N/factor}_{io}`` (fresh name, same kind) and the
    body of ``into`` is wrapped in ``U^{factor}_{i}`` with ``i -> io*factor + i``: every
    iteration of ``io`` runs the loops ``l1 ... into`` once and, inside ``into``, the
    ``factor`` copies of its body back to back (``U`` loops lower to ``T.unroll``, so the
    compiled code holds the copies). In a GEMM ``L_i L_k L_j``, jamming ``i`` into ``k`` gives
    ``factor`` accumulators per loaded ``B_{k,j}``; the ``j`` loop stays innermost and can be
    vectorized. The copies stay one statement under a ``U`` loop instead of being written
    out: textual copies of a reduction would be several statements into one tensor, and all
    but the first would be updates without the identity initialization (docs/language.md §6).

    Legality: the rewrite is ``i`` split by ``factor`` with the point loop moved inside
    ``l1 ... into``. For every pair of accesses to one tensor (at least one a write) under
    the loop, the shared dependence analysis (:mod:`leirc.analysis.deps`) gives the
    direction vectors over ``(i, l1 ... into)`` with ``io`` equal under which the two touch
    the same element; the jam is refused if one of them runs in the opposite order after the
    interchange. Every element then sees the same operations in the same order: bitwise.

    Before: \\kernel k(A:f32[4,8],B:f32[8,16])->(C:f32[4,16]){L^{4}_{i=0}L^{8}_{k=0}L^{16}_{j=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}
    Args: loop=N0.i factor=2 into=N0.k
    After: \\kernel k(A:f32[4,8],B:f32[8,16])->(C:f32[4,16]){L^{2}_{io=0}L^{8}_{k=0}U^{2}_{i=0}L^{16}_{j=0}[C^{f32,g}_{io*2+i,j}=C^{f32,g}_{io*2+i,j}+A^{f32,g}_{io*2+i,k}*B^{f32,g}_{k,j};];}
    """

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        for ref, lp, path in ctx.loops():
            if lp.kind not in ("L", "P") or lp.start != 0 or lp.extent < 2:
                continue
            for into in [l for l in nest_chain(lp)[1:] if l.kind != "V"]:
                iref = loop_ref(ctx.kernel, into)
                what = f"unroll {lp.var} ({lp.extent}) and jam into {into.var}"
                site = self.site(ctx, {"loop": ref, "into": iref}, what,
                                 lambda ref=ref, iref=iref, lp=lp: {"factor": self._factors(ctx, ref, iref, lp)})
                if site is not None:
                    out.append(site)
        return out

    def _factors(self, ctx, ref, iref, lp) -> list[int]:
        ok = []
        for f in [d for d in divisors(lp.extent, limit=4) if d <= MAX_JAM]:
            try:
                self._plan(ctx, {"loop": ref, "factor": f, "into": iref}, full=False)
            except NotApplicable:
                continue
            ok.append(f)
        return ok

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        return self._plan(ctx, args, full=True)

    def _plan(self, ctx: Context, args: dict, full: bool):
        lp, path = loop_arg(self, ctx, args["loop"])
        f = args["factor"]
        if lp.kind not in ("L", "P"):
            raise self.na(f"loop '{lp.var}' is {A.LOOP_KIND_NAMES[lp.kind]}; only serial and parallel loops are "
                          f"unrolled and jammed", lp)
        if lp.start != 0:
            raise self.na(f"loop '{lp.var}' starts at {lp.start}; only loops starting at 0 are unrolled and jammed", lp)
        if not 2 <= f <= min(lp.extent, MAX_JAM) or lp.extent % f:
            raise self.na(f"factor {f} must divide the {lp.extent} iterations of '{lp.var}' and lie in "
                          f"2..{min(lp.extent, MAX_JAM)} (no guarded tails are generated)", lp)
        chain = nest_chain(lp)[1:]
        if not chain:
            raise self.na(f"the body of loop '{lp.var}' is not a single loop: there is no loop to jam the copies into "
                          f"(loop_split + loop_unrolling unroll it without a jam)", lp)
        if args["into"] == INNERMOST:
            plain = [l for l in chain if l.kind != "V"]
            if not plain:
                raise self.na(f"every loop inside '{lp.var}' is a vector loop; copies cannot go inside one", lp)
            into = plain[-1]
        else:
            into, _ = loop_arg(self, ctx, args["into"])
            if not any(l is into for l in chain):
                names = ", ".join(l.var for l in chain)
                raise self.na(f"loop '{into.var}' is not in the perfect chain inside '{lp.var}' ({names})", into)
            if into.kind == "V":
                raise self.na(f"loop '{into.var}' is a vector loop; its body must stay statements only", into)
        jam = chain[:next(k for k, l in enumerate(chain) if l is into) + 1]
        io_name = fresh_index(ctx.kernel, lp.var + "o")
        self._legal(ctx, lp, f, jam, io_name)
        if not full:
            if any(l.kind != "L" for l in jam):
                # a parallel or vector loop around the copies races if the copies touch one element
                ctx.recheck(self.name, self._rewrite(ctx, lp, path, f, jam, io_name), lp)
            return None
        new = self._rewrite(ctx, lp, path, f, jam, io_name)
        res = ctx.recheck(self.name, new, lp, message="the jammed program would not check: {code} {message}")
        if [si.kind for si in res.stmts] != [si.kind for si in ctx.result.stmts]:
            raise StrategyBug(f"{self.name}: jamming '{lp.var}' changed a statement's kind")
        depth = len(jam) + 1
        refs = refs_at(new, [path, path + (0,) * depth])
        moved = {path + (0,) * k: path + (0,) * k for k in range(1, depth)}
        below = path + (0,) * (depth - 1)
        for j, b in enumerate(jam[-1].body):  # the body of `into`, substituted, one level deeper
            moved.update(carried(b, below + (j,), below + (0, j)))
        return Rewrite(new, "bitwise", {"outer": refs[path], "unrolled": refs[path + (0,) * depth]}, moved=moved)

    def _legal(self, ctx, lp, f, jam, io_name) -> None:
        """NotApplicable if moving the point loop of ``lp`` (split by ``f``) inside ``jam``
        reverses a dependence between two instances of one ``io`` iteration."""
        io = A.Loop(lp.kind, lp.extent // f, io_name, 0, ())
        ii = A.Loop("L", f, lp.var, 0, ())
        split = {lp.var: add(mul(var(io_name), A.Const(f)), var(lp.var))}
        inside = [si for si in ctx.result.stmts if any(l is lp for l in si.loops)]
        # each statement as it reads in the split program: loops outer + io, ii + inner
        model = []
        for si in inside:
            k = next(n for n, l in enumerate(si.loops) if l is lp)
            loops = tuple(si.loops[:k]) + (io, ii) + tuple(si.loops[k + 1:])
            accs = [(substitute(privatized(si, a), split), w) for a, w in _accesses(si.stmt)]
            model.append((si, si.loops[:k], loops, accs))
        old = [lp.var] + [l.var for l in jam]
        new = [l.var for l in jam] + [lp.var]
        pairs = [(ii, ii)] + [(l, l) for l in jam]
        for si1, outer, loops1, accs1 in model:
            for si2, _, loops2, accs2 in model:
                for w, _ in (x for x in accs1 if x[1]):
                    for r, r_write in accs2:
                        if r.name != w.name:
                            continue
                        fixed = [(o, o, EQ) for o in outer] + [(io, io, EQ)]
                        for vec in sorted(direction_vectors(w, loops1, r, loops2, pairs, fixed)):
                            rel = dict(zip(old, vec))
                            if _first_difference(rel, old) != _first_difference(rel, new):
                                what = "written" if r_write else "read"
                                raise self.na(
                                    f"'{w.name}' is written in one iteration and {what} in another that differs in "
                                    f"'{lp.var}' and in {', '.join(repr(l.var) for l in jam if rel[l.var] != EQ)}; "
                                    f"the jam would run them in the opposite order", lp)

    def _rewrite(self, ctx, lp, path, f, jam, io_name) -> A.Kernel:
        into = jam[-1]
        split = {lp.var: add(mul(var(io_name), A.Const(f)), var(lp.var))}
        copies = A.Loop("U", f, lp.var, 0, tuple(substitute(b, split) for b in into.body))
        root = A.Loop(lp.kind, lp.extent // f, io_name, 0, ())
        return replace_at(ctx.kernel, path, rebuild_chain([root] + jam, (copies,)))


# ---------------------------------------------------------------------------
# pack_input


def _affine_expr(terms: list[tuple[str, int]], const: int) -> A.Expr:
    """``c1*v1 + c2*v2 + ... + const`` (terms in the given order, zero coefficients dropped)."""
    out = None
    for v, c in terms:
        if c == 0:
            continue
        t = var(v) if abs(c) == 1 else A.BinOp("*", var(v), A.Const(abs(c)))
        out = (t if c > 0 else A.Neg(t)) if out is None else A.BinOp("+" if c > 0 else "-", out, t)
    if out is None:
        return A.Const(const) if const >= 0 else A.Neg(A.Const(-const))
    if const:
        out = A.BinOp("+" if const > 0 else "-", out, A.Const(abs(const)))
    return out


def _block_and_offset(e: A.Expr, f: int, ranges: dict) -> tuple[A.Expr, A.Expr]:
    """``(e // f, e % f)``, written without division where the loop ranges prove it: for an
    affine ``e = f*q + r`` whose remainder part ``r`` stays in ``[0, f)`` the pair is
    ``(q, r)`` exactly (the tile loops of ``jo*32 + joa*16 + j`` give ``(jo, joa*16 + j)``)."""
    aff = affine(e)
    if aff is not None and all(v in ranges for v in aff[0]):
        coefs, c0 = aff
        q0, r0 = divmod(c0, f)
        block = [(v, c // f) for v, c in coefs.items() if c % f == 0]
        rest = [(v, c) for v, c in coefs.items() if c % f != 0]
        lo = r0 + sum(c * (ranges[v][0] if c > 0 else ranges[v][1]) for v, c in rest)
        hi = r0 + sum(c * (ranges[v][1] if c > 0 else ranges[v][0]) for v, c in rest)
        if 0 <= lo and hi < f:
            return _affine_expr(block, q0), _affine_expr(rest, r0)
    return A.BinOp("//", e, A.Const(f)), A.BinOp("%", e, A.Const(f))


def _packed_subscripts(indices: tuple, dim: int, f: int, ranges: dict) -> tuple:
    """``(x_dim // f, x_0, ..., x_{dim-1}, x_{dim+1}, ..., x_dim % f)``."""
    block, offset = _block_and_offset(indices[dim], f, ranges)
    return (block,) + tuple(indices[:dim]) + tuple(indices[dim + 1:]) + (offset,)


@strategy("pack_input", level="memory", numerics="bitwise", creates=("copy", "packed:tensor"),
          args=[Arg("stmt", "stmt", "a statement of the hot nest that reads the tensor, e.g. N0.S0"),
                Arg("tensor", "tensor", "kernel input the nest reads"),
                Arg("dim", "int", "dimension split into blocks"),
                Arg("factor", "int", "block size: elements of `dim` per block; divides the dimension")])
class PackInput(Strategy):
    """Copy a tensor into a blocked layout before the hot nest; the nest reads the copy.

    ``X`` of shape ``(n0, ..., nr)`` is packed along ``dim`` by ``factor``: a new nest placed
    before the nest of ``stmt`` copies it whole into a fresh global intermediate ``P`` with
    ``P_{x_dim//factor, x_0, ..., x_{dim-1}, x_{dim+1}, ..., x_dim%factor} = X_{x}`` (the block
    number first, the other dimensions in order, the offset in the block last: GotoBLAS's
    packed panels, ``B_{k,j}`` -> ``P_{j//jb,k,j%jb}`` and ``A_{i,k}`` -> ``P_{i//mr,k,i%mr}``),
    looping in ``P``'s order so the copy writes contiguously. Every read of ``X`` in the nest
    becomes the matching read of ``P``; where the loop ranges prove that the remainder of an
    affine subscript stays inside one block, the packed subscripts are written without
    division (``X_{k,jo*32+j}`` with ``j < 32`` reads ``P_{jo,k,j}``). A tile loop walking
    ``jb`` consecutive elements of ``dim`` then reads one contiguous block per step of the
    other subscripts instead of ``jb`` elements a row apart.

    ``X`` must be a kernel input (read-only, every element defined: a whole copy of an
    intermediate could read elements nobody wrote); ``factor`` divides ``n_dim``. A read
    whose bounds are only proven under its ``if_then_else`` guard is kept only if the
    checker proves the packed read too. Values are only copied: bitwise.

    Before: \\kernel k(A:f32[4,8],B:f32[8,16])->(C:f32[4,16]){L^{4}_{i=0}L^{2}_{jo=0}L^{8}_{k=0}L^{8}_{j=0}[C^{f32,g}_{i,jo*8+j}=C^{f32,g}_{i,jo*8+j}+A^{f32,g}_{i,k}*B^{f32,g}_{k,jo*8+j};];}
    Args: stmt=N0.S0 tensor=B dim=1 factor=8
    After: \\kernel k(A:f32[4,8],B:f32[8,16])->(C:f32[4,16]){L^{2}_{a=0}L^{8}_{b=0}L^{8}_{c=0}[D^{f32,g}_{a,b,c}=B^{f32,g}_{b,a*8+c};];L^{4}_{i=0}L^{2}_{jo=0}L^{8}_{k=0}L^{8}_{j=0}[C^{f32,g}_{i,jo*8+j}=C^{f32,g}_{i,jo*8+j}+A^{f32,g}_{i,k}*D^{f32,g}_{jo,k,j};];}
    """

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        seen = set()
        for ref, st, path in ctx.stmts():
            for name in dict.fromkeys(a.name for a, w in _accesses(st) if not w):
                if (path[0], name) in seen:
                    continue
                seen.add((path[0], name))  # one site per nest and tensor: every read of the nest is packed
                info = ctx.result.tensors.get(name)
                if info is None or not info.shape:
                    continue
                for d, n in enumerate(info.shape):
                    site = self.site(ctx, {"stmt": ref, "tensor": name, "dim": d}, f"pack {name} by blocks of dim {d}",
                                     lambda ref=ref, name=name, d=d, n=n: {
                                         "factor": self._factors(ctx, ref, name, d, n)})
                    if site is not None:
                        out.append(site)
        return out

    def _factors(self, ctx, ref, name, d, n) -> list[int]:
        ok = []
        for f in sorted(set(divisors(n, limit=4)) | _tile_strides(ctx, ref, name, d, n) | {n}):
            try:
                planned = self._check(ctx, {"stmt": ref, "tensor": name, "dim": d, "factor": f})
            except NotApplicable:
                continue
            if not planned[-1]:  # listed only where no guard is needed: the candidate is not checked here
                ok.append(f)
        return ok

    def _check(self, ctx, args):
        st, spath = stmt_arg(self, ctx, args["stmt"])
        name, d, f = args["tensor"], args["dim"], args["factor"]
        info = ctx.result.tensors.get(name)
        if info is None:
            raise self.na(f"no tensor '{name}'", st)
        if info.role != "input":
            # an intermediate or output may hold elements no statement wrote: a whole copy
            # would read them (an uninitialized read), and a later write would leave it stale
            tile = " (a private tile)" if info.alloc is not None else ""
            raise self.na(f"'{name}' is a kernel {info.role}{tile}; only kernel inputs are packed", st)
        if not info.shape:
            raise self.na(f"'{name}' is a scalar; it has no layout to pack", st)
        shape = info.shape
        if len(shape) < 2:
            raise self.na(f"'{name}' has one dimension: blocks of it are already contiguous", st)
        if not 0 <= d < len(shape):
            raise self.na(f"'dim' must name one of the {len(shape)} dimensions 0..{len(shape) - 1} of '{name}', "
                          f"got {d}", st)
        n = shape[d]
        if not 2 <= f <= n or n % f:
            raise self.na(f"factor {f} must divide the extent {n} of dimension {d} of '{name}' and be at least 2", st)
        if d == len(shape) - 1 and f == n:
            raise self.na(f"one block of the whole last dimension is the layout '{name}' already has", st)
        nest = ctx.kernel.body[spath[0]]
        stmts = stmts_under((nest,)) if not isinstance(nest, A.Assign) else [nest]
        if not any(a.name == name for a, w in _accesses(st) if not w):
            raise self.na(f"the statement does not read '{name}'", st)
        needs_guard = False
        for s in stmts:
            loops = ctx.result.info(s).loops
            ranges = {l.var: (l.start, l.start + l.extent - 1) for l in loops}
            for a, w in _accesses(s):
                if w or a.name != name:
                    continue
                for k, (i, m) in enumerate(zip(a.indices, shape)):
                    aff = affine(i)
                    if aff is None or any(v not in ranges for v in aff[0]):
                        needs_guard = True
                        continue
                    lo = aff[1] + sum(c * (ranges[v][0] if c > 0 else ranges[v][1]) for v, c in aff[0].items())
                    hi = aff[1] + sum(c * (ranges[v][1] if c > 0 else ranges[v][0]) for v, c in aff[0].items())
                    needs_guard |= lo < 0 or hi >= m
        return st, spath, info, stmts, needs_guard

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        st, spath, info, stmts, needs_guard = self._check(ctx, args)
        name, d, f = args["tensor"], args["dim"], args["factor"]
        shape = info.shape
        packed = fresh_tensor(ctx.kernel)
        # the copy nest loops in P's order: block, the other dimensions, offset
        taken = {p.name for p in ctx.kernel.inputs + ctx.kernel.outputs} | {
            n.name for n in A.walk(ctx.kernel) if isinstance(n, (A.Access, A.Alloc))} | {packed}
        pool = iter(c for c in "abcdefghmnpqrsuvwxyz" if c not in taken)
        block, offset = next(pool), None
        others = []
        for k in range(len(shape)):
            if k != d:
                others.append(next(pool))
        offset = next(pool)
        extents = [shape[d] // f] + [shape[k] for k in range(len(shape)) if k != d] + [f]
        names = [block] + others + [offset]
        src = []
        it = iter(others)
        for k in range(len(shape)):
            src.append(add(mul(var(block), A.Const(f)), var(offset)) if k == d else var(next(it)))
        dtype = info.dtype
        copy = A.Assign(A.Access(packed, dtype, "g", tuple(var(v) for v in names)),
                        A.Access(name, dtype, info.scope, tuple(src)))
        nest = rebuild_chain([A.Loop("L", e, v, 0, ()) for v, e in zip(names, extents)], (copy,))

        hot = ctx.kernel.body[spath[0]]
        ranges_of = {}
        for s in stmts:
            loops = ctx.result.info(s).loops
            ranges_of[id(s)] = {l.var: (l.start, l.start + l.extent - 1) for l in loops}

        def pack_reads(s: A.Assign) -> A.Assign:
            ranges = ranges_of[id(s)]

            def fn(x):
                if isinstance(x, A.Access) and x.name == name:
                    return A.Access(packed, dtype, "g", _packed_subscripts(x.indices, d, f, ranges))
                return x

            return replace(s, value=map_expr(s.value, fn),
                           target=replace(s.target, indices=tuple(map_expr(i, fn) for i in s.target.indices)))

        new_hot = _map_stmts(hot, pack_reads)
        kernel = replace_at(ctx.kernel, (spath[0],), [nest, new_hot])
        if needs_guard:
            ctx.recheck(self.name, kernel, st, message="the packed reads would not check: {code} {message}")
        # the hot nest keeps its loops and statements (reads re-pointed), one place down
        return Rewrite(kernel, "bitwise", {"copy": f"N{spath[0]}.{block}", "packed": packed},
                       moved=carried(hot, (spath[0],), (spath[0] + 1,)))


def _and_terms(cond: A.Expr) -> Optional[list[tuple[A.Expr, str, A.Expr]]]:
    """``cond`` as a list of ``(lhs, op, rhs)`` comparisons that all hold, or None if it is
    not a conjunction (``&``) of comparison chains."""
    if isinstance(cond, A.BinOp) and cond.op == "&":
        a, b = _and_terms(cond.lhs), _and_terms(cond.rhs)
        return None if a is None or b is None else a + b
    if isinstance(cond, A.Compare):
        return [(cond.operands[k], op, cond.operands[k + 1]) for k, op in enumerate(cond.ops)]
    return None


def _bound(lhs: A.Expr, op: str, rhs: A.Expr) -> Optional[tuple[dict, int, Optional[int], Optional[int]]]:
    """One comparison of an affine index expression with an integer, as ``(coefs, const, lo,
    hi)``: ``coefs·v + const`` lies in ``[lo, hi]`` (None: unbounded on that side)."""
    la, ra = affine(lhs), affine(rhs)
    if la is None or ra is None or op not in ("<", "<=", ">", ">="):
        return None
    if la[0] and not ra[0]:
        coefs, const, k, op = la[0], la[1], ra[1], op
    elif ra[0] and not la[0]:
        coefs, const, k, op = ra[0], ra[1], la[1], {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
    else:
        return None
    # coefs·v + const  op  k
    if op == "<":
        return coefs, const, None, k - 1
    if op == "<=":
        return coefs, const, None, k
    if op == ">":
        return coefs, const, k + 1, None
    return coefs, const, k, None


@strategy("pad_input", level="memory", numerics="bitwise", creates=("copy", "padded:tensor"),
          args=[Arg("stmt", "stmt", "a statement that reads the tensor under a box guard, e.g. N0.S0"),
                Arg("tensor", "tensor", "kernel input read as if_then_else(box, X_{...}, constant)")])
class PadInput(Strategy):
    """Copy a guarded input into a padded tensor before the nest; the nest reads it unguarded.

    In ``stmt``, every read ``if_then_else(g, X_{f_0,...,f_n}, c)`` of the kernel input ``X``
    whose guard ``g`` is a conjunction of comparisons of affine index expressions with
    integers, each one a subscript plus a constant (``0 <= i - p < 64`` bounds ``f_2 = i - p``),
    and the same box and ``c`` for every such read, becomes ``P_{f_0+l_0,...,f_n+l_n}``: a new
    nest placed before the nest of ``stmt`` fills the fresh global ``P`` — each dimension
    widened by ``l_d`` in front and as much behind as the subscripts reach past ``X``'s extent
    — with ``X`` inside the box and ``c`` outside it. The zero padding of a convolution is then
    one copy instead of a comparison per multiply-add, and the hot loop's reads are plain
    affine loads that unroll and vectorize. Values are only copied: bitwise.

    ``X`` must be a kernel input (every element defined); every subscript of a guarded read
    affine in the loops around ``stmt``.

    Before: \\kernel k(X:f32[8])->(C:f32[10]){L^{10}_{i=0}L^{3}_{p=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+if_then_else(0<=i-p<8,X^{f32,g}_{i-p},0.0);];}
    Args: stmt=N0.S0 tensor=X
    After: \\kernel k(X:f32[8])->(C:f32[10]){L^{12}_{a=0}[A^{f32,g}_{a}=if_then_else(2<=a<10,X^{f32,g}_{a-2},0.0);];L^{10}_{i=0}L^{3}_{p=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i-p+2};];}
    """

    def _applies(self, ctx: Context, ref: str, name: str) -> bool:
        return _plans(self, ctx, ref, name)

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        for ref, st, _ in ctx.stmts():
            names = dict.fromkeys(n.args[1].name for n in A.walk(st.value)
                                  if isinstance(n, A.Call) and n.func == "if_then_else" and len(n.args) == 3
                                  and isinstance(n.args[1], A.Access))
            for name in names:
                if not self._applies(ctx, ref, name):
                    continue
                site = self.site(ctx, {"stmt": ref, "tensor": name}, f"pad {name} so its reads need no guard", dict)
                if site is not None:
                    out.append(site)
        return out

    def _box(self, st: A.Assign, call: A.Call, ranges: dict, shape: tuple) -> tuple:
        """(per-dimension (lo, hi) of the box in X's subscripts, the subscripts' reach) of one guarded read."""
        cond, x, _ = call.args
        subs = [affine(i) for i in x.indices]
        if any(a is None or any(v not in ranges for v in a[0]) for a in subs):
            raise self.na(f"a subscript of '{x.name}' is not affine in the loops around the statement", x)
        terms = _and_terms(cond)
        if terms is None:
            raise self.na("the guard is not a conjunction (&) of comparisons", cond)
        box = [[0, m - 1] for m in shape]
        for lhs, op, rhs in terms:
            b = _bound(lhs, op, rhs)
            if b is None:
                raise self.na("a comparison of the guard does not bound an index expression by an integer", cond)
            coefs, const, lo, hi = b
            d = next((d for d, a in enumerate(subs) if {v: c for v, c in a[0].items() if c} ==
                      {v: c for v, c in coefs.items() if c}), None)
            if d is None:
                raise self.na(f"a comparison of the guard bounds no subscript of '{x.name}' (plus a constant)", cond)
            shift = const - subs[d][1]  # the guarded expression is f_d + shift
            if lo is not None:
                box[d][0] = max(box[d][0], lo - shift)
            if hi is not None:
                box[d][1] = min(box[d][1], hi - shift)
        reach = []
        for a in subs:
            lo = a[1] + sum(c * (ranges[v][0] if c > 0 else ranges[v][1]) for v, c in a[0].items())
            hi = a[1] + sum(c * (ranges[v][1] if c > 0 else ranges[v][0]) for v, c in a[0].items())
            reach.append((lo, hi))
        return tuple(tuple(b) for b in box), reach

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        st, spath = stmt_arg(self, ctx, args["stmt"])
        name = args["tensor"]
        info = ctx.result.tensors.get(name)
        if info is None:
            raise self.na(f"no tensor '{name}'", st)
        if info.role != "input" or not info.shape:
            raise self.na(f"'{name}' is not a kernel input with a shape; only those are padded "
                          f"(a copy of an intermediate could read elements nobody wrote)", st)
        calls = [n for n in A.walk(st.value) if isinstance(n, A.Call) and n.func == "if_then_else"
                 and len(n.args) == 3 and isinstance(n.args[1], A.Access) and n.args[1].name == name]
        if not calls:
            raise self.na(f"the statement reads no '{name}' as if_then_else(guard, {name}_..., constant)", st)
        loops = ctx.result.info(st).loops
        ranges = {l.var: (l.start, l.start + l.extent - 1) for l in loops}
        shape = info.shape
        boxes, reach = set(), [(0, m - 1) for m in shape]
        fills = set()
        for call in calls:
            if not (isinstance(call.args[2], A.Const) or (isinstance(call.args[2], A.Neg)
                                                           and isinstance(call.args[2].operand, A.Const))):
                raise self.na("the value outside the guard is not a constant", call)
            fills.add(call.args[2])
            box, r = self._box(st, call, ranges, shape)
            boxes.add(box)
            reach = [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(reach, r)]
        if len(boxes) != 1 or len(fills) != 1:
            raise self.na(f"the guarded reads of '{name}' differ in their box or their value outside it", st)
        (box,), (fill,) = boxes, fills
        if any(lo > hi for lo, hi in box):
            raise self.na("the guard holds nowhere", st)
        front = [max(0, -lo) for lo, _ in reach]
        extents = [f + max(m - 1, hi) + 1 for f, m, (_, hi) in zip(front, shape, reach)]
        padded = fresh_tensor(ctx.kernel)
        taken = {p.name for p in ctx.kernel.inputs + ctx.kernel.outputs} | {
            n.name for n in A.walk(ctx.kernel) if isinstance(n, (A.Access, A.Alloc))} | {padded}
        pool = iter(c for c in "abcdefghmnpqrsuvwxyz" if c not in taken)
        names = [next(pool) for _ in shape]
        conds = []
        for u, f, e, (lo, hi) in zip(names, front, extents, box):
            if lo + f > 0 or hi + f < e - 1:  # this dimension's guard is not always true
                conds.append(A.Compare(("<=", "<"), (A.Const(lo + f), var(u), A.Const(hi + f + 1))))
        src = A.Access(name, info.dtype, info.scope, tuple(_affine_expr([(u, 1)], -f) for u, f in zip(names, front)))
        value: A.Expr = src
        if conds:
            cond = conds[0]
            for c in conds[1:]:
                cond = A.BinOp("&", cond, c)
            value = A.Call("if_then_else", (cond, src, fill))
        copy = A.Assign(A.Access(padded, info.dtype, "g", tuple(var(u) for u in names)), value)
        nest = rebuild_chain([A.Loop("L", e, u, 0, ()) for u, e in zip(names, extents)], (copy,))

        def unguard(x):
            if isinstance(x, A.Call) and x in calls:
                subs = [affine(i) for i in x.args[1].indices]
                return A.Access(padded, info.dtype, "g",
                                tuple(_affine_expr(list(a[0].items()), a[1] + f) for a, f in zip(subs, front)))
            return x

        hot = ctx.kernel.body[spath[0]]
        new_st = replace(st, value=map_expr(st.value, unguard))
        new_hot = _map_stmts(hot, lambda s: new_st if s is st else s)
        kernel = replace_at(ctx.kernel, (spath[0],), [nest, new_hot])
        ctx.recheck(self.name, kernel, st, message="the padded program would not check: {code} {message}")
        return Rewrite(kernel, "bitwise", {"copy": f"N{spath[0]}.{names[0]}", "padded": padded},
                       moved=carried(hot, (spath[0],), (spath[0] + 1,)))


def _product_factors(e: A.Expr) -> list[A.Expr]:
    """The factors of a product tree ``a*b*c`` (left to right); ``[e]`` if ``e`` is no product."""
    if isinstance(e, A.BinOp) and e.op == "*":
        return _product_factors(e.lhs) + _product_factors(e.rhs)
    return [e]


def _index_vars(e) -> set[str]:
    return {n.name for n in A.walk(e) if isinstance(n, A.Var)}


def _conjunction(terms: list[tuple[A.Expr, str, A.Expr]]) -> A.Expr:
    out: Optional[A.Expr] = None
    for lhs, op, rhs in terms:
        c = A.Compare((op,), (lhs, rhs))
        out = c if out is None else A.BinOp("&", out, c)
    assert out is not None
    return out


def _is_zero(e: A.Expr) -> bool:
    return isinstance(e, A.Const) and e.value == 0


@strategy("distribute_guard", level="operator", numerics="exact-in-reals",
          args=[Arg("stmt", "stmt", "a statement with if_then_else(c_1 & c_2 & ..., X*Y*..., 0), e.g. N0.S0")])
class DistributeGuard(Strategy):
    """Move the comparisons of a guarded product onto the factors they constrain.

    In ``stmt``, every ``if_then_else(g, f_1*f_2*...*f_n, 0)`` whose guard ``g`` is a
    conjunction of comparisons becomes ``g_1(f_1)*g_2(f_2)*...``, where ``g_m(f)`` is
    ``if_then_else(g_m, f, 0)`` and ``g_m`` the comparisons whose index variables all occur
    in ``f_m`` (``f_m`` itself when there are none). Every comparison must land on some
    factor. The triangular product ``if_then_else(i<=k<=j, A_{i,k}*B_{k,j}, 0)`` of
    ``triu(A) @ triu(B)`` becomes ``triu(A)_{i,k}*triu(B)_{k,j}``, whose guarded reads
    ``mask_input`` hoists into two masked copies, leaving a plain GEMM to block.

    Exact in the reals, not bitwise: where ``g`` fails the new product is ``0*y`` — ``-0.0``
    for a negative ``y``, NaN for an infinite one — where the old one was ``0``. So a factor
    that loses a comparison (it is evaluated where it was not before) must be a read of a
    kernel input (every element defined, nothing that can trap).

    Before: \\kernel k(A:f32[4,4],B:f32[4,4])->(C:f32[4,4]){L^{4}_{i=0}L^{4}_{j=0}L^{4}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+if_then_else(i<=k<=j,A^{f32,g}_{i,k}*B^{f32,g}_{k,j},0.0);];}
    Args: stmt=N0.S0
    After: \\kernel k(A:f32[4,4],B:f32[4,4])->(C:f32[4,4]){L^{4}_{i=0}L^{4}_{j=0}L^{4}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+if_then_else(i<=k,A^{f32,g}_{i,k},0.0)*if_then_else(k<=j,B^{f32,g}_{k,j},0.0);];}
    """

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        for ref, st, _ in ctx.stmts():
            calls = [n for n in A.walk(st.value) if self._candidate(n)]
            try:
                for c in calls:
                    self._distribute(ctx, c)
            except NotApplicable:
                continue
            if calls:
                site = self.site(ctx, {"stmt": ref}, "move the guard's comparisons onto the factors they constrain", dict)
                if site is not None:
                    out.append(site)
        return out

    @staticmethod
    def _candidate(n) -> bool:
        return (isinstance(n, A.Call) and n.func == "if_then_else" and len(n.args) == 3 and _is_zero(n.args[2])
                and len(_product_factors(n.args[1])) >= 2)

    def _distribute(self, ctx: Context, call: A.Call) -> A.Expr:
        cond, prod, zero = call.args
        terms = _and_terms(cond)
        if terms is None:
            raise self.na("the guard is not a conjunction (&) of comparisons", cond)
        factors = _product_factors(prod)
        fvars = [_index_vars(f) for f in factors]
        mine: list[list] = [[] for _ in factors]
        for t in terms:
            tv = _index_vars(t[0]) | _index_vars(t[2])
            homes = [m for m, fv in enumerate(fvars) if tv <= fv]
            if not homes:
                raise self.na(f"the comparison '{print_expr(A.Compare((t[1],), (t[0], t[2])))}' constrains "
                              f"no single factor (its indices occur in none)", cond)
            for m in homes:
                mine[m].append(t)
        for f, ts in zip(factors, mine):
            if len(ts) == len(terms):
                continue
            info = ctx.result.tensors.get(f.name) if isinstance(f, A.Access) else None
            if info is None or info.role != "input":
                raise self.na(f"the factor '{print_expr(f)}' would be evaluated where the guard fails; only a "
                              f"read of a kernel input may be (a computed value could be infinite or NaN)", f)
        out: Optional[A.Expr] = None
        for f, ts in zip(factors, mine):
            g = A.Call("if_then_else", (_conjunction(ts), f, zero)) if ts else f
            out = g if out is None else A.BinOp("*", out, g)
        return out

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        st, spath = stmt_arg(self, ctx, args["stmt"])
        calls = [n for n in A.walk(st.value) if self._candidate(n)]
        if not calls:
            raise self.na("the statement has no if_then_else(guard, a product, 0)", st)
        done = {c: self._distribute(ctx, c) for c in calls}
        new_st = replace(st, value=map_expr(st.value, lambda x: done.get(x, x)))
        kernel = _map_stmts_at(ctx.kernel, spath, new_st)
        ctx.recheck(self.name, kernel, st, message="the distributed guard would not check: {code} {message}")
        return Rewrite(kernel, "exact-in-reals", {})


@strategy("mask_input", level="memory", numerics="bitwise", creates=("copy", "masked:tensor"),
          args=[Arg("stmt", "stmt", "a statement that reads the tensor under a guard, e.g. N0.S0"),
                Arg("tensor", "tensor", "kernel input read as if_then_else(guard, X_{...}, constant)")])
class MaskInput(Strategy):
    """Copy a guarded input, masked, into a tensor of its shape before the nest; the nest
    reads the copy unguarded.

    In ``stmt``, every read ``if_then_else(g, X_{u_0+c_0,...,u_n+c_n}, c)`` of the kernel
    input ``X`` whose subscripts are distinct loop indices plus constants and whose guard
    ``g`` speaks only of those indices (``i <= k`` for ``A_{i,k}``: the upper triangle),
    the same guard in ``X``'s coordinates and the same constant ``c`` for every such read,
    becomes ``M_{u_0+c_0,...}``: a nest placed before the nest of ``stmt`` fills the fresh
    global ``M`` with ``X`` where the guard holds and ``c`` elsewhere. ``pad_input`` is the
    same idea for a box that reaches outside ``X`` (a convolution's zero padding); this one
    takes any guard over ``X``'s own subscripts, inside its bounds. Values are only copied:
    bitwise.

    Before: \\kernel k(A:f32[4,4],B:f32[4,4])->(C:f32[4,4]){L^{4}_{i=0}L^{4}_{j=0}L^{4}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+if_then_else(i<=k,A^{f32,g}_{i,k},0.0)*B^{f32,g}_{k,j};];}
    Args: stmt=N0.S0 tensor=A
    After: \\kernel k(A:f32[4,4],B:f32[4,4])->(C:f32[4,4]){L^{4}_{a=0}L^{4}_{b=0}[D^{f32,g}_{a,b}=if_then_else(a<=b,A^{f32,g}_{a,b},0.0);];L^{4}_{i=0}L^{4}_{j=0}L^{4}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+D^{f32,g}_{i,k}*B^{f32,g}_{k,j};];}
    """

    def _applies(self, ctx: Context, ref: str, name: str) -> bool:
        return _plans(self, ctx, ref, name)

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        for ref, st, _ in ctx.stmts():
            names = dict.fromkeys(n.args[1].name for n in A.walk(st.value)
                                  if isinstance(n, A.Call) and n.func == "if_then_else" and len(n.args) == 3
                                  and isinstance(n.args[1], A.Access))
            for name in names:
                if not self._applies(ctx, ref, name):
                    continue
                site = self.site(ctx, {"stmt": ref, "tensor": name}, f"copy {name} masked so its reads need no guard", dict)
                if site is not None:
                    out.append(site)
        return out

    def _mask(self, call: A.Call, loops: set, names: list[str]) -> A.Expr:
        """The guard of one read in the copy's coordinates ``names``."""
        cond, x, _ = call.args
        to_copy = {}
        for d, sub in enumerate(x.indices):
            a = affine(sub)
            live = {v: c for v, c in a[0].items() if c} if a is not None else None
            if live is None or len(live) != 1 or next(iter(live.values())) != 1 or next(iter(live)) not in loops:
                raise self.na(f"subscript {d} of '{x.name}' is not a loop index plus a constant", x)
            u = next(iter(live))
            if u in to_copy:
                raise self.na(f"the loop index '{u}' appears in two subscripts of '{x.name}'", x)
            to_copy[u] = _affine_expr([(names[d], 1)], -a[1])
        if _and_terms(cond) is None:
            raise self.na("the guard is not a conjunction (&) of comparisons", cond)
        if not _index_vars(cond) <= set(to_copy):
            raise self.na(f"the guard speaks of indices that are no subscript of '{x.name}'", cond)
        return substitute(cond, to_copy)

    def _guard(self, ctx: Context, st: A.Assign, name: str) -> tuple:
        """(the guarded reads of ``name``, their one guard in the copy's coordinates, the
        copy's index names, the masked tensor's name), or NotApplicable."""
        info = ctx.result.tensors.get(name)
        if info is None:
            raise self.na(f"no tensor '{name}'", st)
        if info.role != "input" or not info.shape:
            raise self.na(f"'{name}' is not a kernel input with a shape; only those are masked "
                          f"(a copy of an intermediate could read elements nobody wrote)", st)
        calls = [n for n in A.walk(st.value) if isinstance(n, A.Call) and n.func == "if_then_else"
                 and len(n.args) == 3 and isinstance(n.args[1], A.Access) and n.args[1].name == name]
        if not calls:
            raise self.na(f"the statement reads no '{name}' as if_then_else(guard, {name}_..., constant)", st)
        masked = fresh_tensor(ctx.kernel)
        taken = {p.name for p in ctx.kernel.inputs + ctx.kernel.outputs} | {
            n.name for n in A.walk(ctx.kernel) if isinstance(n, (A.Access, A.Alloc))} | {masked}
        pool = iter(c for c in "abcdefghmnpqrsuvwxyz" if c not in taken)
        names = [next(pool) for _ in info.shape]
        loops = {l.var for l in ctx.result.info(st).loops}
        guards, fills = set(), set()
        for call in calls:
            fill = call.args[2]
            if not (isinstance(fill, A.Const) or (isinstance(fill, A.Neg) and isinstance(fill.operand, A.Const))):
                raise self.na("the value outside the guard is not a constant", call)
            fills.add(fill)
            guards.add(print_expr(self._mask(call, loops, names)))
        if len(guards) != 1 or len(fills) != 1:
            raise self.na(f"the guarded reads of '{name}' differ in their guard or their value outside it", st)
        return calls, self._mask(calls[0], loops, names), names, masked

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        st, spath = stmt_arg(self, ctx, args["stmt"])
        name = args["tensor"]
        calls, cond, names, masked = self._guard(ctx, st, name)
        info = ctx.result.tensors[name]
        src = A.Access(name, info.dtype, info.scope, tuple(var(u) for u in names))
        copy = A.Assign(A.Access(masked, info.dtype, "g", tuple(var(u) for u in names)),
                        A.Call("if_then_else", (cond, src, calls[0].args[2])))
        nest = rebuild_chain([A.Loop("L", m, u, 0, ()) for u, m in zip(names, info.shape)], (copy,))

        def unguard(x):
            if isinstance(x, A.Call) and x in calls:
                return A.Access(masked, info.dtype, "g", x.args[1].indices)
            return x

        hot = ctx.kernel.body[spath[0]]
        new_st = replace(st, value=map_expr(st.value, unguard))
        new_hot = _map_stmts(hot, lambda s: new_st if s is st else s)
        kernel = replace_at(ctx.kernel, (spath[0],), [nest, new_hot])
        ctx.recheck(self.name, kernel, st, message="the masked program would not check: {code} {message}")
        return Rewrite(kernel, "bitwise", {"copy": f"N{spath[0]}.{names[0]}", "masked": masked},
                       moved=carried(hot, (spath[0],), (spath[0] + 1,)))


def _plans(strategy, ctx: Context, ref: str, name: str) -> bool:
    """A site is listed only where the step applies (its plan succeeds and the result
    checks): the guard forms are matched first, the rest is the plan itself."""
    try:
        strategy.plan(ctx, {"stmt": ref, "tensor": name})
    except NotApplicable:
        return False
    return True


def _map_stmts_at(kernel: A.Kernel, spath: tuple, new_st: A.Assign) -> A.Kernel:
    """``kernel`` with the statement at ``spath`` replaced by ``new_st``."""
    old = get_at(kernel, spath)
    return replace_at(kernel, (spath[0],), [_map_stmts(kernel.body[spath[0]], lambda s: new_st if s is old else s)])


def _tile_strides(ctx, ref, name, d, n) -> set[int]:
    """Block sizes a tiled nest suggests: the coefficients (at least 2, dividing ``n``) of the
    loop indices in the subscripts of ``dim`` (``jo*32 + j`` suggests 32, which packs one
    tile per block and needs no division)."""
    out = set()
    nest = ctx.kernel.body[int(ref[1:].split(".")[0])]
    for s in stmts_under((nest,)) if not isinstance(nest, A.Assign) else [nest]:
        for a, w in _accesses(s):
            if w or a.name != name or len(a.indices) <= d:
                continue
            aff = affine(a.indices[d])
            if aff is not None:
                out |= {abs(c) for c in aff[0].values() if abs(c) >= 2 and n % abs(c) == 0}
    return out


def _map_stmts(node, fn):
    """``node`` with every statement ``s`` under it replaced by ``fn(s)``."""
    if isinstance(node, A.Assign):
        return fn(node)
    if isinstance(node, (A.Loop, A.Region)):
        return replace(node, body=tuple(_map_stmts(b, fn) for b in node.body))
    return node


__all__ = ["INNERMOST", "MAX_JAM", "DistributeGuard", "MaskInput", "PackInput", "PadInput", "UnrollAndJam"]
