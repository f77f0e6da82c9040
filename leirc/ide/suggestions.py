"""Ranked "Suggest optimization" for an editor: the search's own ranking, never a
separate heuristic.

* Offline: :func:`leirc.search.suggest.suggest` -- the analytical cost model plus the HTAM
  memory's evidence (directions after ``history``, the strategies' local utilities).
* With an LLM endpoint configured (:class:`leirc.llm.LLMConfig`):
  :func:`leirc.search.llm_proposers.llm_suggest` ranks them; its answers are applied
  through the engine, so every suggestion is a legal step. When the LLM layer is not
  installed or the endpoint fails, the offline ranking answers and ``note`` says why.

Every suggestion is a step for one kernel of a :class:`~leirc.ide.document.Document` with
the rationale its ranker gave. Results are remembered per kernel object (so the code-action
list can show the last ones without ranking again).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..strategies.base import NotApplicable, Step
from .assists import LRU, title
from .document import Document

#: sources a suggestion may come from (shown to the user next to the rationale)
OFFLINE = "cost model"
OFFLINE_MEMORY = "cost model + memory"


@dataclass(frozen=True)
class Suggestion:
    step: Step
    score: float
    rationale: str
    title: str
    kernel: str
    source: str  # "cost model", "cost model + memory", "llm:<models>"
    predicted: float = 1.0  # the cost model's predicted speedup of this one step
    direction: str = ""


@dataclass
class Ranking:
    """The answer of :func:`suggest`: the suggestions, best first, and how they were got."""

    suggestions: list[Suggestion]
    source: str
    note: str = ""  # why a configured LLM did not answer, or other caveats
    stats: dict = field(default_factory=dict)


def open_memory(path: Optional[str], target: str = "llvm", warn: Optional[Callable[[str], None]] = None):
    """The HTAM memory at ``path`` read into this process, the file closed again (the
    editor never holds the search's database open, nor writes it). ``path`` None: the
    user's default memory (``~/.cache/leirc/memory.sqlite``); ``"none"`` or a missing
    file: None (the cost model ranks alone). A file that cannot be read is reported
    through ``warn`` and ignored."""
    from ..search.memory import Memory, default_path

    if path is not None and path.strip().lower() == "none":
        return None
    path = os.path.expanduser(path) if path else default_path()
    if not os.path.isfile(path):
        return None
    try:
        mem = Memory(path, target=target, warn=warn)
    except Exception as e:  # noqa: BLE001 - an unusable memory only loses its evidence
        if warn is not None:
            warn(f"cannot read the optimization memory {path}: {e}; ranking by the cost model alone")
        return None
    mem.close()  # its statistics stay loaded in this process
    return mem


_LAST = LRU(64)


def last(doc: Document, kernel: str) -> list[Suggestion]:
    """The suggestions last computed for ``kernel``'s current text ([] when none)."""
    seg = doc.segment_of(kernel)
    if seg is None or seg.kernel is None:
        return []
    hit = _LAST.get(id(seg.kernel))
    return hit[1] if hit is not None and hit[0] is seg.kernel else []


def suggest(doc: Document, kernel: str, k: int = 5, *, target: str = "llvm", memory: Any = None,
            threads: Optional[int] = None, history: tuple = (), llm: Any = None,
            log: Optional[Callable[[str], None]] = None) -> Ranking:
    """Up to ``k`` next steps for kernel ``kernel`` of ``doc``, best first.

    ``memory``: a :class:`leirc.search.memory.Memory` (or None); ``history``: the
    directions of the steps that produced this kernel (the memory weighs what follows
    them); ``llm``: a :class:`leirc.llm.LLMConfig` to rank with a model instead. Raises
    :class:`NotApplicable` when the kernel is missing or does not check."""
    from ..engine.program import Program

    seg = doc.segment_of(kernel)
    if seg is None or seg.result is None or not seg.result.ok:
        raise NotApplicable("ide", f"kernel '{kernel}' is not in the document or has errors")
    program = Program(seg.kernel, seg.result, file=doc.file)
    note = ""
    ranking: Optional[Ranking] = None
    if llm is not None:
        ranking, note = _llm_ranking(program, seg.kernel, k, target, memory, llm, history, log)
    if ranking is None:
        from ..search.suggest import suggest as rank

        got = rank(program, k=k, target=target, memory=memory, threads=threads, history=tuple(history))
        source = OFFLINE_MEMORY if memory is not None else OFFLINE
        ranking = Ranking([_wrap(s, seg.kernel, source) for s in got], source, note)
    _LAST.put(id(seg.kernel), (seg.kernel, ranking.suggestions))
    return ranking


def anchor_span(doc: Document, s: Suggestion):
    """The document span of the node the suggestion's step is anchored at (None when it
    names none, e.g. a whole-program rewrite)."""
    from .anchors import anchor_node

    seg = doc.segment_of(s.kernel)
    if seg is None or seg.kernel is None:
        return None
    try:
        node = anchor_node(seg.kernel, s.step)
    except Exception:  # noqa: BLE001 - a step naming no node has no place
        return None
    return seg.to_doc(node.span) if node is not None and node.span is not None else None


def _wrap(s, kern, source: str) -> Suggestion:
    return Suggestion(s.step, float(s.score), s.rationale or "", title(s.step, kern), kern.name, source,
                      float(getattr(s, "predicted", 1.0) or 1.0), getattr(s, "direction", "") or "")


def _llm_ranking(program, kern, k, target, memory, config, history, log) -> tuple[Optional[Ranking], str]:
    """The model's ranking, or (None, why not) so that the offline ranking answers."""
    try:
        from ..llm import LLMClient, LLMError
        from ..search.llm_proposers import llm_suggest
    except ImportError as e:
        return None, f"LLM suggestions are not available in this installation ({e}); ranked offline"
    try:
        client = LLMClient(config, log=log)
    except LLMError as e:
        return None, f"LLM not usable: {e}; ranked offline"
    try:
        got = llm_suggest(program, client, k=k, target=target, memory=memory, history=tuple(history), log=log)
        stats = getattr(got, "stats", None) or {"usage": client.usage.to_json()}
    except LLMError as e:
        return None, f"the LLM endpoint failed: {e}; ranked offline"
    finally:
        client.close()
    if not got:
        err = stats.get("error") if isinstance(stats, dict) else None
        return None, (f"the LLM endpoint failed: {err}; ranked offline" if err else
                      "the LLM gave no usable suggestion; ranked offline")
    source = "llm:" + ",".join(config.models)
    return Ranking([_wrap(s, kern, source) for s in got], source, stats=dict(stats) if isinstance(stats, dict) else {}), ""
