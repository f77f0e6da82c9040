"""Building LEIR loop nests for the PyTorch frontend.

The frontend emits the *naive* declared form: one loop nest per operator (all loops
``L``), spatial loops outside, reduction loops inside, tensors in global scope. This module
holds the pieces every operator needs:

* expression constructors that fold the trivial cases of index arithmetic (``i*1``,
  ``i+0``, ``i//1``) so that subscripts read like hand-written ones;
* :class:`Names`: valid, readable, unique tensor names (``[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)*``,
  upper-case first letter) derived from fx node and parameter names;
* :class:`Builder`: appends nests: :meth:`Builder.assign` (an element-wise nest) and
  :meth:`Builder.reduce` (a reduction, split into partial sums when it is long, see
  :func:`plan_split`).

Dimensions of extent 1 get the constant subscript ``0`` instead of a loop of extent 1.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ..lang import ast as A

# ---------------------------------------------------------------------------
# expressions

Expr = A.Expr


def const(v) -> Expr:
    """A literal; negative values become ``Neg(Const)`` (LEIR literals are non-negative)."""
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, float) and math.isnan(v):
        raise ValueError("NaN has no LEIR literal")
    if v < 0:
        return A.Neg(A.Const(-v))
    return A.Const(v)


def fconst(v: float) -> Expr:
    """A float literal (``2`` prints as ``2.0``)."""
    return const(float(v))


def var(name: str) -> Expr:
    return A.Var(name)


def is_int_const(e: Expr, value: Optional[int] = None) -> bool:
    if isinstance(e, A.Const) and e.is_int:
        return value is None or e.value == value
    if isinstance(e, A.Neg) and isinstance(e.operand, A.Const) and e.operand.is_int:
        return value is None or -e.operand.value == value
    return False


def int_value(e: Expr) -> int:
    if isinstance(e, A.Const):
        return int(e.value)
    assert isinstance(e, A.Neg)
    return -int(e.operand.value)


def iadd(a: Expr, b: Expr) -> Expr:
    """Index addition with folding."""
    if is_int_const(a) and is_int_const(b):
        return const(int_value(a) + int_value(b))
    if is_int_const(b, 0):
        return a
    if is_int_const(a, 0):
        return b
    if is_int_const(b) and int_value(b) < 0:
        return A.BinOp("-", a, const(-int_value(b)))
    return A.BinOp("+", a, b)


def isub(a: Expr, b: Expr) -> Expr:
    if is_int_const(a) and is_int_const(b):
        return const(int_value(a) - int_value(b))
    if is_int_const(b, 0):
        return a
    if is_int_const(b) and int_value(b) < 0:
        return A.BinOp("+", a, const(-int_value(b)))
    return A.BinOp("-", a, b)


def imul(a: Expr, k: int) -> Expr:
    """``a*k`` for an integer constant k."""
    if k == 0:
        return const(0)
    if k == 1:
        return a
    if is_int_const(a):
        return const(int_value(a) * k)
    return A.BinOp("*", a, const(k))


def ifloordiv(a: Expr, k: int) -> Expr:
    if k == 1:
        return a
    if is_int_const(a):
        return const(int_value(a) // k)
    return A.BinOp("//", a, const(k))


def imod(a: Expr, k: int) -> Expr:
    if k == 1:
        return const(0)
    if is_int_const(a):
        return const(int_value(a) % k)
    return A.BinOp("%", a, const(k))


def iaffine(terms: Sequence[tuple[Expr, int]], offset: int = 0) -> Expr:
    """sum(e*k) + offset."""
    out: Optional[Expr] = None
    for e, k in terms:
        t = imul(e, k)
        if is_int_const(t, 0):
            continue
        out = t if out is None else iadd(out, t)
    if out is None:
        return const(offset)
    return iadd(out, const(offset)) if offset else out


def binop(op: str, a: Expr, b: Expr) -> Expr:
    return A.BinOp(op, a, b)


def add(a, b):
    return A.BinOp("+", a, b)


def sub(a, b):
    return A.BinOp("-", a, b)


def mul(a, b):
    return A.BinOp("*", a, b)


def div(a, b):
    return A.BinOp("/", a, b)


def neg(a):
    return A.Neg(a)


def call(f: str, *args) -> Expr:
    return A.Call(f, tuple(args))


def select(cond, a, b) -> Expr:
    return A.Call("if_then_else", (cond, a, b))


def cmp(op: str, a, b) -> Expr:
    return A.Compare((op,), (a, b))


def chain(lo, x, hi, op_lo="<=", op_hi="<") -> Expr:
    """``lo <= x < hi``."""
    return A.Compare((op_lo, op_hi), (lo, x, hi))


def land(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return A.BinOp("&", a, b)


NEG_INF = A.Neg(A.Const(math.inf))
POS_INF = A.Const(math.inf)


# ---------------------------------------------------------------------------
# names

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)*$")
#: loop index names, in allocation order (the Step-TP emitter avoids t, b, v, x, y, z, e
#: because of its lowering; we also skip l, which reads like 1)
INDEX_NAMES = ("i", "j", "k", "m", "n", "o", "p", "q", "r", "s", "u", "w", "a", "c", "d", "f", "g", "h")


def valid_name(s: str) -> bool:
    return bool(_NAME_RE.match(s))


def sanitize(hint: str) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "_", str(hint)).strip("_")
    s = re.sub(r"_+", "_", s)
    if not s:
        s = "T"
    if not s[0].isalpha():
        s = "T" + s
    s = s[0].upper() + s[1:]
    assert valid_name(s), s
    return s


class Names:
    """Unique tensor names. ``fresh("linear.weight")`` -> ``Linear_weight``; a second
    request for the same stem gives ``Linear_weight_2``."""

    def __init__(self):
        self.used: set[str] = set()

    def fresh(self, hint: str) -> str:
        base = sanitize(hint)
        name = base
        k = 2
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name

    def reserve(self, name: str) -> None:
        self.used.add(name)


class IndexNames:
    def __init__(self):
        self.k = 0

    def next(self) -> str:
        k = self.k
        self.k += 1
        if k < len(INDEX_NAMES):
            return INDEX_NAMES[k]
        base = INDEX_NAMES[k % len(INDEX_NAMES)]
        return f"{base}{k // len(INDEX_NAMES)}"


# ---------------------------------------------------------------------------
# reduction splitting

#: sum reductions longer than this are split into partial sums (benchmarking.md §2.3:
#: one f32 running sum over millions of terms is too inaccurate)
SPLIT_THRESHOLD = 4096


@dataclass
class RedAxis:
    """One loop of a (possibly split) reduction: ``extent`` iterations."""

    extent: int


@dataclass
class SplitPlan:
    """How a reduction over ``sizes`` is carried out.

    ``axes``: the virtual reduction loops (outermost first); ``index[d]`` maps the virtual
    loop positions to the index of original dimension d as ``[(axis, coeff), ...]``;
    ``guard[d]`` is set when dimension d was split with a ragged tail (``o*C+i < size``);
    ``outer``: how many leading virtual axes form the outer (second-level) reduction
    (0 = a single-level reduction).
    """

    axes: list[int]
    index: list[list[tuple[int, int]]]
    guard: list[bool]
    outer: int


def _best_divisor(n: int) -> Optional[int]:
    """The divisor of n closest to sqrt(n) (in log scale), if it is not degenerate."""
    r = math.isqrt(n)
    best = None
    for d in range(1, r + 1):
        if n % d == 0:
            best = d
    if best is None or best < max(2, r // 8):
        return None
    return best


def plan_split(sizes: Sequence[int], threshold: int = SPLIT_THRESHOLD) -> SplitPlan:
    """Plan a sum reduction over dimensions ``sizes`` (extent-1 dims already removed).

    Up to ``threshold`` terms: one level. Otherwise a two-level sum whose inner and outer
    parts have about sqrt(N) terms each: split at a dimension boundary when one is balanced
    enough, otherwise split the largest dimension d into (outer, inner) with
    ``index = outer*C + inner`` (C a divisor near sqrt, or a guarded ragged tail).
    """
    axes = list(sizes)
    index = [[(d, 1)] for d in range(len(sizes))]
    guard = [False] * len(sizes)
    n = math.prod(sizes) if sizes else 1
    if n <= threshold or not sizes:
        return SplitPlan(axes, index, guard, 0)
    limit = max(threshold, 4 * math.isqrt(n))

    def best_boundary(ax):
        best = None
        for k in range(1, len(ax)):
            inner = math.prod(ax[k:])
            outer = math.prod(ax[:k])
            score = max(inner, outer)
            if best is None or score < best[0]:
                best = (score, k)
        return best

    b = best_boundary(axes)
    if b is not None and b[0] <= limit:
        return SplitPlan(axes, index, guard, b[1])
    # split the largest dimension into (outer, inner)
    d = max(range(len(sizes)), key=lambda i: sizes[i])
    s = sizes[d]
    # choose the inner chunk so that the whole plan is balanced: inner part of the new
    # split = chunk * prod(sizes after d), outer = ceil(s/chunk) * prod(sizes before d)
    after = math.prod(sizes[d + 1:])
    before = math.prod(sizes[:d])
    target = max(1, round(math.sqrt(n) / after))
    target = min(max(target, 2), s - 1) if s > 2 else 1
    chunk = None
    # exact divisor near the target
    for delta in range(0, max(1, target // 2) + 1):
        for c in (target - delta, target + delta):
            if 2 <= c < s and s % c == 0:
                chunk = c
                break
        if chunk:
            break
    ragged = False
    if chunk is None:
        chunk = max(2, target)
        ragged = True
    outer_n = -(-s // chunk)
    # virtual axes: sizes[:d], outer_n, chunk, sizes[d+1:]
    axes = list(sizes[:d]) + [outer_n, chunk] + list(sizes[d + 1:])
    index = []
    for i in range(len(sizes)):
        if i < d:
            index.append([(i, 1)])
        elif i == d:
            index.append([(d, chunk), (d + 1, 1)])
        else:
            index.append([(i + 1, 1)])
    guard = [False] * len(sizes)
    guard[d] = ragged and outer_n * chunk != s
    del before
    return SplitPlan(axes, index, guard, d + 1)


# ---------------------------------------------------------------------------
# the builder


def wrap(loops: Sequence[tuple[str, int]], body: Sequence[A.Item]) -> A.Item | list:
    """Nest ``body`` in serial loops (outermost first); no loops -> the statements."""
    items = tuple(body)
    for v, n in reversed(loops):
        items = (A.Loop("L", n, v, 0, items),)
    return items


IDENTITY = {"+": 0.0, "*": 1.0, "max": -math.inf, "min": math.inf}


class Builder:
    """Accumulates the top-level items of one kernel."""

    def __init__(self, names: Optional[Names] = None, split_threshold: int = SPLIT_THRESHOLD):
        self.items: list[A.Item] = []
        self.names = names or Names()
        self.split_threshold = split_threshold
        self.comments: list[str] = []

    # -- element-wise ------------------------------------------------------
    def assign(self, hint: str, shape: Sequence[int], fn: Callable[[list[Expr]], Expr],
               dtype: str = "f32", name: Optional[str] = None) -> str:
        """``Name[i...] = fn(i...)`` over ``shape``; returns the tensor name."""
        name = name or self.names.fresh(hint)
        g = IndexNames()
        idx: list[Expr] = []
        loops: list[tuple[str, int]] = []
        for s in shape:
            if s == 1:
                idx.append(const(0))
            else:
                v = g.next()
                idx.append(var(v))
                loops.append((v, s))
        st = A.Assign(A.Access(name, dtype, "g", tuple(idx)), fn(idx))
        self.items.extend(wrap(loops, [st]))
        return name

    def update(self, name: str, shape: Sequence[int], fn: Callable[[list[Expr], Expr], Expr],
               dtype: str = "f32") -> None:
        """In-place update ``Name[i...] = fn(i..., Name[i...])`` (e.g. a bias add)."""
        g = IndexNames()
        idx: list[Expr] = []
        loops: list[tuple[str, int]] = []
        for s in shape:
            if s == 1:
                idx.append(const(0))
            else:
                v = g.next()
                idx.append(var(v))
                loops.append((v, s))
        tgt = A.Access(name, dtype, "g", tuple(idx))
        st = A.Assign(tgt, fn(idx, tgt))
        self.items.extend(wrap(loops, [st]))

    # -- reductions ----------------------------------------------------------
    def reduce(self, hint: str, out_shape: Sequence[int], red_shape: Sequence[int],
               fn: Callable[[list[Expr], list[Expr]], Expr], op: str = "+",
               dtype: str = "f32", name: Optional[str] = None) -> str:
        """``Name[o...] = op over r... of fn(o..., r...)``.

        ``out_shape`` are the dimensions of the result (extent-1 dims get subscript 0);
        ``red_shape`` the reduced dimensions. Sums longer than the split threshold are
        computed as partial sums ``Name_part`` first (see :func:`plan_split`).
        """
        name = name or self.names.fresh(hint)
        g = IndexNames()
        out_idx: list[Expr] = []
        out_loops: list[tuple[str, int]] = []
        for s in out_shape:
            if s == 1:
                out_idx.append(const(0))
            else:
                v = g.next()
                out_idx.append(var(v))
                out_loops.append((v, s))
        red_dims = [d for d, s in enumerate(red_shape) if s != 1]
        sizes = [red_shape[d] for d in red_dims]
        if op == "+" and math.prod(sizes or [1]) > self.split_threshold:
            plan = plan_split(sizes, self.split_threshold)
        else:
            plan = SplitPlan(sizes, [[(d, 1)] for d in range(len(sizes))], [False] * len(sizes), 0)
        ax_vars = [g.next() for _ in plan.axes]
        red_idx: list[Expr] = [const(0)] * len(red_shape)
        guards = None
        for j, d in enumerate(red_dims):
            e = iaffine([(var(ax_vars[a]), k) for a, k in plan.index[j]])
            red_idx[d] = e
            if plan.guard[j]:
                guards = land(guards, cmp("<", e, const(sizes[j])))
        term = fn(out_idx, red_idx)
        if guards is not None:
            term = select(guards, term, fconst(IDENTITY[op]) if op in ("+", "*") else (NEG_INF if op == "max" else POS_INF))

        def red_stmt(target: A.Access, t: Expr) -> A.Assign:
            if op in ("max", "min"):
                return A.Assign(target, call(op, target, t))
            return A.Assign(target, A.BinOp(op, target, t))

        if not plan.axes:  # nothing to reduce: a plain assignment
            st = A.Assign(A.Access(name, dtype, "g", tuple(out_idx)), term)
            self.items.extend(wrap(out_loops, [st]))
            return name
        if plan.outer == 0:
            tgt = A.Access(name, dtype, "g", tuple(out_idx))
            loops = out_loops + list(zip(ax_vars, plan.axes))
            self.items.extend(wrap(loops, [red_stmt(tgt, term)]))
            return name
        # two levels: Part[o..., outer...] = sum over inner; Name[o...] = sum over outer
        part = self.names.fresh(f"{name}_part")
        outer_vars = ax_vars[: plan.outer]
        ptgt = A.Access(part, dtype, "g", tuple(out_idx) + tuple(var(v) for v in outer_vars))
        loops = out_loops + list(zip(ax_vars, plan.axes))
        self.items.extend(wrap(loops, [red_stmt(ptgt, term)]))
        tgt = A.Access(name, dtype, "g", tuple(out_idx))
        loops2 = out_loops + list(zip(outer_vars, plan.axes[: plan.outer]))
        self.items.extend(wrap(loops2, [red_stmt(tgt, ptgt)]))
        return name


# ---------------------------------------------------------------------------
# renaming (used to give the kernel output its final name)


def rename_tensor(node, old: str, new: str):
    """A copy of ``node`` (an item or expression tree) with tensor ``old`` renamed."""
    from dataclasses import fields, replace

    if isinstance(node, tuple):
        return tuple(rename_tensor(x, old, new) for x in node)
    if not hasattr(node, "__dataclass_fields__") or isinstance(node, A.Span):
        return node
    kw = {}
    for f in fields(node):
        if f.name == "span":
            continue
        v = getattr(node, f.name)
        if isinstance(v, tuple) or hasattr(v, "__dataclass_fields__"):
            kw[f.name] = rename_tensor(v, old, new)
    if isinstance(node, A.Access) and node.name == old:
        kw["name"] = new
    return replace(node, **kw) if kw else node
