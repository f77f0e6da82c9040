"""Expression types and promotion (documented in docs/language.md, "Types").

Literals and loop indices are *weak*: ``int_lit`` / ``float_lit`` adopt the type of the
strong operand they meet (``0.5*x`` with x: f32 is f32). The checker, interpreter and
lowering all use these functions so that they agree on every intermediate type.
"""

from __future__ import annotations

from typing import Optional

from . import ast as A

WEAK = ("int_lit", "float_lit")

#: storage size of each dtype in bytes (the checker's shared-memory limit, the lowering's
#: footprints and integer widths)
DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
               "u8": 1, "u16": 2, "u32": 4, "u64": 8, "bool": 1}


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
    return expr_types(e)[id(e)]


def _operands(e: A.Expr) -> tuple:
    if isinstance(e, A.Access):
        return tuple(e.indices)
    if isinstance(e, A.Neg):
        return (e.operand,)
    if isinstance(e, A.Compare):
        return tuple(e.operands)
    if isinstance(e, A.BinOp):
        return (e.lhs, e.rhs)
    if isinstance(e, A.Call):
        return tuple(e.args)
    return ()


def expr_types(root: A.Expr) -> dict[int, Optional[str]]:
    """``{id(node): type}`` for every node of ``root`` (subscripts included), computed
    bottom-up with an explicit stack, so a left-deep chain of thousands of terms types
    without recursion."""
    out: dict[int, Optional[str]] = {}
    stack = [(root, False)]
    while stack:
        n, done = stack.pop()
        if id(n) in out:
            continue
        if not done:
            stack.append((n, True))
            stack.extend((c, False) for c in _operands(n) if id(c) not in out)
            continue
        out[id(n)] = node_type(n, out)
    return out


def node_type(e: A.Expr, known: dict) -> Optional[str]:
    """Type of ``e`` from the types of its operands in ``known`` (``{id(node): type}``,
    filled bottom-up); None for a node that is not an expression."""
    if isinstance(e, A.Const):
        return "int_lit" if e.is_int else "float_lit"
    if isinstance(e, A.Var):
        return "int_lit"
    if isinstance(e, A.Access):
        return e.dtype
    if isinstance(e, A.Neg):
        return known[id(e.operand)]
    if isinstance(e, A.Compare):
        return "bool"
    if isinstance(e, A.BinOp):
        if e.op in ("&", "|"):
            return "bool"
        lt, rt = known[id(e.lhs)], known[id(e.rhs)]
        if lt is None or rt is None:
            return None
        t = promote(lt, rt)
        if e.op in ("/", "**"):
            return float_result(t) if e.op == "/" else (t if is_float(t) else ("float_lit" if t == "int_lit" else t))
        return t
    if isinstance(e, A.Call):
        if e.func in A.CAST_FUNCS:
            return e.func
        ts = [known[id(a)] for a in e.args]
        if e.func == "if_then_else":
            ts = ts[1:]
        if not ts or any(t is None for t in ts):
            return None
        t = ts[0]
        for u in ts[1:]:
            t = promote(t, u)
        if e.func in ("max", "min", "abs", "floor", "ceil", "if_then_else"):
            return t
        return float_result(t)
    return None


#: inclusive value range of each integer dtype (and of ``int_lit``, which computes in i64)
INT_RANGES: dict[str, tuple[int, int]] = {
    **{f"i{b}": (-(1 << (b - 1)), (1 << (b - 1)) - 1) for b in (8, 16, 32, 64)},
    **{f"u{b}": (0, (1 << b) - 1) for b in (8, 16, 32, 64)},
    "int_lit": (-(1 << 63), (1 << 63) - 1),
    "bool": (0, 1),
}

#: smallest magnitude that rounds to infinity (round to nearest even) in each float dtype
FLOAT_OVERFLOW: dict[str, float] = {
    "f16": 65520.0,
    "bf16": (2 - 2.0**-8) * 2.0**127,
    "f32": (2 - 2.0**-24) * 2.0**127,
    "f64": float("inf"),
}


def is_signed_int(t: str) -> bool:
    return (t in A.INT_DTYPES and t[0] == "i") or t == "int_lit"


def literal_misfit(value, target: str) -> Optional[str]:
    """Why the literal ``value`` (sign applied) cannot be created in the concrete type
    ``target``, or None if it can. Integer types must hold the value exactly (unsigned
    types no negative value: ``-1`` meeting ``u8`` is not ``255``); a float literal meeting
    an integer type (a store into an integer tensor) must be finite and its truncation in
    range; a float type must not round the literal to infinity (``inf`` itself is fine).
    ``bool`` accepts everything (``x != 0``)."""
    if target == "bool" or target not in INT_RANGES and target not in FLOAT_OVERFLOW:
        return None
    if target in FLOAT_OVERFLOW:
        if isinstance(value, float) and value != value:  # pragma: no cover - no NaN literal
            return None
        if abs(value) != float("inf") and abs(value) >= FLOAT_OVERFLOW[target]:
            return f"rounds to infinity in {target} (largest finite {target} is {_float_max(target):.6g})"
        return None
    lo, hi = INT_RANGES[target]
    if isinstance(value, float):
        if value != value or abs(value) == float("inf"):
            return f"is not finite and has no {target} value"
        value = int(value)
    if value < lo:
        if target[0] == "u":
            return f"is negative and {target} is unsigned"
        return f"is below the {target} range [{lo}, {hi}]"
    if value > hi:
        return f"exceeds the {target} range [{lo}, {hi}]"
    return None


def _float_max(t: str) -> float:
    return {"f16": 65504.0, "bf16": (2 - 2.0**-7) * 2.0**127, "f32": (2 - 2.0**-23) * 2.0**127,
            "f64": 1.7976931348623157e308}[t]


def typed_walk(root: A.Expr, ctx: str, conv: Optional[str], state=None, refine=None, types=None, skip=None):
    """Pre-order ``(node, concrete type, conversion, state)`` for every node of ``root``,
    following exactly how the interpreter and the lowering evaluate it: a node of type
    ``t`` computes in ``resolve(t, ctx)`` where ``ctx`` is the type the enclosing operation
    computes in; ``conversion`` is the type the parent converts the node's value to (the
    operation type for operands, the target dtype at the top), ``"cast:<dtype>"`` under an
    explicit cast, None for a subscript (int64). Subscripts of accesses are walked too,
    with context i64. ``state`` is carried down unchanged, except into the branches of
    ``if_then_else(c, a, b)``, which get ``refine(state, c, True)`` and
    ``refine(state, c, False)`` (the checker passes its path facts). ``types``: the
    :func:`expr_types` of a tree that contains ``root`` (types are computed bottom-up, so a
    subtree's are the same), to type a statement once for many walks. ``skip``: a set of
    node ids that the caller may grow while it consumes the walk; a node in it is not
    yielded and its subtree is not walked. Explicit stack: expressions may be deep."""
    if types is None:
        types = expr_types(root)
    get = types.get
    floats = A.FLOAT_DTYPES
    casts = A.CAST_FUNCS
    # every node is visited by this loop, so it is written flat: the children go straight
    # onto the stack (last child first, so they come off in source order) and ``resolve``
    # is inlined
    stack = [(root, ctx, conv, state)]
    pop, push = stack.pop, stack.append
    if skip is None:
        skip = ()
    while stack:
        n, c, cv, st = pop()
        if id(n) in skip:
            continue
        t = get(id(n))
        if t is None:
            T = None
        elif t == "float_lit":
            T = c if c in floats else "f64"
        elif t == "int_lit":
            T = "i64"
        else:
            T = t
        yield n, T, cv, st
        if isinstance(n, A.Access):
            for i in reversed(n.indices):
                push((i, "i64", None, st))
        elif isinstance(n, A.BinOp):
            if n.op in ("&", "|"):
                push((n.rhs, "bool", "bool", st))
                push((n.lhs, "bool", "bool", st))
            elif T is not None:
                push((n.rhs, T, T, st))
                push((n.lhs, T, T, st))
        elif isinstance(n, A.Neg):
            push((n.operand, T, T, st))
        elif isinstance(n, A.Compare):
            ts = [get(id(o)) for o in n.operands]
            if all(x is not None for x in ts):
                u = ts[0]
                for x in ts[1:]:
                    u = promote(u, x)
                Tc = resolve(u, c)
                for o in reversed(n.operands):
                    push((o, Tc, Tc, st))
        elif isinstance(n, A.Call) and T is not None:
            if n.func in casts:
                push((n.args[0], n.func, "cast:" + n.func, st))
            elif n.func == "if_then_else":
                c0 = n.args[0]
                st_t = refine(st, c0, True) if refine else st
                st_f = refine(st, c0, False) if refine else st
                push((n.args[2], T, T, st_f))
                push((n.args[1], T, T, st_t))
                push((c0, "bool", "bool", st))
            else:
                for a in reversed(n.args):
                    push((a, T, T, st))


def resolve(t: str, target: str) -> str:
    """Concrete dtype for a (possibly weak) type evaluated for a store into ``target``:
    weak floats compute in the target dtype if it is a float type (else f64), weak ints
    in i64."""
    if t == "float_lit":
        return target if target in A.FLOAT_DTYPES else "f64"
    if t == "int_lit":
        return "i64"
    return t
