"""Operator handlers of the PyTorch frontend.

Each fx call (``call_function``, ``call_method``, ``call_module``) is mapped to a handler
``f_<name>`` with the signature of the PyTorch function (so positional and keyword
arguments resolve as in PyTorch). Modules (``nn.Conv2d``, ``nn.BatchNorm2d``, ...) are
translated by ``m_<ClassName>`` handlers into the functional form, with their parameters as
kernel inputs.

Conventions of the emitted code (see :mod:`.builder`): one nest per operator, spatial
loops outside, reduction loops inside; view-like operators fold into subscripts; long sums
are split into partial sums; padding is a padded copy (``0`` for convolution and average
pooling, ``-inf`` for max pooling), transposed convolution is a gather with
``(o + p - k*d) % s == 0`` guards.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

from ..lang import ast as A
from . import builder as B
from . import values as Vs
from .errors import UnsupportedOpError
from .values import ConstVal, ExprVal, TensorRef, Val, View, bcast_at, broadcast_shapes, norm_dim

Expr = A.Expr

_SQRT1_2 = 0.7071067811865476
_GELU_TANH_K = 0.7978845608028654  # sqrt(2/pi)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946

#: alternative spellings -> canonical handler name
ALIASES = {
    "truediv": "div", "true_divide": "div", "divide": "div", "itruediv": "div",
    "iadd": "add", "isub": "sub", "imul": "mul", "ipow": "pow", "ifloordiv": "floordiv",
    "multiply": "mul", "subtract": "sub", "clip": "clamp", "absolute": "abs", "negative": "neg",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
    "concat": "cat", "concatenate": "cat", "swapaxes": "transpose", "swapdims": "transpose",
    "_max_pool1d": "max_pool1d", "_max_pool2d": "max_pool2d", "_max_pool3d": "max_pool3d",
    "_adaptive_max_pool1d": "adaptive_max_pool1d", "_adaptive_max_pool2d": "adaptive_max_pool2d",
    "_adaptive_max_pool3d": "adaptive_max_pool3d",
    "max_pool1d_with_indices": "max_pool1d", "max_pool2d_with_indices": "max_pool2d",
    "max_pool3d_with_indices": "max_pool3d",
    "fix": "trunc", "arctan": "atan", "special_erf": "erf", "expit": "sigmoid",
    "clamp_min_": "clamp_min", "matrix_power": None, "rsub": "rsub",
    "floor_divide": "floordiv", "sub_": "sub", "amax": "amax", "amin": "amin",
    "moveaxis": "movedim", "scaled_dot_product_attention": "sdpa",
    "linalg_vector_norm": "vector_norm", "frobenius_norm": "norm", "_threshold": "threshold", "log_sigmoid": "logsigmoid",
}

#: handlers that are element-wise unary maps: name -> f(expr) -> expr
def _relu(e):
    return B.call("max", e, B.fconst(0.0))


UNARY: dict[str, Callable[[Expr], Expr]] = {
    "relu": _relu,
    "sigmoid": lambda e: B.call("sigmoid", e),
    "tanh": lambda e: B.call("tanh", e),
    "exp": lambda e: B.call("exp", e),
    "log": lambda e: B.call("log", e),
    "log2": lambda e: B.div(B.call("log", e), B.fconst(math.log(2.0))),
    "log10": lambda e: B.div(B.call("log", e), B.fconst(math.log(10.0))),
    "log1p": lambda e: B.call("log", B.add(B.fconst(1.0), e)),
    "expm1": lambda e: B.sub(B.call("exp", e), B.fconst(1.0)),
    "exp2": lambda e: B.call("pow", B.fconst(2.0), e),
    "sqrt": lambda e: B.call("sqrt", e),
    "rsqrt": lambda e: B.call("rsqrt", e),
    "abs": lambda e: B.call("abs", e),
    "erf": lambda e: B.call("erf", e),
    "floor": lambda e: B.call("floor", e),
    "ceil": lambda e: B.call("ceil", e),
    "trunc": lambda e: B.select(B.cmp(">=", e, B.fconst(0.0)), B.call("floor", e), B.call("ceil", e)),
    "neg": lambda e: B.neg(e),
    "reciprocal": lambda e: B.div(B.fconst(1.0), e),
    "square": lambda e: B.mul(e, e),
    "sign": lambda e: B.select(B.cmp(">", e, B.fconst(0.0)), B.fconst(1.0),
                               B.select(B.cmp("<", e, B.fconst(0.0)), B.neg(B.fconst(1.0)), B.fconst(0.0))),
    "silu": lambda e: B.mul(e, B.call("sigmoid", e)),
    "mish": lambda e: B.mul(e, B.call("tanh", B.call("log", B.add(B.fconst(1.0), B.call("exp", e))))),
    "hardswish": lambda e: B.div(B.mul(e, B.call("min", B.call("max", B.add(e, B.fconst(3.0)), B.fconst(0.0)),
                                                  B.fconst(6.0))), B.fconst(6.0)),
    "hardsigmoid": lambda e: B.div(B.call("min", B.call("max", B.add(e, B.fconst(3.0)), B.fconst(0.0)),
                                          B.fconst(6.0)), B.fconst(6.0)),
    "relu6": lambda e: B.call("min", B.call("max", e, B.fconst(0.0)), B.fconst(6.0)),
    "selu": lambda e: B.mul(B.fconst(_SELU_SCALE), B.select(
        B.cmp(">", e, B.fconst(0.0)), e, B.mul(B.fconst(_SELU_ALPHA), B.sub(B.call("exp", e), B.fconst(1.0))))),
    "softsign": lambda e: B.div(e, B.add(B.fconst(1.0), B.call("abs", e))),
    "tanhshrink": lambda e: B.sub(e, B.call("tanh", e)),
    "logsigmoid": lambda e: B.neg(B.select(B.cmp(">", B.neg(e), B.fconst(20.0)), B.neg(e),
                                           B.call("log", B.add(B.fconst(1.0), B.call("exp", B.neg(e)))))),
}

#: binary element-wise operators: name -> f(a, b)
BINARY: dict[str, Callable[[Expr, Expr], Expr]] = {
    "mul": B.mul,
    "floordiv": lambda a, b: B.binop("//", a, b),
    "remainder": lambda a, b: B.binop("%", a, b),
    "maximum": lambda a, b: B.call("max", a, b),
    "minimum": lambda a, b: B.call("min", a, b),
    "fmax": lambda a, b: B.call("max", a, b),
    "fmin": lambda a, b: B.call("min", a, b),
    "gt": lambda a, b: B.cmp(">", a, b),
    "ge": lambda a, b: B.cmp(">=", a, b),
    "lt": lambda a, b: B.cmp("<", a, b),
    "le": lambda a, b: B.cmp("<=", a, b),
    "eq": lambda a, b: B.cmp("==", a, b),
    "ne": lambda a, b: B.cmp("!=", a, b),
    "logical_and": lambda a, b: B.binop("&", B.cmp("!=", a, B.const(0)), B.cmp("!=", b, B.const(0))),
    "logical_or": lambda a, b: B.binop("|", B.cmp("!=", a, B.const(0)), B.cmp("!=", b, B.const(0))),
    "and_": lambda a, b: B.binop("&", a, b),
    "or_": lambda a, b: B.binop("|", a, b),
}

_TORCH_OF_LEIR = {
    "f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i64": "int64",
    "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "bool": "bool",
}


def _pair(v, n: int) -> list[int]:
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return [int(v[0])] * n
        if len(v) != n:
            raise ValueError(f"expected {n} values, got {list(v)}")
        return [int(x) for x in v]
    return [int(v)] * n


def _drop(idx: Sequence[Expr], dims: Sequence[int]) -> list[Expr]:
    return [e for d, e in enumerate(idx) if d not in dims]


class Poison(Val):
    """A value the frontend cannot produce (e.g. argmax indices); using it is an error."""

    def __init__(self, shape, what: str, dtype: str = "i64"):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.what = what

    def at(self, idx):
        raise UnsupportedOpError(f"{self.what} is not supported")


class ValuesIndices(tuple):
    """The (values, indices) result of max/min/sort-like operators, with ``.values`` and
    ``.indices`` like torch's named tuples."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


class Ops:
    def __init__(self, imp):
        self.imp = imp
        self.b: B.Builder = imp.b

    # ------------------------------------------------------------------
    # dispatch

    def call_function(self, target, args, kwargs):
        name = getattr(target, "__name__", None) or str(target)
        mod = getattr(target, "__module__", None) or ""
        has_val = _contains_val(args) or _contains_val(kwargs)
        if not has_val and (mod in ("_operator", "operator", "math", "builtins") or target in (getattr, len)):
            return target(*args, **kwargs)  # python arithmetic on sizes, math.sqrt(d), ...
        if name == "getattr":
            return self._getattr(*args)
        key = ALIASES.get(name, name)
        if key is None:
            raise UnsupportedOpError(f"unsupported operation {_pretty(target)}", op=_pretty(target))
        return self._dispatch(key, _pretty(target), args, kwargs)

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
        h = getattr(self, f"m_{cls}", None)
        if h is None:
            raise UnsupportedOpError(f"unsupported module torch.nn.{cls} ({qualname})", op=f"nn.{cls}")
        return h(qualname, mod, *args, **kwargs)

    def _dispatch(self, key: str, pretty: str, args, kwargs, method: bool = False):
        if method:
            h = getattr(self, f"t_{key}", None) or getattr(self, f"f_{key}", None)
        else:
            h = getattr(self, f"f_{key}", None)
        if h is None and key in UNARY:
            return self._unary_call(key, args, kwargs)
        if h is None and key in BINARY:
            return self._binary_call(key, args, kwargs)
        if h is None:
            raise UnsupportedOpError(f"unsupported operation {pretty}", op=pretty)
        try:
            return h(*args, **kwargs)
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
        """Reduce ``x`` over ``dims`` (None = all) with ``op`` in + * max min."""
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
            dtype = x.dtype if x.dtype in A.FLOAT_DTYPES else self.imp.out_dtype()
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
                return _size(obj.shape)
            if attr == "T":
                return Vs.permute(obj, list(reversed(range(obj.ndim))))
            if attr == "mT":
                return Vs.transpose(obj, -2, -1)
            if attr == "dtype":
                import torch

                return getattr(torch, _TORCH_OF_LEIR[obj.dtype])
            if attr == "device":
                import torch

                return torch.device("cpu")
            if attr == "ndim":
                return obj.ndim
            if attr == "is_cuda":
                return False
            raise UnsupportedOpError(f"unsupported tensor attribute .{attr}")
        return getattr(obj, attr)

    def t_size(self, x, dim=None):
        if dim is None:
            return _size(x.shape)
        return x.shape[norm_dim(dim, x.ndim)]

    def t_dim(self, x):
        return x.ndim

    t_ndimension = t_dim

    def t_numel(self, x):
        return x.numel

    f_numel = t_numel

    def f__assert(self, condition, message=None):
        """Guards fx inserts for concrete (non-tensor) arguments: already true here."""
        return None

    # ------------------------------------------------------------------
    # identity-like

    def f_contiguous(self, x, memory_format=None):
        return x

    def f_clone(self, x, memory_format=None):
        return x

    def f_detach(self, x):
        return x

    def t_requires_grad_(self, x, requires_grad=True):
        return x

    def f_cpu(self, x, *a, **k):
        return x

    def f_cuda(self, x, *a, **k):
        return x

    def f_dropout(self, input, p=0.5, training=True, inplace=False):
        if p == 0 or not training:
            return input
        raise UnsupportedOpError(f"dropout with p={p} in training mode is random (cannot be compared); "
                                 "put the model in eval mode or use p=0")

    f_dropout1d = f_dropout2d = f_dropout3d = f_alpha_dropout = f_feature_alpha_dropout = f_dropout

    def _cast(self, x, dt: str):
        if x.dtype == dt:
            return x
        return self.ew([x], lambda e: B.call(dt, e), dtype=dt)

    def t_float(self, x, memory_format=None):
        return self._cast(x, "f32")

    def t_double(self, x, memory_format=None):
        return self._cast(x, "f64")

    def t_half(self, x, memory_format=None):
        return self._cast(x, "f16")

    def t_long(self, x, memory_format=None):
        return self._cast(x, "i64")

    def t_int(self, x, memory_format=None):
        return self._cast(x, "i32")

    def t_bool(self, x, memory_format=None):
        return self._cast(x, "bool")

    def t_to(self, x, *args, **kwargs):
        import torch

        dt = kwargs.get("dtype")
        for a in args:
            if isinstance(a, torch.dtype):
                dt = a
            elif isinstance(a, Val):
                dt = getattr(torch, _TORCH_OF_LEIR[a.dtype])
        if dt is None:
            return x
        from .importer import leir_dtype

        return self._cast(x, leir_dtype(dt))

    def t_type(self, x, dtype=None, non_blocking=False, **kw):
        if dtype is None:
            raise UnsupportedOpError("Tensor.type() without a dtype")
        return self.t_to(x, dtype)

    def t_type_as(self, x, other):
        return self._cast(x, other.dtype)

    # ------------------------------------------------------------------
    # views

    def t_view(self, x, *shape, **kw):
        import torch

        if "size" in kw:
            shape = (kw["size"],)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = tuple(shape[0])
        if len(shape) == 1 and not isinstance(shape[0], int):
            raise UnsupportedOpError("Tensor.view(dtype) is not supported")
        return Vs.reshape(x, shape)

    t_reshape = t_view

    def f_reshape(self, input, shape):
        return Vs.reshape(input, tuple(shape))

    def t_view_as(self, x, other):
        return Vs.reshape(x, other.shape)

    t_reshape_as = t_view_as

    def f_flatten(self, input, start_dim=0, end_dim=-1):
        return Vs.flatten(input, start_dim, end_dim)

    def f_unflatten(self, input, dim, sizes):
        d = norm_dim(dim, input.ndim)
        sizes = list(sizes)
        if -1 in sizes:
            rest = math.prod(s for s in sizes if s != -1)
            sizes[sizes.index(-1)] = input.shape[d] // rest
        return Vs.reshape(input, list(input.shape[:d]) + sizes + list(input.shape[d + 1:]))

    def f_squeeze(self, input, dim=None):
        return Vs.squeeze(input, dim)

    def f_unsqueeze(self, input, dim):
        return Vs.unsqueeze(input, dim)

    def f_transpose(self, input, dim0, dim1):
        return Vs.transpose(input, dim0, dim1)

    def f_t(self, input):
        if input.ndim < 2:
            return input
        return Vs.transpose(input, 0, 1)

    def f_adjoint(self, input):
        return Vs.transpose(input, -2, -1)

    def t_permute(self, x, *dims):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        return Vs.permute(x, dims)

    def f_permute(self, input, dims):
        return Vs.permute(input, dims)

    def f_movedim(self, input, source, destination):
        src = [source] if isinstance(source, int) else list(source)
        dst = [destination] if isinstance(destination, int) else list(destination)
        nd = input.ndim
        src = [norm_dim(s, nd) for s in src]
        dst = [norm_dim(s, nd) for s in dst]
        order = [None] * nd
        for s, d in zip(src, dst):
            order[d] = s
        rest = iter([d for d in range(nd) if d not in src])
        order = [o if o is not None else next(rest) for o in order]
        return Vs.permute(input, order)

    def t_expand(self, x, *sizes):
        import torch

        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, torch.Size)):
            sizes = tuple(sizes[0])
        return Vs.expand(x, sizes)

    def f_broadcast_to(self, input, size):
        return Vs.expand(input, size)

    def t_expand_as(self, x, other):
        return Vs.expand(x, other.shape)

    def t_repeat(self, x, *sizes):
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = tuple(sizes[0])
        sizes = [int(s) for s in sizes]
        if len(sizes) < x.ndim:
            raise ValueError("repeat needs at least as many sizes as dimensions")
        off = len(sizes) - x.ndim
        base_shape = [1] * off + list(x.shape)
        shape = [b * r for b, r in zip(base_shape, sizes)]

        def fn(idx):
            out = []
            for j, s in enumerate(x.shape):
                e = idx[off + j]
                out.append(B.const(0) if s == 1 else B.imod(e, s))
            return out

        return View(x, shape, fn)

    def f_flip(self, input, dims):
        dims = [norm_dim(d, input.ndim) for d in ([dims] if isinstance(dims, int) else dims)]

        def fn(idx):
            return [B.isub(B.const(input.shape[d] - 1), e) if d in dims else e for d, e in enumerate(idx)]

        return View(input, input.shape, fn)

    def f_roll(self, input, shifts, dims=None):
        if dims is None:
            flat = Vs.flatten(input)
            return Vs.reshape(self.f_roll(flat, shifts, 0), input.shape)
        shifts = [shifts] if isinstance(shifts, int) else list(shifts)
        dims = [dims] if isinstance(dims, int) else list(dims)
        sh = {norm_dim(d, input.ndim): s for d, s in zip(dims, shifts)}

        def fn(idx):
            out = []
            for d, e in enumerate(idx):
                if d in sh and sh[d] % input.shape[d]:
                    n = input.shape[d]
                    out.append(B.imod(B.iadd(e, B.const(n - sh[d] % n)), n))
                else:
                    out.append(e)
            return out

        return View(input, input.shape, fn)

    def f_narrow(self, input, dim, start, length):
        return Vs.slice_dim(input, dim, start, start + length)

    def f_select(self, input, dim, index):
        return Vs.select_index(input, dim, index)

    def f_getitem(self, obj, item):
        if not isinstance(obj, Val):
            return obj[item]
        return self._tensor_index(obj, item)

    def _tensor_index(self, x: Val, item):
        if not isinstance(item, tuple):
            item = (item,)
        if any(isinstance(it, Val) for it in item):
            raise UnsupportedOpError("indexing a tensor with a tensor (advanced/boolean indexing) is not supported")
        n_real = sum(1 for it in item if it is not None and it is not Ellipsis)
        if Ellipsis in item:
            k = item.index(Ellipsis)
            item = item[:k] + (slice(None),) * (x.ndim - n_real) + item[k + 1:]
        v = x
        d = 0  # current dimension of v
        for it in item:
            if it is None:
                v = Vs.unsqueeze(v, d)
                d += 1
            elif isinstance(it, slice):
                v = Vs.slice_dim(v, d, it.start, it.stop, it.step or 1)
                d += 1
            elif isinstance(it, int):
                v = Vs.select_index(v, d, it)
            else:
                raise UnsupportedOpError(f"unsupported index {it!r}")
        return v

    def f_split(self, tensor, split_size_or_sections, dim=0):
        d = norm_dim(dim, tensor.ndim)
        n = tensor.shape[d]
        if isinstance(split_size_or_sections, int):
            s = split_size_or_sections
            sizes = [min(s, n - k) for k in range(0, n, s)]
        else:
            sizes = list(split_size_or_sections)
        out, start = [], 0
        for s in sizes:
            out.append(Vs.slice_dim(tensor, d, start, start + s))
            start += s
        return tuple(out)

    t_split = f_split

    def f_chunk(self, input, chunks, dim=0):
        d = norm_dim(dim, input.ndim)
        n = input.shape[d]
        s = -(-n // chunks)
        return self.f_split(input, s, d)

    def f_unbind(self, input, dim=0):
        d = norm_dim(dim, input.ndim)
        return tuple(Vs.select_index(input, d, i) for i in range(input.shape[d]))

    def f_diagonal(self, input, offset=0, dim1=0, dim2=1):
        if input.ndim != 2 or (dim1, dim2) not in ((0, 1), (-2, -1)):
            raise UnsupportedOpError("diagonal is supported for 2-d tensors only")
        n, m = input.shape
        length = max(0, min(n - max(0, -offset), m - max(0, offset)))
        return View(input, [length], lambda idx: [B.iadd(idx[0], B.const(max(0, -offset))),
                                                  B.iadd(idx[0], B.const(max(0, offset)))])

    def f_diag(self, input, diagonal=0):
        if input.ndim == 2:
            return self.f_diagonal(input, diagonal)
        if input.ndim != 1:
            raise UnsupportedOpError("diag of a tensor with more than 2 dimensions")
        n = input.shape[0] + abs(diagonal)
        k = diagonal

        def fn(i, j):
            return B.select(B.cmp("==", B.isub(j, i), B.const(k)),
                            input.at([i if k >= 0 else j]), B.fconst(0.0))

        name = self.b.assign(self.imp.hint, (n, n), lambda idx: fn(*idx), input.dtype)
        return TensorRef(name, (n, n), input.dtype)

    def f_diag_embed(self, input, offset=0, dim1=-2, dim2=-1):
        if offset != 0 or (dim1, dim2) != (-2, -1):
            raise UnsupportedOpError("diag_embed with offset/dims")
        n = input.shape[-1]
        shape = tuple(input.shape) + (n,)
        name = self.b.assign(self.imp.hint, shape, lambda idx: B.select(
            B.cmp("==", idx[-2], idx[-1]), input.at(idx[:-1]), B.fconst(0.0)), input.dtype)
        return TensorRef(name, shape, input.dtype)

    # ------------------------------------------------------------------
    # creation

    def _const_like(self, input, value, dtype=None):
        from .importer import leir_dtype

        dt = leir_dtype(dtype) if dtype is not None else input.dtype
        return ConstVal(value, input.shape, dt)

    def f_zeros_like(self, input, dtype=None, **kw):
        return self._const_like(input, 0, dtype)

    def f_ones_like(self, input, dtype=None, **kw):
        return self._const_like(input, 1, dtype)

    def f_full_like(self, input, fill_value, dtype=None, **kw):
        return self._const_like(input, fill_value, dtype)

    def _const_new(self, size, value, dtype=None):
        import torch

        if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
            size = tuple(size[0])
        return ConstVal(value, tuple(int(s) for s in size), self.imp.out_dtype())

    def f_zeros(self, *size, **kw):
        return self._const_new(size, 0)

    def f_ones(self, *size, **kw):
        return self._const_new(size, 1)

    def f_full(self, size, fill_value, **kw):
        return self._const_new((size,), fill_value)

    def t_new_zeros(self, x, *size, **kw):
        return self._const_new(size, 0)

    def t_new_ones(self, x, *size, **kw):
        return self._const_new(size, 1)

    def t_new_full(self, x, size, fill_value, **kw):
        return self._const_new((size,), fill_value)

    def f_tensor(self, data, dtype=None, **kw):
        if isinstance(data, (int, float, bool)):
            return ConstVal(data, (), self.imp.out_dtype())
        raise UnsupportedOpError("torch.tensor(...) of a non-scalar inside forward")

    f_scalar_tensor = f_tensor
    f_as_tensor = f_tensor

    def f_arange(self, *args, **kw):
        vals = [a for a in args]
        if len(vals) == 1:
            start, end, step = 0, vals[0], 1
        elif len(vals) == 2:
            start, end, step = vals[0], vals[1], 1
        else:
            start, end, step = vals[:3]
        n = max(0, math.ceil((end - start) / step))
        dt = self.imp.out_dtype()

        def fn(idx):
            i = idx[0] if n > 1 else B.const(0)
            e = B.iadd(B.imul(i, int(step)), B.const(int(start))) if all(
                isinstance(v, int) for v in (start, step)) else B.add(B.mul(i, B.fconst(step)), B.fconst(start))
            return e

        return ExprVal((n,), fn, dt)

    # ------------------------------------------------------------------
    # element-wise arithmetic

    def f_add(self, input, other, *, alpha=1, out=None):
        if not isinstance(input, Val) and not isinstance(other, Val):
            return input + alpha * other
        if alpha == 1:
            return self.ew([input, other], B.add)
        return self.ew([input, other], lambda a, b: B.add(a, B.mul(Vs.scalar_expr(alpha), b)))

    def f_sub(self, input, other, *, alpha=1, out=None):
        if alpha == 1:
            return self.ew([input, other], B.sub)
        return self.ew([input, other], lambda a, b: B.sub(a, B.mul(Vs.scalar_expr(alpha), b)))

    def f_rsub(self, input, other, alpha=1):
        return self.f_sub(other, input, alpha=alpha)

    def f_div(self, input, other, *, rounding_mode=None, out=None):
        if rounding_mode is None:
            return self.ew([input, other], B.div)
        if rounding_mode == "floor":
            if self.imp.out_dtype() in A.FLOAT_DTYPES:
                return self.ew([input, other], lambda a, b: B.call("floor", B.div(a, b)))
            return self.ew([input, other], lambda a, b: B.binop("//", a, b))
        if rounding_mode == "trunc":
            f = UNARY["trunc"]
            if self.imp.out_dtype() in A.FLOAT_DTYPES:
                return self.ew([input, other], lambda a, b: f(B.div(a, b)))
        raise UnsupportedOpError(f"div with rounding_mode={rounding_mode!r}")

    def f_fmod(self, input, other):
        # C fmod: the result has the sign of the dividend
        def f(a, b):
            q = B.div(a, b)
            return B.sub(a, B.mul(b, UNARY["trunc"](q)))

        return self.ew([input, other], f)

    def f_pow(self, input, exponent):
        if isinstance(exponent, (int, float)) and not isinstance(exponent, bool) and isinstance(input, Val):
            e = exponent
            if e == 2:
                return self.unary(input, lambda x: B.mul(x, x))
            if e == 1:
                return self.unary(input, lambda x: x)
            if e == 0.5:
                return self.unary(input, lambda x: B.call("sqrt", x))
            if e == -0.5:
                return self.unary(input, lambda x: B.call("rsqrt", x))
            if e == -1:
                return self.unary(input, lambda x: B.div(B.fconst(1.0), x))
            if e == 3:
                return self.unary(input, lambda x: B.mul(B.mul(x, x), x))
            return self.unary(input, lambda x: B.binop("**", x, Vs.scalar_expr(e)))
        return self.ew([input, exponent], lambda a, b: B.binop("**", a, b))

    def f_float_power(self, input, exponent):
        return self.f_pow(input, exponent)

    def f_clamp(self, input, min=None, max=None):
        def f(x, lo, hi):
            e = x
            if lo is not None:
                e = B.call("max", e, lo)
            if hi is not None:
                e = B.call("min", e, hi)
            return e

        args = [input]
        lo_i = hi_i = None
        if min is not None:
            lo_i = len(args)
            args.append(_num(min))
        if max is not None:
            hi_i = len(args)
            args.append(_num(max))
        return self.ew(args, lambda *es: f(es[0], es[lo_i] if lo_i else None, es[hi_i] if hi_i else None))

    def f_clamp_min(self, input, min):
        return self.f_clamp(input, min=min)

    def f_clamp_max(self, input, max):
        return self.f_clamp(input, max=max)

    def f_where(self, condition, input=None, other=None):
        if input is None:
            raise UnsupportedOpError("torch.where(condition) (nonzero indices) is not supported")
        return self.ew([condition, input, other], lambda c, a, b: B.select(_cond(c, condition), a, b))

    def f_masked_fill(self, input, mask, value):
        return self.ew([input, mask, value], lambda a, m, v: B.select(_cond(m, mask), v, a))

    def f_logical_not(self, input):
        return self.ew([input], lambda a: B.cmp("==", a, B.const(0)), dtype="bool")

    def f_lerp(self, input, end, weight):
        return self.ew([input, end, weight], lambda a, b, w: B.add(a, B.mul(w, B.sub(b, a))))

    def f_addcmul(self, input, tensor1, tensor2, *, value=1):
        return self.ew([input, tensor1, tensor2], lambda a, b, c: B.add(a, B.mul(B.mul(Vs.scalar_expr(value), b), c)))

    def f_addcdiv(self, input, tensor1, tensor2, *, value=1):
        return self.ew([input, tensor1, tensor2], lambda a, b, c: B.add(a, B.mul(Vs.scalar_expr(value), B.div(b, c))))

    def f_triu(self, input, diagonal=0):
        return self._tri(input, diagonal, True)

    def f_tril(self, input, diagonal=0):
        return self._tri(input, diagonal, False)

    def _tri(self, x, k, upper):
        def fn(idx):
            i, j = idx[-2], idx[-1]
            d = B.isub(j, i)
            cond = B.cmp(">=", d, B.const(k)) if upper else B.cmp("<=", d, B.const(k))
            return B.select(cond, x.at(idx), B.fconst(0.0))

        name = self.b.assign(self.imp.hint, x.shape, fn, x.dtype)
        return TensorRef(name, x.shape, x.dtype)

    # ------------------------------------------------------------------
    # activations

    def f_relu(self, input, inplace=False):
        return self.unary(input, UNARY["relu"])

    def f_leaky_relu(self, input, negative_slope=0.01, inplace=False):
        s = float(negative_slope)
        return self.unary(input, lambda e: B.select(B.cmp(">", e, B.fconst(0.0)), e, B.mul(e, B.fconst(s))))

    def f_gelu(self, input, approximate="none"):
        if approximate == "tanh":
            def f(e):
                inner = B.mul(B.fconst(_GELU_TANH_K), B.add(e, B.mul(B.fconst(0.044715), B.mul(B.mul(e, e), e))))
                return B.mul(B.mul(B.fconst(0.5), e), B.add(B.fconst(1.0), B.call("tanh", inner)))
        elif approximate == "none":
            def f(e):
                return B.mul(B.mul(B.fconst(0.5), e), B.add(B.fconst(1.0), B.call("erf", B.mul(e, B.fconst(_SQRT1_2)))))
        else:
            raise UnsupportedOpError(f"gelu approximate={approximate!r}")
        return self.unary(input, f)

    def f_silu(self, input, inplace=False):
        return self.unary(input, UNARY["silu"])

    def f_mish(self, input, inplace=False):
        return self.unary(input, UNARY["mish"])

    def f_hardswish(self, input, inplace=False):
        return self.unary(input, UNARY["hardswish"])

    def f_hardsigmoid(self, input, inplace=False):
        return self.unary(input, UNARY["hardsigmoid"])

    def f_relu6(self, input, inplace=False):
        return self.unary(input, UNARY["relu6"])

    def f_selu(self, input, inplace=False):
        return self.unary(input, UNARY["selu"])

    def f_hardtanh(self, input, min_val=-1.0, max_val=1.0, inplace=False):
        lo, hi = float(min_val), float(max_val)
        return self.unary(input, lambda e: B.call("min", B.call("max", e, B.fconst(lo)), B.fconst(hi)))

    def f_elu(self, input, alpha=1.0, inplace=False):
        a = float(alpha)
        return self.unary(input, lambda e: B.select(B.cmp(">", e, B.fconst(0.0)), e,
                                                    B.mul(B.fconst(a), B.sub(B.call("exp", e), B.fconst(1.0)))))

    def f_celu(self, input, alpha=1.0, inplace=False):
        a = float(alpha)
        return self.unary(input, lambda e: B.select(B.cmp(">", e, B.fconst(0.0)), e, B.mul(
            B.fconst(a), B.sub(B.call("exp", B.div(e, B.fconst(a))), B.fconst(1.0)))))

    def f_softplus(self, input, beta=1.0, threshold=20.0):
        bt, th = float(beta), float(threshold)

        def f(e):
            be = e if bt == 1.0 else B.mul(e, B.fconst(bt))
            sp = B.call("log", B.add(B.fconst(1.0), B.call("exp", be)))
            if bt != 1.0:
                sp = B.div(sp, B.fconst(bt))
            return B.select(B.cmp(">", be, B.fconst(th)), e, sp)

        return self.unary(input, f)

    def f_softsign(self, input):
        return self.unary(input, UNARY["softsign"])

    def f_softshrink(self, input, lambd=0.5):
        lam = float(lambd)
        return self.unary(input, lambda e: B.select(
            B.cmp(">", e, B.fconst(lam)), B.sub(e, B.fconst(lam)),
            B.select(B.cmp("<", e, B.neg(B.fconst(lam))), B.add(e, B.fconst(lam)), B.fconst(0.0))))

    def f_hardshrink(self, input, lambd=0.5):
        lam = float(lambd)
        return self.unary(input, lambda e: B.select(B.cmp(">", B.call("abs", e), B.fconst(lam)), e, B.fconst(0.0)))

    def f_threshold(self, input, threshold, value, inplace=False):
        th, v = float(threshold), float(value)
        return self.unary(input, lambda e: B.select(B.cmp(">", e, B.fconst(th)), e, Vs.scalar_expr(v)))

    def f_prelu(self, input, weight):
        # weight [C] applies along dim 1 (or a single value)
        if weight.numel == 1:
            w = View(weight, (), lambda idx: [B.const(0)] * weight.ndim)
            return self.ew([input, w], lambda e, a: B.select(B.cmp(">", e, B.fconst(0.0)), e, B.mul(a, e)))
        wv = Vs.reshape(weight, [weight.numel] + [1] * (input.ndim - 2))
        return self.ew([input, wv], lambda e, a: B.select(B.cmp(">", e, B.fconst(0.0)), e, B.mul(a, e)))

    # ------------------------------------------------------------------
    # reductions

    def f_sum(self, input, dim=None, keepdim=False, *, dtype=None):
        if isinstance(dim, bool):  # sum(x, keepdim) misuse
            raise UnsupportedOpError("sum with a bool dim")
        dt = self.imp.out_dtype()
        return self.reduce(input, dim, keepdim, "+", dtype=dt)

    def f_nansum(self, input, dim=None, keepdim=False, *, dtype=None):
        return self.reduce(input, dim, keepdim, "+",
                           term=lambda e: B.select(B.cmp("!=", e, e), B.fconst(0.0), e))

    def f_mean(self, input, dim=None, keepdim=False, *, dtype=None):
        dims = self._full_reduce_shape(input, dim, keepdim)
        n = math.prod(input.shape[d] for d in dims)
        s = self.reduce(input, dims, keepdim, "+", hint=f"{self.imp.hint}_sum", dtype="f32")
        return self.scalar_div(s, n)

    def f_prod(self, input, dim=None, keepdim=False, *, dtype=None):
        return self.reduce(input, dim, keepdim, "*")

    def f_amax(self, input, dim=(), keepdim=False):
        return self.reduce(input, dim if dim != () else None, keepdim, "max")

    def f_amin(self, input, dim=(), keepdim=False):
        return self.reduce(input, dim if dim != () else None, keepdim, "min")

    def _minmax(self, op, input, dim=None, keepdim=False, other=None):
        if isinstance(dim, Val):
            other, dim = dim, None
        if other is not None:
            return self.ew([input, other], lambda a, b: B.call(op, a, b))
        if dim is None:
            return self.reduce(input, None, False, op)
        vals = self.reduce(input, dim, keepdim, op, hint=self.imp.hint + "_values")
        return ValuesIndices((vals, Poison(vals.shape, f"the indices result of {op}(x, dim) (argument positions)")))

    def f_max(self, input, dim=None, keepdim=False, *, other=None):
        return self._minmax("max", input, dim, keepdim, other)

    def f_min(self, input, dim=None, keepdim=False, *, other=None):
        return self._minmax("min", input, dim, keepdim, other)

    def f_argmax(self, input, dim=None, keepdim=False):
        raise UnsupportedOpError("argmax returns indices (a data-dependent result); not supported")

    def f_argmin(self, input, dim=None, keepdim=False):
        raise UnsupportedOpError("argmin returns indices (a data-dependent result); not supported")

    def f_logsumexp(self, input, dim, keepdim=False):
        dims = self._full_reduce_shape(input, dim, keepdim)
        h = self.imp.hint
        m = self.reduce(input, dims, True, "max", hint=f"{h}_max")
        s = self.reduce(ExprVal(input.shape, lambda idx: B.call("exp", B.sub(input.at(idx), bcast_at(m, input.shape, idx)))),
                        dims, True, "+", hint=f"{h}_sum")
        # guard -inf rows like torch: max == -inf -> use 0 offset; rows of finite data are the common case
        res = self.ew([m, s], lambda a, b: B.add(a, B.call("log", b)), shape=m.shape)
        return res if keepdim else Vs.squeeze(res, dims)

    def _var(self, input, dim, correction, keepdim, hint=None):
        dims = self._full_reduce_shape(input, dim, keepdim)
        n = math.prod(input.shape[d] for d in dims)
        h = hint or self.imp.hint
        s = self.reduce(input, dims, True, "+", hint=f"{h}_sum")
        mean = self.scalar_div(s, n, hint=f"{h}_mean")
        q = self.reduce(ExprVal(input.shape, lambda idx: _sq(B.sub(input.at(idx), bcast_at(mean, input.shape, idx)))),
                        dims, True, "+", hint=f"{h}_sq")
        denom = max(n - correction, 0)
        return q, denom, dims

    def _correction(self, unbiased, correction):
        if correction is not None:
            return correction
        if unbiased is None:
            return 1
        return 1 if unbiased else 0

    def f_var(self, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(dim, bool):
            unbiased, dim = dim, None
        q, denom, dims = self._var(input, dim, self._correction(unbiased, correction), keepdim)
        r = self.ew([q], lambda e: B.div(e, B.fconst(float(denom))), shape=q.shape)
        return r if keepdim else Vs.squeeze(r, dims)

    def f_std(self, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(dim, bool):
            unbiased, dim = dim, None
        q, denom, dims = self._var(input, dim, self._correction(unbiased, correction), keepdim)
        r = self.ew([q], lambda e: B.call("sqrt", B.div(e, B.fconst(float(denom)))), shape=q.shape)
        return r if keepdim else Vs.squeeze(r, dims)

    def f_norm(self, input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
        if p in ("fro", 2, 2.0, None):
            s = self.reduce(input, dim, keepdim, "+", term=_sq, hint=f"{self.imp.hint}_sq")
            return self.ew([s], lambda e: B.call("sqrt", e), shape=s.shape)
        if p in (1, 1.0):
            return self.reduce(input, dim, keepdim, "+", term=lambda e: B.call("abs", e))
        if p in (math.inf, float("inf"), "inf"):
            return self.reduce(input, dim, keepdim, "max", term=lambda e: B.call("abs", e))
        if isinstance(p, (int, float)) and p > 0:
            s = self.reduce(input, dim, keepdim, "+", term=lambda e: B.binop("**", B.call("abs", e), B.fconst(p)),
                            hint=f"{self.imp.hint}_pow")
            return self.ew([s], lambda e: B.binop("**", e, B.fconst(1.0 / p)), shape=s.shape)
        raise UnsupportedOpError(f"norm with p={p!r}")

    def f_vector_norm(self, x, ord=2, dim=None, keepdim=False, *, dtype=None):
        return self.f_norm(x, ord, dim, keepdim)

    def f_cumsum(self, input, dim, *, dtype=None):
        return self._scan(input, dim, "+")

    def f_cumprod(self, input, dim, *, dtype=None):
        return self._scan(input, dim, "*")

    def _scan(self, x, dim, op):
        d = norm_dim(dim, x.ndim)
        name = self.b.names.fresh(self.imp.hint)
        ident = B.fconst(0.0 if op == "+" else 1.0)

        def fn(idx):
            j = idx[d]
            if isinstance(j, A.Const):
                return x.at(idx)
            prev = list(idx)
            prev[d] = B.isub(j, B.const(1))
            acc = A.Access(name, x.dtype, "g", tuple(prev))
            return A.BinOp(op, B.select(B.cmp("<=", B.const(1), j), acc, ident), x.at(idx))

        self.b.assign(name, x.shape, fn, x.dtype, name=name)
        return TensorRef(name, x.shape, x.dtype)

    # ------------------------------------------------------------------
    # softmax family

    def _softmax_dim(self, x, dim):
        if dim is None:
            return 0 if x.ndim in (0, 1, 3) else 1
        return norm_dim(dim, x.ndim)

    def _softmax(self, x, dim, log: bool, neg: bool = False):
        d = self._softmax_dim(x, dim)
        h = self.imp.hint
        src = x if not neg else ExprVal(x.shape, lambda idx: B.neg(x.at(idx)), x.dtype)
        m = self.reduce(src, [d], False, "max", hint=f"{h}_max")

        def shifted(idx):
            return B.sub(src.at(idx), m.at(_drop(idx, [d])))

        s = self.reduce(ExprVal(x.shape, lambda idx: B.call("exp", shifted(idx))), [d], False, "+", hint=f"{h}_sum")
        if log:
            f = lambda idx: B.sub(shifted(idx), B.call("log", s.at(_drop(idx, [d]))))  # noqa: E731
        else:
            f = lambda idx: B.div(B.call("exp", shifted(idx)), s.at(_drop(idx, [d])))  # noqa: E731
        name = self.b.assign(h, x.shape, f, "f32")
        return TensorRef(name, x.shape, "f32")

    def f_softmax(self, input, dim=None, _stacklevel=3, dtype=None):
        return self._softmax(input, dim, False)

    def f_log_softmax(self, input, dim=None, _stacklevel=3, dtype=None):
        return self._softmax(input, dim, True)

    def f_softmin(self, input, dim=None, _stacklevel=3, dtype=None):
        return self._softmax(input, dim, False, neg=True)

    # ------------------------------------------------------------------
    # matrix products

    def _contract(self, a: Val, b: Val, hint=None) -> Val:
        """torch.matmul semantics."""
        if a.ndim == 0 or b.ndim == 0:
            raise UnsupportedOpError("matmul of a 0-d tensor")
        a2 = Vs.unsqueeze(a, 0) if a.ndim == 1 else a
        b2 = Vs.unsqueeze(b, -1) if b.ndim == 1 else b
        batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        m, k = a2.shape[-2:]
        k2, n = b2.shape[-2:]
        if k != k2:
            raise ValueError(f"matmul shapes {list(a.shape)} and {list(b.shape)} do not match")
        nb = len(batch)

        def fn(o, r):
            bi = o[:nb]
            i, j = o[nb], o[nb + 1]
            kk = r[0]
            return B.mul(_batched(a2, batch, bi, [i, kk]), _batched(b2, batch, bi, [kk, j]))

        out_shape = tuple(batch) + (m, n)
        dt = self.imp.out_dtype()
        name = self.b.reduce(hint or self.imp.hint, out_shape, [k], fn, "+", dtype=dt)
        res: Val = TensorRef(name, out_shape, dt)
        if b.ndim == 1:
            res = Vs.squeeze(res, -1)
        if a.ndim == 1:
            res = Vs.squeeze(res, -2 if b.ndim != 1 else -1)
        return res

    def f_matmul(self, input, other):
        return self._contract(input, other)

    f_mm = f_bmm = f_matmul

    def f_mv(self, input, vec):
        return self._contract(input, vec)

    def f_dot(self, input, other):
        return self._contract(input, other)

    f_inner = f_vdot = f_dot

    def f_outer(self, input, vec2):
        return self.ew([Vs.unsqueeze(input, 1), Vs.unsqueeze(vec2, 0)], B.mul)

    f_ger = f_outer

    def f_addmm(self, input, mat1, mat2, *, beta=1, alpha=1):
        return self._add_product(input, mat1, mat2, beta, alpha)

    f_baddbmm = f_addmv = f_addmm

    def _add_product(self, input, m1, m2, beta, alpha):
        p = self._contract(m1, m2, hint=f"{self.imp.hint}_mm")

        def f(c, pr):
            t = pr if alpha == 1 else B.mul(Vs.scalar_expr(alpha), pr)
            if beta == 0:
                return t
            cc = c if beta == 1 else B.mul(Vs.scalar_expr(beta), c)
            return B.add(cc, t)

        return self.ew([input, p], f, shape=p.shape)

    def f_linear(self, input, weight, bias=None):
        """y[..., o] = sum_k x[..., k] * W[o, k] (+ b[o])."""
        x = input
        if weight.ndim == 1:
            return self._contract(x, weight)
        o_dim, k_dim = weight.shape
        lead = tuple(x.shape[:-1])
        nl = len(lead)
        dt = self.imp.out_dtype()
        name = self.b.reduce(self.imp.hint, lead + (o_dim,), [k_dim],
                             lambda o, r: B.mul(x.at(list(o[:nl]) + [r[0]]), weight.at([o[nl], r[0]])), "+", dtype=dt)
        if bias is not None:
            self.b.update(name, lead + (o_dim,), lambda idx, cur: B.add(cur, bcast_at(bias, lead + (o_dim,), idx)), dt)
        return TensorRef(name, lead + (o_dim,), dt)

    def f_bilinear(self, input1, input2, weight, bias=None):
        # y[n, o] = sum_{i,j} x1[n,i] W[o,i,j] x2[n,j] + b[o]
        n = input1.shape[0]
        o_dim, i_dim, j_dim = weight.shape
        dt = self.imp.out_dtype()
        name = self.b.reduce(self.imp.hint, (n, o_dim), [i_dim, j_dim], lambda o, r: B.mul(
            B.mul(input1.at([o[0], r[0]]), weight.at([o[1], r[0], r[1]])), input2.at([o[0], r[1]])), "+", dtype=dt)
        if bias is not None:
            self.b.update(name, (n, o_dim), lambda idx, cur: B.add(cur, bcast_at(bias, (n, o_dim), idx)), dt)
        return TensorRef(name, (n, o_dim), dt)

    def f_einsum(self, equation, *operands):
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
        eq = equation.replace(" ", "")
        if "..." in eq:
            raise UnsupportedOpError("einsum with '...' is not supported")
        if "->" in eq:
            lhs, rhs = eq.split("->")
        else:
            lhs = eq
            letters = lhs.replace(",", "")
            rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        terms = lhs.split(",")
        if len(terms) != len(operands) or len(operands) > 2:
            raise UnsupportedOpError("einsum with more than two operands is not supported")
        sizes: dict[str, int] = {}
        for t, op in zip(terms, operands):
            if len(t) != op.ndim:
                raise ValueError(f"einsum term '{t}' does not match a {op.ndim}-d operand")
            if len(set(t)) != len(t):
                raise UnsupportedOpError("einsum with a repeated index inside one operand (diagonal)")
            for c, s in zip(t, op.shape):
                if sizes.get(c, s) != s and s != 1 and sizes[c] != 1:
                    raise ValueError(f"einsum size mismatch for '{c}'")
                sizes[c] = max(sizes.get(c, 1), s)
        red = [c for c in sizes if c not in rhs]
        out_shape = [sizes[c] for c in rhs]
        red_shape = [sizes[c] for c in red]

        def fn(o, r):
            env = dict(zip(rhs, o))
            env.update(zip(red, r))
            e = None
            for t, op in zip(terms, operands):
                sub = [B.const(0) if s == 1 else env[c] for c, s in zip(t, op.shape)]
                a = op.at(sub)
                e = a if e is None else B.mul(e, a)
            return e

        dt = self.imp.out_dtype()
        if not red:
            name = self.b.assign(self.imp.hint, out_shape, lambda o: fn(o, []), dt)
        else:
            name = self.b.reduce(self.imp.hint, out_shape, red_shape, fn, "+", dtype=dt)
        return TensorRef(name, out_shape, dt)

    def f_tensordot(self, a, b, dims=2):
        raise UnsupportedOpError("tensordot is not supported (use einsum or matmul)")

    # ------------------------------------------------------------------
    # convolution

    def _pads(self, padding, nd, kernel, dilation):
        """[(lo, hi)] per spatial dim."""
        if isinstance(padding, str):
            if padding == "valid":
                return [(0, 0)] * nd
            if padding == "same":
                out = []
                for k, d in zip(kernel, dilation):
                    tot = d * (k - 1)
                    out.append((tot // 2, tot - tot // 2))
                return out
            raise UnsupportedOpError(f"padding={padding!r}")
        p = _pair(padding, nd)
        return [(x, x) for x in p]

    def _padded(self, x: Val, pads, fill: Expr, extra_hi=None, hint=None) -> Val:
        """A padded copy of x [N, C, *S] (spatial dims padded by ``pads``), or x itself."""
        nd = len(pads)
        extra_hi = extra_hi or [0] * nd
        if all(lo == 0 and hi + e == 0 for (lo, hi), e in zip(pads, extra_hi)):
            return x
        lead = x.ndim - nd
        shape = list(x.shape[:lead]) + [x.shape[lead + k] + lo + hi + e for k, ((lo, hi), e) in
                                        enumerate(zip(pads, extra_hi))]

        def fn(idx):
            cond = None
            sub = list(idx[:lead])
            for k, (lo, hi) in enumerate(pads):
                e = idx[lead + k]
                n = x.shape[lead + k]
                if lo or hi or extra_hi[k]:
                    cond = B.land(cond, B.chain(B.const(lo), e, B.const(lo + n)))
                sub.append(B.isub(e, B.const(lo)))
            return B.select(cond, x.at(sub), fill) if cond is not None else x.at(sub)

        name = self.b.assign(hint or f"{self.imp.hint}_pad", shape, fn, x.dtype)
        return TensorRef(name, shape, x.dtype)

    def _conv(self, nd, input, weight, bias, stride, padding, dilation, groups):
        x = input
        unbatched = x.ndim == nd + 1
        if unbatched:
            x = Vs.unsqueeze(x, 0)
        if x.ndim != nd + 2:
            raise ValueError(f"conv{nd}d expects a {nd + 2}-d input")
        n, c_in = x.shape[:2]
        c_out, cg = weight.shape[:2]
        ks = list(weight.shape[2:])
        st = _pair(stride, nd)
        dl = _pair(dilation, nd)
        pads = self._pads(padding, nd, ks, dl)
        g = int(groups)
        if c_in != cg * g or c_out % g:
            raise ValueError("channel counts do not match groups")
        og = c_out // g
        sp = list(x.shape[2:])
        out_sp = [(s + lo + hi - d * (k - 1) - 1) // t + 1 for s, (lo, hi), d, k, t in zip(sp, pads, dl, ks, st)]
        if any(o <= 0 for o in out_sp):
            raise ValueError("convolution output would be empty")
        xp = self._padded(x, pads, B.fconst(0.0))
        out_shape = [n, c_out] + out_sp
        red_shape = [cg] + ks

        def fn(o, r):
            cin = B.iadd(B.imul(B.ifloordiv(o[1], og), cg), r[0]) if g > 1 else r[0]
            xs = [o[0], cin] + [B.iadd(B.imul(o[2 + k], st[k]), B.imul(r[1 + k], dl[k])) for k in range(nd)]
            return B.mul(xp.at(xs), weight.at([o[1], r[0]] + list(r[1:])))

        dt = self.imp.out_dtype()
        name = self.b.reduce(self.imp.hint, out_shape, red_shape, fn, "+", dtype=dt)
        if bias is not None:
            self.b.update(name, out_shape, lambda idx, cur: B.add(cur, bias.at([idx[1]])), dt)
        res: Val = TensorRef(name, out_shape, dt)
        return Vs.squeeze(res, 0) if unbatched else res

    def f_conv1d(self, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return self._conv(1, input, weight, bias, stride, padding, dilation, groups)

    def f_conv2d(self, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return self._conv(2, input, weight, bias, stride, padding, dilation, groups)

    def f_conv3d(self, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return self._conv(3, input, weight, bias, stride, padding, dilation, groups)

    def _conv_t(self, nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
        x = input
        unbatched = x.ndim == nd + 1
        if unbatched:
            x = Vs.unsqueeze(x, 0)
        n, c_in = x.shape[:2]
        cg_in, og = weight.shape[:2]  # weight [C_in, C_out/groups, *k]
        g = int(groups)
        if cg_in != c_in:
            raise ValueError("conv_transpose weight does not match the input channels")
        cg = c_in // g
        c_out = og * g
        ks = list(weight.shape[2:])
        st = _pair(stride, nd)
        pd = _pair(padding, nd)
        opd = _pair(output_padding, nd)
        dl = _pair(dilation, nd)
        sp = list(x.shape[2:])
        out_sp = [(s - 1) * t - 2 * p + d * (k - 1) + op + 1 for s, t, p, d, k, op in zip(sp, st, pd, dl, ks, opd)]
        out_shape = [n, c_out] + out_sp
        red_shape = [cg] + ks

        def fn(o, r):
            cond = None
            xs = []
            for k in range(nd):
                t = B.isub(B.iadd(o[2 + k], B.const(pd[k])), B.imul(r[1 + k], dl[k]))
                if st[k] == 1:
                    cond = B.land(cond, B.chain(B.const(0), t, B.const(sp[k])))
                    xs.append(t)
                else:
                    q = B.ifloordiv(t, st[k])
                    cond = B.land(cond, B.cmp("==", B.imod(t, st[k]), B.const(0)))
                    cond = B.land(cond, B.chain(B.const(0), q, B.const(sp[k])))
                    xs.append(q)
            gi = B.ifloordiv(o[1], og) if g > 1 else B.const(0)
            cin = B.iadd(B.imul(gi, cg), r[0]) if g > 1 else r[0]
            oc = B.imod(o[1], og) if g > 1 else o[1]
            xv = x.at([o[0], cin] + xs)
            w = weight.at([cin, oc] + list(r[1:]))
            return B.mul(B.select(cond, xv, B.fconst(0.0)), w)

        dt = self.imp.out_dtype()
        name = self.b.reduce(self.imp.hint, out_shape, red_shape, fn, "+", dtype=dt)
        if bias is not None:
            self.b.update(name, out_shape, lambda idx, cur: B.add(cur, bias.at([idx[1]])), dt)
        res: Val = TensorRef(name, out_shape, dt)
        return Vs.squeeze(res, 0) if unbatched else res

    def f_conv_transpose1d(self, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return self._conv_t(1, input, weight, bias, stride, padding, output_padding, groups, dilation)

    def f_conv_transpose2d(self, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return self._conv_t(2, input, weight, bias, stride, padding, output_padding, groups, dilation)

    def f_conv_transpose3d(self, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return self._conv_t(3, input, weight, bias, stride, padding, output_padding, groups, dilation)

    # ------------------------------------------------------------------
    # pooling

    def _pool_out(self, s, k, st, p, d, ceil_mode):
        num = s + 2 * p - d * (k - 1) - 1
        if ceil_mode:
            o = -(-num // st) + 1
            if (o - 1) * st >= s + p:
                o -= 1
        else:
            o = num // st + 1
        return o

    def _max_pool(self, nd, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                  return_indices=False):
        if return_indices:
            raise UnsupportedOpError("max pooling with return_indices=True (argmax positions) is not supported")
        x = input
        ks = _pair(kernel_size, nd)
        st = _pair(stride if stride not in (None, []) else kernel_size, nd)
        pd = _pair(padding, nd)
        dl = _pair(dilation, nd)
        lead = x.ndim - nd
        sp = list(x.shape[lead:])
        out_sp = [self._pool_out(s, k, t, p, d, ceil_mode) for s, k, t, p, d in zip(sp, ks, st, pd, dl)]
        need = [(o - 1) * t + d * (k - 1) + 1 for o, t, d, k in zip(out_sp, st, dl, ks)]
        extra = [max(0, nn - (s + 2 * p)) for nn, s, p in zip(need, sp, pd)]
        xp = self._padded(x, [(p, p) for p in pd], B.NEG_INF, extra_hi=extra)
        out_shape = list(x.shape[:lead]) + out_sp

        def fn(o, r):
            return xp.at(list(o[:lead]) + [B.iadd(B.imul(o[lead + k], st[k]), B.imul(r[k], dl[k])) for k in range(nd)])

        name = self.b.reduce(self.imp.hint, out_shape, ks, fn, "max", dtype=x.dtype)
        return TensorRef(name, out_shape, x.dtype)

    def f_max_pool1d(self, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return self._max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    def f_max_pool2d(self, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return self._max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    def f_max_pool3d(self, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return self._max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    def _avg_pool(self, nd, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                  divisor_override=None):
        x = input
        ks = _pair(kernel_size, nd)
        st = _pair(stride if stride not in (None, []) else kernel_size, nd)
        pd = _pair(padding, nd)
        lead = x.ndim - nd
        sp = list(x.shape[lead:])
        out_sp = [self._pool_out(s, k, t, p, 1, ceil_mode) for s, k, t, p in zip(sp, ks, st, pd)]
        need = [(o - 1) * t + k for o, t, k in zip(out_sp, st, ks)]
        extra = [max(0, nn - (s + 2 * p)) for nn, s, p in zip(need, sp, pd)]
        if any(extra) and divisor_override is None:
            raise UnsupportedOpError("average pooling with ceil_mode windows past the padding is not supported")
        xp = self._padded(x, [(p, p) for p in pd], B.fconst(0.0), extra_hi=extra)
        out_shape = list(x.shape[:lead]) + out_sp
        h = self.imp.hint

        def fn(o, r):
            return xp.at(list(o[:lead]) + [B.iadd(B.imul(o[lead + k], st[k]), r[k]) for k in range(nd)])

        s = self.b.reduce(f"{h}_sum", out_shape, ks, fn, "+", dtype=x.dtype)
        sref = TensorRef(s, out_shape, x.dtype)
        if divisor_override:
            return self.scalar_div(sref, divisor_override)
        if count_include_pad or not any(pd):
            return self.scalar_div(sref, math.prod(ks))

        # count_include_pad=False: divide by the number of window elements inside the input
        def count(idx):
            e = None
            for k in range(nd):
                i = idx[lead + k]
                start = B.isub(B.imul(i, st[k]), B.const(pd[k]))
                hi = B.call("min", B.iadd(B.imul(i, st[k]), B.const(ks[k] - pd[k])), B.const(sp[k]))
                lo = B.call("max", start, B.const(0))
                c = B.sub(hi, lo)
                e = c if e is None else B.mul(e, c)
            return e

        name = self.b.assign(h, out_shape, lambda idx: B.div(sref.at(idx), B.call("f32", count(idx))), x.dtype)
        return TensorRef(name, out_shape, x.dtype)

    def f_avg_pool1d(self, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        return self._avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad)

    def f_avg_pool2d(self, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                     divisor_override=None):
        return self._avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

    def f_avg_pool3d(self, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                     divisor_override=None):
        return self._avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

    def _adaptive(self, nd, input, output_size, kind):
        x = input
        lead = x.ndim - nd
        sp = list(x.shape[lead:])
        osz = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size] * nd
        osz = [s if o is None else int(o) for o, s in zip(osz, sp)]
        if any(s % o for s, o in zip(sp, osz)):
            return self._adaptive_bins(nd, x, sp, osz, kind)
        ks = [s // o for s, o in zip(sp, osz)]
        if kind == "avg":
            return self._avg_pool(nd, x, ks, ks, 0)
        return self._max_pool(nd, x, ks, ks, 0)

    def _adaptive_bins(self, nd, x, sp, osz, kind):
        """Adaptive pooling with uneven bins: bin i of a dim covers
        [floor(i*S/O), ceil((i+1)*S/O)); loops run over the longest bin, guarded."""
        lead = x.ndim - nd
        kmax = [max(-(-((i + 1) * s) // o) - (i * s) // o for i in range(o)) for s, o in zip(sp, osz)]
        out_shape = list(x.shape[:lead]) + osz

        def start(i, s, o):
            return B.ifloordiv(B.imul(i, s), o)

        def end(i, s, o):
            return B.ifloordiv(B.iadd(B.imul(i, s), B.const(s + o - 1)), o)

        def fn(o_idx, r):
            cond = None
            sub = list(o_idx[:lead])
            for k in range(nd):
                i = o_idx[lead + k]
                e = B.iadd(start(i, sp[k], osz[k]), r[k])
                cond = B.land(cond, B.cmp("<", e, B.const(sp[k])))
                cond = B.land(cond, B.cmp("<", e, end(i, sp[k], osz[k])))
                sub.append(e)
            fill = B.fconst(0.0) if kind == "avg" else B.NEG_INF
            return B.select(cond, x.at(sub), fill)

        h = self.imp.hint
        if kind == "max":
            name = self.b.reduce(h, out_shape, kmax, fn, "max", dtype=x.dtype)
            return TensorRef(name, out_shape, x.dtype)
        s = self.b.reduce(f"{h}_sum", out_shape, kmax, fn, "+", dtype=x.dtype)
        sref = TensorRef(s, out_shape, x.dtype)

        def count(idx):
            e = None
            for k in range(nd):
                i = idx[lead + k]
                c = B.sub(end(i, sp[k], osz[k]), start(i, sp[k], osz[k]))
                e = c if e is None else B.mul(e, c)
            return e

        name = self.b.assign(h, out_shape, lambda idx: B.div(sref.at(idx), B.call("f32", count(idx))), x.dtype)
        return TensorRef(name, out_shape, x.dtype)

    def f_adaptive_avg_pool1d(self, input, output_size):
        return self._adaptive(1, input, output_size, "avg")

    def f_adaptive_avg_pool2d(self, input, output_size):
        return self._adaptive(2, input, output_size, "avg")

    def f_adaptive_avg_pool3d(self, input, output_size):
        return self._adaptive(3, input, output_size, "avg")

    def f_adaptive_max_pool1d(self, input, output_size, return_indices=False):
        if return_indices:
            raise UnsupportedOpError("adaptive max pooling with return_indices=True")
        return self._adaptive(1, input, output_size, "max")

    def f_adaptive_max_pool2d(self, input, output_size, return_indices=False):
        if return_indices:
            raise UnsupportedOpError("adaptive max pooling with return_indices=True")
        return self._adaptive(2, input, output_size, "max")

    def f_adaptive_max_pool3d(self, input, output_size, return_indices=False):
        if return_indices:
            raise UnsupportedOpError("adaptive max pooling with return_indices=True")
        return self._adaptive(3, input, output_size, "max")

    def f_pad(self, input, pad, mode="constant", value=None):
        if mode != "constant":
            raise UnsupportedOpError(f"F.pad mode={mode!r} (only 'constant')")
        pad = list(pad)
        nd = len(pad) // 2
        x = input
        lead = x.ndim - nd
        pads = []
        for k in range(nd):  # pad lists the last dim first
            lo, hi = pad[2 * (nd - 1 - k)], pad[2 * (nd - 1 - k) + 1]
            pads.append((lo, hi))
        if any(lo < 0 or hi < 0 for lo, hi in pads):
            raise UnsupportedOpError("negative padding (cropping) in F.pad")
        fill = Vs.scalar_expr(float(value or 0.0))
        shape = list(x.shape[:lead]) + [x.shape[lead + k] + lo + hi for k, (lo, hi) in enumerate(pads)]

        def fn(idx):
            cond = None
            sub = list(idx[:lead])
            for k, (lo, hi) in enumerate(pads):
                e = idx[lead + k]
                if lo or hi:
                    cond = B.land(cond, B.chain(B.const(lo), e, B.const(lo + x.shape[lead + k])))
                sub.append(B.isub(e, B.const(lo)))
            return B.select(cond, x.at(sub), fill) if cond is not None else x.at(sub)

        name = self.b.assign(self.imp.hint, shape, fn, x.dtype)
        return TensorRef(name, shape, x.dtype)

    # ------------------------------------------------------------------
    # concatenation

    def f_cat(self, tensors, dim=0):
        tensors = [t for t in tensors if not (isinstance(t, Val) and t.ndim == 1 and t.shape[0] == 0)]
        if len(tensors) == 1:
            return tensors[0]
        d = norm_dim(dim, tensors[0].ndim)
        sizes = [t.shape[d] for t in tensors]
        shape = list(tensors[0].shape)
        shape[d] = sum(sizes)
        dt = self.imp.out_dtype()

        def fn(idx):
            i = idx[d]
            offs = [0]
            for s in sizes:
                offs.append(offs[-1] + s)

            def piece(k):
                sub = list(idx)
                sub[d] = B.isub(i, B.const(offs[k]))
                return tensors[k].at(sub)

            e = piece(len(tensors) - 1)
            for k in range(len(tensors) - 2, -1, -1):
                e = B.select(B.cmp("<", i, B.const(offs[k + 1])), piece(k), e)
            return e

        name = self.b.assign(self.imp.hint, shape, fn, dt)
        return TensorRef(name, shape, dt)

    def f_stack(self, tensors, dim=0):
        d = norm_dim(dim, tensors[0].ndim + 1)
        return self.f_cat([Vs.unsqueeze(t, d) for t in tensors], d)

    def f_hstack(self, tensors):
        return self.f_cat(tensors, 0 if tensors[0].ndim == 1 else 1)

    def f_vstack(self, tensors):
        return self.f_cat([t if t.ndim > 1 else Vs.unsqueeze(t, 0) for t in tensors], 0)

    # ------------------------------------------------------------------
    # normalization

    def _moments(self, out_shape, red_shape, gather, eps, h, dtype="f32"):
        """Mean and 1/sqrt(var + eps) over ``red_shape`` for every ``out_shape`` index;
        ``gather(o, r)`` is the element. Two passes (mean, then squared deviations)."""
        n = math.prod(red_shape)
        s = self.b.reduce(f"{h}_sum", out_shape, red_shape, gather, "+", dtype=dtype)
        mean = self.b.assign(f"{h}_mean", out_shape, lambda o: B.div(A.Access(s, dtype, "g", tuple(o)),
                                                                      B.fconst(float(n))), dtype)
        mref = TensorRef(mean, out_shape, dtype)
        q = self.b.reduce(f"{h}_sq", out_shape, red_shape, lambda o, r: _sq(B.sub(gather(o, r), mref.at(o))), "+",
                          dtype=dtype)
        rstd = self.b.assign(f"{h}_rstd", out_shape, lambda o: B.call("rsqrt", B.add(
            B.div(A.Access(q, dtype, "g", tuple(o)), B.fconst(float(n))), B.fconst(float(eps)))), dtype)
        return mref, TensorRef(rstd, out_shape, dtype)

    def _affine_out(self, x, mean, rstd, stat_idx, w, b, w_idx):
        def fn(idx):
            si = stat_idx(idx)
            e = B.mul(B.sub(x.at(idx), mean.at(si)), rstd.at(si))
            if w is not None:
                e = B.mul(e, w.at(w_idx(idx)))
            if b is not None:
                e = B.add(e, b.at(w_idx(idx)))
            return e

        name = self.b.assign(self.imp.hint, x.shape, fn, x.dtype)
        return TensorRef(name, x.shape, x.dtype)

    def f_layer_norm(self, input, normalized_shape, weight=None, bias=None, eps=1e-5):
        x = input
        k = len(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else 1
        outer = list(x.shape[:-k])
        red = list(x.shape[-k:])
        no = len(outer)
        mean, rstd = self._moments(outer, red, lambda o, r: x.at(list(o) + list(r)), eps, self.imp.hint)
        return self._affine_out(x, mean, rstd, lambda idx: idx[:no], weight, bias, lambda idx: idx[no:])

    def f_group_norm(self, input, num_groups, weight=None, bias=None, eps=1e-5):
        x = input
        n, c = x.shape[:2]
        g = int(num_groups)
        cg = c // g
        sp = list(x.shape[2:])
        mean, rstd = self._moments([n, g], [cg] + sp, lambda o, r: x.at(
            [o[0], B.iadd(B.imul(o[1], cg), r[0])] + list(r[1:])), eps, self.imp.hint)
        return self._affine_out(x, mean, rstd, lambda idx: [idx[0], B.ifloordiv(idx[1], cg)], weight, bias,
                                lambda idx: [idx[1]])

    def f_instance_norm(self, input, running_mean=None, running_var=None, weight=None, bias=None,
                        use_input_stats=True, momentum=0.1, eps=1e-5):
        x = input
        if not use_input_stats:
            return self._norm_running(x, running_mean, running_var, weight, bias, eps)
        n, c = x.shape[:2]
        sp = list(x.shape[2:])
        mean, rstd = self._moments([n, c], sp, lambda o, r: x.at(list(o) + list(r)), eps, self.imp.hint)
        return self._affine_out(x, mean, rstd, lambda idx: idx[:2], weight, bias, lambda idx: [idx[1]])

    def f_batch_norm(self, input, running_mean, running_var, weight=None, bias=None, training=False,
                     momentum=0.1, eps=1e-5):
        x = input
        if not training and running_mean is not None:
            return self._norm_running(x, running_mean, running_var, weight, bias, eps)
        n, c = x.shape[:2]
        sp = list(x.shape[2:])
        mean, rstd = self._moments([c], [n] + sp, lambda o, r: x.at([r[0], o[0]] + list(r[1:])), eps, self.imp.hint)
        return self._affine_out(x, mean, rstd, lambda idx: [idx[1]], weight, bias, lambda idx: [idx[1]])

    def _norm_running(self, x, rm, rv, w, b, eps):
        c = x.shape[1]
        rstd = self.b.assign(f"{self.imp.hint}_rstd", [c], lambda o: B.call("rsqrt", B.add(rv.at(o), B.fconst(float(eps)))))
        return self._affine_out(x, rm, TensorRef(rstd, [c]), lambda idx: [idx[1]], w, b, lambda idx: [idx[1]])

    def f_rms_norm(self, input, normalized_shape, weight=None, eps=None):
        x = input
        if eps is None:
            eps = 1.1920928955078125e-07  # torch.finfo(torch.float32).eps
        k = len(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else 1
        outer = list(x.shape[:-k])
        red = list(x.shape[-k:])
        no = len(outer)
        n = math.prod(red)
        h = self.imp.hint
        s = self.b.reduce(f"{h}_sq", outer, red, lambda o, r: _sq(x.at(list(o) + list(r))), "+")
        r = self.b.assign(f"{h}_rstd", outer, lambda o: B.call("rsqrt", B.add(
            B.div(A.Access(s, "f32", "g", tuple(o)), B.fconst(float(n))), B.fconst(float(eps)))))
        rr = TensorRef(r, outer)

        def fn(idx):
            e = B.mul(x.at(idx), rr.at(idx[:no]))
            if weight is not None:
                e = B.mul(e, weight.at(idx[no:]))
            return e

        name = self.b.assign(h, x.shape, fn, x.dtype)
        return TensorRef(name, x.shape, x.dtype)

    def f_normalize(self, input, p=2.0, dim=1, eps=1e-12, out=None):
        x = input
        d = norm_dim(dim, x.ndim)
        if p in (2, 2.0):
            s = self.reduce(x, [d], True, "+", term=_sq, hint=f"{self.imp.hint}_sq")
            return self.ew([x, s], lambda a, q: B.div(a, B.call("max", B.call("sqrt", q), B.fconst(float(eps)))))
        if p in (1, 1.0):
            s = self.reduce(x, [d], True, "+", term=lambda e: B.call("abs", e), hint=f"{self.imp.hint}_l1")
            return self.ew([x, s], lambda a, q: B.div(a, B.call("max", q, B.fconst(float(eps)))))
        raise UnsupportedOpError(f"normalize with p={p}")

    # ------------------------------------------------------------------
    # attention

    def f_sdpa(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
               enable_gqa=False):
        if dropout_p:
            raise UnsupportedOpError("scaled_dot_product_attention with dropout_p > 0 is random")
        q, k, v = query, key, value
        batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        nb = len(batch)
        L, E = q.shape[-2:]
        S = k.shape[-2]
        Ev = v.shape[-1]
        sc = float(scale) if scale is not None else 1.0 / math.sqrt(E)
        h = self.imp.hint
        s_shape = tuple(batch) + (L, S)
        sname = self.b.reduce(f"{h}_qk", s_shape, [E], lambda o, r: B.mul(
            _batched(q, batch, o[:nb], [o[nb], r[0]]), _batched(k, batch, o[:nb], [o[nb + 1], r[0]])), "+")
        sref = TensorRef(sname, s_shape)

        def scaled(idx):
            e = B.mul(sref.at(idx), B.fconst(sc))
            i, j = idx[nb], idx[nb + 1]
            if attn_mask is not None:
                if attn_mask.dtype == "bool":
                    e = B.select(bcast_at(attn_mask, s_shape, idx), e, B.NEG_INF)
                else:
                    e = B.add(e, bcast_at(attn_mask, s_shape, idx))
            if is_causal:
                e = B.select(B.cmp("<=", j, i), e, B.NEG_INF)
            return e

        scn = self.b.assign(f"{h}_scores", s_shape, scaled)
        p = self._softmax(TensorRef(scn, s_shape), -1, False)
        o_shape = tuple(batch) + (L, Ev)
        name = self.b.reduce(h, o_shape, [S], lambda o, r: B.mul(
            p.at(list(o[:nb]) + [o[nb], r[0]]), _batched(v, batch, o[:nb], [r[0], o[nb + 1]])), "+")
        return TensorRef(name, o_shape)

    # ------------------------------------------------------------------
    # losses

    def _loss_reduce(self, elem: Val, reduction: str, batch: Optional[int] = None):
        if reduction == "none":
            return self.materialize(elem)
        s = self.reduce(elem, None, False, "+", hint=f"{self.imp.hint}_sum" if reduction != "sum" else None)
        if reduction == "sum":
            return s
        if reduction == "mean":
            return self.scalar_div(s, elem.numel)
        if reduction == "batchmean":
            return self.scalar_div(s, batch if batch is not None else 1)
        raise UnsupportedOpError(f"reduction={reduction!r}")

    @staticmethod
    def _legacy_reduction(size_average, reduce, reduction):
        if size_average is None and reduce is None:
            return reduction
        sa = True if size_average is None else size_average
        rd = True if reduce is None else reduce
        if not rd:
            return "none"
        return "mean" if sa else "sum"

    def _pointwise2(self, a, b, f):
        shape = broadcast_shapes(a.shape, b.shape)
        return ExprVal(shape, lambda idx: f(bcast_at(a, shape, idx), bcast_at(b, shape, idx)))

    def f_mse_loss(self, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
        red = self._legacy_reduction(size_average, reduce, reduction)
        return self._loss_reduce(self._pointwise2(input, target, lambda a, b: _sq(B.sub(a, b))), red)

    def f_l1_loss(self, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
        red = self._legacy_reduction(size_average, reduce, reduction)
        return self._loss_reduce(self._pointwise2(input, target, lambda a, b: B.call("abs", B.sub(a, b))), red)

    def f_smooth_l1_loss(self, input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
        red = self._legacy_reduction(size_average, reduce, reduction)
        bt = float(beta)

        def f(a, b):
            d = B.call("abs", B.sub(a, b))
            if bt == 0:
                return d
            return B.select(B.cmp("<", d, B.fconst(bt)), B.div(B.mul(B.fconst(0.5), B.mul(d, d)), B.fconst(bt)),
                            B.sub(d, B.fconst(0.5 * bt)))

        return self._loss_reduce(self._pointwise2(input, target, f), red)

    def f_huber_loss(self, input, target, reduction="mean", delta=1.0, weight=None):
        dl = float(delta)

        def f(a, b):
            d = B.call("abs", B.sub(a, b))
            return B.select(B.cmp("<", d, B.fconst(dl)), B.mul(B.fconst(0.5), B.mul(d, d)),
                            B.mul(B.fconst(dl), B.sub(d, B.fconst(0.5 * dl))))

        return self._loss_reduce(self._pointwise2(input, target, f), reduction)

    def f_kl_div(self, input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
        red = self._legacy_reduction(size_average, reduce, reduction)
        if log_target:
            f = lambda x, t: B.mul(B.call("exp", t), B.sub(t, x))  # noqa: E731
        else:
            f = lambda x, t: B.sub(B.select(B.cmp("==", t, B.fconst(0.0)), B.fconst(0.0),  # noqa: E731
                                            B.mul(t, B.call("log", t))), B.mul(t, x))
        elem = self._pointwise2(input, target, f)
        return self._loss_reduce(elem, red, batch=input.shape[0] if input.ndim else 1)

    def f_hinge_embedding_loss(self, input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        m = float(margin)

        def f(x, t):
            neg_part = B.select(B.cmp("!=", t, B.fconst(1.0)), B.call("max", B.sub(B.fconst(m), x), B.fconst(0.0)),
                                B.fconst(0.0))
            pos_part = B.select(B.cmp("!=", t, B.neg(B.fconst(1.0))), x, B.fconst(0.0))
            return B.add(neg_part, pos_part)

        return self._loss_reduce(self._pointwise2(input, target, f), red)

    def f_soft_margin_loss(self, input, target, size_average=None, reduce=None, reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        return self._loss_reduce(self._pointwise2(input, target, lambda x, t: B.call(
            "log", B.add(B.fconst(1.0), B.call("exp", B.neg(B.mul(t, x)))))), red)

    def f_binary_cross_entropy(self, input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)

        def f(x, t):
            lx = B.call("max", B.call("log", x), B.neg(B.fconst(100.0)))
            l1x = B.call("max", B.call("log", B.sub(B.fconst(1.0), x)), B.neg(B.fconst(100.0)))
            return B.neg(B.add(B.mul(t, lx), B.mul(B.sub(B.fconst(1.0), t), l1x)))

        elem = self._pointwise2(input, target, f)
        if weight is not None:
            e0 = elem
            elem = ExprVal(e0.shape, lambda idx: B.mul(e0.at(idx), bcast_at(weight, e0.shape, idx)))
        return self._loss_reduce(elem, red)

    def f_binary_cross_entropy_with_logits(self, input, target, weight=None, size_average=None, reduce=None,
                                           reduction="mean", pos_weight=None):
        if weight is not None or pos_weight is not None:
            raise UnsupportedOpError("binary_cross_entropy_with_logits with weights")
        red = self._legacy_reduction(size_average, reduce, reduction)

        def f(x, t):  # (1-t)*x + log(1+exp(-|x|)) + max(-x, 0)
            return B.add(B.add(B.mul(B.sub(B.fconst(1.0), t), x),
                               B.call("log", B.add(B.fconst(1.0), B.call("exp", B.neg(B.call("abs", x)))))),
                         B.call("max", B.neg(x), B.fconst(0.0)))

        return self._loss_reduce(self._pointwise2(input, target, f), red)

    def f_cross_entropy(self, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                        reduction="mean", label_smoothing=0.0):
        if weight is not None or label_smoothing:
            raise UnsupportedOpError("cross_entropy with class weights or label smoothing")
        if input.ndim != 2 or target.ndim != 1 or target.dtype not in A.INT_DTYPES:
            raise UnsupportedOpError("cross_entropy is supported for [N, C] logits and [N] class indices")
        red = self._legacy_reduction(size_average, reduce, reduction)
        n, c = input.shape
        h = self.imp.hint
        lsm = self._softmax(input, 1, True)
        ii = int(ignore_index)
        # picked[n] = sum_c [c == target[n]] * logp[n, c] (a one-hot contraction, no gather)
        picked = self.b.reduce(f"{h}_nll", [n], [c], lambda o, r: B.select(
            B.cmp("==", r[0], target.at([o[0]])), B.neg(lsm.at([o[0], r[0]])), B.fconst(0.0)), "+")
        pref = TensorRef(picked, [n])
        valid = lambda idx: B.cmp("!=", target.at(idx), B.const(ii))  # noqa: E731
        elem = ExprVal([n], lambda idx: B.select(valid(idx), pref.at(idx), B.fconst(0.0)))
        if red != "mean":
            return self._loss_reduce(elem, red)
        s = self.reduce(elem, None, False, "+", hint=f"{h}_sum")
        cnt = self.reduce(ExprVal([n], lambda idx: B.select(valid(idx), B.fconst(1.0), B.fconst(0.0))), None, False,
                          "+", hint=f"{h}_count")
        return self.ew([s, cnt], B.div, shape=())

    def f_cosine_similarity(self, x1, x2, dim=1, eps=1e-8):
        shape = broadcast_shapes(x1.shape, x2.shape)
        d = norm_dim(dim, len(shape))
        h = self.imp.hint
        a = ExprVal(shape, lambda idx: bcast_at(x1, shape, idx))
        b = ExprVal(shape, lambda idx: bcast_at(x2, shape, idx))
        dot = self.reduce(ExprVal(shape, lambda idx: B.mul(a.at(idx), b.at(idx))), [d], False, "+", hint=f"{h}_dot")
        n1 = self.reduce(a, [d], False, "+", term=_sq, hint=f"{h}_sq1")
        n2 = self.reduce(b, [d], False, "+", term=_sq, hint=f"{h}_sq2")
        e = B.fconst(float(eps))
        return self.ew([dot, n1, n2], lambda p, q, r: B.div(p, B.mul(B.call("max", B.call("sqrt", q), e),
                                                                     B.call("max", B.call("sqrt", r), e))),
                       shape=dot.shape)

    def f_pairwise_distance(self, x1, x2, p=2.0, eps=1e-6, keepdim=False):
        shape = broadcast_shapes(x1.shape, x2.shape)
        diff = ExprVal(shape, lambda idx: B.add(B.sub(bcast_at(x1, shape, idx), bcast_at(x2, shape, idx)),
                                               B.fconst(float(eps))))
        return self._pnorm_lastdim(diff, p, keepdim)

    def _pnorm_lastdim(self, diff: Val, p, keepdim):
        h = self.imp.hint
        d = diff.ndim - 1
        if p in (2, 2.0):
            s = self.reduce(diff, [d], keepdim, "+", term=_sq, hint=f"{h}_sq")
            return self.ew([s], lambda e: B.call("sqrt", e), shape=s.shape, hint=h)
        if p in (1, 1.0):
            return self.reduce(diff, [d], keepdim, "+", term=lambda e: B.call("abs", e), hint=h)
        if isinstance(p, (int, float)) and p > 0:
            s = self.reduce(diff, [d], keepdim, "+", term=lambda e: B.binop("**", B.call("abs", e), B.fconst(float(p))),
                            hint=f"{h}_pow")
            return self.ew([s], lambda e: B.binop("**", e, B.fconst(1.0 / p)), shape=s.shape, hint=h)
        raise UnsupportedOpError(f"p-norm distance with p={p}")

    def f_triplet_margin_loss(self, anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                              size_average=None, reduce=None, reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        h = self.imp.hint
        dap = self.f_pairwise_distance(anchor, positive, p, eps)
        dan = self.f_pairwise_distance(anchor, negative, p, eps)
        if swap:
            dpn = self.f_pairwise_distance(positive, negative, p, eps)
            dan = self.ew([dan, dpn], lambda a, b: B.call("min", a, b), shape=dan.shape, hint=f"{h}_dneg")
        m = float(margin)
        elem = ExprVal(dap.shape, lambda idx: B.call("max", B.add(B.sub(dap.at(idx), dan.at(idx)), B.fconst(m)),
                                                     B.fconst(0.0)))
        return self._loss_reduce(elem, red)

    def f_cosine_embedding_loss(self, input1, input2, target, margin=0.0, size_average=None, reduce=None,
                                reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        h = self.imp.hint
        d = input1.ndim - 1
        dot = self.reduce(ExprVal(input1.shape, lambda idx: B.mul(input1.at(idx), input2.at(idx))), [d], False, "+",
                          hint=f"{h}_dot")
        m1 = self.reduce(input1, [d], False, "+", term=_sq, hint=f"{h}_sq1")
        m2 = self.reduce(input2, [d], False, "+", term=_sq, hint=f"{h}_sq2")
        epsv = B.fconst(1e-12)
        cos = self.ew([dot, m1, m2], lambda p, a, b: B.div(p, B.call("sqrt", B.mul(B.add(a, epsv), B.add(b, epsv)))),
                      shape=dot.shape, hint=f"{h}_cos")
        mg = float(margin)

        def f(c, t):
            pos = B.select(B.cmp("==", t, B.fconst(1.0)), B.sub(B.fconst(1.0), c), B.fconst(0.0))
            neg = B.select(B.cmp("==", t, B.neg(B.fconst(1.0))), B.call("max", B.sub(c, B.fconst(mg)), B.fconst(0.0)),
                           B.fconst(0.0))
            return B.add(pos, neg)

        return self._loss_reduce(self._pointwise2(cos, target, f), red)

    def f_margin_ranking_loss(self, input1, input2, target, margin=0.0, size_average=None, reduce=None,
                              reduction="mean"):
        red = self._legacy_reduction(size_average, reduce, reduction)
        shape = broadcast_shapes(input1.shape, input2.shape, target.shape)
        elem = ExprVal(shape, lambda idx: B.call("max", B.add(B.mul(B.neg(bcast_at(target, shape, idx)), B.sub(
            bcast_at(input1, shape, idx), bcast_at(input2, shape, idx))), B.fconst(float(margin))), B.fconst(0.0)))
        return self._loss_reduce(elem, red)

    # ------------------------------------------------------------------
    # modules

    def _p(self, q: str, mod, attr: str):
        t = getattr(mod, attr, None)
        if t is None:
            return None
        return self.imp.param(f"{q}.{attr}" if q else attr, t)

    def m_Linear(self, q, m, x):
        return self.f_linear(x, self._p(q, m, "weight"), self._p(q, m, "bias"))

    def m_Bilinear(self, q, m, x1, x2):
        return self.f_bilinear(x1, x2, self._p(q, m, "weight"), self._p(q, m, "bias"))

    def m_Identity(self, q, m, x, *a, **k):
        return x

    def _conv_mod(self, nd, q, m, x):
        if m.padding_mode != "zeros":
            raise UnsupportedOpError(f"convolution padding_mode={m.padding_mode!r} (only 'zeros')")
        return self._conv(nd, x, self._p(q, m, "weight"), self._p(q, m, "bias"), m.stride, m.padding, m.dilation,
                          m.groups)

    def m_Conv1d(self, q, m, x):
        return self._conv_mod(1, q, m, x)

    def m_Conv2d(self, q, m, x):
        return self._conv_mod(2, q, m, x)

    def m_Conv3d(self, q, m, x):
        return self._conv_mod(3, q, m, x)

    def _convt_mod(self, nd, q, m, x, output_size=None):
        if output_size is not None:
            raise UnsupportedOpError("ConvTranspose with output_size")
        if m.padding_mode != "zeros":
            raise UnsupportedOpError(f"padding_mode={m.padding_mode!r}")
        return self._conv_t(nd, x, self._p(q, m, "weight"), self._p(q, m, "bias"), m.stride, m.padding,
                            m.output_padding, m.groups, m.dilation)

    def m_ConvTranspose1d(self, q, m, x, output_size=None):
        return self._convt_mod(1, q, m, x, output_size)

    def m_ConvTranspose2d(self, q, m, x, output_size=None):
        return self._convt_mod(2, q, m, x, output_size)

    def m_ConvTranspose3d(self, q, m, x, output_size=None):
        return self._convt_mod(3, q, m, x, output_size)

    def _maxpool_mod(self, nd, m, x):
        return self._max_pool(nd, x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode, m.return_indices)

    def m_MaxPool1d(self, q, m, x):
        return self._maxpool_mod(1, m, x)

    def m_MaxPool2d(self, q, m, x):
        return self._maxpool_mod(2, m, x)

    def m_MaxPool3d(self, q, m, x):
        return self._maxpool_mod(3, m, x)

    def m_AvgPool1d(self, q, m, x):
        return self._avg_pool(1, x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad)

    def m_AvgPool2d(self, q, m, x):
        return self._avg_pool(2, x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad,
                              m.divisor_override)

    def m_AvgPool3d(self, q, m, x):
        return self._avg_pool(3, x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad,
                              m.divisor_override)

    def m_AdaptiveAvgPool1d(self, q, m, x):
        return self._adaptive(1, x, m.output_size, "avg")

    def m_AdaptiveAvgPool2d(self, q, m, x):
        return self._adaptive(2, x, m.output_size, "avg")

    def m_AdaptiveAvgPool3d(self, q, m, x):
        return self._adaptive(3, x, m.output_size, "avg")

    def m_AdaptiveMaxPool1d(self, q, m, x):
        return self.f_adaptive_max_pool1d(x, m.output_size, m.return_indices)

    def m_AdaptiveMaxPool2d(self, q, m, x):
        return self.f_adaptive_max_pool2d(x, m.output_size, m.return_indices)

    def m_AdaptiveMaxPool3d(self, q, m, x):
        return self.f_adaptive_max_pool3d(x, m.output_size, m.return_indices)

    def _bn_mod(self, q, m, x):
        use_batch = m.training or not m.track_running_stats or m.running_mean is None
        w = self._p(q, m, "weight") if m.affine else None
        b = self._p(q, m, "bias") if m.affine else None
        if use_batch:
            return self.f_batch_norm(x, None, None, w, b, True, m.momentum, m.eps)
        return self.f_batch_norm(x, self._p(q, m, "running_mean"), self._p(q, m, "running_var"), w, b, False,
                                 m.momentum, m.eps)

    m_BatchNorm1d = m_BatchNorm2d = m_BatchNorm3d = _bn_mod

    def _in_mod(self, q, m, x):
        w = self._p(q, m, "weight") if m.affine else None
        b = self._p(q, m, "bias") if m.affine else None
        use_input = m.training or not m.track_running_stats
        if use_input:
            return self.f_instance_norm(x, None, None, w, b, True, m.momentum, m.eps)
        return self.f_instance_norm(x, self._p(q, m, "running_mean"), self._p(q, m, "running_var"), w, b, False,
                                    m.momentum, m.eps)

    m_InstanceNorm1d = m_InstanceNorm2d = m_InstanceNorm3d = _in_mod

    def m_LayerNorm(self, q, m, x):
        return self.f_layer_norm(x, m.normalized_shape, self._p(q, m, "weight"), self._p(q, m, "bias"), m.eps)

    def m_GroupNorm(self, q, m, x):
        return self.f_group_norm(x, m.num_groups, self._p(q, m, "weight"), self._p(q, m, "bias"), m.eps)

    def m_RMSNorm(self, q, m, x):
        return self.f_rms_norm(x, m.normalized_shape, self._p(q, m, "weight"), m.eps)

    def m_LocalResponseNorm(self, q, m, x):
        raise UnsupportedOpError("LocalResponseNorm is not supported")

    # activations
    def m_ReLU(self, q, m, x):
        return self.f_relu(x)

    def m_LeakyReLU(self, q, m, x):
        return self.f_leaky_relu(x, m.negative_slope)

    def m_GELU(self, q, m, x):
        return self.f_gelu(x, m.approximate)

    def m_Sigmoid(self, q, m, x):
        return self.unary(x, UNARY["sigmoid"])

    def m_Tanh(self, q, m, x):
        return self.unary(x, UNARY["tanh"])

    def m_SiLU(self, q, m, x):
        return self.f_silu(x)

    def m_Mish(self, q, m, x):
        return self.f_mish(x)

    def m_Hardswish(self, q, m, x):
        return self.f_hardswish(x)

    def m_Hardsigmoid(self, q, m, x):
        return self.f_hardsigmoid(x)

    def m_Hardtanh(self, q, m, x):
        return self.f_hardtanh(x, m.min_val, m.max_val)

    def m_ReLU6(self, q, m, x):
        return self.f_relu6(x)

    def m_ELU(self, q, m, x):
        return self.f_elu(x, m.alpha)

    def m_CELU(self, q, m, x):
        return self.f_celu(x, m.alpha)

    def m_SELU(self, q, m, x):
        return self.f_selu(x)

    def m_Softplus(self, q, m, x):
        return self.f_softplus(x, m.beta, m.threshold)

    def m_Softsign(self, q, m, x):
        return self.f_softsign(x)

    def m_Tanhshrink(self, q, m, x):
        return self.unary(x, UNARY["tanhshrink"])

    def m_Softshrink(self, q, m, x):
        return self.f_softshrink(x, m.lambd)

    def m_Hardshrink(self, q, m, x):
        return self.f_hardshrink(x, m.lambd)

    def m_LogSigmoid(self, q, m, x):
        return self.unary(x, UNARY["logsigmoid"])

    def m_Threshold(self, q, m, x):
        return self.f_threshold(x, m.threshold, m.value)

    def m_PReLU(self, q, m, x):
        return self.f_prelu(x, self._p(q, m, "weight"))

    def m_Softmax(self, q, m, x):
        return self._softmax(x, m.dim, False)

    def m_LogSoftmax(self, q, m, x):
        return self._softmax(x, m.dim, True)

    def m_Softmin(self, q, m, x):
        return self._softmax(x, m.dim, False, neg=True)

    def m_Flatten(self, q, m, x):
        return Vs.flatten(x, m.start_dim, m.end_dim)

    def m_Unflatten(self, q, m, x):
        return self.f_unflatten(x, m.dim, m.unflattened_size)

    def _dropout_mod(self, q, m, x):
        return self.f_dropout(x, m.p, m.training)

    m_Dropout = m_Dropout1d = m_Dropout2d = m_Dropout3d = m_AlphaDropout = _dropout_mod

    def m_ZeroPad2d(self, q, m, x):
        return self.f_pad(x, m.padding, "constant", 0.0)

    def m_ConstantPad1d(self, q, m, x):
        return self.f_pad(x, m.padding, "constant", m.value)

    m_ConstantPad2d = m_ConstantPad3d = m_ConstantPad1d

    # losses
    def m_MSELoss(self, q, m, a, b):
        return self.f_mse_loss(a, b, reduction=m.reduction)

    def m_L1Loss(self, q, m, a, b):
        return self.f_l1_loss(a, b, reduction=m.reduction)

    def m_SmoothL1Loss(self, q, m, a, b):
        return self.f_smooth_l1_loss(a, b, reduction=m.reduction, beta=m.beta)

    def m_HuberLoss(self, q, m, a, b):
        return self.f_huber_loss(a, b, reduction=m.reduction, delta=m.delta)

    def m_KLDivLoss(self, q, m, a, b):
        return self.f_kl_div(a, b, reduction=m.reduction, log_target=m.log_target)

    def m_HingeEmbeddingLoss(self, q, m, a, b):
        return self.f_hinge_embedding_loss(a, b, margin=m.margin, reduction=m.reduction)

    def m_CosineEmbeddingLoss(self, q, m, a, b, t):
        return self.f_cosine_embedding_loss(a, b, t, margin=m.margin, reduction=m.reduction)

    def m_TripletMarginLoss(self, q, m, a, p, n):
        return self.f_triplet_margin_loss(a, p, n, margin=m.margin, p=m.p, eps=m.eps, swap=m.swap,
                                          reduction=m.reduction)

    def m_MarginRankingLoss(self, q, m, a, b, t):
        return self.f_margin_ranking_loss(a, b, t, margin=m.margin, reduction=m.reduction)

    def m_SoftMarginLoss(self, q, m, a, b):
        return self.f_soft_margin_loss(a, b, reduction=m.reduction)

    def m_BCELoss(self, q, m, a, b):
        w = self._p(q, m, "weight")
        return self.f_binary_cross_entropy(a, b, w, reduction=m.reduction)

    def m_BCEWithLogitsLoss(self, q, m, a, b):
        return self.f_binary_cross_entropy_with_logits(a, b, reduction=m.reduction)

    def m_CrossEntropyLoss(self, q, m, a, b):
        if getattr(m, "weight", None) is not None:
            raise UnsupportedOpError("CrossEntropyLoss with class weights")
        return self.f_cross_entropy(a, b, ignore_index=m.ignore_index, reduction=m.reduction,
                                    label_smoothing=m.label_smoothing)

    def m_CosineSimilarity(self, q, m, a, b):
        return self.f_cosine_similarity(a, b, m.dim, m.eps)

    def m_PairwiseDistance(self, q, m, a, b):
        return self.f_pairwise_distance(a, b, m.norm, m.eps, m.keepdim)


# ---------------------------------------------------------------------------
# small helpers


def _sq(e: Expr) -> Expr:
    return B.binop("**", e, B.const(2))


def _num(v):
    return v


def _cond(e: Expr, v) -> Expr:
    """A condition from a mask value: bool tensors are conditions; numbers compare != 0."""
    if isinstance(v, Val) and v.dtype == "bool":
        return e
    return B.cmp("!=", e, B.const(0))


def _batched(v: Val, batch, bidx, tail: list) -> Expr:
    """Element of v (shape vb + tail dims) with its batch dims broadcast to ``batch``."""
    nt = len(tail)
    vb = v.shape[: v.ndim - nt]
    off = len(batch) - len(vb)
    sub = [B.const(0) if s == 1 else bidx[off + j] for j, s in enumerate(vb)]
    return v.at(sub + list(tail))


def _size(shape):
    import torch

    return torch.Size(shape)


def _contains_val(x) -> bool:
    if isinstance(x, Val):
        return True
    if isinstance(x, (list, tuple)):
        return any(_contains_val(y) for y in x)
    if isinstance(x, dict):
        return any(_contains_val(y) for y in x.values())
    return False


def _pretty(target) -> str:
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", str(target))
    if mod in ("_operator", "operator"):
        return f"operator.{name}"
    if mod.startswith("torch.nn.functional") or mod == "torch._C._nn":
        return f"torch.nn.functional.{name}"
    if mod.startswith("torch") or not mod:
        return f"torch.{name}"
    return f"{mod}.{name}"
