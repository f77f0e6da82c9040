"""Strategy engine: registry, steps, traces, the single "not applicable" error.

A *strategy* is an atomic, legality-checked rewrite of a checked kernel. Each strategy
lives in one module per family (``graph.py``, ``loops.py``, ``memory.py``, ...) and is
registered with :func:`strategy`:

.. code-block:: python

    @strategy("loop_parallelization", level="operator", numerics="bitwise",
              args=[Arg("loop", "loop", "the loop to run in parallel")])
    class LoopParallelization(Strategy):
        '''<docstring with a Before:/After: example that a test checks>'''
        def sites(self, ctx): ...          # where it applies, with argument domains
        def check(self, ctx, args): ...    # raise NotApplicable(...) if illegal
        def apply(self, ctx, args): ...    # return the new kernel

Every call is data: ``Step(name, args)``. A trace (list of steps) serializes to JSON and
replays on a fresh parse (:func:`replay`). No hidden randomness: every choice (factor,
axis, split point) is an argument; enumerators list the candidates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from ..lang import ast as A
from ..lang.checker import CheckResult, check_kernel

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
        """Convert a CLI/JSON value; raises NotApplicable with a uniform message."""
        where = f"argument '{self.name}'"
        if self.default is not None and value == self.default:
            return value  # defaults are already typed (CLI and traces may repeat them)
        if self.kind == "int" or self.kind == "nest":
            try:
                v = int(value)
            except (TypeError, ValueError):
                raise NotApplicable(strategy, f"{where} must be an integer, got {value!r}") from None
            return v
        if self.kind == "choice":
            if value not in self.choices:
                raise NotApplicable(strategy, f"{where} must be one of {', '.join(map(str, self.choices))}, got {value!r}")
            return value
        if self.kind == "loops":
            if isinstance(value, (list, tuple)):
                return tuple(str(v) for v in value)
            return tuple(v.strip() for v in str(value).split(",") if v.strip())
        if not isinstance(value, str) or not value:
            raise NotApplicable(strategy, f"{where} must be a non-empty string, got {value!r}")
        return value


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

    @property
    def ok(self) -> bool:
        return self.result.ok


class Strategy:
    name: str = ""
    level: str = ""
    numerics: str = "bitwise"
    args: tuple = ()
    summary: str = ""

    def sites(self, ctx: Context) -> list[Site]:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, ctx: Context, args: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply(self, ctx: Context, args: dict) -> A.Kernel:  # pragma: no cover - abstract
        raise NotImplementedError

    def na(self, message: str, *nodes) -> NotApplicable:
        return NotApplicable(self.name, message, nodes)

    def numerics_for(self, ctx: Context, args: dict) -> str:
        """Numerics class of this particular application (some strategies are bitwise
        for some arguments and exact-in-reals for others)."""
        return self.numerics


REGISTRY: dict[str, Strategy] = {}


def strategy(name: str, *, level: str, numerics: str, args: Iterable[Arg] = (), summary: str = "") -> Callable:
    """Class decorator registering a strategy under a stable name."""
    assert level in LEVELS, level
    assert numerics in NUMERICS, numerics

    def deco(cls):
        if name in REGISTRY:
            raise ValueError(f"strategy {name} registered twice")
        obj = cls()
        obj.name = name
        obj.level = level
        obj.numerics = numerics
        obj.args = tuple(args)
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


def apply_step(kernel: A.Kernel, step: Step, *, result: Optional[CheckResult] = None) -> A.Kernel:
    """Apply one step to a kernel that checks clean; the result is re-checked."""
    s = get(step.name)
    ctx = Context(kernel, result)
    if not ctx.ok:
        raise NotApplicable(step.name, "the program has errors; fix them first")
    args = parse_args(s, step.kwargs)
    s.check(ctx, args)
    new = s.apply(ctx, args)
    res = check_kernel(new)
    if not res.ok:
        from ..lang.printer import print_kernel

        msgs = "; ".join(f"{d.code} {d.message}" for d in res.diagnostics if d.is_error)
        raise StrategyBug(f"{step} produced a program that does not check: {msgs}\n{print_kernel(new, 'pretty')}")
    return new


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
