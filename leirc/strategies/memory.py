"""Memory-level strategies: caches, storage scopes, data layouts, vectorized copies.

Every strategy here only moves or re-indexes data: the values computed are the same
floating-point operations in the same order, so all of them are bitwise.

Registered: ``cache_read_write``, ``layout_transformation`` (transposed, flattened or split
copy of an input), ``set_storage_layout`` (the same re-indexing of an intermediate in
place), ``set_storage_scope``, ``vectorized_memory_access``.

Left out on purpose (Step-TP generates them, leirc does not register them):

* ``set_storage_align``, ``double_buffer``, ``asynchronous_pipeline``: they emit
  ``X=align(a,b,c);`` statements and ``[^{bd_0} ...]^{bd_0}`` / ``[^{ap_0} ...]^{ap_0}``
  regions. The lowering has no code generation for either (the checker warns W004 and the
  body runs in order), so registering them would register no-ops that a search could
  "apply" forever and that claim an optimization they do not perform. They can be added
  once the lowering gives the annotations a real meaning (storage alignment, pipelined
  asynchronous copies).
* ``memory_coalescing``: the reference generator adds a ``B^{k}_{bx...}`` loop and shifts
  subscripts by string replacement, which is not semantics-preserving in general (it
  produced ``c+bza28`` from ``c+128``). Its faithful core, making the loop that walks a
  tensor's unit-stride dimension the innermost (or the ``tx``-bound) one, is exactly
  ``loop_reorder`` (or ``loop_binding``) with that order, so a separate name would only
  duplicate an existing strategy under a second name.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..lang import ast as A
from ..lang.affine import Facts
from ..analysis.deps import find_conflict
from ..lang.types import DTYPE_BYTES
from ..lang.checker import (MAX_VECTOR_LANES, SHARED_BYTES_LIMIT, StmtInfo, per_block_footprint, binding_axis)
from .base import Arg, Context, NotApplicable, Rewrite, Site, Strategy, strategy
from .common import all_serial as _all_serial, check_candidate as _check_candidate, divisors as _divisors
from .common import loops_under as _loops_under, rebuild_chain as _rebuild_chain, recheck_candidate as _recheck_candidate
from .common import stmt_arg as _stmt_arg, stmts_under as _stmts_under
from .rewrite import add, fresh_tensor, iter_stmts, map_expr, mul, rename_tensor, replace_at

SCOPES = ("g", "s", "l")


# ---------------------------------------------------------------------------
# helpers


def _value_reads(st: A.Assign, name: str) -> list[A.Access]:
    return [a for a in A.walk(st.value) if isinstance(a, A.Access) and a.name == name]


def _item_touches(item, name: str, skip: A.Assign | None = None) -> bool:
    """Does any statement of ``item`` (other than ``skip``) read or write ``name``?"""
    for n in _stmts_under((item,)):
        if n is not skip:
            if n.target.name == name or any(isinstance(a, A.Access) and a.name == name for a in A.walk(n)):
                return True
    return False


def _item_writes(item, name: str) -> bool:
    return any(n.target.name == name for n in _stmts_under((item,)))


def _shape(ctx: Context, name: str):
    info = ctx.result.tensors.get(name)
    return info.shape if info is not None else None


def _ranges(loops) -> Facts:
    return Facts({l.var: (l.start, l.start + l.extent - 1) for l in loops})


def _data_dependent(indices) -> bool:
    return any(isinstance(n, A.Access) for i in indices for n in A.walk(i))


def _vars_in(indices) -> set[str]:
    return {n.name for i in indices for n in A.walk(i) if isinstance(n, A.Var)}


def _users(ctx: Context) -> dict:
    """tensor name -> checker facts of the statements that access it (once per ``ctx``)."""

    def collect() -> dict:
        users: dict = {}
        for si in ctx.result.stmts:
            for n in {a.name for a in A.walk(si.stmt) if isinstance(a, A.Access)}:
                users.setdefault(n, []).append(si)
        return users

    return ctx.memo("memory.users", collect)


def _has_block_binding(kernel: A.Kernel) -> bool:
    for n in _loops_under(kernel.body):
        if n.kind == "B":
            ax = binding_axis(n.var)
            if ax is not None and ax[0] == "block":
                return True
    return False


def _region_bytes(ivs, dtype: str) -> int:
    return math.prod(hi + 1 for _, hi in ivs) * DTYPE_BYTES.get(dtype, 4)


def _unguarded_in_bounds(s: Strategy, facts: Facts, acc: A.Access, shape, what: str) -> list:
    """Intervals of ``acc``'s subscripts from the loop ranges alone; NotApplicable if one
    may leave the tensor (the access is only safe under an if_then_else guard)."""
    ivs = []
    for k, (i, n) in enumerate(zip(acc.indices, shape)):
        iv = facts.interval(i)
        if iv is None or iv[0] < 0 or iv[1] >= n:
            rng = "an unknown range" if iv is None else f"[{iv[0]}, {iv[1]}]"
            raise s.na(f"subscript {k} of '{acc.name}' spans {rng} outside [0, {n}) without its guard; {what}", acc)
        ivs.append(iv)
    return ivs


def _parse_perm(s: Strategy, raw, rank: int) -> tuple[int, ...]:
    try:
        perm = tuple(int(x) for x in str(raw).split(",") if x.strip() != "")
    except ValueError:
        raise s.na(f"'perm' must be comma-separated dimension numbers such as 1,0; got {raw!r}") from None
    if sorted(perm) != list(range(rank)):
        raise s.na(f"'perm' {raw!r} is not a permutation of the {rank} dimensions 0..{rank - 1}")
    if perm == tuple(range(rank)):
        raise s.na(f"'perm' {raw!r} is the identity permutation")
    return perm


def _perm_domain(rank: int) -> list[str]:
    """Small, deterministic set of permutations: every transposition of two dimensions,
    plus the full reversal."""
    out = []
    for a in range(rank):
        for b in range(a + 1, rank):
            p = list(range(rank))
            p[a], p[b] = p[b], p[a]
            out.append(",".join(map(str, p)))
    rev = ",".join(map(str, reversed(range(rank))))
    if rev not in out:
        out.append(rev)
    return out


def _linear(indices, shape) -> A.Expr:
    """Row-major linearization ``s0*st0 + s1*st1 + ...`` (terms with subscript 0 dropped)."""
    strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    e = None
    for i, st in zip(indices, strides):
        if isinstance(i, A.Const) and i.value == 0:
            continue
        term = mul(i, A.Const(st))
        e = term if e is None else add(e, term)
    return e if e is not None else A.Const(0)


def _relayout(indices, spec, shape) -> tuple:
    """Subscripts of the re-laid-out tensor for the old subscripts ``indices``."""
    kind, p = spec
    if kind == "transpose":
        return tuple(indices[d] for d in p)
    if kind == "flatten":
        return (_linear(indices, shape),)
    d, f = p
    i = indices[d]
    parts = (A.Const(i.value // f), A.Const(i.value % f)) if isinstance(i, A.Const) and i.is_int else (
        A.BinOp("//", i, A.Const(f)), A.BinOp("%", i, A.Const(f)))
    return tuple(indices[:d]) + parts + tuple(indices[d + 1:])


def _new_shape(spec, shape) -> tuple:
    kind, p = spec
    if kind == "transpose":
        return tuple(shape[d] for d in p)
    if kind == "flatten":
        return (math.prod(shape),)
    d, f = p
    return tuple(shape[:d]) + (shape[d] // f, f) + tuple(shape[d + 1:])


def _layout_spec(s: Strategy, args: dict, shape) -> tuple:
    """Validate the layout arguments (kind, perm, dim, factor) against ``shape``:
    ("transpose", perm) | ("flatten", None) | ("split", (dim, factor))."""
    kind, rank = args["kind"], len(shape)
    extra = [a for a in ("perm", "dim", "factor") if args.get(a) not in (NO_PERM, "", -1, 0, None)]
    own = {"transpose": ["perm"], "flatten": [], "split": ["dim", "factor"]}[kind]
    for a in extra:
        if a not in own:
            raise s.na(f"'{a}' does not apply to kind={kind}")
    if kind == "transpose":
        if rank < 2:
            raise s.na(f"a transpose needs rank >= 2; the tensor has rank {rank}")
        if args.get("perm", NO_PERM) in (NO_PERM, ""):
            raise s.na("kind=transpose needs 'perm', the new dimension order, e.g. 1,0")
        return kind, _parse_perm(s, args["perm"], rank)
    if kind == "flatten":
        if rank < 2:
            raise s.na(f"a flatten needs rank >= 2; the tensor has rank {rank}")
        return kind, None
    d, f = args.get("dim", -1), args.get("factor", 0)
    if not 0 <= d < rank:
        raise s.na(f"'dim' must name one of the {rank} dimension(s) 0..{rank - 1}, got {d}")
    n = shape[d]
    if not 1 < f < n or n % f:
        raise s.na(f"'factor' {f} must divide the extent {n} of dimension {d} and lie between 2 and {n - 1}")
    return kind, (d, f)


def _layout_domains(shape) -> list[tuple[dict, dict]]:
    """(fixed args, domains) of every layout of a tensor of ``shape`` listed as a site."""
    out = []
    if len(shape) >= 2:
        out.append(({"kind": "transpose"}, {"perm": _perm_domain(len(shape))}))
        out.append(({"kind": "flatten"}, {}))
    for d, n in enumerate(shape):
        fs = _divisors(n, limit=4)
        if fs:
            out.append(({"kind": "split", "dim": d}, {"factor": fs}))
    return out


#: default of 'perm' for the kinds that take none (the argument parser rejects empty strings)
NO_PERM = "none"


def _layout_args(kind_doc: str) -> list:
    return [Arg("kind", "choice", kind_doc, choices=LAYOUTS),
            Arg("perm", "str", "kind=transpose: new dimension order as old dimension numbers, e.g. 1,0", default=NO_PERM),
            Arg("dim", "int", "kind=split: the dimension to split", default=-1),
            Arg("factor", "int", "kind=split: extent of the inner part; must divide the dimension", default=0)]


def _fits_shared(ctx: Context, build, ivs, dtype: str) -> bool:
    """Cheap capacity test for a new shared buffer of the given region (``build()``
    returns the candidate kernel, re-checked only when block-bound loops shrink the
    per-block footprint below the whole region)."""
    if _region_bytes(ivs, dtype) <= SHARED_BYTES_LIMIT:
        return True
    if not _has_block_binding(ctx.kernel):
        return False  # one block holds the whole buffer
    return ctx.passes(build())


def _legal_scopes(check) -> list[str]:
    """The cache scopes (l, s) for which ``check(scope)`` raises no NotApplicable."""
    out = []
    for scope in ("l", "s"):
        try:
            check(scope)
        except NotApplicable:
            continue
        out.append(scope)
    return out


# ---------------------------------------------------------------------------
# cache_read_write and vectorized_memory_access


class _Cache(Strategy):
    """Shared implementation of read caches (cache_read_write mode=read and
    vectorized_memory_access) and write caches."""

    def _read_plan(self, ctx, st, path, tensor):
        """(reads, subscripts, copy loops, region intervals) for a read cache of ``tensor``."""
        if st.target.name == tensor:
            hint = "; use mode=write to cache it" if self.name == "cache_read_write" else ""
            raise self.na(f"'{tensor}' is the statement's target, not a region it reads{hint}", st)
        reads = _value_reads(st, tensor)
        if not reads:
            raise self.na(f"the statement does not read '{tensor}'", st)
        subs = reads[0].indices
        if any(a.indices != subs for a in reads):
            raise self.na(f"the reads of '{tensor}' use different subscripts; a cache holds one region", st)
        if _data_dependent(subs):
            raise self.na(f"the subscripts of '{tensor}' depend on tensor data; the region is unknown", st)
        item = ctx.kernel.body[path[0]]
        if _item_writes(item, tensor):
            raise self.na(f"'{tensor}' is written inside nest N{path[0]}; a copy before the nest would read stale values", st)
        si = ctx.result.info(st)
        ivs = _unguarded_in_bounds(self, _ranges(si.loops), reads[0], _shape(ctx, tensor),
                                   "an unguarded copy would read out of bounds")
        used = _vars_in(subs)
        loops = [replace(l, span=None) for l in si.loops if l.var in used]
        return reads, subs, loops, ivs

    def _read_rewrite(self, ctx, st, path, tensor, scope, vector=False, planned=None):
        """(new kernel, copy loops, region, dtype, cache name); ``planned`` is the
        :meth:`_read_plan` result when the caller already has it."""
        reads, subs, loops, ivs = planned or self._read_plan(ctx, st, path, tensor)
        src = replace(reads[0], span=None)
        name = fresh_tensor(ctx.kernel)
        cache = A.Access(name, src.dtype, scope, subs)
        copy = A.Assign(cache, src)
        if vector:
            loops = loops[:-1] + [replace(loops[-1], kind="V")]
        nest = _rebuild_chain(loops, (copy,)) if loops else copy

        def fn(x):
            if isinstance(x, A.Access) and x.name == tensor and x.indices == subs:
                return cache
            return x

        new_st = replace(st, value=map_expr(st.value, fn))
        k = replace_at(ctx.kernel, path, new_st)
        k = replace_at(k, (path[0],), [nest, k.body[path[0]]])
        return k, loops, ivs, src.dtype, name

    def _write_plan(self, ctx, st, path, tensor):
        if st.target.name != tensor:
            raise self.na(f"'{tensor}' is not the statement's target (it writes '{st.target.name}')", st)
        si = ctx.result.info(st)
        if si.kind not in ("assign", "reduce"):
            raise self.na(f"the statement is a{'n' if si.kind == 'update' else ''} {si.kind} of '{tensor}': a fresh cache "
                          f"would lose the values it reads from earlier writes", st)
        if _data_dependent(st.target.indices):
            raise self.na(f"the target subscripts of '{tensor}' depend on tensor data", st)
        item = ctx.kernel.body[path[0]]
        if _item_touches(item, tensor, skip=st):
            raise self.na(f"another statement of nest N{path[0]} uses '{tensor}'; it would not see the cached values", st)
        used = _vars_in(st.target.indices)
        loops = [replace(l, span=None) for l in si.loops if l.var in used]
        ivs = [_ranges(si.loops).interval(i) for i in st.target.indices]
        return si, loops, ivs

    def _write_rewrite(self, ctx, st, path, tensor, scope):
        si, loops, ivs = self._write_plan(ctx, st, path, tensor)
        name = fresh_tensor(ctx.kernel)
        new_st = rename_tensor(st, tensor, name, scope=scope)
        back = A.Assign(replace(st.target, span=None), replace(st.target, name=name, scope=scope, span=None))
        nest = _rebuild_chain(loops, (back,)) if loops else back
        k = replace_at(ctx.kernel, path, new_st)
        k = replace_at(k, (path[0],), [k.body[path[0]], nest])
        return k, loops, ivs, st.target.dtype, name

    def _validate(self, ctx, build, loops, ivs, dtype, scope, node):
        """What the plans do not establish: races of non-serial copy loops and the
        shared-memory capacity. ``build()`` returns the candidate kernel."""
        if not _all_serial(loops):
            _recheck_candidate(self, ctx, build(), node)
        if scope == "s" and not _fits_shared(ctx, build, ivs, dtype):
            raise self.na(f"a shared buffer of {_region_bytes(ivs, dtype)} bytes exceeds {SHARED_BYTES_LIMIT} bytes per block", node)


@strategy("cache_read_write", level="memory", numerics="bitwise", creates=("cache:tensor",),
          args=[Arg("stmt", "stmt", "statement that reads or writes the tensor, e.g. N0.S0"),
                Arg("tensor", "tensor", "tensor to cache"),
                Arg("mode", "choice", "read: copy the region read into a cache first; write: compute into a cache, copy back",
                    choices=("read", "write")),
                Arg("scope", "choice", "memory of the cache: l (local) or s (shared)", choices=("l", "s"))])
class CacheReadWrite(_Cache):
    """Stage a tensor through a new local or shared buffer (read or write cache).

    ``mode=read``: a new nest before the statement's nest copies the region the statement
    reads (``E_{s} = X_{s}`` over the enclosing loops whose indices the subscripts ``s``
    use, same kinds and extents) and the statement reads ``E`` instead. Every read of ``X``
    in the statement must use the same subscripts, ``X`` must not be written in the
    statement's nest, and the region must be in bounds without ``if_then_else`` guards.
    ``mode=write``: the statement (a plain assignment or a reduction, not an in-place
    update or scan, which read earlier values) computes into a fresh ``E`` instead of its
    target, and a new nest after it over the target's loops copies ``E`` back; no other
    statement of the nest may use the target. A shared cache must fit the 48 KiB per
    block. Values are only copied: bitwise.

    Before: \\kernel k(A:f32[4,8],B:f32[8])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j}*B^{f32,g}_{j};];}
    Args: stmt=N0.S0 tensor=B mode=read scope=s
    After: \\kernel k(A:f32[4,8],B:f32[8])->(C:f32[4]){L^{8}_{j=0}[D^{f32,s}_{j}=B^{f32,g}_{j};];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j}*D^{f32,s}_{j};];}
    """

    def _build(self, ctx, st, path, tensor, mode, scope):
        if mode == "read":
            return self._read_rewrite(ctx, st, path, tensor, scope)
        return self._write_rewrite(ctx, st, path, tensor, scope)

    def _plan(self, ctx, st, path, tensor, mode):
        """(copy loops, region, dtype) without building the result."""
        if mode == "read":
            reads, subs, loops, ivs = self._read_plan(ctx, st, path, tensor)
            return loops, ivs, reads[0].dtype
        si, loops, ivs = self._write_plan(ctx, st, path, tensor)
        return loops, ivs, st.target.dtype

    def _verify(self, ctx, st, path, tensor, mode, scope):
        loops, ivs, dt = self._plan(ctx, st, path, tensor, mode)
        self._validate(ctx, lambda: self._build(ctx, st, path, tensor, mode, scope)[0], loops, ivs, dt, scope, st)

    def sites(self, ctx):
        out = []
        for ref, st, path in ctx.stmts():
            names = [st.target.name]
            for a in A.walk(st.value):
                if isinstance(a, A.Access) and a.name not in names:
                    names.append(a.name)
            for tensor in names:
                mode = "write" if tensor == st.target.name else "read"
                check = lambda scope, st=st, path=path, tensor=tensor, mode=mode: self._verify(  # noqa: E731
                    ctx, st, path, tensor, mode, scope)
                site = self.site(ctx, {"stmt": ref, "tensor": tensor, "mode": mode}, f"{mode} cache of {tensor} in {ref}",
                                 lambda check=check: {"scope": _legal_scopes(check)})
                if site is not None:
                    out.append(site)
        return out

    def plan(self, ctx, args):
        st, path = _stmt_arg(self, ctx, args["stmt"])
        new, loops, ivs, dt, name = self._build(ctx, st, path, args["tensor"], args["mode"], args["scope"])
        self._validate(ctx, lambda: new, loops, ivs, dt, args["scope"], st)
        return Rewrite(new, self.numerics, {"cache": name})


@strategy("vectorized_memory_access", level="memory", numerics="bitwise", creates=("copy:tensor",),
          args=[Arg("stmt", "stmt", "statement that reads the tensor, e.g. N0.S0"),
                Arg("tensor", "tensor", "tensor whose region is copied with vector loads"),
                Arg("scope", "choice", "memory of the copy: l (local) or s (shared)", choices=("l", "s"))])
class VectorizedMemoryAccess(_Cache):
    """Copy the region a statement reads into a local/shared buffer with vector loads.

    Like a read cache (``cache_read_write mode=read``: same preconditions, same copy nest
    before the statement's nest) but the innermost loop of the copy is vectorized (``V``):
    it must be serial, have at most 64 iterations (split it first) and write distinct
    elements in its iterations, as the checker's lane and dependence rules require. Values
    are only copied: bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+A^{f32,g}_{i,j};];}
    Args: stmt=N0.S0 tensor=A scope=l
    After: \\kernel k(A:f32[4,8])->(C:f32[4]){L^{4}_{i=0}V^{8}_{j=0}[D^{f32,l}_{i,j}=A^{f32,g}_{i,j};];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i}=C^{f32,g}_{i}+D^{f32,l}_{i,j};];}
    """

    def _plan_vector(self, ctx, st, path, tensor, planned=None):
        reads, subs, loops, ivs = planned or self._read_plan(ctx, st, path, tensor)
        if not loops:
            raise self.na(f"the read of '{tensor}' uses no loop index; there is nothing to vectorize", st)
        inner = loops[-1]
        if inner.kind != "L":
            raise self.na(f"the innermost copy loop '{inner.var}' is {A.LOOP_KIND_NAMES[inner.kind]}, not serial", st)
        if inner.extent > MAX_VECTOR_LANES:
            raise self.na(f"the innermost copy loop '{inner.var}' has {inner.extent} iterations; at most {MAX_VECTOR_LANES} "
                          f"vector lanes are allowed (split it first)", st)
        # the copy E_{s} = X_{s} only conflicts with itself: two lanes storing one element
        vloops = tuple(loops[:-1]) + (replace(inner, kind="V"),)
        copy = StmtInfo(A.Assign(A.Access("\0cache", reads[0].dtype, "l", subs), reads[0]), vloops, 0)
        if inner.extent > 1 and find_conflict(vloops[-1], [copy]) is not None:
            raise self.na(f"two iterations of the vectorized copy loop '{inner.var}' would store the same element", st)
        return loops, ivs, reads[0].dtype

    def _verify(self, ctx, st, path, tensor, scope):
        loops, ivs, dt = self._plan_vector(ctx, st, path, tensor)
        build = lambda: self._read_rewrite(ctx, st, path, tensor, scope, vector=True)[0]  # noqa: E731
        self._validate(ctx, build, loops[:-1], ivs, dt, scope, st)

    def sites(self, ctx):
        out = []
        for ref, st, path in ctx.stmts():
            names = []
            for a in A.walk(st.value):
                if isinstance(a, A.Access) and a.name not in names and a.name != st.target.name:
                    names.append(a.name)
            for tensor in names:
                check = lambda scope, st=st, path=path, tensor=tensor: self._verify(ctx, st, path, tensor, scope)  # noqa: E731
                site = self.site(ctx, {"stmt": ref, "tensor": tensor}, f"vector copy of {tensor} for {ref}",
                                 lambda check=check: {"scope": _legal_scopes(check)})
                if site is not None:
                    out.append(site)
        return out

    def plan(self, ctx, args):
        st, path = _stmt_arg(self, ctx, args["stmt"])
        planned = self._read_plan(ctx, st, path, args["tensor"])
        loops, ivs, dt = self._plan_vector(ctx, st, path, args["tensor"], planned)
        new, _, _, _, name = self._read_rewrite(ctx, st, path, args["tensor"], args["scope"], vector=True, planned=planned)
        self._validate(ctx, lambda: new, loops[:-1], ivs, dt, args["scope"], st)
        return Rewrite(new, self.numerics, {"copy": name})


# ---------------------------------------------------------------------------
# set_storage_scope


@strategy("set_storage_scope", level="memory", numerics="bitwise",
          args=[Arg("tensor", "tensor", "intermediate tensor"),
                Arg("scope", "choice", "new scope: g (global), s (shared) or l (local)", choices=SCOPES)])
class SetStorageScope(Strategy):
    """Move an intermediate tensor to another memory scope (every access changes).

    Kernel inputs and outputs are parameters in global memory and cannot move. A shared
    tensor must fit the 48 KiB per block (counting the elements one block touches when
    block-bound loops exist, as the checker does). Only where the data lives changes:
    bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[D^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{i,j}+1;];}
    Args: tensor=D scope=l
    After: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[D^{f32,l}_{i,j}=A^{f32,g}_{i,j}*2;];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,l}_{i,j}+1;];}
    """

    def _reason(self, ctx, name, scope):
        info = ctx.result.tensors.get(name)
        if info is None:
            return f"no tensor '{name}'"
        if info.role != "intermediate":
            return f"'{name}' is a kernel {info.role}; parameters live in global memory"
        if info.scope == scope:
            return f"'{name}' is already in scope '{scope}'"
        if info.private:
            # the \alloc moves too; where a scope is allowed for a tile depends on the
            # thread loops around it (E048): the checker decides
            if not ctx.passes(self._rewrite(ctx, name, scope)):
                return f"private tensor '{name}' cannot live in scope '{scope}' where it is allocated"
            return None
        if scope == "s":
            elems = per_block_footprint(name, ctx.result.stmts)
            if elems is None:
                elems = math.prod(info.shape or ())
            nbytes = elems * DTYPE_BYTES.get(info.dtype, 4)
            if nbytes > SHARED_BYTES_LIMIT:
                return f"'{name}' needs {nbytes} bytes per block in shared memory; the limit is {SHARED_BYTES_LIMIT}"
        return None

    def sites(self, ctx):
        out = []
        for info in ctx.result.tensors.values():
            if info.role != "intermediate" or not ctx.wants_tensor(info.name):
                continue
            scopes = [s for s in SCOPES if self._reason(ctx, info.name, s) is None]
            if scopes:
                out.append(Site(self.name, {"tensor": info.name}, {"scope": scopes}, f"move {info.name} ({info.scope})"))
        return out

    def _rewrite(self, ctx, name, scope):
        new = rename_tensor(ctx.kernel, name, name, scope=scope)
        return replace(new, body=_set_alloc(new.body, name, lambda al: replace(al, scope=scope)))

    def plan(self, ctx, args):
        why = self._reason(ctx, args["tensor"], args["scope"])
        if why is not None:
            raise self.na(why)
        return Rewrite(self._rewrite(ctx, args["tensor"], args["scope"]), self.numerics)


def _set_alloc(body, name: str, fn) -> tuple:
    """``body`` with the ``\alloc`` of ``name`` replaced by ``fn(alloc)``."""
    out = []
    for it in body:
        if isinstance(it, A.Alloc) and it.name == name:
            it = fn(it)
        elif isinstance(it, (A.Loop, A.Region)):
            it = replace(it, body=_set_alloc(it.body, name, fn))
        out.append(it)
    return tuple(out)


# ---------------------------------------------------------------------------
# layout_transformation and set_storage_layout

LAYOUTS = ("transpose", "flatten", "split")
KIND_DOC = ("transpose (permute dimensions), flatten (one row-major dimension) or split (dimension d into "
            "d//factor, d%factor)")


def _copy_loops(kernel: A.Kernel, reads, shape, loops) -> list[A.Loop]:
    """Loops of a whole-tensor copy nest, one per dimension: the read's own loop (name and
    kind, e.g. a bound ``tx``) where it walks that full dimension, otherwise a serial loop
    over an unused lower-case letter."""
    out = _reused_loops(reads, shape, loops)
    if all(l is not None for l in out):
        return out
    tensors = {n.name for n in A.walk(kernel) if isinstance(n, A.Access)} | {p.name for p in kernel.inputs + kernel.outputs}
    taken = {l.var for l in out if l is not None}
    pool = iter(c for c in "acdfghijklmnopqrsuw" if c not in tensors and c not in taken)
    return [l if l is not None else A.Loop("L", n, next(pool), 0, ()) for l, n in zip(out, shape)]


def _reused_loops(reads, shape, loops) -> list:
    """Per dimension, the statement's loop that walks it whole with a plain index (or None)."""
    by_var = {l.var: l for l in loops}
    out: list = []
    for k, n in enumerate(shape):
        i = reads[0].indices[k]
        l = by_var.get(i.name) if isinstance(i, A.Var) else None
        if l is not None and l.start == 0 and l.extent == n and all(o is None or o.var != l.var for o in out):
            out.append(A.Loop(l.kind, n, l.var, 0, ()))
        else:
            out.append(None)
    return out


@strategy("layout_transformation", level="memory", numerics="bitwise", creates=("copy:tensor",),
          args=[Arg("stmt", "stmt", "statement that reads the tensor, e.g. N0.S0"),
                Arg("tensor", "tensor", "input or intermediate tensor read by the statement")] + _layout_args(KIND_DOC))
class LayoutTransformation(Strategy):
    """Copy a tensor into a transposed, flattened or reshaped new tensor and read that.

    A new nest before the statement's nest copies the whole tensor ``X`` into a fresh
    global tensor ``E`` (one loop per dimension: the statement's own loop, kind included,
    where the read walks that whole dimension with a plain index, else a serial loop). The
    copy stores ``X_{x}`` at ``E_{x[perm]}`` for ``transpose`` (dimension ``d`` of ``E``
    is dimension ``perm[d]`` of ``X``), at ``E_{x0*st0+x1*st1+...}`` (row-major strides)
    for ``flatten``, at ``E_{..., x_d//factor, x_d%factor, ...}`` for ``split``. Every
    read of ``X`` in the statement becomes the matching read of ``E``. ``X`` must not be
    written in the statement's nest; for ``flatten`` and ``split`` every read must be in
    bounds without its ``if_then_else`` guard (the guard bounds the old dimensions, which
    the new subscripts no longer show). Values are only copied: bitwise.

    Before: \\kernel k(A:f32[4,8],B:f32[2,8])->(C:f32[4,2]){L^{4}_{i=0}L^{2}_{j=0}L^{8}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*B^{f32,g}_{j,k};];}
    Args: stmt=N0.S0 tensor=B kind=transpose perm=1,0
    After: \\kernel k(A:f32[4,8],B:f32[2,8])->(C:f32[4,2]){L^{2}_{j=0}L^{8}_{k=0}[D^{f32,g}_{k,j}=B^{f32,g}_{j,k};];L^{4}_{i=0}L^{2}_{j=0}L^{8}_{k=0}[C^{f32,g}_{i,j}=C^{f32,g}_{i,j}+A^{f32,g}_{i,k}*D^{f32,g}_{k,j};];}
    """

    def _base(self, ctx, st, path, tensor):
        """(reads, shape, why the reads need their guards or None): the parts of the plan
        that do not depend on the layout."""
        if st.target.name == tensor:
            raise self.na(f"'{tensor}' is the statement's target; use set_storage_layout to re-index an intermediate", st)
        reads = _value_reads(st, tensor)
        if not reads:
            raise self.na(f"the statement does not read '{tensor}'", st)
        shape = _shape(ctx, tensor)
        if not shape:
            raise self.na(f"'{tensor}' is a scalar; it has no layout", st)
        if _item_writes(ctx.kernel.body[path[0]], tensor):
            raise self.na(f"'{tensor}' is written inside nest N{path[0]}; a copy before the nest would read stale values", st)
        guarded = None
        facts = _ranges(ctx.result.info(st).loops)
        try:
            for a in reads:
                _unguarded_in_bounds(self, facts, a, shape, "")
        except NotApplicable as e:
            guarded = e
        return reads, shape, guarded

    def _plan(self, ctx, st, path, tensor, args, base=None):
        reads, shape, guarded = base or self._base(ctx, st, path, tensor)
        spec = _layout_spec(self, args, shape)
        if spec[0] != "transpose" and guarded is not None:
            what = "flattened" if spec[0] == "flatten" else "split"
            raise self.na(f"{guarded.reason.rstrip('; ')}; {what} subscripts would lose the guard's bound",
                          *guarded.nodes)
        return reads, shape, spec

    def _rewrite(self, ctx, st, path, tensor, args, planned=None):
        """(new kernel, copy name); ``planned`` is the :meth:`_plan` result if known."""
        reads, shape, spec = planned or self._plan(ctx, st, path, tensor, args)
        si = ctx.result.info(st)
        loops = _copy_loops(ctx.kernel, reads, shape, si.loops)
        dtype = reads[0].dtype
        name = fresh_tensor(ctx.kernel)
        xs = tuple(A.Var(l.var) for l in loops)
        copy = A.Assign(A.Access(name, dtype, "g", _relayout(xs, spec, shape)), A.Access(tensor, dtype, reads[0].scope, xs))
        nest = _rebuild_chain(loops, (copy,))

        def fn(x):
            if isinstance(x, A.Access) and x.name == tensor:
                return A.Access(name, dtype, "g", _relayout(x.indices, spec, shape))
            return x

        k = replace_at(ctx.kernel, path, replace(st, value=map_expr(st.value, fn)))
        return replace_at(k, (path[0],), [nest, k.body[path[0]]]), name

    def _needs_check(self, ctx, st, reads, shape) -> bool:
        """Does a copy loop reuse a non-serial loop (the checker decides its races)?"""
        return not _all_serial(l for l in _reused_loops(reads, shape, ctx.result.info(st).loops) if l is not None)

    def _verify(self, ctx, st, path, tensor, args, base=None):
        reads, shape, spec = self._plan(ctx, st, path, tensor, args, base)
        if self._needs_check(ctx, st, reads, shape):
            _check_candidate(self, self._rewrite(ctx, st, path, tensor, args, (reads, shape, spec))[0], st)

    def sites(self, ctx):
        out = []
        for ref, st, path in ctx.stmts():
            names = []
            for a in A.walk(st.value):
                if isinstance(a, A.Access) and a.name not in names and a.name != st.target.name:
                    names.append(a.name)
            for tensor in names:
                try:
                    base = self._base(ctx, st, path, tensor)
                except NotApplicable:
                    continue
                for fixed, domains in _layout_domains(base[1]):
                    first = {**fixed, **{k: v[0] for k, v in domains.items()}}
                    try:
                        self._verify(ctx, st, path, tensor, first, base)
                    except NotApplicable:
                        continue
                    out.append(Site(self.name, {"stmt": ref, "tensor": tensor, **fixed}, domains,
                                    f"{fixed['kind']} copy of {tensor} for {ref}"))
        return out

    def plan(self, ctx, args):
        st, path = _stmt_arg(self, ctx, args["stmt"])
        planned = self._plan(ctx, st, path, args["tensor"], args)
        new, name = self._rewrite(ctx, st, path, args["tensor"], args, planned)
        if self._needs_check(ctx, st, planned[0], planned[1]):
            _recheck_candidate(self, ctx, new, st)
        return Rewrite(new, self.numerics, {"copy": name})


@strategy("set_storage_layout", level="memory", numerics="bitwise",
          args=[Arg("tensor", "tensor", "intermediate tensor")] + _layout_args(KIND_DOC))
class SetStorageLayout(Strategy):
    """Re-index an intermediate tensor everywhere: permute, flatten or split dimensions.

    Every access ``X_{s}`` (writes and reads) becomes ``X_{s[perm]}`` (``transpose``),
    ``X_{s0*st0+s1*st1+...}`` with the row-major strides of its inferred shape
    (``flatten``: ``D_{i,j}`` -> ``D_{i*J+j}``) or ``X_{..., s_d//factor, s_d%factor, ...}``
    (``split``: ``D_{tx}`` -> ``D_{tx//8,tx%8}``). Intermediate shapes are inferred from the
    writes, so the new subscripts must still be proven in bounds: the result is re-checked
    unless every access is in bounds without guards (for ``flatten`` one write must also
    reach the last element, else the inferred length could shrink). Only addresses change:
    bitwise.

    Before: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[D^{f32,g}_{i,j}=A^{f32,g}_{i,j}*2;];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{i,j}+1;];}
    Args: tensor=D kind=flatten
    After: \\kernel k(A:f32[4,8])->(C:f32[4,8]){L^{4}_{i=0}L^{8}_{j=0}[D^{f32,g}_{i*8+j}=A^{f32,g}_{i,j}*2;];L^{4}_{i=0}L^{8}_{j=0}[C^{f32,g}_{i,j}=D^{f32,g}_{i*8+j}+1;];}
    """

    def _plan(self, ctx, tensor, args):
        info = ctx.result.tensors.get(tensor)
        if info is None:
            raise self.na(f"no tensor '{tensor}'")
        if info.role != "intermediate":
            raise self.na(f"'{tensor}' is a kernel {info.role}; its layout is fixed by the signature (use layout_transformation)")
        if not info.shape:
            raise self.na(f"'{tensor}' is a scalar; it has no layout")
        if info.private:
            raise self.na(f"'{tensor}' is a private tensor: its shape is declared by its \\alloc, not inferred")
        return info, _layout_spec(self, args, info.shape)

    def _rewrite(self, ctx, info, spec):
        def fn(x):
            if isinstance(x, A.Access) and x.name == info.name:
                return replace(x, indices=_relayout(x.indices, spec, info.shape))
            return x

        return map_expr(ctx.kernel, fn)

    def _needs_check(self, ctx, info, kind) -> bool:
        """False when the re-indexed tensor is provably bounds-correct and the dependence
        test is unaffected; True when the checker must decide."""
        users = _users(ctx).get(info.name, [])
        if any(not _all_serial(si.loops) for si in users):
            return True  # the P/V/B dependence test sees different subscripts
        if kind == "transpose":
            return False  # each dimension keeps its subscript, bounds and guards
        reaches_end = kind == "split"  # the write reaching n-1 reaches (n/f-1, f-1)
        for si in users:
            facts = _ranges(si.loops)
            for a in (a for a in A.walk(si.stmt) if isinstance(a, A.Access) and a.name == info.name):
                ivs = [facts.interval(i) for i in a.indices]
                if any(iv is None or iv[0] < 0 or iv[1] >= n for iv, n in zip(ivs, info.shape)):
                    return True
                if a is si.stmt.target and not reaches_end:
                    lin = facts.interval(_linear(a.indices, info.shape))
                    reaches_end = lin is not None and lin[1] == math.prod(info.shape) - 1
        return not reaches_end

    def _fits(self, ctx, info, args) -> bool:
        spec = _layout_spec(self, args, info.shape)
        return not self._needs_check(ctx, info, spec[0]) or ctx.passes(self._rewrite(ctx, info, spec))

    def sites(self, ctx):
        out = []
        for info in ctx.result.tensors.values():
            if info.role != "intermediate" or not info.shape or info.private or not ctx.wants_tensor(info.name):
                continue  # (a private tensor's declared shape would not follow the new subscripts)
            needs = {k: self._needs_check(ctx, info, k) for k in LAYOUTS}
            for fixed, domains in _layout_domains(info.shape):
                if not needs[fixed["kind"]]:
                    pass  # this layout kind cannot break bounds: every candidate fits
                elif fixed["kind"] == "transpose":
                    domains = {"perm": [p for p in domains["perm"] if self._fits(ctx, info, {**fixed, "perm": p})]}
                    if not domains["perm"]:
                        continue
                elif not self._fits(ctx, info, {**fixed, **{k: v[0] for k, v in domains.items()}}):
                    continue
                out.append(Site(self.name, {"tensor": info.name, **fixed}, domains, f"{fixed['kind']} {info.name}"))
        return out

    def plan(self, ctx, args):
        info, spec = self._plan(ctx, args["tensor"], args)
        new = self._rewrite(ctx, info, spec)
        if self._needs_check(ctx, info, spec[0]):
            _recheck_candidate(self, ctx, new)
        return Rewrite(new, self.numerics)
