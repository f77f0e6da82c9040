"""The explicit registration table of operator handlers.

A handler is registered under the PyTorch name it translates: ``@function("conv2d")`` for
``torch.conv2d``/``F.conv2d``, ``@method("view")`` for ``Tensor.view`` (a method without a
``method`` handler falls back to the function of the same name), ``@module("Conv2d")`` for
``nn.Conv2d``. Handlers take the :class:`~leirc.frontend.ops.Ops` instance first and then
the PyTorch call's own arguments, so positional and keyword arguments resolve as in PyTorch.
Alternative spellings are in ``common.ALIASES``; element-wise maps without a handler of
their own are the ``common.UNARY``/``common.BINARY`` tables.
"""

from __future__ import annotations

from typing import Callable

FUNCTIONS: dict[str, Callable] = {}
METHODS: dict[str, Callable] = {}
MODULES: dict[str, Callable] = {}


def _registrar(table: dict, kind: str):
    def register(*names: str):
        def deco(fn: Callable) -> Callable:
            for n in names:
                if n in table and table[n] is not fn:
                    raise ValueError(f"{kind} handler {n!r} registered twice")
                table[n] = fn
            return fn

        return deco

    return register


function = _registrar(FUNCTIONS, "function")
method = _registrar(METHODS, "method")
module = _registrar(MODULES, "module")
