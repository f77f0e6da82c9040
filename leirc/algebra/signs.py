"""Sign facts about tensors, proved from the program (never assumed).

Kernel inputs have no known sign. Every other tensor gets the weakest sign over all the
statements that write it, computed as the greatest fixpoint of "every write stores a value
of this sign, assuming every value it reads has its tensor's sign" — an induction over
execution order, sound because a checked program never reads an element before it is
written (E018, identity initialization of reductions, guarded scan boundaries).

Reductions are special: the accumulator starts at the identity, so ``X = X + e`` is
positive when ``e`` is (the reduction loops have at least one iteration, E024), and
``max``/``min``/``*`` reductions likewise keep the sign of their operand.

The result feeds :class:`leirc.algebra.bridge.Bridge` (``positive=True`` symbols), which
lets SymPy prove, e.g., that the softmax normalizer ``E = sum exp(x - m)`` is positive, so
``log(exp(x)*E)`` may be split and ``z = E`` is a legal ``multiplicative_split`` factor.
"""

from __future__ import annotations

from typing import Optional

from ..lang.checker import CheckResult

POSITIVE = "positive"
NONNEGATIVE = "nonnegative"
_RANK = {POSITIVE: 2, NONNEGATIVE: 1, None: 0}


def meet(a: Optional[str], b: Optional[str]) -> Optional[str]:
    return a if _RANK[a] <= _RANK[b] else b


def classify(value) -> Optional[str]:
    """Sign of a SymPy value under its symbols' assumptions."""
    try:
        if value.is_positive:
            return POSITIVE
        if value.is_nonnegative:
            return NONNEGATIVE
    except Exception:  # pragma: no cover - SymPy assumption queries can raise on odd input
        return None
    return None


def tensor_signs(result: CheckResult) -> dict[str, str]:
    """``{tensor name: "positive" | "nonnegative"}`` for the tensors of a checked kernel
    whose sign is provable; tensors with no known sign are absent."""
    from .bridge import Bridge, NotRepresentable

    inputs = {p.name for p in result.kernel.inputs}
    written = sorted({si.stmt.target.name for si in result.stmts} - inputs)
    signs: dict = {n: POSITIVE for n in written}
    for _ in range(3 * len(written) + 2):
        new: dict = {}
        for si in result.stmts:
            name = si.stmt.target.name
            if name in inputs:
                continue
            known = {k: v for k, v in signs.items() if v is not None}
            ranges = {l.var: (l.start, l.start + l.extent - 1) for l in si.loops}
            b = Bridge(known, ranges)
            try:
                if si.kind == "reduce" and si.operand is not None:
                    # the accumulator starts at the identity: the sign is the operand's
                    s = classify(b.to_sympy(si.operand)) if si.op != "-" else None
                elif si.kind == "reduce":
                    # a left-deep chain X + a - b + ... (or X * a / b): induction from the
                    # identity, 0 (non-negative) for sums, 1 (positive) for products
                    hyp = NONNEGATIVE if si.op == "+" else POSITIVE
                    b2 = Bridge({**known, name: hyp}, ranges)
                    s = classify(b2.to_sympy(si.stmt.value))
                else:
                    s = classify(b.to_sympy(si.stmt.value))
            except (NotRepresentable, TypeError, ValueError):
                s = None
            new[name] = meet(new[name], s) if name in new else s
        for n in written:
            new.setdefault(n, None)
        if new == signs:
            break
        signs = {n: meet(signs[n], new[n]) for n in written}
    return {n: s for n, s in signs.items() if s is not None}
