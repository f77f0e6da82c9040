"""Parse LEIR text into the typed AST of :mod:`leirc.lang.ast`.

The grammar lives in ``grammar/leir.lark`` (packaged into the wheel as
``leirc/grammar/leir.lark``). The parser is LALR(1) (iterative); the typed tree is then
built by a Lark transformer. Nesting is bounded twice — on the raw parse tree before the
(recursive) transformer runs and on the AST afterwards (header chains and operator
chains are flat in the parse tree but deep in the AST). Real nesting (parentheses, calls,
unary minus, ``**``, loops, regions) is bounded by :data:`MAX_DEPTH`; a flat chain
``a + b - c + ...`` (or ``*``, ``&``, ``|``) is one level however long it is, up to
:data:`MAX_CHAIN` operands. Problems are returned as
:class:`~leirc.lang.diagnostics.Diagnostic` values, never raised.

Comments are trivia: a lexer callback collects them and :func:`_attach_comments` hangs
each one on the nearest item (see :class:`leirc.lang.ast.Comment`); they never take part
in equality.

Speed: :func:`parse` first tries the hand-written parser of :mod:`leirc.lang.fastparse`,
which builds the same AST (spans, comments and diagnostics included) several times faster
and hands every syntax error, and anything it is unsure of, to Lark. ``LEIRC_PARSER=lark``
in the environment (or ``parse(..., parser="lark")``) uses Lark alone.

Recovery: when a file of several ``\\kernel`` definitions has a syntax error, each
kernel is parsed on its own. :attr:`ParseResult.module` stays ``None`` (every caller
that treats that as failure keeps working) while :attr:`ParseResult.partial` holds the
kernels that parsed, and :attr:`ParseResult.diagnostics` has one error per broken
kernel.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from lark import Lark, Token, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.visitors import Transformer

from . import ast as A
from .diagnostics import Diagnostic, error
from .fastparse import (CMP_SPELLINGS, LOGIC_SPELLINGS, MAX_CHAIN, MAX_DEPTH, MUL_SPELLINGS, ast_depth_diagnostic,
                        check_dtype, check_scope, dimension_diagnostic, duplicate_params, extent_diagnostic,
                        header_parts, make_call, number_literal, parse_fast)

#: the parsers :func:`parse` can use: the fast one (with Lark for syntax errors) or Lark alone
PARSERS = ("fast", "lark")


def grammar_path() -> Path:
    here = Path(__file__).resolve().parent.parent
    packaged = here / "grammar" / "leir.lark"
    if packaged.exists():
        return packaged
    return here.parent / "grammar" / "leir.lark"


@dataclass
class ParseResult:
    """``module`` is the whole file, or ``None`` after a syntax error. ``partial`` is the
    module of the kernels that did parse (the whole module when there was no syntax
    error; after an error in one ``\\kernel`` of several, the others)."""

    module: A.Module | None
    diagnostics: list[Diagnostic]
    source: str
    partial: A.Module | None = None

    def __post_init__(self):
        if self.partial is None and self.module is not None:
            self.partial = self.module

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


_CMP = CMP_SPELLINGS
_LOGIC = LOGIC_SPELLINGS
_MUL = MUL_SPELLINGS


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
        duplicate_params(tuple(ins) + tuple(outs), self.diags)
        return A.Kernel(name, tuple(ins), tuple(outs), _flatten(ch[4:]), True, span=_span_of(meta))

    def params(self, meta, ch):
        return tuple(ch)

    def param(self, meta, ch):
        name, dtype = str(ch[0]), str(ch[1])
        check_dtype(dtype, _span_of(ch[1]), self.diags)
        shape = ch[2] if len(ch) > 2 else ()
        return A.Param(name, dtype, shape, span=_span_of(meta))

    def shape(self, meta, ch):
        dims = tuple(int(t) for t in ch if t is not None)
        for t in ch:
            d = dimension_diagnostic(str(t), _span_of(t)) if t is not None else None
            if d is not None:
                self.diags.append(d)
        return dims

    # -- items ---------------------------------------------------------------
    def nest(self, meta, ch):
        headers = [t for t in ch if isinstance(t, Token) and t.type == "HEADER"]
        body = _flatten(c for c in ch if not (isinstance(c, Token) and c.type == "HEADER"))
        end_span = _span_of(meta)
        for tok in reversed(headers):
            kind, extent, var, start = header_parts(str(tok))
            hs = _span_of(tok)
            d = extent_diagnostic(extent, hs)
            if d is not None:
                self.diags.append(d)
            span = A.Span(hs.line, hs.col, end_span.end_line, end_span.end_col, hs.start, end_span.end) if end_span else hs
            body = (A.Loop(kind, extent, var, start, body, span=span),)
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

    def alloc(self, meta, ch):
        sup = ch[2]
        shape = ch[3] if len(ch) > 3 and ch[3] is not None else ()
        return A.Alloc(str(ch[1]), sup[1], sup[2], tuple(shape), span=_span_of(meta))

    def sint(self, meta, ch):
        return int(ch[0])

    def neg_int(self, meta, ch):
        return -int(ch[1])

    # -- expressions ---------------------------------------------------------
    def number(self, meta, ch):
        return number_literal(str(ch[0]), _span_of(ch[0]), self.diags)

    def inf(self, meta, ch):
        return A.Const(float("inf"), span=_span_of(ch[0]))

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
        check_dtype(dtype, _span_of(ch[0]), self.diags)
        check_scope(scope, _span_of(ch[1]), self.diags)
        return ("sup", dtype, scope)

    def sub(self, meta, ch):
        return ("sub", tuple(c for c in ch if c is not None))

    def call(self, meta, ch):
        return self._call(str(ch[0]), tuple(ch[1:]), _span_of(meta), _span_of(ch[0]))

    def latex_call(self, meta, ch):
        name = str(ch[0])[1:]
        return self._call(name, tuple(ch[1:]), _span_of(meta), _span_of(ch[0]))

    def _call(self, name, args, span, name_span):
        return make_call(name, args, span, name_span, self.diags)

    def paren(self, meta, ch):
        # parentheses leave no node (the printer puts back the ones precedence needs);
        # the parse tree keeps them so the depth check counts them as nesting
        return next(c for c in ch if not isinstance(c, Token))

    def frac(self, meta, ch):
        return A.BinOp("/", ch[1], ch[2], span=_span_of(meta))


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
        # fold the flat chain left-associatively; each partial sum spans from the start
        # of the chain (so a parenthesized first operand keeps its parenthesis) to the
        # end of its right operand
        acc = ch[0]
        start = _span_of(meta)
        for i in range(1, len(ch), 2):
            op = table.get(str(ch[i]), str(ch[i]))
            rhs = ch[i + 1]
            span = None
            if start is not None and rhs.span is not None:
                span = A.Span(start.line, start.col, rhs.span.end_line, rhs.span.end_col, start.start, rhs.span.end)
            elif i + 2 >= len(ch):
                span = start
            acc = A.BinOp(op, acc, rhs, span=span)
        return acc

    def or_chain(self, meta, ch):
        return self._chain(meta, ch, _LOGIC) if len(ch) > 1 else ch[0]

    def and_chain(self, meta, ch):
        return self._chain(meta, ch, _LOGIC) if len(ch) > 1 else ch[0]

    def arith_chain(self, meta, ch):
        return self._chain(meta, ch, {}) if len(ch) > 1 else ch[0]

    def term_chain(self, meta, ch):
        return self._chain(meta, ch, _MUL) if len(ch) > 1 else ch[0]


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
    "ALLOC": "'\\alloc'",
    "$END": "end of input",
}


def _words(expected: Iterable[str], lark: Lark) -> str:
    names = []
    for t in sorted(set(expected)):
        if t in _TOKEN_WORDS:
            names.append(_TOKEN_WORDS[t])
            continue
        try:
            pat = lark.get_terminal(t).pattern
        except KeyError:  # an anonymous terminal Lark does not list: its token name says it
            pat = None
        names.append(f"'{pat.value}'" if pat is not None and pat.type == "str" else t.lower())
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
    return error("E001", msg, span, notes=_hint(e, lark) + _comment_trap(text, line))


def _comment_trap(text: str, line: int) -> tuple[str, ...]:
    """A note when the error line or the one before it has a `` %`` after a space: that starts
    a comment, so what looked like a modulo swallowed the rest of its line."""
    lines = text.splitlines()
    for n in (line - 1, line - 2):
        if 0 <= n < len(lines) and not lines[n].lstrip().startswith("%") and re.search(r"\S\s+%", lines[n]):
            return (f"line {n + 1}: '%' after a space starts a comment, so the rest of that line was ignored; "
                    "for the modulo operator write it without the space (i%4)",)
    return ()


#: the common mistakes, each a few minimal programs that make the LALR parser fail in the
#: same state as the mistake does; Lark's ``match_examples`` finds the one that matches.
def _missing_semicolon_examples() -> list[str]:
    lasts = ["1", "1.5", "x", "inf", "B^{f32,g}_{i}", "B^{f32,g}", "exp(1)", "(1)", "f32(1)", "\\exp{1}"]
    nexts = ["C^{f32,g}=1;];", "];", "}", "L^{4}_{j=0}[C^{f32,g}=1;];", ""]
    return [f"L^{{4}}_{{i=0}}[A^{{f32,g}}_{{i}}={a} {b}" for a in lasts for b in nexts]


_HINT_EXAMPLES = {
    "is a ';' missing? Every statement ends with ';' (C^{f32,g}_{i} = A^{f32,g}_{i};)": _missing_semicolon_examples(),
    "is a ']' missing? A loop body '[ ... ];' is not closed": [
        "L^{4}_{i=0}[A^{f32,g}_{i}=1;", "\\kernel k()->(){L^{4}_{i=0}[A^{f32,g}_{i}=1;}",
        "L^{4}_{i=0}[A^{f32,g}_{i}=1;;", "L^{4}_{i=0}[", "L^{4}_{i=0}[L^{4}_{j=0}[A^{f32,g}_{i}=1;];",
        "\\kernel k()->(){L^{4}_{i=0}[}", "\\kernel k()->(){L^{4}_{i=0}[L^{4}_{j=0}[A^{f32,g}_{i}=1;];}",
    ],
    "malformed loop header: write K^{extent}_{var=start} with K one of L P V U B and integer "
    "extent and start, e.g. L^{16}_{i=0}": [
        "L^{N}_{i=0}[A^{f32,g}=1;];", "L^{4}_{i}[A^{f32,g}=1;];", "L^{4}[A^{f32,g}=1;];",
        "B^{n}_{tx=0}[A^{f32,g}=1;];", "L^{4}_{i=j}[A^{f32,g}=1;];",
    ],
    "a loop body is closed by '];'": [
        "L^{4}_{i=0}[A^{f32,g}_{i}=1;]", "L^{4}_{i=0}[A^{f32,g}_{i}=1;] L^{4}_{i=0}[A^{f32,g}_{i}=1;];",
        "\\kernel k()->(){L^{4}_{i=0}[A^{f32,g}_{i}=1;]}",
    ],
    "is '=' missing? A statement is 'target = value;'": [
        "A^{f32,g}_{i} 1;", "A^{f32,g}_{i} B^{f32,g};", "A^{f32,g} 1;", "L^{4}_{i=0}[A^{f32,g}_{i};];",
    ],
}


@lru_cache(maxsize=1)
def _hint_table() -> dict[int, str]:
    """LALR state -> hint. Lark's ``UnexpectedInput.match_examples`` compares whole
    parser states, stack depth included, so an example written at top level would not
    match the same mistake inside a loop; this keys on the state number alone."""
    labels: dict[int, list[str]] = {}
    lark = _lark()
    for label, examples in _HINT_EXAMPLES.items():
        for ex in examples:
            try:
                lark.parse(ex)
            except UnexpectedToken as e:
                if getattr(e, "state", None) is not None:
                    seen = labels.setdefault(e.state.position, [])
                    if label not in seen:
                        seen.append(label)
            except UnexpectedInput:
                continue  # an example that fails elsewhere (not at a token) teaches no state
    # LALR merges some states (a target and an operand both end in '}'), so one state
    # may stand for two mistakes; say both
    return {pos: " Or: ".join(ls) for pos, ls in labels.items()}


def _hint(e: UnexpectedInput, lark: Lark) -> tuple[str, ...]:
    state = getattr(e, "state", None)
    if not isinstance(e, UnexpectedToken) or state is None:
        return ()
    label = _hint_table().get(state.position)
    return (label,) if label else ()


# ---------------------------------------------------------------------------
# public API


# Comments are %ignore'd by the grammar; the lexer hands each COMMENT token to this
# callback, which files it in the current thread's sink (one Lark instance is shared, so
# the sink cannot live on it).
_SINK = threading.local()


def _on_comment(tok: Token) -> Token:
    sink = getattr(_SINK, "comments", None)
    if sink is not None:
        sink.append(tok)
    return tok


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(
        grammar_path().read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
        lexer_callbacks={"COMMENT": _on_comment},
    )


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


def _choose_parser(parser: str | None) -> str:
    choice = parser or os.environ.get("LEIRC_PARSER") or "fast"
    if choice not in PARSERS:
        raise ValueError(f"unknown parser {choice!r} (LEIRC_PARSER or parser=): expected one of {', '.join(PARSERS)}")
    return choice


@A.collector_paused()
def parse(data: str | bytes, file: str = "<input>", *, parser: str | None = None) -> ParseResult:
    """Parse a LEIR file (declared kernels or a bare Step-TP body).

    ``parser`` is ``"fast"`` (the default: :mod:`leirc.lang.fastparse`, with Lark for
    syntax errors) or ``"lark"``; without it, the environment's ``LEIRC_PARSER`` decides.
    Both give the same result."""
    use_fast = _choose_parser(parser) == "fast"
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
    module, diags, comments = _parse_text(text, use_fast)
    if module is None:
        if diags and diags[0].code == "E001":
            recovered = _recover(text, use_fast)
            if recovered is not None:
                rdiags, partial = recovered
                return ParseResult(None, [d.with_file(file) for d in rdiags], text, partial)
        return ParseResult(None, [d.with_file(file) for d in diags], text)
    module = _attach_comments(module, comments)
    return ParseResult(module, [d.with_file(file) for d in diags], text)


#: a comment as the parsers collect it: (offset, line, text without trailing whitespace)
CommentAt = tuple[int, int, str]


def _parse_text(text: str, use_fast: bool = True) -> tuple[A.Module | None, list[Diagnostic], list[CommentAt]]:
    """One parse: the module (``None`` on a syntax or depth error), the diagnostics
    (without file names) and the comments."""
    if use_fast:
        done = parse_fast(text)
        if done is not None:
            return done
    module, diags, toks = _parse_text_lark(text)
    return module, diags, [(t.start_pos, t.line, str(t).rstrip()) for t in toks]


def _parse_text_lark(text: str) -> tuple[A.Module | None, list[Diagnostic], list[Token]]:
    diags: list[Diagnostic] = []
    lark = _lark()
    comments: list[Token] = []
    _SINK.comments = comments
    try:
        tree = lark.parse(text)
    except UnexpectedInput as e:
        _SINK.comments = None
        return None, [_syntax_error(e, text, lark)], comments
    except RecursionError:
        return None, [error("E003", "input nests too deeply", None)], comments
    finally:
        _SINK.comments = None
    try:
        depth_diag = _depth_check(tree)
        if depth_diag is not None:
            return None, [depth_diag], comments
        module = _Builder(diags).transform(tree)
        deep = ast_depth_diagnostic(module)
        if deep is not None:
            return None, [deep], comments
    except VisitError as e:  # pragma: no cover - a bug in the builder, reported not raised
        if isinstance(e.orig_exc, RecursionError):
            return None, [error("E003", "input nests too deeply", None)], comments
        raise
    except RecursionError:
        return None, [error("E003", "input nests too deeply", None)], comments
    return module, diags, comments


# ---------------------------------------------------------------------------
# recovery: one parse per \kernel

_KERNEL_OR_COMMENT = re.compile(r"(?P<comment>(?<!\S)%[^\n]*)|(?P<kernel>\\kernel(?![A-Za-z0-9_]))")
_KERNEL_KW = "\\kernel"


def kernel_starts(text: str) -> list[int]:
    """Offsets of the ``\\kernel`` keywords of ``text`` (not those inside comments)."""
    return [m.start() for m in _KERNEL_OR_COMMENT.finditer(text) if m.group("kernel")]


def _blank(prefix: str) -> str:
    # keeps newlines, so lines, columns and offsets of what follows are unchanged
    return re.sub(r"[^\n]", " ", prefix)


def _recover(text: str, use_fast: bool = True) -> tuple[list[Diagnostic], A.Module] | None:
    starts = kernel_starts(text)
    if len(starts) < 2:
        return None
    # the first segment starts at 0 so anything before the first kernel is parsed with it
    bounds = [0] + starts[1:]
    ends = starts[1:] + [len(text)]
    kernels: list[A.Kernel] = []
    comments: list[CommentAt] = []
    diags: list[Diagnostic] = []
    for a, b in zip(bounds, ends):
        seg = _blank(text[:a]) + text[a:b]
        m, ds, cs = _parse_text(seg, use_fast)
        if m is None and b < len(text) and ds and ds[0].message.startswith("unexpected end of input"):
            # the kernel runs into the next one: report that, as the whole-file parse does
            _, ds, _ = _parse_text(seg + _KERNEL_KW, use_fast)
        diags.extend(ds)
        if m is not None:
            kernels.extend(m.kernels)
            comments.extend(cs)
    partial = _attach_comments(A.Module(tuple(kernels)), comments)
    return diags, partial


# ---------------------------------------------------------------------------
# comments as trivia

_CONTAINERS = (A.Loop, A.Region, A.Kernel)


def _body_of(node) -> tuple:
    return node.kernels if isinstance(node, A.Module) else node.body


def _with_body(node, items: tuple):
    return replace(node, kernels=items) if isinstance(node, A.Module) else replace(node, body=items)


def _attach_comments(module: A.Module, comments: list[CommentAt]) -> A.Module:
    """Hang every comment on the nearest item, kernel or the module.

    Within a container (module, kernel, loop, region) a comment is: inside a child
    container -> handled there; inside a statement -> leading comment of it; on the line
    where the previous child ends -> that child's trailing comment; on the container's
    own first line -> its ``head``; before a child -> leading comment of the next child;
    otherwise ``inner`` (before the closing bracket). A bare body's kernel is the root.
    """
    if not comments:
        return module
    cs = sorted(comments, key=lambda c: c[0])
    if len(module.kernels) == 1 and not module.kernels[0].declared:
        return replace(module, kernels=(_attach_into(module.kernels[0], cs, root=True),))
    return _attach_into(module, cs, root=True)


def _blanked(where: str, cs: list, owner_line: int | None, prev_end_line: int | None) -> list[A.Comment]:
    """Comments of one position with blank-line markers where the source had them."""
    out: list[A.Comment] = []
    last = prev_end_line
    for pos, line, text in cs:
        if last is not None and line > last + 1 and (out or where == "inner"):
            out.append(A.Comment(where, ""))
        out.append(A.Comment(where, text))
        last = line
    if where == "leading" and out and owner_line is not None and last is not None and owner_line > last + 1:
        out.append(A.Comment(where, ""))
    return out


def _attach_into(node, cs: list, root: bool = False):
    items = _body_of(node)
    n = len(items)
    spans = [it.span for it in items]
    inside: list[list] = [[] for _ in range(n)]
    leading: list[list] = [[] for _ in range(n)]
    trailing: list[list] = [[] for _ in range(n)]
    head: list = []
    inner: list = []
    for c in cs:
        pos, line, _ = c
        holder = next((i for i, sp in enumerate(spans) if sp is not None and sp.start <= pos < sp.end), None)
        if holder is not None:
            (inside if isinstance(items[holder], _CONTAINERS) else leading)[holder].append(c)
            continue
        prev = None
        for i, sp in enumerate(spans):
            if sp is not None and sp.end <= pos:
                prev = i
        if prev is not None and spans[prev].end_line == line:
            trailing[prev].append(c)
            continue
        if not root and node.span is not None and line == node.span.line:
            head.append(c)
            continue
        nxt = next((i for i, sp in enumerate(spans) if sp is not None and sp.start > pos), None)
        if nxt is not None:
            leading[nxt].append(c)
        else:
            inner.append(c)
    new_items = []
    for i, it in enumerate(items):
        if inside[i]:
            it = _attach_into(it, inside[i])
        extra = _blanked("leading", leading[i], spans[i].line if spans[i] else None, None)
        extra += [A.Comment("trailing", t) for _, _, t in trailing[i]]
        if extra:
            it = replace(it, comments=tuple(extra) + it.comments)
        new_items.append(it)
    node = _with_body(node, tuple(new_items))
    own = [A.Comment("head", t) for _, _, t in head]
    last_end = next((sp.end_line for sp in reversed(spans) if sp is not None), None)
    own += _blanked("inner", inner, None, last_end)
    if own:
        node = replace(node, comments=node.comments + tuple(own))
    return node


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
            if node.data == "paren":
                d += 2  # a parenthesis is a level of nesting, as deep as an operator's
            if node.data in ("arith_chain", "term_chain", "and_chain", "or_chain") and len(node.children) > 2 * MAX_CHAIN:
                return error("E003", f"an operator chain has more than {MAX_CHAIN} operands", _span_of(node.meta))
            for c in node.children:
                if isinstance(c, Tree):
                    stack.append((c, d + 1))
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

    k2 = A.Kernel(_kernel_name(name), tuple(mk(p) for p in inputs), tuple(mk(p) for p in outputs), k.body, declared=False, span=k.span,
                  comments=k.comments)
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
