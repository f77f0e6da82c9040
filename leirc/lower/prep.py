"""Target-independent preparation of a checked kernel for lowering (no TVM here).

The checker's facts are turned into a small loop tree (:class:`Loop`, :class:`Store`)
in program order, with everything the TIR emitter must not have to re-derive made
explicit:

* ``Region`` annotations are spliced into their parent body (they only order code);
  ``align`` statements are dropped (the checker already warned, W004).
* **Reduction initialization** (statement kind ``"reduce"``, see
  :class:`leirc.lang.checker.StmtInfo`): at entry of ``init_loop`` every element of X
  that the statement writes inside ``init_loop`` is set to the identity. This is done
  with an explicit *init nest* inserted immediately before ``init_loop`` in its parent
  body: a copy of the statement's enclosing loops from ``init_loop`` inwards, keeping only
  the loops whose index occurs in X's subscript (the spatial loops; the reduction loops
  are dropped), around ``X[s] = identity``. Because the subscript depends only on spatial
  indices, the nest stores to exactly the element set the reduction writes, also when the
  subscript is not injective (``X_{i//2}``), where a "guarded init" (store the identity
  when all reduction indices are at their start) would wipe partial sums. The copied
  loops keep their kind (a ``B`` loop stays bound on CUDA, a ``V`` loop vectorized, ...).
* A reduction with no reduction loop (``init_loop is None``) reads the identity for its
  self-reads: :attr:`Store.self_identity` is set and the emitter substitutes the
  identity constant for every read ``X[s]`` with the statement's own subscript.
* ``update`` and ``scan`` statements are evaluated literally.
* A private tensor (``\\alloc`` in a loop body) is listed in that :class:`Loop`'s
  ``allocs``: the emitter allocates it at the start of the loop body, where every
  iteration (every thread, every parallel task) gets its own copy. Its uses all follow
  the ``\\alloc`` in that body, so allocating at the start is the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Union

from ..lang import ast as A
from ..lang.checker import CheckResult, StmtInfo


@dataclass(eq=False)
class Store:
    """``target = value``; ``value is None`` for a synthesized identity store (init nest)."""

    target: A.Access
    value: Optional[A.Expr]
    info: StmtInfo
    span: Optional[A.Span]
    init: bool = False  # a synthesized ``X[s] = identity``
    self_identity: bool = False  # reduce without reduction loops: self-reads are the identity
    origin: int = -1  # index of the top-level kernel item this node comes from

    @property
    def identity(self) -> Optional[float]:
        return self.info.identity


@dataclass(eq=False)
class Loop:
    kind: str
    extent: int
    var: str
    start: int
    body: list = field(default_factory=list)
    span: Optional[A.Span] = None
    src: Optional[A.Loop] = None  # the LEIR loop (for synthesized init loops: the one copied)
    synthetic: bool = False
    origin: int = -1  # index of the top-level kernel item this node comes from
    #: private tensors (``\\alloc`` items of this body, also inside its regions): allocated
    #: at the start of every iteration's body, so concurrent iterations never share one
    allocs: list = field(default_factory=list)


Node = Union[Loop, Store]


def prepare(result: CheckResult) -> list[Node]:
    """The kernel body as a loop tree with explicit reduction init nests."""
    infos = {id(si.stmt): si for si in result.stmts}
    inits_before: dict[int, list[StmtInfo]] = {}
    for si in result.stmts:
        if si.kind == "reduce" and si.init_loop is not None:
            inits_before.setdefault(id(si.init_loop), []).append(si)

    def conv(items) -> list[Node]:
        out: list[Node] = []
        for it in items:
            if isinstance(it, A.Region):
                out.extend(conv(it.body))
            elif isinstance(it, (A.Align, A.Alloc)):
                continue  # an \alloc is placed on its loop (Loop.allocs) or at the root
            elif isinstance(it, A.Loop):
                for si in inits_before.get(id(it), ()):
                    out.append(_init_nest(si))
                allocs = [result.tensors[a.name] for a in _allocs_in(it.body)]
                out.append(Loop(it.kind, it.extent, it.var, it.start, conv(it.body), it.span, it, allocs=allocs))
            elif isinstance(it, A.Assign):
                si = infos[id(it)]
                out.append(Store(it.target, it.value, si, it.span,
                                 self_identity=(si.kind == "reduce" and si.init_loop is None)))
            else:  # pragma: no cover - the AST has no other item kinds
                raise TypeError(f"unexpected item {type(it).__name__}")
        return out

    out: list[Node] = []
    for k, item in enumerate(result.kernel.body):
        for n in conv([item]):
            n.origin = k
            out.append(n)
    return out


def _allocs_in(items) -> list:
    out = []
    for it in items:
        if isinstance(it, A.Alloc):
            out.append(it)
        elif isinstance(it, A.Region):
            out.extend(_allocs_in(it.body))
    return out


def loop_private(result: CheckResult) -> set:
    """Names of the private tensors allocated inside a loop (the others, allocated at the
    kernel's top level, are ordinary root allocations)."""
    return {n for n, t in result.tensors.items() if t.private and t.alloc_loops}


def _init_nest(si: StmtInfo) -> Node:
    loops = list(si.loops)
    k = next(i for i, l in enumerate(loops) if l is si.init_loop)
    spatial = [l for l in loops[k:] if l.var not in si.reduce_vars]
    node: Node = Store(si.stmt.target, None, si, si.stmt.span, init=True)
    for l in reversed(spatial):
        node = Loop(l.kind, l.extent, l.var, l.start, [node], l.span, l, synthetic=True)
    return node


def walk(nodes) -> "list[Node]":
    """All nodes of a tree (pre-order), iteratively."""
    out = []
    stack = list(reversed(list(nodes)))
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, Loop):
            stack.extend(reversed(n.body))
    return out


def contains_kind(node: Node, kind: str) -> bool:
    return any(isinstance(n, Loop) and n.kind == kind for n in walk([node]))


def identity_value(op: str) -> float:
    return {"+": 0, "-": 0, "*": 1, "max": -math.inf, "min": math.inf}[op]
