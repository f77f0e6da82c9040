"""Branch coverage of a verification: which comparisons of the reference took both outcomes.

A planted ``if_then_else(A > 1e5, ...)`` is invisible to inputs that never exceed 1e5: the
verifier's ``branches`` probe draws values on both sides of every such threshold
(:func:`leirc.interp.inputs.branch_points`), and this module says afterwards whether each
comparison of the reference program actually went both ways on the runs made.

A comparison is *measured* when each side is a constant or a strictly monotone function of
one tensor element (:func:`leirc.interp.inputs.invert`: ``X``, ``X*c + d``, a cast), and two
tensor sides read the same tensor shape with the same subscripts (an elementwise
comparison). The outcome is evaluated over every element of the tensor(s) on each run's
values -- inputs, and intermediates/outputs from a reference run that keeps them -- which is
what a comparison inside the full iteration space reads; a comparison under a guard or on a
slice may read fewer elements, so "both outcomes" is a statement about the values present,
not a proof that the guarded code ran. Anything else (``X - M > 0`` with ``M`` a row
statistic, a comparison of loop indices with data) is listed with ``measured: false``.
``max``/``min`` count as the comparison that picks an operand (``a > b`` / ``a < b``).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..interp.inputs import BranchSite, branch_sites, const_value, invert
from ..lang import ast as A

_OPS = {">": np.greater, "<": np.less, ">=": np.greater_equal, "<=": np.less_equal, "==": np.equal,
        "!=": np.not_equal}


def _sum_side(e):
    """``("sum", names, accesses, forward)`` for ``f(X) +- g(Y)`` with f, g monotone in one
    element each (see :func:`invert`), else None."""
    if not (isinstance(e, A.BinOp) and e.op in ("+", "-")):
        return None
    ra, rb = invert(e.lhs), invert(e.rhs)
    if ra is None or rb is None:
        return None
    fa, fb = ra[2], rb[2]
    if ra[0] == rb[0]:
        fwd = (lambda x: fa(x) + fb(x)) if e.op == "+" else (lambda x: fa(x) - fb(x))
        return ("sum", (ra[0],), (ra[1], rb[1]), fwd)
    fwd = (lambda x, y: fa(x) + fb(y)) if e.op == "+" else (lambda x, y: fa(x) - fb(y))
    return ("sum", (ra[0], rb[0]), (ra[1], rb[1]), fwd)


class _Site:
    def __init__(self, site: BranchSite, program: str = "reference", inputs_only: Optional[set] = None):
        self.site = site
        self.program = program
        self.true = False
        self.false = False
        self.runs = 0
        self.sides = []  # per side: ("const", value) | ("tensor", name, access, forward) | None
        for e in (site.lhs, site.rhs):
            c = const_value(e)
            if c is not None:
                self.sides.append(("const", c))
                continue
            r = invert(e)
            if r is not None:
                self.sides.append(("tensor", (r[0],), (r[1],), r[2]))
                continue
            self.sides.append(_sum_side(e))
        kinds = [s[0] if s else None for s in self.sides]
        self.measured = None not in kinds and ("tensor" in kinds or "sum" in kinds)
        accs = [a for s in self.sides if s and s[0] != "const" for a in s[2]] if self.measured else []
        # elementwise only: the same subscripts everywhere (and, checked per run, one shape)
        if accs and any(a.indices != accs[0].indices for a in accs):
            self.measured = False
        if inputs_only is not None and not self.tensors <= inputs_only:
            # the candidate's intermediates are compiled code: their values are not observed
            self.measured = False
        self.op = site.op

    @property
    def tensors(self) -> set:
        return {n for s in self.sides if s and s[0] != "const" for n in s[1]}

    def observe(self, values: dict) -> None:
        if not self.measured:
            return
        arrays = []
        for s in self.sides:
            if s[0] == "const":
                arrays.append(np.float64(s[1]))
                continue
            vs = [values.get(n) for n in s[1]]
            if any(v is None for v in vs) or len({np.shape(v) for v in vs}) > 1:
                return
            with np.errstate(all="ignore"):
                arrays.append(s[3](*[np.asarray(v).astype(np.float64) for v in vs]))
        if all(np.ndim(a) > 0 for a in arrays) and np.shape(arrays[0]) != np.shape(arrays[1]):
            return
        with np.errstate(invalid="ignore"):
            out = _OPS[self.op](arrays[0], arrays[1])
        out = np.asarray(out)
        if out.size == 0:
            return
        self.runs += 1
        self.true = self.true or bool(out.any())
        self.false = self.false or bool(not out.all())

    def to_json(self) -> dict:
        s = self.site
        return {"program": self.program, "at": f"{s.line}:{s.col}", "comparison": s.text, "measured": bool(self.measured and self.runs),
                "true": self.true, "false": self.false, "runs": self.runs}

    def warning(self) -> Optional[str]:
        if not (self.measured and self.runs) or (self.true and self.false):
            return None
        never = "true" if not self.true else "false"
        return (f"branch coverage: {self.program} {self.site.line}:{self.site.col} `{self.site.text}` was never {never} on any run: "
                "the code it selects was not exercised (give --domain or a wider input to reach it)")


class Coverage:
    """The comparisons of ``kernel`` (the reference) and of ``candidate`` (another program
    verified against it: only its comparisons of inputs are measured) and their outcomes
    over the runs observed."""

    def __init__(self, kernel: A.Kernel, candidate: Optional[A.Kernel] = None):
        self.kernel = kernel
        inputs = {p.name for p in kernel.inputs}
        self.sites = [_Site(s) for s in branch_sites(kernel)]
        if candidate is not None:
            self.sites += [_Site(s, "candidate", inputs) for s in branch_sites(candidate)]
        need = set()
        for s in self.sites:
            if s.measured:
                need |= s.tensors
        #: tensors other than inputs whose values the measured comparisons read
        self.needs_intermediates = bool(need - inputs)

    def observe(self, values: dict) -> None:
        for s in self.sites:
            s.observe(values)

    def to_json(self) -> list:
        return [s.to_json() for s in self.sites]

    def warnings(self) -> list:
        return [w for w in (s.warning() for s in self.sites) if w]


__all__ = ["Coverage"]
