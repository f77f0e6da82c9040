"""Computer algebra for LEIR: a faithful SymPy bridge, sign facts, proof helpers and the
``leirc simplify`` pipeline. SymPy is imported only here and by the math strategies."""

from .bridge import Bridge, NotRepresentable, cast_function, from_sympy, sigmoid, to_sympy

__all__ = ["Bridge", "NotRepresentable", "cast_function", "from_sympy", "sigmoid", "to_sympy"]
