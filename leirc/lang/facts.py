"""The facts the checker produces, in a module of their own so that the analyses the
checker itself uses (:mod:`leirc.analysis`) can name them without importing the checker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

from . import ast as A
from .diagnostics import Diagnostic


@dataclass
class TensorInfo:
    name: str
    dtype: str
    scope: str
    role: str  # "input" | "output" | "intermediate"
    rank: int
    shape: Optional[tuple[int, ...]] = None
    span: Optional[A.Span] = None
    written: bool = False
    read: bool = False
    #: the ``\\alloc`` item of a private tensor (None: one buffer for the whole kernel)
    alloc: Optional[A.Alloc] = None
    #: the loops around that item: each of their iterations has its own copy
    alloc_loops: tuple = field(default=(), repr=False)

    @property
    def private(self) -> bool:
        return self.alloc is not None


@dataclass
class StmtInfo:
    """What the checker learned about one assignment."""

    stmt: A.Assign
    loops: tuple[A.Loop, ...]  # enclosing loops, outermost first
    order: int  # position in program order
    kind: str = "assign"  # "assign" | "reduce" | "update" | "scan"
    op: Optional[str] = None  # reduction operator (+ - * max min)
    identity: Optional[float] = None
    operand: Optional[A.Expr] = None  # the e of X = X op e
    reduce_vars: tuple[str, ...] = ()  # enclosing loop vars absent from the target subscript
    init_loop: Optional[A.Loop] = None  # outermost reduction loop (identity stored on entry)
    carried: frozenset = frozenset()  # loop vars carrying a dependence of this statement
    #: private tensors visible here -> how many of ``loops`` (outermost first) enclose their
    #: ``\\alloc``: iterations of those loops touch different copies
    private: dict = field(default_factory=dict)


@dataclass
class CheckResult:
    kernel: A.Kernel
    diagnostics: list[Diagnostic]
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    stmts: list[StmtInfo] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    def info(self, stmt: A.Assign) -> StmtInfo:
        for s in self.stmts:
            if s.stmt is stmt:
                return s
        raise KeyError("statement not in this kernel")

    @property
    def intermediates(self) -> list[TensorInfo]:
        return [t for t in self.tensors.values() if t.role == "intermediate"]


def accesses(e: A.Expr) -> Iterable[A.Access]:
    for n in A.walk(e):
        if isinstance(n, A.Access):
            yield n
