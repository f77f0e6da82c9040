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
