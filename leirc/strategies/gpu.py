"""CUDA schedule strategies.

* ``outer_fusion``: two consecutive nests share their outermost loop, their bodies run one
  after the other in each iteration. On a block-bound loop that puts the phases of a
  row-wise computation -- softmax's max, sum and normalisation, each a cross-thread
  reduction or a thread loop -- into one block per row: one launch instead of three, the
  row's partial results passed through memory the block shares, the barriers between the
  phases inserted by the lowering.
"""

from __future__ import annotations

from dataclasses import replace

from ..analysis.deps import may_touch, refs_of
from ..lang import ast as A
from .base import Arg, Context, NotApplicable, Rewrite, Site, Strategy, strategy
from .rewrite import ref_at, substitute


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
