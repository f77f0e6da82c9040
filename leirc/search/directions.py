"""Optimization directions (HTAM's global nodes) and the strategies under each (local
nodes), plus the inverse pairs a search must not use to undo its parent's step.

The grouping follows the strategy catalogue (reference notes §c) and HTAM's examples; a
strategy registered later and missing here falls back to a direction by its level.
"""

from __future__ import annotations

DIRECTIONS = ("parallelism", "vectorization", "locality", "tiling", "fusion", "algebraic", "gpu_mapping")

DIRECTION_DOC = {
    "parallelism": "run independent iterations on several cores (P loops)",
    "vectorization": "SIMD lanes for unit-stride innermost loops (V loops, vector copies)",
    "locality": "loop order and layouts for unit strides and reuse in cache",
    "tiling": "register/shared tiling: splits, tiles, unrolling, storage scopes",
    "fusion": "fewer passes over memory: fuse, inline, reorder or split nests",
    "algebraic": "fewer or cheaper operations: algebraic and streaming rewrites",
    "gpu_mapping": "bind loops to CUDA blocks and threads",
}

STRATEGY_DIRECTION = {
    "loop_parallelization": "parallelism",
    "loop_vectorization": "vectorization", "vectorized_memory_access": "vectorization",
    "loop_reorder": "locality", "layout_transformation": "locality", "set_storage_layout": "locality",
    "cache_read_write": "locality", "precompute_indices": "locality",
    "loop_split": "tiling", "loop_tiling": "tiling", "loop_unrolling": "tiling", "set_storage_scope": "tiling",
    "loop_fusion": "tiling",
    "operator_fusion": "fusion", "operator_fission": "fusion", "compute_inline": "fusion",
    "expression_reorder": "fusion", "dead_code_elimination": "fusion", "expression_splitting": "fusion",
    "tensor_concat_to_fuse_operators": "fusion", "tensor_split_to_decouple_operators": "fusion",
    "loop_binding": "gpu_mapping",
    "cache_write": "tiling", "vectorized_partial_sums": "vectorization",
    "common_subexpression_elimination": "algebraic", "reduction_factorization": "algebraic",
}

_LEVEL_DIRECTION = {"graph": "fusion", "operator": "tiling", "memory": "locality", "math": "algebraic"}

#: static priors per target (HTAM's "goals"): what tends to pay first on that hardware
PRIORS = {
    "llvm": {"parallelism": 1.0, "vectorization": 0.8, "locality": 0.7, "tiling": 0.4, "fusion": 0.6,
             "algebraic": 0.1, "gpu_mapping": -2.0},
    "cuda": {"parallelism": -2.0, "vectorization": -0.5, "locality": 0.5, "tiling": 0.5, "fusion": 0.6,
             "algebraic": 0.1, "gpu_mapping": 1.5},
}

#: (a, b): a step of b right after a step of a (on what a produced) undoes it, or vice versa
INVERSE_PAIRS = {
    frozenset(("loop_split", "loop_fusion")), frozenset(("loop_tiling", "loop_fusion")),
    frozenset(("operator_fusion", "operator_fission")), frozenset(("apart", "together")),
    frozenset(("collect", "expand_collect")), frozenset(("cancellation", "expand_cancellation")),
    frozenset(("powsimp", "expand_powsimp")), frozenset(("expand_log", "logsimp")),
    frozenset(("factorization", "expand_factorization")), frozenset(("compute_inline", "expression_splitting")),
    frozenset(("tensor_concat_to_fuse_operators", "tensor_split_to_decouple_operators")),
}


def direction_of(strategy: str) -> str:
    d = STRATEGY_DIRECTION.get(strategy)
    if d is not None:
        return d
    try:
        from ..strategies import get

        return _LEVEL_DIRECTION.get(get(strategy).level, "algebraic")
    except KeyError:
        return "algebraic"


def undoes(previous: str | None, strategy: str) -> bool:
    """Whether ``strategy`` applied right after ``previous`` is an undo pair (by name; an
    undo that reaches the grandparent's program is also caught by fingerprint)."""
    return previous is not None and frozenset((previous, strategy)) in INVERSE_PAIRS and previous != strategy


def priors(target: str) -> dict:
    return dict(PRIORS["cuda" if str(target).startswith("cuda") else "llvm"])
