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
        # comments printed so far, by the identity of their tuple: a strategy that copies
        # a node (fission, tiling) copies its comments too, and they print once
        self.trivia: dict[int, tuple] = {}
        self.owners: set[int] = set()

    def comments(self, node, where: str) -> tuple[str, ...]:
        eff = self.trivia.get(id(node))
        if eff is None:
            own = getattr(node, "comments", ())
            eff = () if own and id(own) in self.owners else own
            if own:
                self.owners.add(id(own))
            self.trivia[id(node)] = eff
        return tuple(c.text for c in eff if c.where == where)

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
                return f"{lhs}**{rhs}"
            # a left-deep chain of one precedence level prints without parentheses; walk
            # its spine in a loop so a sum of thousands of terms does not recurse
            spine = []
            node = e
            while isinstance(node, A.BinOp) and node.op != "**" and A.BINOP_PRECEDENCE[node.op] == p:
                spine.append(node)
                node = node.lhs
            parts = [self._paren_if(node, _prec(node) < p)]
            for n in reversed(spine):
                parts.append(f" {n.op} " if n.op in self.spaced else n.op)
                parts.append(self._paren_if(n.rhs, _prec(n.rhs) <= p))
            return "".join(parts)
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
    if isinstance(s, A.Alloc):
        sep = ", " if pretty else ","
        return f"\\alloc {s.name}^{{{s.dtype},{s.scope}}}[{sep.join(str(d) for d in s.shape)}];"
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


# Comments (trivia, see ast.Comment) are printed by the pretty layout only; the compact
# layout is the one-line Step-TP form, and a comment would end its line.


def _has(ep, node, *where) -> bool:
    return any(ep.comments(node, w) for w in where)


def _leading(ep, node, ind: str, out: list[str]) -> None:
    for t in ep.comments(node, "leading"):
        out.append(ind + t if t else "")


def _trailing(ep, node, out: list[str], ind: str) -> None:
    ts = ep.comments(node, "trailing")
    if ts:
        out[-1] += " " + ts[0]
        out.extend(ind + t for t in ts[1:])


def _open(ep, node, line: str, ind: str, out: list[str]) -> None:
    """The line that opens ``node``'s body, with its ``head`` comment."""
    hs = ep.comments(node, "head")
    out.append(line + (" " + hs[0] if hs else ""))
    out.extend(ind + t for t in hs[1:])


def _inner(ep, node, ind: str, out: list[str]) -> None:
    for t in ep.comments(node, "inner"):
        out.append(ind + t if t else "")


def _item_pretty(it, ep, depth: int, out: list[str]) -> None:
    ind = "  " * depth
    ind1 = "  " * (depth + 1)
    _leading(ep, it, ind, out)
    if isinstance(it, A.Loop):
        headers = []
        node = it
        while True:
            headers.append(_header(node))
            # the chain ``L.. L.. [`` has one bracket: it continues only while no comment
            # needs a place between two headers
            if (len(node.body) == 1 and isinstance(node.body[0], A.Loop) and not _has(ep, node, "head", "inner")
                    and not _has(ep, node.body[0], "leading", "trailing")):
                node = node.body[0]
                continue
            break
        head = " ".join(headers)
        if (len(node.body) == 1 and isinstance(node.body[0], A.Region) and not _has(ep, node, "head", "inner")
                and not _has(ep, node.body[0], "leading", "trailing")):
            r = node.body[0]
            _open(ep, r, f"{ind}{head} [^{{{r.tag}}}", ind1, out)
            _items_pretty(r.body, ep, depth + 1, out)
            _inner(ep, r, ind1, out)
            out.append(f"{ind}]^{{{r.tag}}};")
        else:
            _open(ep, node, f"{ind}{head} [", ind1, out)
            _items_pretty(node.body, ep, depth + 1, out)
            _inner(ep, node, ind1, out)
            out.append(f"{ind}];")
    elif isinstance(it, A.Region):
        _open(ep, it, f"{ind}[^{{{it.tag}}}", ind1, out)
        _items_pretty(it.body, ep, depth + 1, out)
        _inner(ep, it, ind1, out)
        out.append(f"{ind}]^{{{it.tag}}};")
    else:
        out.append(ind + _stmt(it, ep, True))
    _trailing(ep, it, out, ind)


def print_item(it, layout: str = PRETTY, depth: int = 0, *, outer_comments: bool = True) -> str:
    """One item (statement, nest or region). ``outer_comments=False`` leaves out the
    item's own leading and trailing comments (comments inside it are printed), for
    edits that replace an item's text but not the comments around it."""
    if not outer_comments:
        it = A.drop_comments(it, "leading", "trailing")
    return print_items([it], layout, depth)


def print_items(items, layout: str = PRETTY, depth: int = 0) -> str:
    """Several items, one per line in the pretty layout (concatenated in the compact
    one); a comment that a strategy copied onto two of them prints once."""
    ep = _ExprPrinter(layout == PRETTY)
    if layout != PRETTY:
        return _items_compact(items, ep)
    out: list[str] = []
    _items_pretty(items, ep, depth, out)
    return "\n".join(out)


def print_body(kernel_or_items, layout: str = COMPACT) -> str:
    """The Step-TP body (no kernel header); the pretty layout includes the comments
    inside it (those of a declared kernel's header, above and after it are not)."""
    kernel = kernel_or_items if isinstance(kernel_or_items, A.Kernel) else None
    items = kernel.body if kernel is not None else tuple(kernel_or_items)
    pretty = layout == PRETTY
    ep = _ExprPrinter(pretty)
    if not pretty:
        return _items_compact(items, ep)
    out: list[str] = []
    _items_pretty(items, ep, 0, out)
    if kernel is not None:  # comments after the last item (a bare body's kernel owns them)
        _inner(ep, kernel, "", out)
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


def print_kernel(k: A.Kernel, layout: str = COMPACT, *, comments: bool | None = None) -> str:
    """One kernel. ``comments`` (default: on for the pretty layout, off for the compact
    one) prints its trivia; the compact layout can only keep the comments above the
    kernel and after it."""
    pretty = layout == PRETTY
    if comments is None:
        comments = pretty
    ep = _ExprPrinter(pretty)
    head = print_signature(k, layout)
    if not pretty:
        text = head + "{" + _items_compact(k.body, ep) + "}"
        if comments:
            lead = [t for t in A.comments_at(k, "leading")]
            trail = A.comments_at(k, "trailing")
            text = "".join(t + "\n" for t in lead) + text + ("".join(" " + t for t in trail[:1]))
        return text
    if not comments:
        k = A.strip_comments(k)
    out: list[str] = []
    _leading(ep, k, "", out)
    _open(ep, k, head + " {", "  ", out)
    _items_pretty(k.body, ep, 1, out)
    _inner(ep, k, "  ", out)
    out.append("}")
    _trailing(ep, k, out, "")
    return "\n".join(out)


def print_module(m: A.Module, layout: str = PRETTY, *, comments: bool | None = None) -> str:
    """Print a whole file. A single bare kernel without a signature prints as a bare
    body; everything else prints in the declared form. ``comments`` as for
    :func:`print_kernel`."""
    pretty = layout == PRETTY
    if comments is None:
        comments = pretty
    if len(m.kernels) == 1 and not m.kernels[0].declared and not (m.kernels[0].inputs or m.kernels[0].outputs):
        k = m.kernels[0] if comments else A.strip_comments(m.kernels[0])
        text = print_body(k, layout) + ("" if layout == PRETTY else "\n")
    else:
        sep = "\n\n" if pretty else "\n"
        text = sep.join(print_kernel(k, layout, comments=comments) for k in m.kernels) + "\n"
    if comments:
        tail = A.comments_at(m, "inner")
        if tail:
            text += "".join((t + "\n") if t else "\n" for t in tail)
    return text
