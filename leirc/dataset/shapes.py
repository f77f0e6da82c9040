"""Shape instances: one kernel re-instantiated at other sizes, chosen by a seeded RNG.

A dataset wants the same optimization decision at several problem sizes (Step-TP draws 20
shapes per workload), and every instance must stay small enough that the literal
interpreter -- the oracle that makes the bitwise flag meaningful -- runs it in well under a
second. The sizes of a kernel (tensor dimensions, loop extents, and integer literals close
to them, such as a padded size or a guard bound) are grouped into clusters of nearby values
by the clustering of :mod:`leirc.interp.shrink` (:func:`~leirc.interp.shrink.clusters`,
:func:`~leirc.interp.shrink.size_map`, :func:`~leirc.interp.shrink.resize`: one
implementation for both); an instance moves each cluster as a whole to a new base with the
same residue mod 8, so offsets inside a cluster (``n`` and ``n+2`` of a padded
convolution) and ``//8``-style groupings survive. A candidate is kept only if it checks
clean and its literal run stays within ``max_iterations`` statement instances; a size
that is a product of others (a flattened stride) makes the candidate fail the check and is
retried with other draws.

Instance 0 is the program itself when it is small enough, else its shrunk form
(:func:`leirc.interp.shrink.shrink`); instances 1.. are random. Everything is a function of
(kernel, seed, count, limits): no hidden randomness.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, fields, replace
from typing import Optional

from ..interp.shrink import KEEP, clusters, iterations, resize, shrink, size_map, sizes_of
from ..lang import ast as A
from ..lang.canonical import fingerprint
from ..lang.checker import CheckResult, check_kernel

#: the largest base a cluster may move to
MAX_BASE = 64
#: statement instances of one literal run of an instance (the oracle's cost)
MAX_ITERATIONS = 1 << 16
ATTEMPTS = 48


@dataclass(frozen=True)
class ShapeInstance:
    index: int
    result: CheckResult  # the checked kernel at these sizes
    moved: tuple  # ((low, high, new_low), ...): how each size cluster moved
    how: str  # "original" | "shrunk" | "random"

    @property
    def kernel(self) -> A.Kernel:
        return self.result.kernel

    def signature(self) -> dict:
        k = self.kernel
        return {"inputs": {p.name: [p.dtype, list(p.shape)] for p in k.inputs},
                "outputs": {p.name: [p.dtype, list(p.shape)] for p in k.outputs}}

    def to_json(self) -> dict:
        return {"index": self.index, "how": self.how, "moved": [list(m) for m in self.moved],
                "iterations": iterations(self.result), **self.signature()}


def _fresh(node):
    """``node`` at its own sizes, without the comments about them: an instance is a new program."""
    return resize(node, lambda n: n, drop_comments=True)


FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")


def retype(node, mapping: dict):
    """``node`` with every dtype in ``mapping`` (parameters, accesses, allocations) replaced:
    the same kernel at another precision (``{"f32": "f16"}``)."""
    if not hasattr(node, "__dataclass_fields__") or isinstance(node, (A.Span, A.Comment)):
        return node
    kw = {}
    for fl in fields(node):
        v = getattr(node, fl.name)
        if isinstance(v, tuple) and v and hasattr(v[0], "__dataclass_fields__"):
            kw[fl.name] = tuple(retype(x, mapping) for x in v)
        elif hasattr(v, "__dataclass_fields__") and not isinstance(v, (A.Span, A.Comment)):
            kw[fl.name] = retype(v, mapping)
    if isinstance(node, (A.Param, A.Access, A.Alloc)) and node.dtype in mapping:
        kw["dtype"] = mapping[node.dtype]
    return replace(node, **kw) if kw else node


def at_dtype(result: CheckResult, dtype: str) -> Optional[CheckResult]:
    """The kernel with all its floating-point tensors in ``dtype``, or None when that does not
    check (a literal out of f16's range, say)."""
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"not a floating-point dtype: {dtype!r} (expected one of {', '.join(FLOAT_DTYPES)})")
    r = check_kernel(retype(result.kernel, {d: dtype for d in FLOAT_DTYPES}))
    return r if r.ok else None


def _try(kernel: A.Kernel, moved, max_iterations: int) -> Optional[CheckResult]:
    try:
        r = check_kernel(resize(kernel, size_map(moved), drop_comments=True))
    except Exception:  # noqa: BLE001 - a malformed candidate is a rejected draw
        return None
    if not r.ok or iterations(r) > max_iterations:
        return None
    return r


def _rng(seed: int, key: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "big"))


def instances(result: CheckResult, count: int, *, seed: int = 0, key: str = "",
              max_iterations: int = MAX_ITERATIONS, max_base: int = MAX_BASE) -> list[ShapeInstance]:
    """Up to ``count`` distinct instances of a checked kernel (fewer when the draws keep
    landing on programs already seen or that do not check). ``key`` (the source id) makes
    the draws of two sources independent under one seed."""
    if count <= 0:
        return []
    out: list[ShapeInstance] = []
    seen: set = set()

    def add(r: CheckResult, moved, how: str) -> None:
        fp = fingerprint(r.kernel)
        if fp not in seen:
            seen.add(fp)
            out.append(ShapeInstance(len(out), r, tuple(tuple(m) for m in moved), how))

    if iterations(result) <= max_iterations:
        add(check_kernel(_fresh(result.kernel)), (), "original")
    else:
        small, moved = shrink(result.kernel, keep=KEEP)
        if iterations(small) <= max_iterations:
            add(check_kernel(_fresh(small.kernel)), moved, "shrunk")
    cl = clusters(sizes_of(result.kernel))
    rng = _rng(seed, key)
    attempts = 0
    while len(out) < count and cl and attempts < ATTEMPTS * count:
        attempts += 1
        moved = []
        for lo, hi in cl:
            r0 = lo % 8
            lows = [b for b in range(r0, max_base + 1, 8) if b >= 4]
            moved.append((lo, hi, rng.choice(lows) if lows else lo))
        r = _try(result.kernel, moved, max_iterations)
        if r is not None:
            add(r, moved, "random")
    return out[:count]


__all__ = ["ShapeInstance", "instances", "retype", "at_dtype", "MAX_ITERATIONS", "FLOAT_DTYPES"]
