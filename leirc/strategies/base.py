"""Strategy engine: registry, steps, traces, the single "not applicable" error.

A *strategy* is an atomic, legality-checked rewrite of a checked kernel. Each strategy
lives in one module per family (``graph.py``, ``loops.py``, ``memory.py``, ...) and is
registered with :func:`strategy`:

.. code-block:: python

    @strategy("loop_split", level="operator", numerics="bitwise", creates=("outer", "inner"),
              args=[Arg("loop", "loop", "loop to split"), Arg("factor", "int", "inner extent")])
    class LoopSplit(Strategy):
        '''<docstring with a Before:/After: example that a test checks>'''
        def sites(self, ctx): ...          # where it applies, with argument domains
        def plan(self, ctx, args): ...     # -> Rewrite; raise NotApplicable if illegal

``plan`` is the one entry point: legality and the new kernel come from one pass, so
nothing is computed twice. Strategies written as ``check`` + ``apply`` still work: the
default ``plan`` calls each once (and ``check``/``apply`` default to ``plan``).
:func:`plan_step` is the engine: it parses the arguments, plans once, re-checks once
(:func:`recheck`), resolves the roles the strategy ``creates`` to references
(``{"outer": "N0.io", "inner": "N0.i"}``) and reports the top-level items it touched.
:func:`apply_step` is the same, returning only the kernel.

Every registered family implements ``plan`` only: it builds the new kernel once and, where
legality needs the checker, re-checks it once through :meth:`Context.recheck`, which
remembers the result, so the engine's final re-check of the same kernel is free. A plan
names what it created (``created``) and where the items it kept went (``moved``), so
:meth:`Rewrite.forward` can carry an earlier step's handle over this step.

Listing: :func:`enumerate_sites` lists every site with its argument domains (what
``leirc strategies`` prints); :func:`sites_at` lists only the sites anchored at one item
and the items around it (an editor's cursor), deferring the domains until they are read.

Every call is data: ``Step(name, args)``. A trace (list of steps) serializes to JSON and
replays on a fresh parse (:func:`replay`). No hidden randomness: every choice (factor,
axis, split point) is an argument; enumerators list the candidates. Argument values are
validated, never coerced: ``4.5`` or ``true`` for an integer is an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Optional

from ..lang import ast as A
from ..lang.checker import CheckResult, check_kernel
from .rewrite import diff_items, forward_handle, get_at, iter_items, iter_loops, iter_stmts, resolve_roles

LEVELS = ("graph", "operator", "memory", "math")
NUMERICS = ("bitwise", "exact-in-reals", "approximate")


class NotApplicable(Exception):
    """The strategy does not apply with these arguments. ``nodes`` names the program
    locations involved (spans), so clients can point at them."""

    def __init__(self, strategy: str, message: str, nodes: Iterable = ()):
        super().__init__(f"{strategy}: {message}")
        self.strategy = strategy
        self.reason = message
        self.nodes = tuple(nodes)

    @property
    def spans(self) -> list:
        return [getattr(n, "span", None) for n in self.nodes if getattr(n, "span", None) is not None]


class StrategyBug(Exception):
    """A strategy produced a program that does not check; always a bug in leirc."""


@dataclass(frozen=True)
class Arg:
    """A typed strategy argument.

    kind: ``loop`` (a loop reference such as ``"N0.a"``: top-level item 0, loop with index
    ``a``), ``nest`` (a top-level item index), ``stmt`` (``"N0.S1"``: statement 1 of item 0
    in pre-order), ``tensor`` (a tensor name), ``int``, ``choice`` (one of ``choices``),
    ``loops`` (comma-separated loop references, e.g. a new loop order).
    """

    name: str
    kind: str
    doc: str
    choices: tuple = ()
    default: Any = None

    def parse(self, strategy: str, value: Any) -> Any:
        """Convert a CLI/JSON value; raises NotApplicable with a uniform message.

        Nothing is coerced silently: ``4.5`` or ``true`` for an integer argument is an
        error (``int()`` would truncate them), while the CLI's string ``"4"`` is accepted."""
        where = f"argument '{self.name}' of {strategy}"
        if self.default is not None and type(value) is type(self.default) and value == self.default:
            return value  # defaults are already typed (CLI and traces may repeat them)
        if self.kind in ("int", "nest"):
            v = _as_int(value)
            if v is None:
                raise NotApplicable(strategy, f"{where}: expected an integer, got {_show(value)}")
            return v
        if self.kind == "bool":
            v = _as_bool(value)
            if v is None:
                raise NotApplicable(strategy, f"{where}: expected true or false, got {_show(value)}")
            return v
        if self.kind == "choice":
            if isinstance(value, bool) and set(self.choices) == {"false", "true"}:
                return "true" if value else "false"  # a JSON boolean for a yes/no choice
            if not isinstance(value, str) or value not in self.choices:
                raise NotApplicable(strategy, f"{where}: must be one of {', '.join(map(str, self.choices))}, "
                                              f"got {_show(value)}")
            return value
        if self.kind == "loops":
            items = list(value) if isinstance(value, (list, tuple)) else (
                [v.strip() for v in value.split(",")] if isinstance(value, str) else None)
            if items is None or not items or not all(isinstance(v, str) and v for v in items):
                raise NotApplicable(strategy, f"{where}: expected comma-separated loop names, got {_show(value)}")
            return tuple(items)
        if not isinstance(value, str) or not value:
            raise NotApplicable(strategy, f"{where}: expected a non-empty string, got {_show(value)}")
        return value


_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")


def _as_int(value: Any) -> Optional[int]:
    if isinstance(value, bool):  # bool is an int subclass: True would pass as 1
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        return int(value)
    return None  # floats (even 4.0), None, lists: never truncated or guessed


def _as_bool(value: Any) -> Optional[bool]:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _show(value: Any) -> str:
    """JSON spelling in messages (``true``, ``4.5``, ``"a"``), as the trace file writes it."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class Step:
    """One strategy application, as data."""

    name: str
    args: tuple = ()  # sorted (key, value) pairs; values are JSON scalars or tuples

    @staticmethod
    def make(name: str, **args) -> "Step":
        return Step(name, tuple(sorted((k, _freeze(v)) for k, v in args.items())))

    @property
    def kwargs(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.args}

    def to_json(self) -> dict:
        return {"strategy": self.name, "args": self.kwargs}

    @staticmethod
    def from_json(d: dict) -> "Step":
        if not isinstance(d, dict) or "strategy" not in d:
            raise ValueError(f"not a step: {d!r}")
        return Step.make(d["strategy"], **(d.get("args") or {}))

    def __str__(self) -> str:
        a = ", ".join(f"{k}={v}" for k, v in self.kwargs.items())
        return f"{self.name}({a})"


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def trace_to_json(steps: list[Step], **meta) -> str:
    return json.dumps({"version": 1, **meta, "steps": [s.to_json() for s in steps]}, indent=2)


def trace_from_json(text: str) -> list[Step]:
    d = json.loads(text)
    if isinstance(d, list):
        return [Step.from_json(x) for x in d]
    return [Step.from_json(x) for x in d["steps"]]


class Site:
    """Where a strategy applies: fixed arguments plus the domains of the free ones.

    ``domains`` may be given as ``resolve``, a function computing them on first access:
    a cursor-restricted listing (:func:`sites_at`) does not pay for the domains of sites
    nobody looks at. A lazily resolved site may turn out to have an empty domain (no
    argument value is legal): it then offers no step."""

    __slots__ = ("strategy", "fixed", "description", "_domains", "_resolve")

    def __init__(self, strategy: str, fixed: dict, domains: Optional[dict] = None, description: str = "", *,
                 resolve: Optional[Callable[[], dict]] = None):
        self.strategy = strategy
        self.fixed = fixed
        self.description = description
        self._domains = {} if domains is None else domains
        self._resolve = resolve

    @property
    def domains(self) -> dict:
        """arg name -> list of allowed values (computed now if it was deferred)."""
        if self._resolve is not None:
            self._domains, self._resolve = dict(self._resolve()), None
        return self._domains

    @domains.setter
    def domains(self, value: dict) -> None:
        self._domains, self._resolve = value, None

    @property
    def resolved(self) -> bool:
        """Are the domains known (not deferred)?"""
        return self._resolve is None

    def __eq__(self, other) -> bool:
        if not isinstance(other, Site):
            return NotImplemented
        return (self.strategy, self.fixed, self.domains, self.description) == (
            other.strategy, other.fixed, other.domains, other.description)

    __hash__ = None  # mutable, as the dataclass it replaces

    def __repr__(self) -> str:
        doms = repr(self._domains) if self._resolve is None else "<deferred>"
        return f"Site(strategy={self.strategy!r}, fixed={self.fixed!r}, domains={doms}, description={self.description!r})"

    @property
    def empty(self) -> bool:
        """No step: some free argument has no legal value."""
        return any(not v for v in self.domains.values())

    def steps(self, limit: Optional[int] = None) -> list[Step]:
        """Every concrete step of this site (cartesian product of the domains)."""
        import itertools

        keys = list(self.domains)
        out = []
        for combo in itertools.product(*[self.domains[k] for k in keys]):
            out.append(Step.make(self.strategy, **self.fixed, **dict(zip(keys, combo))))
            if limit is not None and len(out) >= limit:
                break
        return out

    def first_step(self) -> Step:
        return Step.make(self.strategy, **self.fixed, **{k: v[0] for k, v in self.domains.items() if v})

    def to_json(self) -> dict:
        return {"strategy": self.strategy, "args": self.fixed, "domains": self.domains, "description": self.description}


class Focus:
    """The part of a kernel a cursor-restricted listing asks about: the item at ``path``
    (a loop or statement) and everything enclosing it, up to its top-level nest. A site
    is in focus when its anchor -- the node its first node-naming argument names (loop,
    statement, nest), or for a tensor-only strategy the first statement writing the
    tensor -- is one of those nodes: exactly the sites an editor offers at the cursor."""

    def __init__(self, kernel: A.Kernel, path: tuple):
        path = tuple(path)
        if not path or not 0 <= path[0] < len(kernel.body):
            raise KeyError(f"no item at {path!r}")
        self.path = path
        self.paths = {path[:k] for k in range(1, len(path) + 1)}  # the item and its enclosing items
        self.nest = path[0]
        try:
            node = get_at(kernel, path)
        except (IndexError, AttributeError):
            raise KeyError(f"no item at {path!r}") from None
        self.stmt_path = path if isinstance(node, A.Assign) else None
        self._first_writer: Optional[dict] = None
        self._kernel = kernel

    def has(self, path) -> bool:
        return tuple(path) in self.paths

    def has_tensor(self, name: str) -> bool:
        """Is ``name`` anchored here (its first writer is the focused statement)?"""
        if self.stmt_path is None:
            return False
        if self._first_writer is None:
            self._first_writer = {}
            for _, st, p in iter_stmts(self._kernel):
                self._first_writer.setdefault(st.target.name, p)
        return self._first_writer.get(name) == self.stmt_path


class Context:
    """A checked kernel plus lookup helpers handed to strategies."""

    def __init__(self, kernel: A.Kernel, result: Optional[CheckResult] = None, focus: Optional[Focus] = None):
        self.kernel = kernel
        self.result = result if result is not None else check_kernel(kernel)
        self._memo: dict = {}
        self._checked: dict = {}  # candidate kernel -> its CheckResult (structural key)
        #: restricts ``sites`` to the anchors a cursor is in (None: everywhere); with a
        #: focus, strategies may also defer their argument domains (:class:`Site`)
        self.focus = focus

    @property
    def lazy(self) -> bool:
        """May ``sites`` defer the domains (a cursor-restricted listing)?"""
        return self.focus is not None

    # -- where ``sites`` looks: everything, or only the anchors in focus ------------------
    def loops(self):
        """``(ref, loop, path)`` of the loops a site may be anchored at."""
        for ref, lp, path in iter_loops(self.kernel):
            if self.focus is None or self.focus.has(path):
                yield ref, lp, path

    def stmts(self):
        """``(ref, statement, path)`` of the statements a site may be anchored at."""
        for ref, st, path in iter_stmts(self.kernel):
            if self.focus is None or self.focus.has(path):
                yield ref, st, path

    def nests(self, span: int = 1):
        """Indices of the top-level items a ``nest`` site may name (``span`` consecutive
        items from there must exist)."""
        ids = range(len(self.kernel.body) - span + 1)
        return [i for i in ids if self.focus is None or i == self.focus.nest]

    def wants_tensor(self, name: str) -> bool:
        """May a tensor-anchored site of ``name`` be listed?"""
        return self.focus is None or self.focus.has_tensor(name)

    @property
    def ok(self) -> bool:
        return self.result.ok

    def memo(self, key, fn: Callable[[], Any]):
        """``fn()`` computed once per context and ``key``: the shared place for work that
        ``sites``/``plan`` would otherwise redo (instead of ad-hoc attributes)."""
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def recheck(self, strategy: str, kernel: A.Kernel, *nodes, message: str = "{message}") -> CheckResult:
        """Check a candidate kernel; its first error becomes ``NotApplicable`` (pointing at
        ``nodes``, worded by ``message`` with ``{code}`` and ``{message}`` filled in). The
        result is remembered, so the engine's final re-check of the same kernel is free."""
        res = self.checked(kernel)
        err = next((d for d in res.diagnostics if d.is_error), None)
        if err is not None:
            raise NotApplicable(strategy, message.format(code=err.code, message=err.message), nodes)
        return res

    def passes(self, kernel: A.Kernel) -> bool:
        """Does a candidate kernel check clean (remembered like :meth:`recheck`)?"""
        return not any(d.is_error for d in self.checked(kernel).diagnostics)

    def checked(self, kernel: A.Kernel) -> CheckResult:
        """The check result of ``kernel``, remembered. A hit must be for this very object:
        the result's facts point at its nodes (an equal kernel built twice, or one that
        differs only in spans, is checked again)."""
        res = self._checked.get(kernel)
        if res is None or res.kernel is not kernel:
            res = self._checked[kernel] = check_kernel(kernel)
        return res


@dataclass(frozen=True)
class Role:
    """Something a strategy creates, named so callers need not guess fresh names:
    ``loop`` roles resolve to a loop reference (``N0.io``), ``tensor`` roles to a name."""

    name: str
    kind: str = "loop"

    @staticmethod
    def parse(spec) -> "Role":
        if isinstance(spec, Role):
            return spec
        name, _, kind = str(spec).partition(":")
        role = Role(name, kind or "loop")
        assert role.kind in ROLE_KINDS, spec
        return role


ROLE_KINDS = ("loop", "tensor")


@dataclass(frozen=True)
class Rewrite:
    """The outcome of one planned strategy application.

    ``created`` maps each role the strategy declares (``creates=`` in the registry) to a
    reference in ``kernel``; ``touched`` are the paths of the top-level items of the *old*
    kernel that were changed or removed, ``produced`` the paths of the items of the new
    kernel that replace them (an editor rewrites exactly that text)."""

    kernel: A.Kernel
    numerics: str = "bitwise"
    created: Mapping[str, str] = field(default_factory=dict)
    touched: tuple = ()
    produced: tuple = ()
    step: Optional["Step"] = None
    result: Optional[CheckResult] = field(default=None, compare=False, repr=False)
    #: the kernel the step was planned on (set by :func:`plan_step`; :meth:`forward` needs it)
    before: Optional[A.Kernel] = field(default=None, compare=False, repr=False)
    #: old path -> new path of items the strategy kept inside what it rewrote (a bound
    #: loop, the body of a split loop); :meth:`forward` knows everything else itself
    moved: Mapping = field(default_factory=dict, compare=False, repr=False)

    def forward(self, handle: str) -> Optional[str]:
        """The reference in :attr:`kernel` of what ``handle`` named in the kernel this step
        was planned on: a loop (``N0.i``), a statement (``N0.S1``) or a tensor name. None
        when the step removed or rebuilt it (a caller then skips what it meant to do with
        it): never a guess, since a wrong handle would rewrite the wrong loop.

        Items outside the rewritten region keep their place (shifted past inserted or
        removed nests); inside it, an item follows :attr:`moved` or, if it survived
        unchanged, the one identical item of the new region."""
        if self.before is None:
            raise ValueError("this Rewrite does not know the kernel it was planned on (use plan_step)")
        return forward_handle(self.before, self.kernel, handle, self.moved)


class Strategy:
    """Protocol: ``sites`` plus either ``plan`` (preferred: legality and rewrite in one
    pass, returning a :class:`Rewrite`) or the older pair ``check`` + ``apply``. Each
    default is written in terms of the other, so callers may use any of the three."""

    name: str = ""
    level: str = ""
    numerics: str = "bitwise"
    args: tuple = ()
    summary: str = ""
    creates: tuple = ()  # Role values, from the registry

    def sites(self, ctx: Context) -> list[Site]:  # pragma: no cover - abstract
        raise NotImplementedError

    def plan(self, ctx: Context, args: dict) -> Rewrite:
        """Legality and rewrite; raises NotApplicable. The default serves strategies that
        still have separate ``check``/``apply``: it checks, applies once and asks
        :meth:`numerics_for`."""
        self.check(ctx, args)
        return Rewrite(self.apply(ctx, args), self.numerics_for(ctx, args))

    def check(self, ctx: Context, args: dict) -> None:
        self.plan(ctx, args)

    def apply(self, ctx: Context, args: dict) -> A.Kernel:
        return self.plan(ctx, args).kernel

    def site(self, ctx: Context, fixed: dict, description: str, domains: Callable[[], dict]) -> Optional[Site]:
        """A site whose argument domains ``domains()`` computes (legal values only): in a
        cursor-restricted listing (``ctx.lazy``) deferred until read, otherwise computed
        now, and None when a free argument has no legal value."""
        if ctx.lazy:
            return Site(self.name, fixed, description=description, resolve=domains)
        d = domains()
        if any(not v for v in d.values()):
            return None
        return Site(self.name, fixed, d, description)

    def na(self, message: str, *nodes) -> NotApplicable:
        return NotApplicable(self.name, message, nodes)

    def numerics_for(self, ctx: Context, args: dict) -> str:
        """Numerics class of this particular application (some strategies are bitwise
        for some arguments and exact-in-reals for others): what :meth:`plan` reports."""
        if _overrides(type(self), "plan"):
            return self.plan(ctx, args).numerics
        return self.numerics


def _overrides(cls, name: str) -> bool:
    return getattr(cls, name) is not getattr(Strategy, name)


REGISTRY: dict[str, Strategy] = {}


def strategy(name: str, *, level: str, numerics: str, args: Iterable[Arg] = (), summary: str = "",
             creates: Iterable = ()) -> Callable:
    """Class decorator registering a strategy under a stable name.

    ``creates`` names what an application creates, as roles ``"name"`` (a loop) or
    ``"name:tensor"``, in the order they appear in the new program (pre-order for loops,
    first write for tensors): e.g. ``creates=("outer", "inner")`` for ``loop_split``. The
    engine resolves them to references in :attr:`Rewrite.created`."""
    assert level in LEVELS, level
    assert numerics in NUMERICS, numerics
    roles = tuple(Role.parse(r) for r in creates)

    def deco(cls):
        if name in REGISTRY:
            raise ValueError(f"strategy {name} registered twice")
        # the defaults of plan and check/apply call each other: one side must be real
        assert _overrides(cls, "plan") or (_overrides(cls, "check") and _overrides(cls, "apply")), name
        obj = cls()
        obj.name = name
        obj.level = level
        obj.numerics = numerics
        obj.args = tuple(args)
        obj.creates = roles
        doc = (cls.__doc__ or "").strip()
        obj.summary = summary or (doc.splitlines()[0] if doc else "")
        REGISTRY[name] = obj
        return cls

    return deco


def get(name: str) -> Strategy:
    _load_all()
    if name not in REGISTRY:
        close = [n for n in REGISTRY if n.startswith(name[:4])]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown strategy '{name}'{hint}")
    return REGISTRY[name]


def all_strategies() -> list[Strategy]:
    _load_all()
    return [REGISTRY[n] for n in sorted(REGISTRY)]


def _load_all() -> None:
    from . import families  # noqa: F401  (imports every family module)


def parse_args(s: Strategy, raw: dict) -> dict:
    known = {a.name: a for a in s.args}
    out = {}
    for k, v in raw.items():
        if k not in known:
            raise NotApplicable(s.name, f"unknown argument '{k}' (expected {', '.join(known) or 'none'})")
        out[k] = known[k].parse(s.name, v)
    for a in s.args:
        if a.name not in out:
            if a.default is not None:
                out[a.name] = a.default
            else:
                raise NotApplicable(s.name, f"missing argument '{a.name}' ({a.doc})")
    return out


def recheck(step: "Step", kernel: A.Kernel, ctx: Optional[Context] = None) -> CheckResult:
    """The one re-check of a strategy's result: a program that does not check is a bug in
    leirc (the strategy should have said NotApplicable), never the user's problem."""
    res = ctx.checked(kernel) if ctx is not None else check_kernel(kernel)
    if not res.ok:
        from ..lang.printer import print_kernel

        msgs = "; ".join(f"{d.code} {d.message}" for d in res.diagnostics if d.is_error)
        raise StrategyBug(f"{step} produced a program that does not check: {msgs}\n{print_kernel(kernel, 'pretty')}")
    return res


def plan_step(kernel: A.Kernel, step: "Step", *, result: Optional[CheckResult] = None) -> Rewrite:
    """Apply one step to a kernel that checks clean: plan once, re-check once, resolve the
    created roles and the touched items. Raises NotApplicable (or StrategyBug)."""
    s = get(step.name)
    ctx = Context(kernel, result)
    if not ctx.ok:
        raise NotApplicable(step.name, "the program has errors; fix them first")
    args = parse_args(s, step.kwargs)
    rw = s.plan(ctx, args)
    res = recheck(step, rw.kernel, ctx)
    created = dict(rw.created)
    if any(r.name not in created for r in s.creates):
        # roles the planner did not name itself are found by diffing around the site
        for role, ref in resolve_roles(s.creates, kernel, rw.kernel).items():
            created.setdefault(role, ref)
    touched, produced = diff_items(kernel, rw.kernel)
    return Rewrite(rw.kernel, rw.numerics, MappingProxyType(created), touched, produced, step, res,
                   before=kernel, moved=MappingProxyType(dict(rw.moved)))


def apply_step(kernel: A.Kernel, step: "Step", *, result: Optional[CheckResult] = None) -> A.Kernel:
    """Apply one step to a kernel that checks clean; the result is re-checked."""
    return plan_step(kernel, step, result=result).kernel


def enumerate_sites(kernel: A.Kernel, names: Optional[Iterable[str]] = None, result: Optional[CheckResult] = None) -> list[Site]:
    """Every site of every strategy (or of ``names``), with its argument domains."""
    ctx = Context(kernel, result)
    if not ctx.ok:
        return []
    out: list[Site] = []
    for s in all_strategies():
        if names is not None and s.name not in names:
            continue
        out.extend(s.sites(ctx))
    return out


def item_at_position(kernel: A.Kernel, line: int, col: int) -> Optional[tuple]:
    """Path of the innermost loop, region or statement whose span contains ``(line, col)``
    (1-based; the end column counts), or None."""
    best = None
    for path, node in iter_items(kernel):
        sp = getattr(node, "span", None)
        if sp is None or (line, col) < (sp.line, sp.col) or (line, col) > (sp.end_line, sp.end_col):
            continue
        if best is None or len(path) > len(best):
            best = path
    return best


def sites_at(kernel: A.Kernel, where, col: Optional[int] = None, *, result: Optional[CheckResult] = None,
             strategies: Optional[Iterable[str]] = None) -> list[Site]:
    """The sites anchored at one item of ``kernel`` and the items enclosing it: what an
    editor offers at a cursor, without listing the whole kernel.

    ``where`` is a path (``(0, 1)``), a reference (``N0``, ``N0.i``, ``N0.S1``) or, with
    ``col``, a 1-based source line (the innermost item whose span contains the position).
    The sites are those of :func:`enumerate_sites` whose anchor is in focus (the same
    order, the same fixed arguments), except that argument domains may be deferred until
    ``site.domains`` is read (:class:`Site`). Unknown places give no sites."""
    ctx = Context(kernel, result)
    if not ctx.ok:
        return []
    if col is not None:
        path = item_at_position(kernel, int(where), int(col))
    elif isinstance(where, str):
        path = _path_of_ref(kernel, where)
    else:
        path = tuple(where)
    if not path:
        return []
    try:
        ctx.focus = Focus(kernel, path)
    except KeyError:
        return []
    names = None if strategies is None else set(strategies)
    anchors = _Anchors(kernel)
    out: list[Site] = []
    for s in all_strategies():
        if names is None or s.name in names:
            # a strategy's sites() skips most anchors out of focus itself; this keeps the
            # answer exact for every strategy (one that lists everywhere is filtered here)
            for site in s.sites(ctx):
                where = anchors.path(s, site.fixed)
                if where is None and not site.empty:
                    where = anchors.path(s, site.first_step().kwargs)
                if where is not None and ctx.focus.has(where):
                    out.append(site)
    return out


#: argument kinds that name a program node, tried in the order a strategy declares its
#: arguments (``leirc.ide.anchors`` maps the same node to a source span)
NODE_KINDS = ("loop", "loops", "stmt", "nest")


class _Anchors:
    """The node a site is anchored at, by path: its first node-naming argument, or for a
    tensor-only strategy the first statement writing the tensor."""

    def __init__(self, kernel: A.Kernel):
        self.n_items = len(kernel.body)
        self.loops = {ref: path for ref, _, path in iter_loops(kernel)}
        self.stmts: dict = {}
        self.writers: dict = {}
        for ref, st, path in iter_stmts(kernel):
            self.stmts[ref] = path
            self.writers.setdefault(st.target.name, path)

    def path(self, s: "Strategy", args: dict) -> Optional[tuple]:
        tensor = None
        for a in s.args:
            if a.name not in args:
                continue
            v = args[a.name]
            if a.kind == "loop":
                p = self.loops.get(str(v))
            elif a.kind == "loops":
                refs = list(v) if isinstance(v, (list, tuple)) else str(v).split(",")
                p = self.loops.get(str(refs[0]).strip()) if refs else None
            elif a.kind == "stmt":
                p = self.stmts.get(str(v))
            elif a.kind == "nest":
                i = _as_int(v)
                p = (i,) if i is not None and 0 <= i < self.n_items else None
            else:
                if a.kind == "tensor" and tensor is None and isinstance(v, str):
                    tensor = v
                continue
            if p is not None:
                return p
        return self.writers.get(tensor) if tensor is not None else None


def _path_of_ref(kernel: A.Kernel, ref: str) -> Optional[tuple]:
    m = re.fullmatch(r"N(\d+)", ref)
    if m:
        return (int(m.group(1)),)
    for r, _, path in iter_stmts(kernel):
        if r == ref:
            return path
    for r, _, path in iter_loops(kernel):
        if r == ref:
            return path
    return None


def replay(kernel: A.Kernel, steps: Iterable[Step]) -> A.Kernel:
    for st in steps:
        kernel = apply_step(kernel, st)
    return kernel
