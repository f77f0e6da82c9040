"""Semantic checker: names, types, shapes, static bounds, statement kinds, dependences.

The checker collects *every* problem as a :class:`Diagnostic` (never stops at the first)
and, for programs without errors, produces the facts that every later stage relies on:
tensor table (dtype, scope, shape, role), and per statement its kind (plain assignment,
reduction with identity initialization, in-place update, scan) and the loops that carry
a dependence. The rules are written down in ``docs/language.md``; the diagnostic codes
are listed in :mod:`leirc.lang.diagnostics`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from . import ast as A
from .affine import Facts, attained, captures
from .diagnostics import Diagnostic, error, warning
from .facts import CheckResult, StmtInfo, TensorInfo, accesses
from .parser import ParseResult, parse

# CUDA launch limits (compute capability >= 3.0)
MAX_THREADS_PER_BLOCK = 1024
THREAD_LIMITS = {"x": 1024, "y": 1024, "z": 64}
BLOCK_LIMITS = {"x": 2**31 - 1, "y": 65535, "z": 65535}
MAX_VECTOR_LANES = 64
SHARED_BYTES_LIMIT = 48 * 1024

#: reduction operator -> identity
IDENTITY = {"+": 0, "-": 0, "*": 1, "max": -math.inf, "min": math.inf}


# ---------------------------------------------------------------------------
# helpers


def binding_axis(var: str) -> Optional[tuple[str, str]]:
    """('thread'|'block', 'x'|'y'|'z') for a B-loop index name, else None."""
    if len(var) >= 2 and var[0] in "tb" and var[1] in "xyz":
        if var[0] == "t" and len(var) > 2 and not var[2:].isalnum():
            return None
        return ("thread" if var[0] == "t" else "block", var[1])
    return None


from .types import is_float as _is_float, is_int as _is_int, promote as _promote  # noqa: E402
from .types import DTYPE_BYTES, INT_RANGES, is_signed_int, literal_misfit, node_type, typed_walk  # noqa: E402


#: the children of the expression nodes, which are most of a kernel, without the generic
#: field scan of ``A.children``; the node fields each getter knows are pinned by
#: tests/test_checker_speed_equivalence.py, so a field added to the AST cannot be missed
_EXPR_CHILDREN = {
    A.Var: lambda n: (),
    A.Const: lambda n: (),
    A.BinOp: lambda n: (n.lhs, n.rhs),
    A.Neg: lambda n: (n.operand,),
    A.Access: lambda n: n.indices,
    A.Call: lambda n: n.args,
    A.Compare: lambda n: n.operands,
}


class _Nodes:
    """The pre-order node list of one kernel, built once and shared by every pass: the
    subtree of a node is a slice of it (pre-order keeps a subtree contiguous), so a pass
    that needs "every node under this subscript" slices a list instead of walking again."""

    def __init__(self, root):
        order: list = []
        start: dict[int, int] = {}  # id(node) -> its index in ``order``
        kids: dict[int, list] = {}  # id(node) -> its children, for nodes that have some
        append, children = order.append, A.children
        fast = _EXPR_CHILDREN
        stack = [root]
        pop, extend = stack.pop, stack.extend
        while stack:
            n = pop()
            start[id(n)] = len(order)
            append(n)
            get = fast.get(n.__class__)
            ch = list(get(n) if get is not None else children(n))
            if ch:
                kids[id(n)] = ch
                extend(reversed(ch))
        # a subtree's size, bottom-up: children come after their parent in pre-order
        size: dict[int, int] = {}
        for n in reversed(order):
            ch = kids.get(id(n))
            size[id(n)] = 1 + sum(size[id(c)] for c in ch) if ch else 1
        self.order = order
        self._start = start
        self._size = size
        self._kids = kids

    def _slice(self, n):
        i = self._start.get(id(n))
        if i is None or self.order[i] is not n:
            return None
        return i, i + self._size[id(n)]

    def walk(self, n) -> list:
        """``list(A.walk(n))``, from the shared list when ``n`` is in this kernel."""
        sl = self._slice(n)
        return list(A.walk(n)) if sl is None else self.order[sl[0]:sl[1]]

    def size(self, n) -> int:
        """``len(list(A.walk(n)))``."""
        sl = self._slice(n)
        return sum(1 for _ in A.walk(n)) if sl is None else sl[1] - sl[0]

    def children(self, n) -> list:
        """``list(A.children(n))``."""
        if self._slice(n) is None:
            return list(A.children(n))
        return self._kids.get(id(n), ())

    def accesses(self, n) -> list:
        return [x for x in self.walk(n) if isinstance(x, A.Access)]

    def vars(self, n) -> list:
        return [x for x in self.walk(n) if isinstance(x, A.Var)]


# ---------------------------------------------------------------------------


class _Checker:
    def __init__(self, kernel: A.Kernel):
        self.k = kernel
        self.diags: list[Diagnostic] = []
        self.tensors: dict[str, TensorInfo] = {}
        self.stmts: list[StmtInfo] = []
        self.loop_vars_anywhere: set[str] = set()
        self.params = {p.name: p for p in kernel.inputs + kernel.outputs}
        self.input_names = {p.name for p in kernel.inputs}
        self.output_names = {p.name for p in kernel.outputs}
        self._warned: set = set()
        self._overflowed: set[int] = set()  # ids of subscripts that got E026
        self.nodes = _Nodes(kernel)
        # one Facts per loop nest, shared by the passes: its interval memo carries over
        self._facts_by_nest: dict[tuple, Facts] = {}
        self._types: dict[int, Optional[str]] = {}  # expr_types of every statement, once

    def err(self, code, msg, span, notes=()):
        self.diags.append(error(code, msg, span, notes))

    def warn(self, code, msg, span, notes=(), key=None):
        if key is not None:
            if key in self._warned:
                return
            self._warned.add(key)
        self.diags.append(warning(code, msg, span, notes))

    # -- entry -----------------------------------------------------------------
    def run(self) -> CheckResult:
        for p in self.k.inputs:
            self.tensors[p.name] = TensorInfo(p.name, p.dtype, "g", "input", len(p.shape), p.shape, p.span, written=True)
        for p in self.k.outputs:
            self.tensors[p.name] = TensorInfo(p.name, p.dtype, "g", "output", len(p.shape), p.shape, p.span)
        for n in self.nodes.order:
            if isinstance(n, A.Loop):
                self.loop_vars_anywhere.add(n.var)
        self._structure(self.k.body, (), {}, frozenset())
        if any(d.is_error for d in self.diags):
            # names/types are broken; later passes would only produce noise
            return CheckResult(self.k, self.diags, self.tensors, self.stmts)
        self._order()
        self._shapes()
        self._numeric()
        if not any(d.is_error for d in self.diags):
            self._bounds()
            self._races()
            self._outputs()
            self._capacity()
        return CheckResult(self.k, self.diags, self.tensors, self.stmts)

    # -- pass 1: structure, names, types ----------------------------------------
    def _structure(self, items, loops: tuple[A.Loop, ...], bound_axes: dict, visible: frozenset):
        """``visible``: the private tensors whose ``\\alloc`` encloses these items."""
        for it in items:
            if isinstance(it, A.Loop):
                self._loop(it, loops, bound_axes, visible)
            elif isinstance(it, A.Region):
                self.warn("W004", f"region annotation ^{{{it.tag}}} has no effect on code generation; its body runs in order", it.span)
                self._structure(it.body, loops, bound_axes, visible)
            elif isinstance(it, A.Align):
                self.warn("W004", f"align({it.axis},{it.factor},{it.offset}) on '{it.name}' has no effect on code generation", it.span)
            elif isinstance(it, A.Alloc):
                if self._alloc(it, loops, bound_axes):
                    visible = visible | {it.name}
            else:
                self._assign(it, loops, visible)

    def _alloc(self, al: A.Alloc, loops, bound_axes: dict) -> bool:
        """Declare a private tensor (docs/language.md, "Private tensors"); False if rejected."""
        if al.name in self.params:
            self.err("E047", f"'{al.name}' is a kernel parameter; only intermediates can be allocated", al.span)
            return False
        if al.name in self.loop_vars_anywhere:
            self.err("E021", f"'{al.name}' is a loop index and cannot be used as a tensor", al.span)
            return False
        old = self.tensors.get(al.name)
        if old is not None:
            where = "allocated" if old.private else "used"
            self.err("E047", f"'{al.name}' is already {where} at {_pos(old.span)}; a private tensor has one "
                     f"\\alloc and is used only after it, inside the same body", al.span,
                     notes=["give the second tile its own name"])
            return False
        if any(d <= 0 for d in al.shape):
            self.err("E048", f"private tensor '{al.name}' has a dimension of extent 0; extents must be positive", al.span)
            return False
        if al.scope == "s" and any(kind == "thread" for kind, _ in bound_axes):
            self.err("E048", f"shared tensor '{al.name}' is allocated inside a thread-bound loop; shared memory belongs "
                     f"to a block: allocate it outside the thread loops (or use scope l for a per-thread tile)", al.span)
            return False
        self.tensors[al.name] = TensorInfo(al.name, al.dtype, al.scope, "intermediate", len(al.shape), tuple(al.shape),
                                           al.span, alloc=al, alloc_loops=tuple(loops))
        return True

    def _loop(self, lp: A.Loop, loops, bound_axes: dict, visible: frozenset = frozenset()):
        if lp.extent <= 0:
            self.err("E024", f"loop '{lp.var}' has extent {lp.extent}; extents must be positive", lp.span)
        if lp.start != 0:
            self.warn("W003", f"loop '{lp.var}' starts at {lp.start}: leirc iterates {lp.start}..{lp.start + lp.extent - 1}; the Step-TP reference ignores the start", lp.span)
        if any(o.var == lp.var for o in loops):
            self.err("E017", f"loop index '{lp.var}' shadows an enclosing loop with the same index", lp.span)
        if lp.var in self.tensors or lp.var in self.params:
            self.err("E021", f"'{lp.var}' is a tensor name and cannot be a loop index", lp.span)
        bound_axes = dict(bound_axes)
        if lp.kind == "B":
            ax = binding_axis(lp.var)
            if ax is None:
                self.err("E041", f"bound loop index '{lp.var}' must start with tx, ty, tz (threads) or bx, by, bz (blocks)", lp.span,
                         notes=["the index name selects the hardware axis, e.g. 'tx' -> threadIdx.x, 'bya' -> blockIdx.y"])
            else:
                kind, axis = ax
                key = (kind, axis)
                if key in bound_axes:
                    self.err("E042", f"{kind}Idx.{axis} is already bound by enclosing loop '{bound_axes[key].var}'", lp.span)
                bound_axes[key] = lp
                limit = (THREAD_LIMITS if kind == "thread" else BLOCK_LIMITS)[axis]
                if lp.extent > limit:
                    self.err("E043", f"{kind}Idx.{axis} extent {lp.extent} exceeds the CUDA limit {limit}", lp.span)
                threads = 1
                for (kd, _), l2 in bound_axes.items():
                    if kd == "thread":
                        threads *= l2.extent
                if kind == "thread" and threads > MAX_THREADS_PER_BLOCK:
                    self.err("E043", f"{threads} threads per block exceed the CUDA limit {MAX_THREADS_PER_BLOCK}", lp.span)
        if lp.kind == "V" and lp.extent > MAX_VECTOR_LANES:
            self.err("E044", f"vectorized loop '{lp.var}' has {lp.extent} lanes; at most {MAX_VECTOR_LANES} are allowed", lp.span,
                     notes=["split the loop (loop_split) and vectorize the inner part"])
        self._structure(lp.body, loops + (lp,), bound_axes, visible)

    def _assign(self, st: A.Assign, loops, visible: frozenset = frozenset()):
        info = StmtInfo(st, loops, len(self.stmts))
        info.private = {n: len(self.tensors[n].alloc_loops) for n in visible}
        self.stmts.append(info)
        in_scope = {l.var for l in loops}
        nodes = self.nodes
        for acc in [st.target, *nodes.accesses(st.value), *[a for i in st.target.indices for a in nodes.accesses(i)]]:
            self._tensor_use(acc, in_scope, visible, loops)
        for n in nodes.vars(st.value) + [x for i in st.target.indices for x in nodes.vars(i)]:
            if n.name not in in_scope:
                if n.name in self.tensors or n.name in self.params:
                    self.err("E021", f"'{n.name}' is a tensor; write it with its type, e.g. {n.name}^{{f32,g}}", n.span)
                else:
                    self.err("E012", f"unknown index '{n.name}': no enclosing loop defines it", n.span)
        # types
        ttype = st.target.dtype
        for idx in st.target.indices:
            self._index_type(idx)
        vt = self._type(st.value)
        if vt is not None and _is_float(vt) and _is_int(ttype) and vt != "float_lit":
            self.warn("W009", f"{vt} value stored into {ttype} tensor '{st.target.name}' is truncated", st.span)
        if vt is not None and vt == "float_lit" and _is_int(ttype):
            self.warn("W009", f"float literal stored into {ttype} tensor '{st.target.name}' is truncated", st.span)

    def _tensor_use(self, acc: A.Access, in_scope, visible: frozenset = frozenset(), loops=()):
        if acc.name in in_scope or (acc.name in self.loop_vars_anywhere and acc.name not in self.params):
            self.err("E021", f"'{acc.name}' is a loop index and cannot be used as a tensor", acc.span)
            return
        p = self.params.get(acc.name)
        info = self.tensors.get(acc.name)
        if p is not None:
            if acc.dtype != p.dtype:
                self.err("E015", f"'{acc.name}' is declared {p.dtype} but accessed as {acc.dtype}", acc.span)
            if acc.scope != "g":
                self.warn("W005", f"scope '{acc.scope}' on kernel parameter '{acc.name}' is ignored (parameters live in global memory)",
                          acc.span, key=("W005", acc.name))
            if len(acc.indices) != len(p.shape):
                self.err("E016", f"'{acc.name}' has rank {len(p.shape)} but is accessed with {len(acc.indices)} subscript(s)", acc.span)
            return
        if info is None:
            self.tensors[acc.name] = TensorInfo(acc.name, acc.dtype, acc.scope, "intermediate", len(acc.indices), None, acc.span)
            return
        if info.private:
            if acc.name not in visible:
                self.err("E047", f"private tensor '{acc.name}' is used outside its \\alloc at {_pos(info.span)}; it exists "
                         f"only from the \\alloc to the end of the enclosing body", acc.span)
                return
            inner = loops[len(info.alloc_loops):]
            if info.scope == "l" and any(l.kind == "B" and (binding_axis(l.var) or ("",))[0] == "thread" for l in inner):
                self._local_outside_thread(acc, info)
        if info.dtype != acc.dtype:
            self.err("E013", f"'{acc.name}' is {info.dtype} at {_pos(info.span)} but {acc.dtype} here", acc.span,
                     notes=["a tensor has one dtype; copy it into a new tensor to change it"])
        if info.scope != acc.scope:
            self.err("E014", f"'{acc.name}' is in scope '{info.scope}' at {_pos(info.span)} but '{acc.scope}' here", acc.span,
                     notes=["a tensor has one memory scope; copies into another scope are new tensors"])
        if info.rank != len(acc.indices):
            self.err("E016", f"'{acc.name}' is accessed with {info.rank} subscript(s) at {_pos(info.span)} but {len(acc.indices)} here", acc.span)

    def _local_outside_thread(self, acc: A.Access, info: TensorInfo):
        key = ("E048", acc.name)
        if key in self._warned:
            return
        self._warned.add(key)
        self.err("E048", f"local tensor '{acc.name}' is allocated outside a thread-bound loop that uses it; local "
                 f"memory belongs to one thread: allocate it inside the thread loop (or use scope s)", acc.span)

    def _index_type(self, idx: A.Expr):
        t = self._type(idx)
        if t is not None and not _is_int(t) and t != "bool":
            self.err("E022", f"subscript has type {t}; subscripts must be integers", idx.span)

    def _type(self, e: A.Expr) -> Optional[str]:
        """Type of an expression; reports E022/E023 on the way. None if unknown."""
        if isinstance(e, A.Const):
            return "int_lit" if e.is_int else "float_lit"
        if isinstance(e, A.Var):
            return "int_lit"
        if isinstance(e, A.Access):
            for i in e.indices:
                self._index_type(i)
            return e.dtype
        if isinstance(e, A.Neg):
            return self._type(e.operand)
        if isinstance(e, A.Compare):
            for o in e.operands:
                self._type(o)
            return "bool"
        if isinstance(e, A.BinOp):
            lt, rt = self._type(e.lhs), self._type(e.rhs)
            if e.op in ("&", "|"):
                for side, t in ((e.lhs, lt), (e.rhs, rt)):
                    if t is not None and t != "bool":
                        self.err("E023", f"operand of '{e.op}' has type {t}; '&' and '|' combine conditions", side.span)
                return "bool"
            if lt is None or rt is None:
                return None
            if e.op == "/":
                t = _promote(lt, rt)
                return t if _is_float(t) else ("float_lit" if t == "int_lit" else "f32")
            if e.op == "**":
                t = _promote(lt, rt)
                return t if _is_float(t) else ("float_lit" if t == "int_lit" else t)
            return _promote(lt, rt)
        if isinstance(e, A.Call):
            ts = [self._type(a) for a in e.args]
            if e.func in A.CAST_FUNCS:
                return e.func
            if e.func == "if_then_else":
                c = ts[0]
                if c is not None and c != "bool":
                    self.err("E023", f"if_then_else condition has type {c}; use a comparison", e.args[0].span)
                if ts[1] is None or ts[2] is None:
                    return None
                return _promote(ts[1], ts[2])
            if e.func in ("max", "min"):
                if any(t is None for t in ts):
                    return None
                t = ts[0]
                for u in ts[1:]:
                    t = _promote(t, u)
                return t
            if e.func == "abs":
                return ts[0]
            if e.func in ("floor", "ceil"):
                return ts[0]
            # transcendental: float result
            t = ts[0]
            for u in ts[1:]:
                if t is not None and u is not None:
                    t = _promote(t, u)
            if t is None:
                return None
            return t if _is_float(t) else ("float_lit" if t == "int_lit" else "f32")
        return None

    # -- pass 2: program order, statement kinds -----------------------------------
    def _order(self):
        written = set(self.input_names)
        for si in self.stmts:
            st = si.stmt
            x = st.target.name
            if x in self.input_names:
                self.err("E020", f"kernel input '{x}' is written; inputs are read-only", st.target.span,
                         notes=["copy it into a new tensor first"])
            reads = self.nodes.accesses(st.value) + [a for i in st.target.indices for a in self.nodes.accesses(i)]
            for r in reads:
                if r.name != x and r.name not in written:
                    self.err("E018", f"'{r.name}' is read before any statement writes it", r.span)
                info = self.tensors.get(r.name)
                if info is not None:
                    info.read = True
            self._classify(si, x in written, written)
            written.add(x)
            if x in self.tensors:
                self.tensors[x].written = True

    def _classify(self, si: StmtInfo, previously_written: bool, written: set):
        st = si.stmt
        x = st.target.name
        nodes = self.nodes
        self_reads = [a for a in nodes.accesses(st.value) if a.name == x]
        target_vars = set()
        for i in st.target.indices:
            target_vars |= {n.name for n in nodes.vars(i)}
        # a private tensor is fresh in every iteration of the loops around its \alloc:
        # only the loops inside it can reduce into one copy
        own_loops = si.loops[si.private.get(x, 0):]
        reduce_vars = tuple(l.var for l in own_loops if l.var not in target_vars)
        if not self_reads:
            si.kind = "assign"
            return
        same = [a for a in self_reads if a.indices == st.target.indices]
        other = [a for a in self_reads if a.indices != st.target.indices]
        if other:
            si.kind = "scan"
            carried = set(reduce_vars) if same else set()
            for a in other:
                for i_w, i_r in zip(st.target.indices, a.indices):
                    if i_w != i_r:
                        carried |= {n.name for n in nodes.vars(i_w)}
                        carried |= {n.name for n in nodes.vars(i_r)}
            si.carried = frozenset(carried & {l.var for l in si.loops})
            si.reduce_vars = reduce_vars
            return
        form = _reduction_form(st)
        if previously_written:
            si.kind = "update"
            si.reduce_vars = reduce_vars
            si.carried = frozenset(reduce_vars)
            if form is not None and reduce_vars:
                op = form[0]
                self.warn("W002", f"'{x}' was written before, so '{x} = {x} {op} ...' accumulates into its current values "
                          f"(no identity initialization) over loop(s) {', '.join(reduce_vars)}", st.span,
                          notes=["this is the Step-TP rule; write the accumulation into a fresh tensor to get a reduction"])
            return
        if form is None:
            self.err("E046", f"'{x}' is read by its own first write, but '{st.target.name} = ...' is not a reduction "
                     f"(X = X op e with op one of + - * max min)", st.span,
                     notes=["initialize it in an earlier statement to make this an in-place update"])
            return
        op, operand, commuted = form
        if commuted:
            self.warn("W001", f"'{x}' accumulates with itself on the right ('e {op} {x}'); leirc treats it as a reduction "
                      f"with identity {IDENTITY[op]}, the Step-TP reference lowering leaves it uninitialized", st.span)
        si.kind = "reduce"
        si.op = op
        si.identity = IDENTITY[op]
        si.operand = operand
        si.reduce_vars = reduce_vars
        si.carried = frozenset(reduce_vars)
        si.init_loop = next((l for l in si.loops if l.var in reduce_vars), None)

    # -- pass 3: shapes -----------------------------------------------------------
    def _facts(self, loops) -> Facts:
        """The facts of a loop nest; shared, so callers must not modify them (the passes
        refine with ``assuming``, which copies)."""
        key = tuple(map(id, loops))
        f = self._facts_by_nest.get(key)
        if f is None:
            f = Facts()
            for l in loops:
                f.ranges[l.var] = (l.start, l.start + l.extent - 1)
            self._facts_by_nest[key] = f
        return f

    def _types_of(self, root: A.Expr) -> dict:
        """``expr_types`` of every expression of the kernel (``root`` among them), computed
        once: reversed pre-order visits every node after its children."""
        types = self._types
        if not types:
            for n in reversed(self.nodes.order):
                types[id(n)] = node_type(n, types)
        if id(root) not in types:  # not part of this kernel's tree
            from .types import expr_types

            types.update(expr_types(root))
        return types

    def _shapes(self):
        lo_hi: dict[str, list] = {}
        for si in self.stmts:
            t = si.stmt.target
            info = self.tensors.get(t.name)
            if info is None or info.role != "intermediate" or info.private:
                continue  # a private tensor's shape is declared
            facts = self._facts(si.loops)
            dims = lo_hi.setdefault(t.name, [[0, 0] for _ in t.indices])
            for k, idx in enumerate(t.indices):
                iv = facts.interval(idx)
                if iv is None:
                    self.err("E031", f"cannot bound subscript {k + 1} of '{t.name}' from the loop ranges, so its shape is unknown",
                             idx.span, notes=["intermediate shapes are inferred from the subscripts of their writes"])
                    continue
                if iv[0] < 0:
                    self.err("E031", f"subscript {k + 1} of '{t.name}' can be {iv[0]}; intermediates start at index 0", idx.span)
                dims[k][1] = max(dims[k][1], iv[1])
        for name, dims in lo_hi.items():
            self.tensors[name].shape = tuple(d[1] + 1 for d in dims)
        for info in self.tensors.values():
            if info.role == "intermediate" and info.shape is None:
                info.shape = tuple(1 for _ in range(info.rank))

    # -- pass 3b: literals and integer ranges (docs/language.md, "Types") ------------------
    def _numeric(self):
        """E025 for literals their adopted type cannot hold, E026 for integer values that
        provably leave the range of the signed type they compute in or are converted to."""
        for si in self.stmts:
            facts = self._facts(si.loops)
            st = si.stmt
            for idx in st.target.indices:
                self._numeric_expr(idx, "i64", None, facts, key=idx)
            self._numeric_expr(st.value, st.target.dtype, st.target.dtype, facts, key=None)

    @staticmethod
    def _refine(state, cond, truth):
        facts, exact = state
        return facts.assuming_shared(cond, truth), exact and captures(cond, truth, facts)

    def _numeric_expr(self, root: A.Expr, ctx: str, conv, facts: Facts, key):
        """Walk ``root`` (computed in context ``ctx``, converted to ``conv``) with the path
        facts of the guards. ``key`` is the subscript ``root`` is, if it is one: E026 there
        replaces the bounds proof. An overflow is reported only when it is provable: the
        interval is attained (:func:`leirc.lang.affine.attained`) and every guard on the way
        was captured exactly (:func:`leirc.lang.affine.captures`)."""
        flagged: list = []  # (provable, node, interval, type, how)
        subscripts: list = []
        skip: set[int] = set()
        for n, T, cv, (f, exact) in typed_walk(root, ctx, conv, (facts, True), self._refine, self._types_of(root)):
            if id(n) in skip:
                continue
            if isinstance(n, A.Access):
                subscripts.extend(n.indices)
                continue
            lit = _literal_value(n)
            if lit is not None:
                inner = n
                while isinstance(inner, A.Neg):
                    inner = inner.operand
                    skip.add(id(inner))
                self._check_literal(n, lit, cv)
                continue
            if T is None or T == "bool" or T not in INT_RANGES or f.infeasible():
                continue
            iv = f.grounded_interval(n)
            if iv is None:
                continue
            for how, U in (("computes in", T), ("is converted to", cv)):
                if U is None or (how != "computes in" and U == T) or U not in INT_RANGES or not is_signed_int(U):
                    continue
                lo, hi = INT_RANGES[U]
                if iv[0] < lo or iv[1] > hi:
                    flagged.append((exact and attained(n, f), n, iv, U, how))
        if not any(x[0] for x in flagged):
            return
        # group by the innermost subscript that contains the node (None: the value itself)
        owner: dict[int, A.Expr] = {}
        for sub in subscripts:  # pre-order: inner subscripts come later and win
            for m in self.nodes.walk(sub):
                owner[id(m)] = sub
        groups: dict = {}
        for item in flagged:
            if item[0]:
                sub = owner.get(id(item[1]), key)
                groups.setdefault(id(sub) if sub is not None else None, []).append(item)
        for k, items in groups.items():
            # the innermost provable overflow is the one to fix
            _, n, iv, U, how = min(items, key=lambda x: self.nodes.size(x[1]))
            if k is not None:
                self._overflowed.add(k)
            self.err("E026", f"integer overflow: '{_short(n)}' {how} {U} but ranges over [{iv[0]}, {iv[1]}], "
                     f"beyond [{INT_RANGES[U][0]}, {INT_RANGES[U][1]}]", n.span,
                     notes=["signed integer overflow is an error in LEIR; unsigned arithmetic wraps modulo 2^n"])

    def _check_literal(self, n: A.Expr, value, conv: Optional[str]):
        if conv is None:
            return  # a whole subscript: int64, which every literal the parser accepts fits
        if conv.startswith("cast:"):
            target = conv[5:]
            # an explicit cast of an integer literal wraps by definition; a float literal
            # converted to an integer type has no value when it is out of range
            if isinstance(value, int) or target not in INT_RANGES:
                return
        else:
            target = conv
        why = literal_misfit(value, target)
        if why is not None:
            self.err("E025", f"literal {_fmt_lit(value)} meets {target} here and {why}", n.span, notes=[_LITERAL_NOTE])

    def _may_overflow(self, idx: A.Expr, facts: Facts) -> Optional[A.Expr]:
        """An integer node of subscript ``idx`` whose interval leaves the range of the type it
        computes in (so the interval of ``idx`` is not its value under int64 arithmetic)."""
        for n, T, cv, f in typed_walk(idx, "i64", None, facts, lambda st, c, t: st.assuming_shared(c, t),
                                      self._types_of(idx)):
            if isinstance(n, A.Access):
                continue
            if T is None or T not in INT_RANGES or T == "bool" or _literal_value(n) is not None or f.infeasible():
                continue
            iv = f.grounded_interval(n)
            if iv is None:
                continue
            for U in (T, cv):
                if U is None or U not in INT_RANGES or U == "bool":
                    continue
                lo, hi = INT_RANGES[U]
                if iv[0] < lo or iv[1] > hi:
                    return n
        return None

    # -- pass 4: bounds -------------------------------------------------------------
    def _bounds(self):
        for si in self.stmts:
            facts = self._facts(si.loops)
            st = si.stmt
            self._bounds_access(st.target, facts)
            for i in st.target.indices:
                self._bounds_expr(i, facts)
            self._bounds_expr(st.value, facts)

    def _bounds_expr(self, e: A.Expr, facts: Facts):
        # explicit stack so deep expressions cannot overflow; if_then_else refines facts
        stack = [(e, facts)]
        while stack:
            n, f = stack.pop()
            if isinstance(n, A.Call) and n.func == "if_then_else":
                c, a, b = n.args
                stack.append((c, f))
                stack.append((a, f.assuming_shared(c, True)))
                stack.append((b, f.assuming_shared(c, False)))
                continue
            if isinstance(n, A.Access):
                self._bounds_access(n, f)
                for i in n.indices:
                    stack.append((i, f))
                continue
            for ch in self.nodes.children(n):
                stack.append((ch, f))

    def _bounds_access(self, acc: A.Access, facts: Facts):
        info = self.tensors.get(acc.name)
        if info is None or info.shape is None:
            return
        if facts.infeasible():
            return  # inside a branch that is never taken
        for k, (idx, n) in enumerate(zip(acc.indices, info.shape)):
            if id(idx) in self._overflowed:
                continue  # E026 already says why this subscript has no value
            iv = facts.interval(idx)
            # the interval is computed in the integers; it is the subscript's value only if
            # no intermediate leaves the range of the type it computes in
            wide = self._may_overflow(idx, facts) if iv is not None else None
            if wide is not None:
                self.err("E030", f"cannot prove subscript {k + 1} of '{acc.name}' lies in [0, {n}): the intermediate "
                         f"'{_short(wide)}' may exceed the range of its integer type", idx.span,
                         notes=["integer intermediates of subscripts compute in int64; keep them in range"])
                continue
            if iv is not None and (iv[0] <= -(1 << 61) or iv[1] >= 1 << 61):
                iv = None  # a one-sided guard bounds only one end: still unknown
            if iv is None:
                if any(isinstance(x, A.Access) for x in self.nodes.walk(idx)):
                    self.warn("W014", f"subscript {k + 1} of '{acc.name}' depends on tensor data; it is bounds-checked at run time by the interpreter",
                              idx.span, key=("W014", acc.span))
                else:
                    self.err("E030", f"cannot prove subscript {k + 1} of '{acc.name}' lies in [0, {n})", idx.span)
                continue
            if iv[0] < 0 or iv[1] >= n:
                self.err("E030", f"subscript {k + 1} of '{acc.name}' ranges over [{iv[0]}, {iv[1]}] but the extent is {n}", idx.span,
                         notes=["guard the access with if_then_else(cond, access, other) where cond proves the bound"])

    # -- pass 5: dependences under P/V/B loops ---------------------------------------
    def _races(self):
        for lp in (n for n in self.nodes.order if isinstance(n, A.Loop) and n.kind in ("P", "V", "B")):
            inside = [si for si in self.stmts if any(l is lp for l in si.loops)]
            if lp.extent == 1:
                continue
            conflict = find_conflict(lp, inside)
            if conflict is None:
                continue
            si, msg = conflict
            if lp.kind == "B" and si.kind == "reduce" and lp.var in si.reduce_vars and _only_self_conflicts(lp, inside, si):
                continue  # cross-thread reduction: defined (see docs/language.md)
            kind = A.LOOP_KIND_NAMES[lp.kind]
            self.err("E040", f"{kind} loop '{lp.var}' carries a dependence: {msg}", lp.span,
                     notes=["iterations of P, V and B loops run concurrently; only reductions may span a B loop"])

    # -- pass 6: outputs and usage ---------------------------------------------------
    def _outputs(self):
        written_boxes: dict[str, list] = {}
        for si in self.stmts:
            t = si.stmt.target
            if t.name in self.output_names:
                ranges = self._facts(si.loops).ranges
                box = []
                for idx in t.indices:
                    iv = Facts(dict(ranges)).interval(idx)
                    box.append(iv)
                written_boxes.setdefault(t.name, []).append(box)
        for p in self.k.outputs:
            if p.name not in written_boxes:
                self.err("E019", f"output '{p.name}' is never written", p.span or self.k.span)
                continue
            boxes = written_boxes[p.name]
            if any(iv is None for b in boxes for iv in b):
                continue
            if not _covers(boxes, p.shape):
                self.err("E032", f"output '{p.name}' is not written everywhere: the writes cover only part of shape {list(p.shape)}",
                         p.span or self.k.span)
        for p in self.k.inputs:
            info = self.tensors.get(p.name)
            if info is not None and not info.read:
                self.warn("W006", f"kernel input '{p.name}' is never read", p.span or self.k.span)
        for info in self.tensors.values():
            if info.role == "intermediate" and not info.read:
                self.warn("W007", f"'{info.name}' is written but never read", info.span)

    def _capacity(self):
        for info in self.tensors.values():
            if info.role != "intermediate" or info.scope != "s" or not info.shape:
                continue
            nbytes = math.prod(info.shape) * DTYPE_BYTES.get(info.dtype, 4)
            per_block = None if info.private else per_block_footprint(info.name, self.stmts)
            if per_block is not None:
                nbytes = per_block * DTYPE_BYTES.get(info.dtype, 4)
            if nbytes > SHARED_BYTES_LIMIT:
                self.err("E045", f"shared tensor '{info.name}' needs {nbytes} bytes per block; the limit is {SHARED_BYTES_LIMIT}",
                         info.span, notes=["tile the loops so that one block touches a smaller region"])


_LITERAL_NOTE = ("a literal takes the type of the operation it meets (docs/language.md, \"Types\"); "
                 "write it in range, or convert explicitly, e.g. u8(300) wraps")


def _literal_value(e: A.Expr):
    """The value of a literal, with any unary minus applied (``-1`` is Neg(1)); None for
    anything else."""
    sign = 1
    while isinstance(e, A.Neg):
        sign = -sign
        e = e.operand
    if isinstance(e, A.Const) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
        return sign * e.value
    return None


def _fmt_lit(v) -> str:
    if isinstance(v, float) and math.isinf(v):
        return "-inf" if v < 0 else "inf"
    return repr(v) if isinstance(v, float) else str(v)


def _short(e: A.Expr, limit: int = 60) -> str:
    from .printer import print_expr

    t = print_expr(e)
    return t if len(t) <= limit else t[: limit - 3] + "..."


def _pos(span: Optional[A.Span]) -> str:
    return f"{span.line}:{span.col}" if span else "?"


# Dependences: one analysis (leirc.analysis) decides them for the checker, the strategies
# and the interpreter; the names below stay importable from the checker for old callers.
from ..analysis.deps import find_conflict, loop_independent as _loop_independent  # noqa: E402
from ..analysis.deps import only_self_conflicts as _only_self_conflicts  # noqa: E402,F401
from ..analysis.reductions import reduction_form as _reduction_form  # noqa: E402


def _independent(lp: A.Loop, wsi: StmtInfo, w: A.Access, rsi: StmtInfo, r: A.Access) -> bool:
    """Do ``w`` and ``r`` never touch one element in two different iterations of ``lp``?
    (:func:`leirc.analysis.deps.loop_independent`)"""
    return _loop_independent(lp, wsi, w, rsi, r)


def _covers(boxes, shape) -> bool:
    """Do the union of ``boxes`` (lists of inclusive intervals) cover [0, shape)?"""
    if not shape:
        return True
    full = [(0, n - 1) for n in shape]
    for b in boxes:
        if all(iv[0] <= f[0] and iv[1] >= f[1] for iv, f in zip(b, full)):
            return True
    if len(boxes) > 6:
        return True  # too many pieces to decide cheaply; the verifier checks at run time
    # coordinate compression
    cuts = []
    for d, n in enumerate(shape):
        pts = {0, n}
        for b in boxes:
            pts.add(max(0, min(n, b[d][0])))
            pts.add(max(0, min(n, b[d][1] + 1)))
        cuts.append(sorted(pts))
    import itertools

    cells = itertools.product(*[list(zip(c[:-1], c[1:])) for c in cuts])
    for cell in cells:
        if not any(all(iv[0] <= lo and iv[1] >= hi - 1 for iv, (lo, hi) in zip(b, cell)) for b in boxes):
            return False
    return True


def per_block_footprint(name: str, stmts: list[StmtInfo]) -> Optional[int]:
    """Elements of ``name`` touched while block-bound loop variables are held fixed."""
    dims: Optional[list] = None
    for si in stmts:
        accs = [si.stmt.target] + [a for a in accesses(si.stmt.value)]
        for a in accs:
            if a.name != name:
                continue
            ranges = {}
            for l in si.loops:
                ax = binding_axis(l.var) if l.kind == "B" else None
                if ax is not None and ax[0] == "block":
                    ranges[l.var] = (0, 0)
                else:
                    ranges[l.var] = (l.start, l.start + l.extent - 1)
            f = Facts(ranges)
            ivs = [f.interval(i) for i in a.indices]
            if any(iv is None for iv in ivs):
                return None
            if dims is None:
                dims = [list(iv) for iv in ivs]
            else:
                for d, iv in zip(dims, ivs):
                    d[0] = min(d[0], iv[0])
                    d[1] = max(d[1], iv[1])
    if dims is None:
        return None
    return math.prod(d[1] - d[0] + 1 for d in dims)


# ---------------------------------------------------------------------------
# public API


@A.deep_recursion()  # type inference recurses on expressions; a long sum is deep
def check_kernel(kernel: A.Kernel) -> CheckResult:
    """Check one kernel. Never raises on bad programs."""
    return _Checker(kernel).run()


def check_module(module: A.Module) -> list[CheckResult]:
    results = []
    seen: dict[str, A.Kernel] = {}
    for k in module.kernels:
        r = check_kernel(k)
        if k.name in seen and k.declared:
            r.diagnostics.insert(0, error("E010", f"kernel '{k.name}' is defined twice", k.span))
        seen[k.name] = k
        results.append(r)
    return results


@dataclass
class CheckedFile:
    parse: ParseResult
    results: list[CheckResult]

    @property
    def diagnostics(self) -> list[Diagnostic]:
        ds = list(self.parse.diagnostics)
        for r in self.results:
            ds.extend(r.diagnostics)
        return sorted(ds, key=lambda d: ((d.span.line, d.span.col) if d.span else (0, 0)))

    @property
    def ok(self) -> bool:
        return self.parse.ok and all(r.ok for r in self.results)


def check_text(text: str | bytes, file: str = "<input>") -> CheckedFile:
    """Parse and check; every diagnostic carries ``file``."""
    pr = parse(text, file)
    if pr.module is None or any(d.is_error for d in pr.diagnostics):
        return CheckedFile(pr, [])
    results = check_module(pr.module)
    for r in results:
        r.diagnostics = [d.with_file(file) for d in r.diagnostics]
    return CheckedFile(pr, results)
