"""Dispatch and the building blocks every family uses (element-wise maps, reductions, materialization)."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from ...lang import ast as A
from .. import builder as B
from .. import values as Vs
from ..errors import UnsupportedOpError
from ..values import TensorRef, Val, bcast_at, broadcast_shapes, norm_dim
from .common import (ALIASES, BINARY, Expr, TORCH_OF_LEIR, UNARY, accumulator_dtype, contains_val, pretty_target,
                     torch_size)
from .registry import FUNCTIONS, METHODS, MODULES


class OpsBase:
    def __init__(self, imp):
        self.imp = imp
        self.b: B.Builder = imp.b

    # ------------------------------------------------------------------
    # dispatch

    def call_function(self, target, args, kwargs):
        name = getattr(target, "__name__", None) or str(target)
        mod = getattr(target, "__module__", None) or ""
        has_val = contains_val(args) or contains_val(kwargs)
        if not has_val and (mod in ("_operator", "operator", "math", "builtins") or target in (getattr, len)):
            return target(*args, **kwargs)  # python arithmetic on sizes, math.sqrt(d), ...
        if name == "getattr":
            return self._getattr(*args)
        key = ALIASES.get(name, name)
        if key is None:
            raise UnsupportedOpError(f"unsupported operation {pretty_target(target)}", op=pretty_target(target))
        return self._dispatch(key, pretty_target(target), args, kwargs)

    def call_method(self, name: str, args, kwargs, node):
        self_arg = args[0] if args else None
        if not isinstance(self_arg, Val):
            # a method on a python value (a torch.Size, ...)
            return getattr(self_arg, name)(*args[1:], **kwargs)
        inplace = name.endswith("_") and not name.startswith("_") and name not in ("view_as_",)
        key = name[:-1] if inplace else name
        key = ALIASES.get(key, key)
        if key is None:
            raise UnsupportedOpError(f"unsupported method Tensor.{name}", op=f"Tensor.{name}")
        res = self._dispatch(key, f"Tensor.{name}", args, kwargs, method=True)
        if inplace and node is not None and node.args and hasattr(node.args[0], "op"):
            self.imp.env[node.args[0]] = res  # later uses of the mutated tensor see the result
        return res

    def call_module(self, qualname: str, mod, args, kwargs):
        cls = type(mod).__name__
        h = MODULES.get(cls)
        if h is None:
            raise UnsupportedOpError(f"unsupported module torch.nn.{cls} ({qualname})", op=f"nn.{cls}")
        return h(self, qualname, mod, *args, **kwargs)

    def _dispatch(self, key: str, pretty: str, args, kwargs, method: bool = False):
        h = (METHODS.get(key) or FUNCTIONS.get(key)) if method else FUNCTIONS.get(key)
        if h is None and key in UNARY:
            return self._unary_call(key, args, kwargs)
        if h is None and key in BINARY:
            return self._binary_call(key, args, kwargs)
        if h is None:
            raise UnsupportedOpError(f"unsupported operation {pretty}", op=pretty)
        try:
            return h(self, *args, **kwargs)
        except TypeError as e:
            if "argument" in str(e):
                raise UnsupportedOpError(f"unsupported arguments for {pretty}: {e}", op=pretty) from None
            raise

    def _unary_call(self, key, args, kwargs):
        x = args[0]
        kwargs = {k: v for k, v in kwargs.items() if k not in ("inplace", "out")}
        if len(args) > 1 and key not in ("relu",):
            raise UnsupportedOpError(f"unsupported arguments for {key}")
        if kwargs:
            raise UnsupportedOpError(f"unsupported arguments for {key}: {sorted(kwargs)}")
        return self.unary(x, UNARY[key])

    def _binary_call(self, key, args, kwargs):
        a = args[0]
        b = args[1] if len(args) > 1 else kwargs.get("other")
        f = BINARY[key]
        dt = self.imp.out_dtype()
        return self.ew([a, b], f, dtype=dt)

    # ------------------------------------------------------------------
    # building blocks

    def ew(self, args: list, fn: Callable[..., Expr], dtype: Optional[str] = None, hint: Optional[str] = None,
           shape: Optional[Sequence[int]] = None) -> TensorRef:
        """Materialize an element-wise function of ``args`` (Vals or python scalars) under
        broadcasting."""
        vals = [a for a in args if isinstance(a, Val)]
        if shape is None:
            shape = broadcast_shapes(*[v.shape for v in vals]) if vals else ()
        shape = tuple(shape)
        dtype = dtype or self.imp.out_dtype()
        name = self.b.assign(hint or self.imp.hint, shape,
                             lambda idx: fn(*[bcast_at(a, shape, idx) for a in args]), dtype)
        return TensorRef(name, shape, dtype)

    def unary(self, x, f: Callable[[Expr], Expr]) -> TensorRef:
        return self.ew([x], f)

    def materialize(self, v: Val, hint: Optional[str] = None) -> TensorRef:
        if isinstance(v, TensorRef):
            return v
        name = self.b.assign(hint or self.imp.hint, v.shape, lambda idx: v.at(idx), v.dtype)
        return TensorRef(name, v.shape, v.dtype)

    def reduce(self, x: Val, dims, keepdim: bool, op: str, term: Callable[[Expr], Expr] = lambda e: e,
               hint: Optional[str] = None, dtype: Optional[str] = None) -> TensorRef:
        """Reduce ``x`` over ``dims`` (None = all) with ``op`` in + * max min. Sums and
        products of floats accumulate in :func:`accumulator_dtype` (f16/bf16 in f32); max and
        min are exact in the operand's dtype."""
        nd = x.ndim
        if dims is None:
            dims = list(range(nd))
        elif isinstance(dims, int):
            dims = [dims]
        else:
            dims = list(dims)
            if not dims:
                dims = list(range(nd))
        dims = sorted({norm_dim(d, nd) for d in dims}) if nd else []
        out_shape = [1 if d in dims else s for d, s in enumerate(x.shape)] if keepdim else \
            [s for d, s in enumerate(x.shape) if d not in dims]
        red_shape = [x.shape[d] for d in dims]

        def fn(out_idx, red_idx):
            full = []
            oi = iter(out_idx)
            ri = iter(red_idx)
            for d in range(nd):
                if d in dims:
                    full.append(next(ri))
                    if keepdim:
                        next(oi)
                else:
                    full.append(next(oi))
            return term(x.at(full))

        if dtype is None:
            if x.dtype in A.FLOAT_DTYPES:
                dtype = accumulator_dtype(x.dtype) if op in ("+", "*") else x.dtype
            else:
                dtype = self.imp.out_dtype()
        name = self.b.reduce(hint or self.imp.hint, out_shape, red_shape, fn, op, dtype=dtype)
        return TensorRef(name, out_shape, dtype)

    def _full_reduce_shape(self, x, dims, keepdim):
        nd = x.ndim
        if dims is None or (isinstance(dims, (list, tuple)) and not dims):
            dims = list(range(nd))
        elif isinstance(dims, int):
            dims = [dims]
        dims = sorted({norm_dim(d, nd) for d in dims}) if nd else []
        return dims

    def scalar_div(self, t: TensorRef, n, hint: Optional[str] = None) -> TensorRef:
        return self.ew([t], lambda e: B.div(e, B.fconst(float(n))), hint=hint, dtype=t.dtype)

    # ------------------------------------------------------------------
    # python-level helpers (getattr, size, ...)

    def _getattr(self, obj, attr):
        if isinstance(obj, Val):
            if attr == "shape":
                return torch_size(obj.shape)
            if attr == "T":
                return Vs.permute(obj, list(reversed(range(obj.ndim))))
            if attr == "mT":
                return Vs.transpose(obj, -2, -1)
            if attr == "dtype":
                import torch

                return getattr(torch, TORCH_OF_LEIR[obj.dtype])
            if attr == "device":
                import torch

                return torch.device("cpu")
            if attr == "ndim":
                return obj.ndim
            if attr == "is_cuda":
                return False
            raise UnsupportedOpError(f"unsupported tensor attribute .{attr}")
        return getattr(obj, attr)
