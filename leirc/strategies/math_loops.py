"""Math-level strategies on loops: running maxima, online softmax, flash attention.

These rewrite reductions into recurrences evaluated in loop order, using only what the
language defines (docs/language.md §6):

* a **scan** reads its own target at another subscript, ``F_{i,j} = max(if_then_else(j-1<0,
  -inf, F_{i,j-1}), A_{i,j})``; the guard is lazy, so the out-of-range read never happens;
* an **update** accumulates into a tensor written earlier, ``E_{i} = E_{i}*a + b`` after
  ``E_{i} = 0.0``; it has no identity initialization and runs in loop order.

Either way the checker marks the loops that carry the dependence (``StmtInfo.carried``),
so no later strategy can parallelize, vectorize or bind them (E040).

The online-softmax family keeps **running scalars per row** -- the state ``(m, l)`` of the
streaming softmax as two in-place updated tensors indexed like the row max -- instead of
the reference's prefix arrays, which materialize the whole history (a [16,16384] array per
statistic for softmax, 2 GiB for the reference's MHA example). The streaming body is::

    Mn_r = max(M_r, x);                                          # new running max
    E_r  = if_then_else(Mn_r == -inf, 0.0,
                        if_then_else(x > M_r, E_r*exp(M_r - x) + 1.0,   # the max grows
                                              E_r + exp(x - M_r)));     # it does not
    M_r  = Mn_r;

after ``M_r = -inf; E_r = 0.0;``. This is ``E*exp(M - Mn) + exp(x - Mn)`` with the factor
that is exactly 1 left out, so each element costs one ``exp`` (``if_then_else`` is lazy),
as in the two-pass original. Loop invariant (checked symbolically in the tests):
``E = sum_{k seen} exp(x_k - M)``. The outer guard keeps rows that start with ``-inf``
(masked scores) exact: without it ``exp(-inf - -inf)`` is NaN, while the three-pass
original is fine as long as some later score is finite. Rounding differs from the
three-pass form (``exact-in-reals``); a row whose scores are all ``-inf`` gives 0/0 = NaN
in both, a ``+inf`` score gives NaN in the original and a finite value here.

Not implemented: the reference's ``partially_equivalent_then_correct`` (two padded
convolutions sharing one weight, computed as one convolution over their inputs
concatenated along a spatial axis, then the outputs near the seam recomputed). Its
generator is a string pattern over exactly four nests (pad, conv, pad, conv) with the seam
width, stride and dilation handling hard-coded, no stdlib kernel or compat record has that
shape, and the construction could not be checked against a reference output; it is left
out of the registry rather than registered unverified. (Concatenating along the batch axis
needs no correction and is ``tensor_concat_to_fuse_operators``.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from ..lang import ast as A
from ..lang.checker import StmtInfo
from ..lang.printer import print_expr
from .base import Arg, Context, Rewrite, Site, Strategy, strategy
from .rewrite import find_stmt, fresh_index, fresh_tensor, iter_stmts, nest_chain, reads_of, substitute, tensors_read, \
    tensors_written

_MINF = A.Neg(A.Const(math.inf))

# ---------------------------------------------------------------------------
# helpers


def _chain_of(item) -> Optional[tuple[list[A.Loop], tuple]]:
    """(loops, body) of a perfect chain of loops, or None."""
    if not isinstance(item, A.Loop):
        return None
    ch = nest_chain(item)
    return ch, ch[-1].body


def _build(loops: list[A.Loop], body: tuple) -> A.Item:
    """Nest ``body`` in copies of ``loops`` (outermost first); no loops: the items."""
    node = tuple(body)
    for lp in reversed(loops):
        node = (A.Loop(lp.kind, lp.extent, lp.var, lp.start, node),)
    return node[0] if len(node) == 1 else node


def _items(loops, body) -> list:
    r = _build(loops, body)
    return list(r) if isinstance(r, tuple) else [r]


def _same_shape(a: A.Loop, b: A.Loop) -> bool:
    return (a.kind, a.extent, a.start) == (b.kind, b.extent, b.start)


def _rename(node, mapping: dict):
    return substitute(node, {k: A.Var(v) for k, v in mapping.items() if k != v})


def _ite(c, a, b) -> A.Call:
    return A.Call("if_then_else", (c, a, b))


def _eq(a, b) -> A.Compare:
    return A.Compare(("==",), (a, b))


def _exp(e) -> A.Call:
    return A.Call("exp", (e,))


def _sub(a, b) -> A.BinOp:
    return A.BinOp("-", a, b)


def _mul(a, b) -> A.BinOp:
    return A.BinOp("*", a, b)


def _add(a, b) -> A.BinOp:
    return A.BinOp("+", a, b)


def _candidate(s: Strategy, ctx: Context, kernel: A.Kernel) -> A.Kernel:
    """``kernel`` if it checks (remembered by ``ctx``: the engine's re-check is free)."""
    ctx.recheck(s.name, kernel, message="the rewritten program does not check: {code} {message}")
    return kernel


def _stmt(s: Strategy, ctx: Context, ref: str) -> tuple[A.Assign, tuple, StmtInfo]:
    try:
        st, path = find_stmt(ctx.kernel, ref)
    except KeyError:
        refs = ", ".join(r for r, _, _ in iter_stmts(ctx.kernel))
        raise s.na(f"no statement '{ref}' (statements: {refs})") from None
    return st, path, ctx.result.info(st)


def _alone(s: Strategy, ctx: Context, st: A.Assign, path: tuple, ref: str) -> list[A.Loop]:
    """The loop chain of the top-level nest that holds only ``st``."""
    ch = _chain_of(ctx.kernel.body[path[0]])
    if ch is None or len(ch[1]) != 1 or ch[1][0] is not st:
        raise s.na(f"{ref} must be the only statement of a perfect loop nest", st)
    return ch[0]


def _serial_reductions(s: Strategy, info: StmtInfo, ref: str) -> list[A.Loop]:
    red = [l for l in info.loops if l.var in info.reduce_vars]
    if not red:
        raise s.na(f"{ref} has no reduction loop", info.stmt)
    for l in red:
        if l.kind not in ("L", "U"):
            raise s.na(f"reduction loop '{l.var}' of {ref} is {A.LOOP_KIND_NAMES[l.kind]}; "
                       f"a recurrence needs a serial loop", l)
    return red


def _match_chain(loops: list[A.Loop], template: list[A.Loop]) -> Optional[dict]:
    """Renaming of ``loops``' indices to ``template``'s if the chains have the same shape."""
    if len(loops) != len(template) or not all(_same_shape(a, b) for a, b in zip(loops, template)):
        return None
    return {a.var: b.var for a, b in zip(loops, template)}


def _names_between(kernel: A.Kernel, lo: int, hi: int) -> tuple[set, set]:
    """(tensors read, tensors written) by the top-level items strictly between lo and hi."""
    r, w = set(), set()
    for it in kernel.body[lo + 1:hi]:
        r |= tensors_read(it)
        w |= tensors_written(it)
    return r, w


def _accesses(e) -> set:
    return {n.name for n in A.walk(e) if isinstance(n, A.Access)}


def _top(path) -> int:
    return path[0]


def _stmt_at_top(kernel: A.Kernel, idx: int) -> Optional[tuple[list[A.Loop], A.Assign]]:
    ch = _chain_of(kernel.body[idx])
    if ch is None or len(ch[1]) != 1 or not isinstance(ch[1][0], A.Assign):
        return None
    return ch[0], ch[1][0]


# ---------------------------------------------------------------------------
# normal_loop_max_to_prefix_max


@strategy("normal_loop_max_to_prefix_max", level="math", numerics="bitwise", creates=("scan:tensor",),
          args=[Arg("stmt", "stmt", "a max reduction X = max(X, e) alone in its loop nest, e.g. N0.S0")])
class NormalLoopMaxToPrefixMax(Strategy):
    """Turn a max reduction into a running-max scan and read its last element.

    ``M_{i} = max(M_{i}, x)`` over reduction loop ``j`` becomes the scan
    ``F_{i,j} = max(if_then_else(j-1<0, -inf, F_{i,j-1}), x)`` (a fresh prefix array ``F``
    with ``j`` appended to the subscript) followed by ``M_{i} = F_{i,N-1}`` in the spatial
    loops. ``F`` holds every prefix maximum, which is what a later streaming rewrite reads;
    it costs one array of the iteration space. The same ``max`` operations run on the same
    values in the same order (starting from ``-inf``, as the reduction's identity does), so
    the result is bitwise identical. Requires exactly one reduction loop, serial, starting
    at 0. The scan carries ``j`` (the checker marks it), so ``j`` can no longer be
    parallelized.

    Before: \\kernel k(A:f32[4,8])->(M:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[M^{f32,g}_{i}=max(M^{f32,g}_{i},A^{f32,g}_{i,j});];}
    Args: stmt=N0.S0
    After: \\kernel k(A:f32[4,8])->(M:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=max(if_then_else(j-1<0,-inf,C^{f32,g}_{i,j-1}),A^{f32,g}_{i,j});];L^{4}_{i=0}[M^{f32,g}_{i}=C^{f32,g}_{i,7};];}
    """

    def sites(self, ctx):
        out = []
        for ref, st, _ in ctx.stmts():
            info = ctx.result.info(st)
            if info.kind == "reduce" and info.op == "max":
                try:
                    self.check(ctx, {"stmt": ref})
                except Exception:
                    continue
                out.append(Site(self.name, {"stmt": ref}, {}, f"running max for {print_expr(st.target)}"))
        return out

    def _plan(self, ctx, args):
        ref = args["stmt"]
        st, path, info = _stmt(self, ctx, ref)
        if info.kind != "reduce" or info.op != "max" or info.operand is None:
            raise self.na(f"{ref} is not a max reduction X = max(X, e)", st)
        loops = _alone(self, ctx, st, path, ref)
        red = _serial_reductions(self, info, ref)
        if len(red) != 1:
            raise self.na(f"{ref} reduces over {len(red)} loops ({', '.join(l.var for l in red)}); "
                          f"a prefix array needs exactly one", st)
        r = red[0]
        if r.start != 0:
            raise self.na(f"reduction loop '{r.var}' starts at {r.start}; only loops starting at 0 are supported", r)
        return st, path, info, loops, r

    def plan(self, ctx, args):
        return Rewrite(self._rewrite(ctx, args), self.numerics)

    def _rewrite(self, ctx, args):
        st, path, info, loops, r = self._plan(ctx, args)
        t = st.target
        f = fresh_tensor(ctx.kernel)
        rv = A.Var(r.var)
        cur = A.Access(f, t.dtype, "g", t.indices + (rv,))
        prev = A.Access(f, t.dtype, "g", t.indices + (_sub(rv, A.Const(1)),))
        guard = A.Compare(("<",), (_sub(rv, A.Const(1)), A.Const(0)))
        run = _ite(guard, _MINF, prev)
        a, b = st.value.args
        is_x = isinstance(a, A.Access) and a.name == t.name and a.indices == t.indices
        value = A.Call("max", (run, b) if is_x else (a, run))
        scan = _build(loops, (A.Assign(cur, value),))
        last = A.Access(f, t.dtype, "g", t.indices + (A.Const(r.extent - 1),))
        copy = _items([l for l in loops if l is not r], (A.Assign(t, last),))
        body = list(ctx.kernel.body)
        body[path[0]:path[0] + 1] = [scan] + copy
        return _candidate(self, ctx, replace(ctx.kernel, body=tuple(body)))


# ---------------------------------------------------------------------------
# online softmax: plan and builders


@dataclass
class SoftmaxPlan:
    """A max reduction ``M = max(M, x)`` and a later ``E = E + exp(x - M)`` over loops of
    the same shape (indices renamed to the max nest's)."""

    max_idx: int
    sum_idx: int
    loops: list  # the max nest's chain
    red: list  # its reduction loops
    m: A.Access
    e: A.Access
    x: A.Expr

    @property
    def rows(self) -> list:
        return [l for l in self.loops if l not in self.red]


def _exp_diff(e: A.Expr) -> Optional[tuple[A.Expr, A.Expr]]:
    if isinstance(e, A.Call) and e.func == "exp" and isinstance(e.args[0], A.BinOp) and e.args[0].op == "-":
        return e.args[0].lhs, e.args[0].rhs
    return None


def softmax_plan(s: Strategy, ctx: Context, max_ref: str) -> SoftmaxPlan:
    st, path, info = _stmt(s, ctx, max_ref)
    if info.kind != "reduce" or info.op != "max" or info.operand is None:
        raise s.na(f"{max_ref} is not a max reduction M = max(M, x)", st)
    loops = _alone(s, ctx, st, path, max_ref)
    red = _serial_reductions(s, info, max_ref)
    m, x = st.target, info.operand
    k = ctx.kernel
    for j in range(path[0] + 1, len(k.body)):
        got = _stmt_at_top(k, j)
        if got is None:
            continue
        sl, ss = got
        si = ctx.result.info(ss)
        if si.kind != "reduce" or si.op != "+" or si.operand is None:
            continue
        ren = _match_chain(sl, loops)
        if ren is None:
            continue
        d = _exp_diff(_rename(si.operand, ren))
        if d is None or d[0] != x or d[1] != m:
            continue
        e = _rename(ss.target, ren)
        reads, writes = _names_between(k, path[0], j)
        clash = writes & (_accesses(x) | {m.name, e.name})
        if clash:
            raise s.na(f"nests between the max and the sum write {', '.join(sorted(clash))}", st)
        if e.name in reads:
            raise s.na(f"'{e.name}' is read between the max and the sum", st)
        if {ren[v] for v in si.reduce_vars} != {l.var for l in red}:
            continue
        return SoftmaxPlan(path[0], j, loops, red, m, e, x)
    raise s.na(f"no later sum E = E + exp({print_expr(x)} - {print_expr(m)}) over loops of the same shape", st)


def _state_access(name: str, like: A.Access) -> A.Access:
    return A.Access(name, like.dtype, like.scope, like.indices)


def _grows(p: SoftmaxPlan) -> A.Compare:
    return A.Compare((">",), (p.x, p.m))


def streaming_body(p: SoftmaxPlan, mn: A.Access) -> tuple:
    """``Mn = max(M, x); E = ...; M = Mn;`` with one exp per element: when x exceeds the
    running max, E*exp(M - Mn) + exp(x - Mn) is E*exp(M - x) + 1, else E + exp(x - M)."""
    grow = _ite(_grows(p), _add(_mul(p.e, _exp(_sub(p.m, p.x))), A.Const(1.0)), _add(p.e, _exp(_sub(p.x, p.m))))
    upd = _ite(_eq(mn, _MINF), A.Const(0.0), grow)
    return (A.Assign(mn, A.Call("max", (p.m, p.x))), A.Assign(p.e, upd), A.Assign(p.m, mn))


def init_body(p: SoftmaxPlan) -> tuple:
    return (A.Assign(p.m, _MINF), A.Assign(p.e, A.Const(0.0)))


def _online_rewrite(s: Strategy, ctx: Context, p: SoftmaxPlan) -> A.Kernel:
    mn = _state_access(fresh_tensor(ctx.kernel), p.m)
    init = _items(p.rows, init_body(p))
    stream = _items(p.loops, streaming_body(p, mn))
    body = list(ctx.kernel.body)
    del body[p.sum_idx]
    body[p.max_idx:p.max_idx + 1] = init + stream
    return _candidate(s, ctx, replace(ctx.kernel, body=tuple(body)))


def _softmax_sites(s: Strategy, ctx: Context) -> list[Site]:
    out = []
    for ref, st, _ in ctx.stmts():
        info = ctx.result.info(st)
        if info.kind == "reduce" and info.op == "max":
            try:
                s.check(ctx, {"stmt": ref})
            except Exception:
                continue
            out.append(Site(s.name, {"stmt": ref}, {}, f"{s.name} from the max {print_expr(st.target)}"))
    return out


_MAX_ARG = Arg("stmt", "stmt", "the row-max reduction M = max(M, x), e.g. N0.S0")


@strategy("normal_loop_summation_on_exp_to_prefix_summation_on_exp", level="math", numerics="exact-in-reals", creates=("next_max:tensor",),
          args=[_MAX_ARG])
class NormalLoopSummationOnExpToPrefixSummationOnExp(Strategy):
    """Fuse a max reduction and a later sum of ``exp(x - max)`` into one streaming pass with rescaling.

    ``M = max(M, x)`` and ``E = E + exp(x - M)`` (same loops) become, at the max's place,
    ``M = -inf; E = 0.0;`` over the spatial loops and, over the max's loops, the streaming
    update ``Mn = max(M, x); E = if_then_else(Mn == -inf, 0.0, if_then_else(x > M,
    E*exp(M - x) + 1.0, E + exp(x - M))); M = Mn;``: the running sum is rescaled by
    ``exp(M_old - M_new)`` whenever the running max grows (invariant
    ``E = sum exp(x_k - M)`` over the elements seen; the guard keeps rows that start with
    ``-inf`` exact). ``M`` and ``E`` end with the values the two passes
    computed (in real arithmetic), so every later reader is unchanged. Nothing between the
    two nests may write ``M``, ``E`` or the tensors ``x`` reads. The reduction loops must be
    serial; the updates carry them. State: one value per row for ``M`` and ``E`` and a
    fresh ``Mn`` (the reference keeps prefix arrays of the whole row instead).
    Exact in the reals: one pass over ``x`` instead of two, still one ``exp`` per element
    (the rescale factor is computed only when the max grows), different rounding of the sum.

    Before: \\kernel k(A:f32[4,8])->(E:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[M^{f32,g}_{i}=max(M^{f32,g}_{i},A^{f32,g}_{i,j});];L^{4}_{i=0}L^{8}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+exp(A^{f32,g}_{i,j}-M^{f32,g}_{i});];}
    Args: stmt=N0.S0
    After: \\kernel k(A:f32[4,8])->(E:f32[4]){L^{4}_{i=0}[M^{f32,g}_{i}=-inf;E^{f32,g}_{i}=0.0;];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=max(M^{f32,g}_{i},A^{f32,g}_{i,j});E^{f32,g}_{i}=if_then_else(C^{f32,g}_{i}==-inf,0.0,if_then_else(A^{f32,g}_{i,j}>M^{f32,g}_{i},E^{f32,g}_{i}*exp(M^{f32,g}_{i}-A^{f32,g}_{i,j})+1.0,E^{f32,g}_{i}+exp(A^{f32,g}_{i,j}-M^{f32,g}_{i})));M^{f32,g}_{i}=C^{f32,g}_{i};];}
    """

    def sites(self, ctx):
        return _softmax_sites(self, ctx)

    def plan(self, ctx, args):
        return Rewrite(self._rewrite(ctx, args), self.numerics)

    def _rewrite(self, ctx, args):
        return _online_rewrite(self, ctx, softmax_plan(self, ctx, args["stmt"]))


def _normalizer(s: Strategy, ctx: Context, p: SoftmaxPlan) -> tuple[int, list, A.Assign, dict]:
    """The first nest after the sum computing ``Y = exp(x - M)/E`` over the same loops
    (all spatial), as (index, loops, statement, renaming)."""
    k = ctx.kernel
    for j in range(p.sum_idx + 1, len(k.body)):
        got = _stmt_at_top(k, j)
        if got is None:
            continue
        loops, st = got
        ren = _match_chain(loops, p.loops)
        if ren is None:
            continue
        v = _rename(st.value, ren)
        if isinstance(v, A.BinOp) and v.op == "/" and v.rhs == p.e:
            d = _exp_diff(v.lhs)
            if d is not None and d[0] == p.x and d[1] == p.m and ctx.result.info(st).kind == "assign":
                _, writes = _names_between(k, p.sum_idx, j)
                clash = writes & (_accesses(p.x) | {p.m.name, p.e.name})
                if clash:
                    raise s.na(f"nests between the sum and the normalization write {', '.join(sorted(clash))}")
                return j, loops, st, ren
    raise s.na(f"no normalization Y = exp({print_expr(p.x)} - {print_expr(p.m)})/{print_expr(p.e)} after the sum")


@strategy("online_softmax", level="math", numerics="exact-in-reals", args=[_MAX_ARG], creates=("next_max:tensor",))
class OnlineSoftmax(Strategy):
    """Compute a softmax's max and normalizer in one streaming pass with rescaling, then divide.

    Applies to the three-pass softmax ``M = max(M, x)``; ``E = E + exp(x - M)``;
    ``Y = exp(x - M)/E`` (same loop shapes). The first two passes become the streaming
    update of ``normal_loop_summation_on_exp_to_prefix_summation_on_exp`` (running max and
    rescaled running sum, one value per row); the final division is
    unchanged and reads the final ``M`` and ``E``. On a softmax both strategies produce the
    same program; this one also requires (and so names) the normalization, and is the
    first step towards ``normal_matmul_to_prefix_matmul_based_on_online_softmax``. The
    reference instead materializes [rows, N] prefix arrays for the max and the sum and
    reads their last column; leirc keeps running scalars, which the language expresses with
    in-place updates after an explicit initialization. Exact in the reals: 2 passes over
    ``x`` instead of 3.

    Before: \\kernel k(A:f32[4,8])->(Y:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[M^{f32,g}_{i}=max(M^{f32,g}_{i},A^{f32,g}_{i,j});];L^{4}_{i=0}L^{8}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+exp(A^{f32,g}_{i,j}-M^{f32,g}_{i});];L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=exp(A^{f32,g}_{i,j}-M^{f32,g}_{i})/E^{f32,g}_{i};];}
    Args: stmt=N0.S0
    After: \\kernel k(A:f32[4,8])->(Y:f32[4,8]){L^{4}_{i=0}[M^{f32,g}_{i}=-inf;E^{f32,g}_{i}=0.0;];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=max(M^{f32,g}_{i},A^{f32,g}_{i,j});E^{f32,g}_{i}=if_then_else(C^{f32,g}_{i}==-inf,0.0,if_then_else(A^{f32,g}_{i,j}>M^{f32,g}_{i},E^{f32,g}_{i}*exp(M^{f32,g}_{i}-A^{f32,g}_{i,j})+1.0,E^{f32,g}_{i}+exp(A^{f32,g}_{i,j}-M^{f32,g}_{i})));M^{f32,g}_{i}=C^{f32,g}_{i};];L^{4}_{i=0}L^{8}_{j=0}[Y^{f32,g}_{i,j}=exp(A^{f32,g}_{i,j}-M^{f32,g}_{i})/E^{f32,g}_{i};];}
    """

    def sites(self, ctx):
        return _softmax_sites(self, ctx)

    def plan(self, ctx, args):
        return Rewrite(self._rewrite(ctx, args), self.numerics)

    def _rewrite(self, ctx, args):
        p = softmax_plan(self, ctx, args["stmt"])
        _normalizer(self, ctx, p)
        return _online_rewrite(self, ctx, p)


# ---------------------------------------------------------------------------
# P.V as a prefix matmul with running rescale (flash attention without tiling)


@dataclass
class PVPlan:
    """``O = O + P*w`` reducing over the softmax's reduction loop, P the normalized
    softmax; ``extra`` are O's other loops (spatial), renamed apart from the row loops."""

    idx: int
    o: A.Access
    w: A.Expr
    extra: list
    p_name: str


def _pv_plan(s: Strategy, ctx: Context, p: SoftmaxPlan, norm_idx: int, norm_st: A.Assign, norm_ren: dict,
             pv_ref: Optional[str] = None) -> PVPlan:
    k = ctx.kernel
    if len(p.red) != 1 or p.loops[-1] is not p.red[0]:
        raise s.na("the softmax must reduce over exactly one loop, the innermost one")
    rows, j = p.rows, p.red[0]
    ptgt = _rename(norm_st.target, norm_ren)
    if any(pp.name == ptgt.name for pp in k.outputs):
        raise s.na(f"'{ptgt.name}' is a kernel output; it cannot be eliminated")
    cands = range(norm_idx + 1, len(k.body))
    if pv_ref is not None:
        st0, path0, _ = _stmt(s, ctx, pv_ref)
        cands = [path0[0]] if path0[0] > norm_idx else []
    for idx in cands:
        got = _stmt_at_top(k, idx)
        if got is None:
            continue
        loops, st = got
        si = ctx.result.info(st)
        if si.kind != "reduce" or si.op != "+" or si.operand is None or len(si.reduce_vars) != 1:
            continue
        if len(loops) < len(rows) + 1 or not all(_same_shape(a, b) for a, b in zip(loops, rows)):
            continue
        rv = si.reduce_vars[0]
        jl = next(l for l in loops if l.var == rv)
        if not _same_shape(jl, j) or jl in loops[:len(rows)]:
            continue
        ren = {a.var: b.var for a, b in zip(loops, rows)}
        ren[rv] = j.var
        taken = {l.var for l in p.loops} | {l.var for l in loops}
        extra = []
        for l in loops[len(rows):]:
            if l.var == rv:
                continue
            nv = l.var if l.var not in {x.var for x in p.loops} else fresh_index(k, l.var, taken)
            taken.add(nv)
            ren[l.var] = nv
            extra.append(replace(l, var=nv, body=()))
        op = _rename(si.operand, ren)
        if not (isinstance(op, A.BinOp) and op.op == "*"):
            continue
        if op.lhs == ptgt:
            w = op.rhs
        elif op.rhs == ptgt:
            w = op.lhs
        else:
            continue
        if ptgt.name in _accesses(w):
            continue
        o = _rename(st.target, ren)
        users = [r for r, x, _ in iter_stmts(k) if x is not st and any(a.name == ptgt.name for a in reads_of(x, ptgt.name))]
        if users:
            raise s.na(f"'{ptgt.name}' is also read by {', '.join(users)}; it cannot be eliminated")
        reads, writes = _names_between(k, norm_idx, idx)
        clash = writes & (_accesses(w) | {p.m.name, p.e.name, ptgt.name, o.name})
        if clash or o.name in reads:
            raise s.na(f"nests between the normalization and the product touch {', '.join(sorted(clash or {o.name}))}")
        return PVPlan(idx, o, w, extra, ptgt.name)
    raise s.na(f"no reduction O = O + {ptgt.name}*w over '{j.var}' after the normalization {print_expr(norm_st.target)}")


def _pv_bodies(p: SoftmaxPlan, pv: PVPlan, mn: A.Access, al: A.Access, pj: A.Access):
    """(init items, streaming items, final items) for the fused P.V."""
    guard = _eq(mn, _MINF)
    init = tuple(init_body(p)) + tuple(_items(pv.extra, (A.Assign(pv.o, A.Const(0.0)),)))
    stream = (
        A.Assign(mn, A.Call("max", (p.m, p.x))),
        A.Assign(al, _ite(guard, A.Const(0.0), _ite(_grows(p), _exp(_sub(p.m, p.x)), A.Const(1.0)))),
        A.Assign(pj, _ite(guard, A.Const(0.0), _ite(_grows(p), A.Const(1.0), _exp(_sub(p.x, p.m))))),
        A.Assign(p.e, _add(_mul(p.e, al), pj)),
        *_items(pv.extra, (A.Assign(pv.o, _add(_mul(pv.o, al), _mul(pj, pv.w))),)),
        A.Assign(p.m, mn),
    )
    final = tuple(_items(pv.extra, (A.Assign(pv.o, A.BinOp("/", pv.o, p.e)),)))
    return init, stream, final


def _fresh3(kernel: A.Kernel, like: A.Access):
    n1 = fresh_tensor(kernel)
    n2 = fresh_tensor(kernel, {n1})
    n3 = fresh_tensor(kernel, {n1, n2})
    return _state_access(n1, like), _state_access(n2, like), _state_access(n3, like)


def _is_stream(loops, body, p: SoftmaxPlan, mn: A.Access) -> bool:
    return tuple(body) == streaming_body(p, mn)


def _find_online(s: Strategy, ctx: Context, norm_idx: int) -> tuple[SoftmaxPlan, int, int]:
    """Recognize the program online_softmax produced, before nest ``norm_idx``:
    ``rows [M = -inf; E = 0.0;]`` then ``rows j [Mn = max(M, x); E = ...; M = Mn;]``.
    Returns (plan, init index, stream index)."""
    k = ctx.kernel
    for si in range(norm_idx - 1, 0, -1):
        ch = _chain_of(k.body[si])
        if ch is None or len(ch[1]) != 3 or not all(isinstance(b, A.Assign) for b in ch[1]):
            continue
        loops, (s0, s1, s2) = ch
        if not (isinstance(s0.value, A.Call) and s0.value.func == "max" and len(s0.value.args) == 2):
            continue
        mn, (m, x) = s0.target, s0.value.args
        e = s1.target
        info = ctx.result.info(s1)
        red = [l for l in loops if l.var in info.reduce_vars]
        p = SoftmaxPlan(si, si, loops, red, m, e, x)
        if not _is_stream(loops, ch[1], p, mn):
            continue
        ich = _chain_of(k.body[si - 1])
        if ich is None or tuple(ich[1]) != init_body(p) or _match_chain(ich[0], p.rows) is None \
                or any(a.var != b.var for a, b in zip(ich[0], p.rows)):
            continue
        return p, si - 1, si
    raise s.na("no online-softmax streaming nest (apply online_softmax first)")


@strategy("normal_matmul_to_prefix_matmul_based_on_online_softmax", level="math", numerics="exact-in-reals", creates=("scale:tensor", "weight:tensor"),
          args=[Arg("stmt", "stmt", "the product O = O + P*w that consumes the normalized softmax P, e.g. N3.S0")])
class NormalMatmulToPrefixMatmulBasedOnOnlineSoftmax(Strategy):
    """Fold the normalized-softmax product ``O = O + P*w`` into the online-softmax stream (the P·V half of flash attention).

    The reference lists this strategy but has no generator; leirc defines it as the step
    after ``online_softmax``: given ``rows [M = -inf; E = 0.0;]``, the streaming nest
    ``rows j [Mn = max(M, x); E = ...; M = Mn;]``, the normalization ``P = exp(x - M)/E`` and
    the product ``O = O + P*w`` reducing over ``j``, the product is accumulated inside the
    stream with the running rescale and divided at the end::

        rows [M = -inf; E = 0.0; extra [O = 0.0;];]
        rows j [Mn = max(M, x); Al = exp(M - Mn); Pj = exp(x - Mn);  (one of them is 1:
                E = E*Al + Pj; extra [O = O*Al + Pj*w;]; M = Mn;]    computed lazily; 0 when Mn = -inf)
        rows extra [O = O/E;]

    ``P`` disappears (it must have no other reader and not be an output). Invariant:
    ``O = sum_k exp(x_k - M)*w_k``, so ``O/E`` is the normalized product. The updates carry
    ``j``. Exact in the reals: one pass instead of three, no [rows, N] probability array,
    a rescale multiply per output element and step.

    Before: \\kernel k(A:f32[4,8],V:f32[8,2])->(O:f32[4,2]){L^{4}_{i=0}[M^{f32,g}_{i}=-inf;E^{f32,g}_{i}=0.0;];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=max(M^{f32,g}_{i},A^{f32,g}_{i,j});E^{f32,g}_{i}=if_then_else(C^{f32,g}_{i}==-inf,0.0,if_then_else(A^{f32,g}_{i,j}>M^{f32,g}_{i},E^{f32,g}_{i}*exp(M^{f32,g}_{i}-A^{f32,g}_{i,j})+1.0,E^{f32,g}_{i}+exp(A^{f32,g}_{i,j}-M^{f32,g}_{i})));M^{f32,g}_{i}=C^{f32,g}_{i};];L^{4}_{i=0}L^{8}_{j=0}[P^{f32,g}_{i,j}=exp(A^{f32,g}_{i,j}-M^{f32,g}_{i})/E^{f32,g}_{i};];L^{4}_{i=0}L^{2}_{d=0}L^{8}_{j=0}[O^{f32,g}_{i,d}=O^{f32,g}_{i,d}+P^{f32,g}_{i,j}*V^{f32,g}_{j,d};];}
    Args: stmt=N3.S0
    After: \\kernel k(A:f32[4,8],V:f32[8,2])->(O:f32[4,2]){L^{4}_{i=0}[M^{f32,g}_{i}=-inf;E^{f32,g}_{i}=0.0;L^{2}_{d=0}[O^{f32,g}_{i,d}=0.0;];];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=max(M^{f32,g}_{i},A^{f32,g}_{i,j});D^{f32,g}_{i}=if_then_else(C^{f32,g}_{i}==-inf,0.0,if_then_else(A^{f32,g}_{i,j}>M^{f32,g}_{i},exp(M^{f32,g}_{i}-A^{f32,g}_{i,j}),1.0));F^{f32,g}_{i}=if_then_else(C^{f32,g}_{i}==-inf,0.0,if_then_else(A^{f32,g}_{i,j}>M^{f32,g}_{i},1.0,exp(A^{f32,g}_{i,j}-M^{f32,g}_{i})));E^{f32,g}_{i}=E^{f32,g}_{i}*D^{f32,g}_{i}+F^{f32,g}_{i};L^{2}_{d=0}[O^{f32,g}_{i,d}=O^{f32,g}_{i,d}*D^{f32,g}_{i}+F^{f32,g}_{i}*V^{f32,g}_{j,d};];M^{f32,g}_{i}=C^{f32,g}_{i};];L^{4}_{i=0}L^{2}_{d=0}[O^{f32,g}_{i,d}=O^{f32,g}_{i,d}/E^{f32,g}_{i};];}
    """

    def sites(self, ctx):
        out = []
        for ref, st, _ in ctx.stmts():
            info = ctx.result.info(st)
            if info.kind == "reduce" and info.op == "+":
                try:
                    self.check(ctx, {"stmt": ref})
                except Exception:
                    continue
                out.append(Site(self.name, {"stmt": ref}, {}, f"prefix product into {print_expr(st.target)}"))
        return out

    def plan(self, ctx, args):
        return Rewrite(self._rewrite(ctx, args), self.numerics)

    def _rewrite(self, ctx, args):
        st, path, _ = _stmt(self, ctx, args["stmt"])
        pv_idx = path[0]
        k = ctx.kernel
        # the normalization: the nest that writes the tensor multiplied here
        norm = None
        for j in range(pv_idx - 1, -1, -1):
            got = _stmt_at_top(k, j)
            if got is not None and ctx.result.info(got[1]).kind == "assign" and \
                    got[1].target.name in _accesses(st.value):
                norm = (j, got[0], got[1])
                break
        if norm is None:
            raise self.na(f"no normalized softmax feeds {args['stmt']}", st)
        p, init_idx, stream_idx = _find_online(self, ctx, norm[0])
        n_idx, n_loops, n_st = norm
        ren = _match_chain(n_loops, p.loops)
        if ren is None:
            raise self.na(f"the normalization {print_expr(n_st.target)} does not run over the softmax loops", st)
        v = _rename(n_st.value, ren)
        d = _exp_diff(v.lhs) if isinstance(v, A.BinOp) and v.op == "/" and v.rhs == p.e else None
        if d is None or d[0] != p.x or d[1] != p.m:
            raise self.na(f"{print_expr(n_st.target)} is not exp({print_expr(p.x)} - {print_expr(p.m)})/{print_expr(p.e)}", st)
        reads, writes = _names_between(k, stream_idx, n_idx)
        if writes & (_accesses(p.x) | {p.m.name, p.e.name}):
            raise self.na("nests between the stream and the normalization change its inputs", st)
        pv = _pv_plan(self, ctx, p, n_idx, n_st, ren, args["stmt"])
        mn = k.body[stream_idx]
        mn = nest_chain(mn)[-1].body[0].target
        al, pj, _ = _fresh3(k, p.m)
        init, stream, final = _pv_bodies(p, pv, mn, al, pj)
        body = list(k.body)
        new_items = {init_idx: _items(p.rows, init), stream_idx: _items(p.loops, stream),
                     pv.idx: _items(p.rows, final), n_idx: []}
        out = []
        for i, it in enumerate(body):
            out.extend(new_items[i] if i in new_items else [it])
        return _candidate(self, ctx, replace(k, body=tuple(out)))


def _producers(s: Strategy, ctx: Context, p: SoftmaxPlan) -> list[tuple[int, list, A.Assign]]:
    """Nests right before the max that compute, per (row, j), values the scores read:
    each a single statement over ``rows + j (+ inner loops)`` writing ``T_{rows, j}``.
    Returned outermost-first in program order, loops renamed to the softmax's."""
    k = ctx.kernel
    rows, j = p.rows, p.red[0]
    want = _accesses(p.x)
    out = []
    idx = p.max_idx - 1
    while idx >= 0:
        got = _stmt_at_top(k, idx)
        if got is None:
            break
        loops, st = got
        if len(loops) < len(rows) + 1 or not all(_same_shape(a, b) for a, b in zip(loops, rows + [j])):
            break
        ren = {a.var: b.var for a, b in zip(loops, rows + [j])}
        taken = {l.var for l in p.loops}
        inner = []
        for l in loops[len(rows) + 1:]:
            nv = l.var if l.var not in taken else fresh_index(k, l.var, taken)
            taken.add(nv)
            ren[l.var] = nv
            inner.append(replace(l, var=nv, body=()))
        st2 = _rename(st, ren)
        want_idx = tuple(A.Var(l.var) for l in rows + [j])
        info = ctx.result.info(st)
        if st2.target.indices != want_idx or st2.target.name not in want:
            break
        if info.kind not in ("assign", "reduce") or any(ren[v] not in {l.var for l in inner} for v in info.reduce_vars):
            break
        out.insert(0, (idx, inner, st2))
        want |= _accesses(st2.value)
        idx -= 1
    return out


@strategy("flashattention_wo_tiling", level="math", numerics="exact-in-reals", args=[_MAX_ARG],
          creates=("next_max:tensor", "scale:tensor", "weight:tensor"))
class FlashattentionWoTiling(Strategy):
    """Fuse attention scores, online softmax and the P·V product into one streaming nest per row (no tiling).

    Starts from the row max of a softmax over scores ``x`` (the ``stmt`` argument) and needs
    the three-pass softmax ``M``, ``E``, ``P = exp(x - M)/E`` and the product
    ``O = O + P*w`` reducing over the softmax loop ``j`` (the sdpa kernel shape). The nests
    right before the max that produce the scores per (row, j) -- the ``Q·K`` reduction and
    the scaling -- move into the loop over ``j``. Result, one nest over the rows::

        rows [ M = -inf; E = 0.0; extra [O = 0.0;];
               j [ <score producers>; Mn = max(M, x); Al = rescale; Pj = exp(x - Mn);
                   E = E*Al + Pj; extra [O = O*Al + Pj*w;]; M = Mn; ];
               extra [O = O/E;]; ];

    ``P`` disappears (no other reader, not an output); the scores keep their arrays. This is
    ``online_softmax`` followed by ``normal_matmul_to_prefix_matmul_based_on_online_softmax``
    plus the producer fusion, in one step. The updates carry ``j``; the row loops stay
    parallelizable. Exact in the reals: one pass over the keys, no [rows, N] probability
    array, different rounding.

    Before: \\kernel k(Q:f32[4,2],K:f32[8,2],V:f32[8,2])->(O:f32[4,2]){L^{4}_{i=0}L^{8}_{j=0}L^{2}_{d=0}[S^{f32,g}_{i,j}=S^{f32,g}_{i,j}+Q^{f32,g}_{i,d}*K^{f32,g}_{j,d};];L^{4}_{i=0}L^{8}_{j=0}[M^{f32,g}_{i}=max(M^{f32,g}_{i},S^{f32,g}_{i,j});];L^{4}_{i=0}L^{8}_{j=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+exp(S^{f32,g}_{i,j}-M^{f32,g}_{i});];L^{4}_{i=0}L^{8}_{j=0}[P^{f32,g}_{i,j}=exp(S^{f32,g}_{i,j}-M^{f32,g}_{i})/E^{f32,g}_{i};];L^{4}_{i=0}L^{2}_{d=0}L^{8}_{j=0}[O^{f32,g}_{i,d}=O^{f32,g}_{i,d}+P^{f32,g}_{i,j}*V^{f32,g}_{j,d};];}
    Args: stmt=N1.S0
    After: \\kernel k(Q:f32[4,2],K:f32[8,2],V:f32[8,2])->(O:f32[4,2]){L^{4}_{i=0}[M^{f32,g}_{i}=-inf;E^{f32,g}_{i}=0.0;L^{2}_{d=0}[O^{f32,g}_{i,d}=0.0;];L^{8}_{j=0}[L^{2}_{d=0}[S^{f32,g}_{i,j}=S^{f32,g}_{i,j}+Q^{f32,g}_{i,d}*K^{f32,g}_{j,d};];A^{f32,g}_{i}=max(M^{f32,g}_{i},S^{f32,g}_{i,j});C^{f32,g}_{i}=if_then_else(A^{f32,g}_{i}==-inf,0.0,if_then_else(S^{f32,g}_{i,j}>M^{f32,g}_{i},exp(M^{f32,g}_{i}-S^{f32,g}_{i,j}),1.0));D^{f32,g}_{i}=if_then_else(A^{f32,g}_{i}==-inf,0.0,if_then_else(S^{f32,g}_{i,j}>M^{f32,g}_{i},1.0,exp(S^{f32,g}_{i,j}-M^{f32,g}_{i})));E^{f32,g}_{i}=E^{f32,g}_{i}*C^{f32,g}_{i}+D^{f32,g}_{i};L^{2}_{d=0}[O^{f32,g}_{i,d}=O^{f32,g}_{i,d}*C^{f32,g}_{i}+D^{f32,g}_{i}*V^{f32,g}_{j,d};];M^{f32,g}_{i}=A^{f32,g}_{i};];L^{2}_{d=0}[O^{f32,g}_{i,d}=O^{f32,g}_{i,d}/E^{f32,g}_{i};];];}
    """

    def sites(self, ctx):
        return _softmax_sites(self, ctx)

    def plan(self, ctx, args):
        return Rewrite(self._rewrite(ctx, args), self.numerics)

    def _rewrite(self, ctx, args):
        k = ctx.kernel
        p = softmax_plan(self, ctx, args["stmt"])
        n_idx, n_loops, n_st, n_ren = _normalizer(self, ctx, p)
        pv = _pv_plan(self, ctx, p, n_idx, n_st, n_ren)
        prods = _producers(self, ctx, p)
        mn, al, pj = _fresh3(k, p.m)
        init, stream, final = _pv_bodies(p, pv, mn, al, pj)
        pre = tuple(x for _, inner, st in prods for x in _items(inner, (st,)))
        j = p.red[0]
        jloop = A.Loop(j.kind, j.extent, j.var, j.start, pre + tuple(stream))
        fused = _build(p.rows, tuple(init) + (jloop,) + tuple(final))
        drop = {i for i, _, _ in prods} | {p.max_idx, p.sum_idx, n_idx, pv.idx}
        first = min(drop)
        out = []
        for i, it in enumerate(k.body):
            if i == first:
                out.append(fused)
            if i not in drop:
                out.append(it)
        return _candidate(self, ctx, replace(k, body=tuple(out)))
