"""Graph-level (dataflow) strategies: fusing, splitting, inlining, hoisting, reordering
and deleting whole loop nests (Step-TP's graph group, reference notes §c.1).

Conventions shared by every strategy in this module:

* A **nest** is a top-level item of the kernel body, addressed by its position
  (``nest=2``). Most strategies need a *perfect* nest: a chain of loops whose innermost
  body holds only statements (``L^{4}_{i=0}L^{8}_{j=0}[S0;S1;];``). A bare top-level
  statement is a perfect nest without loops.
* A **sub-expression** is addressed by a statement reference and an *operation index*
  (``stmt=N1.S0 expr=2``). The operations of a right-hand side are its binary operators
  and calls (comparisons, negations, accesses and literals are not operations), numbered
  0, 1, 2, ... in pre-order: an operation before its operands, operands left to right;
  subscripts are not entered. ``expr=0`` is the root operation. In
  ``E = E + exp(A - D)`` the operations are ``0: E + exp(A-D)``, ``1: exp(A-D)``,
  ``2: A - D``. Site descriptions print the sub-expression, so nobody has to count.
* **Dependences.** Fusion and fission move statement instances across each other: two
  groups of statements under the same loops run either group after group or interleaved
  iteration by iteration. :func:`_may_reverse` decides, for every pair of accesses to the
  same tensor (one a write) from the two groups, whether an instance of the second group
  at iteration J can touch the element an instance of the first group touches at a
  *later* iteration I (J before I in lexicographic order). It asks the shared dependence
  analysis (:mod:`leirc.analysis.deps`) for the direction vectors of the pair: exact for
  affine and ``//``/``%`` subscripts, "any direction" for what it cannot solve, so the
  test never misses a dependence. Accesses at the same iteration (distance 0) keep their
  order, so they are fine.
* ``plan`` runs the checker on the rewritten program (through the context, so the
  engine's re-check of the same kernel is free), so a step that plans never makes
  ``apply_step`` raise StrategyBug. ``sites`` runs the same legality tests,
  and the checker too wherever the construction does not make a clean result evident
  (fusion, fission, inlining, concatenation); the tests apply every listed site of every
  stdlib kernel. New tensors get fresh Step-TP names
  (:func:`leirc.strategies.rewrite.fresh_tensor`) in global memory.

Numerics: all strategies here are bitwise (the same floating-point operations on the same
values, in the same order per element) except the reduction-axis form of
``tensor_split_to_decouple_operators``, which reassociates a reduction (exact in real
arithmetic). Generated code can still differ where a backend contracts ``a*b+c`` into
an FMA differently once an intermediate is inlined or hoisted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Optional

from ..lang import ast as A
from ..lang.affine import Facts, affine, dense_interval
from ..analysis.deps import EQ, GT, direction_vectors, find_conflict
from ..analysis.reductions import reduction_form as _reduction_form
from ..lang.printer import print_expr
from ..lang.types import expr_type
from .base import Arg, Context, NotApplicable, Rewrite, Site, Strategy, strategy
from .rewrite import (enclosing_loops, find_loop, find_stmt, fresh_index, fresh_tensor, iter_loops, iter_stmts, map_expr,
                      nest_chain, rename_tensor, replace_at, stmts_in, substitute, tensors_read, tensors_written)

# ---------------------------------------------------------------------------
# nests


def _nest_arg(s: Strategy, ctx: Context, idx: int):
    body = ctx.kernel.body
    if not 0 <= idx < len(body):
        raise s.na(f"no nest {idx} (the kernel has {len(body)} top-level nests, numbered from 0)")
    return body[idx]


def _perfect(item) -> Optional[tuple[list[A.Loop], list[A.Assign]]]:
    """(loops, statements) of a perfect nest, or None."""
    if isinstance(item, A.Assign):
        return [], [item]
    if not isinstance(item, A.Loop):
        return None
    loops = nest_chain(item)
    body = loops[-1].body
    if not body or not all(isinstance(b, A.Assign) for b in body):
        return None
    return loops, list(body)


def _require_perfect(s: Strategy, item, idx: int):
    p = _perfect(item)
    if p is None:
        raise s.na(f"nest {idx} is not a perfect loop nest (a chain of loops around statements only)", item)
    return p


def _headers(loops: Iterable[A.Loop]) -> str:
    return "".join(f"{l.kind}^{{{l.extent}}}_{{{l.var}={l.start}}}" for l in loops) or "(no loops)"


def _same_headers(l1: list[A.Loop], l2: list[A.Loop]) -> bool:
    return len(l1) == len(l2) and all((a.kind, a.extent, a.start) == (b.kind, b.extent, b.start) for a, b in zip(l1, l2))


def _build(loops: list[A.Loop], body) -> A.Loop | A.Assign:
    """A nest with the headers of ``loops`` (fresh nodes) around ``body``."""
    body = tuple(body)
    if not loops:
        assert len(body) == 1
        return body[0]
    node = None
    for lp in reversed(loops):
        node = A.Loop(lp.kind, lp.extent, lp.var, lp.start, body)
        body = (node,)
    return node


def _with_body(kernel: A.Kernel, start: int, stop: int, new_items) -> A.Kernel:
    """Replace top-level items ``start:stop`` by ``new_items``."""
    body = kernel.body[:start] + tuple(new_items) + kernel.body[stop:]
    return replace(kernel, body=body)


def _rename_vars(loops_from: list[A.Loop], loops_to: list[A.Loop]) -> dict:
    return {a.var: A.Var(b.var) for a, b in zip(loops_from, loops_to) if a.var != b.var}


def _validate(s: Strategy, ctx: Context, kernel: A.Kernel, *nodes) -> A.Kernel:
    """Run the checker on a rewritten kernel; a failure makes the step not applicable.
    ``ctx`` remembers the result: the engine's final re-check of this kernel is free."""
    ctx.recheck(s.name, kernel, *nodes, message="the rewritten program does not check: {code} {message}")
    return kernel


def _role(ctx: Context, name: str) -> str:
    info = ctx.result.tensors.get(name)
    return info.role if info is not None else "intermediate"


# ---------------------------------------------------------------------------
# accesses and dependences


def _accs(e) -> list[A.Access]:
    return [n for n in A.walk(e) if isinstance(n, A.Access)]


def _stmt_accesses(st: A.Assign) -> list[tuple[A.Access, bool]]:
    """Every access of a statement with a flag telling whether it is the write."""
    out = [(st.target, True)]
    for i in st.target.indices:
        out += [(a, False) for a in _accs(i)]
    out += [(a, False) for a in _accs(st.value)]
    return out


def _may_reverse(f: A.Access, g: A.Access, loops: list[A.Loop]) -> bool:
    """Can ``f`` at iteration I and ``g`` at iteration J touch the same element with J
    strictly before I (lexicographic order of ``loops``)? Never misses such a pair: the
    direction vectors come from the shared analysis (:mod:`leirc.analysis.deps`)."""
    if f.name != g.name or len(f.indices) != len(g.indices):
        return f.name == g.name
    vectors = direction_vectors(f, loops, g, loops, [(l, l) for l in loops])
    # the outermost loop whose index differs decides the order; GT: I's index is larger
    return any(next((rel for rel in vec if rel != EQ), EQ) == GT for vec in vectors)


def _group_conflict(first: list[A.Assign], second: list[A.Assign], loops: list[A.Loop]) -> Optional[str]:
    """Why running ``first`` and ``second`` (same loops) group after group is not the same
    as running them interleaved per iteration; None if it is."""
    a1 = [x for st in first for x in _stmt_accesses(st)]
    a2 = [x for st in second for x in _stmt_accesses(st)]
    for f, wf in a1:
        for g, wg in a2:
            if f.name != g.name or not (wf or wg):
                continue
            if _may_reverse(f, g, loops):
                kind = "writes" if wf else "reads"
                return (f"'{f.name}' is accessed by both parts in different iterations: {print_expr(f)} ({kind}) "
                        f"and {print_expr(g)} ({'writes' if wg else 'reads'}) may touch the same element, so the "
                        f"statement instances would be reordered across a dependence")
    return None


def _determined_vars(acc: A.Access, loops: list[A.Loop]) -> set:
    """Loop variables that the subscripts of ``acc`` determine uniquely: two iterations of
    ``loops`` touching the same element of ``acc`` agree on them."""
    vectors = direction_vectors(acc, loops, acc, loops, [(l, l) for l in loops])
    return {l.var for k, l in enumerate(loops) if all(vec[k] == EQ for vec in vectors)}


def _injective(acc: A.Access, loops: list[A.Loop]) -> bool:
    """Does every iteration of ``loops`` (extent > 1) touch a different element?"""
    det = _determined_vars(acc, loops)
    return all(l.var in det for l in loops if l.extent > 1)


def _reads_with_facts(st: A.Assign, loops: Iterable[A.Loop]) -> list[tuple[A.Access, Facts]]:
    """Every read of a statement with what the enclosing loops and if_then_else guards
    tell about the index variables there."""
    base = Facts({l.var: (l.start, l.start + l.extent - 1) for l in loops})
    out = []
    stack = [(st.value, base)] + [(i, base) for i in st.target.indices]
    while stack:
        n, f = stack.pop()
        if isinstance(n, A.Call) and n.func == "if_then_else":
            c, a, b = n.args
            stack += [(c, f), (a, f.assuming(c, True)), (b, f.assuming(c, False))]
            continue
        if isinstance(n, A.Access):
            out.append((n, f))
            stack += [(i, f) for i in n.indices]
            continue
        stack += [(ch, f) for ch in A.children(n)]
    return out


def _items_writing(kernel: A.Kernel, names: set, start: int, stop: int) -> Optional[int]:
    """First top-level item in ``start:stop`` writing one of ``names``."""
    for i in range(start, min(stop, len(kernel.body))):
        if tensors_written(kernel.body[i]) & names:
            return i
    return None


def _all_loop_stmts(kernel: A.Kernel):
    """(ref, statement, path, enclosing loops) for every statement, in program order."""
    for ref, st, path in iter_stmts(kernel):
        yield ref, st, path, enclosing_loops(kernel, path)


# ---------------------------------------------------------------------------
# sub-expressions


def _ops(e: A.Expr) -> list[tuple[A.Expr, bool]]:
    """The operations (BinOp and Call nodes) of ``e`` in pre-order, not entering subscripts,
    each with a flag telling whether it lies in a branch of an if_then_else."""
    out = []
    stack = [(e, False)]
    while stack:
        n, guarded = stack.pop()
        if isinstance(n, (A.BinOp, A.Call)):
            out.append((n, guarded))
        if isinstance(n, (A.Access, A.Const, A.Var)):
            continue
        kids = list(A.children(n))
        if isinstance(n, A.Call) and n.func == "if_then_else":
            flags = [guarded, True, True]
        else:
            flags = [guarded] * len(kids)
        for k, g in reversed(list(zip(kids, flags))):
            stack.append((k, g))
    return out


def _rebuild_expr(n: A.Expr, fn) -> A.Expr:
    """Top-down rewrite not entering subscripts: ``fn(node)`` returns a replacement (the
    node is then not descended into) or None."""
    r = fn(n)
    if r is not None:
        return r
    if isinstance(n, A.BinOp):
        return replace(n, lhs=_rebuild_expr(n.lhs, fn), rhs=_rebuild_expr(n.rhs, fn))
    if isinstance(n, A.Neg):
        return replace(n, operand=_rebuild_expr(n.operand, fn))
    if isinstance(n, A.Compare):
        return replace(n, operands=tuple(_rebuild_expr(o, fn) for o in n.operands))
    if isinstance(n, A.Call):
        return replace(n, args=tuple(_rebuild_expr(a, fn) for a in n.args))
    return n


def _replace_op(e: A.Expr, k: int, new: A.Expr) -> A.Expr:
    counter = [0]

    def fn(n):
        if isinstance(n, (A.BinOp, A.Call)):
            i = counter[0]
            counter[0] += 1
            if i == k:
                return new
        return None

    return _rebuild_expr(e, fn)


def _vars(e) -> set[str]:
    return {n.name for n in A.walk(e) if isinstance(n, A.Var)}


def _match(pattern: A.Expr, e: A.Expr, sigma: dict) -> bool:
    """Is ``e`` the ``pattern`` with its index variables renamed bijectively? Extends
    ``sigma`` (pattern var -> e var)."""
    if type(pattern) is not type(e):
        return False
    if isinstance(pattern, A.Var):
        have = sigma.get(pattern.name)
        if have is None:
            if e.name in sigma.values():
                return False
            sigma[pattern.name] = e.name
            return True
        return have == e.name
    if isinstance(pattern, A.Const):
        return pattern == e
    if isinstance(pattern, A.Access):
        return (pattern.name, pattern.dtype, pattern.scope, len(pattern.indices)) == (e.name, e.dtype, e.scope, len(e.indices)) \
            and all(_match(a, b, sigma) for a, b in zip(pattern.indices, e.indices))
    if isinstance(pattern, A.BinOp):
        return pattern.op == e.op and _match(pattern.lhs, e.lhs, sigma) and _match(pattern.rhs, e.rhs, sigma)
    if isinstance(pattern, A.Neg):
        return _match(pattern.operand, e.operand, sigma)
    if isinstance(pattern, A.Compare):
        return pattern.ops == e.ops and all(_match(a, b, sigma) for a, b in zip(pattern.operands, e.operands))
    if isinstance(pattern, A.Call):
        return pattern.func == e.func and len(pattern.args) == len(e.args) and \
            all(_match(a, b, sigma) for a, b in zip(pattern.args, e.args))
    return pattern == e


def _canonical(e: A.Expr) -> A.Expr:
    """``e`` with index variables renamed in order of first appearance (a matching key)."""
    order: dict = {}
    for n in A.walk(e):
        if isinstance(n, A.Var) and n.name not in order:
            order[n.name] = A.Var(f"%{len(order)}")
    return substitute(e, order) if order else e


def _hoistable(s: Strategy, ctx: Context, st: A.Assign, loops: list[A.Loop], k: int) -> A.Expr:
    """The k-th operation of ``st`` if it can be computed ahead of the statement."""
    ops = _ops(st.value)
    if not 0 <= k < len(ops):
        raise s.na(f"statement has {len(ops)} operations (expr 0..{len(ops) - 1}); expr={k} does not exist", st)
    e, guarded = ops[k]
    if k == 0:
        raise s.na("expr=0 is the whole right-hand side; there is nothing to split off", st)
    if guarded:
        raise s.na(f"'{print_expr(e)}' lies in a branch of an if_then_else; computing it everywhere could read out of bounds", st)
    t = expr_type(e)
    if t not in A.DTYPES or t == "bool":
        raise s.na(f"'{print_expr(e)}' has type {t}; only tensor-valued (non-boolean) sub-expressions are hoisted", st)
    if not _accs(e):
        raise s.na(f"'{print_expr(e)}' reads no tensor; it is a constant expression", st)
    if t != st.target.dtype:
        raise s.na(f"'{print_expr(e)}' has type {t} but the statement stores {st.target.dtype}; the literals in it "
                   f"would be evaluated in a different precision", st)
    return e


def _hoist_loops(loops: list[A.Loop], e: A.Expr) -> list[A.Loop]:
    used = _vars(e)
    return [l for l in loops if l.var in used]


def _hoist_nest(tensor: str, e: A.Expr, loops: list[A.Loop]):
    t = expr_type(e)
    target = A.Access(tensor, t, "g", tuple(A.Var(l.var) for l in loops))
    return _build(loops, [A.Assign(target, e)])


def _apply_hoist(kernel: A.Kernel, item: int, nest, edits: dict) -> A.Kernel:
    """Insert ``nest`` before top-level ``item`` and replace statements (path -> new)."""
    for path, new in edits.items():
        kernel = replace_at(kernel, path, new)
    return _with_body(kernel, item, item, [nest])


# ---------------------------------------------------------------------------
# operator_fusion


@strategy("operator_fusion", level="graph", numerics="bitwise",
          args=[Arg("nest", "nest", "first of the two consecutive nests to fuse"),
                Arg("local", "choice", "re-scope the intermediates used only inside the fused nest to local memory",
                    choices=("false", "true"), default="false")])
class OperatorFusion(Strategy):
    """Fuse two consecutive loop nests with identical loop headers into one nest.

    Both nests must be perfect with the same loop kinds, extents and starts (index names
    may differ; the second nest's are renamed to the first's). The fused body runs the
    first nest's statements, then the second's, in every iteration. That is legal only if
    no element is touched by the second nest in an earlier iteration than the first nest
    touches it (with a write among the two): typically the second nest reads the first's
    output at the same subscript (an elementwise producer), or the nests are independent.
    The test solves the subscript equations of every such pair of accesses for the
    iteration distance and assumes any distance where it cannot, so a producer that
    reduces over a loop, or a consumer that reads a later element, is rejected. With
    ``local=true``
    the intermediates whose every access is now inside the fused nest are re-scoped to
    local memory (scopes do not change values). Each element is computed by the same
    operations on the same values: bitwise.

    Before: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];L^{8}_{j=0}[C^{f32,g}_{j}=D^{f32,g}_{j}+1.0;];}
    Args: nest=0 local=true
    After: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,l}_{i}=A^{f32,g}_{i}*2.0;C^{f32,g}_{i}=D^{f32,l}_{i}+1.0;];}
    """

    def _plan(self, ctx, idx, local):
        body = ctx.kernel.body
        n1 = _nest_arg(self, ctx, idx)
        if idx + 1 >= len(body):
            raise self.na(f"nest {idx} is the last nest; there is no following nest to fuse with", n1)
        n2 = body[idx + 1]
        loops1, s1 = _require_perfect(self, n1, idx)
        loops2, s2 = _require_perfect(self, n2, idx + 1)
        if not loops1 or not loops2:
            raise self.na("a top-level statement without loops has nothing to fuse", n1 if not loops1 else n2)
        if not _same_headers(loops1, loops2):
            raise self.na(f"the loop headers differ: {_headers(loops1)} and {_headers(loops2)}", n1, n2)
        ren = _rename_vars(loops2, loops1)
        s2r = [substitute(st, ren) for st in s2] if ren else s2
        msg = _group_conflict(s1, s2r, loops1)
        if msg:
            raise self.na(msg, n1, n2)
        candidates = self._local_candidates(ctx, idx, s1, s2r)
        fused_body = list(s1) + list(s2r)
        if local == "true":
            if not candidates:
                raise self.na("no intermediate is written by the first nest, read by the second and used nowhere else; "
                              "nothing to re-scope (use local=false)", n1, n2)
            for name in candidates:
                fused_body = [rename_tensor(st, name, name, scope="l") for st in fused_body]
        new = _with_body(ctx.kernel, idx, idx + 2, [_build(loops1, fused_body)])
        return _validate(self, ctx, new, n1, n2), candidates

    def _local_candidates(self, ctx, idx, s1, s2) -> list[str]:
        written1 = {st.target.name for st in s1}
        read2 = set()
        for st in s2:
            read2 |= {a.name for a, w in _stmt_accesses(st) if not w}
        outside = set()
        for i, it in enumerate(ctx.kernel.body):
            if i not in (idx, idx + 1):
                outside |= tensors_read(it) | tensors_written(it)
        return sorted(n for n in written1 & read2
                      if _role(ctx, n) == "intermediate" and n not in outside and ctx.result.tensors[n].scope != "l")

    def sites(self, ctx):
        out = []
        for idx in ctx.nests(2):
            try:
                _, cands = self._plan(ctx, idx, "false")
            except NotApplicable:
                continue
            dom = ["false", "true"] if cands else ["false"]
            out.append(Site(self.name, {"nest": idx}, {"local": dom}, f"fuse nests {idx} and {idx + 1}"))
        return out

    def plan(self, ctx, args):
        return Rewrite(self._plan(ctx, args["nest"], args["local"])[0], self.numerics)


# ---------------------------------------------------------------------------
# operator_fission


@strategy("operator_fission", level="graph", numerics="bitwise",
          args=[Arg("nest", "nest", "nest whose body is split"),
                Arg("at", "int", "position of the first statement that moves to the second nest (1 .. statements-1)")])
class OperatorFission(Strategy):
    """Split the body of a perfect nest into two nests with the same loop headers.

    Statements ``0 .. at-1`` stay in the first nest, ``at ..`` move to a copy of the loops
    right after it (the inverse of operator_fusion). All instances of the first group then
    run before all instances of the second group, which is legal only if no statement of
    the second group touches, in an earlier iteration, an element that the first group
    touches later (with a write among the two); e.g. a running maximum read by the next
    statement in the same iteration cannot be split off. Values are unchanged: bitwise.

    Before: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;C^{f32,g}_{i}=D^{f32,g}_{i}+1.0;];}
    Args: nest=0 at=1
    After: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i}+1.0;];}
    """

    def _plan(self, ctx, idx, at):
        item = _nest_arg(self, ctx, idx)
        loops, stmts = _require_perfect(self, item, idx)
        if len(stmts) < 2:
            raise self.na(f"nest {idx} has a single statement; there is nothing to split", item)
        if not 1 <= at < len(stmts):
            raise self.na(f"at={at} must be between 1 and {len(stmts) - 1} (the body has {len(stmts)} statements)", item)
        msg = _group_conflict(stmts[:at], stmts[at:], loops)
        if msg:
            raise self.na(msg, item)
        new = _with_body(ctx.kernel, idx, idx + 1, [_build(loops, stmts[:at]), _build(loops, stmts[at:])])
        return _validate(self, ctx, new, item)

    def sites(self, ctx):
        out = []
        for idx, item in ((i, ctx.kernel.body[i]) for i in ctx.nests()):
            p = _perfect(item)
            if p is None or len(p[1]) < 2:
                continue
            site = self.site(ctx, {"nest": idx}, f"split the {len(p[1])} statements of nest {idx}",
                             lambda idx=idx, n=len(p[1]): {"at": self._ats(ctx, idx, n)})
            if site is not None:
                out.append(site)
        return out

    def _ats(self, ctx, idx: int, n: int) -> list[int]:
        ats = []
        for at in range(1, n):
            try:
                self._plan(ctx, idx, at)
                ats.append(at)
            except NotApplicable:
                pass
        return ats

    def plan(self, ctx, args):
        return Rewrite(self._plan(ctx, args["nest"], args["at"]), self.numerics)


# ---------------------------------------------------------------------------
# compute_inline


class _NestPlanStrategy(Strategy):
    """A strategy addressed by one top-level nest whose ``_plan(ctx, nest)`` both checks
    legality (raising NotApplicable) and returns the rewritten kernel (re-checked through
    ``ctx``, so the engine's own re-check is free)."""

    #: how many consecutive nests a site spans (1, or 2 for pairwise rewrites)
    span = 1

    def _describe(self, ctx, idx: int):
        """The site description, or None to skip nest ``idx`` without planning."""
        return f"nest {idx}"

    def sites(self, ctx):
        out = []
        for idx in ctx.nests(self.span):
            desc = self._describe(ctx, idx)
            if desc is None:
                continue
            try:
                self._plan(ctx, idx)
            except NotApplicable:
                continue
            out.append(Site(self.name, {"nest": idx}, {}, desc))
        return out

    def plan(self, ctx, args):
        return Rewrite(self._plan(ctx, args["nest"]), self.numerics)


@strategy("compute_inline", level="graph", numerics="bitwise",
          args=[Arg("nest", "nest", "producer nest: one plain assignment writing an intermediate")])
class ComputeInline(_NestPlanStrategy):
    """Substitute a producer's expression into every read of its intermediate and delete it.

    The producer is a perfect nest with one plain assignment ``T[v1+c1, v2+c2, ...] = e``
    (no accumulation) to an intermediate that no other statement writes; each subscript is
    one loop variable plus a constant, every loop variable of extent > 1 appears once, so a
    read ``T[x1, x2, ...]`` names the iteration ``v_k = x_k - c_k`` that wrote it. Each read
    is replaced by ``e`` with that substitution. Legal when every read stays inside the
    written box (proven from loop ranges and if_then_else guards) and no tensor that
    ``e`` reads is written between the producer and the last reader. The types must agree
    (``e``, ``T`` and every reading statement's target share one dtype) so that literals
    are evaluated in the same precision. The same operations run on the same values:
    bitwise (a backend may contract the inlined product into an FMA with the consumer).

    Before: \\kernel k(A:f32[9])->(C:f32[8]){L^{9}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];L^{8}_{j=0}[C^{f32,g}_{j}=D^{f32,g}_{j}+D^{f32,g}_{j+1};];}
    Args: nest=0
    After: \\kernel k(A:f32[9])->(C:f32[8]){L^{8}_{j=0}[C^{f32,g}_{j}=A^{f32,g}_{j}*2.0+A^{f32,g}_{j+1}*2.0;];}
    """

    def _plan(self, ctx, idx):
        kernel = ctx.kernel
        item = _nest_arg(self, ctx, idx)
        loops, stmts = _require_perfect(self, item, idx)
        if len(stmts) != 1:
            raise self.na(f"nest {idx} has {len(stmts)} statements; the producer must be a single assignment", item)
        st = stmts[0]
        t = st.target
        info = ctx.result.info(st)
        if info.kind != "assign":
            raise self.na(f"'{t.name}' is computed by a {info.kind}, not a plain assignment; its elements are final only "
                          f"after the loops finish", st)
        if _role(ctx, t.name) != "intermediate":
            raise self.na(f"'{t.name}' is a kernel {_role(ctx, t.name)}; only intermediates are inlined", st)
        writers = [s for s in stmts_in(kernel) if s.target.name == t.name]
        if len(writers) != 1:
            raise self.na(f"'{t.name}' is written by {len(writers)} statements; the producer must be its only writer", st)
        # invertible subscript: each dimension one distinct loop variable plus a constant
        loopvars = {l.var: l for l in loops}
        dims = []
        for k, ix in enumerate(t.indices):
            af = affine(ix)
            if af is None or len(af[0]) != 1 or list(af[0].values())[0] != 1:
                raise self.na(f"subscript {k + 1} of '{t.name}' ({print_expr(ix)}) is not a loop variable plus a "
                              f"constant, so a read does not name the iteration that wrote it", st)
            (v, _), = af[0].items()
            if v not in loopvars or v in (d[0] for d in dims):
                raise self.na(f"subscript {k + 1} of '{t.name}' repeats or does not use a loop variable", st)
            dims.append((v, af[1]))
        missing = [l.var for l in loops if l.extent > 1 and l.var not in (d[0] for d in dims)]
        if missing:
            raise self.na(f"loop(s) {', '.join(missing)} do not appear in the subscript of '{t.name}': elements are "
                          f"overwritten across iterations", st)
        rtype = expr_type(st.value)
        if rtype != t.dtype:
            raise self.na(f"the producer's value has type {rtype} but '{t.name}' is {t.dtype}; inlining would change "
                          f"where it is rounded", st)
        consts = {l.var: A.Const(l.start) for l in loops if l.var not in (d[0] for d in dims)}
        # readers
        readers = []
        for ref, rst, path, rloops in _all_loop_stmts(kernel):
            if path[0] == idx:
                continue
            reads = [(a, f) for a, f in _reads_with_facts(rst, rloops) if a.name == t.name]
            if not reads:
                continue
            if rst.target.dtype != t.dtype:
                raise self.na(f"{ref} stores {rst.target.dtype} but reads the {t.dtype} '{t.name}'; literals in the "
                              f"inlined expression would be evaluated in a different precision", rst)
            for a, f in reads:
                if f.infeasible():
                    continue
                for k, ((v, c), ix) in enumerate(zip(dims, a.indices)):
                    lp = loopvars[v]
                    iv = f.interval(ix)
                    lo, hi = lp.start + c, lp.start + lp.extent - 1 + c
                    if iv is None or iv[0] < lo or iv[1] > hi:
                        got = "an unbounded range" if iv is None else f"[{iv[0]}, {iv[1]}]"
                        raise self.na(f"{ref} reads '{t.name}' at subscript {k + 1} over {got}, outside the producer's "
                                      f"[{lo}, {hi}]", rst)
            readers.append((ref, rst, path))
        if not readers:
            raise self.na(f"'{t.name}' is never read; delete the nest with dead_code_elimination instead", st)
        last = max(p[0] for _, _, p in readers)
        srcs = {a.name for a in _accs(st.value)}
        w = _items_writing(kernel, srcs, idx + 1, last + 1)
        if w is not None:
            names = ", ".join(sorted(tensors_written(kernel.body[w]) & srcs))
            raise self.na(f"nest {w} writes {names}, which the producer reads, before the last read of '{t.name}'",
                          st, kernel.body[w])

        def inline(e):
            if isinstance(e, A.Access) and e.name == t.name:
                mapping = dict(consts)
                for (v, c), ix in zip(dims, e.indices):
                    mapping[v] = _minus_const(ix, c)
                return substitute(st.value, mapping)
            return e

        new = kernel
        for _, rst, path in readers:
            new = replace_at(new, path, map_expr(rst, inline))
        new = _with_body(new, idx, idx + 1, [])
        return _validate(self, ctx, new, st)

    def _describe(self, ctx, idx):
        p = _perfect(ctx.kernel.body[idx])
        if p is None or len(p[1]) != 1:
            return None
        return f"inline '{p[1][0].target.name}' into its readers"


def _minus_const(e: A.Expr, c: int) -> A.Expr:
    if c == 0:
        return e
    if isinstance(e, A.BinOp) and e.op in ("+", "-") and isinstance(e.rhs, A.Const) and e.rhs.is_int:
        k = e.rhs.value if e.op == "+" else -e.rhs.value
        k -= c
        if k == 0:
            return e.lhs
        return A.BinOp("+" if k > 0 else "-", e.lhs, A.Const(abs(k)))
    if isinstance(e, A.Const) and e.is_int and e.value - c >= 0:
        return A.Const(e.value - c)
    return A.BinOp("-" if c > 0 else "+", e, A.Const(abs(c)))


# ---------------------------------------------------------------------------
# expression_splitting and common_subexpression_elimination


def _stmt_arg(s: Strategy, ctx: Context, ref: str):
    try:
        st, path = find_stmt(ctx.kernel, ref)
    except KeyError:
        refs = ", ".join(r for r, _, _ in iter_stmts(ctx.kernel))
        raise s.na(f"no statement '{ref}' (statements: {refs})") from None
    return st, path, enclosing_loops(ctx.kernel, path)


@strategy("expression_splitting", level="graph", numerics="bitwise", creates=("value:tensor",),
          args=[Arg("stmt", "stmt", "statement holding the sub-expression, e.g. N1.S0"),
                Arg("expr", "int", "operation index of the sub-expression (pre-order over binary operators and calls, "
                                   "0 = root; see the module docstring)")])
class ExpressionSplitting(Strategy):
    """Compute a sub-expression ahead of its statement into a new intermediate.

    The sub-expression is operation ``expr`` of statement ``stmt``: the binary operators
    and calls of the right-hand side numbered in pre-order (an operation before its
    operands, left to right, subscripts not entered; 0 is the root), so in
    ``E = E + exp(A - D)`` expr=1 is ``exp(A - D)`` and expr=2 is ``A - D``. Site
    descriptions print the sub-expression. It is evaluated in a new
    nest placed right before the statement's nest, over the statement's loops whose
    variables it uses (in the same order and kinds), into a fresh global tensor indexed by
    those variables; the statement then reads that tensor. Legal when the sub-expression
    reads no tensor written anywhere in the statement's nest (so every instance sees the
    same values), is not under an if_then_else branch (it is evaluated everywhere), is
    tensor-valued and has the statement's dtype. Every instance computes the same
    operations on the same values and stores them exactly: bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=exp(A^{f32,g}_{i,0})*A^{f32,g}_{i,j};];}
    Args: stmt=N0.S0 expr=1
    After: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}[D^{f32,g}_{i}=exp(A^{f32,g}_{i,0});];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{i}*A^{f32,g}_{i,j};];}
    """

    def _plan(self, ctx, ref, k, build=True):
        st, path, loops = _stmt_arg(self, ctx, ref)
        e = _hoistable(self, ctx, st, loops, k)
        item = path[0]
        clash = {a.name for a in _accs(e)} & tensors_written(ctx.kernel.body[item])
        if clash:
            raise self.na(f"'{print_expr(e)}' reads {', '.join(sorted(clash))}, which nest {item} writes; it cannot be "
                          f"computed ahead of the nest", st)
        if not build:
            return None, e
        hl = _hoist_loops(loops, e)
        name = fresh_tensor(ctx.kernel)
        access = A.Access(name, expr_type(e), "g", tuple(A.Var(l.var) for l in hl))
        new_st = replace(st, value=_replace_op(st.value, k, access))
        return _apply_hoist(ctx.kernel, item, _hoist_nest(name, e, hl), {path: new_st}), name

    def sites(self, ctx):
        out = []
        for ref, st, path in ctx.stmts():
            for k in range(1, len(_ops(st.value))):
                try:
                    _, e = self._plan(ctx, ref, k, build=False)
                except NotApplicable:
                    continue
                out.append(Site(self.name, {"stmt": ref, "expr": k}, {}, f"split '{print_expr(e)}' out of {ref}"))
        return out

    def plan(self, ctx, args):
        new, name = self._plan(ctx, args["stmt"], args["expr"])
        return Rewrite(_validate(self, ctx, new), self.numerics, {"value": name})


@strategy("common_subexpression_elimination", level="graph", numerics="bitwise", creates=("value:tensor",),
          args=[Arg("stmt", "stmt", "statement with the first occurrence, e.g. N1.S0"),
                Arg("expr", "int", "operation index of the sub-expression in that statement (see expression_splitting)")])
class CommonSubexpressionElimination(Strategy):
    """Compute a repeated sub-expression once into a new intermediate and read it everywhere.

    The sub-expression (operation ``expr`` of ``stmt``) is computed as in
    expression_splitting, in a new nest before the statement's nest. Every occurrence of
    the same expression (up to a renaming of loop variables whose loops have the same
    extents and starts) in this and later statements is replaced by a read of the new
    tensor, up to the first later nest that writes a tensor the expression reads (after
    it the value differs). At least two occurrences are required. Bitwise: each
    occurrence read the value the new tensor stores.

    Before: \\kernel k(A:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=exp(A^{f32,g}_{i})+1.0;];L^{8}_{j=0}[D^{f32,g}_{j}=exp(A^{f32,g}_{j})*2.0;];}
    Args: stmt=N0.S0 expr=1
    After: \\kernel k(A:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[E^{f32,g}_{i}=exp(A^{f32,g}_{i});];L^{8}_{i=0}[C^{f32,g}_{i}=E^{f32,g}_{i}+1.0;];L^{8}_{j=0}[D^{f32,g}_{j}=E^{f32,g}_{j}*2.0;];}
    """

    def _plan(self, ctx, ref, k):
        kernel = ctx.kernel
        st, path, loops = _stmt_arg(self, ctx, ref)
        e = _hoistable(self, ctx, st, loops, k)
        item = path[0]
        srcs = {a.name for a in _accs(e)}
        clash = srcs & tensors_written(kernel.body[item])
        if clash:
            raise self.na(f"'{print_expr(e)}' reads {', '.join(sorted(clash))}, which nest {item} writes; it cannot be "
                          f"computed ahead of the nest", st)
        stop = _items_writing(kernel, srcs, item + 1, len(kernel.body))
        stop = len(kernel.body) if stop is None else stop
        hl = _hoist_loops(loops, e)
        ranges = {l.var: (l.extent, l.start) for l in hl}
        name = fresh_tensor(kernel)
        t = expr_type(e)
        edits, count, where = {}, 0, []
        for r2, st2, p2, loops2 in _all_loop_stmts(kernel):
            if not item <= p2[0] < stop:
                continue
            lmap = {l.var: (l.extent, l.start) for l in loops2}
            n = [0]

            def fn(node, lmap=lmap, n=n, st2=st2):
                if not isinstance(node, (A.BinOp, A.Call)):
                    return None
                sigma: dict = {}
                if not _match(e, node, sigma):
                    return None
                if any(lmap.get(sigma.get(v, v)) != ranges.get(v) for v in ranges) or st2.target.dtype != t:
                    return None
                n[0] += 1
                return A.Access(name, t, "g", tuple(A.Var(sigma.get(l.var, l.var)) for l in hl))

            new_value = _rebuild_expr(st2.value, fn)
            if n[0]:
                edits[p2] = replace(st2, value=new_value)
                count += n[0]
                where.append(r2)
        if count < 2:
            raise self.na(f"'{print_expr(e)}' occurs only once where its value is unchanged; use expression_splitting", st)
        return _apply_hoist(kernel, item, _hoist_nest(name, e, hl), edits), e, where, name

    def sites(self, ctx):
        out = []
        groups: dict = {}
        for ref, st, path in iter_stmts(ctx.kernel):
            for k, (e, _) in enumerate(_ops(st.value)):
                groups.setdefault(_canonical(e), []).append((ref, k))
        focused = {ref for ref, _, _ in ctx.stmts()} if ctx.focus is not None else None
        for key, occ in groups.items():
            if len(occ) < 2:
                continue
            if focused is not None:
                # only the occurrences up to the last one in focus decide its site (an
                # earlier site may cover it); groups without one are not planned at all
                last = max((i for i, (ref, _) in enumerate(occ) if ref in focused), default=None)
                if last is None:
                    continue
                occ = occ[:last + 1]
            covered: set = set()
            for ref, k in occ:
                if ref in covered:
                    continue
                try:
                    _, e, where, _ = self._plan(ctx, ref, k)
                except NotApplicable:
                    continue
                covered |= set(where)
                out.append(Site(self.name, {"stmt": ref, "expr": k}, {},
                                f"compute '{print_expr(e)}' once for {', '.join(where)}"))
        out.sort(key=lambda s: (_ref_key(s.fixed["stmt"]), s.fixed["expr"]))
        return out

    def plan(self, ctx, args):
        new, _, _, name = self._plan(ctx, args["stmt"], args["expr"])
        return Rewrite(_validate(self, ctx, new), self.numerics, {"value": name})


def _ref_key(ref: str):
    n, s = ref.split(".")
    return (int(n[1:]), int(s[1:]))


# ---------------------------------------------------------------------------
# tensor_concat_to_fuse_operators


def _skeleton(e1: A.Expr, e2: A.Expr, holes: list) -> bool:
    """Do e1 and e2 apply the same operators to possibly different tensor accesses?
    Collects the differing access pairs in ``holes``."""
    if isinstance(e1, A.Access) and isinstance(e2, A.Access):
        if e1 == e2:
            return True
        if e1.dtype != e2.dtype:
            return False
        if (e1, e2) not in holes:
            holes.append((e1, e2))
        return True
    if type(e1) is not type(e2):
        return False
    if isinstance(e1, (A.Const, A.Var)):
        return e1 == e2
    if isinstance(e1, A.BinOp):
        return e1.op == e2.op and _skeleton(e1.lhs, e2.lhs, holes) and _skeleton(e1.rhs, e2.rhs, holes)
    if isinstance(e1, A.Neg):
        return _skeleton(e1.operand, e2.operand, holes)
    if isinstance(e1, A.Compare):
        return e1.ops == e2.ops and all(_skeleton(a, b, holes) for a, b in zip(e1.operands, e2.operands))
    if isinstance(e1, A.Call):
        return e1.func == e2.func and len(e1.args) == len(e2.args) and \
            all(_skeleton(a, b, holes) for a, b in zip(e1.args, e2.args))
    return False


@strategy("tensor_concat_to_fuse_operators", level="graph", numerics="bitwise", creates=("concat:tensor", "result:tensor"),
          args=[Arg("nest", "nest", "first of two consecutive nests computing the same operator on different tensors")])
class TensorConcatToFuseOperators(_NestPlanStrategy):
    """Compute the same operator on two sets of inputs once, on their concatenation.

    Two consecutive perfect nests with identical headers, one plain assignment each,
    ``C = f(A, ...)`` and ``D = f(B, ...)``, where the two right-hand sides apply the
    same operators and differ only in which tensors they read (same dtypes), and neither
    reads or writes what the other writes. Each pair of differing reads is copied into a
    new tensor with a leading axis of 2 (``X[0,...] = A``, ``X[1,...] = B``), one nest over
    a new outer loop ``s`` of extent 2 computes ``Y[s,...] = f(X[s,...], ...)``, and a last
    nest copies ``Y[0,...]`` into C and ``Y[1,...]`` into D. The new tensors are indexed by
    the loop variables. Every element is computed by the same operations on the same values
    and copied exactly: bitwise.

    Before: \\kernel k(A:f32[8],B:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=exp(A^{f32,g}_{i})*2.0;];L^{8}_{j=0}[D^{f32,g}_{j}=exp(B^{f32,g}_{j})*2.0;];}
    Args: nest=0
    After: \\kernel k(A:f32[8],B:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[E^{f32,g}_{0,i}=A^{f32,g}_{i};E^{f32,g}_{1,i}=B^{f32,g}_{i};];L^{2}_{s=0}L^{8}_{i=0}[F^{f32,g}_{s,i}=exp(E^{f32,g}_{s,i})*2.0;];L^{8}_{i=0}[C^{f32,g}_{i}=F^{f32,g}_{0,i};D^{f32,g}_{i}=F^{f32,g}_{1,i};];}
    """

    def _plan(self, ctx, idx):
        kernel = ctx.kernel
        n1 = _nest_arg(self, ctx, idx)
        if idx + 1 >= len(kernel.body):
            raise self.na(f"nest {idx} is the last nest; there is no second operator", n1)
        n2 = kernel.body[idx + 1]
        loops, s1 = _require_perfect(self, n1, idx)
        loops2, s2 = _require_perfect(self, n2, idx + 1)
        if len(s1) != 1 or len(s2) != 1:
            raise self.na("both nests must hold exactly one statement", n1, n2)
        if not loops or not _same_headers(loops, loops2):
            raise self.na(f"the loop headers differ: {_headers(loops)} and {_headers(loops2)}", n1, n2)
        a, b = s1[0], substitute(s2[0], _rename_vars(loops2, loops))
        for st, orig in ((a, s1[0]), (b, s2[0])):
            kind = ctx.result.info(orig).kind
            if kind != "assign":
                raise self.na(f"'{st.target.name}' is computed by a {kind}; only plain assignments are concatenated", orig)
        if a.target.name == b.target.name:
            raise self.na(f"both nests write '{a.target.name}'", n1, n2)
        if a.target.dtype != b.target.dtype:
            raise self.na(f"'{a.target.name}' is {a.target.dtype} but '{b.target.name}' is {b.target.dtype}", n1, n2)
        reads_a = {x.name for x, w in _stmt_accesses(a) if not w}
        reads_b = {x.name for x, w in _stmt_accesses(b) if not w}
        if a.target.name in reads_b or b.target.name in reads_a:
            raise self.na("the nests depend on each other; concatenation computes both at once", n1, n2)
        if any(_accs(i) for i in a.target.indices + b.target.indices):
            raise self.na("data-dependent target subscripts are not supported", n1, n2)
        if isinstance(a.value, A.Access):
            raise self.na("the statements are copies; there is no operator to share", n1, n2)
        holes: list = []
        if not _skeleton(a.value, b.value, holes):
            raise self.na("the right-hand sides do not apply the same operators", n1, n2)
        if not holes:
            raise self.na("both statements compute the same values; use common_subexpression_elimination", n1, n2)
        taken: set = set()
        s = fresh_index(kernel, "s")
        iv = tuple(A.Var(l.var) for l in loops)
        copies, mapping = [], {}
        for h1, h2 in holes:
            x = fresh_tensor(kernel, taken)
            taken.add(x)
            copies.append(A.Assign(A.Access(x, h1.dtype, "g", (A.Const(0),) + iv), h1))
            copies.append(A.Assign(A.Access(x, h1.dtype, "g", (A.Const(1),) + iv), h2))
            mapping[h1] = A.Access(x, h1.dtype, "g", (A.Var(s),) + iv)
        y = fresh_tensor(kernel, taken)
        dt = a.target.dtype

        def fn(node):
            return mapping.get(node) if isinstance(node, A.Access) else None

        compute = A.Assign(A.Access(y, dt, "g", (A.Var(s),) + iv), _rebuild_expr(a.value, fn))
        outs = [A.Assign(a.target, A.Access(y, dt, "g", (A.Const(0),) + iv)),
                A.Assign(b.target, A.Access(y, dt, "g", (A.Const(1),) + iv))]
        new_items = [_build(loops, copies), _build([A.Loop("L", 2, s, 0, ())] + loops, [compute]), _build(loops, outs)]
        new = _with_body(kernel, idx, idx + 2, new_items)
        return _validate(self, ctx, new, n1, n2)

    span = 2

    def _describe(self, ctx, idx):
        return f"concatenate the inputs of nests {idx} and {idx + 1}"


# ---------------------------------------------------------------------------
# tensor_split_to_decouple_operators


@strategy("tensor_split_to_decouple_operators", level="graph", numerics="exact-in-reals", creates=("first:tensor", "second:tensor"),
          args=[Arg("loop", "loop", "loop to split, e.g. N0.tx"),
                Arg("at", "int", "split point: the first piece runs the first `at` iterations")])
class TensorSplitToDecoupleOperators(Strategy):
    """Split a single-statement nest at a point of one loop into independent pieces.

    The nest must be perfect with one statement. Two forms, chosen by the loop:

    * **spatial** loop (its variable indexes the target, or the statement is a plain
      assignment): two nests over ``[0, at)`` and ``[at, extent)`` (the second substitutes
      ``v+at`` for ``v``). The pieces run one after the other, so the loops enclosing the
      split loop must carry no dependence (the checker's dependence test). When the
      statement is a reduction, the second piece accumulates into a fresh tensor that a
      third nest copies into the target (a second accumulation into the target would not
      start from the identity). Bitwise.
    * **reduction** loop of ``X = X op e`` (op + - * max min): two partial reductions
      into fresh tensors over the two ranges, then ``X = P1 op P2`` (or
      ``X = X op (P1 op P2)`` for an in-place update) over the target's loops, which must
      determine the target element uniquely. Exact in real arithmetic (reassociated).

    Before: \\kernel k(A:f32[8,4])->(C:f32[8]){L^{8}_{i=0}L^{4}_{k=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,k};];}
    Args: loop=N0.k at=2
    After: \\kernel k(A:f32[8,4])->(C:f32[8]){L^{8}_{i=0}L^{2}_{k=0}[D^{f32,g}_{i}=D^{f32,g}_{i}+A^{f32,g}_{i,k};];L^{8}_{i=0}L^{2}_{k=0}[E^{f32,g}_{i}=E^{f32,g}_{i}+A^{f32,g}_{i,k+2};];L^{8}_{i=0}[C^{f32,g}_{i}=D^{f32,g}_{i}+E^{f32,g}_{i};];}
    """

    def _target(self, ctx, ref):
        try:
            lp, path = find_loop(ctx.kernel, ref)
        except KeyError:
            refs = ", ".join(r for r, _, _ in iter_loops(ctx.kernel))
            raise self.na(f"no loop '{ref}' (loops: {refs})") from None
        idx = path[0]
        item = ctx.kernel.body[idx]
        loops, stmts = _require_perfect(self, item, idx)
        if len(stmts) != 1:
            raise self.na(f"nest {idx} has {len(stmts)} statements; only single-statement nests are split", item)
        pos = next(i for i, l in enumerate(loops) if l is lp)
        return idx, item, loops, pos, stmts[0]

    def _mode(self, ctx, ref):
        idx, item, loops, pos, st = self._target(ctx, ref)
        info = ctx.result.info(st)
        return "reduction" if loops[pos].var in info.reduce_vars else "spatial"

    def _plan(self, ctx, ref, at, build=True):
        kernel = ctx.kernel
        idx, item, loops, pos, st = self._target(ctx, ref)
        lp = loops[pos]
        if not 1 <= at < lp.extent:
            raise self.na(f"at={at} must be between 1 and {lp.extent - 1} (loop '{lp.var}' has {lp.extent} iterations)", lp)
        info = ctx.result.info(st)
        v = lp.var
        shift = {v: A.BinOp("+", A.Var(v), A.Const(at))}  # offsets folded by _fold_offsets
        first = [replace(l, extent=at) if i == pos else l for i, l in enumerate(loops)]
        second = [replace(l, extent=lp.extent - at) if i == pos else l for i, l in enumerate(loops)]
        if v not in info.reduce_vars:
            for outer in loops[:pos]:
                if outer.extent > 1 and find_conflict(outer, [info]) is not None:
                    raise self.na(f"loop '{outer.var}' encloses '{v}' and carries a dependence; the two pieces would "
                                  f"reorder its iterations", outer)
            if not build:
                return None
            if info.kind == "reduce":
                p = fresh_tensor(kernel)
                part = _retarget(_fold_offsets(substitute(st, shift)), p, st.target.indices)
                copy_loops = [l for l in second if l.var in _index_vars(st.target)]
                copy = A.Assign(_fold_offsets(substitute(st.target, shift)), A.Access(p, st.target.dtype, "g", st.target.indices))
                items = [_build(first, [st]), _build(second, [part]), _build(copy_loops, [copy])]
            else:
                items = [_build(first, [st]), _build(second, [_fold_offsets(substitute(st, shift))])]
        else:
            if info.kind not in ("reduce", "update"):
                raise self.na(f"'{v}' is not a reduction loop of a reduction or update (statement kind {info.kind})", st)
            form = _reduction_form(st)
            if form is None or form[1] is None:
                raise self.na("the statement is not of the form X = X op e (op + - * max min)", st)
            op = form[0]
            keep = [l for l in loops if l.var in _index_vars(st.target)]
            if any(_accs(i) for i in st.target.indices) or not _injective(st.target, keep):
                raise self.na(f"the subscript of '{st.target.name}' does not determine the element uniquely from the "
                              f"remaining loops; the partial results cannot be combined", st)
            if not build:
                return None
            p1 = fresh_tensor(kernel)
            p2 = fresh_tensor(kernel, {p1})
            t = st.target
            part1 = _retarget(st, p1, t.indices)
            part2 = _retarget(_fold_offsets(substitute(st, shift)), p2, t.indices)
            r1 = A.Access(p1, t.dtype, "g", t.indices)
            r2 = A.Access(p2, t.dtype, "g", t.indices)
            if op in ("max", "min"):
                both = A.Call(op, (r1, r2))
                value = both if info.kind == "reduce" else A.Call(op, (t, both))
            else:
                cop = "*" if op == "*" else "+"
                both = A.BinOp(cop, r1, r2)
                value = both if info.kind == "reduce" else A.BinOp(cop, t, both)
            items = [_build(first, [part1]), _build(second, [part2]), _build(keep, [A.Assign(t, value)])]
        new = _with_body(kernel, idx, idx + 1, items)
        return _validate(self, ctx, new, lp)

    def numerics_for(self, ctx, args):
        return "exact-in-reals" if self._mode(ctx, args["loop"]) == "reduction" else "bitwise"

    def sites(self, ctx):
        out = []
        for ref, lp, path in ctx.loops():
            if lp.extent < 2:
                continue
            p = _perfect(ctx.kernel.body[path[0]])
            if p is None or len(p[1]) != 1:
                continue
            ats = sorted({a for a in (lp.extent // 2, lp.extent // 4, 3 * lp.extent // 4) if 1 <= a < lp.extent})
            try:
                # legality only: the pieces touch the same elements with the same loop
                # kinds, so the rewrite and its re-check (done by check()) are skipped
                self._plan(ctx, ref, ats[0], build=False)
            except NotApplicable:
                continue
            mode = self._mode(ctx, ref)
            out.append(Site(self.name, {"loop": ref}, {"at": ats}, f"split {mode} loop {lp.var} ({lp.extent})"))
        return out

    def plan(self, ctx, args):
        new = self._plan(ctx, args["loop"], args["at"])
        return Rewrite(new, "exact-in-reals" if self._mode(ctx, args["loop"]) == "reduction" else "bitwise")


def _fold_offsets(node):
    """Fold ``(x + c1) +/- c2`` in subscripts (integer arithmetic, exact)."""

    def fold(e):
        if (isinstance(e, A.BinOp) and e.op in ("+", "-") and isinstance(e.rhs, A.Const) and e.rhs.is_int
                and isinstance(e.lhs, A.BinOp) and e.lhs.op in ("+", "-") and isinstance(e.lhs.rhs, A.Const)
                and e.lhs.rhs.is_int):
            k = (e.lhs.rhs.value if e.lhs.op == "+" else -e.lhs.rhs.value) + (e.rhs.value if e.op == "+" else -e.rhs.value)
            if k == 0:
                return e.lhs.lhs
            return A.BinOp("+" if k > 0 else "-", e.lhs.lhs, A.Const(abs(k)))
        return e

    def fn(e):
        if isinstance(e, A.Access):
            return replace(e, indices=tuple(map_expr(i, fold) for i in e.indices))
        return e

    return map_expr(node, fn)


def _index_vars(acc: A.Access) -> set[str]:
    out: set = set()
    for i in acc.indices:
        out |= _vars(i)
    return out


def _retarget(st: A.Assign, name: str, indices: tuple) -> A.Assign:
    """``st`` accumulating into tensor ``name`` at ``indices`` instead of its target (its
    self reads, all at the target's subscript in a reduction, follow)."""
    old = st.target.name
    acc = A.Access(name, st.target.dtype, "g", indices)
    return A.Assign(acc, _rebuild_expr(st.value, lambda e: acc if isinstance(e, A.Access) and e.name == old else None))


# ---------------------------------------------------------------------------
# dead_code_elimination and expression_reorder


def _written_box(writes) -> Optional[list]:
    """Per-dimension hull of the elements the statements write (None if unbounded)."""
    box = None
    for st, loops in writes:
        f = Facts({l.var: (l.start, l.start + l.extent - 1) for l in loops})
        ivs = [f.interval(i) for i in st.target.indices]
        if any(iv is None for iv in ivs):
            return None
        box = ivs if box is None else [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(box, ivs)]
    return box


def _covers(st: A.Assign, loops, box) -> bool:
    """Does ``st`` write every element of ``box``? Each subscript must take every value of
    an interval (dense) and distinct subscripts must use distinct loop variables."""
    ranges = {l.var: (l.start, l.start + l.extent - 1) for l in loops}
    seen: set = set()
    for ix, (lo, hi) in zip(st.target.indices, box):
        vs = _vars(ix)
        if vs & seen or _accs(ix):
            return False
        seen |= vs
        iv = dense_interval(ix, ranges)
        if iv is None or iv[0] > lo or iv[1] < hi:
            return False
    return True


@strategy("dead_code_elimination", level="graph", numerics="bitwise",
          args=[Arg("nest", "nest", "nest to delete")])
class DeadCodeElimination(_NestPlanStrategy):
    """Delete a nest whose results are never used.

    Every tensor the nest writes must be an intermediate (never a kernel output) that no
    later nest reads (reads in subscripts and self-accumulations count) before a later nest
    overwrites every element the nest wrote (a plain store whose subscripts sweep
    intervals covering them). Only real dead code is removed; unlike the Step-TP generator
    nothing is synthesized. The remaining statements compute exactly what they computed
    before: bitwise.

    Before: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}+1.0;];}
    Args: nest=0
    After: \\kernel k(A:f32[8])->(C:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}+1.0;];}
    """

    def _plan(self, ctx, idx):
        kernel = ctx.kernel
        item = _nest_arg(self, ctx, idx)
        if isinstance(item, A.Align):
            raise self.na("align annotations are not code", item)
        written = tensors_written(item)
        if not written:
            raise self.na(f"nest {idx} writes nothing", item)
        for name in sorted(written):
            role = _role(ctx, name)
            if role != "intermediate":
                raise self.na(f"nest {idx} writes the kernel {role} '{name}'", item)
        stmts = list(_all_loop_stmts(kernel))
        for name in sorted(written):
            box = _written_box([(st, lps) for _, st, p, lps in stmts if p[0] == idx and st.target.name == name])
            for j in range(idx + 1, len(kernel.body)):
                if name in tensors_read(kernel.body[j]):
                    raise self.na(f"nest {j} reads {name}, written by nest {idx}", item, kernel.body[j])
                if box is not None and any(_covers(st, lps, box) for _, st, p, lps in stmts
                                           if p[0] == j and st.target.name == name):
                    break  # every element is overwritten before anything reads it
        return _validate(self, ctx, _with_body(kernel, idx, idx + 1, []), item)

    def _describe(self, ctx, idx):
        written = ", ".join(sorted(tensors_written(ctx.kernel.body[idx])))
        return f"delete nest {idx} (writes {written}, never read)"


@strategy("expression_reorder", level="graph", numerics="bitwise",
          args=[Arg("nest", "nest", "first of the two consecutive nests to swap")])
class ExpressionReorder(_NestPlanStrategy):
    """Swap two consecutive independent nests.

    Legal when neither nest reads or writes a tensor the other writes, so every
    statement reads the same values in both orders (and the checker's "written before"
    rule classifies every statement the same way). Bitwise.

    Before: \\kernel k(A:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}+1.0;];}
    Args: nest=0
    After: \\kernel k(A:f32[8])->(C:f32[8],D:f32[8]){L^{8}_{i=0}[D^{f32,g}_{i}=A^{f32,g}_{i}+1.0;];L^{8}_{i=0}[C^{f32,g}_{i}=A^{f32,g}_{i}*2.0;];}
    """

    def _plan(self, ctx, idx):
        kernel = ctx.kernel
        n1 = _nest_arg(self, ctx, idx)
        if idx + 1 >= len(kernel.body):
            raise self.na(f"nest {idx} is the last nest; there is nothing to swap it with", n1)
        n2 = kernel.body[idx + 1]
        if isinstance(n1, A.Align) or isinstance(n2, A.Align):
            raise self.na("align annotations are not moved", n1, n2)
        w1, w2 = tensors_written(n1), tensors_written(n2)
        r1, r2 = tensors_read(n1), tensors_read(n2)
        for what, names in (("both nests write", w1 & w2), (f"nest {idx + 1} reads what nest {idx} writes", w1 & r2),
                            (f"nest {idx} reads what nest {idx + 1} writes", w2 & r1)):
            if names:
                raise self.na(f"{what}: {', '.join(sorted(names))}", n1, n2)
        return _validate(self, ctx, _with_body(kernel, idx, idx + 2, [n2, n1]), n1, n2)

    span = 2

    def _describe(self, ctx, idx):
        return f"swap nests {idx} and {idx + 1}"
