"""Inline verification for the editor: one kernel of the buffer, evaluated through the engine.

The language server calls this off its event loop (it builds and runs a kernel in a
sandboxed worker); the result is the engine's :class:`~leirc.engine.evaluate.Evaluation`,
which the server turns into an inline message ("verified on 9 runs, max abs err 3e-7" or
the first failure with its kind). Kernels of a file with errors are not evaluated: the
diagnostics already say why.
"""

from __future__ import annotations

from typing import Optional

from ..engine.evaluate import Evaluation, Evaluator


def evaluate_kernel(text: str, kernel: Optional[str] = None, *, reference: Optional[str] = None,
                    target: str = "llvm", evaluator: Optional[Evaluator] = None) -> Evaluation:
    """Verify kernel ``kernel`` of ``text`` (compiled for ``target``) against the interpreter
    running ``reference`` (default: the same program). Pass a long-lived ``evaluator`` to
    reuse its cache and reference outputs across edits."""
    if evaluator is not None:
        return evaluator.evaluate(text, kernel=kernel, reference=reference)
    with Evaluator(target, time=False, prestart=False) as ev:
        return ev.evaluate(text, kernel=kernel, reference=reference)


def summary(ev: Evaluation) -> str:
    """One line for an inline hint."""
    if ev.ok and ev.verify is not None:
        r = ev.verify
        return (f"verified ({r.runs + r.probe_runs} runs{', bitwise' if r.bitwise else ''}; "
                f"max abs err {r.max_abs_err:.2g}, normwise {r.norm_rel_err:.2g})")
    return f"NOT verified ({ev.error_kind}): {(ev.error or '').splitlines()[0] if ev.error else ''}"


def outcome(ev: Evaluation, before: Optional[Evaluation] = None) -> dict:
    """A JSON-able digest of an evaluation for an editor (``before``: the same kernel's
    previous version, timed, for the speed-up)."""
    d = {"ok": ev.ok, "error_kind": ev.error_kind, "error": (ev.error or "").splitlines()[0] if ev.error else None,
         "max_abs_err": None, "max_rel_err": None, "bitwise": None, "ms": None, "target": None, "before_ms": None}
    if ev.verify is not None:
        d.update(max_abs_err=_finite(ev.verify.max_abs_err), max_rel_err=_finite(ev.verify.max_rel_err),
                 bitwise=bool(ev.verify.bitwise))
    if ev.timing is not None and ev.timing.ok:
        d.update(ms=ev.timing.median_ms, target=ev.timing.target)
    if before is not None and before.timing is not None and before.timing.ok:
        d["before_ms"] = before.timing.median_ms
    return d


def _finite(x):
    import math

    return None if x is None or not math.isfinite(x) else float(x)


def lens_title(d: dict) -> str:
    """"✓ equal · 3.2 ms llvm · 12× vs before", "✗ max rel err 3e-02", "✗ crash: ..."."""
    if d.get("ok"):
        parts = ["✓ equal" + (" (bitwise)" if d.get("bitwise") else "")]
        if d.get("ms") is not None:
            parts.append(f"{d['ms']:.3g} ms {d.get('target') or ''}".rstrip())
            if d.get("before_ms"):
                parts.append(f"{d['before_ms'] / d['ms']:.2g}× vs before")
        return " · ".join(parts)
    if d.get("error_kind") == "mismatch":
        err = d.get("max_rel_err")
        return f"✗ max rel err {err:.1e}" if err is not None else "✗ not equal"
    msg = d.get("error") or ""
    return f"✗ {d.get('error_kind')}" + (f": {msg[:80]}" if msg else "")
