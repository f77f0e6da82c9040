"""Schedule strategies that use private tensors (``\\alloc``, docs/language.md §3.1).

* ``cache_write``: a reduction accumulates in a private tile per iteration of a loop;
* ``vectorized_partial_sums``: a reduction's innermost loop is split into one private
  partial result per vector lane (rfactor by the vector width);
* ``privatize``: an intermediate used only inside a loop, one slice per iteration, becomes a
  private tensor of that loop (array contraction).

``cache_write`` is TVM's ``cache_write`` + ``compute_at`` in one checked rewrite: a
reduction accumulates, in every iteration of a chosen loop, into a small private tile
and writes each element back once. After tiling, it is what turns a GEMM nest into a
register-blocked kernel: unrolling and vectorizing the loops over the tile then let
LLVM keep the whole tile in registers across the reduction loop.
"""

from __future__ import annotations

from dataclasses import replace

from ..lang import ast as A
from ..lang.affine import affine
from .base import Arg, Context, NotApplicable, Rewrite, Site, Strategy, strategy
from .common import loop_arg, reassociation_overflow, stmt_arg, stmts_under
from .rewrite import (find_loop, fresh_index, fresh_tensor, iter_items, loop_ref, map_expr, replace_at, stmts_in,
                      substitute, tensors_read, tensors_written, used_names)


def _linear(terms: list[tuple[str, int]], const: int) -> A.Expr:
    """``c1*v1 + c2*v2 + ... + const`` as an expression (terms in the given order)."""
    out = None
    for v, c in terms:
        t = A.Var(v) if abs(c) == 1 else A.BinOp("*", A.Var(v), A.Const(abs(c)))
        if out is None:
            out = t if c > 0 else A.Neg(t)
        else:
            out = A.BinOp("+" if c > 0 else "-", out, t)
    if out is None:
        return A.Const(const) if const >= 0 else A.Neg(A.Const(-const))
    if const:
        return A.BinOp("+" if const > 0 else "-", out, A.Const(abs(const)))
    return out


def _rebuild(items: tuple, old: A.Assign, new: A.Assign) -> tuple:
    out = []
    for it in items:
        if it is old:
            out.append(new)
        elif isinstance(it, (A.Loop, A.Region)):
            out.append(replace(it, body=_rebuild(it.body, old, new)))
        else:
            out.append(it)
    return tuple(out)


def _swap_self_reads(e: A.Expr, target: A.Access, tile: A.Access) -> A.Expr:
    if isinstance(e, A.Access):
        return tile if (e.name == target.name and e.indices == target.indices) else e
    if isinstance(e, A.BinOp):
        spine = []
        node = e
        while isinstance(node, A.BinOp):
            spine.append(node)
            node = node.lhs
        out = _swap_self_reads(node, target, tile)
        for n in reversed(spine):
            out = replace(n, lhs=out, rhs=_swap_self_reads(n.rhs, target, tile))
        return out
    if isinstance(e, A.Neg):
        return replace(e, operand=_swap_self_reads(e.operand, target, tile))
    if isinstance(e, A.Compare):
        return replace(e, operands=tuple(_swap_self_reads(o, target, tile) for o in e.operands))
    if isinstance(e, A.Call):
        return replace(e, args=tuple(_swap_self_reads(a, target, tile) for a in e.args))
    return e


@strategy("cache_write", level="memory", numerics="bitwise", creates=("tile:tensor",),
          args=[Arg("stmt", "stmt", "the reduction, e.g. N0.S0"),
                Arg("loop", "loop", "loop whose every iteration gets its own tile, e.g. N0.jo"),
                Arg("scope", "choice", "memory of the tile: l (registers / per thread) or s (per block)",
                    choices=("l", "s"), default="l"),
                Arg("layout", "choice", "order of the tile's dimensions: target (as the target's subscripts) "
                    "or loops (as the loops that run over them, innermost last)",
                    choices=("target", "loops"), default="target")])
class CacheWrite(Strategy):
    """Accumulate a reduction in a private tile per iteration of a loop, write it back once.

    ``stmt`` is a reduction ``X_{s} = X_{s} op e`` (kind ``reduce``) and the only
    statement under ``loop``; its reduction loops all lie inside ``loop`` (so one
    iteration of ``loop`` computes complete elements). The body of ``loop`` becomes
    ``\\alloc T[...]``, the same nest accumulating into ``T`` (fresh per iteration, so it
    starts from the identity at the same point the reduction of ``X`` did), and a nest
    over the spatial loops inside ``loop`` storing ``X_{s} = T_{...}``. Each tile subscript
    is the part of ``X``'s subscript that the loops inside ``loop`` contribute, shifted to
    start at 0 (affine subscripts only); dimensions they do not touch are dropped. With
    ``layout=loops`` the tile's dimensions are ordered like the loops inside ``loop`` that
    run over them, the innermost last, so a vector loop innermost reads and writes the tile
    at unit stride even where it runs over an outer dimension of ``X`` (a convolution
    vectorized over output channels). The same values are combined in the same order: bitwise.

    Before: \\kernel k(A:f32[4,8],B:f32[8,4])->(C:f32[4,4]){L^{2}_{io=0}L^{8}_{k=0}L^{2}_{i=0}L^{4}_{j=0}[C^{f32,g}_{io*2+i,j}=C^{f32,g}_{io*2+i,j}+A^{f32,g}_{io*2+i,k}*B^{f32,g}_{k,j};];}
    Args: stmt=N0.S0 loop=N0.io
    After: \\kernel k(A:f32[4,8],B:f32[8,4])->(C:f32[4,4]){L^{2}_{io=0}[\\alloc D^{f32,l}[2,4];L^{8}_{k=0}L^{2}_{i=0}L^{4}_{j=0}[D^{f32,l}_{i,j}=D^{f32,l}_{i,j}+A^{f32,g}_{io*2+i,k}*B^{f32,g}_{k,j};];L^{2}_{i=0}L^{4}_{j=0}[C^{f32,g}_{io*2+i,j}=D^{f32,l}_{i,j};];];}
    """

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        for ref, st, path in ctx.stmts():  # only the anchors in focus (a cursor listing)
            si = ctx.result.info(st)
            if si.kind != "reduce":
                continue
            for lp in si.loops:
                lref = loop_ref(ctx.kernel, lp)
                scopes = []
                for scope in ("l", "s"):
                    try:
                        self.plan(ctx, {"stmt": ref, "loop": lref, "scope": scope})
                    except NotApplicable:
                        continue
                    scopes.append(scope)
                if scopes:
                    out.append(Site(self.name, {"stmt": ref, "loop": lref}, {"scope": scopes},
                                    f"accumulate {st.target.name} of {ref} in a tile per iteration of {lref}"))
        return out

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        st, spath = stmt_arg(self, ctx, args["stmt"])
        at, lpath = loop_arg(self, ctx, args["loop"])
        scope = args.get("scope", "l")
        if spath[: len(lpath)] != lpath:
            raise self.na(f"loop '{at.var}' does not enclose {args['stmt']}", at, st)
        si = ctx.result.info(st)
        x = st.target
        if si.kind != "reduce":
            raise self.na(f"{args['stmt']} is a{'n' if si.kind[0] in 'au' else ''} {si.kind}, not a reduction "
                          f"(an update or scan reads values the tile would not hold)", st)
        if stmts_under(at.body) != [st] or any(isinstance(n, A.Alloc) for n in A.walk(at)):
            raise self.na(f"{args['stmt']} must be the only statement under loop '{at.var}'", at)
        k = next(i for i, l in enumerate(si.loops) if l is at)
        inner = si.loops[k + 1:]
        if si.init_loop is None or not any(l is si.init_loop for l in inner):
            raise self.na(f"'{x.name}' is reduced across loop '{si.init_loop.var if si.init_loop else at.var}' "
                          f"outside '{at.var}': one iteration of '{at.var}' does not compute whole elements", at)
        inner_vars = [l.var for l in inner]
        loops = {l.var: l for l in inner}
        tile_idx, shape, depth = [], [], []
        for n, idx in enumerate(x.indices):
            aff = affine(idx)
            if aff is None:
                raise self.na(f"subscript {n + 1} of '{x.name}' is not affine", idx)
            terms = [(v, aff[0][v]) for v in inner_vars if aff[0].get(v)]
            if not terms:
                continue
            lo = sum(c * (loops[v].start if c > 0 else loops[v].start + loops[v].extent - 1) for v, c in terms)
            hi = sum(c * (loops[v].start + loops[v].extent - 1 if c > 0 else loops[v].start) for v, c in terms)
            tile_idx.append(_linear(terms, -lo))
            shape.append(hi - lo + 1)
            depth.append(max(inner_vars.index(v) for v, _ in terms))
        if args.get("layout", "target") == "loops":
            order = sorted(range(len(depth)), key=depth.__getitem__)
            tile_idx, shape = [tile_idx[d] for d in order], [shape[d] for d in order]
        taken = used_names(ctx.kernel) | {n.name for n in A.walk(ctx.kernel) if isinstance(n, A.Alloc)}
        name = fresh_tensor(ctx.kernel, taken)
        tile = A.Access(name, x.dtype, scope, tuple(tile_idx))
        acc = A.Assign(tile, _swap_self_reads(st.value, x, tile))
        body = _rebuild(at.body, st, acc)
        used = {n.name for i in x.indices for n in A.walk(i) if isinstance(n, A.Var)}
        spatial = [l for l in inner if l.var in used]
        back: A.Item = A.Assign(x, tile)
        for l in reversed(spatial):
            back = A.Loop(l.kind, l.extent, l.var, l.start, (back,))
        new_at = replace(at, body=(A.Alloc(name, x.dtype, scope, tuple(shape)),) + body + (back,))
        kernel = replace_at(ctx.kernel, lpath, new_at)
        ctx.recheck(self.name, kernel, at, message="the tiled program would not check: {code} {message}")
        return Rewrite(kernel, "bitwise", created={"tile": name})



def _combine(op: str, x: A.Expr, y: A.Expr) -> A.Expr:
    return A.Call(op, (x, y)) if op in ("max", "min") else A.BinOp(op, x, y)


@strategy("vectorized_partial_sums", level="operator", numerics="exact-in-reals", creates=("partial:tensor",),
          args=[Arg("stmt", "stmt", "the reduction, e.g. N0.S0"),
                Arg("lanes", "int", "partial results, one per vector lane (divides the innermost loop)")])
class VectorizedPartialSums(Strategy):
    """Reduce the innermost loop into ``lanes`` private partial results, then combine them.

    ``stmt`` is a reduction ``X_{s} = X_{s} op e`` (``op`` one of ``+ * max min``) whose
    innermost enclosing loop ``k`` (start 0, extent a multiple of ``lanes``) is a reduction
    loop with the statement as its only item, and whose reduction loops form the innermost
    perfect chain of its nest. Where that chain starts, the rewrite allocates a private
    tile ``P[lanes]`` and splits ``k`` into ``ko`` and ``kv`` (``k = ko*lanes + kv``):
    ``P_{kv}`` accumulates the iterations of its lane, so the ``kv`` loop carries no
    dependence and can be vectorized (``loop_vectorization``); a loop over ``kv`` then
    combines ``X_{s} = X_{s} op P_{kv}``. This is TVM's ``rfactor`` by the vector width.
    Sums and products are reassociated (exact in reals); ``max``/``min`` are bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}
    Args: stmt=N0.S0 lanes=4
    After: \\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}[\\alloc D^{f32,l}[4];L^{2}_{jo=0}L^{4}_{jv=0}[D^{f32,l}_{jv}=D^{f32,l}_{jv}+A^{f32,g}_{i,jo*4+jv};];L^{4}_{jv=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+D^{f32,l}_{jv};];];}
    """

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        for ref, st, _ in ctx.stmts():  # only the anchors in focus (a cursor listing)
            si = ctx.result.info(st)
            if si.kind != "reduce" or not si.loops:
                continue
            ok = []
            for lanes in (4, 8, 16):
                try:
                    self.plan(ctx, {"stmt": ref, "lanes": lanes})
                except NotApplicable:
                    continue
                ok.append(lanes)
            if ok:
                out.append(Site(self.name, {"stmt": ref}, {"lanes": ok},
                                f"partial results of {st.target.name} in {ref}, one per vector lane"))
        return out

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        st, spath = stmt_arg(self, ctx, args["stmt"])
        lanes = args["lanes"]
        si = ctx.result.info(st)
        if si.kind != "reduce":
            raise self.na(f"{args['stmt']} is not a reduction", st)
        if si.op not in ("+", "*", "max", "min"):
            raise self.na(f"'{si.op}' reductions are not split (only + * max min)", st)
        why = reassociation_overflow(si, st.target)
        if why:
            raise self.na(why, st)
        if not si.loops or si.loops[-1].var not in si.reduce_vars:
            raise self.na("the innermost loop around the statement is not one of its reduction loops", st)
        k = si.loops[-1]
        if k.body != (st,):
            raise self.na(f"{args['stmt']} must be the only item of loop '{k.var}'", k)
        if k.start != 0:
            raise self.na(f"loop '{k.var}' starts at {k.start}; only loops from 0 are split", k)
        if lanes < 2 or lanes > 64 or k.extent % lanes:
            raise self.na(f"lanes={lanes} must lie in 2..64 and divide the {k.extent} iterations of '{k.var}'", k)
        r0 = len(si.loops) - 1
        while r0 > 0 and si.loops[r0 - 1].var in si.reduce_vars and si.loops[r0 - 1].body == (si.loops[r0],):
            r0 -= 1
        if si.init_loop is not si.loops[r0]:
            raise self.na(f"the reduction loops of {args['stmt']} are not the innermost perfect chain of its nest", st)
        x = st.target
        taken = used_names(ctx.kernel) | {n.name for n in A.walk(ctx.kernel) if isinstance(n, A.Alloc)}
        name = fresh_tensor(ctx.kernel, taken)
        ko = fresh_index(ctx.kernel, k.var + "o", taken)
        kv = fresh_index(ctx.kernel, k.var + "v", taken | {ko})
        part = A.Access(name, x.dtype, "l", (A.Var(kv),))
        lane_k = A.BinOp("+", A.BinOp("*", A.Var(ko), A.Const(lanes)), A.Var(kv))
        value = substitute(_swap_self_reads(st.value, x, part), {k.var: lane_k})
        inner: A.Item = A.Loop("L", k.extent // lanes, ko, 0, (A.Loop("L", lanes, kv, 0, (A.Assign(part, value),)),))
        for l in reversed(si.loops[r0:-1]):
            inner = replace(l, body=(inner,))
        combine = A.Loop("L", lanes, kv, 0, (A.Assign(x, _combine(si.op, x, part)),))
        new_items = (A.Alloc(name, x.dtype, "l", (lanes,)), inner, combine)
        _, rpath = find_loop(ctx.kernel, loop_ref(ctx.kernel, si.loops[r0]))
        kernel = replace_at(ctx.kernel, rpath, new_items)
        ctx.recheck(self.name, kernel, st, message="the split program would not check: {code} {message}")
        return Rewrite(kernel, "bitwise" if si.op in ("max", "min") else "exact-in-reals", created={"partial": name})


def _accesses(node, name: str) -> list[A.Access]:
    """Every access of tensor ``name`` under ``node``: targets, values and subscripts."""
    return [n for st in stmts_in(node) for n in A.walk(st) if isinstance(n, A.Access) and n.name == name]


@strategy("privatize", level="memory", numerics="bitwise",
          args=[Arg("tensor", "tensor", "intermediate tensor used only inside the loop"),
                Arg("loop", "loop", "loop whose every iteration gets its own copy, e.g. N0.i"),
                Arg("scope", "choice", "memory of the copy: l (registers / stack, per thread) or s (per block)",
                    choices=("l", "s"), default="l")])
class Privatize(Strategy):
    """Give every iteration of a loop its own copy of the slice of an intermediate it uses.

    ``tensor`` is an intermediate (not a kernel parameter, not already private) whose every
    access lies inside ``loop`` and has the loop's index itself as the same subscript ``d``.
    Then each iteration of ``loop`` reads and writes only its own slice ``d = i``, so no value
    flows between iterations, and the slice can be a private tensor allocated at the start of
    the loop's body (``\\alloc``, fresh per iteration) with dimension ``d`` dropped: the array
    contraction that keeps a row's intermediate in cache (softmax's ``exp(X - max)`` stored for
    the sum and the normalisation) instead of writing the whole tensor to memory and reading it
    back. A tensor read before it is written in an iteration would read another iteration's
    slice, or nothing: the recheck rejects it (E018). Only where the values live changes: bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}[L^{8}_{j=0}[D^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{i,j}+D^{f32,g}_{i,7-j};];];}
    Args: tensor=D loop=N0.i
    After: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}[\\alloc D^{f32,l}[8];L^{8}_{j=0}[D^{f32,l}_{j}=A^{f32,g}_{i,j}*2;];L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,l}_{j}+D^{f32,l}_{7-j};];];}
    """

    def _dim(self, ctx: Context, name: str, at: A.Loop) -> int:
        """The subscript of ``name`` that is ``at``'s index in every access, or NotApplicable."""
        info = ctx.result.tensors.get(name)
        if info is None:
            raise self.na(f"no tensor '{name}'")
        if info.role != "intermediate":
            raise self.na(f"'{name}' is a kernel {info.role}; parameters live in global memory")
        allocs = [(p, n) for p, n in iter_items(ctx.kernel) if isinstance(n, A.Alloc) and n.name == name]
        if any(len(p) > 1 for p, _ in allocs):
            raise self.na(f"'{name}' is already private to a loop")
        inside = _accesses(at, name)
        if not inside or len(inside) != len(_accesses(ctx.kernel, name)):
            raise self.na(f"'{name}' is used outside loop '{at.var}': its values live across the loop's iterations", at)
        dims = None
        for acc in inside:
            here = {d for d, i in enumerate(acc.indices) if isinstance(i, A.Var) and i.name == at.var}
            dims = here if dims is None else dims & here
        if not dims:
            raise self.na(f"no subscript of '{name}' is '{at.var}' in every access: iterations of '{at.var}' "
                          f"would share elements", at)
        return min(dims)

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        for lref, at, lpath in ctx.loops():  # only the anchors in focus (a cursor listing)
            for name in sorted(tensors_read(at) | tensors_written(at)):
                if not ctx.wants_tensor(name):
                    continue
                scopes = []
                for scope in ("l", "s"):
                    try:
                        self.plan(ctx, {"tensor": name, "loop": lref, "scope": scope})
                    except NotApplicable:
                        continue
                    scopes.append(scope)
                if scopes:
                    out.append(Site(self.name, {"tensor": name, "loop": lref}, {"scope": scopes},
                                    f"a private {name} per iteration of {lref}"))
        return out

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        at, lpath = loop_arg(self, ctx, args["loop"])
        name, scope = args["tensor"], args.get("scope", "l")
        d = self._dim(ctx, name, at)
        info = ctx.result.tensors[name]
        if info.shape is None:
            raise self.na(f"the shape of '{name}' is not known")
        shape = tuple(n for k, n in enumerate(info.shape) if k != d)

        def drop(e):
            if isinstance(e, A.Access) and e.name == name:
                return replace(e, scope=scope, indices=e.indices[:d] + e.indices[d + 1:])
            return e

        new_at = replace(at, body=(A.Alloc(name, info.dtype, scope, shape),) + tuple(map_expr(b, drop) for b in at.body))
        kernel = replace_at(ctx.kernel, lpath, new_at)
        top = tuple(it for it in kernel.body if not (isinstance(it, A.Alloc) and it.name == name))
        if len(top) != len(kernel.body):  # a declared intermediate: its declaration moves into the loop
            kernel = replace(kernel, body=top)
        ctx.recheck(self.name, kernel, at, message="the privatized program would not check: {code} {message}")
        return Rewrite(kernel, "bitwise")
