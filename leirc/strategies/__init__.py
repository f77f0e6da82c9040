"""Checked, replayable program rewrites (Step-TP's optimization strategies)."""

from .base import (NotApplicable, Site, Step, StrategyBug, all_strategies, apply_step, enumerate_sites, get,
                   replay, sites_at, trace_from_json, trace_to_json)

__all__ = ["NotApplicable", "Site", "Step", "StrategyBug", "all_strategies", "apply_step", "enumerate_sites", "get",
           "replay", "sites_at", "trace_from_json", "trace_to_json"]
