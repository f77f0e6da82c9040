"""Operator-level (loop schedule) strategies."""

from __future__ import annotations

from dataclasses import replace

from ..lang import ast as A
from ..lang.checker import check_kernel
from .base import Arg, Context, Site, Strategy, strategy
from .rewrite import add, divisors, find_loop, fresh_index, iter_loops, mul, replace_at, substitute, var


def _loop_arg(s: Strategy, ctx: Context, ref: str) -> tuple[A.Loop, tuple]:
    try:
        return find_loop(ctx.kernel, ref)
    except KeyError:
        refs = ", ".join(r for r, _, _ in iter_loops(ctx.kernel))
        raise s.na(f"no loop '{ref}' (loops: {refs})") from None


def _first_error(kernel: A.Kernel):
    res = check_kernel(kernel)
    return next((d for d in res.diagnostics if d.is_error), None)


@strategy("loop_split", level="operator", numerics="bitwise",
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
        for ref, lp, _ in iter_loops(ctx.kernel):
            if lp.start == 0 and lp.extent >= 4:
                ds = divisors(lp.extent, limit=8)
                if ds:
                    out.append(Site(self.name, {"loop": ref}, {"factor": ds}, f"split {lp.var} ({lp.extent})"))
        return out

    def check(self, ctx, args):
        lp, _ = _loop_arg(self, ctx, args["loop"])
        f = args["factor"]
        if lp.start != 0:
            raise self.na(f"loop '{lp.var}' starts at {lp.start}; only loops starting at 0 are split", lp)
        if f <= 1 or f >= lp.extent:
            raise self.na(f"factor {f} must be between 2 and {lp.extent - 1}", lp)
        if lp.extent % f:
            raise self.na(f"factor {f} does not divide extent {lp.extent} (guarded tails are not generated)", lp)

    def apply(self, ctx, args):
        lp, path = find_loop(ctx.kernel, args["loop"])
        f = args["factor"]
        outer = fresh_index(ctx.kernel, lp.var + "o")
        body = tuple(substitute(b, {lp.var: add(mul(var(outer), A.Const(f)), var(lp.var))}) for b in lp.body)
        inner = replace(lp, extent=f, body=body, span=None)
        new = A.Loop("L", lp.extent // f, outer, 0, (inner,))
        return replace_at(ctx.kernel, path, new)


class _KindChange(Strategy):
    """Shared implementation of the strategies that change a loop's kind."""

    to_kind = "L"
    max_extent = None

    def _candidate(self, ctx, lp, path):
        return replace_at(ctx.kernel, path, replace(lp, kind=self.to_kind))

    def sites(self, ctx):
        out = []
        for ref, lp, path in iter_loops(ctx.kernel):
            if lp.kind != "L" or lp.extent < 2:
                continue
            if self.max_extent and lp.extent > self.max_extent:
                continue
            if _first_error(self._candidate(ctx, lp, path)) is None:
                out.append(Site(self.name, {"loop": ref}, {}, f"{lp.var} ({lp.extent}) -> {self.to_kind}"))
        return out

    def check(self, ctx, args):
        lp, path = _loop_arg(self, ctx, args["loop"])
        if lp.kind != "L":
            raise self.na(f"loop '{lp.var}' is already {A.LOOP_KIND_NAMES[lp.kind]}", lp)
        if self.max_extent and lp.extent > self.max_extent:
            raise self.na(f"loop '{lp.var}' has {lp.extent} iterations; at most {self.max_extent} allowed", lp)
        d = _first_error(self._candidate(ctx, lp, path))
        if d is not None:
            raise self.na(d.message, lp)

    def apply(self, ctx, args):
        lp, path = find_loop(ctx.kernel, args["loop"])
        return self._candidate(ctx, lp, path)


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
