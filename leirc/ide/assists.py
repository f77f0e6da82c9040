"""Strategy code actions for an editor, fast enough to list on every cursor move.

* Sites around the cursor come from the strategies' cursor-restricted enumeration
  (:func:`leirc.strategies.base.sites_at`: the item under the cursor and the items
  enclosing it), remembered per kernel and item; once the whole kernel's sites are
  known (:func:`prefetch`, which the server runs in the background after each edit),
  listing is a filter. A step is offered when its anchor (:mod:`leirc.ide.anchors`)
  contains the cursor.
* Every offered step is planned once (the strategy's preconditions and a re-check of
  the new kernel) before it is listed, and the plan is remembered, so resolving the
  action — turning it into minimal text edits (:func:`leirc.ide.edits.kernel_edits`) —
  costs only the diff.
* :func:`suggest` ranks the applicable steps of a kernel with a small, documented
  heuristic (:data:`PRIORITY`), the offline stand-in for the search's ``suggest``.

Positions are document positions (1-based, code points); edits are in document
coordinates.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

from ..lang import ast as A
from ..lang.facts import CheckResult
from ..strategies import base as S
from ..strategies.base import NotApplicable, Rewrite, Site, Step, StrategyBug, enumerate_sites, plan_step
from .anchors import anchor_node, contains
from .document import Document, Segment
from .edits import TextEdit, kernel_edits


@dataclass(frozen=True)
class Assist:
    """A strategy step offered at a position (already planned: it applies)."""

    title: str
    step: Step
    kernel: str
    span: A.Span  # document span of its anchor
    numerics: str
    summary: str = ""


class _LRU:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.items: OrderedDict = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key, value):
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.capacity:
                self.items.popitem(last=False)
        return value


# Keyed by the kernel object's identity (the entry keeps the object, so the id stays
# valid): the document cache hands out the same object while a kernel's text is
# unchanged, and hashing a kernel walks its whole tree.
_SITES = _LRU(64)
_PLANS = _LRU(4096)


def sites(kernel: A.Kernel, result: CheckResult) -> list[Site]:
    """Every site of ``kernel`` (remembered per kernel)."""
    hit = _SITES.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return hit[1]
    return _SITES.put(id(kernel), (kernel, enumerate_sites(kernel, result=result)))[1]


def plan(kernel: A.Kernel, result: CheckResult, step: Step) -> Optional[Rewrite]:
    """The rewrite of ``step`` (``None`` when it does not apply), remembered."""
    key = (id(kernel), step)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    try:
        rw = plan_step(kernel, step, result=result)
    except (NotApplicable, StrategyBug, KeyError, ValueError, TypeError):
        rw = None
    _PLANS.put(key, (kernel, rw))
    return rw


def _loop_var(ref) -> str:
    s = str(ref)
    return s.rsplit(".", 1)[-1] if "." in s else s


_AXES = {"tx": "threadIdx.x", "ty": "threadIdx.y", "tz": "threadIdx.z", "bx": "blockIdx.x", "by": "blockIdx.y",
         "bz": "blockIdx.z"}


def title(step: Step, kernel: Optional[A.Kernel] = None) -> str:
    """A title an editor can show: "Apply loop tiling (i, j by 2×4)", "Parallelize loop i"."""
    a = step.kwargs
    n = step.name
    loop = _loop_var(a["loop"]) if "loop" in a else None
    if n == "loop_parallelization":
        return f"Parallelize loop {loop}"
    if n == "loop_vectorization":
        return f"Vectorize loop {loop}"
    if n == "loop_unrolling":
        return f"Unroll loop {loop}"
    if n == "loop_binding":
        return f"Bind loop {loop} to {_AXES.get(str(a.get('axis')), a.get('axis'))}"
    if n == "loop_split":
        return f"Split loop {loop} by {a.get('factor')}"
    if n == "loop_fusion":
        return f"Fuse loop {loop} with the loop inside it"
    if n == "loop_tiling":
        inner = None
        if kernel is not None and loop is not None:
            node = anchor_node(kernel, step)
            if isinstance(node, A.Loop) and len(node.body) == 1 and isinstance(node.body[0], A.Loop):
                inner = node.body[0].var
        loops = f"{loop}, {inner}" if inner else loop
        return f"Apply loop tiling ({loops} by {a.get('factor_outer')}×{a.get('factor_inner')})"
    if n == "loop_reorder":
        order = a.get("order")
        order = ", ".join(_loop_var(x) for x in (order if isinstance(order, list) else str(order).split(",")))
        return f"Reorder loops to {order}"
    if n == "online_softmax":
        return "Online softmax"
    if n == "set_storage_scope":
        return f"Move {a.get('tensor')} to {A.SCOPE_NAMES.get(str(a.get('scope')), a.get('scope'))} memory"
    words = n.replace("_", " ")
    rest = ", ".join(f"{k}={_loop_var(v) if k == 'loop' else v}" for k, v in a.items())
    return f"Apply {words}" + (f" ({rest})" if rest else "")


_FOCUSED = _LRU(256)


def _focused(kernel: A.Kernel, result: CheckResult, line: int, col: int, per_site: int):
    """(step, anchor node) of the sites around the cursor, from the strategies'
    cursor-restricted enumeration (``sites_at``), remembered per kernel and item."""
    path = S.item_at_position(kernel, line, col)
    if not path:
        return []
    key = (id(kernel), tuple(path), per_site)
    hit = _FOCUSED.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    out, seen = [], set()
    for site in S.sites_at(kernel, tuple(path), result=result):
        for step in site.steps(limit=per_site):
            if step not in seen:
                seen.add(step)
                node = anchor_node(kernel, step)
                if node is not None and node.span is not None:
                    out.append((step, node))
    return _FOCUSED.put(key, (kernel, out))[1]


_CANDIDATES = _LRU(64)


def candidates(kernel: A.Kernel, result: CheckResult, per_site: int = 2) -> list[tuple[Step, A.Node]]:
    """(step, anchor node) for up to ``per_site`` steps of every site of ``kernel``,
    remembered per kernel: listing actions at a new cursor position is then a filter."""
    key = (id(kernel), per_site)
    hit = _CANDIDATES.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    out, seen = [], set()
    for site in sites(kernel, result):
        for step in site.steps(limit=per_site):
            if step in seen:
                continue
            seen.add(step)
            node = anchor_node(kernel, step)
            if node is not None and node.span is not None:
                out.append((step, node))
    return _CANDIDATES.put(key, (kernel, out))[1]


def prefetch(doc: Document, line: int, whole: bool = False) -> None:
    """Compute ahead of a code-action request the actions at ``line`` (its first
    non-blank column: sites and plans) or, with ``whole``, the sites of its whole kernel. The server calls it
    off its event loop after publishing diagnostics, for the line just edited."""
    off = doc.offset_of(line, 1)
    seg = doc.segment_at_offset(off)
    if seg.kernel is None or seg.result is None or not seg.result.ok:
        return
    if whole or not hasattr(S, "sites_at"):
        candidates(seg.kernel, seg.result, 1)  # what suggest() ranks
        return
    end = doc.text.find("\n", off)
    text = doc.text[off:end if end >= 0 else len(doc.text)]
    col = len(text) - len(text.lstrip()) + 1
    assists_at(doc, line, col)  # the sites there and their plans


def assists_at(doc: Document, line: int, col: int, *, per_site: int = 2, only=None) -> list[Assist]:
    """The applicable steps anchored at the cursor, innermost anchor first.

    ``per_site``: how many concrete steps of one site (its domains in order) are offered;
    ``only``: restrict to these strategy names."""
    off = doc.offset_of(line, col)
    seg = doc.segment_at_offset(off)
    k, res = seg.kernel, seg.result
    if k is None or res is None or not res.ok:
        return []
    lline = line - seg.line0
    whole = _CANDIDATES.get((id(k), per_site))
    if whole is not None and whole[0] is k:
        found = whole[1]  # prefetched: a filter
    elif hasattr(S, "sites_at") and hasattr(S, "item_at_position"):
        found = _focused(k, res, lline, col, per_site)
    else:
        found = candidates(k, res, per_site)
    out: list[Assist] = []
    for step, node in found:
        if only is not None and step.name not in only:
            continue
        if not contains(node.span, lline, col):
            continue
        rw = plan(k, res, step)
        if rw is None:
            continue
        out.append(Assist(title(step, k), step, k.name, seg.to_doc(node.span), rw.numerics, _summary(step)))
    out.sort(key=lambda a: (a.span.end - a.span.start, a.step.name, a.title))
    return out


def _summary(step: Step) -> str:
    try:
        return S.get(step.name).summary
    except KeyError:
        return ""


def resolve(doc: Document, kernel: str, step: Step) -> list[TextEdit]:
    """The minimal document edits applying ``step`` to kernel ``kernel``; raises
    :class:`NotApplicable` when the document changed so that it no longer applies."""
    seg = _segment(doc, kernel)
    rw = plan(seg.kernel, seg.result, step)
    if rw is None:
        raise NotApplicable(step.name, "no longer applies to the current text")
    return [TextEdit(e.start_line + seg.line0, e.start_col, e.end_line + seg.line0, e.end_col, e.new_text)
            for e in kernel_edits(seg.text, seg.kernel, rw.kernel)]


def _segment(doc: Document, kernel: str) -> Segment:
    seg = doc.segment_of(kernel)
    if seg is None or seg.result is None or not seg.result.ok:
        raise NotApplicable("ide", f"kernel '{kernel}' is not in the document or has errors")
    return seg


# ---------------------------------------------------------------------------
# suggestions

#: heuristic priority per strategy (higher first): parallelism and vectorization pay
#: most on CPU targets, then locality (tiling, fusion), then algebra. Used only when
#: no search ``suggest`` is available; documented in docs/lsp.md.
PRIORITY = {
    "loop_parallelization": (10, "runs independent iterations on all cores"),
    "loop_vectorization": (9, "uses SIMD lanes for the innermost loop"),
    "online_softmax": (9, "one streaming pass instead of three over the row"),
    "operator_fusion": (8, "one pass over the data instead of two"),
    "loop_tiling": (7, "improves cache reuse of the tiled loops"),
    "compute_inline": (6, "removes an intermediate buffer"),
    "dead_code_elimination": (6, "removes work whose result is never used"),
    "loop_reorder": (5, "makes the innermost loop walk memory contiguously"),
    "loop_unrolling": (4, "removes loop overhead of a short loop"),
    "loop_binding": (3, "maps the loop onto GPU threads or blocks"),
    "loop_split": (2, "prepares vectorization or tiling"),
}


@dataclass(frozen=True)
class Suggestion:
    step: Step
    score: float
    rationale: str
    title: str
    kernel: str


def suggest(doc: Document, kernel: str, k: int = 5, *, cancelled=lambda: False,
            if_ready: bool = False) -> list[Suggestion]:
    """Up to ``k`` applicable steps for ``kernel`` ranked by :data:`PRIORITY`, with the
    loop's trip count as the tie-break (a bigger loop gains more). ``cancelled()`` is
    polled between plans. With ``if_ready``, answer only when the kernel's sites are
    already known (no enumeration: for a list that must come back at once)."""
    seg = _segment(doc, kernel)
    kern, res = seg.kernel, seg.result
    if if_ready:
        hit = _CANDIDATES.get((id(kern), 1))
        if hit is None or hit[0] is not kern:
            return []
    scored = []
    for step, node in candidates(kern, res, 1):
        if step.name not in PRIORITY:
            continue
        trips = node.extent if isinstance(node, A.Loop) else 1
        scored.append((-PRIORITY[step.name][0], -trips, step.name, str(step), step))
    scored.sort(key=lambda x: x[:4])
    out: list[Suggestion] = []
    for pr, trips, _, _, step in scored:
        if len(out) >= k or cancelled():
            break
        if plan(kern, res, step) is None:
            continue
        why = PRIORITY[step.name][1]
        out.append(Suggestion(step, float(-pr) + min(-trips, 1 << 20) / float(1 << 21), why, title(step, kern), kern.name))
    return out
