"""What a search leaves behind: the best LEIR, its trace JSON (``leirc apply --trace``
replays it), a JSON summary and an HTML report with an embedded PNG plot of the best
speedup against evaluations and the winning trajectory step by step."""

from __future__ import annotations

import base64
import html
import io
import json
import os
from typing import Optional

from ..io import write_atomic
from ..lang import ast as A
from ..lang.printer import PRETTY, print_module
from ..strategies import trace_to_json
from .cost import estimate, measured_feedback


def plot_png(result) -> Optional[bytes]:
    """Speedup against evaluations (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    xs = [h[0] for h in result.history] or [0]
    ys = [h[1] for h in result.history] or [1.0]
    pts = [(n_i, result.root.ms / n.ms) for n_i, n in enumerate((n for n in result.nodes if n.evaluation is not None
                                                                 and n is not result.root), start=1) if n.ok]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    if pts:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=10, alpha=0.5, label="candidate")
    ax.step(xs, ys, where="post", label="best so far (search timings)")
    conf = result.confirmation
    if conf is not None and result.best is not result.root:
        # the header's figure is this measurement; the curve is the search's own timings, and
        # the plot says which is which instead of letting the two read as one number
        ax.scatter([xs[-1]], [result.speedup], marker="*", s=90, color="C3", zorder=3,
                   label=f"confirmed x{result.speedup:.3g} (interleaved, {conf.rounds} rounds)")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("evaluations")
    ax.set_ylabel("speedup over the input")
    ax.set_title(f"{result.root.program.kernel.name}: {result.options.algo}, {'+'.join(result.options.proposers)}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def evidence_of(result) -> dict:
    """What the best program's correctness rests on: ``proven`` when every step on its path
    is legal by construction (bitwise or exact in the reals) and verification only confirms
    the compiler, ``tested`` when some step (an approximate rewrite, a model-written
    program) has verification as its only evidence; per step, and the grid and probes the
    best candidate passed."""
    from ..verify import evidence

    steps = [{"step": t["text"], "numerics": t["numerics"], "evidence": evidence(t["numerics"])}
             for t in result.trajectory()]
    ev = getattr(result.best, "evaluation", None)
    rep = getattr(ev, "verify", None) if ev is not None else None
    label = "tested" if any(s["evidence"] == "tested" for s in steps) else "proven"
    return {"label": label, "steps": steps,
            "verified_on": rep.passed_on() if rep is not None and hasattr(rep, "passed_on") else None}


def trace_meta(result) -> dict:
    """The ``search`` entry of a search's trace JSON: algorithm, seed, speedup and the
    evidence of the steps (``leirc build`` writes its trace with it too)."""
    ev = evidence_of(result)
    return {"algo": result.options.algo, "seed": result.seed, "speedup": result.speedup, "evidence": ev["label"],
            "steps_evidence": [s["evidence"] for s in ev["steps"]], "verified_on": ev["verified_on"]}


def evidence_line(result) -> str:
    """The console's line: ``verification: proven (3 steps; seeds 0,1,2 x ...)``."""
    e = evidence_of(result)
    n = len(e["steps"])
    tested = sum(s["evidence"] == "tested" for s in e["steps"])
    what = (f"{n} step(s) legal by construction" if e["label"] == "proven"
            else f"{tested} of {n} step(s) checked only by verification")
    on = f"; passed {e['verified_on']}" if e["verified_on"] else ""
    return f"  verification: {e['label'].upper()} ({what}{on})"


def report_html(result) -> str:
    e = html.escape
    o = result.options
    png = plot_png(result)
    img = (f'<img alt="speedup against evaluations" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
           if png else "<p>(matplotlib is not installed: no plot)</p>")
    rows = []
    ev = evidence_of(result)
    for i, t in enumerate(result.trajectory(), start=1):
        eff = f"x{t['effect']:.3g}" if t["effect"] else "-"
        sp = f"x{t['speedup']:.3g}" if t["speedup"] else "-"
        pred = f"x{t['predicted']:.3g}" if t["predicted"] else "-"
        # the first steps of a multi-step proposal are measured together with the last one
        ms = f"{t['ms']:.4g} ms" if t["ms"] is not None else "with the next step"
        label = ev["steps"][i - 1]["evidence"]
        rows.append(f"<tr><td>{i}</td><td><code>{e(t['text'])}</code></td><td><b>{label}</b> "
                    f"({e(str(t['numerics']))})</td><td>{e(t['direction'])}</td>"
                    f"<td>{e(str(t['proposer']))}</td><td>{e(t['rationale'])}</td><td>{pred}</td>"
                    f"<td>{ms}</td><td>{eff}</td><td>{sp}</td></tr>")
    fb = measured_feedback(estimate(result.best.program, o.target, threads=o.threads), result.best.ms, o.target, o.threads)
    feedback = (f"<p>Best: {fb['gops']:.3g} Gop/s ({100 * fb['compute_util']:.2g}% of the modelled peak), "
                f"{fb['gbs']:.3g} GB/s ({100 * fb['bandwidth_util']:.2g}% of the modelled bandwidth); "
                f"model {fb['model_ms']:.3g} ms.</p>") if fb else ""
    table = ("<table><tr><th>#</th><th>step</th><th>evidence</th><th>direction</th><th>proposer</th><th>rationale</th>"
             "<th>predicted</th><th>time</th><th>effect</th><th>speedup</th></tr>" + "".join(rows) + "</table>"
             if rows else "<p>No step beat the input beyond the noise: the input is the best program found.</p>")
    c = result.confirmation
    if c is not None and result.best is not result.root:
        confirmed = (f" &plusmn;{100 * c.spread:.2g}% (best and input timed again side by side, {c.rounds} "
                     "interleaved rounds)")
    elif c is not None:
        confirmed = (f" (the best candidate, x{c.speedup:.3g} &plusmn;{100 * c.spread:.2g}% when timed side by side "
                     "with the input, is within the noise: the input is kept)")
    else:
        confirmed = ""
    best_text = print_module(A.Module((result.best.program.kernel,)), PRETTY)
    fails = {}
    for n in result.nodes:
        if n.evaluation is not None and not n.evaluation.ok:
            fails[n.evaluation.error_kind] = fails.get(n.evaluation.error_kind, 0) + 1
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>leirc search: {e(result.root.program.kernel.name)}</title>
<style>body{{font-family:sans-serif;max-width:70em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .5em;vertical-align:top;font-size:90%}}pre{{background:#f6f6f6;padding:1em}}</style>
</head><body>
<h1>leirc search: {e(result.root.program.kernel.name)}</h1>
<p>{e(o.algo)} search, proposers {e('+'.join(o.proposers))}, target {e(o.target)}, {o.threads} thread(s), seed {result.seed};
{result.evaluations} evaluation(s) ({result.fresh} run now), {result.seconds:.1f} s; stopped: {e(result.stopped)}.</p>
<p>Input {result.root_ms:.4g} ms &rarr; best {result.best_ms:.4g} ms: <b>x{result.speedup:.3g}</b>{confirmed}
({len(result.steps)} step(s)). Timed {e(result.timed_on)}. Failed candidates: {e(json.dumps(fails)) if fails else 'none'}.</p>
<p>Verification: <b>{ev['label']}</b> &mdash; {'every step is legal by construction (bitwise or exact in the reals); the verifier confirmed the compiled program' if ev['label'] == 'proven' else 'some steps (approximate rewrites, model-written programs) are checked only by verification'}{('; the best candidate passed ' + e(ev['verified_on'])) if ev['verified_on'] else ''}.</p>
{feedback}
{img}
<h2>Winning trajectory</h2>
{table}
<h2>Best program</h2>
<pre>{e(best_text)}</pre>
</body></html>
"""


OUTPUTS = ("leir", "trace", "json", "html")


def write_outputs(result, out_dir: str, stem: str, outputs=OUTPUTS) -> dict:
    """``STEM.best.leir``, ``STEM.trace.json``, ``STEM.search.json``, ``STEM.report.html``
    under ``out_dir`` (those named in ``outputs``: ``leirc build`` writes the program and
    the trace itself); returns {what: path}."""
    os.makedirs(out_dir, exist_ok=True)
    suffix = {"leir": "best.leir", "trace": "trace.json", "json": "search.json", "html": "report.html"}
    paths = {k: os.path.join(out_dir, f"{stem}.{suffix[k]}") for k in outputs}
    if "leir" in paths:
        write_atomic(paths["leir"], print_module(A.Module((result.best.program.kernel,)), PRETTY))
    ev = evidence_of(result)
    if "trace" in paths:
        write_atomic(paths["trace"], trace_to_json(result.steps, kernel=result.root.program.kernel.name,
                                                  search=trace_meta(result)) + "\n")
    if "json" in paths:
        d = result.to_json()
        d["evidence"] = ev
        for t, s in zip(d.get("trajectory", ()), ev["steps"]):
            t["evidence"] = s["evidence"]
        write_atomic(paths["json"], json.dumps(d, indent=2, default=str) + "\n")
    if "html" in paths:
        write_atomic(paths["html"], report_html(result))
    return paths
