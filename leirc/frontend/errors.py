"""Errors raised by the PyTorch frontend.

Every error that reaches the user is a :class:`FrontendError` with a one-line message;
the CLI prints it without a traceback and exits 1.
"""

from __future__ import annotations

from typing import Optional


class FrontendError(Exception):
    """A model that cannot be imported (or verified), with a user-facing message."""

    def __init__(self, message: str, *, location: Optional[str] = None, op: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.location = location  # "model.py:12: <source line>"
        self.op = op

    def __str__(self) -> str:
        if self.location:
            return f"{self.location}: {self.message}"
        return self.message


class UnsupportedOpError(FrontendError):
    """An operator (or an argument combination of it) the frontend cannot translate."""


class ModelLoadError(FrontendError):
    """The model file could not be executed or does not follow the KernelBench format."""


class TraceError(FrontendError):
    """torch.fx could not trace the model."""


def display_path(path: str) -> str:
    """``path`` as a user would type it here: relative to the working directory when it lies
    below it, else absolute."""
    import os

    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else os.path.abspath(path)


def user_frame(exc: BaseException, path: str) -> Optional[str]:
    """``model.py:12`` for the innermost frame of ``exc``'s traceback that is in the user's
    file ``path`` (so an error raised by the user's ``forward`` is shown at the user's line,
    once, instead of as torch.fx's traceback)."""
    import os
    import traceback

    target = os.path.abspath(path)
    found = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(fr.filename) == target:
            found = fr
    if found is None:
        return None
    return f"{display_path(target)}:{found.lineno}"


def describe(exc: BaseException) -> str:
    """``RuntimeError: message`` (first line of the message only)."""
    msg = str(exc).strip()
    return f"{type(exc).__name__}: {msg.splitlines()[0]}" if msg else type(exc).__name__
