"""Computer algebra for LEIR: a faithful SymPy bridge, sign and finiteness facts, and proof
helpers. SymPy is imported only here and by the math strategies; the ``leirc simplify``
pipeline that uses them is a client (:mod:`leirc.opt.simplify`)."""

from .bridge import Bridge, NotRepresentable, cast_function, from_sympy, sigmoid, to_sympy

__all__ = ["Bridge", "NotRepresentable", "cast_function", "from_sympy", "sigmoid", "to_sympy"]
