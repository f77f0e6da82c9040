"""Expression types and promotion (documented in docs/language.md, "Types").

Literals and loop indices are *weak*: ``int_lit`` / ``float_lit`` adopt the type of the
strong operand they meet (``0.5*x`` with x: f32 is f32). The checker, interpreter and
lowering all use these functions so that they agree on every intermediate type.
"""

from __future__ import annotations

from typing import Optional

from . import ast as A

WEAK = ("int_lit", "float_lit")


def is_float(t: str) -> bool:
    return t in A.FLOAT_DTYPES or t == "float_lit"


def is_int(t: str) -> bool:
    return t in A.INT_DTYPES or t == "int_lit"


def promote(a: str, b: str) -> str:
    """Result type of an arithmetic operation on operands of types a and b."""
    if a == b:
        return a
    if a in WEAK and b in WEAK:
        return "float_lit" if "float_lit" in (a, b) else "int_lit"
    if a in WEAK:
        a, b = b, a
    if b == "int_lit":
        return a if a != "bool" else "i64"
    if b == "float_lit":
        return a if is_float(a) else "f32"
    if is_float(a) and is_float(b):
        if {a, b} == {"f16", "bf16"}:
            return "f32"
        order = ["f16", "bf16", "f32", "f64"]
        return max(a, b, key=order.index)
    if is_float(a):
        return a
    if is_float(b):
        return b
    if a == "bool":
        return b
    if b == "bool":
        return a
    bits = lambda t: int(t[1:])  # noqa: E731
    if a[0] == b[0]:
        return a if bits(a) >= bits(b) else b
    return "i64"


def float_result(t: str) -> str:
    """Type of a transcendental function or true division applied to type t."""
    if is_float(t):
        return t
    return "float_lit" if t == "int_lit" else "f32"


def expr_type(e: A.Expr) -> Optional[str]:
    """Type of ``e`` (weak types possible); None only for malformed trees."""
    if isinstance(e, A.Const):
        return "int_lit" if e.is_int else "float_lit"
    if isinstance(e, A.Var):
        return "int_lit"
    if isinstance(e, A.Access):
        return e.dtype
    if isinstance(e, A.Neg):
        return expr_type(e.operand)
    if isinstance(e, A.Compare):
        return "bool"
    if isinstance(e, A.BinOp):
        if e.op in ("&", "|"):
            return "bool"
        lt, rt = expr_type(e.lhs), expr_type(e.rhs)
        if lt is None or rt is None:
            return None
        t = promote(lt, rt)
        if e.op in ("/", "**"):
            return float_result(t) if e.op == "/" else (t if is_float(t) else ("float_lit" if t == "int_lit" else t))
        return t
    if isinstance(e, A.Call):
        if e.func in A.CAST_FUNCS:
            return e.func
        ts = [expr_type(a) for a in e.args]
        if e.func == "if_then_else":
            ts = ts[1:]
        if any(t is None for t in ts):
            return None
        t = ts[0]
        for u in ts[1:]:
            t = promote(t, u)
        if e.func in ("max", "min", "abs", "floor", "ceil", "if_then_else"):
            return t
        return float_result(t)
    return None


def resolve(t: str, target: str) -> str:
    """Concrete dtype for a (possibly weak) type evaluated for a store into ``target``:
    weak floats compute in the target dtype if it is a float type (else f64), weak ints
    in i64."""
    if t == "float_lit":
        return target if target in A.FLOAT_DTYPES else "f64"
    if t == "int_lit":
        return "i64"
    return t
