"""Command-line interface: ``leirc <command> ...``."""
from .main import main

__all__ = ["main"]
