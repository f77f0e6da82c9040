"""``leirc dataset stats DIR``: what a dataset holds.

Counts per strategy and level (verified records), every job's status (so the rejected are
counted, by reason), verification rates (verified / evaluated; bitwise among the verified,
against the literal oracle and against the compiled original where that is decidable), the
measured speedups, token statistics (LEIR vs TIR vs CUDA, from the records' ``tokens``
or computed here for a sample of them) and a PNG bar chart of the strategy distribution.
"""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter
from typing import Optional

from .tokens import reduction

#: statuses of jobs that reached the evaluator (the denominator of the verification rate)
NOT_EVALUATED = ("not_applicable", "noop", "duplicate", "strategy_bug", "error", "crash")


def _median(xs):
    return statistics.median(xs) if xs else None


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def token_table(records: list[dict]) -> dict:
    """Per-record and aggregate token reductions of LEIR against TIR and CUDA."""
    rows = []
    for r in records:
        t = (r.get("tokens") or {}).get("transformed")
        if t and t.get("leir"):
            rows.append(t)
    out: dict = {"records": len(rows), "tokenizer": rows[0]["tokenizer"] if rows else None}
    for other in ("tir", "cuda", "cuda_kernels"):
        per = [reduction(t["leir"], t.get(other)) for t in rows]
        per = [p for p in per if p is not None]
        tot_l = sum(t["leir"] for t in rows if t.get(other))
        tot_o = sum(t[other] for t in rows if t.get(other))
        out[other] = {"mean_reduction": statistics.fmean(per) if per else None, "median_reduction": _median(per),
                      "aggregate_reduction": (1 - tot_l / tot_o) if tot_o else None}
    for k in ("leir", "leir_pretty", "tir", "cuda", "cuda_kernels"):
        vals = [t[k] for t in rows if t.get(k)]
        out[f"median_{k}_tokens"] = _median(vals)
    return out


def fill_tokens(records: list[dict], limit: Optional[int] = None) -> int:
    """Count tokens for up to ``limit`` verified records that lack them (in job order, so the
    sample is deterministic); the original of a unit is counted once. Returns how many."""
    from ..lang.checker import check_text
    from .tokens import counts

    memo: dict = {}

    def count(text: str):
        if text not in memo:
            cf = check_text(text)
            memo[text] = counts(cf.results[0]) if cf.ok and len(cf.results) == 1 else None
        return memo[text]

    n = 0
    for r in records:
        if limit is not None and n >= limit:
            break
        if r.get("status") != "ok" or r.get("tokens"):
            continue
        t = count(r["transformed"]["leir"])
        if t is None:
            continue
        r["tokens"] = {"original": count(r["original"]["leir"]), "transformed": t}
        n += 1
    return n


def compute(records: list[dict], rejected: list[dict], plan: Optional[dict] = None) -> dict:
    ok = [r for r in records if r.get("status") == "ok"]
    allj = ok + [r for r in rejected]
    status = Counter(r["status"] for r in allj)
    evaluated = sum(n for s, n in status.items() if s not in NOT_EVALUATED)
    bw = [r["verification"].get("bitwise") for r in ok if r.get("verification")]
    bwo = [r["verification"].get("bitwise_vs_original") for r in ok if r.get("verification")]
    speed = [r["timing"]["speedup"] for r in ok if (r.get("timing") or {}).get("speedup")]
    per_strategy = Counter(r["strategy"] for r in ok)
    per_level = Counter(r["level"] for r in ok)
    rejected_by = {}
    for r in rejected:
        rejected_by.setdefault(r["strategy"], Counter())[r["status"]] += 1
    return {
        "records": len(ok), "jobs": len(allj), "status": dict(sorted(status.items())),
        "sources": len({r["source"]["id"] for r in ok}),
        "per_strategy": dict(sorted(per_strategy.items())), "per_level": dict(sorted(per_level.items())),
        "level_of": dict(sorted({r["strategy"]: r["level"] for r in allj}.items())),
        "rejected_per_strategy": {k: dict(sorted(v.items())) for k, v in sorted(rejected_by.items())},
        "verification_rate": (len(ok) / evaluated) if evaluated else None, "evaluated": evaluated,
        "bitwise_rate": (sum(bool(b) for b in bw) / len(bw)) if bw else None,
        "bitwise_vs_original": {"true": sum(b is True for b in bwo), "false": sum(b is False for b in bwo),
                                "undecided": sum(b is None for b in bwo)},
        "numerics": dict(sorted(Counter(r.get("numerics") for r in ok).items())),
        "speedup": {"timed": len(speed), "median": _median(speed), "geomean": _geomean(speed),
                    "faster": sum(s > 1.0 for s in speed), "max": max(speed) if speed else None},
        "tokens": token_table(ok),
        "plan": plan,
    }


def plot(stats: dict, path: str, title: str = "strategy distribution") -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = sorted(stats["per_strategy"].items(), key=lambda kv: (-kv[1], kv[0]))
    fig, ax = plt.subplots(figsize=(10, max(3.0, 0.28 * len(items) + 1.2)))
    names = [k for k, _ in items]
    palette = {"graph": "#4a78b0", "operator": "#e0893a", "memory": "#5a9e55", "math": "#b0493f"}
    levels = [stats.get("level_of", {}).get(k, "") for k in names]
    ax.barh(range(len(items)), [v for _, v in items], color=[palette.get(lv, "#888888") for lv in levels])
    from matplotlib.patches import Patch

    present = [lv for lv in palette if lv in levels]
    if present:
        ax.legend(handles=[Patch(color=palette[lv], label=lv) for lv in present], loc="lower right", fontsize=8)
    ax.set_yticks(range(len(items)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("verified records")
    ax.set_title(f"{title} ({stats['records']} records, {len(items)} strategies)")
    for k, (_, v) in enumerate(items):
        ax.text(v, k, f" {v}", va="center", fontsize=7)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)  # a reader never sees half a PNG
    return path


def render_text(s: dict) -> str:
    def pct(x):
        return "n/a" if x is None else f"{100 * x:.1f}%"

    lines = [f"records: {s['records']} verified of {s['jobs']} jobs, {s['sources']} source kernel(s)",
             "status: " + ", ".join(f"{k} {v}" for k, v in s["status"].items()),
             f"verification rate: {pct(s['verification_rate'])} of {s['evaluated']} evaluated; "
             f"bitwise (vs the literal oracle): {pct(s['bitwise_rate'])}; bitwise vs the compiled original: "
             f"{s['bitwise_vs_original']['true']} yes, {s['bitwise_vs_original']['false']} no, "
             f"{s['bitwise_vs_original']['undecided']} undecided",
             "per level: " + ", ".join(f"{k} {v}" for k, v in s["per_level"].items()),
             "per strategy:"]
    for k, v in sorted(s["per_strategy"].items(), key=lambda kv: (-kv[1], kv[0])):
        rej = s["rejected_per_strategy"].get(k, {})
        extra = f"  (rejected: {', '.join(f'{a} {b}' for a, b in rej.items())})" if rej else ""
        lines.append(f"  {k:58s} {v:5d}{extra}")
    for k in sorted(set(s["rejected_per_strategy"]) - set(s["per_strategy"])):
        rej = s["rejected_per_strategy"][k]
        lines.append(f"  {k:58s} {0:5d}  (rejected: {', '.join(f'{a} {b}' for a, b in rej.items())})")
    sp = s["speedup"]
    if sp["timed"]:
        lines.append(f"speedup vs the instance itself: median {sp['median']:.3f}x, geomean {sp['geomean']:.3f}x, "
                     f"{sp['faster']}/{sp['timed']} faster, max {sp['max']:.2f}x")
    t = s["tokens"]
    if t["records"]:
        lines.append(f"tokens ({t['tokenizer']}, {t['records']} records): median LEIR {t['median_leir_tokens']}, "
                     f"TIR {t['median_tir_tokens']}, CUDA {t['median_cuda_tokens']} "
                     f"(kernels only {t['median_cuda_kernels_tokens']})")
        for other in ("tir", "cuda", "cuda_kernels"):
            d = t[other]
            lines.append(f"  LEIR vs {other}: mean {pct(d['mean_reduction'])} fewer, median {pct(d['median_reduction'])}, "
                         f"aggregate {pct(d['aggregate_reduction'])}")
    return "\n".join(lines)


__all__ = ["compute", "plot", "render_text", "token_table", "fill_tokens"]
