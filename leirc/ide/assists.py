"""Strategy code actions for an editor, fast enough to list on every cursor move.

* **Listing plans nothing.** The steps offered at a cursor come from the strategies'
  cursor-restricted enumeration (:func:`leirc.strategies.base.sites_at`: the item under
  the cursor and the items enclosing it), strategy by strategy, into a
  :class:`FocusSites` remembered per kernel object (the document cache hands out the
  same object while the kernel's text is unchanged) and cursor item. A step is offered
  when its anchor (:mod:`leirc.ide.anchors`) contains the cursor.
* **Resolving plans once.** :func:`resolve` plans the chosen step (the strategy's
  preconditions and a re-check of the new kernel) and turns it into minimal text edits
  (:func:`leirc.ide.edits.kernel_edits`); a step that no longer applies raises
  :class:`NotApplicable`, which the server shows as a disabled action with the reason.
* **Slow strategies do not hold the list.** Each strategy's listing time is remembered
  (:func:`strategy_cost`); the server computes the ones that were slow lately in a
  thread of their own and answers with what is known by its time budget. What was left
  out is listed at the next request for the same place (nothing is dropped for good).

Positions are document positions (1-based, code points); edits are in document
coordinates. Ranked suggestions live in :mod:`leirc.ide.suggestions`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from ..lang import ast as A
from ..lang.facts import CheckResult
from ..strategies import base as S
from ..strategies.base import NotApplicable, Rewrite, Step, StrategyBug, plan_step
from ..strategies.rewrite import iter_items
from .anchors import anchor_node, contains
from .document import Document, Segment
from .edits import TextEdit, kernel_edits


@dataclass(frozen=True)
class Assist:
    """A strategy step offered at a position (listed, not planned: :func:`resolve` plans
    it). ``numerics`` is what the strategy declares (``bitwise``, ``reassociating``,
    ``approximate``)."""

    title: str
    step: Step
    kernel: str
    span: A.Span  # document span of its anchor
    numerics: str
    summary: str = ""


class LRU:
    """A small thread-safe least-recently-used map."""

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
_PLANS = LRU(4096)
#: what this process did (the language server reports it: ``leirc.serverStats``)
COUNTERS = {"plans": 0, "listings": 0}


def plan(kernel: A.Kernel, result: CheckResult, step: Step) -> Optional[Rewrite]:
    """The rewrite of ``step`` (``None`` when it does not apply), remembered."""
    key = (id(kernel), step)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    COUNTERS["plans"] += 1
    why = ""
    try:
        rw = plan_step(kernel, step, result=result)
    except (NotApplicable, StrategyBug, KeyError, ValueError, TypeError) as e:
        rw, why = None, str(e).removeprefix(f"{step.name}: ")
    _PLANS.put(key, (kernel, rw, why))
    return rw


def why_not(kernel: A.Kernel, step: Step) -> str:
    """The reason :func:`plan` gave for ``step`` not applying ("" when unknown)."""
    hit = _PLANS.get((id(kernel), step))
    return hit[2] if hit is not None and hit[0] is kernel else ""


# ---------------------------------------------------------------------------
# listing

#: a strategy whose listing at one cursor took longer than this lately is "slow": the
#: server lists it off the request's path (see the module docstring)
SLOW_MS = 10.0
_COSTS: dict[str, float] = {}
_COSTS_LOCK = threading.Lock()


def strategy_cost(name: str) -> float:
    """Recent peak of the time (ms) one cursor listing of strategy ``name`` took (0 when
    never measured). A peak that decays (x0.8 per measurement) rather than a mean: one
    heavy kernel makes a strategy slow until a few light listings say otherwise."""
    return _COSTS.get(name, 0.0)


def _record_cost(name: str, ms: float) -> None:
    with _COSTS_LOCK:
        _COSTS[name] = max(ms, 0.8 * _COSTS.get(name, 0.0))


def strategy_names() -> list[str]:
    """Every registered strategy (the registry's order)."""
    return [s.name for s in S.all_strategies()]


def split_by_cost(names: Iterable[str], slow_ms: float = SLOW_MS) -> tuple[list[str], list[str]]:
    """``names`` as (fast, slow) by :func:`strategy_cost`, each cheapest first."""
    ordered = sorted(names, key=lambda n: (strategy_cost(n), n))
    return [n for n in ordered if strategy_cost(n) <= slow_ms], [n for n in ordered if strategy_cost(n) > slow_ms]


class FocusSites:
    """The steps anchored at one cursor item of one kernel (and the items enclosing it),
    computed strategy by strategy: each strategy's part is complete or missing, never
    half done. Thread-safe: two threads may compute disjoint strategies at once."""

    def __init__(self, kernel: A.Kernel, result: CheckResult, path: tuple, per_site: int = 2):
        self.kernel, self.result, self.path, self.per_site = kernel, result, tuple(path), per_site
        self.found: dict[str, list[tuple[Step, A.Node]]] = {}
        self._lock = threading.Lock()
        self._claimed: set[str] = set()  # strategies some thread is computing now
        self.futures: dict[str, object] = {}  # the server's pending work, by pool name

    def missing(self, names: Optional[Iterable[str]] = None) -> list[str]:
        names = strategy_names() if names is None else names
        return [n for n in names if n not in self.found]

    @property
    def complete(self) -> bool:
        return not self.missing()

    def compute(self, names: Optional[Iterable[str]] = None, stop: Callable[[], bool] = lambda: False) -> bool:
        """List the strategies of ``names`` (default all) not listed yet, cheapest first;
        ``stop()`` is asked between strategies. True when all of them are listed."""
        todo = sorted(self.missing(names), key=lambda n: (strategy_cost(n), n))
        for name in todo:
            if stop():
                return False
            with self._lock:
                if name in self.found or name in self._claimed:
                    continue
                self._claimed.add(name)
            try:
                COUNTERS["listings"] += 1
                t0 = time.perf_counter()
                try:
                    sites = S.sites_at(self.kernel, self.path, result=self.result, strategies=[name])
                    steps = [st for site in sites for st in site.steps(limit=self.per_site)]
                except Exception:  # noqa: BLE001 - one strategy's bug must not empty the whole list
                    steps = []
                _record_cost(name, (time.perf_counter() - t0) * 1000)
                out = []
                for st in steps:
                    node = anchor_node(self.kernel, st)
                    if node is not None and node.span is not None:
                        out.append((st, node))
                self.found[name] = out
            finally:
                with self._lock:
                    self._claimed.discard(name)
        return not self.missing(names)

    def merge(self, listing: dict) -> None:
        """Take a listing made elsewhere (:func:`list_in_worker` for this kernel's text and
        this item): the strategies not listed here yet become listed."""
        for name, got in listing.items():
            if name in self.found:
                continue
            _record_cost(name, float(got.get("ms", 0.0)))
            out = []
            for raw in got.get("steps", ()):
                try:
                    st = Step.from_json(raw)
                except (ValueError, TypeError):
                    continue
                node = anchor_node(self.kernel, st)
                if node is not None and node.span is not None:
                    out.append((st, node))
            self.found[name] = out

    def steps(self) -> list[tuple[Step, A.Node]]:
        """What is listed so far, without repeats, in the registry's order."""
        out, seen = [], set()
        for name in sorted(self.found):
            for st, node in self.found[name]:
                if st not in seen:
                    seen.add(st)
                    out.append((st, node))
        return out


def list_in_worker(text: str, last: bool, path: tuple, names: list[str], per_site: int = 2) -> dict:
    """The listing of strategies ``names`` at item ``path`` of the kernel of segment text
    ``text`` (see :func:`leirc.ide.document.analyze_segment`), as JSON for
    :meth:`FocusSites.merge`: ``{name: {"steps": [step JSON], "ms": listing time}}``.
    Runs in a worker process (the server lists the slow strategies there, at a lower
    priority, so that they take no time from the requests); the kernel is parsed there
    from the same text, so paths and references are the same."""
    from .document import CACHE

    a = CACHE.get(text, last)
    if a.kernel is None or not a.ok:
        return {}
    out = {}
    for name in names:
        t0 = time.perf_counter()
        try:
            sites = S.sites_at(a.kernel, tuple(path), result=a.result, strategies=[name])
            steps = [st.to_json() for site in sites for st in site.steps(limit=per_site)]
        except Exception:  # noqa: BLE001 - one strategy's bug must not empty the whole list
            steps = []
        out[name] = {"steps": steps, "ms": (time.perf_counter() - t0) * 1000}
    return out


def warm_worker(text: str) -> int:
    """List every strategy at every item of the kernel of ``text`` once, in the listing
    worker: the first listing of some strategies pays for caches filled on first use (SymPy's
    polynomial code: ``cancellation``'s first statement takes ≈ 0.45 s, the next ones ≈ 10 ms),
    and that cost belongs at start-up, not in the first list an editor asks for. Returns the
    number of sites listed."""
    from .document import CACHE

    a = CACHE.get(text, True)
    if a.kernel is None or not a.ok:
        return 0
    names = [s.name for s in S.all_strategies()]
    n = 0
    for path, _ in iter_items(a.kernel):
        try:
            n += len(S.sites_at(a.kernel, tuple(path), result=a.result, strategies=names))
        except Exception:  # noqa: BLE001 - warming is an optimization only
            pass
    return n


def lower_priority(parent: Optional[int] = None) -> None:
    """Set up a listing worker process: it yields the CPU to the editor's requests, ends
    when the server that started it is gone (even killed: nothing else would tell it),
    and imports every strategy before its first listing. ``parent``: the server's process
    id (given, not asked: the server may be gone before this runs)."""
    import os

    try:
        os.nice(10)
    except (AttributeError, OSError):  # not everywhere; the work is the same without it
        pass
    parent = os.getppid() if parent is None else parent

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="leirc-parent-watch", daemon=True).start()
    S.all_strategies()


_FOCUS = LRU(256)


def focus_at(doc: Document, line: int, col: int, per_site: int = 2) -> Optional[tuple[Segment, FocusSites]]:
    """The segment and the (remembered) :class:`FocusSites` of the cursor item at
    ``(line, col)``; None outside a kernel that checks or outside any loop or statement.
    Cheap: nothing is listed here."""
    seg = doc.segment_at_offset(doc.offset_of(line, col))
    k, res = seg.kernel, seg.result
    if k is None or res is None or not res.ok:
        return None
    path = S.item_at_position(k, line - seg.line0, col)
    if not path:
        return None
    key = (id(k), tuple(path), per_site)
    hit = _FOCUS.get(key)
    if hit is not None and hit[0] is k:
        return seg, hit[1]
    return seg, _FOCUS.put(key, (k, FocusSites(k, res, tuple(path), per_site)))[1]


def listed(seg: Segment, focus: FocusSites, line: int, col: int, *, only=None) -> list[Assist]:
    """The steps of ``focus`` listed so far whose anchor contains the cursor, innermost
    anchor first."""
    k = seg.kernel
    lline = line - seg.line0
    out: list[Assist] = []
    for step, node in focus.steps():
        if only is not None and step.name not in only:
            continue
        if not contains(node.span, lline, col):
            continue
        out.append(Assist(title(step, k), step, k.name, seg.to_doc(node.span), _numerics(step), _summary(step)))
    out.sort(key=lambda a: (a.span.end - a.span.start, a.step.name, a.title))
    return out


def assists_at(doc: Document, line: int, col: int, *, per_site: int = 2, only=None,
               planned: bool = False) -> list[Assist]:
    """Every step anchored at the cursor, innermost anchor first, listed now (all
    strategies, synchronously: the server uses :func:`focus_at` and a time budget instead).

    ``per_site``: how many concrete steps of one site (its domains in order) are offered;
    ``only``: restrict to these strategy names; ``planned``: keep only the steps that
    apply (each is planned, as :func:`resolve` would)."""
    got = focus_at(doc, line, col, per_site)
    if got is None:
        return []
    seg, focus = got
    focus.compute(only)
    out = listed(seg, focus, line, col, only=only)
    if planned:
        out = [a for a in out if plan(seg.kernel, seg.result, a.step) is not None]
    return out


def prefetch(doc: Document, line: int, names: Optional[Iterable[str]] = None,
             stop: Callable[[], bool] = lambda: False) -> Optional[FocusSites]:
    """List ahead of a code-action request the steps at ``line`` (at its first non-blank
    column) for the strategies ``names`` (default all). The server calls it off its event
    loop after publishing diagnostics, for the line just edited."""
    off = doc.offset_of(line, 1)
    end = doc.text.find("\n", off)
    text = doc.text[off:end if end >= 0 else len(doc.text)]
    col = len(text) - len(text.lstrip()) + 1
    got = focus_at(doc, line, col)
    if got is None:
        return None
    got[1].compute(names, stop)
    return got[1]


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


def _summary(step: Step) -> str:
    try:
        return S.get(step.name).summary
    except KeyError:
        return ""


def _numerics(step: Step) -> str:
    try:
        return S.get(step.name).numerics
    except KeyError:
        return ""


def resolve(doc: Document, kernel: str, step: Step) -> list[TextEdit]:
    """The minimal document edits applying ``step`` to kernel ``kernel``: the step is
    planned (its preconditions, then a re-check of the new kernel) here, not when it was
    listed. Raises :class:`NotApplicable` when it does not apply to the current text."""
    seg = _segment(doc, kernel)
    rw = plan(seg.kernel, seg.result, step)
    if rw is None:
        raise NotApplicable(step.name, why_not(seg.kernel, step) or "does not apply to the current text")
    return [TextEdit(e.start_line + seg.line0, e.start_col, e.end_line + seg.line0, e.end_col, e.new_text)
            for e in kernel_edits(seg.text, seg.kernel, rw.kernel)]


def _segment(doc: Document, kernel: str) -> Segment:
    seg = doc.segment_of(kernel)
    if seg is None or seg.result is None or not seg.result.ok:
        raise NotApplicable("ide", f"kernel '{kernel}' is not in the document or has errors")
    return seg
