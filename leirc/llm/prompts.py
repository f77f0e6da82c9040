"""The prompts: what a model is shown and what it must answer, for the dataset and the
search's LLM proposers alike (one module, so a Step-TP training record and a proposer's
prompt are one format).

The text lives in versioned template files (``templates/<name>.v<TEMPLATE_VERSION>.txt``,
:class:`string.Template` with ``$name`` fields); this module only fills them in. Every
proposer prompt starts with ``[leirc prompt <name>.v<version>]``, so the template version
is part of the messages and hence of the client's cache key: a changed template never
replays a stale cached answer.

* :func:`steptp_messages` -- Step-TP's single step: the compact LEIR, the interface, the
  applicable strategies with their argument domains (from
  :func:`leirc.strategies.enumerate_sites`, trimmed to a size budget), the steps that led
  here and their measured effect; the answer is ``{"strategy", "args", "rationale"}`` or
  ``{"leir", "rationale"}`` (or up to ``k`` of them under ``"answers"``).
* :func:`autocomp_plan_messages` / :func:`autocomp_implement_messages` -- Autocomp's two
  phases: a plan (one item of a menu, given latency and hardware feedback), then its
  implementation as steps or LEIR, with in-context examples of real strategy steps.
* :func:`htam_rank_messages` -- HTAM: the direction the memory chose and its candidate
  steps, to be ranked.
* :data:`SYSTEM`, :func:`user_prompt`, :func:`answer`, :func:`assistant_message` -- the
  dataset's Step-TP record format (moved here from ``leirc.dataset.prompt``, unchanged).

The hardware feedback is passed in (the search computes it with ``leirc.search.cost``,
which sits above this layer); this module renders what it is given.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Iterable, Optional, Sequence

from ..lang.printer import COMPACT, print_kernel
from ..strategies import NotApplicable, Step, all_strategies, enumerate_sites, get
from ..strategies.base import parse_args

TEMPLATE_VERSION = "1"

#: characters of the strategy listing in a prompt (the rest is summarized by a count)
SITES_BUDGET = 6000
#: values shown per free argument of a site (evenly spread, both ends kept)
DOMAIN_VALUES = 8
#: steps of the history shown (the most recent ones)
HISTORY_STEPS = 8
#: the strategy an answer with a whole program becomes; never offered in a listing
PROGRAM_STRATEGY = "program_rewrite"


@lru_cache(maxsize=None)
def template_text(name: str) -> str:
    """The text of template ``name`` (e.g. ``"steptp"``) at :data:`TEMPLATE_VERSION`,
    without the file's final newline."""
    path = resources.files(__package__).joinpath("templates", f"{name}.v{TEMPLATE_VERSION}.txt")
    text = path.read_text(encoding="utf-8")
    return text[:-1] if text.endswith("\n") else text


def template_id(name: str) -> str:
    return f"{name}.v{TEMPLATE_VERSION}"


def render(name: str, **fields) -> str:
    """Template ``name`` with its fields filled in (a missing field is a bug: KeyError)."""
    return Template(template_text(name)).substitute(template=template_id(name), **fields)


# ---------------------------------------------------------------------------
# the dataset's Step-TP record format (behaviour unchanged from leirc.dataset.prompt)

SYSTEM = template_text("system")

DTYPE_NAMES = {"f32": "float32", "f16": "float16", "f64": "float64", "bf16": "bfloat16", "i32": "int32",
               "i64": "int64", "i8": "int8", "i16": "int16", "u8": "uint8", "bool": "bool"}


def tensor_line(name: str, dtype: str, shape) -> str:
    return f"'{name}' with the dtype {DTYPE_NAMES.get(dtype, dtype)} and shape [{', '.join(map(str, shape))}]"


def user_prompt(kernel_name: str, leir: str, inputs: dict, outputs: dict, target: str = "llvm") -> str:
    known = [tensor_line(n, d, s) for n, (d, s) in inputs.items()] + \
            [tensor_line(n, d, s) + " (output)" for n, (d, s) in outputs.items()]
    return render("steptp_record", kernel=kernel_name, target=target, leir=leir, tensors="; ".join(known))


def answer(transformed_leir: str, strategy: str, step: dict) -> str:
    return json.dumps({"transformed_IR": transformed_leir, "applied_strategy": strategy, "step": step},
                      sort_keys=True)


def assistant_message(think: str, transformed_leir: str, strategy: str, step: dict) -> str:
    return f"<think>\n{think}\n</think>\n<answer>{answer(transformed_leir, strategy, step)}</answer>"


# ---------------------------------------------------------------------------
# pieces shared by the proposer prompts


def compact(program) -> str:
    return print_kernel(program.kernel, COMPACT, comments=False)


def signature(program) -> str:
    """One line per interface tensor: name, dtype, shape, role."""
    k = program.kernel
    lines = [f"- {p.name}: {p.dtype}[{','.join(map(str, p.shape))}] (input)" for p in k.inputs]
    lines += [f"- {p.name}: {p.dtype}[{','.join(map(str, p.shape))}] (output)" for p in k.outputs]
    return "\n".join(lines) or "- (none)"


def spread(values: list, limit: int) -> list:
    """At most ``limit`` values evenly spread over ``values``, both ends kept, in order."""
    values = list(values)
    if len(values) <= limit:
        return values
    if limit <= 1:
        return [values[len(values) // 2]]
    idx = sorted({round(i * (len(values) - 1) / (limit - 1)) for i in range(limit)})
    return [values[i] for i in idx]


def _default_names() -> list[str]:
    return [s.name for s in all_strategies() if s.name != PROGRAM_STRATEGY]


def site_entries(program, strategies: Optional[Iterable[str]] = None, *, values: int = DOMAIN_VALUES) -> list[dict]:
    """The applicable sites as ``{"strategy", "args", "domains"}`` dicts (domains thinned
    to ``values`` values each), in the registry's order."""
    names = [n for n in (_default_names() if strategies is None else strategies) if n != PROGRAM_STRATEGY]
    out = []
    for site in enumerate_sites(program.kernel, names, program.result):
        if site.empty:
            continue
        e = {"strategy": site.strategy, "args": dict(site.fixed)}
        if site.domains:
            e["domains"] = {k: spread(v, values) for k, v in site.domains.items()}
        out.append(e)
    return out


def sites_text(entries: list[dict], budget: int = SITES_BUDGET) -> tuple[str, int]:
    """The entries as one JSON object per line, within ``budget`` characters; returns the
    text and how many entries were left out. Entries are kept round-robin over the
    strategies, so one strategy with many sites cannot crowd the others out."""
    by_name: dict[str, list[dict]] = {}
    for e in entries:
        by_name.setdefault(e["strategy"], []).append(e)
    order = []
    for rank in range(max((len(v) for v in by_name.values()), default=0)):
        order.extend(v[rank] for v in by_name.values() if rank < len(v))
    kept, used = set(), 0
    for e in order:
        line = json.dumps(e, separators=(",", ":"))
        if used + len(line) + 1 > budget:
            continue
        kept.add(id(e))
        used += len(line) + 1
    lines = [json.dumps(e, separators=(",", ":")) for e in entries if id(e) in kept]
    left = len(entries) - len(lines)
    if left:
        lines.append(f"(and {left} more sites not shown)")
    return ("\n".join(lines) if lines else "(no strategy applies)"), left


def _step_text(step) -> str:
    if isinstance(step, Step):
        d = step.to_json()
        if step.name == PROGRAM_STRATEGY:  # the whole program would drown the history
            d = {"strategy": PROGRAM_STRATEGY, "args": {"leir": "<a transformed program>"}}
        return json.dumps(d, separators=(",", ":"))
    return str(step)


def history_text(history: Sequence, limit: int = HISTORY_STEPS) -> str:
    """The steps that produced the program, oldest first. Each item is a dict with
    ``step`` (a Step or text) and optionally ``ms``, ``effect`` (speedup over its parent),
    ``speedup`` (over the original), ``outcome`` (e.g. ``failed: mismatch``)."""
    items = list(history)
    if not items:
        return "(none: this is the original program)"
    shown = items[-limit:]
    lines = [f"({len(items) - len(shown)} earlier steps not shown)"] if len(shown) < len(items) else []
    first = len(items) - len(shown) + 1
    for i, h in enumerate(shown, first):
        h = h if isinstance(h, dict) else {"step": h}
        parts = []
        if h.get("ms") is not None:
            parts.append(f"{float(h['ms']):.4g} ms")
        if h.get("effect") is not None:
            parts.append(f"x{float(h['effect']):.3g} over its parent")
        if h.get("speedup") is not None:
            parts.append(f"x{float(h['speedup']):.3g} over the original")
        if h.get("outcome"):
            parts.append(str(h["outcome"]))
        lines.append(f"{i}. {_step_text(h.get('step'))}" + (f": {', '.join(parts)}" if parts else ""))
    return "\n".join(lines)


def messages(user: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


# ---------------------------------------------------------------------------
# Step-TP single step


def steptp_messages(program, *, target: str, history: Sequence = (), strategies: Optional[Iterable[str]] = None,
                    k: int = 1, tried: Sequence = (), budget: int = SITES_BUDGET) -> list[dict]:
    """System + user messages asking for one step (or up to ``k`` ranked steps) of
    ``program`` (a :class:`leirc.engine.Program`). ``strategies`` restricts the listing;
    ``tried`` are steps already tried here (with why they failed), so the model does not
    repeat them."""
    sites, _ = sites_text(site_entries(program, strategies), budget)
    tried_lines = "\n".join(f"- {_step_text(t[0])}: {t[1]}" if isinstance(t, tuple) else f"- {_step_text(t)}"
                            for t in tried)
    user = render("steptp", kernel=program.kernel.name, target=target, leir=compact(program),
                  signature=signature(program), sites=sites, history=history_text(history),
                  tried=("\n" + render("tried", tried=tried_lines) + "\n") if tried else "",
                  many=(render("steptp_many", k=int(k)) + "\n") if k > 1 else "")
    return messages(user)


# ---------------------------------------------------------------------------
# Autocomp plan -> implement

FEEDBACK_LINES = (
    ("ms", "latency: {:.4g} ms (measured)"),
    ("model_ms", "cost model estimate: {:.4g} ms"),
    ("gops", "achieved: {:.4g} GFLOP/s"),
    ("peak_gops", "compute peak: {:.4g} GFLOP/s"),
    ("compute_util", "compute utilization: {:.1%}"),
    ("gbs", "achieved: {:.4g} GB/s"),
    ("peak_gbs", "bandwidth peak: {:.4g} GB/s"),
    ("bandwidth_util", "bandwidth utilization: {:.1%}"),
    ("footprint_bytes", "footprint of the interface tensors: {:.4g} MB", 1e-6),
    ("moved_bytes", "bytes moved (model): {:.4g} MB", 1e-6),
    ("bound", "bound: {}"),
)


def feedback_text(feedback: Optional[dict]) -> str:
    """Latency and hardware feedback, one fact per line (known keys formatted, others as
    ``key: value``)."""
    fb = dict(feedback or {})
    if not fb:
        return "(no measurement yet)"
    lines = []
    for entry in FEEDBACK_LINES:
        key, fmt = entry[0], entry[1]
        scale = entry[2] if len(entry) > 2 else 1
        if fb.get(key) is None:
            fb.pop(key, None)
            continue
        v = fb.pop(key)
        lines.append("- " + fmt.format(v * scale if isinstance(v, (int, float)) else v))
    lines += [f"- {k}: {v}" for k, v in sorted(fb.items())]
    return "\n".join(lines)


def menu_text(menu: Sequence) -> str:
    """The menu numbered from 1 (dropout already applied: the model never sees gaps).
    Items are strings or ``{"strategy", "args", "description"}`` dicts."""
    if not menu:
        return "(empty menu)"
    lines = []
    for i, m in enumerate(menu, 1):
        if isinstance(m, dict):
            args = ", ".join(f"{k}={v}" for k, v in sorted((m.get("args") or {}).items()))
            text = f"{m.get('strategy')}" + (f" at {args}" if args else "")
            if m.get("description"):
                text += f": {m['description']}"
        else:
            text = str(m)
        lines.append(f"{i}. {text}")
    return "\n".join(lines)


def autocomp_plan_messages(program, *, target: str, feedback: Optional[dict], menu: Sequence, iteration: int,
                           iterations: Optional[int] = None) -> list[dict]:
    it = f"{int(iteration)} of {int(iterations)}" if iterations else f"{int(iteration)}"
    user = render("autocomp_plan", kernel=program.kernel.name, target=target, leir=compact(program),
                  signature=signature(program), feedback=feedback_text(feedback), menu=menu_text(menu), iteration=it)
    return messages(user)


def docstring_example(name: str) -> Optional[dict]:
    """A strategy's own example, ``{"before", "step", "after"}`` (LEIR texts and a Step),
    from its docstring's ``Before:``/``Args:``/``After:`` lines (held true by the tests), or
    None."""
    try:
        s = get(name)
    except KeyError:
        return None
    doc = type(s).__doc__ or ""
    found = [re.search(rf"{key}:\s*(.*)", doc) for key in ("Before", "Args", "After")]
    if not all(found):
        return None
    before, args, after = (m.group(1).strip() for m in found)
    raw = dict(tok.split("=", 1) for tok in args.split() if "=" in tok)
    try:
        typed = parse_args(s, raw)
    except NotApplicable:
        return None
    step = Step.make(name, **{k: v for k, v in typed.items() if k in raw})
    return {"before": before, "step": step, "after": after}


def examples_text(examples: Sequence) -> str:
    if not examples:
        return "(none)"
    blocks = []
    for i, ex in enumerate(examples, 1):
        blocks.append(f"Example {i}:\nBefore: {ex['before']}\nStep: {_step_text(ex['step'])}\nAfter: {ex['after']}")
    return "\n\n".join(blocks)


def autocomp_implement_messages(program, *, target: str, plan: str, examples: Sequence = (),
                                strategies: Optional[Iterable[str]] = None, budget: int = SITES_BUDGET) -> list[dict]:
    sites, _ = sites_text(site_entries(program, strategies), budget)
    user = render("autocomp_implement", kernel=program.kernel.name, target=target, leir=compact(program),
                  signature=signature(program), sites=sites, plan=plan, examples=examples_text(examples))
    return messages(user)


# ---------------------------------------------------------------------------
# HTAM: the LLM ranks the strategies of the direction the memory chose


def candidates_text(candidates: Sequence) -> str:
    """Numbered from 1. Items are Steps, or dicts with ``step`` and optionally
    ``predicted`` (speedup) and ``note``."""
    lines = []
    for i, c in enumerate(candidates, 1):
        c = c if isinstance(c, dict) else {"step": c}
        extra = []
        if c.get("predicted") is not None:
            extra.append(f"predicted x{float(c['predicted']):.3g}")
        if c.get("note"):
            extra.append(str(c["note"]))
        lines.append(f"{i}. {_step_text(c['step'])}" + (f" ({'; '.join(extra)})" if extra else ""))
    return "\n".join(lines) or "(none)"


def htam_rank_messages(program, *, target: str, direction: str, candidates: Sequence, history: Sequence = (),
                       direction_doc: str = "") -> list[dict]:
    user = render("htam_rank", kernel=program.kernel.name, target=target, leir=compact(program),
                  history=history_text(history), direction=direction,
                  direction_doc=f" ({direction_doc})" if direction_doc else "", candidates=candidates_text(candidates))
    return messages(user)


# ---------------------------------------------------------------------------
# the registry as a JSON schema

_KIND_SCHEMA = {
    "int": {"type": "integer"}, "nest": {"type": "integer", "minimum": 0}, "bool": {"type": "boolean"},
    "loop": {"type": "string", "pattern": r"^N[0-9]+\.[A-Za-z][A-Za-z0-9]*(#[0-9]+)?$"},
    "stmt": {"type": "string", "pattern": r"^N[0-9]+\.S[0-9]+$"},
    "tensor": {"type": "string"},
    "loops": {"type": "string", "description": "comma-separated loop names"},
}


def arg_schema(a) -> dict:
    if a.kind == "choice":
        d = {"enum": list(a.choices)}
    else:
        d = dict(_KIND_SCHEMA.get(a.kind, {"type": "string", "minLength": 1}))
    d["description"] = (d.get("description", "") + "; " if d.get("description") else "") + a.doc
    if a.default is not None:
        d["default"] = a.default
    return d


def strategy_schema(names: Optional[Iterable[str]] = None) -> dict:
    """A JSON schema of one step: ``{"strategy": <name>, "args": {...}}`` for the
    registry's strategies (or ``names``), each with its typed arguments."""
    wanted = None if names is None else set(names)
    variants = []
    for s in all_strategies():
        if wanted is not None and s.name not in wanted:
            continue
        props = {a.name: arg_schema(a) for a in s.args}
        required = [a.name for a in s.args if a.default is None]
        variants.append({"type": "object", "description": s.summary,
                         "properties": {"strategy": {"const": s.name},
                                        "args": {"type": "object", "properties": props, "required": required,
                                                 "additionalProperties": False},
                                        "rationale": {"type": "string"}},
                         "required": ["strategy", "args"], "additionalProperties": False})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "leirc strategy step",
            "oneOf": variants}


def main(argv=None) -> int:
    """``python -m leirc.llm.prompts KERNEL.leir [--target T] [-k N]``: print the Step-TP
    messages a proposer would send for the program (what docs/llm.md shows)."""
    import argparse
    import sys

    from ..engine.program import Program

    ap = argparse.ArgumentParser(prog="python -m leirc.llm.prompts", description=main.__doc__)
    ap.add_argument("file")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("-k", type=int, default=1, help="answers asked for")
    ns = ap.parse_args(argv)
    try:
        with open(ns.file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        print(f"{ns.file}: {e.strerror}", file=sys.stderr)
        return 2
    p = Program.from_text(text, file=ns.file)
    if not p.ok:
        from ..lang.diagnostics import render as render_diagnostic

        for d in p.diagnostics:
            print(render_diagnostic(d, p.source), file=sys.stderr)
        return 1
    # what -O search's menu offers on the target (leirc.search.proposers.MenuProposer's default)
    skip = "loop_parallelization" if ns.target.startswith("cuda") else "loop_binding"
    names = [s.name for s in all_strategies() if s.numerics != "approximate" and s.name not in (skip, PROGRAM_STRATEGY)]
    for m in steptp_messages(p, target=ns.target, k=ns.k, strategies=names):
        print(f"--- {m['role']} ---\n{m['content']}")
    return 0


__all__ = ["PROGRAM_STRATEGY", "SYSTEM", "TEMPLATE_VERSION", "answer", "assistant_message",
           "autocomp_implement_messages",
           "autocomp_plan_messages", "docstring_example", "feedback_text", "history_text", "htam_rank_messages",
           "menu_text", "render", "signature", "site_entries", "sites_text", "spread", "steptp_messages",
           "strategy_schema", "template_id", "template_text", "tensor_line", "user_prompt"]


if __name__ == "__main__":  # pragma: no cover - the command line
    raise SystemExit(main())
