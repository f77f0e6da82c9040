"""Vocabulary shared by the operator families: unary/binary element-wise tables, aliases,
dtype names and small expression helpers."""

from __future__ import annotations

import math
from typing import Callable, Sequence

from ...lang import ast as A
from .. import builder as B
from ..errors import UnsupportedOpError
from ..values import Val

Expr = A.Expr


def leir_dtype(torch_dtype) -> str:
    """The LEIR dtype of a torch dtype (``torch.float32`` -> ``f32``)."""
    s = str(torch_dtype)
    if s not in A.TORCH_DTYPES:
        raise UnsupportedOpError(f"tensors of dtype {s} are not supported")
    return A.TORCH_DTYPES[s]


Expr = A.Expr

#: PyTorch's CPU "opmath" type: half-precision operands are accumulated in f32, and the
#: result is rounded to the operator's dtype once, where the node's value is used
_ACCUMULATOR = {"f16": "f32", "bf16": "f32"}


def accumulator_dtype(dtype: str) -> str:
    """The dtype a reduction over ``dtype`` values is accumulated in (f16/bf16 -> f32;
    f32, f64 and integers accumulate in their own dtype)."""
    return _ACCUMULATOR.get(dtype, dtype)


def stats_dtype(*operands) -> str:
    """The float dtype of the intermediate statistics of a composite operator (mean, variance,
    softmax sums, norms, losses) over ``operands`` (values or dtype names): f64 when any
    operand is f64, else f32 -- so an f64 model never loses precision in an f32 accumulator,
    and f16/bf16 ones accumulate in f32 like PyTorch."""
    dts = [o.dtype if isinstance(o, Val) else o for o in operands]
    return "f64" if "f64" in dts else "f32"


SQRT1_2 = 0.7071067811865476
GELU_TANH_K = 0.7978845608028654  # sqrt(2/pi)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

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

def relu_expr(e):
    return B.call("max", e, B.fconst(0.0))


UNARY: dict[str, Callable[[Expr], Expr]] = {
    "relu": relu_expr,
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
    "selu": lambda e: B.mul(B.fconst(SELU_SCALE), B.select(
        B.cmp(">", e, B.fconst(0.0)), e, B.mul(B.fconst(SELU_ALPHA), B.sub(B.call("exp", e), B.fconst(1.0))))),
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

TORCH_OF_LEIR = {
    "f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i64": "int64",
    "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "bool": "bool",
}


def pair_arg(v, n: int) -> list[int]:
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return [int(v[0])] * n
        if len(v) != n:
            raise ValueError(f"expected {n} values, got {list(v)}")
        return [int(x) for x in v]
    return [int(v)] * n


def drop_dims(idx: Sequence[Expr], dims: Sequence[int]) -> list[Expr]:
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





# ---------------------------------------------------------------------------


def square_expr(e: Expr) -> Expr:
    return B.binop("**", e, B.const(2))


def as_number(v):
    return v


def mask_condition(e: Expr, v) -> Expr:
    """A condition from a mask value: bool tensors are conditions; numbers compare != 0."""
    if isinstance(v, Val) and v.dtype == "bool":
        return e
    return B.cmp("!=", e, B.const(0))


def batched_at(v: Val, batch, bidx, tail: list) -> Expr:
    """Element of v (shape vb + tail dims) with its batch dims broadcast to ``batch``."""
    nt = len(tail)
    vb = v.shape[: v.ndim - nt]
    off = len(batch) - len(vb)
    sub = [B.const(0) if s == 1 else bidx[off + j] for j, s in enumerate(vb)]
    return v.at(sub + list(tail))


def torch_size(shape):
    import torch

    return torch.Size(shape)


def contains_val(x) -> bool:
    if isinstance(x, Val):
        return True
    if isinstance(x, (list, tuple)):
        return any(contains_val(y) for y in x)
    if isinstance(x, dict):
        return any(contains_val(y) for y in x.values())
    return False


def pretty_target(target) -> str:
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", str(target))
    if mod in ("_operator", "operator"):
        return f"operator.{name}"
    if mod.startswith("torch.nn.functional") or mod == "torch._C._nn":
        return f"torch.nn.functional.{name}"
    if mod.startswith("torch") or not mod:
        return f"torch.{name}"
    return f"{mod}.{name}"
