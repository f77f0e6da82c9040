"""CUDA schedule strategies.

* ``outer_fusion``: two consecutive nests share their outermost loop, their bodies run one
  after the other in each iteration. On a block-bound loop that puts the phases of a
  row-wise computation -- softmax's max, sum and normalisation, each a cross-thread
  reduction or a thread loop -- into one block per row: one launch instead of three, the
  row's partial results passed through memory the block shares, the barriers between the
  phases inserted by the lowering.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from ..analysis.deps import may_touch, refs_of
from ..lang import ast as A
from ..lang.affine import affine
from ..lang.checker import SHARED_BYTES_LIMIT, binding_axis
from ..lang.types import DTYPE_BYTES
from .base import Arg, Context, NotApplicable, Rewrite, Site, Strategy, strategy
from .common import identity_const
from .rewrite import (
    add,
    divisors,
    find_loop,
    fresh_index,
    fresh_tensor,
    map_expr,
    mul,
    ref_at,
    replace_at,
    substitute,
    tensors_written,
)


def _statements(ctx: Context, item: A.Loop) -> list:
    """StmtInfos of the statements under the top-level loop ``item``."""
    return [si for si in ctx.result.stmts if si.loops and si.loops[0] is item]


@strategy("outer_fusion", level="graph", numerics="bitwise", creates=("fused",),
          args=[Arg("nest", "nest", "first of two consecutive nests whose outermost loops are fused")])
class OuterFusion(Strategy):
    """Fuse the outermost loops of two consecutive nests; their bodies stay as they are.

    ``K^{N}_{i=s} [body1]; K^{N}_{i2=s} [body2];`` becomes ``K^{N}_{i=s} [body1; body2];``
    (``i2`` renamed ``i``): the loops must have the same kind, extent and start, and a ``B``
    loop the same hardware axis. Every iteration then runs its part of the first nest, then
    its part of the second; that is the same computation iff the nests meet only within one
    iteration: no element touched by the first nest in iteration ``i`` and by the second in
    an iteration other than ``i``, with a write among the two (the dependence test with the
    two indices unequal must find no solution). Statement kinds (reduction, update) must not
    change, and nests holding private tensors are left alone. Each element is computed by the
    same operations on the same values: bitwise. On CUDA a fused block loop is one launch;
    the lowering separates the two bodies by a barrier.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4,8]){B^{4}_{bx=0}B^{8}_{tx=0}[D^{f32,g}_{bx}=D^{f32,g}_{bx}+A^{f32,g}_{bx,tx};];B^{4}_{bxa=0}B^{8}_{tx=0}[C^{f32,g}_{bxa,tx}=A^{f32,g}_{bxa,tx}/D^{f32,g}_{bxa};];}
    Args: nest=0
    After: \\kernel k(A:f32[4,8])->(C:f32[4,8]){B^{4}_{bx=0}[B^{8}_{tx=0}[D^{f32,g}_{bx}=D^{f32,g}_{bx}+A^{f32,g}_{bx,tx};];B^{8}_{tx=0}[C^{f32,g}_{bx,tx}=A^{f32,g}_{bx,tx}/D^{f32,g}_{bx};];];}
    """

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        for idx in ctx.nests(2):
            try:
                self.plan(ctx, {"nest": idx})
            except NotApplicable:
                continue
            a, b = ctx.kernel.body[idx], ctx.kernel.body[idx + 1]
            out.append(Site(self.name, {"nest": idx}, {}, f"fuse loops {a.var} and {b.var} of nests {idx} and {idx + 1}"))
        return out

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        idx = args["nest"]
        body = ctx.kernel.body
        if not 0 <= idx < len(body) - 1:
            raise self.na(f"no nests {idx} and {idx + 1} (the kernel has {len(body)} top-level items)")
        n1, n2 = body[idx], body[idx + 1]
        for n in (n1, n2):
            if not isinstance(n, A.Loop):
                raise self.na("both items must be loop nests", n)
            if any(isinstance(x, A.Alloc) for x in A.walk(n)):
                raise self.na("a nest holding private tensors (\\alloc) is not fused", n)
        if (n1.kind, n1.extent, n1.start) != (n2.kind, n2.extent, n2.start):
            raise self.na(f"the outermost loops differ: {A.LOOP_KIND_NAMES[n1.kind]} {n1.extent} from {n1.start} and "
                          f"{A.LOOP_KIND_NAMES[n2.kind]} {n2.extent} from {n2.start}", n1, n2)
        if n1.kind == "B" and n1.var[:2] != n2.var[:2]:
            raise self.na(f"'{n1.var}' and '{n2.var}' are bound to different axes", n1, n2)
        s1, s2 = _statements(ctx, n1), _statements(ctx, n2)
        for a in s1:
            for b in s2:
                for r1 in refs_of(a):
                    for r2 in refs_of(b):
                        if not (r1.is_write or r2.is_write) or r1.access.name != r2.access.name:
                            continue
                        if may_touch(r1.access, a.loops, r2.access, b.loops, [(n1, n2, "!=")]):
                            raise self.na(f"'{r1.access.name}' is touched by both nests in different iterations of "
                                          f"'{n1.var}' (with a write): fusing would reorder them", n1, n2)
        renamed = tuple(substitute(it, {n2.var: A.Var(n1.var)}) for it in n2.body) if n2.var != n1.var else n2.body
        fused = replace(n1, body=n1.body + renamed)
        kernel = replace(ctx.kernel, body=body[:idx] + (fused,) + body[idx + 2:])
        res = ctx.recheck(self.name, kernel, n1, n2, message="the fused program would not check: {code} {message}")
        before = [si.kind for si in s1 + s2]
        after = [si.kind for si in res.stmts if si.loops and si.loops[0] is kernel.body[idx]]
        if before != after:
            raise self.na("fusing would change what a statement means (its reduction or update kind)", n1, n2)
        return Rewrite(kernel, "bitwise", created={"fused": ref_at(kernel, (idx,))})


# ---------------------------------------------------------------------------
# shared_memory_tiling


def _axis_kind(lp: A.Loop) -> Optional[str]:
    ax = binding_axis(lp.var) if lp.kind == "B" else None
    return ax[0] if ax is not None else None


@dataclass(frozen=True)
class _Operand:
    """A read of the reduction whose subscripts depend on the reduction index: per
    dimension, the block-invariant part (block indices and constants) and the coefficients
    of the thread, inner and reduction indices (all non-negative)."""

    access: A.Access
    base: tuple  # per dimension: the block-invariant part of the subscript (an expression)
    coefs: tuple  # per dimension: {thread/inner/reduction var: coef}


@dataclass(frozen=True)
class _GemmForm:
    path: tuple
    blocks: tuple  # block-bound loops, outermost first
    threads: tuple  # thread-bound loops, outermost first
    acc: A.Alloc  # the per-thread accumulator
    red: A.Loop  # the serial reduction loop
    inner: tuple  # loops between the reduction loop and the statement
    stmt: A.Assign
    identity: object
    rest: tuple  # items after the accumulation nest (the write-back)
    operands: tuple  # _Operand, in the order they are read

    def extents(self) -> dict:
        return {l.var: l.extent for l in self.threads + self.inner}


def _gemm_form(strategy: Strategy, ctx: Context, ref: str) -> _GemmForm:
    """The -O2 CUDA GEMM form at block loop ``ref``, or NotApplicable saying what is missing."""
    try:
        lp, path = find_loop(ctx.kernel, ref)
    except (KeyError, ValueError, NotApplicable):
        raise strategy.na(f"no loop '{ref}'")
    if _axis_kind(lp) != "block":
        raise strategy.na(f"loop '{lp.var}' is not bound to a block axis (shared memory belongs to a block)", lp)
    blocks, threads, cur = [], [], lp
    while isinstance(cur, A.Loop) and _axis_kind(cur) == "block":
        blocks.append(cur)
        if len(cur.body) != 1:
            raise strategy.na(f"the block loops must hold one nest of thread loops; '{cur.var}' holds "
                              f"{len(cur.body)} items", cur)
        cur = cur.body[0]
    while isinstance(cur, A.Loop) and _axis_kind(cur) == "thread":
        threads.append(cur)
        if len(cur.body) == 1 and isinstance(cur.body[0], A.Loop) and _axis_kind(cur.body[0]) == "thread":
            cur = cur.body[0]
        else:
            break
    if not threads:
        raise strategy.na(f"no thread-bound loops directly under the block loops at '{lp.var}'", lp)
    if len(threads) > 2:
        raise strategy.na("at most two thread axes are supported (the cooperative loads are laid out over y and x)", lp)
    body = threads[-1].body
    if len(body) < 2 or not isinstance(body[0], A.Alloc) or body[0].scope != "l" or not isinstance(body[1], A.Loop):
        raise strategy.na("no private l accumulator (cache_write at the innermost thread loop) followed by the "
                          "reduction nest", threads[-1])
    acc, nest = body[0], body[1]
    chain = [nest]
    while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], A.Loop):
        chain.append(chain[-1].body[0])
    red = chain[0]
    stmts = chain[-1].body
    if len(stmts) != 1 or not isinstance(stmts[0], A.Assign) or stmts[0].target.name != acc.name:
        raise strategy.na(f"the nest under the accumulator '{acc.name}' must be one statement accumulating into it", nest)
    st = stmts[0]
    si = ctx.result.info(st)
    if si.kind != "reduce" or tuple(si.reduce_vars) != (red.var,):
        raise strategy.na(f"no reduction over loop '{red.var}' alone into '{acc.name}' (statement kind {si.kind})", st)
    if red.kind != "L" or red.start != 0:
        raise strategy.na(f"the reduction loop '{red.var}' must be a serial loop from 0", red)
    if si.identity is None or not math.isfinite(si.identity):
        raise strategy.na(f"the reduction operator {si.op} has no finite identity to initialise the tile with", st)
    if any(l.kind == "B" or l.start != 0 for l in chain[1:]):
        raise strategy.na("the loops inside the reduction loop must be ordinary loops from 0", nest)
    rest = body[2:]
    if any(isinstance(n, A.Var) and n.name == red.var for it in rest for n in A.walk(it)):
        raise strategy.na(f"the reduction index '{red.var}' is used after the reduction nest", nest)
    block_vars = {b.var for b in blocks}
    local_vars = {l.var for l in threads} | {l.var for l in chain}
    written = tensors_written(lp)
    operands = []
    for a in (n for n in A.walk(st.value) if isinstance(n, A.Access)):
        if a.name == acc.name or not any(isinstance(n, A.Var) and n.name == red.var for i in a.indices for n in A.walk(i)):
            continue
        if a.scope != "g" or (a.name in ctx.result.tensors and ctx.result.tensors[a.name].private):
            raise strategy.na(f"'{a.name}' is not in global memory", st)
        if a.name in written:
            raise strategy.na(f"'{a.name}' is written in this nest; a staged copy would be stale", st)
        base, coefs = [], []
        for sub in a.indices:
            # terms of block indices only (fused batch loops give bz//H, bz%H) stay as
            # written; the rest must be affine in the thread, inner and reduction indices
            fixed, loc = [], {}
            for sign, term in _terms(sub):
                names = {n.name for n in A.walk(term) if isinstance(n, A.Var)}
                if any(isinstance(n, A.Access) for n in A.walk(term)):
                    raise strategy.na(f"a subscript of '{a.name}' reads a tensor (indirect indexing)", st)
                if not names & local_vars:
                    fixed.append((sign, term))
                    continue
                f = affine(term)
                if f is None or f[1] or any(v not in local_vars for v in f[0]):
                    raise strategy.na(f"a subscript of '{a.name}' is not affine in the thread, inner and reduction "
                                      f"indices", st)
                for v, c in f[0].items():
                    loc[v] = loc.get(v, 0) + sign * c
            loc = {v: c for v, c in loc.items() if c}
            if any(c < 0 for c in loc.values()):
                raise strategy.na(f"a subscript of '{a.name}' decreases with a thread or inner loop index", st)
            base.append(_signed_sum(fixed))
            coefs.append(loc)
        operands.append(_Operand(a, tuple(base), tuple(coefs)))
    if not operands:
        raise strategy.na(f"no operand read depends on the reduction index '{red.var}'", st)
    return _GemmForm(tuple(path), tuple(blocks), tuple(threads), acc, red, tuple(chain[1:]), st, si.identity,
                     tuple(rest), tuple(operands))


def _tile_extents(form: _GemmForm, op: _Operand, kt: int) -> list[int]:
    ext = form.extents()
    ext[form.red.var] = kt
    return [1 + sum(c * (ext[v] - 1) for v, c in coefs.items()) for coefs in op.coefs]


def _load_layout(form: _GemmForm, extents: list[int]) -> Optional[list]:
    """How the block's threads cover a tile: per tile dimension kept (extent > 1), the
    thread loops and the repeat loop giving its subscript ``thread part + threads*r``;
    consecutive threads read consecutive elements of the last dimension (coalesced). None
    when the thread counts do not divide the tile."""
    dims = [d for d, e in enumerate(extents) if e > 1]
    th = form.threads
    if len(dims) == 1:
        total = math.prod(t.extent for t in th)
        return [(dims[0], th, total)] if extents[dims[0]] % total == 0 else None
    if len(dims) == 2:
        d0, d1 = dims
        if len(th) == 2:
            ok = extents[d0] % th[0].extent == 0 and extents[d1] % th[1].extent == 0
            return [(d0, (th[0],), th[0].extent), (d1, (th[1],), th[1].extent)] if ok else None
        return [(d0, (), 1), (d1, th, th[0].extent)] if extents[d1] % th[0].extent == 0 else None
    return None


def _tile_bytes(form: _GemmForm, kt: int) -> int:
    return sum(math.prod(_tile_extents(form, op, kt)) * DTYPE_BYTES[op.access.dtype] for op in form.operands)


def _kt_problem(form: _GemmForm, kt: int) -> Optional[str]:
    if kt < 1 or form.red.extent % kt:
        return f"kt={kt} does not divide the reduction loop '{form.red.var}' ({form.red.extent})"
    for op in form.operands:
        if _load_layout(form, _tile_extents(form, op, kt)) is None:
            shape = "x".join(map(str, _tile_extents(form, op, kt)))
            return (f"the {shape} tile of '{op.access.name}' cannot be loaded by the "
                    f"{'x'.join(str(t.extent) for t in form.threads)} threads one element each per step "
                    f"(the thread counts must divide the tile's two dimensions)")
    nbytes = _tile_bytes(form, kt)
    if nbytes > SHARED_BYTES_LIMIT:
        return f"the shared tiles take {nbytes} bytes with kt={kt}, more than the {SHARED_BYTES_LIMIT} bytes a block may use"
    return None


def _kt_domain(form: _GemmForm) -> list[int]:
    return [d for d in divisors(form.red.extent) if _kt_problem(form, d) is None]


def _terms(e: A.Expr, sign: int = 1) -> list:
    """``e`` as ``[(sign, term)]`` over its top-level ``+`` and ``-``."""
    if isinstance(e, A.BinOp) and e.op in ("+", "-"):
        return _terms(e.lhs, sign) + _terms(e.rhs, sign if e.op == "+" else -sign)
    return [(sign, e)]


def _signed_sum(terms) -> A.Expr:
    out: A.Expr = A.Const(0)
    for sign, term in terms:
        if sign > 0:
            out = add(out, term)
        else:
            out = A.BinOp("-", out, term)
    return out


def _linear(terms) -> A.Expr:
    """``sum(coef*expr)`` from ``[(coef, expr)]``, constants folded, zero terms dropped."""
    out: A.Expr = A.Const(0)
    for c, e in terms:
        if c:
            out = add(out, mul(e, A.Const(c)) if c != 1 else e)
    return out


@strategy("shared_memory_tiling", level="memory", numerics="bitwise", creates=("ko",),
          args=[Arg("loop", "loop", "outermost block-bound loop of a CUDA GEMM nest (block loops, thread loops, "
                                    "a private l accumulator, a serial reduction loop)"),
                Arg("kt", "int", "reduction slice staged in shared memory per step; divides the reduction loop",
                    default=16)])
class SharedMemoryTiling(Strategy):
    """Stage the block's operand tiles in shared memory, loaded cooperatively per ``kt``-slice.

    From ``B by B bx B ty B tx [ \\alloc D^{l}[..]; L^{K}_{k} inner [ D = D + ..A(k)..B(k)..; ]; rest ]``
    (the -O2 CUDA GEMM form): the reduction splits into ``ko`` (``K/kt`` steps, serial, inside
    the kernel) and ``ki``; every read whose subscripts depend on ``k`` (affine, non-negative
    in the thread and inner indices) gets an ``s`` tile holding its block footprint for one
    ``ko`` step, written by one nest over all the block's threads before the compute nest reads
    them (thread ``(ty, tx)`` copies elements ``ty + TY*r`` and ``tx + TX*c`` -- consecutive
    threads read consecutive addresses); the accumulator moves out of the thread loops with
    the thread indices as leading dimensions (each element still owned by one thread, see
    E048), is set to the reduction identity first and written back by the same rest. Under
    LEIR's sequential semantics each nest finishes before the next; on CUDA the lowering's
    barriers separate them. Each output adds the same products in the same ``k`` order:
    bitwise. The tiles must fit 48 KB and the thread counts must divide them.

    Before: \\kernel k(A:f32[8,8],B:f32[8,8])->(C:f32[8,8]){B^{2}_{by=0}B^{2}_{bx=0}B^{2}_{ty=0}B^{2}_{tx=0}[\\alloc D^{f32,l}[2,2];L^{8}_{k=0}L^{2}_{i=0}L^{2}_{j=0}[D^{f32,l}_{i,j}=D^{f32,l}_{i,j}+A^{f32,g}_{by*4+(ty*2+i),k}*B^{f32,g}_{k,bx*4+(tx*2+j)};];L^{2}_{i=0}L^{2}_{j=0}[C^{f32,g}_{by*4+(ty*2+i),bx*4+(tx*2+j)}=D^{f32,l}_{i,j};];];}
    Args: loop=N0.by kt=4
    After: \\kernel k(A:f32[8,8],B:f32[8,8])->(C:f32[8,8]){B^{2}_{by=0}B^{2}_{bx=0}[\\alloc E^{f32,s}[4,4];\\alloc F^{f32,s}[4,4];\\alloc D^{f32,l}[2,2,2,2];B^{2}_{ty=0}B^{2}_{tx=0}L^{2}_{i=0}L^{2}_{j=0}[D^{f32,l}_{ty,tx,i,j}=0.0;];L^{2}_{ko=0}[B^{2}_{ty=0}B^{2}_{tx=0}[U^{2}_{r=0}U^{2}_{c=0}[E^{f32,s}_{ty+r*2,tx+c*2}=A^{f32,g}_{by*4+(ty+r*2),ko*4+(tx+c*2)};];U^{2}_{r=0}U^{2}_{c=0}[F^{f32,s}_{ty+r*2,tx+c*2}=B^{f32,g}_{ko*4+(ty+r*2),bx*4+(tx+c*2)};];];B^{2}_{ty=0}B^{2}_{tx=0}L^{4}_{ki=0}L^{2}_{i=0}L^{2}_{j=0}[D^{f32,l}_{ty,tx,i,j}=D^{f32,l}_{ty,tx,i,j}+E^{f32,s}_{i+ty*2,ki}*F^{f32,s}_{ki,j+tx*2};];];B^{2}_{ty=0}B^{2}_{tx=0}L^{2}_{i=0}L^{2}_{j=0}[C^{f32,g}_{by*4+(ty*2+i),bx*4+(tx*2+j)}=D^{f32,l}_{ty,tx,i,j};];];}
    """

    def sites(self, ctx: Context) -> list[Site]:
        out = []
        for ref, lp, path in ctx.loops():
            if _axis_kind(lp) != "block" or any(_axis_kind(p) == "block" for p in _parents(ctx.kernel, path)):
                continue
            try:
                form = _gemm_form(self, ctx, ref)
            except NotApplicable:
                continue
            kts = _kt_domain(form)
            if kts:
                names = ", ".join(op.access.name for op in form.operands)
                out.append(Site(self.name, {"loop": ref}, {"kt": kts}, f"stage {names} in shared memory at {lp.var}"))
        return out

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        form = _gemm_form(self, ctx, args["loop"])
        kt = args["kt"]
        problem = _kt_problem(form, kt)
        if problem is not None:
            raise self.na(problem, form.red)
        kernel = ctx.kernel
        taken: set = set()

        def fresh_var(base):
            name = fresh_index(kernel, base, taken)
            taken.add(name)
            return name

        ko, ki = fresh_var(form.red.var + "o"), fresh_var(form.red.var + "i")
        split = {form.red.var: add(mul(A.Var(ko), A.Const(kt)), A.Var(ki))}
        thread_idx = tuple(A.Var(t.var) for t in form.threads)
        acc = form.acc

        def per_thread(node):
            def fn(e):
                if isinstance(e, A.Access) and e.name == acc.name:
                    return replace(e, indices=thread_idx + e.indices)
                return e
            return map_expr(node, fn)

        def under_threads(items) -> A.Loop:
            out = tuple(items)
            for t in reversed(form.threads):
                out = (replace(t, body=out),)
            return out[0]

        def chain(loops, items):
            out = tuple(items)
            for lp in reversed(loops):
                out = (replace(lp, body=out),)
            return out[0]

        reps_vars = (fresh_var("r"), fresh_var("c"))  # sibling load nests share them
        allocs, loads, staged = [], [], {}
        for op in form.operands:
            extents = _tile_extents(form, op, kt)
            layout = _load_layout(form, extents)
            name = fresh_tensor(kernel, taken)
            taken.add(name)
            kept = [d for d, e in enumerate(extents) if e > 1]
            allocs.append(A.Alloc(name, op.access.dtype, "s", tuple(extents[d] for d in kept)))
            rep_loops, tile_sub = [], {}
            for pos, (d, thr, step) in enumerate(layout):
                reps = extents[d] // step
                part = _linear([(c, A.Var(t.var)) for c, t in zip(_thread_strides(thr), thr)])
                if reps > 1:
                    r = reps_vars[pos]
                    rep_loops.append(A.Loop("U" if reps <= 8 else "L", reps, r, 0, ()))
                    part = add(part, mul(A.Var(r), A.Const(step)) if step != 1 else A.Var(r))
                tile_sub[d] = part
            glob = []
            for d, (fixed, coefs) in enumerate(zip(op.base, op.coefs)):
                kc = coefs.get(form.red.var, 0)
                g = add(fixed, mul(A.Var(ko), A.Const(kc * kt)) if kc else A.Const(0))
                glob.append(add(g, tile_sub[d]) if d in tile_sub else g)
            load = A.Assign(A.Access(name, op.access.dtype, "s", tuple(tile_sub[d] for d in kept)),
                            replace(op.access, indices=tuple(glob), span=None))
            loads.append(chain(rep_loops, [load]))
            local = [_linear([(c, A.Var(ki if v == form.red.var else v)) for v, c in sorted(coefs.items())])
                     for coefs in op.coefs]
            staged[op.access] = A.Access(name, op.access.dtype, "s", tuple(local[d] for d in kept))

        def stage(e):
            return staged.get(e, e)

        value = map_expr(form.stmt.value, stage)  # staged reads are matched before the split
        stmt = per_thread(substitute(replace(form.stmt, value=value), split))
        ident = identity_const(form.identity, acc.dtype)
        init = under_threads([chain(form.inner, [A.Assign(per_thread(form.stmt.target), ident)])])
        compute = under_threads([chain((replace(form.red, extent=kt, var=ki),) + form.inner, [stmt])])
        # one nest loads every tile: a single barrier between the loads and the compute
        red_loop = A.Loop("L", form.red.extent // kt, ko, 0, (under_threads(loads), compute))
        items = tuple(allocs) + (replace(acc, shape=tuple(t.extent for t in form.threads) + acc.shape), init, red_loop)
        if form.rest:
            items += (under_threads([per_thread(it) for it in form.rest]),)
        new_nest = chain(form.blocks, items)
        kernel = replace_at(kernel, form.path, new_nest)
        ctx.recheck(self.name, kernel, form.blocks[0], message="the shared-memory form would not check: {code} {message}")
        ko_path = form.path + (0,) * (len(form.blocks) - 1) + (len(allocs) + 2,)
        return Rewrite(kernel, "bitwise", created={"ko": ref_at(kernel, ko_path)})


def _thread_strides(threads) -> list[int]:
    """Coefficients of the thread indices in a linear thread id (the innermost varies fastest)."""
    out, stride = [], 1
    for t in reversed(threads):
        out.append(stride)
        stride *= t.extent
    return list(reversed(out))


def _parents(kernel: A.Kernel, path) -> list:
    out, node = [], kernel
    for i in path[:-1]:
        node = node.body[i]
        out.append(node)
    return out
