"""Deterministic random inputs for a kernel.

Distributions (floats): ``uniform`` U[0,1) (KernelBench's ``torch.rand``), ``normal`` N(0,1),
``signed`` U[-1,1), ``large`` N(0,1)*1e3, ``small`` N(0,1)*1e-3. Values are drawn in float64
and rounded to the input's dtype.

Integer inputs that the program uses as subscripts (``H_{C_{i}}``) are drawn from the range
that keeps every such use in bounds: for a subscript ``C`` (or ``C + k``/``C - k``) of a
dimension with extent n the range is [0, n) (shifted by -k/+k), intersected over all uses.
Other integer inputs are small: [0, 16) for ``uniform`` and unsigned types, [-8, 8] otherwise.
Booleans are fair coin flips. Inputs are drawn in signature order from
``numpy.random.default_rng(seed)``, so the same (kernel, seed, dist) gives the same arrays.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..lang import ast as A
from . import dtypes as D

DISTS = ("uniform", "normal", "signed", "large", "small")


def _shapes(kernel: A.Kernel) -> dict:
    shapes = {p.name: tuple(p.shape) for p in kernel.inputs + kernel.outputs}
    try:
        from ..lang.checker import check_kernel

        r = check_kernel(kernel)
        for n, t in r.tensors.items():
            if t.shape is not None:
                shapes.setdefault(n, tuple(t.shape))
    except Exception:  # pragma: no cover - the checker never raises on bad programs
        pass
    return shapes


def _offset_of(e: A.Expr, name: str) -> Optional[int]:
    """k if ``e`` is ``name_{...} + k`` (k may be negative or 0), else None."""
    if isinstance(e, A.Access) and e.name == name:
        return 0
    if isinstance(e, A.BinOp) and e.op in ("+", "-"):
        if isinstance(e.rhs, A.Const) and e.rhs.is_int:
            k = _offset_of(e.lhs, name)
            if k is not None:
                return k + (e.rhs.value if e.op == "+" else -e.rhs.value)
        if e.op == "+" and isinstance(e.lhs, A.Const) and e.lhs.is_int:
            k = _offset_of(e.rhs, name)
            if k is not None:
                return k + e.lhs.value
    return None


def index_ranges(kernel: A.Kernel) -> dict:
    """name -> (lo, hi) half-open range that keeps the subscript uses of each integer input
    in bounds (only inputs used inside subscripts appear)."""
    shapes = _shapes(kernel)
    int_inputs = {p.name for p in kernel.inputs if p.dtype in A.INT_DTYPES}
    ranges: dict = {}
    for node in A.walk(kernel):
        if not isinstance(node, A.Access):
            continue
        shape = shapes.get(node.name)
        if shape is None or len(shape) != len(node.indices):
            continue
        for d, idx in enumerate(node.indices):
            for sub in A.walk(idx):
                if isinstance(sub, A.Access) and sub.name in int_inputs:
                    k = _offset_of(idx, sub.name)
                    n = shape[d]
                    lo, hi = (0 - k, n - k) if k is not None else (0, n)
                    old = ranges.get(sub.name)
                    ranges[sub.name] = (lo, hi) if old is None else (max(old[0], lo), min(old[1], hi))
    return {n: (lo, hi) if hi > lo else (0, 1) for n, (lo, hi) in ranges.items()}


def _floats(rng: np.random.Generator, shape, dist: str) -> np.ndarray:
    if dist == "uniform":
        return rng.random(shape)
    if dist == "normal":
        return rng.standard_normal(shape)
    if dist == "signed":
        return rng.random(shape) * 2.0 - 1.0
    if dist == "large":
        return rng.standard_normal(shape) * 1e3
    if dist == "small":
        return rng.standard_normal(shape) * 1e-3
    raise ValueError(f"unknown distribution {dist!r} (expected one of {', '.join(DISTS)})")


def random_inputs(kernel: A.Kernel, seed: int, dist: str = "uniform") -> dict:
    """Random inputs for ``kernel`` (name -> array of the declared dtype and shape)."""
    if dist not in DISTS:
        raise ValueError(f"unknown distribution {dist!r} (expected one of {', '.join(DISTS)})")
    rng = np.random.default_rng(seed)
    ranges = None
    out = {}
    for p in kernel.inputs:
        shape = tuple(p.shape)
        dt = D.np_dtype(p.dtype)
        if p.dtype in A.FLOAT_DTYPES:
            a = _floats(rng, shape, dist).astype(dt)
        elif p.dtype == "bool":
            a = np.asarray(rng.random(shape) < 0.5)
        else:
            if ranges is None:
                ranges = index_ranges(kernel)
            info = np.iinfo(dt)
            if p.name in ranges:
                lo, hi = ranges[p.name]
            elif dist == "uniform" or info.min == 0:
                lo, hi = 0, 16
            else:
                lo, hi = -8, 9
            lo, hi = max(lo, int(info.min)), min(hi, int(info.max) + 1)
            a = rng.integers(lo, hi, size=shape, dtype=np.int64).astype(dt)
        out[p.name] = np.asarray(a, dtype=dt, order="C")
    return out
