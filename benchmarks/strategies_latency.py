"""Latency of listing strategy sites: the whole kernel (``enumerate_sites``, what
``leirc strategies FILE`` prints) against the cursor-restricted listing an editor asks
for (``sites_at``: the item under the cursor and the nests around it, argument domains
deferred), on stdlib kernels (a benchmark, not a test).

    .venv/bin/python benchmarks/strategies_latency.py [--only NAME] [--repeat N] [--level L] [--json FILE]
    .venv/bin/python benchmarks/strategies_latency.py --level graph --all     # graph strategies, every stdlib kernel

Times are CPU seconds of this process (``time.process_time``), so a loaded machine
does not inflate them; medians of ``--repeat`` runs (default 5) after one warm-up run
(SymPy and the grammar are loaded once per process either way). Columns:

* **full ms**: ``enumerate_sites`` over the whole kernel (every domain computed);
* **at-cursor ms**: ``sites_at`` at every item (loop or statement) of the kernel: mean
  and worst over the items, domains deferred;
* **+domains ms**: the mean extra cost of reading every listed site's domains after it;
* **cold s**: a fresh process that imports leirc and lists the whole kernel once (the
  ``leirc strategies`` start-up path, without the CLI's own imports).

``--skip NAME`` leaves a strategy out of both listings. Every run also checks that ``sites_at`` lists exactly the whole-kernel sites anchored at
the item or around it (sites whose deferred domain turns out empty aside), and reports
the strategies that ignore the focus (their own ``sites`` lists everywhere; ``sites_at``
filters them afterwards, so the answer stays exact but costs the whole-kernel time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from leirc.engine.program import Program  # noqa: E402
from leirc.io import write_atomic  # noqa: E402
from leirc.strategies import all_strategies, enumerate_sites, sites_at  # noqa: E402
from leirc.strategies.base import Context, Focus  # noqa: E402
from leirc.strategies.rewrite import iter_items  # noqa: E402

DEFAULT = ["matmul_square", "softmax", "layernorm", "sdpa"]


def _cpu(fn):
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def _key(site):
    return (site.strategy, json.dumps(site.fixed, sort_keys=True), json.dumps(site.domains, sort_keys=True, default=str))


def _cold(name: str) -> float:
    code = ("import time; t=time.perf_counter(); from leirc.engine.program import Program; "
            "from leirc.strategies import enumerate_sites; "
            f"p=Program.from_text(open({str(REPO / 'stdlib' / (name + '.leir'))!r}).read()); "
            "enumerate_sites(p.kernel, result=p.result); print(time.process_time())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    return float(r.stdout.strip().splitlines()[-1])


def _unfocused(p: Program) -> list[str]:
    """Strategies whose sites() lists anchors out of focus (filtered by sites_at)."""
    paths = [path for path, _ in iter_items(p.kernel)]
    out = []
    for s in all_strategies():
        full = len(s.sites(Context(p.kernel, p.result)))
        if full == 0:
            continue
        listed = sum(len(s.sites(Context(p.kernel, p.result, Focus(p.kernel, path)))) for path in paths)
        # a focused strategy lists each site at most at (depth of its anchor) items
        if listed > full * max(len(path) for path in paths):
            out.append(s.name)
    return out


def bench(name: str, repeat: int, skip: set, level: str | None = None) -> dict:
    p = Program.from_text((REPO / "stdlib" / f"{name}.leir").read_text())
    names = [s.name for s in all_strategies() if s.name not in skip and (level is None or s.level == level)]
    enumerate_sites(p.kernel, names, result=p.result)  # warm-up: SymPy, caches
    fulls = []
    for _ in range(repeat):
        dt, full = _cpu(lambda: enumerate_sites(p.kernel, names, result=p.result))
        fulls.append(dt)
    by_anchor = {_key(s) for s in full}
    paths = [path for path, _ in iter_items(p.kernel)]
    means, worsts, extra, mismatches = [], [], [], 0
    for _ in range(repeat):
        times, resolve = [], []
        for path in paths:
            dt, got = _cpu(lambda: sites_at(p.kernel, path, result=p.result, strategies=names))
            times.append(dt)
            dr, keys = _cpu(lambda: [_key(s) for s in got if not s.empty])
            resolve.append(dr)
            mismatches += sum(1 for k in keys if k not in by_anchor)
        means.append(statistics.mean(times))
        worsts.append(max(times))
        extra.append(statistics.mean(resolve))
    return {"kernel": name, "sites": len(full), "items": len(paths),
            "full_ms": statistics.median(fulls) * 1e3, "at_mean_ms": statistics.median(means) * 1e3,
            "at_worst_ms": statistics.median(worsts) * 1e3, "domains_ms": statistics.median(extra) * 1e3,
            "cold_s": _cold(name), "mismatches": mismatches, "unfocused": [n for n in _unfocused(p) if n not in skip]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip", action="append", default=[], metavar="STRATEGY",
                    help="leave a strategy out of both listings (e.g. one that ignores the focus)")
    ap.add_argument("--level", help="only the strategies of this level (graph, loop, ...)")
    ap.add_argument("--all", action="store_true", help="every stdlib kernel")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    kernels = a.only or (sorted(f.stem for f in (REPO / "stdlib").glob("*.leir")) if a.all else DEFAULT)
    rows = [bench(n, a.repeat, set(a.skip), a.level) for n in kernels]
    print(f"{'kernel':16} {'sites':>5} {'items':>5} {'full ms':>8} {'at-cursor ms (mean/worst)':>26} "
          f"{'+domains ms':>11} {'cold s':>7}  unfocused strategies")
    for r in rows:
        print(f"{r['kernel']:16} {r['sites']:5d} {r['items']:5d} {r['full_ms']:8.1f} "
              f"{r['at_mean_ms']:12.1f} / {r['at_worst_ms']:9.1f} {r['domains_ms']:11.1f} {r['cold_s']:7.2f}  "
              f"{', '.join(r['unfocused']) or '-'}" + (f"  MISMATCHES: {r['mismatches']}" if r["mismatches"] else ""))
    if a.json:
        write_atomic(a.json, json.dumps(rows, indent=2) + "\n")
    return 1 if any(r["mismatches"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
