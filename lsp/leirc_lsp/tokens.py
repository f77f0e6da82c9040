"""Semantic tokens in LSP's encoding, kernel by kernel.

LSP encodes each token relative to the one before it, so one segment's (kernel's) block
is the same wherever the segment sits, except for its first token. Each block is cached
by the segment's text, the roles of its names and the real text its first line begins
with (that text counts in UTF-16 columns); a request after a one-line edit encodes one
kernel and stitches the rest.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from leirc.ide import features
from leirc.ide.document import Document, Segment

from .positions import Lines

_TYPES = {t: i for i, t in enumerate(features.TOKEN_TYPES)}
_MODS = {m: 1 << i for i, m in enumerate(features.TOKEN_MODIFIERS)}

#: (segment text, roles, first-line prefix) -> (block, first (line, char), last (line, char));
#: block's first token is absolute in the segment (line 0 = the segment's first line)
_CACHE: "OrderedDict[tuple, tuple[list[int], tuple[int, int], tuple[int, int]]]" = OrderedDict()
_LOCK = threading.Lock()
CAPACITY = 512


def _encode_segment(doc: Document, seg: Segment):
    prefix = doc.text[seg.offset:seg.offset + seg.pad]
    roles = _roles(seg)
    key = (seg.text, roles, prefix)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    toks = features.segment_tokens(seg.text, roles)
    ascii_ = seg.text.isascii() and prefix.isascii()
    lines = None if ascii_ else Lines(prefix + seg.text[seg.pad:])
    block: list[int] = []
    first = last = (0, 0)
    prev_line = prev_char = 0
    for i, t in enumerate(toks):
        line = t.line - 1
        if ascii_:
            start, length = t.col - 1, t.length
        else:
            start = lines.to_lsp(t.line, t.col).character
            length = lines.to_lsp(t.line, t.col + t.length).character - start
        mods = 0
        for m in t.modifiers:
            mods |= _MODS[m]
        if i == 0:
            first = (line, start)
            block += [line, start, length, _TYPES[t.type], mods]
        else:
            dl = line - prev_line
            block += [dl, start - prev_char if dl == 0 else start, length, _TYPES[t.type], mods]
        prev_line, prev_char = line, start
    last = (prev_line, prev_char)
    out = (block, first, last)
    with _LOCK:
        _CACHE[key] = out
        while len(_CACHE) > CAPACITY:
            _CACHE.popitem(last=False)
    return out


def _roles(seg: Segment) -> tuple[tuple[str, str], ...]:
    k = seg.kernel
    if k is None:
        return ()
    return tuple((p.name, "input") for p in k.inputs) + tuple((p.name, "output") for p in k.outputs)


def encode(doc: Document, cancelled=lambda: False) -> list[int]:
    """The document's tokens as LSP's integer array (``cancelled()`` is asked between
    kernels; a cancelled request's result is dropped, so what is returned then does not
    matter)."""
    data: list[int] = []
    prev_line, prev_char = 0, 0
    for seg in doc.segments:
        if cancelled():
            return data
        block, (fl, fc), (ll, lc) = _encode_segment(doc, seg)
        if not block:
            continue
        line = seg.line0 + fl
        dl = line - prev_line
        data += [dl, fc - prev_char if dl == 0 else fc]
        data += block[2:]
        prev_line, prev_char = seg.line0 + ll, lc
    return data
