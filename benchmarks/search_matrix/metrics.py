"""The numbers of the search matrix that need no machine: evaluations to a fraction of the
final speedup, evaluations to reach another run's best, the held-out split, geomeans, and the
JSON / markdown output (written atomically after every row, so a killed run keeps its rows).

A *trajectory* is the search's ``history``: ``[(evaluations so far, best speedup so far)]``,
one entry per evaluation, the speedups being the search's own estimates (the product of the
paired ratios from the root), so a run's points are comparable with each other.
"""

from __future__ import annotations

import json
import math
from typing import Iterable, Optional, Sequence


def _points(history: Iterable) -> list[tuple[int, float]]:
    return [(int(e), float(s)) for e, s in history]


def evals_to_reach(history: Iterable, target: float) -> Optional[int]:
    """The first evaluation at which the best-so-far speedup is >= ``target`` (None: never)."""
    for e, s in _points(history):
        if s >= target:
            return e
    return None


def evals_to_fraction(history: Iterable, fraction: float = 0.9) -> Optional[int]:
    """The first evaluation at which the best-so-far speedup is >= ``fraction`` x the final
    best. None when the run found nothing (final best <= 1: every evaluation would count)."""
    pts = _points(history)
    if not pts:
        return None
    final = max(s for _, s in pts)
    if final <= 1.0:
        return None
    return evals_to_reach(pts, fraction * final)


def htam_vs_menu(menu_history: Iterable, htam_history: Iterable) -> dict:
    """The issue's target, computed as it reads: the evaluations HTAM needs to reach menu's
    final speedup, against the evaluations menu needed for it (target: <= 50 %)."""
    menu_pts = _points(menu_history)
    menu_final = max((s for _, s in menu_pts), default=1.0)
    menu_needs = evals_to_reach(menu_pts, menu_final) if menu_final > 1.0 else None
    htam_needs = evals_to_reach(htam_history, menu_final) if menu_final > 1.0 else None
    ratio = (htam_needs / menu_needs) if htam_needs is not None and menu_needs else None
    return {"menu_final": menu_final, "menu_evals": menu_needs, "htam_evals": htam_needs, "ratio": ratio,
            "met": None if menu_needs is None else (ratio is not None and ratio <= 0.5)}


def holdout_split(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(training, held out): the sorted names, even positions train, odd positions are held
    out. Deterministic and independent of the order given."""
    ordered = sorted(set(names))
    return ordered[0::2], ordered[1::2]


def geomean(values: Iterable[Optional[float]]) -> Optional[float]:
    vals = [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


# ---------------------------------------------------------------------------
# output

COLUMNS = ("O0", "O2", "eager", "compile", "ms")


def speedups(row: dict) -> dict:
    """Per column, the speedup over PyTorch eager and over -O0 of the interleaved medians."""
    t = row.get("ms_by_column", {})
    out = {}
    for col, ms in t.items():
        if ms is None:
            continue
        out[col] = {"vs_eager": (t["eager"] / ms) if t.get("eager") else None,
                    "vs_O0": (t["O0"] / ms) if t.get("O0") else None}
    return out


def geomean_rows(rows: Sequence[dict]) -> dict:
    """Geomean over kernels, per column: speedup over eager and over -O0 (kernels that lack
    the column are left out; the count says how many went in)."""
    cols = sorted({c for r in rows for c in r.get("ms_by_column", {})})
    out = {}
    for c in cols:
        sp = [speedups(r).get(c, {}) for r in rows]
        ve = [s.get("vs_eager") for s in sp]
        v0 = [s.get("vs_O0") for s in sp]
        out[c] = {"vs_eager": geomean(ve), "vs_O0": geomean(v0),
                  "kernels": sum(1 for v in ve if v is not None)}
    return out


def _f(x, fmt="{:.4g}") -> str:
    return "–" if x is None else fmt.format(x)


def markdown(doc: dict) -> str:
    """The matrix as markdown tables (the main table, the search columns, the HTAM target,
    the held-out memory, the geomeans)."""
    rows = doc.get("rows", [])
    lines = [f"# Search matrix ({doc.get('started', '')}, budget {doc.get('budget')})", "",
             f"Command: `{doc.get('command', '')}`", ""]
    cols = [c for c in COLUMNS if any(c in r.get("ms_by_column", {}) for r in rows)]
    search_cols = sorted({c for r in rows for c in r.get("ms_by_column", {}) if c.startswith("search:")})
    allc = cols + search_cols
    if rows:
        lines += ["Times (ms): medians of interleaved rounds, 2 threads; the load average at the start and end of "
                  "each row.", "",
                  "| kernel | " + " | ".join(allc) + " | best vs eager | load |",
                  "|---|" + "--:|" * len(allc) + "--:|---|"]
        for r in rows:
            t = r.get("ms_by_column", {})
            sp = speedups(r)
            best = max((sp[c]["vs_eager"] for c in search_cols if c in sp and sp[c]["vs_eager"]), default=None)
            lines.append(f"| {r['kernel']} | " + " | ".join(_f(t.get(c)) for c in allc)
                         + f" | {_f(best, 'x{:.3g}')} | {r['load'][0]:.1f}–{r['load_after'][0]:.1f} |")
        lines += ["", "| search | kernel | confirmed vs -O0 | evals | evals to 90 % | search s | steps |",
                  "|---|---|--:|--:|--:|--:|---|"]
        for r in rows:
            for s in r.get("searches", []):
                sp = s.get("speedup")
                spread = s.get("spread")
                conf = _f(sp, "x{:.3g}") + (f" ± {100 * spread:.2g} %" if spread is not None else "")
                lines.append(f"| {s['proposers']} | {r['kernel']} | {conf} | {s['evaluations']} | "
                             f"{_f(s.get('evals_to_90'), '{}')} | {s['search_s']:.0f} | "
                             f"{'; '.join(s.get('steps', [])) or '–'} |")
        if any(r.get("ms") for r in rows):
            lines += ["", "| kernel | MetaSchedule wall s | trials | source | checked |", "|---|--:|--:|---|---|"]
            for r in rows:
                m = r.get("ms") or {}
                lines.append(f"| {r['kernel']} | {_f(m.get('wall_s'), '{:.0f}')} | {_f(m.get('trials'), '{}')} | "
                             f"{m.get('source', '–')} | {m.get('checked', m.get('error', '–'))} |")
        hv = [(r["kernel"], r["htam_vs_menu"]) for r in rows if r.get("htam_vs_menu")]
        if hv:
            lines += ["", "HTAM vs menu (issue target: HTAM reaches menu's final speedup in <= 50 % of menu's "
                      "evaluations):", "", "| kernel | menu final | menu evals | htam evals | ratio | met |",
                      "|---|--:|--:|--:|--:|---|"]
            for k, h in hv:
                lines.append(f"| {k} | {_f(h['menu_final'], 'x{:.3g}')} | {_f(h['menu_evals'], '{}')} | "
                             f"{_f(h['htam_evals'], '{}')} | {_f(h['ratio'], '{:.2f}')} | {h['met']} |")
        g = geomean_rows(rows)
        lines += ["", "| geomean | " + " | ".join(allc) + " |", "|---|" + "--:|" * len(allc)]
        lines.append("| vs eager | " + " | ".join(_f((g.get(c) or {}).get("vs_eager"), "x{:.3g}") for c in allc) + " |")
        lines.append("| vs -O0 | " + " | ".join(_f((g.get(c) or {}).get("vs_O0"), "x{:.3g}") for c in allc) + " |")
    hold = doc.get("holdout")
    if hold:
        lines += ["", f"Held-out memory: trained on {', '.join(hold.get('train', []))}; measured on "
                  f"{', '.join(hold.get('test', []))}.", "",
                  "| kernel | warm speedup | warm evals to 90 % | cold speedup | cold evals to 90 % | load |",
                  "|---|--:|--:|--:|--:|---|"]
        for h in hold.get("rows", []):
            w, c = h.get("warm", {}), h.get("cold", {})
            lines.append(f"| {h['kernel']} | {_f(w.get('speedup'), 'x{:.3g}')} | {_f(w.get('evals_to_90'), '{}')} | "
                         f"{_f(c.get('speedup'), 'x{:.3g}')} | {_f(c.get('evals_to_90'), '{}')} | "
                         f"{h['load'][0]:.1f}–{h['load_after'][0]:.1f} |")
        gw = geomean((h.get("warm") or {}).get("speedup") for h in hold.get("rows", []))
        gc = geomean((h.get("cold") or {}).get("speedup") for h in hold.get("rows", []))
        lines.append(f"| geomean | {_f(gw, 'x{:.3g}')} | | {_f(gc, 'x{:.3g}')} | | |")
    return "\n".join(lines) + "\n"


def write(doc: dict, json_path: Optional[str], md_path: Optional[str]) -> None:
    """Both outputs, atomically (called after every row)."""
    from leirc.io import write_atomic

    if json_path:
        write_atomic(json_path, json.dumps(doc, indent=1, default=str) + "\n")
    if md_path:
        write_atomic(md_path, markdown(doc))
