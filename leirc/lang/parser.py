"""Parse LEIR text into the typed AST of :mod:`leirc.lang.ast`.

The grammar lives in ``grammar/leir.lark`` (packaged into the wheel as
``leirc/grammar/leir.lark``). The parser is LALR(1) (iterative); the typed tree is then
built by a Lark transformer. Nesting is bounded twice — on the raw parse tree before the
(recursive) transformer runs and on the AST afterwards (header chains and ``&``/``|``
chains are flat in the parse tree but deep in the AST) — so no client ever meets a tree
deeper than :data:`MAX_DEPTH`. Problems are returned as
:class:`~leirc.lang.diagnostics.Diagnostic` values, never raised.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from lark import Lark, Token, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.visitors import Transformer

from . import ast as A
from .diagnostics import Diagnostic, error

#: deepest expression/loop nesting accepted; keeps every recursive client (printer,
#: checker, lowering) far from Python's recursion limit.
MAX_DEPTH = 150


def grammar_path() -> Path:
    here = Path(__file__).resolve().parent.parent
    packaged = here / "grammar" / "leir.lark"
    if packaged.exists():
        return packaged
    return here.parent / "grammar" / "leir.lark"


@dataclass
class ParseResult:
    module: A.Module | None
    diagnostics: list[Diagnostic]
    source: str

    @property
    def ok(self) -> bool:
        return self.module is not None and not any(d.is_error for d in self.diagnostics)


# ---------------------------------------------------------------------------
# tree construction


def _span_of(meta_or_tok) -> A.Span | None:
    m = meta_or_tok
    if isinstance(m, Token):
        if m.line is None:
            return None
        return A.Span(m.line, m.column, m.end_line, m.end_column, m.start_pos, m.end_pos)
    if getattr(m, "empty", True):
        return None
    return A.Span(m.line, m.column, m.end_line, m.end_column, m.start_pos, m.end_pos)


class _Flat(tuple):
    """Items of a header-less ``[ ... ];`` block, spliced into the enclosing body."""


def _flatten(items: Iterable) -> tuple:
    out = []
    for it in items:
        if isinstance(it, _Flat):
            out.extend(it)
        elif it is not None:
            out.append(it)
    return tuple(out)


_HEADER_RE = re.compile(
    r"([LPVUB])\s*(?:\^\{\s*(\d+)\s*\}\s*_\{\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(-?)\s*(\d+)\s*\}"
    r"|_\{\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(-?)\s*(\d+)\s*\}\s*\^\{\s*(\d+)\s*\})"
)

_CMP = {"\\le": "<=", "\\leq": "<=", "\\ge": ">=", "\\geq": ">=", "\\ne": "!=", "\\neq": "!=",
        "\\lt": "<", "\\gt": ">"}
_LOGIC = {"&&": "&", "\\land": "&", "\\wedge": "&", "||": "|", "\\lor": "|", "\\vee": "|"}
_MUL = {"\\cdot": "*", "\\times": "*"}


@v_args(meta=True)
class _Builder(Transformer):
    def __init__(self, diags: list[Diagnostic]):
        super().__init__()
        self.diags = diags

    # -- file structure ----------------------------------------------------
    def start(self, meta, ch):
        return ch[0]

    def kernels(self, meta, ch):
        return A.Module(tuple(ch), span=_span_of(meta))

    def bare(self, meta, ch):
        body = _flatten(ch)
        k = A.Kernel("main", (), (), body, declared=False, span=_span_of(meta))
        return A.Module((k,), span=_span_of(meta))

    def kernel(self, meta, ch):
        name = str(ch[1])
        ins = ch[2] or ()
        outs = ch[3] or ()
        seen: dict[str, A.Param] = {}
        for p in tuple(ins) + tuple(outs):
            if p.name in seen:
                self.diags.append(error("E010", f"parameter '{p.name}' is declared twice", p.span))
            seen[p.name] = p
        return A.Kernel(name, tuple(ins), tuple(outs), _flatten(ch[4:]), True, span=_span_of(meta))

    def params(self, meta, ch):
        return tuple(ch)

    def param(self, meta, ch):
        name, dtype = str(ch[0]), str(ch[1])
        self._check_dtype(dtype, _span_of(ch[1]))
        shape = ch[2] if len(ch) > 2 else ()
        return A.Param(name, dtype, shape, span=_span_of(meta))

    def shape(self, meta, ch):
        dims = tuple(int(t) for t in ch if t is not None)
        for t in ch:
            if t is not None and int(t) > 2**31 - 1:
                self.diags.append(error("E006", f"dimension {t} exceeds 2^31-1", _span_of(t)))
        return dims

    # -- items ---------------------------------------------------------------
    def nest(self, meta, ch):
        headers = [t for t in ch if isinstance(t, Token) and t.type == "HEADER"]
        body = _flatten(c for c in ch if not (isinstance(c, Token) and c.type == "HEADER"))
        end_span = _span_of(meta)
        for tok in reversed(headers):
            m = _HEADER_RE.fullmatch(str(tok))
            if m.group(2) is not None:
                kind, extent, var, neg, start = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
            else:
                kind, var, neg, start, extent = m.group(1), m.group(6), m.group(7), m.group(8), m.group(9)
            hs = _span_of(tok)
            if int(extent) > 2**31 - 1:
                self.diags.append(error("E006", f"loop extent {extent} exceeds 2^31-1", hs))
            span = A.Span(hs.line, hs.col, end_span.end_line, end_span.end_col, hs.start, end_span.end) if end_span else hs
            body = (A.Loop(kind, int(extent), var, -int(start) if neg else int(start), body, span=span),)
        return body[0]

    def block(self, meta, ch):
        return ch[0] if isinstance(ch[0], A.Region) else _Flat(ch[0])

    def plain_body(self, meta, ch):
        return _Flat(_flatten(ch))

    def region(self, meta, ch):
        open_tag, close_tag = str(ch[0]), str(ch[-1])
        if open_tag != close_tag:
            self.diags.append(error("E009", f"region opened with ^{{{open_tag}}} but closed with ^{{{close_tag}}}",
                                    _span_of(ch[-1])))
        return A.Region(open_tag, _flatten(ch[1:-1]), span=_span_of(meta))

    def assign(self, meta, ch):
        return A.Assign(ch[0], ch[1], span=_span_of(meta))

    def align(self, meta, ch):
        return A.Align(str(ch[0]), ch[2], ch[3], ch[4], span=_span_of(meta))

    def sint(self, meta, ch):
        return int(ch[0])

    def neg_int(self, meta, ch):
        return -int(ch[1])

    # -- expressions ---------------------------------------------------------
    def number(self, meta, ch):
        text = str(ch[0])
        span = _span_of(ch[0])
        if re.fullmatch(r"\d+", text):
            v: int | float = int(text)
            if v > 2**63 - 1:
                self.diags.append(error("E006", f"integer literal {text} does not fit in 64 bits", span))
        else:
            v = float(text)
            if math.isinf(v):
                self.diags.append(error("E006", f"float literal {text} overflows; write 'inf'", span))
        return A.Const(v, span=span)

    def inf(self, meta, ch):
        return A.Const(math.inf, span=_span_of(ch[0]))

    def var(self, meta, ch):
        return A.Var(str(ch[0]), span=_span_of(ch[0]))

    def access(self, meta, ch):
        name = str(ch[0])
        sup = sub = None
        for c in ch[1:]:
            if isinstance(c, tuple) and c and c[0] == "sup":
                sup = c
            elif isinstance(c, tuple) and c and c[0] == "sub":
                sub = c
        dtype, scope = sup[1], sup[2]
        return A.Access(name, dtype, scope, sub[1] if sub else (), span=_span_of(meta))

    def sup(self, meta, ch):
        dtype, scope = str(ch[0]), str(ch[1])
        self._check_dtype(dtype, _span_of(ch[0]))
        if scope not in A.SCOPES:
            self.diags.append(error("E005", f"unknown memory scope '{scope}' (expected g, s or l)", _span_of(ch[1])))
        return ("sup", dtype, scope)

    def sub(self, meta, ch):
        return ("sub", tuple(c for c in ch if c is not None))

    def _check_dtype(self, dtype: str, span):
        if dtype in A.DTYPES:
            return
        if dtype in A.UNSUPPORTED_DTYPES:
            self.diags.append(error("E011", f"dtype '{dtype}' is not supported by leirc", span))
        else:
            self.diags.append(error("E004", f"unknown dtype '{dtype}' (expected one of {', '.join(A.DTYPES)})", span))

    def call(self, meta, ch):
        return self._call(str(ch[0]), tuple(ch[1:]), _span_of(meta), _span_of(ch[0]))

    def latex_call(self, meta, ch):
        name = str(ch[0])[1:]
        return self._call(name, tuple(ch[1:]), _span_of(meta), _span_of(ch[0]))

    def _call(self, name, args, span, name_span):
        name = A.INTRINSIC_ALIASES.get(name, name)
        if name in A.INTRINSICS:
            lo, hi = A.INTRINSICS[name]
            if len(args) < lo or (hi is not None and len(args) > hi):
                want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
                self.diags.append(error("E008", f"{name}() takes {want} argument(s), got {len(args)}", span))
        elif name in A.CAST_FUNCS:
            if len(args) != 1:
                self.diags.append(error("E008", f"cast {name}() takes 1 argument, got {len(args)}", span))
        else:
            known = ", ".join(sorted(A.INTRINSICS))
            self.diags.append(error("E007", f"unknown function '{name}'", name_span,
                                    notes=[f"intrinsics: {known}; casts: {', '.join(A.CAST_FUNCS)}"]))
        return A.Call(name, args, span=span)

    def atom(self, meta, ch):  # only reached for \\left( expr \\right)
        return ch[1]

    def frac(self, meta, ch):
        return A.BinOp("/", ch[1], ch[2], span=_span_of(meta))

    def binop(self, meta, ch):
        op = str(ch[1])
        op = _MUL.get(op, op)
        return A.BinOp(op, ch[0], ch[2], span=_span_of(meta))

    def pow(self, meta, ch):
        return A.BinOp("**", ch[0], ch[2], span=_span_of(meta))

    def neg(self, meta, ch):
        return A.Neg(ch[1], span=_span_of(meta))

    def compare(self, meta, ch):
        if len(ch) == 1:
            return ch[0]
        operands = tuple(ch[0::2])
        ops = tuple(_CMP.get(str(t), str(t)) for t in ch[1::2])
        return A.Compare(ops, operands, span=_span_of(meta))

    def _chain(self, meta, ch, table):
        acc = ch[0]
        for i in range(1, len(ch), 2):
            op = table.get(str(ch[i]), str(ch[i]))
            rhs = ch[i + 1]
            span = None
            if acc.span and rhs.span:
                span = A.Span(acc.span.line, acc.span.col, rhs.span.end_line, rhs.span.end_col, acc.span.start, rhs.span.end)
            acc = A.BinOp(op, acc, rhs, span=span)
        return acc

    def or_chain(self, meta, ch):
        return self._chain(meta, ch, _LOGIC) if len(ch) > 1 else ch[0]

    def and_chain(self, meta, ch):
        return self._chain(meta, ch, _LOGIC) if len(ch) > 1 else ch[0]


# ---------------------------------------------------------------------------
# error messages in words

_TOKEN_WORDS = {
    "HEADER": "a loop header such as L^{16}_{i=0}",
    "KERNEL": "'\\kernel'",
    "CNAME": "a name",
    "NUMBER": "a number",
    "INT": "an integer",
    "INF": "'inf'",
    "LATEX_FN": "a LaTeX function such as \\exp",
    "FRAC": "'\\frac'",
    "SEMICOLON": "';'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LPAR": "'('",
    "RPAR": "')'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "COMMA": "','",
    "EQUAL": "'='",
    "COLON": "':'",
    "MINUS": "'-'",
    "PLUS": "'+'",
    "MUL_OP": "an operator (* / // %)",
    "POW": "'**'",
    "CMP_OP": "a comparison",
    "AND": "'&'",
    "OR": "'|'",
    "ALIGN": "'align'",
    "$END": "end of input",
}


def _words(expected: Iterable[str], lark: Lark) -> str:
    names = []
    for t in sorted(set(expected)):
        if t in _TOKEN_WORDS:
            names.append(_TOKEN_WORDS[t])
            continue
        try:
            td = lark.get_terminal(t)
            pat = td.pattern
            if pat.type == "str":
                names.append(f"'{pat.value}'")
                continue
        except Exception:
            pass
        names.append(t.lower())
    names = sorted(set(names))
    if len(names) > 8:
        names = names[:8] + ["..."]
    return ", ".join(names)


def _syntax_error(e: UnexpectedInput, text: str, lark: Lark) -> Diagnostic:
    line = getattr(e, "line", None) or 1
    col = getattr(e, "column", None) or 1
    if line < 1:
        line, col = text.count("\n") + 1, len(text.rsplit("\n", 1)[-1]) + 1
    pos = getattr(e, "pos_in_stream", None) or 0
    if isinstance(e, UnexpectedCharacters):
        ch = text[pos] if 0 <= pos < len(text) else "?"
        msg = f"unexpected character {ch!r}"
        expected = e.allowed or set()
        width = 1
    elif isinstance(e, UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            msg = "unexpected end of input"
            line, col = text.count("\n") + 1, len(text.rsplit("\n", 1)[-1]) + 1
            width = 1
        else:
            msg = f"unexpected {str(tok)!r}"
            width = max(1, len(str(tok)))
        expected = e.expected or set()
    elif isinstance(e, UnexpectedEOF):
        msg = "unexpected end of input"
        expected = e.expected or set()
        line, col = text.count("\n") + 1, len(text.rsplit("\n", 1)[-1]) + 1
        width = 1
    else:  # pragma: no cover
        msg, expected, width = str(e), set(), 1
    if expected:
        msg += f"; expected {_words(expected, lark)}"
    span = A.Span(line, col, line, col + width, pos, pos + width)
    return error("E001", msg, span)


# ---------------------------------------------------------------------------
# public API


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(
        grammar_path().read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
    )


@lru_cache(maxsize=1)
def _parser_with_builder():
    # The inline transformer is stateless apart from the diagnostics list, which we
    # swap per call; keep one parser instance to avoid rebuilding LALR tables.
    lark = _lark()
    return lark


def _decode(data: str | bytes) -> tuple[str | None, Diagnostic | None]:
    if isinstance(data, str):
        return data, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        prefix = data[: e.start]
        line = prefix.count(b"\n") + 1
        col = len(prefix.rsplit(b"\n", 1)[-1]) + 1
        return None, error("E002", f"invalid UTF-8 byte 0x{data[e.start]:02x}", A.Span(line, col, line, col + 1, e.start, e.start + 1))


def parse(data: str | bytes, file: str = "<input>") -> ParseResult:
    """Parse a LEIR file (declared kernels or a bare Step-TP body)."""
    text, derr = _decode(data)
    if derr is not None:
        return ParseResult(None, [derr.with_file(file)], "")
    assert text is not None
    if text.startswith("\ufeff"):
        text = " " + text[1:]  # a UTF-8 byte-order mark; a space keeps columns and offsets
    if "\x00" in text:
        i = text.index("\x00")
        line = text.count("\n", 0, i) + 1
        col = i - (text.rfind("\n", 0, i) + 1) + 1
        d = error("E001", "unexpected NUL character", A.Span(line, col, line, col + 1, i, i + 1))
        return ParseResult(None, [d.with_file(file)], text)
    diags: list[Diagnostic] = []
    lark = _lark()
    try:
        tree = lark.parse(text)
    except UnexpectedInput as e:
        return ParseResult(None, [_syntax_error(e, text, lark).with_file(file)], text)
    except RecursionError:
        return ParseResult(None, [error("E003", "input nests too deeply", None).with_file(file)], text)
    try:
        depth_diag = _depth_check(tree)
        if depth_diag is not None:
            return ParseResult(None, [depth_diag.with_file(file)], text)
        module = _Builder(diags).transform(tree)
        deep = _ast_depth_check(module)
        if deep is not None:
            return ParseResult(None, [deep.with_file(file)], text)
    except VisitError as e:  # pragma: no cover - a bug in the builder, reported not raised
        if isinstance(e.orig_exc, RecursionError):
            return ParseResult(None, [error("E003", "input nests too deeply", None).with_file(file)], text)
        raise
    except RecursionError:
        return ParseResult(None, [error("E003", "input nests too deeply", None).with_file(file)], text)
    return ParseResult(module, [d.with_file(file) for d in diags], text)


def _depth_check(tree) -> Diagnostic | None:
    # iterative depth measurement of the raw parse tree before any recursive pass
    from lark import Tree

    stack = [(tree, 1)]
    while stack:
        node, d = stack.pop()
        if d > MAX_DEPTH * 3:  # parse trees have ~3 levels per AST level at most
            span = _span_of(node.meta) if isinstance(node, Tree) else None
            return error("E003", f"input nests more than {MAX_DEPTH} levels deep", span)
        if isinstance(node, Tree):
            for c in node.children:
                if isinstance(c, Tree):
                    stack.append((c, d + 1))
    return None


def _ast_depth_check(module) -> Diagnostic | None:
    stack = [(module, 0)]
    while stack:
        node, d = stack.pop()
        if d > MAX_DEPTH:
            return error("E003", f"input nests more than {MAX_DEPTH} levels deep", node.span)
        stack.extend((c, d + 1) for c in A.children(node))
    return None


def parse_body(
    body: str | bytes,
    inputs: Sequence[tuple[str, str, Sequence[int]]],
    outputs: Sequence[tuple[str, str, Sequence[int]]],
    name: str = "main",
    file: str = "<input>",
) -> ParseResult:
    """Parse a bare Step-TP body and attach an external signature.

    ``inputs``/``outputs`` are ``(name, dtype, shape)`` triples; dtype may be a LEIR
    dtype (``f32``) or a torch name (``torch.float32``).
    """
    res = parse(body, file)
    if res.module is None:
        return res
    k = res.module.kernels[0]
    if k.declared:
        res.diagnostics.append(error("E001", "expected a bare loop program, found declared kernels", k.span).with_file(file))
        return res

    def mk(p):
        n, dt, sh = p
        dt = A.TORCH_DTYPES.get(dt, dt)
        return A.Param(n, dt, tuple(int(x) for x in sh))

    k2 = A.Kernel(_kernel_name(name), tuple(mk(p) for p in inputs), tuple(mk(p) for p in outputs), k.body, declared=False, span=k.span)
    return ParseResult(A.Module((k2,), span=res.module.span), res.diagnostics, res.source)


def signature_from_record(rec: dict):
    """(inputs, outputs) triples from a Step-TP compat record. Parameters and constants
    are inputs (their values are data, as in the reference)."""
    ins = []
    names, shapes, dtypes = rec["inputs"]
    for n, s, d in zip(names, shapes, dtypes):
        ins.append((n, A.TORCH_DTYPES.get(d, "f32"), s))
    pnames, pshapes = rec.get("params", [[], []])
    for n, s in zip(pnames, pshapes):
        ins.append((n, "f32", s))
    consts = rec.get("constants", [[]])
    for group in consts:
        for n in group:
            ins.append((n, "f32", []))
    onames, oshapes = rec["outputs"][0], rec["outputs"][1]
    odt = rec["outputs"][2] if len(rec["outputs"]) > 2 else ["torch.float32"] * len(onames)
    outs = [(n, A.TORCH_DTYPES.get(d, "f32"), s) for n, s, d in zip(onames, oshapes, odt)]
    return ins, outs


def parse_record(rec: dict, program: str | None = None, file: str = "<record>") -> ParseResult:
    """Parse a Step-TP compat record's program (``IR`` by default) with the signature the
    record carries. Output dtypes the record omits are taken from the program's own
    accesses of that name (e.g. the i64 output of argmax)."""
    text = rec["IR"] if program is None else program
    ins, outs = signature_from_record(rec)
    first = parse(text, file)
    if first.module is not None:
        seen: dict[str, str] = {}
        for n in A.walk(first.module):
            if isinstance(n, A.Access) and n.name not in seen:
                seen[n.name] = n.dtype
        has_odt = len(rec["outputs"]) > 2
        outs = [(n, d if has_odt else seen.get(n, d), s) for n, d, s in outs]
        ins = [(n, seen.get(n, d) if n not in rec["inputs"][0] else d, s) for n, d, s in ins]
    return parse_body(text, ins, outs, name=_kernel_name(rec.get("model", "main")), file=file)


def _kernel_name(model: str) -> str:
    name = re.sub(r"[^A-Za-z0-9]+", "_", model).strip("_") or "main"
    if not name[0].isalpha():
        name = "k_" + name
    return re.sub(r"_+", "_", name)
