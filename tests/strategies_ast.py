"""Hypothesis strategies for random, well-formed LEIR syntax trees, plus small helpers
shared by the parser/printer tests (compat corpus loading, strict tree comparison).

Every tree these strategies generate is one the printer can print and the parser reads
back without diagnostics. Restrictions (all checked by tests/test_printer_roundtrip.py and
tests/test_parser.py, which document *why* each one exists):

* Value names (variables and tensor names) are any grammar ``CNAME`` except ``inf``, which
  is the infinity keyword in expression position. ``align`` is fine (it is a keyword only
  right after ``NAME=``); so are the loop letters ``L P V U B`` (a loop header is a single
  token that needs ``^{digits}``) and intrinsic/dtype names used as plain variables.
* Loop index names follow the header token, ``[A-Za-z][A-Za-z0-9]*`` (no ``_``).
* Literals are never negative (``-1`` is ``Neg(Const(1))``); integers fit in 63 bits
  (larger ones are diagnosed E006); floats are finite non-negative or ``inf``, never NaN.
* Intrinsic names are canonical (aliases such as ``ln``/``select`` are normalized by the
  parser and would not round-trip by design).
* A module is either one *bare* kernel (``declared=False``, named ``main``, no signature;
  this is what a Step-TP body parses to) or 1-3 declared kernels with distinct names and
  parameter names (duplicates are diagnosed E010).
* Trees stay far below the parser's nesting limit (``leirc.lang.parser.MAX_DEPTH``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import fields
from pathlib import Path

from hypothesis import strategies as st

from leirc.lang import ast as A

# ---------------------------------------------------------------------------
# compat corpus (read-only, lives next to the repository: ../shared/compat)

COMPAT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "compat"
EMITTED = COMPAT_DIR / "steptp_emitted_level1.jsonl"
STRATEGY = COMPAT_DIR / "steptp_strategy_outputs.jsonl"
COMPAT_SKIP_REASON = f"compat corpus not found at {COMPAT_DIR} (it lives in ../shared next to the repository)"
STDLIB_DIR = Path(__file__).resolve().parents[1] / "stdlib"


def compat_available() -> bool:
    return EMITTED.is_file() and STRATEGY.is_file()


def load_emitted() -> list[dict]:
    with EMITTED.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_strategy() -> list[dict]:
    with STRATEGY.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def compat_programs() -> list[tuple[str, str]]:
    """(id, program text) for every program in both compat files (empty if absent)."""
    if not compat_available():
        return []
    out: list[tuple[str, str]] = []
    for i, rec in enumerate(load_emitted()):
        out.append((f"emitted[{i}]:{rec['model']}", rec["IR"]))
    for i, rec in enumerate(load_strategy()):
        tag = f"strategy[{i}]:{rec['model']}:{rec['strategy']}"
        out.append((f"{tag}:original", rec["original"]))
        for j, t in enumerate(rec["transformed"]):
            out.append((f"{tag}:transformed[{j}]", t))
    return out


def stdlib_programs() -> list[tuple[str, str]]:
    if not STDLIB_DIR.is_dir():
        return []
    return [(str(p.relative_to(STDLIB_DIR)), p.read_text(encoding="utf-8"))
            for p in sorted(STDLIB_DIR.rglob("*.leir"))]


# ---------------------------------------------------------------------------
# strict comparison helpers


def typed(node):
    """A span-free, *type-strict* key of a tree: like ``==`` on the AST, but ``Const(1)``
    and ``Const(1.0)`` differ (dataclass equality treats ``1 == 1.0``). Iterative-safe
    for the shallow trees used in tests."""
    if isinstance(node, tuple):
        return tuple(typed(x) for x in node)
    if hasattr(node, "__dataclass_fields__") and not isinstance(node, A.Span):
        out = [type(node).__name__]
        for f in fields(node):
            if f.name == "span":
                continue
            out.append((f.name, typed(getattr(node, f.name))))
        return tuple(out)
    if isinstance(node, float):
        return ("float", repr(node))
    if isinstance(node, bool):
        return ("bool", node)
    if isinstance(node, int):
        return ("int", node)
    return node


_AST_TYPES = (A.Const, A.Var, A.Access, A.BinOp, A.Neg, A.Compare, A.Call, A.Assign, A.Align,
              A.Loop, A.Region, A.Param, A.Kernel, A.Module)


def ill_typed_parts(root) -> list[str]:
    """Descriptions of values in the tree that are not what ast.py declares (e.g. a raw
    lark ``Tree`` where an expression belongs). Iterative."""
    bad: list[str] = []
    stack = [(root, "root")]
    while stack:
        node, where = stack.pop()
        if not isinstance(node, _AST_TYPES):
            bad.append(f"{where}: {type(node).__module__}.{type(node).__name__}")
            continue
        for f in fields(node):
            if f.name in A.TRIVIA_FIELDS:
                continue
            v = getattr(node, f.name)
            vals = list(enumerate(v)) if isinstance(v, tuple) else [(None, v)]
            for i, x in vals:
                if x is None or type(x) in (bool, int, float, str):
                    continue
                stack.append((x, f"{where}.{f.name}" + ("" if i is None else f"[{i}]")))
    return bad


def ast_depth(root) -> int:
    """Height of the tree in AST nodes (iterative, so it works on any tree)."""
    best = 0
    stack = [(root, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        for c in A.children(node):
            stack.append((c, d + 1))
    return best


# ---------------------------------------------------------------------------
# names

_CNAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)*")
_IDX_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")

#: names worth hitting often: Step-TP style names, loop letters, keywords in other
#: positions, intrinsic and dtype names used as plain names.
_TRICKY_NAMES = ["L", "P", "V", "U", "B", "T", "align", "infty", "inf0", "inf_x", "infx", "kernel",
                 "exp", "max", "if_then_else", "ln", "f32", "bool", "i64", "e", "e5", "E1",
                 "g", "s", "l", "tx", "bza", "ap_0", "Aa", "A_1", "a1_b2"]


def _ok_value_name(n: str) -> bool:
    return n != "inf"


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ALNUM = _LETTERS + "0123456789"
# (built from characters rather than st.from_regex, which is several times slower)
_ident = st.builds(lambda a, b: a + b, st.sampled_from(_LETTERS), st.text(_ALNUM, max_size=4))
_cname_random = st.builds(lambda head, tails: head + "".join("_" + t for t in tails),
                          _ident, st.lists(st.text(_ALNUM, min_size=1, max_size=3), max_size=2))
cname = st.one_of(
    st.sampled_from(["A", "C", "D", "E", "F", "G", "H", "Ar", "An", "Bc", "X"]),
    st.sampled_from(_TRICKY_NAMES),
    _cname_random,
)
#: tensor / variable names (anything the grammar calls CNAME, except the keyword inf)
value_name = cname.filter(_ok_value_name)
tensor_name = value_name
#: loop index names (header token syntax: no underscores)
index_name = st.one_of(
    st.sampled_from(["tx", "ty", "bx", "bza", "a", "c", "d", "f", "g", "h", "i", "j", "L", "B", "align", "e"]),
    _ident,
).filter(_ok_value_name)
tag_name = cname
dtype = st.sampled_from(A.DTYPES)
scope = st.sampled_from(A.SCOPES)

# ---------------------------------------------------------------------------
# expressions

_SPECIAL_FLOATS = [0.0, 0.5, 1.0, 1e-05, 0.044715, 1.0507010221481323, 5e-324, 2.2250738585072014e-308,
                   1.7976931348623157e308, 1e16, 1e22, 123456789.0, 2.0 ** 53, 0.1, 3.0, math.inf]

int_const = st.builds(A.Const, st.one_of(
    st.integers(0, 16),
    st.sampled_from([0, 1, 2, 100, 128, 16383, 2097152, 2**31 - 1, 2**32, 2**63 - 1]),
    st.integers(0, 2**63 - 1),
))
float_const = st.builds(A.Const, st.one_of(
    st.sampled_from(_SPECIAL_FLOATS),
    st.floats(min_value=0.0, allow_nan=False, allow_infinity=True).filter(lambda x: math.copysign(1.0, x) > 0),
))
const = st.one_of(int_const, float_const)
var = st.builds(A.Var, value_name)
scalar_access = st.builds(A.Access, tensor_name, dtype, scope, st.just(()))

leaf_expr = st.one_of(const, var, scalar_access)

BINOPS = ("+", "-", "*", "/", "//", "%", "**", "&", "|")
CALL_FUNCS = tuple(A.INTRINSICS)


def _call(children: st.SearchStrategy) -> st.SearchStrategy:
    @st.composite
    def build(draw):
        func = draw(st.sampled_from(CALL_FUNCS + A.CAST_FUNCS))
        if func in A.INTRINSICS:
            lo, hi = A.INTRINSICS[func]
            n = draw(st.integers(lo, hi if hi is not None else lo + 2))
        else:
            n = 1  # casts: f32(x), i64(x), bool(x) ...
        return A.Call(func, tuple(draw(children) for _ in range(n)))

    return build()


def _compare(children: st.SearchStrategy) -> st.SearchStrategy:
    @st.composite
    def build(draw):
        ops = tuple(draw(st.lists(st.sampled_from(A.COMPARE_OPS), min_size=1, max_size=3)))
        operands = tuple(draw(children) for _ in range(len(ops) + 1))
        return A.Compare(ops, operands)

    return build()


def _extend_expr(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.builds(A.BinOp, st.sampled_from(BINOPS), children, children),
        st.builds(A.Neg, children),
        _compare(children),
        _call(children),
        # indexed accesses, including nested (indirect) ones
        st.builds(A.Access, tensor_name, dtype, scope, st.lists(children, min_size=1, max_size=3).map(tuple)),
    )


exprs = st.recursive(leaf_expr, _extend_expr, max_leaves=10)
#: smaller expressions for the many positions inside statements and loops
small_exprs = st.recursive(leaf_expr, _extend_expr, max_leaves=4)

# ---------------------------------------------------------------------------
# statements, loops, regions

access_target = st.builds(A.Access, tensor_name, dtype, scope, st.lists(small_exprs, max_size=3).map(tuple))
assign = st.builds(A.Assign, access_target, st.one_of(small_exprs, small_exprs, exprs))
align = st.builds(A.Align, tensor_name, st.integers(-8, 8), st.integers(-64, 64), st.integers(-64, 64))
stmt = st.one_of(assign, assign, align)

loop_kind = st.sampled_from(A.LOOP_KINDS)
extent = st.one_of(st.integers(0, 16), st.sampled_from([1, 128, 512, 1024, 16384]), st.integers(0, 2**31 - 1))
loop_start = st.one_of(st.just(0), st.integers(-10, 10))


def _extend_items(children: st.SearchStrategy) -> st.SearchStrategy:
    body = st.lists(children, max_size=3).map(tuple)
    loop = st.builds(A.Loop, loop_kind, extent, index_name, loop_start, body)
    # force a few Step-TP style header chains (a loop whose body is exactly one loop)
    chain = st.builds(A.Loop, loop_kind, extent, index_name, loop_start,
                      st.builds(A.Loop, loop_kind, extent, index_name, loop_start, body).map(lambda l: (l,)))
    region = st.builds(A.Region, tag_name, body)
    return st.one_of(loop, loop, chain, region)


items = st.recursive(stmt, _extend_items, max_leaves=6)
body_items = st.lists(items, max_size=3).map(tuple)

# ---------------------------------------------------------------------------
# kernels and modules

shape = st.lists(st.integers(0, 2**20), max_size=4).map(tuple)


@st.composite
def params_pair(draw):
    """Distinct-named inputs and outputs (incl. scalar params with shape ())."""
    names = draw(st.lists(value_name, max_size=5, unique=True))
    n_in = draw(st.integers(0, len(names)))
    ps = tuple(A.Param(n, draw(dtype), draw(shape)) for n in names)
    return ps[:n_in], ps[n_in:]


@st.composite
def declared_kernel(draw, name=None):
    ins, outs = draw(params_pair())
    return A.Kernel(name or draw(value_name), ins, outs, draw(body_items), True)


@st.composite
def declared_modules(draw):
    names = draw(st.lists(value_name, min_size=1, max_size=3, unique=True))
    return A.Module(tuple(draw(declared_kernel(name=n)) for n in names))


bare_modules = st.builds(lambda body: A.Module((A.Kernel("main", (), (), body, declared=False),)), body_items)

modules = st.one_of(declared_modules(), bare_modules)
