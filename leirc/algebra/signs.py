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


def tensor_finite(result: CheckResult, signs: Optional[dict] = None) -> set[str]:
    """Names of the tensors of a checked kernel whose every element is finite in real
    arithmetic, given finite kernel inputs (the reading every ``exact-in-reals`` rewrite
    relies on): the greatest fixpoint of "every write stores a finite value, assuming the
    tensors in the set are finite", the same induction over execution order as
    :func:`tensor_signs`. A value is finite when SymPy proves it (``is_finite`` and
    ``is_real``) with the other tensors as extended reals: an ``inf`` literal, a division by
    something not provably non-zero, ``log``/``sqrt`` of something not provably positive
    make it unknown. Reductions start from their identity, so ``max``/``min`` reductions
    (identity ``-inf``/``inf``, at least one iteration, E024) are finite when their operand is.

    Floating-point overflow (``exp(100)`` in f32) is not a real-arithmetic infinity; it is
    the numerics class of the rewrite that risks it."""
    from .bridge import Bridge, NotRepresentable

    inputs = {p.name for p in result.kernel.inputs}
    written = sorted({si.stmt.target.name for si in result.stmts} - inputs)
    signs = tensor_signs(result) if signs is None else signs
    finite = set(written) | inputs
    for _ in range(len(written) + 2):
        bad = set()
        for si in result.stmts:
            name = si.stmt.target.name
            if name in inputs or name in bad:
                continue
            ranges = {l.var: (l.start, l.start + l.extent - 1) for l in si.loops}
            b = Bridge(signs, ranges, finite)
            e = si.operand if si.kind == "reduce" and si.operand is not None else si.stmt.value
            try:
                ok = is_finite_real(b.to_sympy(e))
            except (NotRepresentable, TypeError, ValueError):
                ok = False
            if not ok:
                bad.add(name)
        if not bad:
            break
        finite -= bad
    return finite


def is_finite_real(value) -> bool:
    """SymPy proves ``value`` is a finite real number (not +-inf, not NaN, not complex)."""
    try:
        return value.is_finite is True and value.is_extended_real is True
    except Exception:  # pragma: no cover - SymPy assumption queries can raise on odd input
        return False
