"""Text -> the one checked kernel a command works on: written once for every client.

Commands that take one kernel (``run``, ``verify``, the frontend's verifier, the worker,
the engine) all need the same steps: parse, check, refuse a program with errors, pick the
named kernel or the only one. :func:`load_kernel` does them and raises :class:`LoadError`
whose message names the first error and which carries every diagnostic.
"""

from __future__ import annotations

from typing import Optional

from .checker import CheckResult, check_text


class LoadError(Exception):
    def __init__(self, message: str, diagnostics=()):
        super().__init__(message)
        self.message = message
        self.diagnostics = list(diagnostics)


def load_kernel(text: str | bytes, *, kernel: Optional[str] = None, file: str = "<input>") -> CheckResult:
    """The CheckResult of kernel ``kernel`` (or of the only kernel) of ``text``."""
    cf = check_text(text, file)
    errs = [d for d in cf.diagnostics if d.is_error]
    if errs:
        e = errs[0]
        where = f"{e.span.line}:{e.span.col}: " if e.span is not None else ""
        raise LoadError(f"{file}:{where}{e.code} {e.message}"
                        + (f" (and {len(errs) - 1} more error(s))" if len(errs) > 1 else ""), cf.diagnostics)
    names = [r.kernel.name for r in cf.results]
    if not names:
        raise LoadError(f"{file}: no kernel in the file", cf.diagnostics)
    if kernel is None:
        if len(names) != 1:
            raise LoadError(f"{file}: the file defines {len(names)} kernels ({', '.join(names)}); name one",
                            cf.diagnostics)
        return cf.results[0]
    for r in cf.results:
        if r.kernel.name == kernel:
            return r
    raise LoadError(f"{file}: no kernel named '{kernel}' (kernels: {', '.join(names)})", cf.diagnostics)


__all__ = ["LoadError", "load_kernel"]
