"""CLI flags about the LLM prompt cache that the commands with ``--llm-*`` options share.

``--llm-refresh-cache`` asks the endpoint even when the cache holds the prompt (and stores
the new answer): a bad answer recorded once is not replayed forever. Every answer that does
come from the cache is said on stderr (the client logs it)."""

from __future__ import annotations

import dataclasses


def add_cache_arguments(p) -> None:
    p.add_argument("--llm-refresh-cache", action="store_true",
                   help="ask the endpoint even when the prompt cache has the answer, and store the new one "
                        "(cache_mode = \"refresh\" in --llm-config; --llm-cache none: no cache at all)")


def apply_cache_arguments(args, config):
    """``config`` (an LLMConfig or None) with the cache flags applied. Raises ValueError."""
    if config is None or not getattr(args, "llm_refresh_cache", False):
        return config
    if config.offline:
        raise ValueError("--llm-refresh-cache asks the endpoint, --llm-offline forbids it: choose one")
    return dataclasses.replace(config, cache_mode="refresh")
