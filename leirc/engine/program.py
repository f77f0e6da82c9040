"""``Program``: a checked kernel whose facts are addressed by path or reference, and
``apply(program, step) -> Rewrite``: the one entry point that plans a strategy step,
re-checks the result once and caches it.

Addresses are the ones the strategies already speak: a *path* is a tuple of body indices
(``(0, 1)`` = item 1 in the body of top-level item 0), a *reference* is ``N0`` (a
top-level item), ``N0.a`` / ``N0.a#1`` (a loop by index name, ``#k`` for the k-th repeat
within the item) or ``N0.S1`` (statement 1 of item 0, pre-order). Facts of the checker
(:class:`~leirc.lang.checker.StmtInfo`) are looked up by those addresses through an index
built once, never by object identity, so they survive re-parsing and caching.

Programs compare and hash by :func:`~leirc.lang.canonical.fingerprint`: two search paths
that reach the same program under different fresh names are one program.

    >>> p = Program.from_text(text)            # Program, or Invalid with diagnostics
    >>> rw = apply(p, Step.make("loop_split", loop="N0.i", factor=4))
    >>> rw.created["outer"], rw.program.fingerprint
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional, Union

from ..lang import ast as A
from ..lang.canonical import canonical as _canonical_kernel
from ..lang.canonical import fingerprint as _fingerprint
from ..lang.checker import CheckResult, StmtInfo, check_kernel, check_text
from ..lang.diagnostics import Diagnostic
from ..lang.printer import PRETTY, print_kernel
from ..strategies import base as S
from ..strategies.rewrite import Path, iter_items, iter_loops, iter_stmts

Address = Union[str, Path, list, int]

#: not yet in :data:`leirc.lang.diagnostics.CODES` (that table lists what the parser and
#: checker emit): a file with no kernel, several kernels and none chosen, or no kernel of
#: the requested name.
E_NO_KERNEL = "E060"

_NEST_REF = re.compile(r"N(\d+)")


@dataclass(frozen=True)
class Invalid:
    """What :meth:`Program.from_text` returns for bad input: the reasons, no exception."""

    diagnostics: list[Diagnostic]
    source: Optional[str] = None
    file: str = "<input>"

    @property
    def ok(self) -> bool:
        return False


class _Index:
    """Paths, references and checker facts of one kernel, computed in one walk."""

    def __init__(self, kernel: A.Kernel, result: CheckResult):
        self.nodes: dict[Path, object] = dict(iter_items(kernel))
        self.loop_refs: dict[str, Path] = {}
        self.ref_of: dict[Path, str] = {}
        for ref, _, path in iter_loops(kernel):
            self.loop_refs[ref] = path
            self.ref_of[path] = ref
        self.stmt_refs: dict[str, Path] = {}
        for ref, _, path in iter_stmts(kernel):
            self.stmt_refs[ref] = path
            self.ref_of[path] = ref
        # the checker's facts point at nodes of this very tree; translate once to paths
        by_node = {id(node): path for path, node in self.nodes.items()}
        self.infos: dict[Path, StmtInfo] = {}
        for si in result.stmts:
            path = by_node.get(id(si.stmt))
            if path is not None:
                self.infos[path] = si


class Program:
    """A kernel that checks clean, with its :class:`CheckResult` (never re-computed).

    Build one with :meth:`from_text` or :meth:`from_kernel` (bad input gives
    :class:`Invalid`); the constructor is for callers that already hold a clean result."""

    __slots__ = ("kernel", "result", "file", "source", "_fp", "_index")

    def __init__(self, kernel: A.Kernel, result: Optional[CheckResult] = None, *, file: str = "<input>",
                 source: Optional[str] = None):
        result = result if result is not None else check_kernel(kernel)
        if result.kernel is not kernel:
            raise ValueError("the CheckResult belongs to another kernel object")
        if not result.ok:
            raise ValueError("Program needs a kernel that checks clean; use Program.from_kernel for diagnostics")
        self.kernel = kernel
        self.result = result
        self.file = file
        self.source = source
        self._fp: Optional[str] = None
        self._index: Optional[_Index] = None

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_text(cls, text: str | bytes, kernel: Optional[str] = None, file: str = "<input>") -> "Program | Invalid":
        """Parse and check ``text``; ``kernel`` names one kernel of a multi-kernel file."""
        cf = check_text(text, file)
        source = cf.parse.source
        if not cf.ok:
            return Invalid(cf.diagnostics, source, file)
        names = [r.kernel.name for r in cf.results]
        if kernel is None and len(cf.results) == 1:
            res = cf.results[0]
        elif kernel is not None and names.count(kernel) == 1:
            res = cf.results[names.index(kernel)]
        else:
            if not names:
                msg = "the file has no kernel"
            elif kernel is None:
                msg = f"the file has {len(names)} kernels; choose one ({', '.join(names)})"
            else:
                msg = f"no kernel named '{kernel}' ({', '.join(names) or 'none'})"
            return Invalid([Diagnostic(E_NO_KERNEL, msg, None, file=file)], source, file)
        return cls(res.kernel, res, file=file, source=source)

    @classmethod
    def from_kernel(cls, kernel: A.Kernel, file: str = "<input>") -> "Program | Invalid":
        res = check_kernel(kernel)
        if not res.ok:
            return Invalid([d.with_file(file) for d in res.diagnostics], None, file)
        return cls(kernel, res, file=file)

    # -- identity --------------------------------------------------------------------
    @property
    def ok(self) -> bool:
        return True

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Warnings of the checker (a Program has no errors)."""
        return list(self.result.diagnostics)

    @property
    def fingerprint(self) -> str:
        if self._fp is None:
            self._fp = _fingerprint(self.kernel)
        return self._fp

    def canonical(self) -> "Program":
        """The same program under canonical names (checked again: facts belong to a tree)."""
        k = _canonical_kernel(self.kernel)
        p = Program(k, check_kernel(k), file=self.file)
        p._fp = self._fp
        return p

    def __eq__(self, other) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        return self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"Program({self.kernel.name}, {self.fingerprint[:12]})"

    def print(self, layout: str = PRETTY) -> str:
        return print_kernel(self.kernel, layout)

    # -- addresses -------------------------------------------------------------------
    @property
    def index(self) -> _Index:
        if self._index is None:
            self._index = _Index(self.kernel, self.result)
        return self._index

    def path_of(self, where: Address) -> Path:
        """The path of a reference (``N0``, ``N0.a``, ``N0.S1``), an item index, or a path.
        Raises KeyError for an address that names nothing here."""
        ix = self.index
        if isinstance(where, bool):
            raise KeyError(where)
        if isinstance(where, int):
            where = (where,)
        if isinstance(where, (tuple, list)):
            path = tuple(where)
            if path not in ix.nodes:
                raise KeyError(where)
            return path
        if isinstance(where, str):
            m = _NEST_REF.fullmatch(where)
            if m and (int(m.group(1)),) in ix.nodes:
                return (int(m.group(1)),)
            if where in ix.stmt_refs:
                return ix.stmt_refs[where]
            if where in ix.loop_refs:
                return ix.loop_refs[where]
        raise KeyError(where)

    def ref_of(self, path: Path) -> str:
        """The reference of the loop or statement at ``path`` (``N<i>`` for other items)."""
        path = tuple(path)
        if path not in self.index.nodes:
            raise KeyError(path)
        return self.index.ref_of.get(path, f"N{path[0]}" if len(path) == 1 else str(path))

    def item_at(self, where: Address):
        return self.index.nodes[self.path_of(where)]

    def loop_at(self, where: Address) -> A.Loop:
        node = self.item_at(where)
        if not isinstance(node, A.Loop):
            raise KeyError(f"{where!r} is not a loop")
        return node

    def stmt_at(self, where: Address) -> A.Assign:
        node = self.item_at(where)
        if not isinstance(node, A.Assign):
            raise KeyError(f"{where!r} is not a statement")
        return node

    def info_at(self, where: Address) -> StmtInfo:
        """The checker's facts (kind, reduction operator, carried loops...) of a statement."""
        path = self.path_of(where)
        if path not in self.index.infos:
            raise KeyError(f"{where!r} is not a statement")
        return self.index.infos[path]

    def loops(self) -> list[tuple[str, Path]]:
        return list(self.index.loop_refs.items())

    def stmts(self) -> list[tuple[str, Path]]:
        return list(self.index.stmt_refs.items())

    # -- rewriting -------------------------------------------------------------------
    def apply(self, step: S.Step, *, cache: Optional["RewriteCache"] = None) -> "Rewrite":
        return apply(self, step, cache=cache)


@dataclass(frozen=True)
class Rewrite(S.Rewrite):
    """:class:`leirc.strategies.base.Rewrite` plus the new :class:`Program` (its check
    result is the engine's single re-check, reused). ``forward(handle)`` carries a handle
    of the old program (a loop, statement or tensor) over to :attr:`program`."""

    program: Optional[Program] = field(default=None, compare=False)


class RewriteCache:
    """Results of ``apply`` by (fingerprint, step), failures (NotApplicable) included.

    A hit is used only when the cached input is the same tree, names included: a step's
    references name loops (``N0.io``), so on an alpha-equivalent program that spells its
    loops differently the same step may mean another loop."""

    def __init__(self, maxsize: int = 4096):
        self.maxsize = maxsize
        self._d: OrderedDict = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, program: Program, step: S.Step):
        key = (program.fingerprint, step)
        entry = self._d.get(key)
        if entry is None or entry[0] != program.kernel:
            self.misses += 1
            return None
        self._d.move_to_end(key)
        self.hits += 1
        return entry[1]

    def put(self, program: Program, step: S.Step, outcome) -> None:
        self._d[(program.fingerprint, step)] = (program.kernel, outcome)
        self._d.move_to_end((program.fingerprint, step))
        while len(self._d) > self.maxsize:
            self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)


#: the process-wide cache ``apply`` uses unless given another (bounded, deterministic)
DEFAULT_CACHE = RewriteCache()


def apply(program: Program, step: S.Step, *, cache: Optional[RewriteCache] = None) -> Rewrite:
    """Plan ``step`` on ``program`` once, re-check once, and return the :class:`Rewrite`
    with handles (``created``), the touched items and the new :class:`Program`.

    Raises :class:`~leirc.strategies.NotApplicable` (also when cached) and, for a
    strategy that produced a program that does not check, ``StrategyBug``."""
    cache = DEFAULT_CACHE if cache is None else cache
    try:
        hash(step)
    except TypeError:  # an argument value that is not a JSON scalar or list: not cacheable
        cache = None
    hit = cache.get(program, step) if cache is not None else None
    if hit is not None:
        if isinstance(hit, S.NotApplicable):
            raise S.NotApplicable(hit.strategy, hit.reason, hit.nodes)  # a fresh traceback per raise
        return hit
    try:
        try:
            S.get(step.name)
        except KeyError as e:  # a proposer's misspelling is bad input, not a crash
            raise S.NotApplicable(step.name, e.args[0]) from None
        rw = S.plan_step(program.kernel, step, result=program.result)
    except S.NotApplicable as e:
        if cache is not None:
            cache.put(program, step, e)
        raise
    new = Program(rw.kernel, rw.result, file=program.file)
    out = Rewrite(rw.kernel, rw.numerics, rw.created, rw.touched, rw.produced, rw.step, rw.result, before=rw.before,
                  moved=rw.moved, program=new)
    if cache is not None:
        cache.put(program, step, out)
    return out


def replay(program: Program, steps, *, cache: Optional[RewriteCache] = None) -> Program:
    for st in steps:
        program = apply(program, st, cache=cache).program
    return program
