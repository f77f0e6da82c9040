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
