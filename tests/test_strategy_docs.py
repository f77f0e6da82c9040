"""docs/strategies.md is generated from the registry and must be current; every
registered strategy has a docstring example that holds."""

from pathlib import Path

import pytest

from leirc.strategies import all_strategies
from leirc.strategies.docgen import render
from strategy_harness import check_docstring_example

DOC = Path(__file__).resolve().parents[1] / "docs" / "strategies.md"


def test_strategies_md_is_generated_from_registry():
    assert DOC.read_text(encoding="utf-8") == render(), "run: python -m leirc.strategies.docgen > docs/strategies.md"


@pytest.mark.parametrize("name", [s.name for s in all_strategies()])
def test_docstring_example(name):
    check_docstring_example(name)


@pytest.mark.parametrize("name", [s.name for s in all_strategies()])
def test_registry_entry_is_complete(name):
    from leirc.strategies import get

    s = get(name)
    assert s.level in ("graph", "operator", "memory", "math")
    assert s.numerics in ("bitwise", "exact-in-reals", "approximate")
    assert s.summary and type(s).__doc__
