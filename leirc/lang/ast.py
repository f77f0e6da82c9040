"""Typed, immutable LEIR syntax tree.

Every node is a frozen dataclass with a ``span`` that is excluded from equality and
hashing, so two trees that print the same compare equal wherever they came from.
Rewrites build new trees with :func:`dataclasses.replace`; nothing mutates in place.

Loop nests are represented as nested :class:`Loop` nodes: the Step-TP chain
``L^{4}_{i=0}L^{8}_{j=0}[S;];`` and the bracketed ``L^{4}_{i=0}[L^{8}_{j=0}[S;];];``
are the same program and parse to the same tree; the printer emits the chain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Iterator, Union


@dataclass(frozen=True, slots=True)
class Span:
    """A source range. Lines and columns are 1-based; ``end_col`` is exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int
    start: int = 0  # character offsets into the source text
    end: int = 0

    def __str__(self) -> str:  # pragma: no cover - debugging aid
        return f"{self.line}:{self.col}-{self.end_line}:{self.end_col}"


def _span() -> Span | None:
    return field(default=None, compare=False, hash=False, repr=False)


# ---------------------------------------------------------------------------
# dtypes, scopes, loop kinds

#: dtype spellings accepted in superscripts and signatures (Step-TP's list). Only the
#: numeric subset below is given semantics by the checker.
DTYPES = (
    "f16", "bf16", "f32", "f64",
    "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool",
)
FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")
INT_DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
#: spelled by the reference emitter but without a semantics in leirc (diagnosed).
UNSUPPORTED_DTYPES = (
    "c64", "c128", "f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "u4", "i4", "str", "undef",
)
SCOPES = ("g", "s", "l")
SCOPE_NAMES = {"g": "global", "s": "shared", "l": "local"}
LOOP_KINDS = ("L", "P", "V", "U", "B")
LOOP_KIND_NAMES = {"L": "serial", "P": "parallel", "V": "vectorized", "U": "unrolled", "B": "bound"}

#: torch dtype names (as in compat records) -> LEIR dtype
TORCH_DTYPES = {
    "torch.float32": "f32", "torch.float": "f32", "torch.float64": "f64", "torch.double": "f64",
    "torch.float16": "f16", "torch.half": "f16", "torch.bfloat16": "bf16",
    "torch.int64": "i64", "torch.long": "i64", "torch.int32": "i32", "torch.int": "i32",
    "torch.int16": "i16", "torch.int8": "i8", "torch.uint8": "u8", "torch.bool": "bool",
}


# ---------------------------------------------------------------------------
# expressions


@dataclass(frozen=True, slots=True)
class Const:
    """A numeric literal. ``value`` is an ``int`` for integer literals and a ``float``
    otherwise (``inf`` is ``math.inf``). Literals are never negative: ``-1`` is
    ``Neg(Const(1))``."""

    value: Union[int, float]
    span: Span | None = _span()

    @property
    def is_int(self) -> bool:
        return isinstance(self.value, int) and not isinstance(self.value, bool)


@dataclass(frozen=True, slots=True)
class Var:
    """A bare name used as a value: a loop index (``a``, ``tx``)."""

    name: str
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Access:
    """``Name^{dtype,scope}_{i,j}``; scalars have no indices."""

    name: str
    dtype: str
    scope: str
    indices: tuple["Expr", ...] = ()
    span: Span | None = _span()


#: binary operators, by printer/parser precedence level (higher binds tighter)
BINOP_PRECEDENCE = {
    "|": 1,
    "&": 2,
    # comparisons are level 3 (see Compare)
    "+": 4, "-": 4,
    "*": 5, "/": 5, "//": 5, "%": 5,
    "**": 7,
}
COMPARE_PRECEDENCE = 3
UNARY_PRECEDENCE = 6
ATOM_PRECEDENCE = 8
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str
    lhs: "Expr"
    rhs: "Expr"
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Neg:
    operand: "Expr"
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Compare:
    """A comparison chain ``a < b <= c`` (meaning ``a < b & b <= c``); one op for a
    plain comparison. Kept as a chain so the printer can reproduce it."""

    ops: tuple[str, ...]
    operands: tuple["Expr", ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Call:
    """An intrinsic call such as ``exp(x)``, ``max(a,b)``, ``if_then_else(c,a,b)`` or a
    cast ``f32(x)``."""

    func: str
    args: tuple["Expr", ...]
    span: Span | None = _span()


Expr = Union[Const, Var, Access, BinOp, Neg, Compare, Call]

#: intrinsic name -> (min args, max args or None)
INTRINSICS: dict[str, tuple[int, int | None]] = {
    "exp": (1, 1), "log": (1, 1), "sqrt": (1, 1), "rsqrt": (1, 1), "abs": (1, 1),
    "erf": (1, 1), "tanh": (1, 1), "sigmoid": (1, 1), "floor": (1, 1), "ceil": (1, 1),
    "pow": (2, 2), "max": (2, None), "min": (2, None), "if_then_else": (3, 3),
}
#: accepted spellings normalized by the parser
INTRINSIC_ALIASES = {"ifthenelse": "if_then_else", "ln": "log", "select": "if_then_else"}
CAST_FUNCS = DTYPES


# ---------------------------------------------------------------------------
# statements and structure


@dataclass(frozen=True, slots=True)
class Assign:
    """``target = value``."""

    target: Access
    value: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Align:
    """``NAME=align(axis,factor,offset)`` (Step-TP ``set_storage_align``)."""

    name: str
    axis: int
    factor: int
    offset: int
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Loop:
    """``K^{extent}_{var=start}`` around ``body``; iterates var = start .. start+extent-1."""

    kind: str
    extent: int
    var: str
    start: int
    body: tuple["Item", ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Region:
    """``[^{tag} ... ]^{tag};`` (Step-TP pipeline/double-buffer annotations)."""

    tag: str
    body: tuple["Item", ...]
    span: Span | None = _span()


Stmt = Union[Assign, Align]
Item = Union[Assign, Align, Loop, Region]


@dataclass(frozen=True, slots=True)
class Param:
    """A kernel input or output: ``A: f32[16,16384]`` (``f32[]`` or ``f32`` for scalars)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Kernel:
    name: str
    inputs: tuple[Param, ...]
    outputs: tuple[Param, ...]
    body: tuple[Item, ...]
    #: False for a bare Step-TP body whose signature came from outside the text
    declared: bool = True
    span: Span | None = _span()

    def param(self, name: str) -> Param | None:
        for p in self.inputs + self.outputs:
            if p.name == name:
                return p
        return None


@dataclass(frozen=True, slots=True)
class Module:
    kernels: tuple[Kernel, ...]
    span: Span | None = _span()

    def kernel(self, name: str | None = None) -> Kernel:
        if name is None:
            if len(self.kernels) != 1:
                raise KeyError(f"module has {len(self.kernels)} kernels; name one")
            return self.kernels[0]
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


Node = Union[Expr, Item, Param, Kernel, Module]


# ---------------------------------------------------------------------------
# generic traversal


def children(node) -> Iterator:
    """Direct child nodes of ``node`` in source order."""
    for f in fields(node):
        if f.name == "span":
            continue
        v = getattr(node, f.name)
        if isinstance(v, tuple):
            for x in v:
                if _is_node(x):
                    yield x
        elif _is_node(v):
            yield v


def _is_node(x) -> bool:
    return hasattr(x, "__dataclass_fields__") and not isinstance(x, Span)


def walk(node) -> Iterator:
    """Pre-order traversal of ``node`` and all its descendants (iterative, so deep
    expressions do not hit the recursion limit)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(children(n))))


def strip_spans(node):
    """A copy of ``node`` with every span removed (useful for golden dumps)."""
    if not _is_node(node):
        return node
    kw = {}
    for f in fields(node):
        v = getattr(node, f.name)
        if f.name == "span":
            kw[f.name] = None
        elif isinstance(v, tuple):
            kw[f.name] = tuple(strip_spans(x) for x in v)
        else:
            kw[f.name] = strip_spans(v)
    return replace(node, **kw)


def is_inf(e: Expr) -> bool:
    return isinstance(e, Const) and isinstance(e.value, float) and math.isinf(e.value)
