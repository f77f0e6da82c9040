"""Strategy filtering and balancing (Step-TP's ``filtering.py``, made deterministic).

A model trained on the raw distribution learns the steps that apply everywhere (annotate a
loop, reorder two nests) and little else; Step-TP's ablation shows the bias. The filter

1. keeps verified records only (``status == "ok"``; the rejected stay counted in the store);
2. keeps an *easy* record (a strategy of :data:`EASY`, Step-TP's 13 frequent ones) with
   probability ``easy_keep``;
3. never down-weights the *hard* ones (:data:`HARD`: the streaming softmax/attention
   rewrites, tiling, reduction factorization, caching into local/shared memory);
4. caps every strategy at ``cap`` records (and every level at ``level_cap`` if given).

Every decision is a function of (seed, record id): the same records survive whatever the
order of the input or the sharding of the run.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Iterable, Optional

#: the strategies Step-TP keeps with probability 0.5 in multi-label samples (frequent, easy)
EASY = frozenset({
    "operator_fusion", "compute_inline", "expression_splitting", "expression_reorder", "loop_reorder",
    "loop_unrolling", "loop_parallelization", "loop_vectorization", "loop_binding", "set_storage_layout",
    "exponential_split", "multiplicative_split", "additive_split",
})
#: never down-weighted
HARD = frozenset({
    "online_softmax", "flashattention_wo_tiling", "normal_loop_summation_on_exp_to_prefix_summation_on_exp",
    "normal_matmul_to_prefix_matmul_based_on_online_softmax", "normal_loop_max_to_prefix_max", "loop_tiling",
    "reduction_factorization", "cache_read_write",
})
DEFAULT_CAP = 250
DEFAULT_EASY_KEEP = 0.5


def _u(seed: int, rid: str, what: str) -> float:
    h = hashlib.sha256(f"{seed}:{what}:{rid}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2.0 ** 64


def filter_records(records: Iterable[dict], *, seed: int = 0, cap: Optional[int] = DEFAULT_CAP,
                   easy_keep: float = DEFAULT_EASY_KEEP, level_cap: Optional[int] = None) -> tuple[list, dict]:
    """(kept records in input order, report with the distributions before and after)."""
    records = list(records)
    before = Counter(r["strategy"] for r in records if r.get("status") == "ok")
    dropped: Counter = Counter()
    cand = []
    for r in records:
        if r.get("status") != "ok":
            dropped[f"status {r.get('status')}"] += 1
            continue
        rid = r.get("id") or r["job"]
        if r["strategy"] in EASY and r["strategy"] not in HARD and _u(seed, rid, "easy") >= easy_keep:
            dropped["easy, down-weighted"] += 1
            continue
        cand.append(r)
    keep: set = set()
    by_strategy: dict = {}
    for r in cand:
        by_strategy.setdefault(r["strategy"], []).append(r)
    for name, rs in by_strategy.items():
        rs = sorted(rs, key=lambda r: _u(seed, r.get("id") or r["job"], "cap"))
        if cap is not None and len(rs) > cap:
            dropped["over the strategy cap"] += len(rs) - cap
            rs = rs[:cap]
        keep.update(r["job"] for r in rs)
    if level_cap is not None:
        by_level: dict = {}
        for r in cand:
            if r["job"] in keep:
                by_level.setdefault(r["level"], []).append(r)
        for lvl, rs in by_level.items():
            rs = sorted(rs, key=lambda r: _u(seed, r.get("id") or r["job"], "level"))
            for r in rs[level_cap:]:
                keep.discard(r["job"])
                dropped["over the level cap"] += 1
    kept = [r for r in records if r["job"] in keep]
    after = Counter(r["strategy"] for r in kept)
    report = {"seed": seed, "cap": cap, "easy_keep": easy_keep, "level_cap": level_cap,
              "before": dict(sorted(before.items())), "after": dict(sorted(after.items())),
              "levels_before": dict(sorted(Counter(r["level"] for r in records if r.get("status") == "ok").items())),
              "levels_after": dict(sorted(Counter(r["level"] for r in kept).items())),
              "dropped": dict(sorted(dropped.items())), "kept": len(kept)}
    return kept, report


__all__ = ["filter_records", "EASY", "HARD", "DEFAULT_CAP", "DEFAULT_EASY_KEEP"]
