"""Editor features over a :class:`~leirc.ide.document.Document`: hover, definition,
references, rename, symbols, folding, semantic tokens, completion, signature help,
inlay hints, formatting.

Every function takes document positions (1-based line and column in code points) and
returns document spans; the language server only converts them to LSP's UTF-16
positions. Features work on the kernels that parse; a broken kernel elsewhere in the
file does not turn them off, and a position inside a broken kernel gets the answers that
need no AST (completion of keywords, folding of comments, lexical tokens).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Optional

from ..lang import ast as A
from ..lang.checker import binding_axis
from ..lang.parser import parse
from ..lang.printer import PRETTY, print_kernel, print_module
from .document import Document, Segment
from .edits import TextEdit
from .navigation import Occurrence, SymbolIndex, index_of, rename_problem, word_at

#: intrinsic -> (signature parameters, one-line doc)
INTRINSIC_DOCS: dict[str, tuple[tuple[str, ...], str]] = {
    "exp": (("x",), "e raised to x"),
    "log": (("x",), "natural logarithm (NaN for x < 0, -inf at 0)"),
    "sqrt": (("x",), "square root (NaN for x < 0)"),
    "rsqrt": (("x",), "1 / sqrt(x)"),
    "abs": (("x",), "absolute value"),
    "erf": (("x",), "the error function"),
    "tanh": (("x",), "hyperbolic tangent"),
    "sigmoid": (("x",), "1 / (1 + exp(-x))"),
    "floor": (("x",), "largest integer not above x (same dtype)"),
    "ceil": (("x",), "smallest integer not below x (same dtype)"),
    "pow": (("x", "y"), "x raised to y"),
    "max": (("a", "b", "..."), "the largest argument; NaN if any argument is NaN"),
    "min": (("a", "b", "..."), "the smallest argument; NaN if any argument is NaN"),
    "if_then_else": (("cond", "then", "else"), "then if cond is true, else else (both are evaluated)"),
}
DTYPE_DOCS = {
    "f16": "16-bit IEEE float", "bf16": "bfloat16 (8-bit exponent, 7-bit mantissa)", "f32": "32-bit IEEE float",
    "f64": "64-bit IEEE float", "i8": "8-bit signed integer", "i16": "16-bit signed integer",
    "i32": "32-bit signed integer", "i64": "64-bit signed integer", "u8": "8-bit unsigned integer",
    "u16": "16-bit unsigned integer", "u32": "32-bit unsigned integer (wraps)", "u64": "64-bit unsigned integer (wraps)",
    "bool": "boolean",
}
LOOP_KIND_DOCS = {
    "L": "serial loop", "P": "parallel loop (iterations must be independent)",
    "V": "vectorized loop (iterations must be independent)", "U": "unrolled loop",
    "B": "loop bound to a GPU axis (the index name says which: tx, ty, tz, bx, by, bz)",
}


@dataclass(frozen=True)
class Hover:
    markdown: str
    span: A.Span


@dataclass
class Symbol:
    name: str
    kind: str  # "kernel" | "nest" | "loop" | "statement" | "tensor"
    detail: str
    span: A.Span
    selection: A.Span
    children: list["Symbol"] = field(default_factory=list)


@dataclass(frozen=True)
class Completion:
    label: str
    kind: str  # "tensor" | "index" | "function" | "keyword" | "type" | "scope" | "snippet" | "strategy"
    detail: str = ""
    insert_text: Optional[str] = None
    snippet: bool = False
    documentation: str = ""


@dataclass(frozen=True)
class Signature:
    label: str
    parameters: tuple[str, ...]
    active: int
    documentation: str


@dataclass(frozen=True)
class InlayHint:
    line: int
    col: int
    label: str
    tooltip: str = ""


@dataclass(frozen=True)
class Token:
    line: int
    col: int
    length: int
    type: str
    modifiers: tuple[str, ...] = ()


#: semantic token types and modifiers, in legend order (LSP standard names)
TOKEN_TYPES = ("keyword", "variable", "parameter", "function", "type", "enumMember", "number", "comment", "operator",
               "macro")
TOKEN_MODIFIERS = ("declaration", "readonly", "modification", "defaultLibrary")


class RenameError(ValueError):
    """The rename cannot be done (the message says why)."""


# ---------------------------------------------------------------------------
# helpers


def _located(doc: Document, line: int, col: int):
    """(segment, local offset, index or None) for a document position."""
    off = doc.offset_of(line, col)
    seg = doc.segment_at_offset(off)
    local = off - seg.offset
    idx = index_of(seg.kernel, seg.text) if seg.kernel is not None else None
    return seg, local, idx


def _doc_span(doc: Document, seg: Segment, start: int, end: int) -> A.Span:
    return doc.span(seg.offset + start, seg.offset + end)


def _fmt_shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]" if shape is not None else "[?]"


def _enclosing_loops(kernel: A.Kernel, offset: int) -> list[A.Loop]:
    out: list[A.Loop] = []

    def visit(body):
        for it in body:
            sp = getattr(it, "span", None)
            if sp is None or not (sp.start <= offset <= sp.end):
                continue
            if isinstance(it, A.Loop):
                out.append(it)
            inner = getattr(it, "body", None)
            if isinstance(inner, tuple):
                visit(inner)

    visit(kernel.body)
    return out


def _loop_text(lp: A.Loop) -> str:
    kind = A.LOOP_KIND_NAMES.get(lp.kind, lp.kind)
    s = f"`{lp.kind}` {kind} loop **{lp.var}**: {lp.extent} iterations, {lp.var} = {lp.start} .. {lp.start + lp.extent - 1}"
    if lp.kind == "B":
        ax = binding_axis(lp.var)
        if ax is not None:
            s += f"; bound to {'threadIdx' if ax[0] == 'thread' else 'blockIdx'}.{ax[1]}"
    return s


def _tensor_text(seg: Segment, name: str) -> str:
    k = seg.kernel
    res = seg.result
    info = res.tensors.get(name) if res is not None else None
    if info is not None:
        scope = A.SCOPE_NAMES.get(info.scope, info.scope)
        return f"tensor **{name}**: `{info.dtype}{_fmt_shape(info.shape)}` · {scope} · {info.role}"
    p = k.param(name) if k is not None else None
    if p is not None:
        role = "input" if p in k.inputs else "output"
        return f"tensor **{name}**: `{p.dtype}{_fmt_shape(p.shape)}` · {role}"
    return f"tensor **{name}**"


# ---------------------------------------------------------------------------
# hover, definition, references, rename


def hover(doc: Document, line: int, col: int) -> Optional[Hover]:
    seg, local, idx = _located(doc, line, col)
    w = word_at(seg.text, local)
    if idx is not None:
        o = idx.at(local)
        if o is not None:
            span = _doc_span(doc, seg, o.start, o.end)
            if o.kind == "tensor":
                return Hover(_tensor_text(seg, o.name), span)
            lp = idx.loops.get(o.symbol)
            if lp is not None:
                return Hover(_loop_text(lp), span)
    if w is None:
        return None
    start, end, word = w
    span = _doc_span(doc, seg, start, end)
    if word in INTRINSIC_DOCS or word in A.INTRINSIC_ALIASES:
        name = A.INTRINSIC_ALIASES.get(word, word)
        params, text = INTRINSIC_DOCS[name]
        return Hover(f"`{name}({', '.join(params)})` — {text}", span)
    if word in DTYPE_DOCS:
        return Hover(f"`{word}` — {DTYPE_DOCS[word]}", span)
    if word in A.LOOP_KIND_NAMES and seg.kernel is not None:
        for lp in _enclosing_loops(seg.kernel, local):
            if lp.span is not None and lp.span.start == start:
                return Hover(_loop_text(lp), span)
        return Hover(f"`{word}` — {LOOP_KIND_DOCS[word]}", span)
    if word == "kernel" and seg.kernel is not None:
        from ..lang.printer import print_signature

        return Hover(f"`{print_signature(seg.kernel, PRETTY)}`", span)
    if word in A.SCOPES and seg.text[max(0, start - 1):start] == ",":
        return Hover(f"`{word}` — {A.SCOPE_NAMES[word]} memory", span)
    return None


def _occurrence(doc: Document, line: int, col: int) -> tuple[Segment, Optional[SymbolIndex], Optional[Occurrence]]:
    seg, local, idx = _located(doc, line, col)
    return seg, idx, (idx.at(local) if idx is not None else None)


def definition(doc: Document, line: int, col: int) -> Optional[A.Span]:
    seg, idx, o = _occurrence(doc, line, col)
    if o is None:
        return None
    d = idx.definition(o.symbol)
    return _doc_span(doc, seg, d.start, d.end) if d is not None else None


def references(doc: Document, line: int, col: int, include_declaration: bool = True) -> list[A.Span]:
    seg, idx, o = _occurrence(doc, line, col)
    if o is None:
        return []
    return [_doc_span(doc, seg, r.start, r.end) for r in idx.of(o.symbol) if include_declaration or not r.definition]


def highlights(doc: Document, line: int, col: int) -> list[tuple[A.Span, bool]]:
    """(span, is_write) of every occurrence of the symbol under the cursor."""
    seg, idx, o = _occurrence(doc, line, col)
    if o is None:
        return []
    return [(_doc_span(doc, seg, r.start, r.end), r.write or r.definition) for r in idx.of(o.symbol)]


def prepare_rename(doc: Document, line: int, col: int) -> Optional[tuple[A.Span, str]]:
    seg, idx, o = _occurrence(doc, line, col)
    if o is None:
        return None
    return _doc_span(doc, seg, o.start, o.end), o.name


def rename(doc: Document, line: int, col: int, new_name: str) -> list[TextEdit]:
    """Edits renaming the tensor or loop index under the cursor; raises
    :class:`RenameError` when there is none or the new name is not acceptable. The
    renamed kernel is re-checked: a rename that would add an error is refused."""
    seg, idx, o = _occurrence(doc, line, col)
    if o is None:
        raise RenameError("no tensor or loop index here")
    problem = rename_problem(idx, o, new_name)
    if problem:
        raise RenameError(problem)
    occ = idx.of(o.symbol)
    text = seg.text
    parts, last = [], 0
    for r in occ:
        parts.append(text[last:r.start])
        parts.append(new_name)
        last = r.end
    parts.append(text[last:])
    from .document import analyze_segment

    before = sum(d.is_error for d in seg.analysis.diagnostics)
    after = analyze_segment("".join(parts), seg.index == len(doc.segments) - 1)
    if sum(d.is_error for d in after.diagnostics) > before:
        first = next(d for d in after.diagnostics if d.is_error)
        raise RenameError(f"renaming to '{new_name}' would make the kernel invalid: {first.message}")
    edits = []
    for r in occ:
        sp = _doc_span(doc, seg, r.start, r.end)
        edits.append(TextEdit(sp.line, sp.col, sp.end_line, sp.end_col, new_name))
    return edits


# ---------------------------------------------------------------------------
# outline: symbols, folding, semantic tokens


def _nest_name(lp: A.Loop) -> str:
    vars_, extents = [], []
    node = lp
    while isinstance(node, A.Loop):
        vars_.append(node.var)
        extents.append(str(node.extent))
        node = node.body[0] if len(node.body) == 1 and isinstance(node.body[0], A.Loop) else None
    return f"{'×'.join(extents)} nest ({', '.join(vars_)})"


def document_symbols(doc: Document) -> list[Symbol]:
    """Kernels, their nests and statements. Kernel by kernel: each kernel's tree is built
    in its segment's coordinates, cached by the segment's text, and moved to its place."""
    out: list[Symbol] = []
    for seg, k in doc.kernels():
        if k.span is None and not seg.text.strip():
            continue
        if k.span is None:  # a bare body: its span is the segment's
            kspan = doc.span(seg.offset, seg.offset + len(seg.text))
            out.append(_kernel_symbol(k, seg.text, kspan, seg.to_doc))
            continue
        out.append(_moved(kernel_symbols(seg), seg.line0, seg.offset))
    return out


def kernel_symbols(seg: Segment) -> Optional[Symbol]:
    """The symbol tree of the segment's kernel in the segment's own coordinates (line 1 is
    its first line), cached by its text; None for a segment without a declared kernel span.
    :func:`document_symbols` moves it into place; the language server converts it once per
    kernel text and moves the converted tree."""
    k = seg.kernel
    if k is None or k.span is None:
        return None
    key = (seg.text, k.name)
    with _TOKEN_LOCK:
        local = _SYMBOL_CACHE.get(key)
        if local is not None:
            _SYMBOL_CACHE.move_to_end(key)
            return local
    local = _kernel_symbol(k, seg.text, k.span, lambda sp: sp)
    with _TOKEN_LOCK:
        _SYMBOL_CACHE[key] = local
        while len(_SYMBOL_CACHE) > 512:
            _SYMBOL_CACHE.popitem(last=False)
    return local


_SYMBOL_CACHE: "OrderedDict[tuple[str, str], Symbol]" = OrderedDict()


def _moved(s: Symbol, lines: int, offset: int) -> Symbol:
    from .document import shift_span

    return Symbol(s.name, s.kind, s.detail, shift_span(s.span, lines, offset), shift_span(s.selection, lines, offset),
                  [_moved(c, lines, offset) for c in s.children])


def _kernel_symbol(k: A.Kernel, text: str, kspan: A.Span, place) -> Symbol:
    """The symbol tree of kernel ``k`` (parsed from the segment ``text``); ``place`` maps a
    segment span to where the tree's spans go (the document, or the segment itself)."""
    from ..lang.printer import print_item, print_signature, COMPACT

    sel = place(kspan) if k.span is not None else kspan
    kspan = sel
    if k.declared and k.span is not None:
        m = re.compile(r"\\kernel\s+(" + re.escape(k.name) + ")").match(text, k.span.start)
        if m:
            line = text.count("\n", 0, m.start(1)) + 1
            col = m.start(1) - (text.rfind("\n", 0, m.start(1)) + 1) + 1
            sel = place(A.Span(line, col, line, col + len(k.name), m.start(1), m.end(1)))
    ks = Symbol(k.name, "kernel", print_signature(k, PRETTY) if k.declared else "bare body", kspan, sel)

    def items(body, into: list[Symbol]):
        for it in body:
            if it.span is None:
                continue
            sp = place(it.span)
            if isinstance(it, A.Loop):
                s = Symbol(_nest_name(it), "loop", f"{A.LOOP_KIND_NAMES.get(it.kind, it.kind)} loop {it.var}",
                           sp, A.Span(sp.line, sp.col, sp.line, sp.col + 1, sp.start, sp.start + 1))
                inner = it
                while len(inner.body) == 1 and isinstance(inner.body[0], A.Loop):
                    inner = inner.body[0]
                items(inner.body, s.children)
                into.append(s)
            elif isinstance(it, A.Assign):
                line = print_item(it, COMPACT).rstrip(";")
                into.append(Symbol(it.target.name + " = …", "statement", line[:120], sp, sp))
            else:
                body = getattr(it, "body", None)
                s = Symbol(type(it).__name__.lower() + (f" {it.name}" if isinstance(getattr(it, "name", None), str)
                                                        else ""), "statement", "", sp, sp)
                if isinstance(body, tuple):
                    items(body, s.children)
                into.append(s)

    items(k.body, ks.children)
    return ks


def folding_ranges(doc: Document) -> list[tuple[int, int, str]]:
    """(first line, last line, kind) with kind "region" or "comment" (1-based lines)."""
    out: list[tuple[int, int, str]] = []
    for seg, k in doc.kernels():
        spans = [k.span] if k.declared and k.span is not None else []

        def visit(body):
            for it in body:
                if it.span is not None and it.span.end_line > it.span.line:
                    spans.append(it.span)
                inner = getattr(it, "body", None)
                if isinstance(inner, tuple):
                    visit(inner)

        visit(k.body)
        for sp in spans:
            d = seg.to_doc(sp)
            if d.end_line > d.line:
                out.append((d.line, d.end_line, "region"))
    # runs of comment lines
    lines = doc.text.split("\n")
    run = None
    for i, ln in enumerate(lines + [""], start=1):
        if ln.lstrip().startswith("%") and i <= len(lines):
            run = run or i
            continue
        if run is not None and i - 1 > run:
            out.append((run, i - 1, "comment"))
        run = None
    return sorted(set(out))


_LEX = re.compile(r"""
    (?P<comment>(?<!\S)%[^\n]*)
  | (?P<keyword>\\kernel|\\alloc|\\[a-zA-Z]+)
  | (?P<header>[LPVUB](?=\s*(?:\^\{\s*\d+\s*\}\s*_\{|_\{\s*[A-Za-z][A-Za-z0-9]*\s*=)))
  | (?P<sup>\^\{\s*(?P<dtype>[A-Za-z][A-Za-z0-9]*)\s*(?:,\s*(?P<scope>[A-Za-z]+)\s*)?\})
  | (?P<number>(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)
  | (?P<name>[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*)
""", re.VERBOSE)


def semantic_tokens(doc: Document) -> list[Token]:
    """Tokens in document order. Lexical (so a broken kernel is still coloured), with
    the roles of names taken from the parsed kernels: inputs are ``readonly``
    variables, loop indices ``parameter``s, intrinsics ``function``s.

    Incremental: each segment (kernel) is lexed on its own and cached by its text and
    roles (:func:`segment_tokens`), so an edit re-lexes only its kernel."""
    out: list[Token] = []
    for seg in doc.segments:
        for t in segment_tokens(seg.text, _roles(seg)):
            out.append(Token(t.line + seg.line0, t.col, t.length, t.type, t.modifiers))
    return out


def _roles(seg: Segment) -> tuple[tuple[str, str], ...]:
    k = seg.kernel
    if k is None:
        return ()
    return tuple((p.name, "input") for p in k.inputs) + tuple((p.name, "output") for p in k.outputs)


_TOKEN_CACHE: "OrderedDict[tuple[str, tuple], tuple[Token, ...]]" = OrderedDict()
_TOKEN_LOCK = threading.Lock()
_BRACKET_AHEAD = re.compile(r"\s*\[")


def segment_tokens(text: str, roles: tuple[tuple[str, str], ...] = ()) -> tuple[Token, ...]:
    """The tokens of one segment's text (lines counted from 1 at its first line; its
    blanked start lexes as spaces), cached by text and roles (least recently used out)."""
    key = (text, roles)
    with _TOKEN_LOCK:
        hit = _TOKEN_CACHE.get(key)
        if hit is not None:
            _TOKEN_CACHE.move_to_end(key)
            return hit
    toks = tuple(_lex_tokens(text, dict(roles)))
    with _TOKEN_LOCK:
        _TOKEN_CACHE[key] = toks
        while len(_TOKEN_CACHE) > 512:
            _TOKEN_CACHE.popitem(last=False)
    return toks


def _lex_tokens(text: str, roles: dict[str, str]) -> list[Token]:
    out: list[Token] = []
    line, line_start = 1, 0

    def add(start: int, length: int, typ: str, mods: tuple = ()):
        nonlocal line, line_start
        nl = text.find("\n", line_start)
        while 0 <= nl < start:  # tokens come in order: advance the line counter
            line, line_start = line + 1, nl + 1
            nl = text.find("\n", line_start)
        # tokens never span lines (a multi-line token is split by clients anyway)
        if 0 <= nl < start + length:
            length = nl - start
        if length > 0:
            out.append(Token(line, start - line_start + 1, length, typ, mods))

    prev_kernel_kw = False
    for m in _LEX.finditer(text):
        kind = m.lastgroup
        s = m.start()
        if kind == "comment":
            add(s, m.end() - s, "comment")
        elif kind == "keyword":
            add(s, m.end() - s, "keyword" if m.group(0) in ("\\kernel", "\\alloc") else "macro")
            prev_kernel_kw = m.group(0) == "\\kernel"
            continue
        elif kind == "header":
            add(s, 1, "keyword")
        elif kind == "sup" or kind == "dtype":
            ds, de = m.span("dtype")
            add(ds, de - ds, "type")
            if m.group("scope"):
                ss, se = m.span("scope")
                add(ss, se - ss, "enumMember")
        elif kind == "number":
            add(s, m.end() - s, "number")
        elif kind == "name":
            word = m.group(0)
            after = text[m.end():m.end() + 1]
            if prev_kernel_kw:
                add(s, len(word), "function", ("declaration",))
            elif after == "(" and (word in INTRINSIC_DOCS or word in A.INTRINSIC_ALIASES or word in A.CAST_FUNCS):
                add(s, len(word), "function", ("defaultLibrary",))
            elif word in A.DTYPES and text[max(0, s - 1):s] in (":", " ") and _BRACKET_AHEAD.match(text, m.end()):
                add(s, len(word), "type")
            elif word in A.DTYPES and text[max(0, s - 2):s].strip().endswith(":"):
                add(s, len(word), "type")
            elif word[0].isupper() and after in ("^", "_", ":") or word in roles:
                role = roles.get(word)
                mods = ("readonly",) if role == "input" else ()
                if after == ":":
                    mods = mods + ("declaration",)
                add(s, len(word), "variable", mods)
            elif word == "align" or word == "inf":
                add(s, len(word), "keyword")
            else:
                add(s, len(word), "parameter")
        prev_kernel_kw = False
    return out


# ---------------------------------------------------------------------------
# completion, signature help


def completions(doc: Document, line: int, col: int) -> list[Completion]:
    """What may be typed at the cursor: dtypes after ``^{``, scopes after ``^{dtype,``,
    backslash keywords after ``\\``, loop headers and tensors/indices in scope elsewhere
    (trace files: :func:`trace_completions`)."""
    off = doc.offset_of(line, col)
    text = doc.text
    before = text[text.rfind("\n", 0, off) + 1:off]
    if re.search(r"\^\{\s*[A-Za-z0-9]*$", before):
        return [Completion(d, "type", DTYPE_DOCS.get(d, "")) for d in A.DTYPES]
    if re.search(r"\^\{\s*[A-Za-z0-9]+\s*,\s*[A-Za-z]*$", before):
        return [Completion(s, "scope", A.SCOPE_NAMES[s] + " memory") for s in A.SCOPES]
    if re.search(r":\s*[A-Za-z0-9]*$", before) and re.search(r"\\kernel", before):
        return [Completion(d, "type", DTYPE_DOCS.get(d, "")) for d in A.DTYPES]
    if re.search(r"\\[A-Za-z]*$", before):
        out = [Completion("\\kernel", "keyword", "a kernel definition",
                          insert_text="kernel ${1:name}(${2:A}: ${3:f32}[${4:16}]) -> (${5:Y}: ${3:f32}[${4:16}]) {\n  $0\n}",
                          snippet=True),
               Completion("\\alloc", "keyword", "a private tensor", insert_text="alloc ${1:T}^{${2:f32},${3:l}}[${4:16}];",
                          snippet=True)]
        out += [Completion("\\" + f, "function", "LaTeX spelling") for f in ("frac", "exp", "log", "sqrt", "max", "min",
                                                                            "cdot", "times")]
        return out
    seg = doc.segment_at_offset(off)
    local = off - seg.offset
    out: list[Completion] = []
    for kind in A.LOOP_KINDS:
        out.append(Completion(f"{kind}^{{}}_{{}}", "snippet", LOOP_KIND_DOCS[kind],
                              insert_text=f"{kind}^{{${{1:16}}}}_{{${{2:i}}=0}} [\n  $0\n];", snippet=True))
    k = seg.kernel
    if k is not None:
        idx = index_of(k, seg.text)
        seen = set()
        res = seg.result
        for o in idx.occurrences:
            if o.kind != "tensor" or o.name in seen:
                continue
            seen.add(o.name)
            info = res.tensors.get(o.name) if res is not None else None
            p = k.param(o.name)
            dtype = info.dtype if info is not None else (p.dtype if p is not None else "f32")
            scope = info.scope if info is not None else "g"
            out.append(Completion(o.name, "tensor", f"{dtype}{_fmt_shape(info.shape if info else (p.shape if p else None))}",
                                  insert_text=f"{o.name}^{{{dtype},{scope}}}_{{$1}}$0", snippet=True))
        for lp in _enclosing_loops(k, local):
            out.append(Completion(lp.var, "index", f"{A.LOOP_KIND_NAMES.get(lp.kind, lp.kind)} loop, extent {lp.extent}"))
    for name, (params, text_) in INTRINSIC_DOCS.items():
        out.append(Completion(name, "function", f"{name}({', '.join(params)})", documentation=text_,
                              insert_text=f"{name}($1)$0", snippet=True))
    for d in A.FLOAT_DTYPES + A.INT_DTYPES:
        out.append(Completion(d, "type", "cast to " + DTYPE_DOCS[d], insert_text=f"{d}($1)$0", snippet=True))
    return out


def signature_help(doc: Document, line: int, col: int) -> Optional[Signature]:
    """The intrinsic whose argument list holds the cursor, with the active argument."""
    off = doc.offset_of(line, col)
    text = doc.text
    depth, commas = 0, 0
    i = off - 1
    lo = max(0, off - 2000)
    while i >= lo:
        ch = text[i]
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            if depth == 0:
                if ch != "(":  # inside a subscript or a body, not an argument list
                    return None
                m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", text[max(0, i - 40):i])
                if not m:
                    return None
                name = A.INTRINSIC_ALIASES.get(m.group(1), m.group(1))
                if name in INTRINSIC_DOCS:
                    params, doc_ = INTRINSIC_DOCS[name]
                elif name in A.CAST_FUNCS:
                    params, doc_ = ("x",), "cast to " + DTYPE_DOCS.get(name, name)
                else:
                    return None
                active = min(commas, len(params) - 1)
                return Signature(f"{name}({', '.join(params)})", params, active, doc_)
            depth -= 1
        elif ch == "," and depth == 0:
            commas += 1
        elif ch == ";":
            return None
        i -= 1
    return None


# ---------------------------------------------------------------------------
# inlay hints, formatting


def inlay_hints(doc: Document, first_line: int = 1, last_line: Optional[int] = None) -> list[InlayHint]:
    """The inferred shape of each intermediate, after its name at its first write."""
    out: list[InlayHint] = []
    for seg, k in doc.kernels():
        res = seg.result
        if res is None:
            continue
        if seg.end_line < first_line or (last_line is not None and seg.line0 + 1 > last_line):
            continue  # only the kernels the editor shows
        idx = index_of(k, seg.text)
        done = set()
        for o in idx.occurrences:
            if o.kind != "tensor" or not o.definition or o.name in done:
                continue
            info = res.tensors.get(o.name)
            if info is None or info.role != "intermediate":
                continue
            done.add(o.name)
            # after the whole access (name, superscript and subscript)
            end = _access_end(seg.text, o.end)
            line, col = doc.position_of(seg.offset + end)
            if line < first_line or (last_line is not None and line > last_line):
                continue
            scope = A.SCOPE_NAMES.get(info.scope, info.scope)
            out.append(InlayHint(line, col, f": {info.dtype}{_fmt_shape(info.shape)}",
                                 f"{o.name}: {scope} intermediate, shape inferred from the subscripts that write it"))
    return out


def _access_end(text: str, i: int) -> int:
    """The offset after ``^{..}`` and ``_{..}`` groups starting at ``i``."""
    while i < len(text) and text[i] in "^_":
        j = i + 1
        while j < len(text) and text[j] in " \t":
            j += 1
        if j >= len(text) or text[j] != "{":
            break
        depth = 0
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        i = j + 1
    return min(i, len(text))


def format_document(doc: Document) -> Optional[str]:
    """The canonical (pretty) print of the whole document with its comments, or ``None``
    when it does not parse (formatting a broken file would lose text).

    Kernel by kernel: each segment's parse is the analysis's (cached), and each kernel's
    print is cached by its segment's text and the comments above it, so formatting after
    a one-line edit prints one kernel. The comments between two kernels end a segment's
    parse (module trivia) but lead the next kernel in a whole-file parse; they are moved
    there, so the result equals :func:`print_module` of the whole file
    (``tests/test_editor_incremental.py`` checks it differentially)."""
    segs = doc.segments
    modules = []
    for seg in segs:
        pr = seg.analysis.parse
        if pr.module is None or any(d.is_error for d in pr.diagnostics):
            return None
        modules.append(pr.module)
    if len(segs) == 1 or any(len(m.kernels) != 1 for m in modules):
        pr = parse(doc.text)  # a bare body, or a split the segments do not show: the plain way
        if pr.module is None or any(d.is_error for d in pr.diagnostics):
            return None
        return print_module(pr.module, PRETTY, comments=True)
    parts: list[str] = []
    carry: tuple[str, ...] = ()
    tail: tuple[str, ...] = ()
    for seg, m in zip(segs, modules):
        parts.append(_printed_kernel(seg.text, m.kernels[0], carry))
        tail = A.comments_at(m, "inner")
        lead = list(tail)
        while lead and lead[0] == "":
            lead.pop(0)  # the blank after a kernel is the separator's
        if lead and seg.text[len(seg.text.rstrip()):].count("\n") >= 2:
            lead.append("")  # a blank line between those comments and the next kernel
        carry = tuple(lead)
    text = "\n\n".join(parts) + "\n"
    if tail:
        text += "".join((t + "\n") if t else "\n" for t in tail)
    return text


_PRINT_CACHE: "OrderedDict[tuple[str, tuple[str, ...]], str]" = OrderedDict()


def _printed_kernel(seg_text: str, k: A.Kernel, lead: tuple[str, ...]) -> str:
    key = (seg_text, lead)
    with _TOKEN_LOCK:
        hit = _PRINT_CACHE.get(key)
        if hit is not None:
            _PRINT_CACHE.move_to_end(key)
            return hit
    if lead:
        k = replace(k, comments=tuple(A.Comment("leading", t) for t in lead) + k.comments)
    out = print_kernel(k, PRETTY, comments=True)
    with _TOKEN_LOCK:
        _PRINT_CACHE[key] = out
        while len(_PRINT_CACHE) > 512:
            _PRINT_CACHE.popitem(last=False)
    return out


def format_range(doc: Document, first_line: int, last_line: int) -> list[TextEdit]:
    """Edits that print each kernel touching lines ``first_line..last_line`` canonically
    (its own comments kept, those above and after it untouched). Kernels that do not
    parse are left as they are."""
    edits: list[TextEdit] = []
    for seg, k in doc.kernels():
        if not k.declared or k.span is None or seg.analysis.parse.module is None:
            continue
        if any(d.is_error for d in seg.analysis.parse.diagnostics):
            continue
        sp = seg.to_doc(k.span)
        if sp.end_line < first_line or sp.line > last_line:
            continue
        new = print_kernel(A.drop_comments(k, "leading", "trailing"), PRETTY, comments=True)
        if doc.text[sp.start:sp.end] != new:
            edits.append(TextEdit(sp.line, sp.col, sp.end_line, sp.end_col, new))
    return edits


# ---------------------------------------------------------------------------
# trace files (JSON lists of strategy steps, ``leirc apply --trace``)

_STRATEGY_KEY = re.compile(r'"strategy"\s*:\s*"([A-Za-z0-9_]*)')


def _strategies() -> dict:
    from ..strategies.base import all_strategies

    return {s.name: s for s in all_strategies()}


def trace_completions(text: str, line: int, col: int) -> list[Completion]:
    """Strategy names after ``"strategy": "``, and the argument names of the step's
    strategy inside its ``"args"`` object."""
    lines = text.split("\n")
    off = sum(len(ln) + 1 for ln in lines[:line - 1]) + col - 1
    before = text[:off]
    strategies = _strategies()
    # the last "strategy" key before the cursor names the step the cursor is in
    m = next(reversed(list(_STRATEGY_KEY.finditer(before))), None)
    in_args = m is not None and re.search(r'"args"\s*:\s*\{[^{}]*$', before[m.end():]) is not None
    if in_args and m.group(1) in strategies:
        return [Completion(a.name, "property", a.kind, documentation=a.help if hasattr(a, "help") else "")
                for a in strategies[m.group(1)].args]
    return [Completion(s.name, "strategy", ", ".join(f"{a.name}: {a.kind}" for a in s.args), documentation=s.summary)
            for s in strategies.values()]


def trace_hover(text: str, line: int, col: int) -> Optional[str]:
    """The summary of the strategy named under the cursor."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return None
    w = word_at(lines[line - 1], col - 1)
    s = _strategies().get(w[2]) if w else None
    if s is None:
        return None
    args = ", ".join(f"{a.name}: {a.kind}" for a in s.args)
    return f"strategy **{s.name}**({args}) — {s.summary}"


def trace_problems(text: str) -> list[tuple[int, int, str]]:
    """(line, col, message) for a trace that is not JSON or names unknown strategies."""
    import json

    try:
        json.loads(text)
    except ValueError as e:
        return [(getattr(e, "lineno", 1), getattr(e, "colno", 1), f"not valid JSON: {getattr(e, 'msg', str(e))}")]
    strategies = _strategies()
    out = []
    for m in _STRATEGY_KEY.finditer(text):
        if m.group(1) not in strategies:
            line = text.count("\n", 0, m.start(1)) + 1
            out.append((line, m.start(1) - (text.rfind("\n", 0, m.start(1)) + 1) + 1, f"unknown strategy '{m.group(1)}'"))
    return out
