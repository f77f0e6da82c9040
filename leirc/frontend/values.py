"""Values of the frontend's abstract interpretation of an fx graph.

A tensor-valued fx node becomes a :class:`Val`: something with a shape and a dtype that
can produce the LEIR expression of its element at given index expressions (:meth:`Val.at`).

* :class:`TensorRef` is a materialized tensor (a kernel input, parameter or an intermediate
  written by an emitted nest): ``at`` is an access ``Name^{f32,g}_{i,j}``.
* :class:`View` is a pure index remapping of another value (transpose, permute, reshape,
  view, squeeze, unsqueeze, expand, slicing, ...): nothing is copied, the mapping is folded
  into the subscripts of the consumer.
* :class:`ConstVal` is a tensor filled with one value (``zeros_like``, a python scalar
  broadcast to a tensor).

Non-tensor values (ints from ``x.size(1)``, tuples, dtypes, ...) are plain Python objects.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from ..lang import ast as A
from . import builder as B

Expr = A.Expr


class Val:
    shape: tuple[int, ...]
    dtype: str

    def at(self, idx: Sequence[Expr]) -> Expr:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class TensorRef(Val):
    def __init__(self, name: str, shape: Sequence[int], dtype: str = "f32", kind: str = "intermediate"):
        self.name = name
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.kind = kind  # "input" | "param" | "intermediate"

    def at(self, idx):
        assert len(idx) == len(self.shape), (self.name, self.shape, idx)
        return A.Access(self.name, self.dtype, "g", tuple(idx))

    def __repr__(self):  # pragma: no cover
        return f"TensorRef({self.name}, {self.shape}, {self.dtype})"


class View(Val):
    def __init__(self, base: Val, shape: Sequence[int], fn: Callable[[list[Expr]], list[Expr]]):
        self.base = base
        self.shape = tuple(int(s) for s in shape)
        self.dtype = base.dtype
        self.fn = fn

    def at(self, idx):
        assert len(idx) == len(self.shape)
        return self.base.at(self.fn(list(idx)))


class ConstVal(Val):
    def __init__(self, value, shape: Sequence[int] = (), dtype: str = "f32"):
        self.value = value
        self.shape = tuple(shape)
        self.dtype = dtype

    def at(self, idx):
        v = self.value
        if self.dtype in A.FLOAT_DTYPES:
            return B.fconst(float(v))
        if self.dtype == "bool":
            return B.const(int(bool(v)))
        return B.const(int(v))


class ExprVal(Val):
    """An element-wise expression of other values, not (yet) materialized: used inside
    composite operators (e.g. the difference in a loss) before one nest computes it."""

    def __init__(self, shape, fn: Callable[[list[Expr]], Expr], dtype: str = "f32"):
        self.shape = tuple(shape)
        self.fn = fn
        self.dtype = dtype

    def at(self, idx):
        return self.fn(list(idx))


# ---------------------------------------------------------------------------
# shape helpers


def norm_dim(d: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"dimension {d} out of range for a {ndim}-d tensor")
    return d % n


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(nd):
        size = 1
        for s in shapes:
            j = k - (nd - len(s))
            if j < 0:
                continue
            if s[j] != 1:
                if size != 1 and size != s[j]:
                    raise ValueError(f"shapes {list(map(list, shapes))} do not broadcast")
                size = s[j]
        out.append(size)
    return tuple(out)


def bcast_at(v, out_shape: Sequence[int], idx: Sequence[Expr]) -> Expr:
    """Element of ``v`` (a Val or a python scalar) at output index ``idx`` under
    numpy broadcasting to ``out_shape``."""
    if not isinstance(v, Val):
        return scalar_expr(v)
    off = len(out_shape) - len(v.shape)
    sub = []
    for j, s in enumerate(v.shape):
        if s == 1:
            sub.append(B.const(0))
        else:
            sub.append(idx[off + j])
    return v.at(sub)


def scalar_expr(v) -> Expr:
    if isinstance(v, bool):
        return B.const(int(v))
    if isinstance(v, int):
        return B.const(v)
    if isinstance(v, float):
        if math.isinf(v):
            return B.NEG_INF if v < 0 else B.POS_INF
        return B.fconst(v)
    raise TypeError(f"not a scalar: {v!r}")


# ---------------------------------------------------------------------------
# views


def permute(v: Val, dims: Sequence[int]) -> Val:
    dims = [norm_dim(d, v.ndim) for d in dims]
    if sorted(dims) != list(range(v.ndim)):
        raise ValueError(f"permute dims {dims} are not a permutation")
    if dims == list(range(v.ndim)):
        return v
    shape = [v.shape[d] for d in dims]

    def fn(idx):
        base = [None] * v.ndim
        for k, d in enumerate(dims):
            base[d] = idx[k]
        return base

    return View(v, shape, fn)


def transpose(v: Val, d0: int, d1: int) -> Val:
    if v.ndim < 2 and d0 in (0, -1) and d1 in (0, -1):
        return v
    d0, d1 = norm_dim(d0, v.ndim), norm_dim(d1, v.ndim)
    dims = list(range(v.ndim))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(v, dims)


def unsqueeze(v: Val, d: int) -> Val:
    d = norm_dim(d, v.ndim + 1)
    shape = list(v.shape[:d]) + [1] + list(v.shape[d:])
    return View(v, shape, lambda idx: idx[:d] + idx[d + 1:])


def squeeze(v: Val, dims=None) -> Val:
    if dims is None:
        dims = [d for d, s in enumerate(v.shape) if s == 1]
    elif isinstance(dims, int):
        dims = [dims]
    dims = sorted({norm_dim(d, v.ndim) for d in dims if v.shape[norm_dim(d, v.ndim)] == 1})
    if not dims:
        return v
    keep = [d for d in range(v.ndim) if d not in dims]
    shape = [v.shape[d] for d in keep]

    def fn(idx):
        base = [B.const(0)] * v.ndim
        for k, d in enumerate(keep):
            base[d] = idx[k]
        return base

    return View(v, shape, fn)


def expand(v: Val, shape: Sequence[int]) -> Val:
    shape = list(shape)
    off = len(shape) - v.ndim
    if off < 0:
        raise ValueError("expand to fewer dimensions")
    for j, s in enumerate(v.shape):
        if shape[off + j] == -1:
            shape[off + j] = s
        elif s != 1 and s != shape[off + j]:
            raise ValueError(f"cannot expand {list(v.shape)} to {shape}")
    if tuple(shape) == v.shape:
        return v

    def fn(idx):
        return [B.const(0) if s == 1 else idx[off + j] for j, s in enumerate(v.shape)]

    return View(v, shape, fn)


def infer_shape(shape: Sequence[int], numel: int) -> list[int]:
    shape = [int(s) for s in shape]
    if shape.count(-1) > 1:
        raise ValueError("only one dimension can be -1")
    if -1 in shape:
        rest = math.prod(s for s in shape if s != -1)
        if rest == 0 or numel % rest:
            raise ValueError(f"shape {shape} is invalid for {numel} elements")
        shape[shape.index(-1)] = numel // rest
    if math.prod(shape) != numel:
        raise ValueError(f"shape {shape} is invalid for {numel} elements")
    return shape


def reshape(v: Val, shape: Sequence[int]) -> Val:
    """Reshape of (logically) contiguous data as index arithmetic: the dimensions of both
    shapes are matched into groups with equal products; inside a group the linear index is
    an affine form of the new indices and each old index is ``(lin // stride) % size``."""
    new = infer_shape(shape, v.numel)
    old = list(v.shape)
    if new == old:
        return v
    # drop extent-1 dims on both sides for grouping; they get index 0 / are ignored
    old_nz = [d for d, s in enumerate(old) if s != 1]
    new_nz = [d for d, s in enumerate(new) if s != 1]
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(old_nz) or j < len(new_nz):
        go, gn = [old_nz[i]], [new_nz[j]]
        po, pn = old[old_nz[i]], new[new_nz[j]]
        i += 1
        j += 1
        while po != pn:
            if po < pn:
                go.append(old_nz[i])
                po *= old[old_nz[i]]
                i += 1
            else:
                gn.append(new_nz[j])
                pn *= new[new_nz[j]]
                j += 1
        groups.append((go, gn))

    def fn(idx):
        base: list[Expr] = [B.const(0)] * len(old)
        for go, gn in groups:
            if len(go) == 1 and len(gn) == 1:
                base[go[0]] = idx[gn[0]]
                continue
            # linear index of the group from the new indices
            terms = []
            stride = 1
            for d in reversed(gn):
                terms.append((idx[d], stride))
                stride *= new[d]
            lin = B.iaffine(list(reversed(terms)))
            stride = 1
            strides = {}
            for d in reversed(go):
                strides[d] = stride
                stride *= old[d]
            for k, d in enumerate(go):
                e = B.ifloordiv(lin, strides[d])
                if k > 0:
                    e = B.imod(e, old[d])
                base[d] = e
        return base

    return View(v, new, fn)


def flatten(v: Val, start: int = 0, end: int = -1) -> Val:
    if v.ndim == 0:
        return reshape(v, [1])
    start, end = norm_dim(start, v.ndim), norm_dim(end, v.ndim)
    if start >= end:
        return v
    shape = list(v.shape[:start]) + [math.prod(v.shape[start:end + 1])] + list(v.shape[end + 1:])
    return reshape(v, shape)


def slice_dim(v: Val, d: int, start: int, stop: int, step: int = 1) -> Val:
    d = norm_dim(d, v.ndim)
    size = v.shape[d]
    start, stop, step = slice(start, stop, step).indices(size)
    if step <= 0:
        raise ValueError("negative slice steps are not supported")
    n = max(0, -(-(stop - start) // step))
    if start == 0 and step == 1 and n == size:
        return v
    shape = list(v.shape)
    shape[d] = n

    def fn(idx):
        idx = list(idx)
        idx[d] = B.iadd(B.imul(idx[d], step), B.const(start))
        return idx

    return View(v, shape, fn)


def select_index(v: Val, d: int, i: int) -> Val:
    d = norm_dim(d, v.ndim)
    size = v.shape[d]
    if not -size <= i < size:
        raise IndexError(f"index {i} out of range for dimension of size {size}")
    i %= size
    shape = list(v.shape[:d]) + list(v.shape[d + 1:])
    return View(v, shape, lambda idx: idx[:d] + [B.const(i)] + idx[d:])
