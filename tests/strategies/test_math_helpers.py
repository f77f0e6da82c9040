"""Helpers shared by the math-strategy test modules (tests/strategies/test_math_*.py).

This module holds no tests; it is named ``test_math_*`` only to live next to them.

Proof obligations of every math rewrite, checked by the tests:

* symbolic: :func:`assert_symbolic_identity` -- for each statement that changed, SymPy
  proves ``simplify(after - before) == 0`` with the same sign facts the strategy used;
* numeric: :func:`assert_verified` -- the verifier (interpreter target) runs both
  programs on random inputs (several seeds and distributions) and compares within the
  fp32 tolerances, by the numerics class the rewrite declared (an *approximate* rewrite
  is not run on the overflow-seeking probes).
"""

from __future__ import annotations

import pytest

from leirc.lang import ast as A
from leirc.lang.checker import check_kernel
from leirc.lang.printer import print_module
from leirc.strategies import NotApplicable, Step, apply_step
from leirc.strategies.base import plan_step
from leirc.strategies.rewrite import iter_stmts
from strategy_harness import kernel_of, stdlib_text


def stdlib(name: str) -> A.Kernel:
    return kernel_of(stdlib_text(name))


def small(name: str, sizes: dict) -> A.Kernel:
    """A stdlib kernel with some extents replaced everywhere (``{"24576": "64"}``), for
    numeric checks that would be slow at the stdlib size."""
    import re

    src = stdlib_text(name)
    body = src.split("\\kernel", 1)
    body[1] = re.sub(r"\b(\d+)\b", lambda m: sizes.get(m.group(1), m.group(1)), body[1])
    return kernel_of("\\kernel".join(body))


def text(kernel: A.Kernel) -> str:
    return print_module(A.Module((kernel,)), "pretty")


#: numerics class of every kernel these helpers produced (kernels compare structurally), so
#: that assert_verified checks each result by the class its rewrite declared
_NUMERICS: dict = {}
_ORDER = ("bitwise", "exact-in-reals", "approximate")


def _worst(a: str, b: str) -> str:
    return max(a, b, key=_ORDER.index)


def apply(kernel: A.Kernel, name: str, **args) -> A.Kernel:
    return run(kernel, Step.make(name, **args))


def run(kernel: A.Kernel, *steps: Step) -> A.Kernel:
    numerics = _NUMERICS.get(kernel, "bitwise")
    for s in steps:
        rw = plan_step(kernel, s)
        kernel, numerics = rw.kernel, _worst(numerics, rw.numerics)
    _NUMERICS[kernel] = numerics
    return kernel


def not_applicable(kernel: A.Kernel, name: str, match: str, **args) -> None:
    with pytest.raises(NotApplicable, match=match):
        apply_step(kernel, Step.make(name, **args))


def assert_verified(before: A.Kernel, after: A.Kernel, *, bitwise: bool = False, **kw) -> None:
    from leirc.verify import verify

    kw.setdefault("numerics", _NUMERICS.get(after))
    rep = verify(text(after), text(before), target="interp", **kw)
    assert rep.equal, rep.failures
    if bitwise:
        assert rep.bitwise, f"not bitwise: max abs err {rep.max_abs_err}"


def assert_verified_only_where_it_does_not_overflow(before: A.Kernel, after: A.Kernel, **kw) -> None:
    """An approximate rewrite whose intermediate overflows before the original's does (exp(2a)
    for a tanh, a softmax without its max shift): the identity holds on the ordinary grid, and
    the probes -- which approximate candidates always meet -- reject it at large magnitudes.
    The verifier must say both."""
    from leirc.verify import verify

    kw.setdefault("numerics", _NUMERICS.get(after))
    grid = verify(text(after), text(before), target="interp", probes=(), **kw)
    assert grid.equal, grid.failures
    full = verify(text(after), text(before), target="interp", **kw)
    assert not full.equal, "the probes should find where the rewrite overflows"
    assert any(p in f for f in full.failures for p in ("logits", "mixed", "special", "range")), full.failures


def assert_close_once(before: A.Kernel, after: A.Kernel, seed: int = 0, dist: str = "normal") -> None:
    """One interpreter run of each program on the same random inputs, outputs compared
    with the verifier's fp32 rule (cheaper than :func:`assert_verified` at full size)."""
    from leirc.interp import run_source
    from leirc.interp.inputs import random_inputs
    from leirc.verify import compare_output

    inputs = random_inputs(before, seed, dist)
    want = run_source(text(before), {k: v.copy() for k, v in inputs.items()})
    got = run_source(text(after), {k: v.copy() for k, v in inputs.items()})
    for p in before.outputs:
        c = compare_output(p.name, got[p.name], want[p.name], p.dtype)
        assert c.ok, c.failures


def assert_symbolic_identity(before: A.Kernel, after: A.Kernel) -> int:
    """Every statement of ``after`` that differs from the statement with the same
    reference in ``before`` is proven equal to it by SymPy (``simplify(a - b) == 0``).
    Returns the number of statements compared."""
    import sympy as sp

    from leirc.algebra.bridge import Bridge
    from leirc.algebra.signs import tensor_signs

    res = check_kernel(before)
    signs = tensor_signs(res)
    old = {r: st for r, st, _ in iter_stmts(before)}
    n = 0
    for ref, st, _ in iter_stmts(after):
        o = old.get(ref)
        assert o is not None and o.target == st.target, f"{ref}: the rewrite changed the program structure"
        if o.value == st.value:
            continue
        b = Bridge(signs)
        diff = b.to_sympy(st.value) - b.to_sympy(o.value)
        assert sp.simplify(diff) == 0, f"{ref}: {st.value} != {o.value}"
        n += 1
    assert n >= 1, "nothing changed"
    return n


def kernel(src: str) -> A.Kernel:
    return kernel_of(src)
