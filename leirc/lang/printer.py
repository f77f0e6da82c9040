"""Canonical LEIR printer.

Two layouts, both re-parse to an equal tree (``parse(print(t)) == t``):

* ``compact`` — the one-line Step-TP form, no whitespace, minimal parentheses
  (``B^{512}_{tx=0}L^{768}_{a=0}[D^{f32,g}_{tx,a}=...;];``).
* ``pretty`` — one statement per line, nests indented by depth, spaces around ``=``
  and after argument commas.

Declared kernels are printed as ``\\kernel name(A: f32[16,16384]) -> (C: f32[16,16384]) {...}``;
:func:`print_body` prints only the Step-TP body of a kernel. LaTeX aliases accepted by the
parser are normalized (``\\frac{a}{b}`` prints as ``a/b``).
"""

from __future__ import annotations

import math

from . import ast as A

COMPACT = "compact"
PRETTY = "pretty"


def _prec(e: A.Expr) -> int:
    if isinstance(e, A.BinOp):
        return A.BINOP_PRECEDENCE[e.op]
    if isinstance(e, A.Compare):
        return A.COMPARE_PRECEDENCE
    if isinstance(e, A.Neg):
        return A.UNARY_PRECEDENCE
    return A.ATOM_PRECEDENCE


def format_const(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if math.isnan(v):
        raise ValueError("NaN has no LEIR literal")
    r = repr(float(v))
    return r


class _ExprPrinter:
    def __init__(self, pretty: bool):
        self.comma = ", " if pretty else ","
        # pretty layout spaces the low-precedence operators; never '%' (a space before
        # '%' would start a comment)
        self.spaced = ("+", "-", "&", "|", "<", "<=", ">", ">=", "==", "!=") if pretty else ()

    def expr(self, e: A.Expr) -> str:
        if isinstance(e, A.Const):
            return format_const(e.value)
        if isinstance(e, A.Var):
            return e.name
        if isinstance(e, A.Access):
            return self.access(e)
        if isinstance(e, A.Call):
            return f"{e.func}(" + self.comma.join(self.expr(a) for a in e.args) + ")"
        if isinstance(e, A.Neg):
            inner = self.expr(e.operand)
            if _prec(e.operand) < A.UNARY_PRECEDENCE:
                inner = f"({inner})"
            return "-" + inner
        if isinstance(e, A.Compare):
            parts = [self._paren_if(e.operands[0], _prec(e.operands[0]) <= A.COMPARE_PRECEDENCE)]
            for op, x in zip(e.ops, e.operands[1:]):
                parts.append(f" {op} " if op in self.spaced else op)
                parts.append(self._paren_if(x, _prec(x) <= A.COMPARE_PRECEDENCE))
            return "".join(parts)
        if isinstance(e, A.BinOp):
            p = A.BINOP_PRECEDENCE[e.op]
            if e.op == "**":
                lhs = self._paren_if(e.lhs, _prec(e.lhs) <= p)
                rhs = self._paren_if(e.rhs, _prec(e.rhs) < A.UNARY_PRECEDENCE)
            else:
                lhs = self._paren_if(e.lhs, _prec(e.lhs) < p)
                rhs = self._paren_if(e.rhs, _prec(e.rhs) <= p)
            op = f" {e.op} " if e.op in self.spaced else e.op
            return f"{lhs}{op}{rhs}"
        raise TypeError(f"not an expression: {e!r}")

    def _paren_if(self, e, cond: bool) -> str:
        s = self.expr(e)
        return f"({s})" if cond else s

    def access(self, a: A.Access) -> str:
        s = f"{a.name}^{{{a.dtype},{a.scope}}}"
        if a.indices:
            # subscripts stay tight even in the pretty layout: they read as one unit
            tight = _ExprPrinter(False)
            s += "_{" + ",".join(tight.expr(i) for i in a.indices) + "}"
        return s


def print_expr(e: A.Expr, layout: str = COMPACT) -> str:
    return _ExprPrinter(layout == PRETTY).expr(e)


def _header(loop: A.Loop) -> str:
    return f"{loop.kind}^{{{loop.extent}}}_{{{loop.var}={loop.start}}}"


def _stmt(s, ep: _ExprPrinter, pretty: bool) -> str:
    if isinstance(s, A.Assign):
        eq = " = " if pretty else "="
        return f"{ep.access(s.target)}{eq}{ep.expr(s.value)};"
    if isinstance(s, A.Align):
        return f"{s.name}{' = ' if pretty else '='}align({s.axis},{s.factor},{s.offset});"
    raise TypeError(s)


def _items_compact(items, ep) -> str:
    return "".join(_item_compact(it, ep) for it in items)


def _item_compact(it, ep) -> str:
    if isinstance(it, A.Loop):
        headers = []
        node = it
        while True:
            headers.append(_header(node))
            if len(node.body) == 1 and isinstance(node.body[0], A.Loop):
                node = node.body[0]
                continue
            break
        if len(node.body) == 1 and isinstance(node.body[0], A.Region):
            r = node.body[0]
            return "".join(headers) + f"[^{{{r.tag}}}" + _items_compact(r.body, ep) + f"]^{{{r.tag}}};"
        return "".join(headers) + "[" + _items_compact(node.body, ep) + "];"
    if isinstance(it, A.Region):
        return f"[^{{{it.tag}}}" + _items_compact(it.body, ep) + f"]^{{{it.tag}}};"
    return _stmt(it, ep, False)


def _items_pretty(items, ep, depth: int, out: list[str]) -> None:
    for it in items:
        _item_pretty(it, ep, depth, out)


def _item_pretty(it, ep, depth: int, out: list[str]) -> None:
    ind = "  " * depth
    if isinstance(it, A.Loop):
        headers = []
        node = it
        while True:
            headers.append(_header(node))
            if len(node.body) == 1 and isinstance(node.body[0], A.Loop):
                node = node.body[0]
                continue
            break
        head = " ".join(headers)
        if len(node.body) == 1 and isinstance(node.body[0], A.Region):
            r = node.body[0]
            out.append(f"{ind}{head} [^{{{r.tag}}}")
            _items_pretty(r.body, ep, depth + 1, out)
            out.append(f"{ind}]^{{{r.tag}}};")
            return
        out.append(f"{ind}{head} [")
        _items_pretty(node.body, ep, depth + 1, out)
        out.append(f"{ind}];")
        return
    if isinstance(it, A.Region):
        out.append(f"{ind}[^{{{it.tag}}}")
        _items_pretty(it.body, ep, depth + 1, out)
        out.append(f"{ind}]^{{{it.tag}}};")
        return
    out.append(ind + _stmt(it, ep, True))


def print_body(kernel_or_items, layout: str = COMPACT) -> str:
    """The Step-TP body (no kernel header)."""
    items = kernel_or_items.body if isinstance(kernel_or_items, A.Kernel) else tuple(kernel_or_items)
    pretty = layout == PRETTY
    ep = _ExprPrinter(pretty)
    if not pretty:
        return _items_compact(items, ep)
    out: list[str] = []
    _items_pretty(items, ep, 0, out)
    return "\n".join(out) + ("\n" if out else "")


def _param(p: A.Param, pretty: bool) -> str:
    sep = ", " if pretty else ","
    colon = ": " if pretty else ":"
    return f"{p.name}{colon}{p.dtype}[{sep.join(str(d) for d in p.shape)}]"


def print_signature(k: A.Kernel, layout: str = COMPACT) -> str:
    pretty = layout == PRETTY
    sep = ", " if pretty else ","
    ins = sep.join(_param(p, pretty) for p in k.inputs)
    outs = sep.join(_param(p, pretty) for p in k.outputs)
    arrow = " -> " if pretty else "->"
    return f"\\kernel {k.name}({ins}){arrow}({outs})"


def print_kernel(k: A.Kernel, layout: str = COMPACT) -> str:
    pretty = layout == PRETTY
    ep = _ExprPrinter(pretty)
    head = print_signature(k, layout)
    if not pretty:
        return head + "{" + _items_compact(k.body, ep) + "}"
    out = [head + " {"]
    _items_pretty(k.body, ep, 1, out)
    out.append("}")
    return "\n".join(out)


def print_module(m: A.Module, layout: str = PRETTY) -> str:
    """Print a whole file. A single bare kernel without a signature prints as a bare
    body; everything else prints in the declared form."""
    if len(m.kernels) == 1 and not m.kernels[0].declared and not (m.kernels[0].inputs or m.kernels[0].outputs):
        return print_body(m.kernels[0], layout) + ("" if layout == PRETTY else "\n")
    sep = "\n\n" if layout == PRETTY else "\n"
    return sep.join(print_kernel(k, layout) for k in m.kernels) + "\n"
