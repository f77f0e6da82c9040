"""Semantic checker: names, types, shapes, static bounds, statement kinds, dependences.

The checker collects *every* problem as a :class:`Diagnostic` (never stops at the first)
and, for programs without errors, produces the facts that every later stage relies on:
tensor table (dtype, scope, shape, role), and per statement its kind (plain assignment,
reduction with identity initialization, in-place update, scan) and the loops that carry
a dependence. The rules are written down in ``docs/language.md``; the diagnostic codes
are listed in :mod:`leirc.lang.diagnostics`.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from operator import attrgetter
from typing import Optional

from . import ast as A
from .affine import Facts, affine_interval, attained, captures
from .diagnostics import Diagnostic, error, warning
from .facts import CheckResult, StmtInfo, TensorInfo, accesses
from .parser import ParseResult, parse
from .private import uninitialized_reads

# CUDA launch limits (compute capability >= 3.0)
MAX_THREADS_PER_BLOCK = 1024
THREAD_LIMITS = {"x": 1024, "y": 1024, "z": 64}
BLOCK_LIMITS = {"x": 2**31 - 1, "y": 65535, "z": 65535}
MAX_VECTOR_LANES = 64
SHARED_BYTES_LIMIT = 48 * 1024

_I64_MAX = (1 << 63) - 1
_UNKNOWN = object()  # a subscript the literal pass did not reach

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


#: the same for the statement and structure nodes, so building the node list never falls
#: back to the generic field scan (tests/test_checker_speed_equivalence.py compares the
#: resulting walk with ``A.walk``)
_ITEM_CHILDREN = {
    A.Assign: lambda n: (n.target, n.value),
    A.Loop: lambda n: n.body,
    A.Region: lambda n: n.body,
    A.Alloc: lambda n: (),
    A.Align: lambda n: (),
    A.Param: lambda n: (),
    A.Kernel: lambda n: n.inputs + n.outputs + n.body,
}


_NODE_CHILDREN = {**_ITEM_CHILDREN, **_EXPR_CHILDREN}
#: the node list's builder: the nodes without children, and the same getters as C-level
#: attribute getters where the children are fields (a tuple field, or a pair of nodes)
_LEAVES = frozenset({A.Var, A.Const, A.Alloc, A.Align, A.Param})
_CHILD_GETTERS = {
    A.BinOp: attrgetter("lhs", "rhs"), A.Access: attrgetter("indices"), A.Call: attrgetter("args"),
    A.Compare: attrgetter("operands"), A.Assign: attrgetter("target", "value"), A.Loop: attrgetter("body"),
    A.Region: attrgetter("body"), A.Neg: _EXPR_CHILDREN[A.Neg], A.Kernel: _ITEM_CHILDREN[A.Kernel],
}
#: how deep :class:`_Nodes` recurses before it takes its explicit stack
_RECURSION_DEPTH = 200


class _TooDeep(Exception):
    pass


class _Nodes:
    """The pre-order node list of one kernel, built once and shared by every pass: the
    subtree of a node is a slice of it (pre-order keeps a subtree contiguous), so a pass
    that needs "every node under this subscript" slices a list instead of walking again."""

    def __init__(self, root):
        order: list = []
        start: dict[int, int] = {}  # id(node) -> its position in ``order``
        guards: list[int] = []
        try:
            ends = self._build_recursive(root, order, start, guards)
        except _TooDeep:  # a long operator chain: the explicit stack below has no depth limit
            order = []
            ends = self._build_iterative(root, order, {})
            start = {id(n): i for i, n in enumerate(order)}
            guards = [i for i, n in enumerate(order) if n.__class__ is A.Call and n.func == "if_then_else"]
        self.order = order
        self._start = start
        self._end = ends  # the index after the last node of each node's subtree
        self._access_memo: dict[int, list] = {}
        self._var_memo: dict[int, list] = {}
        # positions of the if_then_else calls, ascending: the guards that refine facts
        self._guards = guards

    @staticmethod
    def _build_recursive(root, order: list, start: dict, guards: list) -> list:
        """Pre-order into ``order`` (with each node's position in ``start`` and the
        if_then_else positions in ``guards``); the subtree ends. Recursion is about twice
        as fast as an explicit stack here, so it is used up to a modest depth (raising
        ``_TooDeep`` beyond, wherever the caller's stack stands). Leaves (most nodes are
        loop indices and literals) are appended by their parent, without a call."""
        ends: list[int] = []
        table = _CHILD_GETTERS
        leaves = _LEAVES
        generic = A.children
        append, open_end = order.append, ends.append
        call = A.Call

        def visit(n, depth):
            i = len(order)
            append(n)
            open_end(0)
            start[id(n)] = i
            cls = n.__class__
            get = table.get(cls)
            ch = get(n) if get is not None else tuple(generic(n))
            if ch:
                if depth > _RECURSION_DEPTH:
                    raise _TooDeep
                if cls is call and n.func == "if_then_else":
                    guards.append(i)
                for c in ch:
                    if c.__class__ in leaves:
                        j = len(order)
                        append(c)
                        open_end(j + 1)
                        start[id(c)] = j
                    else:
                        visit(c, depth + 1)
            ends[i] = len(order)

        try:
            if root.__class__ in leaves:
                append(root)
                open_end(1)
                start[id(root)] = 0
            else:
                visit(root, 0)
        finally:
            del visit  # the closure refers to itself: without this every check leaves a cycle
        return ends

    @staticmethod
    def _build_iterative(root, order: list, kids: dict) -> list:
        parent: list[int] = []  # index of each node's parent in ``order`` (-1: the root)
        table = _NODE_CHILDREN
        generic = A.children
        append, add_parent = order.append, parent.append
        # two parallel stacks (node, parent index): no tuple per node
        stack, up = [root], [-1]
        pop, push, pop_up, push_up = stack.pop, stack.extend, up.pop, up.extend
        while stack:
            n = pop()
            i = len(order)
            append(n)
            add_parent(pop_up())
            get = table.get(n.__class__)
            ch = get(n) if get is not None else tuple(generic(n))
            if ch:
                kids[id(n)] = ch
                push(ch[::-1])
                push_up((i,) * len(ch))
        # a subtree's size, bottom-up: children come after their parent in pre-order
        size = [1] * len(order)
        for i in range(len(order) - 1, 0, -1):
            size[parent[i]] += size[i]
        return [i + size[i] for i in range(len(order))]

    def _slice(self, n):
        i = self._start.get(id(n))
        if i is None or self.order[i] is not n:
            return None
        return i, self._end[i]

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
        cls = n.__class__
        if cls in _LEAVES:
            return []
        get = _CHILD_GETTERS.get(cls)
        return list(A.children(n) if get is None else get(n))

    def has_guard(self, n) -> bool:
        """Does the subtree of ``n`` hold an ``if_then_else``? (True for a node that is not
        in this kernel: the caller then takes its general path.)"""
        sl = self._slice(n)
        if sl is None:
            return True
        k = bisect.bisect_left(self._guards, sl[0])
        return k < len(self._guards) and self._guards[k] < sl[1]

    def accesses_last_first(self, n) -> list:
        """The accesses under ``n`` (in this kernel) in the order of a walk that visits a
        node before its operands and the operands last to first, as the bounds pass's
        explicit stack does: a node whose subtree ends later comes first, and an enclosing
        access before the ones in its subscripts."""
        start, end = self._start, self._end
        return sorted(self.accesses(n), key=lambda a: (-end[start[id(a)]], start[id(a)]))

    # several passes ask for the accesses and index variables of the same statement parts:
    # kept per node (the memo lives as long as this kernel's check; it holds the node, so
    # an id is never reused while its entry exists)
    def accesses(self, n) -> list:
        hit = self._access_memo.get(id(n))
        if hit is None or hit[0] is not n:
            hit = self._access_memo[id(n)] = (n, [x for x in self.walk(n) if x.__class__ is A.Access])
        return hit[1]

    def vars(self, n) -> list:
        hit = self._var_memo.get(id(n))
        if hit is None or hit[0] is not n:
            hit = self._var_memo[id(n)] = (n, [x for x in self.walk(n) if x.__class__ is A.Var])
        return hit[1]


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
        self._types_complete = True  # False: _type met a tree it may type unlike node_type
        # (id(subscript), id(its facts)) -> what _may_overflow answers there, found by the
        # literal pass; both ids stay valid: the kernel and the shared facts outlive the check
        self._wide: dict[tuple[int, int], Optional[A.Expr]] = {}
        self._sub_iv: dict[tuple[int, int], tuple[int, int]] = {}  # the same key -> interval

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
        if not any(d.is_error for d in self.diags):
            self._private_init()
        return CheckResult(self.k, self.diags, self.tensors, self.stmts)

    def _private_init(self):
        """E049/W049: per element, a private tile is written before this execution of its
        ``\\alloc`` reads it (:func:`leirc.lang.private.uninitialized_reads`)."""
        if not any(t.private for t in self.tensors.values()):
            return
        for sev, _name, acc, msg in uninitialized_reads(self.tensors, self.stmts):
            if sev == "error":
                self.err("E049", msg, acc.span)
            else:
                self.warn("W049", msg, acc.span)

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
            if info.scope == "l":
                self._local_outside_thread(acc, info, loops[len(info.alloc_loops):])
        if info.dtype != acc.dtype:
            self.err("E013", f"'{acc.name}' is {info.dtype} at {_pos(info.span)} but {acc.dtype} here", acc.span,
                     notes=["a tensor has one dtype; copy it into a new tensor to change it"])
        if info.scope != acc.scope:
            self.err("E014", f"'{acc.name}' is in scope '{info.scope}' at {_pos(info.span)} but '{acc.scope}' here", acc.span,
                     notes=["a tensor has one memory scope; copies into another scope are new tensors"])
        if info.rank != len(acc.indices):
            self.err("E016", f"'{acc.name}' is accessed with {info.rank} subscript(s) at {_pos(info.span)} but {len(acc.indices)} here", acc.span)

    def _local_outside_thread(self, acc: A.Access, info: TensorInfo, inner: tuple):
        """E048 for a ``local`` tile used inside thread-bound loops that its ``\\alloc`` encloses.

        Legal when the tile is partitioned by thread: for each such thread axis one dimension
        is subscripted by exactly that loop's index in every access (coefficient 1, no offset),
        the same dimension for the same axis everywhere and a different one per axis, and every
        access runs under the loops of all those axes. Each element then belongs to one thread,
        and TVM compacts the buffer to that thread's slice. ``inner``: the loops between the
        allocation and the access."""
        key = ("E048", acc.name)
        if key in self._warned:
            return
        threads = {}
        for lp in inner:
            ax = binding_axis(lp.var) if lp.kind == "B" else None
            if ax is not None and ax[0] == "thread":
                threads[ax[1]] = lp
        # per local tile: (axis -> dimension, spans of accesses outside every thread loop)
        partitions = self.__dict__.setdefault("_thread_partitions", {})
        dims, unthreaded = partitions.setdefault(acc.name, ({}, []))
        problem = None
        if not threads:
            if dims:
                problem = f"this access runs outside the thread loops ({', '.join(f'threadIdx.{a}' for a in sorted(dims))}) " \
                          f"that partition the tile"
            unthreaded.append(acc.span)
        elif unthreaded:
            problem = f"it is also used outside the thread loops, at {_pos(unthreaded[0])}"
        elif dims and set(dims) != set(threads):
            problem = f"its accesses run under different thread axes ({', '.join(sorted(dims))} and {', '.join(sorted(threads))})"
        else:
            chosen = dict(dims)
            for axis in sorted(threads):
                var = threads[axis].var
                owns = lambda d: isinstance(acc.indices[d], A.Var) and acc.indices[d].name == var  # noqa: E731
                if axis in chosen:
                    if not owns(chosen[axis]):
                        problem = (f"subscript {chosen[axis]} must be the thread index '{var}' itself, as in its "
                                   f"other accesses")
                        break
                    continue
                taken = set(chosen.values())
                free = [d for d in range(len(acc.indices)) if owns(d) and d not in taken]
                if not free:
                    problem = (f"no subscript is the thread index '{var}' itself (coefficient 1, no offset)"
                               if not any(owns(d) for d in range(len(acc.indices)))
                               else f"its subscript '{var}' is in a dimension another thread axis already uses")
                    break
                chosen[axis] = free[0]
            if problem is None:
                dims.update(chosen)
        if problem is None:
            return
        self._warned.add(key)
        self.err("E048", f"local tensor '{acc.name}' is allocated outside a thread-bound loop that uses it, and its "
                 f"elements are not each owned by one thread: {problem}", acc.span,
                 notes=["allocate it inside the thread loop, use scope s, or give each thread axis its own dimension "
                        "subscripted by that thread loop's index alone in every access (e.g. D_{ty,tx,i,j})"])

    def _index_type(self, idx: A.Expr):
        t = self._type(idx)
        if t is not None and not _is_int(t) and t != "bool":
            self.err("E022", f"subscript has type {t}; subscripts must be integers", idx.span)

    def _type(self, e: A.Expr) -> Optional[str]:
        """Type of an expression; reports E022/E023 on the way. None if unknown. Every
        result is kept for the later passes' typed walks (:meth:`_types_of`)."""
        # loop indices and accesses subscripted by them are most of the nodes: typed here,
        # without a call per node (the same answers as _type_uncached and _index_type)
        cls = e.__class__
        types = self._types
        if cls is A.Var:
            t = "int_lit"
        elif cls is A.Access:
            for i in e.indices:
                if i.__class__ is A.Var:
                    types[id(i)] = "int_lit"
                else:
                    self._index_type(i)
            t = e.dtype
        else:
            t = self._type_uncached(e)
        types[id(e)] = t
        return t

    def _type_uncached(self, e: A.Expr) -> Optional[str]:
        cls = e.__class__
        if cls is A.Const:
            return "int_lit" if e.is_int else "float_lit"
        if cls is A.Var:
            return "int_lit"
        if cls is A.Access:
            for i in e.indices:
                self._index_type(i)
            return e.dtype
        if cls is A.Neg:
            return self._type(e.operand)
        if cls is A.Compare:
            for o in e.operands:
                self._type(o)
            return "bool"
        if cls is A.BinOp:
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
        if cls is A.Call:
            ts = [self._type(a) for a in e.args]
            if e.func in A.CAST_FUNCS:
                return e.func
            if None in ts or (e.func in ("abs", "floor", "ceil") and len(ts) != 1):
                # where this function and types.node_type could answer differently (a
                # malformed tree): the typed walks type the kernel with node_type instead
                self._types_complete = False
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
        self._types_complete = False
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
        form = _reduction_form(st, nodes.accesses)
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
        """``expr_types`` of every expression of the kernel (``root`` among them). The
        structure pass typed every statement already (:meth:`_type`, the same rules as
        :func:`leirc.lang.types.node_type` on well-formed trees); where it could not vouch
        for that, the kernel is typed again with ``node_type``: reversed pre-order visits
        every node after its children."""
        types = self._types
        if not self._types_complete:
            for n in reversed(self.nodes.order):
                types[id(n)] = node_type(n, types)
            self._types_complete = True
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

    def _small_subscript(self, idx: A.Expr, facts: Facts) -> bool:
        """True if subscript ``idx`` is built only from loop indices, integer literals,
        ``+ - *``, unary minus and ``//``/``%`` by a positive literal, and a magnitude bound
        computed from the loop ranges alone keeps every node of it inside int64. Every node
        then computes in i64 and its interval lies inside that bound (interval arithmetic
        and the affine forms of :class:`Facts` never exceed it while no guard fact narrows
        the box), so neither the literal and overflow checks nor :meth:`_may_overflow`
        can report anything there: the walk skips it, which is most of a kernel's integer
        nodes. For an affine ``idx`` it also keeps ``facts.interval(idx)`` for the bounds
        pass, computed as :meth:`Facts._interval` does (no guard facts: the plain box)."""
        if facts.linear or facts.exprs:
            return False  # guard facts can leave empty intervals with far-out ends
        ranges = facts.ranges
        cls = idx.__class__
        if cls is A.Var:  # most subscripts: one loop index
            r = ranges.get(idx.name)
            if r is None or max(abs(r[0]), abs(r[1])) > _I64_MAX:
                return False
            self._sub_iv[(id(idx), id(facts))] = r
            return True
        # bottom-up over reversed pre-order (every node after its children, the first child
        # on top of the stack): (magnitude bound, affine coefficients or None, constant)
        vals: list = []
        push, pop = vals.append, vals.pop
        for n in reversed(self.nodes.walk(idx)):
            cls = n.__class__
            if cls is A.Var:
                r = ranges.get(n.name)
                if r is None:
                    return False
                v = (max(abs(r[0]), abs(r[1])), {n.name: 1}, 0)
            elif cls is A.Const:
                if n.value.__class__ is not int:
                    return False
                v = (abs(n.value), {}, n.value)
            elif cls is A.BinOp:
                (ma, ca, ka), (mb, cb, kb) = pop(), pop()
                op = n.op
                if op == "+" or op == "-":
                    if ca is None or cb is None:
                        v = (ma + mb, None, 0)
                    else:
                        sg = -1 if op == "-" else 1
                        coefs = dict(ca)
                        for k, c in cb.items():
                            coefs[k] = coefs.get(k, 0) + sg * c
                        v = (ma + mb, {k: c for k, c in coefs.items() if c != 0}, ka + sg * kb)
                elif op == "*":
                    if ca is None or cb is None or (ca and cb):
                        v = (ma * mb, None, 0)
                    else:
                        if not ca:
                            ca, ka, cb, kb = cb, kb, ca, ka
                        v = (ma * mb, {k: c * kb for k, c in ca.items() if c * kb != 0}, ka * kb)
                elif op == "//" or op == "%":
                    d = n.rhs
                    if d.__class__ is not A.Const or d.value.__class__ is not int or d.value <= 0:
                        return False
                    v = (ma if op == "//" else max(ma, mb), None, 0)
                else:
                    return False
            elif cls is A.Neg:
                m, c, k = pop()
                v = (m, None if c is None else {x: -y for x, y in c.items()}, -k)
            else:
                return False
            if v[0] > _I64_MAX:
                return False
            push(v)
        _, coefs, const = vals[0]
        if coefs is not None:
            self._sub_iv[(id(idx), id(facts))] = affine_interval(coefs, const, ranges)
        return True

    def _numeric_expr(self, root: A.Expr, ctx: str, conv, facts: Facts, key):
        """Walk ``root`` (computed in context ``ctx``, converted to ``conv``) with the path
        facts of the guards. ``key`` is the subscript ``root`` is, if it is one: E026 there
        replaces the bounds proof. An overflow is reported only when it is provable: the
        interval is attained (:func:`leirc.lang.affine.attained`) and every guard on the way
        was captured exactly (:func:`leirc.lang.affine.captures`).

        On the way it records, for every subscript it meets, what :meth:`_may_overflow`
        would answer there (the bounds pass reads it instead of walking again)."""
        if key is not None and self._small_subscript(root, facts):
            self._wide[(id(root), id(facts))] = None
            return
        flagged: list = []  # (provable, node, interval, type, how)
        subscripts: list = []
        walked: list = []  # (subscript, its facts) walked here, for _wide
        wide: list = []  # nodes _may_overflow would name, in pre-order
        if key is not None:
            walked.append((root, facts))
        skip: set[int] = set()  # inner literals of a negative literal, and small subscripts
        small = self._small_subscript
        for n, T, cv, (f, exact) in typed_walk(root, ctx, conv, (facts, True), self._refine, self._types_of(root),
                                               skip=skip):
            if id(n) in skip:
                continue
            cls = n.__class__
            if cls is A.Access:
                subscripts.extend(n.indices)
                for i in n.indices:
                    if small(i, f):
                        skip.add(id(i))
                        self._wide[(id(i), id(f))] = None
                    else:
                        walked.append((i, f))
                continue
            if cls is A.Const or cls is A.Neg:
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
                if U is None or U not in INT_RANGES or U == "bool":
                    continue
                lo, hi = INT_RANGES[U]
                if iv[0] < lo or iv[1] > hi:
                    if not wide or wide[-1] is not n:
                        wide.append(n)
                    if (how == "computes in" or U != T) and is_signed_int(U):
                        flagged.append((exact and attained(n, f), n, iv, U, how))
        for sub, f in walked:
            sl = self.nodes._slice(sub)
            if sl is not None:
                start = self.nodes._start
                self._wide[(id(sub), id(f))] = next((n for n in wide if sl[0] <= start[id(n)] < sl[1]), None)
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
        nodes = self.nodes
        for si in self.stmts:
            facts = self._facts(si.loops)
            st = si.stmt
            self._bounds_access(st.target, facts)
            for root in (*st.target.indices, st.value):
                if nodes.has_guard(root):
                    self._bounds_expr(root, facts)
                else:
                    # no guard refines the facts anywhere below: only the accesses matter,
                    # taken in the order the walk would meet them
                    for acc in nodes.accesses_last_first(root):
                        self._bounds_access(acc, facts)

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
            iv = self._sub_iv.get((id(idx), id(facts)))
            if iv is None:
                iv = facts.interval(idx)
            # the interval is computed in the integers; it is the subscript's value only if
            # no intermediate leaves the range of the type it computes in
            wide = None
            if iv is not None:
                # what the literal pass found on its walk of this very subscript
                wide = self._wide.get((id(idx), id(facts)), _UNKNOWN)
                if wide is _UNKNOWN:
                    wide = self._may_overflow(idx, facts)
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
                # the nest's facts are the plain loop ranges, so their intervals are the
                # ones of fresh facts over those ranges (and often known already)
                facts = self._facts(si.loops)
                box = []
                for idx in t.indices:
                    iv = self._sub_iv.get((id(idx), id(facts)))
                    box.append(iv if iv is not None else facts.interval(idx))
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


@A.collector_paused()
@A.deep_recursion()  # type inference recurses on expressions; a long sum is deep
def check_kernel(kernel: A.Kernel) -> CheckResult:
    """Check one kernel. Never raises on bad programs."""
    return _Checker(kernel).run()


@A.collector_paused()
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


@A.collector_paused()
def check_text(text: str | bytes, file: str = "<input>") -> CheckedFile:
    """Parse and check; every diagnostic carries ``file``."""
    pr = parse(text, file)
    if pr.module is None or any(d.is_error for d in pr.diagnostics):
        return CheckedFile(pr, [])
    results = check_module(pr.module)
    for r in results:
        r.diagnostics = [d.with_file(file) for d in r.diagnostics]
    return CheckedFile(pr, results)
