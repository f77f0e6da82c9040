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
from .rewrite import diff_items, resolve_roles

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


@dataclass
class Site:
    """Where a strategy applies: fixed arguments plus the domains of the free ones."""

    strategy: str
    fixed: dict
    domains: dict = field(default_factory=dict)  # arg name -> list of allowed values
    description: str = ""

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


class Context:
    """A checked kernel plus lookup helpers handed to strategies."""

    def __init__(self, kernel: A.Kernel, result: Optional[CheckResult] = None):
        self.kernel = kernel
        self.result = result if result is not None else check_kernel(kernel)
        self._memo: dict = {}
        self._checked: dict = {}  # candidate kernel -> its CheckResult (structural key)

    @property
    def ok(self) -> bool:
        return self.result.ok

    def memo(self, key, fn: Callable[[], Any]):
        """``fn()`` computed once per context and ``key``: the shared place for work that
        ``sites``/``plan`` would otherwise redo (instead of ad-hoc attributes)."""
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def recheck(self, strategy: str, kernel: A.Kernel, *nodes) -> CheckResult:
        """Check a candidate kernel; its first error becomes ``NotApplicable`` (pointing at
        ``nodes``). The result is remembered, so the engine's final re-check of the same
        kernel is free."""
        res = self.checked(kernel)
        err = next((d for d in res.diagnostics if d.is_error), None)
        if err is not None:
            raise NotApplicable(strategy, err.message, nodes)
        return res

    def checked(self, kernel: A.Kernel) -> CheckResult:
        res = self._checked.get(kernel)
        if res is None:
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

    def na(self, message: str, *nodes) -> NotApplicable:
        return NotApplicable(self.name, message, nodes)

    def numerics_for(self, ctx: Context, args: dict) -> str:
        """Numerics class of this particular application (some strategies are bitwise
        for some arguments and exact-in-reals for others)."""
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
    for role, ref in resolve_roles(s.creates, kernel, rw.kernel).items():
        created.setdefault(role, ref)
    touched, produced = diff_items(kernel, rw.kernel)
    return Rewrite(rw.kernel, rw.numerics, MappingProxyType(created), touched, produced, step, res)


def apply_step(kernel: A.Kernel, step: "Step", *, result: Optional[CheckResult] = None) -> A.Kernel:
    """Apply one step to a kernel that checks clean; the result is re-checked."""
    return plan_step(kernel, step, result=result).kernel


def enumerate_sites(kernel: A.Kernel, names: Optional[Iterable[str]] = None, result: Optional[CheckResult] = None) -> list[Site]:
    ctx = Context(kernel, result)
    if not ctx.ok:
        return []
    out: list[Site] = []
    for s in all_strategies():
        if names is not None and s.name not in names:
            continue
        out.extend(s.sites(ctx))
    return out


def replay(kernel: A.Kernel, steps: Iterable[Step]) -> A.Kernel:
    for st in steps:
        kernel = apply_step(kernel, st)
    return kernel
