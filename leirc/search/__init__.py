"""The search (``leirc build KERNEL.leir -O search``): multi-step search over verified
strategy steps on the engine, with offline proposers (cost-model menu, HTAM memory, schedule
reuse), resumable SQLite state and an HTML report. See docs/search.md.

Names are re-exported lazily (importing :mod:`leirc.search.suggest` for the editor does
not import the evaluator and its worker machinery)."""

from __future__ import annotations

_LAZY = {
    "Search": "core", "SearchOptions": "core", "SearchResult": "core", "SearchError": "core", "search": "core",
    "ALGORITHMS": "core", "PROPOSERS": "core",
    "SearchOptimizer": "optimizer", "SearchOptimized": "optimizer", "add_search_arguments": "optimizer",
    "search_options_from_args": "optimizer", "optimizer_from_args": "optimizer",
    "suggest": "suggest", "Suggestion": "suggest",
    "Memory": "memory", "SearchStore": "store", "estimate": "cost",
    "Proposal": "proposers", "Proposer": "proposers", "MenuProposer": "proposers", "HTAMProposer": "proposers",
    "ReuseProposer": "proposers", "CombinedProposer": "proposers",
}


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'leirc.search' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
