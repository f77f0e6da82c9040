"""Helpers shared by the graph-strategy test modules (tests/strategies/test_graph_*.py).

This module holds no tests; it is named ``test_graph_*`` only to live next to them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from leirc.lang import ast as A
from leirc.lang.printer import print_module
from leirc.strategies import Step, apply_step
from strategy_harness import kernel_of, stdlib_text

STDLIB = Path(__file__).resolve().parents[2] / "stdlib"
STDLIB_NAMES = sorted(p.stem for p in STDLIB.glob("*.leir"))


def stdlib(name: str) -> A.Kernel:
    return kernel_of(stdlib_text(name))


def text(kernel: A.Kernel) -> str:
    return print_module(A.Module((kernel,)), "pretty")


def step(name: str, **args) -> Step:
    return Step.make(name, **args)


def run(kernel: A.Kernel, *steps: Step) -> A.Kernel:
    for s in steps:
        kernel = apply_step(kernel, s)
    return kernel


def assert_equivalent(before: A.Kernel, after: A.Kernel, *, bitwise: bool = False) -> None:
    """Numeric equivalence with the verifier (interpreter target, one seed, normal inputs).

    ``bitwise`` additionally requires bit-identical outputs; only asserted for rewrites
    that touch no reduction, because the interpreter evaluates reductions vectorized (its
    summation order depends on the array layout, see leirc.interp.plan)."""
    try:
        from leirc.verify import verify
    except ImportError:  # pragma: no cover - the verifier is a separate component
        pytest.skip("leirc.verify is not available")
    rep = verify(text(after), text(before), target="interp", seeds=(0,), dists=("normal",))
    assert rep.equal, rep.failures
    if bitwise:
        assert rep.bitwise, f"not bitwise: max abs err {rep.max_abs_err}"
