"""Shrink a kernel's sizes so that its literal (loop-by-loop) execution is cheap.

Used to cross-check the vectorized interpreter against the literal one on real kernels
(tests/test_interp_oracle.py) and wherever a small stand-in of a big kernel is wanted. The
size clustering and the size rewrite (:func:`sizes_of`, :func:`clusters`, :func:`size_map`,
:func:`resize`) are public: :mod:`leirc.dataset.shapes` draws its shape instances with them.

The result is *a* valid program of the same structure, not the same function at another
size: sizes (tensor dimensions and loop extents above ``keep``) are grouped into clusters
of nearby values (``64, 65, 66`` -- a dimension, its padded size, a guard bound), and each
cluster is moved as a whole to a small base with the same residue mod 8 (so offsets
within a cluster and ``// 8``-style groupings survive). Integer literals inside the
cluster's range move with it. A candidate is accepted only if it checks clean and its
execution plan (the mode of every loop) is the same as the original's, so the shrunk
program exercises the same vectorization paths. Clusters that cannot be moved
consistently (a size tied to a product of others, such as a flattened stride) keep their
value.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Optional

from ..lang import ast as A
from ..lang.checker import CheckResult, check_kernel
from .plan import make_plan

#: sizes up to this are never changed (extents 2..8 are usually structural: a 3x3 window)
KEEP = 8
#: integers this close to a cluster belong to it
GAP = 4


def sizes_of(k: A.Kernel) -> list[int]:
    """Every size of ``k``: interface and allocation dimensions, loop extents."""
    out = [d for p in k.inputs + k.outputs for d in p.shape]
    out += [n.extent for n in A.walk(k) if isinstance(n, A.Loop)]
    out += [d for n in A.walk(k) if isinstance(n, A.Alloc) for d in n.shape]
    return out


def clusters(sizes: list[int], keep: int = KEEP) -> list[tuple[int, int]]:
    """(low, high) ranges of nearby sizes above ``keep`` (neighbours at most :data:`GAP` apart)."""
    big = sorted({s for s in sizes if s > keep})
    out: list = []
    for s in big:
        if out and s - out[-1][1] <= GAP:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def _base(low: int, mod: int = 8) -> int:
    """The small size a cluster starting at ``low`` moves to: at least 4, same residue mod ``mod``."""
    b = low % mod
    while b < 4:
        b += mod
    return b


def size_map(moved, keep: int = KEEP):
    """The size map moving each cluster ``(low, high, new low)`` of ``moved`` as a whole;
    integers within :data:`GAP` of a cluster move with it, sizes up to ``keep`` never move."""
    def f(n: int) -> int:
        if n <= keep:
            return n
        for lo, hi, base in moved:
            if lo - GAP <= n <= hi + GAP:
                m = base + (n - lo)
                return m if m > 0 else n
        return n

    return f


def resize(node, f, *, drop_comments: bool = False):
    """``node`` with every size (shapes, extents, integer literals) mapped through ``f``.
    ``drop_comments``: also remove the comments, which describe the sizes of the original
    (a shape instance is a new program; a shrunk stand-in keeps them)."""
    if isinstance(node, A.Const):
        return replace(node, value=f(node.value)) if node.is_int else node
    if isinstance(node, (A.Param, A.Alloc)):  # a private tile's shape moves with its cluster
        return replace(node, shape=tuple(f(d) for d in node.shape))
    if not hasattr(node, "__dataclass_fields__") or isinstance(node, (A.Span, A.Comment)):
        return node
    kw = {}
    for fl in fields(node):
        v = getattr(node, fl.name)
        if isinstance(v, tuple) and v and hasattr(v[0], "__dataclass_fields__"):
            kw[fl.name] = tuple(resize(x, f, drop_comments=drop_comments) for x in v)
        elif hasattr(v, "__dataclass_fields__") and not isinstance(v, (A.Span, A.Comment)):
            kw[fl.name] = resize(v, f, drop_comments=drop_comments)
    if isinstance(node, A.Loop):
        kw["extent"] = f(node.extent)
    if drop_comments and getattr(node, "comments", None):
        kw["comments"] = ()
    return replace(node, **kw) if kw else node


def _modes(result: CheckResult) -> list:
    plan = make_plan(result)
    return [plan.modes[id(n)] for n in A.walk(result.kernel) if isinstance(n, A.Loop)]


def iterations(result: CheckResult) -> int:
    """Statement instances of a literal run (sum over statements of their loop extents' product)."""
    return sum(math.prod(l.extent for l in si.loops) for si in result.stmts)


def shrink(kernel: A.Kernel, keep: int = KEEP) -> tuple[CheckResult, list]:
    """(check result of the shrunk kernel, [(low, high, new low)] of the moved clusters).
    Moves all clusters at once if that is consistent (trying the smaller bases of residues
    mod 4 first, then mod 8), else greedily one by one (largest first); returns the
    original kernel's result when nothing can move."""
    orig = check_kernel(kernel)
    if not orig.ok:
        raise ValueError("the kernel has errors")
    target = _modes(orig)
    found = clusters(sizes_of(kernel), keep)

    def attempt(chosen) -> Optional[CheckResult]:
        k2 = resize(kernel, size_map(chosen, keep))
        try:
            r = check_kernel(k2)
        except Exception:  # a malformed candidate is just a rejected one
            return None
        if not r.ok or _modes(r) != target:
            return None
        return r

    for mod in (4, 8):
        moved = [(lo, hi, _base(lo, mod)) for lo, hi in found]
        best = attempt(moved) if found else None
        if best is not None:
            return best, moved
    chosen: list = []
    best = orig
    for lo, hi in sorted(found, key=lambda c: -c[1]):
        for mod in (4, 8):
            r = attempt(chosen + [(lo, hi, _base(lo, mod))])
            if r is not None:
                chosen.append((lo, hi, _base(lo, mod)))
                best = r
                break
    return best, chosen


__all__ = ["shrink", "iterations", "sizes_of", "clusters", "size_map", "resize", "KEEP", "GAP"]
