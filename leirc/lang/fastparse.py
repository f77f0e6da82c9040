"""A hand-written LEIR parser: one regular-expression tokenizer and a recursive-descent /
precedence-climbing parser that builds the same AST as the Lark reference
(:mod:`leirc.lang.parser`, grammar ``grammar/leir.lark``), spans and diagnostics included,
several times faster.

The contract is one-sided: :func:`parse_fast` either returns exactly what the Lark path
returns for a text the grammar accepts, or ``None`` ("ask Lark"). It returns ``None`` on
any syntax error (so error messages, expected-token lists and hints stay Lark's), on input
nested so deeply that the depth limits might apply (the Lark path measures them exactly),
and on anything it does not recognize. ``tests/test_fast_parser.py`` checks the contract
differentially on every ``.leir`` file, the compat corpus and seeded mutations.

Why the tokenizer can be context-free while Lark's lexer is contextual: every alternative
of :data:`_TOKEN` is tried in Lark's terminal order (priority, then width), and where
Lark's state-restricted choice would differ from the first global match, the global match
is a token the grammar does not accept at that point, so this parser rejects and Lark
decides. Names stand for ``CNAME``, ``ALIGN`` and ``inf`` alike and numbers for ``NUMBER``
and ``INT``; the parser reads them by position, as the contextual lexer does.

This module also holds what both parsers share: the depth limits, the header, literal,
dtype and call rules and their diagnostics.
"""

from __future__ import annotations

import difflib
import math
import re

from . import ast as A
from .diagnostics import Diagnostic, error

#: deepest expression/loop nesting accepted; keeps every recursive client (printer,
#: checker, lowering) far from Python's recursion limit.
MAX_DEPTH = 150
#: most operands of one flat ``+ -``, ``* / // %``, ``&`` or ``|`` chain. Chains are
#: left-deep in the AST, so clients that recurse on ``lhs`` meet this depth; it is far
#: above any real program (the longest generated sum in the corpus has < 100 terms).
MAX_CHAIN = 4096

# ---------------------------------------------------------------------------
# rules shared with the Lark builder

HEADER_PARTS = re.compile(
    r"([LPVUB])\s*(?:\^\{\s*(\d+)\s*\}\s*_\{\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(-?)\s*(\d+)\s*\}"
    r"|_\{\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(-?)\s*(\d+)\s*\}\s*\^\{\s*(\d+)\s*\})"
)

CMP_SPELLINGS = {"\\le": "<=", "\\leq": "<=", "\\ge": ">=", "\\geq": ">=", "\\ne": "!=", "\\neq": "!=",
                 "\\lt": "<", "\\gt": ">"}
LOGIC_SPELLINGS = {"&&": "&", "\\land": "&", "\\wedge": "&", "||": "|", "\\lor": "|", "\\vee": "|"}
MUL_SPELLINGS = {"\\cdot": "*", "\\times": "*"}

_INT_LITERAL = re.compile(r"\d+")


def header_parts(text: str) -> tuple[str, int, str, int]:
    """(kind, extent, var, start) of a loop-header token (either LaTeX order)."""
    m = HEADER_PARTS.fullmatch(text)
    if m.group(2) is not None:
        kind, extent, var, neg, start = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
    else:
        kind, var, neg, start, extent = m.group(1), m.group(6), m.group(7), m.group(8), m.group(9)
    return kind, int(extent), var, -int(start) if neg else int(start)


def extent_diagnostic(extent: int, span) -> Diagnostic | None:
    if extent > 2**31 - 1:
        return error("E006", f"loop extent {extent} exceeds 2^31-1", span)
    return None


def dimension_diagnostic(text: str, span) -> Diagnostic | None:
    if int(text) > 2**31 - 1:
        return error("E006", f"dimension {text} exceeds 2^31-1", span)
    return None


def number_literal(text: str, span, diags: list[Diagnostic]) -> A.Const:
    """The literal's constant (int for digits only, else float); E006 when it does not fit."""
    if _INT_LITERAL.fullmatch(text):
        v: int | float = int(text)
        if v > 2**63 - 1:
            diags.append(error("E006", f"integer literal {text} does not fit in 64 bits", span))
    else:
        v = float(text)
        if math.isinf(v):
            diags.append(error("E006", f"float literal {text} overflows; write 'inf'", span))
    return _Const(v, span)


#: spellings from other languages, for the E004 hint
_DTYPE_SPELLINGS = {
    "float": "f32", "float32": "f32", "fp32": "f32", "single": "f32", "float64": "f64", "double": "f64",
    "fp64": "f64", "float16": "f16", "half": "f16", "fp16": "f16", "bfloat16": "bf16", "int": "i32",
    "int32": "i32", "int64": "i64", "long": "i64", "int16": "i16", "short": "i16", "int8": "i8",
    "uint8": "u8", "byte": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "boolean": "bool",
}


def dtype_hint(dtype: str) -> tuple[str, ...]:
    if dtype.lower() in _DTYPE_SPELLINGS:
        return (f"LEIR spells this dtype '{_DTYPE_SPELLINGS[dtype.lower()]}'",)
    close = difflib.get_close_matches(dtype, A.DTYPES, n=1, cutoff=0.6)
    return (f"did you mean '{close[0]}'?",) if close else ()


def check_dtype(dtype: str, span, diags: list[Diagnostic]) -> None:
    if dtype in A.DTYPES:
        return
    if dtype in A.UNSUPPORTED_DTYPES:
        diags.append(error("E011", f"dtype '{dtype}' is not supported by leirc", span))
    else:
        diags.append(error("E004", f"unknown dtype '{dtype}' (expected one of {', '.join(A.DTYPES)})", span,
                           notes=dtype_hint(dtype)))


def check_scope(scope: str, span, diags: list[Diagnostic]) -> None:
    if scope not in A.SCOPES:
        diags.append(error("E005", f"unknown memory scope '{scope}' (expected g, s or l)", span))


def make_call(name: str, args: tuple, span, name_span, diags: list[Diagnostic]) -> A.Call:
    """The call node, the name normalized; E007/E008 for unknown names and arities."""
    name = A.INTRINSIC_ALIASES.get(name, name)
    if name in A.INTRINSICS:
        lo, hi = A.INTRINSICS[name]
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            diags.append(error("E008", f"{name}() takes {want} argument(s), got {len(args)}", span))
    elif name in A.CAST_FUNCS:
        if len(args) != 1:
            diags.append(error("E008", f"cast {name}() takes 1 argument, got {len(args)}", span))
    else:
        known = ", ".join(sorted(A.INTRINSICS))
        diags.append(error("E007", f"unknown function '{name}'", name_span,
                           notes=[f"intrinsics: {known}; casts: {', '.join(A.CAST_FUNCS)}"]))
    return _Call(name, args, span)


def duplicate_params(params, diags: list[Diagnostic]) -> None:
    seen: set[str] = set()
    for p in params:
        if p.name in seen:
            diags.append(error("E010", f"parameter '{p.name}' is declared twice", p.span))
        seen.add(p.name)


def _chain_link(parent, child) -> bool:
    """``child`` continues ``parent``'s flat operator chain (same precedence, on the
    left): the parser built both from one flat chain, so it is not extra nesting."""
    return (isinstance(parent, A.BinOp) and child is parent.lhs and isinstance(child, A.BinOp)
            and parent.op != "**" and A.BINOP_PRECEDENCE[child.op] == A.BINOP_PRECEDENCE[parent.op])


def ast_depth_diagnostic(module) -> Diagnostic | None:
    """E003 when the AST nests deeper than the limits (iterative; the same for both parsers)."""
    # d: nesting depth, where a left operand that continues its parent's chain costs
    # nothing; r: the tree's real height, which recursive clients meet (a chain inside
    # parentheses at the head of another chain adds up)
    stack = [(module, 0, 0)]
    while stack:
        node, d, r = stack.pop()
        if d > MAX_DEPTH:
            return error("E003", f"input nests more than {MAX_DEPTH} levels deep", node.span)
        if r > MAX_DEPTH + MAX_CHAIN:
            return error("E003", f"input nests more than {MAX_DEPTH + MAX_CHAIN} levels deep "
                         "(counting the operands of operator chains)", node.span)
        stack.extend((c, d if _chain_link(node, c) else d + 1, r + 1) for c in A.children(node))
    return None


# ---------------------------------------------------------------------------
# tokens

# Lark's terminal order (priority, then width): HEADER, the prio-3 backslash words and
# `**`, NUMBER, INF/LATEX_FN/ALIGN (read from names by position), CNAME, COMMENT, WS, INT,
# the operators longest first. The leading whitespace is captured with each token so
# findall (one C loop) gives every position; trailing whitespace is the one thing it skips.
#
# The alternatives of ``_TOKEN`` are ordered for speed, not priority: the regex engine
# tries them in turn at every token, and only alternatives that can start with the same
# character compete. Those keep Lark's order (a comment before the ``%`` operator, a
# header before a name starting with L P V U B); the others start with disjoint
# characters (operators with symbols, names with letters, backslash words with ``\``,
# numbers with a digit or ``.``), so the most frequent go first.
_HEADER = (r"[LPVUB]\s*(?:\^\{\s*\d+\s*\}\s*_\{\s*[A-Za-z][A-Za-z0-9]*\s*=\s*-?\s*\d+\s*\}"
           r"|_\{\s*[A-Za-z][A-Za-z0-9]*\s*=\s*-?\s*\d+\s*\}\s*\^\{\s*\d+\s*\})")
_BACKSLASH = (r"\\(?:kernel|right\)|dfrac|tfrac|frac|alloc|left\(|infty|(?:exp|log|ln|sqrt|max|min|abs|erf|tanh)"
              r"(?![A-Za-z])|times|cdot|wedge|land|leq|geq|neq|le|ge|ne|lt|gt|lor|vee)")
_NUMBER = r"(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+"
_NAME = r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*"
#: the operators, each longest spelling first (``**`` before ``*``)
_OPERATOR = r"[(),;{}\[\]:+]|\^\{|_\{|\*\*?|//?|->?|[<>=]=?|!=|&&?|\|\|?|%"
#: a name that cannot start a loop header
_PLAIN_NAME = r"[AC-KM-OQ-TW-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*"
#: ``(?<!\S%)`` after the ``%``: a comment starts at a ``%`` with no non-space before it
#: (a lookbehind in front would run at every token)
_TOKEN = re.compile(rf"([ \t\f\r\n]*)(%(?<!\S%)[^\n]*|{_OPERATOR}|{_PLAIN_NAME}|{_HEADER}|{_NAME}|{_BACKSLASH}"
                    rf"|{_NUMBER}|[^ \t\f\r\n])")
_TRAILING_SPACE = re.compile(r"[ \t\f\r\n]*\Z")

#: token text -> kind, for operators and backslash words; names, numbers, headers and
#: comments are told apart by their first character
_KIND = {
    "**": "POW", "*": "MUL", "/": "MUL", "//": "MUL", "%": "MUL", "\\cdot": "MUL", "\\times": "MUL",
    "+": "+", "-": "-", "->": "->", "^{": "^{", "_{": "_{",
    "<": "CMP", ">": "CMP", "<=": "CMP", ">=": "CMP", "==": "CMP", "!=": "CMP",
    "\\le": "CMP", "\\leq": "CMP", "\\ge": "CMP", "\\geq": "CMP", "\\ne": "CMP", "\\neq": "CMP",
    "\\lt": "CMP", "\\gt": "CMP",
    "&": "AND", "&&": "AND", "\\land": "AND", "\\wedge": "AND",
    "|": "OR", "||": "OR", "\\lor": "OR", "\\vee": "OR",
    "(": "(", ")": ")", "[": "[", "]": "]", "{": "{", "}": "}", ";": ";", ",": ",", ":": ":", "=": "=",
    "\\kernel": "KERNEL", "\\alloc": "ALLOC", "\\frac": "FRAC", "\\dfrac": "FRAC", "\\tfrac": "FRAC",
    "\\left(": "LEFT", "\\right)": "RIGHT", "\\infty": "INF",
    "\\exp": "LATEX", "\\log": "LATEX", "\\ln": "LATEX", "\\sqrt": "LATEX", "\\max": "LATEX",
    "\\min": "LATEX", "\\abs": "LATEX", "\\erf": "LATEX", "\\tanh": "LATEX",
}
_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
#: binary operator kind -> precedence level (as in leirc.lang.ast.BINOP_PRECEDENCE)
_PREC = {"OR": 1, "AND": 2, "CMP": 3, "+": 4, "-": 4, "MUL": 5}
_SPELLING = {1: LOGIC_SPELLINGS, 2: LOGIC_SPELLINGS, 3: CMP_SPELLINGS, 4: {}, 5: MUL_SPELLINGS}

#: nesting (parentheses, calls, subscripts, unary minus, ``**``, loop headers, bodies) up
#: to which no depth limit can apply: each level is at most 7 AST levels and 10 Lark
#: parse-tree levels (MAX_DEPTH 150 and 3 * MAX_DEPTH); deeper input, and input whose
#: chains may add up past the limits, gets the exact measurement.
_SAFE_DEPTH = 18
_SAFE_CHAIN = 24
#: beyond this the Lark parse tree itself may be too deep: the Lark path decides
_LARK_DEPTH = 40


# the parser builds every node and span of a file: through the fast constructors
_Span = A.fast_constructor(A.Span)
_Const = A.fast_constructor(A.Const)
_Var = A.fast_constructor(A.Var)
_Access = A.fast_constructor(A.Access)
_BinOp = A.fast_constructor(A.BinOp)
_Neg = A.fast_constructor(A.Neg)
_Compare = A.fast_constructor(A.Compare)
_Call = A.fast_constructor(A.Call)
_Assign = A.fast_constructor(A.Assign)
_Align = A.fast_constructor(A.Align)
_Loop = A.fast_constructor(A.Loop)
_Region = A.fast_constructor(A.Region)
_Alloc = A.fast_constructor(A.Alloc)
_Param = A.fast_constructor(A.Param)
_Kernel = A.fast_constructor(A.Kernel)
_Module = A.fast_constructor(A.Module)
_DTYPES = frozenset(A.DTYPES)
_SCOPES = frozenset(A.SCOPES)
_KNOWN_FUNCS = frozenset(A.INTRINSICS) | frozenset(A.CAST_FUNCS)
_MAX_EXTENT = 2**31 - 1
#: tokens after which an operand is a whole expression
_CLOSERS = frozenset({",", "}", ")"})


class _Reject(Exception):
    """Internal: this input is for the Lark parser."""


def tokenize(text: str):
    """The tokens of ``text`` as (kind, text, start, end, line, col, end_line, end_col)
    tuples (1-based lines and columns, ``end_col`` exclusive, as Lark counts: only
    ``\\n`` ends a line) ending with an ``EOF`` token, and the comments as (offset, line,
    text) triples. ``None`` when a character starts no token."""
    toks = []
    comments = []
    append = toks.append
    # names, numbers and headers repeat: their kinds are learnt per call
    kinds = dict(_KIND)
    kinds["%"] = "%"  # modulo or an empty comment: decided by the character before it
    get = kinds.get
    letters = _ASCII_LETTERS
    pos = 0
    line = 1
    line_start = 0
    for ws, tok in _TOKEN.findall(text):
        if ws:
            if "\n" in ws:  # (most whitespace is one space: no method call for it)
                line += ws.count("\n")
                line_start = pos + ws.rindex("\n") + 1
            pos += len(ws)
        end = pos + len(tok)
        kind = get(tok)
        if kind is None or kind == "%":
            c = tok[0]
            if c == "%":
                if kind is None or pos == 0 or text[pos - 1].isspace():
                    comments.append((pos, line, tok.rstrip()))
                    pos = end
                    continue
                kind = "MUL"
            elif c in letters:
                if "{" in tok:
                    kind = "HEADER"
                    if "\n" in tok:  # a header may be written across lines
                        col = pos - line_start + 1
                        line2 = line + tok.count("\n")
                        line_start2 = pos + tok.rindex("\n") + 1
                        append((kind, tok, pos, end, line, col, line2, end - line_start2 + 1))
                        line, line_start, pos = line2, line_start2, end
                        continue
                else:
                    kind = "NAME"
                kinds[tok] = kind
            elif c.isdecimal() or (c == "." and len(tok) > 1):
                kind = kinds[tok] = "NUM"
            else:
                return None
        append((kind, tok, pos, end, line, pos - line_start + 1, line, end - line_start + 1))
        pos = end
    m = _TRAILING_SPACE.search(text, pos)
    if m is None or m.start() != pos:  # pragma: no cover - the token regex matches every character
        return None
    n = text.count("\n", pos)
    if n:
        line += n
        line_start = text.rindex("\n") + 1
    end_col = len(text) - line_start + 1
    append(("EOF", "", len(text), len(text), line, end_col, line, end_col))
    return toks, comments


# ---------------------------------------------------------------------------
# the parser


class _Parser:
    __slots__ = ("toks", "kinds", "i", "diags", "depth", "max_depth", "max_chain", "text")

    def __init__(self, text: str, toks: list):
        self.text = text
        self.toks = toks
        self.kinds = [t[0] for t in toks]
        self.i = 0
        self.diags: list[Diagnostic] = []
        self.depth = 0
        self.max_depth = 0
        self.max_chain = 0

    # -- helpers -------------------------------------------------------------
    def span(self, a: int, b: int) -> A.Span:
        ta = self.toks[a]
        tb = self.toks[b]
        return _Span(ta[4], ta[5], tb[6], tb[7], ta[2], tb[3])

    def tok_span(self, a: int) -> A.Span:
        t = self.toks[a]
        return _Span(t[4], t[5], t[6], t[7], t[2], t[3])

    def name_span(self, i: int, name: str | None = None) -> A.Span | None:
        """The span of a called name, which only the unknown-function error needs."""
        name = self.toks[i][1] if name is None else name
        if A.INTRINSIC_ALIASES.get(name, name) in _KNOWN_FUNCS:
            return None
        return self.tok_span(i)

    def expect(self, kind: str) -> int:
        i = self.i
        if self.kinds[i] != kind:
            raise _Reject
        self.i = i + 1
        return i

    def name(self) -> str:
        i = self.i
        if self.kinds[i] != "NAME":
            raise _Reject
        self.i = i + 1
        return self.toks[i][1]

    def enter(self) -> None:
        d = self.depth + 1
        if d > _LARK_DEPTH:
            raise _Reject
        self.depth = d
        if d > self.max_depth:
            self.max_depth = d

    # -- file structure ----------------------------------------------------
    def file(self) -> A.Module:
        kinds = self.kinds  # the list may grow (split_left), so the end is found by kind
        if kinds[0] == "KERNEL":
            kernels = []
            while kinds[self.i] == "KERNEL":
                kernels.append(self.kernel())
            if kinds[self.i] != "EOF":
                raise _Reject
            return _Module(tuple(kernels), self.span(0, self.i - 1), ())
        items: list = []
        while kinds[self.i] != "EOF":
            self.item(items)
        span = self.span(0, self.i - 1) if items else None
        k = _Kernel("main", (), (), tuple(items), False, span, ())
        return _Module((k,), span, ())

    def kernel(self) -> A.Kernel:
        i0 = self.expect("KERNEL")
        name = self.name()
        self.expect("(")
        ins = self.params(")")
        self.expect(")")
        self.expect("->")
        self.expect("(")
        outs = self.params(")")
        self.expect(")")
        self.expect("{")
        items: list = []
        kinds = self.kinds
        while kinds[self.i] != "}":
            self.item(items)
        self.i += 1
        duplicate_params(ins + outs, self.diags)
        return _Kernel(name, ins, outs, tuple(items), True, self.span(i0, self.i - 1), ())

    def params(self, close: str) -> tuple:
        if self.kinds[self.i] == close:
            return ()
        out = [self.param()]
        while self.kinds[self.i] == ",":
            self.i += 1
            out.append(self.param())
        return tuple(out)

    def param(self) -> A.Param:
        i0 = self.i
        name = self.name()
        self.expect(":")
        it = self.i
        dtype = self.name()
        shape = self.shape() if self.kinds[self.i] == "[" else ()
        if dtype not in _DTYPES:  # spans only for diagnostics: most names are fine
            check_dtype(dtype, self.tok_span(it), self.diags)
        return _Param(name, dtype, shape, self.span(i0, self.i - 1))

    def shape(self) -> tuple[int, ...]:
        self.expect("[")
        kinds = self.kinds
        dims = []
        if kinds[self.i] != "]":
            dims.append(self.int_token())
            while kinds[self.i] == ",":
                self.i += 1
                dims.append(self.int_token())
        self.expect("]")
        out = []
        for i in dims:
            text = self.toks[i][1]
            v = int(text)
            out.append(v)
            if v > _MAX_EXTENT:
                self.diags.append(dimension_diagnostic(text, self.tok_span(i)))
        return tuple(out)

    def int_token(self) -> int:
        i = self.i
        if self.kinds[i] != "NUM" or not _INT_LITERAL.fullmatch(self.toks[i][1]):
            raise _Reject
        self.i = i + 1
        return i

    # -- items ---------------------------------------------------------------
    def item(self, out: list) -> None:
        kind = self.kinds[self.i]
        if kind == "NAME":
            out.append(self.statement())
        elif kind == "HEADER":
            out.append(self.nest())
        elif kind == "[":
            self.enter()
            i0 = self.i
            region, items = self.body()
            self.depth -= 1
            if region is None:
                out.extend(items)
            else:
                out.append(_Region(region, tuple(items), self.span(i0, self.i - 1), ()))
        elif kind == "ALLOC":
            out.append(self.alloc())
        else:
            raise _Reject

    def statement(self):
        i0 = self.i
        toks = self.toks
        if self.kinds[i0 + 1] == "=":
            # NAME = align(axis, factor, offset)
            self.i = i0 + 2
            if self.kinds[self.i] != "NAME" or toks[self.i][1] != "align":
                raise _Reject
            self.i += 1
            self.expect("(")
            axis = self.sint()
            self.expect(",")
            factor = self.sint()
            self.expect(",")
            offset = self.sint()
            self.expect(")")
            node = _Align(toks[i0][1], axis, factor, offset, self.span(i0, self.i - 1), ())
        else:
            target = self.access()
            self.expect("=")
            value = self.expr()
            node = _Assign(target, value, self.span(i0, self.i - 1), ())
        self.expect(";")
        return node

    def sint(self) -> int:
        if self.kinds[self.i] == "-":
            self.i += 1
            return -int(self.toks[self.int_token()][1])
        return int(self.toks[self.int_token()][1])

    def alloc(self) -> A.Alloc:
        i0 = self.expect("ALLOC")
        name = self.name()
        dtype, scope = self.sup()
        shape = self.shape() if self.kinds[self.i] == "[" else ()
        self.expect(";")
        return _Alloc(name, dtype, scope, shape, self.span(i0, self.i - 1), ())

    def nest(self) -> A.Loop:
        kinds = self.kinds
        first = self.i
        while kinds[self.i] == "HEADER":
            self.i += 1
            self.enter()
        last = self.i - 1
        region, items = self.body()
        end = self.i - 1
        if region is not None:
            items = [_Region(region, tuple(items), self.span(last + 1, end), ())]
        body = tuple(items)
        toks = self.toks
        te = toks[end]
        for h in range(last, first - 1, -1):
            th = toks[h]
            kind, extent, var, start = header_parts(th[1])
            if extent > _MAX_EXTENT:
                self.diags.append(extent_diagnostic(extent, self.tok_span(h)))
            span = _Span(th[4], th[5], te[6], te[7], th[2], te[3])
            body = (_Loop(kind, extent, var, start, body, span, ()),)
        self.depth -= last - first + 1
        return body[0]

    def body(self) -> tuple[str | None, list]:
        """``[ items ];`` or ``[^{tag} items ]^{tag};``: (the tag or None, the items)."""
        self.expect("[")
        kinds = self.kinds
        tag = None
        if kinds[self.i] == "^{":
            self.i += 1
            tag = self.name()
            self.expect("}")
        items: list = []
        while kinds[self.i] != "]":
            self.item(items)
        self.i += 1
        if tag is not None:
            self.expect("^{")
            it = self.i
            close = self.name()
            self.expect("}")
            if close != tag:
                self.diags.append(error("E009", f"region opened with ^{{{tag}}} but closed with ^{{{close}}}",
                                        self.tok_span(it)))
        self.expect(";")
        return tag, items

    # -- expressions ---------------------------------------------------------
    def sup(self) -> tuple[str, str]:
        """``^{dtype,scope}``. (Indexing past the end is safe: the ``EOF`` token at
        the end matches no expected kind, so the checks stop there.)"""
        i = self.i
        kinds = self.kinds
        if kinds[i] != "^{" or kinds[i + 1] != "NAME" or kinds[i + 2] != "," or kinds[i + 3] != "NAME" \
                or kinds[i + 4] != "}":
            raise _Reject
        toks = self.toks
        dtype = toks[i + 1][1]
        scope = toks[i + 3][1]
        self.i = i + 5
        if dtype not in _DTYPES:
            check_dtype(dtype, self.tok_span(i + 1), self.diags)
        if scope not in _SCOPES:
            check_scope(scope, self.tok_span(i + 3), self.diags)
        return dtype, scope

    def sub(self) -> tuple:
        self.i += 1  # "_{"
        if self.kinds[self.i] == "}":
            self.i += 1
            return ()
        out = [self.nested_expr()]
        kinds = self.kinds
        while kinds[self.i] == ",":
            self.i += 1
            out.append(self.nested_expr())
        self.expect("}")
        return tuple(out)

    def access(self) -> A.Access:
        i0 = self.i
        name = self.name()
        kinds = self.kinds
        if kinds[self.i] == "^{":
            dtype, scope = self.sup()
            indices = self.sub() if kinds[self.i] == "_{" else ()
        elif kinds[self.i] == "_{":
            indices = self.sub()
            dtype, scope = self.sup()
        else:
            raise _Reject
        return _Access(name, dtype, scope, indices, self.span(i0, self.i - 1))

    def nested_expr(self):
        d = self.depth + 1
        if d > _LARK_DEPTH:
            raise _Reject
        if d > self.max_depth:
            self.max_depth = d
        # most subscripts and arguments are one name or number: skip the climb
        i = self.i
        kinds = self.kinds
        k = kinds[i]
        if (k == "NAME" or k == "NUM") and kinds[i + 1] in _CLOSERS:
            t = self.toks[i]
            if k == "NUM":
                self.i = i + 1
                return number_literal(t[1], _Span(t[4], t[5], t[6], t[7], t[2], t[3]), self.diags)
            if t[1] != "inf":
                self.i = i + 1
                return _Var(t[1], _Span(t[4], t[5], t[6], t[7], t[2], t[3]))
        self.depth = d
        e = self.expr()
        self.depth = d - 1
        return e

    def expr(self, min_prec: int = 1):
        """Precedence climbing over the flat chains of the grammar: each chain folds
        left-associatively and every partial result spans from the chain's first token
        to the end of its right operand's own span (as the Lark builder does)."""
        i0 = self.i
        lhs = self.unary()
        kinds = self.kinds
        run_prec = 0
        run = 0
        while True:
            kind = kinds[self.i]
            prec = _PREC.get(kind)
            if prec is None:
                if kind != "LEFT":
                    return lhs
                self.split_left()
                continue
            if prec < min_prec:
                return lhs
            if prec == 3:
                ops = []
                operands = [lhs]
                while kinds[self.i] == "CMP":
                    t = self.toks[self.i][1]
                    ops.append(CMP_SPELLINGS.get(t, t))
                    self.i += 1
                    operands.append(self.expr(4))
                lhs = _Compare(tuple(ops), tuple(operands), self.span(i0, self.i - 1))
                run_prec = 3
                continue
            t = self.toks[self.i][1]
            op = _SPELLING[prec].get(t, t)
            self.i += 1
            rhs = self.expr(prec + 1)
            rs = rhs.span
            ta = self.toks[i0]
            lhs = _BinOp(op, lhs, rhs, _Span(ta[4], ta[5], rs.end_line, rs.end_col, ta[2], rs.end))
            if prec == run_prec:
                run += 1
            else:
                run_prec, run = prec, 1
            if run >= self.max_chain:
                self.max_chain = run + 1

    def split_left(self) -> None:
        """After an operand Lark's lexer cannot take ``\\left(``, so it reads ``\\le``
        (a comparison), the name ``ft`` and ``(``: do the same."""
        i = self.i
        kind, text, start, end, line, col, end_line, end_col = self.toks[i]
        self.toks[i:i + 1] = [("CMP", "\\le", start, start + 3, line, col, line, col + 3),
                              ("NAME", "ft", start + 3, start + 5, line, col + 3, line, col + 5),
                              ("(", "(", start + 5, end, line, col + 5, end_line, end_col)]
        self.kinds[i:i + 1] = ["CMP", "NAME", "("]

    def unary(self):
        if self.kinds[self.i] == "-":
            i0 = self.i
            self.i += 1
            self.enter()
            operand = self.unary()
            self.depth -= 1
            return _Neg(operand, self.span(i0, self.i - 1))
        i0 = self.i
        base = self.atom()
        if self.kinds[self.i] == "POW":
            self.i += 1
            self.enter()
            rhs = self.unary()
            self.depth -= 1
            return _BinOp("**", base, rhs, self.span(i0, self.i - 1))
        return base

    def atom(self):
        i = self.i
        kind = self.kinds[i]
        toks = self.toks
        if kind == "NAME":
            t = toks[i]
            text = t[1]
            # the contextual lexer reads `inf` as INF wherever an operand starts, unless a
            # name character follows (`inf_{i}^{f32,g}` is a tensor named inf)
            if text == "inf" and self.text[t[3]:t[3] + 1] != "_":
                self.i = i + 1
                return _Const(math.inf, _Span(t[4], t[5], t[6], t[7], t[2], t[3]))
            nxt = self.kinds[i + 1]
            if nxt == "^{" or nxt == "_{":
                return self.access()
            if nxt == "(":
                self.i = i + 2
                args = self.args(")")
                return make_call(text, args, self.span(i, self.i - 1), self.name_span(i), self.diags)
            self.i = i + 1
            return _Var(text, _Span(t[4], t[5], t[6], t[7], t[2], t[3]))
        if kind == "NUM":
            self.i = i + 1
            t = toks[i]
            return number_literal(t[1], _Span(t[4], t[5], t[6], t[7], t[2], t[3]), self.diags)
        if kind == "(":
            self.i = i + 1
            e = self.nested_expr()
            self.expect(")")
            return e
        if kind == "INF":
            self.i = i + 1
            return _Const(math.inf, self.tok_span(i))
        if kind == "LATEX":
            name = toks[i][1][1:]
            if self.kinds[i + 1] == "(":
                self.i = i + 2
                args = self.args(")")
            elif self.kinds[i + 1] == "{":
                self.i = i + 2
                args = (self.nested_expr(),)
                self.expect("}")
            else:
                raise _Reject
            return make_call(name, args, self.span(i, self.i - 1), self.name_span(i, name), self.diags)
        if kind == "FRAC":
            self.i = i + 1
            self.expect("{")
            num = self.nested_expr()
            self.expect("}")
            self.expect("{")
            den = self.nested_expr()
            self.expect("}")
            return _BinOp("/", num, den, self.span(i, self.i - 1))
        if kind == "LEFT":
            self.i = i + 1
            e = self.nested_expr()
            self.expect("RIGHT")
            return e
        raise _Reject

    def args(self, close: str) -> tuple:
        out = [self.nested_expr()]
        kinds = self.kinds
        while kinds[self.i] == ",":
            self.i += 1
            out.append(self.nested_expr())
        self.expect(close)
        return tuple(out)


def parse_fast(text: str) -> tuple[A.Module, list[Diagnostic], list[tuple[int, int, str]]] | None:
    """The module, the parser's diagnostics (without file names) and the comments as
    (offset, line, text) triples, exactly as the Lark path gives them; ``None`` when the
    Lark path must decide (a syntax error, possible excess nesting, anything unusual).
    ``text`` is already decoded, without a byte-order mark or NUL characters."""
    lexed = tokenize(text)
    if lexed is None:
        return None
    toks, comments = lexed
    p = _Parser(text, toks)
    try:
        module = p.file()
    except _Reject:
        return None
    except Exception:  # pragma: no cover - a bug here must not break parse(): Lark decides
        return None
    if p.max_chain > MAX_CHAIN:
        return None
    if p.max_depth > _SAFE_DEPTH or p.max_chain > _SAFE_CHAIN:
        deep = ast_depth_diagnostic(module)
        if deep is not None:
            return None
    return module, p.diags, comments
